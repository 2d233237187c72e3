"""Cost of a force evaluation versus N (claim C3): time, edges and peak memory, each model in a fresh process.

* :func:`time_model` — one model at one N: graph construction, forward pass and forces by autograd; a
  warm-up run at that size, then the median (and min, max) of ``repeats`` ≥ 3 runs. ``sort=True`` orders the
  atoms spatially first (the "sorted" variant of the scaling study).
* :func:`edges_per_atom`, :func:`memory_estimate` — the analytic side: message edges summed over layers,
  and ≈ 600 B per edge per layer (float32, F = 32, forward + forces; card, "Pitfalls").
* :func:`timing_sweeps` — one fresh one-thread subprocess imports torch once and forks a child per model;
  each child runs its sizes in increasing order; peak memory at size N is the process's max RSS after that size minus its max RSS after
  imports, model construction and a warm-up at 64 atoms (``tracemalloc`` does not see torch's allocator).
  Max RSS never decreases, so increasing sizes make it the peak of the largest size run so far. A size
  whose analytic estimate exceeds ``mem_cap_gb`` is skipped and recorded as skipped.
"""
from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from typing import Any

import numpy as np

__all__ = ["BYTES_PER_EDGE", "time_model", "edges_per_atom", "memory_estimate", "timing_sweep", "timing_sweeps",
           "make_spec", "build_model"]

BYTES_PER_EDGE = 600


def build_model(kind: str, kwargs: dict[str, Any]):
    """``"dkmp"`` → :class:`DKMP`, ``"schnet"`` → :class:`SchNet` (``cutoff: null`` = all pairs)."""
    from .models import DKMP, SchNet

    if kind == "dkmp":
        return DKMP(**kwargs)
    if kind == "schnet":
        return SchNet(**kwargs)
    raise ValueError(f"unknown model kind {kind!r}")


def edges_per_atom(model, pos: np.ndarray) -> float:
    """Message edges of one force evaluation (all layers) per atom."""
    return model.build_graph(pos).n_edges() / len(pos)


def memory_estimate(n_edges_all_layers: int) -> float:
    """Analytic peak memory (bytes) of a float32 forward + force pass: edges × layers × 600 B."""
    return float(n_edges_all_layers) * BYTES_PER_EDGE


def time_model(model, pos: np.ndarray, species: np.ndarray, repeats: int = 3, warmup: bool = True,
               sort: bool = False) -> dict[str, float]:
    """Seconds for graph construction and for graph + forward + forces at one size: one warm-up run at this
    size (unless ``warmup=False``), then ``repeats`` timed runs; returns the median, min and max of the total,
    every timed run's total (``t_runs``, for the claims' intervals over repeats) and the median of the graph
    part. ``sort=True`` first reorders the atoms by cell (:func:`~repro.dkmp.neighbors.spatial_order`), inside
    the timed graph part."""
    import torch

    from .neighbors import spatial_order

    sp0 = torch.as_tensor(species, dtype=torch.long)
    tg, tt = [], []
    for rep in range(repeats + int(warmup)):
        t0 = time.perf_counter()
        if sort:
            order = spatial_order(pos)
            x_np, sp = pos[order], sp0[torch.from_numpy(order)]
        else:
            x_np, sp = pos, sp0
        g = model.build_graph(x_np)
        t1 = time.perf_counter()
        x = torch.tensor(x_np, dtype=torch.float32, requires_grad=True)
        E, F = model.energy_forces(x, sp, g)
        float(E.detach().sum())
        t2 = time.perf_counter()
        del E, F, x
        if rep >= int(warmup):
            tg.append(t1 - t0)
            tt.append(t2 - t0)
    return {"t_graph": float(np.median(tg)), "t_total": float(np.median(tt)), "t_min": float(np.min(tt)),
            "t_max": float(np.max(tt)), "repeats": len(tt), "t_runs": [float(t) for t in tt],
            "edges": float(g.n_edges())}


def _maxrss_bytes() -> float:
    scale = 1024 if sys.platform != "darwin" else 1
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale


