"""Every model the chapter trains, trained up front on ``cfg.workers`` processes and left in the cache.

The experiment drivers (:mod:`repro.pulse.experiments`) train lazily through :func:`train_cached`, one model
at a time. The models are independent (each has its own seed, data draw and cache key), so on a 2-core
machine the full profile first calls :func:`pretrain_all`: it lists every training job the drivers will ask
for (:func:`training_jobs`, built from the same functions the drivers use, so the cache keys match), runs
them in a process pool, longest first, and lets each worker write its model to the cache. The drivers then
load every model from the cache. Results do not depend on ``workers``: each model's training is
deterministic given its seed, whichever process runs it.
"""
from __future__ import annotations

import functools
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
import multiprocessing as mp

import numpy as np

from .config import Config

#: relative cost per optimizer step (measured, 1 thread, batch 64, T = 100); orders jobs longest first
STEP_COST = {"pulse": 56, "pulse_xwin": 66, "pulse_oracle": 42, "dsvae": 38, "ts2vec": 69, "simclr": 21,
             "mae": 13, "supervised": 12}


@dataclass(frozen=True)
class Job:
    """One model to train: ``method`` on data set ``kind`` ("lorenz" or "ecg") drawn with ``seed``.

    ``noise`` is the Lorenz process noise; ``frac``/``draw`` name a label-efficiency subset of the ECG training
    windows (the supervised-from-scratch reference of C4)."""

    method: str
    kind: str
    seed: int
    noise: float | None = None
    frac: float | None = None
    draw: int | None = None
    scale: int = 1   # pretraining epochs x scale (2: K1/K4's doubling test)
    setting: str | None = None  # an ECG setting other than cfg.ecg_setting (C3's report on the card's setting)

    def cost(self, cfg: Config) -> float:
        from .training import n_steps
        if self.frac is not None:
            steps = cfg.scratch_steps
        else:
            from .experiments import epochs_for
            steps = n_steps(cfg.max_train_windows, cfg.batch_size, epochs_for(cfg, {"kind": self.kind}, self.method))
        return STEP_COST.get(self.method, 40) * steps * self.scale


def training_jobs(cfg: Config) -> list[Job]:
    """Every model :func:`~repro.pulse.experiments.run_lorenz`, ``run_noise``, ``run_ecg`` and
    ``run_label_efficiency`` will train for ``cfg`` (the transfer study fine-tunes inside its own loop)."""
    from .experiments import seeds
    jobs = [Job(m, "lorenz", s, cfg.lorenz_noise) for s in seeds(cfg) for m in cfg.lorenz_methods]
    from .experiments import k3_seeds, noise_seeds
    for s in noise_seeds(cfg):
        for lv in cfg.noise_levels:
            if not np.isclose(lv, cfg.lorenz_noise) or s not in seeds(cfg):
                jobs += [Job(m, "lorenz", s, float(lv)) for m in ("pulse", "dsvae")]
    if "pulse_oracle" in cfg.lorenz_methods:
        jobs += [Job("pulse_oracle", "lorenz", s, cfg.lorenz_noise) for s in k3_seeds(cfg) if s not in seeds(cfg)]
    first = seeds(cfg)[0]
    for s in seeds(cfg):
        jobs += [Job(m, "ecg", s) for m in cfg.ecg_methods if not (m in cfg.seed0_only and s != first)]
        jobs += [Job("supervised", "ecg", s, frac=f, draw=d) for f, d in label_draw_keys(cfg)]
    # K1/K4's doubling test: every pretrained encoder of the first seed retrained at twice the steps
    jobs += [Job(m, "lorenz", first, cfg.lorenz_noise, scale=2) for m in cfg.lorenz_methods]
    jobs += [Job(m, "ecg", first, scale=2) for m in cfg.ecg_methods if m != "supervised"]
    # C3 reported on the card's ECG setting too (issue 42), when the run's setting is another one
    from .experiments import card_setting_cfg
    if cfg.c3_card_setting and cfg.ecg_setting != "card":
        card = card_setting_cfg(cfg)
        jobs += [Job(m, "ecg", s, setting="card") for s in seeds(card) for m in card.ecg_methods
                 if not (m in cfg.seed0_only and s != first)]
    return jobs


def label_draw_keys(cfg: Config) -> list[tuple[float, int]]:
    """(fraction, draw) of every label-efficiency subset below 100%, in the drivers' order."""
    return [(f, d) for f in cfg.label_fracs if f < 1 for d in range(cfg.n_label_draws)]


@functools.lru_cache(maxsize=8)
def _data(cfg: Config, kind: str, seed: int, noise: float | None):
    from .experiments import make_ecg, make_lorenz
    return make_lorenz(cfg, seed, noise) if kind == "lorenz" else make_ecg(cfg, seed)


def run_job(cfg: Config, job: Job) -> float:
    """Train one job's model into the cache (a no-op if it is there); returns the CPU seconds spent."""
    import torch

    from .experiments import data_key, label_draws, train_cached
    torch.set_num_threads(1)
    t0 = time.process_time()
    if job.setting is not None:
        from .experiments import card_setting_cfg
        assert job.setting == "card", job.setting
        cfg = card_setting_cfg(cfg)
    ds = _data(cfg, job.kind, job.seed, job.noise)
    dkey = data_key(cfg, job.kind, job.seed, job.noise)
    if job.frac is None:
        train_cached(job.method, ds, dkey, cfg, job.seed, scale=job.scale)
    else:
        idx = dict(((f, d), i) for f, d, i in label_draws(cfg, ds, job.seed))[(job.frac, job.draw)]
        train_cached("supervised", ds, dkey, cfg, job.seed * 1000 + job.draw, train=ds.train.subset(idx),
                     max_steps=cfg.scratch_steps, tag=f"frac{job.frac}")
    return time.process_time() - t0


def pretrain_all(cfg: Config, workers: int | None = None) -> dict:
    """Train every job of :func:`training_jobs` on ``workers`` processes (default ``cfg.workers``); with one
    worker nothing is done here (the drivers train lazily). Returns the wall and summed CPU seconds."""
    workers = cfg.workers if workers is None else workers
    jobs = sorted(training_jobs(cfg), key=lambda j: -j.cost(cfg))
    t0 = time.perf_counter()
    if workers <= 1:
        return dict(jobs=len(jobs), workers=1, wall_s=0.0, cpu_s=0.0)
    cpu = 0.0
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    os.environ.update(env)
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        futs = [pool.submit(run_job, cfg, j) for j in jobs]
        for f in as_completed(futs):
            cpu += f.result()
    return dict(jobs=len(jobs), workers=workers, wall_s=time.perf_counter() - t0, cpu_s=cpu)
