"""Shared sets, routed experts and routers (card, Method 2-5).

* :func:`knee_threshold` — the knee of a descending frequency curve: the point farthest below the chord from its
  first to its last point; the neurons before it are the layer's universal candidates.
* :func:`layer_adaptive_shared` — knee sizes clipped to [2 %, 40 %] of d_ff and rescaled by one global factor to
  a total shared budget (layer-adaptive), the ExpertWeaver rule; a uniform size is the CMoE-style ablation.
* :func:`plan_layer` — the budget rule: shared size ``u``, top-``k`` and near-equal expert sizes
  (⌊N_s/E⌋ or ⌈N_s/E⌉, the card's risks) such that every token's active count stays within ``tol`` neurons of
  the budget ``B`` whichever experts are selected; ``u`` as close as possible to its target.
* :func:`balanced_kmeans` — k-means with capacity-constrained assignment (each cluster exactly its size), the
  assignment solved greedily by ascending distance (:func:`balanced_assign`, C++ kernel with a numpy reference).
* :func:`representatives` — the R members of each cluster closest to its centroid (the training-free router).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

try:
    from ._kernels import balanced_assign as _balanced_assign_cpp
except ImportError:  # pragma: no cover - the kernel is built by `make setup`; the reference is exact
    _balanced_assign_cpp = None


def knee_threshold(sorted_freq: np.ndarray) -> int:
    """Number of neurons before the knee of a descending curve (farthest point below the chord; first on ties)."""
    f = np.asarray(sorted_freq, float)
    n = f.size
    if n < 3 or f[0] == f[-1]:
        return 0
    chord = f[0] + (f[-1] - f[0]) * np.arange(n) / (n - 1)
    return int(np.argmax(chord - f))


def layer_adaptive_shared(freqs: list[np.ndarray], total: float, lo: int, hi: int) -> np.ndarray:
    """Target shared sizes per layer: knee sizes clipped to [lo, hi], rescaled by one factor to sum ``total``,
    clipped again. Returns floats (the budget rule rounds them)."""
    knees = np.array([np.clip(knee_threshold(np.sort(f)[::-1]), lo, hi) for f in freqs], float)
    knees = np.maximum(knees, 1.0)
    return np.clip(knees * total / knees.sum(), lo, hi)


@dataclass(frozen=True)
class LayerPlan:
    """Sizes of one converted layer: shared ``u``, routed expert sizes, experts selected ``k``, budget ``B``."""

    u: int
    sizes: tuple[int, ...]
    k: int
    budget: int

    @property
    def active_range(self) -> tuple[int, int]:
        """Fewest and most active neurons per token over all choices of k experts."""
        s = sorted(self.sizes)
        return self.u + sum(s[:self.k]), self.u + sum(s[len(s) - self.k:])

    @property
    def worst_deviation(self) -> int:
        lo, hi = self.active_range
        return max(abs(lo - self.budget), abs(hi - self.budget))


def expert_sizes(n: int, n_experts: int) -> tuple[int, ...]:
    """``n`` neurons in ``n_experts`` groups of ⌈n/E⌉ (the first n mod E) or ⌊n/E⌋."""
    q, r = divmod(n, n_experts)
    return tuple([q + 1] * r + [q] * (n_experts - r))


def plan_layer(u_target: float, d_ff: int, n_experts: int, budget: int, tol: int, u_min: int = 1) -> LayerPlan:
    """The shared size nearest ``u_target`` (in [u_min, budget)) whose budget-meeting ``k`` keeps every token
    within ``tol`` neurons of ``budget``; if none does, the plan with the smallest worst deviation."""
    best, best_key = None, None
    for u in range(u_min, budget):
        sizes = expert_sizes(d_ff - u, n_experts)
        mean = (d_ff - u) / n_experts
        k0 = (budget - u) / mean
        for k in {max(1, math.floor(k0)), max(1, math.ceil(k0))}:
            if k > n_experts:
                continue
            p = LayerPlan(u, sizes, k, budget)
            key = (p.worst_deviation > tol, abs(u - u_target) if p.worst_deviation <= tol else p.worst_deviation,
                   p.worst_deviation, u)
            if best_key is None or key < best_key:
                best, best_key = p, key
    if best is None:
        raise ValueError(f"no plan for budget {budget} of d_ff {d_ff}")
    return best


def plan_no_shared(d_ff: int, n_experts: int, budget: int) -> LayerPlan:
    """Baselines without a shared expert: equal experts of d_ff/E, k = budget/(d_ff/E)."""
    size = d_ff // n_experts
    return LayerPlan(0, (size,) * n_experts, int(round(budget / size)), budget)


# ----------------------------------------------------------------------------- balanced k-means

def balanced_assign_ref(dist: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Greedy capacity-constrained assignment (numpy reference of the C++ kernel): visit all (point, cluster)
    pairs by ascending distance (ties by flat index i·E + e) and assign a point to a cluster while the point is
    free and the cluster has room."""
    dist = np.ascontiguousarray(dist, np.float32)
    n, e = dist.shape
    cap = np.asarray(capacity, np.int64).copy()
    if cap.sum() < n:
        raise ValueError(f"capacities sum to {cap.sum()} < {n} points")
    labels = np.full(n, -1, np.int32)
    left = n
    for flat in np.argsort(dist.ravel(), kind="stable"):
        i, c = divmod(int(flat), e)
        if labels[i] < 0 and cap[c] > 0:
            labels[i] = c
            cap[c] -= 1
            left -= 1
            if left == 0:
                break
    return labels


