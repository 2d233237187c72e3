"""The chapter's experiments, one function each, so the notebook stays a narrative (card, "Setting at book scale").

Conversion seeds ``s = 0..n_seeds-1`` vary the calibration sample, the k-means initialisation and the random split;
the dense model is the one trained with the notebook seed. All methods at a budget share seed s's calibration
profile (paired comparisons).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch

from . import convert as C
from . import latency as lat
from .data import DOMAINS, Corpora, calibration_set, heldout_set, unigram_entropy
from .model import GPT, Routing, build_model, ffn_macs
from .partition import expert_sizes, knee_threshold, plan_layer, LayerPlan
from .profile import (LayerProfile, activation_frequency, frequency_by_domain, profile_model, selectivity_index,
                      selectivity_null, universal_fraction_bootstrap, universal_neurons)
from .train import converted, downcycle, evaluate_loss, max_logit_diff


def conversion_rng(cfg, s: int, tag: int) -> np.random.Generator:
    return np.random.default_rng([cfg.seed, s, tag])


# ----------------------------------------------------------------------------- C1: structure

@dataclass
class Structure:
    freq_by_domain: list[np.ndarray]           # per layer [3, d_ff]
    universal_frac: list[float]
    universal_frac_init: list[float]
    selectivity: float                         # specialised median, pooled over layers
    null: np.ndarray
    selectivity_py_prose: float
    null_py_prose: np.ndarray
    freq: list[np.ndarray]
    universal_boot: np.ndarray | None = None   # [n_boot, n_layers] bootstrap draws over calibration sequences (C1)


def structure(cfg, model: GPT, profiles: list[LayerProfile], rows: np.ndarray, seq_domain: np.ndarray
              ) -> Structure:
    """Universal fractions (trained and random init), selectivity and its permutation nulls (3 domains, and
    Python vs prose only, where the byte-separable arithmetic domain cannot make the null trivial)."""
    fd = [frequency_by_domain(p.active, seq_domain, cfg.context) for p in profiles]
    uni = [universal_neurons(f, 0.9) for f in fd]
    torch.manual_seed(cfg.seed + 7919)
    init = build_model(cfg).eval()
    init_prof = profile_model(init, rows, cfg.top_rho)
    uni0 = [float(universal_neurons(frequency_by_domain(p.active, seq_domain, cfg.context)).mean()) for p in init_prof]
    active = torch.cat([p.active for p in profiles], 1)
    spec = ~np.concatenate(uni)
    rng = conversion_rng(cfg, 0, 101)
    sel, null = selectivity_null(active, seq_domain, cfg.context, np.flatnonzero(spec), cfg.n_perm, rng)
    keep = seq_domain < 2
    act2 = active.reshape(len(seq_domain), cfg.context, -1)[torch.from_numpy(keep)].reshape(-1, active.shape[1])
    sel2, null2 = selectivity_null(act2, seq_domain[keep], cfg.context, np.flatnonzero(spec), cfg.n_perm, rng)
    boot = universal_fraction_bootstrap([p.active for p in profiles], seq_domain, cfg.context, 0.9,
                                        rng=conversion_rng(cfg, 0, 102))
    return Structure(fd, [float(u.mean()) for u in uni], uni0, sel, null, sel2, null2,
                     [activation_frequency(p.active) for p in profiles], boot)


# ----------------------------------------------------------------------------- C2, C3: training-free conversion

@dataclass
class ConversionResults:
    losses: pd.DataFrame                                  # seed, budget, method, domain..., mean
    active: dict[tuple[float, str], tuple[int, int, float]]   # (budget, method) -> (min, max, mean) per token
    exact: dict[str, float]                               # method -> max |Δ logit| with all experts on
    shared_sizes: dict[tuple[float, str], list[int]]      # (budget, method) -> |U_l| (seed 0)
    routings0: dict[tuple[float, str], list[Routing]]     # seed-0 routings
    dense: dict[str, float]
    seconds: float = 0.0
    router_mse: list[float] = field(default_factory=list)


def seed_profiles(cfg, model: GPT, corpora: Corpora, s: int, seed0: tuple | None = None) -> list[LayerProfile]:
    """Calibration activation profiles of conversion seed ``s``; seed 0's may be passed in (``seed0[2]``)."""
    if s == 0 and seed0 is not None:
        return seed0[2]
    rows, _ = calibration_set(corpora, cfg.n_calib_seqs, cfg.context, conversion_rng(cfg, s, 1))
    return profile_model(model, rows, cfg.top_rho)


