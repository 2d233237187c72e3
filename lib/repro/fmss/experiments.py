"""The chapter's experiments, one function per claim group; each returns plain DataFrames / dicts.

Chapter 04 (FMSS). Randomness: every instance draws from its own generator, derived from
``(cfg.seed, experiment id, instance index, …)`` by :func:`rng_for`, so results do not depend on the
order in which cells run or on how many instances another experiment uses.

* :func:`run_c1` — σ ≥ SLEM on random feasible policies, σ = SLEM on reversible chains (C1).
* :func:`run_c2` — LP vertex, max-entropy, FMSS (and its ε_π ablation), SLEM search on random MDPs,
  with mixing curves (C2, C3, C4).
* :func:`run_scaling` — solve time against S for Clarabel and SCS (C5).
* :func:`run_sv` — FMSS-SV errors against samples per pair (C6).
* :func:`run_c7` — unachievable and achievable targets (C7).
* :func:`run_gridworld`, :func:`run_fmmc_check` — the narrative example and the FMMC reduction.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .config import Config
from .learn import fmss_sv, sample_kernel, theory_slack
from .mdp import (biased_grid_policy, boundary_target, chi2_curve, eigen_condition, graph_mdp, gridworld,
                  induced_chain, max_inflow, path_graph, random_ergodic_mdp, random_target, reversibility_defect,
                  reversible_chain, slem, stationary, surrogate, tv_curve)
from .synth import (constraint_matrices, fmmc_sdp, fmss_convex, fmss_nonconvex, lp_vertices, occupation,
                    policy_from_occupation, steady_state_lp)

__all__ = [
    "rng_for", "instance", "fitted_rate", "run_c1", "run_c2", "run_scaling", "run_sv", "run_c7",
    "run_gridworld", "run_fmmc_check", "searched", "median_ci", "unachievable_target", "METHODS", "TV_FLOOR", "KAPPA_DEFECTIVE",
    "method_table", "c4_exceptions", "summarise_c1", "summarise_c2", "summarise_c3", "summarise_c4", "summarise_c5",
    "summarise_c6", "summarise_c7", "run_search_check", "SV_REGIMES", "numbers_k1", "numbers_k2", "numbers_k3",
    "numbers_k4", "numbers_k5", "numbers_k6", "numbers_k7", "numbers_k8", "numbers_k9", "numbers_k10", "numbers_k11",
]

METHODS = ("LP vertex", "max-entropy", "FMSS", "FMSS ε_π", "SLEM search")
TV_FLOOR = 1e-13          # C4(c): TV points below this are round-off, not signal (card)
KAPPA_DEFECTIVE = 20.0    # C4(c): eigenvalue condition number from which we call the top eigenvalue near-defective
#   (fixed before any run: a Jordan-like transient k·λᵏ biases a log-rate fitted on k ∈ [10, 30] by about 1/k ≈ 0.05,
#    and two eigenvalues a distance δ apart behave like a Jordan block on that window when δ ≲ 1/k, where κ ≈ 1/δ ≳ 20)


def rng_for(cfg: Config, *key: int) -> np.random.Generator:
    """The generator of one instance: seeded by (cfg.seed, *key), independent of everything else."""
    return np.random.default_rng(np.random.SeedSequence([cfg.seed, *key]))


def instance(cfg: Config, rng: np.random.Generator, S: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A random ergodic MDP and an achievable target μ (stationary law of a random policy)."""
    P = random_ergodic_mdp(S or cfg.S, cfg.A, cfg.support_k, cfg.eps_mix, rng)
    return P, random_target(P, rng)


def _stat_err(Ppi: np.ndarray, mu: np.ndarray) -> float:
    """‖μᵀP_π − μᵀ‖₁: how far the target is from being stationary for the chain."""
    return float(np.abs(mu @ Ppi - mu).sum())


def fitted_rate(tv_worst: np.ndarray, k_min: int, floor: float = TV_FLOOR) -> tuple[float, int]:
    """exp(slope of log TV_k against k) over k ≥ k_min with TV_k ≥ floor; NaN when fewer than 3 points."""
    k = np.arange(len(tv_worst))
    keep = (k >= k_min) & (tv_worst >= floor)
    if keep.sum() < 3:
        return float("nan"), int(keep.sum())
    slope = np.polyfit(k[keep], np.log(tv_worst[keep]), 1)[0]
    return float(np.exp(slope)), int(keep.sum())


