"""The computational experiments of chapter 02: exactness of the blockwise update (C3) and its speed (C4).

C3 (card): on random instances (X, Y ~ N(0, 1) augmented, B ~ N(0, 1), μ = 0.05·max|B|) the blockwise and the
full-matrix FISTA solvers, each run to KKT residual ≤ 1e-9·max|B| (cap 10⁵ iterations), agree to 1e-6 and both
match cvxpy/Clarabel to 1e-5; the full solver under the authors' 200-iteration cap is shown beside them.

C4 (card): along one recorded sequence of main-estimator problems (B_t, μ_t) from a BiRoLF run, each solver is
warm-started from its own previous solution and stopped at KKT ≤ kkt_tol·max|B_t| (matched accuracy), and,
separately, under the authors' fixed caps; we time every solve.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .env import augment
from .run import Setting
from .solvers import (CODE_CAPS, kkt_residual, solve_main_blockwise, solve_main_cvxpy, solve_main_full)

__all__ = ["exactness_instance", "exactness_check", "MainSequence", "record_main_sequence", "time_main_solvers",
           "C3_KKT_REL", "C3_CAP", "inloop_exactness", "latent_structure", "authors_default_numbers"]

C3_KKT_REL = 1e-9      # both iterative solvers run to KKT <= 1e-9 · max|B|
C3_CAP = 100_000       # iteration cap per FISTA loop


def exactness_instance(size: int, d: int, rng: np.random.Generator) -> dict:
    """One random instance of (main) as specified by the card's C3."""
    X = rng.standard_normal((d, size))
    Y = rng.standard_normal((d, size))
    Xa, _ = augment(X)
    Ya, _ = augment(Y)
    B = rng.standard_normal((size, size))
    return dict(Xa=Xa, Ya=Ya, d=d, B=B, mu=0.05 * float(np.abs(B).max()))


def exactness_check(n_instances: int, size: int, d: int, seed: int):
    """Blockwise vs full FISTA vs cvxpy on ``n_instances`` random instances; one row per instance (DataFrame)."""
    import pandas as pd

    rows = []
    for k in range(n_instances):
        rng = np.random.default_rng([seed, 3, k])
        inst = exactness_instance(size, d, rng)
        Xa, Ya, B, mu = inst["Xa"], inst["Ya"], inst["B"], inst["mu"]
        Gx, Gy = Xa.T @ Xa, Ya.T @ Ya                     # the full Grams, computed (off-diagonal blocks ~1e-15)
        Gxo, Gyo = Gx[:d, :d].copy(), Gy[:d, :d].copy()
        ktol = C3_KKT_REL * float(np.abs(B).max())
        Pb, ib = solve_main_blockwise(B, Gxo, Gyo, mu, d, d, caps=(C3_CAP,) * 3, tol=0.0, kkt_tol=ktol)
        Pf, inf_ = solve_main_full(B, Gx, Gy, mu, max_iter=C3_CAP, tol=0.0, kkt_tol=ktol)
        Pc = solve_main_cvxpy(B, Xa, Ya, mu)
        P200, _ = solve_main_full(B, Gx, Gy, mu, max_iter=CODE_CAPS["full"], tol=CODE_CAPS["tol"])
        Pcap, _ = solve_main_blockwise(B, Gxo, Gyo, mu, d, d)
        blocks = {"oo": (slice(0, d), slice(0, d)), "ou": (slice(0, d), slice(d, None)),
                  "uo": (slice(d, None), slice(0, d)), "uu": (slice(d, None), slice(d, None))}
        row = {"instance": k, "max|B|": float(np.abs(B).max()), "mu": mu}
        for name, sl in blocks.items():
            row[f"zeros {name}"] = float(np.mean(Pb[sl] == 0.0))
        row.update({
            "KKT blockwise": kkt_residual(Gx, Gy, B, Pb, mu),
            "KKT full": kkt_residual(Gx, Gy, B, Pf, mu),
            "iters full": inf_.iters["full"],
            "iters oo": ib.iters["oo"],
            "|blockwise − full|": float(np.abs(Pb - Pf).max()),
            "|blockwise − cvxpy|": float(np.abs(Pb - Pc).max()),
            "|full − cvxpy|": float(np.abs(Pf - Pc).max()),
            "KKT full@200": kkt_residual(Gx, Gy, B, P200, mu),
            "|full@200 − blockwise|": float(np.abs(P200 - Pb).max()),
            "KKT blockwise@caps": kkt_residual(Gx, Gy, B, Pcap, mu),
            "kkt target": ktol,
        })
        rows.append(row)
    return pd.DataFrame(rows).set_index("instance")


