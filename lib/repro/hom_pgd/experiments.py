"""The chapter's experiments as functions of the config, so that the notebook only narrates and plots.

Every function is seeded from ``cfg.seed``; Hom-PGD+ with the INN and with the radial map, and every baseline,
run on the same instances (the same start points for SLSQP wherever its runs are compared).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from . import baselines as bl
from .inn import (CondRealNVP, CondStarFlow, MDHWeights, eps_inn, n_params, preimage_norms, radial_map, reach_misses,
                  train_mdh)
from .inn import REACH_TAU
from .optim import Result, hom_pgd, min_g2_curve, time_per_iteration
from .problems import Instances, QCQPFamily, ray_reentry


def rel_gap(f: np.ndarray, f_ref: np.ndarray) -> np.ndarray:
    """(f − f_ref) / |f_ref| per instance."""
    return (np.asarray(f) - np.asarray(f_ref)) / np.abs(np.asarray(f_ref))


def build_inn(cfg, n: int, m: int, hidden: int | None = None, blocks: int | None = None) -> CondStarFlow | CondRealNVP:
    """The chapter's map Φ for size (n, m): the boundary-preserving star flow (``cfg.inn_arch == "star"``, an MLP of
    width ``hidden``, default ``cfg.inn_hidden``, with ``cfg.spline_bins`` bins) or ``blocks`` (default
    ``cfg.inn_blocks``) affine couplings of that width, wrapped in the exact R-ball gauge when ``cfg.ball_gauge``.
    Untrained, either is the radial map x = R z."""
    torch.manual_seed(cfg.seed)
    if cfg.inn_arch == "star":
        return CondStarFlow(n, m, hidden or cfg.inn_hidden, cfg.spline_bins)
    return CondRealNVP(n, m, blocks or cfg.inn_blocks, hidden or cfg.inn_hidden, ball_gauge=cfg.ball_gauge)


def mdh_weights(cfg) -> MDHWeights:
    """The MDH loss weights of the config (hinge ``w_pen``, Lipschitz ``w_lip``; distortion 0.01 as the authors)."""
    return MDHWeights(pen=cfg.w_pen, lip=cfg.w_lip)


def radial_infeasible(family: QCQPFamily, k: int, seed: int) -> float:
    """Fraction of uniform ball samples that the radial map x = R z sends outside C (random conditions)."""
    return eps_inn(radial_map(family.radius), family, k, seed)


@dataclass
class Reference:
    """SLSQP best-of-starts per instance (x, f, viol) and the per-start times (analytic Jacobians)."""

    x: np.ndarray
    f: np.ndarray
    viol: np.ndarray
    ms_per_start: np.ndarray
    active: np.ndarray


def reference(family: QCQPFamily, inst: Instances, starts: int, seed: int) -> Reference:
    res = bl.slsqp_batch(family, inst, starts, seed)
    x = np.array([r.x for r in res])
    return Reference(x=x, f=np.array([r.f for r in res]), viol=np.array([r.viol for r in res]),
                     ms_per_start=1e3 * np.concatenate([r.sec_starts for r in res]),
                     active=np.array([bl.active_quadratic(family, x[i], inst.s[i]) for i in range(len(inst))]))


TIMING_ROUNDS = 5  # C3a, C3b and C6: each timing (SLSQP's and Hom-PGD+'s alike) is the fastest of this many runs


def k1_active(family: QCQPFamily, k: int, seed: int) -> tuple[float, int]:
    """K1's active fraction: one SLSQP start (uniform in [−1, 1]ⁿ) on each of k fresh instances, the fraction of
    optima with an active quadratic constraint; (fraction, k). Fresh instances and many of them, so that the Wilson
    interval of K1 is narrow (64 instances gave ±6 points at n = 30)."""
    inst = family.sample(k, np.random.default_rng([seed, family.n, 4]))
    ref = reference(family, inst, 1, seed + 9)
    return float(ref.active.mean()), int(k)


def slsqp_times_per_start(family: QCQPFamily, inst: Instances, seed: int) -> np.ndarray:
    """CPU ms per SLSQP start (one start per instance, analytic Jacobians, the same start points every round) of
    each of ``TIMING_ROUNDS`` identical passes over the instances, timed as Hom-PGD+'s solves are. C3 takes the
    fastest and bootstraps over all of them."""
    out = []
    for _ in range(TIMING_ROUNDS):
        res = bl.slsqp_batch(family, inst, 1, seed)
        out.append(1e3 * float(sum(r.sec_starts.sum() for r in res)) / len(inst))
    return np.asarray(out)


def slsqp_time_per_start(family: QCQPFamily, inst: Instances, seed: int) -> float:
    """CPU ms per SLSQP start: the fastest of :func:`slsqp_times_per_start`'s ``TIMING_ROUNDS`` passes."""
    return float(slsqp_times_per_start(family, inst, seed).min())


