"""Tests for chapter 08 (ROSE / SOS-MD): stage solvers, baselines, evaluation, kernel, statistics."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from repro import rose_sosmd as rs
from repro.rose_sosmd import stage

SOLVERS = ["numpy"] + (["cpp"] if stage.HAVE_KERNEL else [])


def _random_stage(rng, S=8, A=3, B=3, scale=2.0):
    Q = scale * rng.random((S, A, B))
    return Q, rng.dirichlet(np.ones(A), S), rng.dirichlet(np.ones(B), S)


@pytest.fixture(scope="module")
def small_instance():
    game, mu_b, nu_b = rs.make_instance(0, S=4, A=3, B=3, H=3)
    return game, (mu_b, nu_b)


# ----------------------------------------------------------------------------- stage game

@pytest.mark.parametrize("solver", SOLVERS)
def test_solution_satisfies_fixed_point_and_zero_duality_gap(solver):
    rng = np.random.default_rng(1)
    Q, pr, qr = _random_stage(rng)
    p, q, value, iters = rs.solve_regularized(Q, pr, qr, beta=0.1, solver=solver)
    assert np.allclose(p.sum(1), 1) and np.allclose(q.sum(1), 1)
    assert rs.fixed_point_residual(Q, p, q, pr, qr, 0.1).max() <= 1e-9
    gap = rs.stage_duality_gap(Q, p, q, pr, qr, 0.1)
    assert np.all(gap >= -1e-12) and gap.max() <= 1e-9
    assert np.allclose(value, rs.reg_stage_value(Q, p, q, pr, qr, 0.1))
    # the same checks reject a non-solution
    assert rs.fixed_point_residual(Q, pr, qr, pr, qr, 0.1).max() > 1e-3
    assert rs.stage_duality_gap(Q, pr, qr, pr, qr, 0.1).max() > 1e-3


def test_regularised_value_matches_cvxpy():
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(2)
    Q, pr, qr = _random_stage(rng, S=3)
    beta = 0.2
    _, _, value, _ = rs.solve_regularized(Q, pr, qr, beta)
    for s in range(3):
        # max_p [ min_q p^T Q q + beta KL(q||q_ref) ] - beta KL(p||p_ref); the inner min in closed form
        p = cp.Variable(3, nonneg=True)
        inner = -beta * cp.log_sum_exp(np.log(qr[s]) - Q[s].T @ p / beta)
        obj = inner + beta * cp.sum(cp.entr(p)) + beta * (np.log(pr[s]) @ p)
        prob = cp.Problem(cp.Maximize(obj), [cp.sum(p) == 1])
        prob.solve(solver="CLARABEL")
        assert abs(prob.value - value[s]) < 1e-6


def test_value_close_to_lp_value_uniform_refs_small_beta():
    rng = np.random.default_rng(3)
    S, A, B, beta = 40, 3, 3, 0.01
    Q = rng.random((S, A, B))
    pr, qr = np.full((S, A), 1 / A), np.full((S, B), 1 / B)
    _, _, value, _ = rs.solve_regularized(Q, pr, qr, beta)
    _, _, v_lp = rs.zero_sum_lp_batch(Q)
    assert np.all(np.abs(value - v_lp) <= beta * (np.log(A) + np.log(B)))


@pytest.mark.parametrize("solver", SOLVERS)
def test_shift_invariance(solver):
    rng = np.random.default_rng(4)
    Q, pr, qr = _random_stage(rng)
    p1, q1, v1, _ = rs.solve_regularized(Q, pr, qr, 0.1, solver=solver)
    p2, q2, v2, _ = rs.solve_regularized(Q + 3.7, pr, qr, 0.1, solver=solver)
    assert np.abs(p1 - p2).max() <= 1e-10 and np.abs(q1 - q2).max() <= 1e-10
    assert np.allclose(v2 - v1, 3.7, atol=1e-10)
    a, b = rs.md_iterate(Q, pr, qr, 0.1, 50, solver=solver)
    c, d = rs.md_iterate(Q - 5.0, pr, qr, 0.1, 50, solver=solver)
    assert np.abs(a - c).max() <= 1e-10 and np.abs(b - d).max() <= 1e-10


def test_mmd_step_is_one_md_iteration():
    rng = np.random.default_rng(5)
    Q, pr, qr = _random_stage(rng)
    p1, q1 = rs.mmd_step(pr, qr, Q, pr, qr, 0.1, "auto")
    p2, q2 = rs.md_iterate(Q, pr, qr, 0.1, 1, solver="numpy")
    assert np.allclose(p1, p2, atol=1e-15) and np.allclose(q1, q2, atol=1e-15)


@pytest.mark.parametrize("solver", SOLVERS)
def test_extragradient_never_hits_cap_rho_over_beta_up_to_20(solver):
    rng = np.random.default_rng(6)
    beta, n_games = 0.1, 1000
    for A, B in [(3, 3), (4, 2)]:
        U = rng.random((n_games, A, B))
        k = rng.uniform(0.05, 20.0, n_games)              # target rho / beta
        U = (U - U.min(axis=(1, 2), keepdims=True)) / np.ptp(U, axis=(1, 2), keepdims=True)
        Q = U * (2 * beta * k)[:, None, None]             # half-range = k * beta
        assert (rs.half_range(Q) / beta).max() <= 20 + 1e-9
        pr, qr = rng.dirichlet(np.ones(A), n_games), rng.dirichlet(np.ones(B), n_games)
        p, q, _, iters = rs.solve_regularized(Q, pr, qr, beta, max_iter=20_000, solver=solver)
        assert iters.max() < 20_000
        assert rs.fixed_point_residual(Q, p, q, pr, qr, beta).max() <= 1e-11


def test_solver_raises_when_cap_too_small():
    rng = np.random.default_rng(7)
    Q, pr, qr = _random_stage(rng)
    with pytest.raises(rs.ConvergenceError, match="did not reach residual"):
        rs.solve_regularized(Q, pr, qr, 0.1, max_iter=5)


def test_input_validation():
    rng = np.random.default_rng(8)
    Q, pr, qr = _random_stage(rng)
    with pytest.raises(ValueError):
        rs.solve_regularized(Q, pr, qr, beta=0.0)
    pr0 = pr.copy()
    pr0[0] = [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="full support"):
        rs.solve_regularized(Q, pr0, qr, beta=0.1)
    with pytest.raises(ValueError):
        rs.step_sizes(Q, 0.1, "bogus")


# ----------------------------------------------------------------------------- LP

def test_zero_sum_lp_rock_paper_scissors():
    Q = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])
    p, q, v = rs.zero_sum_lp(Q)
    assert np.allclose(p, 1 / 3, atol=1e-9) and np.allclose(q, 1 / 3, atol=1e-9)
    assert abs(v) < 1e-9


def test_zero_sum_lp_2x2_closed_form():
    rng = np.random.default_rng(9)
    for _ in range(20):
        # a, d large on the diagonal and b, c small: no saddle point, unique mixed equilibrium
        a, d = rng.uniform(1, 2, 2)
        b, c = rng.uniform(0, 1, 2)
        Q = np.array([[a, b], [c, d]])
        den = a - b - c + d
        p, q, v = rs.zero_sum_lp(Q)
        assert np.allclose(p, [(d - c) / den, (a - b) / den], atol=1e-9)
        assert np.allclose(q, [(d - b) / den, (a - c) / den], atol=1e-9)
        assert abs(v - (a * d - b * c) / den) < 1e-9


def test_zero_sum_lp_random_rectangular_is_nash():
    rng = np.random.default_rng(10)
    for _ in range(10):
        Q = rng.normal(size=(4, 5))
        p, q, v = rs.zero_sum_lp(Q)
        assert (p @ Q).min() >= v - 1e-9 and (Q @ q).max() <= v + 1e-9


# ----------------------------------------------------------------------------- data

def test_dataset_counts(small_instance):
    game, (mu_b, nu_b) = small_instance
    H, S, A, B = game.shape
    n = 20_000
    d = rs.sample_dataset(game, mu_b, nu_b, n, np.random.default_rng(0))
    assert d.N.sum() == n * H
    assert np.array_equal(d.N_next.sum(-1), d.N)
    assert np.allclose(d.R, d.N * game.r)                  # rewards are deterministic
    # first step: (s, a, b) frequencies match rho x mu_b x nu_b within 5 standard errors
    expect = game.rho[:, None, None] * mu_b[0][:, :, None] * nu_b[0][:, None, :]
    freq = d.N[0] / n
    assert np.all(np.abs(freq - expect) <= 5 * np.sqrt(expect * (1 - expect) / n) + 1e-12)
    with pytest.raises(ValueError):
        rs.sample_dataset(game, mu_b, nu_b, 0, np.random.default_rng(0))


def test_behavior_policies_are_mixed():
    game = rs.random_markov_game(4, 3, 2, 3, np.random.default_rng(0))
    mu, nu = rs.behavior_policies(game, 0.3, 0.05, np.random.default_rng(1))
    assert np.allclose(mu.sum(-1), 1) and np.allclose(nu.sum(-1), 1)
    assert mu.min() >= 0.05 / 3 - 1e-15 and nu.min() >= 0.05 / 2 - 1e-15


def test_estimate_q_exact_model_and_onehot_features(small_instance):
    game, (mu_b, nu_b) = small_instance
    H, S, A, B = game.shape
    V = np.random.default_rng(0).random(S)
    Q = rs.estimate_q(rs.exact_dataset(game), 1, V)
    assert np.allclose(Q, game.r[1] + game.P[1] @ V, atol=1e-14)
    d = rs.sample_dataset(game, mu_b, nu_b, 50, np.random.default_rng(1))
    assert (d.N == 0).any()                                # some empty cells at this size
    onehot = np.eye(S * A * B).reshape(S, A, B, -1)
    for h in range(H):
        Qt = rs.estimate_q(d, h, V)
        assert np.all(Qt[d.N[h] == 0] == 0)
        assert np.allclose(rs.estimate_q(d, h, V, features=onehot), Qt, atol=1e-10)


# ----------------------------------------------------------------------------- evaluation

def test_reg_gap_nonnegative_for_random_policies(small_instance):
    game, refs = small_instance
    H, S, A, B = game.shape
    rng = np.random.default_rng(11)
    for _ in range(10):
        pi, nu = rng.dirichlet(np.ones(A), (H, S)), rng.dirichlet(np.ones(B), (H, S))
        assert rs.reg_gap(game, pi, nu, 0.1, refs) > 0
        assert rs.unreg_gap(game, pi, nu) >= 0


def test_best_responses_consistent_and_optimal(small_instance):
    game, refs = small_instance
    H, S, A, B = game.shape
    rng = np.random.default_rng(12)
    pi, nu = rng.dirichlet(np.ones(A), (H, S)), rng.dirichlet(np.ones(B), (H, S))
    br, v = rs.reg_best_response(game, nu, "max", 0.1, refs)
    assert abs(rs.reg_value(game, br, nu, 0.1, refs) - v) < 1e-12
    for _ in range(20):                                     # no random policy beats it
        other = rng.dirichlet(np.ones(A), (H, S))
        assert rs.reg_value(game, other, nu, 0.1, refs) <= v + 1e-12
    br_min, v_min = rs.reg_best_response(game, pi, "min", 0.1, refs)
    assert abs(rs.reg_value(game, pi, br_min, 0.1, refs) - v_min) < 1e-12


def test_unreg_best_response_matches_brute_force():
    game = rs.random_markov_game(2, 2, 2, 2, np.random.default_rng(13))
    rng = np.random.default_rng(14)
    nu = rng.dirichlet(np.ones(2), (2, 2))
    best = -np.inf
    for acts in itertools.product(range(2), repeat=4):     # all deterministic (h, s) -> a
        pi = np.zeros((2, 2, 2))
        for (h, s), a in zip(itertools.product(range(2), range(2)), acts):
            pi[h, s, a] = 1.0
        best = max(best, rs.unreg_value(game, pi, nu))
    assert abs(rs.unreg_best_response(game, nu, "max")[1] - best) < 1e-12


@pytest.mark.parametrize("solver", SOLVERS)
def test_rose_on_true_model_has_zero_gap(small_instance, solver):
    game, refs = small_instance
    pi, nu = rs.rose(rs.exact_dataset(game), 0.1, refs, solver=solver)
    g = rs.reg_gap(game, pi, nu, 0.1, refs)
    assert -1e-12 <= g <= 1e-8


def test_sos_md_with_large_T_equals_rose(small_instance):
    game, refs = small_instance
    H = game.shape[0]
    d = rs.sample_dataset(game, *refs, 256, np.random.default_rng(15))
    info = {}
    pi_r, nu_r = rs.rose(d, 0.1, refs, info=info)
    V = np.vstack([info["V"], np.zeros((1, game.shape[1]))])
    for h in range(H):                                      # stage level, the same Q-hat
        Q = rs.estimate_q(d, h, V[h + 1])
        p, q = rs.md_iterate(Q, refs[0][h], refs[1][h], 0.1, 5000)
        assert np.abs(p - pi_r[h]).max() <= 1e-6 and np.abs(q - nu_r[h]).max() <= 1e-6
    pi_s, nu_s = rs.sos_md(d, 0.1, refs, T=5000)            # whole recursion
    assert np.abs(pi_s - pi_r).max() <= 1e-6 and np.abs(nu_s - nu_r).max() <= 1e-6
    pi_5, _ = rs.sos_md(d, 0.1, refs, T=5)                  # ... and a short run does not
    assert np.abs(pi_5 - pi_r).max() > 1e-3


def test_baselines_return_policies(small_instance):
    game, refs = small_instance
    H, S, A, B = game.shape
    d = rs.sample_dataset(game, *refs, 500, np.random.default_rng(16))
    for pi, nu in [rs.plugin_nash(d), rs.pnvi(d, 0.1, 0.1), rs.pnvi(d, 1.0, 0.1),
                   rs.rose_lcb(d, 0.1, refs, 0.1, 0.1)]:
        assert pi.shape == (H, S, A) and nu.shape == (H, S, B)
        assert np.allclose(pi.sum(-1), 1) and np.allclose(nu.sum(-1), 1) and pi.min() >= 0
    # with a huge dataset the plug-in NE approaches the true NE (unregularised gap small)
    big = rs.sample_dataset(game, *refs, 200_000, np.random.default_rng(17))
    assert rs.unreg_gap(game, *rs.plugin_nash(big)) < 0.05


# ----------------------------------------------------------------------------- kernel

@pytest.mark.skipif(not stage.HAVE_KERNEL, reason="compiled kernel not built")
def test_kernel_matches_numpy():
    from repro.rose_sosmd import _kernels
    rng = np.random.default_rng(18)
    S, A, B, beta = 64, 3, 4, 0.15
    Q = rng.normal(size=(S, A, B))
    pr, qr = rng.dirichlet(np.ones(A), S), rng.dirichlet(np.ones(B), S)
    eta = rng.uniform(0.05, 0.5, S) / (stage.half_range(Q) + beta)
    p1, q1, it1 = _kernels.mmd_solve_batch(Q, pr, qr, beta, eta, 300, 0.0, False)
    p2, q2 = stage._md_numpy(Q, pr, qr, beta, eta, 300)
    assert np.abs(p1 - p2).max() <= 1e-12 and np.abs(q1 - q2).max() <= 1e-12
    assert np.all(it1 == 300)
    eta = 1.0 / (2 * stage.half_range(Q) + beta)
    p1, q1, it1 = _kernels.mmd_solve_batch(Q, pr, qr, beta, eta, 20_000, 1e-11, True)
    p2, q2, it2 = stage._extragradient_numpy(Q, pr, qr, beta, eta, 20_000, 1e-11)
    assert np.array_equal(it1, it2)
    assert np.abs(p1 - p2).max() <= 1e-12 and np.abs(q1 - q2).max() <= 1e-12


@pytest.mark.skipif(not stage.HAVE_KERNEL, reason="compiled kernel not built")
def test_kernel_rejects_non_float64_and_non_contiguous():
    from repro.rose_sosmd import _kernels
    Q = np.ones((2, 3, 3))
    pr, qr, eta = np.full((2, 3), 1 / 3), np.full((2, 3), 1 / 3), np.ones(2)
    with pytest.raises(TypeError):
        _kernels.mmd_solve_batch(Q.astype(np.int64), pr, qr, 0.1, eta, 5, 0.0, False)
    with pytest.raises(TypeError):
        _kernels.mmd_solve_batch(np.asfortranarray(np.ones((2, 3, 4))[:, :, :3]), pr, qr, 0.1,
                                 eta, 5, 0.0, False)
    with pytest.raises(ValueError):
        _kernels.mmd_solve_batch(Q, pr[:1], qr, 0.1, eta, 5, 0.0, False)


# ----------------------------------------------------------------------------- experiments

def test_determinism_and_pairing():
    kw = dict(S=3, A=2, B=2, H=2, n_list=[64, 128], beta=0.1, T=20,
              methods=("rose", "sos_md", "plugin", "pnvi", "rose_lcb"))
    a = rs.rate_sweep(seeds=[0, 1], **kw).drop(columns="wall_s")
    b = rs.rate_sweep(seeds=[0, 1], **kw).drop(columns="wall_s")
    pd.testing.assert_frame_equal(a, b)
    c = rs.rate_sweep(seeds=[2], **kw)
    assert not np.isin(c["reg_gap"].to_numpy(), a["reg_gap"].to_numpy()).all()
    # all methods at a (seed, n) saw the same dataset
    assert (a.groupby(["seed", "n"])["empty_frac"].nunique() == 1).all()
    # the dataset at (seed, n) does not depend on the rest of the grid
    d = rs.rate_sweep(seeds=[1], **{**kw, "n_list": [128]}).drop(columns="wall_s")
    e = a[(a.seed == 1) & (a.n == 128)].reset_index(drop=True)
    pd.testing.assert_frame_equal(d, e)


def test_fit_slope_recovers_known_slope():
    rng = np.random.default_rng(19)
    ns = 2.0 ** np.arange(8, 16)
    G = 3.0 * ns ** -0.7 * np.exp(0.05 * rng.normal(size=(5, len(ns))))
    G[:, :4] *= 10.0                                        # a kink below n_min must be ignored
    slope, (lo, hi) = rs.fit_slope(ns, G, n_min=4096)
    assert abs(slope + 0.7) < 0.05 and lo <= -0.7 <= hi and lo < slope < hi
    assert rs.fit_slope(ns, G, n_min=256)[0] < -1.0         # the full range is biased by the kink
    with pytest.raises(ValueError):
        rs.fit_slope(ns, G, n_min=2 ** 15)


# ----------------------------------------------------------------------------- datasets, controls' measurements

def test_dataset_hash_identifies_the_data(small_instance):
    game, refs = small_instance
    a = rs.make_dataset(3, 512, game, *refs)
    assert rs.dataset_hash(a) == rs.dataset_hash(rs.make_dataset(3, 512, game, *refs))
    assert rs.dataset_hash(a) != rs.dataset_hash(rs.make_dataset(3, 1024, game, *refs))
    assert rs.dataset_hash(a) != rs.dataset_hash(rs.make_dataset(4, 512, game, *refs))


def test_sweeps_share_datasets_and_record_their_hash():
    kw = dict(S=3, A=2, B=2, H=2, seeds=[0, 1])
    rate = rs.rate_sweep(n_list=[128, 256], T=20, methods=("sos_md", "rose", "plugin"), **kw)
    tdf = rs.t_sweep(n=256, T_list=[5, 10], **kw)
    bdf = rs.beta_sweep(n_list=[256], beta_list=[0.1, 0.2], **kw)
    assert (rate.groupby(["seed", "n"])["data_hash"].nunique() == 1).all()
    both = pd.concat([rate[rate.n == 256], tdf, bdf])
    assert (both.groupby("seed")["data_hash"].nunique() == 1).all()
    rose_rows = rate[rate.method == "rose"]
    assert (rose_rows.pi_dist_rose == 0).all() and (rose_rows.rho_beta_max >= rose_rows.rho_beta_min).all()
    assert rate[rate.method == "sos_md"].pi_dist_rose.notna().all()   # ROSE runs first whatever the order
    assert rose_rows.q_err_beta_max.notna().all() and rate[rate.method == "plugin"].q_err_beta_max.isna().all()


def test_q_estimation_error_is_zero_on_the_true_model(small_instance):
    game, refs = small_instance
    info = {}
    rs.rose(rs.exact_dataset(game), 0.1, refs, info=info)
    assert rs.q_estimation_error(game, info["Q"], info["V"]).max() <= 1e-12
    info = {}
    rs.rose(rs.make_dataset(0, 64, game, *refs), 0.1, refs, info=info)
    assert rs.q_estimation_error(game, info["Q"], info["V"]).max() > 1e-3


def test_control_measurements_are_exact():
    cf = rs.closed_form_checks([0.1, 0.5], 3, 3, rho_beta_max=20, tol=1e-11, n_games=16)
    assert max(cf["sep_policy_err"], cf["planted_policy_err"]) <= 1e-8
    assert max(cf["sep_value_err"], cf["planted_value_err"]) <= 1e-8
    assert cf["rho_beta_checked"][0] <= 0.6 and cf["rho_beta_checked"][1] >= 20
    lp = rs.lp_checks(3, 4)
    assert lp["dc_value_err"] <= 1e-7 and lp["exploitability"] <= 1e-7
    floors = rs.true_model_floors(4, 3, 3, 3, seeds=[0, 1])
    assert floors[["rose_reg_gap", "plugin_unreg_gap"]].abs().max().max() <= 1e-9
    rng = np.random.default_rng(5)
    Q, pr, qr = _random_stage(rng, S=10)
    kc = rs.kernel_check(Q, pr, qr, 0.1, 1e-11, 50)
    assert kc["stages"] == 10
    if stage.HAVE_KERNEL:
        assert kc["kernel"] and kc["solve_diff"] <= 1e-10 and kc["md_diff"] <= 1e-10


def test_planted_closed_form_catches_a_wrong_solver(monkeypatch):
    """The K1 check is not vacuous: a solver that stops early misses the planted equilibrium."""
    real = rs.experiments.solve_regularized
    monkeypatch.setattr(rs.experiments, "solve_regularized",
                        lambda Q, p, q, beta, tol, solver=None: real(Q, p, q, beta, tol=1e-2, solver=solver))
    cf = rs.closed_form_checks([0.1], 3, 3, rho_beta_max=15, tol=1e-11, n_games=16)
    assert cf["planted_policy_err"] > 1e-6


# ----------------------------------------------------------------------------- verdicts

V = rs.verdicts
NS = [2 ** k for k in range(8, 18)]


def _rate_df(rose=-1.0, plugin=-0.5, pnvi=None, sos_factor=1.0, seeds=range(5), ns=NS, empty=0.0):
    """Synthetic rate sweep: gap = c n^slope with small multiplicative noise per (seed, n)."""
    rng = np.random.default_rng(20)
    pnvi = plugin if pnvi is None else pnvi
    rows = []
    for seed in seeds:
        for n in ns:
            e = np.exp(0.02 * rng.normal())
            g_rose = 50.0 * n ** rose * e
            for m, g in [("rose", g_rose), ("sos_md", g_rose * sos_factor), ("plugin", 5.0 * n ** plugin * e),
                         ("pnvi", 5.0 * n ** pnvi * e), ("pnvi_c1", 2.0 * e)]:
                rows.append(dict(seed=seed, n=int(n), method=m, reg_gap=g, unreg_gap=g, empty_frac=empty,
                                 q_err_beta_max=1e3 / np.sqrt(n), q_err_beta_frac=0.0, pi_dist_rose=0.0))
    return pd.DataFrame(rows)


def _skew_df(ratio=3.0, rose=-1.0, ns=NS, dist=0.5, seeds=range(5)):
    df = _rate_df(rose=rose, ns=ns, seeds=seeds)
    df = df[df.method == "rose"]
    lcb = df.assign(method="rose_lcb", reg_gap=df.reg_gap * ratio, pi_dist_rose=dist)
    return pd.concat([df, lcb])


def _t_df(slope=-1.0, T_list=(5, 10, 20, 40, 80, 160, 320, 640), seeds=range(5), rose_gap=1e-3):
    return pd.DataFrame([dict(seed=s, n=16384, T=T, method="sos_md", e_T=10.0 * T ** slope * (1 + 0.01 * s),
                              reg_gap=rose_gap + 10.0 * T ** slope, rose_reg_gap=rose_gap)
                         for s in seeds for T in T_list])


def _beta_df(power=-1.0, betas=(0.05, 0.1, 0.2, 0.5), seeds=range(5)):
    return pd.DataFrame([dict(seed=s, n=n, beta=b, method="rose", n_gap=3.0 * b ** power * (1 + 0.01 * s),
                              reg_gap=3.0 * b ** power / n, empty_frac=0.0)
                         for s in seeds for n in (16384, 32768) for b in betas])


def _check_kwargs(kw, verdict):
    assert set(kw) >= {"holds", "threshold", "numbers", "reason"}
    if verdict == "inconclusive":
        assert kw["inconclusive"]
    else:
        assert not kw.get("inconclusive") and kw["holds"] is (verdict == "holds") and kw["reason"]


def test_claim_c1_holds_fails_and_needs_enough_data():
    _check_kwargs(V.claim_c1(_rate_df(rose=-1.0), 2 ** 14), "holds")
    kw = V.claim_c1(_rate_df(rose=-0.6), 2 ** 14)
    _check_kwargs(kw, "fails")
    assert "-0.6" in kw["reason"] and "above -0.8" in kw["reason"]
    assert abs(kw["numbers"]["slope on the card's range 2^12..2^15"] + 0.6) < 0.05
    _check_kwargs(V.claim_c1(_rate_df(seeds=[0]), 2 ** 14), "inconclusive")          # one game
    _check_kwargs(V.claim_c1(_rate_df(), 2 ** 16), "inconclusive")                     # two sizes
    assert V.claim_c1(_rate_df(), 2 ** 14)["needs"] == ("K1", "K3", "K4")


def test_claim_c2_holds_and_fails_each_way():
    _check_kwargs(V.claim_c2(_rate_df(rose=-1.0, plugin=-0.5), 2 ** 14), "holds")
    kw = V.claim_c2(_rate_df(rose=-1.0, plugin=-0.1), 2 ** 14)                # plug-in outside the band
    _check_kwargs(kw, "fails")
    assert "outside" in kw["reason"]
    kw = V.claim_c2(_rate_df(rose=-0.65, plugin=-0.5), 2 ** 14)               # ROSE not steeper by 0.25
    _check_kwargs(kw, "fails")
    assert "steeper than the plug-in by only" in kw["reason"]
    _check_kwargs(V.claim_c2(_rate_df(rose=-1.0, plugin=-0.5, pnvi=-0.9), 2 ** 14), "fails")


def test_claim_c3a_holds_and_fails():
    kw = V.claim_c3a(_rate_df(sos_factor=1.0001))
    _check_kwargs(kw, "holds")
    assert kw["numbers"]["sizes passing only by the absolute clause"] == []
    kw = V.claim_c3a(_rate_df(sos_factor=1.5))
    _check_kwargs(kw, "fails")
    # the absolute clause decides where the gaps are below 1e-3: reported, so a reader sees it
    kw = V.claim_c3a(_rate_df(rose=-2.0, sos_factor=1.5))
    assert kw["numbers"]["sizes passing only by the absolute clause"]


def test_claim_c3b_holds_fails_and_floor():
    _check_kwargs(V.claim_c3b(_t_df(slope=-1.0)), "holds")
    _check_kwargs(V.claim_c3b(_t_df(slope=-0.2)), "fails")
    kw = V.claim_c3b(_t_df(slope=-8.0))            # e(T) below 1e-9 after two T values
    _check_kwargs(kw, "inconclusive")
    _check_kwargs(V.claim_c3b(_t_df(seeds=[0])), "inconclusive")


def test_claim_c4a_and_c4b():
    _check_kwargs(V.claim_c4a(_skew_df(rose=-1.0), 2 ** 14), "holds")
    _check_kwargs(V.claim_c4a(_skew_df(rose=-0.5), 2 ** 14), "fails")
    _check_kwargs(V.claim_c4b(_skew_df(ratio=3.0)), "holds")
    kw = V.claim_c4b(_skew_df(ratio=0.8))
    _check_kwargs(kw, "fails")
    assert "pessimism helps" in kw["reason"]
    _check_kwargs(V.claim_c4b(_skew_df(ns=[256, 1024])), "inconclusive")


def test_claim_c5_band():
    _check_kwargs(V.claim_c5(_beta_df(-1.0)), "holds")
    kw = V.claim_c5(_beta_df(-2.0))
    _check_kwargs(kw, "fails")
    assert "steeper than -1.5" in kw["reason"]
    _check_kwargs(V.claim_c5(_beta_df(-0.2)), "fails")
    _check_kwargs(V.claim_c5(_beta_df(betas=(0.1,))), "inconclusive")
    # the slope at other sizes is reported beside the claim, never decides it
    df = pd.concat([_beta_df(-1.0), _beta_df(-2.0).assign(n=lambda d: d.n * 4)])
    kw = V.claim_c5(df, [16384, 32768], n_report=[65536, 131072])
    _check_kwargs(kw, "holds")
    assert abs(kw["numbers"]["reported: slope"] + 2.0) < 0.05 and abs(kw["numbers"]["slope"] + 1.0) < 0.05



def _scattered(make, slopes, **kw):
    """One game per slope (game-to-game scatter of the rate), concatenated: the bootstrap over games sees it."""
    return pd.concat([make(s, seeds=[g], **kw) for g, s in enumerate(slopes)])


def test_claims_within_noise_of_their_bar_are_inconclusive():
    """Issue 41: a claim is decided by its 95% interval, not by the point estimate. Games whose rates scatter around
    a bar give an interval that contains it: inconclusive, whichever side the point estimate falls on; the same
    scatter around a value far from the bar still decides."""
    near, far = [-0.5, -1.1, -0.55, -1.05, -0.8], [-1.6, -2.2, -1.65, -2.15, -1.9]
    for claim, make in ((V.claim_c1, lambda s, **k: _rate_df(rose=s, **k)),
                        (V.claim_c4a, lambda s, **k: _skew_df(rose=s, **k))):
        kw = claim(_scattered(make, near), 2 ** 14)
        _check_kwargs(kw, "inconclusive")
        assert kw["numbers"]["ci95"][0] < -0.8 < kw["numbers"]["ci95"][1] and "within noise" in kw["inconclusive"]
        _check_kwargs(claim(_scattered(make, far), 2 ** 14), "holds")
    # C2's steepness: ROSE's slope scatters so that "steeper by >= 0.25" is within noise
    kw = V.claim_c2(_scattered(lambda s, **k: _rate_df(rose=s, plugin=-0.5, **k), [-0.5, -1.1, -0.55, -1.05, -0.75]),
                    2 ** 14)
    _check_kwargs(kw, "inconclusive")
    assert kw["numbers"]["steeper by ci95"][0] < 0.25 < kw["numbers"]["steeper by ci95"][1]
    # C5's band: per-game beta dependence scattering across -1.5
    kw = V.claim_c5(_scattered(lambda p, **k: _beta_df(p, **k), [-1.2, -1.8, -1.25, -1.75, -1.5]))
    _check_kwargs(kw, "inconclusive")
    assert kw["numbers"]["ci95"][0] < -1.5 < kw["numbers"]["ci95"][1]
    # C4b: LCB's gap 1.3x ROSE's in three games and 0.7x in two: the ratio of means is near 1, its interval spans 1
    rose = _rate_df(rose=-1.0)
    rose = rose[rose.method == "rose"]
    lcb = rose.assign(method="rose_lcb", reg_gap=rose.reg_gap * np.where(rose.seed % 2 == 0, 1.3, 0.7))
    kw = V.claim_c4b(pd.concat([rose, lcb]))
    _check_kwargs(kw, "inconclusive")
    assert "contains 1" in kw["inconclusive"]
    # C3a: SOS-MD 10 % above ROSE on average (the tolerance's edge), 0 % or 20 % game by game, gaps above 1e-3
    big = _rate_df(rose=-0.1)
    factor = np.where(big.method == "sos_md", np.where(big.seed % 2 == 0, 1.0, 1.25), 1.0)
    kw = V.claim_c3a(big.assign(reg_gap=big.reg_gap * factor))
    _check_kwargs(kw, "inconclusive")


def _cf(err=1e-11, reach=20.0):
    return dict(sep_policy_err=err, planted_policy_err=err, sep_value_err=err, planted_value_err=err,
                rho_beta_checked=[0.5, reach], betas=[0.1], n_games=64, max_iters=500)


def test_control_k1_passes_and_fails():
    kc = dict(kernel=True, solve_diff=1e-15, md_diff=1e-15, stages=10)
    assert V.control_k1(_cf(), kc, 15.0)["holds"] is True
    for cf, k, rho in [(_cf(err=1e-5), kc, 15.0), (_cf(reach=10.0), kc, 15.0),
                       (_cf(), dict(kc, md_diff=1e-6), 15.0)]:
        out = V.control_k1(cf, k, rho)
        assert out["holds"] is False and out["reason"]
    assert V.control_k1(_cf(), dict(kernel=False, solve_diff=np.nan, md_diff=np.nan, stages=3), 15.0)["holds"]


def test_control_k2_and_k3():
    assert V.control_k2(dict(dc_value_err=1e-15, exploitability=1e-15, n_games=8))["holds"] is True
    assert V.control_k2(dict(dc_value_err=1e-3, exploitability=1e-15, n_games=8))["holds"] is False
    floors = pd.DataFrame(dict(rose_reg_gap=[4e-16, 0.0], plugin_unreg_gap=[0.0, 6e-16]))
    assert V.control_k3(floors, {"ROSE": 5e-5, "plug-in": 5e-3}, H=4)["holds"] is True
    out = V.control_k3(floors, {"ROSE": 1e-13, "plug-in": 5e-3}, H=4)             # too close to the floor
    assert out["holds"] is False and "ROSE" in out["reason"]
    out = V.control_k3(floors.assign(rose_reg_gap=[1e-6, 0.0]), {"ROSE": 5e-5}, H=4)  # the zero is not a zero
    assert out["holds"] is False and "true model" in out["reason"]


def test_control_empty_k6_k7():
    assert V.control_empty(_rate_df(), [2 ** 14, 2 ** 17], "range")["holds"] is True
    out = V.control_empty(_rate_df(empty=0.02), [2 ** 14, 2 ** 17], "range")
    assert out["holds"] is False and "2%" in out["reason"]
    assert V.control_k6(_t_df())["holds"] is True
    out = V.control_k6(_t_df(slope=-12.0))                  # SOS-MD already exact at the smallest T
    assert out["holds"] is False
    assert V.control_k7(_skew_df(dist=0.5))["holds"] is True
    assert V.control_k7(_skew_df(dist=1e-6))["holds"] is False


def test_failed_control_makes_a_holding_claim_inconclusive():
    from repro.common import Ledger
    cfg = rs.Config.from_profile("smoke")
    ledger = Ledger(cfg, V.CLAIMS, controls=V.CONTROLS)
    ledger.control("K1", **V.control_k1(_cf(), dict(kernel=False, solve_diff=np.nan, md_diff=np.nan, stages=1), 1.0))
    ledger.control("K3", **V.control_k3(pd.DataFrame(dict(rose_reg_gap=[0.0], plugin_unreg_gap=[0.0])),
                                        {"ROSE": 1e-4}, H=4))
    ledger.control("K4", **V.control_empty(_rate_df(empty=0.05), [2 ** 14], "range"))
    ledger.record("C1", **V.claim_c1(_rate_df(rose=-1.0), 2 ** 14))
    assert ledger.verdict("K4") == "failed" and ledger.verdict("C1") == "inconclusive"
    assert "control K4 failed" in ledger.claims["C1"].reason


def test_regime_table_and_card_range_text():
    df = _rate_df(rose=-1.0)
    tab = V.regime_table(df)
    assert list(tab.index) == NS and np.allclose(tab["local slope to next n"].dropna(), -1.0, atol=0.2)
    text = V.card_range_text(df, 2 ** 14)
    assert "card's range 2¹²…2¹⁵" in text and "2¹⁴…2¹⁷" in text
    assert "cannot be compared" in V.card_range_text(_rate_df(ns=[256, 1024]), 256)
    assert V.n_text(2 ** 14) == "2¹⁴" and V.grid_text([256, 512, 1024]) == "{2⁸, …, 2¹⁰}"


def test_claims_and_controls_declared():
    assert list(V.CLAIMS) == ["C1", "C2", "C3a", "C3b", "C4a", "C4b", "C5"]
    assert list(V.CONTROLS) == [f"K{i}" for i in range(1, 8)]
    assert rs.CLAIMS is V.CLAIMS and rs.CONTROLS is V.CONTROLS


def test_numpy_fallback_when_kernel_missing(monkeypatch, small_instance):
    game, refs = small_instance
    d = rs.sample_dataset(game, *refs, 300, np.random.default_rng(21))
    expected = rs.rose(d, 0.1, refs, solver="numpy")
    monkeypatch.setattr(stage, "HAVE_KERNEL", False)
    assert stage.resolve_solver(None) == "numpy"
    with pytest.raises(ImportError):
        stage.resolve_solver("cpp")
    got = rs.rose(d, 0.1, refs)
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])


# ----------------------------------------------------------------------------- negative twins (issue 41): each
# control fails on a blinded apparatus run through the chapter's code (S=4, A=B=3, H=3, two games)

E = rs.experiments
_SHAPE = dict(S=4, A=3, B=3, H=3)
_NO_KERNEL = dict(kernel=False, solve_diff=float("nan"), md_diff=float("nan"), stages=0)


@pytest.fixture(scope="module")
def twin_rate():
    return E.rate_sweep(**_SHAPE, n_list=[64, 4096], seeds=[0, 1], T=30, rose_tol=1e-9)


@pytest.mark.negative_twin("K1")
def test_k1_negative_twin_solver_starved_and_range_uncovered(monkeypatch):
    """Blinded: the stage solver stopped at residual 1e-2 (starved): the closed forms are missed (policy error
    ~0.04) and K1 fails; and a run whose stage games reach rho/beta = 50 while the check covers ~10.5 fails on
    coverage. The real solver at 1e-11 over the run's range passes."""
    cf = E.closed_form_checks([0.1], 3, 3, rho_beta_max=10, tol=1e-11, n_games=16)
    assert V.control_k1(cf, _NO_KERNEL, 10)["holds"]
    out = V.control_k1(cf, _NO_KERNEL, 50)
    assert not out["holds"] and "the run reaches 50" in out["reason"]
    real = E.solve_regularized
    monkeypatch.setattr(E, "solve_regularized",
                        lambda Q, p, q, beta, tol, solver=None: real(Q, p, q, beta, tol=1e-2, solver=solver))
    out = V.control_k1(E.closed_form_checks([0.1], 3, 3, rho_beta_max=10, tol=1e-11, n_games=16), _NO_KERNEL, 10)
    assert not out["holds"] and "policy error" in out["reason"]
    assert out["numbers"]["closed form: max L1 policy error"] > 1e-4


