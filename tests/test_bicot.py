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

def test_end_to_end_tiny_watermark_ranks_above_null():
    torch.manual_seed(0)
    tok = bicot.Tokenizer(5)
    m0, _ = bicot.model.train_base(tok, GPTConfig(tok.vocab_size, 32, 1, 4, 128), 5, (1, 2), 0, 150, 2.0)
    B = wm.make_key(1, 32, 2)
    bic, h = wm.embed_watermark(copy.deepcopy(m0), m0, B, tok, 5, (1, 2), 40, seed=0, k=6)
    probs = bicot.make_problems(np.random.default_rng(9), 16, 5, (1, 2), tok)
    ref = api.query(bic, probs, tok, 6, 16)
    null = wm.make_keys(np.random.default_rng(0), 50, 32, 2)
    out = V.verify(ref, ref, tok, m0.W_U.detach().numpy().astype(float), B, null)
    clean = V.verify(api.query(m0, probs, tok, 6, 16), ref, tok, m0.W_U.detach().numpy().astype(float), B, null)
    assert out["detected"] and out["S"] > clean["S"]


# ----------------------------------------------------------------------------- verdicts hold and fail

def test_k1_passes_and_fails():
    assert verdicts.k1(0.9, [5, 6], [0.1, 1.0])["holds"]
    assert not verdicts.k1(0.9, [5, 3], [0.1, 1.0])["holds"]
    assert not verdicts.k1(0.5, [5, 6], [0.1, 1.0])["holds"]
    assert not verdicts.k1(0.9, [5, 6], [0.1, 2.5])["holds"]


def test_k5_passes_and_fails():
    assert verdicts.k5([0.1, 1.5], 0.3, 0.9)["holds"]
    assert not verdicts.k5([0.1, 2.5], 0.5, 0.9)["holds"]
    leak = {"B in row(W_U)": 0.3, "hidden": {"h_B constant share": 0.98, "logit energy from h_B": 0.6},
            "M0": {"logit energy from h_B": 0.04}}
    bad = verdicts.k5([0.1, 2.5], 0.5, 0.9, leak)
    assert not bad["holds"] and "0.60" in bad["reason"] and bad["numbers"]["logit energy from h_B"] == 0.6
    assert verdicts.k5([0.1, 1.5], 0.3, 0.9, leak)["holds"]


def test_k2_passes_and_fails():
    g = np.random.default_rng(0)
    a = (g.random(1500) < 0.8).astype(float)
    dmg = a * (g.random(1500) < 0.8)
    assert verdicts.k2(a, dmg)["holds"]
    assert not verdicts.k2(a, a)["holds"]


def test_k3_passes_and_fails():
    dz, da = [8, 6, 3, float("nan")], [0.9, 0.8, 0.5, 0.0]
    assert verdicts.k3(2.0, 1.0, 1.0, dz, da, [2.0], [1.0], 0.6, 0.2)["holds"]
    assert not verdicts.k3(0.5, 1.0, 1.0, dz, da, [2.0], [1.0], 0.6, 0.2)["holds"]
    assert not verdicts.k3(2.0, 1.0, 0.5, dz, da, [2.0], [1.0], 0.6, 0.2)["holds"]
    assert not verdicts.k3(2.0, 1.0, 1.0, [8, 7, 6, 5], [0.2, 0.5, 0.8, 0.9], [5.0], [1.0], 0.6, 0.2)["holds"]
    assert not verdicts.k3(2.0, 1.0, 1.0, dz, da, [2.0], [1.0], 0.6, 0.5)["holds"]


def test_k4_passes_and_fails():
    assert verdicts.k4(0.99, 0.95, 0.6, 0.1)["holds"]
    assert not verdicts.k4(0.99, 0.95, 0.6, 0.5)["holds"]
    assert not verdicts.k4(0.5, 0.95, 0.6, 0.1)["holds"]
    # several bias draws: the mean margins decide, the per-draw range is reported
    ok = verdicts.k4(0.99, 0.95, [0.6, 0.5], [0.35, 0.05])
    assert ok["holds"] and ok["numbers"]["bias draws"] == 2 and ok["numbers"]["margin lost min draw"] < 0.5
    assert not verdicts.k4(0.99, 0.95, [0.6, 0.5], [0.35, 0.25])["holds"]


def test_c1a_holds_and_fails():
    g = np.random.default_rng(0)
    a = (g.random(2000) < 0.8).astype(float)
    assert verdicts.c1a(a, a, a, a)["holds"]
    worse = a * (g.random(2000) < 0.9)
    assert not verdicts.c1a(worse, a, a, a)["holds"]
    assert verdicts.c1a(a[:100], a[:100], a[:100], a[:100])["inconclusive"]


def test_c1b_holds_and_fails():
    g = np.random.default_rng(0)
    a = (g.random(2000) < 0.8).astype(float)
    assert verdicts.c1b(a * (g.random(2000) < 0.8), a)["holds"]
    assert not verdicts.c1b(a, a)["holds"]


def test_c2_c3_c4_c5_hold_and_fail():
    assert verdicts.c2(0.999, 0.97, 8, 200)["holds"] and not verdicts.c2(0.98, 0.97, 8, 200)["holds"]
    assert verdicts.c3a({"int8": 0.95, "FT": 0.99})["holds"] and not verdicts.c3a({"int8": 0.85})["holds"]
    assert verdicts.c3b(1.0, 0.2)["holds"] and not verdicts.c3b(1.0, 0.8)["holds"]
    assert verdicts.c4(0.99, 0.7)["holds"] and not verdicts.c4(0.99, 0.95)["holds"] and not verdicts.c4(0.9, 0.5)["holds"]
    assert verdicts.c5(0.97, 0.9)["holds"] and not verdicts.c5(0.9, 0.9)["holds"]


def test_c6_holds_fails_and_inconclusive():
    base = {"lam": 0, "z": 8, "acc": 0.9}
    assert verdicts.c6([base, {"lam": 1, "z": 3, "acc": 0.7}])["holds"]
    assert not verdicts.c6([base, {"lam": 1, "z": 3, "acc": 0.88}])["holds"]
    assert verdicts.c6([base, {"lam": 1, "z": 6, "acc": 0.7}])["holds"]
    assert verdicts.c6([base, {"lam": 1, "z": 6, "acc": 0.88}])["holds"] is None


def test_claims_and_controls_declared():
    assert set(bicot.CLAIMS) == {"C1a", "C1b", "C2", "C3a", "C3b", "C4", "C5", "C6"}
    assert set(bicot.CONTROLS) == {"K1", "K2", "K3", "K4", "K5"}


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


# Controls still without a negative twin (a test marked @pytest.mark.negative_twin("K…") that runs this
# chapter's code on a blinded apparatus and sees the control fail); issue 41. The contract test keeps this exact.
NEGATIVE_TWINS_PENDING = ('K1', 'K2', 'K3', 'K4', 'K5')
