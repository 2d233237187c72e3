"""Unit tests of chapter 12 (RLTT): tasks and verifiers, the looped model and its KV cache, the one
GRPO/RLTT loss against independent implementations and closed forms, advantages, KL, GSNR, config."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import repro.rltt as rl
from repro.common import ConfigError
from repro.rltt.tasks import COMPLETION_LEN_A, N_OPS, PROMPT_LEN_A, TOK

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = rl.LoopedLM(TOK.vocab_size, d_model=32, n_heads=4, n_layers_per_loop=1, t_max=3, max_len=24)
    # a non-trivial gate so the exit distribution is not near-uniform
    with torch.no_grad():
        m.gate.weight.normal_(0, 1.0)
    return m.eval()


# ----------------------------------------------------------------------------- tasks

def test_task_a_prompts_have_six_operations_and_consistent_traces():
    rng = np.random.default_rng(0)
    for depth in range(0, 7):
        for slots in ("random", "end"):
            p = rl.make_chain_problem(rng, depth, pad_slots=slots)
            assert len(p.prompt) == PROMPT_LEN_A and len(p.completion) == COMPLETION_LEN_A
            ops = p.prompt[1:-1:2]
            assert len(ops) == N_OPS and all(o in (TOK.PLUS, TOK.MINUS, TOK.TIMES) for o in ops)
            assert rl.trace_is_consistent(p.prompt, p.completion)
            assert p.completion[N_OPS] == p.answer
            pads = sum(o == TOK.PLUS and d == 0 for o, d in zip(ops, p.prompt[2:-1:2]))
            assert pads >= N_OPS - depth
    with pytest.raises(ValueError):
        rl.make_chain_problem(rng, 3, n_ops=5)


def test_strided_traces_write_every_s_th_running_result():
    rng = np.random.default_rng(3)
    assert rl.trace_slots(1) == [0, 1, 2, 3, 4] and rl.trace_slots(2) == [1, 3] and rl.trace_slots(3) == [2]
    for stride in (1, 2, 3):
        p1, c1, a1 = rl.chain_batch(np.random.default_rng(9), [2, 5, 6], "random", 1)
        p, c, a = rl.chain_batch(np.random.default_rng(9), [2, 5, 6], "random", stride)
        assert (p == p1).all() and (a == a1).all()                    # the same problems whatever the trace
        assert c.shape[1] == rl.completion_len(stride)
        assert (c[:, :len(rl.trace_slots(stride))] == c1[:, rl.trace_slots(stride)]).all()
        assert (c == rl.chain_reference(p, stride)).all()
        for i in range(3):
            assert rl.trace_is_consistent(p[i], c[i], stride)
            assert rl.reward(c[i].tolist(), a[i]) == 1.0
            bad = c[i].copy()
            bad[0] = (bad[0] + 1) % 10
            assert not rl.trace_is_consistent(p[i], bad, stride)
    prob = rl.make_chain_problem(rng, 6, stride=2)
    assert rl.TOK.decode(prob.completion).split()[-3:] == ["#", str(prob.answer), "<eos>"]
    with pytest.raises(ValueError):
        rl.trace_slots(4)


def test_lucky_guesses_are_rewarded_completions_with_a_wrong_trace():
    p, c, a = rl.chain_batch(np.random.default_rng(4), [5] * 4, "random", 2)
    comp = np.full((4, 8), TOK.PAD)
    comp[:, :5] = c
    comp[1, 0] = (comp[1, 0] + 1) % 10           # wrong trace, right answer: lucky
    comp[2, 3] = (comp[2, 3] + 1) % 10           # wrong answer: not rewarded, not lucky
    comp[3, 4] = TOK.HASH                        # malformed ending ('#' instead of '<eos>'), right answer: lucky
    lucky = rl.lucky_guesses(comp, p, 2)
    assert lucky.tolist() == [False, True, False, True]
    assert rl.batch_rewards(comp, a).tolist() == [1.0, 1.0, 0.0, 1.0]


def test_padding_slots_are_random_or_at_the_end():
    rng = np.random.default_rng(1)
    p, _, _ = rl.chain_batch(rng, np.full(4000, 1), "end")
    assert (p[:, 3:-1:2] == TOK.PLUS).all() and (p[:, 4:-1:2] == 0).all()   # only slot 1 may be active
    p, _, _ = rl.chain_batch(rng, np.full(4000, 1), "random")
    active = ~((p[:, 1:-1:2] == TOK.PLUS) & (p[:, 2:-1:2] == 0))
    assert active[:, -1].mean() > 0.1                                    # the last slot is used at depth 1


def test_generator_is_seeded():
    a = rl.chain_batch(np.random.default_rng(5), [3, 4, 5])
    b = rl.chain_batch(np.random.default_rng(5), [3, 4, 5])
    assert all((x == y).all() for x, y in zip(a, b))


def test_verifier_accepts_reference_and_rejects_corruptions():
    rng = np.random.default_rng(2)
    for _ in range(200):
        p = rl.make_chain_problem(rng, int(rng.integers(1, 7)))
        assert rl.reward(p.completion, p.answer) == 1.0
        bad = list(p.completion)
        bad[N_OPS] = (bad[N_OPS] + int(rng.integers(1, 10))) % 10
        assert rl.reward(bad, p.answer) == 0.0
        no_hash = [t for t in p.completion if t != TOK.HASH]
        assert rl.reward(no_hash, p.answer) == 0.0
        # nothing after the first <eos> is read
        early = [TOK.EOS] + list(p.completion)
        assert rl.reward(early, p.answer) == 0.0
        assert rl.reward(list(p.completion) + [TOK.HASH, 3], p.answer) == 1.0
    b = rl.make_sort_problem(rng, 6, "S")
    assert rl.exact_match(b.completion + [5, 5], b.completion) == 1.0
    assert rl.exact_match(b.completion[:-1] + [TOK.PAD], b.completion) == 0.0
    assert b.completion[1:-1] == sorted(b.prompt[1:-1])
    r = rl.make_sort_problem(rng, 5, "R")
    assert r.completion[1:-1] == r.prompt[1:-1][::-1]


def test_batch_rewards_match_the_scalar_verifier():
    rng = np.random.default_rng(3)
    comp = rng.choice([0, 1, 2, 3, TOK.HASH, TOK.EOS, TOK.PAD], size=(3000, 8), p=[.15, .15, .15, .15, .2, .1, .1])
    ans = rng.integers(0, 4, size=3000)
    ref = np.array([rl.reward(c, a) for c, a in zip(comp, ans)])
    assert ref.sum() > 50
    np.testing.assert_array_equal(rl.batch_rewards(comp, ans), ref)


def test_imperfect_teacher_slips_only_on_its_facts_and_carries_its_mistake_on():
    """The SFT teacher of issue 46: with q = 1 every '× 3' and '× 7' step is written (ab + 5) mod 10 and the chain goes on from
    it (brute force below); the prompts are those of the exact teacher; q = 0 is the exact teacher; problems without
    such a step are untouched; and has_teacher_fact finds exactly the prompts with such a step."""
    depths = np.full(400, 6)
    p0, c0, a0 = rl.chain_batch(np.random.default_rng(3), depths, "random", 2)
    p1, c1, a1 = rl.chain_batch(np.random.default_rng(3), depths, "random", 2, teacher_error=1.0)
    pz, cz, az = rl.chain_batch(np.random.default_rng(3), depths, "random", 2, teacher_error=0.0)
    np.testing.assert_array_equal(p0, p1)
    np.testing.assert_array_equal(c0, cz)
    np.testing.assert_array_equal(a0, az)
    fact = rl.has_teacher_fact(p0)
    for i in range(len(depths)):
        acc, res, seen = int(p0[i, 0]), [], False
        for k in range(N_OPS):
            op, b = TOK.decode([int(p0[i, 1 + 2 * k])]), int(p0[i, 2 + 2 * k])
            acc = {"+": acc + b, "-": acc - b, "*": acc * b}[op] % 10
            if op == rl.TEACHER_FACT[0] and b in rl.TEACHER_FACT[1]:
                acc, seen = (acc + rl.TEACHER_SHIFT) % 10, True
            res.append(acc)
        assert seen == fact[i]
        assert a1[i] == res[-1] and list(c1[i]) == [res[1], res[3], TOK.HASH, res[5], TOK.EOS]
    np.testing.assert_array_equal(c1[~fact], c0[~fact])
    assert 0.2 < fact.mean() < 0.45 and (a1[fact] != a0[fact]).mean() > 0.2
    x, y, m = rl.sft_batch(np.random.default_rng(4), 64, stride=2, teacher_error=0.6)   # the SFT path takes it
    assert x.shape == y.shape == m.shape


def test_sft_batch_masks_completion_targets():
    x, y, m = rl.sft_batch(np.random.default_rng(4), 32)
    assert x.shape == y.shape == m.shape
    inside = x[:, 1:] != TOK.PAD
    np.testing.assert_array_equal(x[:, 1:][inside], y[:, :-1][inside])     # targets are the next inputs
    assert (y[m] != TOK.PAD).all()
    assert ((y == TOK.EOS) <= m).all() and ((y == TOK.HASH) <= m).all()     # <eos> and '#' are always scored
    assert (m.sum(1) >= 6).all()


# ----------------------------------------------------------------------------- model

def test_exit_pdf_sums_to_one_and_matches_closed_form():
    lam = torch.tensor([0.2, 0.5, 0.9, 0.3])
    p = rl.exit_pdf_from_gates(lam)
    expected = torch.tensor([0.2, 0.8 * 0.5, 0.8 * 0.5 * 0.9, 0.8 * 0.5 * 0.1])
    torch.testing.assert_close(p, expected)
    lam = torch.rand(5, 7, 4)
    torch.testing.assert_close(rl.exit_pdf_from_gates(lam).sum(-1), torch.ones(5, 7))
    assert torch.equal(rl.exit_pdf_from_gates(torch.rand(3, 1)), torch.ones(3, 1))


def test_model_shapes_and_exit_pdf(model):
    ids = torch.randint(0, TOK.vocab_size, (2, 11))
    out = model(ids)
    assert out.per_loop_logits.shape == (3, 2, 11, TOK.vocab_size)
    assert out.exit_pdf.shape == (2, 11, 3)
    torch.testing.assert_close(out.exit_pdf.sum(-1), torch.ones(2, 11))
    last = model(ids, readout="last").per_loop_logits
    torch.testing.assert_close(last[0], out.per_loop_logits[-1])
    two = model(ids, n_loops=2).per_loop_logits
    torch.testing.assert_close(two, out.per_loop_logits[:2])   # truncation = the first t loops
    with pytest.raises(ValueError):
        model(ids, n_loops=4)


def test_kv_cache_decoding_equals_full_recomputation(model):
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    prompts = torch.from_numpy(rl.chain_batch(np.random.default_rng(0), [3] * 6)[0])
    for n_loops in (1, 3):
        a = rl.generate(model, prompts, 10, n_loops=n_loops)
        b = rl.generate_full(model, prompts, 10, n_loops=n_loops)
        assert torch.equal(a, b)
    assert torch.equal(rl.generate(model, prompts, 10, 1.0, g1), rl.generate_full(model, prompts, 10, 1.0, g2))
    # a shared prompt cache for G samples per prompt = the prompt repeated G times
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(rl.generate(model, prompts, 10, 1.0, g1, repeats=3),
                       rl.generate_full(model, prompts.repeat_interleave(3, 0), 10, 1.0, g2))
    # the logits themselves, step by step
    seq = torch.randint(0, 10, (4, 20))
    out = model(seq[:, :12], use_cache=True, readout="last")
    cache, steps = out.cache, [out.per_loop_logits[0]]
    for j in range(12, 20):
        o = model(seq[:, j:j + 1], cache=cache, use_cache=True, readout="last")
        cache = o.cache
        steps.append(o.per_loop_logits[0])
    full = model(seq, readout="last").per_loop_logits[0]
    assert (torch.cat(steps, 1) - full).abs().max() < 1e-5


# ----------------------------------------------------------------------------- loss

def _rollout_batch(model, seed=0, P=3, G=4):
    prompts, answers = rl.rl_prompts(np.random.default_rng(seed), P, "random")
    ids, mask, comp = rl.sample_rollouts(model, prompts, G, 1.0, 10, torch.Generator().manual_seed(seed))
    rewards = torch.from_numpy(rl.batch_rewards(comp.numpy(), np.repeat(answers, G)))
    rewards[::3] = 1.0 - rewards[::3]   # make sure some groups have variance
    return ids, mask, rl.group_advantages(rewards, G)


def test_loop_weights_sum_to_one():
    for s in ("grpo", "uniform", "progressive"):
        assert abs(float(rl.loop_weights(s, 4).sum()) - 1) < 1e-6
    torch.testing.assert_close(rl.loop_weights("progressive", 5, alpha=0.0), rl.loop_weights("uniform", 5))
    torch.testing.assert_close(rl.loop_weights("progressive", 3, alpha=1.0), torch.tensor([1 / 6, 2 / 6, 3 / 6]))
    assert torch.equal(rl.loop_weights("grpo", 3), torch.tensor([0.0, 0.0, 1.0]))
    w = rl.loop_weights("learned", 4, learned_logits=torch.randn(4))
    assert abs(float(w.sum()) - 1) < 1e-6
    ep = torch.rand(2, 3, 4, requires_grad=True)
    assert rl.loop_weights("exit_pdf", 4, exit_pdf=ep).requires_grad
    assert not rl.loop_weights("exit_pdf_detached", 4, exit_pdf=ep).requires_grad
    with pytest.raises(ValueError):
        rl.loop_weights("exit_pdf", 4)
    with pytest.raises(ValueError):
        rl.loop_weights("nope", 4)


def _grpo_reference(final_lp, adv, mask, ref_lp, beta):
    """An independent GRPO (on-policy, sequence-mean) written with explicit loops."""
    B = final_lp.shape[0]
    total = 0.0
    for i in range(B):
        idx = mask[i].nonzero().flatten()
        pg = -adv[i] * final_lp[i, idx].sum() / len(idx)
        d = ref_lp[i, idx] - final_lp[i, idx]
        kl = (torch.exp(d) - d - 1).sum() / len(idx)
        total = total + pg + beta * kl
    return total / B


def test_rltt_with_one_hot_last_loop_equals_grpo(model):
    ids, mask, adv = _rollout_batch(model)
    lp, ep, tmask = rl.per_loop_token_logprobs(model, ids, mask, temperature=0.9)
    ref_lp = lp[..., -1].detach() + 0.05 * torch.randn_like(lp[..., -1])
    loss, _ = rl.rltt_loss(lp, adv, tmask, rl.loop_weights("grpo", 3), ref_lp, beta=0.3)
    ref = _grpo_reference(lp[..., -1], adv, tmask, ref_lp, 0.3)
    assert abs(float(loss.detach()) - float(ref.detach())) < 1e-6
    # and through the cheaper last-loop-only forward that training uses for GRPO
    lp1, ep1, _ = rl.per_loop_token_logprobs(model, ids, mask, temperature=0.9, last_only=True)
    assert ep1 is None and lp1.shape[-1] == 1
    loss1, _ = rl.rltt_loss(lp1, adv, tmask, torch.ones(1), ref_lp, beta=0.3)
    assert abs(float(loss1.detach()) - float(loss.detach())) < 1e-6


def test_with_one_loop_every_weighting_is_grpo():
    torch.manual_seed(1)
    lp = -torch.rand(6, 5, 1)
    adv, mask = torch.randn(6), torch.rand(6, 5) > 0.3
    mask[:, 0] = True
    ref_lp = -torch.rand(6, 5)
    base, _ = rl.rltt_loss(lp, adv, mask, rl.loop_weights("grpo", 1), ref_lp, 0.1)
    for s in ("uniform", "progressive"):
        other, _ = rl.rltt_loss(lp, adv, mask, rl.loop_weights(s, 1), ref_lp, 0.1)
        assert abs(float(other) - float(base)) < 1e-7
    ep = rl.exit_pdf_from_gates(torch.rand(6, 5, 1))
    other, _ = rl.rltt_loss(lp, adv, mask, ep, ref_lp, 0.1)
    assert abs(float(other) - float(base)) < 1e-7


def test_pg_gradient_matches_closed_form():
    torch.manual_seed(2)
    B, L, T = 8, 6, 4
    lp = (-torch.rand(B, L, T)).requires_grad_(True)
    adv = torch.randn(B)
    mask = torch.rand(B, L) > 0.4
    mask[:, 0] = True
    w = torch.softmax(torch.randn(B, L, T), -1)                        # per-token weights (detached)
    loss, _ = rl.rltt_loss(lp, adv, mask, w)
    loss.backward()
    n = mask.sum(1, keepdim=True).float()
    expected = -adv[:, None, None] * w * mask[..., None].float() / (B * n[..., None])
    torch.testing.assert_close(lp.grad, expected)


def test_advantages():
    r = torch.tensor([1., 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 1])
    a = rl.group_advantages(r, 4).view(3, 4)
    assert torch.equal(a[0], torch.zeros(4))
    for row in a[1:]:
        assert abs(float(row.mean())) < 1e-6 and abs(float(row.std()) - 1) < 1e-6


def test_k3_kl_is_nonnegative_and_zero_at_reference():
    torch.manual_seed(3)
    a, b = -torch.rand(1000) * 3, -torch.rand(1000) * 3
    assert (rl.k3_kl(a, b) >= 0).all()
    assert float(rl.k3_kl(a, a).abs().max()) == 0.0


def test_per_loop_logprobs_match_a_slow_token_by_token_loop(model):
    ids, mask, _ = _rollout_batch(model, seed=1, P=2, G=2)
    lp, ep, tmask = rl.per_loop_token_logprobs(model, ids, mask, temperature=0.7)
    with torch.no_grad():
        for i in range(ids.shape[0]):
            for j in range(1, ids.shape[1]):
                if not mask[i, j]:
                    continue
                out = model(ids[i:i + 1, :j])
                for t in range(model.t_max):
                    slow = torch.log_softmax(out.per_loop_logits[t, 0, -1] / 0.7, -1)[ids[i, j]]
                    assert abs(float(slow - lp[i, j - 1, t])) < 1e-5
                torch.testing.assert_close(out.exit_pdf[0, -1], ep[i, j - 1], atol=1e-6, rtol=0)


def test_rl_training_is_paired_and_deterministic(model):
    cfg = rl.Config.from_profile("smoke", t_max=3, d_model=32, rl_steps=2, use_cached_sft=False)
    a = rl.train_rl(model, ["grpo", "exit_pdf", "uniform"], cfg, seed=7)
    b = rl.train_rl(model, ["grpo", "exit_pdf"], cfg, seed=7)
    for m in ("grpo", "exit_pdf"):
        assert a[m].log["reward"] == b[m].log["reward"]          # a third method does not perturb the pair
        for p, q in zip(a[m].model.parameters(), b[m].model.parameters()):
            assert torch.equal(p, q)
    # an untrained model earns no reward: every group has zero variance, Â = 0, the policy sits at the
    # reference (KL gradient 0), so on-policy REINFORCE must leave it exactly where it was
    assert all(z == 1.0 for z in a["grpo"].log["zero_var"])
    assert all(torch.equal(p, q) for p, q in zip(a["exit_pdf"].model.parameters(), model.parameters()))


def test_rl_step_moves_the_model_when_rewards_vary(model, monkeypatch):
    cfg = rl.Config.from_profile("smoke", t_max=3, d_model=32, group_size=4, use_cached_sft=False)
    m = rl.clone_model(model)
    run = rl.RLRun("exit_pdf", m, torch.optim.Adam(m.parameters(), lr=1e-3))
    prompts, answers = rl.rl_prompts(np.random.default_rng(0), 3, "random")
    # a verifier stub that rewards every other rollout, so every group has variance
    monkeypatch.setattr(rl.rl, "batch_rewards", lambda comp, ans: (np.arange(len(comp)) % 2).astype(float))
    rl.rl_step(run, model, prompts, answers, cfg, torch.Generator().manual_seed(0))
    assert run.log["zero_var"][0] == 0.0 and run.log["reward"][0] == 0.5
    assert any(not torch.equal(p, q) for p, q in zip(run.model.parameters(), model.parameters()))
    assert abs(sum(run.log["exit_pdf"][0]) - 1) < 1e-5


# ----------------------------------------------------------------------------- GSNR

def test_batched_gsnr_equals_per_rollout_loop(model):
    R = 4
    ids, mask, adv = _rollout_batch(model, seed=2, P=3, G=R)
    g = rl.rollout_logit_grads(model, ids, mask, adv)
    loops = []
    for i in range(ids.shape[0]):
        z = model(ids[i:i + 1, :-1], readout="last").per_loop_logits[0].detach().requires_grad_(True)
        lp = torch.log_softmax(z, -1).gather(-1, ids[i:i + 1, 1:, None]).squeeze(-1)
        (-(adv[i] * lp * mask[i:i + 1, 1:].float()).sum()).backward()
        loops.append(z.grad.flatten())
    torch.testing.assert_close(g, torch.stack(loops), atol=1e-6, rtol=1e-5)
    per_prompt = rl.gsnr_from_grads(g, R)
    for p in range(3):
        gp = torch.stack(loops[p * R:(p + 1) * R]).double()
        mu = gp.mean(0)
        expected = float((mu ** 2).sum() / (((gp - mu) ** 2).sum(1).mean() + 1e-8))
        assert abs(per_prompt[p] - expected) <= 1e-9 * max(1.0, expected)
    # a zero-variance group has zero gradient and GSNR 0
    assert rl.gsnr_from_grads(torch.zeros(R, 10), R)[0] == 0.0


# ----------------------------------------------------------------------------- config and statistics

def test_config_rejects_bad_values_naming_them():
    bad = {"n_seeds": 0, "t_max": "4", "d_model": 30, "rl_lr": -1.0, "temperature": 0.0,
           "loop_weighting": "grpo", "pad_slots": "middle", "use_cached_sft": 1,
           "ablation_weightings": ["nope"], "max_new_tokens": 4, "group_size": 1,
           "trace_stride": 4, "teacher_error": 1.0}
    for name, value in bad.items():
        with pytest.raises(ConfigError, match=name):
            rl.Config.from_profile("full", **{name: value})
    with pytest.raises(ConfigError, match="ablation_weightings"):
        rl.Config.from_profile("full", ablation_weightings=["exit_pdf"])
    with pytest.raises(ConfigError, match="max_new_tokens"):      # stride 1 needs 8 tokens
        rl.Config.from_profile("full", trace_stride=1, max_new_tokens=7)
    with pytest.raises(ConfigError, match="profile"):
        rl.Config.from_profile("huge")
    cfg = rl.Config.from_profile("smoke")
    assert cfg.t_max == 2 and cfg.d_ff == 88 and rl.Config().d_ff == 172
    assert {f.name for f in dataclasses.fields(rl.Config)} >= {"n_seeds", "loop_weighting", "rl_lr"}


def test_paired_t_against_scipy():
    from scipy import stats
    a, b = np.array([.5, .6, .55, .7, .62]), np.array([.48, .61, .5, .66, .6])
    d, (lo, hi), p = rl.paired_t(a, b)
    assert abs(d - (a - b).mean()) < 1e-12 and lo < d < hi
    assert abs(p - stats.ttest_rel(a, b).pvalue) < 1e-12


def test_sft_objective_trains_every_loop():
    cfg = rl.Config.from_profile("smoke", sft_steps=25, sft_batch=16, t_max=2)
    torch.manual_seed(0)
    m = rl.build_model(cfg, TOK.vocab_size)
    hist = rl.train_sft(m, cfg, log_every=24)
    assert hist["ce_loop1"][-1] < hist["ce_loop1"][0] and hist["ce_loop2"][-1] < hist["ce_loop2"][0]
    assert rl.sft_key(cfg) == rl.sft_key(cfg) and rl.sft_key(cfg) != rl.sft_key(cfg.replace(sft_steps=41))


def test_shared_prompt_forward_equals_the_plain_forward(model):
    ids, mask, adv = _rollout_batch(model, seed=3, P=3, G=4)
    plain = rl.per_loop_token_logprobs(model, ids, mask, 0.9)
    shared = rl.per_loop_token_logprobs(model, ids, mask, 0.9, group_size=4, prompt_len=PROMPT_LEN_A)
    tm = plain[2]
    assert (plain[0][tm] - shared[0][tm]).abs().max() < 1e-5
    assert (plain[1][tm] - shared[1][tm]).abs().max() < 1e-5
    grads = []
    for lp, ep, _ in (plain, shared):
        model.zero_grad()
        rl.rltt_loss(lp, adv, tm, ep, lp[..., -1].detach() - 0.1, 0.5)[0].backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    model.zero_grad()
    assert (grads[0] - grads[1]).abs().max() < 1e-5 * max(1.0, float(grads[0].abs().max()))
    with pytest.raises(ValueError):
        rl.per_loop_token_logprobs(model, ids.roll(1, 0), mask, 0.9, group_size=4, prompt_len=PROMPT_LEN_A)


# ----------------------------------------------------------------------------- verdicts (each control passes and
# fails, each claim holds and fails, on synthetic numbers)

from repro.rltt import verdicts as V  # noqa: E402


def _loops(means, n=600):
    """[T, n] per-problem correctness with the given per-loop accuracies, nested (problem i is right at loop t when
    u_i < p_t, one u per problem): a rise between loops is a set of problems that turn right, a fall one that turn
    wrong."""
    u = (np.arange(n) + 0.5) / n
    return np.array([(u < p).astype(float) for p in means])


def test_k1_passes_on_rising_loops_and_fails_on_a_fall_or_a_rise_not_clear_of_its_bar():
    assert V.k1(_loops([.29, .45, .52, .55]), _loops([.25, .40, .45, .47]))["holds"]
    # issue 41: a plateau whose last step dips inside its noise is no evidence against using the loops
    dip = V.k1(_loops([.29, .45, .52, .55]), _loops([.21, .35, .353, .352]))
    assert dip["holds"], dip["reason"]
    fall = V.k1(_loops([.40, .55, .45, .50]), _loops([.25, .40, .45, .47]))
    assert not fall["holds"] and "falls measurably at loop step(s) 2->3" in fall["reason"]
    small = V.k1(_loops([.50, .51, .515, .52]), _loops([.25, .40, .45, .47]))     # +2 points: CI not clear of 3
    assert not small["holds"] and "rises +2.00 points" in small["reason"]
    assert not V.k1(_loops([.29, .45, .52, .55]), _loops([.25, .26, .26, .26]))["holds"]   # sampled must rise too
    assert not V.k1(_loops([.5]), _loops([.5]))["holds"]


def _best(test_all, val=None):
    """best_temperature's output for a given test table (validation = test unless given)."""
    val = dict(test_all if val is None else val)
    best = max(val, key=lambda k: (val[k], k == "greedy"))
    return {"val": val, "best": best, "test": test_all[best], "test_all": dict(test_all)}


