"""Unit tests of chapter 16 (Decomper): decompositions against closed forms, the compensation's least-squares
guarantees, folding, the drift metric, data, config validation, caching, and every verdict both ways."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from repro.common import ConfigError
from repro import decomper as D
from repro.decomper import experiments as ex
from repro.decomper import verdicts as V


def _rand(m, n, seed=0):
    return torch.randn(m, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# ----------------------------------------------------------------------------- decompositions

def test_svd_full_rank_reconstructs_and_truncation_is_eckart_young():
    W = _rand(12, 7)
    A, B = D.svd_truncate(W, 7)
    assert (A @ B - W).abs().max() < 1e-5
    S = torch.linalg.svdvals(W)
    for r in (1, 3, 5):
        A, B = D.svd_truncate(W, r)
        assert math.isclose(float((W - A @ B).norm()), float(S[r:].pow(2).sum().sqrt()), rel_tol=1e-8)


def test_svdllm_output_error_is_the_discarded_singular_values_and_beats_svd():
    W, X = _rand(10, 8, 1), _rand(8, 200, 2) * torch.linspace(0.1, 3, 8, dtype=torch.float64)[:, None]
    xxt = X @ X.T
    eps = 1e-10 * float(torch.trace(xxt)) / 8
    r = 3
    A, B = D.svdllm(W, xxt, r, eps=eps)
    L = D.whitening(xxt, eps)
    S = torch.linalg.svdvals(W @ L)
    err = float(((W - A @ B) @ X).norm())
    assert math.isclose(err, float(S[r:].pow(2).sum().sqrt()), rel_tol=1e-4)
    A2, B2 = D.svd_truncate(W, r)
    assert err <= float(((W - A2 @ B2) @ X).norm()) + 1e-9


def test_whitening_falls_back_when_cholesky_fails():
    v = _rand(6, 1, 3)
    L = D.whitening(v @ v.T, eps=0.0)          # rank one: Cholesky fails without ε
    assert torch.isfinite(L).all()
    assert (L @ L.T - v @ v.T).abs().max() < 1e-6


def test_asvd_with_alpha_zero_is_plain_svd():
    W = _rand(9, 6, 4)
    A, B = D.asvd(W, torch.rand(6, dtype=torch.float64) + 0.1, 3, alpha=0.0)
    A2, B2 = D.svd_truncate(W, 3)
    assert (A @ B - A2 @ B2).abs().max() < 1e-10


def test_fwsvd_with_uniform_importance_is_plain_svd():
    W = _rand(9, 6, 5)
    A, B = D.fwsvd(W, torch.full((9,), 2.0, dtype=torch.float64), 3)
    A2, B2 = D.svd_truncate(W, 3)
    assert (A @ B - A2 @ B2).abs().max() < 1e-8


@pytest.mark.parametrize("m,n", [(64, 64), (172, 64), (64, 172), (32, 64)])
@pytest.mark.parametrize("ratio", [0.2, 0.4, 0.6])
def test_rank_for_ratio_is_within_one_rank_of_the_target(m, n, ratio):
    r = D.rank_for_ratio(m, n, ratio)
    kept = r * (m + n) / (m * n)
    assert kept <= 1 - ratio + 1e-12
    assert (r + 1) * (m + n) / (m * n) > 1 - ratio


# ----------------------------------------------------------------------------- compensation

def test_fold_affine_equals_explicit_affine_and_counts_parameters():
    lin = D.LowRankLinear(_rand(5, 2).float(), _rand(2, 4, 1).float())
    g, b = torch.rand(5) + 0.5, torch.randn(5)
    x = torch.randn(7, 4)
    folded = D.fold_affine(lin, g, b)
    assert (folded(x) - (g * lin(x) + b)).abs().max() < 1e-5
    assert D.param_count(folded) == D.param_count(lin) + 5
    again = D.fold_affine(folded, g, b)              # a bias exists already: no new parameters
    assert D.param_count(again) == D.param_count(folded)
    assert (again(x) - (g * folded(x) + b)).abs().max() < 1e-5


def test_moment_match_gives_the_target_moments():
    u, t = _rand(300, 4, 6) * 3 + 1, _rand(300, 4, 7) * 0.5 - 2
    g, b = D.moment_match(u, t)
    y = g * u + b
    assert (y.mean(0) - t.mean(0)).abs().max() < 1e-6
    assert (y.std(0, unbiased=False) - t.std(0, unbiased=False)).abs().max() < 1e-6


def test_refit_and_affine_never_increase_the_branch_error():
    Z, T = _rand(200, 3, 8), _rand(200, 5, 9)
    A0 = _rand(5, 3, 10)
    for lam in (0.0, 1e-3, 1.0):
        A = D.refit_output_factor(A0, Z, T, lam)
        assert float((Z @ A.T - T).pow(2).sum()) <= float((Z @ A0.T - T).pow(2).sum()) + 1e-9
    A_ls = torch.linalg.lstsq(Z, T).solution.T
    assert (D.refit_output_factor(A0, Z, T, 0.0) - A_ls).abs().max() < 1e-8
    u = Z @ A0.T
    g, b = D.affine_ls(u, T)
    assert float((g * u + b - T).pow(2).sum()) <= float((u - T).pow(2).sum()) + 1e-9


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    model = D.LlamaLM(3, 16, 2, 24, 12)
    for p in model.parameters():                     # a random but not near-zero network
        if p.ndim == 2:
            torch.nn.init.normal_(p, std=0.3)
    model.eval()
    x = torch.randint(0, 256, (16, 13))
    return model, x


def test_refit_keeps_the_parameter_count_and_affine_adds_2d_per_block(tiny):
    model, xy = tiny
    x = xy[:, :-1]
    none = D.compress_model(model, "svdllm", 0.5, x)
    refit = D.decomper(none, model, x, "refit")
    affine = D.decomper(none, model, x, "affine")
    assert D.param_count(refit) == D.param_count(none)
    assert D.param_count(affine) == D.param_count(none) + 2 * 16 * 3
    assert D.block_params(none) < 0.5 * D.block_params(model) + 1e-9


@pytest.mark.parametrize("method", D.METHODS)
def test_every_compensation_cuts_the_in_sample_fit_error(tiny, method):
    model, xy = tiny
    x = xy[:, :-1]
    fisher = D.fisher_rows(model, xy, 4)
    none = D.compress_model(model, method, 0.5, x, fisher=fisher)
    before = D.drift_profile(none, model, x)["fit_sq"]
    for v in ("refit", "affine"):
        after = D.drift_profile(D.decomper(none, model, x, v), model, x)["fit_sq"]
        assert after < before


def test_adam_variant_and_global_refit_run_and_fold(tiny):
    model, xy = tiny
    x = xy[:, :-1]
    none = D.compress_model(model, "svd", 0.5, x)
    adam = D.decomper(none, model, x, "adam", steps=20)
    assert D.param_count(adam) == D.param_count(none) + 2 * 16 * 3
    glob = D.global_refit(none, model, x, steps=3)
    assert D.param_count(glob) == D.param_count(none)


def test_drift_of_the_dense_model_against_itself_is_zero_and_A_L_uses_the_same_tensors(tiny):
    model, xy = tiny
    x = xy[:, :-1]
    prof = D.drift_profile(model, model, x)
    assert np.all(prof["abs"] == 0) and np.all(prof["local"] == 0) and np.all(prof["rel"] == 0)
    none = D.compress_model(model, "svd", 0.5, x)
    p = D.drift_profile(none, model, x)
    assert math.isclose(p["A_L"], p["abs"][-1] / p["local"].sum(), rel_tol=1e-12)
    assert math.isclose(p["A_prime_L"], p["abs"][-1] / p["vec_sum_local"][-1], rel_tol=1e-12)
    assert p["fit_sq"] == pytest.approx((p["abs"] ** 2).sum())
    # the per-window squared norms the verdicts resample add up to the profile's norms
    assert np.sqrt(p["abs_sq_w"].sum(0)) == pytest.approx(p["abs"], rel=1e-9)
    assert np.sqrt(p["abs_sq_w"].sum(0) / p["h_sq_w"].sum(0)) == pytest.approx(p["rel"], rel=1e-9)
    assert math.sqrt(p["vec_sum_sq_w"].sum()) == pytest.approx(p["vec_sum_local"][-1], rel=1e-9)
    assert p["abs_sq_w"].shape == (x.shape[0], len(p["abs"]))


def test_pure_carry_gives_ratio_one(tiny):
    model, xy = tiny
    cfg = D.Config.from_profile("smoke")
    carry = D.pure_carry(model, xy[:, :-1], xy[:, :-1], cfg)
    assert abs(carry["ratio_to_delta1"] - 1) < 1e-5 and abs(carry["ratio_to_vec_sum"] - 1) < 1e-5


def test_lowrank_linear_matches_its_dense_weight():
    lin = D.LowRankLinear(torch.randn(6, 2), torch.randn(2, 5), torch.randn(6))
    x = torch.randn(3, 5)
    assert (lin(x) - (x @ lin.dense_weight().T + lin.bias)).abs().max() < 1e-5


# ----------------------------------------------------------------------------- data, config, cache

def test_split_is_by_file_deterministic_and_the_probe_is_balanced():
    files = [(f"f{i}", bytes([65 + i % 20]) * 50 + b"()[]'\"" * 30) for i in range(40)]
    a, b = D.split_by_file(files, 0), D.split_by_file(files, 0)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert sum(len(v) for v in a.values()) == sum(len(d) for _, d in files) + len(files) - 3   # "\n" joins
    ctx, tgt, alt = D.closing_probe(a["train"], 40, seq_len=8)
    counts = {c: int((tgt == c).sum()) for c in (41, 93, 39, 34)}
    assert len(set(counts.values())) == 1 and ctx.shape == (40, 8)
    assert set(zip(tgt.tolist(), alt.tolist())) == {(41, 93), (93, 41), (39, 34), (34, 39)}


def test_split_counts_bytes_and_fills_the_probe():
    """Files of very different sizes: the test split holds >= 5 % of the bytes and min_probe of every probe byte,
    the calibration split >= 5 %; with a file-count rule the 5 % of files could be the smallest ones."""
    rng = np.random.default_rng(1)
    files = [(f"f{i}", bytes(rng.integers(97, 123, size=int(s))) + b")]'\"" * int(s // 500))
             for i, s in enumerate(rng.choice([200, 2_000, 50_000], size=60))]
    total = sum(len(d) for _, d in files)
    for seed in range(5):
        sp = D.split_by_file(files, seed, min_probe=40)
        assert len(sp["test"]) >= 0.05 * total and len(sp["calib"]) >= 0.05 * total
        assert all(int((sp["test"] == c).sum()) >= 40 for c in (41, 93, 39, 34))
        assert len(sp["train"]) > 0.7 * total
    with pytest.raises(ValueError, match="min_probe"):
        D.split_by_file(files, 0, min_probe=10 ** 6)


def test_dense_cache_key_follows_the_train_split():
    cfg = D.Config.from_profile("smoke", seed=0)
    assert D.base_key(cfg, "x", "a") != D.base_key(cfg, "x", "b")


def test_corpus_is_the_stdlib_and_hashed():
    info = D.corpus_info()
    assert info["files"] > 100 and info["bytes"] > 1_000_000 and len(info["sha256"]) == 16


@pytest.mark.parametrize("kw,msg", [
    (dict(n_layers=0), "n_layers"), (dict(d_model=30), "d_model"), (dict(ratios=[0.4, 1.2]), "ratios"),
    (dict(methods=["svd", "pca"]), "methods"), (dict(methods=["svd"]), "methods"), (dict(variants=["affine"]), "variants"),
    (dict(headline_ratio=0.3), "headline_ratio"), (dict(train_steps="900"), "train_steps"),
    (dict(use_cached_base=1), "use_cached_base"), (dict(ratios=[0.4, 0.4]), "ratios"), (dict(ridge=-1.0), "ridge"),
])
def test_config_rejects_bad_values_naming_them(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        D.Config.from_profile("full", **kw)


def test_profiles_build():
    assert D.Config.from_profile("smoke").n_layers == 2
    assert D.Config.from_profile("full").n_layers == 8


def test_base_model_is_cached_and_reloaded(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path))
    cfg = D.Config.from_profile("smoke", use_cached_base=True, train_steps=3)
    data = np.frombuffer(b"def f(x):\n    return (x[0], 'a')\n" * 50, dtype=np.uint8)
    m1, i1 = D.load_or_train_base(cfg, data, "abc")
    m2, i2 = D.load_or_train_base(cfg, data, "abc")
    assert i1["source"] == "trained in this run" and i2["source"].startswith("cache")
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values()))
    assert D.base_key(cfg, "abc") != D.base_key(cfg, "abd")


# ----------------------------------------------------------------------------- verdicts, both ways

rng = np.random.default_rng(0)
N = 256


def test_k1_passes_and_fails():
    dense = 2.3 + 0.1 * rng.standard_normal(N)
    none = dense + 0.2 + 0.01 * rng.standard_normal(N)
    assert V.k1(dense, 3.18, {"svdllm 40 %": none})["holds"]
    assert not V.k1(dense, 3.18, {"svdllm 40 %": dense + 0.01})["holds"]          # gap too small
    assert not V.k1(dense + 0.5, 3.18, {"svdllm 40 %": none + 0.5})["holds"]     # undertrained dense
    assert not V.k1(dense, 3.18, {"svd 60 %": dense + 1.2})["holds"]             # worse than unigram


def test_k2_k3_k4_pass_and_fail():
    d, n, r = np.full(8, 2.0), np.full(8, 2.2), np.full(8, 2.1)
    assert V.k2(d, n, r, 10.0, 5.0)["holds"]
    assert not V.k2(d, n, np.full(8, 2.18), 10.0, 5.0)["holds"]
    items = 3000
    dense = (rng.random(items) < 0.65).astype(float)
    none = dense * (rng.random(items) < 0.8)
    refit = none.copy()
    assert V.k3(dense, none, refit)["holds"]
    assert not V.k3(none, none, refit)["holds"]
    noisy = (rng.random(items) < 0.5).astype(float)
    assert not V.k3(dense, none, noisy)["holds"]                                  # SE of refit − none > 1 pt
    assert V.k4(1.0 + 1e-7, 1.0 - 1e-7)["holds"] and not V.k4(1.01, 1.0)["holds"]


def _balanced(n=N):
    """+1 and -1 in equal numbers, shuffled: a spread whose mean is exactly 0."""
    return rng.permutation(np.repeat([1.0, -1.0], n // 2))


def _blocks(levels, w=None):
    """Per-window squared errors [N, L]: each window's profile is ``levels`` scaled by its own size."""
    w = rng.gamma(4.0, size=N) if w is None else w
    return np.outer(w, np.asarray(levels, float))


