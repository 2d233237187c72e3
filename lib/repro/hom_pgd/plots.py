"""Figures of chapter 14: MDH training, objective gap vs iteration, the C4 rate, C5 checkpoints, C6 timing,
C3 time vs n, and the 2-D pictures (ball grid pushed through Φ, latent and x-space trajectories)."""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch


def training_curve(ax: plt.Axes, history: dict, checkpoints: Sequence[int]) -> None:
    h = np.asarray(history["loss"])
    k = np.arange(1, len(h) + 1)
    w = max(1, len(h) // 100)
    smooth = np.convolve(h, np.ones(w) / w, mode="valid")
    ax.plot(k, h, color="0.8", lw=0.5, label="per step")
    ax.plot(k[w - 1:], smooth, label=f"running mean ({w} steps)")
    for c in checkpoints:
        ax.axvline(c, color="0.5", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("MDH training step")
    ax.set_ylabel("MDH loss (final penalty weight)")
    ax.set_title("MDH training (dotted: C5 checkpoints)")
    ax.legend()


def gap_vs_iteration(ax: plt.Axes, traces: dict[str, np.ndarray], f_ref: np.ndarray) -> None:
    """Median and IQR of the relative gap of the running best objective, per method."""
    for name, F in traces.items():
        best = np.minimum.accumulate(F, axis=0)
        gap = (best - f_ref[None, :]) / np.abs(f_ref)[None, :]
        k = np.arange(len(gap))
        q1, med, q3 = np.percentile(gap, [25, 50, 75], axis=1)
        ax.plot(k, med, label=name)
        ax.fill_between(k, q1, q3, alpha=0.2)
    ax.set_yscale("log")
    ax.set_xlabel("latent iteration k")
    ax.set_ylabel("relative gap to SLSQP-best (median, IQR)")
    ax.set_title("Objective gap vs iteration")
    ax.legend()


def rate_panel(ax: plt.Axes, curves: dict[str, np.ndarray], k_range=(10, 300), floor=1e-10) -> None:
    """C4a / C4b: one median min_{j<=k} ||G||^2 curve per group of instances (label -> curve), a slope −1 guide."""
    for i, (label, curve) in enumerate(curves.items()):
        k = np.arange(len(curve))
        ax.loglog(k[1:], np.maximum(curve[1:], 1e-16), color=f"C{i}", label=f"{label}: median min$_{{j\\leq k}}$ ‖G‖²")
        k0 = k_range[0]
        if len(curve) > k0 and curve[k0] > 0:
            kk = np.arange(k0, len(curve))
            ax.loglog(kk, curve[k0] * k0 / kk, "--", color=f"C{i}", lw=1, alpha=0.7,
                      label="slope −1 guide" if i == 0 else None)
    ax.axhline(floor, color="0.5", ls=":", lw=1, label="fit floor 1e-10")
    ax.axvspan(*k_range, color="0.9", zorder=-1)
    ax.set_xlabel("iteration k")
    ax.set_ylabel("‖G‖² (latent units)")
    ax.set_title("C4a/C4b: gradient mapping (shaded: fit range)")
    ax.legend(fontsize=8)


def checkpoint_panel(ax: plt.Axes, steps, eps_ball, unreachable, median_gap) -> None:
    ax.plot(steps, eps_ball, "o-", label="ball samples mapped infeasible")
    ax.plot(steps, unreachable, "s-", label="SLSQP optima unreachable")
    ax.plot(steps, median_gap, "^-", label="median objective gap")
    ax.set_xscale("log")
    ax.set_xlabel("training step of the checkpoint")
    ax.set_ylabel("fraction")
    ax.set_title("C5: ε_inn and gap by checkpoint")
    ax.legend()


def width_panel(ax: plt.Axes, W, sec, fit: tuple[float, float, float]) -> None:
    a, b, r2 = fit
    W = np.asarray(W)
    ax.plot(W, 1e3 * np.asarray(sec), "o", label="measured")
    ww = np.linspace(0, W.max() * 1.05, 50)
    ax.plot(ww, 1e3 * (a + b * ww), "--", label=f"a + bW, R² = {r2:.3f}")
    ax.set_xlabel("INN parameters W")
    ax.set_ylabel("ms per latent iteration (batch 256)")
    ax.set_title("C6: cost per iteration vs W")
    ax.legend()


def scale_panel(ax: plt.Axes, runs) -> None:
    ns = [r.n for r in runs]
    ax.plot(ns, [r.slsqp_ms for r in runs], "o-", label="SLSQP, one start (analytic Jacobians)")
    ax.plot(ns, [r.hom_ms for r in runs], "s-", label="Hom-PGD⁺ per instance, fixed budget (C3)")
    ax.plot(ns, [r.hom_ms_tol for r in runs], "s:", color="C1", alpha=0.7,
            label="Hom-PGD⁺ per instance, stopped at the tolerance")
    ax.set_yscale("log")
    ax.set_xlabel("n (m = n)")
    ax.set_ylabel("ms per instance")
    ax.set_title("C3: solve time vs problem size")
    ax.legend()


def feasible_mask_2d(family, s: np.ndarray, lim: float, res: int = 300):
    g = np.linspace(-lim, lim, res)
    X, Y = np.meshgrid(g, g)
    pts = torch.as_tensor(np.stack([X.ravel(), Y.ravel()], 1), dtype=torch.float64)
    v = family.violation(pts, torch.as_tensor(np.repeat(s[None], len(pts), 0))).numpy()
    return X, Y, (v <= 0).reshape(X.shape)


def picture_2d(axes, family, inn, s: np.ndarray, res_inn, res_radial=None, inst_index: int = 0) -> None:
    """Left: latent ball with the latent trajectory; right: C (shaded) with the image of the polar grid and the
    x-space trajectories."""
    ax_z, ax_x = axes
    c = family.condition(torch.as_tensor(s[None], dtype=torch.float32))
    th = np.linspace(0, 2 * np.pi, 400)
    X, Y, feas = feasible_mask_2d(family, s, family.radius * 1.05)
    ax_x.contourf(X, Y, feas, levels=[0.5, 1.5], colors=["#cfe8cf"])
    ax_x.contour(X, Y, feas.astype(float), levels=[0.5], colors=["#1a7f37"], linewidths=1)
    with torch.no_grad():
        for r in np.linspace(0.2, 1.0, 5):
            z = torch.as_tensor(np.stack([r * np.cos(th), r * np.sin(th)], 1), dtype=torch.float32)
            x = inn.map(z, c.expand(len(z), -1)).numpy()
            ax_x.plot(x[:, 0], x[:, 1], color="0.4", lw=0.8 if r < 1 else 1.6)
            ax_z.plot(z[:, 0], z[:, 1], color="0.4", lw=0.8 if r < 1 else 1.6)
        for a in np.linspace(0, 2 * np.pi, 16, endpoint=False):
            t = np.linspace(0, 1, 50)
            z = torch.as_tensor(np.stack([t * np.cos(a), t * np.sin(a)], 1), dtype=torch.float32)
            x = inn.map(z, c.expand(len(z), -1)).numpy()
            ax_x.plot(x[:, 0], x[:, 1], color="0.7", lw=0.6)
            ax_z.plot(z[:, 0], z[:, 1], color="0.7", lw=0.6)
        zt = res_inn.z_trace[:, inst_index]
        xt = inn.map(torch.as_tensor(zt, dtype=torch.float32), c.expand(len(zt), -1)).numpy()
    ax_z.plot(zt[:, 0], zt[:, 1], "C0.-", ms=3, label="Hom-PGD⁺ iterates z_k")
    ax_x.plot(xt[:, 0], xt[:, 1], "C0.-", ms=3, label="Φ(z_k)")
    if res_radial is not None:
        xr = family.radius * res_radial.z_trace[:, inst_index]
        ax_x.plot(xr[:, 0], xr[:, 1], "C1.-", ms=3, label="radial map R·z_k")
    for ax, t in ((ax_z, "latent unit ball B"), (ax_x, "feasible set C (green) and Φ(polar grid)")):
        ax.set_aspect("equal")
        ax.set_title(t)
        ax.legend(loc="lower left", fontsize=8)
    ax_z.set_xlabel("z₁"); ax_z.set_ylabel("z₂")
    ax_x.set_xlabel("x₁"); ax_x.set_ylabel("x₂")
