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


def auc_gap_ci(pos_a, neg_a, pos_b, neg_b, n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % interval of AUC(a) − AUC(b) for two scorings of the same items (paired: the same bootstrap indices
    resample positives and negatives in both). Non-finite scores are placed below every finite one."""
    def ready(x):
        x = np.asarray(x, float)
        fin = x[np.isfinite(x)]
        return np.where(np.isfinite(x), x, (fin.min() if fin.size else 0.0) - 1.0)
    pa, na, pb, nb = (ready(x) for x in (pos_a, neg_a, pos_b, neg_b))
    if pa.shape != pb.shape or na.shape != nb.shape:
        raise ValueError("auc_gap_ci needs the same positives and negatives in both scorings")
    g = np.random.default_rng(seed)
    ip, ineg = _boot_idx(len(pa), n_boot, g), _boot_idx(len(na), n_boot, g)
    d = _auc_rows(pa[ip], na[ineg]) - _auc_rows(pb[ip], nb[ineg])
    lo, hi = np.quantile(d, [0.025, 0.975])
    return float(lo), float(hi)
