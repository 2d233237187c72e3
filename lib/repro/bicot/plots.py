"""Figures of chapter 03 (the book's style is set by the notebook)."""
from __future__ import annotations

import numpy as np

from .metrics import roc_curve


def watermark_curve(ax, hist_wm: dict, hist_c: dict) -> None:
    ax.plot(hist_wm["step"], hist_wm["R"], label="BiCoT: mean anchor R(B) in the batch")
    ax.plot(hist_wm["step"], hist_wm["ce"], label="BiCoT: task cross-entropy")
    ax.plot(hist_c["step"], hist_c["ce"], "--", label="M0c: task cross-entropy")
    ax.set(xlabel="watermark fine-tune step", ylabel="value", title="Embedding the signature")
    ax.legend()


def ratio_hists(axes, wb: dict, names, r: int, k: int) -> None:
    bins = np.linspace(0, 1, 31)
    for name in names:
        axes[0].hist(wb[name]["R"], bins, alpha=0.5, label=name)
        axes[1].hist(wb[name]["hidden"], bins, alpha=0.5, label=name)
    axes[0].axvline(r / (k - 2), color="k", ls=":", label=f"chance r/(k−2) = {r / (k - 2):.2f}")
    axes[0].set(xlabel="anchor energy ratio R(B)", ylabel="anchors", title="Logit-space signature (what the verifier reads)")
    axes[1].set(xlabel="‖Bᵀh‖² / ‖h‖²", ylabel="anchors", title="Hidden-state signature")
    for a in axes:
        a.legend(fontsize=8)


def z_strip(ax, groups: dict) -> None:
    for i, (name, z) in enumerate(groups.items()):
        z = np.asarray(z, float)
        ax.scatter(np.full(len(z), i) + np.random.default_rng(i).uniform(-0.2, 0.2, len(z)), z, s=10, alpha=0.6)
    ax.axhline(4, color="k", ls=":", lw=1, label="z = 4")
    ax.set_xticks(range(len(groups)), list(groups), rotation=60, ha="right", fontsize=8)
    ax.set(ylabel="z = (S(B) − μ₀)/σ₀", title="Verification z per query set")
    ax.legend()


def rocs(ax, curves: dict) -> None:
    for name, (pos, neg) in curves.items():
        f, t = roc_curve(np.asarray(pos), np.asarray(neg))
        ax.plot(f, t, label=name, drawstyle="steps-post")
    ax.set(xscale="symlog", xlabel="false-positive rate", ylabel="true-positive rate", title="ROC of the z score",
           xlim=(0, 1), ylim=(-0.02, 1.02))
    ax.set_xscale("symlog", linthresh=0.01)
    ax.legend(fontsize=7)


def ft_curve(ax, steps, z, acc, trig) -> None:
    ax.plot(steps, z, "o-", label="BiCoT median z")
    ax.set(xlabel="fine-tuning attack steps", ylabel="median z", title="Fine-tuning attack")
    ax2 = ax.twinx()
    ax2.plot(steps, acc, "s--", color="C1", label="BiCoT accuracy")
    ax2.plot(steps, trig, "^--", color="C2", label="trigger verification rate")
    ax2.set(ylabel="accuracy / rate", ylim=(-0.05, 1.05))
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="lower left")


def whitening_scatter(ax, rows: list[dict]) -> None:
    acc = [100 * r["acc"] for r in rows]
    z = [r["z"] for r in rows]
    ax.plot(acc, z, "o-")
    for r, a, zz in zip(rows, acc, z):
        ax.annotate(f"λ={r['lam']:g}", (a, zz), fontsize=8, xytext=(3, 3), textcoords="offset points")
    ax.axhline(4, color="k", ls=":", lw=1)
    ax.set(xlabel="accuracy (%)", ylabel="median z", title="Whitening attack (key unknown)")
