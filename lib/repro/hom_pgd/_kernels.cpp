// Chapter 14 (Hom-PGD+): the fused constraint evaluation of the feasibility check and the segment bisection.
//
// violation(x [k, n] f32, s [k, m] f32, Qc [m, n, n] f64, pc [m, n] f64, b [m] f64, box, radius) -> [k] f32
//   max(0, max_i g_i(x), max_j |x_j| - box, ||x|| - radius),   g_i(x) = 1/2 x^T Q_i x + p_i^T x - s_i b_i,
// evaluated in float64 and returned in float32, as QCQPFamily.violation (the torch reference) does. A NaN in any
// constraint makes the result NaN (torch's amax and clamp_min propagate it), so a NaN point is never feasible.
// Q_i is symmetric, so x^T Q_i x = sum_j x_j (Q_i[j,j] x_j + 2 sum_{l>j} Q_i[j,l] x_l): half the multiply-adds of the
// full form (the rounding differs from torch's by ~1e-16 relative, far below the 1e-5 tolerance it is compared to).
// Loop order: constraint outermost, so Q_i (n^2 doubles, 29 KB at n = 60) stays in L1 across the batch.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;
using f32 = py::array_t<float, py::array::c_style | py::array::forcecast>;
using f64 = py::array_t<double, py::array::c_style | py::array::forcecast>;

