"""The toy text-to-image backbones of chapter 01 and their frozen evaluator.

* :class:`CondMLP` -- a denoiser on the 64-d image (8x8 digit). Text enters **only** through the linears
  ``blocks.i.cond_k`` and ``blocks.i.cond_v`` (384 -> width), used as FiLM: ``u <- u * (1 + cond_k(c)) + cond_v(c)``.
  They play the part of Stable Diffusion's cross-attention projections ``attn2.to_k`` / ``attn2.to_v``, the only
  layers UnHype adapts (Sec. 3 of the paper; ``target_modules`` in the authors' training script).
* Two parameterisations of the same network, as in the paper's two backbones (Sec. 4):
  ``param="flow"`` -- rectified flow ("Flux-like"): x_t = (1-t) x0 + t eps, the net predicts v = eps - x0,
  sampled with Euler steps from t = 1 to 0; ``param="eps"`` -- eps-prediction DDPM ("SD-like") with a 100-step
  cosine schedule, sampled with deterministic DDIM.
* :func:`sample` -- classifier-free guidance; a LoRA context may act on the conditional branch only, as the
  authors' CFG wrapper does.
* :class:`DigitClassifier` -- the frozen CNN that scores samples (target rate, retain accuracy, Frechet features).

Because the text path does not depend on (x, t), ``CondMLP.film(c)`` is computed once per prompt and reused for
every denoising step -- the sampler and all training loops use this.
"""
from __future__ import annotations

import math
from contextlib import nullcontext
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

D_X = 64      # 8x8 image
D_CTX = 384   # MiniLM embedding
DDPM_T = 100  # discrete DDPM timesteps


def timestep_embedding(t: torch.Tensor, dim: int = 64) -> torch.Tensor:
    """Sinusoidal embedding of t in [0, 1] (scaled by 1000, as diffusion models embed integer steps)."""
    half = dim // 2
    dt = t.dtype if t.is_floating_point() else torch.float32
    freqs = torch.exp(-math.log(10_000.0) * torch.arange(half, dtype=dt) / half)
    ang = (t.to(dt).reshape(-1, 1) * 1000.0) * freqs
    return torch.cat([ang.sin(), ang.cos()], dim=-1)


def cosine_alpha_bar(T: int = DDPM_T, s: float = 0.008) -> torch.Tensor:
    """alpha_bar_t for t = 0..T of the cosine schedule (Nichol & Dhariwal), betas clipped at 0.999."""
    t = torch.arange(T + 1, dtype=torch.float64)
    f = torch.cos((t / T + s) / (1 + s) * math.pi / 2) ** 2
    ab = f / f[0]
    betas = (1 - ab[1:] / ab[:-1]).clamp(max=0.999)
    return torch.cat([torch.ones(1, dtype=torch.float64), torch.cumprod(1 - betas, 0)]).float()


