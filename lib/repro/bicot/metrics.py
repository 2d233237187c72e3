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
