"""Metrics of chapter 10: AUC, per-group and worst-group AUC, ES-AUC, RES-AUC, EOD, DPD, and the bootstrap of
per-group AUCs (card, *Metrics and figures*; *Compiled kernel*).

* AUC by the rank-sum (Mann–Whitney U) formula with average ranks for ties.
* ES-AUC = AUC / (1 + Σ_g |AUC − AUC_g|)  (equity-scaled AUC of Luo et al., FairCLIP, CVPR 2024).
* **RES-AUC = AUC / (1 + |AUC − min_g AUC_g|)** — *our reconstruction*: the paper names a worst-group
  ("Rawlsian") variant of ES-AUC that does not shrink as groups are added, but its formula is not public. The
  worst-group gap replaces the sum of gaps; |·| as in ES-AUC (the pooled AUC can fall below every group's).
* EOD (equal-opportunity difference) = max_g TPR_g − min_g TPR_g, DPD = max_g − min_g of the positive rate, both
  at threshold 0.5.

The bootstrap resamples every group with replacement (stratified, so every resample keeps the group sizes) and
returns each resample's per-group AUCs and pooled AUC. ``bootstrap_group_auc`` runs the compiled kernel
(``_kernels.bootstrap_group_auc``: one pre-sort, then O(N) per resample from the resample counts);
``bootstrap_group_auc_reference`` resamples the same indices and ranks every resample (O(B·N log N)).
"""
from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

try:
    from . import _kernels
