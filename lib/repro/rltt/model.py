"""A small Ouro-style looped decoder with a per-loop readout, an exit gate and a KV cache per loop.

Method step 1 of the card (Ouro, "Scaling Latent Reasoning via Looped Language Models", 2025; the idea of
one shared block applied T times is the Universal Transformer, Dehghani et al. 2019):

    h_0 = embed(x) + pos
    h_t = Block(h_{t-1})                 t = 1..T          (the same weights every loop)
    logits_t = norm(h_t) @ E^T           the shared final RMSNorm and the tied LM head, after every loop
    λ_t = σ(w · norm(h_t) + b)           the exit gate
    p_t = λ_t Π_{s<t} (1 − λ_s)  (t < T),   p_T = Π_{s<T} (1 − λ_s)      the exit distribution

``P^(t)`` (the distribution read out after loop t) is what RLTT credits; GRPO uses ``P^(T)`` only.
Decoding keeps one key/value cache per (loop, layer): loop t at position j attends to loop t's keys and
values at positions <= j, exactly as a full recomputation does (tested).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

Cache = list  # cache[t][l] = (k, v), each [B, heads, positions, d_head]


def exit_pdf_from_gates(lambdas: torch.Tensor) -> torch.Tensor:
    """Exit distribution over the last axis (T loops) from gates λ ∈ (0, 1); sums to one per token.

    p_t = λ_t Π_{s<t}(1 − λ_s) for t < T and p_T = Π_{s<T}(1 − λ_s) (λ_T is never used).
    """
    T = lambdas.shape[-1]
    if T == 1:
        return torch.ones_like(lambdas)
    survive = torch.cumprod(1 - lambdas[..., :-1], dim=-1)                        # Π_{s<=t}(1 − λ_s)
    before = torch.cat([torch.ones_like(lambdas[..., :1]), survive[..., :-1]], -1)  # Π_{s<t}
    return torch.cat([lambdas[..., :-1] * before, survive[..., -1:]], dim=-1)


class Block(nn.Module):
    """Pre-norm transformer layer: causal multi-head attention and a SwiGLU MLP, both residual."""

    def __init__(self, d: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.n_heads, self.d_head = n_heads, d // n_heads
        self.norm1, self.norm2 = nn.RMSNorm(d, eps=1e-6), nn.RMSNorm(d, eps=1e-6)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.w_in = nn.Linear(d, 2 * d_ff, bias=False)    # gate and value halves of SwiGLU
        self.w_out = nn.Linear(d_ff, d, bias=False)

    def forward(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        B, L, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, L, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)
        past_len = 0
        if past is not None:
            past_len = past[0].shape[2]
            k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)
        if past_len == 0:
            att = F.scaled_dot_product_attention(q, k, v, is_causal=L > 1)
        elif L == 1:
            att = F.scaled_dot_product_attention(q, k, v)
        else:  # several new positions after a cache: causal with an offset
            allowed = torch.arange(past_len + L)[None, :] <= (past_len + torch.arange(L))[:, None]
            att = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        x = x + self.proj(att.transpose(1, 2).reshape(B, L, d))
        a, b = self.w_in(self.norm2(x)).chunk(2, dim=-1)
        return x + self.w_out(F.silu(a) * b), (k, v)


@dataclass
class LoopOutput:
    """``per_loop_logits`` [T', B, L, V] for the loops read out; ``exit_pdf`` and ``gates`` [B, L, T]."""

    per_loop_logits: torch.Tensor
    exit_pdf: torch.Tensor | None
    gates: torch.Tensor | None
    cache: Cache | None


class LoopedLM(nn.Module):
    """Token + learned positional embedding, one shared block applied ``t_max`` times, per-loop readout."""

    def __init__(self, vocab: int, d_model: int = 64, n_heads: int = 4, n_layers_per_loop: int = 1,
                 t_max: int = 4, max_len: int = 24, d_ff: int | None = None) -> None:
        super().__init__()
        d_ff = d_ff or 4 * -(-(8 * d_model) // 12)
        self.t_max, self.max_len, self.vocab = t_max, max_len, vocab
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, d_ff) for _ in range(n_layers_per_loop))
        self.norm = nn.RMSNorm(d_model, eps=1e-6)
        self.gate = nn.Linear(d_model, 1)
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)

    def readout(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (tied head) and exit gate λ of hidden states ``h`` [..., d]."""
        z = self.norm(h)
        return z @ self.tok.weight.T, torch.sigmoid(self.gate(z)).squeeze(-1)

    def forward(self, ids: torch.Tensor, n_loops: int | None = None, cache: Cache | None = None,
                readout: str = "all", use_cache: bool = False) -> LoopOutput:
        """Run ``n_loops`` (default ``t_max``) loops over ``ids`` [B, L] after the positions in ``cache``.

        ``readout="all"`` returns every loop's logits and the exit distribution; ``"last"`` only the
        last loop's logits (what sampling and GRPO need). With ``use_cache`` the returned cache extends
        the given one by the new positions.
        """
        T = self.t_max if n_loops is None else int(n_loops)
        if not 1 <= T <= self.t_max:
            raise ValueError(f"n_loops must lie in 1..{self.t_max}; got {n_loops}")
        B, L = ids.shape
        past_len = 0 if cache is None else cache[0][0][0].shape[2]
        if past_len + L > self.max_len:
            raise ValueError(f"sequence of {past_len + L} positions exceeds max_len={self.max_len}")
        h = self.tok(ids) + self.pos(torch.arange(past_len, past_len + L))
        states, new_cache = [], []
        for t in range(T):
            layer_cache = []
            for l, block in enumerate(self.blocks):
                h, kv = block(h, None if cache is None else cache[t][l])
                layer_cache.append(kv)
            new_cache.append(layer_cache)
            if readout == "all" or t == T - 1:
                states.append(h)
        logits, gates = self.readout(torch.stack(states))              # [T', B, L, V], [T', B, L]
        if readout == "all":
            gates = gates.permute(1, 2, 0)
            return LoopOutput(logits, exit_pdf_from_gates(gates), gates, new_cache if use_cache else None)
        return LoopOutput(logits, None, None, new_cache if use_cache else None)


def build_model(cfg, vocab: int) -> LoopedLM:
    """The chapter's model from its config (``t_max``, ``d_model``, ``layers_per_loop``, ``max_len``)."""
    return LoopedLM(vocab, cfg.d_model, cfg.n_heads, cfg.layers_per_loop, cfg.t_max, cfg.max_len, cfg.d_ff)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