def balanced_assign(dist: np.ndarray, capacity: np.ndarray, use_kernel: bool = True) -> np.ndarray:
    """:func:`balanced_assign_ref` through the C++ kernel when it is built (identical labels, tested)."""
    if use_kernel and _balanced_assign_cpp is not None:
        return _balanced_assign_cpp(np.ascontiguousarray(dist, np.float32),
                                    np.ascontiguousarray(capacity, np.int32))
    return balanced_assign_ref(dist, capacity)


def _gram_dist(G: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """Squared distances [N, k] from every point to every cluster mean, from the Gram matrix G = X Xᵀ:
    ‖x_i − c_e‖² = G_ii − 2 (G M)_ie / n_e + (Mᵀ G M)_ee / n_e², M the one-hot membership."""
    M = np.eye(k)[labels]
    n = M.sum(0)
    GM = G @ M
    return np.maximum(np.diag(G)[:, None] - 2 * GM / n + np.einsum("ie,ie->e", M, GM)[None, :] / n ** 2, 0.0)


def balanced_kmeans(X: np.ndarray, sizes: tuple[int, ...] | np.ndarray, iters: int, rng: np.random.Generator,
                    gram: np.ndarray | None = None) -> np.ndarray:
    """Labels [N] with exactly ``sizes[c]`` points in cluster c: k-means++ init, then ``iters`` rounds of
    balanced assignment and centroid update (stops early when the labels repeat). Works on the Gram matrix
    ``gram`` = X Xᵀ (computed when not given), so 16 k-dimensional activation patterns cost no more than weights."""
    G = np.asarray(X, np.float64) @ np.asarray(X, np.float64).T if gram is None else np.asarray(gram, np.float64)
    n, k = G.shape[0], len(sizes)
    diag = np.diag(G)
    centres = [int(rng.integers(n))]
    d2 = np.maximum(diag + diag[centres[0]] - 2 * G[:, centres[0]], 0.0)
    for _ in range(1, k):
        p = d2 / d2.sum() if d2.sum() > 0 else np.full(n, 1.0 / n)
        c = int(rng.choice(n, p=p))
        centres.append(c)
        d2 = np.minimum(d2, np.maximum(diag + diag[c] - 2 * G[:, c], 0.0))
    dist = np.maximum(diag[:, None] + diag[centres][None, :] - 2 * G[:, centres], 0.0)
    labels = None
    cap = np.asarray(sizes, np.int32)
    for _ in range(iters):
        new = balanced_assign(dist.astype(np.float32), cap)
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        dist = _gram_dist(G, labels, k)
    return labels


def representatives(X: np.ndarray | None, labels: np.ndarray, n_clusters: int, R: int,
                    gram: np.ndarray | None = None) -> np.ndarray:
    """[E, R] ids of the R members of each cluster closest to its centroid (ties to the lower id); from the
    points ``X`` or their Gram matrix ``gram``."""
    G = np.asarray(X, np.float64) @ np.asarray(X, np.float64).T if gram is None else np.asarray(gram, np.float64)
    d = _gram_dist(G, labels, n_clusters)
    out = np.zeros((n_clusters, R), np.int64)
    for c in range(n_clusters):
        idx = np.flatnonzero(labels == c)
        if idx.size < R:
            raise ValueError(f"cluster {c} has {idx.size} < R = {R} members")
        out[c] = idx[np.argsort(d[idx, c], kind="stable")[:R]]
    return out
