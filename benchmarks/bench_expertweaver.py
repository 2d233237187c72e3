"""Chapter 05 (ExpertWeaver): the balanced-assignment kernel against its reference, and FFN latency at batch 1.

Prints CPU seconds (process time; best of several calls) and ratios for
  * the capacity-constrained assignment step of balanced k-means at the chapter's size (N = 384 neurons, E = 16
    clusters) and at N = 2048: the C++ kernel against the numpy reference (a Python loop over sorted pairs), with a
    check that the labels are identical;
  * one whole balanced k-means (20 iterations, Gram form) on 384 activation patterns over 16 k tokens;
  * batch-1 latency of a SwiGLU FFN: dense, a contiguous 25 % slice, and an ExpertWeaver-structured FFN at 25 %
    (pre-sliced shared and expert blocks, representative router) at the chapter's width (96 × 384) and at 512 × 2048.
Run: ``.venv/bin/python benchmarks/bench_expertweaver.py`` (single-threaded).
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from repro.common.timing import best_cpu_time  # noqa: E402
from repro.expertweaver import latency as lat  # noqa: E402
from repro.expertweaver import partition as P  # noqa: E402

torch.set_num_threads(1)


def main() -> None:
    rng = np.random.default_rng(0)
    if P._balanced_assign_cpp is None:
        print("kernel not built: run `make setup` (setup.py build_ext --inplace)")
    for n, e in ((384, 16), (2048, 16)):
        dist = rng.random((n, e)).astype(np.float32)
        cap = np.asarray(P.expert_sizes(n, e), np.int32)
        t_ref, a = best_cpu_time(lambda: P.balanced_assign_ref(dist, cap), 5)
        t_cpp, b = best_cpu_time(lambda: P.balanced_assign(dist, cap), 50)
        print(f"balanced_assign N = {n}, E = {e}: numpy reference {1e3 * t_ref:7.3f} ms, C++ {1e3 * t_cpp:7.3f} ms, "
              f"×{t_ref / t_cpp:6.1f}, identical labels: {np.array_equal(a, b)}")
    pats = (rng.random((16384, 384)) < 0.3).astype(np.float64)
    G = pats.T @ pats
    d = np.sqrt(np.diag(G))
    G = G / d[:, None] / d[None, :]
    t_km, _ = best_cpu_time(lambda: P.balanced_kmeans(None, P.expert_sizes(384, 16), 20, np.random.default_rng(1), gram=G), 3)
    print(f"balanced k-means, 384 patterns (Gram form), E = 16, 20 iterations: {1e3 * t_km:.1f} ms")
    for d_model, d_ff in ((96, 384), (512, 2048)):
        B = d_ff // 4
        plan = P.plan_layer(B / 2, d_ff, 16, B, int(0.01 * d_ff))
        w_g, w_u, w_d, shared, ex, reps, g = lat.synthetic_ffn(d_model, d_ff, plan, 4, 0)
        t = lat.layer_latency(w_g, w_u, w_d, shared, ex, reps, plan.k, 0.25, 300, g)
        print(f"FFN {d_model} × {d_ff} at batch 1: dense {1e6 * t['dense']:7.1f} µs, 25 % slice {1e6 * t['slice']:7.1f} µs "
              f"(×{t['dense'] / t['slice']:.2f}), ExpertWeaver 25 % (shared {plan.u}, top-{plan.k} of 16) "
              f"{1e6 * t['moe']:7.1f} µs (×{t['dense'] / t['moe']:.2f})")


if __name__ == "__main__":
    main()
