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
    #: held-out objective at fixed checkpoints: the steps (0 = initialisation) and the loss there
    eval_steps: list[int] = field(default_factory=list)
    eval_losses: list[float] = field(default_factory=list)


def n_steps(n: int, batch_size: int, epochs: int) -> int:
    """Optimizer steps of ``epochs`` passes over ``n`` windows in batches of ``batch_size`` (last batch kept)."""
    return epochs * int(np.ceil(n / batch_size))


EVAL_SEED = 1919


@torch.no_grad()
def eval_loss(model: nn.Module, data: WindowSet, batch_size: int) -> float:
    """The model's own objective on the windows ``data`` (held out), in eval mode (no dropout), in fixed batches
    with fixed draws (starts, partners, augmentations, masks and reparameterisation noise all come from
    :data:`EVAL_SEED`), so two checkpoints differ only by their weights. Leaves torch's global RNG, the
    model's mode and its logged state as they were: evaluating never changes the training run."""
    state, was = torch.random.get_rng_state(), model.training
    last = dict(getattr(model, "last", {}) or {})
    model.eval()
    torch.manual_seed(EVAL_SEED)
    gen = torch.Generator().manual_seed(EVAL_SEED)
    tot, n = 0.0, 0
    for k in range(0, len(data), batch_size):
        idx = np.arange(k, min(k + batch_size, len(data)))
        if len(idx) < 2:
            continue
        tot += float(model.loss(idx, data, gen)) * len(idx)
        n += len(idx)
    torch.random.set_rng_state(state)
    model.train(was)
    if hasattr(model, "last"):
        model.last = last
    return tot / max(n, 1)


def checkpoints(total: int, n: int) -> list[int]:
    """``n + 1`` evenly spaced step counts 0 .. ``total`` (the held-out evaluations of :func:`fit`)."""
    return sorted({int(round(j * total / n)) for j in range(n + 1)})


def fit(model: nn.Module, data: WindowSet, *, epochs: int, batch_size: int, lr: float, seed: int,
        max_steps: int | None = None, eval_data: WindowSet | None = None, n_checkpoints: int = 20) -> TrainLog:
    """Train ``model`` (an ``nn.Module`` with a ``loss`` method) on ``data``; deterministic given ``seed``.

    With ``eval_data`` (held-out windows), the model's objective on them is also measured at ``n_checkpoints``
    + 1 evenly spaced steps (:func:`eval_loss`; the training run is the same with or without it)."""
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
    marks = checkpoints(total, n_checkpoints) if eval_data is not None else []

    def _maybe_eval():
        if step in marks:
            log.eval_steps.append(step)
            log.eval_losses.append(eval_loss(model, eval_data, batch_size))

    _maybe_eval()
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
            _maybe_eval()
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
