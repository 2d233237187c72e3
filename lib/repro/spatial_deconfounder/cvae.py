"""Stage 1 of the Spatial Deconfounder: a conditional VAE over treatment patches with a GMRF prior
(card, Method 1-6; official ``CVAE_Grid`` and ``kldiv`` in ``benchmarks/sci/algorithms/deconfounder.py``).

The encoder q(Z | treatment patch, covariate patch) gives a Gaussian latent of ``latent_dim`` channels at
every location of the (2r+1)² patch; the decoder reconstructs the *centre* treatment from the covariate
patch and the latent patch. The prior on each latent channel is the Gaussian-Markov random field
N(0, P⁻¹) with P = τ(L + εI), L the patch grid's Laplacian: it favours latents that are smooth across the
patch, like the hidden field they stand in for. The centre treatment is hidden from the encoder by default
(``mask_center``): otherwise Z can copy A_s, the decoder's own target (the card's decision; the official
encoder sees it, kept as an ablation).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from .data import SpatialData
from .patches import extract_patches, grid_laplacian


def encoder_inputs(data: SpatialData, radius: int, mask_radius: int | None, x_mean: np.ndarray,
                   x_sd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Channels-first encoder input [N, 4, p, p] = (A with the masked cells set to 0, mask indicator,
    standardized X1, X2) and the standardized covariate patches [N, 2, p, p], for the evaluated units.
    ``mask_radius`` None shows every treatment; 0 hides the centre; 1 hides the centre and its 8 neighbours."""
    p = 2 * radius + 1
    A = extract_patches(data.A, radius, data.idx)[..., 0]
    X = (extract_patches(data.X, radius, data.idx) - x_mean) / x_sd
    mask = np.zeros((p, p))
    if mask_radius is not None:
        m = min(mask_radius, radius)
        mask[radius - m:radius + m + 1, radius - m:radius + m + 1] = 1.0
    A = A * (1 - mask)
    enc = np.concatenate([A[:, None], np.broadcast_to(mask, A.shape)[:, None], X.transpose(0, 3, 1, 2)], 1)
    return enc.astype(np.float32), np.ascontiguousarray(X.transpose(0, 3, 1, 2)).astype(np.float32)


