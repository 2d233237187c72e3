"""Procedural Go boards and counting strings (the paper's synthetic data, ``data.py`` of the authors' repo).

A board of ``size × size`` intersections holds exactly ``n`` black stones and ``U[max(0, n−5), n+5]`` white
stones (the repo's 6×6 distractor range), capped by the free cells, at uniform positions. Cells are coded
0 = empty, 1 = black, 2 = white. Each cell is drawn as one ``cell_px × cell_px`` patch (one visual token per
intersection, as the paper's 14-px patches on 266-px boards), so rendering is a table lookup of three
precomputed cell images. Strings have a fixed length with exactly ``n`` letters 'c', the rest uniform over
{'a', 'b'}.
"""
from __future__ import annotations

import numpy as np

EMPTY, BLACK, WHITE = 0, 1, 2
BOARD_BG, LINE, BLACK_STONE, WHITE_STONE = 0.8, 0.4, 0.0, 1.0


def random_boards(counts: np.ndarray, size: int, distractor_range: int, rng: np.random.Generator) -> np.ndarray:
    """Boards ``uint8[N, size²]`` with exactly ``counts[i]`` black stones and U[max(0,n−r), n+r] white ones
    (capped by the free cells); positions uniform, vectorised by ranking uniform keys."""
    counts = np.asarray(counts, dtype=np.int64)
    cells = size * size
    if counts.size and (counts.min() < 0 or counts.max() > cells):
        raise ValueError(f"black counts must lie in [0, {cells}]")
    lo = np.maximum(0, counts - distractor_range)
    hi = np.minimum(counts + distractor_range, cells - counts)
    lo = np.minimum(lo, hi)
    whites = lo + np.floor(rng.random(counts.size) * (hi - lo + 1)).astype(np.int64)
    rank = np.argsort(np.argsort(rng.random((counts.size, cells)), axis=1), axis=1)
    boards = np.zeros((counts.size, cells), dtype=np.uint8)
    boards[rank < counts[:, None]] = BLACK
    boards[(rank >= counts[:, None]) & (rank < (counts + whites)[:, None])] = WHITE
    return boards


def cell_image(kind: int, cell_px: int = 5) -> np.ndarray:
    """One intersection as a ``cell_px × cell_px`` float32 image: grid lines through the centre, and a disc
    (black 0.0 or white 1.0) of radius 0.45·cell_px for a stone."""
    c = (cell_px - 1) / 2
    y, x = np.mgrid[0:cell_px, 0:cell_px]
    img = np.full((cell_px, cell_px), BOARD_BG, dtype=np.float32)
    img[(y == cell_px // 2) | (x == cell_px // 2)] = LINE
    disc = (y - c) ** 2 + (x - c) ** 2 <= (0.45 * cell_px) ** 2
    if kind == BLACK:
        img[disc] = BLACK_STONE
    elif kind == WHITE:
        img[disc] = WHITE_STONE
    return img


def cell_table(cell_px: int = 5) -> np.ndarray:
    """The lookup table ``float32[3, cell_px²]`` of the three flattened cell images (empty, black, white)."""
    return np.stack([cell_image(k, cell_px).ravel() for k in (EMPTY, BLACK, WHITE)])


def render_patches(boards: np.ndarray, cell_px: int = 5) -> np.ndarray:
    """``float32[N, size², cell_px²]``: patch i is cell (i // size, i % size), flattened row-major."""
    return cell_table(cell_px)[np.asarray(boards, dtype=np.int64)]


def render_image(boards: np.ndarray, cell_px: int = 5) -> np.ndarray:
    """``float32[N, H, W]`` images (H = W = size·cell_px), the patches tiled back, for figures."""
    boards = np.asarray(boards)
    n, cells = boards.shape
    s = int(round(np.sqrt(cells)))
    p = render_patches(boards, cell_px).reshape(n, s, s, cell_px, cell_px)
    return p.transpose(0, 1, 3, 2, 4).reshape(n, s * cell_px, s * cell_px)


def count_strings(counts: np.ndarray, length: int, rng: np.random.Generator) -> np.ndarray:
    """Strings as ``uint8[N, length]`` letter codes (0 = 'a', 1 = 'b', 2 = 'c') with exactly ``counts[i]`` 'c';
    the other letters uniform over {'a', 'b'}, positions uniform."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.size and (counts.min() < 0 or counts.max() > length):
        raise ValueError(f"counts must lie in [0, {length}]")
    rank = np.argsort(np.argsort(rng.random((counts.size, length)), axis=1), axis=1)
    out = (rng.random((counts.size, length)) < 0.5).astype(np.uint8)
    out[rank < counts[:, None]] = 2
    return out


def eq_pairs(lo: int, hi: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` comparison pairs (board count, string count, equal?) with both counts in [lo, hi] and half of them
    equal; a negative's string count is uniform over [lo, hi] minus the board count (no boundary shortcut)."""
    if hi <= lo:
        raise ValueError("eq_pairs needs hi > lo")
    n_board = rng.integers(lo, hi + 1, n)
    is_equal = np.zeros(n, dtype=bool)
    is_equal[rng.permutation(n)[: n // 2]] = True
    shift = rng.integers(1, hi - lo + 1, n)                  # 1..(hi-lo): a uniform other value
    other = lo + (n_board - lo + shift) % (hi - lo + 1)
    n_text = np.where(is_equal, n_board, other)
    return n_board, n_text, is_equal
