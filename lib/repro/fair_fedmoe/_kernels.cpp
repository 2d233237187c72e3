// Chapter 10 (Fair-FedMOE): bootstrap per-group AUCs from resample counts (card, "Compiled kernel").
//
// For B stratified bootstrap resamples, each given by the multiplicity counts[b, i] of sample i, compute every
// group's AUC and the pooled AUC by the Mann-Whitney formula with ties,
//     U = sum_{pos p} sum_{neg n} c_p c_n ( 1[s_n < s_p] + 1/2 1[s_n == s_p] ),   AUC = U / (n1 n0),
// from ONE sort of the scores: walk the tie blocks in ascending order, keeping per group the number of
// negatives below the block; a block adds pos_in_block * (neg_below + neg_in_block / 2). O(N log N) once, then
// O(N) per resample. All sums are of integers and halves, so the result equals the numpy reference
// (average ranks of the resampled array) exactly. NaN where a resample has no positive or no negative.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace py = pybind11;
using darr = py::array_t<double, py::array::c_style>;
using larr = py::array_t<int64_t, py::array::c_style>;
using iarr = py::array_t<int32_t, py::array::c_style>;

darr bootstrap_group_auc(darr scores, larr labels, larr groups, iarr counts, int n_groups) {
  const auto N = scores.shape(0);
  if (labels.shape(0) != N || groups.shape(0) != N) throw std::invalid_argument("scores, labels, groups differ in length");
  if (counts.ndim() != 2 || counts.shape(1) != N) throw std::invalid_argument("counts must be [B, N]");
  if (n_groups < 1) throw std::invalid_argument("n_groups must be >= 1");
  const auto B = counts.shape(0);
  const double* s = scores.data();
  const int64_t* y = labels.data();
  const int64_t* g = groups.data();
  for (py::ssize_t i = 0; i < N; ++i)
    if (g[i] < 0 || g[i] >= n_groups) throw std::invalid_argument("group id out of range");
  std::vector<py::ssize_t> order(N);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](py::ssize_t a, py::ssize_t b) { return s[a] < s[b]; });
  std::vector<py::ssize_t> block_start;  // start of every tie block in `order`, plus N
  for (py::ssize_t j = 0; j < N; ++j)
    if (j == 0 || s[order[j]] != s[order[j - 1]]) block_start.push_back(j);
  block_start.push_back(N);

  const int G1 = n_groups + 1;  // last slot: pooled
  darr out({B, static_cast<py::ssize_t>(G1)});
  double* o = out.mutable_data();
  const int32_t* c = counts.data();
  {
    py::gil_scoped_release nogil;
    std::vector<double> U(G1), n1(G1), n0(G1), negbelow(G1), pb(G1), nb(G1);
    std::vector<int> touched;
    touched.reserve(G1);
    for (py::ssize_t b = 0; b < B; ++b) {
      const int32_t* cb = c + b * N;
      std::fill(U.begin(), U.end(), 0.0);
      std::fill(n1.begin(), n1.end(), 0.0);
      std::fill(n0.begin(), n0.end(), 0.0);
      std::fill(negbelow.begin(), negbelow.end(), 0.0);
      for (size_t blk = 0; blk + 1 < block_start.size(); ++blk) {
        touched.clear();
        double pp = 0, nn = 0;
        for (py::ssize_t j = block_start[blk]; j < block_start[blk + 1]; ++j) {
          const py::ssize_t i = order[j];
          const int32_t m = cb[i];
          if (m == 0) continue;
          const int k = static_cast<int>(g[i]);
          if (pb[k] == 0 && nb[k] == 0) touched.push_back(k);
          if (y[i]) { pb[k] += m; pp += m; } else { nb[k] += m; nn += m; }
        }
        for (int k : touched) {
          U[k] += pb[k] * (negbelow[k] + 0.5 * nb[k]);
          negbelow[k] += nb[k];
          n1[k] += pb[k];
          n0[k] += nb[k];
          pb[k] = 0;
          nb[k] = 0;
        }
        const int P = n_groups;
        U[P] += pp * (negbelow[P] + 0.5 * nn);
        negbelow[P] += nn;
        n1[P] += pp;
        n0[P] += nn;
      }
      for (int k = 0; k < G1; ++k)
        o[b * G1 + k] = (n1[k] > 0 && n0[k] > 0) ? U[k] / (n1[k] * n0[k]) : std::numeric_limits<double>::quiet_NaN();
    }
  }
  return out;
}

PYBIND11_MODULE(_kernels, m) {
  m.doc() = "Chapter 10 (Fair-FedMOE): bootstrap per-group AUC from resample counts";
  m.def("bootstrap_group_auc", &bootstrap_group_auc, py::arg("scores").noconvert(), py::arg("labels").noconvert(),
        py::arg("groups").noconvert(), py::arg("counts").noconvert(), py::arg("n_groups"),
        "[B, G+1] per-group AUCs and pooled AUC (last column) of B resamples given by counts [B, N] (int32)");
}
