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


def _boot(u, sd=0.003, n=500):
    """Bootstrap draws of per-layer universal fractions scattered by ``sd`` around ``u``."""
    u = np.asarray(u, float)
    return u + np.random.default_rng(0).normal(0, 1, (n, u.size)) * np.broadcast_to(sd, u.shape)


def test_c1():
    u = [0.0, 0.08, 0.1, 0.19]
    kw = dict(universal_frac=u, universal_frac_init=[0, 0, 0, 0], selectivity=1.3, null_q95=1.1,
              universal_boot=_boot(u))
    assert V.c1(**kw)["holds"]
    assert not V.c1(**{**kw, "selectivity": 1.0})["holds"]
    assert not V.c1(**{**kw, "universal_frac_init": [0, 0.01, 0, 0]})["holds"]
    low = [0.0, 0.01, 0.06, 0.04]
    f = V.c1(**{**kw, "universal_frac": low, "universal_boot": _boot(low)})
    assert f["holds"] is False and f["inconclusive"] is None


def test_c1_layer_fractions_within_noise_of_the_bar_are_inconclusive():
    # issue 41: two layers sit at 5.5 % and 6 % (point estimates clear 5 %) but their intervals contain 5 %
    u = [0.0, 0.055, 0.06, 0.01]
    kw = dict(universal_frac=u, universal_frac_init=[0, 0, 0, 0], selectivity=1.3, null_q95=1.1)
    r = V.c1(**kw, universal_boot=_boot(u, sd=[0.003, 0.01, 0.01, 0.003]))
    assert r["holds"] is None and "within noise of the bar" in r["inconclusive"]
    # the same fractions measured tightly decide
    assert V.c1(**kw, universal_boot=_boot(u, sd=0.001))["holds"] is True
    # a spread whose interval contains 5 points
    u2 = [0.06, 0.08, 0.1, 0.105]
    r = V.c1(**{**kw, "universal_frac": u2}, universal_boot=_boot(u2, sd=[0.002, 0.002, 0.002, 0.02]))
    assert r["holds"] is None and "spans" in r["inconclusive"]
    # without bootstrap draws there is no interval: nothing is decided on the point estimate
    assert V.c1(**{**kw, "universal_frac": [0.0, 0.08, 0.1, 0.19]})["holds"] is None


def test_universal_fraction_bootstrap_matches_the_point_and_resamples_sequences():
    from repro.expertweaver.profile import frequency_by_domain, universal_fraction_bootstrap, universal_neurons
    rng = np.random.default_rng(1)
    seq_dom, T_, d_ff = np.repeat(np.arange(3), 10), 8, 40
    p = np.r_[np.full(10, 0.995), np.full(10, 0.9), rng.uniform(0, 0.5, 20)]     # 10 clearly, 10 borderline
    act = [torch.from_numpy(rng.random((30 * T_, d_ff)) < p) for _ in range(2)]
    B = universal_fraction_bootstrap(act, seq_dom, T_, n_boot=400, rng=0)
    point = [universal_neurons(frequency_by_domain(a, seq_dom, T_)).mean() for a in act]
    assert B.shape == (400, 2) and np.all((B >= 0.25 - 1e-12) & (B <= 0.5 + 1e-12))
    assert np.all(np.percentile(B, 2.5, 0) <= point) and np.all(point <= np.percentile(B, 97.5, 0))
    assert np.all(B.std(0) > 0)           # the borderline neurons move between draws
    assert np.array_equal(B, universal_fraction_bootstrap(act, seq_dom, T_, n_boot=400, rng=0))


def test_c2_and_c3_hold_fail_and_noise():
    doms = ("python", "prose")
    ours = {d: np.array([1.0, 1.1, 1.05]) for d in doms}
    far = {"random": {d: ours[d] + np.array([0.1, 0.11, 0.1]) for d in doms}}
    assert V.c2(0.5, ours, far, doms)["holds"] is True
    worse = {"random": {d: ours[d] - np.array([0.1, 0.11, 0.1]) for d in doms}}
    out = V.c2(0.5, ours, worse, doms)
    assert out["holds"] is False and out["inconclusive"] is None
    noisy = {"random": {d: ours[d] + np.array([0.001, 0.2, 0.001]) for d in doms}}
    out = V.c2(0.5, ours, noisy, doms)
    assert out["holds"] is None and out["inconclusive"]
    assert V.c3({0.25: ours["python"]}, {0.25: far["random"]["python"]})["holds"] is True
    assert V.c3({0.25: far["random"]["python"]}, {0.25: ours["python"]})["holds"] is False


