"""The chapter's experiment: data, twelve pretraining runs (four per seed), three fine-tunings per seed, rollouts and scores,
memory and timing measurements. The notebook calls :func:`run_experiment` and reads the :class:`Experiment`.

Pairing (DESIGN item 10): within a model seed, EMFormer (composite), EMFormer (w ≡ 0, learned s_c) and EMFormer
(MSE) start from the same initialization, all pretraining runs draw the same batches, all fine-tunings start from the same pretrained
EMFormer and draw the same batches, and every model is scored on the same test initial conditions.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from repro.common.paths import cache_dir

from . import data as D
from . import metrics as M
from . import sim
from .config import Config
from .losses import CompositeLoss
from .models import EMFormer, ViT, matched_vit_depth, n_params
from .train import (History, continue_one_step, finetune_accumulative, finetune_bptt, pretrain, rollout,
                    sample_batch, saved_bytes)

MODELS = ("emformer", "emformer_w0", "emformer_mse", "vit", "accumulative", "bptt", "continued")
LABELS = {"emformer": "EMFormer (pretrain only)", "emformer_w0": "EMFormer, w ≡ 0 (learned s_c)",
          "emformer_mse": "EMFormer, MSE loss", "vit": "ViT",
          "accumulative": "EMFormer + accumulative FT", "bptt": "EMFormer + BPTT FT",
          "continued": "EMFormer + continued 1-step", "damped": "EMFormer pretrain, damped",
          "persistence": "persistence", "climatology": "climatology", "twin": "perfect-model twin",
          "noconv": "EMFormer, no conv", "fixed": "EMFormer, fixed w=0.5", "scheduled": "EMFormer, scheduled w"}


def sw_config(cfg: Config) -> sim.ShallowWaterConfig:
    return sim.ShallowWaterConfig(ny=cfg.grid[0], nx=cfg.grid[1], dt=cfg.dt_seconds)


def build_emformer(cfg: Config, seed: int, **kw) -> EMFormer:
    torch.manual_seed(seed)
    return EMFormer(4, cfg.dim, cfg.heads, cfg.valley_depth, cfg.patch, tuple(cfg.grid), **kw)


def vit_depth(cfg: Config) -> int:
    return matched_vit_depth(build_emformer(cfg, 0), cfg.dim, cfg.heads, cfg.patch, tuple(cfg.grid))


def build_vit(cfg: Config, seed: int) -> ViT:
    torch.manual_seed(seed)
    return ViT(4, cfg.dim, cfg.heads, vit_depth(cfg), cfg.patch, tuple(cfg.grid))


def model_seed(cfg: Config, s: int) -> int:
    return 1000 * cfg.seed + s


# ----------------------------------------------------------------------------- cache of pretrained models

PRETRAIN_FIELDS = ("grid", "n_traj", "frames_per_traj", "spinup_frames", "dt_seconds", "patch", "dim", "heads",
                   "valley_depth", "batch", "pretrain_steps", "lr_pretrain", "loss_lr")
SOURCES = ("sim.py", "data.py", "layers.py", "models.py", "losses.py", "train.py", "_kernels.cpp")


def _source_hash() -> str:
    here = os.path.dirname(__file__)
    h = hashlib.sha256()
    for name in SOURCES:
        with open(os.path.join(here, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]


def pretrain_key(cfg: Config, kind: str, mseed: int) -> str:
    d = {k: getattr(cfg, k) for k in PRETRAIN_FIELDS}
    d.update(kind=kind, model_seed=mseed, data_seed=cfg.seed, src=_source_hash())
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=list).encode()).hexdigest()[:16]


def load_or_pretrain(cfg: Config, kind: str, mseed: int, ds: D.Dataset) -> tuple[torch.nn.Module, CompositeLoss,
                                                                                   History, str]:
    """Pretrain ``kind`` (the EMFormer variants "emformer", "emformer_w0", "emformer_mse", the ablations, or
    "vit"), or load it from the cache."""
    w_lat = M.lat_weights(ds.lat)
    mode = {"emformer": "learned" if cfg.loss == "composite" else cfg.loss, "emformer_mse": "mse", "emformer_w0": "w0",
            "vit": "learned" if cfg.loss == "composite" else cfg.loss, "noconv": "learned", "fixed": "fixed",
            "scheduled": "scheduled"}[kind]
    model = build_vit(cfg, mseed) if kind == "vit" else build_emformer(cfg, mseed, conv=(kind != "noconv"))
    loss = CompositeLoss(4, w_lat, mode=mode)
    path = cache_dir(cfg.slug) / f"{kind}-{pretrain_key(cfg, kind, mseed)}.pt"
    if cfg.use_cache and path.exists():
        blob = torch.load(path, weights_only=False)
        model.load_state_dict(blob["model"])
        loss.load_state_dict(blob["loss"])
        model.eval()
        return model, loss, blob["history"], "cache"
    hist = pretrain(model, loss, ds.train, cfg.pretrain_steps, cfg.batch, cfg.lr_pretrain, cfg.loss_lr, seed=mseed)
    if cfg.use_cache:
        tmp = path.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "loss": loss.state_dict(), "history": hist}, tmp)
        os.replace(tmp, path)
    return model, loss, hist, "trained"


# ----------------------------------------------------------------------------- scores

def scores(pred: np.ndarray, y: np.ndarray, w_lat: np.ndarray, thr: float, csi_lead: int) -> dict:
    """h-channel scores by lead: latitude-weighted RMSE and ACC (anomaly-std units), CSI at the truth's 95th
    percentile threshold ``thr`` and at the forecast's own 95th percentile, at ``csi_lead``."""
    L = pred.shape[1]
    out = {"rmse": [M.weighted_rmse(pred[:, k, 0], y[:, k, 0], w_lat) for k in range(L)],
           "acc": [M.weighted_acc(pred[:, k, 0], y[:, k, 0], w_lat) for k in range(L)],
           "rmse_T": [M.weighted_rmse(pred[:, k, 3], y[:, k, 3], w_lat) for k in range(L)]}
    p, t = pred[:, csi_lead - 1, 0], y[:, csi_lead - 1, 0]
    out["csi"] = M.csi(p, t, thr)
    out["csi_own"] = M.csi(p, t, float(np.quantile(p, 0.95)), thr)
    out["hit_rate"] = M.hit_rate(p, t, thr)
    return out


