"""Decomper: sequential compensation of the representation drift of a decomposed model (card, "Method").

Block by block, l = 1..L, on the *drifted* inputs ĥ_{l−1} that the already compensated compressed prefix
produces, with the original block's trajectory as target (pull the trajectory back, not just mimic the block):

* attention branch: target t_a = h^mid_l − ĥ_{l−1}; fit the output map ``o`` on its inputs;
* MLP branch, recomputed on the corrected mid-residual ĥ^mid_l: target t_m = h_l − ĥ^mid_l; fit ``down``.

Variants (what is fitted in ``o`` and ``down``):

* ``refit`` (default, zero overhead): A = argmin ‖A Z − T‖² + λ‖A − A₀‖² in closed form, Z the r-dim code B x.
  *Decision*: the card's ridge λ‖A‖² is centred at the decomposed factor A₀ instead of 0, so the fit can never
  be worse than A₀ on the calibration set (a theorem, tested); λ = ``ridge`` × tr(ZᵀZ)/r.
* ``affine`` (distribution alignment): per output channel, γ_c, β_c by least squares of the branch output onto
  its target; γ folded into the rows of A, β into a bias (+d parameters per map).
* ``moments``: γ_c = σ_t/σ̂_c, β_c = m_t − γ_c m̂_c (match mean and std; the cheapest ablation).
* ``adam``: γ, β (and per-rank scales s, A diag(s) B) by Adam on the block loss
  ‖f̂_l(ĥ_{l−1}) − h_l‖²/‖h_l‖² + μ Σ_c[(m̂_c − m_c)² + (σ̂_c − σ_c)²], then folded.
"""
from __future__ import annotations

import torch

from .model import LlamaLM, LowRankLinear, clone, collect_block_io

VARIANTS = ("refit", "affine", "moments", "adam")


def refit_output_factor(A0: torch.Tensor, Z: torch.Tensor, T: torch.Tensor, lam: float = 1e-3) -> torch.Tensor:
    """argmin_A ‖Z Aᵀ − T‖² + λ‖A − A₀‖² with λ = lam · tr(ZᵀZ)/r; Z [N, r] codes, T [N, m] targets → A [m, r]."""
    Z, T, A0 = Z.double(), T.double(), A0.double()
    G = Z.T @ Z
    r = G.shape[0]
    lam_abs = lam * float(torch.trace(G)) / r
    rhs = T.T @ Z + lam_abs * A0                        # [m, r]
    return torch.linalg.solve(G + lam_abs * torch.eye(r, dtype=G.dtype), rhs.T).T.contiguous()


