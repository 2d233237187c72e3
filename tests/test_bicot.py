"""Unit tests of chapter 03 (BiCoT): key, energy ratio, registration, quantisation, KGW, saliency, verdicts."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from repro import bicot
from repro.bicot import api, attacks, baselines, verdicts
from repro.bicot import verify as V
from repro.bicot import watermark as wm
from repro.bicot.model import GPT, GPTConfig
from repro.common import ConfigError

torch.set_num_threads(1)
TOK = bicot.Tokenizer(7)
ALL = tuple(TOK.itos[:-2])          # every token type as an anchor: an untrained model writes few '='


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return GPT(GPTConfig(TOK.vocab_size, d=32, n_layers=1, n_heads=4, d_ff=64))


# ----------------------------------------------------------------------------- config and task

def test_config_rejects_bad_values():
    with pytest.raises(ConfigError, match="top_k"):
        bicot.Config.from_profile("full", top_k=4)
    with pytest.raises(ConfigError, match="trunc_k"):
        bicot.Config.from_profile("full", trunc_k=10)
    with pytest.raises(ConfigError, match="d_model"):
        bicot.Config.from_profile("full", d_model=30)
    with pytest.raises(ConfigError, match="depth_range"):
        bicot.Config.from_profile("full", depth_range=[3, 1])
    assert bicot.Config.from_profile("smoke").top_k == 6


def test_problem_trace_is_correct():
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = bicot.make_cot_problem(rng, 3, 7, TOK)
        text = TOK.decode(p.completion)
        steps = text.split(" A:")[0].split(";")
        assert len(steps) == 3 and int(text[-1]) == p.answer
        for s in steps:
            lhs, r = s.split("=")
            a, op, b = lhs[0], lhs[1], lhs[2]
            assert bicot.tasks.apply_op(int(a), op, int(b), 7) == int(r)


def test_token_roles():
    p = bicot.make_cot_problem(np.random.default_rng(1), 2, 7, TOK)
    ids = np.array([list(p.prompt) + list(p.completion)])
    roles = bicot.token_roles(ids, TOK, ("=",), len(p.prompt))
    assert (roles == 1).sum() == 2 and all(TOK.itos[i] == "=" for i in ids[roles == 1])
    assert set(TOK.itos[i] for i in ids[roles == 2]) <= set("QTA: ")


# ----------------------------------------------------------------------------- key and energy ratio

def test_make_key_orthonormal_and_keys_differ():
    B = wm.make_key(3, 64, 2)
    assert np.allclose(B.T @ B, np.eye(2), atol=1e-6)
    keys = wm.make_keys(np.random.default_rng(0), 50, 64, 2)
    cos = [np.linalg.svd(keys[i].T @ keys[j], compute_uv=False).mean() for i in range(10) for j in range(i + 1, 10)]
    assert np.mean(cos) < 0.5
    assert np.allclose(np.einsum("kdr,kds->krs", keys, keys), np.eye(2), atol=1e-6)


def _setup_ratio(k=10, V_=19, d=16, r=2, seed=0):
    g = np.random.default_rng(seed)
    W = g.standard_normal((V_, d))
    B = wm.make_key(seed, d, r)
    ids = np.array([g.permutation(V_)[:k] for _ in range(2000)])
    return g, W, B, ids


def test_energy_ratio_inside_and_orthogonal():
    g, W, B, ids = _setup_ratio()
    C = W[ids[:, 1:]] @ B
    Cc = C - C.mean(1, keepdims=True)
    inside = np.einsum("nkr,nr->nk", Cc, g.standard_normal((len(ids), 2)))
    vals = np.concatenate([np.full((len(ids), 1), 100.0), inside], 1)
    assert np.allclose(wm.energy_ratio_np(vals, ids, W, B), 1.0, atol=1e-8)
    out = []
    for n in range(20):
        x = g.standard_normal(9)
        x -= x.mean()
        Q, _ = np.linalg.qr(np.column_stack([np.ones(9) / 3, Cc[n]]))
        x -= Q @ (Q.T @ x)
        out.append(np.concatenate([[100.0], x]))
    assert np.allclose(wm.energy_ratio_np(np.array(out), ids[:20], W, B), 0.0, atol=1e-8)


@pytest.mark.parametrize("k", [6, 10])
def test_energy_ratio_random_mean(k):
    g, W, B, ids = _setup_ratio(k=k)
    vals = np.sort(g.standard_normal((len(ids), k)), 1)[:, ::-1]
    R = wm.energy_ratio_np(vals, ids, W, B)
    assert abs(R.mean() - 2 / (k - 2)) < 3 * R.std() / np.sqrt(len(R))


def test_energy_ratio_raises_when_k_too_small():
    g, W, B, ids = _setup_ratio(k=4)
    with pytest.raises(ValueError):
        wm.energy_ratio_np(g.standard_normal((5, 4)), ids[:5], W, B)
    with pytest.raises(ValueError):
        wm.energy_ratio_torch(torch.randn(5, 19), torch.randn(19, 16), torch.randn(16, 2), 4)


def test_energy_ratio_torch_matches_numpy():
    g, W, B, _ = _setup_ratio()
    logits = g.standard_normal((50, 19))
    Rt = wm.energy_ratio_torch(torch.tensor(logits), torch.tensor(W), torch.tensor(B), 10).numpy()
    ids = np.argsort(-logits, 1)[:, :10]
    Rn = wm.energy_ratio_np(np.take_along_axis(logits, ids, 1), ids, W, B)
    assert np.allclose(Rt, Rn, atol=1e-8)
    keys = np.stack([B, wm.make_key(9, 16, 2)])
    assert np.allclose(wm.energy_ratio_np(np.take_along_axis(logits, ids, 1), ids, W, keys)[0], Rn)


# ----------------------------------------------------------------------------- registration and API

@pytest.fixture(scope="module")
def records(tiny):
    probs = bicot.make_problems(np.random.default_rng(3), 8, 7, (1, 2), TOK)
    return api.query(tiny, probs, TOK, 10, 16)


def test_register_recovers_alpha_and_delta(records):
    g = np.random.default_rng(0)
    delta = g.normal(0, 2, TOK.vocab_size)
    sus = copy.copy(records)
    sus = api.Records(records.ids, records.top_ids, 1.7 * records.top_lp + delta[records.top_ids]
                      + g.normal(0, 1, records.top_lp.shape[:2])[..., None], records.prompt_len, records.full_lp)
    reg = V.register(sus, records, TOK, TOK.vocab_size)
    seen = ~np.isnan(reg.delta)
    assert abs(reg.alpha - 1.7) < 1e-6
    assert np.allclose(reg.delta[seen], delta[seen] - delta[seen].mean(), atol=1e-6)


def test_score_invariant_to_temperature_and_shift(records):
    W = np.random.default_rng(0).standard_normal((TOK.vocab_size, 32))
    keys = wm.make_keys(np.random.default_rng(1), 5, 32, 2)
    for reg in (True, False):
        s0, _ = V.scores(records, records, TOK, W, keys, reg, ALL)
        for a in ({"temperature": 0.5}, {"temperature": 2.0}, {"shift": 3.0}):
            s1, _ = V.scores(api.reported(records, attack=a, rng=np.random.default_rng(0)), records, TOK, W, keys, reg, ALL)
            assert np.allclose(s0, s1, atol=1e-6)


def test_registration_removes_token_bias(records):
    W = np.random.default_rng(0).standard_normal((TOK.vocab_size, 32))
    keys = wm.make_keys(np.random.default_rng(1), 5, 32, 2)
    bias = np.random.default_rng(2).normal(0, 2, TOK.vocab_size)
    # bias applied to the reported top-k values only (same top-k set), on tokens seen at sentinels
    sus = api.Records(records.ids, records.top_ids, records.top_lp + bias[records.top_ids], records.prompt_len,
                      records.full_lp)
    s0, i0 = V.scores(records, records, TOK, W, keys, True, ALL)
    s1, i1 = V.scores(sus, records, TOK, W, keys, True, ALL)
    assert i0["anchors kept"] > 10 and i0["anchors kept"] == i1["anchors kept"]
    assert np.allclose(s0, s1, atol=1e-6)
    s2, _ = V.scores(sus, records, TOK, W, keys, False, ALL)
    assert not np.allclose(s0, s2, atol=1e-3)


# ----------------------------------------------------------------------------- attacks and baselines

def test_quantize_error_bound_and_16_bits(tiny):
    q8 = attacks.quantize(tiny, 8)
    for w, wq in zip(tiny.parameters(), q8.parameters()):
        if w.dim() == 2:
            bound = w.abs().amax(1, keepdim=True) / 254 + 1e-7
            assert bool(((w - wq).abs() <= bound).all())
    x = torch.randint(0, TOK.vocab_size, (4, 20))
    with torch.no_grad():
        a, b = tiny(x)[0], attacks.quantize(tiny, 16)(x)[0]
    assert float((a - b).norm() / a.norm()) < 1e-3


def test_prune_and_noise(tiny):
    p = attacks.magnitude_prune(tiny, 0.3)
    for w in p.parameters():
        if w.dim() == 2:
            assert abs(float((w == 0).float().mean()) - 0.3) < 0.02
    n = attacks.weight_noise(tiny, 0.02, 0)
    assert 0 < attacks.param_distance(n, tiny) < 1.0


def test_kgw_z_unwatermarked_is_standard():
    green = baselines.green_lists(7, TOK.vocab_size)
    g = np.random.default_rng(0)
    ids = np.concatenate([np.full((2000, 1), 3), g.integers(0, TOK.vocab_size - 1, (2000, 20))], 1)
    z = baselines.kgw_detect(ids, 1, green, TOK)
    assert abs(z.mean()) < 0.1 and 0.9 < z.std() < 1.1
    # text written with the green list only: large z
    seq = [3]
    for _ in range(20):
        seq.append(int(np.flatnonzero(green[seq[-1]] & (np.arange(TOK.vocab_size) < TOK.vocab_size - 2))[0]))
    assert baselines.kgw_detect(np.array([seq]), 1, green, TOK)[0] > 4


def test_grad_x_input_matches_finite_difference(tiny):
    tiny64 = copy.deepcopy(tiny).double()
    ids = torch.randint(0, 7, (1, 12))
    pos, tokn = torch.tensor([10]), torch.tensor([3])
    s = bicot.grad_x_input(tiny64, ids, pos, tokn)[0]
    e = tiny64.embed(ids).detach()
    def f(eps, j):
        e2 = e.clone()
        e2[0, j] *= (1 + eps)
        lp = torch.log_softmax(tiny64.forward_from_embeddings(e2)[0], -1)
        return float(lp[0, 10, 3].detach())
    for j in (2, 7):
        fd = (f(1e-5, j) - f(-1e-5, j)) / 2e-5
        assert abs(abs(fd) - float(s[j])) <= 1e-3 * max(1.0, abs(fd))


def test_metrics():
    assert bicot.auc([3, 4], [1, 2]) == 1.0 and bicot.auc([1], [1]) == 0.5
    neg = np.arange(100.0)
    assert bicot.tpr_at_fpr([98.5, 50], neg, 0.01) == 0.5


# ----------------------------------------------------------------------------- end to end (smoke sizes)

@pytest.fixture(scope="module")
def study():
    from repro.bicot import experiments as ex
    cfg = bicot.Config.from_profile("smoke", seed=0, wm_steps=80, wm_lr=1e-3, n_query_sets=8, n_verify=16,
                                    n_null_keys=50, n_wrong_keys=8)
    st = ex.setup(cfg)
    torch.manual_seed(0)
    st.models["M0"], st.info["M0"] = bicot.model.train_base(st.tok, st.gc, cfg.modulus, tuple(cfg.depth_range), 0, 150, 2.0)
    ex.choose_key(st)
    ex.embed(st)
    return ex, st


def test_ft_key_draws_attack_other_keys_watermarks_and_leave_the_study_alone(study):
    """C3a's extra watermarks (issue 41): each is embedded with the next-best vetted key, fine-tuned, and scored under
    its own key against the same negative models and its own wrong keys; the owner's study is not touched."""
    ex, st = study
    B0, models0, records0 = st.B.copy(), dict(st.models), dict(st.records)
    draws = ex.ft_key_draws(st, ["M0"])
    assert len(draws) == st.cfg.n_ft_keys - 1 >= 1
    d = draws[0]
    order = np.argsort(st.info["key_vetting"], kind="stable")
    assert d["key rank"] == 1 and d["vetting z"] == pytest.approx(st.info["key_vetting"][order[1]])
    assert len(d["pos"]) == st.cfg.n_query_sets and len(d["neg"]) == st.cfg.n_query_sets + st.cfg.n_wrong_keys
    assert d["AUC before"] > 0.5          # that key's own watermark is seen under that key before the attack
    assert np.array_equal(st.B, B0) and st.models == models0 and st.records.keys() == records0.keys()


