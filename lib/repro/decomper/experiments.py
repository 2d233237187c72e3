"""The chapter's experiment: every decomposition × ratio × compensation variant, the headline cell's extras
(more calibration seeds, 1,024 test windows, drift profiles, the probe, the adam variant, the global re-fit
baseline, parameters and latency) and the pure-carry check of the drift metric (control K4).

Randomness: calibration set c of master seed s is drawn with ``numpy.random.default_rng([s, 100 + c])``; every
model is evaluated on the same test windows (evenly spaced, deterministic) and the same probe items, so all
comparisons are paired by window or by item.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
import torch

from .compensate import decomper, global_refit
from .data import batches, closing_probe, eval_windows, unigram_entropy
from .decompose import block_params, compress_model, fisher_rows
from .metrics import drift_profile, latency, param_count, probe_correct, test_loss
from .model import LlamaLM, clone


def calib_windows(cfg, calib_data: np.ndarray, c: int) -> torch.Tensor:
    """Calibration set ``c`` of the master seed: ``n_calib`` random windows of the calibration split."""
    return batches(calib_data, cfg.seq_len, cfg.n_calib, np.random.default_rng([cfg.seed, 100 + c]))


@dataclass
class Experiment:
    """Everything the notebook tables, plots and verdicts read."""

    unigram: float
    dense_loss: np.ndarray                      # per test window
    dense_loss_h: np.ndarray                    # per headline test window
    losses: dict = field(default_factory=dict)  # (method, ratio, calib seed, variant) -> per-window test loss
    losses_h: dict = field(default_factory=dict)     # (calib seed, variant) -> per-window loss, headline cell
    calib: dict = field(default_factory=dict)   # headline cell, calib seed 0: in-sample numbers (K2)
    drift: dict = field(default_factory=dict)   # "none"/"refit" (test), "none_cal"/"refit_cal" -> drift_profile
    probe: dict = field(default_factory=dict)   # model -> per-item correctness
    probe_calib: dict = field(default_factory=dict)   # (calib seed, "none"/"refit") -> per-item correctness (C3)
    probe_counts: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    block_params: dict = field(default_factory=dict)
    latency: dict = field(default_factory=dict)
    carry: dict = field(default_factory=dict)   # K4
    hist: dict = field(default_factory=dict)    # channel outputs for the histogram
    seconds: dict = field(default_factory=dict)

    def loss(self, method, ratio, variant, c=0) -> np.ndarray:
        return self.losses[(method, ratio, c, variant)]

    def table(self) -> pd.DataFrame:
        """Mean test loss per cell and variant, with the gap to dense and the gap reduction (calib seed 0)."""
        rows = []
        dense = float(self.dense_loss.mean())
        for (m, r, c, v), x in self.losses.items():
            if c:
                continue
            none = float(self.losses[(m, r, c, "none")].mean())
            loss = float(x.mean())
            rows.append({"method": m, "ratio": r, "variant": v, "loss (nats/byte)": loss,
                         "bits/byte": loss / np.log(2), "gap": loss - dense,
                         "gap reduction": (none - loss) / (none - dense) if v != "none" else 0.0})
        return pd.DataFrame(rows)


def _headline(cfg, m, r):
    return m == "svdllm" and r == cfg.headline_ratio


def run_experiment(cfg, dense: LlamaLM, splits: dict, progress: Callable[[str], None] | None = None) -> Experiment:
    say = progress or (lambda s: None)
    t_start = time.perf_counter()
    W = eval_windows(splits["test"], cfg.seq_len, cfg.eval_windows)
    Wh = eval_windows(splits["test"], cfg.seq_len, cfg.headline_windows)
    exp = Experiment(unigram=unigram_entropy(splits["test"]), dense_loss=test_loss(dense, W),
                     dense_loss_h=test_loss(dense, Wh))
    keep = {}
    ctx, tgt, alt = closing_probe(splits["test"], cfg.probe_n, cfg.seq_len)
    for c in range(cfg.n_calib_seeds):
        cal = calib_windows(cfg, splits["calib"], c)
        x = cal[:, :-1]
        fisher = fisher_rows(dense, cal, cfg.fisher_batches) if "fwsvd" in cfg.methods and c == 0 else None
        for m in cfg.methods:
            for r in cfg.ratios:
                if c and not _headline(cfg, m, r):
                    continue
                t0 = time.perf_counter()
                none = compress_model(dense, m, r, x, fisher=fisher, alpha=cfg.asvd_alpha)
                models = {"none": none, **{v: decomper(none, dense, x, v, lam=cfg.ridge) for v in cfg.variants}}
                for v, mod in models.items():
                    exp.losses[(m, r, c, v)] = test_loss(mod, W)
                if _headline(cfg, m, r):
                    for v, mod in models.items():
                        exp.losses_h[(c, v)] = test_loss(mod, Wh)
                    for v in ("none", "refit"):          # C3 over the calibration draws
                        exp.probe_calib[(c, v)] = probe_correct(models[v], ctx, tgt, alt)
                    if c == 0:
                        keep = models
                        keep["cal"] = cal
                say(f"calib seed {c} · {m} at {r:.0%}: {time.perf_counter() - t0:.1f} s")
    exp.seconds["cells"] = time.perf_counter() - t_start

    # ---------------------------------------------------------------- headline cell, calibration seed 0
    t0 = time.perf_counter()
    cal = keep.pop("cal")
    x = cal[:, :-1]
    none, refit = keep["none"], keep["refit"]
    adam = decomper(none, dense, x, "adam", steps=cfg.comp_steps, mu=cfg.moment_weight)
    glob = global_refit(none, dense, x, steps=cfg.global_steps)
    for v, mod in (("adam", adam), ("global refit", glob)):
        exp.losses_h[(0, v)] = test_loss(mod, Wh)
    exp.seconds["adam + global"] = time.perf_counter() - t0
    dense_cal = test_loss(dense, cal)
    exp.calib = {"dense": dense_cal, "none": test_loss(none, cal), "refit": test_loss(refit, cal)}
    xt = W[:, :-1]
    exp.drift = {"none": drift_profile(none, dense, xt), "refit": drift_profile(refit, dense, xt),
                 "none_cal": drift_profile(none, dense, x), "refit_cal": drift_profile(refit, dense, x)}
    # one channel of the last block's MLP-branch output, before and after compensation (test inputs)
    from .model import collect_block_io
    with torch.no_grad():
        outs = {k: collect_block_io(mod, xt)[2][-1] for k, mod in (("dense", dense), ("none", none),
                                                                       ("refit", refit))}
        ch = int((outs["none"] - outs["dense"]).pow(2).mean((0, 1)).argmax())
        exp.hist = {"channel": ch, **{k: o[..., ch].reshape(-1).numpy() for k, o in outs.items()}}
    # probe
    exp.probe_counts = {"items": int(len(tgt)), "per byte": int(len(tgt) // 4)}
    exp.probe = {"dense": probe_correct(dense, ctx, tgt, alt), "none": exp.probe_calib[(0, "none")],
                 **{v: exp.probe_calib[(0, v)] if v == "refit" else probe_correct(keep[v], ctx, tgt, alt)
                    for v in cfg.variants}}
    # parameters and latency
    models = {"dense": dense, "none": none, **{v: keep[v] for v in cfg.variants}}
    exp.params = {k: param_count(mod) for k, mod in models.items()}
    exp.block_params = {k: block_params(mod) for k, mod in models.items()}
    x1 = xt[:1]
    exp.latency = latency({**models, "none (A/A copy)": clone(none)}, x1, n=cfg.latency_runs)
    # K4: pure carry — residual branches of blocks 2..L zeroed, block 1 compressed only
    exp.carry = pure_carry(dense, x, xt, cfg)
    exp.seconds["headline extras"] = time.perf_counter() - t0
    return exp


@torch.no_grad()
def pure_carry(dense: LlamaLM, x_cal: torch.Tensor, x_test: torch.Tensor, cfg) -> dict:
    """Control K4: zero the output maps o and down of blocks 2..L (their residual branches vanish), compress block 1
    only (SVD-LLM at the headline ratio); then ĥ_L − h_L must equal ε_1 exactly."""
    carrier = clone(dense)
    for blk in carrier.blocks[1:]:
        blk.o.weight.zero_()
        blk.down.weight.zero_()
    comp = compress_model(carrier, "svdllm", cfg.headline_ratio, x_cal, blocks=[0])
    prof = drift_profile(comp, carrier, x_test)
    return {"ratio_to_delta1": float(prof["abs"][-1] / prof["local"][0]),
            "ratio_to_vec_sum": float(prof["abs"][-1] / prof["vec_sum_local"][-1]),
            "delta_1": float(prof["local"][0]), "abs_L": float(prof["abs"][-1])}
