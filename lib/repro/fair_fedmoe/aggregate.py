"""The server: one-shot aggregation rules (card, *Method*, "Prototype-guided Differential Aggregation", and
*Baselines*). Clients send their parameters, prototypes P^k and group counts n_g^k once.

Fair-FedMOE (reconstructed):

1. Prototype *updates* u_g^k = p_g^k − p_g^init (card risks: the raw prototypes, norm ≈ 8, barely move in 200
   steps, so their cosines are all ≈ 1 and ω would equal the count weights). Reference
   ū_g = Σ_k n_g^k u_g^k / Σ_k n_g^k; the server's prototypes are p̄_g = p_g^init + ū_g.
2. ω_g^k ∝ n_g^k · exp(cos(u_g^k, ū_g)/τ_a); sites with cos < γ or n_g^k < ``min_count`` get ω = 0; if every
   site is filtered the weights fall back to ∝ n_g^k; a group seen by no site gets a uniform average.
   E_g = Σ_k ω_g^k E_g^k (parameter average of that expert).
3. Shared adapter: task vectors Δ^k = θ^k − θ^init merged TIES-style (Yadav et al. 2023): keep each vector's
   top ``keep`` fraction by magnitude, elect each entry's sign by the n^k-weighted summed mass, and average
   (weights ∝ n^k) only the entries that agree with it.
"""
from __future__ import annotations

import numpy as np
import torch

from .models import ADAPTER_KEYS, HEAD_KEYS, Params

EXPERT_KEYS = ("W", "c", "v", "e")


def fedavg(stack: Params, weights: np.ndarray, keys=None) -> Params:
    """Σ_k w_k θ_k for every parameter (``weights`` normalised to sum 1)."""
    w = np.asarray(weights, float)
    w = w / w.sum()
    wt = torch.as_tensor(w, dtype=torch.float32)
    return {n: torch.tensordot(wt, t, dims=([0], [0])) for n, t in stack.items() if keys is None or n in keys}


def ties_merge(deltas: np.ndarray, weights: np.ndarray, keep: float = 0.2) -> np.ndarray:
    """TIES-merging of task vectors ``deltas`` [K, M] with site weights [K]: trim, elect sign, disjoint mean."""
    d = np.asarray(deltas, float)
    w = np.asarray(weights, float)
    K, M = d.shape
    trimmed = np.zeros_like(d)
    n_keep = max(1, int(np.ceil(keep * M)))
    for k in range(K):
        top = np.argpartition(-np.abs(d[k]), n_keep - 1)[:n_keep] if n_keep < M else np.arange(M)
        trimmed[k, top] = d[k, top]
    sign = np.sign((w[:, None] * trimmed).sum(0))
    agree = (np.sign(trimmed) == sign[None]) & (trimmed != 0)
    mass = (w[:, None] * agree).sum(0)
    out = np.where(mass > 0, (w[:, None] * trimmed * agree).sum(0) / np.where(mass > 0, mass, 1.0), 0.0)
    return out


def _flat(stack: Params, keys) -> tuple[np.ndarray, list[tuple[str, tuple[int, ...]]]]:
    parts, shapes = [], []
    for n in keys:
        t = stack[n]
        shapes.append((n, tuple(t.shape[1:])))
        parts.append(t.reshape(t.shape[0], -1).double().numpy())
    return np.concatenate(parts, 1), shapes


def _unflat(vec: np.ndarray, shapes) -> Params:
    out, i = {}, 0
    for n, shp in shapes:
        m = int(np.prod(shp)) if shp else 1
        out[n] = torch.as_tensor(vec[i:i + m].reshape(shp), dtype=torch.float32)
        i += m
    return out


def ties_params(stack: Params, init: Params, weights: np.ndarray, keys, keep: float) -> Params:
    """θ^init + TIES(θ^k − θ^init) for the parameters ``keys``."""
    flat, shapes = _flat(stack, keys)
    base, _ = _flat({n: init[n][None] for n in keys}, keys)
    return _unflat(base[0] + ties_merge(flat - base, weights, keep), shapes)


def count_weights(counts: np.ndarray) -> np.ndarray:
    """ω_g^k ∝ n_g^k, [G, K]; a group seen by no site gets uniform weights."""
    c = np.asarray(counts, float).T
    tot = c.sum(1, keepdims=True)
    return np.where(tot > 0, c / np.where(tot > 0, tot, 1), 1.0 / c.shape[1])


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    return (a * b).sum(-1) / np.maximum(na * nb, 1e-12)


