"""Figures of chapter 07, in the book's style (``repro.common.style``): one function per figure of the card.

Each takes the measured tables (or per-example :class:`~repro.dirichlet_clip.metrics.TaskEval` records) and
returns the matplotlib figure; nothing here computes a number that a claim uses.
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from repro.common import mean_ci, style

from .metrics import reliability_bins

for _m in ("ucat", "tecoa", "orig", "pmg_aft", "fare", "softmax_kl", "clean_ft"):
    style.color(_m)  # one fixed colour per method, whatever the order the figures are drawn in

LABELS = {"orig": "original", "clean_ft": "clean FT", "tecoa": "TeCoA", "pmg_aft": "PMG-AFT", "fare": "FARE",
          "ucat": "UCAT", "softmax_kl": "softmax-KL"}


def label(method: str) -> str:
    return LABELS.get(method, method)


def plot_examples(suite, n: int = 6):
    """A few images of each zero-shot task with their class prompt."""
    fig, axes = plt.subplots(len(suite), n, figsize=(1.3 * n, 1.5 * len(suite)))
    for r, (name, task) in enumerate(suite.items()):
        for c in range(n):
            ax = axes[r, c]
            ax.imshow(task.images[c, 0], cmap="gray_r", vmin=0, vmax=1)
            ax.set_xticks([]), ax.set_yticks([])
            ax.grid(False)
            prompt = task.class_prompts[int(task.labels[c])].replace("a photo of the digit ", "")
            ax.set_title(prompt, fontsize=7)
            if c == 0:
                ax.set_ylabel(name, rotation=0, labelpad=14)
    fig.suptitle("Zero-shot suite: images (8×8 px) and the prompt of their class")
    return fig


def plot_calibration(cal):
    """The ε calibration: the pre-trained model's robust accuracy per task and suite-average against ε
    (validation split), the rule's threshold and the chosen radius."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    t = cal.table
    for col in [c for c in t.columns if c != "suite"]:
        ax.plot(t.index, t[col], marker=".", lw=1, alpha=0.6, label=col)
    ax.plot(t.index, t["suite"], marker="o", color="k", lw=2, label="suite average")
    ax.axhline(cal.max_rob_acc, color="0.4", ls="--", lw=1, label=f"rule: ≤ {cal.max_rob_acc:g}")
    if cal.chosen is not None:
        ax.axvline(cal.chosen, color=style.color("orig"), ls=":", lw=1.5, label=f"chosen ε = {cal.chosen:g}")
    ax.set_xlabel("attack radius ε (pixel units of [0, 1])")
    ax.set_ylabel("robust accuracy of the original model")
    ax.set_title("Calibrating the threat model on the validation split")
    ax.legend(fontsize=8)
    return fig


def plot_training_losses(runs, methods=("ucat",)):
    """CE and the regulariser per fine-tuning step (seed 0), log scale: UCAT's λ·KL dwarfs its CE."""
    fig, ax = plt.subplots()
    for m in methods:
        logv = runs[0].logs[m]
        steps = np.arange(1, len(logv.ce) + 1)
        ax.plot(steps, logv.ce, color=style.color(m), label=f"{label(m)}: CE term")
        if np.any(logv.reg > 0):  # TeCoA and clean FT have no regulariser
            ax.plot(steps, logv.reg, color=style.color(m), ls="--", label=f"{label(m)}: λ·KL term" if m == "ucat"
                    else f"{label(m)}: regulariser")
    ax.set_yscale("log")
    ax.set_xlabel("fine-tuning step")
    ax.set_ylabel("loss term (nats, log scale)")
    ax.set_title("The two terms of the UCAT loss during fine-tuning (seed 0)")
    ax.legend()
    return fig


def plot_entropy_bars(results: pd.DataFrame, methods):
    """Figure 1: mean normalised entropy, clean vs PGD, per method and task (mean ± 95% CI over seeds)."""
    tasks = sorted(results.task.unique())
    fig, axes = plt.subplots(1, len(tasks), figsize=(12, 3.6), sharey=True)
    w = 0.38
    for ax, t in zip(axes, tasks):
        d = results[results.task == t]
        for i, m in enumerate(methods):
            dm = d[d.method == m]
            for j, (col, hatch) in enumerate((("H_clean", ""), ("H_adv", "//"))):
                mu, half = mean_ci(dm[col].to_numpy())
                ax.bar(i + (j - 0.5) * w, mu, w, yerr=half, color=style.color(m), alpha=0.45 if j == 0 else 0.9,
                       hatch=hatch, edgecolor="k", linewidth=0.4, capsize=2)
        ax.set_xticks(range(len(methods)), [label(m) for m in methods], rotation=60, fontsize=8)
        ax.set_title(t)
    axes[0].set_ylabel("mean entropy / log C")
    handles = [plt.Rectangle((0, 0), 1, 1, fc="0.7", ec="k", alpha=0.45),
               plt.Rectangle((0, 0), 1, 1, fc="0.3", ec="k", hatch="//")]
    axes[-1].legend(handles, ["clean", "PGD (ε_test)"], loc="upper right")
    fig.suptitle("Does the attack suppress uncertainty? Predictive entropy, clean vs adversarial")
    return fig


