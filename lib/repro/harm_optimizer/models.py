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


def conv_length(length: int, kernel: int = 5) -> int:
    """Length after CNN1D's three convolutions (padding kernel // 2; strides 1, 2, 2)."""
    pad = kernel // 2
    for stride in (1, 2, 2):
        length = (length + 2 * pad - kernel) // stride + 1
    return length


class CNN1D(nn.Module):
    """MNIST-1D: three Conv1d layers (``channels`` channels, kernel 5, padding 2, GELU; the second and third
    with stride 2) and a linear head on

    * ``head="flatten"`` (default): the flattened last feature map, ``channels`` × ``conv_length(length)``
      features, as in the reference MNIST-1D CNN (Greydanus 2020); 32 channels, length 40: ≈ 14 k parameters;
    * ``head="mean"`` (the card's first sketch): the global mean over positions, ``channels`` features, ≈ 11 k.

    Why flatten: at initialisation the mean-pooled features of different sequences are nearly the same vector
    (median cosine ≈ 0.996 on a batch), so every last-layer per-sample gradient e_i h̄_iᵀ is ≈ e_i h̄ᵀ: the
    last-layer proxy can see nothing but e_i, and the only head step that harms no sample to first order is
    (nearly) none. The flattened map keeps where along the sequence a feature fired (cosine ≈ 0.8)."""

    def __init__(self, channels: int = 32, n_classes: int = 10, kernel: int = 5, length: int = 40,
                 head: str = "flatten") -> None:
        super().__init__()
        if head not in ("flatten", "mean"):
            raise ValueError(f"head must be 'flatten' or 'mean'; got {head!r}")
        self.pool = head
        self.conv1 = nn.Conv1d(1, channels, kernel, padding=kernel // 2)
        self.conv2 = nn.Conv1d(channels, channels, kernel, stride=2, padding=kernel // 2)
        self.conv3 = nn.Conv1d(channels, channels, kernel, stride=2, padding=kernel // 2)
        d_h = channels * conv_length(length, kernel) if head == "flatten" else channels
        self.head = nn.Linear(d_h, n_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.conv1(x))
        h = F.gelu(self.conv2(h))
        h = F.gelu(self.conv3(h))
        return h.flatten(1) if self.pool == "flatten" else h.mean(-1)

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


def build_model(dataset: str, seed: int, width: int = 256, channels: int = 32, d_in: int | None = None,
                cnn_head: str = "flatten", length: int = 40) -> nn.Module:
    """The chapter's model for ``dataset``, initialised from ``torch.Generator`` seeded by ``seed`` (every
    optimizer of a seed starts from the same weights)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        if dataset == "mnist1d":
            return CNN1D(channels, length=length, head=cnn_head)
        if dataset == "digits":
            return MLP(d_in or 64, width)
    raise ValueError(f"unknown dataset {dataset!r}")


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
