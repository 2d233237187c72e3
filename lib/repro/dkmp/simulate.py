"""Simulating the clusters of chapter 15: fcc seeds, Langevin sampling, NVE velocity Verlet (card, "Setting").

* :func:`make_cluster` — an fcc lattice (nearest neighbour 1.12 σ) carved to the sphere of the N sites
  nearest the centre; species A/B 50/50 at random. Atom indices follow the distance from the centre, so
  the greedy centre selection of a star layer starts in the middle of the cluster.
* :func:`langevin` — BAOAB Langevin dynamics (Leimkuhler & Matthews 2013) at temperature T, friction γ.
* :func:`sample_dataset` — the card's protocol: 3,000 burn-in steps at T = 0.35, γ = 1, dt = 0.002, a
  snapshot every 50 steps, Gaussian jitter 0.03 σ, exact labels E and F = −∇E from the compiled kernel.
  Our one addition: a dataset of more than 50 configurations is drawn from independent chains of 50
  snapshots each (own lattice seed and species assignment), so that training sees several species
  arrangements rather than one; the card does not say how many chains to run.
* :func:`velocity_verlet` — NVE integration with any force provider; providers with a ``refresh`` method
  (the learned DKMP potential re-selecting its star centres) are refreshed every ``refresh_every`` steps
  and the energy jump of each refresh is logged.

All lengths in σ, energies in ε_AA, masses 1, k_B = 1.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from .potentials import Potential

__all__ = ["make_cluster", "maxwell_boltzmann", "langevin", "sample_dataset", "velocity_verlet", "MDResult",
           "T_SAMPLE", "DT", "GAMMA", "BURN_IN", "EVERY", "JITTER", "NN_DIST"]

T_SAMPLE, DT, GAMMA, BURN_IN, EVERY, JITTER, NN_DIST = 0.35, 0.002, 1.0, 3000, 50, 0.03, 1.12
CHAIN_LEN = 50


def make_cluster(n_atoms: int, rng: np.random.Generator, nn: float = NN_DIST,
                 shuffle: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Positions (N, 3) of an fcc ball of ``n_atoms`` sites and species (N,) int64 (⌊N/2⌋ A = 0, rest B = 1),
    atoms in random order (``shuffle=False``: in shells from the middle outwards)."""
    if n_atoms < 1:
        raise ValueError(f"n_atoms must be >= 1; got {n_atoms}")
    a = nn * np.sqrt(2.0)  # cubic lattice constant of fcc with nearest-neighbour distance nn
    k = int(np.ceil((n_atoms / 4.0 * 3.0) ** (1.0 / 3.0))) + 2
    g = np.arange(-k, k + 1, dtype=float)
    cube = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    sites = (cube[:, None, :] + basis[None]).reshape(-1, 3) * a
    # a fixed, slightly off-lattice centre breaks the ties between equidistant shells
    dist = np.linalg.norm(sites - np.array([0.013, 0.021, 0.034]) * a, axis=1)
    order = np.argsort(np.round(dist, 9), kind="stable")[:n_atoms]
    pos = sites[order]
    pos = pos - pos.mean(axis=0)
    species = np.ones(n_atoms, dtype=np.int64)
    species[rng.permutation(n_atoms)[: n_atoms // 2]] = 0
    if shuffle:  # atom order carries no geometry (as in a molecule file); shell order would make the
        # greedy Poisson-disk selection start at the middle atom
        p = rng.permutation(n_atoms)
        pos, species = pos[p], species[p]
    return pos, species


def maxwell_boltzmann(n_atoms: int, T: float, rng: np.random.Generator) -> np.ndarray:
    """Velocities at temperature T (unit masses) with zero total momentum."""
    v = rng.normal(0.0, np.sqrt(T), size=(n_atoms, 3))
    return v - v.mean(axis=0) if n_atoms > 1 else v


def langevin(pos: np.ndarray, vel: np.ndarray, force: Callable[[np.ndarray], tuple[float, np.ndarray]],
             n_steps: int, rng: np.random.Generator, T: float = T_SAMPLE, gamma: float = GAMMA, dt: float = DT,
             every: int = 0) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """BAOAB Langevin dynamics; returns final (pos, vel) and a snapshot every ``every`` steps (0: none)."""
    pos, vel = pos.copy(), vel.copy()
    c1 = np.exp(-gamma * dt)
    c2 = np.sqrt((1.0 - c1 * c1) * T)
    _, F = force(pos)
    snaps = []
    for step in range(1, n_steps + 1):
        vel += 0.5 * dt * F
        pos += 0.5 * dt * vel
        vel = c1 * vel + c2 * rng.standard_normal(vel.shape)
        pos += 0.5 * dt * vel
        _, F = force(pos)
        vel += 0.5 * dt * F
        if every and step % every == 0:
            snaps.append(pos.copy())
    return pos, vel, snaps


def sample_dataset(n_configs: int, n_atoms: int, seed: int, potential: Potential | None = None,
                   burn_in: int = BURN_IN, every: int = EVERY, jitter: float = JITTER,
                   chain_len: int = CHAIN_LEN) -> dict[str, np.ndarray]:
    """``n_configs`` labelled clusters of ``n_atoms``: dict(pos (C,N,3), species (C,N), E (C,), F (C,N,3)).

    Stream ``default_rng([seed, 15, n_atoms, chain])`` drives chain ``chain`` (species, velocities, noise,
    jitter), so a dataset does not depend on which other sizes are generated.
    """
    potential = potential or Potential()
    n_chains = max(1, -(-n_configs // chain_len))
    pos_l, sp_l = [], []
    for chain in range(n_chains):
        rng = np.random.default_rng([seed, 15, n_atoms, chain])
        take = min(chain_len, n_configs - chain * chain_len)
        x, sp = make_cluster(n_atoms, rng)
        force = lambda p: potential(p, sp)  # noqa: E731
        v = maxwell_boltzmann(n_atoms, T_SAMPLE, rng)
        x, v, _ = langevin(x, v, force, burn_in, rng)
        _, _, snaps = langevin(x, v, force, take * every, rng, every=every)
        for s in snaps:
            s = s - s.mean(axis=0) + rng.normal(0.0, jitter, size=s.shape)
            pos_l.append(s)
            sp_l.append(sp)
    pos = np.stack(pos_l)
    species = np.stack(sp_l)
    E = np.empty(len(pos))
    F = np.empty_like(pos)
    for c in range(len(pos)):
        E[c], F[c] = potential(pos[c], species[c])
    return {"pos": pos, "species": species, "E": E, "F": F}


class ForceProvider(Protocol):
    def __call__(self, pos: np.ndarray) -> tuple[float, np.ndarray]: ...


@dataclass
class MDResult:
    """An NVE trajectory: energies per step, saved frames, and the energy jumps of centre refreshes."""

    potential: np.ndarray          # (steps+1,)
    kinetic: np.ndarray            # (steps+1,)
    frames: np.ndarray             # (n_frames, N, 3), every ``frame_every`` steps (step 0 included)
    frame_every: int
    refresh_steps: list[int] = field(default_factory=list)
    refresh_jumps: list[float] = field(default_factory=list)
    blew_up: bool = False

    @property
    def total(self) -> np.ndarray:
        return self.potential + self.kinetic


def velocity_verlet(force: ForceProvider, pos: np.ndarray, vel: np.ndarray, n_steps: int, dt: float = DT,
                    refresh_every: int = 0, frame_every: int = 10) -> MDResult:
    """NVE velocity Verlet. If ``force`` has ``refresh(pos) -> (E_before, E_after)``, it is called every
    ``refresh_every`` steps (before the force evaluation of that step) and the jump E_after − E_before is
    logged. Stops early (``blew_up``) if a force or an energy stops being finite."""
    pos, vel = np.array(pos, dtype=np.float64), np.array(vel, dtype=np.float64)
    E, F = force(pos)
    pot, kin, frames = [E], [0.5 * float((vel ** 2).sum())], [pos.copy()]
    steps, jumps = [], []
    blew_up = False
    for step in range(1, n_steps + 1):
        vel += 0.5 * dt * F
        pos += dt * vel
        if refresh_every and step % refresh_every == 0 and hasattr(force, "refresh"):
            before, after = force.refresh(pos)
            steps.append(step)
            jumps.append(after - before)
        E, F = force(pos)
        vel += 0.5 * dt * F
        pot.append(E)
        kin.append(0.5 * float((vel ** 2).sum()))
        if step % frame_every == 0:
            frames.append(pos.copy())
        if not (np.isfinite(E) and np.isfinite(F).all()):
            blew_up = True
            break
    return MDResult(np.array(pot), np.array(kin), np.stack(frames), frame_every, steps, jumps, blew_up)
