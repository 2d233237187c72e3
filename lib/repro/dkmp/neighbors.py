"""Graphs of chapter 15: radius graphs, Poisson-disk star centres and star memberships (card, "Method").

* :func:`pair_list` — every pair closer than a cutoff (the local layers' radius graph, SchNet's graphs).
* :func:`poisson_disk_centres` — the centres C_l of a star layer: greedy Poisson-disk selection (keep an atom if
  no kept centre is closer than s_l), visiting the atoms from the cluster's centre outwards (:func:`visit_order`),
  so the chosen atoms do not depend on how the atoms are numbered; afterwards every atom lies within s_l of a
  centre and centres are pairwise ≥ s_l apart. (In atom-index order, as first built, renumbering the atoms of a
  cluster picked other centres and moved the trained model's energy by 0.16–0.33 per atom: issue 46.)
* :func:`star_membership` — atom i joins every centre c with r_ic < 1.5 s_l (our reading of DKMP's
  "dilated star-structured paths": one star per centre, leaves = the atoms of its region).

Each has a compiled cell-list implementation (``_kernels``, O(N)) and a numpy brute-force reference
(``backend="numpy"``, chunked O(N²)), which the tests compare.

* :func:`radius_pairs` — the unordered half pair list the models use. ``benchmarks/bench_dkmp.py`` times our
  kernel against ``scipy.spatial.cKDTree`` and ``vesin`` on the chapter's clusters: for a bare pair list
  cKDTree was the fastest of the three in our runs from 1,024 atoms on (the notebook re-measures it at 2,000
  and 16,000 atoms), so the models use it; our kernel stays
  where no library offers the operation (Poisson-disk centres, star memberships, the fused LJ + tail forces).
* :func:`spatial_order` — a permutation that sorts atoms by cell (memory locality for the message passing).
"""
from __future__ import annotations

import numpy as np

from .potentials import HAVE_KERNEL, _kernels

__all__ = ["pair_list", "radius_pairs", "spatial_order", "poisson_disk_centres", "star_membership", "visit_order"]


def _pos(pos: np.ndarray) -> np.ndarray:
    pos = np.ascontiguousarray(pos, dtype=np.float64)
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise ValueError(f"pos must have shape (N, 3); got {pos.shape}")
    return pos


def _backend(backend: str) -> str:
    if backend == "auto":
        return "cpp" if HAVE_KERNEL else "numpy"
    if backend == "cpp" and not HAVE_KERNEL:
        raise RuntimeError("the compiled kernel repro.dkmp._kernels is missing: run `make setup`")
    if backend not in ("cpp", "numpy"):
        raise ValueError(f"backend must be 'auto', 'cpp' or 'numpy'; got {backend!r}")
    return backend


def _pair_list_numpy(pos: np.ndarray, cutoff: float, block: int = 1024):
    n = len(pos)
    c2 = cutoff * cutoff
    I_, J_, R_ = [], [], []
    for a in range(0, n, block):
        I = np.arange(a, min(a + block, n))
        for b in range(a, n, block):
            J = np.arange(b, min(b + block, n))
            d = pos[J][None, :, :] - pos[I][:, None, :]
            d2 = (d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]) + d[..., 2] * d[..., 2]
            ii, jj = np.nonzero((J[None, :] > I[:, None]) & (d2 < c2))
            I_.append(I[ii]), J_.append(J[jj]), R_.append(np.sqrt(d2[ii, jj]))
    if not I_:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    i, j, r = np.concatenate(I_), np.concatenate(J_), np.concatenate(R_)
    order = np.lexsort((j, i))
    return i[order].astype(np.int64), j[order].astype(np.int64), r[order]


