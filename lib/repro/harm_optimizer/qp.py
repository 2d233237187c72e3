"""The batch-dimensional problem of a harm-aware step and its last-layer proxy (card, *Method*; our
reconstruction — the paper's code is not public).

Primal: min_d ½‖d − d_opt‖² s.t. g_iᵀd ≥ 0 for every sample i of the batch (no sample's loss rises to first
order; the parameters move θ ← θ − η d). KKT gives d = d_opt + Gᵀα with α ≥ 0 solving the B-dimensional dual

    α* = argmin_{α ≥ 0} ½ αᵀKα + αᵀc,   K = GGᵀ,  c = G d_opt.                     (1)

With a preconditioner P (AdamW) the metric is ‖·‖_P, d = d_opt + P⁻¹Gᵀα and K = G P⁻¹ Gᵀ.
``solve_nonneg_qp`` runs accelerated projected gradient (FISTA, Beck & Teboulle 2009) on the Jacobi-scaled
dual (α̃ = Dα, D = diag(K)^½) with gradient-based adaptive restart (O'Donoghue &
Candès 2015): without the scaling, well-fit samples (tiny K_ii) would never move in a few
iterations. The compiled kernel ``_kernels.solve_nonneg_qp`` is the same loop in C++.

Last-layer proxy: for the head W ∈ R^{C×(d_h+1)} (bias folded in by h̄ = [h, 1]) a per-sample gradient is
e_i h̄_iᵀ, so K_ij = (e_iᵀe_j)(h̄_iᵀh̄_j) and c_i = e_iᵀ D_W h̄_i, with no per-sample backward.
"""
from __future__ import annotations

import math

import numpy as np
import torch

try:  # the compiled kernel (built by setup.py); the torch reference below is the fallback
    from . import _kernels
except ImportError:  # pragma: no cover - exercised only without a build
    _kernels = None


def jacobi_scale(K: torch.Tensor) -> torch.Tensor:
    """D = diag(K)^½, with 1 where a constraint is empty (g_i = 0: its multiplier stays 0)."""
    d = torch.sqrt(torch.clamp(torch.diagonal(K), min=0.0))
    return torch.where(d > 0, d, torch.ones_like(d))


def power_lambda_max(K: torch.Tensor, iters: int = 20) -> float:
    """λ_max of a PSD matrix by ``iters`` power iterations from v_i = 1 + sin(i + 1) / 2 (deterministic; not
    the all-ones vector, which is exactly orthogonal to the top eigenvector of some small Gram matrices)."""
    v = 1.0 + 0.5 * torch.sin(torch.arange(1, K.shape[0] + 1, dtype=K.dtype))
    v = v / torch.linalg.vector_norm(v)
    lam = 0.0
    for _ in range(iters):
        w = K @ v
        nrm = float(torch.linalg.vector_norm(w))
        if nrm == 0.0:
            return 0.0
        lam = float(v @ w)
        v = w / nrm
    return max(lam, float(v @ (K @ v)))


def solve_nonneg_qp_torch(K: torch.Tensor, c: torch.Tensor, iters: int = 10, scale: str = "jacobi",
                          power_iters: int = 20) -> torch.Tensor:
    """Reference solver of (1): FISTA from α = 0, step 1/λ_max, projected onto α ≥ 0 (float64)."""
    K = K.to(torch.float64)
    c = c.to(torch.float64)
    D = jacobi_scale(K) if scale == "jacobi" else torch.ones_like(c)
    Ks = K / D[:, None] / D[None, :]
    cs = torch.where(torch.diagonal(K) > 0, c / D, torch.zeros_like(c))   # g_i = 0: its multiplier stays 0
    L = power_lambda_max(Ks, power_iters)
    a = torch.zeros_like(cs)
    if L <= 0.0:
        return a
    # 1.02: the power iteration approaches λ_max from below; a slightly longer Lipschitz bound keeps FISTA stable
    step = 1.0 / (1.02 * L)
    z, t = a.clone(), 1.0
    for _ in range(iters):
        a_new = torch.clamp(z - step * (Ks @ z + cs), min=0.0)
        if float((z - a_new) @ (a_new - a)) > 0.0:      # adaptive restart (O'Donoghue & Candès 2015)
            t = 1.0
        t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        z = a_new + ((t - 1.0) / t_new) * (a_new - a)
        a, t = a_new, t_new
    return a / D


