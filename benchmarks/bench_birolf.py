"""Chapter 02 (BiRoLF): what the blockwise update and the compiled kernel buy, measured in one run.

1. Main-estimator update time per round at M = N in {10, 20, 40}, along the first recorded main problems
   (B_t, μ_t) of a BiRoLF run: blockwise FISTA, full-matrix FISTA (both warm-started, stopped at KKT ≤ 1e-6·max|B_t|),
   and generic solvers of the same objective — scipy SLSQP (the approach of the authors' generic variant) and
   cvxpy/Clarabel — on the first few problems. Printed as ratios to the blockwise time, with the accuracy reached.
2. The compiled kernel against its numpy reference: FISTA iterations of the imputation and of the oo block.
3. A whole BiRoLF trial at the authors' default setting (M = N = 5, T = 1000): per-round imputation and main time and
   the trial time (card target: ≤ 1.5 s on one core), with the kernel and with numpy only.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_birolf.py [--updates 200] [--sizes 10 20 40] [--generic 3]``.
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from repro.birolf import agents as A  # noqa: E402
from repro.birolf import solvers as S  # noqa: E402
from repro.birolf.env import gram_blocks  # noqa: E402
from repro.birolf.experiments import record_main_sequence, time_main_solvers  # noqa: E402
from repro.birolf.run import Setting, run_trial  # noqa: E402
from repro.common import limit_threads  # noqa: E402


def main_estimator(sizes: list[int], updates: int, n_generic: int, slsqp_max: int) -> None:
    print(f"== 1. main-estimator update, {updates} warm-started updates per size, KKT <= 1e-6 max|B_t|")
    S.solve_main_cvxpy(np.eye(3), np.eye(3), np.eye(3), 0.1)      # warm-up: cvxpy's first call pays its imports
    print(f"{'M=N':>4} {'blockwise ms':>13} {'full ms':>10} {'full/blk':>9} {'SLSQP ms':>10} {'SLSQP/blk':>10} "
          f"{'SLSQP KKT/max|B|':>17} {'cvxpy ms':>10} {'cvxpy/blk':>10}")
    for m in sizes:
        s = Setting(f"timing-{m}", m, m, 6, 6, 4, 4, updates + 50)
        seq = record_main_sequence(s, updates, seed=0)
        tm = time_main_solvers(seq, 1e-6, repeats=3)
        blk = tm[("blockwise", "matched")]["seconds_per_update"]
        full = tm[("full", "matched")]["seconds_per_update"]
        # generic solvers on the first problems (cold for cvxpy; SLSQP warm-started along the sequence)
        k = min(n_generic, updates)
        sl_t, sl_kkt = float("nan"), float("nan")
        if m <= slsqp_max:
            P = np.zeros((m, m))
            t0 = time.perf_counter()
            kk = []
            for B, mu in zip(seq.Bs[:k], seq.mus[:k]):
                P = S.solve_main_slsqp(B, seq.Gx, seq.Gy, mu, P)
                kk.append(S.kkt_residual(seq.Gx, seq.Gy, B, P, mu) / np.abs(B).max())
            sl_t, sl_kkt = (time.perf_counter() - t0) / k, float(np.median(kk))
        # cvxpy takes the augmented features; any square root of the Grams gives the same quadratic
        Xs = np.linalg.cholesky(seq.Gx).T
        Ys = np.linalg.cholesky(seq.Gy).T
        t0 = time.perf_counter()
        for B, mu in zip(seq.Bs[:k], seq.mus[:k]):
            S.solve_main_cvxpy(B, Xs, Ys, mu)
        cv_t = (time.perf_counter() - t0) / k
        print(f"{m:>4} {1e3 * blk:>13.3f} {1e3 * full:>10.3f} {full / blk:>9.1f} {1e3 * sl_t:>10.1f} "
              f"{sl_t / blk:>10.0f} {sl_kkt:>17.1e} {1e3 * cv_t:>10.1f} {cv_t / blk:>10.0f}")
        capb = tm[("blockwise", "caps")]
        capf = tm[("full", "caps")]
        print(f"     under the authors' caps: blockwise {1e3 * capb['seconds_per_update']:.3f} ms "
              f"(KKT/max|B| median {capb['kkt_rel_median']:.1e}, max {capb['kkt_rel_max']:.1e}), full "
              f"{1e3 * capf['seconds_per_update']:.3f} ms (KKT/max|B| median {capf['kkt_rel_median']:.1e}, "
              f"max {capf['kkt_rel_max']:.1e})")
    print(f"     (SLSQP and cvxpy: mean over the first {n_generic} problems; SLSQP only for M=N <= {slsqp_max})")


def _per_iter(fn, iters: int, reps: int = 5) -> float:
    best = np.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best / iters


def kernel_vs_numpy() -> None:
    print("== 2. compiled kernel vs numpy reference (time per FISTA iteration, fixed 500 iterations)")
    rng = np.random.default_rng(0)
    for m in (5, 10, 20):
        s = Setting(f"k-{m}", m, m, 6 if m > 6 else 4, 6 if m > 6 else 4, 4 if m > 6 else 3, 4 if m > 6 else 3, 10)
        inst, _ = s.instance(0, 0)
        N = rng.integers(0, 4, (m, m)).astype(float)
        Ssum = N * inst.R_bar
        L = 2 * S.impute_lipschitz(inst.X_aug, inst.Y_aug, N)
        P0 = np.zeros((m, m))
        imp = {be: _per_iter(lambda be=be: S.fista_impute(inst.X_aug, inst.Y_aug, N, Ssum, 0.1, P0, L, 500, 0.0,
                                                          backend=be), 500) for be in ("numpy", "kernel")}
        d = inst.d_x
        Go = gram_blocks(inst.X_aug, d)
        Ho = gram_blocks(inst.Y_aug, d)
        Lo = 2 * np.linalg.eigvalsh(Go)[-1] * np.linalg.eigvalsh(Ho)[-1]
        Bo = rng.standard_normal((d, d))
        oo = {be: _per_iter(lambda be=be: S.fista_matrix(Go, Ho, Bo, 0.1, None, Lo, 500, 0.0, backend=be), 500)
              for be in ("numpy", "kernel")}
        print(f"  M=N={m:>2}: imputation {1e6 * imp['numpy']:7.2f} us (numpy) vs {1e6 * imp['kernel']:6.2f} us "
              f"(kernel) = {imp['numpy'] / imp['kernel']:5.1f}x;  oo block ({d}x{d}) {1e6 * oo['numpy']:6.2f} us vs "
              f"{1e6 * oo['kernel']:5.2f} us = {oo['numpy'] / oo['kernel']:5.1f}x")


def whole_trial() -> None:
    print("== 3. whole BiRoLF trial at the authors' default setting (M=N=5, d*=4, d=3, T=1000), one core")
    s = Setting("authors_default", 5, 5, 4, 4, 3, 3, 1000)
    inst, noise = s.instance(0, 0)
    acc = {"impute": 0.0, "main": 0.0}
    f_imp, f_main = A.fista_impute, A.solve_main_blockwise

    def timed(key, fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            out = fn(*a, **k)
            acc[key] += time.perf_counter() - t0
            return out
        return wrapper

    A.fista_impute, A.solve_main_blockwise = timed("impute", f_imp), timed("main", f_main)
    try:
        for backend in ("auto", "numpy"):
            acc.update(impute=0.0, main=0.0)
            agent = s.agent("birolf", inst, 0, 0, backend=backend)
            t0 = time.perf_counter()
            c = run_trial(agent, inst, noise)
            wall = time.perf_counter() - t0
            g = max(agent.Gamma, 1)
            print(f"  backend {backend:>6}: trial {wall:.2f} s (target <= 1.5 s); per matched round: imputation "
                  f"{1e3 * acc['impute'] / g:.3f} ms, main {1e3 * acc['main'] / g:.3f} ms; R(T) = {c[-1]:.1f}")
    finally:
        A.fista_impute, A.solve_main_blockwise = f_imp, f_main


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 40])
    ap.add_argument("--updates", type=int, default=200)
    ap.add_argument("--generic", type=int, default=3, help="problems solved by SLSQP and cvxpy per size")
    ap.add_argument("--slsqp-max", type=int, default=20, help="largest M=N given to SLSQP")
    args = ap.parse_args()
    limit_threads(1)
    print(f"compiled kernel: {S.HAVE_KERNEL}; numpy threads: {os.environ.get('OMP_NUM_THREADS')}")
    main_estimator(args.sizes, args.updates, args.generic, args.slsqp_max)
    kernel_vs_numpy()
    whole_trial()
