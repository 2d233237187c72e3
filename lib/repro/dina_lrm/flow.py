"""The base generator: a class-conditional rectified-flow MLP in the autoencoder's 16-d latent space.

Rectified flow (the SD3 convention the paper's backbones use): z_t = (1 − t) z0 + t ε with t = σ ∈ [0, 1], σ = 1 is
pure noise, and the network predicts the velocity v = ε − z0, so that the predicted clean latent from any
z_t is ẑ0 = z_t − t·v (the ReFL readout, card *Method* 5). Each residual block is FiLM-conditioned on the time
embedding plus the class ("prompt") embedding; class index 10 is the null prompt of classifier-free guidance.

:func:`features` is the paper's feature extractor (Section 3.1): it runs the input layer and the first blocks on the
*noised* latent and returns the hidden states after the tapped blocks (the analogue of layers 4/8/12 of
SD3.5-M) together with the time embedding e_t, which the reward head's FiLM adapters read.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

N_CLASSES = 10
NULL = N_CLASSES  # the null prompt of classifier-free guidance


def timestep_embedding(t: torch.Tensor, dim: int = 64) -> torch.Tensor:
    """Sinusoidal embedding of t ∈ [0, 1] (scaled by 1000 like a diffusion timestep)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10_000.0) * torch.arange(half, dtype=t.dtype, device=t.device) / half)
    args = 1000.0 * t[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=1)


