"""Experiment drivers of chapter 01: the shared world (data, prompts, embeddings, evaluator, base generators),
one unlearning replicate (UnHype and every baseline, evaluated on paired noise), the multi-concept sweep (C5) and
the second backbone (C6). The notebook calls these and turns their numbers into the ledger.

Seeding: the master seed ``cfg.seed`` fixes the data split's noise, the classifier, the base generators and the
digit permutation of C5; replicate i of C1-C4 uses seed ``1000 cfg.seed + i + 1`` for the ESD bank, H's and the
LoRAs' init, every batch, and the evaluation noise.
"""
from __future__ import annotations

import copy
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from repro.common.paths import cache_dir

from .config import Config
from .data import (WORDS as WORDS_, ANCHOR_PROMPTS, RETAIN_HELDOUT, PromptBank, embed_prompts, load_digit_tensors,
                   prompt_bank)
from .erase import (BaselineResult, ESDBank, GDTrajectory, ablation_bank, apply_uce, bank_loss, esd_bank,
                    explicit_gd_trajectory, train_concept_ablation, train_esd, train_lora_esd, train_unhype,
                    unhype_factors)
from .hyperlora import HyperNet, LoRAContext, delta_norms, inject, sum_loras
from .metrics import (frechet_distance, h_o, mean_embeddings, nearest_concepts, paired_drift, retain_acc,
                      target_rate)
from .models import CondMLP, DigitClassifier, sample, train_base, train_classifier

RATE_OK = 0.15          # matched-erasure threshold of the card
CFG_SCALE = 3.0
N_TRAJ = 512            # ESD bank trajectories per target
ALPHA_INIT = 1.0
CACHE_VERSION = "unhype-v1"


def replicate_seed(cfg: Config, i: int) -> int:
    return 1000 * cfg.seed + i + 1


def _seeded(seed: int, fn: Callable):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return fn()


# ---------------------------------------------------------------------- the world

@dataclass
class World:
    cfg: Config
    prompts: PromptBank
    emb: torch.Tensor
    data: dict[str, torch.Tensor]
    clf: DigitClassifier
    clf_acc: float
    clf_recall: np.ndarray          # (10,) per-digit recall of the classifier on the real test split
    uncond: int
    anchor: int
    mean_emb: np.ndarray
    real_feats: np.ndarray          # classifier features of the real test images
    bases: dict[str, CondMLP] = field(default_factory=dict)
    base_info: dict[str, dict] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)

    def train_prompts(self, digit: int) -> np.ndarray:
        return self.prompts.idx(digit, "train")

    def heldout_prompts(self, digit: int) -> np.ndarray:
        """The training templates of ``digit`` kept out of every retention set (:data:`~.data.RETAIN_HELDOUT`)."""
        return self.train_prompts(digit)[list(RETAIN_HELDOUT)]

    def seen_prompts(self, digit: int) -> np.ndarray:
        """The other 8 training templates of ``digit``: those a retention set may contain."""
        ids = self.train_prompts(digit)
        return np.delete(ids, list(RETAIN_HELDOUT))

    def retain_pool(self, erased: list[int]) -> np.ndarray:
        """Retain prompts of the unlearning losses (and UCE's preserve set): the other digits' *seen* training
        templates and "". Their held-out templates are never in it: retain accuracy is also measured on those."""
        keep = [i for d in range(10) if d not in erased for i in self.seen_prompts(d)]
        return np.array(keep + [self.uncond])

    def anchor_pool(self, erased: list[int]) -> np.ndarray:
        """Concept Ablation's anchor concept: the other digits' seen training templates (it excludes the target)."""
        return np.array([i for d in range(10) if d not in erased for i in self.seen_prompts(d)])


