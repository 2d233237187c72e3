"""The book's one plotting style: a readable size, labelled axes, a fixed colour per method name."""
from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

PALETTE = ("#0b5394", "#cc4125", "#38761d", "#b45f06", "#674ea7", "#45818e", "#a61c00", "#7f6000",
           "#c27ba0", "#3d85c6", "#6aa84f", "#e69138", "#8e7cc3", "#76a5af", "#999999", "#000000")
_assigned: dict[str, str] = {}


def use() -> None:
    """Apply the style (call once at the top of a chapter)."""
    mpl.rcParams.update({
        "figure.figsize": (6.4, 4.0),
        "figure.dpi": 100,
        "savefig.dpi": 150,
        "figure.constrained_layout.use": True,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.titlesize": 12,
        "axes.labelsize": 11,
        "legend.fontsize": 9,
        "legend.frameon": False,
        "lines.linewidth": 1.8,
        "lines.markersize": 5,
        "axes.prop_cycle": mpl.cycler(color=PALETTE),
        "svg.hashsalt": "repro",
    })


def color(method: str) -> str:
    """The same colour for the same method everywhere in the book."""
    if method not in _assigned:
        _assigned[method] = PALETTE[len(_assigned) % len(PALETTE)]
    return _assigned[method]


def band(ax: plt.Axes, x: np.ndarray, mean: np.ndarray, half: np.ndarray, label: str, **kw) -> None:
    """A mean line with its 95% CI as a shaded band."""
    c = kw.pop("color", color(label))
    ax.plot(x, mean, color=c, label=label, marker=kw.pop("marker", "o"), **kw)
    ax.fill_between(x, mean - half, mean + half, color=c, alpha=0.2, linewidth=0)


def guide(ax: plt.Axes, x: np.ndarray, y0: float, slope: float, label: str) -> None:
    """A dashed reference line y = y0 (x / x0)^slope on log–log axes."""
    x = np.asarray(x, float)
    ax.plot(x, y0 * (x / x[0]) ** slope, "k--", lw=1, alpha=0.6, label=label)
