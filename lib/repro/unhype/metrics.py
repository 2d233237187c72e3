"""Metrics of chapter 01: what the frozen classifier says about generated digits, and how far samples moved.

* target rate -- fraction of samples from a target prompt that the classifier assigns to the target digit;
* retain acc -- classifier accuracy on samples from non-target prompts;
* paired drift -- mean ||x_edited - x_base||_2 over samples from the same prompts and the same noise (continuous;
  accuracies saturate near 1 at this scale);
* H_o -- harmonic mean of (1 - target rate), retain acc and (1 - paraphrase target rate), the paper's CIFAR-10
  composite (Sec. 4.1);
* Frechet distance between Gaussian fits of the classifier's 64-d penultimate features (FID at toy scale).
"""
from __future__ import annotations

import numpy as np
import torch


def target_rate(pred: np.ndarray, label: np.ndarray, target: int) -> float:
    """P(classifier says ``target`` | sample was prompted as ``target``)."""
    m = np.asarray(label) == target
    return float(np.mean(np.asarray(pred)[m] == target)) if m.any() else float("nan")


def retain_acc(pred: np.ndarray, label: np.ndarray, retain: list[int] | np.ndarray) -> float:
    """Classifier accuracy on samples prompted as one of the ``retain`` digits."""
    m = np.isin(np.asarray(label), np.asarray(retain))
    return float(np.mean(np.asarray(pred)[m] == np.asarray(label)[m])) if m.any() else float("nan")


def paired_drift(x_edit: torch.Tensor | np.ndarray, x_base: torch.Tensor | np.ndarray,
                 mask: np.ndarray | None = None) -> float:
    """Mean L2 distance (in [-1, 1] pixel units) between paired samples (same prompt, same noise)."""
    d = np.linalg.norm(np.asarray(x_edit, dtype=np.float64) - np.asarray(x_base, dtype=np.float64), axis=1)
    return float(d[mask].mean() if mask is not None else d.mean())


def h_o(target_rate_: float, retain_acc_: float, para_rate: float) -> float:
    """Harmonic mean of (1 - target rate), retain acc and (1 - paraphrase target rate); 0 if any term is 0."""
    terms = np.array([1 - target_rate_, retain_acc_, 1 - para_rate], dtype=float)
    if np.any(terms <= 0):
        return 0.0
    return float(len(terms) / np.sum(1 / terms))


def frechet_distance(f1: np.ndarray, f2: np.ndarray) -> float:
    """||mu1 - mu2||^2 + tr(S1 + S2 - 2 (S1 S2)^{1/2}) between Gaussian fits of two feature sets (rows).

    tr (S1 S2)^{1/2} = sum_i sqrt(lambda_i(S1^{1/2} S2 S1^{1/2})), computed with symmetric eigendecompositions,
    which stays exact when the covariances are singular (ReLU features often are).
    """
    f1, f2 = np.asarray(f1, np.float64), np.asarray(f2, np.float64)
    mu1, mu2 = f1.mean(0), f2.mean(0)
    s1, s2 = np.cov(f1, rowvar=False), np.cov(f2, rowvar=False)
    w, v = np.linalg.eigh(s1)
    r1 = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    lam = np.linalg.eigvalsh(r1 @ s2 @ r1)
    return float(np.sum((mu1 - mu2) ** 2) + np.trace(s1) + np.trace(s2) - 2 * np.sum(np.sqrt(np.clip(lam, 0, None))))


def mean_embeddings(emb: torch.Tensor | np.ndarray, digit: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """(10, d): the mean embedding of each digit's prompts among ``idx``, renormalised."""
    e = np.asarray(emb, dtype=np.float64)
    out = np.stack([e[idx[digit[idx] == d]].mean(0) for d in range(10)])
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def nearest_concepts(mean_emb: np.ndarray, target: int, n: int = 3) -> list[int]:
    """The ``n`` digits whose mean prompt embeddings are most cosine-similar to the target's."""
    sims = mean_emb @ mean_emb[target]
    order = [int(d) for d in np.argsort(-sims) if d != target]
    return order[:n]


def bootstrap_rate(hits: np.ndarray, n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of a rate over samples (vectorised)."""
    hits = np.asarray(hits, dtype=float)
    rng = np.random.default_rng(seed)
    boots = hits[rng.integers(0, len(hits), size=(n_boot, len(hits)))].mean(1)
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return float(lo), float(hi)