# ----------------------------------------------------------------------------- timing (C2b, C2c)

def _interleaved(fns: dict, runs: int) -> dict[str, np.ndarray]:
    """Wall times of each callable, interleaved run by run (order rotated every run) after a warm-up."""
    names = list(fns)
    for f in fns.values():
        f()
    t = {n: np.empty(runs) for n in names}
    for r in range(runs):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            a = time.perf_counter()
            fns[n]()
            t[n][r] = time.perf_counter() - a
    return t


def _ratio_band(a: np.ndarray, b: np.ndarray, rng: np.random.Generator, n_boot: int = 2000) -> tuple:
    """median(a)/median(b) and its bootstrap 95 % band (runs resampled jointly)."""
    idx = rng.integers(0, len(a), (n_boot, len(a)))
    r = np.median(a[idx], 1) / np.median(b[idx], 1)
    return float(np.median(a) / np.median(b)), float(np.quantile(r, 0.025)), float(np.quantile(r, 0.975))


def time_convs(cfg: Config, runs: int, seed: int = 0) -> dict:
    """C2b: inference, kernel merged once vs three convs, on the valley map (batch 16, 3d channels).
    C2c: a training step (forward + backward) of one conv layer re-merging every call vs three convs, and a full
    EMFormer training step with merged vs three-branch valley convs. Each with an A/A ratio of the merged path."""
    from .layers import MultiScaleConv
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    th, tw = cfg.grid[0] // cfg.patch // 2, cfg.grid[1] // cfg.patch // 2
    conv = MultiScaleConv(3 * cfg.dim)
    x = torch.randn(16, 3 * cfg.dim, th, tw, generator=gen)
    out = {"map": f"16×{3 * cfg.dim}×{th}×{tw}"}

    def infer(mode, reps=20):          # each timed sample is `reps` calls: less timer and scheduler noise
        def f():
            with torch.no_grad():
                conv.mode = mode
                for _ in range(reps):
                    conv(x)
        return f

    conv.freeze()
    t = _interleaved({"merged": infer("cached"), "merged2": infer("cached"), "three": infer("three")}, runs)
    out["infer"] = {"speedup": _ratio_band(t["three"], t["merged"], rng), "aa": _ratio_band(t["merged2"], t["merged"], rng),
                    "ms_merged": 50 * float(np.median(t["merged"])), "ms_three": 50 * float(np.median(t["three"]))}
    xg = x.clone().requires_grad_(True)

    def layer(mode, reps=5):
        def f():
            conv.mode = mode
            for _ in range(reps):
                conv(xg).square().mean().backward()
        return f

    t = _interleaved({"merged": layer("merged"), "merged2": layer("merged"), "three": layer("three")}, runs)
    out["layer"] = {"ratio": _ratio_band(t["merged"], t["three"], rng), "aa": _ratio_band(t["merged2"], t["merged"], rng),
                    "ms_merged": 200 * float(np.median(t["merged"])), "ms_three": 200 * float(np.median(t["three"]))}
    model = build_emformer(cfg, seed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    xb = torch.randn(cfg.batch, 4, *cfg.grid, generator=gen)
    yb = torch.randn(cfg.batch, 4, *cfg.grid, generator=gen)

    def step(mode):
        def f():
            model.set_conv_mode(mode)
            loss = (model(xb) - yb).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return f

    n_step = max(5, min(runs, 100))
    t = _interleaved({"merged": step("merged"), "merged2": step("merged"), "three": step("three")}, n_step)
    out["step"] = {"ratio": _ratio_band(t["merged"], t["three"], rng), "aa": _ratio_band(t["merged2"], t["merged"], rng),
                   "ms_merged": 1e3 * float(np.median(t["merged"])), "ms_three": 1e3 * float(np.median(t["three"]))}
    out["runs"], out["runs_step"] = runs, n_step
    return out


def merge_error(cfg: Config, seed: int = 0) -> dict:
    """C2a: max |merged − three-branch| / max |y| in float32 on the valley map, random weights (depthwise)."""
    from .layers import MultiScaleConv
    torch.manual_seed(seed)
    th, tw = cfg.grid[0] // cfg.patch // 2, cfg.grid[1] // cfg.patch // 2
    conv = MultiScaleConv(3 * cfg.dim)
    with torch.no_grad():
        for p in (conv.w1, conv.w3, conv.w5):
            p.normal_()
        x = torch.randn(16, 3 * cfg.dim, th, tw)
        conv.mode = "merged"
        a = conv(x)
        conv.mode = "three"
        b = conv(x)
    return {"max_abs": float((a - b).abs().max()), "max_y": float(b.abs().max())}


# ----------------------------------------------------------------------------- the experiment

@dataclass
class Experiment:
    cfg: Config
    ds: D.Dataset
    n_params: dict = field(default_factory=dict)
    scores: dict = field(default_factory=dict)          # model -> list over seeds of score dicts
    val_rmse: dict = field(default_factory=dict)        # model -> per seed lead-4 validation h-RMSE
    histories: dict = field(default_factory=dict)       # (model, seed) -> History
    alpha: list = field(default_factory=list)           # damping factors per seed (by lead)
    refs: dict = field(default_factory=dict)            # persistence / climatology / twin scores
    example: dict = field(default_factory=dict)         # seed-0 h fields of one test case for the figure
    memory: dict = field(default_factory=dict)          # kind -> {K: bytes}
    sources: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    ft_seconds: dict = field(default_factory=dict)      # fine-tuning kind -> per seed wall seconds (C4b's compute)
    thr: float = 0.0

    def metric(self, model: str, key: str, lead: int | None = None) -> np.ndarray:
        """Per-seed values of a score (``lead`` 1-based for the by-lead scores)."""
        vals = [s[key] for s in self.scores[model]]
        if lead is not None:
            vals = [v[lead - 1] for v in vals]
        return np.asarray(vals, float)


def run_experiment(cfg: Config, progress=print) -> Experiment:
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    sw = sw_config(cfg)
    ds = D.make_dataset(sw, cfg.n_traj, cfg.frames_per_traj, cfg.spinup_frames, cfg.seed, cfg.eval_leads,
                        cfg.ic_stride)
    exp = Experiment(cfg, ds)
    exp.seconds["data"] = time.perf_counter() - t0
    progress(f"data: {cfg.n_traj} trajectories in {exp.seconds['data']:.1f} s")
    w_lat = M.lat_weights(ds.lat)
    L = cfg.eval_leads
    exp.thr = float(np.quantile(ds.train[:, :, 0], 0.95))
    x0, y = D.truth(ds.test, ds.test_ic, L)
    xv, yv = D.truth(ds.val, ds.val_ic, L)
    lv = min(4, L)
    # skill floors and the perfect-model twin (reported beside control K2; it no longer decides it)
    exp.refs["persistence"] = scores(np.repeat(x0[:, None], L, 1), y, w_lat, exp.thr, cfg.csi_lead)
    exp.refs["climatology"] = scores(np.zeros_like(y), y, w_lat, exp.thr, cfg.csi_lead)
    t = time.perf_counter()
    exp.refs["twin"] = scores(D.twin_forecast(ds, L, seed=10_000 + cfg.seed), y, w_lat, exp.thr, cfg.csi_lead)
    exp.seconds["twin"] = time.perf_counter() - t
    for m in (*MODELS, "damped"):
        exp.scores[m] = []
    exp.val_rmse = {m: [] for m in ("emformer", "accumulative", "bptt", "continued")}
    exp.ft_seconds = {m: [] for m in ("accumulative", "bptt", "continued")}
    tp = tf = tr = 0.0
    for s in range(cfg.n_seeds):
        ms = model_seed(cfg, s)
        models = {}
        t = time.perf_counter()
        for kind in ("emformer", "emformer_w0", "emformer_mse", "vit"):
            model, loss, hist, src = load_or_pretrain(cfg, kind, ms, ds)
            models[kind] = model
            exp.histories[(kind, s)] = hist
            exp.sources[(kind, s)] = src
            if kind == "emformer":
                base_loss = loss
        tp += time.perf_counter() - t
        t = time.perf_counter()
        ft_loss = copy.deepcopy(base_loss).requires_grad_(False)
        K, it = cfg.rollout_K, cfg.finetune_iters
        for kind in ("accumulative", "bptt", "continued"):
            tk = time.perf_counter()
            m = copy.deepcopy(models["emformer"])
            lr, fl = cfg.lr_finetune, cfg.lr_finetune_floor
            fn = {"accumulative": lambda: finetune_accumulative(m, ft_loss, ds.train, K, it, cfg.batch, lr, ms + 7,
                                                                floor=fl),
                  "bptt": lambda: finetune_bptt(m, ft_loss, ds.train, K, it, cfg.batch, lr, ms + 7, floor=fl),
                  "continued": lambda: continue_one_step(m, ft_loss, ds.train, it * K, cfg.batch, lr, ms + 7,
                                                         floor=fl)}[kind]
            exp.histories[(kind, s)] = fn()
            exp.ft_seconds[kind].append(time.perf_counter() - tk)
            models[kind] = m
        tf += time.perf_counter() - t
        t = time.perf_counter()
        for kind in MODELS:
            for c in getattr(models[kind], "convs", lambda: [])():
                c.freeze()                                   # inference path: kernel merged once
            pred = rollout(models[kind], x0, L)
            exp.scores[kind].append(scores(pred, y, w_lat, exp.thr, cfg.csi_lead))
            if kind in exp.val_rmse:
                pv = rollout(models[kind], xv, L if kind == "emformer" else lv)
                exp.val_rmse[kind].append(M.weighted_rmse(pv[:, lv - 1, 0], yv[:, lv - 1, 0], w_lat))
                if kind == "emformer":
                    alpha = M.damping_factors(pv[:, :, 0], yv[:, :, 0], w_lat)
                    exp.alpha.append(alpha)
                    exp.scores["damped"].append(scores(pred * alpha[None, :, None, None, None], y, w_lat, exp.thr,
                                                       cfg.csi_lead))
            if s == 0:
                exp.example[kind] = pred[0, :, 0].copy()
        tr += time.perf_counter() - t
        if s == 0:
            exp.example["truth"] = y[0, :, 0].copy()
            exp.n_params = {"emformer": n_params(models["emformer"]), "vit": n_params(models["vit"]),
                            "vit_depth": vit_depth(cfg)}
            xb, yb = sample_batch(ds.train, cfg.batch, max(cfg.K_sweep), np.random.default_rng(ms + 99))
            for kind in ("accumulative", "bptt"):
                exp.memory[kind] = {int(k): saved_bytes(models["emformer"], ft_loss, xb, yb[:, :k], kind)
                                    for k in cfg.K_sweep}
        progress(f"seed {s + 1}/{cfg.n_seeds}: lead-1 h-RMSE EMFormer {exp.scores['emformer'][-1]['rmse'][0]:.3f}, "
                 f"ViT {exp.scores['vit'][-1]['rmse'][0]:.3f} ({time.perf_counter() - t0:.0f} s)")
    exp.seconds.update(pretrain=tp, finetune=tf, rollouts=tr)
    if cfg.run_ablations:
        t = time.perf_counter()
        for kind in ("noconv", "fixed", "scheduled"):
            model, loss, hist, src = load_or_pretrain(cfg, kind, model_seed(cfg, 0), ds)
            exp.histories[(kind, 0)] = hist
            exp.scores[kind] = [scores(rollout(model, x0, L), y, w_lat, exp.thr, cfg.csi_lead)]
        exp.seconds["ablations"] = time.perf_counter() - t
    return exp
