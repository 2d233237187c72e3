"""Chapter 04 (FMSS): config validation, chain invariants, the surrogate bound, the convex program against
independent references (numpy, the FMMC closed form on paths, Boyd–Diaconis–Xiao's SDP), FMSS-SV,
infeasibility and solver-status handling, determinism."""
from __future__ import annotations

import dataclasses

import cvxpy as cp
import numpy as np
import pytest

from repro.common import ConfigError
from repro.common import Ledger
from repro.fmss import (CLAIMS, CONTROLS, NEEDS, Config, boundary_target, reversibility_defect, InfeasibleTarget, chi2_curve, fmmc_sdp, fmss_convex, fmss_nonconvex, fmss_sv,
                        graph_mdp, gridworld, induced_chain, lp_vertices, max_inflow, occupation, path_graph,
                        random_ergodic_mdp, random_target, reversible_chain, sample_kernel, slem, stationary,
                        steady_state_lp, surrogate, surrogate_matrix, tv_curve)
from repro.fmss import experiments as ex
from repro.fmss import synth


@pytest.fixture(scope="module")
def inst():
    rng = np.random.default_rng(123)
    P = random_ergodic_mdp(7, 3, 3, 0.05, rng)
    return P, random_target(P, rng), rng


# ---------------------------------------------------------------------------------------------- config
def test_profiles_and_claims():
    full, smoke = Config.from_profile("full"), Config.from_profile("smoke")
    assert (full.n_mdps, full.S, full.A, full.maxfev) == (20, 12, 3, 3000)
    assert smoke.scaling_S_scs == () and smoke.sv_n_list == (30, 300)
    assert list(CLAIMS) == ["C1", "C2a", "C2b", "C3", "C4a", "C4b", "C4c", "C5", "C6", "C7"]
    assert list(CONTROLS) == [f"K{i}" for i in range(1, 12)]
    assert set(NEEDS) == set(CLAIMS) and {k for ks in NEEDS.values() for k in ks} == set(CONTROLS)


BAD = {
    "n_mdps": 0, "n_mdps_count": 0, "S": 2, "A": "3", "support_k": 0, "eps_mix": 0.0, "c1_mdps": 0, "c1_policies": -1,
    "c1_vertices": 1, "scaling_S_clarabel": [], "scaling_S_scs": [2], "scs_eps": 0.5, "sv_n_list": [30],
    "sv_seeds": 0, "sv_mode": "exact", "sv_slope_min_n": 0, "c_eps": 0.0, "delta": 1.0, "n_restarts": 0,
    "maxfev": 5, "search_rounds": 0, "solver": "ECOS", "eps_pi": 1.0, "eps_pi_ablation": -0.1, "horizon": 5, "tv_k": 0,
    "fit_k_min": -1, "grid_n": 1, "slip": 0.0, "seed": -1,
}


def test_every_field_has_a_bad_value_case():
    names = {f.name for f in dataclasses.fields(Config)} - {"profile"}
    assert names == set(BAD)


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_field_rejects_a_bad_value_with_one_line_naming_it(name):
    with pytest.raises(ConfigError) as err:
        Config.from_profile("full", **{name: BAD[name]}) if name != "seed" else Config.from_profile("full", seed=-1)
    msg = str(err.value)
    assert f"'{name}'" in msg and "\n" not in msg


@pytest.mark.parametrize("kwargs, name", [
    ({"support_k": 13}, "support_k"), ({"sv_n_list": [100, 30]}, "sv_n_list"),
    ({"scaling_S_clarabel": [10, 10]}, "scaling_S_clarabel"), ({"tv_k": 31}, "tv_k"),
    ({"fit_k_min": 30}, "fit_k_min"), ({"sv_slope_min_n": 20000}, "sv_slope_min_n"),
    ({"c1_policies": 5}, "c1_policies"), ({"scaling_S_scs": [3]}, "scaling_S_scs"), ({"n_mdps_count": 10}, "n_mdps_count"),
])
def test_cross_field_rules(kwargs, name):
    with pytest.raises(ConfigError, match=f"'{name}'"):
        Config.from_profile("full", **kwargs)


def test_unknown_profile_and_parameter():
    with pytest.raises(ConfigError, match="'profile'"):
        Config.from_profile("huge")
    with pytest.raises(ConfigError, match="unknown parameter 'gamma'"):
        Config.from_profile("full", gamma=0.9)


# ---------------------------------------------------------------------------------------------- chains
def test_chain_invariants(inst):
    P, mu, rng = inst
    assert np.allclose(P.sum(axis=2), 1) and P.min() > 0
    pi = rng.dirichlet(np.ones(3), size=7)
    Ppi = induced_chain(P, pi)
    assert np.allclose(Ppi.sum(axis=1), 1, atol=1e-14)
    m = stationary(Ppi)
    assert np.abs(m @ Ppi - m).max() < 1e-10 and abs(m.sum() - 1) < 1e-12
    assert np.allclose(gridworld(4, 0.1).sum(axis=2), 1)
    G = graph_mdp(path_graph(5))
    assert G.shape == (5, 3, 5) and np.allclose(G.sum(axis=2), 1)


def test_lp_policy_has_mu_stationary(inst):
    P, mu, _ = inst
    for mode in ("vertex", "maxent"):
        r = steady_state_lp(P, mu, mode)
        assert r.ok
        Ppi = induced_chain(P, r.pi)
        assert np.abs(mu @ Ppi - mu).max() < 1e-7
        assert np.abs(stationary(Ppi) - mu).max() < 1e-7


