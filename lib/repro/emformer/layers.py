"""Building blocks of EMFormer (paper §3.1; official ``networks/EMFormer.py``), written for a small CPU model.

* :class:`MultiScaleConv` — the paper's "efficient multi-scale" convolution: three kernels W₁ (1×1), W₃ (3×3) and
  W₅ (5×5) kept as separate parameters and merged on the fly into one 5×5 kernel
  K = W₅ + pad₂(W₃) + pad₂(W₁) (zero padding to 5×5), so one convolution computes the sum of three branches
  (conv is linear in its kernel; gradients reach W₁, W₃, W₅ through the sum). Depthwise (groups = channels) by
  default; ``dense=True`` is the released, dense-over-channels form (used in the tests only). Longitude is
  padded circularly, latitude with zeros.
* :class:`ThreeBranchConv` — the same operator as three separate convolutions (the baseline of claim C2).
* :class:`MultiConvAttention` — q, k, v from one linear layer, reshaped to a map, passed through the fused conv,
  then multi-head attention, global or inside (wh × ww) windows.
* :class:`Down2x2` / :class:`Up2x2` — hourglass resampling: concatenate each 2×2 token group (spatially, not in
  raster order; card *Method* 2) and map 4d → d, refined by single-query attention of the pooled token over its
  four children (:class:`AttnResample`, the official default); up-sampling maps d → 4d and adds the skip.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def pad_lonlat(x: torch.Tensor, p: int) -> torch.Tensor:
    """Pad a (B, C, lat, lon) map by p: circular in longitude, zeros in latitude."""
    if p == 0:
        return x
    x = F.pad(x, (p, p, 0, 0), mode="circular")
    return F.pad(x, (0, 0, p, p))


class MultiScaleConv(nn.Module):
    """Σ of 1×1, 3×3 and 5×5 convolutions computed as one 5×5 convolution with the merged kernel.

    ``mode``: ``"merged"`` (build K every call, one conv: the training path), ``"three"`` (three convolutions,
    the reference), ``"cached"`` (use a kernel merged once by :meth:`freeze`: the inference path).
    """

    def __init__(self, ch: int, dense: bool = False, circular_lon: bool = True, init_scale: float = 0.2):
        super().__init__()
        self.ch, self.dense, self.circular_lon = ch, dense, circular_lon
        cin = ch if dense else 1
        self.w1 = nn.Parameter(torch.zeros(ch, cin, 1, 1))
        self.w3 = nn.Parameter(torch.randn(ch, cin, 3, 3) * init_scale / 3)
        self.w5 = nn.Parameter(torch.randn(ch, cin, 5, 5) * init_scale / 5)
        with torch.no_grad():  # start near the identity so the block begins as plain attention
            if dense:
                self.w1.copy_(torch.eye(ch)[:, :, None, None])
            else:
                self.w1.fill_(1.0)
        self.mode = "merged"
        self._frozen: torch.Tensor | None = None

    @property
    def groups(self) -> int:
        return 1 if self.dense else self.ch

    def merged_kernel(self) -> torch.Tensor:
        """K = W₅ + pad₂(W₃) + pad₂(W₁)."""
        return self.w5 + F.pad(self.w3, (1, 1, 1, 1)) + F.pad(self.w1, (2, 2, 2, 2))

    def freeze(self) -> None:
        """Merge once for inference (``mode = "cached"``)."""
        self._frozen = self.merged_kernel().detach().clone()
        self.mode = "cached"

    def _pad(self, x: torch.Tensor, p: int) -> torch.Tensor:
        return pad_lonlat(x, p) if self.circular_lon else F.pad(x, (p, p, p, p))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == "three":
            return three_branch(x, self.w1, self.w3, self.w5, self.groups, self._pad)
        k = self._frozen if self.mode == "cached" else self.merged_kernel()
        return F.conv2d(self._pad(x, 2), k, groups=self.groups)


def three_branch(x, w1, w3, w5, groups, pad) -> torch.Tensor:
    """The reference: three convolutions, each with its own padding, summed."""
    return (F.conv2d(x, w1, groups=groups) + F.conv2d(pad(x, 1), w3, groups=groups)
            + F.conv2d(pad(x, 2), w5, groups=groups))


class ThreeBranchConv(MultiScaleConv):
    """The three-branch baseline: the same parameters, always computed as three convolutions."""

    def __init__(self, ch: int, **kw):
        super().__init__(ch, **kw)
        self.mode = "three"


def attention(q, k, v) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v)


def _windows(t: torch.Tensor, grid: tuple[int, int], win: tuple[int, int]) -> torch.Tensor:
    """(B, H, N, c) tokens in raster order -> (B * nW, H, wh * ww, c)."""
    B, Hh, N, c = t.shape
    h, w = grid
    wh, ww = win
    t = t.reshape(B, Hh, h // wh, wh, w // ww, ww, c).permute(0, 2, 4, 1, 3, 5, 6)
    return t.reshape(B * (h // wh) * (w // ww), Hh, wh * ww, c)


def _unwindows(t: torch.Tensor, B: int, grid: tuple[int, int], win: tuple[int, int]) -> torch.Tensor:
    h, w = grid
    wh, ww = win
    Hh, c = t.shape[1], t.shape[-1]
    t = t.reshape(B, h // wh, w // ww, Hh, wh, ww, c).permute(0, 3, 1, 4, 2, 5, 6)
    return t.reshape(B, Hh, h * w, c)


class MultiConvAttention(nn.Module):
    """qkv = Linear(x) → map (3d, h, w) → fused multi-scale conv → split q, k, v → attention → projection."""

    def __init__(self, dim: int, heads: int, grid: tuple[int, int], window: tuple[int, int] | None = None,
                 conv: bool = True, three_branch_conv: bool = False):
        super().__init__()
        self.dim, self.heads, self.grid = dim, heads, tuple(grid)
        if window is not None:
            window = (min(window[0], grid[0]), min(window[1], grid[1]))
            if grid[0] % window[0] or grid[1] % window[1]:
                raise ValueError(f"window {window} must tile the token grid {grid}")
            if window == tuple(grid):
                window = None
        self.window = window
        self.qkv = nn.Linear(dim, 3 * dim)
        self.conv = (ThreeBranchConv(3 * dim) if three_branch_conv else MultiScaleConv(3 * dim)) if conv else None
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, d = x.shape
        h, w = self.grid
        qkv = self.qkv(x)
        if self.conv is not None:
            m = qkv.transpose(1, 2).reshape(B, 3 * d, h, w)
            qkv = self.conv(m).reshape(B, 3 * d, N).transpose(1, 2)
        q, k, v = qkv.reshape(B, N, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if self.window is None:
            o = attention(q, k, v)
        else:
            o = _unwindows(attention(*(_windows(t, self.grid, self.window) for t in (q, k, v))), B, self.grid,
                           self.window)
        return self.proj(o.transpose(1, 2).reshape(B, N, d))


class PlainAttention(nn.Module):
    """Global multi-head self-attention (the ViT's and the hourglass's full-resolution blocks)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.dim, self.heads = dim, heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, d = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return self.proj(attention(q, k, v).transpose(1, 2).reshape(B, N, d))