def test_end_to_end_tiny_watermark_ranks_above_null(study):
    """The study fixture (below): a 150-step base at smoke sizes, BiCoT embedded for 80 steps (40 left the K4
    twin's positive half inside its noise once the key vetting kept the lowest-z key)."""
    ex, st = study
    out = ex.verify_model(st, "BiCoT")
    clean = ex.verify_model(st, "M0")
    assert all(o["S"] > c["S"] for o, c in zip(out, clean)) and any(o["detected"] for o in out)


# ----------------------------------------------------------------------------- verdicts hold and fail

def test_k1_passes_and_fails():
    g = np.random.default_rng(0)
    R = 0.9 + 0.02 * g.standard_normal(100)
    clean = {"M0c": [0.1, 1.0, 0.5], "M0'": [-0.3, 0.2, 0.0]}
    assert verdicts.k1(R, [5, 6, 5.5], clean)["holds"]
    assert not verdicts.k1(R, [5, 3, 5.5], clean)["holds"]                    # one set below 4
    assert not verdicts.k1(R - 0.4, [5, 6, 5.5], clean)["holds"]              # R(B) below 0.8
    bad = verdicts.k1(R, [5, 6, 5.5], {**clean, "M0'": [0.1, 2.5, 0.3]})       # M0' looks watermarked on one set
    assert not bad["holds"] and "M0'" in bad["reason"]
    # every set below 2, but the mean's interval is not clear of it: the control does not pass
    assert not verdicts.k1(R, [5, 6, 5.5], {"M0c": [1.9, 1.95, 0.2]})["holds"]


