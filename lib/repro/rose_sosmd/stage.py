"""KL-regularised zero-sum stage games: exact solver, self-play mirror descent, and the LP.

Chapter 08 (ROSE / SOS-MD, arXiv 2605.13025). At every step h and state s both algorithms of the
paper solve, exactly (ROSE) or by T self-play updates (SOS-MD), the regularised matrix game

    max_p min_q  p^T Q q - beta KL(p || p_ref) + beta KL(q || q_ref),                      (stage)

which is strongly concave-convex with a unique solution characterised by the fixed point

    p = softmax(log p_ref + Q q / beta),    q = softmax(log q_ref - Q^T p / beta).          (FP)

Update rule: the magnetic mirror descent (MMD) step of Sokota et al. (2023) in closed form,

    p' ∝ p^{1/(1+eta beta)} p_ref^{eta beta/(1+eta beta)} exp(eta Q q / (1+eta beta)),       (MMD)

and the analogue for q with gradient -Q^T p. SOS-MD runs T *simultaneous* MMD steps from
(p_ref, q_ref) and keeps the last iterate (:func:`md_iterate`). ROSE needs the exact solution:
we use the extragradient (mirror-prox) version of (MMD), gradients re-evaluated at the midpoint,
with eta = 1 / (2 rho + beta), rho = (max Q - min Q) / 2, iterated until the (FP) residual is below
``tol`` (:func:`solve_regularized`); cf. Cen et al. (2021) for linear convergence of extragradient
methods on entropy-regularised games. The naive best-response iteration p <- softmax(log p_ref +
Qq/beta) is *not* used: it is not a contraction once rho/beta > 1.

Everything is batched over a leading state axis: Q has shape (S, A, B), p (S, A), q (S, B). Adding
a constant to Q changes neither the solution nor the iterates, hence step sizes use the half-range
rho. Iterates are kept in log space. The compiled kernel ``_kernels.mmd_solve_batch`` implements the
same two loops; the numpy functions here are its reference (``solver="numpy"``).

The unregularised (beta = 0) stage game is the LP solved by :func:`zero_sum_lp` (baselines only).
"""
from __future__ import annotations

from typing import Literal, Union

import numpy as np
from scipy.optimize import linprog

try:  # compiled kernel; the numpy reference below is the fallback
    from . import _kernels  # type: ignore[attr-defined]
    HAVE_KERNEL = True
except ImportError:  # pragma: no cover - depends on the build
    _kernels = None
    HAVE_KERNEL = False

__all__ = [
    "HAVE_KERNEL",
    "ConvergenceError",
    "half_range",
    "step_sizes",
    "kl",
    "mmd_step",
    "md_iterate",
    "solve_regularized",
    "fixed_point_residual",
    "reg_stage_value",
    "stage_duality_gap",
    "zero_sum_lp",
    "zero_sum_lp_batch",
]

Solver = Literal["cpp", "numpy"]
EtaRule = Union[float, np.ndarray, Literal["auto", "aggressive", "maxabs", "rose"]]


class ConvergenceError(RuntimeError):
    """The extragradient solver did not reach the residual tolerance within ``max_iter``."""


# ----------------------------------------------------------------------------- helpers

def resolve_solver(solver: str | None) -> str:
    """``None`` -> "cpp" if the compiled kernel imports, else "numpy"; validates the name."""
    if solver is None:
        return "cpp" if HAVE_KERNEL else "numpy"
    if solver not in ("cpp", "numpy"):
        raise ValueError(f"solver must be 'cpp', 'numpy' or None, got {solver!r}")
    if solver == "cpp" and not HAVE_KERNEL:
        raise ImportError("solver='cpp' requested but repro.rose_sosmd._kernels is not built")
    return solver


def _as_batch(Q: np.ndarray, p_ref: np.ndarray, q_ref: np.ndarray):
    """Promote a single (A, B) game to a batch of one; check shapes; return float64 C arrays."""
    Q = np.asarray(Q, dtype=np.float64)
    single = Q.ndim == 2
    if single:
        Q, p_ref, q_ref = Q[None], np.asarray(p_ref)[None], np.asarray(q_ref)[None]
    if Q.ndim != 3:
        raise ValueError(f"Q must have shape (S, A, B) or (A, B), got {Q.shape}")
    S, A, B = Q.shape
    p_ref = np.ascontiguousarray(np.broadcast_to(p_ref, (S, A)), dtype=np.float64)
    q_ref = np.ascontiguousarray(np.broadcast_to(q_ref, (S, B)), dtype=np.float64)
    if np.any(p_ref <= 0) or np.any(q_ref <= 0):
        raise ValueError("reference policies must have full support (all entries > 0)")
    return np.ascontiguousarray(Q), p_ref, q_ref, single


