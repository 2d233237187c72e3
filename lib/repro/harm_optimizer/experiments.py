"""Training runs and measurements of chapter 09.

``train_run`` trains one model with one optimizer on one dataset and measures, every ``harm_every``-th step,
the harm of the step on its own batch (re-evaluated after the update), the full-network update norm and the
QP's statistics; at given checkpoint steps it also computes full per-sample gradients (C2, K1, K3). Every
optimizer of a seed starts from the same initial weights and sees the same batches (common random numbers).
The experiment functions below call it for the chapter's comparisons.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from . import diagnostics as dg
from . import qp
from .config import Config
from .data import Split, interpolate_length, load
from .models import CNN1D, MLP, build_model
from .optim import _errors as output_errors, make_optimizer, per_sample_grads

WARMUP_FRAC = 0.1   # harm averages skip the first 10 % of training (card, C1)


def run_seed(cfg: Config, s: int) -> int:
    """The integer seed of the s-th training seed of master seed ``cfg.seed`` (init and batch order)."""
    return 1000 * int(cfg.seed) + int(s)


@dataclass
class RunResult:
    dataset: str
    optimizer: str
    seed: int
    lr: float
    steps: int
    variant: str = "main"
    harm_step: list = field(default_factory=list)
    frac_harmed: list = field(default_factory=list)
    mean_pos: list = field(default_factory=list)
    upd_norm: list = field(default_factory=list)
    step_ms: list = field(default_factory=list)
    alpha_nonzero: list = field(default_factory=list)
    alpha_mean: list = field(default_factory=list)
    cap_bound: int = 0
    clipped: int = 0
    viol_before: int = 0
    viol_after: int = 0
    test_acc: float = float("nan")
    train_loss: float = float("nan")
    diverged: bool = False
    checkpoints: list = field(default_factory=list)

    def late(self, key: str) -> float:
        """Mean of a measured series over the steps after the first 10 % of training."""
        s, v = np.asarray(self.harm_step), np.asarray(getattr(self, key), float)
        keep = s >= WARMUP_FRAC * self.steps
        return float(v[keep].mean()) if keep.any() else float("nan")

    def summary(self) -> dict:
        return {"dataset": self.dataset, "optimizer": self.optimizer, "variant": self.variant, "seed": self.seed,
                "lr": self.lr, "steps": self.steps, "frac_harmed": self.late("frac_harmed"),
                "mean_pos_inc": self.late("mean_pos"), "test_acc": self.test_acc, "train_loss": self.train_loss,
                "upd_norm_median": float(np.median(self.upd_norm)) if self.upd_norm else float("nan"),
                "step_ms_median": float(np.median(self.step_ms)) if self.step_ms else float("nan"),
                "alpha_nonzero": float(np.mean(self.alpha_nonzero)) if self.alpha_nonzero else float("nan"),
                "cap_bound_frac": self.cap_bound / self.steps if self.alpha_nonzero else float("nan"),
                "clip_frac": self.clipped / max(len(self.step_ms), 1),
                "viol_before": self.viol_before, "viol_after": self.viol_after, "diverged": self.diverged,
                "harm_late": self.late_series("frac_harmed")}

    def late_series(self, key: str) -> list[float]:
        """A measured series over the steps after the first 10 % of training (the items of C3's bootstrap)."""
        s, v = np.asarray(self.harm_step), np.asarray(getattr(self, key), float)
        return v[s >= WARMUP_FRAC * self.steps].tolist()


def cosine_lr(lr: float, t: int, total: int) -> float:
    return lr * 0.5 * (1.0 + math.cos(math.pi * t / max(total, 1)))


def batch_stream(n: int, batch: int, steps: int, seed: int):
    """Indices of ``steps`` batches: a fresh permutation per epoch from a seeded ``torch.Generator`` (the
    last incomplete batch of an epoch is dropped)."""
    g = torch.Generator().manual_seed(int(seed) + 7_777)
    per_epoch = n // batch
    t = 0
    while t < steps:
        perm = torch.randperm(n, generator=g)
        for k in range(per_epoch):
            if t >= steps:
                return
            yield perm[k * batch:(k + 1) * batch]
            t += 1


@torch.no_grad()
def evaluate(model, x, y, chunk: int = 2048) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) on a whole set."""
    correct, loss = 0, 0.0
    for i in range(0, len(y), chunk):
        out = model(x[i:i + chunk])
        correct += int((out.argmax(1) == y[i:i + chunk]).sum())
        loss += float(F.cross_entropy(out, y[i:i + chunk], reduction="sum"))
    return correct / len(y), loss / len(y)


def hparams(cfg: Config, dataset: str, opt: str, lrs: dict | None = None) -> dict:
    base = opt.replace("harm_", "")
    lr = (lrs or {}).get((dataset, opt)) or getattr(cfg, f"lr_{base}_{dataset}")
    return {"lr": lr, "momentum": cfg.momentum, "clip": cfg.clip_norm,
            "weight_decay": cfg.wd_sgdm if base == "sgdm" else cfg.wd_adamw}


def harm_kwargs(cfg: Config, **over) -> dict:
    kw = dict(qp_iters=cfg.qp_iters, cap=cfg.correction_cap, correction_in_state=cfg.correction_in_state)
    kw.update(over)
    return kw


def train_run(split: Split, opt_name: str, seed: int, steps: int, hp: dict, batch: int, harm_every: int,
              harm_kw: dict | None = None, checkpoint_steps=(), model=None, x_train=None, x_test=None,
              variant: str = "main", evaluate_end: bool = True, model_kw: dict | None = None) -> RunResult:
    """Train from ``build_model(split.name, seed, **model_kw)`` for ``steps`` steps of cosine-scheduled
    ``opt_name``."""
    xtr = split.x_train if x_train is None else x_train
    xte = split.x_test if x_test is None else x_test
    model = build_model(split.name, seed, **(model_kw or {})) if model is None else model
    opt = make_optimizer(opt_name, model, hp, **(harm_kw or {}) if opt_name.startswith("harm_") else {})
    res = RunResult(split.name, opt_name, seed, hp["lr"], steps, variant)
    cps = set(int(c) for c in checkpoint_steps)
    params = list(model.parameters())
    for t, idx in enumerate(batch_stream(len(split.y_train), batch, steps, seed)):
        x, y = xtr[idx], split.y_train[idx]
        measure = (t % harm_every == 0) or t in cps
        if measure:
            theta_old = torch.cat([p.detach().reshape(-1) for p in params]).clone()
        if t in cps:
            # full per-sample gradients in float64 (a float64 copy of the model): late in training the float32
            # Gram of well-fit samples carries rounding of ~1e-5 relative; K3 checks this G against autograd
            G = per_sample_grads(copy.deepcopy(model).double(), x.double(), y)
            gram_err = dg.autograd_gram_error(model, x, y, G)
            with torch.no_grad():
                h = model.features(x)
                e = output_errors(model.head(h), y)          # float64, stable (optim._errors)
                hb = qp.with_bias(h).double()
        t0 = time.thread_time()
        info = opt.step_batch(x, y, cosine_lr(hp["lr"], t, steps))
        res.step_ms.append(1e3 * (time.thread_time() - t0))
        res.clipped += int(info.extra.get("clipped", False))
        if not torch.isfinite(info.losses).all():
            res.diverged = True
            break
        if info.alpha is not None:
            res.alpha_nonzero.append(float((info.alpha > 0).double().mean()))
            res.alpha_mean.append(float(info.alpha.mean()))
            res.cap_bound += int(info.cap_bound)
            res.viol_before += info.viol_before
            res.viol_after += info.viol_after
        if measure:
            with torch.no_grad():
                after = F.cross_entropy(model(x), y, reduction="none")
                theta_new = torch.cat([p.detach().reshape(-1) for p in params])
            fh, mp = dg.harm_stats(info.losses, after)
            res.harm_step.append(t)
            res.frac_harmed.append(fh)
            res.mean_pos.append(mp)
            res.upd_norm.append(float(torch.linalg.vector_norm(theta_new - theta_old)))
            if t in cps:
                rep = dg.gram_report(G, e, hb, y)
                rep["first_order_agree"] = dg.first_order_agreement(G, theta_old - theta_new, after - info.losses)
                rep["gram_exact_err"] = gram_err
                rep["step"] = t
                res.checkpoints.append(rep)
    if res.diverged:
        res.test_acc, res.train_loss = 1.0 / split.n_classes, float("nan")
    elif evaluate_end:
        res.test_acc, _ = evaluate(model, xte, split.y_test)
        _, res.train_loss = evaluate(model, xtr, split.y_train)
    return res


def model_kw(cfg: Config) -> dict:
    return {"width": cfg.width, "channels": cfg.channels, "cnn_head": cfg.cnn_head}


def seeds_for(cfg: Config, dataset: str) -> int:
    """Training seeds of the main runs on ``dataset``: ``n_seeds``, or ``n_seeds_mnist1d`` on MNIST-1D (K4a:
    the seeds that resolve a one-point paired accuracy difference there)."""
    return cfg.n_seeds_mnist1d if (dataset == "mnist1d" and cfg.n_seeds_mnist1d) else cfg.n_seeds


def steps_for(cfg: Config, split: Split) -> int:
    return cfg.epochs(split.name) * (len(split.y_train) // cfg.batch_size)


def checkpoint_steps(cfg: Config, steps: int) -> list[int]:
    """``gram_checkpoints`` steps evenly spaced over the run, the first after 10 % of it."""
    k = cfg.gram_checkpoints
    return sorted({int(round(steps * (0.1 + 0.85 * i / max(k - 1, 1)))) for i in range(k)}) if k > 1 else [steps // 2]


# ----------------------------------------------------------------------------- the experiments

def lr_grid(cfg: Config, split: Split) -> tuple[dict, pd.DataFrame]:
    """The card's risk note: MNIST-1D baselines under-train at the card's lrs. Each grid lr trains the baseline
    X once (first seed) on 80 % of the training set and is scored on the held-out 20 %; X and Harm-X then both
    use X's best lr (the card's *Baselines*: the same hyper-parameters). Harm-X is not tuned on its own: a single
    seed's validation score picked lr 0.2 for Harm-SGDM on the CNN, where SGDM itself diverges, and there
    Harm-SGDM collapsed in 3 of 5 seeds; a step of different length is K2's business (X re-run at lr × the
    update-norm ratio). Returns ({(dataset, opt): lr}, table)."""
    n = len(split.y_train)
    nv = n // 5
    g = torch.Generator().manual_seed(run_seed(cfg, 0) + 99)
    perm = torch.randperm(n, generator=g)
    tr, va = perm[nv:], perm[:nv]
    sub = Split(split.name, split.x_train[tr], split.y_train[tr], split.x_train[va], split.y_train[va])
    steps = cfg.epochs(split.name) * (len(tr) // cfg.batch_size)
    rows, chosen = [], {}
    for base, grid in (("sgdm", cfg.lr_grid_sgdm), ("adamw", cfg.lr_grid_adamw)):
        if base not in cfg.pairs or not grid:
            continue
        for lr in grid:
            hp = hparams(cfg, split.name, base)
            hp["lr"] = lr
            r = train_run(sub, base, run_seed(cfg, 0), steps, hp, cfg.batch_size, harm_every=10 ** 9,
                          model_kw=model_kw(cfg))
            rows.append({"dataset": split.name, "optimizer": base, "lr": lr, "val_acc": r.test_acc,
                         "train_loss": r.train_loss})
        best = max((r for r in rows if r["optimizer"] == base), key=lambda r: (r["val_acc"], -r["lr"]))
        chosen[(split.name, base)] = chosen[(split.name, f"harm_{base}")] = best["lr"]
    return chosen, pd.DataFrame(rows)


def main_runs(cfg: Config, splits: dict[str, Split], lrs: dict) -> list[RunResult]:
    """Every dataset × seed × optimizer (``seeds_for(cfg, dataset)`` seeds); every baseline run carries the
    Gram checkpoints (C2, K1, K3), so their verdicts rest on training seeds, not on one run's checkpoints."""
    runs = []
    for name in cfg.datasets:
        sp = splits[name]
        steps = steps_for(cfg, sp)
        for s in range(seeds_for(cfg, name)):
            for opt in cfg.optimizers:
                cps = checkpoint_steps(cfg, steps) if not opt.startswith("harm_") else ()
                runs.append(train_run(sp, opt, run_seed(cfg, s), steps, hparams(cfg, name, opt, lrs),
                                      cfg.batch_size, cfg.harm_every, harm_kwargs(cfg), cps,
                                      model_kw=model_kw(cfg)))
    return runs


