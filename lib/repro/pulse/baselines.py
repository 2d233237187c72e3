"""The baselines of chapter 19, each on the same :class:`DilatedConvEncoder` as PULSE and each probed on
the same pooled code c = max_t LayerNorm(E(x)):

* :class:`SimCLR` (Chen et al. 2020) -- two views by time shift within the recording, scaling and jitter (the
  released SimCLR trainer's augmentations, each with probability 1/2), projector MLP, NT-Xent at tau = 0.2.
* :class:`TS2VecLite` (Yue et al. 2022) -- two random overlapping crops, instance and temporal contrast on the
  overlap, hierarchically max-pooled by 2 down to one step.
* :class:`MaskedAE` (PatchTST / TimeMAE style; He et al. 2022) -- patches of 10 steps, half zeroed, a light conv
  decoder rebuilds the masked patches from the per-step features.
* :class:`DSVAE` (Li & Mandt 2018; the repo's ``baselines/dsvae``) -- static v from the pooled encoder output,
  dynamic z_t from a bidirectional LSTM over [x_t, v] then a forward RNN, learned prior LSTM over z_{t-1},
  per-step MLP decoder on [v, z_t]; loss MSE + kl_weight (KL_z + KL_v), KL summed as in the repo.
* :class:`Supervised` -- the encoder plus a linear head, cross-entropy on labelled windows (C4's reference).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .encoders import DilatedConvEncoder
from .generators import WindowSet


def _u(gen: torch.Generator, *shape) -> torch.Tensor:
    return torch.rand(*shape, generator=gen)


class SimCLR(nn.Module):
    """Contrastive pretraining with mild, documented augmentations (both views augmented independently)."""

    def __init__(self, in_ch: int, hidden: int = 16, emb: int = 32, depth: int = 4, tau: float = 0.2,
                 max_shift: float = 0.5, scale: tuple[float, float] = (0.5, 1.5), jitter: float = 0.2) -> None:
        super().__init__()
        self.encoder = DilatedConvEncoder(in_ch, hidden, emb, depth)
        self.projector = nn.Sequential(nn.Linear(emb, emb), nn.ReLU(), nn.Linear(emb, emb))
        self.tau, self.max_shift, self.scale, self.jitter = tau, max_shift, scale, jitter

    def view(self, idx: np.ndarray, data: WindowSet, gen: torch.Generator) -> torch.Tensor:
        """One augmented view: shift within the recording (|shift| < T/2), scale, jitter, each w.p. 1/2."""
        T = data.X.shape[1]
        L = data.recordings.shape[1]
        B = len(idx)
        shift = ((_u(gen, B) * 2 - 1) * self.max_shift * T).long().numpy()
        use = (_u(gen, B) < 0.5).numpy()
        starts = np.clip(data.start[idx] + np.where(use, shift, 0), 0, L - T)
        x = torch.as_tensor(np.stack([data.recordings[r, s:s + T] for r, s in zip(data.rec[idx], starts)]))
        sc = self.scale[0] + (self.scale[1] - self.scale[0]) * _u(gen, B, 1, 1)
        x = torch.where(_u(gen, B, 1, 1) < 0.5, x * sc, x)
        noise = torch.randn(x.shape, generator=gen) * self.jitter
        return torch.where(_u(gen, B, 1, 1) < 0.5, x + noise, x)

    def loss(self, idx: np.ndarray, data: WindowSet, gen: torch.Generator) -> torch.Tensor:
        v1, v2 = self.view(idx, data, gen), self.view(idx, data, gen)
        z = F.normalize(self.projector(self.encoder(torch.cat([v1, v2]))[0]), dim=1)
        return nt_xent(z, self.tau)


def nt_xent(z: torch.Tensor, tau: float) -> torch.Tensor:
    """NT-Xent over 2B unit vectors where rows i and i+B are positives."""
    n = len(z) // 2
    sim = z @ z.T / tau
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, target)


class TS2VecLite(nn.Module):
    """Hierarchical contrast of two overlapping random crops (no timestamp masking, same crop for the batch)."""

    def __init__(self, in_ch: int, hidden: int = 16, emb: int = 32, depth: int = 4, alpha: float = 0.5) -> None:
        super().__init__()
        self.encoder = DilatedConvEncoder(in_ch, hidden, emb, depth)
        self.alpha = alpha

    def loss(self, idx: np.ndarray, data: WindowSet, gen: torch.Generator) -> torch.Tensor:
        x = torch.as_tensor(data.X[idx])
        T = x.shape[1]
        r = lambda lo, hi: int(torch.randint(lo, hi, (1,), generator=gen))  # integer in [lo, hi)
        crop_l = r(min(8, T), T + 1)
        left = r(0, T - crop_l + 1)
        right = left + crop_l
        e_left, e_right = r(0, left + 1), r(right, T + 1)
        h1 = self.encoder.per_step(x[:, e_left:right])[:, -crop_l:]
        h2 = self.encoder.per_step(x[:, left:e_right])[:, :crop_l]
        return hierarchical_contrastive(h1, h2, self.alpha)


def _instance_contrast(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    B = z1.size(0)
    if B == 1:
        return z1.new_zeros(())
    z = torch.cat([z1, z2], dim=0).transpose(0, 1)  # T x 2B x C
    sim = z @ z.transpose(1, 2)
    logits = torch.tril(sim, diagonal=-1)[:, :, :-1] + torch.triu(sim, diagonal=1)[:, :, 1:]
    logits = -F.log_softmax(logits, dim=-1)
    i = torch.arange(B)
    return (logits[:, i, B + i - 1].mean() + logits[:, B + i, i].mean()) / 2


def _temporal_contrast(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    T = z1.size(1)
    if T == 1:
        return z1.new_zeros(())
    z = torch.cat([z1, z2], dim=1)  # B x 2T x C
    sim = z @ z.transpose(1, 2)
    logits = torch.tril(sim, diagonal=-1)[:, :, :-1] + torch.triu(sim, diagonal=1)[:, :, 1:]
    logits = -F.log_softmax(logits, dim=-1)
    t = torch.arange(T)
    return (logits[:, t, T + t - 1].mean() + logits[:, T + t, t].mean()) / 2


def hierarchical_contrastive(z1: torch.Tensor, z2: torch.Tensor, alpha: float = 0.5) -> torch.Tensor:
    """TS2Vec's loss: instance + temporal contrast at every scale of a max-pool-by-2 pyramid."""
    loss, d = torch.zeros(()), 0
    while z1.size(1) > 1:
        loss = loss + alpha * _instance_contrast(z1, z2) + (1 - alpha) * _temporal_contrast(z1, z2)
        d += 1
        z1 = F.max_pool1d(z1.transpose(1, 2), 2).transpose(1, 2)
        z2 = F.max_pool1d(z2.transpose(1, 2), 2).transpose(1, 2)
    if z1.size(1) == 1:
        loss = loss + alpha * _instance_contrast(z1, z2)
        d += 1
    return loss / d


