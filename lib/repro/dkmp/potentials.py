"""The reference potential of chapter 15: Lennard-Jones plus a screened attractive tail (card, "Setting").

    E = Σ_{i<j} 4 ε_ij [r⁻¹² − r⁻⁶] S(r; 2.25, 2.5)  −  Σ_{i<j} k_Y e^{−r/λ}/r · S(r; 7.2, 8.0)

with species A, B (ε_AA = 1, ε_BB = 0.6, ε_AB = √0.6), σ = 1, and the C² switch
S(r; r_on, r_c) = 1 − 10x³ + 15x⁴ − 6x⁵, x = clip((r − r_on)/(r_c − r_on), 0, 1), so that E and F are
continuous at both cutoffs. The attractive tail has the same sign for every pair, so its forces do not
cancel (unlike a neutral ±q Yukawa cluster): that is what makes long-range message passing matter here.

``lj_tail`` uses the compiled cell-list kernel (``repro.dkmp._kernels.lj_tail``); ``backend="numpy"`` is
the chunked O(N²) reference it is tested against.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

try:
    from . import _kernels
    HAVE_KERNEL = True
except ImportError:  # pragma: no cover - the kernel is built by setup.py; the numpy reference still works
    _kernels = None
    HAVE_KERNEL = False

__all__ = ["Potential", "switch", "lj_tail", "force_tail_fraction", "HAVE_KERNEL", "EPS_AB"]

R_ON_LJ, RC_LJ = 2.25, 2.5
R_ON_TAIL = 7.2
EPS_AB = (1.0, 0.6)  # ε_AA, ε_BB; ε_AB = sqrt(ε_AA ε_BB)


@dataclass(frozen=True)
class Potential:
    """Parameters of the reference potential (the card's defaults)."""

    eps: tuple[float, float] = EPS_AB
    lam: float = 3.0
    kY: float = 4.0
    rc_lj: float = RC_LJ
    rc_tail: float = 8.0

    def eps_matrix(self) -> np.ndarray:
        a, b = self.eps
        return np.array([[a, np.sqrt(a * b)], [np.sqrt(a * b), b]], dtype=np.float64)

    def __call__(self, pos: np.ndarray, species: np.ndarray, backend: str = "auto") -> tuple[float, np.ndarray]:
        """Energy and forces (N, 3)."""
        return lj_tail(pos, species, eps=self.eps, lam=self.lam, kY=self.kY, rc_lj=self.rc_lj,
                       rc_tail=self.rc_tail, backend=backend)


def switch(r: np.ndarray, r_on: float, r_c: float) -> tuple[np.ndarray, np.ndarray]:
    """The C² switch S(r; r_on, r_c) and its derivative dS/dr."""
    w = r_c - r_on
    t = np.clip((np.asarray(r, float) - r_on) / w, 0.0, 1.0)
    t2 = t * t
    s = 1.0 - t2 * t * (10.0 - 15.0 * t + 6.0 * t2)
    ds = -30.0 * t2 * (1.0 - 2.0 * t + t2) / w
    return s, ds


def _pair_terms(r: np.ndarray, d2: np.ndarray, eij: np.ndarray, kY: float, lam: float, rc_lj: float,
                rc_tail: float) -> tuple[np.ndarray, np.ndarray]:
    """Pair energies u(r) and dE/dr for arrays of pairs (reference arithmetic, mirrors the kernel)."""
    e = np.zeros_like(r)
    dedr = np.zeros_like(r)
    lj = r < rc_lj
    if lj.any():
        ir2 = 1.0 / d2[lj]
        ir6 = ir2 * ir2 * ir2
        ir12 = ir6 * ir6
        u = 4.0 * eij[lj] * (ir12 - ir6)
        du = 4.0 * eij[lj] * (-12.0 * ir12 + 6.0 * ir6) / r[lj]
        sw, dsw = switch(r[lj], R_ON_LJ * rc_lj / RC_LJ, rc_lj)
        e[lj] += u * sw
        dedr[lj] += du * sw + u * dsw
    tl = r < rc_tail
    if tl.any():
        rr = r[tl]
        ex = np.exp(-rr / lam)
        u = -kY * ex / rr
        du = kY * ex * (1.0 / lam + 1.0 / rr) / rr
        sw, dsw = switch(rr, R_ON_TAIL * rc_tail / 8.0, rc_tail)
        e[tl] += u * sw
        dedr[tl] += du * sw + u * dsw
    return e, dedr


def _lj_tail_numpy(pos, species, eps_m, kY, lam, rc_lj, rc_tail, r_split, block=1024):
    """Chunked O(N²) reference: blocks of 1k × 1k pairs, i < j."""
    n = len(pos)
    F = np.zeros((n, 3))
    Ff = np.zeros((n, 3))
    E = Efar = 0.0
    npairs = 0
    cutoff2 = max(rc_lj, rc_tail) ** 2
    for a in range(0, n, block):
        I = np.arange(a, min(a + block, n))
        for b in range(a, n, block):
            J = np.arange(b, min(b + block, n))
            d = pos[J][None, :, :] - pos[I][:, None, :]  # x_j - x_i
            d2 = (d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]) + d[..., 2] * d[..., 2]
            ii, jj = np.nonzero((J[None, :] > I[:, None]) & (d2 < cutoff2))
            if not len(ii):
                continue
            dd, dsq = d[ii, jj], d2[ii, jj]
            gi, gj = I[ii], J[jj]
            r = np.sqrt(dsq)
            e, dedr = _pair_terms(r, dsq, eps_m[species[gi], species[gj]], kY, lam, rc_lj, rc_tail)
            fk = (dedr / r)[:, None] * dd
            npairs += len(r)
            E += e.sum()
            for out, sel in ((F, slice(None)), (Ff, r > r_split)):
                for c in range(3):
                    out[:, c] += np.bincount(gi[sel], fk[sel, c], minlength=n)
                    out[:, c] -= np.bincount(gj[sel], fk[sel, c], minlength=n)
            Efar += e[r > r_split].sum()
    return float(E), F, float(Efar), Ff, npairs