def _key(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def build_world(cfg: Config) -> World:
    """Prompts and their MiniLM embeddings, the data split, and the frozen classifier (cached by its config)."""
    t0 = time.process_time()
    prompts = prompt_bank()
    emb = embed_prompts(prompts)
    t1 = time.process_time()
    data = load_digit_tensors()
    key = _key({"v": CACHE_VERSION, "what": "classifier", "seed": cfg.seed, "epochs": 30})
    path = cache_dir(cfg.slug) / f"classifier-{key}.pt"
    clf = DigitClassifier()
    if path.exists():
        clf.load_state_dict(torch.load(path, weights_only=True))
        clf.eval()
        for p in clf.parameters():
            p.requires_grad_(False)
    else:
        clf = _seeded(cfg.seed, lambda: train_classifier(data["x_train"], data["y_train"], seed=cfg.seed))
        torch.save(clf.state_dict(), path)
    with torch.no_grad():
        pred_test = clf.predict(data["x_test"])
        acc = float((pred_test == data["y_test"]).float().mean())
        recall = np.array([float((pred_test[data["y_test"] == d] == d).float().mean()) for d in range(10)])
        real_feats = clf.features(data["x_test"]).numpy()
    t2 = time.process_time()
    uncond = prompts.index_of(ANCHOR_PROMPTS["empty"])
    anchor = prompts.index_of(ANCHOR_PROMPTS[cfg.anchor])
    mean_emb = mean_embeddings(emb.numpy(), prompts.digit, prompts.idx(split="train"))
    return World(cfg, prompts, emb, data, clf, acc, recall, uncond, anchor, mean_emb, real_feats,
                 cpu={"text encoder": t1 - t0, "classifier": t2 - t1})


def base_model(world: World, param: str) -> CondMLP:
    """The base generator of ``param`` ("flow" or "eps"): loaded from the cache, else trained and cached."""
    if param in world.bases:
        return world.bases[param]
    cfg = world.cfg
    steps = cfg.base_steps if param == "flow" else cfg.ddpm_steps
    spec = {"v": CACHE_VERSION, "what": "base", "param": param, "width": cfg.width, "n_blocks": cfg.n_blocks,
            "steps": steps, "batch": 128, "lr": 2e-3, "p_uncond": 0.1, "seed": cfg.seed,
            "prompts": hashlib.sha256("\n".join(world.prompts.texts).encode()).hexdigest()[:16]}
    path = cache_dir(cfg.slug) / f"base-{param}-{_key(spec)}.pt"
    model = _seeded(cfg.seed + (0 if param == "flow" else 1), lambda: CondMLP(cfg.width, cfg.n_blocks, param))
    t0 = time.process_time()
    if path.exists():
        blob = torch.load(path, weights_only=True)
        model.load_state_dict(blob["state"])
        losses, trained = blob["losses"], False
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
    else:
        pr = world.prompts
        # the base knows every digit under all its names: 12 training templates + 4 paraphrases
        table = torch.stack([torch.as_tensor(np.concatenate([pr.idx(d, "train"), pr.idx(d, "para")]))
                             for d in range(10)])

        def prompt_of(labels: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
            return table[labels, torch.randint(0, table.shape[1], (labels.numel(),), generator=gen)]

        losses = train_base(model, world.data["x_train"], prompt_of, world.emb, world.uncond, steps=steps,
                            seed=cfg.seed + 17, labels=world.data["y_train"])
        torch.save({"state": model.state_dict(), "losses": losses}, path)
        trained = True
    inject(model, model.target_names, LoRAContext(cap=3.0))
    model.lora = model.get_submodule(model.target_names[0]).ctx
    world.bases[param] = model
    world.base_info[param] = {"trained_now": trained, "cpu_s": time.process_time() - t0, "final_loss": float(np.mean(losses[-50:])),
                              "losses": losses}
    return model


# ---------------------------------------------------------------------- generation and evaluation

@dataclass
class Samples:
    x: np.ndarray
    label: np.ndarray
    prompt: np.ndarray
    pred: np.ndarray
    feats: np.ndarray


def eval_prompts(world: World, split: str, n_per_digit: int) -> tuple[np.ndarray, np.ndarray]:
    """Prompt ids and digit labels: for every digit, ``n_per_digit`` samples cycling through its prompts."""
    ids, labels = [], []
    for d in range(10):
        pool = world.prompts.idx(d, split)
        ids.append(pool[np.arange(n_per_digit) % len(pool)]); labels.append(np.full(n_per_digit, d))
    return np.concatenate(ids), np.concatenate(labels)


@torch.no_grad()
def generate(world: World, model: CondMLP, factors: Callable | None, prompt_ids: np.ndarray, noise: torch.Tensor,
             steps: int | None = None, labels: np.ndarray | None = None) -> Samples:
    """Samples of ``model`` (+ LoRA ``factors(c)`` on the conditional branch) for the given prompts and noise."""
    steps = steps or world.cfg.sample_steps
    uniq, inv = np.unique(prompt_ids, return_inverse=True)
    c = world.emb[uniq]
    ctx = model.lora
    with ctx.using(factors(c) if factors is not None else None):
        x = sample(model, c, world.emb[world.uncond], noise, steps, CFG_SCALE, ctx, c_index=torch.as_tensor(inv))
    x = x.clamp(-1, 1)
    pred = world.clf.predict(x).numpy()
    feats = world.clf.features(x).numpy()
    lab = labels if labels is not None else world.prompts.digit[prompt_ids]
    return Samples(x.numpy(), np.asarray(lab), np.asarray(prompt_ids), pred, feats)


def make_check(world: World, model_for_factors: CondMLP, targets: list[int], seed: int,
               n_check: int | None = None) -> tuple[Callable, Callable]:
    """The early-stopping check (max target rate over ``targets``, ``n_check`` samples each (default
    ``cfg.n_check``), fixed noise).

    Returns (check for a fine-tuned model copy, check for LoRA factors on ``model_for_factors``).
    """
    gen = torch.Generator().manual_seed(seed + 555)
    n_check = n_check or world.cfg.n_check
    ids = np.concatenate([world.train_prompts(d)[np.arange(n_check) % 12] for d in targets])
    noise = torch.randn(len(ids), 64, generator=gen)

    def rate(s: Samples) -> float:
        return max(target_rate(s.pred, s.label, d) for d in targets)

    def check_model(m: CondMLP) -> float:
        return rate(generate(world, m, None, ids, noise))

    def check_factors(f: Callable) -> float:
        return rate(generate(world, model_for_factors, f, ids, noise))

    return check_model, check_factors


def summarize(world: World, s: Samples, para: Samples, base: Samples, base_para: Samples, erased: list[int],
              nearest: list[int]) -> dict[str, float]:
    """Every metric of one method: target/retain rates on templates and paraphrases, drift, FD, H_o."""
    retain = [d for d in range(10) if d not in erased]
    rm = np.isin(s.label, retain)
    nm = np.isin(s.label, nearest)
    held = np.isin(s.prompt, np.concatenate([world.heldout_prompts(d) for d in range(10)]))
    tr = float(np.mean([target_rate(s.pred, s.label, d) for d in erased]))
    pr = float(np.mean([target_rate(para.pred, para.label, d) for d in erased]))
    ra = retain_acc(s.pred, s.label, retain)
    real_retain = np.isin(world.data["y_test"].numpy(), retain)
    return {
        "target_rate": tr,
        "retain_acc": ra,
        "retain_acc_seen": retain_acc(s.pred[~held], s.label[~held], retain),
        "retain_acc_heldout": retain_acc(s.pred[held], s.label[held], retain),
        "retain_acc_near": retain_acc(s.pred, s.label, nearest),
        "retain_acc_near_heldout": retain_acc(s.pred[held], s.label[held], nearest),
        "drift_retain": paired_drift(s.x, base.x, rm),
        "drift_near": paired_drift(s.x, base.x, nm),
        "drift_target": paired_drift(s.x, base.x, ~rm),
        "para_target_rate": pr,
        "para_retain_acc": retain_acc(para.pred, para.label, retain),
        "fd_retain": frechet_distance(s.feats[rm], world.real_feats[real_retain]),
        "h_o": h_o(tr, ra, pr),
    }


# ---------------------------------------------------------------------- eta calibration (explicit GD)

@dataclass
class Calibration:
    eta: float
    rates: dict[float, float]
    trajectories: dict[float, GDTrajectory]
    reached: bool


def calibrate_eta(world: World, model: CondMLP, banks: dict[int, ESDBank], A0: dict[str, torch.Tensor],
                  seed: int) -> Calibration:
    """The smallest eta_int of the grid whose explicit-GD trajectory reaches target rate <= 0.15 at k = K."""
    cfg = world.cfg
    _, check_factors = make_check(world, model, list(banks), seed)
    gen = torch.Generator().manual_seed(seed + 99)
    eval_rows = {d: b.subset(256, gen) for d, b in banks.items()}
    ks_every = max(1, cfg.K_hyper // 8)
    rates, trajs = {}, {}
    chosen = None
    for eta in sorted(cfg.internal_lr_grid):
        tr = explicit_gd_trajectory(model, banks, world.emb, eta=eta, K=cfg.K_hyper, A0=A0, alpha=ALPHA_INIT,
                                    eval_rows=eval_rows, eval_every=ks_every, seed=seed + 3)
        rates[eta] = check_factors(lambda c, lora=tr.lora: lora)
        trajs[eta] = tr
        if rates[eta] <= RATE_OK and chosen is None:
            chosen = eta
            break
    reached = chosen is not None
    return Calibration(chosen if reached else max(cfg.internal_lr_grid), rates, trajs, reached)


def hyper_A0(hyper: HyperNet) -> dict[str, torch.Tensor]:
    return {n: h.A0.reshape(h.d_in, h.rank) for n, h in zip(hyper.names, hyper.heads)}


def new_hyper(world: World, model: CondMLP, seed: int) -> HyperNet:
    cfg = world.cfg
    shapes = {n: (model.get_submodule(n).base.in_features, model.width) for n in model.target_names}
    return HyperNet(shapes, cfg.rank, world.emb.shape[1], cfg.K_hyper, cfg.hyper_width, ALPHA_INIT, seed=seed)


def esd_curve(world: World, model: CondMLP, hyper: HyperNet, banks: dict[int, ESDBank], ks: list[int],
              eval_rows: dict[int, torch.Tensor]) -> list[float]:
    """L_ESD(H(c*, k)) at each k of ``ks``, averaged over targets (each bank row with its own prompt)."""
    return [float(np.mean([bank_loss(model, banks[d], rows, world.emb, unhype_factors(hyper, k))
                           for d, rows in eval_rows.items()])) for k in ks]


def k_grid(K: int) -> list[int]:
    return sorted({int(round(K * j / 8)) for j in range(9)})


# ---------------------------------------------------------------------- one replicate (C1-C4)

@dataclass
class Replicate:
    seed: int
    erased: list[int]
    nearest: list[int]
    metrics: dict[str, dict[str, float]]     # method -> metrics
    samples: dict[str, Samples]
    para: dict[str, Samples]
    hyper: HyperNet
    history: dict[str, list[float]]
    baselines: dict[str, BaselineResult]
    ks: list[int]
    esd_k: list[float]
    norms: np.ndarray                        # ||A B||_F at k = K for every prompt
    cpu: dict[str, float]
    banks: dict[int, ESDBank]


def make_banks(world: World, model: CondMLP, digits: list[int], seed: int) -> dict[int, ESDBank]:
    return {d: esd_bank(model, world.emb, world.train_prompts(d), world.anchor, world.uncond, n_traj=N_TRAJ,
                        steps=world.cfg.sample_steps, cfg=CFG_SCALE, eta=world.cfg.neg_guidance, seed=seed + 31 * d)
            for d in digits}


def run_replicate(world: World, model: CondMLP, erased: list[int], seed: int, eta_int: float,
                  banks: dict[int, ESDBank] | None = None, baselines: bool = True,
                  aux_to_hyper: bool | None = None) -> Replicate:
    """UnHype and (optionally) every baseline for one seed; all evaluated on the same prompts and noise."""
    cfg = world.cfg
    cpu: dict[str, float] = {}
    t = time.process_time()
    banks = banks or make_banks(world, model, erased, seed)
    cpu["ESD bank"] = time.process_time() - t
    nearest = sorted({d for e in erased for d in nearest_concepts(world.mean_emb, e, 3)} - set(erased))[:3] \
        if len(erased) > 1 else nearest_concepts(world.mean_emb, erased[0], 3)
    hyper = new_hyper(world, model, seed)
    res = train_unhype(model, hyper, banks, world.emb, world.retain_pool(erased), steps=cfg.unlearn_steps,
                       eta_int=eta_int, lr=cfg.hyper_lr,
                       aux_to_hyper=cfg.aux_to_hyper if aux_to_hyper is None else aux_to_hyper, seed=seed)
    cpu["UnHype"] = res.seconds
    methods: dict[str, tuple[CondMLP, Callable | None]] = {"base": (model, None),
                                                          "UnHype": (model, unhype_factors(hyper))}
    bl: dict[str, BaselineResult] = {}
    if baselines:
        check_model, check_factors = make_check(world, model, erased, seed)
        kw = dict(max_steps=cfg.baseline_steps, check_every=cfg.check_every, threshold=RATE_OK, seed=seed)
        bl["ESD-x"] = train_esd(model, banks, world.emb, check_model, **kw)
        bl["LoRA-ESD"] = train_lora_esd(model, banks, world.emb, check_factors, rank=cfg.rank, alpha=ALPHA_INIT, **kw)
        keep = world.retain_pool(erased)
        erase_ids = np.concatenate([world.train_prompts(d) for d in erased])
        bl["UCE"] = apply_uce(model, world.emb, erase_ids, world.anchor, keep)
        t = time.process_time()
        anchors = world.anchor_pool(erased)        # Concept Ablation's anchor concept excludes the target
        abl = {d: ablation_bank(model, world.emb, world.train_prompts(d), anchors, world.uncond, n=N_TRAJ,
                                steps=cfg.sample_steps, seed=seed + 77 * d) for d in erased}
        bl["Concept Ablation"] = train_concept_ablation(model, abl, world.emb, check_model, **kw)
        bl["Concept Ablation"].seconds += time.process_time() - t
        for name, b in bl.items():
            methods[name] = (b.model, b.factors)
            cpu[name] = b.seconds
    # evaluation on paired noise
    t = time.process_time()
    gen = torch.Generator().manual_seed(seed + 4242)
    ids, lab = eval_prompts(world, "train", cfg.n_eval_samples)
    pids, plab = eval_prompts(world, "para", cfg.n_eval_samples)
    noise, pnoise = torch.randn(len(ids), 64, generator=gen), torch.randn(len(pids), 64, generator=gen)
    samples = {m: generate(world, mdl, f, ids, noise) for m, (mdl, f) in methods.items()}
    para = {m: generate(world, mdl, f, pids, pnoise) for m, (mdl, f) in methods.items()}
    metrics = {m: summarize(world, samples[m], para[m], samples["base"], para["base"], erased, nearest)
               for m in methods}
    cpu["evaluation"] = time.process_time() - t
    # C3: adapter norms for every prompt, L_ESD along k
    with torch.no_grad():
        norms = delta_norms(hyper.factors(world.emb, cfg.K_hyper)).numpy()
    ks = k_grid(cfg.K_hyper)
    gen = torch.Generator().manual_seed(seed + 99)
    eval_rows = {d: b.subset(256, gen) for d, b in banks.items()}
    esd_k = esd_curve(world, model, hyper, banks, ks, eval_rows)
    return Replicate(seed, list(erased), nearest, metrics, samples, para, hyper, res.history, bl, ks, esd_k, norms, cpu,
                     banks)


# ---------------------------------------------------------------------- C5: several concepts at once

@dataclass
class MultiResult:
    m: int
    erased: list[int]
    unhype_rates: dict[int, float]
    unhype_hits: dict[int, np.ndarray]
    lora_all_rates: dict[int, float]
    lora_sum_rates: dict[int, float]
    base_retain: float
    retain: dict[str, float]                 # method -> retain acc on the non-erased digits
    retain_hits: dict[str, np.ndarray]
    cpu: dict[str, float]                    # UnHype one run vs LoRA runs
    lora_all_matched: bool
    lora_each_matched: list[bool]
    base_rates: dict[int, float] = field(default_factory=dict)   # base target rate of every erased digit


def multi_order(world: World) -> list[int]:
    """The erase order of C5: the first target, then a fixed permutation (master seed) of the other digits."""
    first = world.cfg.targets[0]
    others = [d for d in range(10) if d != first]
    perm = np.random.default_rng([world.cfg.seed, 5]).permutation(len(others))
    return [first] + [others[i] for i in perm]


def run_multi(world: World, model: CondMLP, m: int, seed: int, eta_int: float, banks_cache: dict[int, ESDBank],
              unhype_m1: Replicate | None = None) -> MultiResult:
    """Erase the first ``m`` digits of :func:`multi_order` with one H, one static LoRA, and m summed LoRAs."""
    cfg = world.cfg
    erased = multi_order(world)[:m]
    for d in erased:
        if d not in banks_cache:
            banks_cache.update(make_banks(world, model, [d], seed))
    banks = {d: banks_cache[d] for d in erased}
    cpu = {}
    if unhype_m1 is not None and m == 1 and unhype_m1.erased == erased:
        hyper, cpu["UnHype (1 run)"] = unhype_m1.hyper, unhype_m1.cpu["UnHype"]
    else:
        hyper = new_hyper(world, model, seed)
        res = train_unhype(model, hyper, banks, world.emb, world.retain_pool(erased), steps=cfg.unlearn_steps,
                           eta_int=eta_int, lr=cfg.hyper_lr, aux_to_hyper=cfg.aux_to_hyper, seed=seed)
        cpu["UnHype (1 run)"] = res.seconds
    kw = dict(max_steps=cfg.baseline_steps, check_every=cfg.check_every, threshold=RATE_OK, rank=cfg.rank,
              alpha=ALPHA_INIT)
    _, check_all = make_check(world, model, erased, seed)
    lora_all = train_lora_esd(model, banks, world.emb, check_all, seed=seed, **kw)
    cpu["LoRA-ESD, one on all m"] = lora_all.seconds
    each = []
    for j, d in enumerate(erased):
        _, check_d = make_check(world, model, [d], seed)
        each.append(train_lora_esd(model, {d: banks[d]}, world.emb, check_d, seed=seed + 101 * (j + 1), **kw))
    cpu["LoRA-ESD, m per-concept runs"] = sum(b.seconds for b in each)
    summed = sum_loras([b.factors() for b in each])
    gen = torch.Generator().manual_seed(seed + 4242)
    ids, lab = eval_prompts(world, "train", cfg.n_eval_samples)
    noise = torch.randn(len(ids), 64, generator=gen)
    methods = {"base": None, "UnHype": unhype_factors(hyper), "LoRA-ESD (one on all)": lora_all.factors,
               "LoRA-ESD (summed)": lambda c: summed}
    s = {name: generate(world, model, f, ids, noise) for name, f in methods.items()}
    retain = [d for d in range(10) if d not in erased]
    rmask = np.isin(lab, retain)
    rates = {name: {d: target_rate(x.pred, x.label, d) for d in erased} for name, x in s.items()}
    hits = {d: (s["UnHype"].pred[lab == d] == d).astype(float) for d in erased}
    rhits = {name: (x.pred[rmask] == x.label[rmask]).astype(float) for name, x in s.items()}
    return MultiResult(m, erased, rates["UnHype"], hits, rates["LoRA-ESD (one on all)"], rates["LoRA-ESD (summed)"],
                       retain_acc(s["base"].pred, lab, retain),
                       {name: retain_acc(x.pred, lab, retain) for name, x in s.items()}, rhits, cpu,
                       lora_all.matched, [b.matched for b in each], rates["base"])


# ---------------------------------------------------------------------- C6: the other backbone

@dataclass
class BackboneResult:
    param: str
    base_rate: float
    rate: float
    hits: np.ndarray
    retain: float
    base_retain: float
    calibration: Calibration
    cpu: dict[str, float]
    samples: Samples
    base_samples: Samples


def run_backbone(world: World, param: str, seed: int) -> BackboneResult:
    """Calibrate eta_int, train UnHype and evaluate on backbone ``param`` (same hypernetwork code)."""
    cfg = world.cfg
    t = time.process_time()
    model = base_model(world, param)
    cpu = {"base": time.process_time() - t}
    erased = list(cfg.targets)
    banks = make_banks(world, model, erased, seed)
    cal = calibrate_eta(world, model, banks, hyper_A0(new_hyper(world, model, seed)), seed)
    rep = run_replicate(world, model, erased, seed, cal.eta, banks=banks, baselines=False)
    s, b = rep.samples["UnHype"], rep.samples["base"]
    retain = [d for d in range(10) if d not in erased]
    hits = np.concatenate([(s.pred[s.label == d] == d).astype(float) for d in erased])
    cpu.update(rep.cpu)
    return BackboneResult(param, float(np.mean([target_rate(b.pred, b.label, d) for d in erased])),
                          rep.metrics["UnHype"]["target_rate"], hits, rep.metrics["UnHype"]["retain_acc"],
                          rep.metrics["base"]["retain_acc"], cal, cpu, s, b)


# ---------------------------------------------------------------------- tables

def metric_table(reps: list[Replicate], keys: list[str] | None = None):
    """Mean ± 95% CI over replicates of every method's metrics (a pandas DataFrame of strings)."""
    import pandas as pd

    from repro.common import mean_ci

    keys = keys or list(next(iter(reps[0].metrics.values())))
    rows = {}
    for m in reps[0].metrics:
        row = {}
        for k in keys:
            mean, half = mean_ci(np.array([r.metrics[m][k] for r in reps]))
            row[k] = f"{float(mean):.3f} ± {float(half):.3f}" if len(reps) > 1 else f"{float(mean):.3f}"
        rows[m] = row
    return pd.DataFrame(rows).T


def norm_ratio(world: World, rep: Replicate) -> float:
    """Mean adapter norm of the erased digits' training prompts over that of the other digits' training prompts."""
    tr = world.prompts.idx(split="train")
    is_t = np.isin(world.prompts.digit[tr], rep.erased)
    return float(rep.norms[tr[is_t]].mean() / rep.norms[tr[~is_t]].mean())


def paraphrase_table(world: World, reps: list[Replicate], methods: tuple[str, ...] = ("base", "UnHype", "UCE")):
    """Per held-out paraphrase of the erased digits: cosine to the digit's training prompts, target rate per method
    (mean over replicates)."""
    import pandas as pd

    rows = []
    e = world.emb.numpy()
    for d in reps[0].erased:
        for p in world.prompts.idx(d, "para"):
            row = {"paraphrase": repr(world.prompts.texts[p]),
                   "cos to own digit": float(e[p] @ world.mean_emb[d]),
                   "nearest digit (cos)": WORDS_[int(np.argmax(world.mean_emb @ e[p]))]}
            for m in methods:
                if m in reps[0].para:
                    row[m] = float(np.mean([np.mean(r.para[m].pred[r.para[m].prompt == p] == d) for r in reps]))
            rows.append(row)
    return pd.DataFrame(rows).set_index("paraphrase")


__all__ = [
    "World", "build_world", "base_model", "Samples", "eval_prompts", "generate", "make_check", "summarize",
    "Calibration", "calibrate_eta", "hyper_A0", "new_hyper", "esd_curve", "k_grid", "Replicate", "make_banks",
    "run_replicate", "MultiResult", "multi_order", "run_multi", "BackboneResult", "run_backbone",
    "replicate_seed", "RATE_OK", "CFG_SCALE", "metric_table", "norm_ratio", "paraphrase_table",
]
