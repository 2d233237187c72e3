"""The three-stage probes (authors' ``hidden_number_probing_clf.py`` and the paper's magnitude analysis).

* Individuation: a per-patch logistic probe (black vs not black) on vision tokens, fitted on ID boards with
  balanced classes; a board's count is the number of patches predicted black.
* Magnitude: ridge from mean-pooled vision tokens (or the decoder state at the answer position) to the count,
  α by cross-validation on ID boards only.
* Fractured space: a ridge map ``M`` from ID image states to the text centroid of their count, then
  nearest-centroid decoding of ``M h`` — and the same centroids applied to held-out text states.
"""
from __future__ import annotations

import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression, Ridge, RidgeCV

from .boards import BLACK

ALPHAS = np.logspace(-3, 3, 13)
MAP_ALPHAS = np.logspace(-3, 4, 15)


def fit_extrapolating_ridge(X: np.ndarray, Y: np.ndarray, n: np.ndarray, alphas=MAP_ALPHAS) -> Ridge:
    """Ridge ``X -> Y`` whose α is chosen *for extrapolation* inside the fitting range: fitted on the lower
    two thirds of the counts ``n``, scored (mean squared error) on the upper third, then refitted on all rows.
    (Leave-one-out CV would choose α for interpolation, which says nothing about the counts beyond.)"""
    ks = np.unique(n)
    cut = ks[int(np.ceil(2 * len(ks) / 3)) - 1]
    lo, hi = n <= cut, n > cut
    best = min(alphas, key=lambda a: float(((Ridge(alpha=a).fit(X[lo], Y[lo]).predict(X[hi]) - Y[hi]) ** 2).mean()))
    return Ridge(alpha=best).fit(X, Y)


def patch_probe_fit(tokens: np.ndarray, boards: np.ndarray, rng: np.random.Generator) -> LogisticRegression:
    """Logistic regression black vs {white, empty} on tokens ``[N, P, d]`` with labels from ``boards [N, P]``;
    the non-black patches are subsampled to as many as the black ones (balanced, as the repo)."""
    X = tokens.reshape(-1, tokens.shape[-1])
    y = (boards.reshape(-1) == BLACK)
    pos, neg = np.flatnonzero(y), np.flatnonzero(~y)
    neg = rng.choice(neg, size=min(len(neg), len(pos)), replace=False)
    idx = np.concatenate([pos, neg])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LogisticRegression(max_iter=300).fit(X[idx], y[idx])


def probe_predict(probe, tokens: np.ndarray) -> np.ndarray:
    """Predicted black mask ``bool[N, P]``."""
    return probe.predict(tokens.reshape(-1, tokens.shape[-1])).reshape(tokens.shape[:2]).astype(bool)


def probe_count(pred_black: np.ndarray) -> np.ndarray:
    """Count = number of patches predicted black."""
    return np.asarray(pred_black).sum(1)


def patch_scores(pred_black: np.ndarray, boards: np.ndarray) -> dict:
    """Patch accuracy, balanced patch accuracy (mean recall of both classes) and exact-count accuracy."""
    y = boards == BLACK
    rec_b = float(pred_black[y].mean()) if y.any() else np.nan
    rec_n = float((~pred_black[~y]).mean()) if (~y).any() else np.nan
    return {"patch_acc": float((pred_black == y).mean()), "balanced_acc": float(np.nanmean([rec_b, rec_n])),
            "count_acc": float((probe_count(pred_black) == y.sum(1)).mean())}


def ridge_magnitude_probe(X_fit: np.ndarray, n_fit: np.ndarray) -> RidgeCV:
    """Ridge from features to the count, α chosen by leave-one-out CV on the fitting (ID) set."""
    return RidgeCV(alphas=ALPHAS).fit(X_fit, n_fit)


def regression_scores(pred: np.ndarray, n: np.ndarray) -> dict:
    """MAE and R² of a magnitude prediction (R² NaN if the counts do not vary)."""
    n = np.asarray(n, float)
    ss = float(((n - n.mean()) ** 2).sum())
    return {"mae": float(np.abs(pred - n).mean()),
            "r2": float(1 - ((pred - n) ** 2).sum() / ss) if ss > 0 else float("nan")}


def centroids(h: np.ndarray, n: np.ndarray, counts) -> np.ndarray:
    """Mean state per count, ``[len(counts), d]``."""
    return np.stack([h[n == k].mean(0) for k in counts])


def nearest_centroid(z: np.ndarray, C: np.ndarray, counts) -> np.ndarray:
    """Count of the nearest centroid (Euclidean) for each row of ``z``."""
    d = ((z[:, None, :] - C[None]) ** 2).sum(-1)
    return np.asarray(counts)[d.argmin(1)]


def centroid_map_analysis(h_img: np.ndarray, n_img: np.ndarray, h_txt: np.ndarray, n_txt: np.ndarray,
                          fit_counts, test_counts, txt_counts, tol: int = 2,
                          h_txt_held: np.ndarray | None = None, n_txt_held: np.ndarray | None = None,
                          prior: str = "identity") -> dict:
    """C5b's pipeline. Text centroids per count in ``txt_counts`` from ``(h_txt, n_txt)``; a ridge map ``M``
    (α chosen for extrapolation, :func:`fit_extrapolating_ridge`) from the image states with counts in ``fit_counts`` to the centroid of their count; images with
    counts in ``test_counts`` decoded as the count of the nearest centroid to ``M h``. Returns the share within
    ±``tol`` of the true count (``within``), exact (``exact``), and, if held-out text states are given, the share
    of those (with counts in ``test_counts``) whose nearest centroid is within ±``tol`` (``text_within``; per
    held-out state in ``text_within_hit``).

    ``prior="identity"`` (default) shrinks ``M`` toward the identity: the ridge fits the residual
    ``c_n − h`` and ``M h = h + ridge(h)``. Image and text states are states of the *same* decoder, so directions
    the ID states do not constrain are left as they are instead of being zeroed (a plain ridge, ``prior="zero"``,
    zeroes them and cannot extrapolate even from text to text)."""
    C = centroids(h_txt, n_txt, txt_counts)
    pos = {k: i for i, k in enumerate(txt_counts)}
    fit = np.isin(n_img, fit_counts)
    target = C[[pos[k] for k in n_img[fit]]]
    test = np.isin(n_img, test_counts)
    if prior == "identity":
        M = fit_extrapolating_ridge(h_img[fit], target - h_img[fit], n_img[fit])
        z = h_img[test] + M.predict(h_img[test])
    elif prior == "zero":
        z = fit_extrapolating_ridge(h_img[fit], target, n_img[fit]).predict(h_img[test])
    else:
        raise ValueError(f"prior must be 'identity' or 'zero', got {prior!r}")
    dec = nearest_centroid(z, C, txt_counts)
    out = {"within": float((np.abs(dec - n_img[test]) <= tol).mean()), "exact": float((dec == n_img[test]).mean()),
           "decoded": dec, "true": n_img[test]}
    if h_txt_held is not None:
        m = np.isin(n_txt_held, test_counts)
        d2 = nearest_centroid(h_txt_held[m], C, txt_counts)
        out["text_within_hit"] = np.abs(d2 - n_txt_held[m]) <= tol
        out["text_within"] = float(out["text_within_hit"].mean())
    return out


def linear_cka(X: np.ndarray, Y: np.ndarray) -> float:
    """Linear CKA (Kornblith et al., 2019) between two row-aligned representations."""
    X = X - X.mean(0)
    Y = Y - Y.mean(0)
    num = np.linalg.norm(Y.T @ X) ** 2
    return float(num / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y) + 1e-12))