def test_surrogate_bounds_slem_and_is_tight_when_reversible(inst):
    P, mu, rng = inst
    V = np.array(lp_vertices(P, mu, 8, rng))
    for _ in range(20):
        pi = synth.policy_from_occupation(rng.dirichlet(np.ones(len(V))) @ V, 7, 3)
        Ppi = induced_chain(P, pi)
        assert surrogate(Ppi, mu) >= slem(Ppi) - 1e-8
    for _ in range(20):
        Pr, mr = reversible_chain(6, rng)
        assert np.abs(mr @ Pr - mr).max() < 1e-12
        assert abs(surrogate(Pr, mr) - slem(Pr, mr)) < 1e-8
        assert np.allclose(surrogate_matrix(Pr, mr), surrogate_matrix(Pr, mr).T)


def test_chi2_contraction(inst):
    P, mu, rng = inst
    r = fmss_convex(P, mu)
    Ppi = induced_chain(P, r.pi)
    sig = surrogate(Ppi, mu)
    d = 1 / np.sqrt(mu)
    for _ in range(50):
        nu = rng.dirichlet(np.ones(7) * 0.3)
        assert np.linalg.norm(d * (nu @ Ppi - mu)) <= sig * np.linalg.norm(d * (nu - mu)) + 1e-12
    chi = chi2_curve(Ppi, mu, 20)
    k = np.arange(21)[:, None]
    assert (chi - sig ** (2 * k) * chi[0]).max() <= 1e-12
    tv = tv_curve(Ppi, mu, 20)
    assert tv.shape == (21, 7) and np.all(np.diff(tv.max(axis=1)) <= 1e-12)  # worst-start TV never increases


# ---------------------------------------------------------------------------------------------- FMSS program
def test_fmss_value_matches_numpy_surrogate_and_is_stationary(inst):
    P, mu, _ = inst
    r = fmss_convex(P, mu)
    assert r.status == "optimal"
    Ppi = induced_chain(P, r.pi)
    assert abs(r.value - surrogate(Ppi, mu)) < 1e-5
    assert np.abs(mu @ Ppi - mu).max() < 1e-7
    # optimality against the feasible baselines (σ is what FMSS minimises)
    for mode in ("vertex", "maxent"):
        assert r.value <= surrogate(induced_chain(P, steady_state_lp(P, mu, mode).pi), mu) + 1e-6
    # the exploration constraint is respected and can only raise σ
    e = fmss_convex(P, mu, eps_pi=0.05)
    assert e.pi.min() >= 0.05 / 3 - 1e-7 and e.value >= r.value - 1e-7


@pytest.mark.parametrize("n", [4, 5, 7])
def test_fmmc_on_the_path_closed_form(n):
    Pm, val = fmmc_sdp(path_graph(n))
    assert abs(val - np.cos(np.pi / n)) < 1e-5
    assert np.allclose(np.diag(Pm, 1), 0.5, atol=1e-4)
    G, mu = graph_mdp(path_graph(n)), np.full(n, 1 / n)
    for sym in (False, True):
        r = fmss_convex(G, mu, symmetric=sym)
        assert abs(r.value - val) < 1e-5


def test_fmss_on_a_graph_equals_fmmc():
    rng = np.random.default_rng(5)
    n = 6
    adj = np.triu(rng.random((n, n)) < 0.5, 1)
    adj = adj | adj.T
    adj[np.arange(n - 1), np.arange(1, n)] = adj[np.arange(1, n), np.arange(n - 1)] = True  # connected
    _, val = fmmc_sdp(adj)
    G, mu = graph_mdp(adj), np.full(n, 1 / n)
    free, sym = fmss_convex(G, mu), fmss_convex(G, mu, symmetric=True)
    assert abs(free.value - val) < 1e-5 and abs(sym.value - val) < 1e-5
    assert abs(slem(induced_chain(G, sym.pi)) - val) < 1e-5     # reversible: σ = SLEM


def test_fmss_sv_with_the_true_model_equals_fmss(inst):
    P, mu, _ = inst
    ref = fmss_convex(P, mu)
    for mode in ("min_slack", "plugin"):
        r, slack = fmss_sv(P, mu, n=10**6, mode=mode)
        assert slack == 0.0 and abs(r.value - ref.value) < 1e-5


def test_sample_kernel(inst):
    P, _, rng = inst
    Ph = sample_kernel(P, 50, rng)
    assert np.allclose(Ph.sum(axis=2), 1) and np.allclose(Ph * 50, np.round(Ph * 50))


def test_nonconvex_search_improves_on_fmss_and_stays_feasible(inst):
    P, mu, rng = inst
    r = fmss_convex(P, mu)
    x = occupation(r.pi, mu)
    starts = [x] + [0.5 * (x + v) for v in lp_vertices(P, mu, 2, rng)]
    res = fmss_nonconvex(P, mu, starts, maxfev=300)
    Ppi = induced_chain(P, res.pi)
    assert res.slem <= slem(induced_chain(P, r.pi)) + 1e-9
    assert np.abs(mu @ Ppi - mu).max() < 1e-6


# ---------------------------------------------------------------------------------------------- feasibility
def test_unachievable_target_is_reported_infeasible_never_as_a_policy(inst):
    P, mu, _ = inst
    bad, s = ex.unachievable_target(P, mu)
    assert abs(bad.sum() - 1) < 1e-12 and bad[s] > max_inflow(P)[s]
    r = fmss_convex(P, bad)
    assert r.status == "infeasible" and r.pi is None and f"μ({s})" in r.message
    with pytest.raises(InfeasibleTarget, match="not achievable"):
        r.require()
    assert steady_state_lp(P, bad, "vertex").status == "infeasible"
    assert fmss_convex(P, mu).status == "optimal"
    assert fmss_convex(P, random_target(P, np.random.default_rng(0), mixed=True)).status == "optimal"


