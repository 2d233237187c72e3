"""Observables of the MD runs of chapter 15 (claim C5): g(r), energy drift, escape from the cluster.

* :func:`rdf` — radial distribution function of a non-periodic cluster from a set of frames, normalised by
  an ideal gas of density ρ in spherical shells: g(r) = h(r) / (F · N/2 · ρ · 4πr²Δr), with h the pair
  histogram summed over F frames. For a cluster g(r) decays at large r (finite size); both the learned and
  the reference runs are normalised with the same ρ, so the card's L1 distance compares like with like.
* :func:`rdf_frames` — the same g(r) frame by frame (its mean over frames is :func:`rdf`'s), for the block
  bootstrap of claim C5's g(r) distance over the trajectory.
* :func:`rdf_l1` — ∫|g_model − g_ref| dr / ∫ g_ref dr on the common bins.
* :func:`energy_deviation` — max_t |E(t) − E(0)| / (N·T): energy change per atom in units of k_B T.
* :func:`max_excursion` — the largest distance of any atom from the frame's centre of mass, in units of the
  initial radius of gyration.
"""
from __future__ import annotations

import numpy as np

from .neighbors import pair_list

__all__ = ["radius_of_gyration", "rdf", "rdf_frames", "rdf_l1", "energy_deviation", "max_excursion", "density"]


def radius_of_gyration(pos: np.ndarray) -> float:
    """R_g = sqrt(mean |x_i − x_com|²)."""
    d = pos - pos.mean(axis=0)
    return float(np.sqrt((d ** 2).sum(-1).mean()))


def density(pos: np.ndarray) -> float:
    """Number density of a uniform ball with the same R_g (R = sqrt(5/3) R_g)."""
    R = np.sqrt(5.0 / 3.0) * radius_of_gyration(pos)
    return float(len(pos) / (4.0 / 3.0 * np.pi * R ** 3))


def rdf(frames: np.ndarray, r_min: float = 0.8, r_max: float = 4.0, dr: float = 0.05,
        rho: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Bin centres and g(r) over ``frames`` (F, N, 3); ``rho`` defaults to :func:`density` of frame 0."""
    edges = np.arange(r_min, r_max + 0.5 * dr, dr)
    rho = density(frames[0]) if rho is None else rho
    hist = np.zeros(len(edges) - 1)
    for x in frames:
        _, _, r = pair_list(x, r_max)
        hist += np.histogram(r, bins=edges)[0]
    centres = 0.5 * (edges[1:] + edges[:-1])
    shell = 4.0 / 3.0 * np.pi * (edges[1:] ** 3 - edges[:-1] ** 3)
    n = frames.shape[1]
    return centres, hist / (len(frames) * 0.5 * n * rho * shell)


def rdf_frames(frames: np.ndarray, r_min: float = 0.8, r_max: float = 4.0, dr: float = 0.05,
               rho: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Bin centres and the g(r) of every frame, shape (F, bins); the mean over frames equals :func:`rdf`."""
    edges = np.arange(r_min, r_max + 0.5 * dr, dr)
    rho = density(frames[0]) if rho is None else rho
    hist = np.zeros((len(frames), len(edges) - 1))
    for f, x in enumerate(frames):
        _, _, r = pair_list(x, r_max)
        hist[f] = np.histogram(r, bins=edges)[0]
    centres = 0.5 * (edges[1:] + edges[:-1])
    shell = 4.0 / 3.0 * np.pi * (edges[1:] ** 3 - edges[:-1] ** 3)
    return centres, hist / (0.5 * frames.shape[1] * rho * shell)


def rdf_l1(g_model: np.ndarray, g_ref: np.ndarray) -> float:
    """∫|g_model − g_ref| dr / ∫ g_ref dr (equal bins, so the widths cancel)."""
    return float(np.abs(g_model - g_ref).sum() / g_ref.sum())


def energy_deviation(total: np.ndarray, n_atoms: int, T: float) -> float:
    """max_t |E(t) − E(0)| / (N T)."""
    return float(np.max(np.abs(total - total[0])) / (n_atoms * T))


def max_excursion(frames: np.ndarray, rg0: float) -> float:
    """max over frames and atoms of |x_i − x_com| / R_g(0)."""
    d = frames - frames.mean(axis=1, keepdims=True)
    return float(np.sqrt((d ** 2).sum(-1)).max() / rg0)