def test_c2b_holds_fails_and_inconclusive():
    assert verdicts.c2b([0.1, 0.3, -0.2, 0.0])["holds"] is True
    leak = {"B in row(W_U)": 0.3, "|V|/d": 0.3, "sv(W_U B) / rms sv(W_U)": [0.9, 0.7],
            "hidden": {"hidden ratio": 0.9, "h_B in row(W_U)": 0.3, "h_B constant share": 0.98,
                       "logit energy from h_B": 0.6},
            "M0": {"logit energy from h_B": 0.04}}
    bad = verdicts.c2b([5.0, 6.0, 5.5, 4.8], leak)
    assert bad["holds"] is False and "0.60" in bad["reason"] and bad["numbers"]["logit energy from h_B"] == 0.6
    assert bad["numbers"]["z per query set"] == [5.0, 6.0, 5.5, 4.8]
    inc = verdicts.c2b([0.5, 3.5, 1.0, 2.5])
    assert inc["holds"] is None and "within noise" in inc["inconclusive"]


def test_k2_passes_and_fails():
    g = np.random.default_rng(0)
    a = (g.random(1500) < 0.8).astype(float)
    dmg = a * (g.random(1500) < 0.8)
    assert verdicts.k2(a, dmg)["holds"]
    assert not verdicts.k2(a, a)["holds"]
    assert not verdicts.k2(a, a * (g.random(1500) < 0.94))["holds"]     # loses ~5 points: not clear of the bar


