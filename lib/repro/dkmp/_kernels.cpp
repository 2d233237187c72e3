// Chapter 15 (DKMP, our reading of the dilated star-structured message passing): compiled cell lists.
//
// Everything here is O(N) for a cluster of roughly constant density, thanks to a cell list (Allen &
// Tildesley, "Computer Simulation of Liquids", sec. 5.3): atoms are binned into cubic cells whose side
// is at least the search radius, so every partner of an atom lies in its own or one of the 26
// neighbouring cells.
//
//   pair_list(pos, cutoff)                       half list i < j with |x_i - x_j| < cutoff
//   lj_tail(pos, species, eps, ...)              the card's energy, forces, and their r > r_split part
//       E = sum_{i<j} 4 eps_ij [r^-12 - r^-6] S(r; r_on_lj, rc_lj)
//         - sum_{i<j} kY exp(-r/lam)/r         S(r; r_on_tail, rc_tail)
//       S(r; a, b) = 1 - 10x^3 + 15x^4 - 6x^5, x = clip((r - a)/(b - a), 0, 1)
//   poisson_disk(pos, radius)                    greedy Poisson-disk centres in atom-index order
//   star_membership(pos, centres, radius)        every (atom, centre) pair closer than radius
//
// The numpy references are repro/dkmp/potentials.py (_lj_tail_numpy) and repro/dkmp/neighbors.py
// (_pair_list_numpy, _poisson_disk_numpy, _star_membership_numpy). Squared distances are computed as
// (dx*dx + dy*dy) + dz*dz with dx = x_j - x_i in both, so that pairs exactly at a cutoff agree.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

namespace py = pybind11;
using darr = py::array_t<double, py::array::c_style>;
using iarr = py::array_t<int64_t, py::array::c_style>;

namespace {

// A cubic cell grid over the bounding box of `n` points; cell side >= `min_side`.
struct Grid {
  double lo[3] = {0, 0, 0};
  double side = 1.0;
  int64_t dim[3] = {1, 1, 1};
  std::vector<int64_t> start;  // start[c] .. start[c+1]: indices into `order`
  std::vector<int64_t> order;  // point ids sorted by cell, ascending id within a cell
  std::vector<int64_t> cell_of;

  void build(const double* x, int64_t n, double min_side) {
    double hi[3];
    for (int d = 0; d < 3; ++d) {
      lo[d] = n ? x[d] : 0.0;
      hi[d] = lo[d];
    }
    for (int64_t i = 0; i < n; ++i)
      for (int d = 0; d < 3; ++d) {
        lo[d] = std::min(lo[d], x[3 * i + d]);
        hi[d] = std::max(hi[d], x[3 * i + d]);
      }
    side = std::max(min_side, 1e-12);
    // Cap the number of cells at ~ 8 n + 64 (sparse or far-flung points): enlarge the side instead.
    for (;;) {
      int64_t total = 1;
      for (int d = 0; d < 3; ++d) {
        dim[d] = static_cast<int64_t>(std::floor((hi[d] - lo[d]) / side)) + 1;
        total *= dim[d];
      }
      if (total <= 8 * n + 64) break;
      side *= 1.5;
    }
    const int64_t ncell = dim[0] * dim[1] * dim[2];
    cell_of.assign(n, 0);
    start.assign(ncell + 1, 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t c[3];
      for (int d = 0; d < 3; ++d) {
        c[d] = static_cast<int64_t>(std::floor((x[3 * i + d] - lo[d]) / side));
        c[d] = std::min(std::max(c[d], int64_t(0)), dim[d] - 1);
      }
      cell_of[i] = (c[0] * dim[1] + c[1]) * dim[2] + c[2];
      start[cell_of[i] + 1]++;
    }
    for (int64_t c = 0; c < ncell; ++c) start[c + 1] += start[c];
    order.assign(n, 0);
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < n; ++i) order[fill[cell_of[i]]++] = i;  // ascending i within a cell
  }

  // Cell coordinates of an arbitrary point (clamped to the grid; used for queries).
  void coords(const double* p, int64_t c[3]) const {
    for (int d = 0; d < 3; ++d) {
      c[d] = static_cast<int64_t>(std::floor((p[d] - lo[d]) / side));
      c[d] = std::min(std::max(c[d], int64_t(-1)), dim[d]);
    }
  }

