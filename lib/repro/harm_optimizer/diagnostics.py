"""Measurements of chapter 09: measured harm of a step, and how well the last-layer Gram of per-sample
gradients tracks the full-network Gram (C2, K3).

Harm of a step on its own batch: Δℓ_i = ℓ_i(θ_new) − ℓ_i(θ_old); sample i is *harmed* when Δℓ_i > 1e-6
(the card's threshold), and the *mean positive increase* is mean_i max(0, Δℓ_i). To first order,
Δℓ_i ≈ −g_iᵀ(θ_old − θ_new), so sample i is harmed iff g_iᵀ(θ_old − θ_new) < 0 (K1's first half).
"""
from __future__ import annotations

import numpy as np
import torch
from scipy import stats

HARM_TOL = 1e-6


def harm_stats(before: torch.Tensor, after: torch.Tensor, tol: float = HARM_TOL) -> tuple[float, float]:
    """(fraction of samples with Δℓ_i > tol, mean_i max(0, Δℓ_i))."""
    d = (after - before).double()
    return float((d > tol).double().mean()), float(torch.clamp(d, min=0).mean())


def cosine_normalise(K: np.ndarray) -> np.ndarray:
    """K_ij / √(K_ii K_jj) (zero where a diagonal entry is zero)."""
    d = np.sqrt(np.clip(np.diag(K), 0, None))
    d = np.where(d > 0, d, np.inf)
    return K / d[:, None] / d[None, :]


def offdiag(K: np.ndarray) -> np.ndarray:
    """The strictly upper-triangular entries (each pair once)."""
    i, j = np.triu_indices(K.shape[0], k=1)
    return np.asarray(K)[i, j]


def gram_agreement(K_a: np.ndarray, K_b: np.ndarray) -> tuple[float, float]:
    """(Spearman ρ, sign agreement) of the off-diagonal entries of two cosine-normalised Gram matrices.
    Sign agreement: the fraction of pairs (i, j) whose inner products have the same sign (a *conflict* is a
    negative inner product; chance is 0.5 when signs are balanced)."""
    a, b = offdiag(cosine_normalise(np.asarray(K_a, float))), offdiag(cosine_normalise(np.asarray(K_b, float)))
    rho = float(stats.spearmanr(a, b).statistic) if np.std(a) > 0 and np.std(b) > 0 else float("nan")
    return rho, float(np.mean(np.sign(a) == np.sign(b)))


def gram_report(G_full: torch.Tensor, e: torch.Tensor, hb: torch.Tensor, y: torch.Tensor) -> dict:
    """C2 and K3 at one checkpoint: the last-layer Gram (e_iᵀe_j)(h̄_iᵀh̄_j), e alone, and the label Gram
    1[y_i = y_j], each against the full-network Gram of per-sample gradients. ``head_share`` is the median
    over samples of ‖g_i,head‖² / ‖g_i‖²: how much of a per-sample gradient the last layer holds."""
    K_full = (G_full.double() @ G_full.double().T).numpy()
    head_sq = ((e.double() ** 2).sum(1) * (hb.double() ** 2).sum(1)).numpy()
    full_sq = np.diag(K_full)
    head_share = float(np.median(head_sq[full_sq > 0] / full_sq[full_sq > 0])) if (full_sq > 0).any() else float("nan")
    E = (e.double() @ e.double().T).numpy()
    H = (hb.double() @ hb.double().T).numpy()
    lab = (y[:, None] == y[None, :]).double().numpy() + 1e-12 * np.eye(len(y))
    rho_ll, sign_ll = gram_agreement(E * H, K_full)
    rho_e, sign_e = gram_agreement(E, K_full)
    a, b = offdiag(lab), offdiag(cosine_normalise(K_full))
    rho_lab = float(stats.spearmanr(a, b).statistic) if np.std(a) > 0 else float("nan")
    conflicts = float(np.mean(offdiag(K_full) < 0))
    h_pos = float(np.mean(offdiag(H) > 0))
    return {"spearman_ll": rho_ll, "sign_ll": sign_ll, "spearman_e": rho_e, "sign_e": sign_e,
            "spearman_label": rho_lab, "conflict_frac": conflicts, "h_gram_positive": h_pos,
            "head_share": head_share}


def first_order_agreement(G_full: torch.Tensor, delta: torch.Tensor, dloss: torch.Tensor,
                          tol: float = HARM_TOL) -> float:
    """K1's first half: the fraction of samples for which the first-order prediction of the harm event,
    −g_iᵀ(θ_old − θ_new) > tol, matches the measured Δℓ_i > tol (the same threshold on both sides: a loss
    that the first-order model says rises by 1e-8 is not "harmed" by the measured criterion either)."""
    pred = (-(G_full.double() @ delta.double())) > tol
    meas = dloss > tol
    return float((pred == meas).double().mean())


def autograd_gram_error(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, G_full: torch.Tensor,
                        n: int = 8) -> float:
    """K3's apparatus check: max_ij |(G Gᵀ)_ij − (g_iᵀg_j)_autograd| / max_ij |(g_iᵀg_j)_autograd| over the first
    ``n`` samples, where the reference g_i comes from an ordinary ``torch.autograd.grad`` of sample i's own
    cross-entropy through a float64 copy of the module (one backward per sample; in float32 the cross-entropy's
    p_y − 1 cancels for well-fit samples and the reference itself would be off by ~1e-3 late in training) and
    ``G_full`` are the per-sample gradients the chapter measures with (``torch.func.vmap``, float32,
    :func:`repro.harm_optimizer.optim.per_sample_grads`). Both Grams are accumulated in float64. A full Gram that does not equal the dot products of the real per-sample
    gradients would make every C2 number meaningless."""
    import copy

    import torch.nn.functional as F

    n = min(int(n), len(y))
    m64 = copy.deepcopy(model).double()
    params = [p for p in m64.parameters()]
    x64 = x.double()
    ref = []
    for i in range(n):
        loss = F.cross_entropy(m64(x64[i:i + 1]), y[i:i + 1])
        gi = torch.autograd.grad(loss, params)
        ref.append(torch.cat([g.reshape(-1) for g in gi]).double())
    R = torch.stack(ref)
    K_ref = R @ R.T
    Gs = G_full[:n].double()
    K = Gs @ Gs.T
    scale = float(K_ref.abs().max())
    return float((K - K_ref).abs().max()) / scale if scale > 0 else float("nan")
