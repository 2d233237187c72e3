"""Method steps 4-5: the proximity path over cluster centroids and the training order with mixed regions, plus
the baselines' orders (random shuffle, score curriculum, domain-blocked, random cluster order).

Path (card, step 4): start at the cluster whose centroid is farthest from the global mean (a "boundary" cluster),
go greedily to the nearest unvisited centroid, then improve the open path by 2-opt (first improvement,
lexicographic move order, start fixed) to shorten Σ consecutive centroid distances. The 2-opt loop runs in the
compiled kernel ``_kernels.two_opt``; :func:`two_opt_reference` is the same loop in Python (tested equal).

Mixed regions (step 5): the cluster at path position j gives its samples keys k_i = j + U(0, 1); a random fraction
ρ of them instead gets k_i = j + U(−w, 1 + w), so they land in the neighbouring clusters' stretches; sorting the
keys gives one permutation in which each boundary interleaves previous, current and next clusters. A fraction
ρ·2w/(1 + 2w) of all samples ends up outside its own block [j, j + 1).
"""
from __future__ import annotations

import numpy as np

try:
    from . import _kernels
    HAVE_KERNEL = True
except ImportError:  # not built: the reference is used
    _kernels = None
    HAVE_KERNEL = False


def centroid_distances(centroids: np.ndarray) -> np.ndarray:
    """Euclidean distances between centroids, [K, K] float64 (exact zeros on the diagonal)."""
    C = np.asarray(centroids, float)
    sq = (C * C).sum(1)
    D = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * C @ C.T, 0.0))
    np.fill_diagonal(D, 0.0)
    return D


def path_length(points: np.ndarray, path, dist: bool = False) -> float:
    """Σ consecutive distances along the open ``path``: ``points`` are centroids [K, d], or with ``dist=True`` a
    distance matrix [K, K]."""
    D = np.asarray(points, float) if dist else centroid_distances(points)
    p = np.asarray(path)
    return float(D[p[:-1], p[1:]].sum())


def two_opt_reference(dist: np.ndarray, path) -> np.ndarray:
    """Python 2-opt with the kernel's move order, formula and tolerance (the reference it is tested against)."""
    D = np.asarray(dist, float)
    p = [int(v) for v in path]
    K = len(p)
    improved = True
    while improved:
        improved = False
        for i in range(1, K - 1):
            for j in range(i + 1, K):
                delta = D[p[i - 1], p[j]] - D[p[i - 1], p[i]]
                if j + 1 < K:
                    delta += (D[p[i], p[j + 1]] - D[p[j], p[j + 1]])
                if delta < -1e-12:
                    p[i:j + 1] = p[i:j + 1][::-1]
                    improved = True
                    break
            if improved:
                break
    return np.asarray(p, dtype=np.int32)


def two_opt(dist: np.ndarray, path, backend: str = "auto") -> np.ndarray:
    """2-opt of an open path with a fixed start; ``backend`` "cpp", "python" or "auto" (the kernel when built)."""
    if backend == "cpp" or (backend == "auto" and HAVE_KERNEL):
        if not HAVE_KERNEL:
            raise RuntimeError("repro.ep_order._kernels is not built: run `.venv/bin/python setup.py build_ext --inplace`")
        return _kernels.two_opt(np.ascontiguousarray(dist, dtype=np.float64), np.ascontiguousarray(path, dtype=np.int32))
    return two_opt_reference(dist, path)


def greedy_path(centroids: np.ndarray, start: int | None = None) -> np.ndarray:
    """Start at ``start`` (default: the centroid farthest from the global mean), then nearest unvisited next."""
    C = np.asarray(centroids, float)
    D = centroid_distances(C)
    if start is None:
        start = int(np.argmax(np.linalg.norm(C - C.mean(0), axis=1)))
    path, left = [start], set(range(len(C))) - {start}
    while left:
        cur = path[-1]
        nxt = min(left, key=lambda j: (D[cur, j], j))
        path.append(nxt)
        left.remove(nxt)
    return np.asarray(path, dtype=np.int32)


def proximity_path(centroids: np.ndarray, backend: str = "auto") -> np.ndarray:
    """The card's cluster order: greedy nearest-neighbour path from the boundary cluster, improved by 2-opt."""
    return two_opt(centroid_distances(centroids), greedy_path(centroids), backend=backend)


def random_path_lengths(centroids: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Path lengths of ``n`` uniformly random cluster orders (control K3's yardstick)."""
    D = centroid_distances(centroids)
    K = len(D)
    return np.array([path_length(D, rng.permutation(K), dist=True) for _ in range(n)])


def ep_keys(labels: np.ndarray, path, mix_frac: float, mix_width: float, rng: np.random.Generator) -> np.ndarray:
    """The sort keys of step 5: k_i = j + U(0,1), or j + U(−w, 1+w) for a random fraction ρ of each cluster."""
    labels = np.asarray(labels)
    pos = np.empty(int(labels.max()) + 1 if labels.size else 0, dtype=float)
    pos[np.asarray(path)] = np.arange(len(path))
    j = pos[labels]
    keys = j + rng.uniform(0.0, 1.0, size=len(labels))
    if mix_frac > 0:
        mixed = np.zeros(len(labels), dtype=bool)
        for c in np.unique(labels):
            idx = np.flatnonzero(labels == c)
            n_mix = int(round(mix_frac * len(idx)))
            mixed[rng.choice(idx, size=n_mix, replace=False)] = True
        keys[mixed] = j[mixed] + rng.uniform(-mix_width, 1.0 + mix_width, size=int(mixed.sum()))
    return keys


def ep_order(labels: np.ndarray, path, mix_frac: float, mix_width: float, rng: np.random.Generator) -> np.ndarray:
    """EP-Order's permutation of 0..N−1: clusters along ``path`` with mixed regions (``mix_frac`` = 0: pure blocks)."""
    return np.argsort(ep_keys(labels, path, mix_frac, mix_width, rng), kind="stable")


def random_order(n: int, rng: np.random.Generator) -> np.ndarray:
    """The paper's main baseline: a uniform random shuffle."""
    return rng.permutation(n)


def curriculum_order(losses: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Score curriculum (Bengio et al. 2009): easy to hard by the warm-up model's per-sample loss (ties at random)."""
    losses = np.asarray(losses, float)
    return np.lexsort((rng.random(len(losses)), losses))


def domain_blocked_order(domains: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Ground-truth domains in a random order, shuffled within each domain, no mixing."""
    domains = np.asarray(domains)
    order = rng.permutation(np.unique(domains))
    return np.concatenate([rng.permutation(np.flatnonzero(domains == d)) for d in order])