def test_c1_hold_and_fail():
    assert V.c1a(_blocks([1, 2, 3, 4]), [0.1, 0.09, 0.08, 0.07])["holds"]
    r = V.c1a(_blocks([1, 2, 1.5, 4]), [0.1, 0.1, 0.1, 0.1])
    assert r["holds"] is False and not r["inconclusive"] and "falling at 2->3" in r["reason"]
    den = rng.gamma(4.0, size=N)
    assert V.c1b(1.3 ** 2 * den * (1 + 0.05 * rng.standard_normal(N)), den, 0.7)["holds"]
    r = V.c1b(0.95 ** 2 * den * (1 + 0.05 * rng.standard_normal(N)), den, 0.7)
    assert r["holds"] is False and not r["inconclusive"]


def test_c1_steps_and_amplification_within_window_noise_are_inconclusive():
    """Issue 41: a step (or A′_L) whose interval over test windows straddles the bar decides nothing."""
    sq = _blocks([1, 2, 2, 4])
    sq[:, 2] = sq[:, 1] * (1 + 0.3 * _balanced())              # block 3 equals block 2 on average, with spread
    r = V.c1a(sq, [0.1, 0.1, 0.1, 0.1])
    lo, hi = r["numbers"]["step diff ci95 (squared error per window)"]["2->3"]
    assert lo < 0 < hi and r["holds"] is None and "within noise" in r["inconclusive"]
    den = rng.gamma(4.0, size=N)
    r = V.c1b(den * (1 + 0.5 * _balanced()), den, 0.7)          # A′_L = 1 exactly, windows scattered around it
    lo, hi = r["numbers"]["A′_L ci95"]
    assert lo < 1 < hi and r["holds"] is None and "within noise of the bar" in r["inconclusive"]


