"""Chapter 03's experiment, stage by stage (the notebook calls one stage per cell).

Seeds. The base models M0 (seed 0) and M0' (seed 1) are the same for every chapter seed (cached); ``cfg.seed``
drives the secret key, the null and wrong keys, the watermark/M0c batches (shared), the query sets, the accuracy
problems and every attack. Models compared on the same problems share them (paired).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import torch

from . import api, attacks, baselines, metrics, saliency
from . import verify as V
from . import watermark as wm
from .model import GPTConfig, answer_accuracy, load_or_train_base
from .tasks import Tokenizer, make_problems, max_depth_len

KEY_CANDIDATES = 20
OUTPUT_ATTACKS = ("temperature 0.5", "temperature 2", "shift", "bias", "noise", "trunc")


@dataclass
class Study:
    cfg: object
    tok: Tokenizer
    gc: GPTConfig
    sets: list = field(default_factory=list)          # in-domain query sets (lists of Problems)
    ood_sets: list = field(default_factory=list)
    acc_problems: list = field(default_factory=list)
    acc_ood: list = field(default_factory=list)
    white_box: list = field(default_factory=list)
    models: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    records: dict = field(default_factory=dict)      # (model name, "id"/"ood") -> [Records per set]
    anchor_types: tuple = ("=",)

    @property
    def max_new(self) -> int:
        return max_depth_len(self.cfg.depth_range[1] + 1)[1]

    @property
    def W_U(self) -> np.ndarray:
        return self.models["M0"].W_U.detach().numpy().astype(float)


def setup(cfg) -> Study:
    tok = Tokenizer(cfg.modulus)
    gc = GPTConfig(tok.vocab_size, cfg.d_model, cfg.n_layers, 4, cfg.d_ff)
    st = Study(cfg, tok, gc)
    ss = np.random.SeedSequence([0x3B1C, cfg.seed]).spawn(6)
    rq, ro, ra, rb, rw = (np.random.default_rng(s) for s in ss[:5])
    dr = tuple(cfg.depth_range)
    st.sets = [make_problems(rq, cfg.n_verify, cfg.modulus, dr, tok) for _ in range(cfg.n_query_sets)]
    st.ood_sets = [make_problems(ro, cfg.n_verify, cfg.modulus, dr, tok, ood=True) for _ in range(cfg.n_query_sets)]
    st.acc_problems = make_problems(ra, cfg.n_acc, cfg.modulus, dr, tok)
    st.acc_ood = make_problems(rb, cfg.n_acc, cfg.modulus, dr, tok, ood=True)
    st.white_box = make_problems(rw, cfg.n_white_box, cfg.modulus, dr, tok)
    krng = np.random.default_rng(ss[5])
    st.candidates = [int(x) for x in krng.integers(2**31, size=KEY_CANDIDATES)]
    st.vetting = make_problems(np.random.default_rng(krng.integers(2**31)), 2 * cfg.n_verify, cfg.modulus, dr, tok)
    st.null_keys = wm.make_keys(np.random.default_rng(krng.integers(2**31)), cfg.n_null_keys, cfg.d_model, cfg.key_rank)
    st.wrong_keys = wm.make_keys(np.random.default_rng(krng.integers(2**31)), cfg.n_wrong_keys, cfg.d_model, cfg.key_rank)
    return st


def train_bases(st: Study, progress=None) -> None:
    c = st.cfg
    dr = tuple(c.depth_range)
    st.models["M0"], st.info["M0"] = load_or_train_base("m0", st.tok, st.gc, c.modulus, dr, 0, c.base_steps, 0.8,
                                                        use_cache=c.use_cached_base, progress=progress)
    st.models["M0'"], st.info["M0'"] = load_or_train_base("m0prime", st.tok, st.gc, c.modulus, dr, 1, c.base2_steps,
                                                          2.0, use_cache=c.use_cached_base, progress=progress)


def choose_key(st: Study) -> list[float]:
    """The owner's key, vetted on its own base: every one of the ``KEY_CANDIDATES`` keys drawn from the secret seed
    is scored on M0's vetting prompts (disjoint from every query set), and the one under which M0's z is lowest is
    kept. A random key is one more draw from the null for any model, so M0's family (M0c, attacked copies) would
    otherwise sit wherever that draw put it. Until issue 43's sweep the first key with z < 0 was kept; at seed 4
    that was z = −0.45, and M0c (M0 fine-tuned 223 steps without the signature) then reached z = 2.16 on one of
    eight query sets, failing K1's "clean on every set". Independent models (M0') are unaffected: they never see B.
    Returns M0's z for each candidate (NaN where no anchor could be scored: smoke sizes)."""
    c = st.cfg
    rec = api.query(st.models["M0"], st.vetting, st.tok, c.top_k, st.max_new)
    tried = []
    for seed in st.candidates:
        B = wm.make_key(seed, c.d_model, c.key_rank)
        tried.append(V.verify(rec, None, st.tok, st.W_U, B, st.null_keys, use_registration=False)["z"])
    best = int(np.nanargmin(tried)) if np.isfinite(tried).any() else 0
    st.info["secret"] = st.candidates[best]
    st.B = wm.make_key(st.info["secret"], c.d_model, c.key_rank)
    st.info["key_vetting"] = tried
    st.info["key_chosen"] = best
    return tried