def hom_times_per_instance(phi, family: QCQPFamily, inst: Instances, cfg, tol: float | None = None
                           ) -> tuple[np.ndarray, Result]:
    """CPU ms per instance of each of ``TIMING_ROUNDS`` identical batched Hom-PGD+ solves (a 2-iteration warm-up
    call first, discarded), and the first solve's result. ``tol=None`` runs the fixed budget of
    ``cfg.latent_iters`` iterations (what C3 decides on: the same work at every n); a tolerance stops early, after a
    number of iterations that itself changes with n (reported beside)."""
    hom_pgd(phi, family, inst[:4], 2, lr=cfg.lr_latent, bisection_steps=cfg.bisection_steps)
    runs = [hom_pgd(phi, family, inst, cfg.latent_iters, lr=cfg.lr_latent, bisection_steps=cfg.bisection_steps,
                    tol=tol) for _ in range(TIMING_ROUNDS)]
    return np.asarray([1e3 * r.seconds / len(inst) for r in runs]), runs[0]


def hom_time_per_instance(phi, family: QCQPFamily, inst: Instances, cfg, tol: float | None = None
                          ) -> tuple[float, Result]:
    """CPU ms per instance of a batched Hom-PGD+ solve: the fastest of :func:`hom_times_per_instance`'s
    ``TIMING_ROUNDS`` identical solves, and the solve's result."""
    ms, r = hom_times_per_instance(phi, family, inst, cfg, tol)
    return float(ms.min()), r


