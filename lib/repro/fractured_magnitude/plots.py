"""Figures of chapter 06 (the book's style: titles, labelled axes, legends, regimes shaded)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from repro.common import mean_ci, style

from .boards import render_image

REGIME_COLORS = {"ID": "#d9ead3", "VX": "#fff2cc", "FX": "#f4cccc"}


def shade_regimes(ax, cfg, label: bool = True) -> None:
    spans = {"ID": (-0.5, cfg.vision_boundary + 0.5), "VX": (cfg.vision_boundary + 0.5, cfg.text_boundary + 0.5),
             "FX": (cfg.text_boundary + 0.5, cfg.max_count + 0.5)}
    for name, (a, b) in spans.items():
        ax.axvspan(a, b, color=REGIME_COLORS[name], alpha=0.6, lw=0, zorder=0)
        if label:
            ax.text((a + b) / 2, 0.98, name, transform=ax.get_xaxis_transform(), ha="center", va="top", fontsize=9,
                    fontweight="bold", color="0.35")


def example_boards(axes, boards: np.ndarray, counts: np.ndarray) -> None:
    for ax, b, n in zip(axes, boards, counts):
        ax.imshow(render_image(b[None])[0], cmap="gray", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(f"{n} black stones", fontsize=10)
        ax.set_xticks([]), ax.set_yticks([])
        ax.grid(False)


def _curve(ax, x, rows, label, **kw):
    rows = np.atleast_2d(np.asarray(rows, float))
    if rows.shape[0] > 1:
        m, h = mean_ci(rows)
        style.band(ax, x, m, h, label, **kw)
    else:
        ax.plot(x, rows[0], label=label, color=kw.pop("color", style.color(label)), marker=kw.pop("marker", "o"), **kw)


def cliff(ax, cfg, curves: dict[str, np.ndarray]) -> None:
    """Exact-count accuracy vs count for several models (rows = seeds), the headline cliff."""
    x = np.arange(cfg.max_count + 1)
    shade_regimes(ax, cfg)
    for label, rows in curves.items():
        _curve(ax, x, rows, label, markersize=3)
    ax.set(xlabel="number of black stones (count)", ylabel="exact-count accuracy", ylim=(-0.03, 1.08),
           title="Enumeration by count (mean ± 95 % CI over seeds)")
    ax.legend(loc="center left")


def mean_answer(ax, cfg, preds: dict[str, np.ndarray]) -> None:
    """Mean answer vs true count (rows = seeds), with the identity line."""
    x = np.arange(cfg.max_count + 1)
    shade_regimes(ax, cfg)
    ax.plot(x, x, "k--", lw=1, label="answer = count")
    for label, rows in preds.items():
        _curve(ax, x, rows, label, markersize=3)
    ax.set(xlabel="number of black stones (count)", ylabel="mean answer", title="Mean answer vs count")
    ax.legend(loc="upper left")


def confusion(ax, cfg, n: np.ndarray, pred: np.ndarray) -> None:
    K = cfg.max_count + 1
    M = np.zeros((K, max(K, int(pred.max()) + 1)))
    for a, b in zip(n, pred):
        M[a, b] += 1
    M /= M.sum(1, keepdims=True)
    im = ax.imshow(M[:, :K].T, origin="lower", cmap="Blues", vmin=0, vmax=1, aspect="auto")
    ax.plot([0, K - 1], [0, K - 1], "r:", lw=1)
    for v in (cfg.vision_boundary + 0.5, cfg.text_boundary + 0.5):
        ax.axvline(v, color="k", lw=0.8), ax.axhline(v, color="k", lw=0.8)
    ax.set(xlabel="true count", ylabel="answer", title="Answers given each true count (first seed)")
    ax.grid(False)
    plt.colorbar(im, ax=ax, label="share of boards")


def probe_panel(ax, cfg, n: np.ndarray, probe_count: np.ndarray, ridge: np.ndarray, vlm_pred: np.ndarray) -> None:
    """Patch-probe count, ridge magnitude and the VLM's answer vs the true count (first seed)."""
    x = np.arange(cfg.max_count + 1)
    shade_regimes(ax, cfg)
    ax.plot(x, x, "k--", lw=1, label="true count")
    for label, v in (("patch probe (Σ black)", probe_count), ("ridge on pooled tokens", ridge),
                     ("VLM answer", vlm_pred)):
        ax.plot(x, [np.mean(v[n == k]) for k in x], marker="o", markersize=3, label=label, color=style.color(label))
    ax.set(xlabel="true count", ylabel="mean read-out", title="What the vision tokens hold vs what the VLM says")
    ax.legend(loc="upper left")


def eq_gap(ax, by_gap: dict[str, list[dict]]) -> None:
    """EQ accuracy by |Δcount| bin per regime (mean over seeds)."""
    regs = list(by_gap)
    bins = list(by_gap[regs[0]][0])
    w = 0.8 / len(regs)
    for i, r in enumerate(regs):
        vals = [np.mean([d.get(b, np.nan) for d in by_gap[r]]) for b in bins]
        ax.bar(np.arange(len(bins)) + (i - (len(regs) - 1) / 2) * w, vals, w, label=r, color=REGIME_COLORS[r],
               edgecolor="k", lw=0.5)
    ax.axhline(0.5, color="k", ls=":", lw=1)
    ax.set_xticks(range(len(bins)), bins)
    ax.set(xlabel="|count_text − count_board|", ylabel="comparison accuracy", ylim=(0, 1.05),
           title="Image-vs-string comparison by gap")
    ax.legend(title="both counts in", loc="lower right")


def pca_states(ax, cfg, h_img, n_img, h_txt, n_txt) -> None:
    """PCA (fitted on text states) of decoder answer-position states: text vs image, coloured by count."""
    mu = h_txt.mean(0)
    _, _, Vt = np.linalg.svd(h_txt - mu, full_matrices=False)
    P = Vt[:2].T
    zt, zi = (h_txt - mu) @ P, (h_img - mu) @ P
    norm = plt.Normalize(0, cfg.max_count)
    ax.scatter(zt[:, 0], zt[:, 1], c=n_txt, cmap="viridis", norm=norm, marker="o", s=10, alpha=0.6, label="text")
    sc = ax.scatter(zi[:, 0], zi[:, 1], c=n_img, cmap="viridis", norm=norm, marker="x", s=14, alpha=0.8,
                    label="image")
    plt.colorbar(sc, ax=ax, label="count")
    ax.set(xlabel="PC 1 of text states", ylabel="PC 2 of text states",
           title="Decoder states at the answer: text (o) vs image (x)")
    ax.legend(loc="best")


def map_panel(ax, cfg, true: np.ndarray, decoded: np.ndarray) -> None:
    """C5b: nearest-text-centroid decoding of mapped VX image states vs their true count."""
    ks = np.unique(true)
    ax.plot(ks, ks, "k--", lw=1, label="decoded = count")
    ax.fill_between(ks, ks - 2, ks + 2, color="grey", alpha=0.2, label="±2")
    ax.plot(ks, [decoded[true == k].mean() for k in ks], "o-", color=style.color("mapped image"),
            label="mapped VX image states")
    ax.set(xlabel="true count (VX)", ylabel="nearest text centroid", title="Image states mapped into the text space")
    ax.legend(loc="upper left")