def test_seed_count_missed_inside_noise_is_inconclusive():
    # issue 41: lower in 2 of 3 seeds (the count "all seeds" is missed) but the paired CI contains 0: not a failure
    doms = ("python", "prose")
    ours = {d: np.array([1.0, 1.1, 1.05]) for d in doms}
    miss = {"random": {d: ours[d] + np.array([0.1, -0.01, 0.1]) for d in doms}}
    out = V.c2(0.5, ours, miss, doms)
    assert out["holds"] is None and "within seed noise" in out["inconclusive"] and "count missed" in out["inconclusive"]
    assert V.seed_rule(ours["python"], miss["random"]["python"])[0] == "inconclusive"
    r = V.c3({0.25: ours["python"]}, {0.25: miss["random"]["python"]})
    assert r["holds"] is None and r["inconclusive"]


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
    assert V.c5({0.25: 0.25}, {0.25: 0.02}, 1.5, lat, speedup_ci=(1.4, 1.6))["holds"]
    f = V.c5({0.25: 0.25}, {0.25: 0.02}, 0.8, lat, speedup_ci=(0.75, 0.85))
    assert f["holds"] is False and not f.get("inconclusive")
    assert not V.c5({0.25: 0.3}, {0.25: 0.02}, 1.5, lat, speedup_ci=(1.4, 1.6))["holds"]
    assert V.c5({0.25: 0.25}, {0.25: 0.02}, 1.5, lat, smoke=True)["inconclusive"]


def test_c4_checkpoint_within_noise_is_inconclusive():
    # issue 41: at checkpoint 1 the seed-mean loss of ours is higher (the old rule failed it) and one seed's end gap
    # is <= 0, but both paired CIs contain 0: inconclusive, not fails
    ew_c = np.array([[2.0, 1.8, 1.7], [2.0, 1.8, 1.7], [2.1, 1.9, 1.75]])
    base = ew_c + 0.1
    base[:, 1] = ew_c[:, 1] + np.array([0.1, -0.2, 0.05])
    base[:, -1] = ew_c[:, -1] + np.array([0.05, -0.01, 0.06])
    r = V.c4({"expertweaver": ew_c, "random_split": base})
    assert r["holds"] is None and "within seed noise" in r["inconclusive"] and "checkpoint(s) [1, 2]" in r["inconclusive"]


def test_c5_speedup_interval_across_the_bar_is_inconclusive():
    from repro.expertweaver.latency import speedup_interval
    lat = {"card width": "x"}
    r = V.c5({0.25: 0.25}, {0.25: 0.02}, 1.35, lat, speedup_ci=(1.25, 1.45))
    assert r["holds"] is None and "within noise of the bar" in r["inconclusive"]
    assert V.c5({0.25: 0.25}, {0.25: 0.02}, 1.5, lat)["holds"] is None       # no interval: decides nothing
    est, lo, hi = speedup_interval(np.array([2.0, 2.1, 2.2, 2.05, 2.3]), np.array([1.0, 1.2, 1.1, 1.05, 1.3]))
    assert est == pytest.approx(2.0) and lo <= est <= hi and hi > lo
    assert speedup_interval([2.0, 2.1], [1.0, 1.0], rng=3) == speedup_interval([2.0, 2.1], [1.0, 1.0], rng=3)


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
    led.record("C1", **V.c1([0.1, 0.0], [0, 0], 1.3, 1.1, universal_boot=_boot([0.1, 0.0])))
    assert led.verdict("K2a") == "failed" and led.verdict("C1") == "holds"


# ----------------------------------------------------------------------------- negative twins (issue 41): each
# control fails on a blinded apparatus run through the chapter's code (smoke widths, 2 conversion seeds, a dense
# model trained 20 steps as the "real" tiny apparatus, the same architecture untrained as the blinded one)

