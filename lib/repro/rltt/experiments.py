"""The chapter's experiment: SFT once, then GRPO and RLTT from it over paired seeds, then every metric
and the claims of the card (C1–C5) computed from the measured numbers.

The notebook calls :func:`run_experiment` and the ``claim_c*`` helpers; each helper returns the claim's
numbers, whether the card's condition is met, and — where the card says so — why the run cannot decide.
Thresholds are the card's (``THRESHOLDS``), never tuned.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
import torch

from repro.common.stats import mean_ci, paired_summary

from .evaluate import evaluate_model, gsnr
from .model import LoopedLM
from .rl import RLRun, train_rl
from .tasks import Problem

THRESHOLDS = {
    "C1_min_win_frac": 0.8,     # RLTT > GRPO on hard greedy accuracy in >= 4 of 5 seeds
    "C2_max_ratio": 1.10,       # median wall time per RL step, RLTT / GRPO
    "C3_min_win_frac": 0.8,     # intermediate-loop gain RLTT − GRPO > 0 in >= 4 of 5 seeds
    "C4_tolerance": 0.01,       # task B: RLTT >= GRPO − 1 point
}


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


def _row(seed: int, method: str, ev: dict, gs: dict) -> dict:
    row = {"seed": seed, "method": method, **{k: ev[k] for k in ("hard", "easy", "hard_sampled", "B")}}
    for t, v in enumerate(ev["per_loop"], 1):
        row[f"loop{t}"] = v
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
                                  sample_seed=cfg.seed)
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


# ----------------------------------------------------------------------------- claims

def _ci_has_zero(x: np.ndarray) -> bool:
    m, h = mean_ci(x)
    return bool(m - h <= 0 <= m + h)


def _ci(x: np.ndarray) -> list[float]:
    m, h = mean_ci(np.asarray(x, float))
    return [float(m - h), float(m + h)]


def claim_c1(exp: Experiment, sft_hard: float) -> dict:
    """C1: RLTT beats GRPO on hard greedy accuracy in >= 4 of 5 seeds; paired difference, CI, t-test."""
    r, g = exp.metric(exp.main, "hard"), exp.metric("grpo", "hard")
    n = len(g)
    wins = int((r > g).sum())
    out = {"numbers": {"seeds": n, "RLTT wins": wins, "RLTT hard": float(r.mean()), "GRPO hard": float(g.mean()),
                       "SFT hard": sft_hard}, "holds": wins >= math.ceil(THRESHOLDS["C1_min_win_frac"] * n),
           "inconclusive": None}
    if n < 2:
        out["inconclusive"] = f"{n} seed: a paired comparison over seeds needs at least 2 (the full profile runs 5)"
        return out
    d, ci, p = paired_t(r, g)
    gain = g - sft_hard
    out["numbers"] |= {"mean diff": d, "diff ci95": list(ci), "t-test p": p,
                       "GRPO gain over SFT": float(gain.mean()), "GRPO gain ci95": _ci(gain)}
    if not out["holds"] and _ci_has_zero(gain):
        out["inconclusive"] = ("GRPO's own gain over SFT is inside seed noise (its 95 % CI contains 0), so RL "
                               "barely moved greedy accuracy and the comparison cannot separate the methods (card's rule)")
    return out


def claim_c2(exp: Experiment, smoke: bool) -> dict:
    """C2: median wall time per RL step (rollout + update) of RLTT <= 1.10 × GRPO's, same rollouts."""
    def med(m, key):
        vals = [v for (s, mm), log in exp.logs.items() if mm == m for v in log[key]]
        return float(np.median(vals))
    step = {m: float(np.median([a + b for (s, mm), log in exp.logs.items() if mm == m
                                for a, b in zip(log["rollout_s"], log["update_s"])])) for m in ("grpo", exp.main)}
    ratio = step[exp.main] / step["grpo"]
    nums = {"RLTT step": f"{1e3 * step[exp.main]:.1f} ms", "GRPO step": f"{1e3 * step['grpo']:.1f} ms",
            "RLTT update": f"{1e3 * med(exp.main, 'update_s'):.1f} ms",
            "GRPO update": f"{1e3 * med('grpo', 'update_s'):.1f} ms",
            "RLTT rollout": f"{1e3 * med(exp.main, 'rollout_s'):.1f} ms",
            "GRPO rollout": f"{1e3 * med('grpo', 'rollout_s'):.1f} ms"}
    if smoke:
        return {"numbers": nums, "holds": None, "ratio": ratio,
                "inconclusive": "smoke profile: a few steps of a tiny model are timing noise (and timings are "
                                "kept out of the determinism check); the full profile decides"}
    return {"numbers": {"RLTT/GRPO": ratio, **nums}, "holds": ratio <= THRESHOLDS["C2_max_ratio"],
            "ratio": ratio, "inconclusive": None}


