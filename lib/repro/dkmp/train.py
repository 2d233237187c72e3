"""Training and evaluating the force fields of chapter 15 (card, "Models" and "Metrics").

* :func:`fit_reference_energies` — per-species reference energies by least squares, E ≈ Σ_s n_s e_s. With the
  card's exact 50/50 composition at one N the design matrix has rank one, so the minimum-norm solution
  e_A = e_B = mean(E)/N is what it returns; the network then learns the residual.
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
    """Clusters of one size with their graphs for one model: pos (C, N, 3), species (C, N), E (C,), F (C, N, 3)."""

    pos: np.ndarray
    species: np.ndarray
    E: np.ndarray
    F: np.ndarray
    graphs: list[Graph]

    def __len__(self) -> int:
        return len(self.pos)

    @property
    def n_atoms(self) -> int:
        return self.pos.shape[1]


def to_dataset(model: EnergyModel, data: dict[str, np.ndarray]) -> Dataset:
    """Attach ``model``'s graphs (built once from the positions) to a dataset from ``sample_dataset``."""
    graphs = [model.build_graph(p) for p in data["pos"]]
    return Dataset(data["pos"], data["species"], data["E"], data["F"], graphs)


def fit_reference_energies(species: np.ndarray, E: np.ndarray, n_species: int = 2) -> np.ndarray:
    """Per-species energies e_s minimising Σ_c (E_c − Σ_s n_cs e_s)² (minimum-norm least squares)."""
    counts = np.stack([(species == s).sum(axis=1) for s in range(n_species)], axis=1).astype(float)
    return np.linalg.lstsq(counts, E, rcond=None)[0]


def _batch(ds: Dataset, idx: np.ndarray, dtype: torch.dtype):
    g = collate([ds.graphs[i] for i in idx])
    pos = torch.tensor(ds.pos[idx].reshape(-1, 3), dtype=dtype)
    sp = torch.tensor(ds.species[idx].reshape(-1), dtype=torch.long)
    E = torch.tensor(ds.E[idx], dtype=dtype)
    F = torch.tensor(ds.F[idx].reshape(-1, 3), dtype=dtype)
    return g, pos, sp, E, F


def fit(model: EnergyModel, ds: Dataset, steps: int, lr: float = 1e-3, force_weight: float = 100.0,
        seed: int = 0, batch: int = 2) -> dict[str, np.ndarray]:
    """Train ``model`` in place on ``ds``; returns the history (loss, energy and force terms per step)."""
    model.e_ref.copy_(torch.as_tensor(fit_reference_energies(ds.species, ds.E)))
    model.scale.fill_(float(np.sqrt(np.mean(ds.F ** 2))))
    model.set_avg_degree(ds.graphs)
    model.float()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.5 * (1.0 + math.cos(math.pi * t / steps)))
    rng = np.random.default_rng([seed, 15, 7])
    order: list[int] = []
    hist = {"loss": np.empty(steps), "energy": np.empty(steps), "force": np.empty(steps)}
    N = ds.n_atoms
    for t in range(steps):
        if len(order) < batch:
            order = list(rng.permutation(len(ds)))
        idx = np.array([order.pop() for _ in range(batch)])
        g, pos, sp, E, F = _batch(ds, idx, torch.float32)
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
    """Predicted energies (C,) and forces (C, N, 3) for every cluster of ``ds``, in batches of clusters
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
        F_out.append(F.detach().double().numpy().reshape(len(idx), ds.n_atoms, 3))
        a = b
    return np.concatenate(E_out), np.concatenate(F_out)


def metrics(E_pred: np.ndarray, F_pred: np.ndarray, E: np.ndarray, F: np.ndarray) -> dict[str, float]:
    """Energy MAE per atom, force MAE (component-wise) and mean force cosine similarity."""
    N = F.shape[1]
    num = (F_pred * F).sum(-1)
    den = np.linalg.norm(F_pred, axis=-1) * np.linalg.norm(F, axis=-1)
    return {
        "energy_mae": float(np.mean(np.abs(E_pred - E)) / N),
        "force_mae": float(np.mean(np.abs(F_pred - F))),
        "force_cos": float(np.mean(num / np.maximum(den, 1e-30))),
    }


def evaluate(model: EnergyModel, ds: Dataset) -> dict[str, float]:
    """:func:`metrics` of ``model`` on ``ds``."""
    E_pred, F_pred = predict(model, ds)
    return metrics(E_pred, F_pred, ds.E, ds.F)