@dataclass
class ScaleRun:
    """One problem size of C3: times (fixed budget and to tolerance), gap, K1 numbers."""

    n: int
    hom_ms: float
    slsqp_ms: float
    train_s: float
    median_gap: float
    iters: int
    active: float
    radial_infeasible: float
    reentry: float
    feasible: float
    hom_ms_tol: float = float("nan")
    iters_tol: int = 0
    k1_active: float = float("nan")
    k1_instances: int = 0
    hom_ms_rounds: tuple[float, ...] = ()      # the TIMING_ROUNDS times whose fastest is hom_ms (C3's bootstrap)
    slsqp_ms_rounds: tuple[float, ...] = ()    # ... and slsqp_ms

    @property
    def rounds(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(SLSQP ms per start, Hom-PGD+ ms per instance) of every timing round: what C3a/C3b bootstrap over."""
        return self.slsqp_ms_rounds, self.hom_ms_rounds

    @property
    def ratio(self) -> float:
        return self.slsqp_ms / self.hom_ms

    @property
    def ratio_tol(self) -> float:
        return self.slsqp_ms / self.hom_ms_tol

    @property
    def break_even(self) -> float:
        """Instances after which Hom-PGD+ (training included) is cheaper than one SLSQP start each; ∞ if never."""
        d = self.slsqp_ms - self.hom_ms
        return 1e3 * self.train_s / d if d > 0 else float("inf")


def scale_run(cfg, n: int, inn: CondRealNVP | None = None, train_s: float | None = None,
              inst: Instances | None = None, ref: Reference | None = None, family: QCQPFamily | None = None,
              progress=None, k1: bool | None = None) -> ScaleRun:
    """Train (unless given) an INN at size n (m = n), time batched Hom-PGD+ (fixed budget, and to ``time_tol``) and
    one SLSQP start per instance (both fastest of ``TIMING_ROUNDS``). The n = 30 INN (the smallest scale size in
    other profiles) trains ``scale_train_steps`` (K3 checks its gap); the others ``scale_timing_steps``, since they
    serve the timing only. ``k1`` (default: n is 30 or the profile's smallest scale size) also measures K1's active
    fraction on ``cfg.k1_instances`` fresh instances."""
    family = family or QCQPFamily(n, n, cfg.seed)
    rng = np.random.default_rng([cfg.seed, n, 3])
    if inst is None:
        inst = family.sample(cfg.scale_instances, rng)
    if inn is None:
        inn = build_inn(cfg, n, n)
        steps = cfg.scale_train_steps if n == 30 or n == min(cfg.scale_sizes) else cfg.scale_timing_steps
        inn, tr = train_mdh(inn, family, steps, cfg.scale_train_batch, cfg.seed + n,
                            weights=mdh_weights(cfg))
        train_s = tr.seconds
    if progress:
        progress(f"n = {n}: INN ready ({train_s:.0f} s of training)")
    hom_rounds, r = hom_times_per_instance(inn.map, family, inst, cfg)
    hom_ms = float(hom_rounds.min())
    hom_ms_tol, r_tol = hom_time_per_instance(inn.map, family, inst, cfg, tol=cfg.time_tol)
    if ref is None:
        ref = reference(family, inst, 1, cfg.seed + 1)
    slsqp_rounds = slsqp_times_per_start(family, inst, cfg.seed + 1)
    slsqp_ms = float(slsqp_rounds.min())
    k = len(ref.f)
    gap = rel_gap(r.f[:k], ref.f)
    if k1 is None:
        k1 = n == 30 or (bool(cfg.scale_sizes) and n == min(cfg.scale_sizes))
    a1, k1n = k1_active(family, cfg.k1_instances, cfg.seed) if k1 else (float("nan"), 0)
    return ScaleRun(n=n, hom_ms=hom_ms, slsqp_ms=slsqp_ms, train_s=float(train_s),
                    median_gap=float(np.median(gap)), iters=r.iters, active=float(ref.active.mean()),
                    radial_infeasible=radial_infeasible(family, min(cfg.eps_samples, 100_000), cfg.seed + 7),
                    reentry=ray_reentry(family, np.ones(family.m), cfg.n_rays, np.random.default_rng(cfg.seed + 8)),
                    feasible=float((r.viol <= 1e-5).mean()), hom_ms_tol=hom_ms_tol, iters_tol=r_tol.iters,
                    k1_active=a1, k1_instances=k1n, hom_ms_rounds=tuple(map(float, hom_rounds)),
                    slsqp_ms_rounds=tuple(map(float, slsqp_rounds)))


@dataclass
class Checkpoint:
    step: int
    eps_ball: float
    unreachable: float
    median_gap: float
    gaps: np.ndarray | None = field(default=None, repr=False)   # per-instance gaps (C5's paired bootstrap)

    def row(self) -> dict:
        """The scalar fields, for a table."""
        return {"step": self.step, "eps_ball": self.eps_ball, "unreachable": self.unreachable,
                "median_gap": self.median_gap}


def checkpoint_eval(cfg, family: QCQPFamily, state: dict, inst: Instances, ref: Reference) -> Checkpoint:
    """ε_inn (ball samples mapped infeasible), unreachable optima and Hom-PGD+'s median gap for one checkpoint."""
    inn = build_inn(cfg, family.n, family.m)
    inn.load_state_dict(state)
    eps = eps_inn(inn.map, family, cfg.eps_samples, cfg.seed + 5)
    unreach = float((reach_misses(inn, family, ref.x, inst.s) > REACH_TAU * family.radius).mean())
    r = hom_pgd(inn.map, family, inst, cfg.latent_iters, lr=cfg.lr_latent, bisection_steps=cfg.bisection_steps)
    g = rel_gap(r.f, ref.f)
    return Checkpoint(0, eps, unreach, float(np.median(g)), gaps=np.asarray(g, float))


def width_timing(cfg, family: QCQPFamily, inst: Instances, return_rounds: bool = False
                 ) -> tuple[list[int], list[float]] | tuple[list[int], list[float], np.ndarray]:
    """(W, seconds per latent iteration) of untrained INNs over ``cfg.widths_sweep`` on a batch of 256 instances.

    The widths are timed in ``TIMING_ROUNDS`` interleaved rounds (a 20-iteration solve each) and each keeps its
    fastest: one timing per width put a slow stretch of a shared machine on one width only (seed 3 once read
    9.9, 6.7, 9.3, 10.1 ms for widths in increasing order). With ``return_rounds`` also every round's times,
    [TIMING_ROUNDS, widths] (C6 bootstraps its R² over the rounds)."""
    inns = []
    for w in cfg.widths_sweep:
        inn = build_inn(cfg, family.n, family.m, hidden=w)
        for p in inn.parameters():
            p.requires_grad_(False)
        with torch.no_grad():           # a non-trivial map: small random last layers
            for net in ([inn.net] if isinstance(inn, CondStarFlow) else [layer.net for layer in inn.layers]):
                net[-1].weight.normal_(0, 0.01)
        inns.append(inn)
    kw = dict(iters=20, lr=cfg.lr_latent, bisection_steps=cfg.bisection_steps)
    rounds = [[time_per_iteration(inn.map, family, inst, **kw) for inn in inns]]   # round 1, after a warm-up call
    for _ in range(TIMING_ROUNDS - 1):
        rounds.append([time_per_iteration(inn.map, family, inst, warmup=False, **kw) for inn in inns])
    rounds = np.asarray(rounds, float)
    best = [float(v) for v in rounds.min(0)]
    W = [n_params(inn) for inn in inns]
    return (W, best, rounds) if return_rounds else (W, best)


def exact_projection_runs(cfg, family: QCQPFamily, inst: Instances) -> dict:
    """PGD with an exact (SLSQP) projection on the first ``n_exact_proj`` instances, with the x-space step
    α₀ R² that the radial map's latent step α₀ corresponds to."""
    runs = [bl.pgd_exact_projection(family, inst, i, cfg.exact_proj_iters, lr=cfg.lr_latent * family.radius ** 2)
            for i in range(cfg.n_exact_proj)]
    return {"f": np.array([r["f"][-1] for r in runs]), "viol": np.array([r["viol"] for r in runs]),
            "ms_per_iter": 1e3 * float(np.mean([r["sec_per_iter"] for r in runs])),
            "f_trace": np.array([r["f"] for r in runs])}
