"""Figures of chapter 09 (the book's ``repro`` style is set by the notebook)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .verdicts import NAMES

COLORS = {"sgdm": "#4c72b0", "harm_sgdm": "#dd8452", "adamw": "#55a868", "harm_adamw": "#c44e52"}


def _smooth(v: np.ndarray, k: int) -> np.ndarray:
    if len(v) < k or k <= 1:
        return v
    return np.convolve(v, np.ones(k) / k, mode="valid")


def plot_harm_curves(runs, datasets, smooth: int = 15):
    """Harmed fraction and mean positive increase vs step (mean over seeds, moving average)."""
    fig, axes = plt.subplots(2, len(datasets), figsize=(5.2 * len(datasets), 6.4), squeeze=False)
    for j, ds in enumerate(datasets):
        for opt in COLORS:
            rs = [r for r in runs if r.dataset == ds and r.optimizer == opt and r.variant == "main"]
            if not rs:
                continue
            n = min(len(r.harm_step) for r in rs)
            step = np.asarray(rs[0].harm_step[:n])
            for i, key in enumerate(("frac_harmed", "mean_pos")):
                v = np.mean([np.asarray(getattr(r, key)[:n]) for r in rs], axis=0)
                k = min(smooth, max(1, n // 5))
                axes[i, j].plot(step[k - 1:] if len(v) >= k else step, _smooth(v, k), color=COLORS[opt],
                                label=NAMES[opt])
        axes[0, j].set_title(f"{NAMES[ds]}: harmed fraction of the batch")
        axes[0, j].set_ylabel("fraction with Δℓ_i > 1e-6")
        axes[1, j].set_title(f"{NAMES[ds]}: mean positive loss increase")
        axes[1, j].set_ylabel("mean_i max(0, Δℓ_i)")
        axes[1, j].set_yscale("log")
        for i in range(2):
            axes[i, j].set_xlabel("step")
            axes[i, j].legend(fontsize=8)
    return fig


def plot_harm_per_seed(summary: pd.DataFrame):
    """Per-seed harmed fraction (after the first 10 %) of X and Harm-X, lines joining a seed's pair."""
    main = summary[summary.variant == "main"]
    groups = [(ds, x) for ds in main.dataset.unique() for x in ("sgdm", "adamw")
              if {x, f"harm_{x}"} <= set(main[main.dataset == ds].optimizer)]
    fig, ax = plt.subplots(figsize=(1.9 * max(len(groups), 2) + 1, 3.6))
    for k, (ds, x) in enumerate(groups):
        s = main[main.dataset == ds]
        b = s[s.optimizer == x].set_index("seed").frac_harmed
        h = s[s.optimizer == f"harm_{x}"].set_index("seed").frac_harmed.loc[b.index]
        for bi, hi in zip(b, h):
            ax.plot([2 * k, 2 * k + 1], [bi, hi], color="0.6", lw=0.8)
        ax.scatter(np.full(len(b), 2 * k), b, color=COLORS[x], zorder=3, label=NAMES[x] if k < 2 else None)
        ax.scatter(np.full(len(h), 2 * k + 1), h, color=COLORS[f"harm_{x}"], zorder=3,
                   label=NAMES[f"harm_{x}"] if k < 2 else None)
    ax.set_xticks([2 * k + 0.5 for k in range(len(groups))])
    ax.set_xticklabels([f"{NAMES[ds]}\n{NAMES[x]} → Harm" for ds, x in groups])
    ax.set_ylabel("harmed fraction (after 10 %)")
    ax.set_title("Harmed fraction per seed (C1)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return fig


def plot_gram_agreement(cp: pd.DataFrame):
    """Spearman ρ with the full-network Gram at each checkpoint step, one panel per model: last layer, e alone and
    the label Gram; the line is the median over training seeds (both baselines' runs), the band their range."""
    dss = list(dict.fromkeys(cp.dataset))
    fig, axes = plt.subplots(1, len(dss), figsize=(4.2 * len(dss), 3.6), squeeze=False, sharey=True)
    marks = {"spearman_ll": ("last layer (e_iᵀe_j)(h̄_iᵀh̄_j)", "o"), "spearman_e": ("e_iᵀe_j alone", "s"),
             "spearman_label": ("label Gram 1[y_i = y_j]", "^")}
    for ax, ds in zip(axes[0], dss):
        g = cp[cp.dataset == ds]
        for col, (lab, m) in marks.items():
            q = g.groupby("step")[col].agg(["median", "min", "max"])
            ax.plot(q.index, q["median"], marker=m, label=lab)
            ax.fill_between(q.index, q["min"], q["max"], alpha=0.15)
        ax.axhline(0.8, color="k", lw=0.8, ls=":")
        ax.set_xlabel("training step of the baseline runs")
        ax.set_title(f"{NAMES[ds]} ({g.seed.nunique()} seeds)")
    axes[0][0].set_ylabel("Spearman ρ with the full Gram")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Does the last layer track the full Gram? (C2a–C2c, K3)")
    return fig


def plot_exact(exact: pd.DataFrame):
    """Harmed fraction of SGDM, the last-layer proxy and the exact QP on identical runs (C3)."""
    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    order = [("short", "SGDM"), ("proxy", "Harm-SGDM\n(last layer)"), ("exact", "Harm-SGDM\n(exact)")]
    for i, (v, lab) in enumerate(order):
        vals = exact[exact.variant == v].frac_harmed.to_numpy()
        ax.bar(i, vals.mean(), color=["#4c72b0", "#dd8452", "#8172b3"][i], alpha=0.8)
        ax.scatter(np.full(len(vals), i), vals, color="k", s=12, zorder=3)
    ax.set_xticks(range(3))
    ax.set_xticklabels([lab for _, lab in order])
    ax.set_ylabel("harmed fraction (after 10 %)")
    ax.set_title("Proxy vs exact QP (C3), digits")
    return fig


def plot_overhead(ov: pd.DataFrame):
    """Relative per-step overhead Harm-X/X − 1 along the width and input-length sweeps (C5)."""
    axes_ = list(ov.axis.unique())
    fig, axes = plt.subplots(1, len(axes_), figsize=(4.8 * len(axes_), 3.4), squeeze=False)
    for j, axis in enumerate(axes_):
        ax = axes[0, j]
        for harm, g in ov[ov.axis == axis].groupby("harm", sort=False):
            g = g.sort_values("size")
            lab = NAMES.get(harm, "Harm-SGDM, correction in momentum (1 backward)")
            ax.plot(g["size"], 100 * g.overhead, marker="o", label=lab)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("MLP width" if axis == "width" else "MNIST-1D input length")
        ax.set_ylabel("overhead Harm-X / X − 1 (%)")
        ax.set_title(f"Per-step overhead vs {axis} (C5)")
        ax.legend(fontsize=7)
    return fig
