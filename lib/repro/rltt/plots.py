"""Figures of chapter 12: SFT curves per loop, RL reward curves, per-loop heat map, accuracy by depth,
time per RL step, GSNR and the exit distribution. Means over seeds with 95 % t-intervals."""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from repro.common import mean_ci, style

from .experiments import Experiment, reward_curves

LABELS = {"sft": "SFT only", "grpo": "GRPO (ω = e_T)", "exit_pdf": "RLTT, ω = exit pdf",
          "exit_pdf_detached": "RLTT, ω = exit pdf (detached)", "uniform": "RLTT, ω uniform",
          "progressive": "RLTT, ω progressive", "learned": "RLTT, ω learned"}


def label(m: str) -> str:
    return LABELS.get(m, m)


def sft_curves(ax: plt.Axes, history: dict, t_max: int) -> None:
    """Teacher-forced cross-entropy of every loop's readout during SFT."""
    for t in range(1, t_max + 1):
        ax.plot(history["step"], history[f"ce_loop{t}"], label=f"loop {t}", marker=None)
    ax.set_yscale("log")
    ax.set_xlabel("SFT step")
    ax.set_ylabel("cross-entropy per completion token (nats)")
    ax.set_title("SFT with Ouro's all-loop objective")
    ax.legend()


def reward_panel(ax: plt.Axes, exp: Experiment, methods: Sequence[str], window: int = 10) -> None:
    """Training reward (trailing mean over ``window`` steps), mean ± 95 % CI over seeds."""
    for m in methods:
        c = reward_curves(exp, m, window)
        if c.size == 0:
            continue
        mean, half = mean_ci(c, axis=0)
        x = np.arange(1, c.shape[1] + 1)
        style.band(ax, x, mean, half, label(m) + (f" ({c.shape[0]} seeds)" if c.shape[0] > 1 else " (1 seed)"),
                   color=style.color(m), marker=None)
    ax.set_xlabel("RL step")
    ax.set_ylabel(f"mean reward of the rollouts (trailing {window}-step mean)")
    ax.set_title("Training reward (task A, RL prompts)")
    ax.legend()


