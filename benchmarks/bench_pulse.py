"""Chapter 19 (PULSE): the compiled batched integrators against their numpy references and scipy.

Prints CPU seconds (process time, so other load on the machine inflates them little) and the speed-ups for
  * ECGSYN, RK4 at 500 Hz: 80 subjects x 20 s (the full profile's ECG set; 10,000 steps),
  * the Lorenz SDE: 100 trajectories x 1,199 steps (the full profile's five systems at once),
  * scipy.integrate.solve_ivp (DOP853, rtol 1e-12) as the reference for the noise-free Lorenz systems of the
    official grid, from a point on each attractor, over 25 and 250 steps (the kernel's fixed-step RK4 error at the
    official dt, which grows with rho; chaos makes any two solvers part over long horizons),
  * scipy.integrate.solve_ivp (RK45, rtol 1e-8) on the same ECG problem, one subject at a time, with the
    piecewise-constant RR drive interpolated on the half-step grid (what an adaptive solver would be given),
and the largest difference between the kernel and each reference.
Run: ``.venv/bin/python benchmarks/bench_pulse.py`` (single-threaded).
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

from repro.pulse import generators as G  # noqa: E402
from repro.common.timing import best_cpu_time  # noqa: E402


def cpu(fn, repeat: int = 1):
    return best_cpu_time(fn, repeat)


def main() -> None:
    if not G.HAVE_KERNEL:
        raise SystemExit("repro.pulse._kernels is not built: run `python setup.py build_ext --inplace`")
    rng = np.random.default_rng(0)
    n, seconds, h = 80, 20.0, 1 / 500
    subj = G.sample_subjects(n, rng)
    omega, z0 = G.ecg_drive(subj, seconds, h, rng)
    phi = rng.uniform(-np.pi, np.pi, n)
    x0 = np.stack([np.cos(phi), np.sin(phi), np.zeros(n)], 1)
    args = (x0, omega, z0, subj.a, subj.b, subj.theta, h)
    t_cpp, a = cpu(lambda: G.integrate_ecg(*args, backend="cpp"), repeat=3)
    t_np, b = cpu(lambda: G.integrate_ecg(*args, backend="numpy"))
    print(f"ECGSYN RK4, {n} subjects x {seconds:g} s at 500 Hz ({a.shape[1] - 1} steps)")
    print(f"  C++ kernel      {t_cpp:8.3f} s")
    print(f"  numpy reference {t_np:8.3f} s   speed-up x{t_np / t_cpp:6.1f}   max |diff| {np.abs(a - b).max():.1e}")

    # scipy's adaptive RK45 on a few subjects (it is per-subject), scaled to all n
    k = 4
    t_half = np.arange(omega.shape[1]) * (h / 2)

    def rhs(i):
        def f(t, s):
            w = np.interp(t, t_half, omega[i])
            zz = np.interp(t, t_half, z0[i])
            return G.ecg_rhs(s[None], np.array([w]), np.array([zz]), subj.a[i:i + 1], subj.b[i:i + 1],
                             subj.theta[i:i + 1])[0]
        return f

    t_eval = np.arange(a.shape[1]) * h

    def run_scipy():
        return [solve_ivp(rhs(i), (0, t_eval[-1]), x0[i], method="RK45", t_eval=t_eval, rtol=1e-8, atol=1e-10,
                          max_step=h) for i in range(k)]

    t_sp, sols = cpu(run_scipy)
    diff = max(np.abs(s.y.T - a[i]).max() for i, s in enumerate(sols))
    print(f"  scipy solve_ivp {t_sp / k * n:8.3f} s   (RK45 rtol 1e-8, measured on {k} subjects, x{n // k})"
          f"   speed-up x{t_sp / k * n / t_cpp:6.0f}   max |diff| {diff:.1e}")

    B, N = 100, 1199
    x0 = rng.standard_normal((B, 3))
    xi = rng.standard_normal((B, N, 3))
    rho = np.repeat([28, 55, 83, 110, 138.0], 20)
    speed = np.array([G.lorenz_speed(r) for r in rho])
    g = rng.uniform(1, 5, B)
    t_cpp, a = cpu(lambda: G.integrate_lorenz(x0, xi, rho, speed, g, G.LORENZ_DT, "cpp"), repeat=3)
    t_np, b = cpu(lambda: G.integrate_lorenz(x0, xi, rho, speed, g, G.LORENZ_DT, "numpy"))
    print(f"Lorenz SDE (RK4 drift + additive noise), {B} trajectories x {N} steps")
    print(f"  C++ kernel      {t_cpp:8.4f} s")
    print(f"  numpy reference {t_np:8.4f} s   speed-up x{t_np / t_cpp:6.1f}   max |diff| {np.abs(a - b).max():.1e}")

    # noise-free Lorenz against scipy's DOP853 (rtol 1e-12) as the reference: start from a point on each attractor
    # (after the 200-step burn-in: near the origin the unstable equilibrium amplifies any difference enormously) and
    # compare the kernel's fixed-step RK4 at the official dt over 25 and 250 steps. The system is chaotic, so the
    # difference grows with the horizon; halving dt would show the same numbers shrink ~16x on short horizons.
    print(f"Lorenz, noise-free, C++ RK4 at dt = {G.LORENZ_DT:g} against scipy solve_ivp (DOP853, rtol 1e-12)")
    for r in (28.0, 55.0, 83.0, 110.0, 138.0):
        sp = G.lorenz_speed(r)
        start = G.integrate_lorenz(rng.standard_normal((1, 3)), np.zeros((1, 200, 3)), r, sp, 0.0, G.LORENZ_DT, "cpp")[:, -1]
        out = []
        for M in (25, 250):
            t_k, a = cpu(lambda: G.integrate_lorenz(start, np.zeros((1, M, 3)), r, sp, 0.0, G.LORENZ_DT, "cpp")[0],
                         repeat=3)
            t_grid = np.arange(M + 1) * G.LORENZ_DT
            t_s, sol = cpu(lambda: solve_ivp(lambda t, y: G.lorenz_drift(y[None], np.array([r]), np.array([sp]))[0],
                                             (0, t_grid[-1]), start[0], method="DOP853", t_eval=t_grid, rtol=1e-12,
                                             atol=1e-12))
            out.append((M, np.abs(sol.y.T - a).max(), t_s / max(t_k, 1e-9)))
        scale = np.abs(a).max()
        print(f"  rho {r:5.0f} (states up to {scale:4.0f}): " + ";  ".join(
            f"{M} steps max |diff| {d:.1e} (scipy {ratio:,.0f}x slower)" for M, d, ratio in out))

if __name__ == "__main__":
    main()
