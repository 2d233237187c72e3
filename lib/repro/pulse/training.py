"""One training loop for every self-supervised method of chapter 19, plus embedding and caching helpers.

As in the official ``trainers/base.py``: AdamW (weight decay 1e-5) with a one-cycle schedule to ``lr``,
gradient values clipped to 5, shuffled mini-batches. Each method implements ``loss(idx, data, gen)``:
the loss of the windows ``data.X[idx]`` (partners and augmentations drawn from the torch Generator ``gen``).
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
import torch.nn as nn

from .generators import WindowSet


class SSLMethod(Protocol):
    encoder: nn.Module

    def loss(self, idx: np.ndarray, data: WindowSet, gen: torch.Generator) -> torch.Tensor: ...


@dataclass
class TrainLog:
    """Per-step losses of one training run and its CPU time."""

    losses: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    steps: int = 0
    extra: dict = field(default_factory=dict)


def n_steps(n: int, batch_size: int, epochs: int) -> int:
    """Optimizer steps of ``epochs`` passes over ``n`` windows in batches of ``batch_size`` (last batch kept)."""
    return epochs * int(np.ceil(n / batch_size))


def fit(model: nn.Module, data: WindowSet, *, epochs: int, batch_size: int, lr: float, seed: int,
        max_steps: int | None = None) -> TrainLog:
    """Train ``model`` (an ``nn.Module`` with a ``loss`` method) on ``data``; deterministic given ``seed``."""
    import time

    torch.manual_seed(seed)  # dropout and reparameterisation draws
    gen = torch.Generator().manual_seed(seed)
    total = n_steps(len(data), batch_size, epochs)
    if max_steps is not None:
        total = min(total, max_steps)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-5)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(total, 2))
    log = TrainLog()
    t0 = time.process_time()
    model.train()
    step = 0
    while step < total:
        perm = torch.randperm(len(data), generator=gen).numpy()
        for k in range(0, len(perm), batch_size):
            if step >= total:
                break
            idx = perm[k:k + batch_size]
            opt.zero_grad()
            loss = model.loss(idx, data, gen)
            loss.backward()
            torch.nn.utils.clip_grad_value_(model.parameters(), 5.0)
            opt.step()
            sched.step()
            log.losses.append(float(loss.detach()))
            step += 1
    model.eval()
    log.steps = step
    log.cpu_s = time.process_time() - t0
    return log


@torch.no_grad()
def embed(encoder: nn.Module, X: np.ndarray, batch: int = 512) -> np.ndarray:
    """Pooled embeddings c = max_t LayerNorm(E(x)) of windows ``X`` (N, T, C), encoder in eval mode."""
    was = encoder.training
    encoder.eval()
    out = [encoder(torch.as_tensor(X[i:i + batch]))[0].numpy() for i in range(0, len(X), batch)]
    encoder.train(was)
    return np.concatenate(out).astype(np.float64)


TRAINING_SOURCES = ("generators.py", "encoders.py", "pulse.py", "baselines.py", "training.py", "_kernels.cpp")


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """Hash of the source files that decide what a model learns (data, models, loop): a cached model is reused
    only with the code that trained it. Computed once per process."""
    h = hashlib.sha256()
    for name in TRAINING_SOURCES:
        p = Path(__file__).parent / name
        h.update(name.encode())
        h.update(p.read_bytes() if p.exists() else b"")
    return h.hexdigest()[:16]


def cache_key(**parts) -> str:
    """A short stable hash of JSON-able ``parts`` and the package source."""
    blob = json.dumps(parts, sort_keys=True, default=str) + source_hash()
    return hashlib.sha256(blob.encode()).hexdigest()[:20]