def prototype_weights(updates: np.ndarray, counts: np.ndarray, tau: float = 0.1, gamma: float = 0.5,
                      min_count: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step 2: ω [G, K] from prototype updates [K, G, D] and counts [K, G]; also cos [K, G] and the references
    ū [G, D]. Rows sum to 1."""
    u = np.asarray(updates, float)
    n = np.asarray(counts, float)
    K, G, _ = u.shape
    tot = n.sum(0)                                            # [G]
    ref = np.where(tot[:, None] > 0, (n[:, :, None] * u).sum(0) / np.where(tot > 0, tot, 1)[:, None],
                   u.mean(0))
    cos = _cos(u, ref[None])                                  # [K, G]
    omega = np.zeros((G, K))
    for g in range(G):
        if tot[g] == 0:
            omega[g] = 1.0 / K
            continue
        keep = (cos[:, g] >= gamma) & (n[:, g] >= min_count)
        raw = n[:, g] * np.exp(cos[:, g] / tau) * keep
        omega[g] = raw / raw.sum() if raw.sum() > 0 else n[:, g] / tot[g]
    return omega, cos, ref


def aggregate_moe(stack: Params, init: Params, counts: np.ndarray, *, experts: str = "proto",
                  adapter_rule: str = "ties", tau: float = 0.1, gamma: float = 0.5, min_count: int = 10,
                  keep: float = 0.2) -> tuple[Params, dict]:
    """Merge K local Fair-MoE models into one.

    ``experts``: 'proto' (Fair-FedMOE's ω), 'counts' (ω ∝ n_g^k) or 'ties' (TIES over the experts' task
    vectors, weights n_g^k). ``adapter_rule``: 'ties' or 'counts' (∝ n^k). Prototypes are p̄ in every case.
    Returns the model and diagnostics (ω, cosines, count weights).
    """
    counts = np.asarray(counts)
    n_site = counts.sum(1)
    P0 = init["P"].double().numpy()
    upd = stack["P"].double().numpy() - P0[None]
    omega_p, cos, ref = prototype_weights(upd, counts, tau, gamma, min_count)
    omega_c = count_weights(counts)
    out: Params = {"P": torch.as_tensor(P0 + ref, dtype=torch.float32)}
    if adapter_rule == "ties":
        out.update(ties_params(stack, init, n_site, ADAPTER_KEYS, keep))
    elif adapter_rule == "counts":
        out.update(fedavg(stack, n_site, ADAPTER_KEYS))
    else:
        raise ValueError(f"adapter_rule must be 'ties' or 'counts'; got {adapter_rule!r}")
    G = counts.shape[1]
    if experts in ("proto", "counts"):
        om = torch.as_tensor(omega_p if experts == "proto" else omega_c, dtype=torch.float32)   # [G, K]
        for n in EXPERT_KEYS:
            t = stack[n]                                          # [K, G, ...]
            out[n] = torch.einsum("gk,kg...->g...", om, t)
    elif experts == "ties":
        per_g = []
        for g in range(G):
            sub = {n: stack[n][:, g] for n in EXPERT_KEYS}
            ini = {n: init[n][g] for n in EXPERT_KEYS}
            w = counts[:, g] if counts[:, g].sum() > 0 else np.ones(len(counts))
            per_g.append(ties_params(sub, ini, w, EXPERT_KEYS, keep))
        for n in EXPERT_KEYS:
            out[n] = torch.stack([pg[n] for pg in per_g])
    else:
        raise ValueError(f"experts must be 'proto', 'counts' or 'ties'; got {experts!r}")
    return out, {"omega": omega_p if experts == "proto" else omega_c, "omega_proto": omega_p,
                 "omega_counts": omega_c, "cos": cos}


def aggregate_head(stack: Params, init: Params, counts: np.ndarray, adapter_rule: str = "counts",
                   keep: float = 0.2) -> Params:
    """Merge single-head models: one-shot FedAvg (everything ∝ n^k) or the 'no routing' ablation (adapter by
    TIES, head ∝ n^k)."""
    n_site = np.asarray(counts).sum(1)
    head = fedavg(stack, n_site, [k for k in HEAD_KEYS if k not in ADAPTER_KEYS])
    if adapter_rule == "ties":
        return {**ties_params(stack, init, n_site, ADAPTER_KEYS, keep), **head}
    return {**fedavg(stack, n_site, ADAPTER_KEYS), **head}


def tv_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Total-variation distance between the rows of two [G, K] weight matrices."""
    return 0.5 * np.abs(np.asarray(a) - np.asarray(b)).sum(-1)
