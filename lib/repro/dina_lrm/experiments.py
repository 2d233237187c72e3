"""The chapter's experiment: shared models, pairs, then per inner seed the latent RMs, their evaluation against
noise, noise ensembling, the pixel RMs, the costs, and (on the alignment seeds) ReFL with every reward and
Diffusion-DPO. Methods compared on the same data share their random streams (DESIGN item 10)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
from torch.nn import functional as F

from . import align, metrics
from .config import Config
from .data import PairSet, Shared, build_shared, make_preference_pairs
from .flow import features_at, noise_latent
from .reward import (LATENT_RMS, LatentRewardModel, PixelRewardCNN, frozen_backbone, score, std_normal_cdf,
                     thurstone_var, train_latent_rms, train_pixel_rm)

PROB_KINDS = ("dina", "dina_nll", "thurstone_const", "bt", "clean")
REFL_REWARDS = ("oracle", "dina", "bt", "pixel")


@dataclass
class SeedResult:
    """Everything measured at one inner seed (lists over ``cfg.sigma_grid`` where a σ-curve)."""

    seed: int
    acc: dict[str, list[float]] = field(default_factory=dict)          # expected agreement vs σ (K = 1)
    hard_acc: dict[str, list[float]] = field(default_factory=dict)     # agreement with sampled labels vs σ
    brier: dict[str, list[float]] = field(default_factory=dict)        # vs σ
    ece_hi: dict[str, float] = field(default_factory=dict)             # pooled σ >= 0.6
    ece_floor_bt: float = math.nan
    ens_acc: dict[int, float] = field(default_factory=dict)            # DiNa at eval σ, K draws
    ens_var: dict[int, float] = field(default_factory=dict)            # across-draw variance of the K-mean
    disagree: float = math.nan                                          # two single draws disagree
    best_sigma: float = math.nan
    dina_best_k8: float = math.nan
    pixel_acc: dict[str, float] = field(default_factory=dict)          # "big", "matched" on clean images
    rm_seconds: float = math.nan
    align: dict[str, align.History] = field(default_factory=dict)
    dpo: dict[float, align.History] = field(default_factory=dict)
    dpo_implicit: dict[float, float] = field(default_factory=dict)
    calib: dict = field(default_factory=dict)                           # p and labels for reliability plots
    refl_timing: dict = field(default_factory=dict)                     # K4b: [steps, repeats] step CPU seconds


@dataclass
class Experiment:
    cfg: Config
    shared: Shared
    train: PairSet
    test: PairSet
    val: PairSet
    acc_star: float
    small_dr_frac: float
    results: list[SeedResult] = field(default_factory=list)
    costs: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    samples: dict = field(default_factory=dict)

    def curve(self, kind: str, what: str = "acc") -> np.ndarray:
        """[seeds, σ] array of a σ-curve (the seeds that trained ``kind``)."""
        return np.array([getattr(r, what)[kind] for r in self.results if kind in getattr(r, what)], float)

    def at_sigma(self, kind: str, sigma: float, what: str = "acc") -> np.ndarray:
        i = self.cfg.sigma_grid.index(sigma)
        return self.curve(kind, what)[:, i]

    def per_seed(self, fn: Callable[[SeedResult], float], align_only: bool = False) -> np.ndarray:
        rs = [r for r in self.results if (r.align or not align_only)]
        return np.array([fn(r) for r in rs], float)


# ----------------------------------------------------------------------------- helpers

def rm_probability(kind: str, ds: torch.Tensor, sigma: float, a: float, b: float) -> torch.Tensor:
    """Each RM's own P(a ≻ b): Thurstone Φ(Δs/√(2 var)) for DiNa kinds, sigmoid(Δs) for BT kinds."""
    if kind in ("dina", "dina_nll"):
        return std_normal_cdf(ds / math.sqrt(2 * float(thurstone_var(torch.tensor(sigma), a, b)) + 1e-6))
    if kind == "thurstone_const":
        return std_normal_cdf(ds / math.sqrt(2 * 0.5 + 1e-6))
    return torch.sigmoid(ds)


