"""ROC summaries of the detectors: AUC (Mann–Whitney, ties counted ½) and TPR at a fixed FPR."""
from __future__ import annotations

import numpy as np


def auc(pos, neg) -> float:
    pos, neg = np.asarray(pos, float), np.asarray(neg, float)
    pos, neg = pos[np.isfinite(pos)], neg[np.isfinite(neg)]
    if not len(pos) or not len(neg):
        return float("nan")
    gt = (pos[:, None] > neg[None]).mean()
    eq = (pos[:, None] == neg[None]).mean()
    return float(gt + 0.5 * eq)


def tpr_at_fpr(pos, neg, fpr: float = 0.01) -> float:
    """TPR of the threshold that admits at most ⌊fpr · n_neg⌋ negatives (scores strictly above it detect)."""
    pos, neg = np.asarray(pos, float), np.sort(np.asarray(neg, float))[::-1]
    allowed = int(np.floor(fpr * len(neg)))
    thr = neg[allowed] if allowed < len(neg) else -np.inf
    return float(np.mean(pos > thr))


def roc_curve(pos, neg) -> tuple[np.ndarray, np.ndarray]:
    s = np.unique(np.concatenate([pos, neg]))[::-1]
    fpr = np.array([0.0] + [np.mean(np.asarray(neg) >= t) for t in s])
    tpr = np.array([0.0] + [np.mean(np.asarray(pos) >= t) for t in s])
    return fpr, tpr


def _boot_idx(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, n, (n_boot, n))


def _auc_rows(P: np.ndarray, N: np.ndarray) -> np.ndarray:
    """AUC of each bootstrap row: P (b, n_pos), N (b, n_neg)."""
    gt = (P[:, :, None] > N[:, None, :]).mean((1, 2))
    eq = (P[:, :, None] == N[:, None, :]).mean((1, 2))
    return gt + 0.5 * eq


def _tpr_rows(P: np.ndarray, N: np.ndarray, fpr: float) -> np.ndarray:
    Ns = -np.sort(-N, 1)
    allowed = int(np.floor(fpr * N.shape[1]))
    thr = Ns[:, allowed] if allowed < N.shape[1] else np.full(len(N), -np.inf)
    return (P > thr[:, None]).mean(1)


def roc_ci(pos, neg, n_boot: int = 2000, seed: int = 0, fpr: float = 0.01) -> dict:
    """AUC and TPR at ``fpr`` with 95 % percentile intervals from a stratified bootstrap (positives and negatives
    resampled separately; non-finite scores dropped, as in :func:`auc`)."""
    pos, neg = np.asarray(pos, float), np.asarray(neg, float)
    pos, neg = pos[np.isfinite(pos)], neg[np.isfinite(neg)]
    out = {"AUC": auc(pos, neg), "TPR@1%FPR": tpr_at_fpr(pos, neg, fpr), "positives": int(len(pos)),
           "negatives": int(len(neg)), "n": int(len(pos) + len(neg))}
    if len(pos) < 2 or len(neg) < 2:
        out.update({"AUC ci95": [-np.inf, np.inf], "TPR ci95": [-np.inf, np.inf]})
        return out
    g = np.random.default_rng(seed)
    P, N = pos[_boot_idx(len(pos), n_boot, g)], neg[_boot_idx(len(neg), n_boot, g)]
    a, t = _auc_rows(P, N), _tpr_rows(P, N, fpr)
    out["AUC ci95"] = [float(v) for v in np.quantile(a, [0.025, 0.975])]
    out["TPR ci95"] = [float(v) for v in np.quantile(t, [0.025, 0.975])]
    return out


def _ready(x) -> np.ndarray:
    """Scores with non-finite values placed below every finite one."""
    x = np.asarray(x, float)
    fin = x[np.isfinite(x)]
    return np.where(np.isfinite(x), x, (fin.min() if fin.size else 0.0) - 1.0)


def auc_over_draws(draws_a, draws_b=None, n_boot: int = 2000, seed: int = 0) -> dict:
    """Mean over draws of an attack (e.g. the token bias δ) of AUC(a), or of the paired gap AUC(a) − AUC(b) when
    ``draws_b`` is given; each draw is a (positives, negatives) pair of score arrays, the same items in a and b.

    The 95 % interval is a two-level percentile bootstrap: the draws are resampled, and within each drawn draw its
    positives and negatives (paired between a and b). One draw of the bias is one sample of the attack, so a CI over
    the ROC items of one draw misses how much the attack's effect varies from draw to draw (issue 43's sweep: the
    gap of C4 at σ = 4 was 0.84 at one seed and 0.00 at another). Returns ``mean``, ``ci95`` and ``per draw``."""
    g = np.random.default_rng(seed)
    D = len(draws_a)
    reps, point = np.empty((D, n_boot)), []
    for d in range(D):
        pa, na = (_ready(x) for x in draws_a[d])
        ip, ineg = _boot_idx(len(pa), n_boot, g), _boot_idx(len(na), n_boot, g)
        r, pt = _auc_rows(pa[ip], na[ineg]), float(_auc_rows(pa[None], na[None])[0])
        if draws_b is not None:
            pb, nb = (_ready(x) for x in draws_b[d])
            if pb.shape != pa.shape or nb.shape != na.shape:
                raise ValueError("auc_over_draws needs the same positives and negatives in both scorings")
            r = r - _auc_rows(pb[ip], nb[ineg])
            pt -= float(_auc_rows(pb[None], nb[None])[0])
        reps[d], point = r, point + [pt]
    if D < 2:
        lo, hi = np.quantile(reps[0], [0.025, 0.975])
    else:
        pick = g.integers(0, D, size=(n_boot, D))
        lo, hi = np.quantile(reps[pick, np.arange(n_boot)[:, None]].mean(1), [0.025, 0.975])
    return {"mean": float(np.mean(point)), "ci95": [float(lo), float(hi)], "per draw": point}