def test_k3_passes_and_fails():
    dz, da = [8, 6, 3, float("nan")], [0.9, 0.8, 0.5, 0.0]
    assert verdicts.k3(2.0, 1.0, 1.0, dz, da, [2.0], [1.0], 0.6, 0.2)["holds"]
    assert not verdicts.k3(0.5, 1.0, 1.0, dz, da, [2.0], [1.0], 0.6, 0.2)["holds"]
    assert not verdicts.k3(2.0, 1.0, 0.5, dz, da, [2.0], [1.0], 0.6, 0.2)["holds"]
    assert not verdicts.k3(2.0, 1.0, 1.0, [8, 7, 6, 5], [0.2, 0.5, 0.8, 0.9], [5.0], [1.0], 0.6, 0.2)["holds"]
    assert not verdicts.k3(2.0, 1.0, 1.0, dz, da, [2.0], [1.0], 0.6, 0.5)["holds"]


def test_k4_passes_and_fails():
    kept = [0.97, 0.98, 0.99, 0.96]
    rsr = [0.6, 0.5, 0.55, 0.58, 0.62, 0.52]
    ok = verdicts.k4(0.995, 17, kept, rsr, [0.1, 0.05, 0.12, 0.08, 0.1, 0.06], 4.0, {2.0: 0.5, 4.0: 0.85, 8.0: 0.95})
    assert ok["holds"] and ok["numbers"]["bias draws"] == 6 and ok["numbers"]["margin lost σ=8"] == 0.95
    assert not verdicts.k4(0.995, 17, kept, rsr, [0.5, 0.45, 0.5, 0.5, 0.55, 0.5])["holds"]      # the bias does not bite
    assert not verdicts.k4(0.995, 17, kept, rsr, [0.3, 0.25, 0.28, 0.3, 0.31, 0.26])["holds"]    # ~50 %: within noise
    assert not verdicts.k4(0.96, 17, kept, rsr, [0.1] * 6)["holds"]                          # r not clear of 0.95
    assert not verdicts.k4(0.995, 17, [0.8, 0.85, 0.9, 0.82], rsr, [0.1] * 6)["holds"]


