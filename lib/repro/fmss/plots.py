"""The chapter's figures (one function per figure), in the book's style (:mod:`repro.common.style`)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from repro.common import loglog_slope, mean_ci, style

# The chapter's methods take the first colours of the book's palette, in this order, before anything else is drawn,
# so that FMSS and its ablation never share a colour within a figure.
for _m in ("LP vertex", "FMSS", "max-entropy", "SLEM search", "FMSS ε_π"):
    style.color(_m)

__all__ = ["grid_heatmaps", "grid_tv", "sigma_vs_slem", "per_mdp_bars", "gap_strip", "mixing_curves", "rate_vs_slem",
           "scaling", "sv_curves"]


def grid_heatmaps(g: dict, times: tuple[int, ...] = (0, 5, 20)) -> plt.Figure:
    """μ_t on the grid for the LP vertex and FMSS (rows) at the given times, the target, and TV against t."""
    n, mu = g["n"], g["mu"]
    names = list(g["methods"])
    fig, axes = plt.subplots(len(names), len(times) + 1, figsize=(2.3 * (len(times) + 1) + 1, 2.3 * len(names) + 0.6))
    vmax = max(max(m["laws"][t].max() for t in times[1:]) for m in g["methods"].values())
    vmax = max(vmax, mu.max())
    for r, name in enumerate(names):
        for c, t in enumerate(times):
            ax = axes[r, c]
            im = ax.imshow(g["methods"][name]["laws"][t].reshape(n, n), vmin=0, vmax=vmax, cmap="viridis")
            ax.set_title(f"{name}, t = {t}", fontsize=10)
            ax.set_xticks([]), ax.set_yticks([])
        ax = axes[r, -1]
        ax.imshow(mu.reshape(n, n), vmin=0, vmax=vmax, cmap="viridis")
        ax.set_title("target μ", fontsize=10)
        ax.set_xticks([]), ax.set_yticks([])
    fig.colorbar(im, ax=axes, shrink=0.8, label="probability of the cell")
    fig.suptitle("Thermostat grid world: law of the state after t steps from the bottom-left cell")
    return fig


def grid_tv(g: dict) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for name, m in g["methods"].items():
        ax.semilogy(m["tv"], label=f"{name} (SLEM {m['slem']:.3f}, σ {m['sigma']:.3f})", color=style.color(name))
    ax.set(xlabel="step t", ylabel="‖μ_t − μ‖_TV", title="Thermostat: distance to the target law")
    ax.legend()
    return fig


def sigma_vs_slem(c1: pd.DataFrame) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    for kind, marker in (("random feasible policy", "o"), ("reversible chain", "x")):
        d = c1[c1.kind == kind]
        ax.scatter(d.slem, d.sigma, s=14, marker=marker, alpha=0.7, label=f"{kind} ({len(d)})", color=style.color(kind))
    lim = [0, 1.02 * max(c1.sigma.max(), c1.slem.max())]
    ax.plot(lim, lim, "k--", lw=1, label="σ = SLEM")
    ax.set(xlim=lim, ylim=lim, xlabel="SLEM(P_π)  (true asymptotic rate)", ylabel="σ(π)  (convex surrogate)",
           title="C1: the surrogate bounds the SLEM from above")
    ax.legend(loc="upper left")
    return fig


def per_mdp_bars(c2: pd.DataFrame, methods: tuple[str, ...]) -> plt.Figure:
    fig, axes = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    mdps = sorted(c2.mdp.unique())
    w = 0.8 / len(methods)
    for ax, col, lab in ((axes[0], "slem", "SLEM (true rate)"), (axes[1], "sigma", "σ (surrogate)")):
        piv = c2.pivot(index="mdp", columns="method", values=col)
        for j, m in enumerate(methods):
            ax.bar(np.arange(len(mdps)) + (j - (len(methods) - 1) / 2) * w, piv[m].to_numpy(), w, label=m,
                   color=style.color(m))
        ax.set_ylabel(lab)
    axes[0].set_title("C2/C3: per random MDP, the rate of every synthesised policy (lower mixes faster)")
    axes[1].set_xticks(np.arange(len(mdps)), [str(m) for m in mdps])
    axes[1].set_xlabel("random MDP")
    axes[0].legend(ncol=len(methods), loc="lower center", bbox_to_anchor=(0.5, 1.08))
    return fig


def gap_strip(c2: pd.DataFrame) -> plt.Figure:
    piv = c2.pivot(index="mdp", columns="method", values="slem")
    rel_v = (piv["LP vertex"] - piv["FMSS"]).to_numpy()
    rel_m = (piv["max-entropy"] - piv["FMSS"]).to_numpy()
    gap = (piv["FMSS"] - piv["SLEM search"]).to_numpy()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for y, v, m in ((2, rel_v, "LP vertex"), (1, rel_m, "max-entropy"), (0, gap, "SLEM search")):
        v = v[np.isfinite(v)]          # the search runs on the first n_mdps MDPs only
        ax.scatter(v, np.full(len(v), y) + np.linspace(-0.15, 0.15, len(v)), s=18, color=style.color(m))
        ax.plot([np.median(v)] * 2, [y - 0.3, y + 0.3], "k-", lw=2)
    ax.axvline(0, color="grey", lw=1)
    ax.axvline(0.05, color="grey", lw=1, ls=":", label="C3 threshold 0.05")
    ax.set_yticks([0, 1, 2], ["FMSS − search\n(C3)", "max-ent − FMSS\n(C2b)", "LP vertex − FMSS\n(C2a)"])
    ax.set(xlabel="difference of SLEM (one dot per MDP; bar = median)", title="Paired SLEM differences")
    ax.legend(loc="center right", fontsize=8)
    return fig


def mixing_curves(curves: dict, mdp: int, methods: tuple[str, ...]) -> plt.Figure:
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10.5, 3.9))
    for m in methods:
        c = curves[(mdp, m)]
        k = np.arange(len(c["tv"]))
        a1.semilogy(k, np.maximum(c["tv"], 1e-17), label=f"{m} (SLEM {c['slem']:.3f})", color=style.color(m))
    for m in ("LP vertex", "FMSS"):
        c = curves[(mdp, m)]
        k = np.arange(len(c["chi2"]))
        a2.semilogy(k, np.maximum(c["chi2"], 1e-30), label=f"{m}: worst-start χ²", color=style.color(m))
        a2.semilogy(k, c["sigma"] ** (2 * k) * c["chi2"][0], "--", color=style.color(m),
                    label=f"{m}: bound σ^(2k)·χ²₀ (σ = {c['sigma']:.3f})")
    a1.axhline(1e-13, color="grey", lw=1, ls=":", label="fit floor 1e-13 (C4c)")
    a1.set(xlabel="step k", ylabel="worst-start ‖e_sᵀP^k − μ‖_TV", title=f"C4: TV to the target (MDP {mdp})")
    a2.set(xlabel="step k", ylabel="worst-start χ²(e_sᵀP^k ‖ μ)", title="C4(a): χ² and its σ-certificate")
    a1.legend(fontsize=8)
    a2.legend(fontsize=8)
    return fig


def rate_vs_slem(c2: pd.DataFrame, methods: tuple[str, ...]) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    for m in methods:
        d = c2[c2.method == m]
        ax.scatter(d.slem, d.tv_rate, s=16, label=m, color=style.color(m))
    lo, hi = 0.9 * c2.slem.min(), 1.05 * c2.slem.max()
    xs = np.array([lo, hi])
    ax.plot(xs, xs, "k--", lw=1, label="rate = SLEM")
    ax.fill_between(xs, xs - 0.05, xs + 0.05, color="grey", alpha=0.2, label="± 0.05")
    ax.set(xlabel="SLEM of the chain", ylabel="exp(fitted slope of log TV), k ∈ fit window",
           title="C4(c): TV decays at the SLEM")
    ax.legend(fontsize=8)
    return fig


def scaling(sc: pd.DataFrame) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for solver, d in sc.groupby("solver"):
        lab = solver
        if len(d) >= 2:
            lab += f" (log–log slope {loglog_slope(d.S, d.cpu_s):.2f})"
        ax.loglog(d.S, d.cpu_s, "o-", label=f"{lab}, CPU", color=style.color(solver))
        ax.loglog(d.S, d.wall_s, "x:", label=f"{solver}, wall clock (shared machine)", color=style.color(solver), alpha=0.6)
    ss = np.sort(sc.S.unique())
    ax.set_xticks(ss, [str(v) for v in ss])
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.axhline(20, color="grey", ls=":", lw=1, label="20 s (C5 threshold)")
    ax.set(xlabel="number of states S (A = 3)", ylabel="build + solve time (s)",
           title="C5: time of one FMSS solve against S")
    ax.legend(fontsize=8)
    return fig


def sv_curves(sv: pd.DataFrame, slope_min_n: int) -> plt.Figure:
    """C6: errors of the learned policy against n, per mode (colour) and target regime (solid: interior μ, the
    card's; dotted: boundary μ, where min-slack's ε̂ > 0), mean ± 95% CI over seeds, fitted slopes in the legend."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11.5, 4.4))
    labels = {"min_slack": "min-slack (default)", "theory": "theory slack (c_ε = 1)"}
    regimes = list(dict.fromkeys(sv["regime"])) if "regime" in sv else [None]
    for regime in regimes:
        r = sv if regime is None else sv[sv["regime"] == regime]
        for mode, lab in labels.items():
            d = r[(r["mode"] == mode) & r.mu_err.notna()]
            if d.empty:
                continue
            for ax, col in ((a1, "mu_err"), (a2, "value_gap")):
                piv = d.pivot(index="seed", columns="n", values=col)
                mean, half = mean_ci(piv.to_numpy(), axis=0)
                ns = piv.columns.to_numpy()
                fit = ns >= slope_min_n
                extra = f", slope {loglog_slope(ns[fit], mean[fit]):.2f}" if fit.sum() >= 2 else ""
                name = lab if regime is None else f"{lab}, {regime} μ"
                style.band(ax, ns, mean, half, label=f"{name}{extra}", color=style.color(lab),
                           ls="-" if regime in (None, "interior") else ":")
    for ax in (a1, a2):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ns = np.sort(sv.n.unique())
        ax.set_xticks(ns, [str(v) for v in ns])
        ax.minorticks_off()
        y0 = sv[(sv["mode"] == "min_slack")].groupby("n")["mu_err" if ax is a1 else "value_gap"].mean().iloc[0]
        style.guide(ax, ns, y0, -0.5, "slope −½")
        ax.set_xlabel("samples n per (s, a)")
        ax.legend(fontsize=7)
    a1.set(ylabel="‖μ_π̂ − μ‖₁ in the true MDP", title="C6: stationarity error of the learned policy")
    a2.set(ylabel="|σ̂_n − σ*|", title="C6: error of the optimal value")
    return fig