def test_k2_passes_when_grpo_moves_beyond_twice_its_ci_and_fails_otherwise():
    sft = _best({"greedy": 0.45, "0.3": 0.46, "0.5": 0.47, "0.9": 0.44})
    ok = V.k2([.49, .492, .488, .491, .489], sft, 0.9)
    assert ok["holds"] and ok["numbers"]["gain / half-width"] > 2
    assert ok["numbers"]["SFT best temperature (validation)"] == "0.5"
    noisy = V.k2([.49, .45, .50, .46, .48], sft, 0.9)
    assert not noisy["holds"] and "seed noise" in noisy["reason"]
    assert not V.k2([.46, .461, .459, .46, .462], sft, 0.9)["holds"]         # moved, but down
    assert not V.k2([.49], sft, 0.9)["holds"]
    # sharpening: GRPO beats SFT at the rollout τ clearly, but not the re-tempered SFT model
    sharp = V.k2([.465, .466, .464, .465, .466], sft, 0.9, [.45] * 5)
    assert not sharp["holds"] and "re-tempering" in sharp["reason"]
    assert sharp["numbers"]["GRPO gain over SFT at rollout τ (points)"] > 2
    greedy = V.k2([.465, .466, .464, .465, .466], sft, 0.9, [.47, .471, .469, .47, .472])   # a greedy gain suffices
    assert greedy["holds"] and greedy["numbers"]["greedy gain / half-width"] > 2
    # the temperature is chosen on validation and only scored on test: a test-best τ that validation did not
    # pick is not the reference (here validation picks greedy, whose test accuracy 0.45 GRPO beats)
    chosen = _best({"greedy": 0.45, "0.3": 0.46, "0.5": 0.47, "0.9": 0.44},
                   val={"greedy": 0.50, "0.3": 0.46, "0.5": 0.47, "0.9": 0.44})
    r = V.k2([.465, .466, .464, .465, .466], chosen, 0.9)
    assert chosen["best"] == "greedy" and r["holds"] and r["numbers"]["SFT best temperature (validation)"] == "greedy"