  // Call f(j) for every point j in the 27 cells around cell coordinates c.
  template <class F>
  void around(const int64_t c[3], F&& f) const {
    for (int64_t a = std::max<int64_t>(c[0] - 1, 0); a <= std::min<int64_t>(c[0] + 1, dim[0] - 1); ++a)
      for (int64_t b = std::max<int64_t>(c[1] - 1, 0); b <= std::min<int64_t>(c[1] + 1, dim[1] - 1); ++b)
        for (int64_t e = std::max<int64_t>(c[2] - 1, 0); e <= std::min<int64_t>(c[2] + 1, dim[2] - 1); ++e) {
          const int64_t cell = (a * dim[1] + b) * dim[2] + e;
          for (int64_t k = start[cell]; k < start[cell + 1]; ++k) f(order[k]);
        }
  }
};

inline double sqdist(const double* x, int64_t i, const double* y, int64_t j, double d[3]) {
  d[0] = y[3 * j] - x[3 * i];
  d[1] = y[3 * j + 1] - x[3 * i + 1];
  d[2] = y[3 * j + 2] - x[3 * i + 2];
  return (d[0] * d[0] + d[1] * d[1]) + d[2] * d[2];
}

const double* positions(const darr& pos, int64_t& n) {
  if (pos.ndim() != 2 || pos.shape(1) != 3) throw std::invalid_argument("pos must have shape (N, 3)");
  n = pos.shape(0);
  return pos.data();
}

// Half pair list (i < j, |x_i - x_j| < cutoff), by i; sorted by j within i when `sorted` (the pair
// list's canonical order; the energy loop does not need it). f(i, j, d2, d) with d = x_j - x_i.
template <class F>
void for_pairs(const double* x, int64_t n, double cutoff, F&& f, bool sorted = true) {
  Grid g;
  g.build(x, n, cutoff);
  const double c2 = cutoff * cutoff;
  std::vector<std::pair<int64_t, double>> buf;
  for (int64_t i = 0; i < n; ++i) {
    int64_t c[3];
    g.coords(x + 3 * i, c);
    buf.clear();
    g.around(c, [&](int64_t j) {
      if (j <= i) return;
      double d[3];
      const double d2 = sqdist(x, i, x, j, d);
      if (d2 < c2) {
        if (sorted)
          buf.emplace_back(j, d2);
        else
          f(i, j, d2, d);
      }
    });
    if (!sorted) continue;
    std::sort(buf.begin(), buf.end());
    for (auto& [j, d2] : buf) {
      double d[3];
      sqdist(x, i, x, j, d);
      f(i, j, d2, d);
    }
  }
}

py::tuple pair_list(const darr& pos, double cutoff) {
  if (!(cutoff > 0)) throw std::invalid_argument("cutoff must be > 0");
  int64_t n;
  const double* x = positions(pos, n);
  std::vector<int64_t> I, J;
  std::vector<double> R;
  {
    py::gil_scoped_release nogil;
    for_pairs(x, n, cutoff, [&](int64_t i, int64_t j, double d2, const double*) {
      I.push_back(i);
      J.push_back(j);
      R.push_back(std::sqrt(d2));
    });
  }
  const auto m = static_cast<py::ssize_t>(I.size());
  iarr ai(m), aj(m);
  darr ar(m);
  std::copy(I.begin(), I.end(), ai.mutable_data());
  std::copy(J.begin(), J.end(), aj.mutable_data());
  std::copy(R.begin(), R.end(), ar.mutable_data());
  return py::make_tuple(ai, aj, ar);
}

// Neumaier's compensated summation: sum += v, with the lost low-order bits kept in comp.
inline void neumaier(double& sum, double& comp, double v) {
  const double t = sum + v;
  comp += (std::abs(sum) >= std::abs(v)) ? (sum - t) + v : (v - t) + sum;
  sum = t;
}

// S(r; a, b) and dS/dr.
inline void smooth_switch(double r, double a, double b, double& s, double& ds) {
  if (r <= a) {
    s = 1.0;
    ds = 0.0;
    return;
  }
  if (r >= b) {
    s = 0.0;
    ds = 0.0;
    return;
  }
  const double w = b - a, t = (r - a) / w, t2 = t * t;
  s = 1.0 - t2 * t * (10.0 - 15.0 * t + 6.0 * t2);
  ds = -30.0 * t2 * (1.0 - 2.0 * t + t2) / w;
}

struct PairParams {
  double r_on_lj, rc_lj, kY, inv_lam, r_on_tail, rc_tail;
};