def _cell(gap_none, gap_refit, noise=0.005, n=N):
    dense = 2.3 + 0.1 * rng.standard_normal(n)
    return dense + gap_none + noise * rng.standard_normal(n), dense + gap_refit + noise * rng.standard_normal(n), dense


def test_c2_holds_fails_and_is_inconclusive_with_one_seed():
    good = [_cell(0.2, 0.15) for _ in range(3)]
    ratios = {0.2: _cell(0.1, 0.08)[:2], 0.4: good[0][:2]}
    assert V.c2(good, ratios)["holds"]
    small = [_cell(0.2, 0.19) for _ in range(3)]                                  # 5 % reduction
    assert not V.c2(small, ratios)["holds"]
    hurts = {0.2: _cell(0.1, 0.12)[:2]}
    assert not V.c2(good, hurts)["holds"]
    assert V.c2(good[:1], ratios)["inconclusive"]


def test_c2_reduction_within_window_noise_of_the_bar_is_inconclusive():
    """A 15 % reduction whose bootstrap CI over windows straddles 15 % (refit measurably better) decides nothing;
    the same noise with a 5 % reduction fails (CI wholly below)."""
    ratios = {0.4: _cell(0.2, 0.15)[:2]}
    edge = [_cell(0.2, 0.17, noise=0.05) for _ in range(3)]
    r = V.c2(edge, ratios)
    assert all(lo < 0.15 < hi for lo, hi in r["numbers"]["gap reduction ci95 per calib seed"])
    assert set(r["numbers"]["comparison per seed"]) == {"better"}
    assert r["holds"] is None and "within noise" in r["inconclusive"]
    r = V.c2([_cell(0.2, 0.19, noise=0.005) for _ in range(3)], ratios)
    assert r["holds"] is False and not r["inconclusive"]


