// Chapter 18 (EMFormer): the shallow-water SSP-RK3 step of repro/emformer/sim.py, fused.
//
// sw_rk3(h, u, v, T, Fh, FT, h_eq, T_eq, f_corner, params, n_steps) advances every trajectory n_steps steps in
// place. Grid: Arakawa C, h/T at centres (ny x nx), u at west faces (ny x nx), v at south faces ((ny+1) x nx,
// zero on the walls), vorticity at corners ((ny+1) x nx); periodic in x, free-slip walls in y.
//   dh/dt = -div(h u) + r_h (h_eq - h) + Fh
//   du/dt = mean_y(q mean_x(V)) - dB/dx - r_d u - nu4 lap(lap u)
//   dv/dt = -mean_x(q mean_y(U)) - dB/dy - r_d v - nu4 lap(lap v)
//   dT/dt = -div(u T) + r_T (T_eq - T) + FT - nu4 lap(lap T)
// with q = (zeta + f)/h_q, B = g h + K (Sadourny 1975, energy conserving), SSP-RK3 in time. Each RK stage is one
// pass over a trajectory's arrays (fluxes, vorticity, Bernoulli, fluxes of T, hyperdiffusion); the numpy
// reference computes the same expressions in the same order, so the two agree to rounding (tests: 1e-12).
// params = [dx, dy, g, r_h, r_d, r_T, nu4, dt].
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;
using arr = py::array_t<double, py::array::c_style>;

