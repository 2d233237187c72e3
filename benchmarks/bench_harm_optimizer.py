"""Chapter 09 (harm_optimizer): the compiled QP kernel against its torch reference, and where a training step's
time goes.

Prints CPU seconds (process time) and ratios for
  * the B-dimensional dual (FISTA, Jacobi-scaled, 20 power iterations) on last-layer Gram matrices of a real
    digits batch, B ∈ {32, 64, 128}, 10 and 50 iterations: ``_kernels.solve_nonneg_qp`` vs ``solve_nonneg_qp_torch``
    (with the largest difference of the solutions);
  * one training step of SGDM and Harm-SGDM (digits MLP, B = 64) with each backend: the fraction of a Harm-SGDM
    step that the kernel saves.
Run: ``.venv/bin/python benchmarks/bench_harm_optimizer.py`` (single-threaded).
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from repro import harm_optimizer as ho  # noqa: E402
from repro.common.timing import best_cpu_time  # noqa: E402

torch.set_num_threads(1)


def problem(B: int):
    """K, c of the last-layer proxy for a digits batch at initialisation (SGDM's first step)."""
    sp = ho.load("digits")
    model = ho.build_model("digits", 0)
    x, y = sp.x_train[:B], sp.y_train[:B]
    with torch.no_grad():
        h = model.features(x)
        e = torch.softmax(model.head(h), 1) - F.one_hot(y, 10)
        hb = ho.with_bias(h)
        D = (e.T @ hb) / B
    return ho.lastlayer_gram(e, hb).double(), ho.lastlayer_c(e, hb, D).double()


def main() -> None:
    print("QP solver: compiled kernel vs torch reference (CPU time per solve)")
    print(f"{'B':>5} {'iters':>6} {'torch ms':>10} {'C++ ms':>9} {'speed-up':>9} {'max |Δα|':>10}")
    for B in (32, 64, 128):
        K, c = problem(B)
        for iters in (10, 50):
            n = 50
            t_t, a_t = best_cpu_time(lambda: [ho.solve_nonneg_qp(K, c, iters, backend="torch") for _ in range(n)][-1])
            t_c, a_c = best_cpu_time(lambda: [ho.solve_nonneg_qp(K, c, iters, backend="cpp") for _ in range(n)][-1])
            print(f"{B:>5} {iters:>6} {1e3 * t_t / n:>10.3f} {1e3 * t_c / n:>9.3f} {t_t / t_c:>8.1f}× "
                  f"{float((a_t - a_c).abs().max()):>10.2e}")

    print("\nOne training step, digits MLP 64-256-256-10, B = 64 (CPU time per step)")
    sp = ho.load("digits")
    x, y = sp.x_train[:64], sp.y_train[:64]
    hp = {"lr": 1e-4, "weight_decay": 5e-4, "momentum": 0.9}
    res = {}
    for name, kw in (("sgdm", {}), ("harm_sgdm", {"backend": "torch"}), ("harm_sgdm", {"backend": "cpp"})):
        opt = ho.make_optimizer(name, ho.build_model("digits", 0), hp, **kw)
        n = 100
        t, _ = best_cpu_time(lambda: [opt.step_batch(x, y) for _ in range(n)])
        res[(name, kw.get("backend", ""))] = t / n
        print(f"  {name:<10} {kw.get('backend', ''):<6} {1e3 * t / n:7.3f} ms")
    saved = res[("harm_sgdm", "torch")] - res[("harm_sgdm", "cpp")]
    print(f"  the kernel saves {1e3 * saved:.3f} ms per Harm-SGDM step "
          f"({saved / res[('harm_sgdm', 'torch')]:.0%} of it); Harm-SGDM / SGDM = "
          f"{res[('harm_sgdm', 'cpp')] / res[('sgdm', '')]:.2f}× with the kernel")


if __name__ == "__main__":
    main()