def exact_runs(cfg: Config, split: Split) -> list[RunResult]:
    """C3: SGDM, Harm-SGDM with the last-layer proxy and with the exact full-gradient QP, on identical
    ``exact_steps``-step runs (digits; same init, batches and schedule)."""
    runs = []
    hp = hparams(cfg, split.name, "sgdm")
    for s in range(cfg.exact_seeds):
        for opt, kw, var in (("sgdm", None, "short"), ("harm_sgdm", harm_kwargs(cfg), "proxy"),
                             ("harm_sgdm", harm_kwargs(cfg, mode="exact"), "exact")):
            runs.append(train_run(split, opt, run_seed(cfg, s), cfg.exact_steps, hp, cfg.batch_size,
                                  cfg.harm_every, kw, variant=var, model_kw=model_kw(cfg)))
    return runs


def extra_baselines(cfg: Config, splits: dict[str, Split], lrs: dict, steps_factor: float = 1.0,
                    lr_factor: dict | None = None, seeds: int = 3, variant: str = "") -> list[RunResult]:
    """Baseline X runs with ``steps_factor`` × the steps (compute-matched, the cosine schedule stretched) or
    with lr × ``lr_factor[(dataset, X)]`` (step-size-matched, K2)."""
    runs = []
    for name in cfg.datasets:
        sp = splits[name]
        for x in cfg.pairs:
            f = (lr_factor or {}).get((name, x), 1.0)
            if lr_factor is not None and (name, x) not in lr_factor:
                continue
            hp = hparams(cfg, name, x, lrs)
            hp["lr"] = hp["lr"] * f
            steps = int(round(steps_for(cfg, sp) * steps_factor))
            for s in range(seeds):
                runs.append(train_run(sp, x, run_seed(cfg, s), steps, hp, cfg.batch_size, cfg.harm_every,
                                      variant=variant, model_kw=model_kw(cfg)))
    return runs


