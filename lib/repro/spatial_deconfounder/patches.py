"""Patches around units, interventions on them, the patch-grid Laplacian and a buffered block split.

The official code loops over units in Python to cut patches; here one ``sliding_window_view`` does it
(card, "Compiled kernel": none needed).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def extract_patches(fields: np.ndarray, radius: int, idx: np.ndarray) -> np.ndarray:
    """[N, 2r+1, 2r+1, C] patches of ``fields`` [H, W, C] (or [H, W]) centred on the flat indices ``idx``.
    Every centre must lie at least ``radius`` cells from the border."""
    f = fields[..., None] if fields.ndim == 2 else fields
    h, w, c = f.shape
    rows, cols = np.divmod(np.asarray(idx), w)
    if rows.min() < radius or cols.min() < radius or rows.max() >= h - radius or cols.max() >= w - radius:
        raise ValueError(f"a centre lies closer than radius {radius} to the border")
    p = 2 * radius + 1
    win = sliding_window_view(f, (p, p), axis=(0, 1))          # [H-p+1, W-p+1, C, p, p]
    out = win[rows - radius, cols - radius]                       # [N, C, p, p]
    return np.ascontiguousarray(out.transpose(0, 2, 3, 1))


def override(patches: np.ndarray, mode: str, value: float, channel: int = 0, offset: tuple[int, int] | None = None,
             radius: int = 1) -> np.ndarray:
    """A copy of ``patches`` [N, p, p, C] with channel ``channel`` set to ``value`` at:
    ``"center"`` the centre cell; ``"nbr"`` every cell within ``radius`` (Chebyshev) of the centre except the
    centre; ``"nbr_one"`` the single cell at ``offset`` = (di, dj) from the centre."""
    out = patches.copy()
    p = patches.shape[1]
    c = p // 2
    if mode == "center":
        out[:, c, c, channel] = value
    elif mode == "nbr":
        if radius > c:
            raise ValueError(f"radius {radius} exceeds the patch radius {c}")
        block = out[:, c - radius:c + radius + 1, c - radius:c + radius + 1, channel]
        keep = block[:, radius, radius].copy()
        block[...] = value
        block[:, radius, radius] = keep
    elif mode == "nbr_one":
        if offset is None or offset == (0, 0):
            raise ValueError("mode 'nbr_one' needs a non-zero offset")
        out[:, c + offset[0], c + offset[1], channel] = value
    else:
        raise ValueError(f"mode must be 'center', 'nbr' or 'nbr_one'; got {mode!r}")
    return out


def grid_laplacian(n: int, connectivity: int = 4) -> np.ndarray:
    """Graph Laplacian L = D − W of an n×n grid with 4- or 8-connectivity ([n², n²], row-major)."""
    if connectivity not in (4, 8):
        raise ValueError(f"connectivity must be 4 or 8; got {connectivity}")
    offs = [(0, 1), (1, 0), (0, -1), (-1, 0)]
    if connectivity == 8:
        offs += [(1, 1), (1, -1), (-1, 1), (-1, -1)]
    W = np.zeros((n * n, n * n))
    for i in range(n):
        for j in range(n):
            for di, dj in offs:
                a, b = i + di, j + dj
                if 0 <= a < n and 0 <= b < n:
                    W[i * n + j, a * n + b] = 1.0
    return np.diag(W.sum(1)) - W


def block_split(coords: np.ndarray, block: int = 8, frac: float = 0.2, buffer: int = 2,
                rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Split units (rows of ``coords``) by ``block``×``block`` tiles: a fraction ``frac`` of the tiles is held
    out; training units within ``buffer`` cells (Chebyshev) of a held-out unit are dropped, so overlapping
    patches do not leak. Returns (train, held-out) positions into ``coords``."""
    rng = rng or np.random.default_rng(0)
    tiles = coords // block
    keys = tiles[:, 0] * 10_000 + tiles[:, 1]
    uniq = np.unique(keys)
    n_val = max(1, int(round(frac * uniq.size)))
    val_tiles = rng.choice(uniq, size=n_val, replace=False)
    is_val = np.isin(keys, val_tiles)
    val = np.flatnonzero(is_val)
    # distance of each unit to the nearest held-out unit (Chebyshev), via a dilated mask on the grid
    lo = coords.min(0)
    shape = coords.max(0) - lo + 1
    mask = np.zeros(shape + 2 * buffer, bool)
    vc = coords[is_val] - lo + buffer
    for di in range(-buffer, buffer + 1):
        for dj in range(-buffer, buffer + 1):
            mask[vc[:, 0] + di, vc[:, 1] + dj] = True
    near = mask[coords[:, 0] - lo[0] + buffer, coords[:, 1] - lo[1] + buffer]
    train = np.flatnonzero(~is_val & ~near)
    return train, val