def choose_anchors(st: Study) -> dict:
    stats = saliency.saliency_by_type(st.models["M0"], st.white_box[:256], st.tok)
    st.anchor_types = saliency.select_anchor_types(stats)
    return stats


def embed(st: Study) -> None:
    """BiCoT, the clean continuation M0c (same batches, same number of steps, λ_sig = 0) and the hidden-state
    signature ablation (same steps)."""
    c, M0 = st.cfg, st.models["M0"]
    kw = dict(tok=st.tok, p=c.modulus, depth_range=tuple(c.depth_range), seed=1000 + c.seed, k=c.top_k,
              lam_ctrl=c.lam_ctrl, anchor_types=st.anchor_types, lr=c.wm_lr)
    st.models["BiCoT"], st.info["BiCoT"] = wm.embed_watermark(copy.deepcopy(M0), M0, st.B, steps=c.wm_steps, **kw)
    n = st.info["BiCoT"]["steps"]
    st.models["M0c"], st.info["M0c"] = wm.embed_watermark(copy.deepcopy(M0), M0, None, steps=n, fixed_steps=n, **kw)
    st.models["hidden"], st.info["hidden"] = wm.embed_watermark(copy.deepcopy(M0), M0, st.B, steps=n, fixed_steps=n,
                                                                kind="hidden", **kw)


def ablations(st: Study) -> None:
    """The card's two other ablations of BiCoT, each with BiCoT's own rule (stop at mean R >= 0.9, cap
    ``wm_steps``) on BiCoT's batches: without L_ctrl (λ_c = 0), and with the signature imposed at random completion
    positions (as many per sequence as it has anchors) instead of at the saliency-chosen anchor types."""
    c, M0 = st.cfg, st.models["M0"]
    kw = dict(tok=st.tok, p=c.modulus, depth_range=tuple(c.depth_range), seed=1000 + c.seed, k=c.top_k,
              anchor_types=st.anchor_types, lr=c.wm_lr, steps=c.wm_steps)
    st.models["no L_ctrl"], st.info["no L_ctrl"] = wm.embed_watermark(copy.deepcopy(M0), M0, st.B, lam_ctrl=0.0, **kw)
    st.models["random anchors"], st.info["random anchors"] = wm.embed_watermark(
        copy.deepcopy(M0), M0, st.B, lam_ctrl=c.lam_ctrl, random_anchors=True, **kw)


def control_drift(st: Study, name: str) -> float:
    """mean over control positions of ‖h − h_M0‖²/d on the white-box prompts' own greedy CoT (what L_ctrl bounds)."""
    rec = st.info.setdefault("wb_records", {}).get(name) or api.query(st.models[name], st.white_box, st.tok,
                                                                        st.cfg.top_k, st.max_new)
    ids = torch.from_numpy(rec.ids)
    P = rec.prompt_len
    start = np.full(len(ids), P)
    from .tasks import ROLE_CONTROL, token_roles
    ctrl = torch.from_numpy(token_roles(rec.ids, st.tok, st.anchor_types, start) == ROLE_CONTROL)
    with torch.no_grad():
        _, h = st.models[name](ids)
        _, h0 = st.models["M0"](ids)
    return float(wm.control_loss(h, h0, ctrl))


