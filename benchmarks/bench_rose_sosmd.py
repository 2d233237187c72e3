"""Benchmark for chapter 08 (ROSE / SOS-MD): compiled stage-game kernel vs its numpy references.

Times, on stage games Q_h(s) taken from a real dataset of the chapter's game (and tiled to a larger
batch): ROSE's exact extragradient solve (to residual 1e-11) and SOS-MD's T = 300 MMD steps, with
(1) the C++ kernel, (2) the batched numpy reference (the fair baseline), (3) a per-state numpy loop.
Then one full (seed, n = 2^15) cell of every method, with the kernel and with numpy.

Run: ``OMP_NUM_THREADS=1 PYTHONPATH=lib python benchmarks/bench_rose_sosmd.py``; exits 0.
"""
from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from repro import rose_sosmd as rs  # noqa: E402
from repro.rose_sosmd import stage  # noqa: E402


def best_of(fn, repeat: int = 5, min_time: float = 0.05) -> float:
    """Best wall time of ``repeat`` rounds; each round loops until ``min_time`` has elapsed."""
    best = np.inf
    for _ in range(repeat):
        k, t0 = 0, time.perf_counter()
        while True:
            fn()
            k += 1
            el = time.perf_counter() - t0
            if el >= min_time:
                break
        best = min(best, el / k)
    return best


def stage_games(S_target: int):
    """Realistic stage games: Q_0(s) of ROSE on a dataset of the chapter's game (seed 0, n = 2^12)."""
    game, mu_b, nu_b = rs.make_instance(0, 6, 3, 3, 4)
    d = rs.make_dataset(0, 4096, game, mu_b, nu_b)
    info = {}
    rs.rose(d, 0.1, (mu_b, nu_b), info=info)
    Q = rs.estimate_q(d, 0, info["V"][1])
    reps = -(-S_target // 6)
    tile = lambda x: np.ascontiguousarray(np.concatenate([x] * reps)[:S_target])  # noqa: E731
    return tile(Q), tile(mu_b[0]), tile(nu_b[0])


def tasks(S: int, beta: float, T: int) -> list:
    """(name, kernel, batched numpy, per-state numpy loop) callables at batch size S."""
    Q, pr, qr = stage_games(S)
    one = [(Q[s:s + 1], pr[s:s + 1], qr[s:s + 1]) for s in range(S)]
    return [
        (f"ROSE solve (extragradient, tol 1e-11), S={S}",
         lambda: rs.solve_regularized(Q, pr, qr, beta, solver="cpp"),
         lambda: rs.solve_regularized(Q, pr, qr, beta, solver="numpy"),
         lambda: [rs.solve_regularized(*x, beta, solver="numpy") for x in one]),
        (f"SOS-MD T={T} MMD steps, S={S}",
         lambda: rs.md_iterate(Q, pr, qr, beta, T, solver="cpp"),
         lambda: rs.md_iterate(Q, pr, qr, beta, T, solver="numpy"),
         lambda: [rs.md_iterate(*x, beta, T, solver="numpy") for x in one]),
    ]


def main() -> int:
    beta, T = 0.1, 300
    print(f"kernel built: {stage.HAVE_KERNEL}")
    rows = []
    for S in (6, 96):
        rows += tasks(S, beta, T)
    print(f"\n{'task':<46}{'kernel':>11}{'numpy':>11}{'loop':>11}{'x batched':>11}{'x loop':>9}")
    for name, f_cpp, f_np, f_loop in rows:
        big = "S=96" in name
        t_np = best_of(f_np, repeat=2 if big else 5)
        t_loop = best_of(f_loop, repeat=1, min_time=0.0) if big else best_of(f_loop, repeat=3)
        if stage.HAVE_KERNEL:
            t_c = best_of(f_cpp)
            print(f"{name:<46}{t_c * 1e3:>9.3f}ms{t_np * 1e3:>9.2f}ms{t_loop * 1e3:>9.1f}ms"
                  f"{t_np / t_c:>10.0f}x{t_loop / t_c:>8.0f}x")
        else:
            print(f"{name:<46}{'-':>11}{t_np * 1e3:>9.2f}ms{t_loop * 1e3:>9.1f}ms")

    # one full (seed, n = 2^15) cell: all methods on the same dataset, then exact evaluation
    game, mu_b, nu_b = rs.make_instance(0, 6, 3, 3, 4)
    refs = (mu_b, nu_b)
    t0 = time.perf_counter()
    d = rs.make_dataset(0, 2 ** 15, game, mu_b, nu_b)
    t_data = time.perf_counter() - t0
    print(f"\nfull cell (seed 0, n=2^15, S=6, A=B=3, H=4): dataset sampled in {t_data * 1e3:.1f} ms")
    print(f"{'method':<12}{'kernel':>11}{'numpy':>11}")
    solvers = (["cpp"] if stage.HAVE_KERNEL else []) + ["numpy"]
    tot = dict.fromkeys(solvers, 0.0)
    for m in rs.METHODS:
        ts = {}
        for sv in solvers:
            t0 = time.perf_counter()
            pi, nu = rs.run_method(m, d, 0.1, refs, T=T, solver=sv)
            ts[sv] = time.perf_counter() - t0
            tot[sv] += ts[sv]
        cells = [f"{ts[sv] * 1e3:>9.1f}ms" if sv in ts else f"{'-':>11}" for sv in ("cpp", "numpy")]
        print(f"{m:<12}{''.join(cells)}")
    t0 = time.perf_counter()
    for _ in range(len(rs.METHODS)):
        rs.reg_gap(game, pi, nu, 0.1, refs), rs.unreg_gap(game, pi, nu)
    print(f"{'evaluation':<12}{(time.perf_counter() - t0) * 1e3:>9.1f}ms (both gaps, all methods)")
    print("totals: " + ", ".join(f"{k} {v:.3f} s" for k, v in tot.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
