"""Baselines on the same instances: multistart SLSQP (the reference, a stand-in for IPOPT), PGD with an exact
(non-convex) projection, a first-order penalty / augmented-Lagrangian method in x-space, and the Shor SDP
relaxation (a certified lower bound on the global optimum).

SLSQP gets analytic gradients and constraint Jacobians, vectorised over the m constraints (card pitfall: a
per-constraint Python loop, or finite differences, inflate SLSQP's time and flatter Hom-PGD).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import minimize

from .problems import SCALE_RANGE, Instances, QCQPFamily, sphere

TOL = 1e-5


@dataclass
class SLSQPResult:
    """Best of ``starts`` SLSQP runs on one instance: x, f, max violation, every start's (f, viol, seconds)."""

    x: np.ndarray
    f: float
    viol: float
    f_starts: np.ndarray
    viol_starts: np.ndarray
    sec_starts: np.ndarray


def max_violation(family: QCQPFamily, x: np.ndarray, s: np.ndarray) -> float:
    g = family.np_constraints(x, s)
    return float(max(0.0, g.max(), np.abs(x).max() - family.box, np.linalg.norm(x) - family.radius))


def slsqp_single(family: QCQPFamily, Q: np.ndarray, p: np.ndarray, s: np.ndarray, x0: np.ndarray,
                 analytic: bool = True, ftol: float = 1e-8, maxiter: int = 200) -> tuple[np.ndarray, float]:
    """One SLSQP run from x0; returns (x, seconds). ``analytic=False`` lets scipy difference the Jacobians."""
    fun = lambda x: 0.5 * x @ Q @ x + p @ x                      # noqa: E731
    jac = lambda x: Q @ x + p                                      # noqa: E731
    g = lambda x: -family.np_constraints(x, s)                     # SLSQP wants c(x) >= 0
    gj = lambda x: -family.np_jac_constraints(x)                   # noqa: E731
    R2 = family.radius ** 2
    ball = lambda x: np.array([R2 - x @ x])                        # noqa: E731
    ballj = lambda x: -2 * x[None, :]                              # noqa: E731
    cons = [{"type": "ineq", "fun": g, "jac": gj}, {"type": "ineq", "fun": ball, "jac": ballj}] if analytic else \
        [{"type": "ineq", "fun": g}, {"type": "ineq", "fun": ball}]
    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = minimize(fun, x0, jac=jac if analytic else None, method="SLSQP", constraints=cons,
                     bounds=[(-family.box, family.box)] * family.n, options={"ftol": ftol, "maxiter": maxiter})
    return r.x, time.process_time() - t0


def slsqp_solve(family: QCQPFamily, inst: Instances, i: int, starts: int, rng: np.random.Generator,
                analytic: bool = True) -> SLSQPResult:
    """Best feasible of ``starts`` SLSQP runs from x0 uniform in [−1, 1]ⁿ (the least violating if none is)."""
    xs, fs, vs, ts = [], [], [], []
    for _ in range(starts):
        x, sec = slsqp_single(family, inst.Q[i], inst.p[i], inst.s[i], rng.uniform(-1, 1, family.n), analytic)
        xs.append(x)
        fs.append(0.5 * x @ inst.Q[i] @ x + inst.p[i] @ x)
        vs.append(max_violation(family, x, inst.s[i]))
        ts.append(sec)
    fs, vs = np.array(fs), np.array(vs)
    ok = vs <= TOL
    j = int(np.argmin(np.where(ok, fs, np.inf))) if ok.any() else int(np.argmin(vs))
    return SLSQPResult(xs[j], float(fs[j]), float(vs[j]), fs, vs, np.array(ts))


def slsqp_batch(family: QCQPFamily, inst: Instances, starts: int, seed: int, analytic: bool = True) -> list[SLSQPResult]:
    """SLSQP on every instance; start points from one seeded stream (the same for every caller with that seed)."""
    rng = np.random.default_rng(seed)
    return [slsqp_solve(family, inst, i, starts, rng, analytic) for i in range(len(inst))]


def active_quadratic(family: QCQPFamily, x: np.ndarray, s: np.ndarray, tol: float = 1e-4) -> bool:
    """Whether some quadratic constraint is active at x (|g_i(x)| ≤ tol · (1 + s_i b_i))."""
    g = family.np_constraints(x, s)
    return bool((np.abs(g) <= tol * (1 + s * family.b_base)).any())


def project_exact(family: QCQPFamily, y: np.ndarray, s: np.ndarray, x_warm: np.ndarray) -> np.ndarray:
    """Proj_C(y) = argmin_{x ∈ C} ½‖x − y‖², by SLSQP warm-started at x_warm (a local, non-convex projection)."""
    Z = np.zeros((family.n, family.n))
    x, _ = slsqp_single(family, np.eye(family.n), -y, s, x_warm)
    del Z
    return x


