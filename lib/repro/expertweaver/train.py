"""Dense pre-training (cached), held-out evaluation, and continued training of a converted MoE (downcycling).

The dense checkpoint goes to ``data/cache/expertweaver/dense-<hash>.pt``; the hash covers every config field that
shapes training, the corpus hash, the torch version and the source of this module, ``model`` and ``data``, so a
change to any of them retrains. It is written through a temporary file renamed into place.
"""
from __future__ import annotations

import copy
import hashlib
import inspect
import math
import time
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from repro.common.paths import cache_dir

from . import data as _data_mod
from . import model as _model_mod
from .data import DOMAINS, Corpora, mixed_batch
from .model import GPT, Routing, build_model, lm_loss

DENSE_FIELDS = ("n_layers", "d_model", "d_ff", "context", "train_steps", "batch_size", "lr", "weight_decay", "seed")


def train_dense(model: GPT, corpora: Corpora, cfg, log_every: int = 25) -> dict[str, Any]:
    """``cfg.train_steps`` AdamW steps (linear warm-up over 5 %, cosine to 10 % of ``cfg.lr``, grad-clip 1) on
    the 45/35/20 % domain mix; returns the loss history."""
    rng = np.random.default_rng([cfg.seed, 5, 0xD15E])
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "emb" not in n and "pos" not in n]
    other = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "emb" not in n and "pos" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": other, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
    warm = max(1, cfg.train_steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * (
        0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, s / cfg.train_steps)))))
    hist: dict[str, list] = {"step": [], "loss": []}
    t0 = time.perf_counter()
    model.train()
    for step in range(cfg.train_steps):
        loss = lm_loss(model, torch.from_numpy(mixed_batch(corpora, cfg.batch_size, cfg.context, rng)))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0 or step == cfg.train_steps - 1:
            hist["step"].append(step + 1)
            hist["loss"].append(float(loss.detach()))
    model.eval()
    hist["seconds"] = time.perf_counter() - t0
    return hist


def dense_key(cfg, corpora: Corpora) -> str:
    h = hashlib.sha256()
    h.update(repr({f: getattr(cfg, f) for f in DENSE_FIELDS}).encode())
    h.update(corpora.sha256.encode())
    for mod in (_model_mod, _data_mod):
        h.update(inspect.getsource(mod).encode())
    h.update(inspect.getsource(train_dense).encode())
    h.update(torch.__version__.encode())
    return h.hexdigest()[:16]


def load_or_train_dense(cfg, corpora: Corpora) -> tuple[GPT, dict[str, Any]]:
    """The dense model: from the cache when ``cfg.use_cached_base`` and present, else trained (and then cached)."""
    path = cache_dir(cfg.slug) / f"dense-{dense_key(cfg, corpora)}.pt"
    torch.manual_seed(cfg.seed)
    model = build_model(cfg)
    if cfg.use_cached_base and path.exists():
        blob = torch.load(path, weights_only=True)
        model.load_state_dict(blob["state"])
        model.eval()
        return model, {**blob["history"], "source": f"cache ({path.name})"}
    hist = train_dense(model, corpora, cfg)
    if cfg.use_cached_base:
        tmp = path.with_suffix(f".tmp{np.random.default_rng().integers(1 << 30)}")
        torch.save({"state": model.state_dict(), "history": hist}, tmp)
        tmp.replace(path)
    return model, {**hist, "source": "trained in this run"}


@torch.no_grad()
def evaluate_loss(model: GPT, heldout: dict[str, np.ndarray], chunk: int = 64, count_active: bool = False
                  ) -> dict[str, Any]:
    """Mean next-byte loss (nats/byte) per domain and their mean; with ``count_active``, the per-token active-neuron
    counts of every layer (a forward hook: min, max and mean over all held-out tokens)."""
    model.eval()
    counts: list[list] = [[] for _ in model.mlps]
    if count_active:
        for mlp, c in zip(model.mlps, counts):
            mlp.count_active = c
    out: dict[str, Any] = {}
    try:
        for d in DOMAINS:
            rows = heldout[d]
            tot = 0.0
            for s in range(0, len(rows), chunk):
                r = torch.from_numpy(rows[s:s + chunk])
                tot += float(lm_loss(model, r)) * len(r)
            out[d] = tot / len(rows)
    finally:
        for mlp in model.mlps:
            mlp.count_active = None
    out["mean"] = float(np.mean([out[d] for d in DOMAINS]))
    if count_active:
        out["active"] = [(int(torch.cat(c).min()), int(torch.cat(c).max()), float(torch.cat(c).float().mean()))
                         for c in counts]
    return out


@torch.no_grad()
def max_logit_diff(a: GPT, b: GPT, rows: np.ndarray) -> float:
    """Largest |logit difference| of two models on ``rows`` [n, T]."""
    x = torch.from_numpy(rows[:, :-1])
    return float((a(x) - b(x)).abs().max())


def converted(model: GPT, routings: list[Routing | None]) -> GPT:
    """A shallow copy of ``model`` (shared weights) whose MLPs use ``routings``."""
    m = copy.deepcopy(model)
    return m.set_routing(routings)


def learned_router_init(w_g: torch.Tensor, reps: torch.Tensor) -> nn.Linear:
    """Card Method 5 (downcycling): a linear router with W_r[e] = mean of expert e's representative gate vectors."""
    lin = nn.Linear(w_g.shape[1], reps.shape[0], bias=False)
    with torch.no_grad():
        lin.weight.copy_(w_g.detach()[reps].mean(1))
    return lin


def downcycle(model: GPT, routings: list[Routing], corpora: Corpora, val: dict[str, np.ndarray], steps: int,
              lr: float, warmup: int, lb_coef: float, batch: int, seq_len: int, eval_every: int, data_seed: int
              ) -> dict[str, list]:
    """Continued training of a sparse MoE initialised from ``model`` with the partitions of ``routings`` (learned
    linear routers, outputs scaled by k·p_e, load-balancing loss): a fresh AdamW with a linear ``warmup``, the same
    data order for every init (``data_seed``). Returns the mean held-out loss at every ``eval_every`` steps,
    step 0 included."""
    m = copy.deepcopy(model)
    rs = []
    for mlp, r in zip(m.mlps, routings):
        rs.append(Routing("learned", r.shared, r.expert_of, r.n_experts, r.top_k,
                          router=learned_router_init(mlp.w_g.weight, r.reps)))
    m.set_routing(rs)
    params = list(m.parameters()) + [p for r in rs for p in r.router.parameters()]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, warmup)))
    rng = np.random.default_rng([data_seed, 0xDC])
    hist: dict[str, list] = {"step": [], "val": [], "lb": []}
    for step in range(steps + 1):
        if step % eval_every == 0:
            hist["step"].append(step)
            hist["val"].append(evaluate_loss(m, val)["mean"])
        if step == steps:
            break
        m.train()
        loss = lm_loss(m, torch.from_numpy(mixed_batch(corpora, batch, seq_len, rng)))
        aux = sum(mlp.aux_loss for mlp in m.mlps) / len(m.mlps)
        opt.zero_grad(set_to_none=True)
        (loss + lb_coef * aux).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        if step % eval_every == 0:
            hist["lb"].append(float(aux.detach()))
    return hist
