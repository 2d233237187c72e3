"""Figures of chapter 08: gap-vs-n curves on log–log axes with fitted slopes, e(T), n·Gap vs β.

Gaps are summarised the way the slopes are fitted (card, "Claims"): the seed-mean of log(gap), shown as
its geometric mean with a 95% t-interval over seeds taken on the log scale.
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from repro.common import mean_ci, style

from .experiments import fit_slope, gap_matrix

LABELS = {
    "rose": "ROSE (exact plug-in)",
    "sos_md": "SOS-MD (T self-play steps)",
    "plugin": "plug-in Nash VI (β=0)",
    "pnvi": "PNVI, c=0.1",
    "pnvi_c1": "PNVI, c=1",
    "rose_lcb": "ROSE-LCB (pessimistic Q)",
}


def geo_summary(df: pd.DataFrame, method: str, metric: str, by: str = "n") -> pd.DataFrame:
    """Per grid point: geometric mean over seeds and its 95% interval (t-interval of log values)."""
    grid, G = gap_matrix(df, method, metric, by=by)
    m, h = mean_ci(np.log(np.maximum(G, 1e-300)), axis=0)
    return pd.DataFrame({by: grid, "geo_mean": np.exp(m), "lo": np.exp(m - h), "hi": np.exp(m + h)})


def gap_curves(ax: plt.Axes, df: pd.DataFrame, methods: Sequence[str], metric: str, n_min: int,
               guide_slope: float | None = None) -> dict[str, float]:
    """Plot each method's gap against n with its fitted slope (on n >= n_min) in the legend."""
    slopes = {}
    for m in methods:
        s = geo_summary(df, m, metric)
        grid, G = gap_matrix(df, m, metric)
        slope = fit_slope(grid, G, n_min, n_boot=1)[0] if (grid >= n_min).sum() >= 2 else float("nan")
        slopes[m] = slope
        c = style.color(m)
        ax.plot(s["n"], s["geo_mean"], marker="o", color=c, ls="--" if m == "sos_md" else "-",
                label=f"{LABELS.get(m, m)} (slope {slope:+.2f})")
        ax.fill_between(s["n"], s["lo"], s["hi"], color=c, alpha=0.2, linewidth=0)
    if guide_slope is not None:
        first = geo_summary(df, methods[0], metric)
        style.guide(ax, first["n"].to_numpy(), float(first["geo_mean"].iloc[0]), guide_slope,
                    f"slope {guide_slope:g} guide")
    ax.axvspan(n_min, df["n"].max(), color="grey", alpha=0.08, label="fitted range")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("episodes in the offline dataset, n")
    ax.legend()
    return slopes
