// Chapter 17 (EP-Order): 2-opt improvement of an open path over cluster centroids.
//
// two_opt(dist[K, K], path[K]) -> path'[K]
//   Repeatedly looks for the first segment reversal path[i..j] (1 <= i < j <= K-1, lexicographic in (i, j); the
//   start path[0] stays fixed) that shortens the open path
//       delta = d(p[i-1], p[j]) + d(p[i], p[j+1]) - d(p[i-1], p[i]) - d(p[j], p[j+1])
//   (the (j, j+1) terms vanish when j = K-1), applies it when delta < -1e-12 and restarts the scan from i = 1;
//   stops when a full scan finds none. The same move order, formula and tolerance as the numpy reference
//   repro.ep_order.ordering.two_opt_reference, so both return the same path (tested).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace py = pybind11;

py::array_t<int32_t> two_opt(py::array_t<double, py::array::c_style> dist, py::array_t<int32_t, py::array::c_style> path) {
  if (dist.ndim() != 2 || dist.shape(0) != dist.shape(1)) throw std::invalid_argument("dist must be a square (K, K) float64 array");
  const py::ssize_t K = dist.shape(0);
  if (path.ndim() != 1 || path.shape(0) != K) throw std::invalid_argument("path must be an int32 array of length K");
  const double* D = dist.data();
  std::vector<int32_t> p(path.data(), path.data() + K);
  for (auto v : p)
    if (v < 0 || v >= K) throw std::invalid_argument("path entries must lie in 0..K-1");
  auto d = [&](int32_t a, int32_t b) { return D[static_cast<py::ssize_t>(a) * K + b]; };
  bool improved = true;
  {
    py::gil_scoped_release release;
    while (improved) {
      improved = false;
      for (py::ssize_t i = 1; i + 1 < K && !improved; ++i) {
        for (py::ssize_t j = i + 1; j < K; ++j) {
          double delta = d(p[i - 1], p[j]) - d(p[i - 1], p[i]);
          if (j + 1 < K) delta += d(p[i], p[j + 1]) - d(p[j], p[j + 1]);
          if (delta < -1e-12) {
            std::reverse(p.begin() + i, p.begin() + j + 1);
            improved = true;
            break;
          }
        }
      }
    }
  }
  py::array_t<int32_t> out(K);
  std::copy(p.begin(), p.end(), out.mutable_data());
  return out;
}

PYBIND11_MODULE(_kernels, m) {
  m.doc() = "Chapter 17 (EP-Order): 2-opt improvement of the open cluster path";
  m.def("two_opt", &two_opt, py::arg("dist").noconvert(), py::arg("path").noconvert(),
        "First-improvement 2-opt of an open path with a fixed start; see repro.ep_order.ordering.");
}
