"""Dense-to-MoE conversions at a matched active-neuron budget: ExpertWeaver and its baselines (card, Method, Baselines).

Every conversion returns one :class:`~repro.expertweaver.model.Routing` per layer; all keep the dense weights, so
with every expert selected they reproduce the dense model exactly (control K1).

* ``expertweaver`` — shared = the most frequently active neurons, layer-adaptive sizes (knee, rescaled to
  Σ_l |U_l| = ½·ρ_b·L·d_ff); routed = balanced k-means on the normalised activation patterns b_i/‖b_i‖;
  representative-neuron router (no training).
* ``cmoe`` — the same with a uniform shared size ½·ρ_b·d_ff in every layer (CMoE-style; the C3 ablation).
* ``moefication`` / ``moefication_rep`` — MoEfication (Zhang et al. 2022): no shared expert, balanced k-means on the
  gate weight vectors w_{g,i}; an MLP router trained to predict each expert's summed |h|, or our representative router.
* ``random_split`` — LLaMA-MoE-style random equal partition, representative router.
* ``static`` — the globally most frequently active neurons of the layer, no routing.
* ``oracle`` — the top ρ_b·d_ff neurons by |h| per token (an upper bound, not deployable).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from .model import Routing
from .partition import (LayerPlan, balanced_kmeans, knee_threshold, layer_adaptive_shared, plan_layer, plan_no_shared,
                        representatives)
from .profile import LayerProfile, activation_frequency

METHODS = ("expertweaver", "cmoe", "moefication", "moefication_rep", "random_split", "static", "oracle")
LABELS = {"expertweaver": "ExpertWeaver", "cmoe": "CMoE-style (uniform shared)", "moefication": "MoEfication (MLP router)",
          "moefication_rep": "MoEfication (rep. router)", "random_split": "random split (LLaMA-MoE)",
          "static": "static pruning", "oracle": "oracle top-k (bound)", "dense": "dense"}


def pattern_vectors(p: LayerProfile) -> np.ndarray:
    """The Gram matrix [d_ff, d_ff] of b_i / ‖b_i‖, each neuron's binary activation pattern over the calibration
    tokens, normalised: entry (i, j) is the cosine co-activation of neurons i and j. Balanced k-means and the
    representatives need only this (k-means in Gram form)."""
    b = p.active.double()
    G = b.T @ b
    norm = G.diagonal().clamp_min(1e-12).sqrt()
    return (G / norm[:, None] / norm[None, :]).numpy()


def budget_neurons(budget: float, d_ff: int) -> int:
    return int(round(budget * d_ff))


def tolerance(d_ff: int) -> int:
    """Allowed per-token deviation from the budget: 1 % of d_ff (control K2), in whole neurons."""
    return max(0, int(np.floor(0.01 * d_ff)))


def shared_plans(freqs: list[np.ndarray], budget: float, d_ff: int, n_experts: int, adaptive: bool
                 ) -> list[LayerPlan]:
    """Card Method 5: layer-adaptive (knee) or uniform shared sizes with Σ_l |U_l| = ½·ρ_b·L·d_ff."""
    B = budget_neurons(budget, d_ff)
    L = len(freqs)
    lo = max(1, int(np.ceil(0.02 * d_ff)))
    if adaptive:
        e_typ = (d_ff - B / 2) / n_experts
        targets = layer_adaptive_shared(freqs, 0.5 * B * L, lo, int(max(lo, B - e_typ)))
    else:
        targets = np.full(L, 0.5 * B)
    return [plan_layer(t, d_ff, n_experts, B, tolerance(d_ff), u_min=lo) for t in targets]


def _routing(shared_idx: np.ndarray, labels_of_routed: np.ndarray, routed_idx: np.ndarray, d_ff: int,
             n_experts: int, k: int, reps: np.ndarray | None, kind: str = "rep") -> Routing:
    shared = torch.zeros(d_ff, dtype=torch.bool)
    shared[torch.as_tensor(shared_idx, dtype=torch.long)] = True
    expert_of = torch.full((d_ff,), -1, dtype=torch.long)
    expert_of[torch.as_tensor(routed_idx, dtype=torch.long)] = torch.as_tensor(labels_of_routed, dtype=torch.long)
    return Routing(kind, shared, expert_of, n_experts, k,
                   reps=None if reps is None else torch.as_tensor(reps, dtype=torch.long))


def weave_layer(p: LayerProfile, plan: LayerPlan, R: int, iters: int, rng: np.random.Generator,
                X: np.ndarray | None = None) -> Routing:
    """Shared = top-u by activation frequency; the rest clustered by activation pattern; representative router."""
    d_ff = p.a.shape[1]
    X = pattern_vectors(p) if X is None else X
    f = activation_frequency(p.active)
    order = np.argsort(-f, kind="stable")
    shared, routed = order[:plan.u], np.sort(order[plan.u:])
    G = X[np.ix_(routed, routed)]
    labels = balanced_kmeans(None, plan.sizes, iters, rng, gram=G)
    reps = routed[representatives(None, labels, len(plan.sizes), min(R, min(plan.sizes)), gram=G)]
    return _routing(shared, labels, routed, d_ff, len(plan.sizes), plan.k, reps)


def partition_layer(kind: str, p: LayerProfile, w_g: torch.Tensor, plan: LayerPlan, R: int, iters: int,
                    rng: np.random.Generator, X: np.ndarray | None = None, shared_idx: np.ndarray | None = None
                    ) -> Routing:
    """A baseline partition of the non-shared neurons into ``plan.sizes``: ``"weights"`` (MoEfication: balanced
    k-means on normalised w_g rows) or ``"random"``; the representative router from activation patterns."""
    d_ff = p.a.shape[1]
    X = pattern_vectors(p) if X is None else X
    shared = np.zeros(0, np.int64) if shared_idx is None else np.asarray(shared_idx)
    routed = np.setdiff1d(np.arange(d_ff), shared)
    if kind == "weights":
        W = w_g.detach().numpy()[routed]
        labels = balanced_kmeans(W / np.linalg.norm(W, axis=1, keepdims=True), plan.sizes, iters, rng)
    elif kind == "random":
        labels = np.repeat(np.arange(len(plan.sizes)), plan.sizes)[rng.permutation(len(routed))]
    else:
        raise ValueError(kind)
    reps = routed[representatives(None, labels, len(plan.sizes), min(R, min(plan.sizes)),
                                  gram=X[np.ix_(routed, routed)])]
    return _routing(shared, labels, routed, d_ff, len(plan.sizes), plan.k, reps)


class MLPRouter(nn.Module):
    """MoEfication's router: a 2-layer MLP from the MLP input to each expert's predicted summed |h|."""

    def __init__(self, d: int, n_experts: int, hidden: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, n_experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def train_mlp_router(p: LayerProfile, r: Routing, steps: int, seed: int, hidden: int | None = None,
                     batch: int = 512, lr: float = 3e-3) -> tuple[MLPRouter, float]:
    """Fit the router to the per-expert summed |h| (MSE on targets scaled by their std) on calibration tokens;
    returns the router and its final training MSE."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    d = p.x.shape[1]
    hidden = hidden or d
    onehot = torch.nn.functional.one_hot(r.expert_of.clamp_min(0), r.n_experts).float() * (r.expert_of >= 0)[:, None]
    target = p.h.abs() @ onehot                                                   # [N, E]
    target = target / target.std().clamp_min(1e-8)
    router = MLPRouter(d, r.n_experts, hidden)
    opt = torch.optim.Adam(router.parameters(), lr=lr)
    loss = torch.zeros(())
    for _ in range(steps):
        idx = torch.randint(0, len(target), (batch,), generator=g)
        loss = ((router(p.x[idx]) - target[idx]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    router.eval()
    for q in router.parameters():
        q.requires_grad_(False)
    return router, float(loss.detach())


def convert(method: str, profiles: list[LayerProfile], w_gs: list[torch.Tensor], budget: float, n_experts: int,
            R: int, iters: int, rng: np.random.Generator, router_steps: int = 200,
            patterns: list[np.ndarray] | None = None) -> list[Routing]:
    """One routing per layer for ``method`` at active fraction ``budget`` (see the module docstring)."""
    d_ff = profiles[0].a.shape[1]
    B = budget_neurons(budget, d_ff)
    freqs = [activation_frequency(p.active) for p in profiles]
    X = patterns or [pattern_vectors(p) for p in profiles]
    if method in ("expertweaver", "cmoe"):
        plans = shared_plans(freqs, budget, d_ff, n_experts, adaptive=method == "expertweaver")
        return [weave_layer(p, pl, R, iters, rng, x) for p, pl, x in zip(profiles, plans, X)]
    if method in ("moefication", "moefication_rep", "random_split"):
        plan = plan_no_shared(d_ff, n_experts, B)
        kind = "random" if method == "random_split" else "weights"
        out = [partition_layer(kind, p, w, plan, R, iters, rng, x) for p, w, x in zip(profiles, w_gs, X)]
        if method == "moefication":
            for p, r in zip(profiles, out):
                r.router, mse = train_mlp_router(p, r, router_steps, int(rng.integers(2**31)))
                r.kind, r.stats["router_mse"] = "mlp", mse
        return out
    if method == "static":
        out = []
        for f in freqs:
            keep = np.argsort(-f, kind="stable")[:B]
            out.append(_routing(keep, np.zeros(0), np.zeros(0, np.int64), d_ff, 0, 0, None, kind="static"))
        return out
    if method == "oracle":
        return [Routing("oracle", torch.zeros(d_ff, dtype=torch.bool), torch.full((d_ff,), -1), budget=B)
                for _ in profiles]
    raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")


def all_experts_on(routings: list[Routing]) -> list[Routing]:
    """The same partitions with every expert selected (k = E): must reproduce the dense model (control K1)."""
    out = []
    for r in routings:
        if r.kind in ("static", "oracle"):
            continue
        out.append(Routing(r.kind, r.shared, r.expert_of, r.n_experts, r.n_experts, reps=r.reps, router=r.router))
    return out