class FiLMBlock(nn.Module):
    """h ← h + W2 SiLU( W1 LN(h) ⊙ (1 + γ(c)) + β(c) ): a residual MLP block with FiLM conditioning."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.w1 = nn.Linear(width, width)
        self.w2 = nn.Linear(width, width)
        self.film = nn.Linear(width, 2 * width)

    def forward(self, h: torch.Tensor, c: torch.Tensor | None = None,
                mod: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """``mod`` = (γ, β) per row, precomputed from c (:func:`features_at`); otherwise from ``c``."""
        gamma, beta = self.film(F.silu(c)).chunk(2, dim=1) if mod is None else mod
        return h + self.w2(F.silu(self.w1(self.norm(h)) * (1 + gamma) + beta))


class LatentFlowMLP(nn.Module):
    """v_θ(z_t, t, y): input layer, ``n_blocks`` FiLM residual blocks, output layer (card: width 128, 4 blocks)."""

    def __init__(self, d: int = 16, n_classes: int = N_CLASSES, width: int = 128, n_blocks: int = 4) -> None:
        super().__init__()
        self.d, self.width = d, width
        self.inp = nn.Linear(d, width)
        self.t_mlp = nn.Sequential(nn.Linear(64, width), nn.SiLU(), nn.Linear(width, width))
        self.y_emb = nn.Embedding(n_classes + 1, width)
        self.blocks = nn.ModuleList(FiLMBlock(width) for _ in range(n_blocks))
        self.out_norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, d)

    def time_embedding(self, t: torch.Tensor) -> torch.Tensor:
        """e_t: the MLP on the sinusoidal embedding of t."""
        return self.t_mlp(timestep_embedding(t))

    def forward(self, z: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        c = self.time_embedding(t) + self.y_emb(y)
        h = self.inp(z)
        for blk in self.blocks:
            h = blk(h, c)
        return self.out(self.out_norm(h))


def guided_velocity(model: LatentFlowMLP, z: torch.Tensor, t: torch.Tensor, y: torch.Tensor,
                    cfg_scale: float) -> torch.Tensor:
    """Classifier-free guidance: v_u + w (v_c − v_u) (one batched call for both)."""
    if cfg_scale == 1.0:
        return model(z, t, y)
    n = z.shape[0]
    v = model(torch.cat([z, z]), torch.cat([t, t]), torch.cat([y, torch.full_like(y, NULL)]))
    v_c, v_u = v[:n], v[n:]
    return v_u + cfg_scale * (v_c - v_u)


def flow_matching_loss(model: LatentFlowMLP, z0: torch.Tensor, y: torch.Tensor, gen: torch.Generator,
                       p_uncond: float = 0.1) -> torch.Tensor:
    """Rectified-flow loss ‖(ε − z0) − v_θ(z_t, t, y)‖² with t ~ U(0, 1) and 10 % null prompts (for CFG)."""
    n = z0.shape[0]
    t = torch.rand(n, generator=gen)
    eps = torch.randn(z0.shape, generator=gen)
    zt = (1 - t[:, None]) * z0 + t[:, None] * eps
    drop = torch.rand(n, generator=gen) < p_uncond
    y_in = torch.where(drop, torch.full_like(y, NULL), y)
    return ((eps - z0) - model(zt, t, y_in)).pow(2).mean()


def train_flow(z: torch.Tensor, y: torch.Tensor, steps: int, seed: int = 0, batch: int = 256,
               lr: float = 1e-3, width: int = 128, n_blocks: int = 4) -> LatentFlowMLP:
    """Train the base generator on standardized latents ``z`` with labels ``y`` (Adam, cosine decay)."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = LatentFlowMLP(z.shape[1], width=width, n_blocks=n_blocks)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(steps, 1))
    for _ in range(steps):
        idx = torch.randint(0, z.shape[0], (batch,), generator=gen)
        loss = flow_matching_loss(model, z[idx], y[idx], gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    return model.eval()


def sigma_schedule(n_steps: int) -> torch.Tensor:
    """The Euler grid σ_0 = 1 > σ_1 > … > σ_N = 0 (uniform in σ)."""
    return torch.linspace(1.0, 0.0, n_steps + 1)


def sample(model: LatentFlowMLP, y: torch.Tensor, steps: int = 20, cfg_scale: float = 1.5,
           noise: torch.Tensor | None = None, gen: torch.Generator | None = None,
           grad_from_step: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Euler-integrate dz/dσ = v from σ = 1 to 0.

    With ``grad_from_step = j`` the first j steps run without gradient and the velocity at step j is evaluated
    *with* gradient; the function then returns the ReFL readout ẑ0 = z_{σ_j} − σ_j v (card *Method* 5) instead of
    integrating further. Returns (ẑ0, z_{σ_j} or None).
    """
    if noise is None:
        noise = torch.randn(y.shape[0], model.d, generator=gen)
    sig = sigma_schedule(steps)
    z = noise
    last = steps if grad_from_step is None else grad_from_step
    with torch.no_grad():
        for i in range(last):
            t = torch.full((y.shape[0],), float(sig[i]))
            v = guided_velocity(model, z, t, y, cfg_scale)
            z = z + (sig[i + 1] - sig[i]) * v
    if grad_from_step is None:
        return z, None
    t = torch.full((y.shape[0],), float(sig[last]))
    v = guided_velocity(model, z, t, y, cfg_scale)
    return z - sig[last] * v, z


def features(model: LatentFlowMLP, z: torch.Tensor, sigma: torch.Tensor, y: torch.Tensor,
             taps: tuple[int, ...] = (1, 2, 3)) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Hidden states after blocks ``taps`` (1-based) of the backbone run on (z_σ, t = σ, y), and e_t."""
    e_t = model.time_embedding(sigma)
    c = e_t + model.y_emb(y)
    h = model.inp(z)
    out = []
    for i, blk in enumerate(model.blocks[: max(taps)], start=1):
        h = blk(h, c)
        if i in taps:
            out.append(h)
    return out, e_t


def features_at(model: LatentFlowMLP, z: torch.Tensor, sigma: float, y: torch.Tensor,
                taps: tuple[int, ...] = (1, 2, 3)) -> tuple[list[torch.Tensor], torch.Tensor]:
    """:func:`features` when every row has the same σ (evaluation): the conditioning c = e_t + emb(y) then takes
    one value per class, so e_t and each block's FiLM layer are computed on the class rows and gathered per row —
    the same numbers (up to float rounding) for about half the backbone's multiply-adds."""
    e1 = model.time_embedding(torch.full((1,), float(sigma)))
    c = e1 + model.y_emb.weight                                        # one row per class (and the null prompt)
    h = model.inp(z)
    out = []
    for i, blk in enumerate(model.blocks[: max(taps)], start=1):
        gamma, beta = blk.film(F.silu(c)).chunk(2, dim=1)
        h = blk(h, mod=(gamma[y], beta[y]))
        if i in taps:
            out.append(h)
    return out, e1.expand(z.shape[0], -1)


def noise_latent(z0: torch.Tensor, sigma: torch.Tensor | float, eps: torch.Tensor) -> torch.Tensor:
    """z_σ = (1 − σ) z0 + σ ε (σ a scalar or one value per row)."""
    s = sigma if not torch.is_tensor(sigma) or sigma.dim() == 0 else sigma[:, None]
    return (1 - s) * z0 + s * eps
