"""Method step 3: k-means on the unit sphere (cosine), k-means++ initialisation, best of ``n_init`` restarts;
purity against the true domains and the adjusted Rand index (tests)."""
from __future__ import annotations

import numpy as np


def _normalise(X: np.ndarray) -> np.ndarray:
    return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)


def kmeans(X: np.ndarray, k: int, iters: int = 50, n_init: int = 3, rng: np.random.Generator | int = 0,
           return_history: bool = False):
    """Spherical k-means: assign each unit row to the centroid of largest cosine, centroids are normalised means.

    Returns ``(labels [N], centroids [k, d])`` of the restart with the smallest inertia Σ (1 − cos); with
    ``return_history`` also that restart's inertia after every iteration (non-increasing).
    """
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    X = _normalise(np.asarray(X, float))
    N = len(X)
    if not 1 <= k <= N:
        raise ValueError(f"k must lie in 1..{N}; got {k}")
    best = None
    for _ in range(n_init):
        # k-means++ on the cosine distance 1 - cos
        C = [X[rng.integers(N)]]
        d = 1 - X @ C[0]
        for _ in range(1, k):
            p = np.maximum(d, 0) ** 2
            idx = rng.choice(N, p=p / p.sum()) if p.sum() > 0 else rng.integers(N)
            C.append(X[idx])
            d = np.minimum(d, 1 - X @ X[idx])
        C = np.array(C)
        hist = []
        labels = None
        for _ in range(iters):
            sim = X @ C.T
            new = sim.argmax(1)
            hist.append(float((1 - sim[np.arange(N), new]).sum()))
            if labels is not None and np.array_equal(new, labels):
                break
            labels = new
            for j in range(k):
                m = labels == j
                if m.any():
                    C[j] = X[m].sum(0)
                else:   # an empty cluster takes the point farthest from its centroid
                    far = int(np.argmin(sim[np.arange(N), labels]))
                    C[j] = X[far]
                    labels[far] = j
            C = _normalise(C)
        sim = X @ C.T
        labels = sim.argmax(1)
        inertia = float((1 - sim[np.arange(N), labels]).sum())
        hist.append(inertia)
        if best is None or inertia < best[0]:
            best = (inertia, labels.copy(), C.copy(), hist)
    return (best[1], best[2], best[3]) if return_history else (best[1], best[2])


def purity(labels: np.ndarray, domains: np.ndarray) -> float:
    """Fraction of samples whose cluster's majority domain is their own domain."""
    labels, domains = np.asarray(labels), np.asarray(domains)
    hit = 0
    for j in np.unique(labels):
        _, counts = np.unique(domains[labels == j], return_counts=True)
        hit += counts.max()
    return hit / len(labels)


def dominant_domain(labels: np.ndarray, domains: np.ndarray, cluster: int) -> int:
    """The majority domain (index) of ``cluster``."""
    vals, counts = np.unique(np.asarray(domains)[np.asarray(labels) == cluster], return_counts=True)
    return int(vals[counts.argmax()])


def adjusted_rand_index(a: np.ndarray, b: np.ndarray) -> float:
    """Adjusted Rand index of two labelings (Hubert & Arabie 1985)."""
    a, b = np.unique(a, return_inverse=True)[1], np.unique(b, return_inverse=True)[1]
    n = len(a)
    M = np.zeros((a.max() + 1, b.max() + 1))
    np.add.at(M, (a, b), 1)
    c2 = lambda x: x * (x - 1) / 2  # noqa: E731
    s = c2(M).sum()
    sa, sb = c2(M.sum(1)).sum(), c2(M.sum(0)).sum()
    exp = sa * sb / c2(n)
    return float((s - exp) / (0.5 * (sa + sb) - exp))