def test_best_temperature_chooses_on_validation_and_scores_test(model):
    """best_temperature picks the key with the highest validation accuracy and reports the test accuracy there."""
    sets = rl.eval_sets(0, 12, "random", 2)
    val = rl.val_set(0, 12, "random", 2)
    assert [p.prompt for p in val] != [p.prompt for p in sets["hard"]]
    assert sets == rl.eval_sets(0, 12, "random", 2)                             # val leaves the test sets alone
    b = rl.best_temperature(model, val, sets["hard"], 8, 2, 0.9)
    assert set(b["val"]) == {"greedy", "0.3", "0.5", "0.7", "0.9"} and {"greedy", "0.9", b["best"]} == set(b["test_all"])
    assert b["val"][b["best"]] == max(b["val"].values()) and b["test"] == b["test_all"][b["best"]]


GRPO_S = np.array([.490, .492, .488, .491, .489])


def test_c1_holds_when_rltt_wins_beyond_noise_and_fails_otherwise():
    g_g = np.array([.54, .53, .55, .54, .53])
    win = V.c1(GRPO_S + np.array([.010, .012, .008, .011, .009]), GRPO_S, .47, g_g, g_g, .55)
    assert win["holds"] and win["inconclusive"] is None and win["needs"] == ("K2",)
    assert win["numbers"]["diff ci95 in GRPO-gain units"][0] > 0
    # issue 41: 3 of 5 wins with the paired CI containing 0 is a missed count inside seed noise, not a failure
    null = V.c1(GRPO_S + np.array([.001, -.002, .0015, -.001, .0005]), GRPO_S, .47, g_g, g_g, .55)
    assert null["holds"] is None and "missed count inside seed noise" in null["inconclusive"]
    assert "smallest advantage" in null["reason"] and "GRPO's own gain" in null["reason"]
    assert "smallest advantage" in null["inconclusive"]
    units = null["numbers"]["diff ci95 in GRPO-gain units"]
    assert units[0] < 0 < units[1] < 0.2
    three = V.c1(GRPO_S + np.array([.01, .01, .01, -.001, -.001]), GRPO_S, .47, g_g, g_g, .55)   # 3 of 5 wins
    assert three["holds"] is None and three["numbers"]["comparison"] == "no measurable difference"
    # GRPO measurably higher and RLTT higher in no seed: the count is missed on the other side -> fails
    lose = V.c1(GRPO_S - np.array([.010, .012, .008, .011, .009]), GRPO_S, .47, g_g, g_g, .55)
    assert lose["holds"] is False and lose["inconclusive"] is None and "0 of 5" in lose["reason"]
    assert V.c1(GRPO_S[:2] + .01, GRPO_S[:2], .47, g_g[:2], g_g[:2], .55)["inconclusive"]


