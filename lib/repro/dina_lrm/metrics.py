"""Metrics: accuracy against the oracle (expected agreement), Brier score, ECE, FLOP counts and timings.

*Accuracy.* Card, Controls and risks: with noisy annotators a 1-point margin is about one standard error of the
hard agreement with 2k sampled labels, so the chapter scores the *expected* agreement with the oracle's annotators,
mean Φ(sign(Δŝ) · Δr*/s_h) (a tie counts ½). Its ceiling Acc* = mean Φ(|Δr*|/s_h) is reached by ranking exactly
like r*. The hard agreement with the sampled labels is reported beside it.
"""
from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np
import torch
from torch import nn


def _phi(x: np.ndarray) -> np.ndarray:
    from scipy.stats import norm

    return norm.cdf(x)


def expected_agreement(ds_hat: np.ndarray, dr: np.ndarray, s_h: float, tie_tol: float = 1e-6) -> float:
    """mean over pairs of Φ(sign(Δŝ) Δr*/s_h), with |Δŝ| <= tie_tol counted as a tie (½)."""
    ds_hat, dr = np.asarray(ds_hat, float), np.asarray(dr, float)
    q = _phi(dr / s_h)                         # P(annotators say a ≻ b)
    sgn = np.where(np.abs(ds_hat) <= tie_tol, 0.0, np.sign(ds_hat))
    return float(np.mean(np.where(sgn > 0, q, np.where(sgn < 0, 1 - q, 0.5))))


def oracle_ceiling(dr: np.ndarray, s_h: float) -> float:
    """Acc* = mean Φ(|Δr*|/s_h): the expected agreement of the oracle itself."""
    return float(np.mean(_phi(np.abs(np.asarray(dr, float)) / s_h)))


def pairwise_accuracy(ds_hat: np.ndarray, label: np.ndarray, tie_tol: float = 1e-6) -> float:
    """Agreement with sampled labels (1: a ≻ b); ties count ½."""
    ds_hat, label = np.asarray(ds_hat, float), np.asarray(label, float)
    sgn = np.where(np.abs(ds_hat) <= tie_tol, 0.0, np.sign(ds_hat))
    return float(np.mean(np.where(sgn == 0, 0.5, (sgn > 0) == (label > 0.5))))


def brier(p: np.ndarray, label: np.ndarray) -> float:
    """Brier score mean (p − label)²."""
    return float(np.mean((np.asarray(p, float) - np.asarray(label, float)) ** 2))


def ece_binary(p: np.ndarray, label: np.ndarray, n_bins: int = 10) -> float:
    """Expected calibration error of P(a ≻ b): equal-width bins of p, Σ_bins (n_b/n) |mean label − mean p|."""
    p, label = np.asarray(p, float), np.asarray(label, float)
    bins = np.clip((p * n_bins).astype(int), 0, n_bins - 1)
    err = 0.0
    for k in range(n_bins):
        m = bins == k
        if m.any():
            err += m.mean() * abs(label[m].mean() - p[m].mean())
    return float(err)


def reliability(p: np.ndarray, label: np.ndarray, n_bins: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-bin mean predicted p, observed frequency, and count (empty bins are NaN)."""
    p, label = np.asarray(p, float), np.asarray(label, float)
    bins = np.clip((p * n_bins).astype(int), 0, n_bins - 1)
    mp, fr, cnt = np.full(n_bins, np.nan), np.full(n_bins, np.nan), np.zeros(n_bins, int)
    for k in range(n_bins):
        m = bins == k
        cnt[k] = m.sum()
        if cnt[k]:
            mp[k], fr[k] = p[m].mean(), label[m].mean()
    return mp, fr, cnt


def ece_floor(p: np.ndarray, n_resamples: int = 5, seed: int = 0, n_bins: int = 10) -> float:
    """The ECE of a perfectly calibrated model with these p's: labels resampled from p (mean over resamples)."""
    rng = np.random.default_rng(seed)
    p = np.asarray(p, float)
    return float(np.mean([ece_binary(p, (rng.random(p.size) < p).astype(float), n_bins)
                          for _ in range(n_resamples)]))


# ----------------------------------------------------------------------------- cost

def count_macs(fn: Callable[[], torch.Tensor], modules: list[nn.Module]) -> int:
    """Multiply-accumulates of the Linear and Conv2d layers inside ``modules`` during one call of ``fn``,
    per call (counted with forward hooks; elementwise ops, norms and activations are not counted)."""
    total = [0]

    def lin(m, inp, out):
        total[0] += out.numel() * m.in_features

    def conv(m, inp, out):
        k = m.kernel_size[0] * m.kernel_size[1] * (m.in_channels // m.groups)
        total[0] += out.numel() * k

    hooks = []
    for mod in modules:
        for m in mod.modules():
            if isinstance(m, nn.Linear):
                hooks.append(m.register_forward_hook(lin))
            elif isinstance(m, nn.Conv2d):
                hooks.append(m.register_forward_hook(conv))
    try:
        with torch.no_grad():
            fn()
    finally:
        for h in hooks:
            h.remove()
    return total[0]


def time_interleaved(fns: dict[str, Callable[[], object]], rounds: int = 21, min_block_s: float = 0.03,
                     warmup: int = 3) -> dict[str, np.ndarray]:
    """Per-call CPU seconds (``time.process_time``) of several paths, timed in interleaved rounds (timeit-style).

    Each round times every path in turn; a path's sample is the fastest of ``k`` back-to-back calls, with ``k``
    chosen once from the warm-up so that a block lasts ``min_block_s``. The minimum of a block is the standard
    estimate of a call's own cost (slower calls are interference from the machine), and the interleaving puts any
    slow stretch of a shared machine on every path alike. CPU time, not wall time, so that the ratio of two paths
    is not set by what else runs."""
    ks = {}
    for name, fn in fns.items():
        ts = []
        for _ in range(warmup):
            t = time.process_time()
            fn()
            ts.append(time.process_time() - t)
        ks[name] = max(1, math.ceil(min_block_s / max(float(np.median(ts)), 1e-6)))
    out: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            best = math.inf
            for _ in range(ks[name]):
                t = time.process_time()
                fn()
                best = min(best, time.process_time() - t)
            out[name].append(best)
    return {name: np.asarray(v) for name, v in out.items()}


def timing_summary(t: np.ndarray, per: int = 1) -> dict:
    """Median per-item time (ms), coefficient of variation, a robust sd (1.4826 MAD) and the per-item time of every
    sample (``rounds_ms``: the interleaved rounds of :func:`time_interleaved`, for the claims' intervals)."""
    med = float(np.median(t))
    mad = float(1.4826 * np.median(np.abs(t - med)))
    return dict(ms=1e3 * med / per, cv=float(mad / med) if med > 0 else math.nan, sd_ms=1e3 * mad / per,
                rounds_ms=[1e3 * float(v) / per for v in np.asarray(t, float)])
