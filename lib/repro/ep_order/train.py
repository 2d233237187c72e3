"""Training: the base model's pre-training (cached), the warm-up fine-tune and the instruction-tuning run in a
given order, logging what the chapter plots — loss, gradient norm and the cosine between the last block's
gradients of consecutive mini-batches (C5), all from the training gradients themselves.

Optimiser (card, *Setting*): AdamW, linear warm-up over min(20, ⌈10 % of the steps⌉) steps then cosine decay to 0,
gradient clipping at 1, the same for every ordering. Batches are consecutive chunks of the order; a last partial
batch of an epoch is dropped (so every ordering takes the same number of equal-size steps).
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import tempfile
import time
from typing import Callable, Sequence

import numpy as np
import torch

from repro.common.paths import cache_dir

from .model import Batch, CharGPT, sft_loss
from .tasks import make_dataset

#: the domains whose skill needs an attention circuit that reads the input letter by letter; the base model's
#: pre-training draw holds ``base_boost`` times as many of them (issue 46: with the other domains' share they were
#: still at their unigram floor after instruction tuning)
BOOSTED = ("copy", "reverse")

SLUG = "ep_order"
#: the files whose code decides the base model's weights (part of its cache key)
BASE_SOURCES = ("tasks.py", "model.py", "train.py")


def lr_at(step: int, total: int, lr: float) -> float:
    """Linear warm-up over min(20, ⌈total/10⌉) steps, then cosine decay to 0 at ``total``."""
    warm = max(1, min(20, math.ceil(total / 10)))
    if step < warm:
        return lr * (step + 1) / warm
    return lr * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


def _flat_grad(params: Sequence[torch.nn.Parameter]) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in params])


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(a @ b / (a.norm() * b.norm()).clamp_min(1e-20))


def steps_per_epoch(n: int, batch_size: int) -> int:
    """Updates in one epoch of ``n`` samples: ⌈n / batch_size⌉ (the last batch may be partial)."""
    return -(-int(n) // int(batch_size))


def batches_of(orders: Sequence[np.ndarray], batch_size: int) -> list[np.ndarray]:
    """The index batches of consecutive epochs: chunks of each epoch's order, the last one partial when
    ``batch_size`` does not divide it. (Until issue 46 the partial chunk was dropped: with 7 × 500 samples in batches
    of 32, the 12 samples at the end of every epoch, the last cluster's on a proximity path, were never trained.)"""
    out = []
    for order in orders:
        order = np.asarray(order)
        for k in range(steps_per_epoch(len(order), batch_size)):
            out.append(order[k * batch_size:(k + 1) * batch_size])
    return out


def train_it(model: CharGPT, samples: Sequence[dict], orders: Sequence[np.ndarray], batch_size: int, lr: float,
             probe: Callable[[CharGPT, int], object] | None = None, probe_steps: Sequence[int] = (),
             weight_decay: float = 0.01) -> dict:
    """Train ``model`` in place on ``samples`` in the given per-epoch ``orders``.

    ``probe(model, step)`` runs after the update of every step in ``probe_steps`` (1-based: after step s, s
    updates have been applied; step 0 = before training) and its result is kept in ``history["probes"][s]``.
    Returns ``history`` with per-step ``loss``, ``grad_norm`` (before clipping), ``grad_cos`` (last block, this
    batch vs the previous one; NaN at step 1), the batches and the CPU seconds of training.
    """
    plan = batches_of(orders, batch_size)
    total = len(plan)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    last = model.last_block()
    hist = {"loss": [], "grad_norm": [], "grad_cos": [], "batches": plan, "probes": {}}
    probe_steps = set(int(s) for s in probe_steps)
    if probe is not None and 0 in probe_steps:
        hist["probes"][0] = probe(model, 0)
    prev = None
    cpu = 0.0
    model.train()
    for step, idx in enumerate(plan):
        t0 = time.process_time()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total, lr)
        loss = sft_loss(model, Batch([samples[i] for i in idx]))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        g_last = _flat_grad(last).clone()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        cpu += time.process_time() - t0
        hist["loss"].append(float(loss.detach()))
        hist["grad_norm"].append(float(gn))
        hist["grad_cos"].append(float("nan") if prev is None else _cos(g_last, prev))
        prev = g_last
        if probe is not None and step + 1 in probe_steps:
            hist["probes"][step + 1] = probe(model, step + 1)
    hist["train_cpu_s"] = cpu
    hist["steps"] = total
    return hist