def test_c3_hold_and_fail():
    none = (rng.random(2000) < 0.55).astype(float)
    better = np.where(rng.random(2000) < 0.15, 1.0, none)
    assert V.c3(better, none)["holds"]
    r = V.c3(none, none)
    assert not r["holds"] and not r["inconclusive"]            # gain 0, CI [0, 0] wholly below 5 points
    # a gain of ~5 points whose CI covers the bar decides nothing (issue 47: seed 0 read "fails" here)
    edge = np.where(rng.random(2000) < 0.11, 1.0, none)
    r = V.c3(edge, none)
    lo, hi = r["numbers"]["diff ci95 (points)"]
    assert lo < 5 < hi and not r["holds"] and "contains the bar" in r["inconclusive"]


def test_c3_resamples_the_calibration_draws():
    """Issue 41: the gain clears 5 points on the first calibration draw but not on the next two (the pilot at
    seed 3: +8.1, +7.6, +5.9, +7.0, +4.3, +1.8 over six draws); over the three the interval covers the bar."""
    none = (rng.random((3, 2000)) < 0.55).astype(float)
    gains = (0.16, 0.02, 0.03)
    refit = np.stack([np.where(rng.random(2000) < g, 1.0, n) for g, n in zip(gains, none)])
    assert V.c3(refit[0], none[0])["holds"]
    r = V.c3(refit, none)
    assert r["numbers"]["calibration draws"] == 3 and len(r["numbers"]["per calibration draw (points)"]) == 3
    lo, hi = r["numbers"]["diff ci95 (points)"]
    assert lo < 5 < hi and r["holds"] is False and r["inconclusive"]
    assert V.c3(np.stack([np.where(rng.random(2000) < 0.2, 1.0, n) for n in none]), none)["holds"]


