"""Figures of chapter 19, in the book's style (titles, axis labels with units, legends)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.decomposition import PCA

from repro.common import style
from repro.common.stats import mean_ci

from .experiments import INIT_LABELS, LABELS
from .generators import Dataset, lorenz_sde

#: one fixed colour per method in every figure of the chapter (the untrained floor in grey)
METHOD_COLORS = {"random": "0.55", **dict(zip(("pulse", "pulse_oracle", "pulse_xwin", "dsvae", "mae", "simclr", "ts2vec",
                                              "supervised"), style.PALETTE))}
CLASS_COLORS = plt.cm.tab10.colors


def mcolor(method: str) -> str:
    return METHOD_COLORS.get(method, "k")


def windows_per_class(datasets: dict[str, Dataset], fs: int) -> plt.Figure:
    """One example window of every class of each dataset (channel 0), offset vertically."""
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.8))
    for ax, (name, ds) in zip(np.atleast_1d(axes), datasets.items()):
        T = ds.train.X.shape[1]
        t = np.arange(T) / fs if name != "Lorenz" else np.arange(T)
        for c, cname in enumerate(ds.classes):
            i = np.flatnonzero(ds.train.y == c)[0]
            ax.plot(t, ds.train.X[i, :, 0] - 4 * c, color=CLASS_COLORS[c % 10], label=cname)
        ax.set_title(f"{name}: one window per class")
        ax.set_xlabel("time (s)" if name != "Lorenz" else "time step (Δt = 1.2·10⁻³ Lorenz time units)")
        ax.set_ylabel("channel 0 (standardised), offset per class")
        ax.set_yticks([])
        ax.legend(fontsize=7, loc="upper right")
    return fig


def attractors(rhos, seed: int = 0) -> plt.Figure:
    """x-z projection of one clean (noise-free) trajectory per rho, z-scored per system."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for c, rho in enumerate(rhos):
        ys, _ = lorenz_sde(rho, n_traj=1, n_keep=1000, noise=0.0, seed=seed)
        ax.plot(ys[0, :, 0], ys[0, :, 2] + 3 * c, lw=0.8, color=CLASS_COLORS[c % 10], label=f"ρ = {rho:g}")
    ax.set_title(f"Lorenz systems of the {len(rhos)} classes (x–z plane, 1,000 steps)")
    ax.set_xlabel("x (z-scored per system)")
    ax.set_ylabel("z (z-scored per system), offset by class")
    ax.legend()
    return fig


def method_bars(table: pd.DataFrame, metric: str, title: str, order=None, ylabel: str | None = None) -> plt.Figure:
    """Mean ± 95% CI over seeds of ``metric`` per method, seeds as dots."""
    order = [m for m in (order or table.method.unique()) if m in set(table.method)]
    fig, ax = plt.subplots(figsize=(1.0 * len(order) + 3.5, 3.8))
    for k, m in enumerate(order):
        v = table[table.method == m].groupby("seed")[metric].mean().to_numpy()
        mu, h = mean_ci(v)
        ax.bar(k, mu, yerr=h, color=mcolor(m), alpha=0.8, capsize=4, label=LABELS[m])
        ax.plot(np.full(len(v), k), v, "k.", ms=4, label="one seed" if k == 0 else None)
    ax.set_xticks(range(len(order)), [LABELS[m] for m in order], rotation=30, ha="right")
    lo = table[metric].min()
    ax.set_ylim(max(0, lo - 0.1), min(1.0, table[metric].max() + 0.05))
    ax.set_ylabel(ylabel or metric)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def r2_map(table: pd.DataFrame, order=None) -> plt.Figure:
    """Ridge R² of the code for the system (log rho) against the window's own state, per method (seed means ± CI)."""
    order = [m for m in (order or table.method.unique()) if m in set(table.method)]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for m in order:
        g = table[table.method == m]
        (xs, hx), (ys, hy) = mean_ci(g.r2_state.to_numpy()), mean_ci(g.r2_log_rho.to_numpy())
        ax.errorbar(xs, ys, xerr=hx, yerr=hy, fmt="o", color=mcolor(m), capsize=3, label=LABELS[m])
    ax.set_xlabel("R² for the window's own state (x(t₀), window mean)  — want low")
    ax.set_ylabel("R² for the system, log ρ  — want high")
    ax.set_title("What the pooled code keeps (Lorenz, held-out windows)")
    ax.legend(fontsize=8)
    return fig


def pca_codes(Z: dict[str, np.ndarray], ds: Dataset, title: str) -> plt.Figure:
    """PCA of the held-out codes coloured by class (left) and by x(t0) (right)."""
    Zh = np.concatenate([Z["val"], Z["test"]])
    y = np.concatenate([ds.val.y, ds.test.y])
    x0 = np.concatenate([ds.val.targets["x_t0"][:, 0], ds.test.targets["x_t0"][:, 0]])
    P = PCA(2).fit_transform((Zh - Zh.mean(0)) / (Zh.std(0) + 1e-8))
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for c, cname in enumerate(ds.classes):
        ax[0].scatter(*P[y == c].T, s=6, color=CLASS_COLORS[c % 10], label=cname)
    ax[0].legend(fontsize=7, markerscale=2)
    sc = ax[1].scatter(*P.T, s=6, c=x0, cmap="coolwarm")
    fig.colorbar(sc, ax=ax[1], label="x(t₀) (z-scored)")
    for a, what in zip(ax, ("class (ρ)", "the window's initial state x(t₀)")):
        a.set_xlabel("PC 1 (a.u.)")
        a.set_ylabel("PC 2 (a.u.)")
        a.set_title(f"{title}: coloured by {what}", fontsize=10)
    return fig