def _check(pos: np.ndarray, species: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pos = np.ascontiguousarray(pos, dtype=np.float64)
    species = np.ascontiguousarray(species, dtype=np.int64)
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise ValueError(f"pos must have shape (N, 3); got {pos.shape}")
    if species.shape != (len(pos),):
        raise ValueError(f"species must have shape ({len(pos)},); got {species.shape}")
    return pos, species


def lj_tail_full(pos: np.ndarray, species: np.ndarray, eps=EPS_AB, lam: float = 3.0, kY: float = 4.0,
                 rc_lj: float = RC_LJ, rc_tail: float = 8.0, r_split: float = RC_LJ,
                 backend: str = "auto") -> tuple[float, np.ndarray, float, np.ndarray, int]:
    """(E, F, E_far, F_far, n_pairs): energy, forces, and the part of both from pairs with r > r_split."""
    pos, species = _check(pos, species)
    eps_m = Potential(eps=tuple(eps)).eps_matrix()
    if backend == "auto":
        backend = "cpp" if HAVE_KERNEL else "numpy"
    if backend == "cpp":
        if not HAVE_KERNEL:
            raise RuntimeError("the compiled kernel repro.dkmp._kernels is missing: run `make setup`")
        return _kernels.lj_tail(pos, species, eps_m, R_ON_LJ * rc_lj / RC_LJ, rc_lj, kY, lam,
                                R_ON_TAIL * rc_tail / 8.0, rc_tail, r_split)
    if backend == "numpy":
        return _lj_tail_numpy(pos, species, eps_m, kY, lam, rc_lj, rc_tail, r_split)
    raise ValueError(f"backend must be 'auto', 'cpp' or 'numpy'; got {backend!r}")


def lj_tail(pos: np.ndarray, species: np.ndarray, eps=EPS_AB, lam: float = 3.0, kY: float = 4.0,
            rc_lj: float = RC_LJ, rc_tail: float = 8.0, backend: str = "auto") -> tuple[float, np.ndarray]:
    """Energy E and forces F = −∇E (N, 3) of the reference potential."""
    E, F, *_ = lj_tail_full(pos, species, eps, lam, kY, rc_lj, rc_tail, backend=backend)
    return E, F


def force_tail_fraction(pos_list, species_list, r_local: float = RC_LJ, kY: float = 4.0, lam: float = 3.0) -> float:
    """Sanity gate of the card: f = Σ‖F_i^{(r > r_local)}‖² / Σ‖F_i‖² over a set of configurations."""
    if isinstance(pos_list, np.ndarray) and pos_list.ndim == 2:
        pos_list, species_list = [pos_list], [species_list]
    num = den = 0.0
    for pos, sp in zip(pos_list, species_list):
        _, F, _, Ff, _ = lj_tail_full(pos, sp, kY=kY, lam=lam, r_split=r_local)
        num += float((Ff ** 2).sum())
        den += float((F ** 2).sum())
    return num / den