def test_intervals():
    lo, hi = verdicts.fisher_ci(0.9, 50)
    assert lo < 0.9 < hi and hi < 1
    assert verdicts.wilson_ci(0, 8)[1] == pytest.approx(0.3244, abs=1e-3)
    est, lo, hi = verdicts.ratio_loss_ci([0.1, 0.2, 0.15], [1.0, 1.0, 1.0])
    assert est == pytest.approx(0.85) and lo <= est <= hi
    g = np.random.default_rng(0)
    r = bicot.metrics.roc_ci(g.normal(3, 1, 40), g.normal(0, 1, 200))
    assert r["AUC ci95"][0] <= r["AUC"] <= r["AUC ci95"][1] and r["AUC"] > 0.9
    sep = bicot.metrics.roc_ci([5, 6, 7], [0, 1, 2, 1])
    assert sep["AUC ci95"] == [1.0, 1.0] and sep["TPR ci95"] == [1.0, 1.0]
    one = bicot.metrics.auc_over_draws([([5, 6, 7], [0, 1, 2])], [([0.5, 6, 1], [0, 1, 2])])
    assert one["ci95"][0] <= 1 - bicot.auc([0.5, 6, 1], [0, 1, 2]) == one["mean"] <= one["ci95"][1]


def test_c1a_holds_and_fails():
    g = np.random.default_rng(0)
    a = (g.random(2000) < 0.8).astype(float)
    assert verdicts.c1a(a, a, a, a)["holds"]
    worse = a * (g.random(2000) < 0.85)
    assert verdicts.c1a(worse, a, a, a)["holds"] is False
    slightly = a * (g.random(2000) < 0.975)
    assert verdicts.c1a(slightly, a, a, a)["holds"] is None                 # the interval straddles −2 points
    assert verdicts.c1a(a[:100], a[:100], a[:100], a[:100])["inconclusive"]


def test_c1b_holds_and_fails():
    g = np.random.default_rng(0)
    a = (g.random(2000) < 0.8).astype(float)
    assert verdicts.c1b(a * (g.random(2000) < 0.8), a)["holds"]
    assert verdicts.c1b(a, a)["holds"] is False


def _roc(pos, neg):
    return bicot.metrics.roc_ci(pos, neg)


def test_c2_c3_c4_c5_hold_and_fail():
    g = np.random.default_rng(0)
    neg = g.normal(0, 1, 200)
    pos_good, pos_bad = g.normal(9, 1, 8), g.normal(0, 1, 8)
    assert verdicts.c2(_roc(pos_good, neg))["holds"] and verdicts.c2(_roc(pos_bad, neg))["holds"] is False
    assert verdicts.c3a({"int8": _roc(pos_good, neg), "FT": _roc(pos_good, neg)})["holds"]
    assert verdicts.c3a({"int8": _roc(pos_bad, neg), "FT": _roc(pos_good, neg)})["holds"] is False
    assert verdicts.c3b(1.0, 1 / 8)["holds"] and verdicts.c3b(1.0, 7 / 8)["holds"] is False
    M = bicot.metrics
    good = [(g.normal(9, 1, 8), neg) for _ in range(4)]
    bad = [(g.normal(0, 1, 8), neg) for _ in range(4)]
    assert verdicts.c4(M.auc_over_draws(good), M.auc_over_draws(good, bad))["holds"]
    assert verdicts.c4(M.auc_over_draws(good), M.auc_over_draws(good, good))["holds"] is False
    assert verdicts.c5(_roc(pos_good, neg))["holds"] and verdicts.c5(_roc(pos_bad, neg))["holds"] is False


def test_c3a_resamples_the_watermarks_of_the_fine_tuning_attack():
    """Issue 41: the owner's key survives the attack and the next two keys' watermarks do not (the pilot at seed 2:
    AUC 0.997 against 0.35 and 0.35). On the owner's key alone C3a holds; over the three it does not."""
    g = np.random.default_rng(0)
    neg = g.normal(0, 1, 200)
    good = [g.normal(6, 1, 24) for _ in range(3)]
    bad = [g.normal(-0.5, 1, 24) for _ in range(3)]
    rocs = {"BiCoT FT": _roc(good[0], neg), "int8": _roc(good[1], neg)}
    assert verdicts.c3a(rocs)["holds"]
    mixed = verdicts.c3a(rocs, ft_keys=bicot.metrics.auc_over_draws([(good[0], neg), (bad[1], neg), (bad[2], neg)]))
    assert mixed["holds"] is not True and mixed["numbers"]["watermarks attacked"] == 3
    assert mixed["numbers"]["AUC BiCoT FT, owner's key only"] == rocs["BiCoT FT"]["AUC"]
    assert verdicts.c3a(rocs, ft_keys=bicot.metrics.auc_over_draws([(p, neg) for p in good]))["holds"]
    assert verdicts.c3a(rocs, ft_keys=bicot.metrics.auc_over_draws([(p, neg) for p in bad]))["holds"] is False