def _steps(median: float, spread: float, seed: int, shape=(5, 60)) -> np.ndarray:
    return median * np.exp(spread * np.random.default_rng(seed).standard_normal(shape))


def test_c2_holds_within_ten_percent_and_fails_beyond():
    g = _steps(0.100, 0.02, 0)
    ok = V.c2(0.105, 0.100, steps_rltt=1.02 * g, steps_grpo=g)
    assert ok["holds"] is True and ok["numbers"]["RLTT/GRPO ci95"][1] <= 1.10
    bad = V.c2(0.115, 0.100, steps_rltt=1.20 * g, steps_grpo=g)
    assert bad["holds"] is False and bad["numbers"]["RLTT/GRPO ci95"][0] > 1.10 and "wholly above" in bad["reason"]
    assert V.c2(0.2, 0.1, smoke=True)["inconclusive"]
    assert "no interval" in V.c2(0.105, 0.100)["inconclusive"]         # medians alone decide nothing (issue 41)


def test_c2_is_inconclusive_when_the_ratio_interval_contains_the_bar():
    """Issue 41: noisy step times whose median ratio sits near 1.10 (the old rule decided on the point estimate)."""
    g, r = _steps(0.100, 0.5, 1, (5, 20)), _steps(0.109, 0.5, 2, (5, 20))
    out = V.c2(float(np.median(r)), float(np.median(g)), steps_rltt=r, steps_grpo=g)
    lo, hi = out["numbers"]["RLTT/GRPO ci95"]
    assert out["holds"] is None and lo < 1.10 < hi and "within noise of the bar" in out["inconclusive"]
    ratio, lo2, hi2 = V.step_ratio_ci(r, g)
    assert (lo2, hi2) == (lo, hi) and lo2 <= ratio <= hi2 and ratio == pytest.approx(np.median(r) / np.median(g))


