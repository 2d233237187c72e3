"""Figures of chapter 17: the embedding map with the cluster path, training loss and gradient traces with cluster
boundaries, consecutive-batch gradient cosine, the forgetting curve, per-domain losses and the overhead bars.
Means over seeds with 95 % t-intervals."""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np

from repro.common import mean_ci, style

from .experiments import Experiment
from .tasks import DOMAINS

LABELS = {"random": "random shuffle", "ep_order": "EP-Order", "no_mix": "EP-Order, no mixed regions",
          "random_cluster_order": "EP-Order, random cluster order", "curriculum": "score curriculum",
          "domain_blocked": "domain-blocked"}


def label(m: str) -> str:
    return LABELS.get(m, m)


def embedding_map(ax: plt.Axes, setup) -> None:
    """2-D PCA of one seed's embeddings, coloured by cluster, with centroids joined along the visiting path."""
    E = setup.embeddings
    mu = E.mean(0)
    _, _, Vt = np.linalg.svd(E - mu, full_matrices=False)
    P = (E - mu) @ Vt[:2].T
    Cp = (setup.centroids - mu) @ Vt[:2].T
    cmap = plt.get_cmap("tab20")
    for j in range(len(setup.centroids)):
        m = setup.labels == j
        ax.scatter(P[m, 0], P[m, 1], s=4, color=cmap(j % 20), alpha=0.5, linewidths=0)
    p = setup.path
    ax.plot(Cp[p, 0], Cp[p, 1], "k-", lw=1.2, marker="o", ms=4, label="cluster path")
    ax.plot(Cp[p[0], 0], Cp[p[0], 1], "k*", ms=14, label="first cluster")
    ax.set_xlabel("principal component 1")
    ax.set_ylabel("principal component 2")
    ax.set_title(f"Warm-up embeddings by cluster (purity {setup.purity:.2f})")
    ax.legend(loc="best")


def _boundaries(hist: dict, labels: np.ndarray) -> list[int]:
    """Steps where the batch's majority cluster changes."""
    maj = [np.bincount(labels[b]).argmax() for b in hist["batches"]]
    return [k for k in range(1, len(maj)) if maj[k] != maj[k - 1]]


def training_traces(ax_loss: plt.Axes, ax_norm: plt.Axes, exp: Experiment, seed: int,
                    methods: Sequence[str] = ("random", "ep_order", "no_mix")) -> None:
    """Training loss and gradient norm per step for one seed; dotted lines mark EP-Order's cluster changes."""
    setup = next(s for s in exp.setups if s.seed == seed)
    for m in methods:
        if (m, seed) not in exp.runs:
            continue
        h = exp.runs[(m, seed)]["history"]
        x = np.arange(1, len(h["loss"]) + 1)
        ax_loss.plot(x, h["loss"], color=style.color(m), lw=1, label=label(m))
        ax_norm.plot(x, h["grad_norm"], color=style.color(m), lw=1, label=label(m))
    if ("ep_order", seed) in exp.runs:
        for k in _boundaries(exp.runs[("ep_order", seed)]["history"], setup.labels):
            for ax in (ax_loss, ax_norm):
                ax.axvline(k + 0.5, color="0.6", lw=0.5, ls=":")
    ax_loss.set_xlabel("training step")
    ax_loss.set_ylabel("batch response loss (nats/token)")
    ax_loss.set_title(f"Training loss, seed {seed} (dotted: EP-Order's cluster changes)")
    ax_loss.legend()
    ax_norm.set_xlabel("training step")
    ax_norm.set_ylabel("gradient norm before clipping")
    ax_norm.set_yscale("log")
    ax_norm.set_title("Gradient norm")
    ax_norm.legend()