def test_bad_target_is_rejected_before_solving(inst):
    P, mu, _ = inst
    with pytest.raises(ValueError, match="strictly positive"):
        fmss_convex(P, np.r_[0.0, mu[1:] / mu[1:].sum()])
    with pytest.raises(ValueError, match="shape"):
        fmss_convex(P, mu[:-1] / mu[:-1].sum())


def test_solver_status_handling(inst, monkeypatch):
    P, mu, _ = inst

    def boom(self, *a, **k):
        raise cp.SolverError("simulated failure")

    monkeypatch.setattr(cp.Problem, "solve", boom)
    r = fmss_convex(P, mu)
    assert r.status == "error" and r.pi is None and "simulated failure" in r.message
    with pytest.raises(RuntimeError, match="synthesis failed"):
        r.require()

    def inaccurate(self, *a, **k):
        self._status = cp.OPTIMAL_INACCURATE  # a solution that reached reduced accuracy is kept, and flagged
        for v in self.variables():
            v.value = np.repeat(mu, 3) / 3
        self._value = 1.0
        return 1.0

    monkeypatch.setattr(cp.Problem, "solve", inaccurate)
    r = fmss_convex(P, mu)
    assert r.status == "optimal_inaccurate" and r.ok and "reduced accuracy" in r.message


# ---------------------------------------------------------------------------------------------- experiments
def test_fitted_rate_recovers_a_geometric_rate():
    rate, n = ex.fitted_rate(3.0 * 0.4 ** np.arange(31), 10)
    assert abs(rate - 0.4) < 1e-10 and n == 21
    assert np.isnan(ex.fitted_rate(0.01 ** np.arange(31), 10)[0])


def test_experiments_are_deterministic():
    cfg = Config.from_profile("smoke", n_mdps=1, n_restarts=2, maxfev=50, c1_mdps=1, c1_policies=5)
    a, _ = ex.run_c2(cfg)
    b, _ = ex.run_c2(cfg)
    cols = ["sigma", "slem", "tv_at_k", "tv_rate"]
    assert np.array_equal(a[cols].to_numpy(), b[cols].to_numpy())
    assert ex.run_c1(cfg).sigma.tolist() == ex.run_c1(cfg).sigma.tolist()
    c7 = ex.run_c7(cfg)
    assert (c7.fmss_status == np.where(c7.achievable, "optimal", "infeasible")).all()


# ---------------------------------------------------------------------------------------------- instances added for controls
def test_reversible_chains_are_ergodic_and_reversible():
    rng = np.random.default_rng(3)
    for _ in range(30):
        Pr, mr = reversible_chain(12, rng, density=0.15)      # sparse: a disconnected W would be drawn often
        assert reversibility_defect(Pr, mr) < 1e-14 and slem(Pr, mr) < 1 - 1e-9
    P = random_ergodic_mdp(6, 3, 3, 0.05, rng)
    Ppi = induced_chain(P, rng.dirichlet(np.ones(3), size=6))
    assert reversibility_defect(Ppi, stationary(Ppi)) > 1e-6


def test_random_target_certificate_is_a_witness_and_changes_no_draw(inst):
    P = inst[0]
    E, T = synth.constraint_matrices(P)
    for mixed in (False, True):
        mu = random_target(P, np.random.default_rng(9), mixed=mixed)
        mu2, x = random_target(P, np.random.default_rng(9), mixed=mixed, certificate=True)
        assert np.array_equal(mu, mu2) and x.min() >= 0
        assert np.abs(E @ x - mu).sum() + np.abs(T @ x - mu).sum() < 1e-12


def test_boundary_target_is_achievable_deterministic_and_not_achievable_under_noise():
    rng = np.random.default_rng(11)
    P = random_ergodic_mdp(8, 3, 3, 0.05, rng)
    mu, x = boundary_target(P, rng)
    assert abs(mu.sum() - 1) < 1e-12 and mu.min() >= 0.05 / 8 - 1e-12
    assert ((x.reshape(8, 3) > 1e-12).sum(axis=1) == 1).all()          # a deterministic policy
    pi = synth.policy_from_occupation(x, 8, 3)
    assert np.abs(mu @ induced_chain(P, pi) - mu).sum() < 1e-9
    assert fmss_convex(P, mu).status == "optimal"
    from repro.fmss import min_stationarity_violation
    eps = [min_stationarity_violation(sample_kernel(P, 300, np.random.default_rng(k)), mu) for k in range(5)]
    assert sum(e > 1e-9 for e in eps) >= 3                               # usually outside the estimated set


def test_search_check_reaches_the_path_optimum():
    cfg = Config.from_profile("full")
    df = ex.run_search_check(cfg, path_sizes=(4, 5))
    # issue 40: a single Nelder–Mead run stopped 0.0005–0.016 above cos(π/n) depending on the OpenBLAS kernel; the
    # restarted search (fresh simplex each round, at most 4 rounds) ends within 1e-3 of it under every kernel tried
    # (Haswell, Nehalem, Sandybridge, Prescott); K4 needs 0.01. Hitting the round cap is reported, not required.
    assert (df.start_gap > 0.02).all() and (df.final_gap < 1e-3).all() and (df.final_gap > -1e-9).all()
    assert df.converged.any()