def test_c3_holds_fails_and_is_inconclusive_when_no_loop_moved():
    sft = np.array([.25, .40, .45])
    grpo = sft + np.array([[.010, .010, .010], [.012, .011, .013], [.009, .010, .011], [.011, .012, .010],
                           [.010, .009, .012]])
    up = V.c3(grpo + .01 + np.array([[.001], [-.001], [.002], [0], [-.002]]), grpo, sft, grpo, grpo, sft)
    assert up["holds"] and up["inconclusive"] is None and up["needs"] == ("K1", "K2")
    # issue 41: RLTT higher in 2 of 5 seeds with the paired CI containing 0 is inconclusive, not a failure
    same = V.c3(grpo + np.array([[.001], [-.001], [.002], [0], [-.002]]), grpo, sft, grpo, grpo, sft)
    assert same["holds"] is None and "missed count inside seed noise" in same["inconclusive"]
    lower = V.c3(grpo - .01 + np.array([[.001], [-.001], [.002], [0], [-.002]]), grpo, sft, grpo, grpo, sft)
    assert lower["holds"] is False and lower["inconclusive"] is None
    jitter = np.array([[.01], [-.01], [.02], [-.02], [0]])
    still = V.c3(sft + jitter[::-1], sft + jitter, sft, grpo, grpo, sft)
    assert not still["holds"] and "neither method moved" in still["inconclusive"]
    assert V.c3(np.zeros((5, 0)), np.zeros((5, 0)), [], np.zeros((5, 0)), np.zeros((5, 0)), [])["inconclusive"]