def hidden_leak(st: Study, names=("M0", "hidden")) -> dict:
    """Where the hidden-state ablation's signature goes (claim C2b). Logits are W_U h, so the part of h in span(B),
    h_B = BBᵀh, adds W_U h_B ∈ span(W_U B) — the verifier's template — to the logits, whatever the loss aimed at.
    Per model, at the anchors of the white-box prompts: the hidden ratio; the share of h_B's energy in W_U's row
    space (the rest is unseen by any logit); how constant h_B is across anchors (‖mean h_B‖² / mean ‖h_B‖²); and the
    share of the centred non-arg-max top-k logit energy that h_B contributes, ‖W̃_T h_B‖² / (‖W̃_T h_B‖² + ‖W̃_T h_⊥‖²).
    Also the key's geometry: the share of B in W_U's row space (≈ |V|/d for a random key) and the singular values of
    W_U B against the mean of W_U's (how much choosing a direction inside span(B) could hide)."""
    W, B = st.W_U, st.B
    _, s, Vt = np.linalg.svd(W, full_matrices=False)
    Vt = Vt[s > 1e-8 * s[0]]
    P = Vt.T @ Vt
    sB = np.linalg.svd(W @ B, compute_uv=False)
    out = {"B in row(W_U)": float(np.trace(B.T @ P @ B) / B.shape[1]), "|V|/d": W.shape[0] / W.shape[1],
           "sv(W_U B) / rms sv(W_U)": (sB / np.sqrt(np.mean(s ** 2))).tolist()}
    for name in names:
        rec = st.info.setdefault("wb_records", {}).get(name) or api.query(st.models[name], st.white_box, st.tok,
                                                                            st.cfg.top_k, st.max_new)
        am = api.anchor_mask(rec, st.tok, st.anchor_types)
        keys = ("hidden ratio", "h_B in row(W_U)", "h_B constant share", "logit energy from h_B",
                "gain of W_U on mean h_B / rms sv")
        if not am.any():                     # no anchor in the generated traces (an untrained smoke model)
            out[name] = dict.fromkeys(keys, float("nan"))
            continue
        with torch.no_grad():
            _, h = st.models[name](torch.from_numpy(rec.ids))
        out[name] = leak_decomposition(h.numpy()[am].astype(float), rec.top_ids[am], W, B)
    return out


def leak_decomposition(h: np.ndarray, top_ids: np.ndarray, W: np.ndarray, B: np.ndarray) -> dict:
    """For hidden states ``h`` (n, d) at anchors and their top-k ids (n, k): split h = h_B + h_⊥ with h_B = BBᵀh and
    measure (see :func:`hidden_leak`) the hidden ratio, h_B's share in W_U's row space, how constant h_B is, the share
    of the centred non-arg-max top-k logit energy that W_U h_B carries, and W_U's gain on the mean h_B."""
    _, s, Vt = np.linalg.svd(W, full_matrices=False)
    Vt = Vt[s > 1e-8 * s[0]]
    P = Vt.T @ Vt
    hB = h @ B @ B.T
    hp = h - hB
    ids = top_ids[:, 1:]
    WT = W[ids] - W[ids].mean(1, keepdims=True)
    eB = (np.einsum("nkd,nd->nk", WT, hB) ** 2).sum(1)
    ep = (np.einsum("nkd,nd->nk", WT, hp) ** 2).sum(1)
    nB = (hB ** 2).sum(1)
    c = hB.mean(0)
    return {"hidden ratio": float(np.mean(nB / (h ** 2).sum(1))),
            "h_B in row(W_U)": float(np.mean(((hB @ P) ** 2).sum(1) / np.maximum(nB, 1e-30))),
            "h_B constant share": float(c @ c / max(nB.mean(), 1e-30)),
            "logit energy from h_B": float(np.mean(eB / np.maximum(eB + ep, 1e-30))),
            "gain of W_U on mean h_B / rms sv": float(np.linalg.norm(W @ c) / max(np.linalg.norm(c), 1e-30)
                                                      / np.sqrt(np.mean(s ** 2)))}


