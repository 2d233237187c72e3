"""Figures of chapter 16: drift through depth, test-loss gaps per cell, the probe, one channel's distribution."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from repro.common import style

from .experiments import Experiment

LABELS = {"dense": "dense", "none": "SVD-LLM", "refit": "SVD-LLM + Decomper (refit)",
          "affine": "SVD-LLM + Decomper (affine)", "moments": "SVD-LLM + moments"}


def drift_panels(axes, exp: Experiment, ratio: float) -> None:
    """e_l, ‖ĥ_l − h_l‖ with Σ δ_l and ‖Σ ε_l‖ (uncompensated), and the same for Decomper, vs block index."""
    L = len(exp.drift["none"]["rel"])
    blocks = np.arange(1, L + 1)
    ax = axes[0]
    ax.plot(blocks, np.zeros(L), color=style.color("dense"), label="dense")
    for k in ("none", "refit"):
        ax.plot(blocks, exp.drift[k]["rel"], marker="o", color=style.color(k), label=LABELS[k])
    ax.set_xlabel("block l")
    ax.set_ylabel("relative error e_l")
    ax.set_title(f"Relative drift, {100 * ratio:.0f} % compression (test)")
    ax.legend()
    for ax, k in ((axes[1], "none"), (axes[2], "refit")):
        d = exp.drift[k]
        ax.plot(blocks, d["abs"], marker="o", color=style.color(k), label="‖ĥ_l − h_l‖ (actual)")
        ax.plot(blocks, d["cum_local"], ls="--", color="0.4", label="Σ_{k≤l} δ_k (triangle bound)")
        ax.plot(blocks, d["vec_sum_local"], ls=":", color="0.2", label="‖Σ_{k≤l} ε_k‖ (pure carry)")
        ax.set_xlabel("block l")
        ax.set_ylabel("Frobenius norm over the test windows")
        ax.set_title(f"Absolute and local errors: {LABELS[k]}")
        ax.legend()


def gap_panel(ax, table, variants) -> None:
    """Test-loss gap to the dense model per decomposition and ratio, for none and each variant."""
    methods = list(dict.fromkeys(table["method"]))
    ratios = sorted(set(table["ratio"]))
    kinds = ["none", *variants]
    width = 0.8 / len(kinds)
    xs = np.arange(len(methods) * len(ratios))
    labels = [f"{m}\n{100 * r:.0f} %" for m in methods for r in ratios]
    for j, v in enumerate(kinds):
        ys = [float(table[(table.method == m) & (table.ratio == r) & (table.variant == v)]["gap"].iloc[0])
              for m in methods for r in ratios]
        ax.bar(xs + (j - (len(kinds) - 1) / 2) * width, ys, width, label=v, color=style.color(v))
    ax.set_xticks(xs, labels, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("test loss − dense (nats/byte, log scale)")
    ax.set_title("Loss gap of each decomposition, with and without compensation")
    ax.legend()


def probe_panel(ax, exp: Experiment) -> None:
    names = list(exp.probe)
    acc = [100 * exp.probe[k].mean() for k in names]
    half = [100 * 1.96 * exp.probe[k].std(ddof=1) / np.sqrt(exp.probe[k].size) for k in names]
    ax.bar(names, acc, yerr=half, color=[style.color(k) for k in names], capsize=4)
    ax.axhline(50, color="k", ls="--", lw=1, label="chance (two choices)")
    ax.set_ylim(40, max(acc) + 8)
    ax.set_ylabel("multiple-choice accuracy (%), ±95 % CI")
    ax.set_title("Bracket / quote probe: ) vs ]  and  ' vs \"")
    ax.legend()


def channel_hist(ax, exp: Experiment) -> None:
    h = exp.hist
    lo, hi = np.percentile(np.concatenate([h["dense"], h["none"], h["refit"]]), [0.5, 99.5])
    bins = np.linspace(lo, hi, 60)
    for k in ("dense", "none", "refit"):
        ax.hist(h[k], bins=bins, histtype="step", lw=1.6, color=style.color(k), label=LABELS[k], density=True)
    ax.set_xlabel(f"last block output, channel {h['channel']} (the most drifted)")
    ax.set_ylabel("density")
    ax.set_title("Distribution alignment of one channel (test inputs)")
    ax.legend()
