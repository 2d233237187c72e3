"""Profiling gate activations (card, Method 1) and the structure they reveal (claim C1).

For each layer we record the gate activations ``a_{t,i} = SiLU(w_{g,i}·x_t)`` and the full GLU activations
``h_{t,i} = a_{t,i}·(w_{u,i}·x_t)`` on calibration tokens. Neuron ``i`` is *active* on token ``t`` when ``|a_{t,i}|``
is among that token's top ``round(ρ·d_ff)`` magnitudes (a per-token relative threshold; |a| because SiLU is non-zero
for negative inputs; ties to the lower index). Its activation frequency is ``f_i = mean_t active_{t,i}``, measured
separately per domain for the universal/specialised split and the selectivity index
``s_i = max_dom f_{i,dom} / mean_dom f_{i,dom}``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .model import GPT


@dataclass
class LayerProfile:
    """What one layer's calibration pass measured."""

    x: torch.Tensor          # [N, d] MLP inputs (after the block's norm)
    a: torch.Tensor          # [N, d_ff] gate activations
    h: torch.Tensor          # [N, d_ff] full GLU activations
    active: torch.Tensor     # [N, d_ff] bool, per-token top-ρ of |a|


@torch.no_grad()
def collect_gate_activations(model: GPT, rows: np.ndarray, chunk: int = 64) -> list[tuple[torch.Tensor, ...]]:
    """Per layer (x, a, h) over every token of ``rows`` [n, T] (row-major: token t of row r is r·T + t)."""
    store: list[list] = [[] for _ in model.mlps]
    handles = []
    for layer, mlp in enumerate(model.mlps):
        mlp.record = store[layer]
        handles.append(mlp.register_forward_pre_hook(
            lambda mod, inp, layer=layer: store[layer].append(inp[0].detach().reshape(-1, inp[0].shape[-1]))))
    try:
        for s in range(0, len(rows), chunk):
            model(torch.from_numpy(rows[s:s + chunk]))
    finally:
        for mlp, hd in zip(model.mlps, handles):
            mlp.record = None
            hd.remove()
    out = []
    for items in store:
        xs = [it for it in items if isinstance(it, torch.Tensor)]
        ah = [it for it in items if isinstance(it, tuple)]
        out.append((torch.cat(xs), torch.cat([p[0] for p in ah]), torch.cat([p[1] for p in ah])))
    return out


def active_mask(a: torch.Tensor, rho: float) -> torch.Tensor:
    """Bool [N, d_ff]: each token's top ``round(ρ·d_ff)`` neurons by |a| (stable sort: ties to the lower index)."""
    k = int(round(rho * a.shape[-1]))
    order = torch.sort(a.abs(), dim=-1, descending=True, stable=True).indices[:, :k]
    return torch.zeros(a.shape, dtype=torch.bool).scatter_(-1, order, True)


def profile_model(model: GPT, rows: np.ndarray, rho: float) -> list[LayerProfile]:
    return [LayerProfile(x, a, h, active_mask(a, rho)) for x, a, h in collect_gate_activations(model, rows)]


def activation_frequency(active: torch.Tensor) -> np.ndarray:
    """f_i = mean over tokens of active_{t,i}."""
    return active.double().mean(0).numpy()


def frequency_by_domain(active: torch.Tensor, seq_domain: np.ndarray, seq_len: int) -> np.ndarray:
    """f_{dom,i} [n_domains, d_ff] from the per-token mask and the domain id of each calibration sequence."""
    counts = active.reshape(len(seq_domain), seq_len, -1).float().sum(1).numpy()       # [n_seq, d_ff]
    return _freq_from_counts(counts, seq_domain, seq_len)


def _freq_from_counts(counts: np.ndarray, seq_domain: np.ndarray, seq_len: int) -> np.ndarray:
    n_dom = int(seq_domain.max()) + 1
    onehot = np.eye(n_dom)[seq_domain]                                                 # [n_seq, n_dom]
    return (onehot.T @ counts) / (onehot.sum(0)[:, None] * seq_len)


def selectivity_index(freq_by_domain: np.ndarray) -> np.ndarray:
    """s_i = max_dom f_{i,dom} / mean_dom f_{i,dom} (1 = equally active everywhere; n_domains = one domain only);
    NaN for a neuron never active."""
    mean = freq_by_domain.mean(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(mean > 0, freq_by_domain.max(0) / mean, np.nan)


def universal_neurons(freq_by_domain: np.ndarray, threshold: float = 0.9) -> np.ndarray:
    """Bool [d_ff]: active on >= ``threshold`` of the tokens in *every* domain."""
    return (freq_by_domain >= threshold).all(0)


def selectivity_null(active: torch.Tensor, seq_domain: np.ndarray, seq_len: int, neurons: np.ndarray,
                     n_perm: int, rng: np.random.Generator) -> tuple[float, np.ndarray]:
    """Median selectivity of ``neurons`` under the real domain labels, and under ``n_perm`` permutations of the
    labels across calibration sequences (the null of "selectivity is not about the domain")."""
    counts = active.reshape(len(seq_domain), seq_len, -1).float().sum(1).numpy()[:, neurons]
    real = float(np.nanmedian(selectivity_index(_freq_from_counts(counts, seq_domain, seq_len))))
    null = np.array([np.nanmedian(selectivity_index(_freq_from_counts(counts, rng.permutation(seq_domain), seq_len)))
                     for _ in range(n_perm)])
    return real, null


def universal_fraction_bootstrap(actives: list[torch.Tensor], seq_domain: np.ndarray, seq_len: int,
                                 threshold: float = 0.9, n_boot: int = 2000, rng: np.random.Generator | int = 0
                                 ) -> np.ndarray:
    """Bootstrap draws [n_boot, n_layers] of each layer's universal fraction (claim C1's intervals, issue 41).

    Each draw resamples the calibration sequences with replacement *within each domain* (a token's neighbours in its
    sequence are not independent of it, so the sequence is the unit), the same draw for every layer, and recomputes
    the per-domain frequencies and the fraction of neurons active on >= ``threshold`` of the tokens in every domain.
    ``actives``: per layer the bool [n_seq · seq_len, d_ff] mask of :func:`profile_model`."""
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    counts = [a.reshape(len(seq_domain), seq_len, -1).float().sum(1).numpy().astype(float) for a in actives]
    n_dom = int(seq_domain.max()) + 1
    is_uni = [np.ones((n_boot, c.shape[1]), dtype=bool) for c in counts]
    for d in range(n_dom):
        seqs = np.flatnonzero(seq_domain == d)
        draw = rng.integers(0, len(seqs), size=(n_boot, len(seqs)))
        mult = np.zeros((n_boot, len(seqs)))
        np.add.at(mult, (np.arange(n_boot)[:, None], draw), 1.0)             # multiplicity of each sequence
        for layer, c in enumerate(counts):
            freq = mult @ c[seqs] / (len(seqs) * seq_len)                      # [n_boot, d_ff]
            is_uni[layer] &= freq >= threshold
    return np.stack([u.mean(1) for u in is_uni], axis=1)