def plot_reliability(runs, tasks=("T2", "T4"), methods=("tecoa", "ucat"), n_bins: int = 15):
    """Figure 2: reliability diagrams on adversarial inputs, one row per task, examples pooled over seeds."""
    from .metrics import ece

    fig, axes = plt.subplots(len(tasks), len(methods), figsize=(4.2 * len(methods), 3.6 * len(tasks)),
                             sharex=True, sharey=True, squeeze=False)
    for r, task in enumerate(tasks):
        for c, m in enumerate(methods):
            ax = axes[r, c]
            views = [run.evals[m, task].view("adv") for run in runs]
            conf = np.concatenate([v["conf"] for v in views])
            corr = np.concatenate([v["correct"] for v in views])
            b = reliability_bins(conf, corr, n_bins)
            centers = 0.5 * (b["edges"][1:] + b["edges"][:-1])
            ok = b["count"] > 0
            ax.bar(centers[ok], b["acc"][ok], width=1 / n_bins, color=style.color(m), alpha=0.8, edgecolor="k",
                   linewidth=0.4, label="accuracy in bin")
            ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
            ax.plot(centers[ok], b["conf"][ok], "k.", ms=4, label="mean confidence in bin")
            ax.set_xlim(0, 1), ax.set_ylim(0, 1)
            ax.set_title(f"{label(m)} on {task} under PGD — ECE {ece(conf, corr, n_bins):.3f}", fontsize=10)
            if r == len(tasks) - 1:
                ax.set_xlabel("softmax confidence")
            if c == 0:
                ax.set_ylabel("accuracy")
    axes[0, 0].legend(loc="upper left")
    return fig


def plot_acc_ece(results: pd.DataFrame, methods):
    """Figure 3: robust accuracy against adversarial ECE, one marker per method and task (seed means)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    markers = dict(zip(sorted(results.task.unique()), "osD^"))
    d = results.groupby(["method", "task"]).mean(numeric_only=True).reset_index()
    for m in methods:
        for _, r in d[d.method == m].iterrows():
            ax.scatter(r.rob_acc, r.ece_adv, color=style.color(m), marker=markers[r.task], s=40,
                       edgecolor="k", linewidth=0.4)
    for m in methods:
        ax.scatter([], [], color=style.color(m), label=label(m))
    for t, mk in markers.items():
        ax.scatter([], [], color="0.6", marker=mk, label=t)
    ax.set_xlabel("robust accuracy under PGD (fraction)")
    ax.set_ylabel("adversarial ECE")
    ax.set_title("Accuracy and calibration under attack, per method and task")
    ax.legend(ncol=2, fontsize=8)
    return fig


def plot_entropy_vs_eps(sweep: pd.DataFrame):
    """Figure 4: mean entropy (top) and robust accuracy (bottom) against the attack radius, per task."""
    tasks = sorted(sweep.task.unique())
    fig, axes = plt.subplots(2, len(tasks), figsize=(12, 5.6), sharex=True)
    for j, t in enumerate(tasks):
        d = sweep[sweep.task == t]
        for m in d.method.unique():
            g = d[d.method == m].pivot_table(index="seed", columns="eps", values="H_adv")
            a = d[d.method == m].pivot_table(index="seed", columns="eps", values="rob_acc")
            eps = g.columns.to_numpy()
            style.band(axes[0, j], eps, *mean_ci(g.to_numpy()), label=label(m), color=style.color(m))
            style.band(axes[1, j], eps, *mean_ci(a.to_numpy()), label=label(m), color=style.color(m))
        axes[0, j].set_title(t)
        axes[1, j].set_xlabel("attack radius ε (pixel units)")
    axes[0, 0].set_ylabel("mean entropy / log C")
    axes[1, 0].set_ylabel("accuracy under PGD")
    axes[0, -1].legend()
    fig.suptitle("Uncertainty and accuracy as the attack grows (mean ± 95% CI over seeds)")
    return fig


def plot_strength(runs, tau: float, methods=("orig", "tecoa", "ucat"), seed_index: int = 0):
    """Figure 5: histograms of the Dirichlet strength log10 α₀ (α = exp((cos+1)/τ)), clean vs PGD, all tasks."""
    fig, axes = plt.subplots(1, len(methods), figsize=(4.0 * len(methods), 3.6), sharey=True)
    run = runs[seed_index]
    tasks = sorted({t for (_, t) in run.evals})
    logs = {(m, w): np.concatenate([np.log10(run.evals[m, t].strength(w, tau)) for t in tasks])
            for m in methods for w in ("clean", "adv")}
    allv = np.concatenate(list(logs.values()))
    bins = np.linspace(allv.min(), allv.max(), 41)
    for ax, m in zip(np.atleast_1d(axes), methods):
        ax.hist(logs[m, "adv"], bins=bins, alpha=0.6, color=style.color(m), label="PGD", density=True)
        ax.hist(logs[m, "clean"], bins=bins, histtype="step", color="k", lw=1.2, label="clean", density=True)
        ax.set_xlabel("log10 Dirichlet strength α₀")
        ax.set_title(label(m))
        ax.legend()
    np.atleast_1d(axes)[0].set_ylabel("density")
    fig.suptitle(f"Dirichlet strength (confidence magnitude) on the suite, seed {seed_index}, τ = {tau:g}")
    return fig


def ci_table(avg: pd.DataFrame, cols, methods) -> pd.DataFrame:
    """'mean ± half-width' strings of the suite-average metrics, one row per method."""
    out = {}
    for m in methods:
        d = avg.xs(m, level="method")
        out[label(m)] = {c: _pm(*mean_ci(d[c].to_numpy())) for c in cols}
    return pd.DataFrame(out).T


def _pm(mu, half) -> str:
    mu, half = float(mu), float(half)
    return f"{mu:.3f}" if half == 0 or math.isnan(half) else f"{mu:.3f} ± {half:.3f}"