@pytest.mark.negative_twin("K2")
def test_k2_negative_twin_lp_on_permuted_payoffs(monkeypatch):
    """Blinded: the LP solves each game with its payoff entries permuted (structure removed): value error ~1.1 and
    exploitability ~3.8 on the real games, so K2 fails; the real LP passes."""
    assert V.control_k2(E.lp_checks(3, 3))["holds"]
    real = E.zero_sum_lp_batch

    def permuted(Q):
        rng = np.random.default_rng(0)
        return real(np.stack([rng.permutation(q.ravel()).reshape(q.shape) for q in Q]))
    monkeypatch.setattr(E, "zero_sum_lp_batch", permuted)
    out = V.control_k2(E.lp_checks(3, 3))
    assert not out["holds"] and out["numbers"]["exploitability of LP solution"] > 0.1
    assert out["numbers"]["double-centred value error"] > 0.1


@pytest.mark.negative_twin("K3")
def test_k3_negative_twin_starved_floor_and_exact_data(monkeypatch, twin_rate):
    """Blinded: (a) the true-model floor computed with ROSE stopped at residual 1e-3: the 'zero' is ~2e-6 > 1e-9 and
    K3 fails; (b) the 'measured' gaps from datasets that are the true model (estimation error removed): they sit at
    the floor (margin 0 < 1000) and K3 fails. The real floor with gaps measured at n = 4096 passes (margin ~1e11)."""
    floors = E.true_model_floors(**_SHAPE, seeds=[0, 1])
    measured = {m: float(twin_rate[(twin_rate.method == m) & (twin_rate.n == 4096)]["reg_gap"].min())
                for m in ("rose", "sos_md")}
    assert V.control_k3(floors, measured, 3)["holds"]
    out = V.control_k3(E.true_model_floors(**_SHAPE, seeds=[0, 1], rose_tol=1e-3), measured, 3)
    assert not out["holds"] and "the evaluation or solver is off" in out["reason"]
    assert out["numbers"]["true-model gap, max over games"] > 1e-9
    monkeypatch.setattr(E, "make_dataset", lambda seed, n, game, mu, nu: E.exact_dataset(game))
    exact = E.rate_sweep(**_SHAPE, n_list=[4096], seeds=[0, 1], T=30, rose_tol=1e-11, methods=("rose",))
    out = V.control_k3(floors, {"ROSE on the true model": float(exact["reg_gap"].min())}, 3)
    assert not out["holds"] and "the numerical floor" in out["reason"] and out["numbers"]["smallest / floor"] < 1e3