def affine_ls(u: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel least squares t_c ≈ γ_c u_c + β_c over rows; u, t [N, m] → γ, β [m] (γ = 1 where u is constant)."""
    u, t = u.double(), t.double()
    mu, mt = u.mean(0), t.mean(0)
    var = (u - mu).pow(2).mean(0)
    cov = ((u - mu) * (t - mt)).mean(0)
    gamma = torch.where(var > 1e-30, cov / var.clamp_min(1e-30), torch.ones_like(var))
    return gamma, mt - gamma * mu


def moment_match(u: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """γ_c = σ_t/σ_u, β_c = m_t − γ_c m_u: the affine map that gives u the per-channel mean and std of t."""
    u, t = u.double(), t.double()
    su, st = u.std(0, unbiased=False), t.std(0, unbiased=False)
    gamma = torch.where(su > 1e-30, st / su.clamp_min(1e-30), torch.ones_like(su))
    return gamma, t.mean(0) - gamma * u.mean(0)


def fold_affine(lin: LowRankLinear, gamma: torch.Tensor, beta: torch.Tensor) -> LowRankLinear:
    """γ ⊙ lin(x) + β as one LowRankLinear: A ← diag(γ) A, bias ← γ ⊙ bias + β (a new bias costs m parameters)."""
    g, b = gamma.double(), beta.double()
    bias = b if lin.bias is None else g * lin.bias.double() + b
    return LowRankLinear((g[:, None] * lin.A.double()).contiguous(), lin.B, bias)


def _flat(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, x.shape[-1])


def _fit_map(lin: LowRankLinear, x: torch.Tensor, target: torch.Tensor, variant: str, lam: float) -> LowRankLinear:
    if not isinstance(lin, LowRankLinear):
        raise TypeError("compensation acts on a decomposed map (LowRankLinear); compress the model first")
    if variant == "refit":
        Z = _flat(lin.code(x))
        T = _flat(target) - (0 if lin.bias is None else lin.bias)
        return LowRankLinear(refit_output_factor(lin.A, Z, T, lam), lin.B, lin.bias)
    y = _flat(lin(x))
    gamma, beta = (affine_ls if variant == "affine" else moment_match)(y, _flat(target))
    return fold_affine(lin, gamma, beta)


def fit_block_adam(blk, h_in: torch.Tensor, h_out: torch.Tensor, steps: int = 100, lr: float = 1e-2,
                   mu: float = 0.1, tune_singular_values: bool = True) -> None:
    """Fit γ, β (and rank scales s) of ``o`` and ``down`` of ``blk`` in place by Adam on
    ‖f̂(ĥ) − h‖²/‖h‖² + μ Σ_c[(m̂_c − m_c)² + (σ̂_c − σ_c)²], then fold them into the factors."""
    o, down = blk.o, blk.down
    params = {}
    for name, lin in (("o", o), ("down", down)):
        m, r = lin.A.shape
        params[name] = [torch.ones(m, requires_grad=True), torch.zeros(m, requires_grad=True),
                        torch.ones(r, requires_grad=tune_singular_values)]
    trainable = [p for ps in params.values() for p in ps if p.requires_grad]
    opt = torch.optim.Adam(trainable, lr=lr)
    with torch.no_grad():
        a = blk.attn_core(h_in)
    tm, ts = _flat(h_out).mean(0), _flat(h_out).std(0)
    norm = h_out.pow(2).sum()

    def mapped(lin, x, p):
        g, b, s = p
        y = torch.nn.functional.linear(lin.code(x) * s, lin.A) + (0 if lin.bias is None else lin.bias)
        return g * y + b

    for _ in range(steps):
        mid = h_in + mapped(o, a, params["o"])
        out = mid + mapped(down, blk.mlp_hidden(mid), params["down"])
        loss = (out - h_out).pow(2).sum() / norm
        f = _flat(out)
        loss = loss + mu * ((f.mean(0) - tm).pow(2).sum() + (f.std(0) - ts).pow(2).sum())
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        for name, lin in (("o", o), ("down", down)):
            g, b, s = (p.detach().double() for p in params[name])
            scaled = LowRankLinear(lin.A.double() * s[None, :], lin.B, lin.bias)
            setattr(blk, name, fold_affine(scaled, g, b))


def decomper(model_c: LlamaLM, model_dense: LlamaLM, calib_x: torch.Tensor, variant: str = "refit",
             lam: float = 1e-3, steps: int = 100, mu: float = 0.1) -> LlamaLM:
    """The compensated copy of the compressed ``model_c``: blocks fitted in order on the drifted inputs of the
    compensated prefix, targets from the dense model's trajectory on the calibration inputs ``calib_x`` [N, T]."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    mc = clone(model_c)
    for p in mc.parameters():
        p.requires_grad_(False)
    _, mids, outs = collect_block_io(model_dense, calib_x)
    with torch.no_grad():
        h = mc.embed_tokens(calib_x)
    for l, blk in enumerate(mc.blocks):
        if variant == "adam":
            fit_block_adam(blk, h, outs[l], steps=steps, mu=mu)
            for p in blk.parameters():
                p.requires_grad_(False)
            with torch.no_grad():
                h = blk(h)
            continue
        with torch.no_grad():
            a = blk.attn_core(h)
            blk.o = _fit_map(blk.o, a, mids[l] - h, variant, lam)
            mid = h + blk.o(a)
            u = blk.mlp_hidden(mid)
            blk.down = _fit_map(blk.down, u, outs[l] - mid, variant, lam)
            h = mid + blk.down(u)
    for p in mc.parameters():
        p.requires_grad_(False)
    return mc


def global_refit(model_c: LlamaLM, model_dense: LlamaLM, calib_x: torch.Tensor, steps: int = 50,
                 lr: float = 1e-3) -> LlamaLM:
    """Baseline "at the end": the refit variant's parameters (A of ``o`` and ``down`` in every block) fitted
    jointly by Adam on KL(dense ‖ compressed) of the final next-byte distributions over the calibration inputs."""
    mc = clone(model_c)
    for p in mc.parameters():
        p.requires_grad_(False)
    params = []
    for blk in mc.blocks:
        for name in ("o", "down"):
            getattr(blk, name).A.requires_grad_(True)
            params.append(getattr(blk, name).A)
    with torch.no_grad():
        logp_d = torch.log_softmax(model_dense(calib_x), -1)
    opt = torch.optim.Adam(params, lr=lr)
    for _ in range(steps):
        logp = torch.log_softmax(mc(calib_x), -1)
        kl = (logp_d.exp() * (logp_d - logp)).sum(-1).mean()
        opt.zero_grad()
        kl.backward()
        opt.step()
    for p in mc.parameters():
        p.requires_grad_(False)
    return mc
