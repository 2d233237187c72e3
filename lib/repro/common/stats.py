"""Small statistics every chapter uses: mean ± 95% CI over seeds, bootstrap intervals, log–log slopes."""
from __future__ import annotations

from typing import Callable

import numpy as np
from scipy import stats as _st


def mean_ci(x: np.ndarray, axis: int = 0, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Mean and half-width of the Student-t confidence interval along ``axis`` (half-width 0 for one seed)."""
    x = np.asarray(x, dtype=float)
    n = x.shape[axis]
    mean = x.mean(axis=axis)
    if n < 2:
        return mean, np.zeros_like(mean)
    sem = x.std(axis=axis, ddof=1) / np.sqrt(n)
    return mean, _st.t.ppf(0.5 + level / 2, n - 1) * sem


def bootstrap_ci(
    samples: np.ndarray,
    statistic: Callable[[np.ndarray], float],
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    rng: np.random.Generator | int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over resampled rows of ``samples`` (e.g. seeds)."""
    samples = np.asarray(samples)
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    idx = rng.integers(0, len(samples), size=(n_boot, len(samples)))
    boots = np.array([statistic(samples[i]) for i in idx])
    lo, hi = np.nanquantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def loglog_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of log y against log x."""
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


def paired_summary(a: np.ndarray, b: np.ndarray, level: float = 0.95) -> dict[str, float]:
    """Mean paired difference a − b with its t interval and the paired t-test p-value."""
    d = np.asarray(a, float) - np.asarray(b, float)
    mean, half = mean_ci(d, level=level)
    if len(d) < 2 or np.all(d == d[0]):  # no spread: the t statistic is undefined
        p = float("nan") if len(d) < 2 or d[0] == 0 else 0.0
    else:
        p = float(_st.ttest_rel(a, b).pvalue)
    return {"mean_diff": float(mean), "ci_lo": float(mean - half), "ci_hi": float(mean + half), "p_value": p}