def test_c4_holds_fails_and_inconclusive():
    base = 1e-3 * (1 + 0.001 * rng.standard_normal(50))
    lat = {"none": base, "refit": base * 1.01, "none (A/A copy)": base * 1.0}
    params = {"none": 1000, "refit": 1000, "affine": 1000 + 2 * 2 * 1}
    assert V.c4(params, 2, 1, lat)["holds"]
    assert not V.c4({**params, "refit": 1001}, 2, 1, lat)["holds"]
    assert not V.c4(params, 2, 1, {**lat, "refit": base * 1.2})["holds"]
    noisy = {**lat, "none (A/A copy)": base * np.exp(0.3 * rng.standard_normal(50))}
    assert V.c4(params, 2, 1, noisy)["inconclusive"]
    assert V.c4(params, 2, 1, lat, smoke=True)["inconclusive"]
    slow = {**lat, "refit": base * 1.2}                  # smoke: timings decide nothing, not even the condition
    assert V.c4(params, 2, 1, slow, smoke=True)["holds"] == V.c4(params, 2, 1, lat, smoke=True)["holds"]
    edge = {**lat, "refit": base * 1.05 * np.exp(0.02 * _balanced(50))}   # log-ratio mean exactly log 1.05
    r = V.c4(params, 2, 1, edge)
    assert r["holds"] is True and "within noise of the bar" in r["inconclusive"]   # the ledger reads inconclusive