def pair_score_diffs(rms: dict[str, LatentRewardModel], pairs: PairSet, sigma: float, eps: torch.Tensor,
                     chunk: int = 8192) -> dict[str, torch.Tensor]:
    """Δs = s(z_a,σ) − s(z_b,σ) of every RM, both items with the same ε; backbone features computed once."""
    backbone = next(iter(rms.values())).backbone
    out = {k: [] for k in rms}
    with torch.no_grad():
        for i in range(0, len(pairs), chunk):
            sl = slice(i, i + chunk)
            za, zb, y, e = pairs.z_a[sl], pairs.z_b[sl], pairs.y[sl], eps[sl]
            n = y.shape[0]
            zz = torch.cat([noise_latent(za, sigma, e), noise_latent(zb, sigma, e)])
            hs, e_t = features_at(backbone, zz, sigma, torch.cat([y, y]))   # one σ for all rows
            for k, rm in rms.items():
                s = rm.head(hs, e_t, torch.cat([y, y]))
                out[k].append(s[:n] - s[n:])
    return {k: torch.cat(v) for k, v in out.items()}


def ensemble_diffs(rm: LatentRewardModel, pairs: PairSet, sigma: float, eps: torch.Tensor,
                   chunk: int = 4096) -> torch.Tensor:
    """Per-draw Δs of one RM, shape [K, n], with draws ``eps`` [K, n, d] shared by both items of a pair.

    At σ = 0 every draw scores the clean latent itself ((1 − 0) z0 + 0 ε = z0 exactly), so the K draws are one
    computation, repeated."""
    K = eps.shape[0]
    out = []
    if sigma == 0:
        return pair_score_diffs({"m": rm}, pairs, sigma, eps[0], chunk)["m"].expand(K, -1)
    with torch.no_grad():
        for k in range(K):
            out.append(pair_score_diffs({"m": rm}, pairs, sigma, eps[k], chunk)["m"])
    return torch.stack(out)


def pixel_macs_for(target: float, decoder_macs: int, c_range=range(2, 97)) -> tuple[int, int]:
    """The channel width c of :class:`PixelRewardCNN` whose path MACs (decoder included) are closest to target."""
    best = None
    for c in c_range:
        m = PixelRewardCNN(c)
        macs = metrics.count_macs(lambda: m(torch.zeros(1, 64), torch.zeros(1, dtype=torch.long)), [m])
        if macs + decoder_macs > 2 * target:
            break
        err = abs(math.log((macs + decoder_macs) / target))
        if best is None or err < best[0]:
            best = (err, c, macs + decoder_macs)
    return best[1], best[2]


# ----------------------------------------------------------------------------- the run

def prepare(cfg: Config, progress: Callable = print) -> Experiment:
    t0 = time.perf_counter()
    shared = build_shared(cfg.ae_steps, cfg.oracle_steps, cfg.gen_steps, cfg.cfg_scale, cfg.n_sample_steps,
                          use_cache=cfg.use_cache, n_fit=cfg.n_oracle_fit)
    t1, tc = time.perf_counter(), time.thread_time()
    progress(f"shared models: {shared.info['source']} ({t1 - t0:.1f} s)")
    shared.ae.requires_grad_(False)
    kw = dict(steps=cfg.n_sample_steps, cfg_scale=cfg.cfg_scale)
    train = make_preference_pairs(shared, cfg.n_train_pairs, cfg.s_h, seed=10 * cfg.seed + 1, **kw)
    test = make_preference_pairs(shared, cfg.n_test_pairs, cfg.s_h, seed=10 * cfg.seed + 2, **kw)
    val = make_preference_pairs(shared, cfg.n_val_pairs, cfg.s_h, seed=10 * cfg.seed + 3, **kw)
    dr = test.dr.numpy()
    exp = Experiment(cfg, shared, train, test, val, metrics.oracle_ceiling(dr, cfg.s_h),
                     float(np.mean(np.abs(dr) < 0.25)))
    exp.seconds["shared"] = t1 - t0
    exp.seconds["pairs"] = time.perf_counter() - t1
    exp.seconds["pairs_cpu"] = time.thread_time() - tc
    progress(f"pairs: {len(train)} train / {len(test)} test / {len(val)} val ({exp.seconds['pairs']:.1f} s)")
    return exp


