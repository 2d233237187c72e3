"""Chapter 17 (EP-Order): the compiled 2-opt kernel against its Python reference, and what EP-Order's preparation
costs against one training run.

Prints CPU seconds (process time, so other load on the machine inflates them little) and ratios for
  * 2-opt of the open cluster path (greedy start, fixed first cluster) at K = 14 (the book's clusters), 64, 140
    (the card's sample-level ablation: clusters of ~25 samples) and 256: the kernel ``_kernels.two_opt`` against
    ``two_opt_reference`` (the same moves in Python), with a check that both return the same path;
  * the parts of EP-Order's preparation at the full profile's size (warm-up on 10 %, embedding all samples,
    k-means, path) against 20 instruction-tuning steps, scaled to a full run.
Run: ``.venv/bin/python benchmarks/bench_ep_order.py`` (single-threaded; an untrained base changes no cost).
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import repro.ep_order as ep  # noqa: E402
from repro.common.timing import best_cpu_time  # noqa: E402

torch.set_num_threads(1)


def main() -> None:
    if not ep.HAVE_KERNEL:
        raise SystemExit("repro.ep_order._kernels is not built: run `.venv/bin/python setup.py build_ext --inplace`")
    rng = np.random.default_rng(0)
    print("2-opt of an open path over K centroids in 64 dimensions (greedy start, first improvement)")
    for K in (14, 64, 140, 256):
        C = rng.standard_normal((K, 64))
        D = ep.centroid_distances(C)
        start = ep.greedy_path(C)
        t_cpp, a = best_cpu_time(lambda: ep.two_opt(D, start, "cpp"), 5)
        t_py, b = best_cpu_time(lambda: ep.two_opt(D, start, "python"), 1)
        gain = 1 - ep.path_length(D, a, dist=True) / ep.path_length(D, start, dist=True)
        print(f"  K = {K:4d}  C++ {1e3 * t_cpp:9.3f} ms   Python {1e3 * t_py:10.1f} ms   speed-up x{t_py / max(t_cpp, 1e-9):8.1f}"
              f"   same path: {np.array_equal(a, b)}   shortened by {100 * gain:.1f} %")

    cfg = ep.Config()
    torch.manual_seed(0)
    base = ep.CharGPT(cfg.d_model, cfg.n_layers, 4, cfg.d_ff)
    data = ep.make_dataset(cfg.n_per_domain, 0)
    n = len(data)
    sub = rng.choice(n, size=int(cfg.warmup_frac * n), replace=False)
    t_warm, _ = best_cpu_time(lambda: ep.train_it(ep.train.clone(base), [data[k] for k in sub], [np.arange(len(sub))],
                                                  cfg.batch_size, cfg.lr), 1)
    t_emb, E = best_cpu_time(lambda: ep.embed_samples(base, data), 1)
    t_km, (labels, C) = best_cpu_time(lambda: ep.kmeans(E, cfg.n_clusters, cfg.kmeans_iters, cfg.kmeans_restarts,
                                                         np.random.default_rng(0)), 1)
    t_path, _ = best_cpu_time(lambda: ep.proximity_path(C), 3)
    steps = 20
    t_20, _ = best_cpu_time(lambda: ep.train_it(ep.train.clone(base), data, [rng.permutation(n)[: steps * cfg.batch_size]],
                                                cfg.batch_size, cfg.lr), 1)
    total_steps = cfg.epochs * (n // cfg.batch_size)
    t_train = t_20 / steps * total_steps
    prep = t_warm + t_emb + t_km + t_path
    print(f"EP-Order's preparation at the full profile's size ({n} samples, K = {cfg.n_clusters}), CPU seconds")
    for name, t in (("warm-up (10 %, 1 epoch)", t_warm), ("embedding", t_emb), ("k-means", t_km), ("path", t_path)):
        print(f"  {name:<24} {t:7.3f} s")
    print(f"  main training ({total_steps} steps, from {steps}) {t_train:7.2f} s   preparation / training = {prep / t_train:.3f}")


if __name__ == "__main__":
    main()
