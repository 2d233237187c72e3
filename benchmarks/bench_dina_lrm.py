"""Cost of a reward and of its gradient: DiNa-LRM's latent path against the pixel-space RMs (chapter 11, C4, K4a).

DiNa-LRM runs the first three blocks of the (frozen) generator on the noised latent plus the reward head; the pixel
RMs decode the latent with the autoencoder and run a CNN, sized by the chapter to ~10× DiNa's multiply-accumulates
and to the same count. All three are timed on random weights (the cost does not depend on training) with the
reward's gradient w.r.t. the latent only (weights frozen), as ReFL needs it, in CPU time on one thread, at several batch sizes: at
batch 1 every path is bound by per-operation overhead and the FLOP ratio does not show (card, Controls and risks).
Then whole ReFL steps (batch 32, 15-19 gradient-free Euler steps of the generator, one with gradient, the reward and
its gradient, AdamW) with the DiNa and with the 10× pixel reward, paired step by step as control K4b measures them:
each step executed 10 times with each reward back to back, the step's difference the median of the 10 back-to-back
differences; the same statistic from one execution per step is printed beside it.

    .venv/bin/python benchmarks/bench_dina_lrm.py
"""
from __future__ import annotations

import numpy as np
import torch

from repro.common import seed_everything
from repro.common.timing import best_cpu_time
from repro.dina_lrm import align, metrics
from repro.dina_lrm.data import AE
from repro.dina_lrm.experiments import pixel_macs_for
from repro.dina_lrm.flow import LatentFlowMLP
from repro.dina_lrm.reward import DiNaHead, LatentRewardModel, PixelRewardCNN, frozen_backbone, score


def main() -> None:
    seed_everything(0)
    rm = LatentRewardModel(frozen_backbone(LatentFlowMLP()), DiNaHead()).requires_grad_(False)
    ae = AE().requires_grad_(False)
    z1, y1 = torch.zeros(1, 16), torch.zeros(1, dtype=torch.long)
    dina_macs = metrics.count_macs(lambda: rm(z1, y1, torch.full((1,), 0.4)), [rm])
    dec_macs = metrics.count_macs(lambda: ae.decode(z1), [ae])
    c_big, big_macs = pixel_macs_for(10 * dina_macs, dec_macs)
    c_m, m_macs = pixel_macs_for(dina_macs, dec_macs)
    pix = {"pixel 10×": PixelRewardCNN(c_big).requires_grad_(False),
           "pixel FLOP-matched": PixelRewardCNN(c_m).requires_grad_(False)}
    print(f"MACs per sample: DiNa {dina_macs:,}; pixel 10× (c={c_big}) {big_macs:,}; "
          f"pixel matched (c={c_m}) {m_macs:,}")
    for B in (1, 32, 256, 1024):
        g = torch.Generator().manual_seed(B)
        z, y = torch.randn(B, 16, generator=g), torch.randint(0, 10, (B,), generator=g)
        paths = {"DiNa-LRM": lambda zz: score(rm, zz, y, 0.4, eps=torch.randn(1, B, 16, generator=g)),
                 **{k: (lambda zz, m=m: m(ae.decode(zz), y)) for k, m in pix.items()}}
        times = {}
        for name, fn in paths.items():
            def call():
                zz = z.clone().requires_grad_(True)
                fn(zz).sum().backward()
            times[name], _ = best_cpu_time(call, repeat=7 if B <= 256 else 3)
        base = times["DiNa-LRM"]
        print(f"batch {B:>5}: " + "; ".join(f"{k} {1e3 * t / B:.4f} ms/sample ({t / base:.2f}× DiNa)"
                                            for k, t in times.items()))

    gen = LatentFlowMLP()
    rewards = {"dina": lambda zz, yy: score(rm, zz, yy, 0.4, eps=torch.randn(1, *zz.shape)),
               "pixel": lambda zz, yy: pix["pixel 10×"](ae.decode(zz), yy)}
    t = align.time_refl_steps(gen, rewards, n_steps=40, repeats=10, seed=0)
    for name, diff in (("median of 10 back-to-back differences", align.step_differences(t["dina"], t["pixel"])),
                       ("one execution", t["pixel"][:, 0] - t["dina"][:, 0])):
        md = float(np.median(diff))
        sd = float(1.4826 * np.median(np.abs(diff - md)))
        print(f"ReFL step (batch 32), {name}: DiNa {1e3 * np.median(t['dina']):.2f} ms, pixel 10× "
              f"{1e3 * np.median(t['pixel']):.2f} ms; paired difference {1e3 * md:.2f} ms = {md / sd:.1f} robust sd "
              f"({1e3 * sd:.2f} ms) of the per-step differences")

if __name__ == "__main__":
    main()