class PatchCVAE(nn.Module):
    """Encoder conv3×3(4→hidden)+BN+ReLU → conv3×3(hidden→2·d_z) (no final ReLU, so μ may be negative);
    linear decoder logit p(A_s = 1) = w·[vec X patch, vec Z patch] + b."""

    def __init__(self, n_cov: int = 2, radius: int = 2, latent_dim: int = 2, hidden: int = 16) -> None:
        super().__init__()
        p = 2 * radius + 1
        self.radius, self.latent_dim = radius, latent_dim
        self.enc = nn.Sequential(nn.Conv2d(2 + n_cov, hidden, 3, padding=1), nn.BatchNorm2d(hidden), nn.ReLU(),
                                 nn.Conv2d(hidden, 2 * latent_dim, 3, padding=1))
        self.dec = nn.Linear(n_cov * p * p + latent_dim * p * p, 1)

    def encode(self, enc_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.enc(enc_in)
        mu, logvar = out[:, :self.latent_dim], out[:, self.latent_dim:].clamp(-8, 8)
        return mu, logvar

    def decode(self, x_patch: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return self.dec(torch.cat([x_patch.flatten(1), z.flatten(1)], 1)).squeeze(1)

    def forward(self, enc_in, x_patch, gen: torch.Generator | None = None):
        mu, logvar = self.encode(enc_in)
        z = mu + torch.exp(0.5 * logvar) * torch.randn(mu.shape, generator=gen)
        return self.decode(x_patch, z), mu, logvar


def gmrf_precision(radius: int, tau: float, eps: float = 1e-5, connectivity: int = 4) -> np.ndarray:
    """P = τ(L + εI) of the (2r+1)×(2r+1) patch grid."""
    n = 2 * radius + 1
    return tau * (grid_laplacian(n, connectivity) + eps * np.eye(n * n))


def gmrf_kl(mu: torch.Tensor, logvar: torch.Tensor, P: torch.Tensor, exact: bool = False) -> torch.Tensor:
    """Per-sample KL(N(μ, diag σ²) ‖ N(0, P⁻¹)) summed over latent channels, divided by (#pixels · d_z) as in
    the official ``kldiv``. Per channel k: ½[μ_kᵀPμ_k + Σ_i P_ii σ²_ik − Σ_i log σ²_ik] (+ the constant
    −½[n + log det P] when ``exact``). ``mu``, ``logvar``: [N, d_z, p, p]; returns [N]."""
    n_s, d_z = mu.shape[:2]
    m = mu.reshape(n_s, d_z, -1)
    lv = logvar.reshape(n_s, d_z, -1)
    npix = m.shape[-1]
    quad = torch.einsum("nki,ij,nkj->n", m, P, m)
    trace = (torch.exp(lv) * torch.diagonal(P)).sum((1, 2))
    kl = 0.5 * (quad + trace - lv.sum((1, 2)))
    if exact:
        kl = kl - 0.5 * d_z * (npix + torch.logdet(P))
    return kl / (npix * d_z)


def iid_kl(mu: torch.Tensor, logvar: torch.Tensor, exact: bool = True) -> torch.Tensor:
    """Per-sample KL to N(0, I), per pixel and latent channel (the ablation's prior)."""
    n_s = mu.shape[0]
    kl = 0.5 * (mu ** 2 + torch.exp(logvar) - logvar - (1.0 if exact else 0.0))
    return kl.reshape(n_s, -1).mean(1)


@dataclass
class CVAEFit:
    """A fitted C-VAE with the inputs it was fitted on and its training history."""

    model: PatchCVAE
    enc_in: torch.Tensor
    x_patch: torch.Tensor
    prior: str
    P: torch.Tensor
    train: np.ndarray
    val: np.ndarray
    history: dict = field(default_factory=dict)

    def posterior(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.model.eval()
        with torch.no_grad():
            return self.model.encode(self.enc_in)

    def kl_per_dim(self, units: np.ndarray | None = None) -> np.ndarray:
        """Exact KL to the prior per latent channel, per pixel, averaged over ``units`` (default held-out)."""
        mu, lv = self.posterior()
        u = self.val if units is None else units
        mu, lv = mu[u], lv[u]
        out = []
        for k in range(mu.shape[1]):
            m, l = mu[:, k:k + 1], lv[:, k:k + 1]
            kl = gmrf_kl(m, l, self.P, exact=True) if self.prior == "gmrf" else iid_kl(m, l)
            out.append(float(kl.mean()))
        return np.array(out)


def _loss(model: PatchCVAE, enc_in, x_patch, target, P, prior, beta, gen):
    logit, mu, logvar = model(enc_in, x_patch, gen)
    bce = nn.functional.binary_cross_entropy_with_logits(logit, target)
    kl = gmrf_kl(mu, logvar, P) if prior == "gmrf" else iid_kl(mu, logvar, exact=False)
    return bce, kl.mean(), bce + beta * kl.mean()


def fit_cvae(data: SpatialData, radius: int, train: np.ndarray, val: np.ndarray, epochs: int = 30,
             latent_dim: int = 2, beta_max: float = 0.1, warmup: int = 10, tau: float = 10.0,
             prior: str = "gmrf", mask_radius: int | None = 0, seed: int = 0, batch: int = 64,
             lr: float = 1e-3, weight_decay: float = 1e-5, hidden: int = 16) -> CVAEFit:
    """Fit the C-VAE on the ``train`` units (positions into ``data.idx``); keep the epoch with the lowest
    validation loss BCE + β_max·KL on ``val``. AdamW, cosine schedule, gradient clip 1.0, β_t = β_max·min(1,
    epoch/warmup)."""
    if prior not in ("gmrf", "iid"):
        raise ValueError(f"prior must be 'gmrf' or 'iid'; got {prior!r}")
    xs = data.at(data.X)[train]
    x_mean, x_sd = xs.mean(0), xs.std(0)
    enc_np, x_np = encoder_inputs(data, radius, mask_radius, x_mean, x_sd)
    enc_in, x_patch = torch.from_numpy(enc_np), torch.from_numpy(x_np)
    target = torch.from_numpy(data.at(data.A).astype(np.float32))
    P = torch.from_numpy(gmrf_precision(radius, tau).astype(np.float32))
    torch.manual_seed(seed)
    model = PatchCVAE(2, radius, latent_dim, hidden)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    steps_per_epoch = math.ceil(train.size / batch)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * steps_per_epoch)
    gen = torch.Generator().manual_seed(seed)
    tr = torch.from_numpy(train)
    va = torch.from_numpy(val)
    hist = {"epoch": [], "train_bce": [], "train_kl": [], "val_bce": [], "val_kl": [], "beta": []}
    best, best_state = math.inf, None
    for ep in range(1, epochs + 1):
        beta = beta_max * min(1.0, ep / warmup) if warmup > 0 else beta_max
        model.train()
        perm = tr[torch.randperm(tr.numel(), generator=gen)]
        sb = sk = 0.0
        for i in range(0, perm.numel(), batch):
            b = perm[i:i + batch]
            if b.numel() < 2:
                continue
            bce, kl, loss = _loss(model, enc_in[b], x_patch[b], target[b], P, prior, beta, gen)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            sb += float(bce.detach()) * b.numel()
            sk += float(kl.detach()) * b.numel()
        model.eval()
        with torch.no_grad():
            vb, vk, _ = _loss(model, enc_in[va], x_patch[va], target[va], P, prior, beta_max, gen)
        vloss = float(vb) + beta_max * float(vk)
        for k, v in (("epoch", ep), ("train_bce", sb / tr.numel()), ("train_kl", sk / tr.numel()),
                     ("val_bce", float(vb)), ("val_kl", float(vk)), ("beta", beta)):
            hist[k].append(v)
        if vloss < best:
            best = vloss
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    model.eval()
    hist["best_epoch"] = int(hist["epoch"][int(np.argmin(np.array(hist["val_bce"]) + beta_max * np.array(hist["val_kl"])))])
    return CVAEFit(model, enc_in, x_patch, prior, P, train, val, hist)


def substitute_confounder(fit: CVAEFit) -> np.ndarray:
    """Ẑ_s = [posterior mean μ at the centre, mean of μ over the patch] (2·d_z features per unit), from the
    factual treatments; held fixed under every intervention of stage 2."""
    mu, _ = fit.posterior()
    r = fit.model.radius
    return torch.cat([mu[:, :, r, r], mu.mean((2, 3))], 1).numpy().astype(float)


def predictive_pvalue(fit: CVAEFit, target: np.ndarray, n_rep: int = 100, seed: int = 0,
                      units: np.ndarray | None = None) -> float:
    """Posterior predictive check on held-out units: T(A) = mean log p(A | X, Z) with Z ~ q; the p-value is
    the share of replicated treatment vectors A_rep ~ p(A | X, Z) with T(A_rep) < T(A_obs)."""
    u = fit.val if units is None else units
    gen = torch.Generator().manual_seed(seed)
    mu, lv = fit.posterior()
    mu, lv, xp = mu[u], lv[u], fit.x_patch[u]
    a = torch.from_numpy(target[u].astype(np.float32))
    below = 0
    with torch.no_grad():
        for _ in range(n_rep):
            z = mu + torch.exp(0.5 * lv) * torch.randn(mu.shape, generator=gen)
            pr = torch.sigmoid(fit.model.decode(xp, z)).clamp(1e-6, 1 - 1e-6)
            a_rep = (torch.rand(pr.shape, generator=gen) < pr).float()
            ll = lambda y: float((y * torch.log(pr) + (1 - y) * torch.log(1 - pr)).mean())
            below += ll(a_rep) < ll(a)
    return below / n_rep