class MaskedAE(nn.Module):
    """Masked reconstruction: half of the 10-step patches zeroed, MSE on the masked steps only."""

    def __init__(self, in_ch: int, hidden: int = 16, emb: int = 32, depth: int = 4, patch: int = 10,
                 mask_ratio: float = 0.5) -> None:
        super().__init__()
        self.encoder = DilatedConvEncoder(in_ch, hidden, emb, depth)
        self.decoder = nn.Sequential(nn.Conv1d(emb, hidden, 3, padding=1), nn.GELU(), nn.Conv1d(hidden, in_ch, 3, padding=1))
        self.patch, self.mask_ratio = patch, mask_ratio

    def patch_mask(self, B: int, T: int, gen: torch.Generator) -> torch.Tensor:
        """(B, T, 1) with 1 on masked steps: exactly round(ratio x n_patches) patches per window."""
        n_p = -(-T // self.patch)
        k = max(1, int(round(self.mask_ratio * n_p)))
        order = torch.argsort(_u(gen, B, n_p), dim=1)
        pm = torch.zeros(B, n_p)
        pm.scatter_(1, order[:, :k], 1.0)
        return pm.repeat_interleave(self.patch, dim=1)[:, :T, None]

    def loss(self, idx: np.ndarray, data: WindowSet, gen: torch.Generator) -> torch.Tensor:
        x = torch.as_tensor(data.X[idx])
        m = self.patch_mask(len(x), x.shape[1], gen)
        H = self.encoder.per_step(x * (1 - m))
        xhat = self.decoder(H.transpose(1, 2)).transpose(1, 2)
        return (((xhat - x) ** 2) * m).sum() / (m.sum() * x.shape[2])


def kl_gauss(mu: torch.Tensor, logvar: torch.Tensor, mu_p: torch.Tensor, logvar_p: torch.Tensor) -> torch.Tensor:
    """KL(N(mu, e^logvar) || N(mu_p, e^logvar_p)), summed over every element as the repo's ``loss_KLD``.

    The repo's expression omits the constant -1 per element (its "KL" is the KL plus n/2); the gradients are the
    same, and with the constant the logged KL_z and KL_v are true divergences."""
    return -0.5 * torch.sum(1 + logvar - logvar_p - (logvar.exp() + (mu - mu_p) ** 2) / (logvar_p.exp() + 1e-10))


class DSVAE(nn.Module):
    """Disentangled sequential VAE (static v, dynamic z_t) with the shared encoder giving v's features."""

    def __init__(self, in_ch: int, hidden: int = 16, emb: int = 32, depth: int = 4, kl_weight: float = 1e-4,
                 prior_hidden: int = 16) -> None:
        super().__init__()
        self.encoder = DilatedConvEncoder(in_ch, hidden, emb, depth)
        zd = vd = emb
        self.v_mean, self.v_logvar = nn.Linear(emb, vd), nn.Linear(emb, vd)
        self.rnn_xv = nn.LSTM(in_ch + vd, emb, batch_first=True, bidirectional=True)
        self.rnn_z = nn.RNN(2 * emb, emb, batch_first=True)
        self.z_mean, self.z_logvar = nn.Linear(emb, zd), nn.Linear(emb, zd)
        self.rnn_prior = nn.LSTM(zd, prior_hidden, batch_first=True)
        self.prior_mean, self.prior_logvar = nn.Linear(prior_hidden, zd), nn.Linear(prior_hidden, zd)
        self.dec = nn.Sequential(nn.Linear(vd + zd, emb), nn.Tanh(), nn.Linear(emb, emb), nn.Tanh(), nn.Linear(emb, in_ch))
        self.kl_weight = kl_weight
        self.last: dict[str, float] = {}

    def terms(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Reconstruction MSE, KL_z and KL_v of a batch (reparameterised draws from torch's global RNG)."""
        B, T, _ = x.shape
        pooled, _ = self.encoder(x)
        vm, vl = self.v_mean(pooled), self.v_logvar(pooled)
        v = vm + torch.randn_like(vm) * torch.exp(0.5 * vl)
        vt = v[:, None, :].expand(B, T, -1)
        g, _ = self.rnn_xv(torch.cat([x, vt], dim=-1))
        g, _ = self.rnn_z(g)
        zm, zl = self.z_mean(g), self.z_logvar(g)
        z = zm + torch.randn_like(zm) * torch.exp(0.5 * zl)
        z_prev = torch.cat([torch.zeros_like(z[:, :1]), z[:, :-1]], dim=1)
        p, _ = self.rnn_prior(z_prev)
        pm, pl = self.prior_mean(p), self.prior_logvar(p)
        y = self.dec(torch.cat([vt, z], dim=-1))
        return {"mse": F.mse_loss(y, x), "kl_z": kl_gauss(zm, zl, pm, pl),
                "kl_v": kl_gauss(vm, vl, torch.zeros_like(vm), torch.zeros_like(vl))}

    @torch.no_grad()
    def reconstruct_mean(self, x: torch.Tensor) -> torch.Tensor:
        """The decoder's output at the posterior means of v and z_t (no sampling): DSVAE's reconstruction."""
        B, T, _ = x.shape
        pooled, _ = self.encoder(x)
        vt = self.v_mean(pooled)[:, None, :].expand(B, T, -1)
        g, _ = self.rnn_xv(torch.cat([x, vt], dim=-1))
        g, _ = self.rnn_z(g)
        return self.dec(torch.cat([vt, self.z_mean(g)], dim=-1))

    def loss(self, idx: np.ndarray, data: WindowSet, gen: torch.Generator) -> torch.Tensor:
        t = self.terms(torch.as_tensor(data.X[idx]))
        self.last = {k: float(v.detach()) for k, v in t.items()}
        return t["mse"] + self.kl_weight * (t["kl_z"] + t["kl_v"])


class Supervised(nn.Module):
    """The same encoder trained from scratch with a linear head on the labelled windows."""

    def __init__(self, in_ch: int, n_classes: int, hidden: int = 16, emb: int = 32, depth: int = 4) -> None:
        super().__init__()
        self.encoder = DilatedConvEncoder(in_ch, hidden, emb, depth)
        self.head = nn.Linear(emb, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x)[0])

    def loss(self, idx: np.ndarray, data: WindowSet, gen: torch.Generator) -> torch.Tensor:
        return F.cross_entropy(self(torch.as_tensor(data.X[idx])), torch.as_tensor(data.y[idx]))

    @torch.no_grad()
    def predict(self, X: np.ndarray) -> np.ndarray:
        self.eval()
        return self(torch.as_tensor(X)).argmax(1).numpy()