def grad_cos_panel(ax: plt.Axes, exp: Experiment, methods: Sequence[str] = ("random", "ep_order", "no_mix"),
                   window: int = 10) -> None:
    """Cosine of consecutive batches' last-block gradients (trailing mean), mean ± 95 % CI over seeds."""
    for m in methods:
        curves = [np.asarray(r["history"]["grad_cos"][1:], float) for (mm, s), r in sorted(exp.runs.items()) if mm == m]
        if not curves:
            continue
        C = np.array([np.convolve(c, np.ones(window) / window, mode="valid") for c in curves])
        mean, half = mean_ci(C, axis=0)
        style.band(ax, np.arange(window + 1, window + 1 + C.shape[1]), mean, half,
                   f"{label(m)} ({C.shape[0]} seeds)", color=style.color(m), marker=None)
    ax.set_xlabel("training step")
    ax.set_ylim(-1, 1)
    ax.set_ylabel(f"cos(g_t, g_t-1), last block ({window}-step mean)")
    ax.set_title("Agreement of consecutive batches' gradients")
    ax.legend()


def forgetting_panel(ax: plt.Axes, exp: Experiment, seed: int,
                     methods: Sequence[str] = ("ep_order", "no_mix", "random_cluster_order")) -> None:
    """Held-out loss on the first-visited cluster's dominant domain during training (the eval grid, plus the
    window's exact steps). Each run's forgetting window is marked: a dot at the end of the first block (start), a
    square at the last step before the next block of that domain or at the end of training (end), joined by a
    thick segment whose rise is the forgetting; the window of no-mix is shaded."""
    for m in methods:
        r = exp.runs.get((m, seed))
        if r is None or "forget" not in r:
            continue
        pr = r["history"]["probes"]
        steps = sorted(pr)
        c = style.color(m)
        w = r["forget"]
        ax.plot(steps, [pr[s] for s in steps], color=c, marker=None, lw=1, alpha=0.8)
        a, b = w["start"], w["end"]
        ax.plot([a, b], [pr[a], pr[b]], color=c, lw=3, marker=None,
                label=f"{label(m)}: {DOMAINS[w['domain']]}, forgetting {r['forgetting']:+.3f}")
        ax.plot([a], [pr[a]], "o", color=c, ms=7)
        ax.plot([b], [pr[b]], "s", color=c, ms=7)
        if m == "no_mix":
            ax.axvspan(a, b, color=c, alpha=0.08, lw=0)
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out loss, first cluster's domain (nats)")
    ax.set_title(f"Forgetting of the first cluster, seed {seed}\n"
                 "dot: end of its block; square: before its domain's next block, or the end", fontsize="medium")
    ax.legend(fontsize="small")


def per_domain_panel(ax: plt.Axes, exp: Experiment, methods: Sequence[str], seeds=None) -> None:
    """Per-domain held-out response loss, mean ± 95 % CI over seeds, one bar group per domain."""
    w = 0.8 / len(methods)
    x = np.arange(len(DOMAINS))
    for k, m in enumerate(methods):
        tab = exp.per_domain(m, seeds=seeds).to_numpy(float)
        mean, half = mean_ci(tab, axis=0)
        ax.bar(x + (k - (len(methods) - 1) / 2) * w, mean, w, yerr=half, color=style.color(m),
               label=f"{label(m)} ({tab.shape[0]} seeds)")
    ax.set_xticks(x, DOMAINS)
    ax.set_ylabel("held-out response loss (nats/token)")
    ax.set_title("Per-domain loss after instruction tuning")
    ax.legend()


def overhead_panel(ax: plt.Axes, exp: Experiment) -> None:
    """CPU seconds of EP-Order's preparation (stacked) next to its main training, mean over seeds."""
    parts = list(exp.setups[0].overhead_s)
    bottom = 0.0
    for p in parts:
        v = float(np.mean([s.overhead_s[p] for s in exp.setups]))
        ax.bar(0, v, bottom=bottom, label=p)
        bottom += v
    train = float(np.mean(exp.run_values("ep_order", "train_cpu_s")))
    ax.bar(1, train, color="0.5", label="main training")
    ax.set_xticks([0, 1], ["EP-Order preparation", "main training"])
    ax.set_ylabel("CPU seconds (mean over seeds)")
    ax.set_title("Overhead of EP-Order")
    ax.legend()
