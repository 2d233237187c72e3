"""Aligning the generator: ReFL on predicted clean latents with any differentiable reward, and Diffusion-DPO.

ReFL (``flow-grpo-rm/scripts/train_sd3_refl_rm.py``; Xu et al. 2023): for a batch of prompts, integrate without
gradient from noise to a random step j ∈ [0.75 N, N − 1], evaluate the velocity once *with* gradient, read out
ẑ0 = z_{σ_j} − σ_j v, and maximize reward(ẑ0, y) (loss = −reward) with AdamW on the generator, gradient clipping 1.0.
The oracle reward of fresh samples from fixed (prompt, noise) seeds is logged every ``log_every`` steps with the
CPU time spent in optimizer steps (card, Controls and risks: fixed seeds make the curve's crossing step less noisy).

Diffusion-DPO (Wallace et al. 2024) in flow-matching form: one t and one ε shared by the pair,
e(θ) = mean_d ‖(ε − z) − v_θ(z_t, t, y)‖², L = −log σ(−½ β [(e_w(θ) − e_w(ref)) − (e_l(θ) − e_l(ref))]).
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
from torch.nn import functional as F

from .flow import LatentFlowMLP, noise_latent, sample


@dataclass
class History:
    """Logged curve of one alignment run."""

    steps: list[int] = field(default_factory=list)
    oracle: list[float] = field(default_factory=list)      # mean oracle reward on the fixed eval set
    rm: list[float] = field(default_factory=list)          # mean reward of the run's own RM on the same samples
    cpu_s: list[float] = field(default_factory=list)       # cumulative CPU seconds of optimizer steps
    step_cpu: list[float] = field(default_factory=list)    # CPU seconds of each optimizer step
    extra: dict = field(default_factory=dict)

    def as_arrays(self) -> dict[str, np.ndarray]:
        return {k: np.asarray(getattr(self, k), float) for k in ("steps", "oracle", "rm", "cpu_s")}


@dataclass
class EvalSet:
    """Fixed (prompt, noise) seeds on which every alignment run is logged (the same for all runs: paired)."""

    y: torch.Tensor
    noise: torch.Tensor

    @classmethod
    def make(cls, n: int, d: int, seed: int) -> "EvalSet":
        g = torch.Generator().manual_seed(seed)
        return cls(torch.arange(n) % 10, torch.randn(n, d, generator=g))


def evaluate(gen: LatentFlowMLP, ev: EvalSet, oracle_fn: Callable, rm_fn: Callable | None, steps: int,
             cfg_scale: float) -> tuple[float, float]:
    """Mean oracle reward (and RM reward) of samples from the fixed seeds."""
    with torch.no_grad():
        z0 = sample(gen, ev.y, steps, cfg_scale, noise=ev.noise)[0]
        o = float(oracle_fn(z0, ev.y).mean())
        r = float(rm_fn(z0, ev.y).mean()) if rm_fn is not None else math.nan
    return o, r


def refl_train(gen: LatentFlowMLP, reward_fn: Callable, oracle_fn: Callable, ev: EvalSet, steps: int, seed: int,
               batch: int = 32, lr: float = 1e-4, n_sample_steps: int = 20, cfg_scale: float = 1.5,
               log_every: int = 5, rm_eval_fn: Callable | None = None) -> tuple[LatentFlowMLP, History]:
    """ReFL from a copy of ``gen``; ``reward_fn(ẑ0, y)`` is differentiable in ẑ0 (a latent RM, decoder + pixel RM,
    or the oracle). The run's own reward (``rm_eval_fn``, default ``reward_fn``) on the eval samples is logged
    beside the oracle's (C6)."""
    rm_eval_fn = rm_eval_fn or reward_fn
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model = copy.deepcopy(gen).train()
    for p in model.parameters():
        p.requires_grad_(True)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    hist = History()
    cpu = 0.0
    lo = int(math.ceil(0.75 * n_sample_steps))

    def log(step: int) -> None:
        o, r = evaluate(model, ev, oracle_fn, rm_eval_fn, n_sample_steps, cfg_scale)
        hist.steps.append(step), hist.oracle.append(o), hist.rm.append(r), hist.cpu_s.append(cpu)

    log(0)
    for step in range(1, steps + 1):
        t0 = time.process_time()
        y = torch.randint(0, 10, (batch,), generator=g)
        noise = torch.randn(batch, model.d, generator=g)
        j = int(torch.randint(lo, n_sample_steps, (1,), generator=g))
        z0_hat, _ = sample(model, y, n_sample_steps, cfg_scale, noise=noise, grad_from_step=j)
        loss = -reward_fn(z0_hat, y).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.process_time() - t0
        cpu += dt
        hist.step_cpu.append(dt)
        if step % log_every == 0 or step == steps:
            log(step)
    return model.eval(), hist


