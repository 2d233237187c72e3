"""Aligning the generator: ReFL on predicted clean latents with any differentiable reward, and Diffusion-DPO.

ReFL (``flow-grpo-rm/scripts/train_sd3_refl_rm.py``; Xu et al. 2023): for a batch of prompts, integrate without
gradient from noise to a random step j ∈ [0.75 N, N − 1], evaluate the velocity once *with* gradient, read out
ẑ0 = z_{σ_j} − σ_j v, and maximize reward(ẑ0, y) (loss = −reward) with AdamW on the generator, gradient clipping 1.0.
The oracle reward of fresh samples from fixed (prompt, noise) seeds is logged every ``log_every`` steps with the
CPU time spent in optimizer steps (card, Controls and risks: fixed seeds make the curve's crossing step less noisy).
The runs with different rewards are interleaved step by step (:func:`refl_train_interleaved`), and
:func:`time_refl_steps` times repeated executions of single steps, back to back, for control K4b.

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
    cpu_s: list[float] = field(default_factory=list)       # cumulative CPU seconds of optimizer steps (thread time)
    step_cpu: list[float] = field(default_factory=list)    # CPU seconds of each optimizer step (thread time)
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


class ReFLRun:
    """One ReFL run from a copy of ``gen``, stepped from outside so that several runs can be interleaved step by step.

    ``reward_fn(ẑ0, y)`` is differentiable in ẑ0 (a latent RM, decoder + pixel RM, or the oracle). Every run built
    with the same ``seed`` draws the same prompts, noise and ReFL step j at every step (paired). Each optimizer step is
    timed by the CPU time of the calling thread (``time.thread_time``; torch runs on one thread), so time the machine
    spends on other processes is not counted. With ``ev`` given, the oracle reward (and the run's own reward,
    ``rm_eval_fn``, default ``reward_fn``) of the fixed eval samples is logged at step 0 and by :meth:`log`.
    """

    def __init__(self, gen: LatentFlowMLP, reward_fn: Callable, seed: int, batch: int = 32, lr: float = 1e-4,
                 n_sample_steps: int = 20, cfg_scale: float = 1.5, oracle_fn: Callable | None = None,
                 ev: EvalSet | None = None, rm_eval_fn: Callable | None = None) -> None:
        self.reward_fn, self.oracle_fn, self.ev = reward_fn, oracle_fn, ev
        self.rm_eval_fn = rm_eval_fn or reward_fn
        self.g = torch.Generator().manual_seed(seed)
        self.model = copy.deepcopy(gen).train()
        for p in self.model.parameters():
            p.requires_grad_(True)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self.batch, self.n_sample_steps, self.cfg_scale = batch, n_sample_steps, cfg_scale
        self.lo = int(math.ceil(0.75 * n_sample_steps))
        self.hist, self.cpu, self.n = History(), 0.0, 0
        if ev is not None:
            self.log()

    def draw(self) -> tuple[torch.Tensor, torch.Tensor, int]:
        """The next (prompts, noise, ReFL step j) of this run's stream."""
        y = torch.randint(0, 10, (self.batch,), generator=self.g)
        noise = torch.randn(self.batch, self.model.d, generator=self.g)
        j = int(torch.randint(self.lo, self.n_sample_steps, (1,), generator=self.g))
        return y, noise, j

    def step(self, y: torch.Tensor | None = None, noise: torch.Tensor | None = None, j: int | None = None,
             record: bool = True) -> float:
        """One ReFL optimizer step (on the next draw of the run's stream unless given); returns its CPU seconds."""
        if y is None:
            y, noise, j = self.draw()
        t0 = time.thread_time()
        z0_hat, _ = sample(self.model, y, self.n_sample_steps, self.cfg_scale, noise=noise, grad_from_step=j)
        loss = -self.reward_fn(z0_hat, y).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        dt = time.thread_time() - t0
        if record:
            self.n += 1
            self.cpu += dt
            self.hist.step_cpu.append(dt)
        return dt

    def log(self) -> None:
        o, r = evaluate(self.model, self.ev, self.oracle_fn, self.rm_eval_fn, self.n_sample_steps, self.cfg_scale)
        h = self.hist
        h.steps.append(self.n), h.oracle.append(o), h.rm.append(r), h.cpu_s.append(self.cpu)


