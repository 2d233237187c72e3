"""The fine-tuning objectives of chapter 07: UCAT's Dirichlet alignment and the baselines it is compared with.

UCAT (Lu et al., ICML 2026, Sec. 4; repository ``VivienLu/UCAT``, ``main.py``) reads CLIP's cosine similarities
as the concentration of a Dirichlet distribution over class probabilities,

    α_k = 1e-6 + exp((cos_k + 1) / τ),                                                    (Dirichlet view)

so that the pattern α/α₀ carries the semantic structure and the strength α₀ = Σ α_k the confidence, and adds
to TeCoA's cross-entropy the KL from the fine-tuned model's Dirichlet on the adversarial image to the frozen
model's Dirichlet on the clean image,

    L = CE(s·cos_θ(x+δ), y) + λ · KL(Dir(α_θ(x+δ)) ‖ Dir(α_θ0(x))),  λ = τ_rob / exp(softplus(2/τ)).

The KL between Dirichlets has a closed form (e.g. Malinin & Gales 2018):

    KL(Dir(α)‖Dir(β)) = lnΓ(α₀) − Σ lnΓ(α_k) − lnΓ(β₀) + Σ lnΓ(β_k) + Σ (α_k − β_k)(ψ(α_k) − ψ(α₀)).

With τ = 0.07, α reaches e^{2/τ} ≈ 2.6·10¹²; lnΓ there is ≈ 7·10¹³, so the cancellations above need float64
(float32's spacing at 7·10¹³ is ≈ 8·10⁶). Everything Dirichlet here is computed in float64.

Baselines: TeCoA (Mao et al., ICLR 2023) = the CE term alone; PMG-AFT (Wang et al., CVPR 2024) = CE +
KL(p_θ0(x_adv) ‖ p_θ(x_adv)) + KL(p_θ(x) ‖ p_θ(x_adv)), the KLs on softmaxes of the raw cosines and summed over
the batch, as in the authors' code; FARE (Schlarmann et al., ICML 2024) =
‖φ_θ(x_adv) − φ_θ0(x)‖²; the C6 ablation replaces the Dirichlet KL by KL(softmax(s·cos_θ(x+δ)) ‖ softmax(s·cos_θ0(x))).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

ALPHA_FLOOR = 1e-6


def dirichlet_alpha(cos: torch.Tensor, tau: float) -> torch.Tensor:
    """α = 1e-6 + exp((cos + 1)/τ), in float64 (training parameterisation of the UCAT repository)."""
    return ALPHA_FLOOR + torch.exp((cos.double() + 1.0) / tau)


def ucat_lambda(tau: float, tau_rob: float) -> float:
    """λ = τ_rob / exp(softplus(2/τ)): the repo divides τ_rob by the largest concentration, α at cos = 1."""
    return float(tau_rob / math.exp(F.softplus(torch.tensor(2.0 / tau, dtype=torch.float64)).item()))


def dirichlet_kl(alpha: torch.Tensor, beta: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """KL(Dir(α) ‖ Dir(β)) per row, closed form, in ``dtype`` (float64; float32 only to show why not).

    Shapes (..., C) → (...).
    """
    a, b = alpha.to(dtype), beta.to(dtype)
    a0, b0 = a.sum(-1), b.sum(-1)
    return (torch.lgamma(a0) - torch.lgamma(a).sum(-1) - torch.lgamma(b0) + torch.lgamma(b).sum(-1)
            + ((a - b) * (torch.digamma(a) - torch.digamma(a0)[..., None])).sum(-1))


def softmax_kl(logits_p: torch.Tensor, logits_q: torch.Tensor) -> torch.Tensor:
    """KL(softmax(logits_p) ‖ softmax(logits_q)) per row."""
    lp, lq = F.log_softmax(logits_p, -1), F.log_softmax(logits_q, -1)
    return (lp.exp() * (lp - lq)).sum(-1)


def tecoa_loss(logits_adv: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """TeCoA: CE of the adversarial image's zero-shot logits against its class prompt."""
    return F.cross_entropy(logits_adv, y)


def ucat_loss(logits_adv: torch.Tensor, y: torch.Tensor, cos_adv: torch.Tensor, cos0_clean: torch.Tensor,
              *, tau: float, lam: float) -> tuple[torch.Tensor, dict[str, float]]:
    """UCAT: CE(adv) + λ · mean KL(Dir(α_θ(x+δ)) ‖ Dir(α_θ0(x))). Returns the loss and its two terms."""
    ce = tecoa_loss(logits_adv, y)
    if lam == 0:
        return ce, {"ce": ce.item(), "reg": 0.0}
    kl = dirichlet_kl(dirichlet_alpha(cos_adv, tau), dirichlet_alpha(cos0_clean.detach(), tau)).mean()
    reg = lam * kl
    return ce + reg.to(ce.dtype), {"ce": ce.item(), "reg": reg.item()}


def softmax_kl_loss(logits_adv: torch.Tensor, y: torch.Tensor, logits0_clean: torch.Tensor
                    ) -> tuple[torch.Tensor, dict[str, float]]:
    """C6 ablation: CE(adv) + 1 · mean KL(softmax(s·cos_θ(x+δ)) ‖ softmax(s·cos_θ0(x))) (same anchor, same direction)."""
    ce = tecoa_loss(logits_adv, y)
    reg = softmax_kl(logits_adv, logits0_clean.detach()).mean()
    return ce + reg, {"ce": ce.item(), "reg": reg.item()}


def pmg_aft_loss(logits_adv: torch.Tensor, y: torch.Tensor, cos_adv: torch.Tensor, cos_clean: torch.Tensor,
                 cos0_adv: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """PMG-AFT as its authors weight it: CE(s·cos_θ(x_adv), y) + Σ_batch KL(p_θ0(x_adv) ‖ p_θ(x_adv))
    + Σ_batch KL(p_θ(x) ‖ p_θ(x_adv)), where the p of the KL terms are softmaxes of the *raw cosines* (no logit scale).

    The official ``PMG_AFT.py`` computes its outputs as ``img_embed_norm @ text_embed_norm.T`` — cosines, the
    logit scale normalised away — and builds both KL terms with ``nn.KLDivLoss(reduction="sum")``. So each KL
    enters with weight = batch size relative to a per-example mean, on a softmax of logits in [−1, 1]. We keep
    both (taking the KLs on s·cos instead multiplies them by ≈ s² for small differences: ≈ 100× at the toy's
    s ≈ 10). The CE term is TeCoA's CE on s·cos, the data term every method here shares; the authors' CE is on
    raw cosines too, a difference we state in the chapter. As in their code the clean-image target p_θ(x) is
    not detached.
    """
    ce = tecoa_loss(logits_adv, y)
    reg = softmax_kl(cos0_adv.detach(), cos_adv).sum() + softmax_kl(cos_clean, cos_adv).sum()
    return ce + reg, {"ce": ce.item(), "reg": reg.item()}


def fare_loss(emb_adv: torch.Tensor, emb0_clean: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """FARE: mean ‖φ_θ(x_adv) − φ_θ0(x)‖²₂ over the batch (unsupervised; no CE term)."""
    loss = ((emb_adv - emb0_clean.detach()) ** 2).sum(-1).mean()
    return loss, {"ce": float("nan"), "reg": loss.item()}
