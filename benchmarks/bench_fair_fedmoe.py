"""Chapter 10 (Fair-FedMOE): the bootstrap kernel against its numpy reference, and what one federation costs.

1. Bootstrap per-group AUC (card, *Compiled kernel*): N test samples, G groups, B resamples; the compiled kernel
   (one sort, O(N) per resample from the resample counts) against the numpy reference (ranks every resample),
   on the same resample indices (results checked equal). Index generation is timed separately: both share it.
2. Local training of the K sites (Fair-MoE and single head, batched over sites) per step.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_fair_fedmoe.py [--n 1500] [--boot 1000]``.
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from repro.common import limit_threads  # noqa: E402
from repro.common.timing import best_cpu_time  # noqa: E402
from repro.fair_fedmoe import data as D, metrics as M, models as Mo  # noqa: E402
from repro.fair_fedmoe.local import Stacked, batch_indices, train_stack  # noqa: E402


def bench_bootstrap(n: int, groups: int, boot: int) -> None:
    rng = np.random.default_rng(0)
    s, y, g = rng.random(n), rng.integers(0, 2, n), rng.integers(0, groups, n)
    t_idx, idx = best_cpu_time(lambda: M.resample_indices(g, groups, boot, 0))
    t_cnt, counts = best_cpu_time(lambda: M.resample_counts(idx, n))
    t_ref, ref = best_cpu_time(lambda: M.bootstrap_group_auc_reference(s, y, g, groups, idx))
    t_ker, ker = best_cpu_time(lambda: M._kernels.bootstrap_group_auc(s, y.astype(np.int64), g.astype(np.int64),
                                                                      counts, groups))
    assert np.nanmax(np.abs(ref - ker)) < 1e-12
    print(f"== 1. bootstrap per-group AUC, N = {n}, G = {groups}, B = {boot} (CPU seconds, best of 3)")
    print(f"resample indices (shared)     {t_idx:8.4f} s")
    print(f"numpy reference (rank each)   {t_ref:8.4f} s")
    print(f"kernel (counts + one sort)    {t_ker:8.4f} s   + counts {t_cnt:.4f} s")
    print(f"speed-up, kernel alone        {t_ref / t_ker:8.1f} x")
    print(f"speed-up, kernel with counts  {t_ref / (t_ker + t_cnt):8.1f} x   max |diff| = {np.nanmax(np.abs(ref - ker)):.1e}")


def bench_training(steps: int) -> None:
    fed = D.make_federation(6, 4, 0.3, seed=0)
    data = Stacked.from_sites(fed.sites)
    idx = batch_indices(data.n, steps, 0)
    print(f"== 2. local training of 6 sites, batched, {steps} steps (CPU ms per step, best of 3)")
    for kind, init in (("moe", Mo.init_moe(4, 0)), ("head", Mo.init_head(4, 0))):
        train_stack(Mo.stack(init, 6), data, idx[:5], kind)          # warm-up
        t, _ = best_cpu_time(lambda: train_stack(Mo.stack(init, 6), data, idx, kind))
        print(f"{kind:5s} {1e3 * t / steps:8.2f} ms/step")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1500)
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=100)
    a = ap.parse_args()
    limit_threads(1)
    torch.set_num_threads(1)
    bench_bootstrap(a.n, a.groups, a.boot)
    bench_training(a.steps)


if __name__ == "__main__":
    main()
