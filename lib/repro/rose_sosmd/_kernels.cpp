// Chapter 08 (ROSE / SOS-MD, arXiv 2605.13025): compiled stage-game loop.
//
// mmd_solve_batch runs, independently for every state s of a batch, either
//   * extragradient = false: T simultaneous magnetic-mirror-descent steps (SOS-MD's inner loop),
//   * extragradient = true : extragradient MMD until the fixed-point residual is <= tol, at most
//                            T iterations (ROSE's exact solver; the caller checks the cap),
// on the KL-regularised matrix game  max_p min_q p^T Q q - beta KL(p||p_ref) + beta KL(q||q_ref).
// One MMD step (Sokota et al. 2023), in log space:
//   log p' = (log p + eta*beta*log p_ref + eta*(Q q)) / (1 + eta*beta) - logsumexp(...)
//   log q' = (log q + eta*beta*log q_ref - eta*(Q^T p)) / (1 + eta*beta) - logsumexp(...)
// The numpy reference is repro/rose_sosmd/stage.py (_md_numpy, _extragradient_numpy); the
// arithmetic follows it operation by operation so that both agree to ~1e-15.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace py = pybind11;
// No forcecast: with .noconvert() below, an int or non-contiguous array is rejected instead of
// being silently copied.
using arr = py::array_t<double, py::array::c_style>;

namespace {

// out = normalised log of the MMD update of lx with gradient g.
inline void mmd_update(const double* lx, const double* lref, const double* g, double eta,
                       double beta, int n, double* out) {
  const double eb = eta * beta;
  const double denom = 1.0 + eb;
  double m = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) {
    out[i] = (lx[i] + eb * lref[i] + eta * g[i]) / denom;
    m = std::max(m, out[i]);
  }
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += std::exp(out[i] - m);
  const double lse = m + std::log(s);
  for (int i = 0; i < n; ++i) out[i] -= lse;
}

// gp = Q q  (A),  gq = -Q^T p  (B)
inline void grad_p(const double* Q, const double* q, int A, int B, double* gp) {
  for (int a = 0; a < A; ++a) {
    double acc = 0.0;
    for (int b = 0; b < B; ++b) acc += Q[a * B + b] * q[b];
    gp[a] = acc;
  }
}
inline void grad_q(const double* Q, const double* p, int A, int B, double* gq) {
  for (int b = 0; b < B; ++b) {
    double acc = 0.0;
    for (int a = 0; a < A; ++a) acc += Q[a * B + b] * p[a];
    gq[b] = -acc;
  }
}

// max_i |x_i - softmax(lref + g / beta)_i|, x = exp(lx)
inline double fp_residual(const double* x, const double* lref, const double* g, double beta,
                          int n, double* tmp) {
  double m = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) {
    tmp[i] = lref[i] + g[i] / beta;
    m = std::max(m, tmp[i]);
  }
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += std::exp(tmp[i] - m);
  const double lse = m + std::log(s);
  double r = 0.0;
  for (int i = 0; i < n; ++i) r = std::max(r, std::abs(x[i] - std::exp(tmp[i] - lse)));
  return r;
}