def white_box(st: Study, names=("M0", "M0c", "BiCoT", "hidden")) -> dict:
    """Anchor R(B) (top-k of the full logits) and ‖Bᵀh‖²/‖h‖² on fresh prompts, per model (arrays over anchors)."""
    out = {}
    for name in names:
        rec = api.query(st.models[name], st.white_box, st.tok, st.cfg.top_k, st.max_new)
        st.info.setdefault("wb_records", {})[name] = rec
        am = api.anchor_mask(rec, st.tok, st.anchor_types)
        R = wm.energy_ratio_np(rec.top_lp[am], rec.top_ids[am], st.W_U, st.B)
        ids = torch.from_numpy(rec.ids)
        with torch.no_grad():
            _, h = st.models[name](ids)
        hr = wm.hidden_ratio(h.numpy()[am], st.B)
        mass = np.exp(rec.top_lp[am][:, 1:]).sum(1)         # top-k mass outside the arg-max
        row = np.nonzero(am)[0]                              # the prompt of each anchor
        per = np.bincount(row, R, len(am)) / np.maximum(np.bincount(row, minlength=len(am)), 1)
        out[name] = {"R": R, "hidden": hr, "nonargmax_mass": mass,
                     "R_by_prompt": per[np.bincount(row, minlength=len(am)) > 0]}
    return out


def model_attacks(st: Study) -> dict:
    """Attacked copies of BiCoT (C3, K3 dose sweep) and of M0 (negatives); the trigger baseline and its FT attack."""
    c = st.cfg
    dr = tuple(c.depth_range)
    bic, M0 = st.models["BiCoT"], st.models["M0"]
    s = 2000 + c.seed
    ck = tuple(x for x in (50, 100) if x < c.ft_attack_steps)
    ft = attacks.finetune_attack(bic, st.tok, c.modulus, dr, c.ft_attack_steps, c.ft_attack_lr, s, checkpoints=(0, *ck))
    # the card's attack (lr 1e-3), scored beside C3a; it moves the weights less than watermarking did (K3)
    st.models["BiCoT FT card"] = attacks.finetune_attack(bic, st.tok, c.modulus, dr, c.ft_attack_steps, 1e-3, s)[
        c.ft_attack_steps]
    st.ft_curve = sorted(ft)
    for k, m in ft.items():
        if k:
            st.models[f"BiCoT FT{k}"] = m
    st.models["BiCoT FT"] = ft[c.ft_attack_steps]
    for b in c.quant_bits:
        st.models[f"BiCoT int{b}"] = attacks.quantize(bic, b)
        st.models[f"M0 int{b}"] = attacks.quantize(M0, b)
    st.models["BiCoT noise2%"] = attacks.weight_noise(bic, 0.02, s)
    st.models["M0 noise2%"] = attacks.weight_noise(M0, 0.02, s)
    st.models["BiCoT prune30%"] = attacks.magnitude_prune(bic, 0.3)
    st.models["M0 prune30%"] = attacks.magnitude_prune(M0, 0.3)
    # K3's dose sweep
    for lv in c.dose_noise:
        st.models[f"BiCoT noise{lv:.0%}"] = attacks.weight_noise(bic, lv, s)
    for fr in c.dose_prune:
        st.models[f"BiCoT prune{fr:.0%}"] = attacks.magnitude_prune(bic, fr)
    st.models["BiCoT FT-smooth"] = attacks.finetune_attack(bic, st.tok, c.modulus, dr, c.ft_attack_steps, c.ft_attack_lr, s,
                                                           label_smoothing=0.1)[c.ft_attack_steps]
    st.models["M0 noise20%"] = attacks.weight_noise(M0, 0.2, s)          # K2's damaged copy
    # trigger fingerprint and the same fine-tuning attack on it
    trig, tinfo = baselines.train_trigger_fp(M0, st.tok, c.modulus, dr, st.info["secret"], c.trigger_steps, s + 1,
                                               copies=c.trigger_copies)
    st.models["trigger"] = trig
    tft = attacks.finetune_attack(trig, st.tok, c.modulus, dr, c.ft_attack_steps, c.ft_attack_lr, s, checkpoints=(0, *ck))
    return {"trigger_info": tinfo,
            "trigger_rate": {k: baselines.trigger_rate(m, st.tok, tinfo["triggers"], tinfo["response"]) for k, m in tft.items()},
            "dist_ft": attacks.param_distance(st.models["BiCoT FT"], bic),
            "dist_wm": attacks.param_distance(bic, M0),
            "dist_ft_card": attacks.param_distance(st.models["BiCoT FT card"], bic)}


