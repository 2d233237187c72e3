// Chapter 05 (ExpertWeaver): the capacity-constrained assignment step of balanced k-means.
//
//   balanced_assign(dist: float32[N, E], capacity: int32[E]) -> int32[N]
//
// Visit all N·E (point, cluster) pairs by ascending distance, ties broken by the flat index i·E + e (a stable
// sort), and give point i to cluster e while i is unassigned and e has room. This is the greedy rule of the numpy
// reference repro/expertweaver/partition.py::balanced_assign_ref, which loops over the pairs in Python.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace py = pybind11;

py::array_t<int32_t> balanced_assign(py::array_t<float, py::array::c_style> dist,
                                     py::array_t<int32_t, py::array::c_style> capacity) {
  if (dist.ndim() != 2) throw std::invalid_argument("dist must be 2-D [N, E]");
  const int64_t n = dist.shape(0), e = dist.shape(1);
  if (capacity.ndim() != 1 || capacity.shape(0) != e) throw std::invalid_argument("capacity must have E entries");
  const float* d = dist.data();
  std::vector<int64_t> cap(e);
  int64_t total = 0;
  for (int64_t c = 0; c < e; ++c) {
    cap[c] = capacity.data()[c];
    total += cap[c];
  }
  if (total < n) throw std::invalid_argument("capacities sum to fewer than N points");
  std::vector<int64_t> order(n * e);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [d](int64_t a, int64_t b) { return d[a] < d[b]; });
  py::array_t<int32_t> labels(n);
  int32_t* lab = labels.mutable_data();
  std::fill(lab, lab + n, -1);
  int64_t left = n;
  for (int64_t flat : order) {
    const int64_t i = flat / e, c = flat % e;
    if (lab[i] < 0 && cap[c] > 0) {
      lab[i] = static_cast<int32_t>(c);
      --cap[c];
      if (--left == 0) break;
    }
  }
  return labels;
}

PYBIND11_MODULE(_kernels, m) {
  m.doc() = "Chapter 05 (ExpertWeaver): greedy capacity-constrained assignment of balanced k-means";
  m.def("balanced_assign", &balanced_assign, py::arg("dist").noconvert(), py::arg("capacity").noconvert(),
        "Labels [N] from distances float32[N, E] and capacities int32[E] (greedy by ascending distance)");
}