def solve_nonneg_qp(K: torch.Tensor, c: torch.Tensor, iters: int = 10, scale: str = "jacobi",
                    power_iters: int = 20, backend: str = "auto") -> torch.Tensor:
    """Solve (1) with the compiled kernel when it is built (``backend="auto"``/``"cpp"``), else the torch
    reference (``"torch"``). Returns α (float64, shape [B])."""
    if backend == "torch" or (backend == "auto" and _kernels is None):
        return solve_nonneg_qp_torch(K, c, iters, scale, power_iters)
    if _kernels is None:
        raise RuntimeError("repro.harm_optimizer._kernels is not built: run `python setup.py build_ext --inplace`")
    Kn = np.ascontiguousarray(K.detach().to(torch.float64).numpy())
    cn = np.ascontiguousarray(c.detach().to(torch.float64).numpy())
    return torch.from_numpy(_kernels.solve_nonneg_qp(Kn, cn, int(iters), scale == "jacobi", int(power_iters)))


def dual_objective(K: torch.Tensor, c: torch.Tensor, alpha: torch.Tensor) -> float:
    """½ αᵀKα + αᵀc."""
    K, c, a = K.double(), c.double(), alpha.double()
    return float(0.5 * a @ (K @ a) + a @ c)


def with_bias(h: torch.Tensor) -> torch.Tensor:
    """h̄ = [h, 1]: the head's bias as one more feature."""
    return torch.cat([h, torch.ones(h.shape[0], 1, dtype=h.dtype)], dim=1)


def lastlayer_gram(e: torch.Tensor, hb: torch.Tensor, pinv: torch.Tensor | None = None) -> torch.Tensor:
    """K_ij = ⟨e_i h̄_iᵀ, P⁻¹ ⊙ e_j h̄_jᵀ⟩: (e_iᵀe_j)(h̄_iᵀh̄_j) without a preconditioner; with ``pinv``
    ([C, d_h+1], elementwise 1/P of the head block) Σ_c e_ic e_jc Σ_k h̄_ik h̄_jk / P_ck."""
    if pinv is None:
        return (e @ e.T) * (hb @ hb.T)
    A = torch.einsum("ik,ck,jk->cij", hb, pinv, hb)
    return torch.einsum("ic,jc,cij->ij", e, e, A)


def lastlayer_c(e: torch.Tensor, hb: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """c_i = g_iᵀ d_opt on the head: e_iᵀ D_W h̄_i (D_W = the head block of d_opt, [C, d_h+1])."""
    return torch.einsum("ic,ck,ik->i", e, D, hb)


def cap_correction(alpha: torch.Tensor, K: torch.Tensor, d_norm: float, cap: float) -> tuple[torch.Tensor, bool]:
    """Shrink α so that the correction's norm √(αᵀKα) is at most ``cap`` × ‖d_opt‖ (in the metric of K).
    Returns (α, whether the cap bound)."""
    n = math.sqrt(max(float(alpha @ (K.double() @ alpha)), 0.0))
    if n > cap * d_norm and n > 0:
        return alpha * (cap * d_norm / n), True
    return alpha, False


def violations(c: torch.Tensor, Kalpha: torch.Tensor, gnorm: torch.Tensor, dnorm: float,
               tol: float = 1e-3) -> tuple[int, int]:
    """First-order harm counts before and after a correction: samples with g_iᵀd < −tol ‖g_i‖‖d_opt‖, for
    d = d_opt (g_iᵀd = c_i) and for d = d_opt + correction (g_iᵀd = c_i + (Kα)_i)."""
    thr = -tol * gnorm.double() * dnorm
    before = int((c.double() < thr).sum())
    after = int(((c.double() + Kalpha.double()) < thr).sum())
    return before, after
