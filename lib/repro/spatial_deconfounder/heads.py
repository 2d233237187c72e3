"""Stage 2: a flexible outcome model h(A_s, A_N(s), X, Ẑ) on radius-r_out patches and its plug-in effects
(card, Method 7-8; a small patch CNN stands in for the official U-Net head).

Direct effect = mean_s[ĥ(centre = 1) − ĥ(centre = 0)], spillover = mean_s[ĥ(all neighbours = 1) −
ĥ(all = 0)], everything else factual. Ẑ (or U for the oracle) is a *fixed* input: it stands for a
pre-treatment confounder, so it is never recomputed from counterfactual treatments.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .data import SpatialData
from .patches import extract_patches, override


class PatchHead(nn.Module):
    """conv3×3(n_in→w) → ReLU → conv3×3(w→w) → ReLU → mean-pool → Linear(w→1), plus (``skip``) a linear map
    of the flattened patch. The skip is our addition: with it the linear part of h (own and neighbours'
    treatments, which a mean-pooled CNN must otherwise tell apart through its padding) is learned in a few
    epochs, and the CNN fits what is left (control K1 measures the head's bias when U is given)."""

    def __init__(self, n_in: int, width: int = 32, patch: int = 3, skip: bool = True) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(n_in, width, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(width, width, 3, padding=1), nn.ReLU())
        self.out = nn.Linear(width, 1)
        self.skip = nn.Linear(n_in * patch * patch, 1) if skip else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.out(self.net(x).mean((2, 3))).squeeze(1)
        if self.skip is not None:
            y = y + self.skip(x.flatten(1)).squeeze(1)
        return y


def head_inputs(data: SpatialData, Z: np.ndarray | None, radius: int = 1) -> np.ndarray:
    """[N, p, p, 3 + k] patches of (A with the centre included, X1, X2) with the k columns of ``Z``
    broadcast over the patch (channels last, so ``patches.override`` applies to channel 0 = A)."""
    base = extract_patches(np.concatenate([data.A[..., None], data.X], -1), radius, data.idx)
    if Z is None:
        return base
    z = np.broadcast_to(Z[:, None, None, :], base.shape[:3] + (Z.shape[1],))
    return np.concatenate([base, z], -1)


@dataclass
class HeadFit:
    model: PatchHead
    mean: np.ndarray
    sd: np.ndarray
    y_mean: float
    y_sd: float
    radius: int
    history: list

    def predict(self, patches: np.ndarray) -> np.ndarray:
        """ĥ on channels-last patches, in the units of Y."""
        x = torch.from_numpy(((patches - self.mean) / self.sd).transpose(0, 3, 1, 2).astype(np.float32))
        with torch.no_grad():
            return self.model(x).numpy().astype(float) * self.y_sd + self.y_mean


def fit_head(data: SpatialData, Z: np.ndarray | None = None, radius: int = 1, epochs: int = 30, seed: int = 0,
             width: int = 32, batch: int = 64, lr: float = 1e-3, weight_decay: float = 1e-5,
             skip: bool = True) -> HeadFit:
    """Fit h by MSE on all evaluated units (AdamW, cosine schedule). Inputs and Y are standardized; the
    binary treatment channel is left as is."""
    pt = head_inputs(data, Z, radius)
    mean = pt.reshape(-1, pt.shape[-1]).mean(0)
    sd = pt.reshape(-1, pt.shape[-1]).std(0) + 1e-8
    mean[0], sd[0] = 0.0, 1.0                                  # A stays binary
    y = data.at(data.Y)
    y_mean, y_sd = float(y.mean()), float(y.std())
    x = torch.from_numpy(((pt - mean) / sd).transpose(0, 3, 1, 2).astype(np.float32))
    t = torch.from_numpy(((y - y_mean) / y_sd).astype(np.float32))
    torch.manual_seed(seed)
    model = PatchHead(pt.shape[-1], width, 2 * radius + 1, skip)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    steps = epochs * math.ceil(len(t) / batch)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    gen = torch.Generator().manual_seed(seed)
    hist = []
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(len(t), generator=gen)
        tot = 0.0
        for i in range(0, len(t), batch):
            b = perm[i:i + batch]
            loss = nn.functional.mse_loss(model(x[b]), t[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            tot += float(loss.detach()) * b.numel()
        hist.append(tot / len(t))
    model.eval()
    return HeadFit(model, mean, sd, y_mean, y_sd, radius, hist)


def plugin_effects(predict, patches: np.ndarray, radius: int = 1) -> dict[str, float]:
    """Plug-in direct and spillover effects of an outcome model ``predict`` (channels-last patches -> Y),
    overriding channel 0 (the treatment) only."""
    direct = predict(override(patches, "center", 1.0)) - predict(override(patches, "center", 0.0))
    spill = (predict(override(patches, "nbr", 1.0, radius=radius))
             - predict(override(patches, "nbr", 0.0, radius=radius)))
    return {"direct": float(direct.mean()), "spill": float(spill.mean())}


def head_effects(data: SpatialData, Z: np.ndarray | None, radius: int = 1, epochs: int = 30,
                 seed: int = 0, **kw) -> dict[str, float]:
    """Fit the head and return its plug-in effects (and its training MSE, standardized)."""
    fit = fit_head(data, Z, radius, epochs, seed, **kw)
    eff = plugin_effects(fit.predict, head_inputs(data, Z, radius), radius)
    eff["train_mse"] = fit.history[-1]
    return eff
