// Chapter 02 (BiRoLF, ICML 2026): compiled FISTA loops of one BiRoLF update.
//
// fista_matrix solves the matrix Lasso of the main estimator (card, Method steps 7-8)
//     min_Phi  tr(Phi^T Gx Phi Gy) - 2 <B, Phi> + mu ||Phi||_1 ,      gradient 2 (Gx Phi Gy - B),
// with Gx (p x p) and Gy (q x q) symmetric PSD; an empty Gx or Gy stands for the identity. It serves the
// oo block (Gx = X X^T, Gy = Y Y^T), the ou / uo blocks (one side the identity: the column / row vector
// Lassos, batched), the full-matrix solver (Gx = X~^T X~, Gy = Y~^T Y~) and the vector Lassos of the
// baselines (q = 1).
// fista_impute solves the imputation Lasso (card, Method step 5)
//     min_Phi  sum_ij Ncnt_ij (x~_i^T Phi y~_j)^2 - 2 S_ij x~_i^T Phi y~_j + lam ||Phi||_1 ,
//     gradient 2 X~^T (Ncnt (.) (X~ Phi Y~^T) - S) Y~ ,
// from the running counts Ncnt and reward sums S of the matched rounds.
//
// Both are plain FISTA (Beck & Teboulle 2009) with constant step 1/L: one proximal-gradient step
//     Phi' = soft(Y - grad(Y) / L, mu / L),  t' = (1 + sqrt(1 + 4 t^2)) / 2,  Y' = Phi' + (t-1)/t' (Phi' - Phi)
// stopping when ||Phi' - Phi||_F <= tol * max(1, ||Phi||_F) (the authors' rule; tol = 0 disables it) or,
// every kkt_every iterations, when the KKT residual of Phi' is <= kkt_tol (kkt_tol = 0 disables it).
// The numpy reference is repro/birolf/solvers.py (_fista_matrix_numpy, _fista_impute_numpy); the
// arithmetic follows it operation by operation, so both agree to rounding (tests: 1e-10).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;
// No forcecast: with .noconvert() below an int or non-contiguous array is rejected, never silently copied.
using arr = py::array_t<double, py::array::c_style>;