namespace {

void need(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument(msg);
}

// max that lets a NaN through (either argument), like torch.amax
inline double nanmax(double a, double v) { return (v > a || std::isnan(v) || std::isnan(a)) ? (std::isnan(a) ? a : v) : a; }

// The quadratic forms as a register-blocked product. U_i = the upper triangle of Q_i with the strict part doubled
// and everything halved (U[j,l] = Q[j,l] for j < l, Q[j,j]/2 on the diagonal, 0 below), its rows zero-padded to
// np (a multiple of 8) columns; then 1/2 x^T Q_i x + p_i^T x = sum_l x_l (sum_{j<=l} x_j U[j,l] + p_l). A block of
// 4 points x 8 columns keeps 8 four-wide accumulators in registers; column block [L, L+8) needs rows j < L+8 only.
typedef double v4d __attribute__((vector_size(32)));

inline v4d load4(const double* a) { v4d v; std::memcpy(&v, a, sizeof v); return v; }
inline double hsum(v4d v) { return (v[0] + v[1]) + (v[2] + v[3]); }

#define HOM_PGD_QUAD_BODY                                                                                       \
  for (int i = 0; i < m; ++i) {                                                                                 \
    const double* Ui = U + static_cast<long>(i) * n * np;                                                      \
    const double* pi = P + static_cast<long>(i) * np;                                                          \
    for (int r0 = 0; r0 < kp; r0 += 4) {                                                                        \
      const double* x0 = X + static_cast<long>(r0) * np;                                                       \
      const double* x1 = x0 + np; const double* x2 = x1 + np; const double* x3 = x2 + np;                     \
      v4d g0 = {0, 0, 0, 0}, g1 = g0, g2 = g0, g3 = g0;                                                         \
      for (int L = 0; L < np; L += 8) {                                                                         \
        const v4d pa = load4(pi + L), pb = load4(pi + L + 4);                                                   \
        v4d a0 = pa, b0 = pb, a1 = pa, b1 = pb, a2 = pa, b2 = pb, a3 = pa, b3 = pb;                             \
        const int jend = std::min(n, L + 8);                                                                    \
        for (int j = 0; j < jend; ++j) {                                                                        \
          const double* row = Ui + static_cast<long>(j) * np + L;                                               \
          const v4d ua = load4(row), ub = load4(row + 4);                                                       \
          const double y0 = x0[j], y1 = x1[j], y2 = x2[j], y3 = x3[j];                                          \
          a0 += y0 * ua; b0 += y0 * ub; a1 += y1 * ua; b1 += y1 * ub;                                           \
          a2 += y2 * ua; b2 += y2 * ub; a3 += y3 * ua; b3 += y3 * ub;                                           \
        }                                                                                                       \
        g0 += a0 * load4(x0 + L) + b0 * load4(x0 + L + 4);                                                      \
        g1 += a1 * load4(x1 + L) + b1 * load4(x1 + L + 4);                                                      \
        g2 += a2 * load4(x2 + L) + b2 * load4(x2 + L + 4);                                                      \
        g3 += a3 * load4(x3 + L) + b3 * load4(x3 + L + 4);                                                      \
      }                                                                                                         \
      G[static_cast<long>(r0) * m + i] = hsum(g0);                                                              \
      G[static_cast<long>(r0 + 1) * m + i] = hsum(g1);                                                          \
      G[static_cast<long>(r0 + 2) * m + i] = hsum(g2);                                                          \
      G[static_cast<long>(r0 + 3) * m + i] = hsum(g3);                                                          \
    }                                                                                                           \
  }

// G [kp, m] = the quadratic-plus-linear parts; X [kp, np] (rows padded to a multiple of 4 with zeros)
void quad_default(const double* U, const double* P, const double* X, double* G, int kp, int n, int np, int m) {
  HOM_PGD_QUAD_BODY
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HOM_PGD_AVX2 1
__attribute__((target("avx2,fma"))) void quad_avx2(const double* U, const double* P, const double* X, double* G,
                                                   int kp, int n, int np, int m) {
  HOM_PGD_QUAD_BODY
}
#endif

py::array_t<float> violation(f32 x_, f32 s_, f64 U_, f64 p_, f64 b_, double box, double radius) {
  need(x_.ndim() == 2, "x must be [k, n]");
  const int k = static_cast<int>(x_.shape(0)), n = static_cast<int>(x_.shape(1));
  need(U_.ndim() == 3 && U_.shape(1) == n && U_.shape(2) % 8 == 0 && U_.shape(2) >= n,
       "U must be [m, n, np] with np >= n a multiple of 8 (see pack_constraints)");
  const int m = static_cast<int>(U_.shape(0)), np = static_cast<int>(U_.shape(2));
  need(s_.ndim() == 2 && s_.shape(0) == k && s_.shape(1) == m, "s must be [k, m]");
  need(p_.ndim() == 2 && p_.shape(0) == m && p_.shape(1) == np, "pc must be [m, np] (zero-padded)");
  need(b_.ndim() == 1 && b_.shape(0) == m, "b must be [m]");
  const float* xf = x_.data();
  const float* s = s_.data();
  const double* U = U_.data();
  const double* P = p_.data();
  const double* b = b_.data();
  py::array_t<float> out_(k);
  float* out = out_.mutable_data();
  {
    py::gil_scoped_release nogil;
    const int kp = (k + 3) / 4 * 4;
    std::vector<double> X(static_cast<size_t>(kp) * np, 0.0), G(static_cast<size_t>(kp) * m);
    for (int r = 0; r < k; ++r)
      for (int j = 0; j < n; ++j) X[static_cast<long>(r) * np + j] = static_cast<double>(xf[static_cast<long>(r) * n + j]);
#ifdef HOM_PGD_AVX2
    static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (avx2)
      quad_avx2(U, P, X.data(), G.data(), kp, n, np, m);
    else
#endif
      quad_default(U, P, X.data(), G.data(), kp, n, np, m);
    for (int r = 0; r < k; ++r) {
      const double* xr = X.data() + static_cast<long>(r) * np;
      double mv = -std::numeric_limits<double>::infinity(), ss = 0.0;
      for (int j = 0; j < n; ++j) {
        mv = nanmax(mv, std::fabs(xr[j]) - box);
        ss += xr[j] * xr[j];
      }
      mv = nanmax(mv, std::sqrt(ss) - radius);
      const double* gr = G.data() + static_cast<long>(r) * m;
      const float* sr = s + static_cast<long>(r) * m;
      for (int i = 0; i < m; ++i) mv = nanmax(mv, gr[i] - static_cast<double>(sr[i]) * b[i]);
      out[r] = static_cast<float>(std::isnan(mv) ? mv : std::max(0.0, mv));
    }
  }
  return out_;
}

}  // namespace

PYBIND11_MODULE(_kernels, mod) {
  mod.doc() = "Chapter 14 (Hom-PGD+): fused max constraint violation of a batch of points (float64 inside).";
  mod.def("violation", &violation, py::arg("x"), py::arg("s"), py::arg("U"), py::arg("pc"), py::arg("b"),
          py::arg("box"), py::arg("radius"),
          "max(0, max_i g_i(x), max_j |x_j| - box, ||x|| - radius) per row of x [k, n] (float32 in and out, "
          "float64 inside), g_i(x) = 1/2 x^T Qc_i x + pc_i^T x - s_i b_i; NaN propagates.");
}