def test_c5_holds_fails_and_inconclusive():
    good = {m: _cell(0.2, 0.1) for m in D.METHODS}
    assert V.c5(good)["holds"]
    bad = {m: _cell(0.2, 0.2 if i else 0.1) for i, m in enumerate(D.METHODS)}
    r = V.c5(bad)
    assert r["holds"] is False and not r["inconclusive"]
    assert V.c5({m: good[m] for m in ("svd", "svdllm")})["inconclusive"]


def test_c5_gains_within_window_noise_leave_it_inconclusive():
    """Two clear gains, one clear miss and one reduction straddling 15 %: 3 may still hold, 2 have not failed."""
    m1, m2, m3, m4 = D.METHODS
    per = {m1: _cell(0.2, 0.1), m2: _cell(0.2, 0.1), m3: _cell(0.2, 0.2), m4: _cell(0.2, 0.17, noise=0.05)}
    r = V.c5(per)
    assert r["numbers"]["gain per method"] == {m1: "holds", m2: "holds", m3: "fails", m4: "inconclusive"}
    assert r["holds"] is None and "within noise" in r["inconclusive"]
    r = V.c5({**per, m4: _cell(0.2, 0.2)})                                      # two clear misses: fails
    assert r["holds"] is False and not r["inconclusive"]


def test_c6_hold_fail_and_inconclusive():
    none = rng.gamma(4.0, size=N)
    small = lambda k: k ** 2 * none * (1 + 0.05 * rng.standard_normal(N))
    r = V.c6(small(0.4), none, 0.03, 0.1, h_sq_L=100 * none)
    assert r["holds"] and r["numbers"]["e_L refit"] == pytest.approx(0.4 * r["numbers"]["e_L none"], rel=0.02)
    r = V.c6(small(0.8), none, 0.05, 0.1)
    assert r["holds"] is False and not r["inconclusive"]
    r = V.c6(0.25 * none * (1 + 0.5 * _balanced()), none, 0.05, 0.1)     # ratio exactly 0.5, windows scattered
    lo, hi = r["numbers"]["ratio ci95 (test)"]
    assert lo < 0.5 < hi and r["holds"] is None and "within noise of the bar" in r["inconclusive"]


def test_claims_and_controls_ids():
    assert list(V.CLAIMS) == ["C1a", "C1b", "C2", "C3", "C4", "C5", "C6"]
    assert list(V.CONTROLS) == ["K1", "K2", "K3", "K4"]


def test_each_master_seed_trains_its_own_dense_model_unless_pinned():
    """Issue 47: seeds 0-4 are five dense models on five file splits; base_seed/split_seed pin them."""
    a, b = D.Config.from_profile("full", seed=0), D.Config.from_profile("full", seed=4)
    assert (a.dense_seed, a.data_split_seed, b.dense_seed, b.data_split_seed) == (0, 0, 4, 4)
    assert D.base_key(a, "x") != D.base_key(b, "x")
    pa, pb = (D.Config.from_profile("full", seed=s, base_seed=1, split_seed=2) for s in (0, 4))
    assert D.base_key(pa, "x") == D.base_key(pb, "x") and pa.data_split_seed == 2
    assert D.base_key(a, "x") != D.base_key(D.Config.from_profile("full", seed=0, split_seed=3), "x")


# ----------------------------------------------------------------------------- negative twins (issue 41)

@pytest.fixture(scope="module")
def blind_lm():
    """An untrained dense model (the chapter's own initialisation, smoke shapes) and a small code-like byte corpus
    with brackets and quotes, split like the chapter's data: the apparatus with the training taken out."""
    r = np.random.default_rng(0)
    words = ["foo", "bar", "x", "y", "self", "data", "key", "val"]
    lines = []
    for i in range(1500):
        a, b = r.choice(words, 2)
        lines.append([f"{a}({b}[{i % 10}])\n", f"{a} = '{b}'\n", f'{a}["{b}"] = ({b}, {a})\n',
                      f"return [{a}, {b}]\n"][i % 4])
    data = np.frombuffer("".join(lines).encode(), dtype=np.uint8)
    n = len(data)
    splits = {"calib": data[int(0.8 * n):int(0.9 * n)], "test": data[int(0.9 * n):]}
    cfg = D.Config.from_profile("smoke", seq_len=32)
    torch.manual_seed(0)
    return cfg, D.build_model(cfg).eval(), splits