// Energy terms of a batch of pairs (structure of arrays): e, dE/dr / r, and r. (A branch-free, vectorised
// version was no faster: GCC does not vectorise sqrt without -fno-math-errno, which setup.py does not set.)
void pair_terms(int64_t m, const double* __restrict d2, const double* __restrict eij, const PairParams& p,
                double* __restrict e_out, double* __restrict k_out, double* __restrict r_out) {
  for (int64_t t = 0; t < m; ++t) {
    const double r = std::sqrt(d2[t]), inv_r = 1.0 / r;
    double e = 0.0, dedr = 0.0;
    if (r < p.rc_lj) {
      const double ir2 = inv_r * inv_r, ir6 = ir2 * ir2 * ir2, ir12 = ir6 * ir6;
      const double u = 4.0 * eij[t] * (ir12 - ir6);
      const double du = 4.0 * eij[t] * (-12.0 * ir12 + 6.0 * ir6) * inv_r;
      double sw, dsw;
      smooth_switch(r, p.r_on_lj, p.rc_lj, sw, dsw);
      e += u * sw;
      dedr += du * sw + u * dsw;
    }
    const double ex = std::exp(-r * p.inv_lam);
    const double u = -p.kY * ex * inv_r;
    const double du = p.kY * ex * (p.inv_lam + inv_r) * inv_r;
    double sw = 1.0, dsw = 0.0;
    if (r > p.r_on_tail) smooth_switch(r, p.r_on_tail, p.rc_tail, sw, dsw);
    e += u * sw;
    dedr += du * sw + u * dsw;
    e_out[t] = e;
    k_out[t] = dedr * inv_r;
    r_out[t] = r;
  }
}