class Block(nn.Module):
    """Pre-norm transformer block: x + Attn(LN x), then x + MLP(LN x) (MLP ratio 4, GELU)."""

    def __init__(self, dim: int, attn: nn.Module, mlp_ratio: int = 4):
        super().__init__()
        self.n1, self.attn, self.n2 = nn.LayerNorm(dim), attn, nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


def group2x2(x: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """(B, h*w, d) raster tokens -> (B, h/2 * w/2, 4, d): the four spatial children of each coarse token."""
    B, N, d = x.shape
    h, w = grid
    x = x.reshape(B, h // 2, 2, w // 2, 2, d).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(B, (h // 2) * (w // 2), 4, d)


def ungroup2x2(x: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """Inverse of :func:`group2x2` (``grid`` is the fine grid)."""
    B, M, _, d = x.shape
    h, w = grid
    x = x.reshape(B, h // 2, w // 2, 2, 2, d).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(B, h * w, d)


class AttnResample(nn.Module):
    """Single-query attention of each pooled token over its four children (one head), added residually."""

    def __init__(self, dim: int):
        super().__init__()
        self.nq, self.nkv = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q, self.kv, self.o = nn.Linear(dim, dim), nn.Linear(dim, 2 * dim), nn.Linear(dim, dim)

    def forward(self, pooled: torch.Tensor, children: torch.Tensor) -> torch.Tensor:
        q = self.q(self.nq(pooled)).unsqueeze(2)                      # (B, M, 1, d)
        k, v = self.kv(self.nkv(children)).chunk(2, dim=-1)           # (B, M, 4, d)
        a = torch.softmax((q * k).sum(-1) / math.sqrt(q.shape[-1]), dim=-1)   # (B, M, 4)
        return pooled + self.o((a.unsqueeze(-1) * v).sum(2))


class Down2x2(nn.Module):
    def __init__(self, dim: int, grid: tuple[int, int]):
        super().__init__()
        if grid[0] % 2 or grid[1] % 2:
            raise ValueError(f"token grid {grid} must be even to down-sample 2×2")
        self.grid = tuple(grid)
        self.lin = nn.Linear(4 * dim, dim)
        self.resample = AttnResample(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ch = group2x2(x, self.grid)
        pooled = self.lin(ch.flatten(2))
        return self.resample(pooled, ch)


class Up2x2(nn.Module):
    def __init__(self, dim: int, grid: tuple[int, int]):
        super().__init__()
        self.grid = tuple(grid)
        self.lin = nn.Linear(dim, 4 * dim)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        B, M, d = x.shape
        return skip + ungroup2x2(self.lin(x).reshape(B, M, 4, d), self.grid)