def per_loop_heatmap(ax: plt.Axes, exp: Experiment, methods: Sequence[str], sampled: bool = False) -> np.ndarray:
    """Hard-split accuracy decoding with t loops (greedy, or sampled at τ): rows t, columns methods (seed mean)."""
    T = exp.t_max
    col = "sloop" if sampled else "loop"
    M = np.array([[exp.evals[exp.evals.method == m][f"{col}{t}"].mean() for m in methods] for t in range(1, T + 1)])
    im = ax.imshow(M, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    for (i, j), v in np.ndenumerate(M):
        ax.text(j, i, f"{100 * v:.1f}", ha="center", va="center", color="w" if v < 0.6 else "k", fontsize=10)
    ax.set_xticks(range(len(methods)), [label(m) for m in methods], rotation=15)
    ax.set_yticks(range(T), [f"t = {t}" for t in range(1, T + 1)])
    ax.set_ylabel("loops used for every token")
    ax.set_title(f"Per-loop {'sampled (τ)' if sampled else 'greedy'} accuracy, hard split (%)")
    ax.grid(False)
    plt.colorbar(im, ax=ax, label="accuracy")
    return M


def depth_panel(ax: plt.Axes, exp: Experiment, methods: Sequence[str]) -> None:
    """Greedy accuracy by depth (easy 2-4, hard 5-6), mean ± 95 % CI over seeds."""
    cols = sorted((c for c in exp.evals.columns if c.startswith("depth")), key=lambda c: int(c[5:]))
    depths = np.array([int(c[5:]) for c in cols])
    for k, m in enumerate(methods):
        v = exp.evals[exp.evals.method == m][cols].to_numpy(float)
        mean, half = mean_ci(v, axis=0)
        ax.errorbar(depths + 0.08 * (k - 1), mean, yerr=half, marker="o", capsize=3, color=style.color(m),
                    label=label(m))
    ax.set_xlabel("depth (non-trivial operations among the 6)")
    ax.set_ylabel("greedy accuracy")
    ax.set_title("Held-out accuracy by depth")
    ax.legend()


def timing_panel(ax: plt.Axes, exp: Experiment, methods: Sequence[str]) -> pd.DataFrame:
    """Median wall time per RL step, split into rollout and update (stacked bars)."""
    rows = []
    for m in methods:
        ro = [v for (s, mm), log in exp.logs.items() if mm == m for v in log["rollout_s"]]
        up = [v for (s, mm), log in exp.logs.items() if mm == m for v in log["update_s"]]
        rows.append({"method": m, "rollout_ms": 1e3 * np.median(ro), "update_ms": 1e3 * np.median(up)})
    df = pd.DataFrame(rows)
    x = np.arange(len(df))
    ax.bar(x, df.rollout_ms, color="#9fb3c8", label="rollout (sampling with KV cache)")
    ax.bar(x, df.update_ms, bottom=df.rollout_ms, color=[style.color(m) for m in df.method],
           label="update (forward, backward, Adam)")
    ax.set_xticks(x, [label(m) for m in df.method])
    ax.set_ylabel("median wall time per RL step (ms)")
    ax.set_title("Cost of one RL step")
    ax.set_ylim(0, 1.3 * float((df.rollout_ms + df.update_ms).max()))
    ax.legend(loc="upper center", ncol=2)
    return df


GSNR_FLOOR = float(np.log(1e-8))   # log GSNR of a prompt whose rewards are all equal (Â = 0, gradient 0)


def gsnr_panels(ax_share: plt.Axes, ax_hist: plt.Axes, exp: Experiment, methods: Sequence[str]) -> pd.DataFrame:
    """The GSNR metric in its two parts: the share of prompts at the floor (all rewards equal, GSNR 0), with a
    95 % CI over seeds, and a histogram of log GSNR over the prompts that carry signal (pooled over seeds)."""
    rows = []
    finite = [np.concatenate([np.asarray(v) for v in exp.evals[exp.evals.method == m].gsnr_values]) for m in methods]
    rest_all = np.concatenate([f[f > GSNR_FLOOR + 1e-6] for f in finite]) if finite else np.zeros(0)
    bins = np.linspace(rest_all.min(), rest_all.max(), 21) if rest_all.size > 1 else 10
    for k, m in enumerate(methods):
        d = exp.evals[exp.evals.method == m]
        share = np.array([np.mean(np.asarray(v) <= GSNR_FLOOR + 1e-6) for v in d.gsnr_values])
        mean, half = mean_ci(share) if len(share) > 1 else (share.mean(), 0.0)
        ax_share.bar(k, mean, 0.6, yerr=half, capsize=3, color=style.color(m), label=label(m))
        rest = finite[k][finite[k] > GSNR_FLOOR + 1e-6]
        if rest.size:
            ax_hist.hist(rest, bins=bins, histtype="step", lw=1.8, color=style.color(m),
                         label=f"{label(m)} ({rest.size} prompts)")
        rows.append({"method": m, "share at floor": float(mean),
                     "mean log GSNR (signal prompts)": float(rest.mean()) if rest.size else float("nan"),
                     "mean log GSNR (all, the repo's metric)": float(d.log_gsnr.mean())})
    ax_share.set_xticks(range(len(methods)), [label(m) for m in methods], rotation=10)
    ax_share.set_ylim(0, 1)
    ax_share.set_ylabel("share of prompts with all rewards equal")
    ax_share.set_title("GSNR = 0 (log = −18.4): no signal")
    ax_hist.set_xlabel("log GSNR per prompt (final-loop logit gradients)")
    ax_hist.set_ylabel("prompts (pooled over seeds)")
    ax_hist.yaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax_hist.set_title("GSNR of the prompts that carry signal")
    ax_hist.legend(fontsize=8)
    return pd.DataFrame(rows).set_index("method")


def exit_panel(ax: plt.Axes, exp: Experiment, methods: Sequence[str]) -> None:
    """Mean exit distribution over the hard split's completion positions (teacher-forced)."""
    T = exp.t_max
    w = 0.8 / len(methods)
    for k, m in enumerate(methods):
        v = exp.evals[exp.evals.method == m][[f"exit{t}" for t in range(1, T + 1)]].to_numpy(float)
        mean, half = mean_ci(v, axis=0)
        ax.bar(np.arange(1, T + 1) + (k - (len(methods) - 1) / 2) * w, mean, w, yerr=half, capsize=2,
               color=style.color(m), label=label(m))
    ax.set_xticks(range(1, T + 1))
    ax.set_xlabel("exit loop t")
    ax.set_ylabel("mean exit probability p_t")
    ax.set_title("Exit distribution on the hard split")
    ax.legend()


def exit_drift_panel(ax: plt.Axes, exp: Experiment, method: str) -> None:
    """ω = exit pdf seen by the RLTT loss during training (mean over completion tokens), per loop."""
    logs = [log for (s, m), log in sorted(exp.logs.items()) if m == method and log["exit_pdf"][0] is not None]
    if not logs:
        return
    E = np.array([log["exit_pdf"] for log in logs])          # [seeds, steps, T]
    x = np.arange(1, E.shape[1] + 1)
    for t in range(E.shape[2]):
        mean, half = mean_ci(E[:, :, t], axis=0)
        style.band(ax, x, mean, half, f"p_{t + 1}", color=style.PALETTE[t % len(style.PALETTE)], marker=None)
    ax.set_xlabel("RL step")
    ax.set_ylabel("mean exit probability over rollout tokens")
    ax.set_title(f"Drift of the loop weights ({label(method)})")
    ax.legend(ncol=E.shape[2], loc="center")