def ft_key_draws(st: Study, neg_models: list[str]) -> list[dict]:
    """C3a's fine-tuning attack on the watermarks the owner could equally have embedded (issue 41): for each of the
    next ``n_ft_keys − 1`` best-vetted keys (:func:`choose_key`'s ranking of M0's z), a BiCoT embedded with that key
    on its own batches (same rule and cap), fine-tuned like "BiCoT FT" on its own batches, and scored under that key
    against the same negative models (M0, M0', M0c and M0's attacked copies are trained without any key, so they are
    negatives under every key) plus this watermark's wrong keys. At one seed the owner's key survived the attack
    (AUC 0.997) while the next two keys' watermarks fell to 0.35: a CI over one watermark's query sets cannot see
    that. Returns, per extra key: ``pos`` and ``neg`` z arrays, its vetting z, embedding steps and AUC before the
    attack. The owner's key (draw 0) is the main study's "BiCoT FT"."""
    c = st.cfg
    vet = np.asarray(st.info["key_vetting"], float)
    order = np.argsort(np.where(np.isfinite(vet), vet, np.inf), kind="stable")
    dr = tuple(c.depth_range)
    M0 = st.models["M0"]
    out = []
    for k in range(1, min(c.n_ft_keys, len(order))):
        sub = copy.copy(st)
        sub.models = {n: st.models[n] for n in dict.fromkeys(("M0", *neg_models))}
        sub.records = {key: v for key, v in st.records.items() if key[0] in sub.models}
        sub.B = wm.make_key(st.candidates[order[k]], c.d_model, c.key_rank)
        kw = dict(tok=st.tok, p=c.modulus, depth_range=dr, seed=1000 + c.seed + 97 * k, k=c.top_k,
                  lam_ctrl=c.lam_ctrl, anchor_types=st.anchor_types, lr=c.wm_lr)
        sub.models["BiCoT"], info = wm.embed_watermark(copy.deepcopy(M0), M0, sub.B, steps=c.wm_steps, **kw)
        sub.models["BiCoT FT"] = attacks.finetune_attack(sub.models["BiCoT"], st.tok, c.modulus, dr, c.ft_attack_steps,
                                                         c.ft_attack_lr, 2000 + c.seed + 97 * k)[c.ft_attack_steps]
        rb = verify_model(sub, "BiCoT", wrong_keys=True)
        neg = np.concatenate([zs(verify_model(sub, n)) for n in neg_models] + [wrong_zs(rb)])
        out.append({"key rank": k, "vetting z": float(vet[order[k]]), "wm steps": int(info["steps"]),
                    "AUC before": metrics.auc(zs(rb), neg), "pos": zs(verify_model(sub, "BiCoT FT")), "neg": neg})
    return out


def bias_draws(st: Study, n: int, sigma: float | None = None) -> list[np.ndarray]:
    """``n`` draws of the fixed per-token bias δ_v ~ N(0, σ²) of the output attack (σ = ``bias_sigma`` unless given);
    the first is the one C4 scores (its generator is the chapter seed's), the others come from independent streams of
    the same seed. Every σ scales the same standard-normal draws (common random numbers along the dose sweep)."""
    V_ = st.tok.vocab_size
    s = st.cfg.bias_sigma if sigma is None else sigma
    return [s * np.random.default_rng(4000 + st.cfg.seed if i == 0 else [4000 + st.cfg.seed, i]).standard_normal(V_)
            for i in range(n)]


def bias_margins(st: Study, biases) -> dict:
    """BiCoT's margin S − μ₀ (mean over the query sets) under each bias draw, with and without registration (K4),
    and the share of anchors kept per query set (first draw)."""
    rsr, no, kept = [], [], None
    for b in biases:
        for reg, dst in ((True, rsr), (False, no)):
            rb = verify_model(st, "BiCoT", attack={"bias": b}, use_registration=reg, rng=np.random.default_rng(0))
            dst.append(float(np.mean([r["S"] - r["mu0"] for r in rb])))
            if reg and kept is None:
                kept = np.array([r["kept share"] for r in rb])
    return {"margin RSR": np.array(rsr), "margin no RSR": np.array(no), "kept by set": kept}


