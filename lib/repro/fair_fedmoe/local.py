"""Local training at every site (card, *Method*, "Fairness-aware Expert Routing"), batched over sites.

Fair-MoE loss of a sample (x, y, a) at site k, with h = adapter(x) and c_g = cos(h, p_g):

    L = BCE(E_a(h), y) + λ_p · CE(c / τ_r, a) + λ_s · Σ_{g ≠ a} max(0, c_g − m)

— the true group's expert only (hard routing: experts g ≠ a get exactly zero gradient), a prototype
classification term that makes the prototypes group-discriminative (they route at test time), and a separation
hinge. The single-head baselines minimise BCE only. All sites start from the same initialisation and draw their
mini-batches from one index stream (:func:`batch_indices`), shared by the MoE and the single head of a seed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .data import SiteData
from .models import Params, adapter, expert_logits, head_logits, proto_cos

BATCH = 64


@dataclass(frozen=True)
class LossWeights:
    tau_route: float = 0.1
    lambda_proto: float = 0.5
    lambda_sep: float = 0.1
    sep_margin: float = 0.2


@dataclass
class Stacked:
    """K sites' training data padded to one tensor: X [K, N, D], y [K, N], g [K, N], sizes n [K]."""

    X: torch.Tensor
    y: torch.Tensor
    g: torch.Tensor
    n: np.ndarray

    @classmethod
    def from_sites(cls, sites: list[SiteData]) -> "Stacked":
        n = np.array([len(s) for s in sites])
        N, D = int(n.max()), sites[0].X.shape[1]
        X, y, g = np.zeros((len(sites), N, D), np.float32), np.zeros((len(sites), N)), np.zeros((len(sites), N), int)
        for k, s in enumerate(sites):
            X[k, :n[k]], y[k, :n[k]], g[k, :n[k]] = s.X, s.y, s.g
        return cls(torch.from_numpy(X), torch.from_numpy(y).float(), torch.from_numpy(g).long(), n)


def batch_indices(n: np.ndarray, steps: int, seed: int, batch: int = BATCH) -> torch.Tensor:
    """Mini-batch indices [steps, K, batch], uniform with replacement within each site (one stream per seed)."""
    u = np.random.default_rng([seed, 404]).random((steps, len(n), batch))
    return torch.from_numpy(np.minimum((u * n[None, :, None]).astype(np.int64), n[None, :, None] - 1))


def moe_loss(p: Params, x: torch.Tensor, y: torch.Tensor, a: torch.Tensor, w: LossWeights) -> torch.Tensor:
    """The Fair-MoE loss, mean over the batch, summed over sites. x [K, B, D], y [K, B], a [K, B]."""
    h = adapter(p, x)
    logit = expert_logits(p, h).gather(-1, a.unsqueeze(-1)).squeeze(-1)       # hard routing to E_a
    bce = F.binary_cross_entropy_with_logits(logit, y, reduction="none").mean(1)
    cos = proto_cos(p, h)
    ce = F.cross_entropy((cos / w.tau_route).transpose(1, 2), a, reduction="none").mean(1)
    other = torch.ones_like(cos).scatter_(-1, a.unsqueeze(-1), 0.0)
    sep = (F.relu(cos - w.sep_margin) * other).sum(-1).mean(1)
    return (bce + w.lambda_proto * ce + w.lambda_sep * sep).sum()


def head_loss(p: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(head_logits(p, x), y, reduction="none").mean(1).sum()


def train_stack(start: Params, data: Stacked, idx: torch.Tensor, kind: str, lr: float = 1e-3,
                weights: LossWeights = LossWeights()) -> Params:
    """Adam on every site's copy of ``start`` (K-stacked) for ``len(idx)`` steps; returns new K-stacked params.

    ``kind`` is 'moe' (Fair-MoE loss) or 'head' (BCE of the single head). A fresh Adam state per call.
    """
    p = {n: t.detach().clone().requires_grad_(True) for n, t in start.items()}
    opt = torch.optim.Adam(list(p.values()), lr=lr)
    rows = torch.arange(data.X.shape[0])[:, None]
    # Adam's second moments of rarely-used experts decay into subnormal floats, which cost ~10x per operation
    # on x86; flushing them to zero changes nothing measurable and is restored afterwards.
    flush = torch.set_flush_denormal(True)
    try:
        for b in idx:
            x, y, a = data.X[rows, b], data.y[rows, b], data.g[rows, b]
            loss = moe_loss(p, x, y, a, weights) if kind == "moe" else head_loss(p, x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    finally:
        if flush:
            torch.set_flush_denormal(False)
    return {n: t.detach() for n, t in p.items()}
