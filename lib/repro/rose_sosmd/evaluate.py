"""Exact evaluation of policy pairs in the true game: regularised and unregularised duality gaps.

Chapter 08 (arXiv 2605.13025). The regularised value of (pi, nu) with references (pi_ref, nu_ref) is

    V_beta^{pi,nu} = E[ sum_h r_h - beta KL(pi_h(.|s_h) || pi_ref) + beta KL(nu_h(.|s_h) || nu_ref) ],

and the regularised duality gap is Gap_beta(pi, nu) = max_pi' V_beta^{pi',nu} - min_nu' V_beta^{pi,nu'}.
Each best response is a KL-regularised single-agent MDP, solved exactly by backward induction with
the soft Bellman operator: for the max-player, V_h(s) = beta log sum_a pi_ref(a|s) exp(Q_h(s,a)/beta)
and pi_h ∝ pi_ref exp(Q_h / beta), the opponent's KL entering as a constant. The unregularised gap
(beta = 0, hard max / min backward induction) is reported for all methods; the two gaps are
different objects and never compared with each other.
"""
from __future__ import annotations

from typing import Literal

import numpy as np

from .game import Game
from .stage import kl

__all__ = ["reg_value", "reg_best_response", "reg_gap", "unreg_value", "unreg_best_response",
           "unreg_gap", "q_estimation_error"]

Refs = tuple[np.ndarray, np.ndarray]


def _lse(z: np.ndarray) -> np.ndarray:
    m = z.max(axis=-1)
    return m + np.log(np.exp(z - m[..., None]).sum(axis=-1))


def _backup(game: Game, h: int, V_next: np.ndarray) -> np.ndarray:
    """Q_h(s, a, b) = r_h(s, a, b) + sum_s' P_h(s'|s, a, b) V_{h+1}(s')."""
    return game.r[h] + game.P[h] @ V_next


def reg_value(game: Game, pi: np.ndarray, nu: np.ndarray, beta: float, refs: Refs) -> float:
    """Regularised value V_beta^{pi,nu} = rho^T V_1 of the policy pair in the true game."""
    pi_ref, nu_ref = refs
    H, S, A, B = game.shape
    V = np.zeros(S)
    for h in range(H - 1, -1, -1):
        Q = _backup(game, h, V)
        V = (np.einsum("sa,sab,sb->s", pi[h], Q, nu[h])
             - beta * kl(pi[h], pi_ref[h]) + beta * kl(nu[h], nu_ref[h]))
    return float(game.rho @ V)


def reg_best_response(game: Game, fixed: np.ndarray, player: Literal["max", "min"], beta: float,
                      refs: Refs) -> tuple[np.ndarray, float]:
    """Regularised best response of ``player`` to the opponent's fixed policy (soft Bellman).

    Parameters
    ----------
    fixed : ndarray
        The opponent's policy: nu (H,S,B) if ``player == "max"``, pi (H,S,A) if ``player == "min"``.
    player : "max" or "min"
        Who best-responds.

    Returns
    -------
    policy : ndarray, the best response; value : float, max_pi' V^{pi',nu} (or min_nu' V^{pi,nu'}).
    """
    if beta <= 0:
        raise ValueError("beta must be > 0; use unreg_best_response for beta = 0")
    pi_ref, nu_ref = refs
    H, S, A, B = game.shape
    V = np.zeros(S)
    br = np.empty((H, S, A if player == "max" else B))
    for h in range(H - 1, -1, -1):
        Q = _backup(game, h, V)
        if player == "max":
            q_a = np.einsum("sab,sb->sa", Q, fixed[h]) + beta * kl(fixed[h], nu_ref[h])[:, None]
            z = np.log(pi_ref[h]) + q_a / beta
            V = beta * _lse(z)
        elif player == "min":
            q_b = np.einsum("sab,sa->sb", Q, fixed[h]) - beta * kl(fixed[h], pi_ref[h])[:, None]
            z = np.log(nu_ref[h]) - q_b / beta
            V = -beta * _lse(z)
        else:
            raise ValueError(f"player must be 'max' or 'min', got {player!r}")
        br[h] = np.exp(z - _lse(z)[:, None])
    return br, float(game.rho @ V)


def reg_gap(game: Game, pi: np.ndarray, nu: np.ndarray, beta: float, refs: Refs) -> float:
    """Regularised duality gap max_pi' V_beta^{pi',nu} - min_nu' V_beta^{pi,nu'} (>= 0)."""
    _, up = reg_best_response(game, nu, "max", beta, refs)
    _, lo = reg_best_response(game, pi, "min", beta, refs)
    return up - lo


def unreg_value(game: Game, pi: np.ndarray, nu: np.ndarray) -> float:
    """Unregularised value E[sum_h r_h] of (pi, nu) in the true game."""
    H, S, A, B = game.shape
    V = np.zeros(S)
    for h in range(H - 1, -1, -1):
        V = np.einsum("sa,sab,sb->s", pi[h], _backup(game, h, V), nu[h])
    return float(game.rho @ V)


def unreg_best_response(game: Game, fixed: np.ndarray, player: Literal["max", "min"],
                        ) -> tuple[np.ndarray, float]:
    """Deterministic best response (hard max / min backward induction); returns (policy, value)."""
    H, S, A, B = game.shape
    V = np.zeros(S)
    br = np.zeros((H, S, A if player == "max" else B))
    for h in range(H - 1, -1, -1):
        Q = _backup(game, h, V)
        if player == "max":
            q = np.einsum("sab,sb->sa", Q, fixed[h])
            k = q.argmax(axis=1)
        elif player == "min":
            q = np.einsum("sab,sa->sb", Q, fixed[h])
            k = q.argmin(axis=1)
        else:
            raise ValueError(f"player must be 'max' or 'min', got {player!r}")
        V = q[np.arange(S), k]
        br[h, np.arange(S), k] = 1.0
    return br, float(game.rho @ V)


def unreg_gap(game: Game, pi: np.ndarray, nu: np.ndarray) -> float:
    """Unregularised duality gap max_pi' V^{pi',nu} - min_nu' V^{pi,nu'} (>= 0)."""
    return unreg_best_response(game, nu, "max")[1] - unreg_best_response(game, pi, "min")[1]


def q_estimation_error(game: Game, Q_hat: np.ndarray, V_hat: np.ndarray) -> np.ndarray:
    """One-step estimation error |Q_hat_h - (r_h + P_h V_hat_{h+1})| of a plug-in recursion.

    ``Q_hat`` (H, S, A, B) are the stage payoffs the method solved and ``V_hat`` (H, S) its values;
    the comparison is with the exact Bellman backup of the *same* next-step values, so the error is
    that of the least-squares step alone (unvisited cells included: their Q_hat is 0). The fast-rate
    argument linearises the regularised best response p_ref exp(Q/beta) in this error, which needs
    it small compared with beta.
    """
    H = game.shape[0]
    V_next = np.vstack([np.asarray(V_hat)[1:], np.zeros((1, game.shape[1]))])
    exact = np.stack([_backup(game, h, V_next[h]) for h in range(H)])
    return np.abs(np.asarray(Q_hat) - exact)
