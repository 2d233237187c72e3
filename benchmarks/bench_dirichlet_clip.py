"""Chapter 07 (Dirichlet-CLIP / UCAT): what the chapter's time goes into, against references.

Prints CPU seconds (process time, so other load on the machine inflates them little) and ratios for
  * L∞ PGD-20 on 360 digits through the toy CLIP: the library's batched :func:`pgd_ce` against a reference that
    attacks one image at a time (the same arithmetic per example), with the largest difference of the results;
  * the closed-form Dirichlet KL (:func:`dirichlet_kl`, float64) on a fine-tuning batch of 128 × 5 concentrations
    at CLIP scale, against ``torch.distributions.kl_divergence`` (the reference) and a Monte Carlo estimate;
  * one fine-tuning step of each method (2-step training PGD, batch 128): the cost of UCAT's KL against TeCoA.
Run: ``.venv/bin/python benchmarks/bench_dirichlet_clip.py`` (single-threaded; no cache needed: the model is
untrained, which changes no cost).
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.distributions import Dirichlet, kl_divergence  # noqa: E402

from repro import dirichlet_clip as dc  # noqa: E402
from repro.common.timing import best_cpu_time  # noqa: E402

torch.set_num_threads(1)


def cpu(fn, repeat: int = 3):
    return best_cpu_time(fn, repeat)


def main() -> None:
    g = torch.Generator().manual_seed(0)
    clip = dc.ToyCLIP()
    G = clip.text_features(torch.randn(5, 384, generator=g)).detach()
    x = torch.rand(360, 1, 8, 8, generator=g)
    y = torch.randint(0, 5, (360,), generator=g)
    kw = dict(eps=0.15, steps=20, step_size=0.15 / 4, rand_init=False)

    t_batch, a = cpu(lambda: dc.pgd_ce(clip, x, y, G, **kw))
    t_loop, b = cpu(lambda: torch.cat([dc.pgd_ce(clip, x[i:i + 1], y[i:i + 1], G, **kw) for i in range(len(y))]), 1)
    same = float((a - b).abs().max())
    print(f"PGD-20 (L∞, ε = 0.15) on {len(y)} images of 8×8")
    print(f"  batched pgd_ce            {t_batch:8.3f} s")
    print(f"  one image at a time (ref) {t_loop:8.3f} s   ratio ×{t_loop / t_batch:6.1f}   max |Δx_adv| {same:.1e}")

    cos_a = 0.2 + 0.6 * torch.rand(128, 5, generator=g, dtype=torch.float64)
    cos_b = cos_a + 0.05 * torch.randn(128, 5, generator=g, dtype=torch.float64)
    alpha, beta = dc.dirichlet_alpha(cos_a, 0.07), dc.dirichlet_alpha(cos_b, 0.07)
    t_cf, kl = cpu(lambda: dc.dirichlet_kl(alpha, beta), 50)
    t_ref, ref = cpu(lambda: kl_divergence(Dirichlet(alpha), Dirichlet(beta)), 50)
    rel = float(((kl - ref).abs() / ref.abs().clamp_min(1e-12)).max())
    print(f"Dirichlet KL, 128 × 5 concentrations up to {float(alpha.max()):.1e} (float64)")
    print(f"  closed form (dirichlet_kl)           {1e3 * t_cf:8.3f} ms")
    print(f"  torch.distributions.kl_divergence    {1e3 * t_ref:8.3f} ms   ratio ×{t_ref / t_cf:6.2f}   "
          f"max rel. diff {rel:.1e}")
    a_small = 0.8 + 4 * torch.rand(5, generator=g, dtype=torch.float64)
    b_small = 0.8 + 4 * torch.rand(5, generator=g, dtype=torch.float64)
    torch.manual_seed(0)

    def mc():
        p = Dirichlet(a_small).sample((100_000,))
        return (Dirichlet(a_small).log_prob(p) - Dirichlet(b_small).log_prob(p)).mean()

    t_mc, est = cpu(mc, 1)
    exact = float(dc.dirichlet_kl(a_small, b_small))
    print(f"  Monte Carlo, 1e5 samples, one pair   {1e3 * t_mc:8.3f} ms   rel. error {abs(float(est) - exact) / exact:.1e}")

    xs = torch.rand(640, 1, 8, 8, generator=g)
    ys = torch.randint(0, 5, (640,), generator=g)
    print("One fine-tuning step (batch 128, 2-step training PGD), CPU ms per step over 5 steps")
    per_step = {}
    for m in ("tecoa", *[m for m in dc.AFT_METHODS if m != "tecoa"]):
        t, _ = cpu(lambda: dc.adversarial_finetune(clip, m, xs, ys, G, steps=5, lr=1e-3, eps=0.15, pgd_steps=2,
                                                   tau=0.07, tau_rob=1e5, generator=torch.Generator().manual_seed(1)), 2)
        per_step[m] = t / 5
        print(f"  {m:<11} {1e3 * per_step[m]:8.2f} ms   ×{per_step[m] / per_step['tecoa']:5.2f} of TeCoA")


if __name__ == "__main__":
    main()