@pytest.mark.negative_twin("K4")
def test_k4_fails_when_the_search_is_starved():
    """K4 on the real search with its budget cut to one round of 20 evaluations: it cannot reach cos(π/n) and
    stops far above it, so the control fails (its other parts fed the values that pass)."""
    cfg = Config.from_profile("smoke", maxfev=20, search_rounds=1)
    df = ex.run_search_check(cfg, path_sizes=(4, 5, 7))
    n = {**K_PASS["K4"], "paths": len(df), "max gap to cos(π/n) found": float(df.final_gap.max()),
         "max gap to cos(π/n) at the start": float(df.start_gap.max()),
         "paths where the search stopped on its tolerance": int(df.converged.sum())}
    out = V.control_k4(n)
    assert not out["holds"] and "cannot resolve gaps" in out["reason"]


# ---------------------------------------------------------------------------------------------- verdicts
V = __import__("repro.fmss.verdicts", fromlist=["x"])

K_PASS = {
    "K1": {"FMSS solves": 40, "solves with status optimal": 40, "max ‖μᵀP_π − μᵀ‖₁": 1e-10,
           "max |cvxpy value − σ(returned π)|": 1e-10, "MDPs": 20, "MDPs where FMSS has the smallest σ": 20,
           "max σ(FMSS) − min σ(others)": -0.02},
    "K2": {"graphs": 4, "max |FMSS − cos(π/n)| (paths)": 1e-9, "max |FMSS − FMMC SDP|": 1e-9,
           "max |FMSS − FMSS symmetric|": 1e-9, "max |σ − SLEM| of FMSS's chain": 1e-9},
    "K3": {"max stationarity error (feasible)": 1e-15, "median σ − SLEM (feasible)": 0.25,
           "fewest LP vertices mixed on an MDP": 10, "max reversibility defect (reversible)": 1e-17,
           "max SLEM (reversible)": 0.98, "min SLEM (reversible)": 0.5},
    "K4": {"paths": 3, "max gap to cos(π/n) found": 0.005, "max gap to cos(π/n) at the start": 0.1, "paths where the search stopped on its tolerance": 3,
           "max ‖μᵀP_π − μᵀ‖₁ of search policies": 1e-10, "min SLEM(FMSS) − SLEM(search)": 0.07},
    "K5": {"MDPs": 20, "MDPs with SLEM range ≥ 0.05": 20, "median SLEM range": 0.18, "min SLEM range": 0.1},
    "K6": {"policies": 100, "violating the check with SLEM in place of σ": 97, "fraction violating": 0.97,
           "max excess with SLEM": 3.5},
    "K7": {"min TV at k (FMSS, LP vertex)": 2e-5, "max ‖μᵀP_π − μᵀ‖₁ (FMSS, LP vertex)": 1e-10, "ratio": 2e5},
    "K8": {"policies": 100, "fraction with ≥ 5 fit points": 1.0, "fraction with |rate − σ| > 0.05": 1.0,
           "fewest fit points": 10},
    "K9": {"solves": 8, "solves with status optimal": 8, "Clarabel max stationarity error": 1e-13,
           "SCS max stationarity error": 7e-6, "SCS max |value − Clarabel|": 4e-6, "SCS solves": 4},
    "K10": {"model-error slope": -0.5, "min over fitted n of boundary draws with ε̂ > 0": 1.0,
            "interior draws with ε̂ > 0": 0, "interior draws": 30, "min-slack solves": 60,
            "min-slack solves with a policy": 60, "min-slack solves at reduced accuracy": 0, "σ* solves": 10,
            "σ* solves optimal": 10},
    "K11": {"achievable targets": 40, "max witness residual": 1e-16, "unachievable targets": 20,
            "min inflow-bound violation": 0.2, "max inflow-bound violation (achievable)": -0.2},
}
K_FAIL = {   # one change each that must make the control fail
    "K1": [("solves with status optimal", 39), ("max ‖μᵀP_π − μᵀ‖₁", 1e-6),
           ("max |cvxpy value − σ(returned π)|", 1e-4), ("MDPs where FMSS has the smallest σ", 19)],
    "K2": [("max |FMSS − cos(π/n)| (paths)", 1e-3), ("max |FMSS − FMMC SDP|", 1e-4),
           ("max |FMSS − FMSS symmetric|", 1e-4), ("max |σ − SLEM| of FMSS's chain", 1e-4)],
    "K3": [("max stationarity error (feasible)", 1e-6), ("median σ − SLEM (feasible)", 0.001),
           ("fewest LP vertices mixed on an MDP", 1), ("max reversibility defect (reversible)", 1e-9),
           ("max SLEM (reversible)", 1.0)],
    "K4": [("max gap to cos(π/n) found", 0.02), ("max gap to cos(π/n) at the start", 0.01),
           ("max ‖μᵀP_π − μᵀ‖₁ of search policies", 1e-4), ("min SLEM(FMSS) − SLEM(search)", -0.01)],
    "K5": [("MDPs with SLEM range ≥ 0.05", 17)],
    "K6": [("fraction violating", 0.1)],
    "K7": [("ratio", 10.0)],
    "K8": [("fraction with ≥ 5 fit points", 0.5), ("fraction with |rate − σ| > 0.05", 0.2)],
    "K9": [("solves with status optimal", 7), ("Clarabel max stationarity error", 1e-6),
           ("SCS max stationarity error", 1e-3), ("SCS max |value − Clarabel|", 1e-3)],
    "K10": [("model-error slope", -0.2), ("model-error slope", -0.9),
            ("min over fitted n of boundary draws with ε̂ > 0", 0.2), ("σ* solves optimal", 9),
            ("min-slack solves with a policy", 59)],
    "K11": [("max witness residual", 1e-6), ("min inflow-bound violation", 1e-5)],
}


