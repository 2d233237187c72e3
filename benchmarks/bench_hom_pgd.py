"""Chapter 14 (Hom-PGD+): where a latent iteration's time goes, and what the fused C++ constraint kernel gains.

Prints CPU seconds (process time) for, at n = m ∈ {10, 30, 60} and a batch of 256 instances:
  * the constraint evaluation of the feasibility check and the bisection, max(0, max_i g_i(x), box, ball) with
    g_i(x) = ½ xᵀQ_i x + p_iᵀx − s_i b_i (float64 inside, float32 points, as ``QCQPFamily.violation``):
    torch as the chapter wrote it (one einsum), torch at its best (Q_i pre-laid out as one [n, m·n] matrix, one
    GEMM), and the fused kernel ``repro.hom_pgd._kernels.violation`` (``QCQPFamily.check_violation``);
  * one INN forward pass (the star flow, hidden 64), and one forward + backward (the gradient step);
  * one full latent iteration of :func:`repro.hom_pgd.hom_pgd` with the torch check and with the kernel.
The card: ship the kernel only where the constraint evaluation is > 30 % of an iteration (torch path) and the kernel
gains ≥ 1.5× over the best torch formulation there. Run: ``.venv/bin/python benchmarks/bench_hom_pgd.py``
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


def _torch_best(fam: hp.QCQPFamily):
    """The fastest torch formulation we found of ``fam.violation`` (same numbers): Q_i laid out once as [n, m·n]."""
    Qc, pc, b = fam.tensors(torch.float64)
    n = fam.n
    Qflat = Qc.permute(1, 0, 2).reshape(n, -1).contiguous()

    def viol(x, s):
        xd, sd = x.double(), s.double()
        g = 0.5 * ((xd @ Qflat).view(-1, fam.m, n) * xd[:, None, :]).sum(-1) + xd @ pc.T - sd * b
        return torch.cat([g, xd.abs() - fam.box, xd.norm(dim=1, keepdim=True) - fam.radius], 1
                         ).amax(1).clamp_min(0).to(x.dtype)
    return viol


def main() -> None:
    print(f"{'n = m':>6} {'torch einsum':>13} {'torch GEMM':>11} {'kernel':>9} {'gain':>6} {'INN fwd':>9} "
          f"{'fwd+bwd':>9} {'iter torch':>11} {'iter kernel':>12} {'share torch':>12}")
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
        best = _torch_best(fam)
        ref = fam.violation(x, s)
        assert torch.equal(best(x, s), ref) or torch.allclose(best(x, s), ref, rtol=1e-6, atol=1e-7)
        assert torch.allclose(fam.check_violation(x, s), ref, rtol=1e-6, atol=1e-7)
        reps = 50
        te, _ = best_cpu_time(lambda: [fam.violation(x, s) for _ in range(reps)], repeat=5)
        tg, _ = best_cpu_time(lambda: [best(x, s) for _ in range(reps)], repeat=5)
        tk, _ = best_cpu_time(lambda: [fam.check_violation(x, s) for _ in range(reps)], repeat=5)
        t_torch = min(te, tg)
        with torch.no_grad():
            tf, _ = best_cpu_time(lambda: [inn.map(z, c) for _ in range(reps)])

        def fwd_bwd():
            zr = z.clone().requires_grad_(True)
            f = fam.objective(inn.map(zr, c), torch.as_tensor(inst.Q, dtype=torch.float32),
                              torch.as_tensor(inst.p, dtype=torch.float32))
            torch.autograd.grad(f.sum(), zr)
        tb, _ = best_cpu_time(lambda: [fwd_bwd() for _ in range(reps)])
        it = 20
        kern = hp.problems._kernels
        hp.problems._kernels = None                      # the torch check (the chapter's path before the kernel)
        ti_t, r = best_cpu_time(lambda: hp.hom_pgd(inn.map, fam, inst, it), repeat=2)
        hp.problems._kernels = kern
        ti_k, rk = best_cpu_time(lambda: hp.hom_pgd(inn.map, fam, inst, it), repeat=2)
        per_t, per_k = ti_t / max(1, r.iters), ti_k / max(1, rk.iters)
        # constraint evaluations per iteration: 1 feasibility check + bisection steps on the fraction that needed it
        evals = 1 + 10 * r.bisect_rate
        share = evals * (te / reps) / per_t
        print(f"{n:>6} {1e3 * te / reps:>10.3f} ms {1e3 * tg / reps:>8.3f} ms {1e3 * tk / reps:>6.3f} ms "
              f"{t_torch / tk:>5.2f}× {1e3 * tf / reps:>6.2f} ms {1e3 * tb / reps:>6.2f} ms "
              f"{1e3 * per_t:>8.2f} ms {1e3 * per_k:>9.2f} ms {100 * share:>10.1f} %")
    print("gain = the best torch formulation's time / the kernel's. The card ships the kernel where the share "
          "exceeds 30 % and the gain is ≥ 1.5×.")


if __name__ == "__main__":
    main()
