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

    def ledger_kwargs(self) -> dict:
        """``holds``/``inconclusive`` for :meth:`repro.common.Ledger.record` of an "A beats B" claim: ``better``
        holds, ``worse`` fails, and ``no measurable difference`` decides nothing (inconclusive, with the CI)."""
        if self.word == WORDS[2]:
            return {"holds": None, "inconclusive": (f"no measurable difference: the 95% CI of the paired difference "
                                                    f"[{self.ci_lo:.4g}, {self.ci_hi:.4g}] over {self.n} pairs "
                                                    f"does not clear the margin {self.margin:g}")}
        return {"holds": self.better, "inconclusive": None}

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


# ---------------------------------------------------------------------------------------------- thresholds
THRESHOLD_WORDS = ("holds", "fails", "inconclusive")


@dataclass(frozen=True)
class ThresholdTest:
    """A claim "statistic ≥ threshold" (or ≤) decided against the statistic's noise (issue 41, rule 4).

    ``word`` is ``holds`` only when the whole 95% interval clears the threshold on the claimed side, ``fails`` only
    when it lies wholly on the other side, and ``inconclusive`` otherwise (the point estimate alone decides
    nothing: a 1.287 against a bar of 1.3 whose interval is ±0.04 is within noise of the bar).
    """

    estimate: float
    ci_lo: float
    ci_hi: float
    threshold: float
    direction: str  # ">=" or "<="
    n: int
    word: str

    @property
    def holds(self) -> bool:
        return self.word == "holds"

    @property
    def decided(self) -> bool:
        return self.word != "inconclusive"

    @property
    def reason(self) -> str:
        """Why it is inconclusive (empty when decided)."""
        if self.decided:
            return ""
        return (f"within noise of the threshold: the 95% interval [{self.ci_lo:.4g}, {self.ci_hi:.4g}] of "
                f"{self.estimate:.4g} contains the bar {self.threshold:g}")

    def ledger_kwargs(self) -> dict:
        """``holds`` and ``inconclusive`` for :meth:`repro.common.Ledger.record`."""
        return {"holds": self.holds if self.decided else None, "inconclusive": self.reason or None}

    def numbers(self, prefix: str = "") -> dict[str, float | str | list[float]]:
        p = f"{prefix} " if prefix else ""
        return {f"{p}estimate": self.estimate, f"{p}ci95": [self.ci_lo, self.ci_hi], f"{p}n": self.n,
                f"{p}vs threshold": f"{self.direction} {self.threshold:g}: {self.word}"}


def threshold_from_ci(estimate: float, ci_lo: float, ci_hi: float, threshold: float, direction: str = ">=",
                      n: int = 0) -> ThresholdTest:
    """Decide "estimate ``direction`` threshold" from an interval already computed (bootstrap, t, Wilson).

    A NaN anywhere makes it inconclusive; an interval that touches the bar is not clear of it."""
    if direction not in (">=", "<="):
        raise ValueError(f"direction must be '>=' or '<='; got {direction!r}")
    lo, hi = float(min(ci_lo, ci_hi)), float(max(ci_lo, ci_hi))
    if not all(math.isfinite(v) or math.isinf(v) for v in (lo, hi)) or math.isnan(float(estimate)):
        word = THRESHOLD_WORDS[2]
    elif direction == ">=":
        word = THRESHOLD_WORDS[0] if lo >= threshold else THRESHOLD_WORDS[1] if hi < threshold else THRESHOLD_WORDS[2]
    else:
        word = THRESHOLD_WORDS[0] if hi <= threshold else THRESHOLD_WORDS[1] if lo > threshold else THRESHOLD_WORDS[2]
    return ThresholdTest(float(estimate), lo, hi, float(threshold), direction, int(n), word)


def decide_threshold(values: np.ndarray, threshold: float, direction: str = ">=", level: float = 0.95
                     ) -> ThresholdTest:
    """Decide "mean of ``values`` ``direction`` threshold" with the Student-t interval over the units in
    ``values`` (seeds, or seed × item means). One unit (or a NaN) gives an unbounded interval: inconclusive."""
    v = np.asarray(values, float).ravel()
    if v.size < 2 or not np.all(np.isfinite(v)):
        est = float(np.mean(v)) if v.size else float("nan")
        return threshold_from_ci(est, -math.inf, math.inf, threshold, direction, int(v.size))
    m, h = mean_ci(v, level=level)
    return threshold_from_ci(float(m), float(m - h), float(m + h), threshold, direction, int(v.size))


def bootstrap_two_level(values: np.ndarray, statistic: Callable[[np.ndarray], float] = np.mean, *,
                        n_boot: int = 2000, level: float = 0.95, rng: np.random.Generator | int = 0
                        ) -> tuple[float, float]:
    """Percentile interval of ``statistic`` over a (units × items) table, resampling both what changes with the
    seed: the units (training seeds, rows) and, within each drawn unit, its items (test examples, columns).

    A CI over the items of one run alone misses the seed-to-seed spread; one over seed means alone misses the
    test set's. ``statistic`` gets the resampled table and returns a number."""
    x = np.asarray(values, float)
    if x.ndim != 2:
        raise ValueError(f"bootstrap_two_level needs a 2-d (units × items) table; got shape {x.shape}")
    u, m = x.shape
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    boots = np.empty(n_boot)
    for b in range(n_boot):
        rows = rng.integers(0, u, size=u)
        cols = rng.integers(0, m, size=(u, m))
        boots[b] = statistic(x[rows[:, None], cols])
    lo, hi = np.nanquantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)