def test_c4_no_worse_than_one_point():
    g = np.array([.99, .985, .995, .99, .99])
    assert V.c4(g + np.array([0, .002, -.002, .001, 0]), g, .995)["holds"]
    worse = V.c4(g - .03 + np.array([0, .002, -.002, .001, 0]), g, .995)
    assert not worse["holds"] and worse["inconclusive"] is None
    wide = V.c4(g + np.array([-.04, .03, -.03, .02, 0]), g, .995)
    assert not wide["holds"] and "straddles" in wide["inconclusive"]


def test_c5b_holds_on_better_fails_on_worse_inconclusive_otherwise():
    g = np.array([-1.0, -1.1, -0.95, -1.05, -1.02])
    d = np.array([.01, -.01, .005, 0, -.005])
    assert V.c5b(g + .1 + d, g)["holds"]
    worse = V.c5b(g - .1 + d, g)
    assert not worse["holds"] and worse["inconclusive"] is None
    assert "cannot be told" in V.c5b(g + d, g)["inconclusive"]
    assert V.c5b(g + .1 + d, g)["needs"] == ("K2",)


def test_c5a_lower_floor_share_holds_and_higher_fails():
    g = np.array([.30, .32, .29, .31, .30])
    d = np.array([.005, -.005, .002, 0, -.002])
    low = V.c5a(g - .05 + d, g)
    assert low["holds"] and low["inconclusive"] is None
    high = V.c5a(g + .05 + d, g)
    assert not high["holds"] and high["inconclusive"] is None
    assert "cannot be told" in V.c5a(g + d, g)["inconclusive"]
    assert {"C5a", "C5b"} <= set(V.CLAIMS) and "C5" not in V.CLAIMS


