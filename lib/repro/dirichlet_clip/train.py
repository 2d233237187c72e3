"""Adversarial fine-tuning (AFT) of the toy CLIP's image tower: one loop, six objectives.

Mirrors the UCAT repository's ``train`` (``main.py``): per batch, PGD against the *current* model builds
x + δ (‖δ‖∞ ≤ ε_train, step = ε_train, uniform random start), then the method's loss is minimised with
respect to the image encoder only; the text tower and the logit scale s stay frozen (the paper fine-tunes
``model.visual``; a drifting s would change calibration by itself). The frozen pre-trained model θ0 gives
the anchors of UCAT, PMG-AFT, FARE and the softmax-KL ablation.

Optimiser: Adam with cosine decay to zero and no warm-up, the same for every method (the repo's SGD with
1,000 warm-up steps does not fit a 300-step toy run; card, "Setting").

Common random numbers: the batch order comes from its own generator (:func:`batch_plan`), the training
attack's random starts from another, and the caller hands every method generators built from the same key,
so all methods see the same batches and the same PGD starts; UCAT with τ_rob = 0 then reproduces TeCoA bit for bit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from . import losses as L
from .attacks import pgd_ce, pgd_embedding
from .model import ToyCLIP, frozen_copy

AFT_METHODS = ("clean_ft", "tecoa", "pmg_aft", "fare", "ucat", "softmax_kl")
AFT_BATCH = 128


@dataclass
class FinetuneLog:
    """Per-step training record: the data term (CE; NaN for FARE) and the regulariser, separately."""

    method: str
    ce: np.ndarray
    reg: np.ndarray
    lam: float  # λ of UCAT (0 otherwise)


def batch_plan(n: int, steps: int, batch: int, generator: torch.Generator) -> list[torch.Tensor]:
    """Indices of each step's batch: a fresh permutation per epoch, last partial batch dropped."""
    plan, order, pos = [], torch.randperm(n, generator=generator), 0
    for _ in range(steps):
        if pos + batch > n:
            order, pos = torch.randperm(n, generator=generator), 0
        plan.append(order[pos:pos + batch])
        pos += batch
    return plan


def adversarial_finetune(clip: ToyCLIP, method: str, x: torch.Tensor, y: torch.Tensor, G: torch.Tensor, *,
                         steps: int, lr: float, eps: float, pgd_steps: int, tau: float, tau_rob: float,
                         generator: torch.Generator, batch_generator: torch.Generator | None = None
                         ) -> tuple[ToyCLIP, FinetuneLog]:
    """Fine-tune a copy of ``clip``'s image encoder with ``method`` on (x, y) with class-prompt features G.

    ``batch_generator`` draws the batch order (:func:`batch_plan`) and ``generator`` the training PGD's random
    starts; pass generators seeded alike to every method for common random numbers. Without
    ``batch_generator`` the batch order comes from ``generator`` too (drawn up front).
    """
    if method not in AFT_METHODS:
        raise ValueError(f"unknown fine-tuning method {method!r}; known: {', '.join(AFT_METHODS)}")
    model0 = frozen_copy(clip)
    model = frozen_copy(clip)
    for p in model.image_enc.parameters():
        p.requires_grad_(True)
    opt = torch.optim.Adam(model.image_enc.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.5 * (1 + math.cos(math.pi * t / steps)))
    lam = L.ucat_lambda(tau, tau_rob) if method == "ucat" else 0.0
    ce_log, reg_log = np.zeros(steps), np.zeros(steps)
    plan = batch_plan(len(y), steps, AFT_BATCH, batch_generator if batch_generator is not None else generator)
    for step, idx in enumerate(plan):
        xb, yb = x[idx], y[idx]
        if method == "clean_ft":
            loss = L.tecoa_loss(model.logits(xb, G), yb)
            parts = {"ce": loss.item(), "reg": 0.0}
        elif method == "fare":
            x_adv = pgd_embedding(model, model0, xb, eps=eps, steps=pgd_steps, step_size=eps, generator=generator)
            with torch.no_grad():
                emb0 = model0.embed(xb)
            loss, parts = L.fare_loss(model.embed(x_adv), emb0)
        else:
            x_adv = pgd_ce(model, xb, yb, G, eps=eps, steps=pgd_steps, step_size=eps, generator=generator)
            cos_adv = model.cos(x_adv, G)
            logits_adv = model.scale * cos_adv
            if method == "tecoa":
                loss = L.tecoa_loss(logits_adv, yb)
                parts = {"ce": loss.item(), "reg": 0.0}
            elif method == "ucat":
                with torch.no_grad():
                    cos0 = model0.cos(xb, G)
                loss, parts = L.ucat_loss(logits_adv, yb, cos_adv, cos0, tau=tau, lam=lam)
            elif method == "softmax_kl":
                with torch.no_grad():
                    logits0 = model0.logits(xb, G)
                loss, parts = L.softmax_kl_loss(logits_adv, yb, logits0)
            else:  # pmg_aft
                with torch.no_grad():
                    cos0_adv = model0.cos(x_adv, G)
                loss, parts = L.pmg_aft_loss(logits_adv, yb, cos_adv, model.cos(xb, G), cos0_adv)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        ce_log[step], reg_log[step] = parts["ce"], parts["reg"]
    for p in model.parameters():
        p.requires_grad_(False)
    return model, FinetuneLog(method, ce_log, reg_log, lam)