@pytest.mark.negative_twin("K4")
def test_k4_negative_twin_data_starved(twin_rate):
    """Blinded: standard coverage at n = 64 episodes (data starved): 41 % of cells are empty and K4 fails; at
    n = 4096 none is and it passes."""
    rose = twin_rate[twin_rate.method == "rose"]
    assert V.control_empty(rose, [4096], "the fitted range")["holds"]
    out = V.control_empty(rose, [64, 4096], "the fitted range")
    assert not out["holds"] and "at n = 2^6" in out["reason"] and out["numbers"]["largest empty fraction"] > 0.2


@pytest.fixture(scope="module")
def twin_skew():
    return E.rate_sweep(**_SHAPE, n_list=[64, 256, 512, 1024, 2048, 2 ** 17], seeds=[0, 1], T=30, rose_tol=1e-9,
                        behavior_temp=0.3, methods=("rose", "rose_lcb"))


@pytest.mark.negative_twin("K5")
def test_k5_negative_twin_data_starved_under_skew(twin_skew):
    """Blinded: skewed coverage (τ_b = 0.3) at n = 64 and 2048: 57 % and 17 % of cells empty, K5 fails; at
    n = 2^17 every cell is covered and it passes."""
    rose = twin_skew[twin_skew.method == "rose"]
    assert V.control_empty(rose, [2 ** 17], "C4a's fitted range")["holds"]
    out = V.control_empty(rose, [64, 2048, 2 ** 17], "C4a's fitted range")
    assert not out["holds"] and out["numbers"]["largest empty fraction"] > 0.5
    assert out["numbers"]["empty fraction by n (max over games)"][2048] >= 0.01


