"""Evaluation of chapter 12: held-out accuracy (greedy, sampled, per loop, by depth, task B), the exit
distribution, and the gradient signal-to-noise ratio of the authors' ``gsnr_eval.py``.

GSNR (card, "Metrics"): for each of P held-out prompts draw R rollouts at a low temperature, grade them,
form group-normalised advantages, and take for every rollout r the gradient of

    L_r = −Â_r Σ_j log P^(T)(y_{r,j} | x, y_{r,<j})

with respect to the *final-loop logits* at its completion positions (activations, not parameters),
zero-padded to a common length. With μ_p the mean over the R rollouts,

    GSNR_p = ‖μ_p‖² / (mean_r ‖g_r − μ_p‖² + 1e-8),      reported: mean_p log(GSNR_p + 1e-8).

A prompt whose R rewards are all equal has Â = 0, hence g = 0 and GSNR_p = 0 (log = −18.4); the authors
keep such prompts in the mean, so we do too, and report their fraction and the mean over the others.
Because the logits of different rollouts are different tensors, one backward of Σ_r L_r gives every
rollout's gradient at once (tested against a per-rollout loop). One alignment detail differs from the
authors' script: we take the logits at the positions that *predict* completion tokens (j−1 for token j),
where their slice starts one position later.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np
import torch

from .decode import generate
from .model import LoopedLM
from .rl import group_advantages, join_completions
from .tasks import (TOK, Problem, batch_rewards, chain_batch, eval_sets, exact_match, has_teacher_fact,
                    lucky_guesses, sample_depths)


def _stack(problems: Sequence[Problem]) -> tuple[torch.Tensor, np.ndarray]:
    return torch.tensor([p.prompt for p in problems]), np.array([p.answer for p in problems])


def task_a_correct(model: LoopedLM, problems: Sequence[Problem], max_new: int, n_loops: int | None = None,
                   temperature: float | None = None, n_samples: int = 1,
                   generator: torch.Generator | None = None, stride: int | None = None):
    """Rewards of task-A problems: [n] greedy, or [n, n_samples] sampled at ``temperature``.

    With ``stride`` (the task's trace stride) also return the lucky guesses of the same shape: rewarded
    completions whose trace is not the reference (:func:`repro.rltt.tasks.lucky_guesses`)."""
    prompts, answers = _stack(problems)
    reps = 1 if temperature is None else n_samples
    if temperature is None:
        comp = generate(model, prompts, max_new, n_loops=n_loops).numpy()
    else:
        comp = generate(model, prompts, max_new, temperature, generator, n_loops, repeats=n_samples).numpy()
    r = batch_rewards(comp, np.repeat(answers, reps))
    shape = (len(problems),) if temperature is None else (len(problems), n_samples)
    if stride is None:
        return r.reshape(shape)
    lucky = lucky_guesses(comp, prompts.repeat_interleave(reps, 0).numpy(), stride)
    return r.reshape(shape), lucky.reshape(shape)


def task_b_correct(model: LoopedLM, problems: Sequence[Problem], max_new: int, n_loops: int | None = None
                   ) -> np.ndarray:
    """Greedy exact match on task B, decoding each prompt length as one batch."""
    out = np.zeros(len(problems))
    by_len: dict[int, list[int]] = defaultdict(list)
    for i, p in enumerate(problems):
        by_len[len(p.prompt)].append(i)
    for _, idx in sorted(by_len.items()):
        comp = generate(model, torch.tensor([problems[i].prompt for i in idx]), max_new, n_loops=n_loops)
        for k, i in enumerate(idx):
            out[i] = exact_match(comp[k].tolist(), problems[i].completion)
    return out


def accuracy(model: LoopedLM, problems: Sequence[Problem], max_new: int = 10, n_loops: int | None = None) -> float:
    """Greedy accuracy of ``model`` (truncated to ``n_loops`` loops if given) on task-A or task-B problems."""
    if problems[0].task == "B":
        return float(task_b_correct(model, problems, max_new, n_loops).mean())
    return float(task_a_correct(model, problems, max_new, n_loops).mean())


def per_loop_accuracy(model: LoopedLM, problems: Sequence[Problem], max_new: int = 10) -> np.ndarray:
    """Greedy accuracy when every token is decoded with only t loops, t = 1..T."""
    return np.array([accuracy(model, problems, max_new, t) for t in range(1, model.t_max + 1)])


@torch.inference_mode()
def mean_exit_pdf(model: LoopedLM, problems: Sequence[Problem]) -> np.ndarray:
    """The exit distribution averaged over the positions that predict the reference completion tokens."""
    ids = torch.tensor([p.prompt + p.completion for p in problems])
    out = model(ids[:, :-1])
    lp = len(problems[0].prompt)
    return out.exit_pdf[:, lp - 1:].mean((0, 1)).numpy()


def evaluate_model(model: LoopedLM, sets: dict[str, list[Problem]], max_new: int, n_samples: int,
                   temperature: float, sample_seed: int = 0, stride: int = 1) -> dict:
    """Every held-out number of one model (the same problems and sampling random numbers for every model).

    Hard split: greedy and sampled accuracy (``n_samples`` per problem at ``temperature``, the primary metric),
    each also decoding with only t loops (``per_loop``, ``per_loop_sampled``; the last entry is the full
    model; per problem in ``per_loop_items`` and ``per_loop_sampled_items``, [T, n], for control K1's paired
    intervals), lucky guesses among the sampled rewards, accuracy by depth; easy split and task B greedy; the mean
    exit distribution. The full-depth greedy accuracy ``hard`` (and ``by_depth``) is taken over ``sets["hard"]``
    plus ``sets["hard_extra"]`` when given (greedy decoding is cheap, and more problems shrink the seed-to-seed
    spread of a greedy gain, which is mostly which few problems flip); ``per_loop`` uses ``sets["hard"]`` alone.
    ``hard_fact`` / ``hard_nofact``: the full-depth greedy accuracy on those hard problems with and without a
    ``× 3`` or ``× 7`` step, the family the imperfect teacher of the SFT data gets wrong. The sampling generator of loop
    depth t is seeded by (``sample_seed``, t) alone, so every model draws the same random numbers (common random numbers make the paired differences sharper).
    """
    T = model.t_max
    max_new_b = max(len(p.completion) for p in sets["B"])     # task B needs up to 10 tokens, task A fewer
    n_hard = len(sets["hard"])
    greedy_set = list(sets["hard"]) + list(sets.get("hard_extra", []))
    hard = task_a_correct(model, greedy_set, max_new)          # the full-depth greedy metric, on the larger set
    easy = task_a_correct(model, sets["easy"], max_new)
    loop_items = [task_a_correct(model, sets["hard"], max_new, n_loops=t) for t in range(1, T)] + [hard[:n_hard]]
    per_loop = [float(x.mean()) for x in loop_items]
    per_loop_s, loop_items_s, lucky = [], [], None
    for t in range(1, T + 1):
        gen = torch.Generator().manual_seed(int(sample_seed) * 1000 + 17 * t + 5)
        r, lk = task_a_correct(model, sets["hard"], max_new, n_loops=t, temperature=temperature,
                               n_samples=n_samples, generator=gen, stride=stride)
        per_loop_s.append(float(r.mean()))
        loop_items_s.append(r.mean(1))
        if t == T:
            sampled, lucky = r, lk
    depth_h = np.array([p.depth for p in greedy_set])
    depth_e = np.array([p.depth for p in sets["easy"]])
    by_depth = {int(d): float(easy[depth_e == d].mean()) for d in np.unique(depth_e)}
    by_depth |= {int(d): float(hard[depth_h == d].mean()) for d in np.unique(depth_h)}
    n_rew = int(sampled.sum())
    fact = has_teacher_fact([p.prompt for p in greedy_set])
    return {
        # full-depth greedy accuracy on the hard problems with and without a step of the imperfect teacher's family
        "hard_fact": float(hard[fact].mean()) if fact.any() else float("nan"),
        "hard_nofact": float(hard[~fact].mean()) if (~fact).any() else float("nan"),
        "hard": float(hard.mean()), "easy": float(easy.mean()), "hard_sampled": float(sampled.mean()),
        "B": float(task_b_correct(model, sets["B"], max(max_new, max_new_b)).mean()), "per_loop": per_loop,
        "per_loop_sampled": per_loop_s, "by_depth": by_depth,
        "per_loop_items": np.array(loop_items), "per_loop_sampled_items": np.array(loop_items_s),
        "lucky": int(lucky.sum()), "rewarded": n_rew, "samples": int(sampled.size),
        "lucky_frac": float(lucky.sum() / max(n_rew, 1)),
        "exit_pdf": mean_exit_pdf(model, sets["hard"]).tolist(),
    }


#: Temperatures (besides greedy and the rollout τ) at which the SFT model is re-tempered for control K2: RL that
#: only sharpens the sampling distribution is matched by lowering the SFT model's temperature (issue 46).
RETEMPER_GRID = (0.3, 0.5, 0.7)


def sft_by_temperature(model: LoopedLM, problems: Sequence[Problem], max_new: int, n_samples: int,
                       temperature: float, sample_seed: int = 0, grid: Sequence[float] = RETEMPER_GRID) -> dict:
    """Hard-split accuracy of ``model`` greedy (key ``"greedy"``) and sampled at each τ of ``grid`` and at the
    rollout ``temperature``, keyed by ``f"{τ:g}"``. Every τ draws from the same generator seed as the full-depth
    sampled accuracy of :func:`evaluate_model` (common random numbers), so the rollout τ's entry equals its
    ``hard_sampled``, and a model whose logits are scaled by c sampled at τ reproduces this model at τ / c."""
    T = model.t_max
    out = {"greedy": float(task_a_correct(model, problems, max_new).mean())}
    for tau in sorted({*map(float, grid), float(temperature)}):
        gen = torch.Generator().manual_seed(int(sample_seed) * 1000 + 17 * T + 5)
        out[f"{tau:g}"] = float(task_a_correct(model, problems, max_new, temperature=tau, n_samples=n_samples,
                                               generator=gen).mean())
    return out


def val_set(seed: int, n: int, pad_slots: str = "random", stride: int = 1) -> list[Problem]:
    """A validation split of ``n`` hard (depth 5–6) task-A problems from its own random stream, disjoint in
    construction from :func:`repro.rltt.tasks.eval_sets` (whose sets it leaves unchanged): where control K2
    chooses the SFT model's best temperature, so that the test split only scores that choice."""
    rng = np.random.default_rng([seed, 12, 0x7A1])
    d = sample_depths(rng, n, (5, 6))
    p, c, a = chain_batch(rng, d, pad_slots, stride)
    return [Problem(p[i].tolist(), c[i].tolist(), int(a[i]), int(d[i])) for i in range(n)]


def held_out(cfg) -> dict[str, list[Problem]]:
    """Every held-out set of the chapter: :func:`repro.rltt.tasks.eval_sets` (``hard``, ``easy``, ``B``), the
    validation split ``val`` of control K2 (:func:`val_set`), and ``hard_extra``: ``n_eval_greedy − n_eval`` more
    hard problems from their own stream, on which (with ``hard``) the greedy accuracy is measured."""
    sets = eval_sets(cfg.seed, cfg.n_eval, cfg.pad_slots, cfg.trace_stride)
    sets["val"] = val_set(cfg.seed, cfg.n_eval, cfg.pad_slots, cfg.trace_stride)
    rng = np.random.default_rng([cfg.seed, 12, 0xE7A2])
    n = cfg.n_eval_greedy - cfg.n_eval
    d = sample_depths(rng, n, (5, 6))
    p, c, a = chain_batch(rng, d, cfg.pad_slots, cfg.trace_stride)
    sets["hard_extra"] = [Problem(p[i].tolist(), c[i].tolist(), int(a[i]), int(d[i])) for i in range(n)]
    return sets


def best_temperature(model: LoopedLM, val: Sequence[Problem], test: Sequence[Problem], max_new: int,
                     n_samples: int, temperature: float, sample_seed: int = 0,
                     grid: Sequence[float] = RETEMPER_GRID) -> dict:
    """The SFT baseline of control K2 at its own best temperature, chosen on a validation split (issue 46).

    The grid is greedy, ``grid`` and the rollout ``temperature`` (GRPO's own); the temperature with the highest
    accuracy on ``val`` is chosen (ties go to greedy), and ``test`` is scored at that choice, so the choice is not
    fitted to the numbers it is judged on. Returns ``val`` (accuracy by temperature on the validation split),
    ``best`` (the key chosen), ``test`` (the test accuracy there) and ``test_all``: the test accuracy greedy, at
    the rollout τ and at the choice (the numbers K2 reads; the other temperatures are not scored on test). Test
    samples use the generator seed of :func:`evaluate_model`'s full-depth sampled accuracy (common random numbers),
    the validation ones their own."""
    by_val = sft_by_temperature(model, val, max_new, n_samples, temperature, sample_seed + 1, grid)
    best = max(by_val, key=lambda k: (by_val[k], k == "greedy"))
    keys = {"greedy", f"{float(temperature):g}", best}
    taus = [float(k) for k in keys if k != "greedy"]
    by_test = sft_by_temperature(model, test, max_new, n_samples, temperature, sample_seed,
                                 grid=[t for t in taus if t != float(temperature)])
    by_test = {k: v for k, v in by_test.items() if k in keys}
    return {"val": by_val, "best": best, "test": by_test[best], "test_all": by_test}


# ----------------------------------------------------------------------------- GSNR

def rollout_logit_grads(model: LoopedLM, ids: torch.Tensor, mask: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:
    """g_r = ∂L_r/∂z^(T) at the positions predicting completion tokens, flattened: [B, (L−1)·V]."""
    with torch.no_grad():
        logits = model(ids[:, :-1], readout="last").per_loop_logits[0]
    z = logits.detach().requires_grad_(True)
    lp = torch.log_softmax(z, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    loss = -(adv[:, None] * lp * mask[:, 1:].float()).sum()
    loss.backward()
    return z.grad.reshape(ids.shape[0], -1)


def gsnr_from_grads(g: torch.Tensor, n_rollouts: int) -> np.ndarray:
    """Per-prompt GSNR from per-rollout gradients [P·R, D] (rows grouped by prompt)."""
    g = g.view(-1, n_rollouts, g.shape[-1]).double()
    mu = g.mean(1)
    noise = ((g - mu[:, None]) ** 2).sum(-1).mean(1)
    return ((mu ** 2).sum(-1) / (noise + 1e-8)).numpy()


def gsnr(model: LoopedLM, prompts: torch.Tensor, answers: np.ndarray, n_rollouts: int = 8,
         temperature: float = 0.2, max_new: int = 10, generator: torch.Generator | None = None) -> dict:
    """The repo's GSNR metric of ``model`` on task-A ``prompts`` (see the module docstring)."""
    rep = prompts.repeat_interleave(n_rollouts, 0)
    comp = generate(model, prompts, max_new, temperature, generator, repeats=n_rollouts)
    rewards = torch.from_numpy(batch_rewards(comp.numpy(), np.repeat(answers, n_rollouts)))
    adv = group_advantages(rewards, n_rollouts)
    ids, mask = join_completions(rep, comp)
    per_prompt = gsnr_from_grads(rollout_logit_grads(model, ids, mask, adv), n_rollouts)
    zero = rewards.view(-1, n_rollouts).std(1).numpy() == 0
    logs = np.log(per_prompt + 1e-8)
    return {"mean_log_gsnr": float(logs.mean()), "zero_var_frac": float(zero.mean()),
            "mean_log_gsnr_nonzero": float(logs[~zero].mean()) if (~zero).any() else float("nan"),
            "log_gsnr": logs.tolist(), "reward": float(rewards.mean())}