class Block(nn.Module):
    """Residual block: u = lin1(LN h); FiLM by the text, u * (1 + cond_k c) + cond_v c; h + lin2(SiLU u)."""

    def __init__(self, width: int, d_ctx: int = D_CTX) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.lin1 = nn.Linear(width, width)
        self.cond_k = nn.Linear(d_ctx, width)   # the attn2.to_k analogue
        self.cond_v = nn.Linear(d_ctx, width)   # the attn2.to_v analogue
        self.lin2 = nn.Linear(width, width)

    def forward(self, h: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        u = self.lin1(self.norm(h))
        u = u * (1 + k) + v
        return h + self.lin2(F.silu(u))


class CondMLP(nn.Module):
    """Text-conditioned denoiser on 8x8 images; ``param`` is "flow" (predicts v) or "eps" (predicts eps)."""

    def __init__(self, width: int = 128, n_blocks: int = 3, param: str = "flow", d_ctx: int = D_CTX) -> None:
        super().__init__()
        if param not in ("flow", "eps"):
            raise ValueError(f"param must be 'flow' or 'eps'; got {param!r}")
        self.param, self.width, self.n_blocks = param, width, n_blocks
        self.inp = nn.Linear(D_X, width)
        self.temb = nn.Sequential(nn.Linear(64, width), nn.SiLU(), nn.Linear(width, width))
        self.blocks = nn.ModuleList(Block(width, d_ctx) for _ in range(n_blocks))
        self.out = nn.Sequential(nn.LayerNorm(width), nn.SiLU(), nn.Linear(width, D_X))
        self.register_buffer("alpha_bar", cosine_alpha_bar(), persistent=False)

    @property
    def target_names(self) -> list[str]:
        """Names of the text projections (the LoRA targets), in order."""
        return [f"blocks.{i}.{p}" for i in range(self.n_blocks) for p in ("cond_k", "cond_v")]

    def film(self, c: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The text path: (cond_k(c), cond_v(c)) per block; depends on c only."""
        return [(blk.cond_k(c), blk.cond_v(c)) for blk in self.blocks]

    def forward(self, x: torch.Tensor, t: torch.Tensor, c: torch.Tensor | None = None,
                film: list | None = None) -> torch.Tensor:
        """Prediction (v or eps) at images ``x`` (N, 64), times ``t`` in [0, 1] (N,), text ``c`` (N or 1, 384)."""
        if film is None:
            film = self.film(c)
        h = self.inp(x) + self.temb(timestep_embedding(t))
        for blk, (k, v) in zip(self.blocks, film):
            h = blk(h, k, v)
        return self.out(h)

    # ------------------------------------------------------------------ training objective
    def noisy(self, x0: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A random noisy input, its time in [0, 1] and the regression target, for this parameterisation."""
        n = x0.shape[0]
        eps = torch.randn(x0.shape, generator=gen)
        if self.param == "flow":
            t = torch.rand(n, generator=gen)
            return (1 - t[:, None]) * x0 + t[:, None] * eps, t, eps - x0
        ti = torch.randint(1, DDPM_T + 1, (n,), generator=gen)
        ab = self.alpha_bar[ti][:, None]
        return ab.sqrt() * x0 + (1 - ab).sqrt() * eps, ti.float() / DDPM_T, eps


# ---------------------------------------------------------------------- sampling

def time_grid(steps: int) -> torch.Tensor:
    """The sampler's grid t_0 = 1 > t_1 > ... > t_steps = 0 (uniform; DDIM rounds it to integer DDPM steps)."""
    return torch.linspace(1.0, 0.0, steps + 1)


def _step(model: CondMLP, x: torch.Tensor, pred: torch.Tensor, t: float, t_next: float) -> torch.Tensor:
    if model.param == "flow":
        return x + (t_next - t) * pred                       # Euler: dx/dt = v
    a, a_next = (model.alpha_bar[round(s * DDPM_T)] for s in (t, t_next))
    x0 = ((x - (1 - a).sqrt() * pred) / a.sqrt()).clamp(-1, 1)  # DDIM (eta = 0) with the x0 estimate clipped,
    eps = (x - a.sqrt() * x0) / (1 - a).sqrt()                   # and eps recomputed from the clipped x0
    return a_next.sqrt() * x0 + (1 - a_next).sqrt() * eps


def guided(model: CondMLP, x: torch.Tensor, t: torch.Tensor, film_c: list, film_u: list, cfg: float) -> torch.Tensor:
    """Classifier-free guidance pred_u + cfg (pred_c - pred_u); cfg = 1 is the conditional prediction."""
    pc = model(x, t, film=film_c)
    if cfg == 1.0:
        return pc
    pu = model(x, t, film=film_u)
    return pu + cfg * (pc - pu)


@torch.no_grad()
def sample(model: CondMLP, c: torch.Tensor, c_uncond: torch.Tensor, noise: torch.Tensor, steps: int = 20,
           cfg: float = 3.0, lora_ctx=None, t_stop: int | None = None,
           return_traj: bool = False, c_index: torch.Tensor | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Generate from ``noise`` (N, 64) with prompts ``c`` (N or 1, 384).

    ``lora_ctx`` (a :class:`~repro.unhype.hyperlora.LoRAContext`) is active on the conditional branch only;
    the unconditional branch runs with ``lora_ctx.no_lora()``. ``t_stop`` stops after that many steps.
    With ``return_traj`` also returns the states x_i (steps, N, 64) where the net was evaluated and their times.
    ``c_index`` (N,) maps samples to rows of ``c`` (then ``c`` holds the distinct prompts, and any per-prompt LoRA
    factors in ``lora_ctx`` are per row of ``c``): the text path runs once per distinct prompt.
    """
    if lora_ctx is None:
        lora_ctx = getattr(model, "lora", None)
    grid = time_grid(steps)
    film_c = model.film(c)
    if c_index is not None:
        film_c = [(k[c_index], v[c_index]) for k, v in film_c]
    with (lora_ctx.no_lora() if lora_ctx is not None else nullcontext()):
        film_u = model.film(c_uncond.reshape(1, -1))
    x, states = noise.clone(), []
    n_steps = steps if t_stop is None else t_stop
    for i in range(n_steps):
        t, t_next = float(grid[i]), float(grid[i + 1])
        if return_traj:
            states.append(x)
        pred = guided(model, x, torch.full((x.shape[0],), t), film_c, film_u, cfg)
        x = _step(model, x, pred, t, t_next)
    if return_traj:
        return x, torch.stack(states), grid[:n_steps]
    return x


def train_base(model: CondMLP, x: torch.Tensor, prompt_of: Callable[[torch.Tensor, torch.Generator], torch.Tensor],
               emb: torch.Tensor, uncond_idx: int, steps: int = 1000, batch: int = 128, lr: float = 2e-3,
               p_uncond: float = 0.1, seed: int = 0, labels: torch.Tensor | None = None) -> list[float]:
    """Train the base generator (Adam, cosine lr): each image gets a random prompt of its digit, 10% get "".

    ``prompt_of(labels, gen)`` returns prompt indices into ``emb``. Returns the loss per step.
    """
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    losses = []
    model.train()
    for _ in range(steps):
        i = torch.randint(0, x.shape[0], (batch,), generator=gen)
        pidx = prompt_of(labels[i], gen)
        drop = torch.rand(batch, generator=gen) < p_uncond
        pidx = torch.where(drop, torch.full_like(pidx, uncond_idx), pidx)
        xt, t, target = model.noisy(x[i], gen)
        loss = F.mse_loss(model(xt, t, emb[pidx]), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return losses


# ---------------------------------------------------------------------- evaluator

class DigitClassifier(nn.Module):
    """Small CNN on 8x8 digits; ``features`` is the 64-d penultimate layer used for the Frechet distance."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),
                                  nn.ReLU(), nn.MaxPool2d(2))
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(32 * 16, 64), nn.ReLU())
        self.head = nn.Linear(64, 10)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x.reshape(-1, 1, 8, 8).clamp(-1, 1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(1)


def train_classifier(x: torch.Tensor, y: torch.Tensor, epochs: int = 30, batch: int = 64, lr: float = 2e-3,
                     seed: int = 0) -> DigitClassifier:
    """Train the evaluator on the real train split (random +-1 pixel shifts), then freeze it."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    clf = DigitClassifier()
    opt = torch.optim.Adam(clf.parameters(), lr=lr)
    n = x.shape[0]
    for _ in range(epochs):
        perm = torch.randperm(n, generator=gen)
        for s in range(0, n, batch):
            i = perm[s:s + batch]
            img = x[i].reshape(-1, 8, 8)
            dx, dy = (int(v) for v in torch.randint(-1, 2, (2,), generator=gen))
            img = torch.roll(img, shifts=(dy, dx), dims=(1, 2))
            loss = F.cross_entropy(clf(img), y[i])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    clf.eval()
    for p in clf.parameters():
        p.requires_grad_(False)
    return clf
