"""Small statistics every chapter uses: mean ± 95% CI over seeds, bootstrap intervals, log–log slopes, and the
noise-aware paired comparison (:func:`compare_paired`) that decides every comparative claim."""
from __future__ import annotations

import math
from dataclasses import dataclass
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


WORDS = ("better", "worse", "no measurable difference")


@dataclass(frozen=True)
class Comparison:
    """A paired comparison of method A against method B over matched units (seeds, games, prompts).

    ``diff`` is oriented so that positive means A is better (A − B when higher is better, B − A when lower
    is better). ``word`` is ``better`` only when the whole 95% CI of the mean difference lies above
    ``margin``, ``worse`` only when it lies below ``-margin``, and ``no measurable difference`` otherwise —
    which decides no comparative claim.
    """

    mean_diff: float
    ci_lo: float
    ci_hi: float
    n: int
    margin: float
    p_value: float
    word: str

    @property
    def better(self) -> bool:
        return self.word == "better"

    @property
    def worse(self) -> bool:
        return self.word == "worse"

    def no_worse_than(self, margin: float) -> bool:
        """A "no worse than B by ``margin``" claim: the CI's lower end lies above ``-margin``."""
        return bool(self.ci_lo > -abs(margin))

    def numbers(self, prefix: str = "") -> dict[str, float | str | list[float]]:
        """The ledger's view: mean difference, its 95% CI, the seed count and the word."""
        p = f"{prefix} " if prefix else ""
        return {f"{p}mean diff": self.mean_diff, f"{p}diff ci95": [self.ci_lo, self.ci_hi],
                f"{p}pairs": self.n, f"{p}comparison": self.word}


def compare_paired(a: np.ndarray, b: np.ndarray, *, higher_is_better: bool = True, margin: float = 0.0,
                   level: float = 0.95) -> Comparison:
    """Paired comparison of A against B (one value per matched unit, e.g. per seed): see :class:`Comparison`.

    With fewer than two pairs, or NaNs, the interval is unbounded and the word is ``no measurable difference``.
    """
    a, b = np.asarray(a, float).ravel(), np.asarray(b, float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired comparison needs one value per unit for both methods; got {a.shape} and {b.shape}")
    if margin < 0:
        raise ValueError(f"margin must be >= 0; got {margin}")
    d = (a - b) if higher_is_better else (b - a)
    n = int(d.size)
    if n < 2 or not np.all(np.isfinite(d)):
        mean = float(np.mean(d)) if n else float("nan")
        return Comparison(mean, -math.inf, math.inf, n, margin, float("nan"), WORDS[2])
    s = paired_summary(d, np.zeros_like(d), level=level)
    lo, hi = s["ci_lo"], s["ci_hi"]
    word = WORDS[0] if lo > margin else WORDS[1] if hi < -margin else WORDS[2]
    return Comparison(s["mean_diff"], lo, hi, n, margin, s["p_value"], word)
