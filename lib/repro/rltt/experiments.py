"""The chapter's experiment: SFT once, then GRPO and RLTT from it over paired seeds, then every metric.

The notebook calls :func:`run_experiment`; the claims and controls are decided from its numbers in
:mod:`repro.rltt.verdicts`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
import torch

from repro.common.stats import paired_summary

from .evaluate import evaluate_model, gsnr
from .model import LoopedLM
from .rl import RLRun, train_rl
from .tasks import Problem


def paired_t(a: np.ndarray, b: np.ndarray) -> tuple[float, tuple[float, float], float]:
    """Mean paired difference a − b, its 95 % t interval, and the paired t-test p-value (the repo's protocol)."""
    s = paired_summary(np.asarray(a, float), np.asarray(b, float))
    return s["mean_diff"], (s["ci_lo"], s["ci_hi"]), s["p_value"]


def rl_seeds(cfg) -> list[int]:
    """The RL seeds of a run: k = 1..n_seeds, offset by the master seed (the SFT model is shared)."""
    return [1000 * cfg.seed + k for k in range(1, cfg.n_seeds + 1)]


@dataclass
class Experiment:
    """Everything the notebook plots and the claims read."""

    evals: pd.DataFrame                        # one row per (seed, method), SFT as method "sft"
    logs: dict[tuple[int, str], dict]          # per-step training logs
    main: str                                  # the RLTT weighting compared with GRPO
    t_max: int
    seconds: dict[str, float] = field(default_factory=dict)

    def metric(self, method: str, col: str) -> np.ndarray:
        """Per-seed values of ``col`` for ``method`` in seed order (only seeds where GRPO ran)."""
        d = self.evals[self.evals.method == method].set_index("seed")
        seeds = sorted(self.evals[self.evals.method == "grpo"].seed)
        return np.array([d.loc[s, col] for s in seeds if s in d.index])

    def loops(self, method: str, sampled: bool = True) -> np.ndarray:
        """Per-seed accuracy of the intermediate loops t = 1..T−1 on the hard split: [seeds, T−1]."""
        col = "sloop" if sampled else "loop"
        cols = [self.metric(method, f"{col}{t}") for t in range(1, self.t_max)]
        return np.stack(cols, 1) if cols else np.zeros((len(self.metric(method, "hard")), 0))

    def step_seconds(self, method: str) -> dict[str, float]:
        """Median wall seconds per RL step of ``method`` over all its seeds: rollout, update, and both."""
        logs = [log for (s, m), log in self.logs.items() if m == method]
        ro = [v for log in logs for v in log["rollout_s"]]
        up = [v for log in logs for v in log["update_s"]]
        both = [a + b for log in logs for a, b in zip(log["rollout_s"], log["update_s"])]
        return {"rollout": float(np.median(ro)), "update": float(np.median(up)), "step": float(np.median(both))}

    def step_times(self, method: str) -> np.ndarray:
        """Wall seconds of every RL step (rollout + update) of ``method``: [seeds, steps], in seed order; the rows of
        two methods are paired (same seed, same step, alternating order)."""
        logs = [log for (s, m), log in sorted(self.logs.items()) if m == method]
        return np.array([[a + b for a, b in zip(log["rollout_s"], log["update_s"])] for log in logs], float)

    def lucky_table(self) -> pd.DataFrame:
        """Lucky guesses (rewarded with a wrong trace): in the held-out sampled evaluation per method (seed
        totals), and among the training rollouts of each RL method."""
        rows = []
        for m, d in self.evals.groupby("method", sort=False):
            train = [log for (s, mm), log in self.logs.items() if mm == m]
            tl, tr = sum(sum(log["lucky"]) for log in train), sum(sum(log["rewarded"]) for log in train)
            rows.append({"method": m, "eval samples": int(d.samples.sum()), "eval rewarded": int(d.rewarded.sum()),
                         "eval lucky": int(d.lucky.sum()),
                         "eval lucky / rewarded": float(d.lucky.sum() / max(d.rewarded.sum(), 1)),
                         "train rewarded": int(tr) if train else None, "train lucky": int(tl) if train else None,
                         "train lucky / rewarded": float(tl / max(tr, 1)) if train else float("nan")})
        return pd.DataFrame(rows).set_index("method")


def _row(seed: int, method: str, ev: dict, gs: dict) -> dict:
    row = {"seed": seed, "method": method,
           **{k: ev[k] for k in ("hard", "easy", "hard_sampled", "B", "lucky", "rewarded", "samples", "lucky_frac",
                                 "hard_fact", "hard_nofact")}}
    for t, v in enumerate(ev["per_loop"], 1):
        row[f"loop{t}"] = v
    for t, v in enumerate(ev["per_loop_sampled"], 1):
        row[f"sloop{t}"] = v
    for d, v in ev["by_depth"].items():
        row[f"depth{d}"] = v
    for t, v in enumerate(ev["exit_pdf"], 1):
        row[f"exit{t}"] = v
    row |= {"log_gsnr": gs["mean_log_gsnr"], "gsnr_zero_frac": gs["zero_var_frac"],
            "log_gsnr_nonzero": gs["mean_log_gsnr_nonzero"], "gsnr_values": gs["log_gsnr"]}
    return row


def run_experiment(cfg, sft: LoopedLM, sets: dict[str, list[Problem]],
                   progress: Callable[[str], None] | None = None, sft_eval: dict | None = None) -> Experiment:
    """Evaluate the SFT model, then for every seed train GRPO and RLTT (and the ablations on the first
    seed) step by step from it and evaluate each; every model sees the same held-out problems and the
    same evaluation and GSNR sampling seeds."""
    say = progress or (lambda s: None)
    gs_prompts = torch.tensor([p.prompt for p in sets["hard"][: cfg.gsnr_prompts]])
    gs_answers = np.array([p.answer for p in sets["hard"][: cfg.gsnr_prompts]])

    def measure(model: LoopedLM, ev: dict | None = None) -> tuple[dict, dict]:
        ev = ev or evaluate_model(model, sets, cfg.max_new_tokens, cfg.n_eval_samples, cfg.temperature,
                                  sample_seed=cfg.seed, stride=cfg.trace_stride)
        gs = gsnr(model, gs_prompts, gs_answers, cfg.gsnr_rollouts, cfg.gsnr_temperature, cfg.max_new_tokens,
                  torch.Generator().manual_seed(cfg.seed + 7))
        return ev, gs

    t0 = time.perf_counter()
    rows = [_row(-1, "sft", *measure(sft, sft_eval))]   # sft_eval: the notebook's own evaluation of the SFT model
    logs: dict[tuple[int, str], dict] = {}
    t_train = t_eval = 0.0
    for k, seed in enumerate(rl_seeds(cfg)):
        methods = ["grpo", cfg.loop_weighting] + (list(cfg.ablation_weightings) if k == 0 else [])
        t1 = time.perf_counter()
        runs: dict[str, RLRun] = train_rl(sft, methods, cfg, seed)
        t2 = time.perf_counter()
        for m, run in runs.items():
            rows.append(_row(seed, m, *measure(run.model)))
            logs[(seed, m)] = run.log
        t3 = time.perf_counter()
        t_train, t_eval = t_train + t2 - t1, t_eval + t3 - t2
        say(f"seed {seed}: trained {', '.join(methods)}")
    evals = pd.DataFrame(rows)
    return Experiment(evals, logs, cfg.loop_weighting, cfg.t_max,
                      {"rl_train": t_train, "rl_eval": t_eval, "total": time.perf_counter() - t0})


def reward_curves(exp: Experiment, method: str, window: int = 10) -> np.ndarray:
    """Training reward per step for every seed of ``method``, smoothed by a trailing mean: [seeds, steps]."""
    curves = [np.asarray(log["reward"]) for (s, m), log in sorted(exp.logs.items()) if m == method]
    if not curves:
        return np.zeros((0, 0))
    out = []
    for c in curves:
        cs = np.cumsum(np.insert(c, 0, 0.0))
        k = np.minimum(np.arange(1, len(c) + 1), window)
        out.append((cs[1:] - cs[np.arange(1, len(c) + 1) - k]) / k)
    return np.array(out)