except ImportError:  # pragma: no cover - the kernel is built by `make setup`
    _kernels = None


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """ROC AUC by the rank-sum formula with average ranks (NaN when a class is absent)."""
    s, y = np.asarray(scores, float), np.asarray(labels).astype(bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    r = rankdata(s)
    return float((r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def group_aucs(scores: np.ndarray, labels: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    s, y, g = np.asarray(scores), np.asarray(labels), np.asarray(groups)
    return np.array([auc(s[g == k], y[g == k]) for k in range(n_groups)])


def es_auc(overall: float, per_group) -> float:
    """Equity-scaled AUC: AUC / (1 + Σ_g |AUC − AUC_g|)."""
    return float(overall / (1 + np.abs(overall - np.asarray(per_group, float)).sum()))


def res_auc(overall: float, per_group) -> float:
    """RES-AUC (our reconstruction): AUC / (1 + |AUC − min_g AUC_g|)."""
    return float(overall / (1 + abs(overall - np.min(np.asarray(per_group, float)))))


def _rate_gap(pred: np.ndarray, mask_groups: list[np.ndarray]) -> float:
    rates = [pred[m].mean() for m in mask_groups if m.any()]
    return float(max(rates) - min(rates)) if rates else float("nan")


def eod(scores, labels, groups, n_groups: int, threshold: float = 0.5) -> float:
    """Equal-opportunity difference: max_g TPR_g − min_g TPR_g at ``threshold`` (groups with positives)."""
    s, y, g = np.asarray(scores), np.asarray(labels), np.asarray(groups)
    return _rate_gap(s >= threshold, [(g == k) & (y == 1) for k in range(n_groups)])


def dpd(scores, labels, groups, n_groups: int, threshold: float = 0.5) -> float:
    """Demographic-parity difference: max_g − min_g of the predicted-positive rate at ``threshold``."""
    s, g = np.asarray(scores), np.asarray(groups)
    return _rate_gap(s >= threshold, [g == k for k in range(n_groups)])


def evaluate(scores, labels, groups, n_groups: int) -> dict:
    """Every metric of the chapter for one model's test scores."""
    a = auc(scores, labels)
    ga = group_aucs(scores, labels, groups, n_groups)
    return {"auc": a, "res_auc": res_auc(a, ga), "es_auc": es_auc(a, ga), "worst_auc": float(ga.min()),
            "group_auc": ga.tolist(), "eod": eod(scores, labels, groups, n_groups),
            "dpd": dpd(scores, labels, groups, n_groups)}


# ----------------------------------------------------------------------------- bootstrap

def resample_indices(groups: np.ndarray, n_groups: int, n_boot: int, seed: int) -> list[np.ndarray]:
    """Stratified bootstrap: for every group, [B, n_g] indices into the full arrays (with replacement)."""
    rng = np.random.default_rng([seed, 505])
    g = np.asarray(groups)
    out = []
    for k in range(n_groups):
        members = np.flatnonzero(g == k)
        out.append(members[rng.integers(0, len(members), size=(n_boot, len(members)))] if len(members)
                   else np.zeros((n_boot, 0), np.int64))
    return out


def resample_counts(idx: list[np.ndarray], n: int) -> np.ndarray:
    """Multiplicity of every sample in every resample, [B, N] int32."""
    B = idx[0].shape[0]
    flat = np.concatenate([(np.arange(B)[:, None] * n + i).ravel() for i in idx])
    return np.bincount(flat, minlength=B * n).reshape(B, n).astype(np.int32)


def _rank_auc_rows(S: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Row-wise rank-sum AUC of [B, m] scores and labels."""
    R = rankdata(S, axis=1)
    n1 = Y.sum(1).astype(float)
    n0 = Y.shape[1] - n1
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n1 > 0) & (n0 > 0), ((R * Y).sum(1) - n1 * (n1 + 1) / 2) / (n1 * n0), np.nan)


def bootstrap_group_auc_reference(scores, labels, groups, n_groups: int, idx: list[np.ndarray]) -> np.ndarray:
    """numpy reference: [B, G + 1] per-group AUCs and (last column) the pooled AUC of each resample."""
    s, y = np.asarray(scores, float), np.asarray(labels).astype(float)
    cols = [_rank_auc_rows(s[i], y[i]) for i in idx]
    allidx = np.concatenate(idx, axis=1)
    cols.append(_rank_auc_rows(s[allidx], y[allidx]))
    return np.stack(cols, 1)


def bootstrap_group_auc(scores, labels, groups, n_groups: int, n_boot: int, seed: int,
                        use_kernel: bool = True) -> np.ndarray:
    """[B, G + 1] bootstrap per-group and pooled AUCs (compiled kernel; numpy reference if unavailable)."""
    g = np.ascontiguousarray(groups, dtype=np.int64)
    idx = resample_indices(g, n_groups, n_boot, seed)
    if not use_kernel or _kernels is None:
        return bootstrap_group_auc_reference(scores, labels, g, n_groups, idx)
    counts = resample_counts(idx, len(g))
    return _kernels.bootstrap_group_auc(np.ascontiguousarray(scores, dtype=np.float64),
                                        np.ascontiguousarray(labels, dtype=np.int64), g, counts, n_groups)


def bootstrap_summary(boot: np.ndarray, level: float = 0.95) -> dict:
    """Percentile CIs of the per-group AUCs, worst-group AUC, AUC, ES-AUC and RES-AUC from a [B, G + 1] array."""
    ga, a = boot[:, :-1], boot[:, -1]
    stats = {"auc": a, "worst_auc": ga.min(1),
             "res_auc": a / (1 + np.abs(a - ga.min(1))),
             "es_auc": a / (1 + np.abs(a[:, None] - ga).sum(1))}
    for k in range(ga.shape[1]):
        stats[f"auc_g{k}"] = ga[:, k]
    q = [(1 - level) / 2, (1 + level) / 2]
    return {k: np.nanquantile(v, q).tolist() for k, v in stats.items()}


# ----------------------------------------------------------------------------- C5: RES-AUC as groups grow

def duplicate_groups(scores, labels, groups, n_groups: int):
    """C5a: every sample duplicated with a new sub-group label g + G (each sub-group has its parent's scores)."""
    s, y, g = (np.asarray(a) for a in (scores, labels, groups))
    return np.concatenate([s, s]), np.concatenate([y, y]), np.concatenate([g, g + n_groups]), 2 * n_groups


def binormal_groups(n_groups: int, n_per_class: int = 1000, lo: float = 0.75, hi: float = 0.90,
                    seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """C5b: equal-size groups whose binormal AUCs are evenly spaced in [lo, hi]
    (negatives N(0, 1), positives N(√2 Φ⁻¹(AUC_g), 1))."""
    from scipy.stats import norm

    rng = np.random.default_rng([seed, 606, n_groups])
    targets = np.linspace(lo, hi, n_groups)
    s, y, g = [], [], []
    for k, a in enumerate(targets):
        d = np.sqrt(2) * norm.ppf(a)
        s += [rng.normal(0, 1, n_per_class), rng.normal(d, 1, n_per_class)]
        y += [np.zeros(n_per_class, int), np.ones(n_per_class, int)]
        g += [np.full(2 * n_per_class, k)]
    return np.concatenate(s), np.concatenate(y), np.concatenate(g)
