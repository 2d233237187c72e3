"""Policy synthesis for a prescribed steady state: the LP baselines, the convex FMSS program, the
non-convex direct SLEM search and the fastest-mixing-Markov-chain SDP.

Chapter 04 (FMSS). Everything is written in *occupation variables* x(s, a) = μ(s) π(a|s), in which
every constraint of the steady-state control problem is linear (Akshay, Bertrand, Haddad and Hélouët 2013):

    Σ_a x(s, a) = μ(s)                       for every s       (x is μ spread over actions)
    Σ_{s,a} x(s, a) P(s'|s, a) = μ(s')        for every s'      (μ is stationary for P_π)
    x ≥ 0.

The induced kernel K(x)(s, s') = Σ_a x(s, a) P(s'|s, a) = μ(s) P_π(s, s') is linear in x, so the
surrogate σ = ‖D^{−1/2} K(x) D^{−1/2} − √μ√μᵀ‖₂ = ‖D^{1/2}(P_π − 1μᵀ)D^{−1/2}‖₂ is a norm of an affine
function of x: the FMSS program below is convex (an SDP once cvxpy rewrites ``sigma_max``).

The surrogate is *our reconstruction* from the paper's abstract, which names a "tractable surrogate
objective that leads to a convex program" without giving it (see the chapter's card).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import cvxpy as cp
import numpy as np
import scipy.sparse as sp
from scipy.linalg import null_space
from scipy.optimize import linprog, minimize

from .mdp import induced_chain, max_inflow, slem, stationary

__all__ = [
    "Synthesis", "InfeasibleTarget", "constraint_matrices", "policy_from_occupation", "occupation",
    "steady_state_lp", "lp_vertices", "fmss_convex", "fmss_problem", "solve_fmss_problem",
    "fmss_nonconvex", "NonconvexResult", "fmmc_sdp", "diagnose_target",
]


class InfeasibleTarget(ValueError):
    """No Markovian policy has the requested μ as its stationary distribution."""


@dataclass
class Synthesis:
    """What a synthesis routine returns. ``pi`` is ``None`` unless a policy was actually found.

    status: ``"optimal"``, ``"optimal_inaccurate"`` (solver reached reduced accuracy; the policy is kept),
    ``"infeasible"`` (the target is not achievable; ``message`` says why) or ``"error"`` (solver failure).
    Times: ``solve_s`` wall seconds of building and solving, ``cpu_s`` CPU seconds of this process over the same
    interval (what the solve costs on an idle core; wall time also counts other processes on a shared machine),
    ``solver_s`` the solver's own report.
    """

    pi: np.ndarray | None
    value: float
    status: str
    message: str = ""
    x: np.ndarray | None = None
    solve_s: float = float("nan")
    solver_s: float = float("nan")
    cpu_s: float = float("nan")
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in ("optimal", "optimal_inaccurate") and self.pi is not None

    def require(self) -> np.ndarray:
        """The policy, or an exception with the message: an infeasible target never yields a policy."""
        if self.status == "infeasible":
            raise InfeasibleTarget(self.message)
        if not self.ok:
            raise RuntimeError(f"synthesis failed ({self.status}): {self.message}")
        return self.pi


# ---------------------------------------------------------------------------------------------- helpers
def constraint_matrices(P: np.ndarray) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """(E, T) with E x = (Σ_a x(s,a))_s and T x = (Σ_{s,a} x(s,a) P(s'|s,a))_{s'}; x is ``x[s*A + a]``."""
    S, A, _ = P.shape
    E = sp.kron(sp.eye(S), np.ones((1, A)), format="csr")
    T = sp.csr_matrix(P.reshape(S * A, S).T)
    return E, T


def policy_from_occupation(x: np.ndarray, S: int, A: int) -> np.ndarray:
    """π(a|s) = x(s,a) / Σ_a x(s,a), clipped at 0 and renormalised (uniform where a row is all zero)."""
    X = np.clip(np.asarray(x, float).reshape(S, A), 0.0, None)
    tot = X.sum(axis=1, keepdims=True)
    return np.where(tot > 0, X / np.where(tot > 0, tot, 1.0), 1.0 / A)


def occupation(pi: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """x(s,a) = μ(s) π(a|s), flattened to ``x[s*A + a]``."""
    return (mu[:, None] * pi).ravel()


def diagnose_target(P: np.ndarray, mu: np.ndarray) -> str:
    """A sentence saying why μ cannot be a steady state (the inflow bound of C7, when it applies)."""
    inflow = max_inflow(P)
    bad = np.flatnonzero(mu > inflow + 1e-12)
    if len(bad):
        s = int(bad[0])
        return (f"target μ is not achievable: μ({s}) = {mu[s]:.4g} exceeds the largest probability of entering "
                f"state {s} from any state-action pair ({inflow[s]:.4g}), and every steady state is an average "
                f"of those ({len(bad)} state(s) violate this bound); no policy is returned")
    return ("target μ is not achievable: the steady-state constraints Σ_a x(s,a) = μ(s), "
            "Σ x(s,a)P(s'|s,a) = μ(s'), x ≥ 0 have no solution; no policy is returned")


def _check_target(P: np.ndarray, mu: np.ndarray) -> None:
    S = P.shape[0]
    mu = np.asarray(mu, float)
    if mu.shape != (S,):
        raise ValueError(f"target μ must have shape ({S},); got {mu.shape}")
    if not np.all(np.isfinite(mu)) or mu.min() <= 0 or abs(mu.sum() - 1) > 1e-9:
        raise ValueError("target μ must be a strictly positive probability vector (D^{-1/2} needs μ > 0)")


# ---------------------------------------------------------------------------------------------- LP baselines
def steady_state_lp(P: np.ndarray, mu: np.ndarray, mode: str = "vertex", c: np.ndarray | None = None,
                    solver: str = "CLARABEL") -> Synthesis:
    """Steady-state control without a rate objective (Akshay et al. 2013).

    ``mode="vertex"``: what a generic LP solver returns for the feasibility LP — scipy's HiGHS dual
    simplex with objective ``c`` (zero by default), i.e. a vertex of the occupation polytope.
    ``mode="maxent"``: the feasible policy maximising Σ entr(x) (cvxpy, exponential cone).
    """
    _check_target(P, mu)
    S, A, _ = P.shape
    E, T = constraint_matrices(P)
    t0, c0 = time.perf_counter(), time.process_time()
    if mode == "vertex":
        res = linprog(np.zeros(S * A) if c is None else c, A_eq=sp.vstack([E, T]).tocsr(),
                      b_eq=np.concatenate([mu, mu]), bounds=(0, None), method="highs-ds")
        dt = time.perf_counter() - t0
        if res.status == 2:
            return Synthesis(None, float("nan"), "infeasible", diagnose_target(P, mu), solve_s=dt)
        if res.status != 0:
            return Synthesis(None, float("nan"), "error", f"HiGHS: {res.message}", solve_s=dt)
        return Synthesis(policy_from_occupation(res.x, S, A), float(res.fun), "optimal", "", res.x, dt)
    if mode == "maxent":
        x = cp.Variable(S * A, nonneg=True)
        prob = cp.Problem(cp.Maximize(cp.sum(cp.entr(x))), [E @ x == mu, T @ x == mu])
        return _finish(prob, x, P, mu, solver, {}, t0, c0)
    raise ValueError(f"mode must be 'vertex' or 'maxent'; got {mode!r}")


def lp_vertices(P: np.ndarray, mu: np.ndarray, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Up to ``n`` distinct vertices of the occupation polytope, from LPs with Gaussian random objectives."""
    out: list[np.ndarray] = []
    for _ in range(n):
        r = steady_state_lp(P, mu, "vertex", c=rng.standard_normal(P.shape[0] * P.shape[1]))
        if r.status == "infeasible":
            raise InfeasibleTarget(r.message)
        if r.ok and not any(np.allclose(r.x, v, atol=1e-9) for v in out):
            out.append(np.clip(r.x, 0.0, None))
    return out


# ---------------------------------------------------------------------------------------------- FMSS
def _kernel_operator(P: np.ndarray, mu: np.ndarray) -> sp.csr_matrix:
    """The sparse (S²×SA) matrix B with B x = vec_F(D^{−1/2} K(x) D^{−1/2}) (column-major vec)."""
    S, A, _ = P.shape
    s, a, t = np.meshgrid(np.arange(S), np.arange(A), np.arange(S), indexing="ij")
    vals = P / np.sqrt(mu[:, None, None] * mu[None, None, :])
    rows = (s + t * S).ravel()          # entry (s, t) of the S×S matrix, column-major
    cols = (s * A + a).ravel()
    keep = vals.ravel() != 0
    return sp.csr_matrix((vals.ravel()[keep], (rows[keep], cols[keep])), shape=(S * S, S * A))


def fmss_problem(P: np.ndarray, mu: np.ndarray, *, eps_pi: float = 0.0, symmetric: bool = False,
                 slack: float | None = None) -> tuple[cp.Problem, cp.Variable]:
    """The FMSS convex program on model ``P`` (exact or estimated):

        minimise_x  ‖D^{−1/2} K(x) D^{−1/2} − √μ√μᵀ‖₂
        subject to  Σ_a x(s,a) = μ(s),   x(s,a) ≥ ε_π μ(s)/A,
                    Σ x(s,a) P(·|s,a) = μ            (slack None)
                 or ‖Σ x(s,a) P(·|s,a) − μ‖₁ ≤ slack  (FMSS-SV),
                    K(x) = K(x)ᵀ                      (only if ``symmetric``: μ-reversible chains).
    """
    S, A, _ = P.shape
    E, T = constraint_matrices(P)
    sq = np.sqrt(mu)
    x = cp.Variable(S * A, nonneg=True)
    M = cp.reshape(_kernel_operator(P, mu) @ x, (S, S), order="F") - np.outer(sq, sq)
    cons = [E @ x == mu]
    cons.append(T @ x == mu if slack is None else cp.norm1(T @ x - mu) <= slack)
    if eps_pi > 0:
        cons.append(x >= eps_pi * np.repeat(mu, A) / A)
    if symmetric:
        cons.append(M == M.T)
    return cp.Problem(cp.Minimize(cp.sigma_max(M)), cons), x


_STATUS = {
    cp.OPTIMAL: "optimal", cp.OPTIMAL_INACCURATE: "optimal_inaccurate",
    cp.INFEASIBLE: "infeasible", cp.INFEASIBLE_INACCURATE: "infeasible",
}


def _finish(prob: cp.Problem, x: cp.Variable, P: np.ndarray, mu: np.ndarray, solver: str,
            opts: dict, t0: float, c0: float | None = None) -> Synthesis:
    """Solve, map cvxpy's status to ours, and turn x into a policy only when a solution exists."""
    S, A, _ = P.shape
    c0 = time.process_time() if c0 is None else c0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            prob.solve(solver=solver, **opts)
        except cp.SolverError as exc:
            return Synthesis(None, float("nan"), "error", f"{solver} failed: {exc}",
                             solve_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    solver_s = float(prob.solver_stats.solve_time or float("nan")) if prob.solver_stats else float("nan")
    status = _STATUS.get(prob.status, "error")
    note = "; ".join(str(w.message) for w in caught)
    if status == "infeasible":
        return Synthesis(None, float("nan"), "infeasible", diagnose_target(P, mu), solve_s=dt, solver_s=solver_s,
                         cpu_s=cpu)
    if status == "error" or x.value is None:
        return Synthesis(None, float("nan"), "error", f"{solver} returned status {prob.status}. {note}".strip(),
                         solve_s=dt, solver_s=solver_s, cpu_s=cpu)
    xv = np.asarray(x.value, float)
    msg = f"solver reached reduced accuracy ({prob.status}). {note}".strip() if status != "optimal" else note
    return Synthesis(policy_from_occupation(xv, S, A), float(prob.value), status, msg, xv, dt, solver_s, cpu)


def solve_fmss_problem(prob: cp.Problem, x: cp.Variable, P: np.ndarray, mu: np.ndarray,
                       solver: str = "CLARABEL", solver_opts: dict | None = None) -> Synthesis:
    """Solve a problem built by :func:`fmss_problem` and package the result (timed from the call)."""
    return _finish(prob, x, P, mu, solver, solver_opts or {}, time.perf_counter(), time.process_time())


def fmss_convex(P: np.ndarray, mu: np.ndarray, eps_pi: float = 0.0, symmetric: bool = False,
                solver: str = "CLARABEL", solver_opts: dict | None = None) -> Synthesis:
    """FMSS: the feasible policy of smallest surrogate σ (convex; see :func:`fmss_problem`).

    Returns a :class:`Synthesis`; an unachievable μ gives ``status="infeasible"``, ``pi=None`` and a message
    that names the violated bound — never a policy. ``solve_s`` is the wall time of building and solving.
    """
    _check_target(P, mu)
    t0, c0 = time.perf_counter(), time.process_time()
    prob, x = fmss_problem(P, mu, eps_pi=eps_pi, symmetric=symmetric)
    return _finish(prob, x, P, mu, solver, solver_opts or {}, t0, c0)


# ---------------------------------------------------------------------------------------------- non-convex
@dataclass
class NonconvexResult:
    """Best policy found by the multistart search; ``slem`` is its true SLEM. Not a certified optimum.

    ``converged[i]`` says whether start ``i`` stopped on the tolerance (a fresh simplex improved it by less than
    ``tol``) rather than on the round cap; ``rounds[i]`` is how many Nelder–Mead rounds it took."""

    pi: np.ndarray
    slem: float
    start_slems: list[float]
    final_slems: list[float]
    nfev: int
    converged: list[bool]
    rounds: list[int]

    @property
    def all_converged(self) -> bool:
        return bool(all(self.converged))


def fmss_nonconvex(P: np.ndarray, mu: np.ndarray, starts: list[np.ndarray], maxfev: int = 3000,
                   tol: float = 1e-5, max_rounds: int = 4, feas_tol: float = 1e-9) -> NonconvexResult:
    """Direct minimisation of SLEM(P_π) over the feasible polytope (card, *Baselines*).

    The polytope is written x = x₀ + N z with x₀ = ``starts[0]`` and N an orthonormal basis of the null space
    of the equality constraints; a point that leaves the orthant (some x < −``feas_tol``) scores
    2 + ‖min(x, 0)‖₁, above every feasible SLEM. From every start, Nelder–Mead (adaptive) runs in *rounds* of at most
    ``maxfev`` evaluations, each from the best point so far with a fresh simplex of fixed size h = 1/(4·SA) (a
    quarter of the mean occupation): the SLEM is non-smooth where eigenvalue moduli cross, which is where its
    optima sit, and a single run collapses its simplex onto such a kink at a point that depends on the last bit of
    the BLAS kernel's rounding (issue 40: gaps 0.0005–0.016 on paths under four OpenBLAS kernels). A start stops
    when a round improves its SLEM by less than ``tol`` (``converged``) or after ``max_rounds`` (reported as not
    converged). The defaults fit the chapter's 8-minute budget: 30 rounds at ``tol`` = 1e-8 took 856 s of CPU in the
    full profile; with 4 rounds the path searches end < 1e-3 above cos(π/n) (6e-4 at n = 7, seed 0), ten times
    finer than what K4 must resolve (0.01), and a capped search can only find *less* than a longer one, so C3's gap
    (FMSS against the best search) is not overstated by the cap. This is a local heuristic: its result is "the best
    found", never a certified global optimum.
    """
    S, A, _ = P.shape
    E, T = constraint_matrices(P)
    N = null_space(sp.vstack([E, T]).toarray())
    x0 = np.asarray(starts[0], float)
    ones_mu = np.outer(np.ones(S), mu)
    h = 1.0 / (4.0 * S * A)

    def slem_of(z: np.ndarray) -> float:
        x = x0 + N @ z
        neg = x.min()
        if neg < -feas_tol:
            return 2.0 + float(np.abs(np.minimum(x, 0.0)).sum())
        Ppi = induced_chain(P, policy_from_occupation(x, S, A))
        return float(np.max(np.abs(np.linalg.eigvals(Ppi - ones_mu))))

    best_z, best_f, start_f, final_f, nfev, conv, rounds = None, np.inf, [], [], 0, [], []
    eye = h * np.eye(N.shape[1])
    for xs in starts:
        z = N.T @ (np.asarray(xs, float) - x0)
        f = slem_of(z)
        start_f.append(f)
        done, r = False, 0
        while not done and r < max_rounds:
            res = minimize(slem_of, z, method="Nelder-Mead",
                           options=dict(maxfev=maxfev, adaptive=True, xatol=1e-10, fatol=1e-12,
                                        initial_simplex=np.vstack([z, z + eye])))
            nfev, r = nfev + int(res.nfev), r + 1
            gain = f - float(res.fun)
            if res.fun < f:
                z, f = res.x, float(res.fun)
            done = gain < tol
        final_f.append(f)
        conv.append(done)
        rounds.append(r)
        if f < best_f:
            best_f, best_z = f, z
    pi = policy_from_occupation(x0 + N @ best_z, S, A)
    Ppi = induced_chain(P, pi)
    return NonconvexResult(pi, slem(Ppi, stationary(Ppi)), start_f, final_f, nfev, conv, rounds)


# ---------------------------------------------------------------------------------------------- FMMC
def fmmc_sdp(adj: np.ndarray, solver: str = "CLARABEL") -> tuple[np.ndarray, float]:
    """Fastest mixing Markov chain on a graph (Boyd, Diaconis and Xiao 2004, eq. (3)):

        minimise ‖P − 11ᵀ/n‖₂  over symmetric stochastic P ≥ 0 with P(i,j) = 0 off the graph's edges.

    Returns (P, optimal value). Self-loops are always allowed.
    """
    adj = np.asarray(adj, bool)
    n = len(adj)
    Pm = cp.Variable((n, n), symmetric=True)
    off = [(i, j) for i in range(n) for j in range(n) if i != j and not adj[i, j]]
    cons = [Pm >= 0, Pm @ np.ones(n) == np.ones(n)]
    if off:
        mask = np.zeros((n, n))
        for i, j in off:
            mask[i, j] = 1.0
        cons.append(cp.multiply(mask, Pm) == 0)
    prob = cp.Problem(cp.Minimize(cp.sigma_max(Pm - np.ones((n, n)) / n)), cons)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # "may be inaccurate" is reported through the status below
        prob.solve(solver=solver)
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise RuntimeError(f"FMMC SDP: solver status {prob.status}")
    return np.asarray(Pm.value), float(prob.value)