def claim_c3(exp: Experiment, sft_loops: np.ndarray) -> dict:
    """C3: mean gain over loops t < T of RLTT minus GRPO > 0 in >= 4 of 5 seeds."""
    T = exp.t_max
    cols = [f"loop{t}" for t in range(1, T)]
    if not cols:
        return {"numbers": {}, "holds": None, "inconclusive": "T_max = 1 has no intermediate loop"}
    def gain(m):
        return np.mean([exp.metric(m, c) - sft_loops[t] for t, c in enumerate(cols)], axis=0)
    gr, gg = gain(exp.main), gain("grpo")
    d = gr - gg
    n = len(d)
    wins = int((d > 0).sum())
    out = {"numbers": {"seeds": n, "RLTT wins": wins, "RLTT gain t<T": float(gr.mean()),
                       "GRPO gain t<T": float(gg.mean())},
           "holds": wins >= math.ceil(THRESHOLDS["C3_min_win_frac"] * n), "inconclusive": None}
    if n < 2:
        out["inconclusive"] = f"{n} seed: a paired comparison over seeds needs at least 2 (the full profile runs 5)"
        return out
    md, ci, p = paired_t(gr, gg)
    out["numbers"] |= {"mean diff": md, "diff ci95": list(ci), "t-test p": p,
                       "RLTT gain ci95": _ci(gr), "GRPO gain ci95": _ci(gg)}
    if not out["holds"] and _ci_has_zero(gr) and _ci_has_zero(gg):
        out["inconclusive"] = ("neither method's intermediate-loop gain over SFT exceeds seed noise (both 95 % CIs "
                               "contain 0), the card's rule for an undecidable C3")
    return out


def claim_c4(exp: Experiment, sft_b: float, smoke: bool) -> dict:
    """C4: task-B accuracy of RLTT >= GRPO's − 1 point (mean over seeds)."""
    r, g = exp.metric(exp.main, "B"), exp.metric("grpo", "B")
    nums = {"RLTT task B": float(r.mean()), "GRPO task B": float(g.mean()), "SFT task B": sft_b}
    if len(g) > 1:
        d, ci, p = paired_t(r, g)
        nums |= {"mean diff": d, "diff ci95": list(ci), "t-test p": p}
    holds = float(r.mean()) >= float(g.mean()) - THRESHOLDS["C4_tolerance"]
    return {"numbers": nums, "holds": holds,
            "inconclusive": "smoke profile: a few RL steps from a barely trained model cannot show transfer"
            if smoke else None}


def claim_c5(exp: Experiment, smoke: bool) -> dict:
    """C5: mean log-GSNR of the RLTT-trained checkpoints >= the GRPO-trained ones (same GRPO loss for both)."""
    r, g = exp.metric(exp.main, "log_gsnr"), exp.metric("grpo", "log_gsnr")
    nums = {"RLTT log-GSNR": float(r.mean()), "GRPO log-GSNR": float(g.mean()),
            "RLTT zero-var frac": float(exp.metric(exp.main, "gsnr_zero_frac").mean()),
            "GRPO zero-var frac": float(exp.metric("grpo", "gsnr_zero_frac").mean()),
            "RLTT log-GSNR (non-zero)": float(np.nanmean(exp.metric(exp.main, "log_gsnr_nonzero"))),
            "GRPO log-GSNR (non-zero)": float(np.nanmean(exp.metric("grpo", "log_gsnr_nonzero")))}
    if len(g) > 1:
        d, ci, p = paired_t(r, g)
        nums |= {"mean diff": d, "diff ci95": list(ci), "t-test p": p}
    return {"numbers": nums, "holds": float(r.mean()) >= float(g.mean()),
            "inconclusive": "smoke profile: a few RL steps from a barely trained model" if smoke else None}


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
