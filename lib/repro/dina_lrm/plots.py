"""Figures of chapter 11, in the book's style: accuracy vs σ, reliability diagrams, accuracy vs K, ReFL curves,
samples, and the oracle-vs-RM scatter over checkpoints."""
from __future__ import annotations

import numpy as np
import matplotlib.pyplot as plt

from repro.common import mean_ci, style

LABELS = {"dina": "DiNa-LRM (fidelity)", "dina_nll": "DiNa-LRM (NLL)", "thurstone_const": "Thurstone, var ≡ 0.5",
          "bt": "BT-LRM", "clean": "clean latent RM", "oracle": "oracle (achievable)", "pixel": "pixel RM (10×)",
          "base": "base generator"}


def label(k) -> str:
    return LABELS.get(k, f"Diffusion-DPO β={k:g}" if isinstance(k, float) else str(k))


def _band(ax, x, Y, name, **kw):
    Y = np.atleast_2d(np.asarray(Y, float))
    m = Y.mean(0)
    h = mean_ci(Y)[1] if Y.shape[0] > 1 else np.zeros_like(m)
    style.band(ax, np.asarray(x, float), m, np.asarray(h, float), label(name), **kw)


def accuracy_vs_sigma(ax, exp, kinds=("dina", "dina_nll", "thurstone_const", "bt", "clean")) -> None:
    for k in kinds:
        Y = exp.curve(k)
        if Y.size:
            _band(ax, exp.cfg.sigma_grid, Y, k)
    ax.axhline(exp.acc_star, color="k", ls="--", lw=1, label="oracle ceiling Acc*")
    ax.axhline(0.5, color="grey", ls=":", lw=1)
    ax.set(xlabel="noise level σ of both items", ylabel="expected agreement with annotators",
           title="Pairwise accuracy vs noise (mean ± 95 % CI over seeds)")
    ax.legend(loc="lower left")


def reliability(ax, exp, sigma: float, kinds=("dina", "dina_nll", "bt")) -> None:
    from .metrics import reliability as rel
    from .experiments import rm_probability  # noqa: F401  (documents where the probabilities come from)

    r = exp.results[0]
    lab = r.calib["labels"]
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="calibrated")
    for k in kinds:
        key = f"{k}@{sigma}"
        if key in r.calib:
            mp, fr, cnt = rel(r.calib[key], lab)
            m = cnt >= 20
            ax.plot(mp[m], fr[m], marker="o", color=style.color(label(k)), label=label(k))
    ax.set(xlabel="predicted P(a ≻ b)", ylabel="observed frequency of a ≻ b",
           title=f"Reliability at σ = {sigma:g} (first seed)", xlim=(0, 1), ylim=(0, 1))
    ax.legend(loc="upper left")


def accuracy_vs_k(ax, exp) -> None:
    Ks = list(exp.cfg.ensemble_K)
    Y = np.array([[r.ens_acc[k] for k in Ks] for r in exp.results])
    _band(ax, Ks, Y, "dina")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="K: noise draws averaged", ylabel="expected agreement",
           title=f"Noise ensembling at σ = {exp.cfg.eval_sigma:g}")
    ax.legend(loc="lower right")


def refl_curves(ax_steps, ax_time, exp, rewards=("oracle", "dina", "bt", "pixel")) -> None:
    rs = [r for r in exp.results if r.align]
    for k in rewards:
        steps = rs[0].align[k].steps
        O = np.array([r.align[k].oracle for r in rs])
        _band(ax_steps, steps, O, k, marker=None)
        T = np.array([r.align[k].cpu_s for r in rs]).mean(0)
        ax_time.plot(T, O.mean(0), color=style.color(label(k)), label=label(k))
    for beta in exp.cfg.dpo_betas if exp.cfg.run_dpo else []:
        H = [r.dpo[beta] for r in rs]
        O = np.array([h.oracle for h in H]).mean(0)
        ax_time.plot(np.array([h.cpu_s for h in H]).mean(0), O, ls="--", color=style.color(label(float(beta))),
                     label=label(float(beta)))
    for ax in (ax_steps, ax_time):     # a hacked reward can send the oracle far below 0: symmetric log scale
        ax.set_yscale("symlog", linthresh=1.0)
    ax_steps.set(xlabel="ReFL optimizer step", ylabel="oracle reward r* of fixed-seed samples",
                 title="ReFL: oracle reward vs steps")
    ax_time.set(xlabel="CPU seconds in optimizer steps", ylabel="oracle reward r*",
                title="ReFL and Diffusion-DPO vs compute (seed mean)")
    ax_steps.legend(loc="upper left"), ax_time.legend(loc="upper left")


def samples_grid(fig, exp, rows=("base", "oracle", "dina", "pixel"), n=10) -> None:
    axes = fig.subplots(len(rows), n)
    for i, k in enumerate(rows):
        for j in range(n):
            ax = axes[i, j]
            ax.imshow(exp.samples[k][j].reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
            ax.set_xticks([]), ax.set_yticks([]), ax.grid(False)
            if j == 0:
                ax.set_ylabel(label(k), rotation=0, ha="right", va="center", fontsize=8)
    fig.suptitle("Same prompts and noise, before and after ReFL (first seed)")


def oracle_vs_rm(ax, exp, kind: str = "dina") -> None:
    for r in exp.results:
        if r.align:
            h = r.align[kind]
            ax.plot(h.rm, h.oracle, marker="o", ms=3, label=f"seed {r.seed}")
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set(xlabel=f"{label(kind)} reward (K = 8) of the checkpoint's samples",
           ylabel="oracle reward r*", title="ReFL checkpoints: oracle vs RM reward (C6)")
    ax.legend(loc="lower left")
