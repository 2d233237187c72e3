"""The figures of chapter 01 (book style from ``repro.common.style``; one function per figure)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from repro.common import mean_ci, style

from .data import WORDS


def sample_grid(samples: dict, erased: list[int], title: str, per_digit: int = 1):
    """Rows = methods, columns = digits 0-9 (the first sample of each digit's prompts); erased columns framed red."""
    methods = list(samples)
    fig, axes = plt.subplots(len(methods), 10 * per_digit, figsize=(0.75 * 10 * per_digit + 1.2, 0.8 * len(methods) + 0.6),
                             squeeze=False)
    for r, m in enumerate(methods):
        s = samples[m]
        for d in range(10):
            rows = np.flatnonzero(s.label == d)[:per_digit]
            for j, i in enumerate(rows):
                ax = axes[r, d * per_digit + j]
                ax.imshow(s.x[i].reshape(8, 8), cmap="gray_r", vmin=-1, vmax=1)
                ax.set_xticks([]); ax.set_yticks([]); ax.grid(False)
                for sp in ax.spines.values():
                    sp.set_visible(d in erased)
                    sp.set_color("#cf222e"); sp.set_linewidth(2)
                ax.set_title(f"{WORDS[d]}\n→ {s.pred[i]}", fontsize=7) if r == 0 else ax.set_title(f"→ {s.pred[i]}", fontsize=7)
        axes[r, 0].set_ylabel(m, rotation=0, ha="right", va="center", fontsize=8)
    fig.suptitle(title + " (column: prompted digit; '→': classifier's label; red frame: erased)", fontsize=9)
    return fig


def method_bars(table: dict[str, dict[str, list[float]]], metrics: list[tuple[str, str]], title: str,
                unmatched: set[str] = frozenset()):
    """Grouped bars, mean ± 95% CI over seeds: ``table[method][metric]`` is the list over seeds. Methods in
    ``unmatched`` (a baseline that missed the matched erasure level) are hatched and labelled so."""
    methods = list(table)
    fig, ax = plt.subplots(figsize=(9.5, 4.0))
    width = 0.8 / len(methods)
    x = np.arange(len(metrics))
    for j, m in enumerate(methods):
        means, halves = zip(*[mean_ci(np.asarray(table[m][key], float)) for key, _ in metrics])
        ax.bar(x + (j - (len(methods) - 1) / 2) * width, means, width, yerr=halves, capsize=2,
               label=m + (" (unmatched)" if m in unmatched else ""), color=style.color(m),
               hatch="//" if m in unmatched else None, edgecolor="white" if m in unmatched else None)
    ax.set_xticks(x, [lab for _, lab in metrics])
    ax.set_ylabel("fraction of samples")
    ax.set_ylim(0, 1.05)
    ax.axhline(0.15, color="k", ls=":", lw=1, label="erasure threshold 0.15")
    ax.set_title(title)
    ax.legend(ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.24))
    return fig


def norm_vs_cosine(cos: np.ndarray, norms: np.ndarray, groups: dict[str, np.ndarray], title: str):
    """Adapter norm ||A(c)B(c)||_F at k = K against the prompt's cosine similarity to the target's mean embedding."""
    fig, ax = plt.subplots()
    look = [("#cf222e", "o"), ("#cf222e", "^"), ("#0b5394", "o"), ("#45818e", "^"), ("#38761d", "s")]
    for (name, idx), (col, mk) in zip(groups.items(), look):
        ax.scatter(cos[idx], norms[idx], s=18, label=name, color=col, marker=mk, alpha=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("cosine similarity to the target digit's mean prompt embedding")
    ax.set_ylabel("adapter norm ‖A(c)B(c)‖$_F$ at k = K")
    ax.set_title(title)
    ax.legend()
    return fig


def esd_along_k(curves: dict[str, tuple[list[int], np.ndarray]], K: int, title: str):
    """L_ESD along pseudo-time k: each entry name -> (ks, values (n_seeds, len(ks)) or (len(ks),))."""
    fig, ax = plt.subplots()
    for name, (ks, vals) in curves.items():
        vals = np.atleast_2d(np.asarray(vals, float))
        m, h = mean_ci(vals)
        style.band(ax, np.asarray(ks), m, h, label=name)
    ax.set_xlabel(f"pseudo-time k (hypernetwork) / GD step (explicit), K = {K}")
    ax.set_ylabel("ESD loss on target states (MSE)")
    ax.set_title(title)
    ax.legend()
    return fig


def m_sweep(ms: list[int], drops: dict[str, list[float]], worst: dict[str, list[float]], title: str):
    """Left: retain-accuracy drop vs m; right: the worst erased digit's target rate vs m."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.5, 3.6))
    def look(name: str) -> dict:
        base = name.split(" (")[0]
        return {"color": style.color(base), "ls": "--" if "summed" in name else "-"}

    for name, v in drops.items():
        a1.plot(ms, 100 * np.asarray(v), marker="o", label=name, **look(name))
    a1.set_xlabel("number of erased digits m"); a1.set_ylabel("retain-accuracy drop vs base (points)")
    a1.set_title("collateral damage"); a1.set_xticks(ms)
    for name, v in worst.items():
        a2.plot(ms, v, marker="o", label=name, **look(name))
    a2.axhline(0.2, color="k", ls=":", lw=1, label="C5 threshold 0.2")
    a2.set_xlabel("number of erased digits m"); a2.set_ylabel("max target rate over erased digits")
    a2.set_title("erasure"); a2.set_xticks(ms); a2.set_ylim(-0.02, 1.02)
    a2.legend(fontsize=8)
    a1.legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    return fig


def backbone_bars(rows: list[tuple[str, float, float, tuple[float, float]]], title: str):
    """Base and UnHype target rates per backbone; rows (backbone, base rate, UnHype rate, UnHype 95% CI)."""
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r[1] for r in rows], 0.4, label="base", color=style.color("base"))
    ci = np.array([[r[2] - r[3][0], r[3][1] - r[2]] for r in rows]).T
    ax.bar(x + 0.2, [r[2] for r in rows], 0.4, yerr=ci, capsize=3, label="UnHype", color=style.color("UnHype"))
    ax.axhline(0.2, color="k", ls=":", lw=1, label="C6 threshold 0.2")
    ax.set_xticks(x, [r[0] for r in rows])
    ax.set_ylabel("target rate (fraction of samples)")
    ax.set_ylim(0, 1.05)
    ax.set_title(title)
    ax.legend()
    return fig