namespace {

// C (n x m) = A (n x k) * B (k x m), row-major, i-k-j loop order.
inline void matmul(const double* A, const double* B, double* C, int n, int k, int m) {
  std::fill(C, C + static_cast<size_t>(n) * m, 0.0);
  for (int i = 0; i < n; ++i) {
    double* c = C + static_cast<size_t>(i) * m;
    const double* a = A + static_cast<size_t>(i) * k;
    for (int l = 0; l < k; ++l) {
      const double al = a[l];
      const double* b = B + static_cast<size_t>(l) * m;
      for (int j = 0; j < m; ++j) c[j] += al * b[j];
    }
  }
}

// C (n x m) = A^T * B with A (k x n), B (k x m).
inline void matmul_tn(const double* A, const double* B, double* C, int n, int k, int m) {
  std::fill(C, C + static_cast<size_t>(n) * m, 0.0);
  for (int l = 0; l < k; ++l) {
    const double* a = A + static_cast<size_t>(l) * n;
    const double* b = B + static_cast<size_t>(l) * m;
    for (int i = 0; i < n; ++i) {
      const double ai = a[i];
      double* c = C + static_cast<size_t>(i) * m;
      for (int j = 0; j < m; ++j) c[j] += ai * b[j];
    }
  }
}

// C (n x m) = A * B^T with A (n x k), B (m x k).
inline void matmul_nt(const double* A, const double* B, double* C, int n, int k, int m) {
  for (int i = 0; i < n; ++i) {
    const double* a = A + static_cast<size_t>(i) * k;
    for (int j = 0; j < m; ++j) {
      const double* b = B + static_cast<size_t>(j) * k;
      double s = 0.0;
      for (int l = 0; l < k; ++l) s += a[l] * b[l];
      C[static_cast<size_t>(i) * m + j] = s;
    }
  }
}

inline double soft(double z, double tau) {
  if (z > 0.0) return std::max(z - tau, 0.0);
  if (z < 0.0) return -std::max(-z - tau, 0.0);
  return 0.0;
}

// max_ij of |g_ij + mu sign(Phi_ij)| (Phi_ij != 0) or max(|g_ij| - mu, 0) (Phi_ij == 0), g = 2 (Gx Phi Gy - B).
double kkt_from_grad(const double* grad, const double* Phi, size_t n, double mu) {
  double r = 0.0;
  for (size_t a = 0; a < n; ++a) {
    double v;
    if (std::abs(Phi[a]) > 1e-12) {
      v = std::abs(grad[a] + (Phi[a] > 0.0 ? mu : -mu));
    } else {
      v = std::max(std::abs(grad[a]) - mu, 0.0);
    }
    r = std::max(r, v);
  }
  return r;
}

struct MatrixProblem {
  const double* Gx;  // p x p or nullptr (identity)
  const double* Gy;  // q x q or nullptr (identity)
  const double* B;   // p x q
  int p, q;
  std::vector<double> tmp;
  MatrixProblem(const double* gx, const double* gy, const double* b, int p_, int q_)
      : Gx(gx), Gy(gy), B(b), p(p_), q(q_), tmp(static_cast<size_t>(p_) * q_) {}
  // grad = 2 (Gx Y Gy) - 2 B
  void gradient(const double* Y, double* grad) {
    const size_t n = static_cast<size_t>(p) * q;
    const double* left = Y;
    if (Gx) {
      matmul(Gx, Y, tmp.data(), p, p, q);
      left = tmp.data();
    }
    if (Gy) {
      matmul(left, Gy, grad, p, q, q);
    } else {
      std::copy(left, left + n, grad);
    }
    for (size_t a = 0; a < n; ++a) grad[a] = 2.0 * grad[a] - 2.0 * B[a];
  }
};

void check2d(const arr& a, const char* name) {
  if (a.ndim() != 2) throw std::invalid_argument(std::string(name) + " must be a 2-d float64 array");
}

// FISTA's momentum step (Beck & Teboulle 2009): t' = (1 + sqrt(1 + 4t^2)) / 2, Y = Xn + ((t - 1)/t')(Xn - X),
// X = Xn. Returns whether the step was small: ||Xn - X|| <= tol * max(1, ||X||) (never when tol <= 0).
bool fista_momentum(double* X, const double* Xn, double* Y, double& t, size_t n, double tol) {
  const double tn = 0.5 * (1.0 + std::sqrt(1.0 + 4.0 * t * t));
  const double beta = (t - 1.0) / tn;
  double nd = 0.0, nx = 0.0;
  for (size_t a = 0; a < n; ++a) {
    const double d = Xn[a] - X[a];
    Y[a] = Xn[a] + beta * d;
    nd += d * d;
    nx += X[a] * X[a];
    X[a] = Xn[a];
  }
  t = tn;
  return tol > 0.0 && std::sqrt(nd) <= tol * std::max(1.0, std::sqrt(nx));
}

}  // namespace

// Returns (Phi, iterations, kkt) — kkt is the KKT residual of the returned Phi when kkt_tol > 0, else NaN.
py::tuple fista_matrix(arr Gx, arr Gy, arr B, double mu, arr Phi0, double L, int max_iter, double tol,
                       double kkt_tol, int kkt_every) {
  check2d(B, "B");
  check2d(Phi0, "Phi0");
  const int p = static_cast<int>(B.shape(0)), q = static_cast<int>(B.shape(1));
  if (Phi0.shape(0) != p || Phi0.shape(1) != q) throw std::invalid_argument("Phi0 must have the shape of B");
  const bool idx = Gx.size() == 0, idy = Gy.size() == 0;
  if (!idx && (Gx.ndim() != 2 || Gx.shape(0) != p || Gx.shape(1) != p))
    throw std::invalid_argument("Gx must be p x p (or empty for the identity)");
  if (!idy && (Gy.ndim() != 2 || Gy.shape(0) != q || Gy.shape(1) != q))
    throw std::invalid_argument("Gy must be q x q (or empty for the identity)");
  if (!(L > 0.0)) throw std::invalid_argument("L must be > 0");
  if (kkt_every < 1) kkt_every = 1;
  const size_t n = static_cast<size_t>(p) * q;
  arr out({p, q});
  double* X = out.mutable_data();
  std::copy(Phi0.data(), Phi0.data() + n, X);
  std::vector<double> Y(X, X + n), Xn(n), grad(n);
  MatrixProblem prob(idx ? nullptr : Gx.data(), idy ? nullptr : Gy.data(), B.data(), p, q);
  double t = 1.0;
  double kkt = std::numeric_limits<double>::quiet_NaN();
  int it = 0, kkt_at = -1;
  {
    py::gil_scoped_release release;
    const double thr = mu / L;
    for (int k = 0; k < max_iter; ++k) {
      prob.gradient(Y.data(), grad.data());
      for (size_t a = 0; a < n; ++a) Xn[a] = soft(Y[a] - grad[a] / L, thr);
      const bool converged = fista_momentum(X, Xn.data(), Y.data(), t, n, tol);
      it = k + 1;
      if (converged) break;
      if (kkt_tol > 0.0 && it % kkt_every == 0) {
        prob.gradient(X, grad.data());
        kkt = kkt_from_grad(grad.data(), X, n, mu);
        kkt_at = it;
        if (kkt <= kkt_tol) break;
      }
    }
    if (kkt_tol > 0.0 && kkt_at != it) {
      prob.gradient(X, grad.data());
      kkt = kkt_from_grad(grad.data(), X, n, mu);
    }
  }
  return py::make_tuple(out, it, kkt);
}