def reconstructions(model, ds: Dataset, i: int = 0, t0s=(0, 30), fs: float | None = None) -> plt.Figure:
    """A held-out window and PULSE's reconstruction from two starts t0 (channel 0)."""
    x = ds.test.X[i:i + 1]
    T = x.shape[1]
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    ax.plot(np.arange(T), x[0, :, 0], "k", lw=2, label="window x (channel 0)")
    for t0 in t0s:
        pred = model.reconstruct_windows(x, t0)[0, : T - 1 - t0, 0]
        ax.plot(np.arange(t0 + 1, T), pred, "--", label=f"x̂ from c, d and h₀ read at t₀ = {t0}")
        ax.axvline(t0, color="0.6", lw=0.8, label="start t₀" if t0 == t0s[0] else None)
    ax.set_xlabel("time step")
    ax.set_ylabel("channel 0 (standardised)")
    ax.set_title("PULSE's decoder: rebuild the trajectory from the code and a local start")
    ax.legend(fontsize=8)
    return fig


def label_efficiency(le: pd.DataFrame) -> plt.Figure:
    """Test accuracy against the fraction of training labels (mean ± 95% CI over seeds)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for m in le.method.unique():
        g = le[le.method == m].groupby(["frac", "seed"]).acc.mean().unstack()
        mu, h = mean_ci(g.to_numpy(), axis=1)
        name = "supervised from scratch" if m == "supervised" else f"linear probe on {LABELS[m]}"
        style.band(ax, g.index.to_numpy(), mu, h, label=name, color=mcolor(m))
    ax.set_xscale("log")
    ax.set_xlabel("fraction of training labels (log scale)")
    ax.set_ylabel("test accuracy (ECG, 4 classes)")
    ax.set_title("Label efficiency")
    ax.legend(fontsize=8)
    return fig


def noise_curve(noise: pd.DataFrame, seed: int) -> plt.Figure:
    """Probe accuracy of PULSE and DSVAE against the Lorenz process noise: mean ± 95% CI over the training runs
    (seeds ``seed``, ``seed + 1``, ...) at each level, every run as a dot."""
    fig, ax = plt.subplots(figsize=(6.0, 3.8))
    n_runs = noise.seed.nunique()
    for k, m in enumerate(("pulse", "dsvae")):
        g = noise[noise.method == m]
        lv = np.sort(g.noise.unique())
        stats = [mean_ci(g[g.noise == v].acc.to_numpy()) for v in lv]
        mu, h = np.array([s[0] for s in stats]), np.array([s[1] for s in stats])
        ax.errorbar(lv + (k - 0.5) * 0.004, mu, yerr=h, marker="o", capsize=3, color=mcolor(m), label=LABELS[m])
        ax.plot(g.noise + (k - 0.5) * 0.004, g.acc, ".", color=mcolor(m), alpha=0.4, ms=4)
    ax.set_xlabel("process-noise level g (fraction of the clean RMS)")
    runs = f"seed {seed}" if n_runs == 1 else f"{n_runs} training runs from seed {seed}, mean ± 95% CI"
    ax.set_ylabel(f"probe accuracy (Lorenz; {runs})", fontsize=8)
    ax.set_title("Accuracy as the noise grows")
    ax.legend()
    return fig


def transfer_bars(tr: pd.DataFrame) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6.0, 3.8))
    for k, init in enumerate(tr.init.unique()):
        v = tr[tr.init == init].acc.to_numpy()
        mu, h = mean_ci(v)
        ax.bar(k, mu, yerr=h, capsize=4, color=mcolor(init), alpha=0.8, label=INIT_LABELS[init])
        ax.plot(np.full(len(v), k), v, "k.", ms=4, label="one seed" if k == 0 else None)
    ax.set_xticks(range(tr.init.nunique()), [INIT_LABELS[i] for i in tr.init.unique()])
    ax.set_ylabel("fine-tuned test accuracy (PPG-like, 3 classes)")
    ax.set_ylim(max(0, tr.acc.min() - 0.1), 1.0)
    ax.set_title("Transfer ECG → PPG (end-to-end fine-tuning)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def loss_curves(logs: dict, seed: int, methods) -> plt.Figure:
    """Training-batch losses (thin) and the held-out objective at the checkpoints (dots, K1's measurement), each
    divided by its first value."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for m in methods:
        lg = logs.get((seed, m))
        if lg is None or not lg.losses:
            continue
        l = np.asarray(lg.losses)
        ax.plot(np.arange(1, len(l) + 1), l / l[0], color=mcolor(m), lw=0.7, alpha=0.45)
        ev = np.asarray(getattr(lg, "eval_losses", []) or [], float)
        if ev.size:
            ax.plot(lg.eval_steps, ev / ev[0], "o-", color=mcolor(m), ms=3.5, lw=1.4, label=LABELS[m])
        else:
            ax.plot([], [], color=mcolor(m), label=LABELS[m])
    n = max((len(lg.losses) for k, lg in logs.items() if k[0] == seed and lg.losses), default=0)
    if n:
        ax.axvspan(0.9 * n, n, color="0.9", zorder=0)
    ax.set_xlabel("optimizer step (shaded: the last 10%, K1's window)")
    ax.set_ylabel("loss / its first value")
    ax.set_title(f"Pretraining losses (seed {seed}): training batches (thin), held-out (dots)")
    ax.legend(fontsize=8, ncol=2)
    return fig