@pytest.mark.parametrize("kid", sorted(K_PASS, key=lambda k: int(k[1:])))
def test_each_control_passes_and_fails(kid):
    fn = getattr(V, f"control_{kid.lower()}")
    ok = fn(dict(K_PASS[kid]))
    assert ok["holds"] is True and ok["reason"] == ""
    for key, bad in K_FAIL[kid]:
        r = fn({**K_PASS[kid], key: bad})
        assert r["holds"] is False and r["reason"], (kid, key)


def test_k9_without_scs_passes_on_clarabel_alone():
    n = {**K_PASS["K9"], "SCS solves": 0, "SCS max stationarity error": float("nan"),
         "SCS max |value − Clarabel|": float("nan")}
    assert V.control_k9(n)["holds"] is True


S1 = {"feasible policies": 200, "MDPs": 10, "min σ − SLEM (feasible)": 0.07, "median σ − SLEM (feasible)": 0.25,
      "max stationarity error (feasible)": 1e-15, "reversible chains": 200, "max |σ − SLEM| (reversible)": 3e-15}
S2 = {"MDPs": 400, "FMSS below LP vertex": 390, "median reduction vs LP vertex": 0.17,
      "median reduction vs LP vertex 95% CI": [0.15, 0.19], "FMSS below max-entropy": 240,
      "median reduction vs max-entropy": 0.02, "FMSS has the smallest σ (sanity)": 400, "median σ − SLEM of FMSS": 0.14,
      "MDPs where max-entropy's σ is above FMSS's": 400,
      "mean SLEM(LP vertex) − SLEM(FMSS) [95% CI]": "0.06 [0.03, 0.09]: FMSS better",
      "mean SLEM(max-entropy) − SLEM(FMSS) [95% CI]": "0.01 [-0.01, 0.03]: FMSS no measurable difference"}
S3 = {"median gap": 0.03, "gap quartiles": [0.01, 0.05], "gap range": [0.0, 0.1], "MDPs with gap ≤ 0.05": 15,
      "MDPs": 20, "best start was FMSS's": 3, "MDPs where the search's σ is above FMSS's": 20}
S4 = {"policies": 1620, "max χ² excess over the bound": -1e-20, "FMSS TV below LP vertex": 370, "MDPs": 400,
      "median TV ratio FMSS/LP vertex": 0.1, "max |rate − SLEM|": 0.04, "rate exceptions": 0,
      "unexplained exceptions": 0, "exception list": []}
S5 = {"CLARABEL S max": 40, "CLARABEL CPU s at S max": 8.0, "CLARABEL wall s at S max": 20.0,
      "CLARABEL log–log slope": 3.8, "SCS S max": 60, "SCS CPU s at S max": 2.7, "SCS wall s at S max": 9.0,
      "SCS log–log slope": 2.5, "SCS max |value − Clarabel|": 4e-6, "SCS max stationarity error": 7e-6,
      "Clarabel max stationarity error": 1e-13}


def _s6(regime: str, **kw) -> dict:
    base = {"regime": regime, "mode": "min_slack", "sizes in the fit": 5, "seeds": 5, "slope ‖μ_π̂ − μ‖₁": -0.5,
            "slope CI (bootstrap over seeds)": [-0.6, -0.4], "slope |σ̂ − σ*|": -0.4, "slope |σ̂ − σ*| CI": [-0.6, -0.2],
            "theory-slack coverage of x*": 1.0, "draws": 30, "theory-slack slope ‖μ_π̂ − μ‖₁": -0.1,
            "theory-slack mean ‖μ_π̂ − μ‖₁ at largest n": 0.1, "min-slack draws with ε̂ > 0": 30,
            "min-slack draws": 30, "plug-in infeasible draws": 30}
    return {**base, **kw}


S7 = {"unachievable targets": 20, "reported infeasible": 20, "policies returned for them": 0, "achievable targets": 40,
      "achievable reported infeasible": 0, "achievable solved": 40, "LP agrees": True}