def refl_train(gen: LatentFlowMLP, reward_fn: Callable, oracle_fn: Callable, ev: EvalSet, steps: int, seed: int,
               batch: int = 32, lr: float = 1e-4, n_sample_steps: int = 20, cfg_scale: float = 1.5,
               log_every: int = 5, rm_eval_fn: Callable | None = None) -> tuple[LatentFlowMLP, History]:
    """One ReFL run on its own (see :class:`ReFLRun`); the run's own reward on the eval samples is logged beside
    the oracle's (C6)."""
    run = ReFLRun(gen, reward_fn, seed, batch, lr, n_sample_steps, cfg_scale, oracle_fn, ev, rm_eval_fn)
    for step in range(1, steps + 1):
        run.step()
        if step % log_every == 0 or step == steps:
            run.log()
    return run.model.eval(), run.hist


def refl_train_interleaved(gen: LatentFlowMLP, rewards: dict[str, tuple[Callable, Callable]], oracle_fn: Callable,
                           ev: EvalSet, steps: int, seed: int, batch: int = 32, lr: float = 1e-4,
                           n_sample_steps: int = 20, cfg_scale: float = 1.5,
                           log_every: int = 5) -> dict[str, tuple[LatentFlowMLP, History]]:
    """ReFL with every reward in ``rewards`` (name -> (train reward, logged reward)), the runs interleaved step by
    step (step s of every run, in an order rotated by one run at each step, before step s + 1 of any): the runs'
    step times are measured side by side under the same machine load. Each run is the same as on its own."""
    runs = {k: ReFLRun(gen, fn, seed, batch, lr, n_sample_steps, cfg_scale, oracle_fn, ev, ev_fn)
            for k, (fn, ev_fn) in rewards.items()}
    names = list(runs)
    for step in range(1, steps + 1):
        r = step % len(names)
        for k in names[r:] + names[:r]:
            runs[k].step()
        if step % log_every == 0 or step == steps:
            for run in runs.values():
                run.log()
    return {k: (run.model.eval(), run.hist) for k, run in runs.items()}


def time_refl_steps(gen: LatentFlowMLP, rewards: dict[str, Callable], n_steps: int, repeats: int, seed: int,
                    batch: int = 32, lr: float = 1e-4, n_sample_steps: int = 20, cfg_scale: float = 1.5,
                    warmup: int = 3) -> dict[str, np.ndarray]:
    """CPU time of ReFL steps with each reward, step by step (card K4b).

    For each of ``warmup + n_steps`` draws (prompts, noise, ReFL step j), every reward's run executes that same
    full ReFL optimizer step ``repeats`` times, the rewards back to back (ABAB…, the order flipped at each repeat).
    Returns name -> [n_steps, repeats] thread CPU seconds (the ``warmup`` draws dropped). Back-to-back executions
    share the machine's load of the moment; :func:`step_differences` pairs them.
    """
    runs = {k: ReFLRun(gen, fn, seed, batch, lr, n_sample_steps, cfg_scale) for k, fn in rewards.items()}
    names = list(runs)
    out = {k: [] for k in names}
    for i in range(warmup + n_steps):
        y, noise, j = runs[names[0]].draw()             # the runs share one seed: this is every run's draw
        cur = {k: [] for k in names}
        for rep in range(repeats):
            for k in (names if (i + rep) % 2 == 0 else names[::-1]):
                cur[k].append(runs[k].step(y, noise, j, record=False))
        if i >= warmup:
            for k in names:
                out[k].append(cur[k])
    return {k: np.asarray(v, float).reshape(n_steps, repeats) for k, v in out.items()}


def step_differences(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-step paired differences b − a of :func:`time_refl_steps` arrays [steps, repeats]: for each step the
    median over its repeats of the back-to-back differences (one number per step)."""
    return np.median(np.asarray(b, float) - np.asarray(a, float), axis=1)


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
        t0 = time.thread_time()
        idx = torch.randint(0, len(pairs), (batch,), generator=g)
        t = torch.rand(batch, generator=g)
        eps = torch.randn(batch, model.d, generator=g)
        loss, _ = dpo_loss(model, ref, z_w[idx], z_l[idx], pairs.y[idx], t, eps, beta)
        opt.zero_grad(set_to_none=True)
        loss.mean().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.thread_time() - t0
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
