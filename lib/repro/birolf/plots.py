"""Figures of chapter 02, in the book's style (``repro.common.style``): titles, labelled axes, legends."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from repro.common import mean_ci, style

from .agents import AGENT_LABELS, rho_t
from .run import SettingResult

__all__ = ["AGENT_STYLE", "agent_style", "label", "plot_gram", "plot_unmatched", "plot_convergence", "plot_regret", "plot_regret_pair", "plot_final", "plot_timing"]


# One colour per agent of this chapter (the palette has exactly eight), fixed line styles for the weakest
# baselines so that similar hues stay apart.
AGENT_STYLE = {
    "birolf": (style.PALETTE[0], "-"), "oful": (style.PALETTE[1], "-"), "linucb": (style.PALETTE[2], "-"),
    "rolf": (style.PALETTE[3], "-"), "lints": (style.PALETTE[4], "-."), "ucb": (style.PALETTE[5], "--"),
    "dr_lasso": (style.PALETTE[6], ":"), "estr_lowoful": (style.PALETTE[7], "-"),
    "ucb_code": (style.PALETTE[5], ":"), "oful_true": (style.PALETTE[1], "--"),
}


def agent_style(key: str) -> tuple[str, str]:
    """(colour, line style) of an agent key; a variant "birolf@..." keeps BiRoLF's colour, dashed."""
    name, _, extra = key.partition("@")
    colour, ls = AGENT_STYLE.get(name, ("#57606a", "-"))
    return colour, ("--" if extra else ls)


def label(key: str) -> str:
    name, _, extra = key.partition("@")
    return AGENT_LABELS.get(name, name) + (f" ({extra})" if extra else "")


def plot_gram(X_aug: np.ndarray, d: int, ax: plt.Axes | None = None) -> plt.Axes:
    """Heat map of |X̃ᵀX̃|: blockdiag(XXᵀ, I), zero off the diagonal blocks."""
    ax = ax or plt.subplots(figsize=(4.2, 3.6))[1]
    G = X_aug.T @ X_aug
    im = ax.imshow(np.log10(np.abs(G) + 1e-17), cmap="viridis", vmin=-17, vmax=np.log10(np.abs(G).max()))
    ax.axhline(d - 0.5, color="w", lw=1)
    ax.axvline(d - 0.5, color="w", lw=1)
    ax.set_title(r"$\log_{10}|\tilde X^\top \tilde X|$ (M=%d, $d_x$=%d)" % (G.shape[0], d))
    ax.set_xlabel("column of the Gram (coordinate)")
    ax.set_ylabel("row of the Gram (coordinate)")
    ax.grid(False)
    plt.colorbar(im, ax=ax, label=r"$\log_{10}$ |entry|")
    return ax


def plot_unmatched(p: float, delta: float, T: int, ax: plt.Axes | None = None) -> plt.Axes:
    """Probability (1 − p)^{ρ_t + 1} that round t is unmatched, and ρ_t + 1 (the redraw budget)."""
    ax = ax or plt.subplots()[1]
    t = np.arange(1, T + 1)
    rho = np.array([rho_t(s, p, delta) for s in t])
    ax.loglog(t, (1 - p) ** (rho + 1), color=style.PALETTE[0], label=r"$P(\mathrm{unmatched}) = (1-p)^{\rho_t+1}$")
    ax.set_xlabel("round t")
    ax.set_ylabel("probability")
    ax.set_title(f"Matching almost never fails (p = {p}, δ = {delta})")
    ax2 = ax.twinx()
    ax2.semilogx(t, rho + 1, color=style.PALETTE[1], ls="--", label=r"draws allowed $\rho_t+1$")
    ax2.set_ylabel("draws allowed")
    ax2.grid(False)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper center")
    return ax


def plot_convergence(paths: dict[str, list[tuple[int, float]]], target: float, size: int,
                     ax: plt.Axes | None = None) -> plt.Axes:
    """KKT residual against FISTA iteration for the full problem and for each block."""
    ax = ax or plt.subplots()[1]
    for k, (name, path) in enumerate(paths.items()):
        it, kkt = zip(*path)
        ax.semilogy(it, np.maximum(kkt, 1e-16), label=name, color=style.PALETTE[k % len(style.PALETTE)])
    ax.axhline(target, color="k", ls=":", lw=1, label="KKT target 1e-9·max|B|")
    ax.set_xscale("log")
    ax.set_ylim(top=1e3 * max(max(k for _, k in path) for path in paths.values()))
    ax.set_xlabel("FISTA iteration")
    ax.set_ylabel("KKT residual")
    ax.set_title(f"One random instance (M=N={size}): full problem vs its blocks")
    ax.legend(loc="upper right", ncol=2, fontsize=8)
    return ax


