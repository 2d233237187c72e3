"""Token sequences of the two tasks, for strings and for boards (one multi-task model, task token first).

* NUM: ``<NUM> x1..x36 <SEP> d1 d2`` — count the 'c' letters (or black stones); answer two digits "07".
* EQ:  ``<EQ> x1..x36 <SEP> y1..y36 <SEP> T|F`` — does the first input hold as many 'c' (black stones) as the
  string has 'c'? ``x`` is a string or an image (``<IMG>`` placeholders whose embeddings the image tokens replace).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .boards import count_strings, eq_pairs, random_boards, render_patches
from .tokenizer import VOCAB

NUM, EQ, SEP, IMG = (VOCAB.id(t) for t in ("<NUM>", "<EQ>", "<SEP>", "<IMG>"))
T_ID, F_ID = VOCAB.id("T"), VOCAB.id("F")
DIGITS = np.array(VOCAB.digit_ids)


@dataclass
class Batch:
    """``ids [B, T]`` (teacher-forced input), ``patches [B, P, 25]`` or None, ``tgt_pos`` (positions whose next
    token is supervised), ``targets [B, len(tgt_pos)]``; ``n`` the counts (board or first string), ``n_text`` the
    string count of EQ, ``boards`` the boards (image batches)."""

    task: str
    ids: torch.Tensor
    patches: torch.Tensor | None
    tgt_pos: list[int]
    targets: torch.Tensor
    n: np.ndarray
    n_text: np.ndarray | None = None
    boards: np.ndarray | None = None


def _first_input(counts, modality, size, distractor, rng):
    L = size * size
    if modality == "text":
        return count_strings(counts, L, rng).astype(np.int64), None, None
    boards = random_boards(counts, size, distractor, rng)
    return np.full((len(counts), L), IMG, dtype=np.int64), torch.from_numpy(render_patches(boards)), boards


def num_batch(counts: np.ndarray, modality: str, rng: np.random.Generator, size: int = 6,
              distractor: int = 5) -> Batch:
    """Counting: the input ends at d1 (teacher forcing); targets (d1, d2) at positions (L+1, L+2)."""
    counts = np.asarray(counts, dtype=np.int64)
    x, patches, boards = _first_input(counts, modality, size, distractor, rng)
    d = DIGITS[np.stack([counts // 10, counts % 10], 1)]
    B, L = x.shape
    ids = np.concatenate([np.full((B, 1), NUM), x, np.full((B, 1), SEP), d[:, :1]], 1)
    return Batch("num", torch.from_numpy(ids), patches, [L + 1, L + 2], torch.from_numpy(d), counts,
                 boards=boards)


def eq_batch(n_first: np.ndarray, n_text: np.ndarray, modality: str, rng: np.random.Generator, size: int = 6,
             distractor: int = 5) -> Batch:
    """Comparison: first input (string or board) with ``n_first``, a string with ``n_text``; T/F at the end."""
    n_first, n_text = np.asarray(n_first, np.int64), np.asarray(n_text, np.int64)
    x, patches, boards = _first_input(n_first, modality, size, distractor, rng)
    y = count_strings(n_text, size * size, rng).astype(np.int64)
    B, L = x.shape
    ids = np.concatenate([np.full((B, 1), EQ), x, np.full((B, 1), SEP), y, np.full((B, 1), SEP)], 1)
    tgt = np.where(n_first == n_text, T_ID, F_ID)[:, None]
    return Batch("eq", torch.from_numpy(ids), patches, [2 * L + 2], torch.from_numpy(tgt), n_first, n_text,
                 boards=boards)


def random_eq_batch(lo: int, hi: int, B: int, modality: str, rng: np.random.Generator, size: int = 6,
                    distractor: int = 5) -> Batch:
    n_b, n_t, _ = eq_pairs(lo, hi, B, rng)
    return eq_batch(n_b, n_t, modality, rng, size, distractor)