@pytest.mark.parametrize("name, call_ok, call_bad", [
    ("C1", lambda: V.claim_c1(S1), lambda: V.claim_c1({**S1, "min σ − SLEM (feasible)": -1e-6})),
    ("C1 reversible", lambda: V.claim_c1(S1), lambda: V.claim_c1({**S1, "max |σ − SLEM| (reversible)": 1e-4})),
    ("C2a count", lambda: V.claim_c2a(S2), lambda: V.claim_c2a({**S2, "FMSS below LP vertex": 340})),
    ("C2a reduction", lambda: V.claim_c2a(S2), lambda: V.claim_c2a({**S2, "median reduction vs LP vertex": 0.08,
                                                                       "median reduction vs LP vertex 95% CI": [0.07, 0.09]})),
    ("C2b", lambda: V.claim_c2b(S2), lambda: V.claim_c2b({**S2, "FMSS below max-entropy": 160})),
    ("C3", lambda: V.claim_c3(S3, 20, True), lambda: V.claim_c3({**S3, "median gap": 0.051}, 20, True)),
    ("C4a", lambda: V.claim_c4a(S4), lambda: V.claim_c4a({**S4, "max χ² excess over the bound": 1e-9})),
    ("C4b", lambda: V.claim_c4b(S4), lambda: V.claim_c4b({**S4, "FMSS TV below LP vertex": 290})),
    ("C4c", lambda: V.claim_c4c(S4), lambda: V.claim_c4c({**S4, "unexplained exceptions": 1,
                                                            "exception list": ["MDP 3 FMSS: SLEM 0.4, rate 0.5"]})),
    ("C5", lambda: V.claim_c5(S5, True), lambda: V.claim_c5({**S5, "CLARABEL CPU s at S max": 25.0}, True)),
    ("C5 scs", lambda: V.claim_c5(S5, True), lambda: V.claim_c5({**S5, "SCS CPU s at S max": 21.0}, True)),
    ("C6 rate", lambda: V.claim_c6([_s6("interior"), _s6("boundary")]),
     lambda: V.claim_c6([_s6("interior"), _s6("boundary", **{"slope ‖μ_π̂ − μ‖₁": -0.2})])),
    ("C6 gap", lambda: V.claim_c6([_s6("interior"), _s6("boundary")]),
     lambda: V.claim_c6([_s6("interior", **{"slope |σ̂ − σ*|": 0.05}), _s6("boundary")])),
    ("C6 coverage", lambda: V.claim_c6([_s6("interior"), _s6("boundary")]),
     lambda: V.claim_c6([_s6("interior"), _s6("boundary", **{"theory-slack coverage of x*": 0.9})])),
    ("C7", lambda: V.claim_c7(S7), lambda: V.claim_c7({**S7, "reported infeasible": 19})),
    ("C7 achievable", lambda: V.claim_c7(S7), lambda: V.claim_c7({**S7, "achievable reported infeasible": 1})),
])
def test_each_claim_holds_and_fails(name, call_ok, call_bad):
    ok, bad = call_ok(), call_bad()
    assert ok["holds"] is True and not ok["reason"] and not ok.get("inconclusive")
    assert bad["holds"] is False and bad["reason"] and not bad.get("inconclusive"), bad


def test_count_claims_near_their_bar_are_inconclusive():
    """A share whose Wilson interval straddles the bar decides nothing: 16/20 (the old C2a failure at seed 0) and
    20/20 are both compatible with 90 %; so is 365/400, but 390/400 clears it and 340/400 falls short."""
    for k, n in ((16, 20), (20, 20), (365, 400)):
        assert V.wilson(k, n)[0] < 0.9 <= V.wilson(k, n)[1]
        out = V.claim_c2a({**S2, "MDPs": n, "FMSS below LP vertex": k})
        assert out["holds"] is False and out["inconclusive"], out
    assert "straddles the bar" in V.claim_c2a({**S2, "FMSS below LP vertex": 365})["inconclusive"]
    assert V.claim_c2a({**S2, "median reduction vs LP vertex 95% CI": [0.08, 0.12]})["inconclusive"]
    assert V.claim_c2b({**S2, "FMSS below max-entropy": 205})["inconclusive"]
    assert V.claim_c4b({**S4, "FMSS TV below LP vertex": 322})["inconclusive"]
    lo, hi = V.wilson(16, 20)
    assert lo < 0.9 < hi and abs(lo - 0.5840) < 1e-3


def test_kappa_sees_a_near_defective_cluster_just_below_the_slem():
    """Seed 4's MDP 2 search policy: a near-triple eigenvalue 3e-5 below the top modulus (κ ~ 10⁴), well-conditioned
    eigenvalues at the top. A chain with that shape: a Jordan-like 2×2 block at 0.298, a simple one at 0.3."""
    from repro.fmss.mdp import eigen_condition

    # build P = 1μᵀ + V diag-ish(B) V⁻¹ with B's spectrum {0.3, 0.298 ± near-Jordan coupling}, μ uniform
    S = 4
    mu = np.full(S, 1 / S)
    B = np.array([[0.3, 0, 0], [0, 0.298, 1e-2], [0, 1e-7, 0.298]])   # eigenvalues 0.3, 0.298 ± 3e-5
    Q, _ = np.linalg.qr(np.column_stack([np.ones(S), np.random.default_rng(0).standard_normal((S, S - 1))]))
    V_ = Q[:, 1:]                                   # orthonormal basis of 1⊥ (= μ⊥ for uniform μ)
    P = np.outer(np.ones(S), mu) + V_ @ B @ V_.T
    assert np.allclose(P.sum(axis=1), 1) and np.allclose(mu @ P, mu)
    assert eigen_condition(P, mu) > 20                        # the cluster within 1 % of the top is seen
    assert eigen_condition(P, mu, rtol=1e-9) < 20             # the old window (attaining the SLEM only) missed it


def test_claims_are_inconclusive_below_the_card_scale():
    small = {**S2, "MDPs": 3, "FMSS below LP vertex": 3, "FMSS below max-entropy": 3}
    assert V.claim_c2a(small)["inconclusive"] and V.claim_c2b(small)["inconclusive"]
    assert V.claim_c4b({**S4, "MDPs": 3, "FMSS TV below LP vertex": 3})["inconclusive"]
    assert V.claim_c3(S3, 3, True)["inconclusive"] and V.claim_c3(S3, 20, False)["inconclusive"]
    assert V.claim_c5(S5, False)["inconclusive"] and V.claim_c5(S5, False)["holds"] is None
    assert V.claim_c6([_s6("interior", **{"sizes in the fit": 1})])["inconclusive"]