// Returns (E, F (N,3), E_far, F_far (N,3), n_pairs): the total energy and forces, and the part of both
// that comes from pairs with r > r_split (the "tail" of the sanity gate and of the 2.5-sigma reference).
// Atoms are copied in cell order (structure of arrays); each atom's partners in the half shell of
// neighbour cells are gathered into a batch, whose energy terms are computed by pair_terms.
py::tuple lj_tail(const darr& pos, const iarr& species, const darr& eps, double r_on_lj, double rc_lj,
                  double kY, double lam, double r_on_tail, double rc_tail, double r_split) {
  int64_t n;
  const double* x = positions(pos, n);
  if (species.ndim() != 1 || species.shape(0) != n) throw std::invalid_argument("species must have shape (N,)");
  if (eps.ndim() != 2 || eps.shape(0) != eps.shape(1)) throw std::invalid_argument("eps must be square (K, K)");
  if (!(lam > 0) || !(rc_lj > r_on_lj) || !(rc_tail > r_on_tail)) throw std::invalid_argument("bad potential parameters");
  const int64_t K = eps.shape(0);
  const int64_t* s = species.data();
  for (int64_t i = 0; i < n; ++i)
    if (s[i] < 0 || s[i] >= K) throw std::invalid_argument("species index out of range of eps");
  const double* ep = eps.data();
  darr F({n, int64_t(3)}), Ff({n, int64_t(3)});
  double* f = F.mutable_data();
  double* ff = Ff.mutable_data();
  std::fill(f, f + 3 * n, 0.0);
  std::fill(ff, ff + 3 * n, 0.0);
  double E = 0.0, Efar = 0.0, cE = 0.0, cEf = 0.0;  // Neumaier-compensated sums
  int64_t npairs = 0;
  {
    py::gil_scoped_release nogil;
    const double cutoff = std::max(rc_lj, rc_tail), c2 = cutoff * cutoff;
    const PairParams p{r_on_lj, rc_lj, kY, 1.0 / lam, r_on_tail, rc_tail};
    Grid g;
    g.build(x, n, cutoff);
    std::vector<double> X(n), Y(n), Z(n), fx(n, 0.0), fy(n, 0.0), fz(n, 0.0), gx(n, 0.0), gy(n, 0.0), gz(n, 0.0);
    std::vector<int64_t> sp(n);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t a = g.order[k];
      X[k] = x[3 * a];
      Y[k] = x[3 * a + 1];
      Z[k] = x[3 * a + 2];
      sp[k] = s[a];
    }
    std::vector<int64_t> jb(n);  // an atom has fewer than n partners
    std::vector<double> d2b(n), eb(n), e_out(n), k_out(n), r_out(n), dxb(n), dyb(n), dzb(n);
    const int64_t D0 = g.dim[0], D1 = g.dim[1], D2 = g.dim[2];
    for (int64_t c0 = 0; c0 < D0; ++c0)
      for (int64_t c1 = 0; c1 < D1; ++c1)
        for (int64_t cz = 0; cz < D2; ++cz) {
          const int64_t cell = (c0 * D1 + c1) * D2 + cz;
          for (int64_t a = g.start[cell]; a < g.start[cell + 1]; ++a) {
            int64_t m = 0;
            // partners: later atoms of the same cell, and every atom of the 13 "forward" neighbour cells
            for (int off = 0; off < 14; ++off) {
              int64_t o0, o1, o2;
              if (off == 0) {
                o0 = o1 = o2 = 0;
              } else {
                const int q = off + 13;  // offsets 14..26 of the 3x3x3 block: the forward half shell
                o0 = q / 9 - 1;
                o1 = (q / 3) % 3 - 1;
                o2 = q % 3 - 1;
              }
              const int64_t n0 = c0 + o0, n1 = c1 + o1, n2 = cz + o2;
              if (n0 < 0 || n0 >= D0 || n1 < 0 || n1 >= D1 || n2 < 0 || n2 >= D2) continue;
              const int64_t nc = (n0 * D1 + n1) * D2 + n2;
              for (int64_t b = (off == 0 ? a + 1 : g.start[nc]); b < g.start[nc + 1]; ++b) {
                const double dx = X[b] - X[a], dy = Y[b] - Y[a], dz = Z[b] - Z[a];
                const double d2 = (dx * dx + dy * dy) + dz * dz;
                if (d2 < c2) {
                  jb[m] = b;
                  d2b[m] = d2;
                  eb[m] = ep[sp[a] * K + sp[b]];
                  dxb[m] = dx;
                  dyb[m] = dy;
                  dzb[m] = dz;
                  ++m;
                }
              }
            }
            pair_terms(m, d2b.data(), eb.data(), p, e_out.data(), k_out.data(), r_out.data());
            npairs += m;
            double ax = 0, ay = 0, az = 0, bx = 0, by = 0, bz = 0;
            for (int64_t t = 0; t < m; ++t) {
              const int64_t b = jb[t];
              const double k = k_out[t];
              // F_a = -dE/dr (x_a - x_b)/r = (dE/dr / r) d with d = x_b - x_a
              ax += k * dxb[t];
              ay += k * dyb[t];
              az += k * dzb[t];
              fx[b] -= k * dxb[t];
              fy[b] -= k * dyb[t];
              fz[b] -= k * dzb[t];
              neumaier(E, cE, e_out[t]);
              if (r_out[t] > r_split) {
                neumaier(Efar, cEf, e_out[t]);
                bx += k * dxb[t];
                by += k * dyb[t];
                bz += k * dzb[t];
                gx[b] -= k * dxb[t];
                gy[b] -= k * dyb[t];
                gz[b] -= k * dzb[t];
              }
            }
            fx[a] += ax;
            fy[a] += ay;
            fz[a] += az;
            gx[a] += bx;
            gy[a] += by;
            gz[a] += bz;
          }
        }
    for (int64_t k = 0; k < n; ++k) {
      const int64_t a = g.order[k];
      f[3 * a] = fx[k];
      f[3 * a + 1] = fy[k];
      f[3 * a + 2] = fz[k];
      ff[3 * a] = gx[k];
      ff[3 * a + 1] = gy[k];
      ff[3 * a + 2] = gz[k];
    }
  }
  return py::make_tuple(E + cE, F, Efar + cEf, Ff, npairs);
}

