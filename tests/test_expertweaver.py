"""Unit tests of chapter 05 (ExpertWeaver): the routed MLP against the dense one, partitions and the budget rule,
the balanced-assignment kernel against its numpy reference, the knee, MAC counts, activation frequencies,
the router, the config, and every claim and control made to hold and to fail on synthetic numbers."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import repro.expertweaver as ew
from repro.common import ConfigError
from repro.expertweaver import partition as P
from repro.expertweaver import verdicts as V
from repro.expertweaver.profile import LayerProfile

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    m = ew.GPT(n_layers=2, d=32, n_heads=4, d_ff=64, context=16).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(5)            # larger weights: non-trivial activations
    rows = np.random.default_rng(0).integers(0, 256, (12, 16))
    profs = ew.profile_model(m, rows, 0.3)
    return m, rows, profs


# ----------------------------------------------------------------------------- routed MLP = dense

@pytest.mark.parametrize("method", ["expertweaver", "cmoe", "moefication", "moefication_rep", "random_split"])
def test_all_experts_on_reproduces_dense(tiny, method):
    m, rows, profs = tiny
    rs = ew.convert.convert(method, profs, [b.w_g.weight for b in m.mlps], 0.25, 8, 2, 5, np.random.default_rng(1), 10)
    full = ew.converted(m, ew.all_experts_on(rs))
    x = torch.from_numpy(rows[:4])
    assert float((full(x) - m(x)).abs().max()) <= 1e-5


def test_partition_invariants_and_budget(tiny):
    m, rows, profs = tiny
    for b in (0.5, 0.25, 0.125):
        for method in ("expertweaver", "cmoe", "random_split", "moefication_rep"):
            rs = ew.convert.convert(method, profs, [x.w_g.weight for x in m.mlps], b, 8, 2, 5, np.random.default_rng(2))
            for r in rs:
                shared = r.shared.numpy()
                routed = r.expert_of.numpy() >= 0
                assert not (shared & routed).any() and (shared | routed).all()      # disjoint and covering
                sizes = np.bincount(r.expert_of.numpy()[routed], minlength=r.n_experts)
                assert sizes.max() - sizes.min() <= 1                                # equal sizes ± 1


def test_budget_rule_keeps_every_token_within_tolerance():
    for d_ff, E in ((384, 16), (2048, 16)):        # the chapter's widths
        for b in (0.5, 0.25, 0.125):
            B = round(b * d_ff)
            for target in (0.02 * d_ff, B / 2, 0.8 * B):
                plan = P.plan_layer(target, d_ff, E, B, int(0.01 * d_ff), u_min=max(1, int(np.ceil(0.02 * d_ff))))
                assert plan.u + sum(plan.sizes) == d_ff
                assert plan.worst_deviation <= int(0.01 * d_ff), (d_ff, b, target, plan)
    p = P.plan_no_shared(384, 16, 96)
    assert p.active_range == (96, 96) and p.k == 4


def test_active_count_hook_matches_plan(tiny):
    m, rows, profs = tiny
    rs = ew.convert.convert("random_split", profs, [x.w_g.weight for x in m.mlps], 0.25, 8, 2, 5, np.random.default_rng(3))
    held = {d: np.random.default_rng(4).integers(0, 256, (3, 17)) for d in ew.DOMAINS}
    ev = ew.evaluate_loss(ew.converted(m, rs), held, count_active=True)
    assert all(a[:2] == (16, 16) for a in ev["active"])


# ----------------------------------------------------------------------------- balanced assignment kernel

def test_kernel_equals_reference_and_respects_capacity():
    if P._balanced_assign_cpp is None:
        pytest.skip("kernel not built")
    rng = np.random.default_rng(0)
    for t in range(100):
        n, e = int(rng.integers(5, 60)), int(rng.integers(2, 9))
        dist = rng.random((n, e)).astype(np.float32)
        if t % 3 == 0:
            dist = np.round(dist * 4).astype(np.float32)          # many ties: tie-breaking by flat index
        cap = np.asarray(P.expert_sizes(n, e), np.int32)
        a = P.balanced_assign(dist, cap)
        b = P.balanced_assign_ref(dist, cap)
        assert np.array_equal(a, b)
        assert np.array_equal(np.bincount(a, minlength=e), cap)


def test_balanced_kmeans_recovers_equal_blobs():
    from sklearn.metrics import adjusted_rand_score
    rng = np.random.default_rng(1)
    centres = rng.normal(0, 10, (4, 6))
    truth = np.repeat(np.arange(4), 25)
    X = centres[truth] + rng.normal(0, 0.3, (100, 6))
    labels = P.balanced_kmeans(X, (25, 25, 25, 25), 20, np.random.default_rng(0))
    assert adjusted_rand_score(truth, labels) == 1.0
    assert np.array_equal(np.bincount(labels), [25] * 4)


def test_representatives_are_closest_to_centroid():
    X = np.array([[0.0], [1.0], [2.0], [10.0], [11.0], [15.0]])
    reps = P.representatives(X, np.array([0, 0, 0, 1, 1, 1]), 2, 1)
    assert reps.tolist() == [[1], [4]]


# ----------------------------------------------------------------------------- knee, MACs, frequencies, router

def test_knee_of_a_step_function_is_the_step():
    for m in (3, 10, 40, 90):
        f = np.r_[np.ones(m), np.zeros(100 - m)]
        assert P.knee_threshold(f) == m
    assert P.knee_threshold(np.full(10, 0.5)) == 0


def test_active_macs_hand_count():
    d, d_ff = 8, 32
    assert ew.ffn_macs(d, d_ff, None) == 3 * 8 * 32
    r = ew.Routing("rep", torch.zeros(d_ff, dtype=torch.bool), torch.arange(d_ff) // 8, 4, 1,
                   reps=torch.zeros(4, 2, dtype=torch.long))
    assert ew.ffn_macs(d, d_ff, r, 8) == 3 * 8 * 8 + 4 * 2 * 8
    lin = ew.Routing("learned", r.shared, r.expert_of, 4, 1, router=torch.nn.Linear(8, 4, bias=False))
    assert ew.ffn_macs(d, d_ff, lin, 8) == 3 * 8 * 8 + 4 * 8


def test_activation_frequency_sums_to_rho_d_ff():
    a = torch.randn(200, 50)
    a[:, 7] = a[:, 8]                                     # ties
    for rho in (0.1, 0.3, 0.55):
        f = ew.activation_frequency(ew.active_mask(a, rho))
        assert abs(f.sum() - round(rho * 50)) < 1e-9
    assert np.allclose(ew.activation_frequency(ew.active_mask(a, 1.0)), 1.0)


def test_router_selects_the_expert_whose_representatives_fire():
    d_ff, E = 16, 4
    r = ew.Routing("rep", torch.zeros(d_ff, dtype=torch.bool), torch.arange(d_ff) // 4, E, 1,
                   reps=torch.arange(d_ff).view(E, 4)[:, :2])
    a = torch.rand(5, d_ff) * 0.1
    a[:, 9] = 5.0                                          # a representative of expert 2
    from repro.expertweaver.model import routing_mask
    m = routing_mask(r, torch.zeros(5, 4), a, a)
    assert torch.equal(m[:, 8:12], torch.ones(5, 4)) and float(m.sum()) == 5 * 4


def test_selectivity_and_universal():
    f = np.array([[0.95, 0.9, 0.1], [0.92, 0.1, 0.1], [0.99, 0.1, 0.4]])     # [domains, neurons]
    assert ew.universal_neurons(f).tolist() == [True, False, False]
    s = ew.selectivity_index(f)
    assert s[0] == pytest.approx(0.99 / f[:, 0].mean()) and s[1] == pytest.approx(0.9 / (1.1 / 3))


def test_data_splits_are_disjoint_and_hashed():
    c = ew.domain_corpora(arith_lines=2000)
    assert len(c.sha256) == 64 and set(c.train) == set(ew.DOMAINS)
    for d in ew.DOMAINS:
        assert len(c.heldout[d]) > 0 and len(c.train[d]) > 9 * len(c.heldout[d]) * 0.5
    b = ew.mixed_batch(c, 8, 16, np.random.default_rng(0))
    assert b.shape == (8, 17) and b.max() < 256


def test_config_rejects_bad_values():
    with pytest.raises(ConfigError, match="n_experts"):
        ew.Config.from_profile("full", n_experts=7)
    with pytest.raises(ConfigError, match="budgets"):
        ew.Config.from_profile("full", budgets=[0.3])
    with pytest.raises(ConfigError, match="budgets"):
        ew.Config.from_profile("full", budgets=[0.375])
    with pytest.raises(ConfigError, match="top_rho"):
        ew.Config.from_profile("full", top_rho=0.0)
    with pytest.raises(ConfigError, match="d_model"):
        ew.Config.from_profile("full", d_model=90)
    assert ew.Config.from_profile("smoke").d_ff == 64


# ----------------------------------------------------------------------------- verdicts hold and fail

def test_k1():
    ent = {"python": 3.0, "prose": 3.0, "arith": 2.6}
    ok = V.k1({"python": 1.5, "prose": 1.8, "arith": 1.2}, ent, {"ew": 1e-6})
    assert ok["holds"]
    assert not V.k1({"python": 2.4, "prose": 1.8, "arith": 1.2}, ent, {"ew": 1e-6})["holds"]
    assert not V.k1({"python": 1.5, "prose": 1.8, "arith": 1.2}, ent, {"ew": 1e-3})["holds"]


def test_k2():
    act = {"ew": (95, 98), "random": (96, 96)}
    assert V.k2(0.25, [2.0, 2.1, 2.05], [1.9, 2.0, 1.95], act, 384)["holds"]
    assert not V.k2(0.25, [2.0, 2.1, 2.05], [1.99, 2.08, 2.03], act, 384)["holds"]     # no headroom
    assert not V.k2(0.25, [2.0, 2.1, 2.05], [1.9, 2.0, 1.95], {"ew": (90, 98)}, 384)["holds"]


def test_k3_k4_k5():
    assert V.k3({"a": np.array([[2.0, 1.9], [2.1, 2.0]])})["holds"]
    assert not V.k3({"a": np.array([[2.0, 1.99], [2.1, 2.0]])})["holds"]
    assert V.k4(10e-6, 5e-6, "x")["holds"] and not V.k4(10e-6, 9e-6, "x")["holds"]
    assert V.k5({0.25: [10, 40]}, {0.25: [24, 24]}, 200)["holds"]
    assert not V.k5({0.25: [20, 28]}, {0.25: [24, 24]}, 200)["holds"]
    assert not V.k5({}, {}, 200)["holds"]
    assert V.c3({}, {})["inconclusive"]


def test_c1():
    kw = dict(universal_frac=[0.0, 0.08, 0.1, 0.19], universal_frac_init=[0, 0, 0, 0], selectivity=1.3, null_q95=1.1)
    assert V.c1(**kw)["holds"]
    assert not V.c1(**{**kw, "selectivity": 1.0})["holds"]
    assert not V.c1(**{**kw, "universal_frac_init": [0, 0.01, 0, 0]})["holds"]
    assert not V.c1(**{**kw, "universal_frac": [0.0, 0.01, 0.06, 0.04]})["holds"]


def test_c2_and_c3_hold_fail_and_noise():
    doms = ("python", "prose")
    ours = {d: np.array([1.0, 1.1, 1.05]) for d in doms}
    far = {"random": {d: ours[d] + np.array([0.1, 0.11, 0.1]) for d in doms}}
    assert V.c2(0.5, ours, far, doms)["holds"] is True
    miss = {"random": {d: ours[d] + np.array([0.1, -0.01, 0.1]) for d in doms}}
    assert V.c2(0.5, ours, miss, doms)["holds"] is False
    noisy = {"random": {d: ours[d] + np.array([0.001, 0.2, 0.001]) for d in doms}}
    out = V.c2(0.5, ours, noisy, doms)
    assert out["holds"] is None and out["inconclusive"]
    assert V.c3({0.25: ours["python"]}, {0.25: far["random"]["python"]})["holds"] is True
    assert V.c3({0.25: far["random"]["python"]}, {0.25: ours["python"]})["holds"] is False


def test_c4_c5():
    ew_c = np.array([[2.0, 1.8, 1.7], [2.0, 1.8, 1.7], [2.1, 1.9, 1.75]])
    base = ew_c + 0.1
    assert V.c4({"expertweaver": ew_c, "random_split": base})["holds"]
    noisy = base.copy()
    noisy[:, -1] = ew_c[:, -1] + np.array([0.001, 0.2, 0.001])
    assert V.c4({"expertweaver": ew_c, "random_split": noisy})["inconclusive"]
    late = base.copy()
    late[:, -1] = ew_c[:, -1] - 0.01
    assert not V.c4({"expertweaver": ew_c, "random_split": late})["holds"]
    lat = {"card width": "x"}
    assert V.c5({0.25: 0.25}, {0.25: 0.02}, 1.5, lat)["holds"]
    assert not V.c5({0.25: 0.25}, {0.25: 0.02}, 0.8, lat)["holds"]
    assert not V.c5({0.25: 0.3}, {0.25: 0.02}, 1.5, lat)["holds"]
    assert V.c5({0.25: 0.25}, {0.25: 0.02}, 1.5, lat, smoke=True)["inconclusive"]


def test_ledger_accepts_every_verdict_function():
    from repro.common import Ledger
    cfg = ew.Config.from_profile("smoke")
    led = Ledger(cfg, ew.CLAIMS, controls=ew.CONTROLS)
    ent = {"python": 3.0, "prose": 3.0, "arith": 2.6}
    led.control("K1", **V.k1({"python": 1.5, "prose": 1.8, "arith": 1.2}, ent, {"ew": 0.0}))
    for k in ("K2a", "K2b", "K2c"):
        led.control(k, **V.k2(0.25, [2.0], [1.9], {"ew": (96, 96)}, 384))
    led.control("K3", **V.k3({"a": np.array([[2.0, 1.9]])}))
    led.control("K4", **V.k4(2.0, 1.0, "x"))
    led.control("K5", **V.k5({0.25: [10, 40]}, {0.25: [24, 24]}, 200))
    led.record("C1", **V.c1([0.1, 0.0], [0, 0], 1.3, 1.1))
    assert led.verdict("K2a") == "failed" and led.verdict("C1") == "holds"


# Controls still without a negative twin (a test marked @pytest.mark.negative_twin("K…") that runs this
# chapter's code on a blinded apparatus and sees the control fail); issue 41. The contract test keeps this exact.
NEGATIVE_TWINS_PENDING = ('K1', 'K2a', 'K2b', 'K2c', 'K3', 'K4', 'K5')
