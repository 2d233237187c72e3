"""Chapter 04 (FMSS): config validation, chain invariants, the surrogate bound, the convex program against
independent references (numpy, the FMMC closed form on paths, Boyd–Diaconis–Xiao's SDP), FMSS-SV,
infeasibility and solver-status handling, determinism."""
from __future__ import annotations

import dataclasses

import cvxpy as cp
import numpy as np
import pytest

from repro.common import ConfigError
from repro.fmss import (CLAIMS, Config, InfeasibleTarget, chi2_curve, fmmc_sdp, fmss_convex, fmss_nonconvex, fmss_sv,
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
    assert list(CLAIMS) == ["C1", "C2", "C3", "C4", "C5", "C6", "C7"]


BAD = {
    "n_mdps": 0, "S": 2, "A": "3", "support_k": 0, "eps_mix": 0.0, "c1_mdps": 0, "c1_policies": -1,
    "c1_vertices": 1, "scaling_S_clarabel": [], "scaling_S_scs": [2], "scs_eps": 0.5, "sv_n_list": [30],
    "sv_seeds": 0, "sv_mode": "exact", "sv_slope_min_n": 0, "c_eps": 0.0, "delta": 1.0, "n_restarts": 0,
    "maxfev": 5, "solver": "ECOS", "eps_pi": 1.0, "eps_pi_ablation": -0.1, "horizon": 5, "tv_k": 0,
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
    ({"c1_policies": 5}, "c1_policies"), ({"scaling_S_scs": [3]}, "scaling_S_scs"),
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
