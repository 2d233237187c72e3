"""Chapter 18 (EMFormer): the compiled shallow-water step against its numpy reference, and the fused conv.

Prints CPU seconds (process time, so other load on the machine inflates them little) and the speed-ups for
  * one 6-hour frame (15 SSP-RK3 steps at dt = 1,440 s) of the full 32 × 64 grid for 1, 8 and 32 trajectories
    (32 = the full profile's data set, which runs 150 frames): C++ kernel vs the numpy reference, with the largest
    difference of the results;
  * the multi-scale convolution on the valley map (16 × 192 × 4 × 8): merged once vs three convolutions
    (inference), and re-merged every call vs three convolutions (forward + backward).
Run: ``.venv/bin/python benchmarks/bench_emformer.py`` (single-threaded).
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from repro.common.timing import best_cpu_time  # noqa: E402
from repro.emformer import layers, sim  # noqa: E402

torch.set_num_threads(1)


def main() -> None:
    if not sim.HAVE_KERNEL:
        raise SystemExit("repro.emformer._kernels is not built: run `python setup.py build_ext --inplace`")
    cfg = sim.ShallowWaterConfig()
    print(f"shallow water, one frame = {cfg.substeps} RK3 steps on {cfg.ny} × {cfg.nx}")
    for n in (1, 8, 32):
        rng = np.random.default_rng(0)
        s, F = sim.initial_state(cfg, rng, n), sim.pulse_forcing(cfg, rng, n)
        t_c, a = best_cpu_time(lambda: sim.step(s, cfg, F, "cpp", n_steps=cfg.substeps), 3)
        t_n, b = best_cpu_time(lambda: sim.step(s, cfg, F, "numpy", n_steps=cfg.substeps), 2)
        diff = max(float(np.abs(getattr(a, k) - getattr(b, k)).max()) for k in ("h", "u", "v", "T"))
        print(f"  {n:3d} trajectories: C++ {1e3 * t_c:8.2f} ms   numpy {1e3 * t_n:8.2f} ms   speed-up ×{t_n / t_c:5.1f}"
              f"   max |diff| {diff:.1e}")
    print(f"  full data set (32 trajectories × 150 frames): C++ ≈ {150 * t_c:.1f} s, numpy ≈ {150 * t_n:.1f} s")

    conv = layers.MultiScaleConv(192)
    x = torch.randn(16, 192, 4, 8)
    conv.freeze()

    def infer(mode):
        def f():
            with torch.no_grad():
                conv.mode = mode
                for _ in range(100):
                    conv(x)
        return f

    t_m, _ = best_cpu_time(infer("cached"), 5)
    t_3, _ = best_cpu_time(infer("three"), 5)
    print("multi-scale conv, valley map 16 × 192 × 4 × 8, 100 calls")
    print(f"  inference: merged once {1e3 * t_m:7.2f} ms   three convs {1e3 * t_3:7.2f} ms   ×{t_3 / t_m:4.2f}")
    xg = x.clone().requires_grad_(True)

    def trainstep(mode):
        def f():
            conv.mode = mode
            for _ in range(100):
                conv(xg).square().mean().backward()
        return f

    t_m, _ = best_cpu_time(trainstep("merged"), 5)
    t_3, _ = best_cpu_time(trainstep("three"), 5)
    print(f"  forward + backward: re-merged {1e3 * t_m:7.2f} ms   three convs {1e3 * t_3:7.2f} ms   "
          f"merged / three ×{t_m / t_3:4.2f}")


if __name__ == "__main__":
    main()