def dpo_errors(model: LatentFlowMLP, z: torch.Tensor, y: torch.Tensor, t: torch.Tensor,
               eps: torch.Tensor) -> torch.Tensor:
    """e(θ) = mean over latent dims of ‖(ε − z) − v_θ(z_t, t, y)‖² per item."""
    zt = noise_latent(z, t, eps)
    return ((eps - z) - model(zt, t, y)).pow(2).mean(1)


def dpo_loss(model: LatentFlowMLP, ref: LatentFlowMLP, z_w: torch.Tensor, z_l: torch.Tensor, y: torch.Tensor,
             t: torch.Tensor, eps: torch.Tensor, beta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Diffusion-DPO loss per pair (one t and ε shared by the pair) and the implicit margin."""
    with torch.no_grad():
        ew_ref, el_ref = dpo_errors(ref, z_w, y, t, eps), dpo_errors(ref, z_l, y, t, eps)
    ew, el = dpo_errors(model, z_w, y, t, eps), dpo_errors(model, z_l, y, t, eps)
    margin = -0.5 * beta * ((ew - ew_ref) - (el - el_ref))
    return F.softplus(-margin), margin


def diffusion_dpo_train(gen: LatentFlowMLP, pairs, beta: float, steps: int, seed: int, oracle_fn: Callable,
                        ev: EvalSet, batch: int = 64, lr: float = 1e-4, n_sample_steps: int = 20,
                        cfg_scale: float = 1.5, log_every: int = 10) -> tuple[LatentFlowMLP, History]:
    """Diffusion-DPO on the oracle-labelled pairs, frozen reference = the base generator."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    ref = copy.deepcopy(gen).eval()
    model = copy.deepcopy(gen).train()
    for p in model.parameters():
        p.requires_grad_(True)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    hist, cpu = History(), 0.0
    win_a = pairs.label > 0.5
    z_w = torch.where(win_a[:, None], pairs.z_a, pairs.z_b)
    z_l = torch.where(win_a[:, None], pairs.z_b, pairs.z_a)

    def log(step: int) -> None:
        o, _ = evaluate(model, ev, oracle_fn, None, n_sample_steps, cfg_scale)
        hist.steps.append(step), hist.oracle.append(o), hist.rm.append(math.nan), hist.cpu_s.append(cpu)

    log(0)
    for step in range(1, steps + 1):
        t0 = time.process_time()
        idx = torch.randint(0, len(pairs), (batch,), generator=g)
        t = torch.rand(batch, generator=g)
        eps = torch.randn(batch, model.d, generator=g)
        loss, _ = dpo_loss(model, ref, z_w[idx], z_l[idx], pairs.y[idx], t, eps, beta)
        opt.zero_grad(set_to_none=True)
        loss.mean().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.process_time() - t0
        cpu += dt
        hist.step_cpu.append(dt)
        if step % log_every == 0 or step == steps:
            log(step)
    return model.eval(), hist


def dpo_implicit_accuracy(model: LatentFlowMLP, ref: LatentFlowMLP, pairs, seed: int, n_draws: int = 4) -> float:
    """Held-out implicit accuracy: the fraction of pairs whose DPO margin, averaged over ``n_draws`` (t, ε),
    prefers the labelled winner (ties ½)."""
    g = torch.Generator().manual_seed(seed)
    win_a = pairs.label > 0.5
    z_w = torch.where(win_a[:, None], pairs.z_a, pairs.z_b)
    z_l = torch.where(win_a[:, None], pairs.z_b, pairs.z_a)
    n = len(pairs)
    m = torch.zeros(n)
    with torch.no_grad():
        for _ in range(n_draws):
            t = torch.rand(n, generator=g)
            eps = torch.randn(n, model.d, generator=g)
            m += dpo_loss(model, ref, z_w, z_l, pairs.y, t, eps, 1.0)[1]
    return float(torch.where(m == 0, torch.full_like(m, 0.5), (m > 0).float()).mean())


def crossing_step(steps: np.ndarray, values: np.ndarray, target: float) -> float:
    """The first step at which the curve reaches ``target`` (linear interpolation between logged points;
    NaN if never reached)."""
    steps, values = np.asarray(steps, float), np.asarray(values, float)
    for i in range(len(values)):
        if values[i] >= target:
            if i == 0:
                return float(steps[0])
            v0, v1 = values[i - 1], values[i]
            return float(steps[i - 1] + (target - v0) / (v1 - v0) * (steps[i] - steps[i - 1]))
    return math.nan


def value_at(xs: np.ndarray, values: np.ndarray, x: float) -> float:
    """The curve's value at x (linear interpolation; the last value beyond the end)."""
    return float(np.interp(x, np.asarray(xs, float), np.asarray(values, float)))