@dataclass
class MainSequence:
    """A recorded sequence of main-estimator problems (B_t, μ_t) and the Grams they share."""

    M: int
    d_x: int
    d_y: int
    Gxo: np.ndarray
    Gyo: np.ndarray
    Gx: np.ndarray      # blockdiag(XXᵀ, I)
    Gy: np.ndarray
    Bs: list
    mus: list


def record_main_sequence(setting: Setting, n_updates: int, seed: int) -> MainSequence:
    """Run BiRoLF (blockwise, authors' caps) on trial 0 of ``setting`` until ``n_updates`` main updates."""
    inst, noise = setting.instance(seed, 0)
    agent = setting.agent("birolf", inst, seed, 0)
    agent.record = True
    R = inst.R_bar
    t = 0
    while len(agent.trace) < n_updates:
        i, j = agent.choose()
        agent.update(i, j, float(R[i, j] + noise[t % len(noise)]))
        t += 1
    Bs = [b for b, _ in agent.trace[:n_updates]]
    mus = [m for _, m in agent.trace[:n_updates]]
    return MainSequence(inst.M, inst.d_x, inst.d_y, agent.Gxo, agent.Gyo, agent.Gx, agent.Gy, Bs, mus)


def time_main_solvers(seq: MainSequence, kkt_tol: float, repeats: int = 3, backend: str = "auto") -> dict:
    """Per-update time of blockwise and full FISTA along ``seq``, at matched accuracy and under the code caps.

    Each solver is warm-started from its own previous solution. ``matched``: every block (or the full problem)
    stops at KKT ≤ kkt_tol·max|B_t|, checked every 10 iterations, cap 10⁵. ``caps``: the authors' iteration caps
    (blockwise 100/50/50, full 200) and step tolerance 1e-6. The time is the minimum over ``repeats`` passes of the
    summed solve times, divided by the number of updates. Also returned: the KKT residuals relative to max|B_t|
    (median and max) and the mean iterations per update.
    """
    lam_x = max(float(np.linalg.eigvalsh(seq.Gxo)[-1]), 1.0)
    lam_y = max(float(np.linalg.eigvalsh(seq.Gyo)[-1]), 1.0)
    lxo = float(np.linalg.eigvalsh(seq.Gxo)[-1])
    lyo = float(np.linalg.eigvalsh(seq.Gyo)[-1])
    out = {}
    for method in ("blockwise", "full"):
        for mode in ("matched", "caps"):
            best, sols, iters = np.inf, None, None
            for _ in range(repeats):
                Phi = np.zeros_like(seq.Bs[0])
                total, its, res = 0.0, [], []
                for B, mu in zip(seq.Bs, seq.mus):
                    ktol = kkt_tol * float(np.abs(B).max()) if mode == "matched" else 0.0
                    t0 = time.perf_counter()
                    if method == "blockwise":
                        if mode == "matched":
                            Phi, info = solve_main_blockwise(B, seq.Gxo, seq.Gyo, mu, seq.d_x, seq.d_y, Phi,
                                                             caps=(100_000,) * 3, tol=0.0, kkt_tol=ktol,
                                                             lam_x=lxo, lam_y=lyo, backend=backend)
                        else:
                            Phi, info = solve_main_blockwise(B, seq.Gxo, seq.Gyo, mu, seq.d_x, seq.d_y, Phi,
                                                             lam_x=lxo, lam_y=lyo, backend=backend)
                    else:
                        if mode == "matched":
                            Phi, info = solve_main_full(B, seq.Gx, seq.Gy, mu, Phi, max_iter=100_000, tol=0.0,
                                                        kkt_tol=ktol, lam_x=lam_x, lam_y=lam_y, backend=backend)
                        else:
                            Phi, info = solve_main_full(B, seq.Gx, seq.Gy, mu, Phi, lam_x=lam_x, lam_y=lam_y,
                                                        backend=backend)
                    total += time.perf_counter() - t0
                    its.append(sum(info.iters.values()))
                    res.append(Phi)
                if total < best:
                    best, sols, iters = total, res, its
            kkt_rel = np.array([kkt_residual(seq.Gx, seq.Gy, B, P, mu) / float(np.abs(B).max())
                                for B, mu, P in zip(seq.Bs, seq.mus, sols)])
            out[(method, mode)] = {
                "seconds_per_update": best / len(seq.Bs),
                "kkt_rel_median": float(np.median(kkt_rel)),
                "kkt_rel_max": float(kkt_rel.max()),
                "iters_per_update": float(np.mean(iters)),
                "final": sols[-1],
                "bmax_final": float(np.abs(seq.Bs[-1]).max()),
            }
    return out