@pytest.fixture(scope="module")
def twin():
    from repro.expertweaver import experiments as X
    from repro.expertweaver.model import build_model
    from repro.expertweaver.train import train_dense

    corpora = ew.domain_corpora()
    cfg = ew.Config.from_profile("smoke", n_seeds=2, use_cached_base=False, train_steps=20, batch_size=8)
    held = ew.heldout_set(corpora, cfg.n_eval_seqs, cfg.context)
    torch.manual_seed(cfg.seed)
    raw = build_model(cfg).eval()
    torch.manual_seed(cfg.seed)
    trained = build_model(cfg)
    train_dense(trained, corpora, cfg)
    return dict(X=X, cfg=cfg, corpora=corpora, held=held, raw=raw, trained=trained,
                entropy={d: ew.unigram_entropy(corpora.heldout[d]) for d in ew.DOMAINS},
                conv={name: X.run_conversions(cfg, m, corpora, held) for name, m in (("raw", raw), ("trained", trained))})


@pytest.mark.negative_twin("K1")
def test_k1_negative_twin_untrained_dense_and_experts_off(twin):
    """Blinded: the untrained dense model (held-out loss ~5.5 nats/byte, over 0.75 × entropy ~2.3 in every domain),
    and the 'all experts on' check fed the routed model at its budget (experts off: max |Δ logit| ~0.5): K1 fails
    on each part. The 20-step model's loss is far lower; with all experts on its conversions reproduce dense (0.0)."""
    from repro.expertweaver.train import converted, max_logit_diff

    tw = twin
    held, ent = tw["held"], tw["entropy"]
    loss = {name: ew.evaluate_loss(tw[name], held) for name in ("raw", "trained")}
    out = V.k1({d: loss["raw"][d] for d in ew.DOMAINS}, ent, tw["conv"]["raw"].exact)
    assert not out["holds"] and all(f"{d}: dense loss" in out["reason"] for d in ew.DOMAINS)
    assert "experts on differs" not in out["reason"]
    assert all(loss["trained"][d] < loss["raw"][d] - 1.0 for d in ew.DOMAINS)
    m = tw["trained"]
    probe = np.concatenate([held[d][:2] for d in ew.DOMAINS])
    off = {k: max_logit_diff(m, converted(m, tw["conv"]["trained"].routings0[(b, k)]), probe)
           for b in (0.25,) for k in ("expertweaver", "random_split")}
    out = V.k1({d: 0.0 for d in ew.DOMAINS}, ent, off)
    assert not out["holds"] and "with all experts on differs from dense" in out["reason"]
    assert out["numbers"]["max |Δ logit| (all on)"] > 0.1
    assert max(tw["conv"]["trained"].exact.values()) <= 1e-4


def _k2(tw, name, b):
    X, conv = tw["X"], tw["conv"][name]
    return V.k2(b, X.per_seed(conv, b, "random_split"), X.per_seed(conv, b, "oracle"),
                {m: conv.active[(b, m)][:2] for m in ew.METHODS}, tw["cfg"].d_ff)


@pytest.mark.negative_twin("K2a", "K2b", "K2c")       # one case per budget's control
@pytest.mark.parametrize("budget, bid", [(0.5, "a"), (0.25, "b"), (0.125, "c")])
def test_k2_negative_twin_untrained_dense(twin, budget, bid):
    """Blinded: the conversions of the untrained dense model, where no neuron matters more than another: the
    random-split − oracle headroom is ~1e-4 nats/byte with a paired CI containing 0, so K2a/b/c fail on headroom;
    on the 20-step model the headroom is > 10x larger with its CI above 0 (the card's 0.05 needs the full model)."""
    blind, real = _k2(twin, "raw", budget), _k2(twin, "trained", budget)
    assert not blind["holds"] and "headroom random − oracle" in blind["reason"]
    lo, hi = blind["numbers"]["ci95"]
    assert lo < 0 < hi and abs(blind["numbers"]["random − oracle"]) < 1e-3
    assert real["numbers"]["ci95"][0] > 0 and real["numbers"]["random − oracle"] > 10 * abs(blind["numbers"]["random − oracle"])


