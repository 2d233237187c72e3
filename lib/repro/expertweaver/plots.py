"""Figures and tables of chapter 05, in the book's style (titles, axis labels with units, legends)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from repro.common import style
from repro.common.stats import mean_ci

from .convert import LABELS
from .data import DOMAINS
from .model import Routing
from .profile import selectivity_index


def frequency_panels(axes, st, d_ff: int) -> None:
    """Per layer: histogram of activation frequency f_i, split by domain selectivity (C1)."""
    for layer, ax in enumerate(axes):
        f, s = st.freq[layer], selectivity_index(st.freq_by_domain[layer])
        bins = np.linspace(0, 1, 26)
        hi = s > 1.5
        ax.hist([f[~hi], f[hi]], bins=bins, stacked=True, label=["selectivity ≤ 1.5", "selectivity > 1.5"],
                color=[style.color("low selectivity"), style.color("high selectivity")])
        ax.axvline(0.9, color="k", ls=":", lw=1)
        ax.set_title(f"layer {layer}: {100 * st.universal_frac[layer]:.1f} % universal")
        ax.set_xlabel("activation frequency f_i")
    axes[0].set_ylabel(f"neurons (of {d_ff})")
    axes[0].legend(loc="upper right")


def shared_size_panel(ax, st, sizes: dict, d_ff: int, budgets) -> None:
    """|U_l| / d_ff by layer: universal fraction (trained, random init) and the shared sizes of each budget."""
    L = np.arange(len(st.universal_frac))
    ax.plot(L, 100 * np.asarray(st.universal_frac), "o-", color="k", label="universal (trained)")
    ax.plot(L, 100 * np.asarray(st.universal_frac_init), "x--", color="gray", label="universal (random init)")
    for b in budgets:
        ax.plot(L, 100 * np.asarray(sizes[(b, "expertweaver")]) / d_ff, "s-", color=style.color(f"b{b}"),
                label=f"shared |U_l|, adaptive, {100 * b:g} %")
        ax.plot(L, 100 * np.asarray(sizes[(b, "cmoe")]) / d_ff, ":", color=style.color(f"b{b}"),
                label=f"shared, uniform, {100 * b:g} %")
    ax.set_xticks(L)
    ax.set_xlabel("layer")
    ax.set_ylabel("% of d_ff")
    ax.set_title("Universal neurons and shared-expert sizes")
    ax.legend(fontsize=7, ncol=2)


def coactivation_panel(ax, G: np.ndarray, r: Routing, title: str) -> None:
    """Cosine co-activation of neurons reordered by assignment: shared first, then expert by expert."""
    order = np.r_[np.flatnonzero(r.shared.numpy()),
                  np.concatenate([np.flatnonzero(r.expert_of.numpy() == e) for e in range(r.n_experts)])]
    im = ax.imshow(G[np.ix_(order, order)], cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
    edges = np.cumsum([int(r.shared.sum())] + [int((r.expert_of == e).sum()) for e in range(r.n_experts)])
    for e in edges[:-1]:
        ax.axhline(e - 0.5, color="w", lw=0.4)
        ax.axvline(e - 0.5, color="w", lw=0.4)
    ax.set_title(title)
    ax.set_xlabel("neuron (shared, then expert by expert)")
    ax.set_ylabel("neuron")
    plt.colorbar(im, ax=ax, label="cosine of activation patterns")


def loss_table(losses: pd.DataFrame, dense: dict) -> pd.DataFrame:
    """Held-out loss (nats/byte) per domain, mean ± 95 % CI half-width over conversion seeds."""
    rows = []
    for (b, m), d in losses.groupby(["budget", "method"], sort=False):
        row = {"budget": f"{100 * b:g} %", "method": LABELS[m]}
        for col in (*DOMAINS, "mean"):
            mu, h = mean_ci(d[col].to_numpy(float))
            row[col] = f"{mu:.3f} ± {h:.3f}" if len(d) > 1 else f"{mu:.3f}"
        rows.append(row)
    rows.append({"budget": "100 %", "method": "dense", **{c: f"{dense[c]:.3f}" for c in (*DOMAINS, "mean")}})
    return pd.DataFrame(rows).set_index(["budget", "method"])


def budget_panel(ax, losses: pd.DataFrame, dense: float, methods) -> None:
    """Mean held-out loss against the active budget, one line per method (mean ± 95 % CI over seeds)."""
    for m in methods:
        d = losses[losses.method == m].groupby("budget")["mean"]
        b = np.array(sorted(d.groups))
        mu = np.array([d.get_group(x).mean() for x in b])
        h = np.array([mean_ci(d.get_group(x).to_numpy(float))[1] for x in b])
        ax.errorbar(100 * b, mu, yerr=h, marker="o", capsize=3, color=style.color(m), label=LABELS[m])
    ax.axhline(dense, color="k", ls=":", label="dense")
    ax.set_xlabel("active FFN neurons per token (%)")
    ax.set_ylabel("held-out loss (nats/byte, mean of 3 domains)")
    ax.set_title("Training-free conversion at matched budgets")
    ax.legend(fontsize=7)


#: Downcycling inits: the same architecture and shared sizes, different partitions.
DOWNCYCLE_LABELS = {"expertweaver": "ExpertWeaver (universal shared, pattern clusters)",
                    "random_split": "random split (random shared, random experts)",
                    "moefication": "MoEfication (random shared, weight clusters)"}


def downcycle_panel(ax, curves: dict, steps, dense: float) -> None:
    """Validation loss against continued-training step for each init (mean ± 95 % CI over seeds)."""
    for m, c in curves.items():
        mu, h = mean_ci(np.asarray(c))
        ax.plot(steps, mu, "o-", color=style.color(m), label=f"{DOWNCYCLE_LABELS[m]} init")
        ax.fill_between(steps, mu - h, mu + h, color=style.color(m), alpha=0.2)
    ax.axhline(dense, color="k", ls=":", label="dense (before conversion)")
    ax.set_xlabel("continued-training step")
    ax.set_ylabel("validation loss (nats/byte)")
    ax.set_title("Downcycling: 1 shared + top-2 of 16")
    ax.legend(fontsize=8)
