"""Chapter 14 (Hom-PGD+): where a latent iteration's time goes, and whether a compiled constraint kernel could pay.

Prints CPU seconds (process time) for, at n = m ∈ {10, 30, 60} and a batch of 256 instances:
  * the constraint evaluation g_i(x) = ½ xᵀQ_i x + p_iᵀx − s_i b_i for the whole batch (one einsum, float64 as in
    the feasibility check; float32 beside it);
  * one INN forward pass (6 couplings, hidden 64), and one forward + backward (the gradient step);
  * one full latent iteration of :func:`repro.hom_pgd.hom_pgd` (gradient, projection, feasibility check, bisections).
The card plans a fused C++ constraint kernel only if the constraint evaluation is > 30 % of an iteration and a kernel
would gain ≥ 1.5×; the printed share decides. Run: ``.venv/bin/python benchmarks/bench_hom_pgd.py``
(single-threaded; untrained INNs with small random last layers, which changes no cost).
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from repro import hom_pgd as hp  # noqa: E402
from repro.common.timing import best_cpu_time  # noqa: E402

torch.set_num_threads(1)


def main() -> None:
    print(f"{'n = m':>6} {'constraints f64':>16} {'constraints f32':>16} {'INN fwd':>9} {'INN fwd+bwd':>12} "
          f"{'iteration':>10} {'constraint share':>17}")
    for n in (10, 30, 60):
        fam = hp.QCQPFamily(n, n, seed=0)
        inst = fam.sample(256, np.random.default_rng(0))
        torch.manual_seed(0)
        inn = hp.CondStarFlow(n, n, 64, 8)   # the chapter's default map
        with torch.no_grad():
            inn.net[-1].weight.normal_(0, 0.01)
        s = torch.as_tensor(inst.s, dtype=torch.float32)
        c = fam.condition(s)
        z = hp.sample_ball(256, n, torch.Generator().manual_seed(1))
        x = inn.map(z, c).detach()
        reps = 50
        t64, _ = best_cpu_time(lambda: [fam.violation(x, s) for _ in range(reps)])
        t32, _ = best_cpu_time(lambda: [fam.all_constraints(x, s).amax(1) for _ in range(reps)])
        with torch.no_grad():
            tf, _ = best_cpu_time(lambda: [inn.map(z, c) for _ in range(reps)])

        def fwd_bwd():
            zr = z.clone().requires_grad_(True)
            f = fam.objective(inn.map(zr, c), torch.as_tensor(inst.Q, dtype=torch.float32),
                              torch.as_tensor(inst.p, dtype=torch.float32))
            torch.autograd.grad(f.sum(), zr)
        tb, _ = best_cpu_time(lambda: [fwd_bwd() for _ in range(reps)])
        it = 20
        ti, r = best_cpu_time(lambda: hp.hom_pgd(inn.map, fam, inst, it), repeat=2)
        per_it = ti / max(1, r.iters)
        # constraint evaluations per iteration: 1 feasibility check + bisection steps on the fraction that needed it
        evals = 1 + 10 * r.bisect_rate
        share = evals * (t64 / reps) / per_it
        print(f"{n:>6} {1e3 * t64 / reps:>13.3f} ms {1e3 * t32 / reps:>13.3f} ms {1e3 * tf / reps:>6.2f} ms "
              f"{1e3 * tb / reps:>9.2f} ms {1e3 * per_it:>7.2f} ms {100 * share:>15.1f} %")
    print("A fused C++ constraint kernel is worth writing only where the share exceeds 30 % (card); "
          "the einsum is one BLAS-bound call.")


if __name__ == "__main__":
    main()