def run_seed(exp: Experiment, seed: int, do_align: bool, progress: Callable = print) -> SeedResult:
    cfg, sh, test = exp.cfg, exp.shared, exp.test
    a, b = cfg.var_scale, cfg.var_min
    res = SeedResult(seed)
    backbone = frozen_backbone(sh.gen)
    t0, tc = time.perf_counter(), time.thread_time()
    kinds = [k for k in LATENT_RMS if do_align or k != "thurstone_const"]   # the ablation: alignment seeds only
    rms, log = train_latent_rms(backbone, exp.train, kinds, cfg.rm_steps, seed, batch=cfg.rm_batch,
                                lr=cfg.rm_lr, a=a, b=b, loss=cfg.loss, n_grid=cfg.n_sample_steps)
    res.rm_seconds = time.perf_counter() - t0
    exp.seconds.setdefault("latent_rms_cpu", []).append(time.thread_time() - tc)
    tc0 = time.thread_time()
    for m in rms.values():            # trained: from here on only gradients w.r.t. latents are needed
        m.requires_grad_(False)
    dr, lab = test.dr.numpy(), test.label.numpy()
    g = torch.Generator().manual_seed(seed + 77)
    d = test.z_a.shape[1]
    Kmax = max(cfg.ensemble_K)
    eps_ens = torch.randn(Kmax, len(test), d, generator=g)            # draws at the eval σ (draw 0 = the K=1 score)
    hi_p = {k: [] for k in PROB_KINDS}
    hi_lab = []
    d0 = None                                                          # DiNa's draw 0 at the eval σ (C3's K = 1)
    for j, sig in enumerate(cfg.sigma_grid):
        eps = eps_ens[0] if sig == cfg.eval_sigma else torch.randn(len(test), d, generator=g)
        ds = pair_score_diffs(rms, test, sig, eps)
        if sig == cfg.eval_sigma:
            d0 = ds["dina"]
        for k in rms:
            dsk = ds[k].numpy()
            res.acc.setdefault(k, []).append(metrics.expected_agreement(dsk, dr, cfg.s_h))
            res.hard_acc.setdefault(k, []).append(metrics.pairwise_accuracy(dsk, lab))
            p = rm_probability(k, ds[k], sig, a, b).numpy()
            res.brier.setdefault(k, []).append(metrics.brier(p, lab))
            if sig >= 0.6 - 1e-9:
                hi_p[k].append(p)
            if sig in (0.2, 0.6) and k in ("dina", "dina_nll", "bt"):
                res.calib[f"{k}@{sig}"] = p
        if sig >= 0.6 - 1e-9:
            hi_lab.append(lab)
    hl = np.concatenate(hi_lab)
    for k in rms:
        res.ece_hi[k] = metrics.ece_binary(np.concatenate(hi_p[k]), hl)
    res.ece_floor_bt = metrics.ece_floor(np.concatenate(hi_p["bt"]), seed=seed)
    res.calib["labels"] = lab
    # noise ensembling at the eval σ (C3)
    if d0 is None:
        D = ensemble_diffs(rms["dina"], test, cfg.eval_sigma, eps_ens)
    else:   # draw 0 was scored on the σ grid above: the same computation, not repeated
        D = torch.cat([d0[None], ensemble_diffs(rms["dina"], test, cfg.eval_sigma, eps_ens[1:])]) if Kmax > 1 \
            else d0[None]
    for K in cfg.ensemble_K:
        res.ens_acc[K] = metrics.expected_agreement(D[:K].mean(0).numpy(), dr, cfg.s_h)
        if K >= 1 and Kmax >= 2 * K:   # variance of the K-mean across disjoint groups of draws (sanity check)
            m = D[: (Kmax // K) * K].view(Kmax // K, K, -1).mean(1)
            res.ens_var[K] = float(m.var(0).mean())
    res.disagree = float((torch.sign(D[0]) != torch.sign(D[1])).float().mean()) if Kmax >= 2 else math.nan
    # C4: best σ on validation pairs (K = 1), then K = 8 on the test pairs
    gv = torch.Generator().manual_seed(seed + 78)
    val_acc = []
    for sig in cfg.sigma_grid[:-1]:
        dsv = pair_score_diffs({"dina": rms["dina"]}, exp.val, sig,
                               torch.randn(len(exp.val), d, generator=gv))["dina"].numpy()
        val_acc.append(metrics.expected_agreement(dsv, exp.val.dr.numpy(), cfg.s_h))
    res.best_sigma = cfg.sigma_grid[int(np.argmax(val_acc))]
    K8 = max(k for k in cfg.ensemble_K if k <= 8)
    D8 = ensemble_diffs(rms["dina"], test, res.best_sigma, torch.randn(K8, len(test), d, generator=g))
    res.dina_best_k8 = metrics.expected_agreement(D8.mean(0).numpy(), dr, cfg.s_h)
    exp.seconds.setdefault("evaluation_cpu", []).append(time.thread_time() - tc0)
    progress(f"seed {seed}: latent RMs {res.rm_seconds:.1f} s; acc at σ={cfg.eval_sigma}: "
             + ", ".join(f"{k} {res.acc[k][cfg.sigma_grid.index(cfg.eval_sigma)]:.3f}" for k in rms))
    if not do_align:
        return res
    # pixel RMs (clean decoded images, BT)
    t1, tc = time.perf_counter(), time.thread_time()
    with torch.no_grad():
        xa, xb = sh.ae.decode(exp.train.z_a), sh.ae.decode(exp.train.z_b)
        ta, tb = sh.ae.decode(test.z_a), sh.ae.decode(test.z_b)
    pix = {}
    for name, c in (("big", exp.costs["pixel_c_big"]), ("matched", exp.costs["pixel_c_matched"])):
        torch.manual_seed(seed)
        pix[name] = train_pixel_rm(PixelRewardCNN(c), xa, xb, exp.train.y, exp.train.label, cfg.pixel_steps,
                                   seed, batch=cfg.rm_batch, lr=cfg.rm_lr).requires_grad_(False)
        with torch.no_grad():
            dsp = (pix[name](ta, test.y) - pix[name](tb, test.y)).numpy()
        res.pixel_acc[name] = metrics.expected_agreement(dsp, dr, cfg.s_h)
    exp.seconds.setdefault("pixel_rms", []).append(time.perf_counter() - t1)
    exp.seconds.setdefault("pixel_rms_cpu", []).append(time.thread_time() - tc)
    # ReFL with each reward, then DPO
    oracle_fn = lambda z, y: sh.oracle(sh.ae.decode(z), y)
    ev = align.EvalSet.make(cfg.n_refl_eval, d, seed=seed + 99)

    def latent_reward(rm):
        gr = torch.Generator().manual_seed(seed + 7)   # each run its own stream (the same for DiNa and BT-LRM)
        def train_fn(z, y):   # one fresh noise draw per call (an unbiased estimate of the K-mean score)
            return score(rm, z, y, cfg.eval_sigma, eps=torch.randn(1, *z.shape, generator=gr))
        def eval_fn(z, y):    # fixed K = 8 draws for the logged RM reward (C6)
            return score(rm, z, y, cfg.eval_sigma, K=8, seed=seed + 5)
        return train_fn, eval_fn

    rewards = {"oracle": (oracle_fn, oracle_fn),
               "dina": latent_reward(rms["dina"]), "bt": latent_reward(rms["bt"]),
               "pixel": ((lambda z, y: pix["big"](sh.ae.decode(z), y)),) * 2}
    t2, tc = time.perf_counter(), time.thread_time()
    kw = dict(batch=cfg.refl_batch, lr=cfg.refl_lr, n_sample_steps=cfg.n_sample_steps, cfg_scale=cfg.cfg_scale)
    runs = align.refl_train_interleaved(sh.gen, {k: rewards[k] for k in REFL_REWARDS}, oracle_fn, ev,
                                        cfg.refl_steps, seed, log_every=cfg.refl_log_every, **kw)
    for name in REFL_REWARDS:
        model, res.align[name] = runs[name]
        if seed == cfg.seeds[0]:
            with torch.no_grad():
                exp.samples[name] = sh.ae.decode(align.sample(model, ev.y[:20], cfg.n_sample_steps, cfg.cfg_scale,
                                                              noise=ev.noise[:20])[0]).numpy()
    exp.seconds.setdefault("refl", []).append(time.perf_counter() - t2)
    exp.seconds.setdefault("refl_cpu", []).append(time.thread_time() - tc)
    if seed == cfg.seeds[0]:   # K4b: single ReFL steps, repeated back to back with each reward
        t3, tc = time.perf_counter(), time.thread_time()
        res.refl_timing = align.time_refl_steps(sh.gen, {"dina": rewards["dina"][0], "pixel": rewards["pixel"][0]},
                                                cfg.refl_time_steps, cfg.refl_time_repeats, seed + 11, **kw)
        exp.seconds["refl_timing"] = time.perf_counter() - t3
        exp.seconds["refl_timing_cpu"] = time.thread_time() - tc
    if seed == cfg.seeds[0]:
        with torch.no_grad():
            exp.samples["base"] = sh.ae.decode(align.sample(sh.gen, ev.y[:20], cfg.n_sample_steps, cfg.cfg_scale,
                                                            noise=ev.noise[:20])[0]).numpy()
    if cfg.run_dpo:
        t3, tc = time.perf_counter(), time.thread_time()
        for beta in cfg.dpo_betas:
            model, hist = align.diffusion_dpo_train(sh.gen, exp.train, beta, cfg.dpo_steps, seed, oracle_fn, ev,
                                                    lr=cfg.refl_lr, n_sample_steps=cfg.n_sample_steps,
                                                    cfg_scale=cfg.cfg_scale,
                                                    log_every=max(1, cfg.dpo_steps // 10))
            res.dpo[beta] = hist
            res.dpo_implicit[beta] = align.dpo_implicit_accuracy(model, sh.gen, test, seed)
        exp.seconds.setdefault("dpo", []).append(time.perf_counter() - t3)
        exp.seconds.setdefault("dpo_cpu", []).append(time.thread_time() - tc)
    progress(f"seed {seed}: pixel RMs + ReFL{' + DPO' if cfg.run_dpo else ''} "
             f"{time.perf_counter() - t1:.1f} s; pixel acc {res.pixel_acc}")
    return res


def measure_costs(exp: Experiment) -> dict:
    """FLOPs (MACs) of each reward path and CPU time of reward + gradient w.r.t. the latent, per sample, at
    ``time_batch`` (card, C4 and K4). The pixel paths include the decoder."""
    cfg, sh = exp.cfg, exp.shared
    tc = time.thread_time()
    bb = frozen_backbone(sh.gen)
    from .reward import DiNaHead
    torch.manual_seed(0)
    rm = LatentRewardModel(bb, DiNaHead(width=bb.width)).requires_grad_(False)
    z1, y1 = torch.zeros(1, 16), torch.zeros(1, dtype=torch.long)
    dina_macs = metrics.count_macs(lambda: rm(z1, y1, torch.full((1,), cfg.eval_sigma)), [rm])
    dec_macs = metrics.count_macs(lambda: sh.ae.decode(z1), [sh.ae])
    c_big, big_macs = pixel_macs_for(cfg.pixel_flops_ratio * dina_macs, dec_macs)
    c_m, m_macs = pixel_macs_for(dina_macs, dec_macs)
    costs = dict(dina_macs=dina_macs, decoder_macs=dec_macs, pixel_c_big=c_big, pixel_big_macs=big_macs,
                 pixel_c_matched=c_m, pixel_matched_macs=m_macs,
                 head_params=sum(p.numel() for p in rm.head.parameters()),
                 backbone_tap_params=sum(p.numel() for n, p in bb.named_parameters()
                                         if not n.startswith(("blocks.3", "out"))))
    B = cfg.time_batch
    g = torch.Generator().manual_seed(0)
    z = torch.randn(B, 16, generator=g)
    y = torch.randint(0, 10, (B,), generator=g)
    pix = {"big": PixelRewardCNN(c_big).requires_grad_(False), "matched": PixelRewardCNN(c_m).requires_grad_(False)}
    costs["pixel_params_big"] = sum(p.numel() for p in pix["big"].parameters())
    costs["pixel_params_matched"] = sum(p.numel() for p in pix["matched"].parameters())

    def grad_call(fn):
        def call():
            zz = z.clone().requires_grad_(True)
            fn(zz).sum().backward()
        return call

    paths = {"dina": lambda zz: score(rm, zz, y, cfg.eval_sigma, eps=torch.randn(1, B, 16, generator=g)),
             "pixel_big": lambda zz: pix["big"](sh.ae.decode(zz), y),
             "pixel_matched": lambda zz: pix["matched"](sh.ae.decode(zz), y)}
    rounds = 21 if cfg.profile == "full" else 5
    for name, t in metrics.time_interleaved({n: grad_call(fn) for n, fn in paths.items()}, rounds).items():
        costs[f"{name}_grad"] = metrics.timing_summary(t, per=B)
    with torch.no_grad():
        fwd = metrics.time_interleaved({n: (lambda fn=fn: fn(z)) for n, fn in paths.items()}, rounds)
    for name, t in fwd.items():
        costs[f"{name}_fwd"] = metrics.timing_summary(t, per=B)
    exp.costs.update(costs)
    exp.seconds["costs_cpu"] = time.thread_time() - tc
    return costs


def run_experiment(cfg: Config, progress: Callable = print) -> Experiment:
    exp = prepare(cfg, progress)
    measure_costs(exp)
    for i, s in enumerate(cfg.seeds):
        exp.results.append(run_seed(exp, s, do_align=i < cfg.n_align_seeds, progress=progress))
    return exp