def run_conversions(cfg, model: GPT, corpora: Corpora, heldout: dict[str, np.ndarray],
                    progress: Callable[[str], None] | None = None, seed0: tuple | None = None) -> ConversionResults:
    """Every method at every budget for every conversion seed; held-out loss per domain and active counts.
    ``seed0`` = (rows, seq_domain, profiles) reuses seed 0's calibration profile."""
    t0 = time.perf_counter()
    w_gs = [m.w_g.weight for m in model.mlps]
    rows_out, active, exact, sizes, r0, mse = [], {}, {}, {}, {}, []
    dense = evaluate_loss(model, heldout)
    probe = np.concatenate([heldout[d][:2] for d in DOMAINS])
    for s in range(cfg.n_seeds):
        profiles = seed_profiles(cfg, model, corpora, s, seed0)
        patterns = [C.pattern_vectors(p) for p in profiles]
        fixed: dict[str, list[Routing]] = {}      # partitions without a shared expert do not depend on the budget
        for b in cfg.budgets:
            for method in C.METHODS:
                if method in fixed:
                    k = C.plan_no_shared(cfg.d_ff, cfg.n_experts, C.budget_neurons(b, cfg.d_ff)).k
                    rs = [dataclasses.replace(r, top_k=k, stats=dict(r.stats)) for r in fixed[method]]
                else:
                    rs = C.convert(method, profiles, w_gs, b, cfg.n_experts, cfg.n_router_reps, cfg.kmeans_iters,
                                   conversion_rng(cfg, s, 2 + C.METHODS.index(method)), cfg.moef_router_steps,
                                   patterns)
                    if method in ("moefication", "moefication_rep", "random_split"):
                        fixed[method] = rs
                ev = evaluate_loss(converted(model, rs), heldout, count_active=True)
                rows_out.append({"seed": s, "budget": b, "method": method, **{d: ev[d] for d in DOMAINS},
                                 "mean": ev["mean"]})
                lo = min(a[0] for a in ev["active"])
                hi = max(a[1] for a in ev["active"])
                mean = float(np.mean([a[2] for a in ev["active"]]))
                prev = active.get((b, method))
                active[(b, method)] = (lo, hi, mean) if prev is None else (min(prev[0], lo), max(prev[1], hi), mean)
                if method == "moefication":
                    mse += [r.stats.get("router_mse", float("nan")) for r in rs]
                if s == 0:
                    r0[(b, method)] = rs
                    sizes[(b, method)] = [int(r.shared.sum()) for r in rs]
                    if method not in ("static", "oracle"):
                        exact[f"{method} @ {100 * b:g} %"] = max_logit_diff(model, converted(model, C.all_experts_on(rs)), probe)
            if progress:
                progress(f"seed {s} budget {b:g} done ({time.perf_counter() - t0:.0f} s)")
    # the oracle with its budget set to d_ff is the dense model too
    orc = [Routing("oracle", torch.zeros(cfg.d_ff, dtype=torch.bool), torch.full((cfg.d_ff,), -1), budget=cfg.d_ff)
           for _ in model.mlps]
    exact["oracle @ 100 %"] = max_logit_diff(model, converted(model, orc), probe)
    return ConversionResults(pd.DataFrame(rows_out), active, exact, sizes, r0, dense,
                             time.perf_counter() - t0, mse)


def per_seed(res: ConversionResults, budget: float, method: str, col: str = "mean") -> np.ndarray:
    d = res.losses
    return d[(d.budget == budget) & (d.method == method)].sort_values("seed")[col].to_numpy(float)


def macs_table(cfg, res: ConversionResults) -> pd.DataFrame:
    """FFN multiply-adds per token (all layers) of every method and budget, counted exactly (card, C5)."""
    dense = ffn_macs(cfg.d_model, cfg.d_ff, None) * cfg.n_layers
    out = []
    for (b, m), rs in res.routings0.items():
        mean_active = res.active[(b, m)][2]
        total = sum(ffn_macs(cfg.d_model, cfg.d_ff, r, mean_active) for r in rs)
        neurons = 3.0 * cfg.d_model * mean_active * cfg.n_layers
        out.append({"budget": b, "method": m, "MACs/token": total, "MACs / dense": total / dense,
                    "neuron MACs / dense": neurons / dense if m != "oracle" else 1.0,
                    "router MACs / dense": (total - neurons) / dense if m != "oracle" else total / dense - 1})
    return pd.DataFrame(out)


# ----------------------------------------------------------------------------- C4: downcycling

def downcycle_plans(cfg, freqs: list[np.ndarray]) -> list[LayerPlan]:
    """1 shared + top-k of E routed, average active fraction ``downcycle_active``: the shared total solves
    Σ_l (u_l + k (d_ff − u_l)/E) = L · ρ·d_ff; the per-layer sizes follow the knees (layer-adaptive)."""
    E, k, d_ff, L = cfg.downcycle_experts, cfg.downcycle_topk, cfg.d_ff, cfg.n_layers
    u_star = (cfg.downcycle_active * d_ff - k * d_ff / E) / (1 - k / E)
    lo, hi = max(1, int(np.ceil(0.02 * d_ff))), int(0.4 * d_ff)
    from .partition import layer_adaptive_shared
    u = np.round(layer_adaptive_shared(freqs, max(u_star, lo) * L, lo, hi)).astype(int)
    return [LayerPlan(int(ul), expert_sizes(d_ff - int(ul), E), k, int(round(cfg.downcycle_active * d_ff)))
            for ul in u]