def _worker(spec: dict[str, Any]) -> None:
    """Body of the subprocess: prints one JSON line per size."""
    from repro.common.seeding import seed_everything

    seed_everything(spec.get("seed", 0))
    import torch

    torch.set_num_threads(1)
    from .simulate import make_cluster

    torch.manual_seed(spec.get("seed", 0))
    model = build_model(spec["kind"], spec["kwargs"]).float()
    rng = np.random.default_rng([spec.get("seed", 0), 15, 99])
    x, s = make_cluster(64, rng)
    time_model(model, x, s, repeats=1)  # first warm-up: lazy initialisation of torch's kernels
    base = _maxrss_bytes()
    for n in spec["sizes"]:
        rng = np.random.default_rng([spec.get("seed", 0), 15, 98, n])
        pos, species = make_cluster(n, rng, nn=spec.get("nn", 1.0))
        pos = pos + rng.normal(0.0, 0.05, pos.shape)
        g = model.build_graph(pos)
        est = memory_estimate(g.n_edges())
        row = {"n_atoms": n, "edges": g.n_edges(), "edges_per_atom": g.n_edges() / n, "mem_estimate": est}
        if est > spec["mem_cap_gb"] * 1e9:
            row["skipped"] = True
        else:
            del g
            row.update(time_model(model, pos, species, repeats=spec.get("repeats", 3), warmup=True,
                                  sort=spec.get("sort", False)))
            row["peak_mem"] = _maxrss_bytes() - base
            row["skipped"] = False
        print(json.dumps(row), flush=True)


def _zygote(specs: list[dict[str, Any]]) -> None:
    """Import torch once, then fork one child per spec (sequentially): each child has its own max RSS and
    prints its rows prefixed by the spec's index. The zygote itself runs no torch operation before forking."""
    import os

    import torch  # noqa: F401  (the import is what the children share)

    from . import models, simulate  # noqa: F401

    for k, spec in enumerate(specs):
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                import builtins

                real = builtins.print
                builtins.print = lambda line, **kw: real(f"{k}\t{line}", **kw)
                _worker(spec)
            except BaseException as exc:  # noqa: BLE001 - reported to the parent through stderr
                sys.stderr.write(f"spec {k} failed: {exc!r}\n")
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise SystemExit(f"timing child {k} failed")


def timing_sweeps(specs: list[dict[str, Any]], timeout_s: float = 900) -> list[list[dict[str, Any]]]:
    """Run several :func:`_worker` specs in one fresh one-thread subprocess that imports torch once and forks a
    child per spec (each child: its own max RSS, warm-up and baseline). Returns the rows of every spec."""
    import os

    code = "import json, sys; from repro.dkmp.bench import _zygote; _zygote(json.loads(sys.argv[1]))"
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(specs)], capture_output=True, text=True,
                         timeout=timeout_s, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"timing subprocess failed:\n{out.stderr[-3000:]}")
    rows: list[list[dict[str, Any]]] = [[] for _ in specs]
    for line in out.stdout.splitlines():
        k, _, payload = line.partition("\t")
        if payload.startswith("{"):
            rows[int(k)].append(json.loads(payload))
    return rows


def make_spec(kind: str, kwargs: dict[str, Any], sizes: list[int], repeats: int = 3, seed: int = 0,
              mem_cap_gb: float = 1.5, nn: float = 1.0, sort: bool = False) -> dict[str, Any]:
    """One model's sweep: fcc balls at nearest-neighbour distance ``nn`` (1.0 σ: about the compressed density
    of the sampled clusters) plus 0.05 σ jitter; random weights (cost does not depend on them)."""
    return {"kind": kind, "kwargs": kwargs, "sizes": sorted(int(s) for s in sizes), "repeats": repeats,
            "seed": seed, "mem_cap_gb": mem_cap_gb, "nn": nn, "sort": sort}


def timing_sweep(kind: str, kwargs: dict[str, Any], sizes: list[int], repeats: int = 3, seed: int = 0,
                 mem_cap_gb: float = 1.5, nn: float = 1.0, timeout_s: float = 600) -> list[dict[str, Any]]:
    """One model's sweep in a fresh subprocess (see :func:`timing_sweeps`)."""
    return timing_sweeps([make_spec(kind, kwargs, sizes, repeats, seed, mem_cap_gb, nn)], timeout_s)[0]
