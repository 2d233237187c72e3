"""EMFormer-tiny and its parameter-matched ViT baseline (card *Model*).

Both map a normalized anomaly state x_t (B, 4, ny, nx) to x_{t+1} = x_t + f(x_t) (residual output; the head
starts at zero, so an untrained model is persistence). Both embed p×p patches with a strided convolution and a
learned positional embedding.

EMFormer: pre block (full resolution) → Down 2×2 → valley of ``valley_depth`` blocks whose attention uses the
fused multi-scale convolution (odd blocks attend inside 2×4 windows) → Up 2×2 (+ skip) → post block → linear
un-patchify head. ViT (FourCastNet-style, no hourglass, no convolution): ``depth`` global blocks.
"""
from __future__ import annotations

import torch
from torch import nn

from .layers import Block, Down2x2, MultiConvAttention, PlainAttention, Up2x2


class _PatchModel(nn.Module):
    def __init__(self, in_ch: int, dim: int, patch: int, grid: tuple[int, int]):
        super().__init__()
        ny, nx = grid
        if ny % patch or nx % patch:
            raise ValueError(f"grid {grid} must be divisible by the patch size {patch}")
        self.in_ch, self.patch, self.grid = in_ch, patch, (ny, nx)
        self.tokens = (ny // patch, nx // patch)
        self.embed = nn.Conv2d(in_ch, dim, kernel_size=patch, stride=patch)
        self.pos = nn.Parameter(torch.randn(1, self.tokens[0] * self.tokens[1], dim) * 0.02)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, in_ch * patch * patch)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def _embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.embed(x).flatten(2).transpose(1, 2) + self.pos

    def _unpatch(self, t: torch.Tensor) -> torch.Tensor:
        B = t.shape[0]
        h, w = self.tokens
        p, c = self.patch, self.in_ch
        y = self.head(self.norm(t)).reshape(B, h, w, c, p, p).permute(0, 3, 1, 4, 2, 5)
        return y.reshape(B, c, h * p, w * p)

    def body(self, t: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self._unpatch(self.body(self._embed(x)))


class EMFormer(_PatchModel):
    """The hourglass of the paper at toy size; ``conv=False`` is the no-conv ablation, ``three_branch=True``
    computes the valley convolutions as three separate convs (timing baseline of C2)."""

    def __init__(self, in_ch: int = 4, dim: int = 64, heads: int = 4, valley_depth: int = 4, patch: int = 4,
                 grid: tuple[int, int] = (32, 64), window: tuple[int, int] = (2, 4), conv: bool = True,
                 three_branch: bool = False):
        super().__init__(in_ch, dim, patch, grid)
        th, tw = self.tokens
        self.valley_grid = (th // 2, tw // 2)
        self.pre = Block(dim, PlainAttention(dim, heads))
        self.down = Down2x2(dim, self.tokens)
        self.valley = nn.ModuleList(
            Block(dim, MultiConvAttention(dim, heads, self.valley_grid, window=window if i % 2 else None,
                                          conv=conv, three_branch_conv=three_branch))
            for i in range(valley_depth))
        self.up = Up2x2(dim, self.tokens)
        self.post = Block(dim, PlainAttention(dim, heads))

    def body(self, t: torch.Tensor) -> torch.Tensor:
        t = self.pre(t)
        v = self.down(t)
        for blk in self.valley:
            v = blk(v)
        return self.post(self.up(v, t))

    def convs(self) -> list:
        return [b.attn.conv for b in self.valley if b.attn.conv is not None]

    def set_conv_mode(self, mode: str) -> None:
        """"merged" (train), "three" (three branches), "cached" (merged once; call after training)."""
        for c in self.convs():
            if mode == "cached":
                c.freeze()
            else:
                c.mode = mode


class ViT(_PatchModel):
    """Plain ViT forecaster: patch embed, ``depth`` global blocks, the same head."""

    def __init__(self, in_ch: int = 4, dim: int = 64, heads: int = 4, depth: int = 7, patch: int = 4,
                 grid: tuple[int, int] = (32, 64)):
        super().__init__(in_ch, dim, patch, grid)
        self.blocks = nn.Sequential(*[Block(dim, PlainAttention(dim, heads)) for _ in range(depth)])

    def body(self, t: torch.Tensor) -> torch.Tensor:
        return self.blocks(t)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def matched_vit_depth(emformer: EMFormer, dim: int, heads: int, patch: int, grid, in_ch: int = 4) -> int:
    """The ViT depth whose parameter count is closest to EMFormer's."""
    target = n_params(emformer)
    best = min(range(1, 24), key=lambda d: abs(n_params(ViT(in_ch, dim, heads, d, patch, grid)) - target))
    return best
