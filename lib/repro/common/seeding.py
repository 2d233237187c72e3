"""One seed for everything: Python's ``random``, numpy, and torch when a chapter uses it.

Chapters draw randomness from the ``numpy.random.Generator`` returned here (or from children spawned
from it), never from global state, so that the same seed gives the same numbers in any cell order.
"""
from __future__ import annotations

import os
import random
import sys

import numpy as np

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def limit_threads(n: int = 1) -> None:
    """Pin BLAS/OpenMP (and torch, if loaded) to ``n`` threads: the book's budgets assume one per notebook.

    ``REPRO_THREADS`` in the environment overrides ``n``: ``make crosscheck`` runs the chapters with two threads,
    a different reduction order, to show that no verdict rests on last-bit rounding (issue 40)."""
    n = int(os.environ.get("REPRO_THREADS") or n)
    for var in THREAD_VARS:
        os.environ.setdefault(var, str(n))
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:  # pragma: no cover - threadpoolctl is pinned in requirements.txt
        pass
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        torch.set_num_threads(n)


def seed_everything(seed: int, *, threads: int | None = 1) -> np.random.Generator:
    """Seed ``random``, numpy's legacy global state and torch (if imported); return a fresh Generator."""
    if threads:
        limit_threads(threads)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)
    return np.random.default_rng(seed)


def child_rngs(rng: np.random.Generator, n: int) -> list[np.random.Generator]:
    """``n`` independent generators derived from ``rng`` (for seeds, datasets, workers)."""
    return [np.random.default_rng(s) for s in rng.bit_generator.seed_seq.spawn(n)]
