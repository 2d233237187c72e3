"""Figures of chapter 18: forecasts against the truth, skill by lead, timing and memory bars, the composite
loss's weights. Means over seeds with 95 % t-intervals."""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np

from repro.common import mean_ci, style

from .experiments import LABELS, Experiment


def label(m: str) -> str:
    return LABELS.get(m, m)


def forecast_maps(fig: plt.Figure, exp: Experiment, models: Sequence[str], leads: Sequence[int]) -> None:
    """h anomaly of the first test case: the truth and each model's forecast at the given leads (seed 0)."""
    rows = ["truth", *models]
    leads = [k for k in leads if k <= exp.cfg.eval_leads]
    vmax = float(np.abs(exp.example["truth"]).max())
    axes = fig.subplots(len(rows), len(leads), squeeze=False)
    for i, r in enumerate(rows):
        for j, k in enumerate(leads):
            ax = axes[i, j]
            im = ax.imshow(exp.example[r][k - 1], origin="lower", cmap="RdBu_r", vmin=-vmax, vmax=vmax,
                           extent=(0, 360, -60, 60), aspect="auto")
            ax.set_title(f"{'truth' if r == 'truth' else label(r)}, lead {k} ({6 * k} h)", fontsize=9)
            ax.set_xlabel("longitude (°)" if i == len(rows) - 1 else "")
            ax.set_ylabel("latitude (°)" if j == 0 else "")
    fig.colorbar(im, ax=axes, shrink=0.6, label="h anomaly (anomaly-std units)")
    fig.suptitle("Forecasts of the depth anomaly h from one test initial condition (seed 0)")


def skill_by_lead(ax_rmse: plt.Axes, ax_acc: plt.Axes, exp: Experiment, models: Sequence[str],
                  refs: Sequence[str] = ("persistence", "climatology", "twin")) -> None:
    L = exp.cfg.eval_leads
    x = np.arange(1, L + 1)
    for m in models:
        for ax, key in ((ax_rmse, "rmse"), (ax_acc, "acc")):
            v = np.array([s[key] for s in exp.scores[m]])
            mean, half = mean_ci(v, axis=0) if len(v) > 1 else (v[0], np.zeros(L))
            style.band(ax, x, mean, half, label(m), marker=None)
    for r in refs:
        ax_rmse.plot(x, exp.refs[r]["rmse"], ls="--", label=label(r))
        if r != "climatology":
            ax_acc.plot(x, exp.refs[r]["acc"], ls="--", label=label(r))
    ax_rmse.set(xlabel="lead (6-hour steps)", ylabel="lat-weighted RMSE of h (anomaly-std units)",
                title="Error growth with lead time")
    ax_acc.set(xlabel="lead (6-hour steps)", ylabel="ACC of h anomaly", title="Anomaly correlation")
    ax_rmse.legend(fontsize=8)
    ax_acc.legend(fontsize=8)


def timing_bars(ax: plt.Axes, t: dict) -> None:
    names = ["inference\n(merged once)", "training step\none layer", "training step\nfull model"]
    merged = [t["infer"]["ms_merged"], t["layer"]["ms_merged"], t["step"]["ms_merged"]]
    three = [t["infer"]["ms_three"], t["layer"]["ms_three"], t["step"]["ms_three"]]
    x = np.arange(3)
    ax.bar(x - 0.2, merged, 0.4, label="one conv, merged kernel")
    ax.bar(x + 0.2, three, 0.4, label="three convs summed")
    ax.set_yscale("log")
    ax.set_xticks(x, names)
    ax.set(ylabel="median wall time (ms, log scale)", title=f"Fused vs three-branch conv ({t['map']} map)")
    ax.legend()


def memory_bars(ax: plt.Axes, memory: dict) -> None:
    ks = sorted(memory["accumulative"])
    x = np.arange(len(ks))
    ax.bar(x - 0.2, [memory["accumulative"][k] / 1e6 for k in ks], 0.4, label="accumulative (detached)")
    ax.bar(x + 0.2, [memory["bptt"][k] / 1e6 for k in ks], 0.4, label="BPTT")
    ax.set_xticks(x, [f"K = {k}" for k in ks])
    ax.set(ylabel="peak bytes saved for backward (MB)", title="Activation memory of one fine-tuning iteration")
    ax.legend()


def loss_weights(ax_w: plt.Axes, ax_s: plt.Axes, exp: Experiment) -> None:
    """w(t) of the learned sinusoid (every seed), the scheduled w_t for comparison, and s_c(t) of seed 0."""
    n = exp.cfg.pretrain_steps
    t = np.arange(n)
    for s in range(exp.cfg.n_seeds):
        h = exp.histories[("emformer", s)]
        ax_w.plot(t, h.w, label=f"learned w(θ), seed {s}")
    ax_w.plot(t, (np.sin(np.pi * t / max(n - 1, 1) - np.pi / 2) + 1) / 2, ls=":", color="gray",
              label="scheduled w_t (ablation)")
    ax_w.set(xlabel="pretraining step", ylabel="w = (sin θ + 1)/2", title="Weight of the RMSE term", ylim=(-0.02, 1.02))
    ax_w.legend(fontsize=8)
    s_hist = np.array(exp.histories[("emformer", 0)].s)
    for c, name in enumerate(("h", "u", "v", "T")):
        ax_s.plot(t, s_hist[:, c], label=f"s_{name}")
    ax_s.set(xlabel="pretraining step", ylabel="learned log-variance s_c",
             title="Learned log-variances s_c (weight exp(−s_c)), seed 0")
    ax_s.legend(fontsize=8)