def delta_recovery(st: Study, bias: np.ndarray, applied: np.ndarray | None = None) -> tuple[float, int]:
    """K4: correlation of the fitted δ̂ (mean over the query sets' registrations against the owner's stored records)
    with the injected bias on the tokens seen at sentinels, and how many tokens that is. ``applied``: the bias the API
    really adds (``bias`` itself; another one only for the negative twin)."""
    recs = st.records[("BiCoT", "id")]
    applied = bias if applied is None else applied
    regs = [V.register(api.reported(rec, attack={"bias": applied}), rec, st.tok, st.tok.vocab_size)
            for rec in recs]
    D = np.array([r.delta for r in regs])
    seen = np.isfinite(D).any(0)
    if seen.sum() < 3:
        return float("nan"), int(seen.sum())
    dh = np.array([np.nanmean(D[:, v]) for v in np.flatnonzero(seen)])
    b = bias[seen] - bias[seen].mean()
    return float(np.corrcoef(dh, b)[0, 1]), int(seen.sum())


def query_all(st: Study, names, split: str = "id") -> None:
    sets = st.sets if split == "id" else st.ood_sets
    for n in names:
        if (n, split) not in st.records:
            st.records[(n, split)] = [api.query(st.models[n], s, st.tok, st.cfg.top_k, st.max_new) for s in sets]


def verify_model(st: Study, name: str, split: str = "id", attack: dict | None = None, use_registration: bool = True,
                 rng: np.random.Generator | None = None, wrong_keys: bool = False) -> list[dict]:
    """Verification results of one suspect on every query set (refs: BiCoT's own records of the same prompts)."""
    query_all(st, [name, "BiCoT"], split)
    out = []
    per = len(st.wrong_keys) // len(st.records[(name, split)])
    for i, (rec, ref) in enumerate(zip(st.records[(name, split)], st.records[("BiCoT", split)])):
        sus = api.reported(rec, attack=attack, rng=rng) if attack else rec
        extra = st.wrong_keys[i * per:(i + 1) * per] if wrong_keys else None
        out.append(V.verify(sus, ref, st.tok, st.W_U, st.B, st.null_keys, use_registration, extra))
    return out


def median_z(z: np.ndarray) -> float:
    """Median z over query sets, ignoring sets with no anchor left (NaN when none has any)."""
    z = np.asarray(z, float)
    return float(np.median(z[np.isfinite(z)])) if np.isfinite(z).any() else float("nan")


def zs(results: list[dict]) -> np.ndarray:
    return np.array([r["z"] for r in results])


def wrong_zs(results: list[dict]) -> np.ndarray:
    return np.concatenate([r["z_extra"] for r in results])


def whitening_sweep(st: Study, z_of, acc_of, base_acc: float) -> list[dict]:
    """Whitening attacks of growing λ from BiCoT, stopped once z < 4 or accuracy is down 10 points."""
    c = st.cfg
    dr = tuple(c.depth_range)
    bic = st.models["BiCoT"]
    Ul, Uh, ids, am = attacks.anchor_pcs(bic, st.tok, c.modulus, dr, c.key_rank, 3000 + c.seed)
    e0 = attacks.pc_energy(bic, Ul, ids, am)
    rows = [{"lam": 0.0, "name": "BiCoT", "z": z_of("BiCoT"), "acc": base_acc, "pc_energy": e0}]
    for lam in c.whiten_lams:
        name = f"whiten λ={lam:g}"
        st.models[name] = attacks.whitening_attack(bic, st.tok, c.modulus, dr, c.whiten_steps, lam, c.key_rank,
                                                   3000 + c.seed, anchor_types=st.anchor_types, pcs=(Ul, Uh))
        rows.append({"lam": lam, "name": name, "z": z_of(name), "acc": acc_of(name),
                     "pc_energy": attacks.pc_energy(st.models[name], Ul, ids, am)})
        if rows[-1]["z"] < 4 or rows[-1]["acc"] <= base_acc - 0.10:
            break
    return rows


def roc_summary(pos, neg) -> dict:
    return {"AUC": metrics.auc(pos, neg), "TPR@1%FPR": metrics.tpr_at_fpr(pos, neg, 0.01)}