# ---------------------------------------------------------------------------------------------- C1
def run_c1(cfg: Config) -> pd.DataFrame:
    """σ and SLEM of random feasible policies (convex combinations of random LP vertices) and of
    random μ-reversible chains P = D⁻¹W. One row per chain."""
    rows = []
    per = np.full(cfg.c1_mdps, cfg.c1_policies // cfg.c1_mdps)
    per[: cfg.c1_policies % cfg.c1_mdps] += 1
    for i in range(cfg.c1_mdps):
        rng = rng_for(cfg, 1, i)
        P, mu = instance(cfg, rng)
        V = np.array(lp_vertices(P, mu, cfg.c1_vertices, rng))
        for _ in range(per[i]):
            x = rng.dirichlet(np.ones(len(V))) @ V
            Ppi = induced_chain(P, policy_from_occupation(x, cfg.S, cfg.A))
            rows.append(dict(kind="random feasible policy", mdp=i, sigma=surrogate(Ppi, mu), slem=slem(Ppi),
                             stat_err=_stat_err(Ppi, mu), rev_defect=reversibility_defect(Ppi, mu),
                             n_vertices=len(V)))
    rng = rng_for(cfg, 11)
    for j in range(cfg.c1_policies):
        Ppi, mu = reversible_chain(cfg.S, rng)
        rows.append(dict(kind="reversible chain", mdp=-1, sigma=surrogate(Ppi, mu), slem=slem(Ppi, mu),
                         stat_err=_stat_err(Ppi, mu), rev_defect=reversibility_defect(Ppi, mu), n_vertices=0))
    df = pd.DataFrame(rows)
    df["sigma_minus_slem"] = df.sigma - df.slem
    return df


# ---------------------------------------------------------------------------------------------- C2–C4
def _evaluate(P: np.ndarray, mu: np.ndarray, pi: np.ndarray, cfg: Config) -> tuple[dict, dict]:
    """Rates, curves and the χ² bound check of one feasible policy."""
    Ppi = induced_chain(P, pi)
    sig, lam = surrogate(Ppi, mu), slem(Ppi)
    tv = tv_curve(Ppi, mu, cfg.horizon).max(axis=1)
    chi = chi2_curve(Ppi, mu, cfg.horizon)
    k = np.arange(cfg.horizon + 1)[:, None]
    bound_excess = float((chi - sig ** (2 * k) * chi[0][None, :])[1:].max())   # ≤ 0 when the bound holds
    # The same check with the SLEM in place of σ (a rate the χ² bound does not promise): a positive excess shows
    # that C4(a)'s check can fail, i.e. that it has the power to catch a too-small certificate (control K6).
    excess_at_slem = float((chi - lam ** (2 * k) * chi[0][None, :])[1:].max())
    # The rate is fitted on the distance to the chain's *own* stationary law: a solver returns μ only up to its
    # tolerance (‖μᵀP_π − μᵀ‖₁ ~ 1e-12 for interior-point solutions, ~1e-9 after the search's clipping), and the TV
    # to the target then levels off at that floor instead of decaying at the chain's rate.
    tv_own = tv_curve(Ppi, stationary(Ppi), cfg.horizon).max(axis=1)
    rate, npts = fitted_rate(tv_own, cfg.fit_k_min)
    row = dict(sigma=sig, slem=lam, stat_err=_stat_err(Ppi, mu), tv_at_k=float(tv[cfg.tv_k]),
               chi2_bound_excess=bound_excess, chi2_excess_at_slem=excess_at_slem, tv_rate=rate, tv_points=npts,
               kappa=eigen_condition(Ppi))
    return row, dict(tv=tv, chi2=chi.max(axis=1), sigma=sig, slem=lam)


def run_c2(cfg: Config) -> tuple[pd.DataFrame, dict]:
    """Every method on ``cfg.n_mdps_count`` random MDPs, the direct SLEM search on the first ``cfg.n_mdps`` of
    them. Returns (rows per MDP × method, curves[(mdp, method)]); :func:`searched` keeps the searched MDPs."""
    rows, curves = [], {}
    for i in range(cfg.n_mdps_count):
        rng = rng_for(cfg, 2, i)
        P, mu = instance(cfg, rng)
        res = {
            "LP vertex": steady_state_lp(P, mu, "vertex"),
            "max-entropy": steady_state_lp(P, mu, "maxent", solver=cfg.solver),
            "FMSS": fmss_convex(P, mu, eps_pi=cfg.eps_pi, solver=cfg.solver),
        }
        if cfg.eps_pi_ablation > 0:
            res["FMSS ε_π"] = fmss_convex(P, mu, eps_pi=cfg.eps_pi_ablation, solver=cfg.solver)
        fm = res["FMSS"]
        fm.require()
        for name, r in res.items():
            row, cur = _evaluate(P, mu, r.require(), cfg)
            rows.append(dict(mdp=i, method=name, status=r.status, value=r.value, solve_s=r.solve_s, **row))
            curves[(i, name)] = cur
        if i >= cfg.n_mdps:
            continue
        x_f = occupation(fm.pi, mu)
        starts = [x_f]
        for _ in range(cfg.n_restarts - 1):
            v = steady_state_lp(P, mu, "vertex", c=rng.standard_normal(cfg.S * cfg.A))
            starts.append(0.5 * (x_f + np.clip(v.x, 0, None)))
        search = fmss_nonconvex(P, mu, starts, cfg.maxfev, max_rounds=cfg.search_rounds)
        row, cur = _evaluate(P, mu, search.pi, cfg)
        rows.append(dict(mdp=i, method="SLEM search", status="best found", value=search.slem, solve_s=float("nan"),
                         **row, search_start_fmss=search.start_slems[0], search_best_start=int(np.argmin(search.final_slems)),
                         search_converged=int(sum(search.converged)), search_starts=len(search.converged),
                         search_rounds=int(sum(search.rounds))))
        curves[(i, "SLEM search")] = cur
    return pd.DataFrame(rows), curves


def searched(c2: pd.DataFrame) -> pd.DataFrame:
    """The rows of the MDPs on which the direct SLEM search ran (C3, and the per-MDP bars)."""
    return c2[c2.mdp.isin(c2[c2.method == "SLEM search"].mdp)]


def median_ci(v: np.ndarray, seed: int = 0, n_boot: int = 2000) -> tuple[float, float]:
    """Percentile-bootstrap 95 % interval of the median of ``v`` (resampling MDPs)."""
    v = np.asarray(v, float)
    rng = np.random.default_rng(seed)
    med = np.median(v[rng.integers(0, len(v), (n_boot, len(v)))], axis=1)
    return float(np.quantile(med, 0.025)), float(np.quantile(med, 0.975))


# ---------------------------------------------------------------------------------------------- C5
def run_scaling(cfg: Config) -> pd.DataFrame:
    """CPU time and wall time (build + solve) of FMSS against S, for Clarabel and SCS on the same instances.

    C5 is decided on CPU seconds of this process: the solvers run single-threaded here, so that is the time of a
    solve on an idle core, while wall time on a shared machine also counts whatever else runs beside it."""
    rows = []
    plan = [("CLARABEL", S, {}) for S in cfg.scaling_S_clarabel]
    plan += [("SCS", S, dict(eps_abs=cfg.scs_eps, eps_rel=cfg.scs_eps)) for S in cfg.scaling_S_scs]
    for solver, S, opts in plan:
        P, mu = instance(cfg, rng_for(cfg, 5, S), S=S)
        r = fmss_convex(P, mu, solver=solver, solver_opts=opts)
        stat = _stat_err(induced_chain(P, r.pi), mu) if r.ok else float("nan")
        rows.append(dict(solver=solver, S=S, status=r.status, value=r.value, cpu_s=r.cpu_s, wall_s=r.solve_s,
                         solver_s=r.solver_s, stat_err=stat))
    df = pd.DataFrame(rows)
    ref = df[df.solver == "CLARABEL"].set_index("S").value
    df["value_minus_clarabel"] = [v - ref.get(S, np.nan) if s == "SCS" else 0.0
                                  for s, S, v in zip(df.solver, df.S, df.value)]
    return df


# ---------------------------------------------------------------------------------------------- C6
SV_REGIMES = ("interior", "boundary")
#   interior: the card's target, the stationary law of a random policy (an interior point of the achievable set);
#   boundary: the steady state maximising cᵀμ for a random c (mdp.boundary_target), on the achievable set's boundary,
#   added because an interior μ stays achievable under P̂ in every draw (ε̂ = 0: min-slack = plug-in).


def run_sv(cfg: Config) -> pd.DataFrame:
    """FMSS-SV on ``cfg.sv_seeds`` instances × ``cfg.sv_n_list`` sample sizes × two target regimes (interior,
    boundary: :data:`SV_REGIMES`), in three modes, evaluated in the true MDP. One row per (regime, seed, n, mode).

    Both regimes of a seed share the MDP and the samples P̂ (common random numbers). ``model_err`` is
    max_{s,a} ‖P̂(·|s,a) − P(·|s,a)‖₁, the estimation error the learner faces."""
    rows = []
    for j in range(cfg.sv_seeds):
        P, mu_int = instance(cfg, rng_for(cfg, 6, j))
        mu_bnd, _ = boundary_target(P, rng_for(cfg, 6, j, 1))
        hats = {n: sample_kernel(P, n, rng_for(cfg, 6, j, n)) for n in cfg.sv_n_list}
        for regime, mu in zip(SV_REGIMES, (mu_int, mu_bnd)):
            star = fmss_convex(P, mu, solver=cfg.solver)
            star.require()
            x_star = occupation(star.pi, mu)
            for n, P_hat in hats.items():
                T_hat = constraint_matrices(P_hat)[1]
                eps_n = theory_slack(cfg.S, cfg.A, n, cfg.c_eps, cfg.delta)
                covered = bool(np.abs(T_hat @ x_star - mu).sum() <= eps_n)
                model_err = float(np.abs(P_hat - P).sum(axis=2).max())
                for mode in ("min_slack", "theory", "plugin"):
                    r, slack = fmss_sv(P_hat, mu, n, mode, cfg.c_eps, cfg.delta, solver=cfg.solver)
                    row = dict(regime=regime, seed=j, n=n, mode=mode, status=r.status, slack=slack,
                               sigma_star=star.value, star_status=star.status, sigma_hat=r.value, covered=covered,
                               eps_n=eps_n, model_err=model_err)
                    if r.ok:
                        Ppi = induced_chain(P, r.pi)
                        row.update(mu_err=float(np.abs(stationary(Ppi) - mu).sum()),
                                   value_gap=abs(r.value - star.value), slem=slem(Ppi))
                    rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------- C7
def unachievable_target(P: np.ndarray, mu: np.ndarray) -> tuple[np.ndarray, int]:
    """Move mass onto the state s whose largest inflow probability m = max_{s',a} P(s|s',a) is smallest,
    until μ(s) = (1 + m)/2 > m; the rest keeps its proportions. No policy can sustain it (card, C7)."""
    inflow = max_inflow(P)
    s = int(np.argmin(inflow))
    target = 0.5 * (1.0 + inflow[s])
    out = mu * (1.0 - target) / (1.0 - mu[s])
    out[s] = target
    return out / out.sum(), s


def run_c7(cfg: Config) -> pd.DataFrame:
    """FMSS and the steady-state LP on three targets per C2 MDP: μ_{π₀} (achievable), the mixture
    ½(μ_{π₀} + μ_{π₀'}) (achievable by convexity) and the unachievable inflow-violating target.

    Every target comes with a solver-free certificate (control K11): an occupation measure x that achieves it
    (``witness_residual`` = ‖Ex − μ‖₁ + ‖Tx − μ‖₁, with x ≥ 0) for the achievable ones, and the margin
    μ(s) − max_{s',a} P(s|s',a) > 0 by which the unachievable one breaks the inflow bound."""
    rows = []
    for i in range(cfg.n_mdps):
        rng = rng_for(cfg, 2, i)
        P = random_ergodic_mdp(cfg.S, cfg.A, cfg.support_k, cfg.eps_mix, rng)
        mu, x_mu = random_target(P, rng, certificate=True)   # the same draws as run_c2 (same generator and order)
        mixed, x_mixed = random_target(P, rng_for(cfg, 7, i), mixed=True, certificate=True)
        bad, s = unachievable_target(P, mu)
        E, T = constraint_matrices(P)
        for kind, target, achievable, x in (("μ of a random policy", mu, True, x_mu),
                                            ("mixture of two", mixed, True, x_mixed),
                                            ("inflow-violating", bad, False, None)):
            r = fmss_convex(P, target, eps_pi=cfg.eps_pi, solver=cfg.solver)
            lp = steady_state_lp(P, target, "vertex")
            resid = (float(np.abs(E @ x - target).sum() + np.abs(T @ x - target).sum()) if x is not None
                     else float("nan"))
            rows.append(dict(mdp=i, target=kind, achievable=achievable, fmss_status=r.status,
                             lp_status=lp.status, policy_returned=r.pi is not None, message=r.message,
                             witness_residual=resid, inflow_margin=float(np.max(target - max_inflow(P)))))
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------- narrative
def run_gridworld(cfg: Config, T: int | None = None) -> dict:
    """The thermostat: target = stationary law of a controller biased to the top-right corner; FMSS and the
    LP vertex both hit it, from the bottom-left corner, at different speeds. Returns laws μ_t per method."""
    n = cfg.grid_n
    P = gridworld(n, cfg.slip)
    mu = stationary(induced_chain(P, biased_grid_policy(n, (0, n - 1))))
    T = T or max(cfg.horizon, 20)
    start = np.zeros(n * n)
    start[(n - 1) * n] = 1.0
    out = dict(n=n, mu=mu, T=T, methods={})
    for name, r in (("LP vertex", steady_state_lp(P, mu, "vertex")), ("FMSS", fmss_convex(P, mu, solver=cfg.solver))):
        Ppi = induced_chain(P, r.require())
        laws = [start]
        for _ in range(T):
            laws.append(laws[-1] @ Ppi)
        laws = np.array(laws)
        out["methods"][name] = dict(laws=laws, tv=0.5 * np.abs(laws - mu).sum(axis=1), sigma=surrogate(Ppi, mu),
                                    slem=slem(Ppi), pi=r.pi)
    return out


def run_fmmc_check(cfg: Config, path_sizes: tuple[int, ...] = (4, 5, 7), n_random: int = 8) -> pd.DataFrame:
    """FMSS on the free-move graph MDP with uniform μ against Boyd–Diaconis–Xiao's FMMC SDP and, on paths,
    the closed form cos(π/n)."""
    graphs = [(f"path, n={m}", path_graph(m), float(np.cos(np.pi / m))) for m in path_sizes]
    rng = rng_for(cfg, 8)
    while True:                                    # a connected random graph (resample until connected)
        adj = np.triu(rng.random((n_random, n_random)) < 0.35, 1)
        adj = adj | adj.T
        reach = np.linalg.matrix_power(np.eye(n_random) + adj, n_random) > 0
        if reach.all():
            break
    graphs.append((f"random graph, n={n_random}, {int(adj.sum() // 2)} edges", adj, float("nan")))
    rows = []
    for name, adj, closed in graphs:
        m = len(adj)
        P, mu = graph_mdp(adj), np.full(m, 1.0 / m)
        free, sym = fmss_convex(P, mu, solver=cfg.solver), fmss_convex(P, mu, symmetric=True, solver=cfg.solver)
        rows.append(dict(graph=name, closed_form=closed, fmmc_sdp=fmmc_sdp(adj, cfg.solver)[1], fmss=free.value,
                         fmss_symmetric=sym.value, slem_of_fmss=slem(induced_chain(P, free.require()))))
    return pd.DataFrame(rows)


def run_search_check(cfg: Config, path_sizes: tuple[int, ...] = (4, 5, 7)) -> pd.DataFrame:
    """Can the direct SLEM search find an optimum it was not started at? (control K4)

    On the free-move path MDP with uniform μ every feasible chain is reversible (on a tree, stationarity forces
    detailed balance), so SLEM = σ and the global SLEM optimum is the FMMC value cos(π/n). The search runs with the
    chapter's settings (``cfg.maxfev`` per round, at most ``cfg.search_rounds`` rounds, stopping on its tolerance)
    from the max-entropy policy, which is not optimal."""
    rows = []
    for m in path_sizes:
        P, mu = graph_mdp(path_graph(m)), np.full(m, 1.0 / m)
        start = steady_state_lp(P, mu, "maxent", solver=cfg.solver)
        res = fmss_nonconvex(P, mu, [occupation(start.require(), mu)], cfg.maxfev, max_rounds=cfg.search_rounds)
        optimum = float(np.cos(np.pi / m))
        rows.append(dict(graph=f"path, n={m}", optimum=optimum, start_slem=res.start_slems[0], found=res.slem,
                         start_gap=res.start_slems[0] - optimum, final_gap=res.slem - optimum, nfev=res.nfev,
                         converged=res.all_converged, rounds=res.rounds[0]))
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------- summaries
def _ci(v) -> str:
    from repro.common import mean_ci

    m, h = mean_ci(np.asarray(v, float))
    return f"{float(m):.3f} ± {float(h):.3f}"


def method_table(c2: pd.DataFrame) -> pd.DataFrame:
    """Mean ± 95% CI over MDPs of SLEM, σ and TV at k per method, and on how many MDPs each beats FMSS's SLEM."""
    fm = c2[c2.method == "FMSS"].set_index("mdp").slem
    rows = []
    for m in [m for m in METHODS if m in set(c2.method)]:
        d = c2[c2.method == m].set_index("mdp")
        rows.append({"method": m, "MDPs": len(d), "SLEM (mean ± 95% CI)": _ci(d.slem), "σ (mean ± 95% CI)": _ci(d.sigma),
                     "median SLEM": round(float(d.slem.median()), 4),
                     "MDPs with SLEM below FMSS's": int((d.slem < fm.loc[d.index] - 1e-12).sum()),
                     "worst-start TV at k (median)": float(d.tv_at_k.median())})
    return pd.DataFrame(rows).set_index("method")


def summarise_c1(c1: pd.DataFrame) -> dict:
    f, r = c1[c1.kind == "random feasible policy"], c1[c1.kind == "reversible chain"]
    return {"feasible policies": len(f), "MDPs": int(f.mdp.nunique()),
            "min σ − SLEM (feasible)": float(f.sigma_minus_slem.min()),
            "median σ − SLEM (feasible)": float(f.sigma_minus_slem.median()),
            "max stationarity error (feasible)": float(f.stat_err.max()),
            "reversible chains": len(r), "max |σ − SLEM| (reversible)": float(r.sigma_minus_slem.abs().max())}


def summarise_c2(c2: pd.DataFrame) -> dict:
    piv = c2.pivot(index="mdp", columns="method", values="slem")
    sig = c2.pivot(index="mdp", columns="method", values="sigma")
    others = [m for m in ("LP vertex", "max-entropy", "SLEM search") if m in sig]
    n = len(piv)
    below_lp, below_me = int((piv["FMSS"] < piv["LP vertex"]).sum()), int((piv["FMSS"] < piv["max-entropy"]).sum())
    red_lp = ((piv["LP vertex"] - piv["FMSS"]) / piv["LP vertex"]).to_numpy()
    return {"MDPs": n,
            "FMSS below LP vertex": below_lp,
            "median reduction vs LP vertex": float(np.median(red_lp)),
            "median reduction vs LP vertex 95% CI": list(median_ci(red_lp)),
            "FMSS below max-entropy": below_me,
            "median reduction vs max-entropy": float(np.median((piv["max-entropy"] - piv["FMSS"]) / piv["max-entropy"])),
            # an MDP without the search (beyond the first n_mdps) compares with the two LP policies only
            "FMSS has the smallest σ (sanity)": int((sig["FMSS"].to_numpy()[:, None]
                                                     <= sig[others].fillna(np.inf).to_numpy() + 1e-7).all(axis=1).sum()),
            "median σ − SLEM of FMSS": float(np.median(sig["FMSS"] - piv["FMSS"])),
            "MDPs where max-entropy's σ is above FMSS's": int((sig["max-entropy"] > sig["FMSS"]).sum()),
            # paired over MDPs (information; the card's claims are counts): mean difference, 95% CI, word
            "mean SLEM(LP vertex) − SLEM(FMSS) [95% CI]": _paired(piv["FMSS"], piv["LP vertex"]),
            "mean SLEM(max-entropy) − SLEM(FMSS) [95% CI]": _paired(piv["FMSS"], piv["max-entropy"])}


def _paired(fmss: pd.Series, other: pd.Series) -> str:
    """``"0.0631 [0.0318, 0.0944]: FMSS better"``: mean per-MDP SLEM reduction of FMSS against ``other`` with its
    95% CI (lower SLEM is better) and the word of :func:`repro.common.compare_paired`."""
    from repro.common import compare_paired, ci_text

    c = compare_paired(fmss.to_numpy(), other.to_numpy(), higher_is_better=False)
    return f"{ci_text(c.mean_diff, c.ci_lo, c.ci_hi)}: FMSS {c.word}"


def summarise_c3(c2: pd.DataFrame) -> dict:
    c2 = searched(c2)
    piv = c2.pivot(index="mdp", columns="method", values="slem")
    gap = (piv["FMSS"] - piv["SLEM search"]).to_numpy()
    best = c2[c2.method == "SLEM search"].search_best_start
    sig = c2.pivot(index="mdp", columns="method", values="sigma")
    return {"median gap": float(np.median(gap)), "gap quartiles": np.quantile(gap, [0.25, 0.75]).tolist(),
            "gap range": [float(gap.min()), float(gap.max())], "MDPs with gap ≤ 0.05": int((gap <= 0.05).sum()),
            "MDPs": len(gap), "best start was FMSS's": int((best == 0).sum()),
            "MDPs where the search's σ is above FMSS's": int((sig["SLEM search"] > sig["FMSS"]).sum())}


def c4_exceptions(c2: pd.DataFrame, tol: float = 0.05) -> pd.DataFrame:
    """Policies whose fitted TV rate misses the SLEM by more than ``tol`` (or cannot be fitted), with the flag
    that would explain them: near-defective top eigenvalue (κ ≥ KAPPA_DEFECTIVE) or < 3 points above the floor."""
    d = c2.assign(rate_minus_slem=c2.tv_rate - c2.slem)
    bad = d[~(d.rate_minus_slem.abs() <= tol)].copy()
    bad["explained"] = np.where(bad.tv_points < 3, "too fast to fit (< 3 points above 1e-13)",
                                np.where(bad.kappa >= KAPPA_DEFECTIVE, f"near-defective (κ ≥ {KAPPA_DEFECTIVE:g})", ""))
    return bad[["mdp", "method", "slem", "tv_rate", "rate_minus_slem", "tv_points", "kappa", "explained"]]


def summarise_c4(c2: pd.DataFrame) -> dict:
    piv = c2.pivot(index="mdp", columns="method", values="tv_at_k")
    exc = c4_exceptions(c2)
    below = int((piv["FMSS"] < piv["LP vertex"]).sum())
    return {"policies": len(c2), "max χ² excess over the bound": float(c2.chi2_bound_excess.max()),
            "FMSS TV below LP vertex": below, "MDPs": len(piv),
            "median TV ratio FMSS/LP vertex": float(np.median(piv["FMSS"] / piv["LP vertex"])),
            "max |rate − SLEM|": float((c2.tv_rate - c2.slem).abs().max()),
            "rate exceptions": len(exc), "unexplained exceptions": int((exc.explained == "").sum()),
            # the scope of the exemption: a policy with κ ≥ KAPPA_DEFECTIVE would be excused if it missed (the SLEM
            # search's minimisers coalesce eigenvalues, so nearly all of them are near-defective)
            "near-defective policies by method": {m: f"{int(g.sum())}/{len(g)}" for m, g in
                                                  (c2.kappa >= KAPPA_DEFECTIVE).groupby(c2.method)},
            "exception list": [f"MDP {r.mdp} {r.method}: SLEM {r.slem:.3f}, rate {r.tv_rate:.3f}, κ {r.kappa:.3g}"
                               for r in exc.itertuples()]}


def summarise_c5(sc: pd.DataFrame) -> dict:
    from repro.common import loglog_slope

    out = {}
    for solver, d in sc.groupby("solver"):
        d = d.sort_values("S")
        out[f"{solver} S max"] = int(d.S.iloc[-1])
        out[f"{solver} CPU s at S max"] = float(d.cpu_s.iloc[-1])
        out[f"{solver} wall s at S max"] = float(d.wall_s.iloc[-1])
        out[f"{solver} log–log slope"] = float(loglog_slope(d.S, d.cpu_s)) if len(d) >= 2 else float("nan")
    scs = sc[(sc.solver == "SCS") & sc.value_minus_clarabel.notna()]
    if len(scs):
        out["SCS max |value − Clarabel|"] = float(scs.value_minus_clarabel.abs().max())
    if (sc.solver == "SCS").any():
        out["SCS max stationarity error"] = float(sc[sc.solver == "SCS"].stat_err.max())
    out["Clarabel max stationarity error"] = float(sc[sc.solver == "CLARABEL"].stat_err.max())
    return out


def summarise_c6(sv: pd.DataFrame, mode: str, slope_min_n: int, rng: np.random.Generator | int = 0,
                 regime: str = "interior") -> dict:
    """C6's numbers in one target regime (:data:`SV_REGIMES`): slopes of the learned policy's stationarity error
    and of the optimal-value error against n (fitted on the mean over seeds, n ≥ ``slope_min_n``, with a bootstrap
    over seeds), the theory slack's coverage of x*, and how often min-slack's phase 1 found ε̂ > 0."""
    from repro.common import bootstrap_ci, loglog_slope

    def slope_of(d: pd.DataFrame, col: str) -> tuple[float, list[float] | None]:
        piv = d.pivot(index="seed", columns="n", values=col)
        piv = piv.loc[:, piv.columns >= slope_min_n]
        if piv.shape[1] < 2 or piv.isna().any().any():
            return float("nan"), None
        ns = piv.columns.to_numpy()
        s = loglog_slope(ns, piv.mean(axis=0).to_numpy())
        ci = None
        if len(piv) >= 2:
            ci = list(bootstrap_ci(piv.to_numpy(), lambda a: loglog_slope(ns, a.mean(axis=0)), n_boot=1000, rng=rng))
        return s, ci

    sv = sv[sv["regime"] == regime] if "regime" in sv else sv
    main, theory, plug = sv[sv["mode"] == mode], sv[sv["mode"] == "theory"], sv[sv["mode"] == "plugin"]
    s_mu, ci_mu = slope_of(main, "mu_err")
    s_gap, ci_gap = slope_of(main, "value_gap")
    s_th, _ = slope_of(theory, "mu_err")
    n_fit = int((np.asarray(sorted(sv.n.unique())) >= slope_min_n).sum())
    mins = sv[sv["mode"] == "min_slack"]
    return {"regime": regime, "mode": mode, "sizes in the fit": n_fit, "seeds": int(sv.seed.nunique()),
            "slope ‖μ_π̂ − μ‖₁": s_mu, "slope CI (bootstrap over seeds)": ci_mu,
            "slope |σ̂ − σ*|": s_gap, "slope |σ̂ − σ*| CI": ci_gap,
            "theory-slack coverage of x*": float(theory.covered.mean()), "draws": len(theory),
            "theory-slack slope ‖μ_π̂ − μ‖₁": s_th,
            "theory-slack mean ‖μ_π̂ − μ‖₁ at largest n": float(theory[theory.n == theory.n.max()].mu_err.mean()),
            "min-slack draws with ε̂ > 0": int((mins.slack > 0).sum()), "min-slack draws": len(mins),
            "plug-in infeasible draws": int((plug.status == "infeasible").sum())}


def summarise_c7(c7: pd.DataFrame) -> dict:
    bad, good = c7[~c7.achievable], c7[c7.achievable]
    return {"unachievable targets": len(bad), "reported infeasible": int((bad.fmss_status == "infeasible").sum()),
            "policies returned for them": int(bad.policy_returned.sum()), "achievable targets": len(good),
            "achievable reported infeasible": int((good.fmss_status == "infeasible").sum()),
            "achievable solved": int(good.fmss_status.isin(["optimal", "optimal_inaccurate"]).sum()),
            "LP agrees": bool(((c7.lp_status == "infeasible") == (c7.fmss_status == "infeasible")).all())}


# ---------------------------------------------------------------------------------------------- control numbers
# What each control (repro.fmss.verdicts.CONTROLS) is decided on, measured from the experiments' tables.
def _frac(mask) -> float:
    mask = np.asarray(mask, bool)
    return float(mask.mean()) if mask.size else float("nan")


def numbers_k1(c2: pd.DataFrame) -> dict:
    """The FMSS solves of the comparison: solver status, stationarity of the returned policy's chain, cvxpy's
    value against numpy's σ of the returned policy, and whether FMSS's σ is the smallest among the feasible
    policies evaluated on each MDP (the program's optimality, seen from outside the solver)."""
    fm = c2[c2.method.isin(["FMSS", "FMSS ε_π"])]
    sig = c2.pivot(index="mdp", columns="method", values="sigma")
    others = [m for m in ("LP vertex", "max-entropy", "SLEM search") if m in sig]
    excess = (sig["FMSS"].to_numpy()[:, None] - sig[others].fillna(np.inf).to_numpy()).max(axis=1)   # > 0: another σ is smaller
    return {"FMSS solves": len(fm), "solves with status optimal": int((fm.status == "optimal").sum()),
            "max ‖μᵀP_π − μᵀ‖₁": float(fm.stat_err.max()),
            "max |cvxpy value − σ(returned π)|": float((fm.value - fm.sigma).abs().max()),
            "MDPs": len(sig), "MDPs where FMSS has the smallest σ": int((excess <= SIGMA_ORDER_TOL).sum()),
            "max σ(FMSS) − min σ(others)": float(excess.max())}


SIGMA_ORDER_TOL = 1e-7   # K1: FMSS's σ may exceed another feasible policy's by at most the solver's tolerance


def numbers_k2(fm: pd.DataFrame) -> dict:
    """The FMMC reduction (:func:`run_fmmc_check`): FMSS against the closed form cos(π/n), the FMMC SDP, the
    symmetric program and the SLEM of its own chain (σ = SLEM on these reversible chains)."""
    paths = fm[fm.closed_form.notna()]
    return {"graphs": len(fm), "max |FMSS − cos(π/n)| (paths)": float((paths.fmss - paths.closed_form).abs().max()),
            "max |FMSS − FMMC SDP|": float((fm.fmss - fm.fmmc_sdp).abs().max()),
            "max |FMSS − FMSS symmetric|": float((fm.fmss - fm.fmss_symmetric).abs().max()),
            "max |σ − SLEM| of FMSS's chain": float((fm.fmss - fm.slem_of_fmss).abs().max())}


def numbers_k3(c1: pd.DataFrame) -> dict:
    """Is C1's test exercised? Feasible policies must be μ-stationary (else σ ≥ SLEM need not hold) and mostly
    non-reversible (else the inequality is only tested at equality); reversible chains must be reversible and
    ergodic (a reducible chain has SLEM = σ = 1, an equality that tests nothing)."""
    f, r = c1[c1.kind == "random feasible policy"], c1[c1.kind == "reversible chain"]
    return {"max stationarity error (feasible)": float(f.stat_err.max()),
            "median σ − SLEM (feasible)": float(f.sigma_minus_slem.median()),
            "fewest LP vertices mixed on an MDP": int(f.n_vertices.min()),
            "max reversibility defect (reversible)": float(r.rev_defect.max()),
            "max SLEM (reversible)": float(r.slem.max()), "min SLEM (reversible)": float(r.slem.min())}


def numbers_k4(search: pd.DataFrame, c2: pd.DataFrame) -> dict:
    """Can the direct search resolve gaps at C3's scale? Its result on the path MDPs (known optimum, started
    elsewhere: :func:`run_search_check`), and, in the comparison, feasibility of its policies and that it never
    ends above its FMSS start."""
    c2 = searched(c2)
    se = c2[c2.method == "SLEM search"]
    piv = c2.pivot(index="mdp", columns="method", values="slem")
    return {"paths": len(search), "max gap to cos(π/n) found": float(search.final_gap.max()),
            "max gap to cos(π/n) at the start": float(search.start_gap.max()),
            "paths where the search stopped on its tolerance": int(search.converged.sum()),
            "max ‖μᵀP_π − μᵀ‖₁ of search policies": float(se.stat_err.max()),
            "min SLEM(FMSS) − SLEM(search)": float((piv["FMSS"] - piv["SLEM search"]).min())}


def numbers_k5(c2: pd.DataFrame, spread: float = 0.05) -> dict:
    """Is there room to optimise? Per searched MDP, the range of the SLEMs of the feasible policies evaluated, the
    search's best found included (without it, the range of an MDP understates the room)."""
    c2 = searched(c2)
    piv = c2.pivot(index="mdp", columns="method", values="slem")
    cols = [m for m in ("LP vertex", "max-entropy", "FMSS", "SLEM search") if m in piv]
    rng = (piv[cols].max(axis=1) - piv[cols].min(axis=1)).to_numpy()
    return {"MDPs": len(rng), f"MDPs with SLEM range ≥ {spread:g}": int((rng >= spread).sum()),
            "median SLEM range": float(np.median(rng)), "min SLEM range": float(rng.min())}


def numbers_k6(c2: pd.DataFrame, tol: float = 1e-12) -> dict:
    """Can C4(a)'s check fail? The same χ² check run with the SLEM in place of σ: how many policies violate it."""
    return {"policies": len(c2), "violating the check with SLEM in place of σ": int((c2.chi2_excess_at_slem > tol)
                                                                                   .sum()),
            "fraction violating": _frac(c2.chi2_excess_at_slem > tol),
            "max excess with SLEM": float(c2.chi2_excess_at_slem.max())}


def numbers_k7(c2: pd.DataFrame) -> dict:
    """Is C4(b)'s comparison above the numerical floor? Worst-start TV at k of FMSS and the LP vertex against
    the stationarity error of their chains (the level at which TV to the target stops decaying)."""
    d = c2[c2.method.isin(["FMSS", "LP vertex"])]
    return {"min TV at k (FMSS, LP vertex)": float(d.tv_at_k.min()),
            "max ‖μᵀP_π − μᵀ‖₁ (FMSS, LP vertex)": float(d.stat_err.max()),
            "ratio": float(d.tv_at_k.min() / max(d.stat_err.max(), 1e-300))}


def numbers_k8(c2: pd.DataFrame, tol: float = 0.05, min_points: int = 5) -> dict:
    """Is C4(c)'s rate check exercised? Enough TV points above the floor in the window, and power: the fitted
    rates miss σ (a rate the chain does not decay at) by more than ``tol`` for most policies."""
    return {"policies": len(c2), f"fraction with ≥ {min_points} fit points": _frac(c2.tv_points >= min_points),
            f"fraction with |rate − σ| > {tol:g}": _frac((c2.tv_rate - c2.sigma).abs() > tol),
            "fewest fit points": int(c2.tv_points.min())}


def numbers_k9(sc: pd.DataFrame) -> dict:
    """Are the timed solves real solves? Status, stationarity, and SCS's value against Clarabel's."""
    cl, scs = sc[sc.solver == "CLARABEL"], sc[sc.solver == "SCS"]
    both = scs[scs.value_minus_clarabel.notna()]
    return {"solves": len(sc), "solves with status optimal": int((sc.status == "optimal").sum()),
            "Clarabel max stationarity error": float(cl.stat_err.max()) if len(cl) else float("nan"),
            "SCS max stationarity error": float(scs.stat_err.max()) if len(scs) else float("nan"),
            "SCS max |value − Clarabel|": float(both.value_minus_clarabel.abs().max()) if len(both) else float("nan"),
            "SCS solves": len(scs)}


def numbers_k10(sv: pd.DataFrame, slope_min_n: int) -> dict:
    """Is C6's estimation regime exercised? The sampler's model error must fall at the multinomial n^{−½} law;
    min-slack's phase 1 must find ε̂ > 0 (μ not achievable under P̂) in the boundary regime at every n of the fit;
    every σ* and every min-slack solve must return a policy."""
    from repro.common import loglog_slope

    me = sv.groupby("n").model_err.mean()
    mins = sv[sv["mode"] == "min_slack"]
    bnd = mins[(mins.regime == "boundary") & (mins.n >= slope_min_n)] if "regime" in mins else mins.iloc[:0]
    pos = bnd.groupby("n").slack.apply(lambda s: float((s > 0).mean())) if len(bnd) else pd.Series(dtype=float)
    intr = mins[mins.regime == "interior"] if "regime" in mins else mins
    stars = sv.drop_duplicates(["regime", "seed"]) if "regime" in sv else sv.drop_duplicates(["seed"])
    return {"model-error slope": float(loglog_slope(me.index.to_numpy(), me.to_numpy())) if len(me) >= 2
            else float("nan"),
            "min over fitted n of boundary draws with ε̂ > 0": float(pos.min()) if len(pos) else float("nan"),
            "interior draws with ε̂ > 0": int((intr.slack > 0).sum()), "interior draws": len(intr),
            "min-slack solves": len(mins),
            "min-slack solves with a policy": int(mins.status.isin(["optimal", "optimal_inaccurate"]).sum()),
            "min-slack solves at reduced accuracy": int((mins.status == "optimal_inaccurate").sum()),
            "σ* solves": len(stars), "σ* solves optimal": int((stars.star_status == "optimal").sum())}


def numbers_k11(c7: pd.DataFrame) -> dict:
    """Are C7's targets what they are said to be, independently of any solver? A witness occupation measure for
    every achievable target, a positive inflow-bound violation for every unachievable one."""
    good, bad = c7[c7.achievable], c7[~c7.achievable]
    return {"achievable targets": len(good), "max witness residual": float(good.witness_residual.max()),
            "unachievable targets": len(bad), "min inflow-bound violation": float(bad.inflow_margin.min()),
            "max inflow-bound violation (achievable)": float(good.inflow_margin.max())}
