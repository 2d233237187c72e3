"""Figures of chapter 10 (the book's style: titles, labelled axes, legends, one colour per method)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from repro.common import mean_ci, style

from .experiments import LABELS, Experiment
from .models import hidden


def label(m: str) -> str:
    return LABELS.get(m, m)


def group_auc_bars(exp: Experiment, methods) -> plt.Figure:
    """Per-group AUC at the default β, mean ± 95 % CI over seeds."""
    G = exp.cfg.n_groups
    fig, ax = plt.subplots(figsize=(7.5, 4))
    width = 0.8 / len(methods)
    for i, m in enumerate(methods):
        vals = np.array([r.metrics[m]["group_auc"] for r in exp.default])
        mu, h = mean_ci(vals)
        ax.bar(np.arange(G) + i * width, mu, width, yerr=h, color=style.color(m), label=label(m), capsize=2)
    ax.set_xticks(np.arange(G) + width * (len(methods) - 1) / 2, [f"group {g}" for g in range(G)])
    lo = min(min(r.metrics[m]["group_auc"]) for r in exp.default for m in methods)
    ax.set_ylim(max(0.0, lo - 0.08), 1.0)
    ax.set_ylabel("AUC on the pooled test set")
    ax.set_title(f"Per-group AUC at β = {exp.cfg.beta:g} (group 0 most frequent)")
    ax.legend(ncol=2)
    return fig


def res_vs_beta(exp: Experiment, methods) -> plt.Figure:
    betas = list(exp.cfg.beta_sweep)
    fig, ax = plt.subplots()
    for m in methods:
        vals = np.array([[r.metrics[m]["res_auc"] for r in exp.at(b)] for b in betas]).T
        mu, h = mean_ci(vals)
        style.band(ax, np.array(betas), mu, h, label(m), color=style.color(m))
    ax.set_xscale("log")
    ax.set_xlabel("Dirichlet concentration β (small = heterogeneous sites)")
    ax.set_ylabel("RES-AUC")
    ax.set_title("RES-AUC against heterogeneity (mean ± 95 % CI over seeds)")
    ax.legend()
    return fig


def groups_sweep(tab: pd.DataFrame) -> plt.Figure:
    fig, ax = plt.subplots()
    for col, name in (("auc", "AUC (pooled)"), ("res_auc", "RES-AUC"), ("es_auc", "ES-AUC"),
                      ("worst_auc", "worst-group AUC")):
        ax.plot(tab["G"], tab[col], marker="o", label=name, color=style.color(name))
    ax.set_xlabel("number of groups G")
    ax.set_ylabel("metric value")
    ax.set_xticks(tab["G"])
    ax.set_title("Binormal groups with AUCs evenly spaced in [0.75, 0.90]")
    ax.legend()
    return fig


def communication(exp: Experiment, methods_rounds: dict[str, int]) -> plt.Figure:
    fig, ax = plt.subplots()
    markers = "osD^v<>p"
    for i, (m, rounds) in enumerate(methods_rounds.items()):
        vals = np.array([r.metrics[m]["res_auc"] for r in exp.default])
        mu, h = mean_ci(vals)
        x = rounds * 1.08 ** (i - (len(methods_rounds) - 1) / 2)          # small offsets so bars do not overlap
        ax.errorbar([x], [mu], yerr=[h], fmt=markers[i % len(markers)], capsize=3, color=style.color(m),
                    label=label(m))
    ax.set_xscale("log")
    ax.set_xlabel("communication rounds (model uploads per site)")
    ax.set_ylabel("RES-AUC")
    ax.set_title(f"Communication against fairness at β = {exp.cfg.beta:g}")
    ax.legend()
    return fig


def omega_heatmap(run) -> plt.Figure:
    """ω_g^k of Fair-FedMOE beside the count weights and the site group mixes (one federation)."""
    d = run.diag
    counts = np.asarray(d["counts"], float)
    mats = [(counts / counts.sum(1, keepdims=True)).T, np.asarray(d["omega_counts"]), np.asarray(d["omega"])]
    titles = ["site group mix n_g^k / n^k", "count weights n_g^k / n_g", "Fair-FedMOE ω_g^k"]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    for ax, M, t in zip(axes, mats, titles):
        im = ax.imshow(M, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_title(t)
        ax.set_xlabel("site k (last = planted outlier)")
        ax.set_ylabel("group g")
        ax.set_xticks(range(M.shape[1]))
        ax.set_yticks(range(M.shape[0]))
        ax.grid(False)
    fig.colorbar(im, ax=axes, shrink=0.8, label="weight")
    return fig


def pca_routing(run, tau_note: str = "") -> plt.Figure:
    """PCA of the aggregated adapter's h on the test set, by group, with the aggregated prototypes."""
    p = run.models["fair_fedmoe"]
    T = run.fed.test
    H = hidden(p, T.X)
    mu = H.mean(0)
    U, S, Vt = np.linalg.svd(H - mu, full_matrices=False)
    Z = (H - mu) @ Vt[:2].T
    P = p["P"].numpy()
    # prototypes are directions: draw them scaled to the typical norm of h
    Pn = P / np.linalg.norm(P, axis=1, keepdims=True) * np.linalg.norm(H, axis=1).mean()
    ZP = (Pn - mu) @ Vt[:2].T
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for g in range(run.fed.n_groups):
        m = T.g == g
        ax.scatter(Z[m, 0], Z[m, 1], s=5, alpha=0.4, color=style.color(f"group {g}"), label=f"group {g}")
        ax.scatter(ZP[g, 0], ZP[g, 1], s=160, marker="*", edgecolor="k", color=style.color(f"group {g}"))
    ax.set_xlabel("PC 1 of h")
    ax.set_ylabel("PC 2 of h")
    ax.set_title("Adapter features h by group; ★ aggregated prototypes")
    ax.legend(markerscale=3)
    return fig