def inloop_exactness(setting: Setting, seed: int, n_check: int = 10, kkt_rel: float | None = 1e-5) -> dict:
    """Is BiRoLF's in-loop main estimate the argmin of its objective? (control K1)

    Runs BiRoLF on trial 0 of ``setting`` for its whole horizon, keeping every main problem (B_t, μ_t) and the
    estimate Φ̂_t the loop returned; computes the KKT residual of every Φ̂_t relative to max|B_t| and, on
    ``n_check`` evenly spaced updates, the largest entry of |Φ̂_t − Φ_cvxpy| relative to max|B_t|.
    ``kkt_rel=None`` replays the authors' fixed caps (100/50/50 iterations, step tolerance 1e-6) instead.
    """
    from .solvers import kkt_residual, solve_main_cvxpy

    inst, noise = setting.instance(seed, 0)
    agent = setting.agent("birolf", inst, seed, 0, kkt_rel=kkt_rel)
    agent.record = True
    R = inst.R_bar
    phis = []
    for t in range(setting.T):
        i, j = agent.choose()
        agent.update(i, j, float(R[i, j] + noise[t]))
        if agent.matched:
            phis.append(agent.Phi_hat.copy())
    scale = [float(np.abs(B).max()) for B, _ in agent.trace]
    kkt = np.array([kkt_residual(agent.Gx, agent.Gy, B, P, mu) / s
                    for (B, mu), P, s in zip(agent.trace, phis, scale)])
    idx = np.unique(np.linspace(0, len(phis) - 1, min(n_check, len(phis))).astype(int))
    diff = [float(np.abs(phis[k] - solve_main_cvxpy(agent.trace[k][0], inst.X_aug, inst.Y_aug,
                                                     agent.trace[k][1])).max()) / scale[k] for k in idx]
    return {"updates": int(len(phis)), "kkt_rel_max": float(kkt.max()), "kkt_rel_median": float(np.median(kkt)),
            "frac_above_1e-5": float(np.mean(kkt > 1e-5)), "checked": int(len(idx)),
            "cvxpy_rel_max": float(max(diff))}


def latent_structure(setting: Setting, seed: int, n_seeds: int) -> dict:
    """How much of each instance lies outside the observed features (control K2), per seed.

    ``complement_share``: ‖Φ*_ou, Φ*_uo, Φ*_uu‖_F / ‖Φ*‖_F, the part of the effective parameter that lives in the
    orthogonal-complement coordinates (zero when nothing is hidden). ``kron_residual``: the relative residual
    ‖R̄ − R̂‖_F / ‖R̄‖_F of the least-squares fit of R̄ on the observed Kronecker features x_i ⊗ y_j — how
    misspecified the Kronecker baselines' model is even with noiseless, complete data.
    """
    from .agents import kron_features

    share, resid = [], []
    for s in range(n_seeds):
        inst, _ = setting.instance(seed, s)
        dx, dy = inst.d_x, inst.d_y
        # Φ* through the exact inverse X̃⁻¹ = [(XXᵀ)⁻¹X ; B_xᵀ] (rows), so that a zero complement part comes out
        # as zero to rounding (B_xᵀR̄ = 0 when nothing is hidden) instead of to the accuracy of a general solve
        Xi = np.vstack([np.linalg.solve(inst.X @ inst.X.T, inst.X), inst.X_aug[:, dx:].T])
        Yi = np.vstack([np.linalg.solve(inst.Y @ inst.Y.T, inst.Y), inst.Y_aug[:, dy:].T])
        P = Xi @ inst.R_bar @ Yi.T
        total = float(np.linalg.norm(P))
        comp = np.sqrt(np.linalg.norm(P[dx:, :]) ** 2 + np.linalg.norm(P[:dx, dy:]) ** 2)   # ou, uo, uu blocks
        share.append(float(comp) / total)
        Z = kron_features(inst.X, inst.Y)
        r = inst.R_bar.ravel()
        coef, *_ = np.linalg.lstsq(Z, r, rcond=None)
        resid.append(float(np.linalg.norm(r - Z @ coef) / np.linalg.norm(r)))
    return {"complement_share": np.array(share), "kron_residual": np.array(resid)}


def authors_default_numbers():
    """The authors' code's R(T) at its default setting (data/birolf/authors_code_defaults.csv; see data/README.md)."""
    import pandas as pd

    from repro.common.paths import REPO_ROOT

    return pd.read_csv(REPO_ROOT / "data" / "birolf" / "authors_code_defaults.csv", comment="#")