def test_c6_holds_fails_and_inconclusive():
    g = np.random.default_rng(0)
    base_items = (g.random(512) < 0.9).astype(float)
    big = base_items * (g.random(512) < 0.7)
    small = base_items * (g.random(512) < 0.99)
    base = {"lam": 0, "z": 8, "z_sets": np.full(8, 8.0), "acc": base_items.mean(), "acc_items": base_items}
    row = lambda z, it, lam=1: {"lam": lam, "z": z, "z_sets": z + g.normal(0, 0.3, 8), "acc": it.mean(),
                                "acc_items": it}
    assert verdicts.c6([base, row(3, big)])["holds"]
    assert verdicts.c6([base, row(3, small)])["holds"] is False
    assert verdicts.c6([base, row(6, big)])["holds"]
    assert verdicts.c6([base, row(6, small)])["holds"] is None


def test_c3b_inconclusive_within_noise_of_half():
    """3 of 8 triggers kept (37.5 %, below 0.5 as a point): the Wilson interval [0.14, 0.69] contains 0.5."""
    v = verdicts.c3b(1.0, 3 / 8)
    assert v["holds"] is None and "within noise" in v["inconclusive"]
    assert v["numbers"]["rate after FT ci95"][0] < 0.5 < v["numbers"]["rate after FT ci95"][1]
    assert verdicts.c3b(1.0, 0.0, n_triggers=8)["holds"]


def test_c6_removal_point_within_noise_of_z4():
    """The median z is 3.5 but the query sets scatter across 4: whether the mark was removed at this strength (at a
    cheap drop) is within noise, so no verdict; the same scatter about 1.5 decides 'fails'."""
    g = np.random.default_rng(1)
    base_items = (g.random(512) < 0.9).astype(float)
    small = base_items * (g.random(512) < 0.99)
    base = {"lam": 0, "z": 8, "z_sets": np.full(8, 8.0), "acc": base_items.mean(), "acc_items": base_items}
    wide = np.array([1.0, 2.0, 3.0, 3.4, 3.6, 5.0, 6.0, 7.0])
    r = {"lam": 1, "z": float(np.median(wide)), "z_sets": wide, "acc": small.mean(), "acc_items": small}
    v = verdicts.c6([base, r])
    assert v["holds"] is None and "within noise" in v["inconclusive"]
    lo, hi = v["numbers"]["median z ci95 λ=1"]
    assert lo < 4 < hi
    far = wide - 2.0
    r2 = {**r, "z": float(np.median(far)), "z_sets": far}
    assert verdicts.c6([base, r2])["holds"] is False
    # a first strength within noise of 4 at a cheap drop, then a clear removal at a costly one: the mark may have
    # gone at the cheap strength, so 'holds' is not earned
    big = base_items * (g.random(512) < 0.7)
    r3 = {"lam": 3, "z": 1.0, "z_sets": np.full(8, 1.0) + g.normal(0, 0.2, 8), "acc": big.mean(), "acc_items": big}
    assert verdicts.c6([base, r, r3])["holds"] is None


def test_claims_and_controls_declared():
    assert set(bicot.CLAIMS) == {"C1a", "C1b", "C2", "C2b", "C3a", "C3b", "C4", "C5", "C6"}
    assert set(bicot.CONTROLS) == {"K1", "K2", "K3", "K4"}


def test_incremental_decoding_matches_full_pass(tiny):
    ids = torch.randint(0, TOK.vocab_size - 1, (3, 14))
    caches = [[] for _ in tiny.blocks]
    with torch.no_grad():
        out = [tiny.step(ids[:, :6], caches, 0)]
        for j in range(6, 14):
            out.append(tiny.step(ids[:, j:j + 1], caches, j))
        full, _ = tiny(ids)
    assert torch.allclose(torch.stack(out, 1), full[:, 5:], atol=1e-5)


def test_leak_decomposition_splits_the_key_part():
    """h inside span(B) puts all of its centred top-k logit energy in W_U h_B; h orthogonal to B none; a constant
    h_B has constant share 1."""
    from repro.bicot.experiments import leak_decomposition
    g = np.random.default_rng(0)
    V, d, k, n = 19, 64, 10, 50
    W = g.standard_normal((V, d))
    B = bicot.make_key(3, d, 2)
    ids = np.array([g.permutation(V)[:k] for _ in range(n)])
    h_in = np.tile(B @ np.array([2.0, -1.0]), (n, 1))
    a = leak_decomposition(h_in, ids, W, B)
    assert a["hidden ratio"] == pytest.approx(1) and a["logit energy from h_B"] == pytest.approx(1)
    assert a["h_B constant share"] == pytest.approx(1)
    h_out = g.standard_normal((n, d))
    h_out -= h_out @ B @ B.T
    b = leak_decomposition(h_out, ids, W, B)
    assert b["hidden ratio"] < 1e-12 and b["logit energy from h_B"] < 1e-12
    # a random key: about |V|/d of its energy in W_U's row space
    c = leak_decomposition(g.standard_normal((4000, d)), np.tile(ids[:1], (4000, 1)), W, B)
    assert 0.15 < c["h_B in row(W_U)"] < 0.5