@pytest.mark.negative_twin("K6")
def test_k6_negative_twin_sweep_starts_converged():
    """Blinded: a T sweep whose smallest T is 2000 (SOS-MD already converged to ROSE): the gaps agree to 1e-6 and K6
    fails; starting at T = 1 SOS-MD's gap is ~0.29 against ROSE's ~0.002 and K6 passes."""
    assert V.control_k6(E.t_sweep(**_SHAPE, n=1024, seeds=[0, 1], T_list=[1, 20], rose_tol=1e-9))["holds"]
    out = V.control_k6(E.t_sweep(**_SHAPE, n=1024, seeds=[0, 1], T_list=[2000], rose_tol=1e-9))
    assert not out["holds"] and "could not have failed" in out["reason"]
    assert out["numbers"]["relative difference"] < 0.1


@pytest.mark.negative_twin("K7")
def test_k7_negative_twin_pessimism_off(twin_skew):
    """Blinded: ROSE-LCB with bonus scale c = 0 (pessimism off) is ROSE: policy distance 0 at the four largest n and
    K7 fails; with the card's c = 0.1 the distance is ~1.8-2.1 and it passes."""
    ns = [256, 512, 1024, 2048]
    assert V.control_k7(twin_skew[twin_skew.n.isin(ns)])["holds"]
    off = E.rate_sweep(**_SHAPE, n_list=ns, seeds=[0, 1], T=30, rose_tol=1e-9, behavior_temp=0.3,
                       methods=("rose", "rose_lcb"), bonus_c=0.0)
    out = V.control_k7(off)
    assert not out["holds"] and out["numbers"]["smallest"] == 0.0


# Controls still without a negative twin (a test marked @pytest.mark.negative_twin("K…") that runs this
# chapter's code on a blinded apparatus and sees the control fail); issue 41. The contract test keeps this exact.
NEGATIVE_TWINS_PENDING = ()
