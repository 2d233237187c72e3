// Chapter 09 · the B-dimensional dual of a harm-aware step, solved in C++ (the card's "Compiled kernel").
//
//   alpha* = argmin_{alpha >= 0}  1/2 alpha^T K alpha + alpha^T c          (qp.py, eq. 1)
//
// Jacobi scaling (alpha~ = D alpha, D = diag(K)^1/2), step 1/(1.02 lambda_max) from a 20-step power iteration
// (qp.power_lambda_max's start vector), then FISTA projected onto alpha >= 0 from alpha = 0, with adaptive restart. The same loop as
// qp.solve_nonneg_qp_torch, which is its reference (tests/test_harm_optimizer.py); for B = 64 the torch
// version is dominated by per-operation dispatch, which this removes.
#include <pybind11/pybind11.h>
#include <pybind11/numpy.h>
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace py = pybind11;

static void matvec(const std::vector<double>& A, const std::vector<double>& x, std::vector<double>& y, int n) {
    for (int i = 0; i < n; ++i) {
        const double* row = &A[(size_t)i * n];
        double s = 0.0;
        for (int j = 0; j < n; ++j) s += row[j] * x[j];
        y[i] = s;
    }
}

py::array_t<double> solve_nonneg_qp(py::array_t<double, py::array::c_style> K_in,
                                    py::array_t<double, py::array::c_style> c_in,
                                    int iters, bool jacobi, int power_iters) {
    auto K = K_in.unchecked<2>();
    auto c = c_in.unchecked<1>();
    const int n = (int)K.shape(0);
    if (K.shape(1) != n || c.shape(0) != n) throw std::invalid_argument("K must be [B, B] and c [B]");
    std::vector<double> D(n, 1.0), Ks((size_t)n * n), cs(n);
    if (jacobi)
        for (int i = 0; i < n; ++i) {
            double d = std::sqrt(std::max(K(i, i), 0.0));
            D[i] = d > 0.0 ? d : 1.0;
        }
    for (int i = 0; i < n; ++i) {
        cs[i] = K(i, i) > 0.0 ? c(i) / D[i] : 0.0;  // g_i = 0: its multiplier stays 0
        for (int j = 0; j < n; ++j) Ks[(size_t)i * n + j] = K(i, j) / (D[i] * D[j]);
    }
    // power iteration for lambda_max(Ks)
    // start at v_i = 1 + sin(i + 1) / 2 (not all-ones: orthogonal to the top eigenvector of some Gram matrices)
    std::vector<double> v(n), w(n);
    {
        double s = 0.0;
        for (int i = 0; i < n; ++i) { v[i] = 1.0 + 0.5 * std::sin((double)(i + 1)); s += v[i] * v[i]; }
        s = std::sqrt(s);
        for (int i = 0; i < n; ++i) v[i] /= s;
    }
    double lam = 0.0;
    bool zero = false;
    for (int it = 0; it < power_iters; ++it) {
        matvec(Ks, v, w, n);
        double nrm = 0.0, vw = 0.0;
        for (int i = 0; i < n; ++i) { nrm += w[i] * w[i]; vw += v[i] * w[i]; }
        nrm = std::sqrt(nrm);
        if (nrm == 0.0) { zero = true; break; }
        lam = vw;
        for (int i = 0; i < n; ++i) v[i] = w[i] / nrm;
    }
    py::array_t<double> out(n);
    auto a_out = out.mutable_unchecked<1>();
    if (!zero) {
        matvec(Ks, v, w, n);
        double vw = 0.0;
        for (int i = 0; i < n; ++i) vw += v[i] * w[i];
        lam = std::max(lam, vw);
    }
    if (zero || lam <= 0.0) {
        for (int i = 0; i < n; ++i) a_out(i) = 0.0;
        return out;
    }
    const double step = 1.0 / (1.02 * lam);
    std::vector<double> a(n, 0.0), z(n, 0.0), a_new(n), g(n);
    double t = 1.0;
    for (int it = 0; it < iters; ++it) {
        matvec(Ks, z, g, n);
        for (int i = 0; i < n; ++i) a_new[i] = std::max(0.0, z[i] - step * (g[i] + cs[i]));
        double rs = 0.0;  // adaptive restart (O'Donoghue & Candes 2015): momentum points uphill
        for (int i = 0; i < n; ++i) rs += (z[i] - a_new[i]) * (a_new[i] - a[i]);
        if (rs > 0.0) t = 1.0;
        double t_new = 0.5 * (1.0 + std::sqrt(1.0 + 4.0 * t * t));
        double mom = (t - 1.0) / t_new;
        for (int i = 0; i < n; ++i) {
            z[i] = a_new[i] + mom * (a_new[i] - a[i]);
            a[i] = a_new[i];
        }
        t = t_new;
    }
    for (int i = 0; i < n; ++i) a_out(i) = a[i] / D[i];
    return out;
}

PYBIND11_MODULE(_kernels, m) {
    m.doc() = "Chapter 09 (harm_optimizer): FISTA on the Jacobi-scaled non-negative dual QP";
    m.def("solve_nonneg_qp", &solve_nonneg_qp, py::arg("K").noconvert(), py::arg("c").noconvert(),
          py::arg("iters"), py::arg("jacobi") = true, py::arg("power_iters") = 20,
          "alpha = argmin_{alpha>=0} 1/2 a^T K a + a^T c (float64 arrays; FISTA, Jacobi-scaled)");
}