def half_range(Q: np.ndarray) -> np.ndarray:
    """rho(Q) = (max Q - min Q) / 2 per state; Q has shape (S, A, B)."""
    return 0.5 * (Q.max(axis=(-2, -1)) - Q.min(axis=(-2, -1)))


def step_sizes(Q: np.ndarray, beta: float, rule: EtaRule = "auto") -> np.ndarray:
    """Per-state MMD step size eta, shape (S,).

    rule: ``"auto"`` 0.5/(rho+beta) (SOS-MD default), ``"rose"`` 1/(2 rho+beta) (extragradient),
    ``"aggressive"`` 1/(rho+beta), ``"maxabs"`` 0.5/(max|Q|+beta), or a positive float / array.
    """
    S = Q.shape[0]
    if isinstance(rule, str):
        rho = half_range(Q)
        if rule == "auto":
            eta = 0.5 / (rho + beta)
        elif rule == "rose":
            eta = 1.0 / (2 * rho + beta)
        elif rule == "aggressive":
            eta = 1.0 / (rho + beta)
        elif rule == "maxabs":
            eta = 0.5 / (np.abs(Q).max(axis=(-2, -1)) + beta)
        else:
            raise ValueError(f"unknown eta rule {rule!r}")
    else:
        eta = np.broadcast_to(np.asarray(rule, dtype=np.float64), (S,))
        if np.any(eta <= 0):
            raise ValueError("eta must be > 0")
    return np.ascontiguousarray(eta, dtype=np.float64)


def kl(p: np.ndarray, p_ref: np.ndarray) -> np.ndarray:
    """KL(p || p_ref) over the last axis, with 0 log 0 = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(p > 0, p * (np.log(p) - np.log(p_ref)), 0.0)
    return t.sum(axis=-1)


def _lse(z: np.ndarray) -> np.ndarray:
    m = z.max(axis=-1, keepdims=True)
    return m + np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def _grad_p(Q: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Max-player gradient Q q, shape (S, A)."""
    return (Q * q[:, None, :]).sum(axis=-1)


