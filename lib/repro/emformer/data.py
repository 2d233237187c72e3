"""The chapter's data set: shallow-water trajectories split by trajectory, anomaly-normalized (card *Setting*).

``make_dataset`` runs the simulator for ``n_traj`` trajectories (kernel backend), splits them into
train / validation / test *by trajectory* (never by frame: neighbouring frames are nearly equal), computes the
per-cell climatology and the per-channel anomaly std from the training trajectories only, and keeps the full
simulator states at the test initial conditions for the perfect-model twin (control K2a).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import sim


@dataclass
class Dataset:
    train: np.ndarray        # (n_train, F, 4, ny, nx) float32, normalized anomalies
    val: np.ndarray
    test: np.ndarray
    clim: np.ndarray         # (4, ny, nx) per-cell training climatology (physical units)
    scale: np.ndarray        # (4,) per-channel anomaly std of the training set
    lat: np.ndarray          # (ny,) labelled latitudes, degrees
    test_ic: list            # [(trajectory in test, frame)] initial conditions of the evaluation
    val_ic: list
    ic_states: sim.State     # full simulator states at the test initial conditions (order of test_ic)
    sw: sim.ShallowWaterConfig
    seconds: float = 0.0

    def normalize(self, fields: np.ndarray) -> np.ndarray:
        return ((fields - self.clim) / self.scale[:, None, None]).astype(np.float32)


def split_sizes(n_traj: int) -> tuple[int, int, int]:
    """(train, val, test): 1/8 validation, 1/4 test (at least one each)."""
    n_val = max(1, n_traj // 8)
    n_test = max(1, n_traj // 4)
    return n_traj - n_val - n_test, n_val, n_test


def initial_conditions(n_traj: int, n_frames: int, leads: int, stride: int) -> list[tuple[int, int]]:
    """Every ``stride``-th frame of each trajectory that leaves ``leads`` frames of truth after it."""
    return [(b, f) for b in range(n_traj) for f in range(0, n_frames - leads, stride)]


def make_dataset(sw: sim.ShallowWaterConfig, n_traj: int, frames: int, spinup: int, seed: int, leads: int,
                 ic_stride: int, backend: str = "cpp") -> Dataset:
    import time
    t0 = time.perf_counter()
    n_tr, n_va, n_te = split_sizes(n_traj)
    ics = initial_conditions(n_te, frames, leads, ic_stride)
    # the recorded frame f is the state after frame f; the IC states are kept for the twin run
    keep = sorted({f for _, f in ics})
    fields, kept = sim.simulate(sw, n_traj, frames, spinup, seed, backend=backend, keep_states=set(keep))
    train, val, test = fields[:n_tr], fields[n_tr:n_tr + n_va], fields[n_tr + n_va:]
    clim = train.mean(axis=(0, 1))
    scale = (train - clim).std(axis=(0, 1, 3, 4))
    states = sim.State.concat([kept[f].take([n_tr + n_va + b]) for b, f in ics])
    ds = Dataset(train=None, val=None, test=None, clim=clim, scale=scale, lat=sw.lat, test_ic=ics,
                 val_ic=initial_conditions(n_va, frames, leads, ic_stride), ic_states=states, sw=sw)
    ds.train, ds.val, ds.test = ds.normalize(train), ds.normalize(val), ds.normalize(test)
    ds.seconds = time.perf_counter() - t0
    return ds


def truth(split: np.ndarray, ics: list, leads: int) -> tuple[np.ndarray, np.ndarray]:
    """(x0 (N, 4, ny, nx), y (N, leads, 4, ny, nx)) for the given initial conditions."""
    x0 = np.stack([split[b, f] for b, f in ics])
    y = np.stack([split[b, f + 1:f + 1 + leads] for b, f in ics])
    return x0, y


def twin_forecast(ds: Dataset, leads: int, seed: int, backend: str = "cpp") -> np.ndarray:
    """Perfect-model twin: the simulator itself restarted from the true test states with other pulse draws.
    Returns normalized fields (N, leads, 4, ny, nx): the predictability limit set by the pulses alone."""
    rng = np.random.default_rng(seed)
    fields, _ = sim.run_frames(ds.ic_states.copy(), ds.sw, rng, leads, backend)
    return ds.normalize(fields)
