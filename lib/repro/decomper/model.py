"""The byte-level LLaMA-style decoder of the chapter and its low-rank linear map (card, "Model").

``LlamaLM``: byte embedding (vocab 256) + learned positions, ``n_layers`` pre-norm blocks (RMSNorm, causal
multi-head attention with maps q, k, v, o; RMSNorm, SwiGLU MLP with maps gate, up, down), final RMSNorm, head
tied to the embedding. Every one of the seven linear maps of a block is a plain ``nn.Linear`` (no bias) in the
dense model and a :class:`LowRankLinear` ``x ↦ A (B x) + bias`` after compression.

A block exposes its two residual branches separately (``attn_core`` → ``o``; ``mlp_hidden`` → ``down``), so that
the compensation can read the *code* ``z = B x`` of an output-side factor and refit ``A`` (``compensate.py``), and
:func:`collect_block_io` returns the block inputs h_{l−1}, mid-residuals h^mid_l and outputs h_l.
"""
from __future__ import annotations

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

LINEARS = ("q", "k", "v", "o", "gate", "up", "down")


class LowRankLinear(nn.Module):
    """``y = A (B x) + bias`` with ``A`` (m × r) and ``B`` (r × n): the factored form of a rank-r map."""

    def __init__(self, A: torch.Tensor, B: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.A = nn.Parameter(A.detach().clone().float())
        self.B = nn.Parameter(B.detach().clone().float())
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone().float())

    @property
    def rank(self) -> int:
        return self.A.shape[1]

    def code(self, x: torch.Tensor) -> torch.Tensor:
        """z = B x, the r-dimensional code that ``A`` maps to the output."""
        return F.linear(x, self.B)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.linear(x, self.B), self.A, self.bias)

    def dense_weight(self) -> torch.Tensor:
        return self.A @ self.B


class Block(nn.Module):
    """Pre-norm block: h_mid = h + o(attn(norm1 h)); h_out = h_mid + down(silu(gate(n)) ⊙ up(n)), n = norm2 h_mid."""

    def __init__(self, d: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.norm1, self.norm2 = nn.RMSNorm(d, eps=1e-6), nn.RMSNorm(d, eps=1e-6)
        for name, (m, n) in {"q": (d, d), "k": (d, d), "v": (d, d), "o": (d, d),
                             "gate": (d_ff, d), "up": (d_ff, d), "down": (d, d_ff)}.items():
            setattr(self, name, nn.Linear(n, m, bias=False))

    def attn_core(self, h: torch.Tensor) -> torch.Tensor:
        """Causal multi-head attention of norm1(h) before the output map ``o`` (the input of ``o``)."""
        x = self.norm1(h)
        bsz, t, d = x.shape
        hd = d // self.n_heads
        q, k, v = (getattr(self, n)(x).view(bsz, t, self.n_heads, hd).transpose(1, 2) for n in ("q", "k", "v"))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return a.transpose(1, 2).reshape(bsz, t, d)

    def mlp_hidden(self, h_mid: torch.Tensor) -> torch.Tensor:
        """silu(gate(n)) ⊙ up(n), n = norm2(h_mid): the input of ``down``."""
        x = self.norm2(h_mid)
        return F.silu(self.gate(x)) * self.up(x)

    def forward_mid(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mid = h + self.o(self.attn_core(h))
        return mid, mid + self.down(self.mlp_hidden(mid))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.forward_mid(h)[1]


class LlamaLM(nn.Module):
    """Byte-level decoder: embed + positions → blocks → RMSNorm → tied head (logits over 256 bytes)."""

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, seq_len: int, vocab: int = 256) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(seq_len, d_model))
        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff) for _ in range(n_layers)])
        self.norm = nn.RMSNorm(d_model, eps=1e-6)
        nn.init.normal_(self.embed.weight, std=0.02)
        nn.init.normal_(self.pos, std=0.02)
        for blk in self.blocks:
            for name in LINEARS:
                nn.init.normal_(getattr(blk, name).weight, std=0.02)
            for name in ("o", "down"):   # GPT-2 style scaling of the residual projections
                nn.init.normal_(getattr(blk, name).weight, std=0.02 / (2 * n_layers) ** 0.5)

    def embed_tokens(self, x: torch.Tensor) -> torch.Tensor:
        return self.embed(x) + self.pos[: x.shape[1]]

    def head(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(h), self.embed.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed_tokens(x)
        for blk in self.blocks:
            h = blk(h)
        return self.head(h)


def build_model(cfg) -> LlamaLM:
    return LlamaLM(cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.seq_len)


@torch.no_grad()
def collect_block_io(model: LlamaLM, x: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor],
                                                                    list[torch.Tensor]]:
    """One forward of ``model`` on ``x``: block inputs h_{l−1}, mid-residuals h^mid_l and outputs h_l, l = 1..L."""
    h = model.embed_tokens(x)
    ins, mids, outs = [], [], []
    for blk in model.blocks:
        ins.append(h)
        mid, h = blk.forward_mid(h)
        mids.append(mid)
        outs.append(h)
    return ins, mids, outs


def lm_loss(model: LlamaLM, xy: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Next-byte cross entropy (nats/byte) of windows ``xy`` [B, T+1]; ``reduction="window"`` gives one mean per window."""
    logits = model(xy[:, :-1])
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), xy[:, 1:].reshape(-1), reduction="none")
    ce = ce.view(xy.shape[0], -1)
    return ce.mean(1) if reduction == "window" else ce.mean()


def n_params(model: nn.Module) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def clone(model: LlamaLM) -> LlamaLM:
    return copy.deepcopy(model)