def test_a_failed_control_makes_its_claims_inconclusive():
    ledger = Ledger(Config.from_profile("smoke"), CLAIMS, controls=CONTROLS)
    for kid in CONTROLS:
        ledger.control(kid, **getattr(V, f"control_{kid.lower()}")(K_PASS[kid]))
    ledger.control("K4", **V.control_k4({**K_PASS["K4"], "max gap to cos(π/n) found": 0.05}))
    ledger.record("C3", **V.claim_c3(S3, 20, True), needs=NEEDS["C3"])
    ledger.record("C1", **V.claim_c1(S1), needs=NEEDS["C1"])
    assert ledger.verdict("K4") == "failed" and ledger.verdict("C3") == "inconclusive"
    assert "control K4 failed" in ledger.claims["C3"].reason and ledger.verdict("C1") == "holds"


def test_control_numbers_from_a_tiny_run():
    cfg = Config.from_profile("smoke", n_mdps=2, n_restarts=2, maxfev=200, c1_mdps=2, c1_policies=6,
                              sv_n_list=(100, 1000), sv_slope_min_n=100)
    c2, _ = ex.run_c2(cfg)
    c1, c7, sv, sc = ex.run_c1(cfg), ex.run_c7(cfg), ex.run_sv(cfg), ex.run_scaling(cfg)
    for fn, args in ((V.control_k1, ex.numbers_k1(c2)), (V.control_k3, ex.numbers_k3(c1)),
                     (V.control_k5, ex.numbers_k5(c2)), (V.control_k6, ex.numbers_k6(c2)),
                     (V.control_k7, ex.numbers_k7(c2)), (V.control_k8, ex.numbers_k8(c2)),
                     (V.control_k9, ex.numbers_k9(sc)), (V.control_k10, ex.numbers_k10(sv, 100)),
                     (V.control_k11, ex.numbers_k11(c7))):
        r = fn(args)
        assert isinstance(r["holds"], bool) and set(r) == {"holds", "threshold", "numbers", "reason"}
    assert V.control_k1(ex.numbers_k1(c2))["holds"] and V.control_k11(ex.numbers_k11(c7))["holds"]
    k10 = ex.numbers_k10(sv, 100)
    assert k10["interior draws"] == 2 and 0 <= k10["min over fitted n of boundary draws with ε̂ > 0"] <= 1
    assert set(sv.regime) == set(ex.SV_REGIMES)


# ---------------------------------------------------------------------------------------------- negative twins
# Issue 41, rule 1: each control, decided on the numbers its ``numbers_k*`` measures from the chapter's own runs
# (run_c1, run_c2, run_fmmc_check, run_scaling, run_sv, run_c7) at tiny sizes, fails on a blinded apparatus and
# (where cheap) passes on the real one at the same size.
import warnings  # noqa: E402

_TINY = dict(n_mdps=2, n_restarts=1, maxfev=20, search_rounds=1, c1_mdps=2, c1_policies=10)


def _reversible_instance(cfg, rng, S=None):
    """Structure removed: the free-move path MDP (ε-mixed, so every chain is ergodic) with a uniform target. On a
    tree every μ-stationary chain is reversible, so σ = SLEM for every feasible policy."""
    S = S or cfg.S
    return (1 - cfg.eps_mix) * graph_mdp(path_graph(S)) + cfg.eps_mix / S, np.full(S, 1.0 / S)


def _starved_fmss(P, mu, eps_pi=0.0, symmetric=False, solver="CLARABEL", solver_opts=None):
    """The FMSS program handed to SCS with 25 iterations and tolerance 0.1 (a solver starved of its budget)."""
    return fmss_convex(P, mu, eps_pi=eps_pi, symmetric=symmetric, solver="SCS",
                       solver_opts=dict(max_iters=25, eps_abs=1e-1, eps_rel=1e-1))


@pytest.fixture(scope="module")
def twin_runs():
    """run_c1 / run_c2 on the same tiny configuration: real, on reversible-only MDPs, with a starved solver."""
    cfg = Config.from_profile("smoke", **_TINY)
    out = {"real": (ex.run_c1(cfg), ex.run_c2(cfg)[0])}
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(ex, "instance", _reversible_instance)
        out["reversible"] = (ex.run_c1(cfg), ex.run_c2(cfg)[0])
        mp.undo()
        mp.setattr(ex, "fmss_convex", _starved_fmss)
        out["starved"] = (None, ex.run_c2(cfg)[0])
    finally:
        mp.undo()
    return out


@pytest.mark.negative_twin("K1")
def test_k1_fails_when_the_solver_is_starved(twin_runs):
    assert V.control_k1(ex.numbers_k1(twin_runs["real"][1]))["holds"]
    out = V.control_k1(ex.numbers_k1(twin_runs["starved"][1]))
    assert not out["holds"] and "reached status optimal" in out["reason"]
    assert out["numbers"]["max ‖μᵀP_π − μᵀ‖₁"] > 1e-4 and out["numbers"]["max |cvxpy value − σ(returned π)|"] > 1e-4


@pytest.mark.negative_twin("K2")
def test_k2_fails_when_the_program_is_not_fmmc(monkeypatch):
    """The FMMC reduction run with a policy floor ε_π = 0.1 in the program: no longer the FMMC problem, so its
    value leaves cos(π/n) and the SDP (the references themselves are untouched)."""
    cfg = Config.from_profile("smoke")
    monkeypatch.setattr(ex, "fmss_convex", lambda P, mu, **kw: fmss_convex(P, mu, **{**kw, "eps_pi": 0.1}))
    out = V.control_k2(ex.numbers_k2(ex.run_fmmc_check(cfg, path_sizes=(4, 5), n_random=5)))
    assert not out["holds"] and "max |FMSS − FMMC SDP|" in out["reason"]
    assert out["numbers"]["max |FMSS − cos(π/n)| (paths)"] > 1e-3