def pair_list(pos: np.ndarray, cutoff: float, backend: str = "auto") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Half pair list (i < j, |x_i − x_j| < cutoff) sorted by (i, j): int64 ``i``, ``j`` and distances ``r``."""
    pos = _pos(pos)
    if not cutoff > 0:
        raise ValueError(f"cutoff must be > 0; got {cutoff}")
    if _backend(backend) == "cpp":
        return _kernels.pair_list(pos, float(cutoff))
    return _pair_list_numpy(pos, float(cutoff))


def radius_pairs(pos: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray]:
    """Half pair list (i < j not guaranteed, each pair once, no order) within ``cutoff``: int64 ``i``, ``j``,
    from ``scipy.spatial.cKDTree.query_pairs`` (the fastest of the three builders benchmarked)."""
    from scipy.spatial import cKDTree

    pos = _pos(pos)
    if not cutoff > 0:
        raise ValueError(f"cutoff must be > 0; got {cutoff}")
    if len(pos) < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    p = cKDTree(pos).query_pairs(float(cutoff), output_type="ndarray").astype(np.int64, copy=False)
    return np.ascontiguousarray(p[:, 0]), np.ascontiguousarray(p[:, 1])


def spatial_order(pos: np.ndarray, cell: float = 2.5) -> np.ndarray:
    """Permutation that orders atoms by the cell (side ``cell``) they fall in, cells in x-major order: atoms
    that interact end up near one another in memory."""
    pos = _pos(pos)
    c = np.floor((pos - pos.min(axis=0)) / cell).astype(np.int64)
    return np.lexsort((c[:, 2], c[:, 1], c[:, 0]))


def _poisson_disk_numpy(pos: np.ndarray, radius: float) -> np.ndarray:
    kept: list[int] = []
    r2 = radius * radius
    cx = np.empty((0, 3))
    for i in range(len(pos)):
        d = pos[i][None, :] - cx
        d2 = (d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1]) + d[:, 2] * d[:, 2]
        if not (d2 < r2).any():
            kept.append(i)
            cx = pos[kept]
    return np.asarray(kept, dtype=np.int64)


def visit_order(pos: np.ndarray) -> np.ndarray:
    """The atoms by distance from the cluster's centroid, ties by (x, y, z): a permutation that depends on the
    positions only, not on the atoms' numbering. The centroid sums each coordinate in sorted order, so it is the
    same bits under any renumbering; distance and ties are then invariant too (and the distance is invariant under
    rotations and translations up to rounding)."""
    pos = _pos(pos)
    if not len(pos):
        return np.zeros(0, np.int64)
    c = np.sort(pos, axis=0).sum(0) / len(pos)
    d = pos - c
    r2 = (d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1]) + d[:, 2] * d[:, 2]
    return np.lexsort((pos[:, 2], pos[:, 1], pos[:, 0], r2)).astype(np.int64)


def poisson_disk_centres(pos: np.ndarray, radius: float, backend: str = "auto") -> np.ndarray:
    """Greedy Poisson-disk centres visited in :func:`visit_order` (int64 atom indices, ascending): the same atoms
    however the cluster is numbered."""
    pos = _pos(pos)
    if not radius > 0:
        raise ValueError(f"radius must be > 0; got {radius}")
    order = visit_order(pos)
    q = np.ascontiguousarray(pos[order])
    if _backend(backend) == "cpp":
        kept = _kernels.poisson_disk(q, float(radius))
    else:
        kept = _poisson_disk_numpy(q, float(radius))
    return np.sort(order[np.asarray(kept, dtype=np.int64)])


def _star_membership_numpy(pos: np.ndarray, centres: np.ndarray, radius: float, block: int = 1024):
    cx = pos[centres]
    r2 = radius * radius
    A_, S_, R_ = [], [], []
    for a in range(0, len(pos), block):
        I = np.arange(a, min(a + block, len(pos)))
        d = cx[None, :, :] - pos[I][:, None, :]
        d2 = (d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]) + d[..., 2] * d[..., 2]
        ii, kk = np.nonzero(d2 < r2)  # row-major: sorted by atom, then slot
        A_.append(I[ii]), S_.append(kk), R_.append(np.sqrt(d2[ii, kk]))
    if not A_:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return (np.concatenate(A_).astype(np.int64), np.concatenate(S_).astype(np.int64), np.concatenate(R_))


def star_membership(pos: np.ndarray, centres: np.ndarray, radius: float,
                    backend: str = "auto") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (atom, centre slot) with r < radius, sorted by (atom, slot), and their distances r."""
    pos = _pos(pos)
    centres = np.ascontiguousarray(centres, dtype=np.int64)
    if not radius > 0:
        raise ValueError(f"radius must be > 0; got {radius}")
    if _backend(backend) == "cpp":
        return _kernels.star_membership(pos, centres, float(radius))
    return _star_membership_numpy(pos, centres, float(radius))