// Greedy Poisson-disk selection in index order: keep atom i unless a kept centre is closer than radius.
iarr poisson_disk(const darr& pos, double radius) {
  if (!(radius > 0)) throw std::invalid_argument("radius must be > 0");
  int64_t n;
  const double* x = positions(pos, n);
  std::vector<int64_t> kept;
  {
    py::gil_scoped_release nogil;
    Grid g;  // a grid over all atoms, used only for its geometry; kept centres are binned as they come
    g.build(x, n, radius);
    const int64_t ncell = g.dim[0] * g.dim[1] * g.dim[2];
    std::vector<std::vector<int64_t>> cells(ncell);
    const double r2 = radius * radius;
    for (int64_t i = 0; i < n; ++i) {
      int64_t c[3];
      g.coords(x + 3 * i, c);
      bool ok = true;
      for (int64_t a = std::max<int64_t>(c[0] - 1, 0); ok && a <= std::min<int64_t>(c[0] + 1, g.dim[0] - 1); ++a)
        for (int64_t b = std::max<int64_t>(c[1] - 1, 0); ok && b <= std::min<int64_t>(c[1] + 1, g.dim[1] - 1); ++b)
          for (int64_t e = std::max<int64_t>(c[2] - 1, 0); ok && e <= std::min<int64_t>(c[2] + 1, g.dim[2] - 1); ++e)
            for (int64_t j : cells[(a * g.dim[1] + b) * g.dim[2] + e]) {
              double d[3];
              if (sqdist(x, j, x, i, d) < r2) {
                ok = false;
                break;
              }
            }
      if (ok) {
        kept.push_back(i);
        cells[g.cell_of[i]].push_back(i);
      }
    }
  }
  iarr out(static_cast<py::ssize_t>(kept.size()));
  std::copy(kept.begin(), kept.end(), out.mutable_data());
  return out;
}

// (atom, slot, r) for every atom closer than radius to centre pos[centres[slot]]; sorted by atom, slot.
py::tuple star_membership(const darr& pos, const iarr& centres, double radius) {
  if (!(radius > 0)) throw std::invalid_argument("radius must be > 0");
  int64_t n;
  const double* x = positions(pos, n);
  if (centres.ndim() != 1) throw std::invalid_argument("centres must be 1-D");
  const int64_t m = centres.shape(0);
  const int64_t* cid = centres.data();
  for (int64_t k = 0; k < m; ++k)
    if (cid[k] < 0 || cid[k] >= n) throw std::invalid_argument("centre index out of range");
  std::vector<double> cx(3 * m);
  for (int64_t k = 0; k < m; ++k)
    for (int d = 0; d < 3; ++d) cx[3 * k + d] = x[3 * cid[k] + d];
  std::vector<int64_t> A, S;
  std::vector<double> R;
  {
    py::gil_scoped_release nogil;
    Grid g;
    g.build(cx.data(), m, radius);
    const double r2 = radius * radius;
    std::vector<std::pair<int64_t, double>> buf;
    for (int64_t i = 0; i < n; ++i) {
      int64_t c[3];
      g.coords(x + 3 * i, c);
      buf.clear();
      g.around(c, [&](int64_t k) {
        double d[3];
        const double d2 = sqdist(x, i, cx.data(), k, d);
        if (d2 < r2) buf.emplace_back(k, d2);
      });
      std::sort(buf.begin(), buf.end());
      for (auto& [k, d2] : buf) {
        A.push_back(i);
        S.push_back(k);
        R.push_back(std::sqrt(d2));
      }
    }
  }
  const auto mm = static_cast<py::ssize_t>(A.size());
  iarr aa(mm), as(mm);
  darr ar(mm);
  std::copy(A.begin(), A.end(), aa.mutable_data());
  std::copy(S.begin(), S.end(), as.mutable_data());
  std::copy(R.begin(), R.end(), ar.mutable_data());
  return py::make_tuple(aa, as, ar);
}

}  // namespace

PYBIND11_MODULE(_kernels, m) {
  m.doc() = "Chapter 15 (DKMP): cell-list pair search, LJ + screened tail energy/forces, Poisson-disk centres";
  m.def("pair_list", &pair_list, py::arg("pos").noconvert(), py::arg("cutoff"),
        "Half pair list (i < j, r < cutoff), sorted by (i, j). pos: float64 (N, 3). Returns (i, j, r).");
  m.def("lj_tail", &lj_tail, py::arg("pos").noconvert(), py::arg("species").noconvert(),
        py::arg("eps").noconvert(), py::arg("r_on_lj"), py::arg("rc_lj"), py::arg("kY"), py::arg("lam"),
        py::arg("r_on_tail"), py::arg("rc_tail"), py::arg("r_split"),
        "Energy and forces of the switched LJ + screened attractive tail. Returns (E, F, E_far, F_far, n_pairs).");
  m.def("poisson_disk", &poisson_disk, py::arg("pos").noconvert(), py::arg("radius"),
        "Greedy Poisson-disk centres in index order (int64 atom indices).");
  m.def("star_membership", &star_membership, py::arg("pos").noconvert(), py::arg("centres").noconvert(),
        py::arg("radius"), "(atom, centre slot, r) with r < radius, sorted by (atom, slot).");
}