def test_a_failed_control_makes_every_claim_that_needs_it_inconclusive():
    from repro.common import Ledger
    cfg = rl.Config.from_profile("smoke")
    led = Ledger(cfg, V.CLAIMS, controls=V.CONTROLS)
    led.control("K1", **V.k1(_loops([.29, .45, .52, .55]), _loops([.25, .40, .45, .47])))
    led.control("K2", **V.k2([.49, .45, .50, .46, .48], _best({"greedy": .40, "0.9": .47}), 0.9))
    g_g = np.array([.54, .53, .55, .54, .53])
    led.record("C1", **V.c1(GRPO_S + .01, GRPO_S, .47, g_g, g_g, .55))
    assert led.verdict("K1") == "passed" and led.verdict("K2") == "failed"
    assert led.verdict("C1") == "inconclusive" and "control K2 failed" in led.claims["C1"].reason
    assert set(V.CLAIMS) == set(rl.CLAIMS) and set(V.CONTROLS) == {"K1", "K2"}


def test_detectable_effect_shrinks_with_seeds_and_spread():
    d5 = np.array([.001, -.002, .0015, -.001, .0005])
    assert V.detectable_effect(d5) > V.detectable_effect(d5 / 2) > 0
    assert V.detectable_effect(np.tile(d5, 4)) < V.detectable_effect(d5)
    assert np.isnan(V.detectable_effect([0.1]))


# ----------------------------------------------------------------------------- negative twins (issue 41)

@pytest.fixture(scope="module")
def tiny_sft():
    """A smoke-sized SFT model (the chapter's own train_sft) and small held-out sets."""
    cfg = rl.Config.from_profile("smoke", sft_steps=40, sft_batch=32, n_eval=30, n_eval_samples=2)
    torch.manual_seed(0)
    m = rl.build_model(cfg, TOK.vocab_size)
    rl.train_sft(m, cfg)
    return cfg, m, rl.eval_sets(cfg.seed, cfg.n_eval, cfg.pad_slots, cfg.trace_stride)