def ablation_runs(cfg: Config, split: Split, lrs: dict) -> list[RunResult]:
    """Harm-SGDM with the correction fed into the momentum buffer (the card's first design), first seed."""
    return [train_run(split, "harm_sgdm", run_seed(cfg, 0), steps_for(cfg, split),
                      hparams(cfg, split.name, "harm_sgdm", lrs), cfg.batch_size, cfg.harm_every,
                      harm_kwargs(cfg, correction_in_state=True), variant="in_state", model_kw=model_kw(cfg))]


def summary_frame(runs: list[RunResult]) -> pd.DataFrame:
    return pd.DataFrame([r.summary() for r in runs])


def checkpoint_frame(runs: list[RunResult]) -> pd.DataFrame:
    rows = []
    for r in runs:
        for c in r.checkpoints:
            rows.append({"dataset": r.dataset, "optimizer": r.optimizer, "seed": r.seed, **c})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- C5: overhead

TIMED = (("sgdm", {}), ("harm_sgdm", {}), ("harm_sgdm_1bw", {"correction_in_state": True}),
         ("adamw", {}), ("harm_adamw", {}))


def _time_steps(make_model, opt_name: str, kw: dict, x, y, hp, n: int, seed: int) -> float:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = make_model()
    opt = make_optimizer(opt_name.replace("_1bw", ""), model, hp, **kw)
    ts = []
    for i in range(n + 3):
        t0 = time.thread_time()                 # CPU time of this thread: robust to other load on the machine
        opt.step_batch(x, y, hp["lr"] * 1e-3)   # tiny lr: timing only, the model barely moves
        if i >= 3:
            ts.append(time.thread_time() - t0)
    return float(np.median(ts))


