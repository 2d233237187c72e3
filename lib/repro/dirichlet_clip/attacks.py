"""L∞ projected gradient descent (Madry et al. 2018) as the UCAT repository uses it (``attacks.py``: uniform
random start in the ε-ball, signed-gradient ascent steps, projection onto the ball and onto the image box).

Three adversaries: :func:`pgd_ce` raises the zero-shot cross-entropy (TeCoA, UCAT, PMG-AFT training and every
evaluation), :func:`pgd_embedding` pushes the image embedding away from the frozen model's clean one (FARE's
inner maximisation), and :func:`pgd_ce_restarts` keeps, per example, the worst of several random starts (the
gradient-masking check). Perturbations are in pixel units of [0, 1].
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F


def pgd_linf(loss_fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, eps: float, steps: int,
             step_size: float, *, rand_init: bool = True, clip: tuple[float, float] = (0.0, 1.0),
             generator: torch.Generator | None = None) -> torch.Tensor:
    """Maximise ``loss_fn(x + δ)`` over ‖δ‖∞ ≤ ``eps`` with ``x + δ`` in ``clip``; returns ``x + δ`` (detached).

    ``loss_fn`` must return a scalar that is a *sum* over the batch, so every example gets its own gradient.
    δ₀ ~ U[−ε, ε] when ``rand_init``; then δ ← Π(δ + step_size · sign ∇_δ loss). Only δ is differentiated:
    model parameters receive no gradient.
    """
    x = x.detach()
    lo, hi = clip
    if eps <= 0 or steps <= 0:
        return x.clone()
    if rand_init:
        delta = (torch.rand(x.shape, generator=generator, dtype=x.dtype) * 2 - 1) * eps
    else:
        delta = torch.zeros_like(x)
    delta = (x + delta).clamp(lo, hi) - x
    for _ in range(steps):
        delta.requires_grad_(True)
        loss = loss_fn(x + delta)
        (grad,) = torch.autograd.grad(loss, delta)
        with torch.no_grad():
            delta = (delta + step_size * grad.sign()).clamp(-eps, eps)
            delta = (x + delta).clamp(lo, hi) - x
    return (x + delta).detach()


def pgd_ce(model, x: torch.Tensor, y: torch.Tensor, G: torch.Tensor, *, eps: float, steps: int,
           step_size: float, rand_init: bool = True, generator: torch.Generator | None = None) -> torch.Tensor:
    """Untargeted PGD on CE(s · cos(x + δ, G), y): the adversary of TeCoA/UCAT training and of evaluation."""
    return pgd_linf(lambda z: F.cross_entropy(model.logits(z, G), y, reduction="sum"), x, eps, steps, step_size,
                    rand_init=rand_init, generator=generator)


def pgd_embedding(model, model0, x: torch.Tensor, *, eps: float, steps: int, step_size: float,
                  rand_init: bool = True, generator: torch.Generator | None = None) -> torch.Tensor:
    """FARE's adversary: maximise ‖φ_θ(x + δ) − φ_θ0(x)‖²₂ (unnormalised embeddings; needs no labels).

    While θ = θ0 (the first fine-tuning step) the objective's gradient at δ = 0 is exactly zero, so the
    random start is what gets this attack going.
    """
    with torch.no_grad():
        target = model0.embed(x)
    return pgd_linf(lambda z: ((model.embed(z) - target) ** 2).sum(), x, eps, steps, step_size,
                    rand_init=rand_init, generator=generator)


def pgd_ce_restarts(model, x: torch.Tensor, y: torch.Tensor, G: torch.Tensor, *, eps: float, steps: int,
                    step_size: float, restarts: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Per-example robustness under ``restarts`` random starts: True where every start leaves x classified right."""
    robust = torch.ones(len(y), dtype=torch.bool)
    for _ in range(restarts):
        x_adv = pgd_ce(model, x, y, G, eps=eps, steps=steps, step_size=step_size, generator=generator)
        with torch.no_grad():
            robust &= model.logits(x_adv, G).argmax(1) == y
    return robust
