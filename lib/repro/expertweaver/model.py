"""The dense SwiGLU byte-level GPT of chapter 05 and the mixture-of-experts view of its MLPs.

A SwiGLU MLP (Shazeer 2020) computes ``y = W_d (SiLU(W_g x) ⊙ W_u x)``; hidden neuron ``i`` has the gate value
``a_i = SiLU(w_{g,i}·x)`` and the full GLU activation ``h_i = a_i · (w_{u,i}·x)``. A converted MLP keeps the same
weights and multiplies ``h`` by a per-token, per-neuron factor ``m``: 1 on the shared expert, 1 on the neurons of the
selected routed experts (training-free mode: no re-weighting, card Method 4), ``k·p_e`` in downcycling mode, 0 elsewhere.
We compute this *masked dense* form: it is exactly the sparse function (the unit tests check it), and it keeps the
whole chapter in a few torch calls. Compute is counted exactly by :func:`ffn_macs`, and measured separately on
sliced weights in :mod:`repro.expertweaver.latency`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Routing:
    """How one converted MLP picks its active neurons.

    ``kind``: ``"rep"`` (training-free representative-neuron router, card Method 4), ``"mlp"`` (MoEfication's
    trained router), ``"static"`` (a fixed neuron set), ``"oracle"`` (top-``budget`` |h| per token), ``"learned"``
    (downcycling: linear router ``W_r``, outputs scaled by k·softmax over the selected logits).
    ``shared``: bool [d_ff]; ``expert_of``: long [d_ff], the routed expert of each neuron (−1 for shared/static).
    """

    kind: str
    shared: torch.Tensor
    expert_of: torch.Tensor
    n_experts: int = 0
    top_k: int = 0
    reps: torch.Tensor | None = None          # [E, R] representative neuron ids ("rep")
    router: nn.Module | None = None           # "mlp" / "learned"
    budget: int = 0                           # "oracle": neurons per token
    stats: dict = field(default_factory=dict)

    def experts(self) -> list[torch.Tensor]:
        return [torch.nonzero(self.expert_of == e).flatten() for e in range(self.n_experts)]


class SwiGLU(nn.Module):
    """``y = W_d (SiLU(W_g x) ⊙ W_u x)``, optionally routed (``self.routing``)."""

    def __init__(self, d: int, d_ff: int) -> None:
        super().__init__()
        self.w_g = nn.Linear(d, d_ff, bias=False)
        self.w_u = nn.Linear(d, d_ff, bias=False)
        self.w_d = nn.Linear(d_ff, d, bias=False)
        self.routing: Routing | None = None
        self.record: list | None = None        # when a list, gate activations are appended (profiling)
        self.count_active: list | None = None  # when a list, per-token active-neuron counts are appended (hook)
        self.aux_loss = torch.zeros(())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = F.silu(self.w_g(x))
        u = self.w_u(x)
        h = a * u
        if self.record is not None:
            self.record.append((a.detach().reshape(-1, a.shape[-1]), h.detach().reshape(-1, h.shape[-1])))
        r = self.routing
        if r is None:
            if self.count_active is not None:
                self.count_active.append(torch.full((h[..., 0].numel(),), h.shape[-1]))
            return self.w_d(h)
        m = routing_mask(r, x, a, h)
        if self.count_active is not None:
            self.count_active.append((m != 0).reshape(-1, m.shape[-1]).sum(-1))
        if r.kind == "learned":
            m, self.aux_loss = m
        return self.w_d(h * m)


def _expert_mask(r: Routing, sel: torch.Tensor) -> torch.Tensor:
    """Neuron mask [..., d_ff] from selected experts [..., E] (bool or weights) and the shared set."""
    pad = torch.cat([sel, torch.zeros_like(sel[..., :1])], -1)            # column E = "no expert"
    idx = torch.where(r.expert_of < 0, r.n_experts, r.expert_of)
    m = pad[..., idx]
    return torch.where(r.shared, torch.ones_like(m), m)


def topk_select(scores: torch.Tensor, k: int) -> torch.Tensor:
    """One-hot [..., E] of the top-``k`` scores per row (ties to the lower index)."""
    idx = torch.topk(scores, k, dim=-1, sorted=False).indices
    return torch.zeros_like(scores).scatter_(-1, idx, 1.0)


def routing_mask(r: Routing, x: torch.Tensor, a: torch.Tensor, h: torch.Tensor):
    """The factor ``m`` [..., d_ff] that multiplies ``h`` (and, for ``learned``, the load-balancing loss)."""
    if r.kind == "static":
        return r.shared.to(h.dtype).expand_as(h)
    if r.kind == "oracle":
        return topk_select(h.abs(), r.budget)
    if r.kind == "rep":
        scores = a.abs()[..., r.reps].sum(-1)                             # s_e = Σ_{i∈R_e} |SiLU(w_g,i·x)|
        return _expert_mask(r, topk_select(scores, r.top_k))
    if r.kind == "mlp":
        return _expert_mask(r, topk_select(r.router(x), r.top_k))
    if r.kind == "learned":
        logits = r.router(x)                                              # [..., E]
        idx = torch.topk(logits, r.top_k, dim=-1).indices
        p_sel = torch.softmax(logits.gather(-1, idx), -1)                 # softmax over the k selected logits
        w = torch.zeros_like(logits).scatter(-1, idx, r.top_k * p_sel)    # k·p_e: 1 when the selected logits tie
        probs = torch.softmax(logits, -1).reshape(-1, r.n_experts)
        frac = (w != 0).float().reshape(-1, r.n_experts).mean(0) / r.top_k
        aux = r.n_experts * (frac * probs.mean(0)).sum()                  # Switch-style load balance
        return _expert_mask(r, w), aux
    raise ValueError(f"unknown routing kind {r.kind!r}")


class Block(nn.Module):
    def __init__(self, d: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.mlp = SwiGLU(d, d_ff)
        self.n_heads = n_heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(self.n1(x)).view(B, T, 3, self.n_heads, D // self.n_heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, D)
        x = x + self.proj(att)
        return x + self.mlp(self.n2(x))


class GPT(nn.Module):
    """Byte-level decoder: learned positions, pre-norm blocks with SwiGLU MLPs, tied head."""

    def __init__(self, n_layers: int, d: int, n_heads: int, d_ff: int, context: int, vocab: int = 256) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, n_heads, d_ff) for _ in range(n_layers))
        self.norm = nn.RMSNorm(d)
        self.apply(self._init)
        for b in self.blocks:   # GPT-2 scaling of the residual projections
            nn.init.normal_(b.proj.weight, std=0.02 / math.sqrt(2 * n_layers))
            nn.init.normal_(b.mlp.w_d.weight, std=0.02 / math.sqrt(2 * n_layers))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    @property
    def mlps(self) -> list[SwiGLU]:
        return [b.mlp for b in self.blocks]

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.emb(idx) + self.pos(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.norm(x) @ self.emb.weight.T

    def set_routing(self, routings: list[Routing | None]) -> "GPT":
        for mlp, r in zip(self.mlps, routings):
            mlp.routing = r
        return self


def build_model(cfg) -> GPT:
    return GPT(cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.context)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def lm_loss(model: GPT, rows: torch.Tensor) -> torch.Tensor:
    """Mean next-byte cross-entropy (nats/byte) of rows [B, T + 1]."""
    logits = model(rows[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1))


def ffn_macs(d: int, d_ff: int, routing: Routing | None, mean_active: float | None = None) -> float:
    """Multiply-adds per token of one MLP: 3·d per active neuron (gate, up and down projections) plus the router.

    Dense: 3·d·d_ff. Routed: 3·d·(active neurons) + router cost — ``R·E`` gate dot products (``d`` each) for the
    representative router, the MLP's two matrices for MoEfication's router, ``E·d`` for a linear router. The oracle
    pays the whole dense MLP to find its top-k. ``mean_active`` is the measured mean active count per token (for
    methods whose count varies by a neuron or two), else the count implied by the routing.
    """
    if routing is None:
        return 3.0 * d * d_ff
    r = routing
    if mean_active is None:
        raise ValueError("give the measured mean active-neuron count")
    macs = 3.0 * d * mean_active
    if r.kind == "rep":
        macs += r.reps.numel() * d
    elif r.kind == "mlp":
        macs += sum(p.numel() for n, p in r.router.named_parameters() if n.endswith("weight"))
    elif r.kind == "learned":
        macs += r.n_experts * d
    elif r.kind == "oracle":
        macs = 3.0 * d * d_ff + d * r.budget
    return macs