@pytest.mark.negative_twin("K1")
def test_k1_fails_for_an_untrained_dense_model(blind_lm):
    """The notebook's K1 measurement (per-window test loss of dense and of SVD-LLM at the headline ratio) on an
    untrained dense model: its loss is log 256 ≈ 5.5 nats/byte, above 0.8 × the unigram entropy, and compressing
    noise costs nothing, so K1 must fail for both reasons."""
    from repro.decomper.data import eval_windows, unigram_entropy
    cfg, dense, splits = blind_lm
    W = eval_windows(splits["test"], cfg.seq_len, 64)
    x = ex.calib_windows(cfg, splits["calib"], 0)[:, :-1]
    none = D.compress_model(dense, "svdllm", cfg.headline_ratio, x)
    r = V.k1(D.test_loss(dense, W), unigram_entropy(splits["test"]), {"svdllm 40 %": D.test_loss(none, W)})
    assert not r["holds"]
    assert r["numbers"]["dense / unigram"] > 1.5 and r["numbers"]["smallest gap"] < V.T["K1_min_gap"]
    assert "undertrained" in r["reason"]


@pytest.mark.negative_twin("K2")
def test_k2_fails_when_the_fitter_is_given_another_models_targets(tiny):
    """The refit fitted against the block trajectory of a different network (targets shuffled across models: the
    fitter cannot see the dense model it is meant to match) must not cut the in-sample fit error; the same code with
    the right targets does cut it."""
    model, xy = tiny
    x = xy[:, :-1]
    torch.manual_seed(1)
    other = D.LlamaLM(3, 16, 2, 24, 12)
    for p in other.parameters():
        if p.ndim == 2:
            torch.nn.init.normal_(p, std=0.3)
    other.eval()
    none = D.compress_model(model, "svdllm", 0.4, x)
    fit_none = D.drift_profile(none, model, x)["fit_sq"]

    def k2_of(target):
        refit = D.decomper(none, target, x, "refit")
        return V.k2(D.test_loss(model, xy), D.test_loss(none, xy), D.test_loss(refit, xy), fit_none,
                    D.drift_profile(refit, model, x)["fit_sq"])
    blind, real = k2_of(other), k2_of(model)
    assert not blind["holds"] and blind["numbers"]["fit error cut"] < 0 and "fit error" in blind["reason"]
    assert real["numbers"]["fit error cut"] > 0.2


@pytest.mark.negative_twin("K3")
def test_k3_fails_for_an_untrained_dense_model(blind_lm):
    """The bracket/quote probe (closing_probe items, probe_correct) answered by an untrained dense model and its
    SVD-LLM compression: accuracy is near chance and compression costs nothing, so K3 must fail."""
    from repro.decomper.data import closing_probe
    cfg, dense, splits = blind_lm
    ctx, tgt, alt = closing_probe(splits["test"], 400, cfg.seq_len)
    x = ex.calib_windows(cfg, splits["calib"], 0)[:, :-1]
    none = D.compress_model(dense, "svdllm", cfg.headline_ratio, x)
    refit = D.decomper(none, dense, x, "refit")
    r = V.k3(*(D.probe_correct(m, ctx, tgt, alt) for m in (dense, none, refit)))
    assert not r["holds"] and r["numbers"]["dense acc"] < 0.5 + V.T["K3_above_chance"]
    assert "above chance" in r["reason"]


@pytest.mark.negative_twin("K4")
def test_k4_fails_when_the_residual_branches_are_kept(tiny):
    """K4's measurement (block 1 compressed by SVD-LLM, drift_profile) on the dense model with the residual
    branches of blocks 2..L left in place: the error is no longer merely carried, so both ratios leave 1 and K4 must
    fail; pure_carry (branches zeroed) on the same model passes."""
    model, xy = tiny
    x = xy[:, :-1]
    cfg = D.Config.from_profile("smoke")
    comp = D.compress_model(model, "svdllm", cfg.headline_ratio, x, blocks=[0])
    p = D.drift_profile(comp, model, x)
    blind = V.k4(p["abs"][-1] / p["local"][0], p["abs"][-1] / p["vec_sum_local"][-1])
    assert not blind["holds"] and blind["numbers"]["largest |ratio − 1|"] > 0.1
    carry = ex.pure_carry(model, x, x, cfg)
    assert V.k4(carry["ratio_to_delta1"], carry["ratio_to_vec_sum"])["holds"]


# Controls still without a negative twin (a test marked @pytest.mark.negative_twin("K…") that runs this
# chapter's code on a blinded apparatus and sees the control fail); issue 41. The contract test keeps this exact.
NEGATIVE_TWINS_PENDING = ()