// Returns (Phi, iterations).
py::tuple fista_impute(arr Xa, arr Ya, arr Ncnt, arr S, double lam, arr Phi0, double L, int max_iter,
                       double tol) {
  check2d(Xa, "Xa");
  check2d(Ya, "Ya");
  const int M = static_cast<int>(Xa.shape(0)), N = static_cast<int>(Ya.shape(0));
  const int P = static_cast<int>(Xa.shape(1)), Q = static_cast<int>(Ya.shape(1));
  if (Ncnt.ndim() != 2 || Ncnt.shape(0) != M || Ncnt.shape(1) != N) throw std::invalid_argument("Ncnt must be M x N");
  if (S.ndim() != 2 || S.shape(0) != M || S.shape(1) != N) throw std::invalid_argument("S must be M x N");
  if (Phi0.ndim() != 2 || Phi0.shape(0) != P || Phi0.shape(1) != Q) throw std::invalid_argument("Phi0 must be P x Q");
  if (!(L > 0.0)) throw std::invalid_argument("L must be > 0");
  const size_t n = static_cast<size_t>(P) * Q, mn = static_cast<size_t>(M) * N;
  arr out({P, Q});
  double* X = out.mutable_data();
  std::copy(Phi0.data(), Phi0.data() + n, X);
  std::vector<double> Y(X, X + n), Xn(n), grad(n), t1(static_cast<size_t>(M) * Q), W(mn),
      t2(static_cast<size_t>(P) * N);
  const double *xa = Xa.data(), *ya = Ya.data(), *nc = Ncnt.data(), *s = S.data();
  double t = 1.0;
  int it = 0;
  {
    py::gil_scoped_release release;
    const double thr = lam / L;
    for (int k = 0; k < max_iter; ++k) {
      matmul(xa, Y.data(), t1.data(), M, P, Q);          // Xa Phi         (M x Q)
      matmul_nt(t1.data(), ya, W.data(), M, Q, N);        // (Xa Phi) Ya^T  (M x N)
      for (size_t a = 0; a < mn; ++a) W[a] = nc[a] * W[a] - s[a];
      matmul_tn(xa, W.data(), t2.data(), P, M, N);        // Xa^T W         (P x N)
      matmul(t2.data(), ya, grad.data(), P, N, Q);        // (Xa^T W) Ya    (P x Q)
      for (size_t a = 0; a < n; ++a) Xn[a] = soft(Y[a] - (2.0 * grad[a]) / L, thr);
      const bool converged = fista_momentum(X, Xn.data(), Y.data(), t, n, tol);
      it = k + 1;
      if (converged) break;
    }
  }
  return py::make_tuple(out, it);
}

PYBIND11_MODULE(_kernels, m) {
  m.doc() = "Chapter 02 (BiRoLF): FISTA for the main matrix Lasso and the imputation Lasso";
  m.def("fista_matrix", &fista_matrix, py::arg("Gx").noconvert(), py::arg("Gy").noconvert(),
        py::arg("B").noconvert(), py::arg("mu"), py::arg("Phi0").noconvert(), py::arg("L"), py::arg("max_iter"),
        py::arg("tol"), py::arg("kkt_tol"), py::arg("kkt_every"),
        "FISTA on tr(Phi^T Gx Phi Gy) - 2<B,Phi> + mu|Phi|_1; returns (Phi, iterations, kkt)");
  m.def("fista_impute", &fista_impute, py::arg("Xa").noconvert(), py::arg("Ya").noconvert(),
        py::arg("Ncnt").noconvert(), py::arg("S").noconvert(), py::arg("lam"), py::arg("Phi0").noconvert(),
        py::arg("L"), py::arg("max_iter"), py::arg("tol"),
        "FISTA on the imputation Lasso from counts and reward sums; returns (Phi, iterations)");
}