def run_downcycling(cfg, model: GPT, corpora: Corpora, heldout: dict[str, np.ndarray],
                    progress: Callable[[str], None] | None = None, seed0: tuple | None = None
                    ) -> tuple[dict[str, np.ndarray], list[int], list[LayerPlan]]:
    """Continued training from three inits with the same architecture and shared sizes, differing only in the
    partition: ExpertWeaver (shared = universal neurons, clusters of activation patterns), random split (random
    shared set, random experts) and MoEfication (the same random shared set, weight-clustered experts).
    Returns per init the validation curves [seeds, checkpoints], the checkpoint steps and seed 0's plans."""
    w_gs = [m.w_g.weight for m in model.mlps]
    curves: dict[str, list] = {"expertweaver": [], "random_split": [], "moefication": []}
    steps, plans0 = [], []
    t0 = time.perf_counter()
    for s in range(cfg.n_seeds):
        profiles = seed_profiles(cfg, model, corpora, s, seed0)
        X = [C.pattern_vectors(p) for p in profiles]
        plans = downcycle_plans(cfg, [activation_frequency(p.active) for p in profiles])
        plans0 = plans0 or plans
        r_rng = conversion_rng(cfg, s, 20)
        inits = {"expertweaver": [C.weave_layer(p, pl, cfg.n_router_reps, cfg.kmeans_iters, conversion_rng(cfg, s, 21), x)
                                  for p, pl, x in zip(profiles, plans, X)]}
        shared_rand = [r_rng.permutation(cfg.d_ff)[:pl.u] for pl in plans]
        inits["random_split"] = [C.partition_layer("random", p, w, pl, cfg.n_router_reps, cfg.kmeans_iters, r_rng, x, sh)
                                 for p, w, pl, x, sh in zip(profiles, w_gs, plans, X, shared_rand)]
        inits["moefication"] = [C.partition_layer("weights", p, w, pl, cfg.n_router_reps, cfg.kmeans_iters,
                                                  conversion_rng(cfg, s, 22), x, sh)
                                for p, w, pl, x, sh in zip(profiles, w_gs, plans, X, shared_rand)]
        for name, rs in inits.items():
            h = downcycle(model, rs, corpora, heldout, cfg.downcycle_steps, cfg.downcycle_lr, cfg.downcycle_warmup,
                          cfg.lb_coef, cfg.downcycle_batch, cfg.context, cfg.eval_every,
                          data_seed=int(1000 * cfg.seed + s))
            curves[name].append(h["val"])
            steps = h["step"]
            if progress:
                progress(f"downcycling seed {s} {name}: {h['val'][0]:.3f} -> {h['val'][-1]:.3f} "
                         f"({time.perf_counter() - t0:.0f} s)")
    return {k: np.asarray(v) for k, v in curves.items()}, steps, plans0


# ----------------------------------------------------------------------------- C5: latency

def latency(cfg, model: GPT, routings: list[Routing], synthetic: tuple[int, int] = (512, 2048)) -> dict[str, Any]:
    """Batch-1 seconds per FFN call: layer 0 of the trained model converted at 25 % (dense, 25 % slice, converted)
    and a synthetic FFN of width ``synthetic`` = (d, d_ff) with the same rule's sizes (uniform shared ½·ρ_b·d_ff,
    E = n_experts routed experts); the synthetic FFN's timing repeats and its dense / converted speed-up with a
    bootstrap interval over them (``synthetic_speedup`` = (estimate, lo, hi), claim C5)."""
    mlp, r = model.mlps[0], routings[0]
    experts = r.experts()
    with torch.no_grad():
        card = lat.layer_latency(mlp.w_g.weight.detach(), mlp.w_u.weight.detach(), mlp.w_d.weight.detach(),
                                 torch.nonzero(r.shared).flatten(), experts, r.reps, r.top_k, 0.25, cfg.latency_reps,
                                 torch.Generator().manual_seed(cfg.seed))
    d, d_ff = synthetic
    B = int(round(0.25 * d_ff))
    plan = plan_layer(B / 2, d_ff, cfg.n_experts, B, C.tolerance(d_ff), u_min=1)
    w_g, w_u, w_d, shared, ex, reps, g = lat.synthetic_ffn(d, d_ff, plan, cfg.n_router_reps, cfg.seed)
    syn, syn_rep = lat.layer_latency(w_g, w_u, w_d, shared, ex, reps, plan.k, 0.25, max(10, cfg.latency_reps // 3), g,
                                     with_repeats=True)
    return {"card": card, "synthetic": syn, "synthetic_plan": plan, "synthetic_width": synthetic,
            "synthetic_repeats": syn_rep,
            "synthetic_speedup": lat.speedup_interval(syn_rep["dense"], syn_rep["moe"], rng=conversion_rng(cfg, 0, 103))}
