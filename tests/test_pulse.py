"""Chapter 19 (PULSE): integrators against their numpy references and a known convergence order, the ECG
generator's semantics, leak-free splits, the probe against cvxpy, PULSE's masking / batching / receptive
field, the baselines' losses against brute force, and a short training smoke test."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from scipy.signal import find_peaks

from repro import pulse as P
from repro.common.params import ConfigError
from repro.pulse import generators as G

torch.set_num_threads(1)
needs_kernel = pytest.mark.skipif(not G.HAVE_KERNEL, reason="compiled kernel not built")


# ----------------------------------------------------------------------------------------------- integrators
def _ecg_inputs(seconds: float, h: float, jitter: bool = True, n: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    subj = G.sample_subjects(n, rng, jitter=jitter)
    omega, z0 = G.ecg_drive(subj, seconds, h, rng)
    phi = rng.uniform(-np.pi, np.pi, n)
    x0 = np.stack([np.cos(phi), np.sin(phi), np.zeros(n)], 1)
    return subj, x0, omega, z0


@needs_kernel
def test_ecg_kernel_matches_numpy_over_10_seconds():
    subj, x0, omega, z0 = _ecg_inputs(10.0, 1 / 500)
    a = G.integrate_ecg(x0, omega, z0, subj.a, subj.b, subj.theta, 1 / 500, backend="cpp")
    b = G.integrate_ecg(x0, omega, z0, subj.a, subj.b, subj.theta, 1 / 500, backend="numpy")
    assert a.shape == (4, 5001, 3)
    assert np.abs(a - b).max() < 1e-10


@needs_kernel
def test_lorenz_kernel_matches_numpy_with_the_same_noise():
    rng = np.random.default_rng(1)
    x0, xi = rng.standard_normal((5, 3)), rng.standard_normal((5, 1199, 3))
    rho = np.array([28, 55, 83, 110, 138.0])
    speed = np.array([G.lorenz_speed(r) for r in rho])
    g = rng.uniform(1, 5, 5)
    a = G.integrate_lorenz(x0, xi, rho, speed, g, G.LORENZ_DT, backend="cpp")
    b = G.integrate_lorenz(x0, xi, rho, speed, g, G.LORENZ_DT, backend="numpy")
    assert np.abs(a - b).max() < 1e-12
    assert np.abs(a[:, 1:] - a[:, :-1]).max() > 0.1  # it moved


@needs_kernel
def test_kernel_rejects_int_arrays_instead_of_copying():
    x0 = np.zeros((1, 3), dtype=np.int64)
    with pytest.raises(TypeError):
        G._kernels.lorenz_sde(x0, np.zeros((1, 2, 3)), np.ones(1), np.ones(1), np.ones(1), 10.0, 8 / 3, 1e-3)


@pytest.mark.parametrize("rho", list(G.OFFICIAL_RHO_GRID))
def test_noise_free_lorenz_stays_finite_on_the_whole_grid(rho):
    ys, info = G.lorenz_sde(rho, n_traj=5, n_keep=1000, noise=0.0, seed=3)
    assert np.isfinite(ys).all() and info["g"] == 0
    # official z-scoring: per-dimension mean removed, then one scalar: the std of all raw values pooled
    assert np.allclose(ys.mean((0, 1)), 0, atol=1e-9) and 0.2 < ys.std() <= 1.0


def test_lorenz_speeds_are_the_official_sweep():
    assert [round(G.lorenz_speed(r), 1) for r in (28, 55, 83, 110, 138)] == [16.0, 14.2, 12.4, 10.7, 8.9]


def test_rk4_is_fourth_order_on_the_smooth_ecg():
    """Without per-beat RR jitter the right-hand side is smooth: halving h divides the error by ~16."""
    subj = G.sample_subjects(4, np.random.default_rng(5), jitter=False)
    subj = subj.take(np.flatnonzero(subj.label == 0)[:1])  # the normal class
    x0 = np.array([[1.0, 0.0, 0.0]])
    seconds = 1.0

    def final(h):
        omega, z0 = G.ecg_drive(subj, seconds, h, np.random.default_rng(0))
        return G.integrate_ecg(x0, omega, z0, subj.a, subj.b, subj.theta, h)[0, -1]

    ref = final(1 / 16000)
    errs = [np.abs(final(h) - ref).max() for h in (1 / 500, 1 / 1000, 1 / 2000)]
    ratios = [errs[0] / errs[1], errs[1] / errs[2]]
    assert all(12 <= r <= 20 for r in ratios), (errs, ratios)


# ----------------------------------------------------------------------------------------------- ECG semantics
def _clean_z(subj, seconds=30.0, seed=0):
    fs = 500
    _, traj = G.ecgsyn(subj, seconds, fs_int=fs, fs=50, seed=seed, return_internal=True)
    return traj, fs


def _r_peaks(z, fs):
    peaks, _ = find_peaks(z, height=np.median(z) + 0.5 * (z.max() - np.median(z)), distance=int(0.3 * fs))
    return peaks


def _fwhm(z, peak):
    base = np.median(z)
    half = base + 0.5 * (z[peak] - base)
    lo = peak
    while lo > 0 and z[lo] > half:
        lo -= 1
    hi = peak
    while hi < len(z) - 1 and z[hi] > half:
        hi += 1
    return hi - lo


def _one_subject_of_each_class(seed=2):
    subj = G.sample_subjects(8, np.random.default_rng(seed))
    return subj, {c: int(np.flatnonzero(subj.label == c)[0]) for c in range(4)}


def test_r_peak_rate_matches_the_mean_rr():
    subj, _ = _one_subject_of_each_class()
    traj, fs = _clean_z(subj)
    for i in np.flatnonzero(~subj.irregular):
        bpm = 60 / (np.diff(_r_peaks(traj[i, :, 2], fs)).mean() / fs)
        assert abs(bpm - 60 / subj.rr0[i]) <= 2, (i, bpm, 60 / subj.rr0[i])


def test_wide_qrs_is_wider_and_inverted_t_flips_and_af_is_irregular():
    subj, idx = _one_subject_of_each_class()
    normal = subj.take(np.array([idx[0]] * 3))
    normal.b[1, G.QRS] *= G.WIDE_QRS_FACTOR  # the wide-QRS change applied to the same subject
    normal.a[1, G.QRS] /= G.WIDE_QRS_FACTOR ** 2
    normal.a[2, 4] *= -0.7                   # the inverted-T change
    normal.rr_cv[:] = 0.0
    traj, fs = _clean_z(normal, seconds=10.0)
    w = [np.median([_fwhm(traj[k, :, 2], p) for p in _r_peaks(traj[k, :, 2], fs)[1:-1]]) for k in (0, 1)]
    assert w[1] >= 1.8 * w[0], w
    theta = np.arctan2(traj[..., 1], traj[..., 0])
    near_t = np.abs(theta - normal.theta[:, 4:5]) < 0.05
    t_wave = [np.mean(traj[k, near_t[k], 2]) - np.median(traj[k, :, 2]) for k in (0, 2)]
    assert t_wave[0] > 0 > t_wave[1], t_wave
    # AF-like rhythm: RR coefficient of variation of detected beats
    traj, fs = _clean_z(subj.take(np.array([idx[3]])), seconds=60.0)
    rr = np.diff(_r_peaks(traj[0, :, 2], fs)) / fs
    assert rr.std() / rr.mean() > 0.15


def test_generators_are_deterministic_and_seed_dependent():
    a, b, c = (G.ecg_dataset(12, 4.0, seed=s) for s in (1, 1, 2))
    assert np.array_equal(a.train.X, b.train.X) and not np.array_equal(a.train.X, c.train.X)
    la, lb = (G.lorenz_dataset([28, 83], 4, 0.1, seed=3) for _ in range(2))
    assert np.array_equal(la.test.X, lb.test.X)
    pa, pb = (G.ppg_dataset(9, 4.0, seed=4) for _ in range(2))
    assert np.array_equal(pa.val.X, pb.val.X)


@pytest.mark.parametrize("make", [lambda: G.ecg_dataset(40, 6.0, seed=0),
                                  lambda: G.lorenz_dataset([28, 55, 83], 10, 0.1, seed=0),
                                  lambda: G.ppg_dataset(30, 6.0, seed=0)])
def test_splits_share_no_recording_and_keep_classes_balanced(make):
    ds = make()
    recs = [set(ds.train.rec), set(ds.val.rec), set(ds.test.rec)]
    assert not (recs[0] & recs[1]) and not (recs[0] & recs[2]) and not (recs[1] & recs[2])
    for ws in (ds.train, ds.val, ds.test):
        share = np.bincount(ws.y, minlength=len(ds.classes)) / len(ws)
        assert np.abs(share - 1 / len(ds.classes)).max() <= 0.05
        assert ws.X.dtype == np.float32 and np.isfinite(ws.X).all()


# ----------------------------------------------------------------------------------------------- probe
def test_probe_matches_cvxpy_multinomial_logistic_regression():
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(0)
    n, d, K, C = 300, 16, 4, 0.5
    y = rng.integers(0, K, n)
    Z = rng.standard_normal((n, d)) + 0.8 * rng.standard_normal((K, d))[y]
    W, b, obj = P.fit_logreg(Z, y, C, K)
    Wv, bv = cp.Variable((d, K)), cp.Variable(K)
    logits = Z @ Wv + np.ones((n, 1)) @ cp.reshape(bv, (1, K), order="C")
    Y = np.eye(K)[y]
    ce = (cp.sum(cp.log_sum_exp(logits, axis=1)) - cp.sum(cp.multiply(Y, logits))) / n
    prob = cp.Problem(cp.Minimize(ce + cp.sum_squares(Wv) / (2 * C * n)))
    prob.solve(solver="CLARABEL")
    assert abs(obj - prob.value) < 1e-5, (obj, prob.value)
    assert obj <= prob.value + 1e-7


def test_label_subset_is_stratified_with_one_per_class():
    y = np.repeat(np.arange(4), 200)
    idx = P.label_subset(y, 0.01, np.random.default_rng(0))
    assert np.array_equal(np.bincount(y[idx]), [2, 2, 2, 2])
    idx = P.label_subset(np.repeat(np.arange(4), 20), 0.01, np.random.default_rng(0))
    assert np.array_equal(np.bincount(np.repeat(np.arange(4), 20)[idx]), [1, 1, 1, 1])


def test_ridge_r2_recovers_a_linear_target_and_not_noise():
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((200, 8))
    groups = np.repeat(np.arange(20), 10)
    assert P.ridge_r2(Z, Z @ rng.standard_normal(8), groups) > 0.95
    assert P.ridge_r2(Z, rng.standard_normal(200), groups) < 0.1


# ----------------------------------------------------------------------------------------------- PULSE
def _model(**kw):
    torch.manual_seed(0)
    kw = dict(dict(hidden=8, emb=16, depth=2, gru_hidden=16, init_hidden=16, pool_denom=25,
                   n_init_samples=2, sample_right_boundary=50), **kw)
    return P.PULSE(3, **kw)


def test_shift_and_mask_with_t0_zero_is_x_from_one_on():
    x = torch.randn(4, 100, 3)
    true, m = P.shift_and_mask(x, torch.zeros(4, dtype=torch.long))
    assert torch.equal(true, x[:, 1:]) and bool(m.all())
    t0 = torch.tensor([0, 5, 30, 49])
    true, m = P.shift_and_mask(x, t0)
    for i, s in enumerate(t0.tolist()):
        L = 99 - s
        assert torch.equal(true[i, :L], x[i, s + 1:]) and m[i, :L].all() and not m[i, L:].any()
        assert torch.count_nonzero(true[i, L:]) == 0


def test_batched_objective_equals_per_pass_objective_without_dropout():
    model = _model(dropout=0.0).eval()
    x = torch.randn(6, 100, 3)
    gen = torch.Generator().manual_seed(0)
    starts = model.draw_starts(6, 100, gen)
    assert len(starts) == 3 and starts[0].eq(0).all() and max(int(s.max()) for s in starts) < 50
    with torch.no_grad():
        a = model.objective(x, x, starts)
        b = model.objective(x, x, starts, per_pass=True)
        assert abs(float(a) - float(b)) < 1e-6
        xb = torch.randn(6, 100, 3)  # cross-window version: c from x, the rest from xb
        assert abs(float(model.objective(x, xb, starts)) - float(model.objective(x, xb, starts, per_pass=True))) < 1e-6


@torch.no_grad()
def test_padded_tail_predictions_do_not_change_the_loss():
    model = _model(dropout=0.0).eval()
    x = torch.randn(5, 100, 3)
    starts = [torch.zeros(5, dtype=torch.long), torch.tensor([0, 10, 20, 30, 49])]
    base = float(model.objective(x, x, starts))
    t0 = torch.cat(starts)
    _, m = P.shift_and_mask(torch.zeros(10, 100, 1), t0)
    h = model.recon.register_forward_hook(lambda mod, inp, out: out + 1e3 * torch.randn_like(out) * (1 - m))
    try:
        perturbed = float(model.objective(x, x, starts))
    finally:
        h.remove()
    assert perturbed == pytest.approx(base, abs=1e-9)
    # the repo's mean counts the masked zeros: one pass's loss is SSE / (B (T - 1 - min t0) C)
    model2 = _model(dropout=0.0, n_init_samples=0).eval()
    pred, true, mm = model2.reconstruct(*model2.encoder(x), x, torch.zeros(5, dtype=torch.long))
    sse = float(((pred - true) ** 2).sum())
    assert float(model2.objective(x, x, [torch.zeros(5, dtype=torch.long)])) == pytest.approx(0.5 * sse / (5 * 99 * 3), rel=1e-6)


@pytest.mark.parametrize("causal, lo, hi", [(False, -3, 3), (True, -6, 0)])
def test_init_encoder_receptive_field(causal, lo, hi):
    torch.manual_seed(0)
    enc = P.InitConditionEncoder(3, 16, 16, dilation=2, causal=causal)
    x = torch.randn(1, 100, 3, requires_grad=True)
    t0 = 40
    enc(x, torch.tensor([t0])).sum().backward()
    nz = torch.nonzero(x.grad.abs().sum(-1)[0]).flatten() - t0
    assert int(nz.min()) == lo and int(nz.max()) == hi


def test_time_varying_drive_is_piecewise_constant():
    tv = P.TimeVarying(16, tv_dim=1, pool_denom=25)
    d = tv(torch.randn(2, 100, 16))
    assert d.shape == (2, 100, 1)
    assert all(len(torch.unique(d[0, k * 25:(k + 1) * 25])) == 1 for k in range(4))


def test_partners_follow_the_variant_rules():
    ds = G.lorenz_dataset([28, 83], 6, 0.1, seed=0)
    gen = torch.Generator().manual_seed(0)
    idx = np.arange(12)
    xw = _model(variant="xwin").partners(idx, ds.train, gen).numpy()
    for i, w in zip(idx, xw):  # same recording, no overlap with the code window
        rec = ds.train.recordings[ds.train.rec[i]]
        s = [k for k in range(rec.shape[0] - 99) if np.array_equal(rec[k:k + 100], w)]
        assert s and abs(s[0] - ds.train.start[i]) >= 100
    orc = _model(variant="oracle").partners(idx, ds.train, gen).numpy()
    for i, w in zip(idx, orc):  # same class, other trajectory
        j = int(np.flatnonzero((ds.train.X == w).all(axis=(1, 2)))[0])
        assert ds.train.y[j] == ds.train.y[i] and ds.train.rec[j] != ds.train.rec[i]


# ----------------------------------------------------------------------------------------------- baselines
def test_nt_xent_matches_a_brute_force_loop():
    z = torch.nn.functional.normalize(torch.randn(8, 5), dim=1)
    tau, n = 0.2, 4
    sim = (z @ z.T / tau).double()
    brute = 0.0
    for i in range(8):
        j = (i + n) % 8
        others = [k for k in range(8) if k != i]
        brute += -(sim[i, j] - torch.logsumexp(sim[i, others], 0))
    assert float(P.nt_xent(z, tau)) == pytest.approx(float(brute / 8), rel=1e-5)


def test_dsvae_kl_matches_torch_distributions():
    from torch.distributions import Normal, kl_divergence

    from repro.pulse.baselines import kl_gauss
    mu, lv, mp, lp = (torch.randn(3, 4) for _ in range(4))
    ref = kl_divergence(Normal(mu, (0.5 * lv).exp()), Normal(mp, (0.5 * lp).exp())).sum()
    assert float(kl_gauss(mu, lv, mp, lp)) == pytest.approx(float(ref), rel=1e-5)


def test_mae_masks_half_of_the_patches():
    mae = P.MaskedAE(2, 8, 16, 2)
    m = mae.patch_mask(3, 100, torch.Generator().manual_seed(0))
    assert m.shape == (3, 100, 1) and torch.all(m.sum(1) == 50)
    assert all(len(torch.unique(m[0, k * 10:(k + 1) * 10])) == 1 for k in range(10))


def test_bootstrap_drop_diff_is_centred_on_the_point_estimate():
    rng = np.random.default_rng(0)
    a0, a1, b0, b1 = (rng.random(200) < p for p in (0.9, 0.8, 0.9, 0.5))
    point, lo, hi = P.bootstrap_drop_diff(a0, a1, b0, b1, rng=1)
    assert lo < point < hi and hi < 0


# ----------------------------------------------------------------------------------------------- training smoke
@pytest.mark.parametrize("method", ["pulse", "pulse_xwin", "pulse_oracle", "simclr", "ts2vec", "mae", "dsvae"])
def test_every_method_trains_and_embeds(method):
    cfg = P.Config.from_profile("smoke")
    ds = G.lorenz_dataset([28, 110], 4, 0.1, seed=0, max_train=64)
    torch.manual_seed(0)
    from repro.pulse.experiments import build
    model = build(method, 3, cfg)
    log = P.fit(model, ds.train, epochs=1, batch_size=32, lr=1e-3, seed=0, max_steps=2)
    assert log.steps == 2 and all(np.isfinite(log.losses))
    Z = P.embed(model.encoder, ds.test.X)
    assert Z.shape == (len(ds.test), cfg.emb_dim) and np.isfinite(Z).all()


def test_pulse_loss_decreases_over_twenty_steps_and_is_deterministic():
    ds = G.lorenz_dataset([28, 110], 4, 0.1, seed=0, max_train=128)
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = _model()
        runs.append(P.fit(model, ds.train, epochs=20, batch_size=32, lr=3e-3, seed=0, max_steps=20).losses)
    assert runs[0] == runs[1]
    assert np.mean(runs[0][-5:]) < 0.8 * np.mean(runs[0][:5])


# ----------------------------------------------------------------------------------------------- config
def test_config_profiles_and_rejections():
    full, smoke = P.Config.from_profile("full"), P.Config.from_profile("smoke")
    assert full.n_seeds == 3 and smoke.n_seeds == 1 and full.lorenz_rhos == P.HARD_RHOS and P.CARD_RHOS == (28, 55, 83, 110, 138)
    bad = [dict(epochs=0), dict(lr=-1.0), dict(emb_dim="32"), dict(ecg_methods=["lfads"]),
           dict(ecg_methods=["simclr"]), dict(label_fracs=[0.0]), dict(sample_right_boundary=100),
           dict(rec_seconds=1.0), dict(lorenz_rhos=[28.0]), dict(fs=60), dict(noise_levels=[0.1, 0.1]), dict(n_seeds=True)]
    for kw in bad:
        name = next(iter(kw))
        with pytest.raises(ConfigError, match=name if name != "rec_seconds" else "window|rec_seconds"):
            P.Config.from_profile("full", **kw)
    with pytest.raises(ConfigError, match="profile"):
        P.Config.from_profile("huge")
    with pytest.raises(ConfigError, match="unknown parameter"):
        P.Config.from_profile("full", n_layers=3)
    names = {f.name for f in dataclasses.fields(P.Config)}
    assert set(P.CLAIMS) == {"C1", "C2", "C3", "C4", "C5", "C6"} and "lorenz_methods" in names


# ----------------------------------------------------------------------------------------------- verdicts
from repro.pulse import verdicts as V  # noqa: E402


def _close(base, deltas):
    return [base + d for d in deltas]


def test_k1_passes_and_fails():
    ok = V.k1({"Lorenz PULSE": [0.7, 0.8, 0.75], "Lorenz MAE": [0.9, 0.88, 0.9]},
              {"Lorenz PULSE": (0.01, 0.02), "Lorenz SimCLR": (0.03, -0.01)})
    assert ok["holds"] and ok["reason"] == ""
    bad = V.k1({"Lorenz PULSE": [0.7, 0.1, 0.75]}, {"Lorenz PULSE": (0.01, 0.02)})
    assert not bad["holds"] and "0.100" in bad["reason"]
    bad = V.k1({"Lorenz PULSE": [0.7, 0.8, 0.75]}, {"ECG DSVAE": (0.09, 0.0)})
    assert not bad["holds"] and "objective moves 9.0%" in bad["reason"]
    # the probe arm alone, in either direction (a 2x run that gets worse has not converged either)
    for mv in (0.05, -0.04):
        bad = V.k1({"Lorenz PULSE": [0.7]}, {"PULSE": (0.01, mv)})
        assert not bad["holds"] and "probe moves" in bad["reason"] and "objective moves" not in bad["reason"]
    assert not V.k1({"Lorenz PULSE": [0.7]}, {})["holds"]  # no doubling test: nothing shows convergence


def test_k2_passes_and_fails_and_ignores_the_oracle():
    rnd = [0.75, 0.78, 0.72]
    ok = V.k2({"Lorenz": {"simclr": [0.85, 0.88, 0.83], "pulse": [0.76, 0.77, 0.74]},
               "ECG": {"pulse": [0.80, 0.82, 0.79]}}, {"Lorenz": rnd, "ECG": [0.7, 0.72, 0.71]})
    assert ok["holds"] and ok["numbers"]["Lorenz best label-free"] == "SimCLR"
    bad = V.k2({"Lorenz": {"pulse_oracle": [0.95, 0.95, 0.95], "pulse": [0.76, 0.79, 0.73]}}, {"Lorenz": rnd})
    assert not bad["holds"] and "PULSE" in bad["reason"]
    noisy = V.k2({"Lorenz": {"pulse": [0.95, 0.70, 0.80]}}, {"Lorenz": rnd})  # +6.7 points, CI straddles 0
    assert not noisy["holds"]


def test_k3_passes_and_fails():
    assert V.k3([0.10, 0.11, 0.10], [0.10, 0.11, 0.105], [0.12, 0.13, 0.125])["holds"]
    bad = V.k3([0.10, 0.11, 0.10], [0.12, 0.13, 0.125], [0.121, 0.128, 0.126])
    assert not bad["holds"] and "no measurable difference" in bad["reason"]


def test_c1_holds_fails_and_is_inconclusive():
    acc = {"pulse": [0.90, 0.92, 0.91], "pulse_oracle": [0.92, 0.93, 0.92], "dsvae": [0.80, 0.81, 0.79],
           "mae": [0.70, 0.72, 0.71], "simclr": [0.85, 0.86, 0.84]}
    r = V.c1(acc)
    assert r["holds"] is True and r["inconclusive"] is None and r["needs"] == ("K2",)
    worse = dict(acc, simclr=[0.95, 0.96, 0.95])
    r = V.c1(worse)
    assert r["holds"] is False and r["inconclusive"] is None and "worse" in r["reason"]
    mixed = dict(acc, simclr=[0.91, 0.90, 0.93])  # PULSE wins 1/3, no measurable difference
    assert V.c1(mixed)["inconclusive"]
    assert V.c1(acc, note="smoke")["inconclusive"] == "smoke"


def test_c2_holds_and_fails():
    def r2(state, rho):
        return {"state": state, "log_rho": rho, "x_t0": state, "x_mean": state}
    good = {"pulse": r2([0.5, 0.52, 0.51], [0.9, 0.91, 0.9]), "dsvae": r2([0.7, 0.72, 0.71], [0.9, 0.9, 0.9]),
            "mae": r2([0.65, 0.66, 0.64], [0.89, 0.9, 0.9])}
    r = V.c2(good)
    assert r["holds"] is True and r["needs"] == ("K1", "K3")
    bad = dict(good, pulse=r2([0.8, 0.82, 0.81], [0.9, 0.91, 0.9]))
    assert V.c2(bad)["holds"] is False
    collapsed = dict(good, pulse=r2([0.2, 0.21, 0.2], [0.5, 0.52, 0.5]))  # drops state by dropping everything
    assert V.c2(collapsed)["holds"] is False


def test_c3_holds_and_fails():
    f1 = {"pulse": [0.80, 0.82, 0.81], "simclr": [0.78, 0.80, 0.79], "ts2vec": [0.7, 0.71, 0.7],
          "mae": [0.6, 0.6, 0.61], "dsvae": [0.7, 0.7, 0.7]}
    assert V.c3(f1)["holds"] is True
    r = V.c3(dict(f1, simclr=[0.90, 0.91, 0.92]))
    assert r["holds"] is False and r["inconclusive"] is None


def test_c4_holds_and_fails():
    probe = {0.01: [0.6, 0.62, 0.61], 0.05: [0.7, 0.72, 0.71]}
    sup = {0.01: [0.4, 0.42, 0.41], 0.05: [0.5, 0.52, 0.5]}
    assert V.c4(probe, sup, {0.01: 8, 0.05: 40})["holds"] is True
    r = V.c4(probe, {0.01: [0.7, 0.72, 0.71], 0.05: [0.5, 0.52, 0.5]})
    assert r["holds"] is False and r["inconclusive"] is None


def test_c5_holds_fails_and_is_underpowered():
    acc = {"pulse": [0.95, 0.96, 0.97], "random": [0.90, 0.90, 0.91], "simclr": [0.91, 0.92, 0.92]}
    assert V.c5(acc, 24)["holds"] is True
    r = V.c5(dict(acc, random=[0.99, 0.99, 0.995]), 24)
    assert r["holds"] is False and r["inconclusive"] is None
    r = V.c5(acc, 6)
    assert r["inconclusive"] and "6 PPG test subjects" in r["inconclusive"]


def test_c6_holds_fails_and_straddles():
    assert V.c6(0.05, 0.2, -0.15, -0.2, -0.1, (0.0, 0.3))["holds"] is True
    r = V.c6(0.2, 0.05, 0.15, 0.1, 0.2, (0.0, 0.3))
    assert r["holds"] is False and r["inconclusive"] is None
    r = V.c6(0.1, 0.08, 0.02, -0.07, 0.1, (0.0, 0.3))
    assert r["inconclusive"] and "contains 0" in r["inconclusive"]


def test_verdicts_feed_the_ledger():
    from repro.common import Ledger
    cfg = P.Config.from_profile("smoke")
    led = Ledger(cfg, V.CLAIMS, controls=V.CONTROLS)
    led.control("K1", **V.k1({"PULSE": [0.1]}, {"PULSE": (0.0, 0.0)}))
    led.control("K2", **V.k2({"Lorenz": {"simclr": [0.9, 0.91, 0.92]}}, {"Lorenz": [0.7, 0.7, 0.71]}))
    led.control("K3", **V.k3([0.1, 0.1, 0.1], [0.1, 0.11, 0.1], [0.2, 0.21, 0.2]))
    good = {"pulse": {"state": [0.5, 0.52, 0.51], "log_rho": [0.9, 0.91, 0.9]},
            "dsvae": {"state": [0.7, 0.72, 0.71], "log_rho": [0.9, 0.9, 0.9]},
            "mae": {"state": [0.65, 0.66, 0.64], "log_rho": [0.89, 0.9, 0.9]}}
    led.record("C2", **V.c2(good))
    assert led.verdict("K1") == "failed" and led.verdict("C2") == "inconclusive"
    assert "control K1 failed" in led.claims["C2"].reason


def test_analysis_helpers():
    from repro.pulse.evaluate import loss_flattening, masked_r2
    x = np.random.default_rng(0).standard_normal((5, 10, 2))
    assert masked_r2(x, x, np.ones((1, 1, 1))) == 1.0
    assert abs(masked_r2(np.zeros_like(x) + x.mean((0, 1)), x, np.ones((1, 1, 1)))) < 1e-12
    f = loss_flattening(np.r_[np.linspace(2, 1, 80), np.full(20, 1.0)])
    assert abs(f["improvement_last_10pct"]) < 1e-12 and f["end_to_start"] < 0.55
    assert loss_flattening(np.linspace(2, 1, 100))["improvement_last_10pct"] > 0.05


def test_k4_passes_and_fails():
    blind = {"PULSE": ([0.30, 0.32, 0.31], [0.05, 0.04, 0.06]), "MAE": ([0.4, 0.42, 0.41], [0.1, 0.12, 0.1])}
    swap = {"PULSE": ([0.5, 0.5, 0.5], [0.6, 0.6, 0.61], [0.7, 0.71, 0.7])}
    ok = V.k4({"DSVAE": [0.9, 0.95]}, blind, {"PULSE": (0.0, 0.01)}, swap)
    assert ok["holds"] and ok["numbers"]["PULSE swap MSE own / same / other"][0] == 0.5
    bad = V.k4({"DSVAE": [0.2, 0.7]}, blind, {"PULSE": (0.0, 0.01)})
    assert not bad["holds"] and "0.200" in bad["reason"]
    # below the system-blind predictor, or not measurably above it: fails (a high R² alone does not pass)
    worse = dict(blind, PULSE=([0.05, 0.04, 0.06], [0.30, 0.32, 0.31]))
    r = V.k4({"DSVAE": [0.9]}, worse, {"PULSE": (0.0, 0.0)})
    assert not r["holds"] and "PULSE's held-out R²" in r["reason"] and "worse" in r["reason"]
    noisy = dict(blind, MAE=([0.9, 0.2, 0.6], [0.5, 0.5, 0.5]))
    r = V.k4({"DSVAE": [0.9]}, noisy, {"PULSE": (0.0, 0.0)})
    assert not r["holds"] and "MAE" in r["reason"] and "no measurable difference" in r["reason"]


def test_k5_needs_headroom_below_a_perfect_score():
    assert V.k5({"random": [0.80, 0.85, 0.82], "simclr": [0.9, 0.88, 0.91]})["holds"]
    r = V.k5({"random": [0.997, 1.0, 1.0], "simclr": [0.9, 0.88, 0.91]})
    assert not r["holds"] and "random init" in r["reason"] and "no headroom" in r["reason"]
    r = V.k5({"random": [0.93, 0.99, 0.96]})  # the interval straddles 0.97: no headroom shown
    assert not r["holds"] and "within noise" in r["reason"]
    assert "K5" in V.NEEDS["C5"]


def test_blind_predictors_see_no_system_and_a_copy_scores_one():
    """The system-blind bar of K4: a forecast from four samples of a sine whose frequency is the window's own
    system is near the top only when the training windows share it; the infill of a smooth signal beats 0."""
    rng = np.random.default_rng(0)
    t = np.arange(100)

    def sines(freqs, n):
        f = rng.choice(freqs, n)
        ph = rng.uniform(0, 2 * np.pi, n)
        x = np.sin(2 * np.pi * f[:, None] * t / 100 + ph[:, None])[:, :, None]
        return G.WindowSet(x.astype(np.float32), np.zeros(n, int), np.arange(n), np.zeros(n, int),
                           x.astype(np.float32), np.zeros(n, int))

    one = sines([3.0], 300)
    same = P.blind_forecast_r2(one, sines([3.0], 50))   # one system: the first samples fix the phase
    mixed = P.blind_forecast_r2(sines([2.0, 3.0, 5.0, 7.0], 300), sines([2.0, 3.0, 5.0, 7.0], 50))
    assert same["best"] > 0.9 and mixed["best"] < same["best"] - 0.3
    assert mixed["best"] == max(mixed["ridge"], mixed["nn"])
    mae = P.MaskedAE(1)
    held = sines([3.0], 40)
    m = mae.patch_mask(40, 100, torch.Generator().manual_seed(0)).numpy()
    mt = mae.patch_mask(300, 100, torch.Generator().manual_seed(1)).numpy()
    inf = P.blind_infill_r2(one, held, m, mt)
    assert inf["nn"] > 0.9 and inf["best"] >= inf["ridge"]


def test_ecg_rule_needs_the_floor_interval_below_the_target(monkeypatch):
    """Issue 42: a candidate is chosen only when the 95% interval of its floor over the calibration seeds lies at
    or below the target; a mean below it with an interval straddling it moves on to the next candidate."""
    floors = {"card": [0.80, 0.78, 0.82, 0.79, 0.81, 0.80], "closer": [0.58, 0.70, 0.60, 0.71, 0.62, 0.63],
              "closer+nuisance": [0.60, 0.61, 0.59, 0.62, 0.60, 0.61], "closest+nuisance": [0.5] * 6}
    seen = []
    monkeypatch.setattr(E, "ecg_random_floors", lambda cfg, name, seeds: seen.append(name) or np.array(floors[name]))
    r = E.ecg_difficulty_rule(P.Config.from_profile("smoke"), target=0.65)
    assert np.mean(floors["closer"]) < 0.65 and r["candidates"]["closer"]["test"].word == "inconclusive"
    assert r["choice"] == "closer+nuisance" and seen == ["card", "closer", "closer+nuisance"]
    assert len(E.ECG_CALIB_SEEDS) >= 6 and r["seeds"] == E.ECG_CALIB_SEEDS
    monkeypatch.setattr(E, "ecg_random_floors", lambda cfg, name, seeds: np.array(floors["card"]))
    assert E.ecg_difficulty_rule(P.Config.from_profile("smoke"), target=0.65)["choice"] == P.ECG_SETTING_NAMES[-1]


def test_card_setting_config_keeps_c3s_methods_only():
    cfg = P.Config.from_profile("full")
    card = E.card_setting_cfg(cfg)
    assert card.ecg_setting == "card" and set(card.ecg_methods) == set(E.C3_METHODS) and card.seed == cfg.seed
    assert cfg.ecg_setting != "card"
    assert E.seeds(card) == E.seeds(cfg)[:cfg.c3_card_seeds]
    two = E.card_setting_cfg(dataclasses.replace(cfg, c3_card_seeds=2))
    assert E.seeds(two) == E.seeds(cfg)[:2]
    card_jobs = [j for j in P.training_jobs(cfg) if j.setting == "card"]
    assert {j.seed for j in card_jobs} == set(E.seeds(card)) and len(card_jobs) == len(E.seeds(card)) * len(card.ecg_methods)


def test_ecg_models_train_at_the_ecg_learning_rate():
    cfg = P.Config.from_profile("full")
    assert E.lr_for(cfg, E.data_key(cfg, "ecg", 0)) == cfg.ecg_lr != cfg.lr
    assert E.lr_for(cfg, E.data_key(cfg, "lorenz", 0)) == cfg.lr
    # the learning rate is part of every model's cache key
    assert "ecg_lr" in E._hparams(cfg)


def test_c6_with_one_training_run_is_inconclusive():
    r = V.c6(0.05, 0.2, -0.15, -0.2, -0.1, (0.0, 0.3), n_runs=1)
    assert r["holds"] is None and "one training run" in r["inconclusive"]


def test_noise_drop_table_pairs_windows_across_levels():
    a = G.lorenz_dataset((28.0, 41.0), 3, 0.0, seed=4)
    b = G.lorenz_dataset((28.0, 41.0), 3, 0.3, seed=4)
    assert np.array_equal(a.test.rec, b.test.rec) and np.array_equal(a.test.start, b.test.start)
    run = E.Run(None)
    for s in (0, 1):
        for lv, base in ((0.0, 1.0), (0.3, 0.0)):
            run.extra[(lv, "pulse", s)] = np.full(5, base)          # PULSE drops 1
            run.extra[(lv, "dsvae", s)] = np.full(5, 0.5 * base)    # DSVAE drops 0.5
    tab = E.noise_drop_table(run, 0.0, 0.3, [0, 1])
    assert tab.shape == (2, 5) and np.allclose(tab, 0.5)


def test_qrs_detector_gives_the_rate_of_every_regular_class_with_nuisances():
    rng = np.random.default_rng(5)
    subj = G.sample_subjects(12, rng, jitter=False)
    x = G.add_nuisance(G.two_channels(G.ecgsyn(subj, 20.0, fs=50, seed=0)), 50, np.random.default_rng(1))
    for i in np.flatnonzero(~subj.irregular):
        assert abs(G.heart_rate_bpm(x[i, :, 0], 50) - 60 / subj.rr0[i]) < 2, (G.ECG_CLASSES[subj.label[i]], i)


# ----------------------------------------------------------------------------------------------- pretraining
def test_pretraining_jobs_are_exactly_the_models_the_studies_train(tmp_path, monkeypatch):
    """Each job run the way a pool worker runs it leaves a cache file; the studies then train nothing more
    (same cache keys), and every job left one file (no job is redundant)."""
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path))
    cfg = P.Config.from_profile("smoke", noise_levels=(0.0, 0.1), label_fracs=(0.1, 1.0), n_label_draws=2,
                                lorenz_methods=("pulse", "pulse_oracle", "dsvae"), k3_seeds=2)
    jobs = P.training_jobs(cfg)
    assert P.Job("pulse_oracle", "lorenz", cfg.seed + 1, cfg.lorenz_noise) in jobs  # K3's extra seed
    assert len(set(jobs)) == len(jobs)
    from repro.pulse.pretrain import run_job
    for j in jobs:
        run_job(cfg, j)
    files = set((tmp_path / "pulse").glob("*.pt"))
    assert len(files) == len(jobs)
    lorenz = P.run_lorenz(cfg)
    k3 = P.run_code_swap(cfg, lorenz)
    assert list(k3.seed) == P.k3_seeds(cfg) == [cfg.seed, cfg.seed + 1] and list(k3.extra_seed) == [False, True]
    P.run_noise(cfg, lorenz)
    P.run_label_efficiency(cfg, P.run_ecg(cfg))
    assert set((tmp_path / "pulse").glob("*.pt")) == files
    assert not list((tmp_path / "pulse").glob(".*.tmp"))


def test_one_worker_pretrains_nothing_up_front(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path))
    out = P.pretrain_all(P.Config.from_profile("smoke"))
    assert out["workers"] == 1 and out["jobs"] > 0
    assert not (tmp_path / "pulse").exists() or not list((tmp_path / "pulse").glob("*.pt"))


# ----------------------------------------------------------------------------------------------- K1's measurement
def _tiny_lorenz():
    return G.lorenz_dataset((28.0, 55.0), 4, 0.1, 100, 50, 64, seed=0)


@pytest.mark.parametrize("method", ["pulse", "dsvae", "simclr"])
def test_held_out_checkpoints_do_not_change_the_training_run(method):
    """Evaluating at checkpoints restores the global RNG and the mode: same losses and weights as without."""
    cfg = P.Config.from_profile("smoke")
    ds = _tiny_lorenz()
    from repro.pulse.experiments import build, eval_windows
    runs = []
    for ev in (None, eval_windows(ds, 0)):
        torch.manual_seed(0)
        m = build(method, ds.n_channels, cfg)
        log = P.fit(m, ds.train, epochs=2, batch_size=16, lr=1e-3, seed=0, eval_data=ev, n_checkpoints=4)
        runs.append((m, log))
    (a, la), (b, lb) = runs
    assert la.losses == lb.losses
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert la.eval_losses == [] and len(lb.eval_losses) == 5 and lb.eval_steps[0] == 0
    assert lb.eval_steps[-1] == lb.steps and np.all(np.isfinite(lb.eval_losses))


def test_eval_loss_is_deterministic_given_the_weights():
    cfg = P.Config.from_profile("smoke")
    ds = _tiny_lorenz()
    from repro.pulse.experiments import build
    from repro.pulse.training import eval_loss
    torch.manual_seed(1)
    m = build("pulse", ds.n_channels, cfg)
    assert eval_loss(m, ds.val, 16) == eval_loss(m, ds.val, 16)
    assert m.training  # mode restored


def test_heldout_flattening_reads_the_90_percent_checkpoint():
    f = P.heldout_flattening([0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100],
                             [10, 8, 6, 5, 4, 3, 2.5, 2.2, 2.1, 2.0, 1.8])
    assert f["improvement_last_10pct"] == pytest.approx(0.1)
    assert f["end_to_start"] == pytest.approx(0.18)
    assert np.isnan(P.heldout_flattening([0, 1], [1.0, 0.5])["improvement_last_10pct"])
    flat = P.heldout_flattening(range(11), [5, 3, 2, 1.5, 1.2, 1.1, 1.05, 1.02, 1.01, 1.0, 0.999])
    assert flat["improvement_last_10pct"] < 0.05


def test_multi_layer_decoder_starts_its_first_layer_at_h0():
    torch.manual_seed(0)
    r = P.ReconstructionGRU(5, 8, 2, layers=2)
    x, h0 = torch.randn(3, 7, 5), torch.randn(3, 8)
    ref, _ = r.gru(x, torch.stack([h0, torch.zeros_like(h0)]))
    assert torch.allclose(r(x, h0), r.out(ref))
    assert r.gru.num_layers == 2


def test_code_swap_averages_partner_draws():
    cfg = P.Config.from_profile("smoke")
    ds = _tiny_lorenz()
    from repro.pulse.experiments import build
    torch.manual_seed(0)
    m = build("pulse_oracle", ds.n_channels, cfg)
    one = P.code_swap_test(m, ds, seed=3, draws=1).mse.to_numpy()
    many = P.code_swap_test(m, ds, seed=3, draws=4).mse.to_numpy()
    assert one[0] == many[0]  # own code: no draw
    assert np.all(np.isfinite(many)) and many.shape == (3,)
    assert np.array_equal(many, P.code_swap_test(m, ds, seed=3, draws=4).mse.to_numpy())


def test_random_floor_averages_several_initialisations():
    cfg = P.Config.from_profile("smoke", n_random_inits=3)
    encs = P.random_inits(cfg, 3, 5)
    assert len(encs) == 3
    w = [e.encoder.input_fc.weight if hasattr(e.encoder, "input_fc") else next(e.encoder.parameters()) for e in encs]
    assert not torch.equal(w[0], w[1]) and not torch.equal(w[1], w[2])
    torch.manual_seed(5)
    first = P.SimCLR(3, hidden=cfg.hidden, emb=cfg.emb_dim, depth=cfg.depth)
    assert torch.equal(next(first.encoder.parameters()), next(encs[0].encoder.parameters()))


# ----------------------------------------------------------------------------- K4: predictability of ECG windows
def test_same_recording_nn_recovers_a_periodic_signal():
    t = np.arange(600)
    rec = np.stack([np.sin(2 * np.pi * t / 25), np.cos(2 * np.pi * t / 25)], -1)[None].repeat(2, 0).astype(np.float32)
    ws = P.make_windows(rec, np.array([0, 1]), np.array([0, 1]), 100, 50)
    r = P.same_recording_nn_r2(ws, context=4, k=3)
    assert r["r2"] > 0.999 and r["r2_second_half"] > 0.999
    mask = np.zeros((len(ws), 100, 1))
    mask[:, 40:60] = 1
    assert P.same_recording_nn_r2(ws, k=3, mask=mask)["r2"] > 0.999


def test_ecg_ceiling_is_one_without_jitter_and_below_with_it():
    rng = np.random.default_rng(0)
    subj = P.sample_subjects(8, rng, jitter=False)
    regular = subj.take(np.flatnonzero(subj.label != 3))  # the irregular class draws iid intervals
    r = P.ecg_prediction_ceiling(regular, n_windows=6, n_draws=3, seed=0)
    assert r["r2"] > 1 - 1e-9
    jit = P.sample_subjects(8, np.random.default_rng(0))
    r = P.ecg_prediction_ceiling(jit, n_windows=12, n_draws=6, seed=0)
    assert 0 < r["r2"] < 0.99 and r["r2_first10"] > r["r2_second_half"]


def test_ecg_settings_rule_candidates():
    """The ECG difficulty rule's candidates: the first is the card's (the generator's defaults), in the config's
    order; later ones only move the morphology classes closer and add nuisance."""
    assert tuple(G.ECG_SETTINGS) == P.ECG_SETTING_NAMES
    card = G.ECG_SETTINGS["card"]
    assert card["wide_factor"] == G.WIDE_QRS_FACTOR and card["t_factor"] == -0.7
    a, b = G.ecg_dataset(12, 4.0, seed=3), G.ecg_dataset(12, 4.0, seed=3, setting="card")
    assert np.array_equal(a.train.X, b.train.X)
    c = G.ecg_dataset(12, 4.0, seed=3, setting="closer")
    assert not np.array_equal(a.train.X, c.train.X)
    prev = card
    for name in P.ECG_SETTING_NAMES[1:]:
        st = G.ECG_SETTINGS[name]
        assert 1 < st["wide_factor"] <= prev["wide_factor"] and prev["t_factor"] <= st["t_factor"] < 0
        assert st["noise"] >= prev["noise"]
        prev = st


# ----------------------------------------------------------------------------------------------- negative twins
# Issue 41, rule 1: each control's decision, fed by the chapter's own measurement code (run_lorenz, run_code_swap)
# at tiny sizes, must fail on a blinded apparatus. The blinding: "pretraining" that leaves every model at its
# initialisation (train_cached replaced by an untrained build), so nothing was learned from the data.
from repro.pulse import experiments as E  # noqa: E402
from repro.pulse.training import TrainLog  # noqa: E402

_TWIN_CFG = dict(lorenz_rhos=(28.0, 41.0, 55.0), lorenz_traj_per_class=3, n_random_inits=1, k3_seeds=3,
                 lorenz_methods=("pulse", "pulse_oracle"))


@pytest.fixture(scope="module")
def untrained_lorenz():
    """Lorenz runs on seeds 0-2 whose pretrained models are untrained (train_cached returns a fresh build)."""
    cfg = P.Config.from_profile("smoke", **_TWIN_CFG)

    def untrained(method, ds, data_key, cfg, seed, **kw):
        torch.manual_seed(seed + 1)  # another initialisation than the random floor's
        return E.build(method, ds.n_channels, cfg, len(ds.classes)), TrainLog()

    mp = pytest.MonkeyPatch()
    mp.setattr(E, "train_cached", untrained)
    try:
        run = E.run_lorenz(cfg, methods=("pulse",), seed_list=[0, 1, 2], swap=False)
        swap = E.run_code_swap(cfg, run)  # PULSE-oracle is not in the run: K3's extra-seed path builds it
    finally:
        mp.undo()
    return run, swap


@pytest.mark.negative_twin("K2")
def test_k2_fails_when_pretraining_learns_nothing(untrained_lorenz):
    run, _ = untrained_lorenz
    acc = E.per_seed(run.table, "acc")
    assert set(acc) == {"pulse", "random"} and len(acc["pulse"]) == 3
    kw = V.k2({"Lorenz": acc}, {"Lorenz": acc["random"]})
    assert not kw["holds"] and "PULSE" in kw["reason"]


@pytest.mark.negative_twin("K3")
def test_k3_fails_when_the_oracle_is_untrained(untrained_lorenz):
    _, swap = untrained_lorenz
    assert len(swap) == 3 and swap.extra_seed.all()
    kw = V.k3(swap.swap_own, swap.swap_same, swap.swap_other)
    assert not kw["holds"] and "no measurable difference" in kw["reason"]


@pytest.mark.negative_twin("K5")
def test_k5_fails_when_the_transfer_task_is_saturated(monkeypatch):
    """The PPG task with each window's class written into its level (+10 per class index): every init fine-tunes
    to 100%, so no init could show an advantage, and K5 says so; the real PPG task at the same tiny size does not
    saturate (its mean is below the bar, though 3 tiny seeds give it too wide an interval to pass)."""
    cfg = P.Config.from_profile("smoke", n_seeds=3, n_subjects_ppg=45, transfer_epochs=20, lr=1e-2)
    real = E.run_transfer(cfg, E.Run(None))  # no pretrained encoders: the random init alone
    make = E.make_ppg

    def saturated(cfg, seed):
        ds = make(cfg, seed)
        for w in (ds.train, ds.val, ds.test):
            w.X = (w.X + 10.0 * w.y[:, None, None]).astype(w.X.dtype)
        return ds

    monkeypatch.setattr(E, "make_ppg", saturated)
    sat = E.run_transfer(cfg, E.Run(None))
    kw = V.k5({"random": sat.sort_values("seed").acc.to_numpy()})
    assert not kw["holds"] and "no headroom" in kw["reason"]
    assert real.acc.mean() < V.THRESHOLDS["K5_max_ref_acc"] <= sat.acc.mean()


@pytest.mark.negative_twin("K1")
def test_k1_doubling_fails_when_the_encoder_trained_an_eighth_of_the_steps(tmp_path, monkeypatch):
    """K1's doubling arm through run_lorenz (real training, tiny sizes): PULSE trained for 4 epochs (16 steps), 1/8 of
    32, is retrained at 8 epochs and its held-out objective still moves by far more than 5% (measured 18-19% on
    seeds 0 and 1; at 32 epochs it still moved 14%: this tiny set is far from converged), so K1 fails and says why.
    (With 3 trajectories per class, 8 steps against 16, the objective moved only 3.5%: a run so short that the
    one-cycle schedule barely moves the weights can pass the objective arm; its probe moved 3.5 points.)"""
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path))
    cfg = P.Config.from_profile("smoke", **dict(_TWIN_CFG, lorenz_traj_per_class=6, epochs=4, lorenz_methods=("pulse",)))
    run = E.run_lorenz(cfg, methods=("pulse",), seed_list=[0], swap=False, double=True)
    r = run.table[run.table.method == "pulse"].iloc[0]
    assert r.double_steps == 2 * r.steps and r.double_obj_move > 2 * V.THRESHOLDS["K1_max_double_obj_move"]
    kw = V.k1({"PULSE": [1.0]}, {"PULSE": (r.double_obj_move, r.double_probe_move)})  # the R² arm made to pass
    assert not kw["holds"] and "twice the steps" in kw["reason"] and "objective moves" in kw["reason"]


@pytest.fixture(scope="module")
def untrained_ecg(tmp_path_factory):
    """ECG runs on seeds 0-2 through the real training path whose PULSE and MAE "pretrain" at a peak learning rate
    of 1e-12 (the weights stay at their initialisation), cached in a temporary folder."""
    mp = pytest.MonkeyPatch()
    mp.setenv("REPRO_CACHE", str(tmp_path_factory.mktemp("cache")))
    try:
        cfg = P.Config.from_profile("smoke", n_seeds=3, ecg_methods=("pulse", "mae"), n_random_inits=1, lr=1e-12,
                                    n_subjects_ecg=40, swap_draws=1)
        return E.run_ecg(cfg)
    finally:
        mp.undo()


@pytest.mark.negative_twin("K4")
def test_k4_fails_when_the_decoders_learned_nothing(untrained_ecg):
    """Untrained PULSE and MAE decoders reconstruct no better than the system-blind predictors fitted on the same
    inputs (below them on average over the seeds), so K4's blind bar fails."""
    t = untrained_ecg.table.sort_values("seed")
    vs = {}
    for m in ("pulse", "mae"):
        g = t[t.method == m]
        assert len(g) == 3 and g.recon_r2.mean() < g.blind_r2.mean()
        vs[E.LABELS[m]] = (g.recon_r2.to_numpy(), g.blind_r2.to_numpy())
    dbl = {E.LABELS[r.method]: (r.double_obj_move, r.double_probe_move) for r in t[t.double_steps.notna()].itertuples()}
    kw = V.k4({"DSVAE": [1.0]}, vs, dbl)
    assert not kw["holds"] and "system-blind" in kw["reason"]


# Controls still without a negative twin (a test marked @pytest.mark.negative_twin("K…") that runs this
# chapter's code on a blinded apparatus and sees the control fail); issue 41. The contract test keeps this exact.
NEGATIVE_TWINS_PENDING = ()