def timing_sweep(cfg: Config, splits: dict[str, Split]) -> pd.DataFrame:
    """Median CPU ms per step (``time.thread_time``, one thread) of each optimizer as the MLP width and the
    MNIST-1D input length grow (B fixed), in two interleaved repeats. Measurement forwards are not part of
    ``step_batch``. Gradient clipping is off here for every method (it adds one norm over the gradient, the
    same for X and Harm-X, and would give the in-state variant a second backward pass)."""
    rows = []
    dig = splits.get("digits") or load("digits")
    B = cfg.batch_size
    sweeps = [("width", w, (lambda w=w: MLP(64, w)), dig.x_train[:B], dig.y_train[:B], "digits")
              for w in cfg.widths]
    if cfg.lengths:
        m1 = splits.get("mnist1d") or load("mnist1d")
        for L in cfg.lengths:
            xl = interpolate_length(m1.x_train[:B], L)
            sweeps.append(("length", L, (lambda L=L: CNN1D(cfg.channels, length=L, head=cfg.cnn_head)), xl, m1.y_train[:B], "mnist1d"))
    for rep in range(2):
        for axis, val, mk, x, y, ds in sweeps:
            for name, kw in TIMED:
                base = name.replace("harm_", "").replace("_1bw", "")
                if base not in cfg.pairs:
                    continue
                hp = hparams(cfg, ds, base)
                hp["clip"] = 0.0        # timing only: keeps the one-backward in-state variant one backward
                kw2 = harm_kwargs(cfg, **kw) if name.startswith("harm") else {}
                ms = 1e3 * _time_steps(mk, name, kw2, x, y, hp, cfg.timing_steps, run_seed(cfg, 0))
                rows.append({"axis": axis, "size": val, "optimizer": name, "repeat": rep, "ms": ms})
    return pd.DataFrame(rows)


