"""FMSS-SV: fast-mixing steady-state synthesis from samples of the transition model.

Chapter 04 (FMSS). The paper's learning setting is "offline": the model is estimated from data, then the
convex program is solved on the estimate. Our decisions where the abstract is silent (card, *Method*):

* data are generative: ``n`` independent next-state samples for every (s, a), P̂ = counts / n;
* **min-slack mode** (default): phase 1 (an LP) finds the smallest ℓ₁ stationarity violation
  ε̂ = min ‖Σ x(s,a) P̂(·|s,a) − μ‖₁ over x ≥ 0 with Σ_a x(s,a) = μ(s); phase 2 solves FMSS on P̂ with
  the stationarity equality relaxed to that distance ≤ ε̂ (1 + 10⁻⁶), or kept exact when ε̂ = 0;
* **theory-slack mode**: the relaxation ‖·‖₁ ≤ ε_n = c_ε √(S log(2SA/δ) / n), a high-probability bound on
  the model error that the *true* optimum x* satisfies with probability about 1 − δ;
* **plug-in** (a baseline): exact equality on P̂, which fails when μ is not achievable under P̂.

Every learned policy is evaluated in the *true* MDP.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from .synth import Synthesis, constraint_matrices, fmss_problem, solve_fmss_problem

__all__ = ["sample_kernel", "min_stationarity_violation", "theory_slack", "fmss_sv"]


def sample_kernel(P: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """P̂(·|s,a) = counts / n from ``n`` generative samples of every (s, a): one multinomial draw per pair."""
    S, A, _ = P.shape
    flat = P.reshape(S * A, S)
    flat = flat / flat.sum(axis=1, keepdims=True)
    counts = rng.multinomial(n, flat)
    return (counts / n).reshape(S, A, S)


def min_stationarity_violation(P_hat: np.ndarray, mu: np.ndarray) -> float:
    """Phase 1 of min-slack mode: ε̂ = min_x ‖T̂x − μ‖₁ s.t. Ex = μ, x ≥ 0 (an LP with t ≥ |T̂x − μ|)."""
    S, A, _ = P_hat.shape
    E, T = constraint_matrices(P_hat)
    n_x = S * A
    I = sp.eye(S)
    # variables [x, t]; minimise 1ᵀt;  T x − t ≤ μ,  −T x − t ≤ −μ,  E x = μ
    A_ub = sp.vstack([sp.hstack([T, -I]), sp.hstack([-T, -I])]).tocsr()
    b_ub = np.concatenate([mu, -mu])
    A_eq = sp.hstack([E, sp.csr_matrix((S, S))]).tocsr()
    c = np.concatenate([np.zeros(n_x), np.ones(S)])
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=mu, bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"phase-1 LP failed: {res.message}")
    return max(float(res.fun), 0.0)


def theory_slack(S: int, A: int, n: int, c_eps: float = 1.0, delta: float = 0.05) -> float:
    """ε_n = c_ε √(S log(2SA/δ) / n) (card, *Method*; vacuous — above 2 — for very small n)."""
    return float(c_eps * np.sqrt(S * np.log(2 * S * A / delta) / n))


def fmss_sv(P_hat: np.ndarray, mu: np.ndarray, n: int, mode: str = "min_slack", c_eps: float = 1.0,
            delta: float = 0.05, solver: str = "CLARABEL", zero_tol: float = 1e-9) -> tuple[Synthesis, float]:
    """FMSS on the estimated model ``P_hat``; returns (synthesis, slack used).

    ``mode``: ``"min_slack"`` (default), ``"theory"`` or ``"plugin"`` (exact equality on P̂). The value
    ``Synthesis.value`` is σ̂_n, the optimum of the program on P̂.
    """
    S, A, _ = P_hat.shape
    if mode == "min_slack":
        eps_hat = min_stationarity_violation(P_hat, mu)
        slack = None if eps_hat <= zero_tol else eps_hat * (1 + 1e-6)
    elif mode == "theory":
        slack = theory_slack(S, A, n, c_eps, delta)
    elif mode == "plugin":
        slack = None
    else:
        raise ValueError(f"mode must be 'min_slack', 'theory' or 'plugin'; got {mode!r}")
    prob, x = fmss_problem(P_hat, mu, slack=slack)
    return solve_fmss_problem(prob, x, P_hat, mu, solver), (0.0 if slack is None else slack)
