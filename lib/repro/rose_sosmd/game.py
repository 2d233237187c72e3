"""Random tabular two-player zero-sum Markov games and offline datasets.

Chapter 08 (ROSE / SOS-MD; Chen, Zhang, Liu, Xie, Liu, Jiang, "Offline Two-Player Zero-Sum Markov
Games with KL Regularization", arXiv 2605.13025, ICML 2026). This module is the *setting* of the
paper's problem statement: an episodic game (S, A, B, H, r, P, rho) with a max-player (actions a,
policy pi / mu) and a min-player (actions b, policy nu), and an offline dataset of n i.i.d. episodes
drawn from behaviour policies (mu_b, nu_b). The paper's full text was not available to us, so the
names follow the chapter card (``shared/papers/08_rose_sosmd.md``, section "Setting at book scale").

Indexing convention (used across the package): time h is 0-based, ``h = 0 .. H-1`` is the paper's
``h = 1 .. H``; arrays are ``[h, s, a, b]`` and next states are the last axis.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Game",
    "Dataset",
    "random_markov_game",
    "behavior_policies",
    "uniform_policies",
    "sample_dataset",
    "exact_dataset",
    "empty_cell_fraction",
    "dataset_hash",
]


@dataclass(frozen=True)
class Game:
    """An episodic two-player zero-sum Markov game.

    Attributes
    ----------
    r : ndarray, shape (H, S, A, B)
        Deterministic reward r_h(s, a, b) in [0, 1], paid to the max-player.
    P : ndarray, shape (H, S, A, B, S)
        Transition kernel P_h(s' | s, a, b); ``P[H-1]`` is never used (episodes end after step H).
    rho : ndarray, shape (S,)
        Initial-state distribution.
    """

    r: np.ndarray
    P: np.ndarray
    rho: np.ndarray

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(H, S, A, B)."""
        H, S, A, B = self.r.shape
        return H, S, A, B


@dataclass(frozen=True)
class Dataset:
    """Sufficient statistics of an offline dataset of n episodes.

    Counts are stored as float64 so that :func:`exact_dataset` can put the exact transition
    probabilities in place of next-state counts (all integers here are exact in float64).

    Attributes
    ----------
    N : ndarray, shape (H, S, A, B)
        Visit counts N_h(s, a, b).
    R : ndarray, shape (H, S, A, B)
        Sums of observed rewards at each (h, s, a, b).
    N_next : ndarray, shape (H, S, A, B, S)
        Next-state counts N_h(s, a, b, s').
    n : int
        Number of episodes.
    """

    N: np.ndarray
    R: np.ndarray
    N_next: np.ndarray
    n: int

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(H, S, A, B)."""
        H, S, A, B = self.N.shape
        return H, S, A, B


def random_markov_game(S: int, A: int, B: int, H: int, rng: np.random.Generator,
                       dirichlet: float = 0.5) -> Game:
    """Draw the card's random game: r ~ U[0,1], P_h(.|s,a,b) ~ Dirichlet(dirichlet * 1), rho uniform."""
    r = rng.random((H, S, A, B))
    P = rng.dirichlet(np.full(S, dirichlet), size=(H, S, A, B))
    rho = np.full(S, 1.0 / S)
    return Game(r=r, P=P, rho=rho)


def _softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    z = x - x.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def behavior_policies(game: Game, temp: float, mix: float,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Behaviour policies mu_b = (1 - mix) softmax(logits / temp) + mix / A, logits ~ N(0, 1).

    Parameters
    ----------
    game : Game
    temp : float
        Softmax temperature tau_b (1.0 default, 0.3 for the skewed-coverage claim C4).
    mix : float
        Uniform mixing weight; every action keeps probability >= mix / A.
    rng : numpy Generator

    Returns
    -------
    mu_b : ndarray, shape (H, S, A)
    nu_b : ndarray, shape (H, S, B)
    """
    if temp <= 0:
        raise ValueError(f"temp must be > 0, got {temp}")
    if not 0.0 <= mix <= 1.0:
        raise ValueError(f"mix must be in [0, 1], got {mix}")
    H, S, A, B = game.shape
    mu = (1 - mix) * _softmax(rng.standard_normal((H, S, A)) / temp) + mix / A
    nu = (1 - mix) * _softmax(rng.standard_normal((H, S, B)) / temp) + mix / B
    return mu, nu


def uniform_policies(H: int, S: int, A: int, B: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniform policies (the ablation's reference policies)."""
    return np.full((H, S, A), 1.0 / A), np.full((H, S, B), 1.0 / B)


def _sample_rows(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One categorical draw per row of ``probs`` [n, k] by inverse CDF (vectorised)."""
    u = rng.random(probs.shape[0])
    cdf = np.cumsum(probs, axis=1)
    idx = (cdf < u[:, None]).sum(axis=1)
    return np.minimum(idx, probs.shape[1] - 1)  # guard against cdf[-1] = 1 - eps < u


def sample_dataset(game: Game, mu_b: np.ndarray, nu_b: np.ndarray, n: int,
                   rng: np.random.Generator) -> Dataset:
    """Sample n i.i.d. episodes (s_1, a_1, b_1, r_1, ..., s_H, a_H, b_H, r_H) from (mu_b, nu_b).

    All episodes advance together (vectorised over episodes, a loop over h only), and only the
    sufficient statistics are kept.

    Returns
    -------
    Dataset
        Counts satisfy ``N.sum() == n * H`` and ``N_next.sum(-1) == N``.
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n}")
    n = int(n)
    H, S, A, B = game.shape
    N = np.zeros((H, S * A * B))
    R = np.zeros((H, S * A * B))
    N_next = np.zeros((H, S * A * B * S))
    s = _sample_rows(np.broadcast_to(game.rho, (n, S)), rng)
    for h in range(H):
        a = _sample_rows(mu_b[h, s], rng)
        b = _sample_rows(nu_b[h, s], rng)
        s_next = _sample_rows(game.P[h, s, a, b], rng)
        cell = (s * A + a) * B + b
        N[h] = np.bincount(cell, minlength=S * A * B)
        R[h] = np.bincount(cell, weights=game.r[h, s, a, b], minlength=S * A * B)
        N_next[h] = np.bincount(cell * S + s_next, minlength=S * A * B * S)
        s = s_next
    return Dataset(N=N.reshape(H, S, A, B), R=R.reshape(H, S, A, B),
                   N_next=N_next.reshape(H, S, A, B, S), n=n)


def exact_dataset(game: Game) -> Dataset:
    """The "true model" as a Dataset: one virtual visit per cell with the exact expectations.

    With N = 1, R = r and N_next = P, the empirical means used by
    :func:`repro.rose_sosmd.algos.estimate_q` are exactly r + P V, so a plug-in method run on this
    dataset solves the true game (used to test that ROSE on the true model has gap 0). ``n`` is
    set to 1; bonus-based baselines are meaningless on it.
    """
    H, S, A, B = game.shape
    return Dataset(N=np.ones((H, S, A, B)), R=game.r.copy(), N_next=game.P.copy(), n=1)


def empty_cell_fraction(dataset: Dataset) -> float:
    """Fraction of (h, s, a, b) cells with no data (their Q-hat is set to 0)."""
    return float(np.mean(dataset.N == 0))


def dataset_hash(dataset: Dataset, length: int = 12) -> str:
    """A short SHA-256 fingerprint of a dataset's sufficient statistics (n, N, R, N_next).

    Two datasets hash the same exactly when every count and reward sum agrees, so a reader can check
    from the ledger that every method saw the same data at each (game, n), and that the T and beta
    sweeps re-drew the very datasets of the rate sweep.
    """
    h = hashlib.sha256()
    h.update(np.int64(dataset.n).tobytes())
    for arr in (dataset.N, dataset.R, dataset.N_next):
        h.update(np.ascontiguousarray(arr, dtype=np.float64).tobytes())
    return h.hexdigest()[:length]
