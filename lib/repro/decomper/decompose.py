"""Low-rank decompositions of the seven linear maps of every block (card, "Baselines"), W (m × n) ≈ A B.

* ``svd_truncate`` — truncated SVD, the Eckart–Young–Mirsky optimum in Frobenius norm.
* ``fwsvd`` — Fisher-weighted SVD (Hsu et al. 2022): rows weighted by √I_i, I_i = Σ_j (∂L/∂W_ij)².
* ``asvd`` — activation-aware SVD (Yuan et al. 2023): columns scaled by S = diag(mean|x|)^α.
* ``svdllm`` — SVD-LLM (Wang et al. 2024): SVD of W L with L the Cholesky factor of X Xᵀ (+ε I), B ← B L⁻¹;
  truncation-aware: the output error ‖(W − Ŵ) X‖_F equals the norm of the discarded singular values of W L.

``rank_for_ratio`` turns a parameter-reduction ratio into the rank r = ⌊(1 − ratio)·mn/(m + n)⌋, counting both
factors, so the factored map never has more parameters than the dense one. ``compress_model`` decomposes every
map block by block; the calibration statistics of block l come from the *compressed* prefix (sequentially, as
SVD-LLM does), and within a block the inputs of o, gate/up and down come from the already compressed maps.
"""
from __future__ import annotations

import math
from typing import Iterable

import torch

from .model import LINEARS, LlamaLM, LowRankLinear, clone, lm_loss

METHODS = ("svd", "fwsvd", "asvd", "svdllm")


def rank_for_ratio(m: int, n: int, ratio: float) -> int:
    """Rank whose factors (m + n)·r hold at most (1 − ratio)·m·n parameters (at least 1)."""
    return max(1, math.floor((1 - ratio) * m * n / (m + n) + 1e-9))


def _top(U: torch.Tensor, S: torch.Tensor, Vh: torch.Tensor, r: int) -> tuple[torch.Tensor, torch.Tensor]:
    return U[:, :r] * S[:r], Vh[:r]


