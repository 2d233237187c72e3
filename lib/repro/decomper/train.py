"""Training of the dense byte-level model on the stdlib corpus, cached by config (card, "Model").

AdamW (lr 3e-3, weight decay 0.1 on matrices, β = (0.9, 0.95)), linear warm-up over the first 5 % of steps then
cosine decay to 10 % of the peak, batch 32 windows of 64 bytes, gradient clipping at 1. The checkpoint goes to
``data/cache/decomper/base-<hash>.pt``; the hash covers the config fields that shape training, the corpus hash,
the source of ``model`` and of this module, and the torch version, so any change retrains. Written through a
temporary file renamed into place.
"""
from __future__ import annotations

import dataclasses
import hashlib
import inspect
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from repro.common.paths import cache_dir

from . import model as _model_mod
from .data import batches
from .model import LlamaLM, build_model, lm_loss

TRAIN_FIELDS = ("n_layers", "d_model", "n_heads", "d_ff", "seq_len", "train_steps", "batch_size", "lr",
                "weight_decay", "split_seed")


def train_base(model: LlamaLM, cfg, train_data: np.ndarray) -> dict:
    """Train ``model`` in place for ``cfg.train_steps`` steps; returns the loss history (every 10 steps)."""
    rng = np.random.default_rng([cfg.seed, 1])
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and n != "pos"]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and n != "pos")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
    warm = max(1, int(0.05 * cfg.train_steps))

    def lr_at(s: int) -> float:
        if s < warm:
            return cfg.lr * (s + 1) / warm
        p = (s - warm) / max(1, cfg.train_steps - warm)
        return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))

    hist = {"step": [], "loss": []}
    t0 = time.perf_counter()
    model.train()
    for s in range(cfg.train_steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        loss = lm_loss(model, batches(train_data, cfg.seq_len, cfg.batch_size, rng))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if s % 10 == 0 or s == cfg.train_steps - 1:
            hist["step"].append(s + 1)
            hist["loss"].append(float(loss.detach()))
    model.eval()
    hist["seconds"] = time.perf_counter() - t0
    return hist


def base_key(cfg, corpus_sha: str, train_sha: str = "") -> str:
    """The cache key of the dense model: training fields, resolved seeds, corpus hash, the hash of the train split's
    bytes (``train_sha``; so a change of the split rule retrains), the model and training code, torch's version."""
    h = hashlib.sha256()
    # the dense model's seed and the split's are the resolved ones (``base_seed``/``split_seed``, else the master seed)
    fields = {f: getattr(cfg, f) for f in TRAIN_FIELDS} | {"split_seed": cfg.data_split_seed}
    h.update(repr({**fields, "seed": cfg.dense_seed}).encode())
    h.update(corpus_sha.encode())
    h.update(train_sha.encode())
    h.update(inspect.getsource(_model_mod).encode())
    h.update(inspect.getsource(train_base).encode())
    h.update(torch.__version__.encode())
    return h.hexdigest()[:16]


def base_path(cfg, corpus_sha: str, train_sha: str = "") -> Path:
    return cache_dir(cfg.slug) / f"base-{base_key(cfg, corpus_sha, train_sha)}.pt"


def load_or_train_base(cfg, train_data: np.ndarray, corpus_sha: str) -> tuple[LlamaLM, dict]:
    """The dense model of ``cfg``: from the cache when ``cfg.use_cached_base`` and present, else trained (and, with
    ``use_cached_base``, saved atomically). ``info["source"]`` says which."""
    path = base_path(cfg, corpus_sha, hashlib.sha256(np.ascontiguousarray(train_data).tobytes()).hexdigest())
    torch.manual_seed(cfg.dense_seed)
    model = build_model(cfg)
    if cfg.use_cached_base and path.exists():
        blob = torch.load(path, weights_only=True)
        model.load_state_dict(blob["state"])
        model.eval()
        return model, {**blob["history"], "source": f"cache ({path.name})"}
    hist = train_base(model, dataclasses.replace(cfg, seed=cfg.dense_seed), train_data)   # batches from dense_seed
    if cfg.use_cached_base:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        torch.save({"state": model.state_dict(), "history": hist}, tmp)
        os.replace(tmp, path)
    return model, {**hist, "source": "trained in this run"}