# ----------------------------------------------------------------------------- negative twins (issue 41)
# Each control runs through the chapter's own code (experiments, verify, attacks, verdicts) on a tiny study, once on a
# blinded apparatus, where it must FAIL, and (where cheap) on the real one.

def _k1_inputs(ex, st, pos, clean):
    wb = ex.white_box(st, (pos,))
    return wb[pos]["R_by_prompt"], ex.zs(ex.verify_model(st, pos)), {n: ex.zs(ex.verify_model(st, n)) for n in clean}


@pytest.mark.negative_twin("K1")
def test_k1_negative_twin_signature_off(study):
    """Blinded: the fine-tune without the signature term (M0c) in BiCoT's place, and BiCoT (which carries the key) in
    a clean model's place: K1 fails both ways. (At these sizes the real BiCoT is too weak to pass K1 — a 150-step
    base writes few anchors — so the real apparatus is only checked to score above the blinded one.)"""
    ex, st = study
    real = _k1_inputs(ex, st, "BiCoT", ["M0c"])
    blind = _k1_inputs(ex, st, "M0c", ["M0"])
    off = verdicts.k1(*blind)
    assert not off["holds"] and "white-box anchor R(B)" in off["reason"] and "smallest z" in off["reason"]
    assert real[0].mean() > blind[0].mean() + 0.2 and real[1].min() > blind[1].max()
    swapped = verdicts.k1(*_k1_inputs(ex, st, "BiCoT", ["BiCoT"]))
    assert not swapped["holds"] and "never carried the key" in swapped["reason"]


@pytest.mark.negative_twin("K2")
def test_k2_negative_twin_attack_off_and_untrained(study):
    """Blinded: the 'damaged' copy with 0 % weight noise (attack off), and an untrained M0: K2 fails; the real
    damaged copy (20 % noise of a trained model) loses accuracy."""
    ex, st = study
    M0 = st.models["M0"]
    probs = st.acc_problems
    a0 = bicot.answer_accuracy(M0, probs, st.tok, st.max_new)
    off = verdicts.k2(a0, bicot.answer_accuracy(attacks.weight_noise(M0, 0.0, 1), probs, st.tok, st.max_new))
    assert not off["holds"] and "damaged copy loses" in off["reason"]
    torch.manual_seed(1)
    raw = GPT(st.gc)
    untrained = verdicts.k2(bicot.answer_accuracy(raw, probs, st.tok, st.max_new),
                            bicot.answer_accuracy(attacks.weight_noise(raw, 0.2, 1), probs, st.tok, st.max_new))
    assert not untrained["holds"] and "accuracy is" in untrained["reason"]


@pytest.mark.negative_twin("K3")
def test_k3_negative_twin_attacks_off(study):
    """Blinded: every attack of K3 switched off (fine-tuning and whitening at lr 0, zero noise and pruning doses, a
    trigger model trained at lr 0): K3 fails on each of these parts. (Its "z drops below 4 somewhere" part cannot be
    blinded at these sizes: the tiny BiCoT's median z is already below 4.)"""
    ex, st = study
    c, bic, M0 = st.cfg, st.models["BiCoT"], st.models["M0"]
    dr = tuple(c.depth_range)
    ft = attacks.finetune_attack(bic, st.tok, c.modulus, dr, 3, 0.0, 0)[3]
    Ul, Uh, ids, am = attacks.anchor_pcs(bic, st.tok, c.modulus, dr, c.key_rank, 1, n=64)
    wh = attacks.whitening_attack(bic, st.tok, c.modulus, dr, 2, 0.0, c.key_rank, 1, lr=0.0, pcs=(Ul, Uh))
    trig, tinfo = baselines.train_trigger_fp(M0, st.tok, c.modulus, dr, 7, 1, 0, lr=0.0)
    rate = baselines.trigger_rate(trig, st.tok, tinfo["triggers"], tinfo["response"])
    dose = [bic, attacks.weight_noise(bic, 0.0, 0), attacks.magnitude_prune(bic, 0.0)]
    for i, m in enumerate(dose):
        st.models[f"_dose{i}"] = m
    dz = [ex.median_z(ex.zs(ex.verify_model(st, f"_dose{i}"))) for i in range(len(dose))]
    da = [float(bicot.answer_accuracy(m, st.acc_problems[:32], st.tok, st.max_new).mean()) for m in dose]
    out = verdicts.k3(attacks.param_distance(ft, bic), attacks.param_distance(bic, M0), rate, dz, da, [], [],
                      attacks.pc_energy(bic, Ul, ids, am), attacks.pc_energy(wh, Ul, ids, am))
    assert not out["holds"]
    for part in ("FT moved the weights", "trigger model verifies", "Spearman", "whitening removed"):
        assert part in out["reason"]
    assert len(set(np.round(dz, 9))) == 1                 # no dose moved z: nothing to rank against accuracy


