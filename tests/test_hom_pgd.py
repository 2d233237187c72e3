"""Tests of chapter 14 (Hom-PGD+): the QCQP family, the INN, the optimiser, the baselines, the verdicts."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from repro import hom_pgd as hp
from repro.common import ConfigError
from repro.hom_pgd import baselines as bl
from repro.hom_pgd import verdicts as V

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def fam():
    return hp.QCQPFamily(6, 4, seed=3)


def _random_inn(n=6, m=4, blocks=3, hidden=16, seed=0, ball_gauge=False):
    torch.manual_seed(seed)
    inn = hp.CondRealNVP(n, m, blocks, hidden, ball_gauge=ball_gauge)
    with torch.no_grad():
        for layer in inn.layers:
            layer.net[-1].weight.normal_(0, 0.3)
            layer.net[-1].bias.normal_(0, 0.1)
        inn.log_a.normal_(0, 0.1)
        inn.shift.normal_(0, 0.05)
    return inn


# ----------------------------------------------------------------------------- problems

def test_origin_strictly_feasible_for_every_scale(fam):
    s = torch.tensor(np.linspace(0.9, 1.1, 11)[:, None].repeat(fam.m, 1))
    g = fam.quad_constraints(torch.zeros(len(s), fam.n, dtype=torch.float64), s)
    assert (g < 0).all()
    assert (fam.violation(torch.zeros(len(s), fam.n, dtype=torch.float64), s) == 0).all()


@pytest.mark.parametrize("seed", range(8))
def test_quantile_rhs_keeps_origin_interior_for_every_seed(seed):
    fam = hp.QCQPFamily(10, 10, seed=seed)
    assert (fam.b_base > 0).all()


def test_violation_matches_direct_evaluation(fam):
    rng = np.random.default_rng(0)
    inst = fam.sample(5, rng)
    x = rng.uniform(-5, 5, (5, fam.n))
    v = fam.violation(torch.tensor(x), torch.tensor(inst.s)).numpy()
    for i in range(5):
        assert v[i] == pytest.approx(bl.max_violation(fam, x[i], inst.s[i]), abs=1e-12)
        g = [0.5 * x[i] @ fam.Qc[j] @ x[i] + fam.pc[j] @ x[i] - inst.s[i, j] * fam.b_base[j] for j in range(fam.m)]
        np.testing.assert_allclose(fam.np_constraints(x[i], inst.s[i]), g, atol=1e-12)


def test_gradients_match_finite_differences(fam):
    rng = np.random.default_rng(1)
    inst = fam.sample(1, rng)
    x = rng.standard_normal(fam.n)
    h = 1e-6
    E = np.eye(fam.n)
    fd_jac = np.stack([(fam.np_constraints(x + h * E[k], inst.s[0]) - fam.np_constraints(x - h * E[k], inst.s[0]))
                       / (2 * h) for k in range(fam.n)], 1)
    np.testing.assert_allclose(fam.np_jac_constraints(x), fd_jac, atol=1e-6)
    f = lambda y: 0.5 * y @ inst.Q[0] @ y + inst.p[0] @ y      # noqa: E731
    fd_grad = np.array([(f(x + h * E[k]) - f(x - h * E[k])) / (2 * h) for k in range(fam.n)])
    np.testing.assert_allclose(inst.Q[0] @ x + inst.p[0], fd_grad, atol=1e-6)
    xt = torch.tensor(x[None], requires_grad=True)
    hp.QCQPFamily.objective(xt, torch.tensor(inst.Q), torch.tensor(inst.p)).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy()[0], fd_grad, atol=1e-6)


def test_quantile_rhs_binds_more_than_authors():
    ours = hp.QCQPFamily(10, 10, seed=0)
    authors = hp.QCQPFamily(10, 10, seed=0, rhs="authors")
    assert hp.experiments.radial_infeasible(ours, 20_000, 0) > 0.3
    assert hp.experiments.radial_infeasible(authors, 20_000, 0) < 0.1


def test_ray_reentry_zero_for_star_shaped_and_positive_when_not():
    fam = hp.QCQPFamily(2, 1, seed=0, rhs="authors")
    fam.Qc[:] = np.eye(2)[None]           # g = ½‖x‖² − b: a disc, star-shaped
    fam.pc[:] = 0
    fam.b_base[:] = 2.0
    assert hp.ray_reentry(fam, np.ones(1), 200, np.random.default_rng(0)) == 0.0
    fam.Qc[:] = -np.eye(2)[None]          # g = −½‖x‖² + 3 x₁ − b: leaves and comes back along x₁ > 0
    fam.pc[:] = np.array([[3.0, 0.0]])
    fam.b_base[:] = 1.0
    assert hp.ray_reentry(fam, np.ones(1), 400, np.random.default_rng(0)) > 0.1


# ----------------------------------------------------------------------------- the fused constraint kernel

def _kernel_points(fam, k, seed):
    """Points inside, near and far outside the feasible set, with edge rows: 0, the box corner, on the ball."""
    g = torch.Generator().manual_seed(seed)
    x = hp.sample_ball(k, fam.n, g) * RADIUS_SPREAD[seed % len(RADIUS_SPREAD)]
    x[0] = 0.0                                              # strictly feasible: violation exactly 0
    x[1] = hp.BOX                                           # box corner: ball and quadratics violated
    x[2] = 0.0
    x[2, 0] = hp.RADIUS                                     # on the ball and the box
    x[3] = -50.0                                            # far outside
    return x.float()


RADIUS_SPREAD = (2.0, 5.0, 8.0)


@pytest.mark.parametrize("n,k", [(10, 257), (30, 64), (30, 5), (7, 6)])
def test_kernel_matches_torch_violation(n, k):
    pytest.importorskip("repro.hom_pgd._kernels", reason="kernel not built (make setup)")
    for seed in range(3):
        fam = hp.QCQPFamily(n, n if n != 7 else 4, seed=seed)
        x = _kernel_points(fam, k, seed)
        s = fam.sample_s(k, torch.Generator().manual_seed(seed))
        ref = fam.violation(x, s)
        got = fam.check_violation(x, s)
        assert got.dtype == torch.float32 and got.shape == (k,)
        assert got[0] == 0 and ref[0] == 0
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-6, atol=1e-7)
        # the verdict the check takes: identical on every point
        assert torch.equal(got <= hp.FEAS_TOL, ref <= hp.FEAS_TOL)


def test_kernel_nan_is_never_feasible_and_other_dtypes_use_torch(fam):
    pytest.importorskip("repro.hom_pgd._kernels", reason="kernel not built (make setup)")
    x = torch.zeros(5, fam.n)
    x[1, 2] = float("nan")
    x[3, 0] = float("inf")
    s = torch.ones(5, fam.m)
    v = fam.check_violation(x, s)
    assert torch.isnan(v[1]) and not bool(v[3] <= hp.FEAS_TOL)
    assert v[0] == 0 and v[2] == 0 and v[4] == 0
    xd = torch.rand(4, fam.n, dtype=torch.float64)
    assert torch.equal(fam.check_violation(xd, s[:4]), fam.violation(xd, s[:4]))   # float64: the torch path
    with pytest.raises(ValueError):
        hp.problems._kernels.violation(np.zeros((2, fam.n + 1), np.float32), np.ones((2, fam.m), np.float32),
                                       *fam.packed(), 5.0, 5.0)


def test_hom_pgd_with_kernel_equals_torch_path(monkeypatch):
    pytest.importorskip("repro.hom_pgd._kernels", reason="kernel not built (make setup)")
    fam = hp.QCQPFamily(10, 10, seed=1)
    inst = fam.sample(16, np.random.default_rng(0))
    torch.manual_seed(0)
    inn = hp.CondStarFlow(10, 10, 16, 8)
    with torch.no_grad():
        inn.net[-1].weight.normal_(0, 0.3)
    a = hp.hom_pgd(inn.map, fam, inst, 30)
    monkeypatch.setattr(hp.problems, "_kernels", None)
    b = hp.hom_pgd(inn.map, fam, inst, 30)
    assert a.bisect_rate > 0
    assert np.array_equal(a.x, b.x) and np.array_equal(a.bisect_trace, b.bisect_trace)


# ----------------------------------------------------------------------------- INN

@pytest.mark.parametrize("gauge", [False, True])
def test_inn_inverse_and_untrained_is_radial(gauge):
    inn = _random_inn(ball_gauge=gauge)
    z = hp.sample_ball(64, 6, torch.Generator().manual_seed(0)) * 0.99
    c = torch.rand(64, 4) * 2 - 1
    with torch.no_grad():
        x = inn.map(z, c)
        assert float((inn.inverse(x, c) - z).abs().max()) <= 1e-5
        fresh = hp.CondRealNVP(6, 4, 3, 16, ball_gauge=gauge)
        torch.testing.assert_close(fresh.map(z, c), 5 * z)


def test_ball_gauge_maps_the_ball_onto_the_R_ball_for_any_weights():
    inn = _random_inn(ball_gauge=True).double()
    with torch.no_grad():
        for layer in inn.layers:                       # large random weights: far from the radial map
            layer.net[-1].weight.normal_(0, 1.0)
        z = hp.sample_ball(2000, 6, torch.Generator().manual_seed(3)).double()
        c = (torch.rand(2000, 4) * 2 - 1).double()
        assert float(inn.map(z, c).norm(dim=1).max()) <= 5.0 + 1e-12
        # every interior point of the R-ball has a pre-image in the unit ball, and the round trip is exact
        v = torch.randn(500, 6, dtype=torch.float64)
        x = 5 * v / v.norm(dim=1, keepdim=True) * torch.rand(500, 1, dtype=torch.float64) ** 0.2
        zz = inn.inverse(x, c[:500])
        assert float(zz.norm(dim=1).max()) <= 1.0
        torch.testing.assert_close(inn.map(zz, c[:500]), x, atol=1e-7, rtol=1e-7)


def _random_star(n=6, m=4, hidden=16, bins=8, seed=0, scale=1.0):
    torch.manual_seed(seed)
    inn = hp.CondStarFlow(n, m, hidden, bins)
    with torch.no_grad():
        inn.net[-1].weight.normal_(0, scale)
        inn.net[-1].bias.normal_(0, 0.3 * scale)
    return inn


def test_star_flow_untrained_is_radial_and_inverse_is_exact():
    z = hp.sample_ball(64, 6, torch.Generator().manual_seed(0)).double()
    c = (torch.rand(64, 4) * 2 - 1).double()
    with torch.no_grad():
        torch.testing.assert_close(hp.CondStarFlow(6, 4, 16).double().map(z, c), 5 * z)
        inn = _random_star().double()
        x = inn.map(z, c)
        assert float((inn.inverse(x, c) - z).abs().max()) <= 1e-10
        assert float(x.norm(dim=1).max()) <= 5.0 + 1e-12
        assert float(inn.map(torch.zeros(3, 6, dtype=torch.float64), c[:3]).abs().max()) == 0.0   # Φ(0) = 0


def test_star_flow_keeps_the_sphere_exactly_in_float32():
    inn = _random_star(scale=2.0)                       # far from radial, float32 as Hom-PGD uses it
    v = torch.randn(300, 6)
    v = v / v.norm(dim=1, keepdim=True)
    c = torch.rand(300, 4) * 2 - 1
    with torch.no_grad():
        assert float((inn.map(v, c) - 5 * v).norm(dim=1).max()) <= 1e-5
        r = inn.map(0.5 * v, c).norm(dim=1)
        assert float((r - 2.5).abs().max()) > 0.05      # ... while the interior is really moved


def test_star_flow_spline_is_monotone_with_pinned_ends():
    inn = _random_star(scale=3.0).double()
    v = torch.randn(50, 6, dtype=torch.float64)
    v = v / v.norm(dim=1, keepdim=True)
    c = (torch.rand(50, 4) * 2 - 1).double()
    w, h, d = inn.spline_params(v, c)
    r = torch.linspace(0, 1, 401, dtype=torch.float64)
    rho = torch.stack([hp.inn.rq_spline(torch.full((50,), float(t), dtype=torch.float64), w, h, d)[0] for t in r], 1)
    assert float(rho[:, 0].abs().max()) <= 1e-12 and float((rho[:, -1] - 1).abs().max()) <= 1e-12
    assert bool((rho.diff(dim=1) > 0).all())


def test_star_flow_logdet_matches_autograd_jacobian():
    inn = _random_star().double()
    z = hp.sample_ball(8, 6, torch.Generator().manual_seed(1)).double()
    c = (torch.rand(8, 4, generator=torch.Generator().manual_seed(2)) * 2 - 1).double()
    _, logdet, dist = inn(z, c)
    for i in range(8):
        J = torch.autograd.functional.jacobian(lambda u: inn.map(u[None], c[i:i + 1])[0], z[i])
        assert float(logdet[i].detach()) == pytest.approx(float(torch.linalg.slogdet(J)[1] - 6 * np.log(5.0)), abs=1e-8)
        # in polar coordinates J is triangular: radial stretch v'Jv/R = ρ', tangential u'Ju/R = ρ/r (u ⟂ v)
        v = z[i] / z[i].norm()
        u = torch.randn(6, dtype=torch.float64)
        u = u - (u @ v) * v
        u = u / u.norm()
        stretch = torch.stack([v @ J @ v, u @ J @ u]) / 5
        assert float(dist[i].detach()) == pytest.approx(float(torch.log(stretch).max()), abs=1e-8)


def test_reach_misses_rule(fam):
    """The K2 rule: the star flow reaches every point of the R-sphere (z = x/R); the gauge-wrapped coupling flow
    misses sphere points when its flow contracts at large radii; a map that shrinks its image misses them badly."""
    rng = np.random.default_rng(0)
    inst = fam.sample(40, rng)
    v = rng.normal(size=(40, fam.n))
    x = 5 * v / np.linalg.norm(v, axis=1, keepdims=True)
    star = _random_star(n=fam.n, m=fam.m, scale=2.0)
    assert hp.reach_misses(star, fam, x, inst.s).max() <= 1e-5
    assert (hp.preimage_norms(star, fam, x, inst.s) <= 1 + 1e-9).all()
    wrapped = hp.CondRealNVP(fam.n, fam.m, 3, 16, ball_gauge=True)
    with torch.no_grad():
        wrapped.log_a.fill_(np.log(0.3))                 # F contracts: the sphere is reached only at huge |y|
    d = hp.reach_misses(wrapped, fam, x, inst.s)
    assert d.min() > 5 * hp.REACH_TAU                    # not reachable within tau from radius 1 - 1e-6
    assert (hp.preimage_norms(wrapped, fam, x, inst.s) <= 1).all()   # ... though the literal test passes
    plain = hp.CondRealNVP(fam.n, fam.m, 3, 16)
    with torch.no_grad():
        plain.log_a.fill_(np.log(0.5))                   # image = half the R-ball
    assert hp.reach_misses(plain, fam, x, inst.s) == pytest.approx(np.full(40, 2.5), abs=1e-5)
    assert (hp.preimage_norms(plain, fam, x, inst.s) > 1).all()


@pytest.mark.parametrize("gauge", [False, True])
def test_logdet_matches_autograd_jacobian(gauge):
    inn = _random_inn(ball_gauge=gauge).double()
    z = hp.sample_ball(8, 6, torch.Generator().manual_seed(1)).double()
    c = (torch.rand(8, 4, generator=torch.Generator().manual_seed(2)) * 2 - 1).double()
    _, logdet, _ = inn(z, c)
    for i in range(8):
        J = torch.autograd.functional.jacobian(lambda v: inn.map(v[None], c[i:i + 1])[0], z[i])
        ref = torch.linalg.slogdet(J)[1] - 6 * np.log(5.0)     # logdet excludes the constant n log 5
        assert float(logdet[i].detach()) == pytest.approx(float(ref), abs=1e-4)


def test_sample_ball_is_uniform_radius():
    z = hp.sample_ball(50_000, 4, torch.Generator().manual_seed(0))
    r = z.norm(dim=1)
    assert float(r.max()) <= 1 + 1e-6
    assert float((r <= 0.5).float().mean()) == pytest.approx(0.5 ** 4, abs=0.01)


def test_training_is_deterministic_and_lowers_penalty(fam):
    torch.manual_seed(0)
    a, ra = hp.train_mdh(hp.CondRealNVP(6, 4, 2, 16), fam, 60, 64, seed=5, checkpoints=(30, 60))
    torch.manual_seed(0)
    b, rb = hp.train_mdh(hp.CondRealNVP(6, 4, 2, 16), fam, 60, 64, seed=5)
    assert ra.history["loss"] == rb.history["loss"]
    assert set(ra.checkpoints) == {30, 60}
    assert hp.eps_inn(a.map, fam, 5000, 0) < hp.eps_inn(hp.radial_map(5.0), fam, 5000, 0)


# ----------------------------------------------------------------------------- optimiser

def test_proj_ball_properties():
    z = torch.randn(200, 5) * 2
    p = hp.proj_ball(z)
    torch.testing.assert_close(hp.proj_ball(p), p)
    inside = z.norm(dim=1) <= 1
    torch.testing.assert_close(p[inside], z[inside])
    out = ~inside
    torch.testing.assert_close(p[out].norm(dim=1), torch.ones(int(out.sum())))
    # nearest point: no other point of the ball (random samples) is closer
    q = hp.sample_ball(2000, 5, torch.Generator().manual_seed(0))
    for i in torch.nonzero(out).flatten()[:10]:
        assert float((z[i] - p[i]).norm()) <= float((z[i] - q).norm(dim=1).min()) + 1e-6


def test_segment_bisection_feasible_and_near_grid_optimum(fam):
    inn = _random_inn()
    gen = torch.Generator().manual_seed(3)
    s = fam.sample_s(20, gen)
    c = fam.condition(s)
    z_to = torch.randn(20, 6, generator=gen)
    z_to = z_to / z_to.norm(dim=1, keepdim=True)
    z_from = torch.zeros(20, 6)
    ok0 = fam.violation(inn.map(z_from, c), s) <= hp.FEAS_TOL
    z_from, z_to, s, c = z_from[ok0], z_to[ok0], s[ok0], c[ok0]
    steps = 10
    with torch.no_grad():
        zb, t = hp.segment_bisection(inn.map, fam, z_from, z_to, c, s, steps)
        assert (fam.violation(inn.map(zb, c), s) <= hp.FEAS_TOL).all()
        grid = torch.linspace(0, 1, 1000)
        for i in range(len(zb)):
            pts = z_from[i] + grid[:, None] * (z_to[i] - z_from[i])
            feas = (fam.violation(inn.map(pts, c[i].expand(1000, -1)), s[i].expand(1000, -1)) <= hp.FEAS_TOL).numpy()
            first_bad = np.argmin(feas) if not feas.all() else 999
            t_grid = float(grid[max(first_bad - 1, 0)])     # the feasible prefix found by the grid
            assert float(t[i]) >= t_grid - 2.0 ** -steps - 1e-3


class _Ball:
    """C = the unit ball, no conditioning: Hom-PGD with Φ = id is plain PGD."""

    n, m, radius = 3, 1, 1.0

    @staticmethod
    def condition(s):
        return torch.as_tensor(s, dtype=torch.float32)

    def violation(self, x, s):
        return (x.double().norm(dim=1) - 1).clamp_min(0).to(x.dtype)

    objective = staticmethod(hp.QCQPFamily.objective)


def test_identity_map_reduces_to_pgd_and_matches_cvxpy():
    import cvxpy as cp
    rng = np.random.default_rng(0)
    A = rng.standard_normal((3, 3))
    Q = A @ A.T + 0.5 * np.eye(3)
    p = np.array([2.0, -1.5, 1.0])
    x = cp.Variable(3)
    cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, Q) + p @ x), [cp.norm(x) <= 1]).solve()
    inst = hp.Instances(np.ones((1, 1)), Q[None], p[None])
    r = hp.hom_pgd(lambda z, c: z, _Ball(), inst, 3000, lr=0.1, decay=1.0)
    assert r.bisect_rate == 0.0
    np.testing.assert_allclose(r.x[0], x.value, atol=1e-4)


def test_hom_pgd_iterates_are_feasible(fam):
    inn = _random_inn()
    inst = fam.sample(16, np.random.default_rng(2))
    r = hp.hom_pgd(inn.map, fam, inst, 30)
    ok = r.z0_feasible
    assert (r.viol[ok] <= hp.FEAS_TOL).all()
    assert r.g2_trace.shape == (31, 16) and r.f_trace.shape == (31, 16)
    assert np.all(np.diff(np.minimum.accumulate(r.g2_trace, 0), axis=0) <= 0)


def test_gradient_mapping_zero_at_interior_stationary_point():
    z = torch.tensor([[0.2, -0.1]])
    assert float(hp.gradient_mapping(z, torch.zeros_like(z), 0.1).abs().max()) == 0.0
    z = torch.tensor([[1.0, 0.0]])                    # on the sphere, gradient pointing inward-normal: stationary
    assert float(hp.gradient_mapping(z, torch.tensor([[-3.0, 0.0]]), 0.1).abs().max()) < 1e-7


# ----------------------------------------------------------------------------- baselines

def test_shor_bound_below_slsqp(fam):
    inst = fam.sample(10, np.random.default_rng(4))
    res = bl.slsqp_batch(fam, inst, 3, seed=0)
    for i, r in enumerate(res):
        if r.viol <= 1e-6:
            assert bl.shor_sdp_bound(fam, inst.Q[i], inst.p[i], inst.s[i]) <= r.f + 1e-6


def test_slsqp_analytic_and_finite_difference_agree(fam):
    inst = fam.sample(3, np.random.default_rng(6))
    for i in range(3):
        x0 = np.full(fam.n, 0.1)
        xa, _ = bl.slsqp_single(fam, inst.Q[i], inst.p[i], inst.s[i], x0)
        xf, _ = bl.slsqp_single(fam, inst.Q[i], inst.p[i], inst.s[i], x0, analytic=False)
        f = lambda x: 0.5 * x @ inst.Q[i] @ x + inst.p[i] @ x     # noqa: E731
        assert f(xa) == pytest.approx(f(xf), rel=1e-4, abs=1e-6)


def test_exact_projection_and_alm_run(fam):
    inst = fam.sample(2, np.random.default_rng(7))
    r = bl.pgd_exact_projection(fam, inst, 0, 5, lr=1.0)
    assert r["viol"] <= 1e-5 and r["f"][-1] <= 0
    a = bl.penalty_alm(fam, inst, 50)
    assert a["x"].shape == (2, fam.n)


# ----------------------------------------------------------------------------- config

@pytest.mark.parametrize("kw", [dict(n_var=1), dict(n_var="10"), dict(checkpoints=[100, 50, 4000]),
                                dict(checkpoints=[250, 1000]), dict(lr_latent=-1.0), dict(slsqp_starts=30),
                                dict(n_sdp=1000), dict(widths_sweep=[32]), dict(bogus=1)])
def test_config_rejects_bad_values(kw):
    with pytest.raises(ConfigError):
        hp.Config.from_profile("full", **kw)


def test_config_profiles():
    assert hp.Config.from_profile("smoke").n_var == 4
    assert hp.Config.from_profile("full").checkpoints == (250, 1000, 4000)


# ----------------------------------------------------------------------------- verdicts

def _k1(active, radial, reentry, instances=1024):
    return {10: dict(active=active, instances=instances, radial_infeasible=radial, reentry=reentry),
            30: dict(active=0.5, instances=1024, radial_infeasible=0.4, reentry=0.0)}


def test_k1():
    assert V.k1(_k1(0.5, 0.4, 0.0))["holds"]
    assert not V.k1(_k1(0.3, 0.4, 0.0))["holds"]
    assert not V.k1(_k1(0.5, 0.2, 0.0))["holds"]
    assert not V.k1(_k1(0.5, 0.4, 0.05))["holds"]
    # 45 % of 64 optima: the Wilson interval straddles 40 %, so the control cannot pass on it; of 2048 it clears
    assert not V.k1(_k1(0.45, 0.4, 0.0, instances=64))["holds"]
    assert V.k1(_k1(0.45, 0.4, 0.0, instances=2048))["holds"]


def test_wilson_interval():
    lo, hi = V.wilson(50, 100)
    assert lo < 0.5 < hi and hi - lo == pytest.approx(2 * 1.96 * 0.05, rel=0.05)
    assert V.wilson(0, 10)[0] == 0.0 and V.wilson(10, 10)[1] == 1.0


def test_k2():
    assert V.k2(0.05, 0.4, 0.9)["holds"]
    assert not V.k2(0.25, 0.4, 0.9)["holds"]
    assert not V.k2(0.05, 0.4, 0.5)["holds"]
    r = V.k2(0.05, 0.4, 0.79, coverage_literal=1.0, median_miss=0.02)
    assert not r["holds"] and r["numbers"]["reach tolerance"] == pytest.approx(5e-3)


def test_k5():
    assert V.k5(1e-13, 100, 0.0, 1000)["holds"]
    assert not V.k5(1e-6, 100, 0.0, 1000)["holds"]
    assert not V.k5(1e-13, 100, 1e-3, 1000)["holds"]
    assert not V.k5(float("nan"), 100, 0.0, 1000)["holds"]


def test_k3():
    good = dict(sdp_minus_ref=[-1e-3, 0.0], best5=[-1.0] * 10, best20=[-1.0] * 10, slsqp_ms=1.0, slsqp_fd_ms=5.0,
                gap_n30=0.05, z0_feasible=1.0)
    assert V.k3(**good)["holds"]
    assert not V.k3(**{**good, "sdp_minus_ref": [1e-3]})["holds"]
    assert not V.k3(**{**good, "best20": [-1.1] * 10})["holds"]
    assert not V.k3(**{**good, "gap_n30": 0.2})["holds"]
    assert not V.k3(**{**good, "gap_n30": None})["holds"]
    assert not V.k3(**{**good, "z0_feasible": 0.99})["holds"]


def test_k4():
    rng = np.random.default_rng(0)
    falling = np.concatenate([np.linspace(1, 0.2, 1000), 0.2 + 0.01 * rng.standard_normal(3000)])
    assert V.k4(falling, 250)["holds"]
    flat = 0.2 + 0.01 * rng.standard_normal(4000)
    assert not V.k4(flat, 250)["holds"]


def test_c1():
    assert V.c1([0.0, 1e-6], [True, True])["holds"]
    assert not V.c1([0.0, 2e-5], [True, True])["holds"]


def test_c2():
    assert V.c2([0.01] * 950 + [0.2] * 50)["holds"] is True
    assert V.c2([0.01] * 600 + [0.2] * 400)["holds"] is False
    r = V.c2([0.01] * 9 + [0.2])            # 90 % of 10: the interval covers 80 %
    assert r["holds"] is None and "within noise" in r["inconclusive"]


def _rounds(slsqp_ms, hom_ms, spread=0.01, k=5):
    """Five timing repeats per side, the fastest equal to the given time, the others up to ``spread`` slower."""
    up = 1 + spread * np.linspace(0, 1, k)
    return (slsqp_ms * up, hom_ms * up[::-1])


def test_c3():
    rounds = {10: _rounds(1.0, 10.0), 30: _rounds(5.0, 10.0), 60: _rounds(20.0, 10.0)}
    assert V.c3a({10: 0.1, 30: 0.5, 60: 2.0}, rounds=rounds)["holds"] is True
    shrinks = {10: _rounds(1.0, 10.0), 30: _rounds(0.5, 10.0), 60: _rounds(20.0, 10.0)}
    assert V.c3a({10: 0.1, 30: 0.05, 60: 2.0}, rounds=shrinks)["holds"] is False
    assert V.c3a({10: 0.1}, smoke=True)["holds"] is None
    assert V.c3b(6.0, 100.0, rounds=_rounds(6.0, 1.0))["holds"] is True
    assert V.c3b(0.5, float("inf"), rounds=_rounds(0.5, 1.0))["holds"] is False


def test_c3_timings_within_noise_or_without_repeats_are_inconclusive():
    # n = 10 -> 30: fastest ratios 0.100 -> 0.102 (the old rule: grows), but the repeats spread 80 %
    noisy = {10: _rounds(1.0, 10.0, 0.8), 30: _rounds(1.02, 10.0, 0.8), 60: _rounds(20.0, 10.0)}
    r = V.c3a({10: 0.1, 30: 0.102, 60: 2.0}, rounds=noisy)
    assert r["holds"] is None and "within noise" in r["inconclusive"]
    assert r["numbers"]["log-ratio change n=10->30 ci95"][0] < 0 < r["numbers"]["log-ratio change n=10->30 ci95"][1]
    r = V.c3a({10: 0.1, 30: 0.5, 60: 2.0})            # no repeats passed: no interval, no verdict
    assert r["holds"] is None and "no repeat timings" in r["inconclusive"]
    # n = 30: fastest ratio 5.1 >= 5 (the old rule: holds), but the repeats' interval spans 5
    r = V.c3b(5.1, None, rounds=(5.1 * np.array([1, 1.1, 1.2, 1.3, 1.4]), np.array([1.0, 1.1, 1.2, 1.3, 1.4])))
    assert r["holds"] is None and "within noise" in r["inconclusive"]
    lo, hi = r["numbers"]["ratio n=30 ci95"]
    assert lo < 5 < hi
    assert V.c3b(6.0, 100.0)["holds"] is None


def _g2(rate, k_inst=40, seed=0):
    rng = np.random.default_rng(seed)
    k = np.arange(301)[:, None]
    return (1.0 / (k + 1.0) ** rate) * rng.uniform(0.5, 2.0, (1, k_inst))


def test_c4():
    g = np.ones(40, bool)
    assert V.c4(_g2(1.2), g, "free")["holds"] is True
    assert V.c4(_g2(0.3), g, "free")["holds"] is False
    assert V.c4(np.full((301, 40), 1e-12), g, "free")["holds"] is None
    few = np.zeros(40, bool)
    few[:3] = True
    assert V.c4(_g2(1.2), few, "stalled")["holds"] is None


def test_c7():
    rng = np.random.default_rng(0)
    inn = rng.uniform(0, 0.02, 200)
    worse = inn + rng.uniform(0.01, 0.05, 200)
    assert V.c7(inn, worse, "gauge", ("K5",))["holds"] is True
    assert V.c7(worse, inn, "gauge", ("K5",))["holds"] is False
    assert V.c7(inn, inn + rng.normal(0, 0.01, 200), "gauge", ("K5",))["holds"] is None


def _c5(eps, unreach, med, eps_samples=100_000, instances=256, noise=None):
    """C5 with per-instance gaps whose medians are ``med``: the same instances at each checkpoint (a shared
    per-instance offset), plus independent ``noise`` per checkpoint if given."""
    rng = np.random.default_rng(0)
    base = rng.normal(0, 0.01, instances)
    gaps = [m + base + (0 if noise is None else rng.normal(0, noise, instances)) for m in med]
    gaps = [g - np.median(g) + m for g, m in zip(gaps, med)]
    return V.c5([1, 2, 3], eps, unreach, med, eps_samples=eps_samples, instances=instances, gaps=gaps)


def test_c5():
    assert _c5([0.3, 0.2, 0.1], [0.5, 0.4, 0.3], [0.2, 0.1, 0.1])["holds"] is True
    assert _c5([0.3, 0.2, 0.25], [0.5, 0.4, 0.3], [0.2, 0.1, 0.1])["holds"] is False
    assert _c5([0.3, 0.2, 0.1], [0.5, 0.4, 0.3], [0.1, 0.2, 0.1])["holds"] is False
    assert _c5([0.3, 0.2, 0.1], [0.5, 0.6, 0.3], [0.2, 0.1, 0.1])["holds"] is False
    # unreachable fraction 0 throughout (reached by construction): at its floor, decides nothing
    ok = _c5([0.3, 0.2, 0.1], [0.0, 0.0, 0.0], [0.2, 0.1, 0.1])
    assert ok["holds"] is True and "decides nothing" in ok["reason"]
    assert _c5([0.3, 0.35, 0.1], [0.0, 0.0, 0.0], [0.2, 0.1, 0.1])["holds"] is False
    # a median gap at the float32 floor: a rise of 1e-7 is rounding, a rise of 1e-4 is not
    assert _c5([0.3, 0.2, 0.1], [0.0, 0.0, 0.0], [-3e-8, 4e-8, 5e-8])["holds"] is True
    assert _c5([0.3, 0.2, 0.1], [0.0, 0.0, 0.0], [1e-5, 1e-4, 1e-4])["holds"] is False


def test_c5_steps_within_noise_are_inconclusive():
    # an unchanged fraction (the old rule: fails) and a fall measured on too few samples are within noise
    r = _c5([0.3, 0.3, 0.1], [0.0, 0.0, 0.0], [0.2, 0.1, 0.1])
    assert r["holds"] is None and "eps ball 1 → 2" in r["inconclusive"]
    r = _c5([0.3, 0.2, 0.1], [0.0, 0.0, 0.0], [0.2, 0.1, 0.1], eps_samples=40)
    lo, hi = r["numbers"]["eps ball step ci95"][0]
    assert r["holds"] is None and lo < 0 < hi and "within noise" in r["inconclusive"].lower()
    assert _c5([0.5, 0.4, 0.3], [0.5, 0.5, 0.3], [0.2, 0.1, 0.1], instances=64)["holds"] is None
    # equal medians, instances that move independently: the rise's interval straddles 1e-6 (old rule: holds)
    r = _c5([0.3, 0.2, 0.1], [0.0, 0.0, 0.0], [0.2, 0.1, 0.1], noise=0.01)
    lo, hi = r["numbers"]["median gap rise ci95"][1]
    assert r["holds"] is None and lo < 1e-6 < hi
    # no counts or per-instance gaps passed: no interval, no verdict
    assert V.c5([1, 2, 3], [0.3, 0.2, 0.1], [0.5, 0.4, 0.3], [0.2, 0.1, 0.1])["holds"] is None


def test_c6():
    W = [1e4, 3e4, 1e5, 4e5]
    line = np.array([0.03 + 1e-7 * w for w in W])
    rounds = line * np.linspace(1, 1.02, 5)[:, None]
    assert V.c6(W, line, rounds=rounds)["holds"] is True
    bad = np.array([0.05, 0.01, 0.06, 0.02])
    assert V.c6(W, bad, rounds=bad * np.linspace(1, 1.02, 5)[:, None])["holds"] is False
    assert V.c6(W, [0.1] * 4, smoke=True)["holds"] is None


def test_c6_r2_within_noise_is_inconclusive():
    W = [1e4, 3e4, 1e5, 4e5]
    line = np.array([0.03 + 1e-8 * w for w in W])            # 30, 30.3, 31, 34 ms: a weak slope
    rng = np.random.default_rng(2)
    rounds = line * (1 + rng.uniform(0, 0.1, (5, 4)))        # repeats up to 10 % slower
    rounds[0] = line                                         # the fastest: exactly the line (R² = 1)
    r = V.c6(W, rounds.min(0), rounds=rounds)
    lo, hi = r["numbers"]["R2 ci95"]
    assert r["numbers"]["R2"] >= 0.9 and lo < 0.9 <= hi
    assert r["holds"] is None and "within noise" in r["inconclusive"]
    assert V.c6(W, line)["holds"] is None                    # no rounds passed


# ----------------------------------------------------------------------------- the exact gauge map

def test_exit_radius_matches_bisection_and_gauge_map_fills_C(fam):
    rng = np.random.default_rng(0)
    out = bl.gauge_exactness(fam, 200, rng)
    assert out["max_abs_err"] <= 1e-9 and out["cut_rays"] > 0
    phi = bl.gauge_map(fam)
    assert hp.eps_inn(phi, fam, 5000, 1) == 0.0
    # x = rho(v) z: the sphere goes to the boundary of C, the centre stays at 0 with a finite gradient
    s = fam.sample_s(16, torch.Generator().manual_seed(2))
    z = torch.nn.functional.normalize(torch.randn(16, fam.n, generator=torch.Generator().manual_seed(3)), dim=1)
    x = phi(z.double(), fam.condition(s)).double()
    g = fam.all_constraints(x, s.double()).amax(1)
    assert torch.allclose(g, torch.zeros_like(g), atol=1e-6)
    z0 = torch.zeros(4, fam.n, requires_grad=True)
    y = phi(z0, fam.condition(s[:4]))
    (grad,) = torch.autograd.grad(y.sum(), z0)
    assert torch.isfinite(grad).all() and float(y.abs().max()) == 0.0


def test_gauge_pgd_is_feasible_and_uses_the_same_optimiser(fam):
    inst = fam.sample(8, np.random.default_rng(4))
    r = bl.gauge_pgd(fam, inst, 30)
    assert (r.viol <= hp.FEAS_TOL).all() and r.iters == 30
    r2 = hp.hom_pgd(bl.gauge_map(fam), fam, inst, 30)
    np.testing.assert_allclose(r.f, r2.f)


# ----------------------------------------------------------------------------- negative twins (issue 41)

@pytest.mark.negative_twin("K1")
def test_k1_fails_when_the_constraints_do_not_bind():
    """The K1 measurement (fresh SLSQP optima, the radial map's infeasible share, re-entering rays) on the authors'
    right-hand sides, under which the quadratic constraints barely bind: K1 must fail there."""
    from repro.hom_pgd import experiments as ex
    cfg = hp.Config.from_profile("smoke", k1_instances=48)
    blind = hp.QCQPFamily(10, 10, 0, rhs="authors")
    active, k = ex.k1_active(blind, cfg.k1_instances, 0)
    per_n = {10: dict(active=active, instances=k, radial_infeasible=ex.radial_infeasible(blind, 5000, 7),
                      reentry=hp.ray_reentry(blind, np.ones(10), 200, np.random.default_rng(8)))}
    assert not V.k1(per_n)["holds"]


@pytest.mark.negative_twin("K2")
def test_k2_fails_for_an_untrained_map(fam):
    """An untrained Φ is the radial map: its ε_inn equals the radial map's, so K2 must fail."""
    from repro.hom_pgd import experiments as ex
    cfg = hp.Config.from_profile("smoke")
    inn = ex.build_inn(cfg, fam.n, fam.m)
    eps = hp.eps_inn(inn.map, fam, 5000, 5)
    eps_rad = ex.radial_infeasible(fam, 5000, 5)
    inst = fam.sample(6, np.random.default_rng(1))
    ref = ex.reference(fam, inst, 2, 1)
    miss = hp.reach_misses(inn, fam, ref.x, inst.s)
    r = V.k2(eps, eps_rad, float((miss <= hp.REACH_TAU * fam.radius).mean()), radius=fam.radius)
    assert eps_rad > 0 and not r["holds"]


@pytest.mark.negative_twin("K3")
def test_k3_fails_when_the_sdp_bound_sees_the_wrong_instance(fam):
    """The Shor bound of each instance computed with the next instance's objective (items shuffled) is no lower
    bound: K3 must fail; with the right objectives the same code passes its SDP check."""
    from repro.hom_pgd import experiments as ex
    inst = fam.sample(6, np.random.default_rng(2))
    ref = ex.reference(fam, inst, 3, 1)
    ok = np.array([bl.shor_sdp_bound(fam, inst.Q[i], inst.p[i], inst.s[i]) for i in range(6)])
    j = np.roll(np.arange(6), 1)
    bad = np.array([bl.shor_sdp_bound(fam, inst.Q[j[i]], inst.p[j[i]], inst.s[i]) for i in range(6)])
    args = dict(best5=ref.f, best20=ref.f, slsqp_ms=1.0, slsqp_fd_ms=2.0, gap_n30=0.05, z0_feasible=1.0)
    assert V.k3(ok - ref.f, **args)["holds"]
    assert not V.k3(bad - ref.f, **args)["holds"]


@pytest.mark.negative_twin("K4")
def test_k4_fails_when_training_is_frozen(fam):
    """MDH training with a zero learning rate moves nothing: K4 must fail (the full profile shows it passing)."""
    from repro.hom_pgd import experiments as ex
    cfg = hp.Config.from_profile("smoke")
    _, frozen = hp.train_mdh(ex.build_inn(cfg, fam.n, fam.m), fam, 200, 64, 0, lr=0.0)
    assert not V.k4(frozen.history["loss"], 50)["holds"]


@pytest.mark.negative_twin("K5")
def test_k5_fails_for_an_exit_radius_of_shuffled_scale_factors(fam):
    """The closed form evaluated with the scale factors of other rays (permuted per item) is not the exit radius:
    K5 must fail; the real closed form passes."""
    def shuffled(family, v, s):
        return bl.exit_radius(family, v, s[torch.randperm(len(s), generator=torch.Generator().manual_seed(0))])
    blind = bl.gauge_exactness(fam, 200, np.random.default_rng(0), radius_fn=shuffled)
    real = bl.gauge_exactness(fam, 200, np.random.default_rng(0))
    assert not V.k5(blind["max_abs_err"], 200, 0.0, 1000)["holds"]
    assert V.k5(real["max_abs_err"], 200, hp.eps_inn(bl.gauge_map(fam), fam, 5000, 1), 5000)["holds"]


NEGATIVE_TWINS_PENDING = ()