@pytest.mark.negative_twin("K3")
def test_k3_negative_twin_training_switched_off(twin):
    """Blinded: continued training at learning rate 1e-12 (the optimiser cannot move the weights): every init's
    drop is 0.000 nats/byte and K3 fails; at the real learning rate the same 5 steps drop ~0.04 per init."""
    import dataclasses

    tw = twin
    cfg = dataclasses.replace(tw["cfg"], n_seeds=1)
    real = V.k3(tw["X"].run_downcycling(cfg, tw["trained"], tw["corpora"], tw["held"])[0])
    off = V.k3(tw["X"].run_downcycling(dataclasses.replace(cfg, downcycle_lr=1e-12), tw["trained"], tw["corpora"],
                                       tw["held"])[0])
    assert not off["holds"] and all(f"{m} drops only" in off["reason"]
                                    for m in ("expertweaver", "random_split", "moefication"))
    assert max(abs(v) for v in off["numbers"].values()) < 1e-4
    assert min(real["numbers"].values()) > 0.02


@pytest.mark.negative_twin("K4")
def test_k4_negative_twin_slice_is_the_whole_ffn():
    """Blinded: the timer's '25 %' slice set to 100 % of the FFN (no less work): the ratio is ~1 and K4 fails; the
    real 25 % slice of the synthetic 512 × 2048 FFN runs several times faster."""
    from repro.expertweaver import convert as C
    from repro.expertweaver import latency as lat

    plan = P.plan_layer(256, 2048, 8, 512, C.tolerance(2048), u_min=1)
    w_g, w_u, w_d, sh, ex, reps, g = lat.synthetic_ffn(512, 2048, plan, 2, 0)
    # each path's fastest over five calls: the paths are timed one after the other, so a load spike on a shared
    # machine (make test runs notebooks beside this) could otherwise make equal work read 1.3x apart (with three
    # calls it did once, in a serial run beside a training job)
    t = {}
    for f in (0.25, 1.0):
        calls = [lat.layer_latency(w_g, w_u, w_d, sh, ex, reps, plan.k, f, 30, g) for _ in range(5)]
        t[f] = {p: min(c[p] for c in calls) for p in calls[0]}
    out = V.k4(t[1.0]["dense"], t[1.0]["slice"], "synthetic, slice = 100 %")
    assert not out["holds"] and "runs only" in out["reason"]
    assert t[0.25]["dense"] / t[0.25]["slice"] > t[1.0]["dense"] / t[1.0]["slice"]


@pytest.mark.negative_twin("K5")
def test_k5_negative_twin_identical_layers():
    """Blinded: every layer given layer 0's calibration profile (layer structure removed): the layer-adaptive sizes
    equal the uniform ones (difference 0) and K5 fails. With the layers' own profiles (an untrained 2-layer model
    at d_ff = 384, weights x5) the sizes differ by > 5 % of d_ff at 50 % and 25 % and K5 passes."""
    from repro.expertweaver import convert as C

    torch.manual_seed(0)
    m = ew.GPT(n_layers=2, d=32, n_heads=4, d_ff=384, context=16).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(5)
    profs = ew.profile_model(m, np.random.default_rng(0).integers(0, 256, (12, 16)), 0.3)
    ws = [x.w_g.weight for x in m.mlps]

    def k5_of(pr):
        sizes = {meth: {b: [int(r.shared.sum()) for r in C.convert(meth, pr, ws, b, 16, 2, 5, np.random.default_rng(1))]
                        for b in (0.5, 0.25)} for meth in ("expertweaver", "cmoe")}
        return V.k5(sizes["expertweaver"], sizes["cmoe"], 384)

    assert k5_of(profs)["holds"]
    out = k5_of([profs[0]] * len(profs))
    assert not out["holds"] and out["numbers"]["50 % max diff"] == 0 and out["numbers"]["25 % max diff"] == 0


# Controls still without a negative twin (a test marked @pytest.mark.negative_twin("K…") that runs this
# chapter's code on a blinded apparatus and sees the control fail); issue 41. The contract test keeps this exact.
NEGATIVE_TWINS_PENDING = ()
