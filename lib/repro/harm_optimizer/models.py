"""The two small models of chapter 09. Both expose ``features(x) -> h`` (penultimate features) and ``head``
(the last ``nn.Linear``), which is all the last-layer proxy needs: a per-sample gradient of the head is the
outer product e_i h̄_iᵀ with e_i = ∂ℓ_i/∂logits and h̄_i = [h_i, 1] (card, *Method*).

No BatchNorm (harm is measured by re-evaluating the same batch after the step) and no in-place operations
(per-sample gradients use ``torch.func.vmap``).
"""
from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F


class CNN1D(nn.Module):
    """MNIST-1D: three Conv1d layers (``channels`` channels, kernel 5, padding 2, GELU; the second and third
    with stride 2), global mean pool, linear head. 32 channels: ≈ 11 k parameters."""

    def __init__(self, channels: int = 32, n_classes: int = 10, kernel: int = 5) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(1, channels, kernel, padding=kernel // 2)
        self.conv2 = nn.Conv1d(channels, channels, kernel, stride=2, padding=kernel // 2)
        self.conv3 = nn.Conv1d(channels, channels, kernel, stride=2, padding=kernel // 2)
        self.head = nn.Linear(channels, n_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.conv1(x))
        h = F.gelu(self.conv2(h))
        h = F.gelu(self.conv3(h))
        return h.mean(-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class MLP(nn.Module):
    """Digits: 64 → width → width → 10 with GELU (width 256: ≈ 85 k parameters)."""

    def __init__(self, d_in: int = 64, width: int = 256, n_classes: int = 10) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, width)
        self.fc2 = nn.Linear(width, width)
        self.head = nn.Linear(width, n_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc2(F.gelu(self.fc1(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def build_model(dataset: str, seed: int, width: int = 256, channels: int = 32, d_in: int | None = None) -> nn.Module:
    """The chapter's model for ``dataset``, initialised from ``torch.Generator`` seeded by ``seed`` (every
    optimizer of a seed starts from the same weights)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        if dataset == "mnist1d":
            return CNN1D(channels)
        if dataset == "digits":
            return MLP(d_in or 64, width)
    raise ValueError(f"unknown dataset {dataset!r}")


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
