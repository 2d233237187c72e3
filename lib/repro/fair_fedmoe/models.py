"""The trainable part on top of the frozen FM features, written for a *stack* of sites (card, *Models*).

Every parameter carries a leading site axis K, so the K local models of a federation train in one batched
computation (their losses are independent and Adam is element-wise, so this is exactly K separate trainings).
A model is a plain ``dict[str, Tensor]``:

* **Fair-MoE** (the method's local model): adapter h = ReLU(x A + a) (64→64); G group experts
  E_g(h) = v_gᵀ ReLU(W_gᵀ h + c_g) + e_g (64→32→1); prototypes P ∈ R^{G×64}.
  Routing weights w_g(h) = softmax_g(cos(h, p_g)/τ_r). Training: the true group a picks its expert (hard routing,
  no inter-group interference). Test: ŷ = Σ_g w_g(h) σ(E_g(h)) (soft routing, groups unknown), or σ(E_a(h)) when
  the group is given.
* **Single head** (every baseline): the same adapter and one head 64 → 32·G → 1 (same width as all experts).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

Params = dict[str, torch.Tensor]
D, H_EXPERT = 64, 32
MOE_KEYS = ("A", "a", "W", "c", "v", "e", "P")
HEAD_KEYS = ("A", "a", "Wh", "ch", "vh", "eh")
ADAPTER_KEYS = ("A", "a")


def _uniform(gen: torch.Generator, shape: tuple[int, ...], fan_in: int) -> torch.Tensor:
    bound = 1 / math.sqrt(fan_in)
    return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).float() * bound


def init_moe(n_groups: int, seed: int, d: int = D, h: int = H_EXPERT) -> Params:
    """One Fair-MoE initialisation (no site axis); PyTorch-default uniform weights, prototypes N(0, I)."""
    gen = torch.Generator().manual_seed(seed)
    return {"A": _uniform(gen, (d, d), d), "a": _uniform(gen, (d,), d),
            "W": _uniform(gen, (n_groups, d, h), d), "c": _uniform(gen, (n_groups, h), d),
            "v": _uniform(gen, (n_groups, h), h), "e": _uniform(gen, (n_groups,), h),
            "P": torch.randn((n_groups, d), generator=gen)}


def init_head(n_groups: int, seed: int, d: int = D, h: int = H_EXPERT) -> Params:
    """One single-head initialisation; the adapter equals the MoE's of the same seed."""
    moe = init_moe(n_groups, seed, d, h)
    gen = torch.Generator().manual_seed(seed + 7919)
    w = h * n_groups
    return {"A": moe["A"].clone(), "a": moe["a"].clone(), "Wh": _uniform(gen, (d, w), d),
            "ch": _uniform(gen, (w,), d), "vh": _uniform(gen, (w,), w), "eh": _uniform(gen, (), w)}


def stack(p: Params, k: int) -> Params:
    """K copies of one initialisation (every site starts from the same parameters)."""
    return {n: t.unsqueeze(0).repeat(k, *([1] * t.dim())).contiguous() for n, t in p.items()}


def unstack(p: Params, k: int) -> Params:
    return {n: t[k] for n, t in p.items()}


def adapter(p: Params, x: torch.Tensor) -> torch.Tensor:
    """h = ReLU(x A + a); x [K, B, D] with K-stacked parameters."""
    return F.relu(torch.bmm(x, p["A"]) + p["a"][:, None, :])


def expert_logits(p: Params, h: torch.Tensor) -> torch.Tensor:
    """E_g(h) for every g: [K, B, G]."""
    K, G, Dm, Hh = p["W"].shape
    W = p["W"].permute(0, 2, 1, 3).reshape(K, Dm, G * Hh)               # all experts in one matmul
    z = F.relu((torch.bmm(h, W) + p["c"].reshape(K, 1, G * Hh)).reshape(K, -1, G, Hh))
    return (z * p["v"][:, None]).sum(-1) + p["e"][:, None, :]


def proto_cos(p: Params, h: torch.Tensor) -> torch.Tensor:
    """cos(h, p_g): [K, B, G]."""
    return torch.bmm(F.normalize(h, dim=-1, eps=1e-8), F.normalize(p["P"], dim=-1, eps=1e-8).transpose(1, 2))


def head_logits(p: Params, x: torch.Tensor) -> torch.Tensor:
    """Single-head logits [K, B]."""
    h = adapter(p, x)
    z = F.relu(torch.bmm(h, p["Wh"]) + p["ch"][:, None, :])
    return torch.bmm(z, p["vh"].unsqueeze(-1)).squeeze(-1) + p["eh"][:, None]


def moe_scores(p: Params, x: torch.Tensor, tau: float, group: torch.Tensor | None = None) -> torch.Tensor:
    """Predicted probabilities [K, B]: soft prototype routing (``group=None``) or the given group's expert."""
    h = adapter(p, x)
    probs = torch.sigmoid(expert_logits(p, h))
    if group is not None:
        return probs.gather(-1, group.expand(probs.shape[0], -1).unsqueeze(-1)).squeeze(-1)
    w = torch.softmax(proto_cos(p, h) / tau, dim=-1)
    return (w * probs).sum(-1)


def predict(p: Params, X, kind: str, tau: float = 0.1, group=None) -> "np.ndarray":
    """Scores of one (unstacked) model on numpy features; ``kind`` is 'moe' or 'head'."""
    import numpy as np

    x = torch.as_tensor(np.asarray(X), dtype=torch.float32)[None]
    ps = {n: t[None] for n, t in p.items()}
    with torch.no_grad():
        if kind == "head":
            s = torch.sigmoid(head_logits(ps, x))[0]
        else:
            grp = None if group is None else torch.as_tensor(np.asarray(group), dtype=torch.long)[None]
            s = moe_scores(ps, x, tau, grp)[0]
    return s.double().numpy()


def route_argmax(p: Params, X) -> "np.ndarray":
    """argmax_g cos(h, p_g) of one (unstacked) MoE on numpy features (control K2)."""
    import numpy as np

    x = torch.as_tensor(np.asarray(X), dtype=torch.float32)[None]
    ps = {n: t[None] for n, t in p.items()}
    with torch.no_grad():
        return proto_cos(ps, adapter(ps, x))[0].argmax(-1).numpy()


def hidden(p: Params, X) -> "np.ndarray":
    """Adapter output h of one (unstacked) model on numpy features."""
    import numpy as np

    x = torch.as_tensor(np.asarray(X), dtype=torch.float32)[None]
    with torch.no_grad():
        return adapter({n: t[None] for n, t in p.items()}, x)[0].numpy()