namespace {

void need(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument(msg);
}

struct Grid {
  int ny, nx;
  double dx, dy, g, r_h, r_d, r_T, nu4, dt;
  const double *heq, *Teq, *f;
};

struct Work {
  std::vector<double> hu, U, V, q, B, Tx, Ty, l1, l2;
  Work(int ny, int nx)
      : hu(ny * nx), U(ny * nx), V((ny + 1) * nx), q((ny + 1) * nx), B(ny * nx), Tx(ny * nx), Ty((ny + 1) * nx),
        l1((ny + 1) * nx), l2((ny + 1) * nx) {}
};

inline int xm(int i, int nx) { return i == 0 ? nx - 1 : i - 1; }
inline int xp(int i, int nx) { return i == nx - 1 ? 0 : i + 1; }

// Laplacian at centres / u points: periodic x, zero normal gradient at the walls (mirror rows).
void lap_centre(const double* a, double* out, const Grid& G) {
  const int ny = G.ny, nx = G.nx;
  const double dx2 = G.dx * G.dx, dy2 = G.dy * G.dy;
  for (int j = 0; j < ny; ++j) {
    const int jn = j == ny - 1 ? j : j + 1, js = j == 0 ? 0 : j - 1;
    for (int i = 0; i < nx; ++i) {
      const double c = a[j * nx + i];
      out[j * nx + i] = (a[j * nx + xm(i, nx)] + a[j * nx + xp(i, nx)] - 2 * c) / dx2 +
                        (a[jn * nx + i] + a[js * nx + i] - 2 * c) / dy2;
    }
  }
}

// Laplacian at v points: zero on the wall rows 0 and ny.
void lap_v(const double* a, double* out, const Grid& G) {
  const int ny = G.ny, nx = G.nx;
  const double dx2 = G.dx * G.dx, dy2 = G.dy * G.dy;
  for (int i = 0; i < nx; ++i) {
    out[i] = 0.0;
    out[ny * nx + i] = 0.0;
  }
  for (int j = 1; j < ny; ++j)
    for (int i = 0; i < nx; ++i) {
      const double c = a[j * nx + i];
      out[j * nx + i] = (a[j * nx + xm(i, nx)] + a[j * nx + xp(i, nx)] - 2 * c) / dx2 +
                        (a[(j + 1) * nx + i] + a[(j - 1) * nx + i] - 2 * c) / dy2;
    }
}

// Right-hand side for one trajectory.
void tendency(const double* h, const double* u, const double* v, const double* T, const double* Fh,
              const double* FT, double* dh, double* du, double* dv, double* dT, const Grid& G, Work& w) {
  const int ny = G.ny, nx = G.nx;
  const double dx = G.dx, dy = G.dy;
  double *hu = w.hu.data(), *U = w.U.data(), *V = w.V.data(), *q = w.q.data(), *B = w.B.data();
  double *Tx = w.Tx.data(), *Ty = w.Ty.data();
  // mass fluxes, Bernoulli function, tracer fluxes
  for (int j = 0; j < ny; ++j)
    for (int i = 0; i < nx; ++i) {
      const int k = j * nx + i, km = j * nx + xm(i, nx), kp = j * nx + xp(i, nx);
      hu[k] = 0.5 * (h[km] + h[k]);
      U[k] = hu[k] * u[k];
      const double K = 0.25 * (u[k] * u[k] + u[kp] * u[kp]) + 0.25 * (v[k] * v[k] + v[k + nx] * v[k + nx]);
      B[k] = G.g * h[k] + K;
      Tx[k] = u[k] * (0.5 * (T[km] + T[k]));
    }
  for (int i = 0; i < nx; ++i) {
    V[i] = 0.0;
    V[ny * nx + i] = 0.0;
    Ty[i] = 0.0;
    Ty[ny * nx + i] = 0.0;
  }
  for (int j = 1; j < ny; ++j)
    for (int i = 0; i < nx; ++i) {
      const int k = j * nx + i;
      V[k] = (0.5 * (h[k - nx] + h[k])) * v[k];
      Ty[k] = v[k] * (0.5 * (T[k - nx] + T[k]));
    }
  // potential vorticity at corners (free slip: zeta = 0 on the walls)
  for (int j = 0; j <= ny; ++j)
    for (int i = 0; i < nx; ++i) {
      const int k = j * nx + i;
      double zeta = 0.0, hq;
      if (j == 0) {
        hq = hu[i];
      } else if (j == ny) {
        hq = hu[(ny - 1) * nx + i];
      } else {
        zeta = (v[k] - v[j * nx + xm(i, nx)]) / dx - (u[k] - u[k - nx]) / dy;
        hq = 0.5 * (hu[k] + hu[k - nx]);
      }
      q[k] = (zeta + G.f[j]) / hq;
    }
  for (int j = 0; j < ny; ++j)
    for (int i = 0; i < nx; ++i) {
      const int k = j * nx + i, km = j * nx + xm(i, nx), kp = j * nx + xp(i, nx);
      // continuity and tracer (flux form)
      dh[k] = -((U[kp] - U[k]) / dx + (V[k + nx] - V[k]) / dy);
      dT[k] = -((Tx[kp] - Tx[k]) / dx + (Ty[k + nx] - Ty[k]) / dy);
      // u: mean_y of q * mean_x(V) at the corners below (j) and above (j+1)
      const double qVs = q[k] * (0.5 * (V[km] + V[k]));
      const double qVn = q[k + nx] * (0.5 * (V[km + nx] + V[k + nx]));
      du[k] = 0.5 * (qVn + qVs);
      du[k] -= (B[k] - B[km]) / dx;
    }
  for (int i = 0; i < nx; ++i) {
    dv[i] = 0.0;
    dv[ny * nx + i] = 0.0;
  }
  for (int j = 1; j < ny; ++j)
    for (int i = 0; i < nx; ++i) {
      const int k = j * nx + i, kp = j * nx + xp(i, nx);
      const double qU0 = q[k] * (0.5 * (U[k - nx] + U[k]));
      const double qU1 = q[kp] * (0.5 * (U[kp - nx] + U[kp]));
      dv[k] = -0.5 * (qU0 + qU1);
      dv[k] -= (B[k] - B[k - nx]) / dy;
    }
  // forcing and dissipation
  for (int j = 0; j < ny; ++j)
    for (int i = 0; i < nx; ++i) {
      const int k = j * nx + i;
      dh[k] += G.r_h * (G.heq[j] - h[k]) + Fh[k];
      dT[k] += G.r_T * (G.Teq[j] - T[k]) + FT[k];
      du[k] -= G.r_d * u[k];
    }
  for (int k = 0; k < (ny + 1) * nx; ++k) dv[k] -= G.r_d * v[k];
  if (G.nu4 != 0.0) {
    double *l1 = w.l1.data(), *l2 = w.l2.data();
    lap_centre(u, l1, G);
    lap_centre(l1, l2, G);
    for (int k = 0; k < ny * nx; ++k) du[k] -= G.nu4 * l2[k];
    lap_v(v, l1, G);
    lap_v(l1, l2, G);
    for (int k = 0; k < (ny + 1) * nx; ++k) dv[k] -= G.nu4 * l2[k];
    lap_centre(T, l1, G);
    lap_centre(l1, l2, G);
    for (int k = 0; k < ny * nx; ++k) dT[k] -= G.nu4 * l2[k];
  }
}

void sw_rk3(arr h, arr u, arr v, arr T, arr Fh, arr FT, arr heq, arr Teq, arr fc, arr params, int n_steps) {
  need(h.ndim() == 3 && u.ndim() == 3 && v.ndim() == 3 && T.ndim() == 3, "h, u, v, T must be 3-d (B, ny, nx)");
  const int nb = h.shape(0), ny = h.shape(1), nx = h.shape(2);
  need(u.shape(0) == nb && u.shape(1) == ny && u.shape(2) == nx, "u must have the shape of h");
  need(T.shape(0) == nb && T.shape(1) == ny && T.shape(2) == nx, "T must have the shape of h");
  need(v.shape(0) == nb && v.shape(1) == ny + 1 && v.shape(2) == nx, "v must be (B, ny + 1, nx)");
  need(Fh.size() == h.size() && FT.size() == h.size(), "Fh, FT must have the shape of h");
  need(heq.size() == ny && Teq.size() == ny && fc.size() == ny + 1, "h_eq, T_eq (ny) and f (ny + 1) sizes");
  need(params.size() == 8, "params = [dx, dy, g, r_h, r_d, r_T, nu4, dt]");
  const double* p = params.data();
  const Grid G{ny, nx, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], heq.data(), Teq.data(), fc.data()};
  const int nc = ny * nx, nv = (ny + 1) * nx;
  double *H = h.mutable_data(), *Uu = u.mutable_data(), *Vv = v.mutable_data(), *TT = T.mutable_data();
  const double *fh = Fh.data(), *ft = FT.data();
  py::gil_scoped_release release;
  Work w(ny, nx);
  std::vector<double> h0(nc), u0(nc), v0(nv), T0(nc), h1(nc), u1(nc), v1(nv), T1(nc);
  std::vector<double> kh(nc), ku(nc), kv(nv), kT(nc);
  const double dt = G.dt;
  for (int b = 0; b < nb; ++b) {
    double *hb = H + b * nc, *ub = Uu + b * nc, *vb = Vv + b * nv, *Tb = TT + b * nc;
    const double *fhb = fh + b * nc, *ftb = ft + b * nc;
    for (int s = 0; s < n_steps; ++s) {
      std::copy(hb, hb + nc, h0.begin());
      std::copy(ub, ub + nc, u0.begin());
      std::copy(vb, vb + nv, v0.begin());
      std::copy(Tb, Tb + nc, T0.begin());
      // stage 1: y1 = y + dt k(y)
      tendency(hb, ub, vb, Tb, fhb, ftb, kh.data(), ku.data(), kv.data(), kT.data(), G, w);
      for (int k = 0; k < nc; ++k) {
        h1[k] = h0[k] + dt * kh[k];
        u1[k] = u0[k] + dt * ku[k];
        T1[k] = T0[k] + dt * kT[k];
      }
      for (int k = 0; k < nv; ++k) v1[k] = v0[k] + dt * kv[k];
      // stage 2: y2 = 3/4 y + 1/4 (y1 + dt k(y1))
      tendency(h1.data(), u1.data(), v1.data(), T1.data(), fhb, ftb, kh.data(), ku.data(), kv.data(), kT.data(), G,
               w);
      for (int k = 0; k < nc; ++k) {
        h1[k] = 0.75 * h0[k] + 0.25 * (h1[k] + dt * kh[k]);
        u1[k] = 0.75 * u0[k] + 0.25 * (u1[k] + dt * ku[k]);
        T1[k] = 0.75 * T0[k] + 0.25 * (T1[k] + dt * kT[k]);
      }
      for (int k = 0; k < nv; ++k) v1[k] = 0.75 * v0[k] + 0.25 * (v1[k] + dt * kv[k]);
      // stage 3: y3 = 1/3 y + 2/3 (y2 + dt k(y2))
      tendency(h1.data(), u1.data(), v1.data(), T1.data(), fhb, ftb, kh.data(), ku.data(), kv.data(), kT.data(), G,
               w);
      for (int k = 0; k < nc; ++k) {
        hb[k] = (1.0 / 3.0) * h0[k] + (2.0 / 3.0) * (h1[k] + dt * kh[k]);
        ub[k] = (1.0 / 3.0) * u0[k] + (2.0 / 3.0) * (u1[k] + dt * ku[k]);
        Tb[k] = (1.0 / 3.0) * T0[k] + (2.0 / 3.0) * (T1[k] + dt * kT[k]);
      }
      for (int k = 0; k < nv; ++k) vb[k] = (1.0 / 3.0) * v0[k] + (2.0 / 3.0) * (v1[k] + dt * kv[k]);
    }
  }
}

}  // namespace

PYBIND11_MODULE(_kernels, m) {
  m.doc() = "Chapter 18 (EMFormer): fused shallow-water SSP-RK3 steps (numpy reference: repro.emformer.sim)";
  m.def("sw_rk3", &sw_rk3, py::arg("h").noconvert(), py::arg("u").noconvert(), py::arg("v").noconvert(),
        py::arg("T").noconvert(), py::arg("Fh").noconvert(), py::arg("FT").noconvert(), py::arg("h_eq"),
        py::arg("T_eq"), py::arg("f_corner"), py::arg("params"), py::arg("n_steps"),
        "Advance every trajectory n_steps SSP-RK3 steps in place (float64, C-contiguous arrays).");
}