@pytest.mark.negative_twin("K1")
def test_k1_fails_for_an_untrained_looped_model(tiny_sft):
    """An untrained looped model (no SFT) evaluated per loop by the chapter's evaluate_model: its intermediate
    loops carry no graded computation (accuracy 0 at every loop), so K1 must fail: its rise from loop 1 to loop T is 0 with a CI wholly below the bar."""
    cfg = tiny_sft[0]
    sets = tiny_sft[2]
    torch.manual_seed(1)
    blind = rl.build_model(cfg, TOK.vocab_size).eval()
    ev = rl.evaluate_model(blind, {"hard": sets["hard"], "easy": sets["easy"][:4], "B": sets["B"][:4]},
                           cfg.max_new_tokens, cfg.n_eval_samples, cfg.temperature, stride=cfg.trace_stride)
    r = V.k1(ev["per_loop_items"], ev["per_loop_sampled_items"])
    assert max(ev["per_loop"]) == 0.0 and np.allclose(ev["per_loop_items"].mean(1), ev["per_loop"])
    assert not r["holds"] and "rises +0.00 points" in r["reason"] and "(fails against 3)" in r["reason"]


def _sharpened(model, c):
    """The model with every loop's logits multiplied by c (the tied head reads norm(h): scale its weight)."""
    m = rl.clone_model(model)
    with torch.no_grad():
        m.norm.weight.mul_(c)
    return m.eval()


@pytest.mark.negative_twin("K2")
def test_k2_fails_when_rl_is_off_or_only_sharpens(tiny_sft):
    """Three blinded "GRPO" arms, scored by the chapter's metrics against the SFT model at its best temperature
    (chosen on the validation split): (a) GRPO through the chapter's train_rl at learning rate 0 (RL off; every
    seed's model is the SFT model); (b) the SFT model sampled with different random numbers per seed (sampling
    noise only); (c) pure sharpening (the SFT model's logits scaled by 0.9 / 0.5, sampled at τ = 0.9, i.e. the SFT
    model at τ = 0.5). K2 must fail all three; (c) is what the old, temperature-blind K2 passed (GRPO vs SFT at the
    rollout τ)."""
    cfg, sft, sets = tiny_sft
    hard, tau = sets["hard"], cfg.temperature
    val = rl.val_set(cfg.seed, cfg.n_eval, cfg.pad_slots, cfg.trace_stride)
    best = rl.best_temperature(sft, val, hard, cfg.max_new_tokens, cfg.n_eval_samples, tau, sample_seed=0)
    by_tau = rl.sft_by_temperature(sft, hard, cfg.max_new_tokens, cfg.n_eval_samples, tau, sample_seed=0)
    assert all(by_tau[k] == v for k, v in best["test_all"].items())  # the same numbers on the test split

    def primary(model, seed=0):
        gen = torch.Generator().manual_seed(seed * 1000 + 17 * model.t_max + 5)
        return float(rl.task_a_correct(model, hard, cfg.max_new_tokens, temperature=tau,
                                       n_samples=cfg.n_eval_samples, generator=gen).mean())

    def greedy(model):
        return float(rl.task_a_correct(model, hard, cfg.max_new_tokens).mean())

    assert by_tau[f"{tau:g}"] == primary(sft)                   # common random numbers with the primary metric
    off_cfg = dataclasses.replace(cfg, rl_lr=0.0, rl_steps=2)
    runs = [rl.train_rl(sft, ["grpo"], off_cfg, s)["grpo"].model for s in (1, 2, 3)]
    assert all(torch.equal(a, b) for m in runs for a, b in zip(m.state_dict().values(), sft.state_dict().values()))
    lr0 = V.k2([primary(m) for m in runs], best, tau, [greedy(m) for m in runs])
    assert not lr0["holds"], lr0["reason"]
    noise = V.k2([primary(sft, s) for s in (1, 2, 3)], best, tau, [by_tau["greedy"]] * 3)
    assert not noise["holds"], noise["reason"]
    sharp_model = _sharpened(sft, tau / 0.5)
    assert primary(sharp_model) == pytest.approx(by_tau["0.5"], abs=0.02)  # sharpening == re-tempering
    sharp = [primary(sharp_model, s) for s in (1, 2, 3)]        # three "seeds": different sampling random numbers
    sharp_greedy = greedy(sharp_model)
    # sharpening leaves greedy decoding unchanged (up to one problem: a near-tie argmax may round either way)
    assert abs(sharp_greedy - by_tau["greedy"]) <= 1.0 / len(hard) + 1e-12
    r = V.k2(sharp, best, tau, [sharp_greedy] * 3)
    assert not r["holds"], r["reason"]
    if by_tau["0.5"] > by_tau[f"{tau:g}"]:                     # the old rule (vs SFT at τ) would pass it
        assert primary(sharp_model) - by_tau[f"{tau:g}"] > 0


# Controls still without a negative twin (a test marked @pytest.mark.negative_twin("K…") that runs this
# chapter's code on a blinded apparatus and sees the control fail); issue 41. The contract test keeps this exact.
NEGATIVE_TWINS_PENDING = ()


def test_step_times_are_paired_rows_whose_pooled_median_is_step_seconds():
    """C2's per-step times ([seeds, steps], seed order) pool to the same median that step_seconds reports."""
    import pandas as pd
    from repro.rltt.experiments import Experiment

    rng = np.random.default_rng(0)
    logs = {(s, m): {"rollout_s": list(rng.random(6)), "update_s": list(rng.random(6))}
            for s in (2001, 1001) for m in ("grpo", "exit_pdf")}
    exp = Experiment(pd.DataFrame(), logs, "exit_pdf", 2)
    st = exp.step_times("grpo")
    assert st.shape == (2, 6)
    assert st[0] == pytest.approx(np.add(logs[(1001, "grpo")]["rollout_s"], logs[(1001, "grpo")]["update_s"]))
    assert float(np.median(st)) == pytest.approx(exp.step_seconds("grpo")["step"])
