"""ROSE, SOS-MD and the baselines (plug-in Nash VI, PNVI / VI-LCB-Game, ROSE-LCB).

Chapter 08 (arXiv 2605.13025). All methods are backward recursions h = H..1 over the same
least-squares Q estimate (tabular: empirical means, :func:`estimate_q`):

    Q_h(s, a, b) = mean over data at (h, s, a, b) of  r + V_{h+1}(s'),   unvisited cells -> 0.

* :func:`rose` -- Regularized Offline Sequential Equilibrium: solve every KL-regularised stage
  game on Q_h exactly and back up its regularised value (plug-in on the regularised game).
* :func:`sos_md` -- Sequential Offline Self-play Mirror Descent: T simultaneous magnetic-mirror-
  descent steps per stage from (pi_ref, nu_ref); last iterate; back up the regularised payoff of
  the iterates actually output.
* :func:`plugin_nash` -- unregularised plug-in Nash value iteration (beta = 0, no bonus), LP per state.
* :func:`pnvi` -- pessimistic Nash VI (Cui & Du 2022; Zhong et al. 2022; Yan et al. 2022):
  lower/upper Q with bonus b = c sqrt(H^2 log(SABHn/delta) / max(1, N)), clipped to [0, H-h+1];
  the max-player plays the NE of the lower game, the min-player that of the upper game.
* :func:`rose_lcb` -- our construction for claim C4: ROSE run on Q - b (max-player) and on Q + b
  (min-player), same bonus, no clipping.

The paper's full text was not available; algorithms are reconstructed from the abstract and the
chapter card, in the tabular case. Every function returns policies (pi (H,S,A), nu (H,S,B)).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .game import Dataset
from .stage import (md_iterate, reg_stage_value, resolve_solver, solve_regularized, zero_sum_lp_batch,
                    EtaRule, Solver)

__all__ = ["estimate_q", "bonus", "rose", "sos_md", "plugin_nash", "pnvi", "rose_lcb"]

Refs = tuple[np.ndarray, np.ndarray]


def estimate_q(dataset: Dataset, h: int, V_next: np.ndarray,
               features: np.ndarray | None = None) -> np.ndarray:
    """Least-squares estimate of Q_h = r_h + P_h V_{h+1} from the data at step h.

    Parameters
    ----------
    dataset : Dataset
    h : int
        Step (0-based).
    V_next : ndarray (S,)
        Value estimate at step h+1 (zeros at the last step).
    features : ndarray (S, A, B, d), optional
        Feature map phi(s, a, b). ``None`` (default) is the tabular one-hot case, computed directly
        as empirical means. With features, Q = phi theta with theta the minimum-norm least-squares
        solution over all samples (cells weighted by their counts); one-hot features reproduce the
        default exactly (unvisited cells get theta = 0).

    Returns
    -------
    Q : ndarray (S, A, B)
    """
    N = dataset.N[h]
    total = dataset.R[h] + dataset.N_next[h] @ V_next          # sum over samples of r + V(s')
    if features is None:
        return np.divide(total, N, out=np.zeros_like(total), where=N > 0)
    S, A, B, d = features.shape
    Phi = features.reshape(-1, d)
    w = np.sqrt(N.reshape(-1))
    ybar = np.divide(total, N, out=np.zeros_like(total), where=N > 0).reshape(-1)
    theta = np.linalg.lstsq(w[:, None] * Phi, w * ybar, rcond=None)[0]
    return (Phi @ theta).reshape(S, A, B)


def bonus(dataset: Dataset, c: float, delta: float) -> np.ndarray:
    """Hoeffding-style bonus b_h(s,a,b) = c sqrt(H^2 log(S A B H n / delta) / max(1, N_h(s,a,b)))."""
    H, S, A, B = dataset.shape
    L = np.log(S * A * B * H * dataset.n / delta)
    return c * np.sqrt(H ** 2 * L / np.maximum(1.0, dataset.N))


def _check_refs(dataset: Dataset, refs: Refs) -> Refs:
    H, S, A, B = dataset.shape
    pi_ref, nu_ref = (np.asarray(x, dtype=np.float64) for x in refs)
    if pi_ref.shape != (H, S, A) or nu_ref.shape != (H, S, B):
        raise ValueError(f"refs must have shapes {(H, S, A)} and {(H, S, B)}, "
                         f"got {pi_ref.shape} and {nu_ref.shape}")
    return pi_ref, nu_ref


def _rose_recursion(dataset: Dataset, beta: float, refs: Refs, shift: np.ndarray | None,
                    tol: float, max_iter: int, solver: str, features, info: dict | None):
    """ROSE backward induction on Q_h + shift_h (shift = -b / +b for ROSE-LCB, None for ROSE)."""
    H, S, A, B = dataset.shape
    pi_ref, nu_ref = refs
    pi, nu = np.empty((H, S, A)), np.empty((H, S, B))
    V = np.zeros((H + 1, S))
    iters = np.zeros((H, S), dtype=np.int64)
    Qs = np.empty((H, S, A, B))
    for h in range(H - 1, -1, -1):
        Q = estimate_q(dataset, h, V[h + 1], features)
        if shift is not None:
            Q = Q + shift[h]
        Qs[h] = Q
        pi[h], nu[h], V[h], iters[h] = solve_regularized(Q, pi_ref[h], nu_ref[h], beta, tol=tol,
                                                         max_iter=max_iter, solver=solver)
    if info is not None:
        info.update(V=V[:H], iters=iters, Q=Qs)
    return pi, nu


def rose(dataset: Dataset, beta: float, refs: Refs, tol: float = 1e-11, max_iter: int = 20_000,
         solver: Solver | None = None, features: np.ndarray | None = None,
         info: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """ROSE: plug-in regularised equilibrium, solved exactly stage by stage (backward in h).

    Parameters
    ----------
    dataset : Dataset
    beta : float
        KL weight (> 0).
    refs : (pi_ref (H,S,A), nu_ref (H,S,B))
        Reference policies of the KL terms.
    tol, max_iter : stage-solver residual tolerance and iteration cap (see ``solve_regularized``)
    solver : "cpp", "numpy" or None (kernel if built)
    features : optional feature map for :func:`estimate_q`
    info : dict, optional
        If given, filled with ``V`` (H, S) regularised values, ``iters`` (H, S) solver iterations
        and ``Q`` (H, S, A, B) the estimated stage payoffs that were solved.

    Returns
    -------
    pi : ndarray (H, S, A), nu : ndarray (H, S, B)
    """
    refs = _check_refs(dataset, refs)
    return _rose_recursion(dataset, beta, refs, None, tol, max_iter, resolve_solver(solver),
                           features, info)


def sos_md(dataset: Dataset, beta: float, refs: Refs, T: int, eta: EtaRule = "auto",
           solver: Solver | None = None, features: np.ndarray | None = None,
           info: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """SOS-MD: backward in h, least-squares Q, then T self-play MMD steps; output the last iterate.

    V_h(s) is the regularised payoff of the output (pi_h^T, nu_h^T) on Q_h, so later stages are
    fixed at SOS-MD's own iterates (model-free: no exact stage solution is ever used).

    Parameters
    ----------
    T : int
        Self-play iterations per stage.
    eta : "auto" (0.5 / (rho + beta) per state), another rule of ``stage.step_sizes``, or a float.
    Other parameters as in :func:`rose`.

    Returns
    -------
    pi : ndarray (H, S, A), nu : ndarray (H, S, B)
    """
    pi_ref, nu_ref = _check_refs(dataset, refs)
    solver = resolve_solver(solver)
    H, S, A, B = dataset.shape
    pi, nu = np.empty((H, S, A)), np.empty((H, S, B))
    V = np.zeros((H + 1, S))
    for h in range(H - 1, -1, -1):
        Q = estimate_q(dataset, h, V[h + 1], features)
        pi[h], nu[h] = md_iterate(Q, pi_ref[h], nu_ref[h], beta, T, eta=eta, solver=solver)
        V[h] = reg_stage_value(Q, pi[h], nu[h], pi_ref[h], nu_ref[h], beta)
    if info is not None:
        info.update(V=V[:H])
    return pi, nu


def plugin_nash(dataset: Dataset, features: np.ndarray | None = None,
                ) -> tuple[np.ndarray, np.ndarray]:
    """Plug-in Nash value iteration without pessimism (beta = 0, c = 0): NE of Q_h by LP per state."""
    H, S, A, B = dataset.shape
    pi, nu = np.empty((H, S, A)), np.empty((H, S, B))
    V = np.zeros((H + 1, S))
    for h in range(H - 1, -1, -1):
        Q = estimate_q(dataset, h, V[h + 1], features)
        pi[h], nu[h], V[h] = zero_sum_lp_batch(Q)
    return pi, nu


def pnvi(dataset: Dataset, c: float, delta: float = 0.1,
         features: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pessimistic Nash VI (PNVI / VI-LCB-Game) with bonus scale c.

    Lower game Q_lo = clip(Q_hat(V_lo) - b, 0, H-h+1), upper game Q_hi = clip(Q_hat(V_hi) + b, 0,
    H-h+1) (1-based h), empty cells Q_lo = 0 and Q_hi = H-h+1; V_lo / V_hi are the NE values.
    The max-player outputs its NE strategy of the lower game, the min-player that of the upper game.
    """
    H, S, A, B = dataset.shape
    b = bonus(dataset, c, delta)
    empty = dataset.N == 0
    pi, nu = np.empty((H, S, A)), np.empty((H, S, B))
    V_lo, V_hi = np.zeros(S), np.zeros(S)
    for h in range(H - 1, -1, -1):
        cap = float(H - h)                                   # H - h + 1 in 1-based time
        Q_lo = np.clip(estimate_q(dataset, h, V_lo, features) - b[h], 0.0, cap)
        Q_hi = np.clip(estimate_q(dataset, h, V_hi, features) + b[h], 0.0, cap)
        Q_lo[empty[h]] = 0.0
        Q_hi[empty[h]] = cap
        pi[h], _, V_lo = zero_sum_lp_batch(Q_lo)
        _, nu[h], V_hi = zero_sum_lp_batch(Q_hi)
    return pi, nu


def rose_lcb(dataset: Dataset, beta: float, refs: Refs, c: float, delta: float = 0.1,
             tol: float = 1e-11, max_iter: int = 20_000, solver: Solver | None = None,
             features: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """ROSE-LCB (claim C4): ROSE on the pessimistic Q - b for pi and on Q + b for nu (not clipped).

    Isolates the effect of pessimism: same beta, same references, same exact solver as ROSE;
    b is the PNVI bonus with scale c.
    """
    refs = _check_refs(dataset, refs)
    solver = resolve_solver(solver)
    b = bonus(dataset, c, delta)
    pi, _ = _rose_recursion(dataset, beta, refs, -b, tol, max_iter, solver, features, None)
    _, nu = _rose_recursion(dataset, beta, refs, +b, tol, max_iter, solver, features, None)
    return pi, nu
