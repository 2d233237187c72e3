"""Training and evaluating the force fields of chapter 15 (card, "Models" and "Metrics").

* :func:`fit_reference_energies` — per-species reference energies by least squares, E ≈ Σ_s n_s e_s. With the
  card's exact 50/50 composition and one N the design matrix has rank one (minimum-norm solution
  e_A = e_B = mean(E)/N); with several training sizes it has full rank. The network learns the residual.
* :func:`fit` — loss = mean((E_pred − E)/N)² + force_weight · mean((F_pred − F)²), forces by autograd with
  ``create_graph=True`` (double backward), Adam with a cosine learning-rate schedule, ``batch`` clusters
  per step drawn without replacement within an epoch. Float32, one thread.
* :func:`evaluate` — energy MAE per atom, component-wise force MAE, mean cosine similarity of force
  vectors, on a held-out set.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .models import EnergyModel, Graph, collate

__all__ = ["Dataset", "fit_reference_energies", "fit", "evaluate", "to_dataset"]


@dataclass
class Dataset:
    """Clusters (possibly of different sizes) with their graphs for one model: lists ``pos`` [(N_c, 3)],
    ``species`` [(N_c,)], ``F`` [(N_c, 3)], and energies ``E`` (C,)."""

    pos: list[np.ndarray]
    species: list[np.ndarray]
    E: np.ndarray
    F: list[np.ndarray]
    graphs: list[Graph]

    def __len__(self) -> int:
        return len(self.pos)

    @property
    def sizes(self) -> np.ndarray:
        """Atoms per cluster (C,)."""
        return np.array([len(p) for p in self.pos])


def to_dataset(model: EnergyModel, data: dict) -> Dataset:
    """Attach ``model``'s graphs (built once from the positions) to a dataset: ``data`` holds ``pos``,
    ``species``, ``E``, ``F`` as stacked arrays (one size) or lists (mixed sizes)."""
    pos, species, F = list(data["pos"]), list(data["species"]), list(data["F"])
    graphs = [model.build_graph(p) for p in pos]
    return Dataset(pos, species, np.asarray(data["E"], dtype=float), F, graphs)


def fit_reference_energies(species, E: np.ndarray, n_species: int = 2) -> np.ndarray:
    """Per-species energies e_s minimising Σ_c (E_c − Σ_s n_cs e_s)² (minimum-norm least squares);
    ``species`` is a list of per-cluster arrays (or a stacked array)."""
    counts = np.array([[(np.asarray(sp) == s).sum() for s in range(n_species)] for sp in species], dtype=float)
    return np.linalg.lstsq(counts, E, rcond=None)[0]


def _batch(ds: Dataset, idx: np.ndarray, dtype: torch.dtype):
    g = collate([ds.graphs[i] for i in idx])
    pos = torch.tensor(np.concatenate([ds.pos[i] for i in idx]), dtype=dtype)
    sp = torch.tensor(np.concatenate([ds.species[i] for i in idx]), dtype=torch.long)
    E = torch.tensor(ds.E[idx], dtype=dtype)
    F = torch.tensor(np.concatenate([ds.F[i] for i in idx]), dtype=dtype)
    return g, pos, sp, E, F


def fit(model: EnergyModel, ds: Dataset, steps: int, lr: float = 1e-3, force_weight: float = 100.0,
        seed: int = 0, batch: int = 2) -> dict[str, np.ndarray]:
    """Train ``model`` in place on ``ds``; returns the history (loss, energy and force terms per step)."""
    model.e_ref.copy_(torch.as_tensor(fit_reference_energies(ds.species, ds.E)))
    model.scale.fill_(float(np.sqrt(np.mean(np.concatenate(ds.F) ** 2))))
    model.set_avg_degree(ds.graphs)
    model.float()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.5 * (1.0 + math.cos(math.pi * t / steps)))
    rng = np.random.default_rng([seed, 15, 7])
    order: list[int] = []
    hist = {"loss": np.empty(steps), "energy": np.empty(steps), "force": np.empty(steps)}
    sizes = ds.sizes
    for t in range(steps):
        if len(order) < batch:
            order = list(rng.permutation(len(ds)))
        idx = np.array([order.pop() for _ in range(batch)])
        g, pos, sp, E, F = _batch(ds, idx, torch.float32)
        N = torch.tensor(sizes[idx], dtype=torch.float32)
        pos.requires_grad_(True)
        E_pred, F_pred = model.energy_forces(pos, sp, g, create_graph=True)
        le = (((E_pred - E) / N) ** 2).mean()
        lf = ((F_pred - F) ** 2).mean()
        loss = le + force_weight * lf
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        hist["loss"][t], hist["energy"][t], hist["force"][t] = float(loss.detach()), float(le.detach()), float(lf.detach())
    return hist


def predict(model: EnergyModel, ds: Dataset, max_edges: int = 200_000, dtype: torch.dtype = torch.float32):
    """Predicted energies (C,) and forces (list of (N_c, 3)) for every cluster of ``ds``, in batches of clusters
    holding at most ``max_edges`` message edges (at least one cluster), to bound memory."""
    model.to(dtype)
    E_out, F_out = [], []
    a = 0
    while a < len(ds):
        b, edges = a, 0
        while b < len(ds) and (b == a or edges + ds.graphs[b].n_edges() <= max_edges):
            edges += ds.graphs[b].n_edges()
            b += 1
        idx = np.arange(a, b)
        g, pos, sp, _, _ = _batch(ds, idx, dtype)
        E, F = model.energy_forces(pos, sp, g)
        E_out.append(E.detach().double().numpy())
        F_out += np.split(F.detach().double().numpy(), np.cumsum(ds.sizes[idx])[:-1])
        a = b
    return np.concatenate(E_out), F_out


def metrics(E_pred: np.ndarray, F_pred, E: np.ndarray, F) -> dict[str, float]:
    """Energy MAE per atom (|ΔE_c| / N_c averaged over clusters), force MAE (component-wise, over all atoms)
    and mean force cosine similarity (over all atoms); forces as (C, N, 3) arrays or lists of (N_c, 3)."""
    N = np.array([len(f) for f in F], dtype=float)
    F_pred, F = np.concatenate(list(F_pred)), np.concatenate(list(F))
    num = (F_pred * F).sum(-1)
    den = np.linalg.norm(F_pred, axis=-1) * np.linalg.norm(F, axis=-1)
    return {
        "energy_mae": float(np.mean(np.abs(np.asarray(E_pred) - np.asarray(E)) / N)),
        "force_mae": float(np.mean(np.abs(F_pred - F))),
        "force_cos": float(np.mean(num / np.maximum(den, 1e-30))),
    }


def evaluate(model: EnergyModel, ds: Dataset) -> dict[str, float]:
    """:func:`metrics` of ``model`` on ``ds``."""
    E_pred, F_pred = predict(model, ds)
    return metrics(E_pred, F_pred, ds.E, ds.F)
