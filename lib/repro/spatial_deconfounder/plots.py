"""Figures of chapter 13: maps of one replicate, U against its recovery, standardized bias per method across
seeds, R²(U | Ẑ) against the encoder radius, bias against κ. Means with 95 % t-intervals over seeds."""
from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LinearRegression

from repro.common import mean_ci, style

from .data import SpatialData
from .verdicts import METHOD_NAMES


def label(m: str) -> str:
    return METHOD_NAMES.get(m, m)


def _grid(data: SpatialData, values: np.ndarray) -> np.ndarray:
    g = np.full(data.A.size, np.nan)
    g[data.idx] = values
    return g.reshape(data.shape)


def maps(axes, data: SpatialData, Z: np.ndarray) -> None:
    """U, A, Y and the first principal direction of Ẑ (sign aligned with U) on the evaluated grid."""
    zc = Z - Z.mean(0)
    z1 = zc @ np.linalg.svd(zc, full_matrices=False)[2][0]
    U = data.at(data.U)
    z1 *= np.sign(np.corrcoef(z1, U)[0, 1]) or 1.0
    for ax, (title, v, cmap) in zip(axes, [("hidden confounder U", U, "RdBu_r"),
                                           ("treatment A", data.at(data.A), "Greys"),
                                           ("outcome Y", data.at(data.Y), "viridis"),
                                           ("Ẑ, first principal direction", z1, "RdBu_r")]):
        im = ax.imshow(_grid(data, v), cmap=cmap, interpolation="nearest")
        ax.set_title(title)
        ax.set_xlabel("column (cells)")
        ax.set_ylabel("row (cells)")
        ax.grid(False)
        plt.colorbar(im, ax=ax, shrink=0.75)


def recovery_scatter(ax, U: np.ndarray, Z: np.ndarray, train: np.ndarray, test: np.ndarray, r2: float) -> None:
    """Held-out U against its linear prediction from Ẑ."""
    pred = LinearRegression().fit(Z[train], U[train]).predict(Z[test])
    ax.scatter(U[test], pred, s=6, alpha=0.5, color=style.color("SD"))
    lim = [min(U[test].min(), pred.min()), max(U[test].max(), pred.max())]
    ax.plot(lim, lim, "k--", lw=1, label="y = x")
    ax.set_xlabel("U on held-out units (sd units)")
    ax.set_ylabel("linear prediction from Ẑ")
    ax.set_title(f"recovery of U, held-out R² = {r2:.2f}")
    ax.legend()


def bias_strip(ax, biases: Mapping[str, np.ndarray], effect: str) -> None:
    """Per-seed signed standardized bias per method, mean ± 95 % CI."""
    names = list(biases)
    for i, m in enumerate(names):
        b = np.asarray(biases[m])
        c = style.color(label(m))
        ax.scatter(np.full(b.size, i) + np.linspace(-0.15, 0.15, b.size), b, s=12, alpha=0.6, color=c)
        if b.size > 1:
            mean, half = mean_ci(b)
            ax.errorbar(i + 0.3, mean, yerr=half, fmt="D", color=c, capsize=3)
    ax.axhline(0, color="k", lw=1)
    ax.set_xticks(range(len(names)), [label(m) for m in names], rotation=35, ha="right")
    ax.set_ylabel("standardized bias (τ̂ − τ)/sd(Y)")
    ax.set_title(f"{effect} effect: bias per seed (dots), mean ± 95 % CI (diamonds)")


def radius_panel(ax, r2_by_radius: Mapping[int, np.ndarray], r2_x: np.ndarray, r2_iid: float | None = None) -> None:
    rs = sorted(r2_by_radius)
    means = np.array([np.mean(r2_by_radius[r]) for r in rs])
    halves = np.array([mean_ci(np.asarray(r2_by_radius[r]))[1] if len(r2_by_radius[r]) > 1 else 0 for r in rs])
    style.band(ax, np.array(rs), means, halves, "SD, GMRF prior")
    ax.axhline(np.mean(r2_x), color="k", ls=":", lw=1, label="R²(U | X)")
    ax.set_xticks(rs)
    ax.set_xlabel("encoder radius r_enc (cells)")
    ax.set_ylabel("held-out R²(U | Ẑ)")
    ax.set_title("interference reveals the confounder")
    ax.legend()


def kappa_panel(ax, bias_by_kappa: Mapping[str, Mapping[float, np.ndarray]]) -> None:
    """Mean |direct bias| against κ per method (same seeds, common random numbers)."""
    for m, d in bias_by_kappa.items():
        ks = np.array(sorted(d))
        vals = [np.abs(np.asarray(d[k])) for k in ks]
        mean = np.array([v.mean() for v in vals])
        half = np.array([mean_ci(v)[1] if v.size > 1 else 0 for v in vals])
        style.band(ax, ks, mean, half, label(m))
    ax.set_xlabel("confounding strength κ")
    ax.set_ylabel("mean |standardized direct bias|")
    ax.set_title("bias against confounding strength")
    ax.legend()


def cvae_curves(ax, history: dict) -> None:
    ax.plot(history["epoch"], history["train_bce"], label="train BCE")
    ax.plot(history["epoch"], history["val_bce"], label="held-out BCE")
    ax2 = ax.twinx()
    ax2.plot(history["epoch"], history["val_kl"], color="k", ls="--", label="held-out KL term")
    ax2.set_ylabel("KL term per pixel and latent dim\n(nats, constants dropped)")
    ax.set_xlabel("epoch")
    ax.set_ylabel("BCE of the centre treatment (nats)")
    ax.set_title("C-VAE training")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2)