def pgd_exact_projection(family: QCQPFamily, inst: Instances, i: int, iters: int, lr: float = 0.1) -> dict:
    """x_{k+1} = Proj_C(x_k − α∇f(x_k)) from x₀ = 0 on instance i; returns the objective trace, final violation
    and seconds per iteration (the projection dominates)."""
    Q, p, s = inst.Q[i], inst.p[i], inst.s[i]
    x = np.zeros(family.n)
    fs = [0.0]
    t0 = time.process_time()
    for _ in range(iters):
        x = project_exact(family, x - lr * (Q @ x + p), s, x)
        fs.append(0.5 * x @ Q @ x + p @ x)
    sec = time.process_time() - t0
    return {"f": np.array(fs), "viol": max_violation(family, x, s), "sec_per_iter": sec / iters, "x": x}


def penalty_alm(family: QCQPFamily, inst: Instances, iters: int = 1000, lr: float = 0.05, rho: float = 10.0,
                alm: bool = True, every: int = 50, seed: int = 0) -> dict:
    """First-order penalty (``alm=False``) or augmented Lagrangian method in x-space, batched with Adam:
    minimise f(x) + Σ_j λ_j c_j(x) + ρ/2 Σ_j relu(c_j(x))², multipliers λ ← relu(λ + ρ c) every ``every`` steps
    (λ = 0 for the penalty). Starts at 0. Returns x, f, violation and seconds (cheap, but no feasibility guarantee)."""
    torch.manual_seed(seed)
    s = torch.as_tensor(inst.s)
    Q, p = torch.as_tensor(inst.Q), torch.as_tensor(inst.p)
    x = torch.zeros(len(inst), family.n, dtype=torch.float64, requires_grad=True)
    lam = torch.zeros(len(inst), family.m + family.n + 1, dtype=torch.float64)
    opt = torch.optim.Adam([x], lr=lr)
    t0 = time.process_time()
    for k in range(1, iters + 1):
        cons = family.all_constraints(x, s)
        loss = (family.objective(x, Q, p) + (lam * cons).sum(1) + 0.5 * rho * (cons.clamp_min(0) ** 2).sum(1)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if alm and k % every == 0:
            with torch.no_grad():
                lam = (lam + rho * family.all_constraints(x, s)).clamp_min(0)
    sec = time.process_time() - t0
    with torch.no_grad():
        return {"x": x.detach().numpy(), "f": family.objective(x, Q, p).numpy(),
                "viol": family.violation(x, s).numpy(), "seconds": sec}


def shor_sdp_bound(family: QCQPFamily, Q: np.ndarray, p: np.ndarray, s: np.ndarray) -> float:
    """Shor relaxation: replace xxᵀ by X with [[X, x], [xᵀ, 1]] ⪰ 0; the quadratic constraints become linear in
    (X, x), the box adds X_jj ≤ 25 and −5 ≤ x ≤ 5, the ball tr X ≤ R². Its optimum is a lower bound on the QCQP's
    global optimum (Clarabel, float64)."""
    import cvxpy as cp
    n = family.n
    M = cp.Variable((n + 1, n + 1), symmetric=True)
    X, x = M[:n, :n], M[:n, n]
    cons = [M >> 0, M[n, n] == 1, cp.diag(X) <= family.box ** 2, cp.abs(x) <= family.box,
            cp.trace(X) <= family.radius ** 2]
    for i in range(family.m):
        cons.append(0.5 * cp.trace(family.Qc[i] @ X) + family.pc[i] @ x <= s[i] * family.b_base[i])
    prob = cp.Problem(cp.Minimize(0.5 * cp.trace(Q @ X) + p @ x), cons)
    prob.solve(solver=cp.CLARABEL)
    if prob.status not in ("optimal", "optimal_inaccurate"):
        return float("nan")
    return float(prob.value)


# ----------------------------------------------------------------------------- the exact gauge map (no learning)

def exit_radius(family: QCQPFamily, v: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """Closed-form exit radius ρ(v; s) of the ray t·v (‖v‖ = 1, t ≥ 0) from C, in float64, differentiable in v.

    Along the ray, g_i(t v) = a_i t² + b_i t − c_i with a_i = ½ vᵀQ_iv, b_i = p_iᵀv, c_i = s_i b_i > 0 (the origin is
    strictly interior). Its first positive root is t_i = 2c_i / (b_i + √(b_i² + 4a_ic_i)) whenever the denominator is
    positive and the discriminant non-negative (a_i > 0; a_i ≤ 0 with b_i > 0); otherwise the ray never leaves
    {g_i ≤ 0} (t_i = ∞). ρ = min(R, min_i t_i); the box [−5, 5]ⁿ contains the R-ball (R = 5) and is never the first exit.
    This is the first exit, so the segment [0, ρ v] lies in C even on the rare rays that leave and re-enter C."""
    if family.radius > family.box:
        raise ValueError("the exact gauge assumes the R-ball lies inside the box")
    Qc, pc, b = family.tensors(torch.float64)
    v = v.to(torch.float64)
    a = 0.5 * torch.einsum("ki,mij,kj->km", v, Qc, v)
    bb = v @ pc.T
    c = s.to(torch.float64) * b
    disc = bb ** 2 + 4 * a * c
    ok_d = disc > 0
    den = bb + torch.sqrt(torch.where(ok_d, disc, torch.ones_like(disc)))
    ok = ok_d & (den > 1e-300)
    t = torch.where(ok, 2 * c / torch.where(ok, den, torch.ones_like(den)), torch.full_like(den, float("inf")))
    R = torch.full((len(v), 1), float(family.radius), dtype=torch.float64)
    return torch.cat([R, t], dim=1).amin(1)


def exit_radius_bisection(family: QCQPFamily, v: np.ndarray, s: np.ndarray, n_grid: int = 2000,
                          iters: int = 80) -> np.ndarray:
    """The first exit radius of each ray t·v from C by brute force, float64: the first infeasible point of an
    ``n_grid`` grid on [0, R], then ``iters`` halvings between it and the grid point before (R if none is
    infeasible). The independent reference of control K5 for :func:`exit_radius`."""
    t = np.linspace(0, family.radius, n_grid)
    a = 0.5 * np.einsum("ki,mij,kj->km", v, family.Qc, v)
    bb = v @ family.pc.T
    c = s * family.b_base

    def feasible(tt):  # tt [k, g] -> [k, g]
        g = a[:, None, :] * tt[..., None] ** 2 + bb[:, None, :] * tt[..., None] - c[:, None, :]
        return (g <= 0).all(-1) & (tt <= family.radius)

    feas = feasible(np.broadcast_to(t, (len(v), n_grid)))
    bad = ~feas
    first = np.where(bad.any(1), bad.argmax(1), n_grid)
    out = np.full(len(v), float(family.radius))
    rows = np.flatnonzero(first < n_grid)
    lo, hi = t[first[rows] - 1], t[first[rows]]
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        ok = feasible_rows(a[rows], bb[rows], c[rows], mid, family.radius)
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    out[rows] = lo
    return out


def feasible_rows(a: np.ndarray, bb: np.ndarray, c: np.ndarray, t: np.ndarray, radius: float) -> np.ndarray:
    """Feasibility of the points t_k v_k given each ray's coefficients (a, b, c) [k, m]."""
    g = a * t[:, None] ** 2 + bb * t[:, None] - c
    return (g <= 0).all(1) & (t <= radius)


def gauge_map(family: QCQPFamily):
    """The exact, learning-free gauge map of the star-shaped set C: Φ(z; c) = ρ(z/‖z‖; s) · z with ρ the closed-form
    exit radius (:func:`exit_radius`; s recovered from the condition c). It maps the unit ball onto C (ε_inn = 0 up
    to float32 rounding of the boundary points; the bisection of Hom-PGD⁺ catches those), and it is as smooth as ρ:
    continuous, with kinks where the binding constraint of a ray changes. Computed in float64, returned in float32."""
    lo, hi = SCALE_RANGE

    def phi(z: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        z64 = z.to(torch.float64)
        s = (c.to(torch.float64) * (hi - lo) + (lo + hi)) / 2
        r = z64.norm(dim=1, keepdim=True)
        v = z64 / r.clamp_min(1e-30)
        rho = exit_radius(family, v, s)
        return (rho[:, None] * z64).to(z.dtype)
    return phi


def gauge_pgd(family: QCQPFamily, inst: Instances, iters: int, lr: float = 0.1, bisection_steps: int = 10, **kw):
    """Hom-PGD⁺'s optimiser (same start z₀ = 0, step, decay, bisection, iteration budget) through the exact gauge
    map instead of a learned INN: the learning-free baseline that isolates what training Φ buys."""
    from .optim import hom_pgd
    return hom_pgd(gauge_map(family), family, inst, iters, lr=lr, bisection_steps=bisection_steps, **kw)


def gauge_exactness(family: QCQPFamily, n_rays: int, rng: np.random.Generator, radius_fn=None) -> dict:
    """Control K5's numbers: the largest |ρ_closed − ρ_bisection| over ``n_rays`` random rays and scale factors, the
    closed form from ``radius_fn`` (default :func:`exit_radius`; a test passes a blinded one)."""
    radius_fn = radius_fn or exit_radius
    v = sphere(n_rays, family.n, rng)
    s = rng.uniform(*SCALE_RANGE, size=(n_rays, family.m))
    closed = radius_fn(family, torch.as_tensor(v), torch.as_tensor(s)).numpy()
    brute = exit_radius_bisection(family, v, s)
    err = np.abs(closed - brute)
    return {"max_abs_err": float(err.max()), "rays": int(n_rays), "median_radius": float(np.median(brute)),
            "cut_rays": float(np.mean(brute < family.radius - 1e-9))}
