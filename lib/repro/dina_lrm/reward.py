"""DiNa-LRM: a timestep-conditioned reward head on frozen backbone features of *noisy* latents, trained with the
noise-calibrated Thurstone likelihood (paper Section 3; authors' ``reward_head.py`` and ``train/engine.py``).

For a pair (w, l) scored at the same σ with the same ε,

    P(w ≻ l | σ) = Φ( (s_w − s_l) / √(2 var(σ) + 1e-6) ),   var(σ) = a σ² + b   (released a = 2.0, b = 0.05),

trained with the fidelity loss 1 − √(p + 1e-6) (the released default) or −log p (``nll``). The baselines share the
head and the features and differ only in the loss: BT-LRM −log σ(s_w − s_l) on noisy latents (LPO's LRM),
Thurstone-constant (var ≡ 0.5, the repo's ablation) and the clean latent RM (BT at σ = 0 only). The pixel RM is a
CNN on decoded images (the "VLM proxy" of C4).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .flow import LatentFlowMLP, features, noise_latent

SQRT2 = math.sqrt(2.0)
#: The latent RMs of the chapter: name -> (loss, variance model, trained on noisy latents?)
LATENT_RMS = {
    "dina": ("thurstone", "sigma", True),          # DiNa-LRM with the configured loss (fidelity by default)
    "dina_nll": ("thurstone_nll", "sigma", True),  # DiNa-LRM trained with −log p (C2b)
    "thurstone_const": ("thurstone", "const", True),  # var ≡ 0.5 ablation
    "bt": ("bt", None, True),                      # BT-LRM
    "clean": ("bt", None, False),                  # clean latent RM: BT at σ = 0
}


# ----------------------------------------------------------------------------- likelihoods and losses

def std_normal_cdf(x: torch.Tensor) -> torch.Tensor:
    """Φ(x) = ½ (1 + erf(x / √2))."""
    return 0.5 * (1 + torch.erf(x / SQRT2))


def thurstone_var(sigma: torch.Tensor, a: float, b: float) -> torch.Tensor:
    """Per-item score variance var(σ) = a σ² + b."""
    return a * sigma ** 2 + b


def thurstone_prob(ds: torch.Tensor, sigma: torch.Tensor, a: float, b: float) -> torch.Tensor:
    """P(w ≻ l | σ) = Φ(ds / √(2 var(σ) + 1e-6)) for score differences ds = s_w − s_l."""
    return std_normal_cdf(ds / torch.sqrt(2 * thurstone_var(sigma, a, b) + 1e-6))


def fidelity_loss(p: torch.Tensor) -> torch.Tensor:
    """The released fidelity loss 1 − √(p + 1e-6) (not a proper scoring rule; see the card, C2b)."""
    return 1 - torch.sqrt(p + 1e-6)


def bt_loss(ds: torch.Tensor) -> torch.Tensor:
    """Bradley–Terry −log σ(s_w − s_l)."""
    return F.softplus(-ds)


def fidelity_minimizer(q: float) -> float:
    """The p minimizing E[fidelity] when the preference rate is q: q² / (q² + (1 − q)²)."""
    return q * q / (q * q + (1 - q) * (1 - q))


# ----------------------------------------------------------------------------- the head

class DiNaHead(nn.Module):
    """The reward head: per tapped layer a FiLM adapter, a linear aggregate, an MLP with the prompt embedding.

    Adapter l: a_l = proj_l( P_l h_l ⊙ (1 + γ_l(e_t)) + β_l(e_t) + layer_emb_l ), where γ, β come from an MLP on
    e_t whose last layer is zero-initialized (the head starts as "no modulation", as in ``reward_head.py``). The
    original's token-wise cross-attention with Q learnable queries reduces to Q output units averaged, because our
    latent is a single token (card, *Method* 2).
    """

    def __init__(self, width: int = 128, d: int = 48, n_taps: int = 3, n_classes: int = 10, n_queries: int = 4,
                 t_dim: int = 32) -> None:
        super().__init__()
        self.p_in = nn.ModuleList(nn.Linear(width, d) for _ in range(n_taps))
        self.t_proj = nn.Sequential(nn.SiLU(), nn.Linear(width, t_dim), nn.SiLU())
        self.film = nn.ModuleList(nn.Linear(t_dim, 2 * d) for _ in range(n_taps))
        for f in self.film:
            nn.init.zeros_(f.weight), nn.init.zeros_(f.bias)
        self.layer_emb = nn.Parameter(0.02 * torch.randn(n_taps, d))
        self.proj = nn.ModuleList(nn.Linear(d, d) for _ in range(n_taps))
        self.agg = nn.Linear(n_taps * d, d)
        self.y_emb = nn.Embedding(n_classes, 32)
        self.mlp = nn.Sequential(nn.Linear(d + 32, 128), nn.SiLU(), nn.Linear(128, n_queries))

    def forward(self, hs: list[torch.Tensor], e_t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        tt = self.t_proj(e_t)
        parts = []
        for l, h in enumerate(hs):
            gamma, beta = self.film[l](tt).chunk(2, dim=1)
            parts.append(self.proj[l](F.silu(self.p_in[l](h) * (1 + gamma) + beta + self.layer_emb[l])))
        a = F.silu(self.agg(torch.cat(parts, dim=1)))
        return self.mlp(torch.cat([a, self.y_emb(y)], dim=1)).mean(1)


class LatentRewardModel(nn.Module):
    """s(z_σ, y, σ) = head(features(backbone, z_σ, σ, y), e_t, y) on a frozen copy of the base generator."""

    def __init__(self, backbone: LatentFlowMLP, head: DiNaHead, taps: tuple[int, ...] = (1, 2, 3)) -> None:
        super().__init__()
        self.backbone = backbone
        for p in self.backbone.parameters():
            p.requires_grad_(False)
        self.head, self.taps = head, taps

    def forward(self, z_sigma: torch.Tensor, y: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        hs, e_t = features(self.backbone, z_sigma, sigma, y, self.taps)
        return self.head(hs, e_t, y)


def frozen_backbone(gen: LatentFlowMLP) -> LatentFlowMLP:
    """A frozen copy of the base generator (the RMs must not move when ReFL fine-tunes the generator)."""
    b = copy.deepcopy(gen).eval()
    for p in b.parameters():
        p.requires_grad_(False)
    return b


def score(rm: LatentRewardModel, z0: torch.Tensor, y: torch.Tensor, sigma: float, K: int = 1,
          eps: torch.Tensor | None = None, seed: int = 0) -> torch.Tensor:
    """Noise ensembling: s̄(z0, y) = (1/K) Σ_k s((1 − σ) z0 + σ ε_k, y, σ), card *Method* 4.

    ``eps`` (K, n, d) fixes the draws; otherwise they come from a generator seeded with ``seed``.
    """
    n, d = z0.shape
    if eps is None:
        eps = torch.randn(K, n, d, generator=torch.Generator().manual_seed(seed))
    K = eps.shape[0]
    zs = noise_latent(z0[None], sigma, eps).reshape(K * n, d)
    s = rm(zs, y.repeat(K), torch.full((K * n,), float(sigma)))
    return s.view(K, n).mean(0)


# ----------------------------------------------------------------------------- joint training of the latent RMs

@dataclass
class RMTrainLog:
    losses: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0


def pair_loss(kind: str, ds_w: torch.Tensor, sigma: torch.Tensor, a: float, b: float,
              loss: str = "fidelity") -> torch.Tensor:
    """Per-pair loss of an RM kind for winner-minus-loser score differences ``ds_w`` at noise ``sigma``."""
    lkind, var, _ = LATENT_RMS[kind]
    if lkind == "bt":
        return bt_loss(ds_w)
    if var == "const":
        p = std_normal_cdf(ds_w / math.sqrt(2 * 0.5 + 1e-6))
    else:
        p = thurstone_prob(ds_w, sigma, a, b)
    use_nll = lkind == "thurstone_nll" or (kind == "dina" and loss == "nll")
    return -torch.log(p + 1e-6) if use_nll else fidelity_loss(p)


def train_latent_rms(backbone: LatentFlowMLP, pairs, kinds: list[str], steps: int, seed: int, batch: int = 128,
                     lr: float = 5e-4, a: float = 2.0, b: float = 0.05, loss: str = "fidelity",
                     n_grid: int = 20, ema: float = 0.995) -> tuple[dict[str, LatentRewardModel], RMTrainLog]:
    """Train one head per RM kind on the *same* stream of batches, σ's and ε's (paired, DESIGN item 10).

    Per step (``train/engine.py``): a batch of pairs, σ ~ U(0, 1) per pair snapped to the N-step grid, one ε shared by
    both items; the backbone's features are computed once (frozen, no gradient) and every head gets its own loss,
    gradient clipping at 1.0 and AdamW step. The clean RM uses σ = 0 for the same pairs. EMA weights (0.995) are
    returned.

    The heads are trained side by side as one stacked model (``torch.func``: every parameter gets a leading axis of
    one slice per kind, the forward pass is vmapped over it): the same per-head computation as training them one by
    one, in a third fewer CPU seconds because each small matrix product runs once for all heads. AdamW and the EMA
    are elementwise, so a slice's update is that head's own; the clipping norm is taken per slice.
    """
    import time

    from torch.func import functional_call, stack_module_state

    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    heads = {k: DiNaHead(width=backbone.width) for k in kinds}
    # same initial weights for every head (paired): the first, once per kind
    first = next(iter(heads.values()))
    params, _ = stack_module_state([first] * len(kinds))          # name -> [kinds, ...] leaf tensors
    names = list(params)
    plist = [params[nm] for nm in names]
    ema_list = [p.detach().clone() for p in plist]
    meta = copy.deepcopy(first).to("meta")
    head_fwd = torch.vmap(lambda p, hs, e_t, y: functional_call(meta, p, (hs, e_t, y)),
                          in_dims=(0, 0, 0, None))
    opt = torch.optim.AdamW(plist, lr=lr)
    log = RMTrainLog({k: [] for k in kinds})
    t0 = time.perf_counter()
    n = len(pairs)
    noisy = [LATENT_RMS[k][2] for k in kinds]
    for _ in range(steps):
        idx = torch.randint(0, n, (batch,), generator=g)
        za, zb, y, lab = pairs.z_a[idx], pairs.z_b[idx], pairs.y[idx], pairs.label[idx]
        sign = 2 * lab - 1                                     # +1 when a is the winner
        sig = torch.round(torch.rand(batch, generator=g) * n_grid) / n_grid
        eps = torch.randn(za.shape, generator=g)
        yy = torch.cat([y, y])
        feats = {}
        with torch.no_grad():
            if any(noisy):
                s2 = torch.cat([sig, sig])
                zz = torch.cat([noise_latent(za, sig, eps), noise_latent(zb, sig, eps)])
                feats[True] = features(backbone, zz, s2, yy) + (s2,)
            if not all(noisy):
                s0 = torch.zeros(2 * batch)
                feats[False] = features(backbone, torch.cat([za, zb]), s0, yy) + (s0,)
            src = [feats[v] for v in noisy]                    # each kind's (features, e_t, σ)
            hs = [torch.stack([f[0][l] for f in src]) for l in range(len(src[0][0]))]
            e_t = torch.stack([f[1] for f in src])
        s = head_fwd(params, hs, e_t, yy)                      # [kinds, 2 batch]
        total = 0.0
        for i, k in enumerate(kinds):
            ds_w = sign * (s[i, :batch] - s[i, batch:])
            lk = pair_loss(k, ds_w, src[i][2][:batch], a, b, loss).mean()
            log.losses[k].append(float(lk.detach()))
            total = total + lk
        opt.zero_grad(set_to_none=True)
        total.backward()
        with torch.no_grad():   # clip_grad_norm_(head, 1.0) per head: coef = min(1, 1 / (‖g‖ + 1e-6))
            grads = [p.grad for p in plist]
            norm = torch.stack([gr.pow(2).flatten(1).sum(1) for gr in grads]).sum(0).sqrt()
            coef = (1.0 / (norm + 1e-6)).clamp(max=1.0)
            for gr in grads:
                gr.mul_(coef.view(-1, *([1] * (gr.dim() - 1))))
        opt.step()
        with torch.no_grad():
            torch._foreach_mul_(ema_list, ema)
            torch._foreach_add_(ema_list, plist, alpha=1 - ema)
    log.seconds = time.perf_counter() - t0
    out = {}
    for i, k in enumerate(kinds):
        heads[k].load_state_dict({nm: e[i].clone() for nm, e in zip(names, ema_list)})
        out[k] = LatentRewardModel(backbone, heads[k].eval())
    return out, log


# ----------------------------------------------------------------------------- pixel-space RM ("VLM proxy")

class PixelRewardCNN(nn.Module):
    """R_pix(x, y): conv(1→c) · conv(c→2c) at 8×8, pool, conv(2c→2c) at 4×4, linear, MLP with a class embedding."""

    def __init__(self, c: int = 32, hidden: int = 128, n_classes: int = 10) -> None:
        super().__init__()
        self.c = c
        self.c1 = nn.Conv2d(1, c, 3, padding=1)
        self.c2 = nn.Conv2d(c, 2 * c, 3, padding=1)
        self.c3 = nn.Conv2d(2 * c, 2 * c, 3, padding=1)
        self.fc = nn.Linear(2 * c * 16, hidden)
        self.y_emb = nn.Embedding(n_classes, 32)
        self.mlp = nn.Sequential(nn.Linear(hidden + 32, hidden), nn.SiLU(), nn.Linear(hidden, 1))
        self.to(memory_format=torch.channels_last)   # conv weights in oneDNN's faster layout (see forward)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # channels-last: oneDNN's faster layout for these small convolutions (~18 % of the pixel RM's training time)
        h = F.silu(self.c1(x.reshape(-1, 1, 8, 8).contiguous(memory_format=torch.channels_last)))
        h = F.avg_pool2d(F.silu(self.c2(h)), 2)
        h = F.silu(self.c3(h))
        h = F.silu(self.fc(h.flatten(1)))
        return self.mlp(torch.cat([h, self.y_emb(y)], dim=1))[:, 0]


def train_pixel_rm(model: PixelRewardCNN, x_a: torch.Tensor, x_b: torch.Tensor, y: torch.Tensor,
                   label: torch.Tensor, steps: int, seed: int, batch: int = 128, lr: float = 5e-4,
                   ema: float = 0.995) -> PixelRewardCNN:
    """BT loss on clean decoded images (the pixel RM never sees noise); AdamW, clip 1.0, EMA weights returned."""
    g = torch.Generator().manual_seed(seed)
    ema_m = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    n = y.shape[0]
    for _ in range(steps):
        idx = torch.randint(0, n, (batch,), generator=g)
        s = model(torch.cat([x_a[idx], x_b[idx]]), torch.cat([y[idx], y[idx]]))
        ds_w = (2 * label[idx] - 1) * (s[:batch] - s[batch:])
        loss = bt_loss(ds_w).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for pe, p in zip(ema_m.parameters(), model.parameters()):
                pe.mul_(ema).add_(p, alpha=1 - ema)
    return ema_m.eval()