@pytest.mark.negative_twin("K4")
def test_k4_negative_twin_bias_off(study):
    """Blinded: the API applies no bias to the margins and an independent δ′ instead of the δ the check reads: the
    fitted δ̂ does not track δ and the unregistered margin is untouched, so K4 fails; with the bias on (σ = 4) it
    passes."""
    ex, st = study
    ex.query_all(st, ["BiCoT"])
    draws = ex.bias_draws(st, 8, 4.0)
    r, n = ex.delta_recovery(st, draws[0])
    bm = ex.bias_margins(st, draws)
    real = verdicts.k4(r, n, bm["kept by set"], bm["margin RSR"], bm["margin no RSR"])
    assert real["holds"], real["reason"]
    r_off, n_off = ex.delta_recovery(st, draws[0], applied=draws[1])
    bm0 = ex.bias_margins(st, [np.zeros_like(d) for d in draws])
    off = verdicts.k4(r_off, n_off, bm0["kept by set"], bm0["margin RSR"], bm0["margin no RSR"])
    assert not off["holds"] and "corr(δ̂, δ)" in off["reason"] and "without registration BiCoT keeps" in off["reason"]


# Controls still without a negative twin (a test marked @pytest.mark.negative_twin("K…") that runs this
# chapter's code on a blinded apparatus and sees the control fail); issue 41. The contract test keeps this exact.
NEGATIVE_TWINS_PENDING = ()


def test_c1b_interval_resamples_the_green_list_keys():
    """Five keys whose losses spread 0-6 points: over the keys the interval straddles 3 points (inconclusive), while
    the problems of the single 6-point key alone would call it a hold."""
    g = np.random.default_rng(3)
    a = (g.random(1500) < 0.9).astype(float)
    rows = [a * (g.random(1500) >= q) for q in (0.0, 0.015, 0.03, 0.045, 0.067)]
    one = verdicts.c1b(rows[-1], a)
    many = verdicts.c1b(np.array(rows), a, seed=0)
    assert one["holds"] is True
    assert many["holds"] is None and many["numbers"]["keys"] == 5
    assert many["numbers"]["CI hi"] - many["numbers"]["CI lo"] > one["numbers"]["CI hi"] - one["numbers"]["CI lo"]


def test_key_vetting_keeps_the_candidate_lowest_on_the_base(study):
    """Issue 43: every candidate key is scored on M0's vetting prompts and the lowest-z one is kept (the first key
    below 0 left M0's lineage one query set from z >= 2 at seed 4)."""
    ex, st = study
    tried = np.asarray(st.info["key_vetting"], float)
    assert len(tried) == ex.KEY_CANDIDATES
    assert st.info["secret"] == st.candidates[st.info["key_chosen"]]
    if np.isfinite(tried).any():
        assert tried[st.info["key_chosen"]] == np.nanmin(tried)


def test_c4_interval_resamples_the_bias_draws():
    """Four draws of the bias: unregistered AUC drops to chance under two and is untouched under two (gap per draw
    0.5, 0.5, 0, 0). Each draw's own items give tight intervals on either side of 0.1; over the draws the mean gap
    0.25 has an interval that reaches below 0.1: inconclusive, where the first draw alone would have said holds."""
    g = np.random.default_rng(1)
    neg = g.normal(0, 1, 200)
    M = bicot.metrics
    rsr = [(g.normal(9, 1, 16), neg) for _ in range(4)]
    noreg = [(g.normal(0, 1, 16), neg), (g.normal(0, 1, 16), neg), rsr[2], rsr[3]]
    one = verdicts.c4(M.auc_over_draws(rsr[:1]), M.auc_over_draws(rsr[:1], noreg[:1]))
    many = verdicts.c4(M.auc_over_draws(rsr), M.auc_over_draws(rsr, noreg))
    assert one["holds"] is True
    assert many["holds"] is None and many["numbers"]["bias draws"] == 4
    assert many["numbers"]["gap per draw"][2] == 0