@pytest.mark.negative_twin("K3")
def test_k3_fails_when_every_feasible_chain_is_reversible(twin_runs):
    assert V.control_k3(ex.numbers_k3(twin_runs["real"][0]))["holds"]
    out = V.control_k3(ex.numbers_k3(twin_runs["reversible"][0]))
    assert not out["holds"] and "near-reversible" in out["reason"]
    assert out["numbers"]["median σ − SLEM (feasible)"] < 1e-9


@pytest.mark.negative_twin("K5")
def test_k5_fails_when_the_actions_do_nothing(twin_runs):
    """ε = 1: every P(·|s,a) is uniform, so every feasible policy induces the same chain."""
    assert V.control_k5(ex.numbers_k5(twin_runs["real"][1]))["holds"]
    out = V.control_k5(ex.numbers_k5(ex.run_c2(Config.from_profile("smoke", **_TINY, eps_mix=1.0))[0]))
    assert not out["holds"] and out["numbers"]["MDPs with SLEM range ≥ 0.05"] == 0
    assert out["numbers"]["median SLEM range"] < 1e-9


@pytest.mark.negative_twin("K6")
def test_k6_fails_when_sigma_equals_the_slem(twin_runs):
    assert V.control_k6(ex.numbers_k6(twin_runs["real"][1]))["holds"]
    out = V.control_k6(ex.numbers_k6(twin_runs["reversible"][1]))  # SLEM = σ: the swapped check is the real one
    assert not out["holds"] and out["numbers"]["fraction violating"] == 0


@pytest.mark.negative_twin("K7")
def test_k7_fails_when_the_solver_is_starved(twin_runs):
    assert V.control_k7(ex.numbers_k7(twin_runs["real"][1]))["holds"]
    out = V.control_k7(ex.numbers_k7(twin_runs["starved"][1]))
    assert not out["holds"] and "reads solver tolerance" in out["reason"] and out["numbers"]["ratio"] < 1


@pytest.mark.negative_twin("K8")
def test_k8_fails_when_the_chains_decay_at_sigma(twin_runs):
    assert V.control_k8(ex.numbers_k8(twin_runs["real"][1]))["holds"]
    out = V.control_k8(ex.numbers_k8(twin_runs["reversible"][1]))  # reversible: TV decays at SLEM = σ
    assert not out["holds"] and "could not tell the SLEM from another rate" in out["reason"]
    assert out["numbers"]["fraction with |rate − σ| > 0.05"] == 0


@pytest.mark.negative_twin("K9")
def test_k9_fails_when_scs_runs_at_a_loose_tolerance():
    base = dict(scaling_S_clarabel=(6,), scaling_S_scs=(6,))
    assert V.control_k9(ex.numbers_k9(ex.run_scaling(Config.from_profile("smoke", **base))))["holds"]
    out = V.control_k9(ex.numbers_k9(ex.run_scaling(Config.from_profile("smoke", **base, scs_eps=9e-3))))
    assert not out["holds"] and "SCS's value differs from Clarabel's" in out["reason"]
    assert out["numbers"]["SCS max |value − Clarabel|"] > 1e-3


@pytest.mark.negative_twin("K10")
def test_k10_fails_when_the_learner_is_given_the_true_model(monkeypatch):
    """The sampler replaced by the true kernel (P̂ = P): no estimation error, and μ stays achievable."""
    cfg = Config.from_profile("smoke")
    monkeypatch.setattr(ex, "sample_kernel", lambda P, n, rng: P.copy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # log of a zero model error
        out = V.control_k10(ex.numbers_k10(ex.run_sv(cfg), cfg.sv_slope_min_n))
    assert not out["holds"] and "the sampler does not produce the estimation error" in out["reason"]
    assert "min-slack is mostly plug-in" in out["reason"]
    assert out["numbers"]["min over fitted n of boundary draws with ε̂ > 0"] == 0


@pytest.mark.negative_twin("K11")
def test_k11_fails_on_an_uncertified_target(monkeypatch):
    cfg = Config.from_profile("smoke", n_mdps=2)
    assert V.control_k11(ex.numbers_k11(ex.run_c7(cfg)))["holds"]
    # the "unachievable" target left where it was (achievable), and the witnesses' entries shuffled
    monkeypatch.setattr(ex, "unachievable_target", lambda P, mu: (mu, 0))
    real_target = ex.random_target

    def shuffled_witness(P, rng, mixed=False, certificate=False):
        mu, x = real_target(P, rng, mixed=mixed, certificate=True)
        return (mu, np.random.default_rng(0).permutation(x)) if certificate else mu
    monkeypatch.setattr(ex, "random_target", shuffled_witness)
    out = V.control_k11(ex.numbers_k11(ex.run_c7(cfg)))
    assert not out["holds"] and "witness occupation measure misses" in out["reason"]
    assert "exceeds the inflow bound by only" in out["reason"]
    assert out["numbers"]["min inflow-bound violation"] < 0 and out["numbers"]["max witness residual"] > 1e-3


# Controls still without a negative twin (a test marked @pytest.mark.negative_twin("K…") that runs this
# chapter's code on a blinded apparatus and sees the control fail); issue 41. The contract test keeps this exact.
NEGATIVE_TWINS_PENDING = ()
