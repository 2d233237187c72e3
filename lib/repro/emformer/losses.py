"""The composite loss of EMFormer (paper §3.3; official ``networks/l2_loss.py`` and the sinusoidal weight in
``networks/EMFormer.py``):

    L = (1 − w) L_gen + w L_rmse,       w = (sin θ + 1) / 2,
    L_gen  = mean_c [ MSE_c / exp(s_c) + s_c ]           (learned per-channel log-variance s_c, init 0)
    L_rmse = mean_c sqrt( mean_{lat,lon} w_lat (ŷ − y)² ) (latitude-weighted RMSE, w_lat = cos lat / mean)

θ is learnable, initialised at −1.5708 (w ≈ 0). ``dL/dθ = ½ cos θ (L_rmse − L_gen)`` vanishes at −π/2 (card,
Pitfalls), so w barely moves; ``mode="scheduled"`` replaces it by w_t = (sin(π t/T − π/2) + 1)/2, ``"fixed"`` by
w = 0.5, ``"w0"`` fixes w ≡ 0 but keeps the learned s_c (L = L_gen: the ablation that isolates the sinusoidal
weight, claim C5), ``"mse"`` is the plain MSE baseline.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

MODES = ("learned", "scheduled", "fixed", "w0", "mse")


class CompositeLoss(nn.Module):
    def __init__(self, n_ch: int, lat_w: np.ndarray | torch.Tensor, theta0: float = -1.5708, mode: str = "learned"):
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.s = nn.Parameter(torch.zeros(n_ch))
        self.theta = nn.Parameter(torch.tensor(float(theta0)))
        if mode != "learned":
            self.theta.requires_grad_(False)
        if mode == "mse":
            self.s.requires_grad_(False)
        self.register_buffer("lat_w", torch.as_tensor(np.asarray(lat_w), dtype=torch.float32).reshape(1, 1, -1, 1))
        self.progress = 0.0          # t / T, set by the training loop (scheduled mode)

    @property
    def w(self) -> torch.Tensor:
        if self.mode == "learned":
            return (torch.sin(self.theta) + 1) / 2
        if self.mode == "scheduled":
            return torch.tensor((math.sin(math.pi * self.progress - math.pi / 2) + 1) / 2)
        if self.mode == "fixed":
            return torch.tensor(0.5)
        return torch.tensor(0.0)                     # "w0" and "mse"

    def parts(self, pred: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(L_gen, L_rmse)."""
        err2 = (pred - y) ** 2
        mse_c = err2.mean(dim=(0, 2, 3))
        l_gen = (mse_c * torch.exp(-self.s) + self.s).mean()
        l_rmse = torch.sqrt((err2 * self.lat_w).mean(dim=(2, 3)) + 1e-12).mean(0).mean()
        return l_gen, l_rmse

    def forward(self, pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.mode == "mse":
            return ((pred - y) ** 2).mean()
        l_gen, l_rmse = self.parts(pred, y)
        w = self.w
        return (1 - w) * l_gen + w * l_rmse