def domain_grad_cosines(model: CharGPT, samples: Sequence[dict], domains: np.ndarray, batch_size: int,
                        n_domains: int, rng: np.random.Generator, per_domain: int = 2) -> dict[str, float]:
    """Control K4: last-block gradients of ``per_domain`` domain-pure batches per domain; mean cosine of the
    same-domain pairs and of the different-domain pairs (the model is not changed).

    A domain's batches are disjoint (drawn together without replacement, then split): batches that shared samples
    would agree because of the shared samples, not the domain; with overlapping draws a negative twin with the
    domain labels permuted still passed K4 (gap 0.14 at smoke size, issue 41)."""
    grads, dom = [], []
    for d in range(n_domains):
        idx = np.flatnonzero(np.asarray(domains) == d)
        size = min(batch_size, len(idx) // per_domain)
        draw = rng.choice(idx, size=size * per_domain, replace=False)
        for k in range(per_domain):
            b = draw[k * size:(k + 1) * size]
            model.zero_grad(set_to_none=True)
            sft_loss(model, Batch([samples[i] for i in b])).backward()
            grads.append(_flat_grad(model.last_block()).clone())
            dom.append(d)
    model.zero_grad(set_to_none=True)
    same, diff = [], []
    for a in range(len(grads)):
        for b in range(a + 1, len(grads)):
            (same if dom[a] == dom[b] else diff).append(_cos(grads[a], grads[b]))
    return {"same": float(np.mean(same)), "diff": float(np.mean(diff))}


# ----------------------------------------------------------------------------- the base model (cached)

def base_key(d_model: int, n_layers: int, n_heads: int, d_ff: int, n_per_domain: int, epochs: int, batch_size: int,
             lr: float, seed: int, positions: str = "learned", boost: int = 1) -> str:
    from pathlib import Path
    here = Path(__file__).parent
    code = hashlib.sha1(b"".join((here / f).read_bytes() for f in BASE_SOURCES)).hexdigest()[:12]
    spec = dict(d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_ff=d_ff, n_per_domain=n_per_domain,
                epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, code=code, positions=positions, boost=boost)
    return hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def base_data(n_per_domain: int, seed: int, boost: int = 1) -> list[dict]:
    """The base model's pre-training draw: ``n_per_domain`` samples of every domain (stream ``"base"``) and
    ``(boost − 1) × n_per_domain`` more of each :data:`BOOSTED` domain (stream ``"base-boost"``); both streams are
    disjoint from the instruction-tuning and held-out data."""
    data = make_dataset(n_per_domain, seed, stream="base")
    if boost > 1:
        data += make_dataset((boost - 1) * n_per_domain, seed, stream="base-boost", domains=BOOSTED)
    return data


def load_or_train_base(d_model: int, n_layers: int, n_heads: int, d_ff: int, n_per_domain: int, epochs: int,
                       batch_size: int, lr: float, seed: int, use_cache: bool = True, positions: str = "learned",
                       boost: int = 1) -> tuple[CharGPT, dict]:
    """The base model: random init with ``seed``, pre-trained with a random shuffle on a draw of the generator
    disjoint from the instruction-tuning data (:func:`base_data`). Cached in ``data/cache/ep_order/`` under a hash
    of this config and of the code in :data:`BASE_SOURCES`; trained (and written atomically) when missing."""
    key = base_key(d_model, n_layers, n_heads, d_ff, n_per_domain, epochs, batch_size, lr, seed, positions, boost)
    path = cache_dir(SLUG) / f"base-{key}.pt"
    torch.manual_seed(seed)
    model = CharGPT(d_model, n_layers, n_heads, d_ff, positions=positions)
    if use_cache and path.exists():
        model.load_state_dict(torch.load(path, weights_only=True))
        return model, {"source": f"cache ({path.name})", "cpu_s": 0.0, "key": key}
    data = base_data(n_per_domain, seed, boost)
    rng = np.random.default_rng([seed, 7])
    hist = train_it(model, data, [rng.permutation(len(data)) for _ in range(epochs)], batch_size, lr)
    if use_cache:
        fd, tmp = tempfile.mkstemp(prefix=".base-", suffix=".tmp", dir=path.parent)
        os.close(fd)
        torch.save(model.state_dict(), tmp)
        os.replace(tmp, path)
    return model, {"source": "trained now", "cpu_s": hist["train_cpu_s"], "key": key, "loss": hist["loss"]}


def clone(model: CharGPT) -> CharGPT:
    return copy.deepcopy(model)