def plot_regret(res: SettingResult, ax: plt.Axes | None = None, title: str | None = None,
                keys: list[str] | None = None, zoom: bool = False) -> plt.Axes:
    """Cumulative pseudo-regret, mean ± 95% CI over seeds, with the end of BiRoLF's forced exploration.

    ``zoom``: cut the y axis at 1.2 × the median over agents of the mean R(T), to separate the better half.
    """
    ax = ax or plt.subplots(figsize=(7.0, 4.4))[1]
    T = res.setting.T
    keys = keys or list(res.curves)
    if zoom:
        ax.set_ylim(0, 1.2 * float(np.median([res.curves[k][:, -1].mean() for k in keys])))
    t = np.unique(np.r_[np.linspace(1, T, 200).astype(int), T])
    for key in keys:
        m, h = mean_ci(res.curves[key][:, t - 1])
        colour, ls = agent_style(key)
        style.band(ax, t, m, h, label(key), marker="", color=colour, ls=ls)
    t0 = res.forced_end
    if 0 < t0 < T:
        ax.axvline(t0, color="gray", ls=":", lw=1)
        ax.text(t0, ax.get_ylim()[1] * 0.97, " 2MN", color="gray", va="top", fontsize=9)
    s = res.setting
    n = res.curves["birolf"].shape[0]
    ax.set_title(title or f"M=N={s.M}, d*={s.d_x_star}, d={s.d_x}: mean ± 95% CI over {n} seeds"
                 + (" (zoom)" if zoom else ""))
    ax.set_xlabel("round t")
    ax.set_ylabel("cumulative pseudo-regret R(t)")
    ax.legend(ncol=2, fontsize=8)
    return ax


def plot_regret_pair(res: SettingResult, keys: list[str] | None = None) -> plt.Figure:
    """Two panels: all agents, and the same curves with the y axis cut to the better half (``zoom``)."""
    fig, axes = plt.subplots(1, 2, figsize=(13.0, 4.4))
    plot_regret(res, axes[0], keys=keys)
    plot_regret(res, axes[1], keys=keys, zoom=True)
    axes[1].get_legend().remove()
    return fig


def plot_final(res: SettingResult, ax: plt.Axes | None = None, keys: list[str] | None = None) -> plt.Axes:
    """R(T) per seed, split into R(2MN) (forced-exploration phase, hatched) and R(T) − R(2MN)."""
    ax = ax or plt.subplots(figsize=(7.4, 3.8))[1]
    keys = keys or list(res.curves)
    n = res.curves[keys[0]].shape[0]
    t0 = res.forced_end
    width = 0.8 / n
    for a, key in enumerate(keys):
        c = res.curves[key]
        early = res.forced(key)
        x = a + (np.arange(n) - (n - 1) / 2) * width
        col = agent_style(key)[0]
        ax.bar(x, early, width, color=col, alpha=0.45, hatch="//", edgecolor="white", linewidth=0,
               label="R(2MN)" if a == 0 else None)
        ax.bar(x, c[:, -1] - early, width, bottom=early, color=col, label="R(T) − R(2MN)" if a == 0 else None)
    ax.set_xticks(range(len(keys)), [label(k) for k in keys], rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("R(T) per seed")
    ax.set_title(f"R(T) for each of {n} seeds (bars left to right), split at t = 2MN = {t0}")
    ax.legend()
    return ax


def plot_timing(timing: dict[int, dict], ax: plt.Axes | None = None) -> plt.Axes:
    """Main-estimator time per update against M·N, at matched accuracy and under the authors' caps."""
    ax = ax or plt.subplots()[1]
    sizes = sorted(timing)
    mn = np.array(sizes) ** 2
    for method, name, colour in (("blockwise", "blockwise", style.PALETTE[0]),
                                 ("full", "full-matrix FISTA", style.PALETTE[1])):
        for mode, ls, mk in (("matched", "-", "o"), ("caps", "--", "s")):
            y = [timing[m][(method, mode)]["seconds_per_update"] * 1e3 for m in sizes]
            lab = f"{name}, {'KKT ≤ 1e-6·max|B|' if mode == 'matched' else 'authors caps'}"
            ax.loglog(mn, y, ls=ls, marker=mk, color=colour, label=lab)
    ax.set_xlabel("M·N (entries of Φ)")
    ax.set_ylabel("time per main update (ms)")
    ax.set_title("Main-estimator update, warm-started along a BiRoLF run")
    ax.legend(fontsize=8)
    return ax