def svd_truncate(W: torch.Tensor, r: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A = U_r Σ_r (m × r), B = V_rᵀ (r × n): the best rank-r approximation of W in Frobenius norm."""
    U, S, Vh = torch.linalg.svd(W.double(), full_matrices=False)
    return _top(U, S, Vh, r)


def fwsvd(W: torch.Tensor, fisher_rows: torch.Tensor, r: int) -> tuple[torch.Tensor, torch.Tensor]:
    """SVD of diag(√I) W, truncated to r, then A ← diag(√I)⁻¹ A (I: per-row Fisher importance)."""
    s = fisher_rows.double().clamp_min(0).sqrt()
    s = s + 1e-6 * float(s.mean()) + 1e-30          # a row with zero importance keeps a tiny weight
    U, S, Vh = torch.linalg.svd(s[:, None] * W.double(), full_matrices=False)
    A, B = _top(U, S, Vh, r)
    return A / s[:, None], B


def asvd(W: torch.Tensor, act_absmean: torch.Tensor, r: int, alpha: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """SVD of W S with S = diag(mean|x|)^α, truncated to r, then B ← B S⁻¹ (α = 0 is plain SVD)."""
    s = act_absmean.double().clamp_min(1e-8) ** alpha
    U, S, Vh = torch.linalg.svd(W.double() * s[None, :], full_matrices=False)
    A, B = _top(U, S, Vh, r)
    return A, B / s[None, :]


def whitening(xxt: torch.Tensor, eps: float | None = None) -> torch.Tensor:
    """L with L Lᵀ = X Xᵀ + ε I (Cholesky; ε = 1e-6 · trace/n unless given); falls back to eigh if Cholesky fails."""
    xxt = xxt.double()
    n = xxt.shape[0]
    eps = 1e-6 * float(torch.trace(xxt)) / n if eps is None else eps
    M = xxt + eps * torch.eye(n, dtype=xxt.dtype)
    L, info = torch.linalg.cholesky_ex(M)
    if int(info) == 0:
        return L
    lam, Q = torch.linalg.eigh(M)
    return Q * lam.clamp_min(eps).sqrt()[None, :]


def svdllm(W: torch.Tensor, xxt: torch.Tensor, r: int, eps: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """SVD-LLM: SVD of W L (L L ᵀ = X Xᵀ + ε I), truncate to r, B ← V_rᵀ L⁻¹."""
    L = whitening(xxt, eps)
    U, S, Vh = torch.linalg.svd(W.double() @ L, full_matrices=False)
    A, B = _top(U, S, Vh, r)
    return A, torch.linalg.solve(L.T, B.T).T          # B L⁻¹ without forming the inverse


def fisher_rows(model: LlamaLM, calib: torch.Tensor, n_batches: int = 8) -> dict[tuple[int, str], torch.Tensor]:
    """Row importance I_i = Σ_j (∂L/∂W_ij)² of every block map, accumulated over ``n_batches`` mini-batches of
    the calibration windows ``calib`` [N, T+1] (the dense model's next-byte loss)."""
    m = clone(model)
    acc: dict[tuple[int, str], torch.Tensor] = {}
    for chunk in torch.tensor_split(calib, min(n_batches, len(calib))):
        m.zero_grad()
        lm_loss(m, chunk).backward()
        for l, blk in enumerate(m.blocks):
            for name in LINEARS:
                g = getattr(blk, name).weight.grad.double().pow(2).sum(1)
                acc[(l, name)] = acc.get((l, name), 0) + g
    return acc


def _factor(W, inputs, method, r, key, fisher, alpha):
    X = inputs.reshape(-1, inputs.shape[-1]).double()
    if method == "svd":
        return svd_truncate(W, r)
    if method == "fwsvd":
        return fwsvd(W, fisher[key], r)
    if method == "asvd":
        return asvd(W, X.abs().mean(0), r, alpha)
    if method == "svdllm":
        return svdllm(W, X.T @ X, r)
    raise ValueError(f"unknown decomposition {method!r}; known: {', '.join(METHODS)}")


@torch.no_grad()
def compress_model(model: LlamaLM, method: str, ratio: float, calib_x: torch.Tensor,
                   fisher: dict | None = None, alpha: float = 0.5, blocks: Iterable[int] | None = None) -> LlamaLM:
    """A copy of ``model`` with every map of the chosen ``blocks`` (all by default) replaced by its rank-r
    factors (``rank_for_ratio``). Calibration inputs ``calib_x`` [N, T]; statistics of each map come from the
    already compressed prefix. ``fisher`` (from :func:`fisher_rows`) is needed for ``fwsvd``."""
    if method == "fwsvd" and fisher is None:
        raise ValueError("fwsvd needs the Fisher row importances (fisher_rows)")
    mc = clone(model)
    chosen = set(range(len(mc.blocks)) if blocks is None else blocks)
    h = mc.embed_tokens(calib_x)

    def swap(l, blk, name, inputs):
        lin = getattr(blk, name)
        W = lin.weight
        r = rank_for_ratio(W.shape[0], W.shape[1], ratio)
        A, B = _factor(W, inputs, method, r, (l, name), fisher, alpha)
        setattr(blk, name, LowRankLinear(A.contiguous(), B.contiguous()))   # row-major: fast matmuls

    for l, blk in enumerate(mc.blocks):
        if l in chosen:
            x1 = blk.norm1(h)
            for name in ("q", "k", "v"):
                swap(l, blk, name, x1)
            swap(l, blk, "o", blk.attn_core(h))
            mid = h + blk.o(blk.attn_core(h))
            x2 = blk.norm2(mid)
            for name in ("gate", "up"):
                swap(l, blk, name, x2)
            swap(l, blk, "down", blk.mlp_hidden(mid))
        h = blk(h)
    return mc


def block_params(model: LlamaLM) -> int:
    """Parameters of the block maps (the ones compression acts on; norms excluded)."""
    return int(sum(p.numel() for blk in model.blocks for name in LINEARS for p in getattr(blk, name).parameters()))