def overhead_table(timing: pd.DataFrame) -> pd.DataFrame:
    """Per axis, size and harm variant: ms of X and Harm-X (mean of the repeats' medians), the relative
    overhead Harm-X/X − 1, the absolute overhead, and whether the repeats agree within 10 %."""
    rows = []
    t = timing.pivot_table(index=["axis", "size", "optimizer"], columns="repeat", values="ms")
    for (axis, size, opt), r in t.iterrows():
        if not opt.startswith("harm"):
            continue
        base = opt.replace("harm_", "").replace("_1bw", "")
        b = t.loc[(axis, size, base)]
        hm, bm = float(r.mean()), float(b.mean())
        agree = bool(max(abs(r[0] - r[1]) / r.mean(), abs(b[0] - b[1]) / b.mean()) <= 0.10)
        rows.append({"axis": axis, "size": size, "harm": opt, "base_ms": bm, "harm_ms": hm,
                     "overhead": hm / bm - 1, "extra_ms": hm - bm, "repeats_agree": agree})
    return pd.DataFrame(rows)


def one_step_demo(cfg: Config) -> dict:
    """One step up close: the digits MLP at initialisation (first seed) and its first batch; SGDM's step and
    Harm-SGDM's step from the same state, with the last-layer QP's statistics."""
    import copy

    sp = load("digits")
    seed = run_seed(cfg, 0)
    idx = next(batch_stream(len(sp.y_train), cfg.batch_size, 1, seed))
    x, y = sp.x_train[idx], sp.y_train[idx]
    hp = hparams(cfg, "digits", "sgdm")
    out = {}
    for name in ("sgdm", "harm_sgdm"):
        model = build_model("digits", seed, **model_kw(cfg))
        opt = make_optimizer(name, model, hp, **(harm_kwargs(cfg) if name.startswith("harm") else {}))
        info = opt.step_batch(x, y, hp["lr"])
        with torch.no_grad():
            after = F.cross_entropy(model(x), y, reduction="none")
        out[f"harmed_{'harm' if name.startswith('harm') else 'sgdm'}"] = dg.harm_stats(info.losses, after)[0]
        if info.alpha is not None:
            out["viol_before"], out["viol_after"] = info.viol_before, info.viol_after
            out["alpha_nonzero"] = float((info.alpha > 0).double().mean())
            out["cap_bound"] = bool(info.cap_bound)
    out["batch"] = int(cfg.batch_size)
    return out


@torch.no_grad()
def init_feature_cosine(cfg: Config, split: Split, cnn_head: str) -> float:
    """Median cosine between the last-layer inputs h̄_i = [h_i, 1] of the first batch, at the first seed's
    initialisation: near 1, every last-layer per-sample gradient e_i h̄_iᵀ is ≈ e_i h̄ᵀ and the head sees
    nothing of a sample but e_i."""
    kw = {**model_kw(cfg), "cnn_head": cnn_head}
    model = build_model(split.name, run_seed(cfg, 0), **kw)
    idx = next(batch_stream(len(split.y_train), cfg.batch_size, 1, run_seed(cfg, 0)))
    hb = qp.with_bias(model.features(split.x_train[idx])).double()
    hn = hb / hb.norm(dim=1, keepdim=True)
    return float(np.median(dg.offdiag((hn @ hn.T).numpy())))