def _grad_q(Q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Min-player (descent) gradient -Q^T p, shape (S, B)."""
    return -(Q * p[:, :, None]).sum(axis=-2)


def _mmd_log(lx: np.ndarray, lref: np.ndarray, g: np.ndarray, eta: np.ndarray,
             beta: float) -> np.ndarray:
    """(MMD) in log space: log x' = (log x + eta beta log x_ref + eta g)/(1 + eta beta) - logZ."""
    eb = (eta * beta)[:, None]
    z = (lx + eb * lref + eta[:, None] * g) / (1.0 + eb)
    return z - _lse(z)


# ----------------------------------------------------------------------------- MMD / SOS-MD

def mmd_step(p: np.ndarray, q: np.ndarray, Q: np.ndarray, p_ref: np.ndarray, q_ref: np.ndarray,
             beta: float, eta: EtaRule) -> tuple[np.ndarray, np.ndarray]:
    """One simultaneous (MMD) step for both players, batched over states.

    Parameters
    ----------
    p, q : ndarray, shapes (S, A), (S, B)
        Current strategies (full support).
    Q : ndarray, shape (S, A, B)
        Stage payoff to the max-player.
    p_ref, q_ref : ndarray
        Reference ("magnet") policies.
    beta : float
        KL weight.
    eta : float, array (S,) or rule name (see :func:`step_sizes`)

    Returns
    -------
    (p', q') : next strategies.
    """
    Q, p_ref, q_ref, single = _as_batch(Q, p_ref, q_ref)
    p, q = np.atleast_2d(p), np.atleast_2d(q)
    e = step_sizes(Q, beta, eta)
    lp = _mmd_log(np.log(p), np.log(p_ref), _grad_p(Q, q), e, beta)
    lq = _mmd_log(np.log(q), np.log(q_ref), _grad_q(Q, p), e, beta)
    p2, q2 = np.exp(lp), np.exp(lq)
    return (p2[0], q2[0]) if single else (p2, q2)


def _md_numpy(Q, p_ref, q_ref, beta, eta, T):
    lpr, lqr = np.log(p_ref), np.log(q_ref)
    lp, lq = lpr.copy(), lqr.copy()
    for _ in range(T):
        p, q = np.exp(lp), np.exp(lq)
        lp, lq = _mmd_log(lp, lpr, _grad_p(Q, q), eta, beta), _mmd_log(lq, lqr, _grad_q(Q, p), eta, beta)
    return np.exp(lp), np.exp(lq)


def md_iterate(Q: np.ndarray, p_ref: np.ndarray, q_ref: np.ndarray, beta: float, T: int,
               eta: EtaRule = "auto", solver: Solver | None = None) -> tuple[np.ndarray, np.ndarray]:
    """SOS-MD's inner loop: T simultaneous (MMD) steps from (p_ref, q_ref); returns the last iterate.

    ``eta="auto"`` is 0.5 / (rho + beta) per state (the card's decision); see :func:`step_sizes`.
    """
    Q, p_ref, q_ref, single = _as_batch(Q, p_ref, q_ref)
    if int(T) != T or T < 0:
        raise ValueError(f"T must be a non-negative integer, got {T}")
    e = step_sizes(Q, beta, eta)
    if resolve_solver(solver) == "cpp":
        p, q, _ = _kernels.mmd_solve_batch(Q, p_ref, q_ref, float(beta), e, int(T), 0.0, False)
    else:
        p, q = _md_numpy(Q, p_ref, q_ref, beta, e, int(T))
    return (p[0], q[0]) if single else (p, q)


# ----------------------------------------------------------------------------- exact solver

def _residual_log(Q, lp, lq, lpr, lqr, beta):
    """(FP) residual per state from log iterates; also returns (p, q)."""
    p, q = np.exp(lp), np.exp(lq)
    zp = lpr + _grad_p(Q, q) / beta
    zq = lqr + _grad_q(Q, p) / beta
    rp = np.abs(p - np.exp(zp - _lse(zp))).max(axis=-1)
    rq = np.abs(q - np.exp(zq - _lse(zq))).max(axis=-1)
    return np.maximum(rp, rq), p, q


def fixed_point_residual(Q: np.ndarray, p: np.ndarray, q: np.ndarray, p_ref: np.ndarray,
                         q_ref: np.ndarray, beta: float) -> np.ndarray:
    """max(|p - softmax(log p_ref + Qq/beta)|_inf, |q - softmax(log q_ref - Q^T p/beta)|_inf) per state."""
    Q, p_ref, q_ref, single = _as_batch(Q, p_ref, q_ref)
    p, q = np.atleast_2d(p), np.atleast_2d(q)
    with np.errstate(divide="ignore"):
        r, _, _ = _residual_log(Q, np.log(p), np.log(q), np.log(p_ref), np.log(q_ref), beta)
    return r[0] if single else r


def _extragradient_numpy(Q, p_ref, q_ref, beta, eta, max_iter, tol):
    """Batched extragradient MMD; a state stops updating once its residual is <= tol."""
    S = Q.shape[0]
    lpr, lqr = np.log(p_ref), np.log(q_ref)
    lp, lq = lpr.copy(), lqr.copy()
    iters = np.zeros(S, dtype=np.int64)
    for it in range(max_iter + 1):
        res, p, q = _residual_log(Q, lp, lq, lpr, lqr, beta)
        active = res > tol
        if it == max_iter or not active.any():
            break
        # midpoint: one (MMD) step with gradients at the current point
        lp_m = _mmd_log(lp, lpr, _grad_p(Q, q), eta, beta)
        lq_m = _mmd_log(lq, lqr, _grad_q(Q, p), eta, beta)
        # update: (MMD) step from the current point with gradients at the midpoint
        lp_n = _mmd_log(lp, lpr, _grad_p(Q, np.exp(lq_m)), eta, beta)
        lq_n = _mmd_log(lq, lqr, _grad_q(Q, np.exp(lp_m)), eta, beta)
        lp = np.where(active[:, None], lp_n, lp)
        lq = np.where(active[:, None], lq_n, lq)
        iters += active
    return np.exp(lp), np.exp(lq), iters


def solve_regularized(Q: np.ndarray, p_ref: np.ndarray, q_ref: np.ndarray, beta: float,
                      tol: float = 1e-11, max_iter: int = 20_000, solver: Solver | None = None,
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Solve the regularised stage games (stage) exactly, batched over states (ROSE's solver).

    Extragradient (MMD) with eta = 1 / (2 rho + beta) per state, started at (p_ref, q_ref),
    until the (FP) residual is <= ``tol`` in every state.

    Parameters
    ----------
    Q : ndarray, shape (S, A, B) or (A, B)
    p_ref, q_ref : ndarray, shapes (S, A), (S, B) (or broadcastable), full support
    beta : float, > 0
    tol : float
        Fixed-point residual tolerance (sup norm).
    max_iter : int
        Iteration cap per state.
    solver : "cpp", "numpy" or None (kernel if built)

    Returns
    -------
    p, q : equilibrium strategies
    value : ndarray (S,), the regularised game value
    n_iter : ndarray (S,) of int, extragradient iterations used

    Raises
    ------
    ConvergenceError
        If some state is still above ``tol`` after ``max_iter`` iterations.
    """
    if beta <= 0:
        raise ValueError(f"beta must be > 0 for the regularised game, got {beta}")
    Q, p_ref, q_ref, single = _as_batch(Q, p_ref, q_ref)
    eta = step_sizes(Q, beta, "rose")
    if resolve_solver(solver) == "cpp":
        p, q, iters = _kernels.mmd_solve_batch(Q, p_ref, q_ref, float(beta), eta, int(max_iter),
                                               float(tol), True)
    else:
        p, q, iters = _extragradient_numpy(Q, p_ref, q_ref, beta, eta, int(max_iter), tol)
    capped = iters >= max_iter
    if capped.any():
        res = fixed_point_residual(Q, p, q, p_ref, q_ref, beta)
        bad = capped & (res > tol)
        if bad.any():
            ratio = half_range(Q)[bad] / beta
            raise ConvergenceError(
                f"extragradient MMD did not reach residual {tol:g} in {max_iter} iterations in "
                f"{bad.sum()} of {len(bad)} stage games (worst residual {res[bad].max():.3g}, "
                f"rho/beta up to {ratio.max():.3g}); raise max_iter or tol, or increase beta")
    value = reg_stage_value(Q, p, q, p_ref, q_ref, beta)
    if single:
        return p[0], q[0], value[0], iters[0]
    return p, q, value, iters


def reg_stage_value(Q: np.ndarray, p: np.ndarray, q: np.ndarray, p_ref: np.ndarray,
                    q_ref: np.ndarray, beta: float) -> np.ndarray:
    """Regularised payoff p^T Q q - beta KL(p||p_ref) + beta KL(q||q_ref), batched over states."""
    bil = np.einsum("...a,...ab,...b->...", p, Q, q)
    return bil - beta * kl(p, p_ref) + beta * kl(q, q_ref)


def stage_duality_gap(Q: np.ndarray, p: np.ndarray, q: np.ndarray, p_ref: np.ndarray,
                      q_ref: np.ndarray, beta: float) -> np.ndarray:
    """Duality gap of (p, q) in (stage): max_p' f(p', q) - min_q' f(p, q'), via the soft best responses.

    max_p' f(p', q) = beta log sum_a p_ref(a) exp((Qq)_a / beta) + beta KL(q || q_ref), and
    min_q' f(p, q') = -beta log sum_b q_ref(b) exp(-(Q^T p)_b / beta) - beta KL(p || p_ref).
    """
    Q, p_ref, q_ref, single = _as_batch(Q, p_ref, q_ref)
    p, q = np.atleast_2d(p), np.atleast_2d(q)
    best_max = beta * _lse(np.log(p_ref) + _grad_p(Q, q) / beta)[:, 0] + beta * kl(q, q_ref)
    best_min = -beta * _lse(np.log(q_ref) + _grad_q(Q, p) / beta)[:, 0] - beta * kl(p, p_ref)
    gap = best_max - best_min
    return gap[0] if single else gap


# ----------------------------------------------------------------------------- LP (beta = 0)

def zero_sum_lp(Q: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Nash equilibrium of the matrix game max_p min_q p^T Q q by linear programming (HiGHS).

    Primal: max v s.t. (Q^T p)_b >= v for all b, p in the simplex. The min-player's equilibrium
    strategy is read off the duals of the B inequality constraints.

    Returns
    -------
    p : ndarray (A,), q : ndarray (B,), value : float
    """
    Q = np.asarray(Q, dtype=np.float64)
    A, B = Q.shape
    c = np.zeros(A + 1)
    c[-1] = -1.0                                         # minimise -v
    A_ub = np.hstack([-Q.T, np.ones((B, 1))])            # v - (Q^T p)_b <= 0
    A_eq = np.hstack([np.ones((1, A)), np.zeros((1, 1))])
    bounds = [(0.0, None)] * A + [(None, None)]
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(B), A_eq=A_eq, b_eq=[1.0], bounds=bounds,
                  method="highs")
    if res.status != 0:  # pragma: no cover - a finite matrix game always has a solution
        raise RuntimeError(f"linprog failed: {res.message}")
    p = np.clip(res.x[:A], 0.0, None)
    q = np.clip(-res.ineqlin.marginals, 0.0, None)
    return p / p.sum(), q / q.sum(), float(res.x[-1])


def zero_sum_lp_batch(Q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`zero_sum_lp` over a batch Q (S, A, B) (a plain loop; LPs appear only in baselines)."""
    out = [zero_sum_lp(Qs) for Qs in Q]
    return (np.array([o[0] for o in out]), np.array([o[1] for o in out]),
            np.array([o[2] for o in out]))