py::tuple mmd_solve_batch(arr Q_, arr p_ref_, arr q_ref_, double beta, arr eta_, long T,
                          double tol, bool extragradient) {
  if (Q_.ndim() != 3) throw std::invalid_argument("Q must have shape (S, A, B)");
  const long S = Q_.shape(0);
  const int A = static_cast<int>(Q_.shape(1)), B = static_cast<int>(Q_.shape(2));
  if (p_ref_.ndim() != 2 || p_ref_.shape(0) != S || p_ref_.shape(1) != A)
    throw std::invalid_argument("p_ref must have shape (S, A)");
  if (q_ref_.ndim() != 2 || q_ref_.shape(0) != S || q_ref_.shape(1) != B)
    throw std::invalid_argument("q_ref must have shape (S, B)");
  if (eta_.ndim() != 1 || eta_.shape(0) != S) throw std::invalid_argument("eta must have shape (S,)");
  if (!(beta > 0.0)) throw std::invalid_argument("beta must be > 0");
  if (T < 0) throw std::invalid_argument("T must be >= 0");

  arr p_out({S, static_cast<long>(A)}), q_out({S, static_cast<long>(B)});
  py::array_t<long long> it_out(S);
  const double* Q = Q_.data();
  const double* pr = p_ref_.data();
  const double* qr = q_ref_.data();
  const double* eta = eta_.data();
  double* po = p_out.mutable_data();
  double* qo = q_out.mutable_data();
  long long* io = it_out.mutable_data();

  {
    py::gil_scoped_release release;
    const int K = std::max(A, B);
    std::vector<double> lpr(A), lqr(B), lp(A), lq(B), lpm(A), lqm(B), lpn(A), lqn(B), p(A), q(B),
        pm(A), qm(B), gp(A), gq(B), tmp(K);
    for (long s = 0; s < S; ++s) {
      const double* Qs = Q + s * A * B;
      const double e = eta[s];
      for (int a = 0; a < A; ++a) lp[a] = lpr[a] = std::log(pr[s * A + a]);
      for (int b = 0; b < B; ++b) lq[b] = lqr[b] = std::log(qr[s * B + b]);
      long it = 0;
      if (!extragradient) {
        for (; it < T; ++it) {
          for (int a = 0; a < A; ++a) p[a] = std::exp(lp[a]);
          for (int b = 0; b < B; ++b) q[b] = std::exp(lq[b]);
          grad_p(Qs, q.data(), A, B, gp.data());
          grad_q(Qs, p.data(), A, B, gq.data());
          mmd_update(lp.data(), lpr.data(), gp.data(), e, beta, A, lp.data());
          mmd_update(lq.data(), lqr.data(), gq.data(), e, beta, B, lq.data());
        }
      } else {
        for (;; ++it) {
          for (int a = 0; a < A; ++a) p[a] = std::exp(lp[a]);
          for (int b = 0; b < B; ++b) q[b] = std::exp(lq[b]);
          grad_p(Qs, q.data(), A, B, gp.data());
          grad_q(Qs, p.data(), A, B, gq.data());
          const double res = std::max(fp_residual(p.data(), lpr.data(), gp.data(), beta, A, tmp.data()),
                                      fp_residual(q.data(), lqr.data(), gq.data(), beta, B, tmp.data()));
          if (!(res > tol) || it == T) break;
          // midpoint
          mmd_update(lp.data(), lpr.data(), gp.data(), e, beta, A, lpm.data());
          mmd_update(lq.data(), lqr.data(), gq.data(), e, beta, B, lqm.data());
          for (int a = 0; a < A; ++a) pm[a] = std::exp(lpm[a]);
          for (int b = 0; b < B; ++b) qm[b] = std::exp(lqm[b]);
          // update from the current point with midpoint gradients
          grad_p(Qs, qm.data(), A, B, gp.data());
          grad_q(Qs, pm.data(), A, B, gq.data());
          mmd_update(lp.data(), lpr.data(), gp.data(), e, beta, A, lpn.data());
          mmd_update(lq.data(), lqr.data(), gq.data(), e, beta, B, lqn.data());
          std::swap(lp, lpn);
          std::swap(lq, lqn);
        }
      }
      for (int a = 0; a < A; ++a) po[s * A + a] = std::exp(lp[a]);
      for (int b = 0; b < B; ++b) qo[s * B + b] = std::exp(lq[b]);
      io[s] = it;
    }
  }
  return py::make_tuple(p_out, q_out, it_out);
}

}  // namespace

PYBIND11_MODULE(_kernels, m) {
  m.doc() = "Chapter 08 (ROSE / SOS-MD): batched magnetic mirror descent on regularised stage games";
  m.def("mmd_solve_batch", &mmd_solve_batch, py::arg("Q").noconvert(), py::arg("p_ref").noconvert(),
        py::arg("q_ref").noconvert(), py::arg("beta"), py::arg("eta").noconvert(), py::arg("T"),
        py::arg("tol"), py::arg("extragradient"),
        R"doc(Batched MMD on KL-regularised matrix games.

Q (S,A,B), p_ref (S,A), q_ref (S,B), eta (S,): C-contiguous float64 (others are rejected).
extragradient=False: T simultaneous MMD steps from (p_ref, q_ref) (SOS-MD).
extragradient=True: extragradient MMD until the fixed-point residual <= tol, at most T
iterations (ROSE); iters[s] == T signals the cap was reached.
Returns (p (S,A), q (S,B), iters (S,) int64).)doc");
}
