"""Training, fine-tuning and rollouts (paper §3.2; official ``train.py``).

* :func:`pretrain` — one-step training, AdamW with a cosine schedule; the composite loss's (θ, s_c) get their
  own parameter group (peak ``loss_lr``, no weight decay: card, *Controls and risks*).
* :func:`finetune_accumulative` — accumulative context fine-tuning: roll out on the model's own *detached*
  predictions with a loss, a backward pass, a gradient clip (before the step; the released loop clips after
  ``optimizer.step()``, where the clip does nothing) and an optimizer step at every rollout step; memory is
  constant in K.
* :func:`finetune_bptt` — backpropagation through the whole K-step rollout, one step per iteration.
* :func:`continue_one_step` — the control: more one-step training with the same number of optimizer steps
  and learning rate as accumulative fine-tuning.

All three fine-tunings decay their lr by a cosine from ``lr`` to ``floor · lr`` over their own optimizer steps
(``floor = 1`` is the card's constant lr). With a constant lr each fine-tuned model ended at a noisy last iterate
and control K3 (fine-tuning moves validation RMSE beyond seed noise) failed at master seed 1.
* :func:`saved_bytes` — bytes saved for backward in one iteration (``saved_tensors_hooks``; deterministic).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

CLIP = 20.0


@dataclass
class History:
    loss: list = field(default_factory=list)
    w: list = field(default_factory=list)
    theta: list = field(default_factory=list)
    s: list = field(default_factory=list)


def sample_batch(data: np.ndarray, batch: int, K: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """x0 (B, 4, ny, nx) and the next K frames (B, K, 4, ny, nx) at random (trajectory, frame)."""
    n, F = data.shape[:2]
    b = rng.integers(0, n, batch)
    f = rng.integers(0, F - K, batch)
    x0 = torch.from_numpy(np.stack([data[i, j] for i, j in zip(b, f)]))
    y = torch.from_numpy(np.stack([data[i, j + 1:j + 1 + K] for i, j in zip(b, f)]))
    return x0, y


def cosine_lr(step: int, total: int, peak: float, floor_frac: float = 0.03) -> float:
    """Cosine from ``peak`` to ``floor_frac · peak`` over ``total`` steps (1e-3 → 3e-5 in the card)."""
    t = min(step / max(total - 1, 1), 1.0)
    return peak * (floor_frac + (1 - floor_frac) * 0.5 * (1 + math.cos(math.pi * t)))


def make_optimizer(model: nn.Module, loss: nn.Module | None, lr: float, loss_lr: float, wd: float = 0.01):
    groups = [{"params": [p for p in model.parameters() if p.requires_grad], "lr": lr, "weight_decay": wd,
               "peak": lr}]
    if loss is not None:
        lp = [p for p in loss.parameters() if p.requires_grad]
        if lp:
            groups.append({"params": lp, "lr": loss_lr, "weight_decay": 0.0, "peak": loss_lr})
    return torch.optim.AdamW(groups)


def _record(hist: History, loss_fn, value: float) -> None:
    hist.loss.append(value)
    if hasattr(loss_fn, "w"):
        hist.w.append(float(loss_fn.w.detach()))
        hist.theta.append(float(loss_fn.theta.detach()))
        hist.s.append(loss_fn.s.detach().numpy().copy())


def _update(model: nn.Module, opt: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """One optimizer step on ``loss``, the gradient clipped to norm ``CLIP``."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), CLIP)
    opt.step()


def pretrain(model: nn.Module, loss_fn: nn.Module, data: np.ndarray, steps: int, batch: int, lr: float,
             loss_lr: float, seed: int) -> History:
    """One-step training: minimize L(f(x_t), x_{t+1}) over random training pairs (batch order from ``seed``)."""
    rng = np.random.default_rng(seed)
    opt = make_optimizer(model, loss_fn, lr, loss_lr)
    hist = History()
    model.train()
    for s in range(steps):
        for g in opt.param_groups:
            g["lr"] = cosine_lr(s, steps, g["peak"])
        loss_fn.progress = s / max(steps - 1, 1)
        x0, y = sample_batch(data, batch, 1, rng)
        loss = loss_fn(model(x0), y[:, 0])
        _update(model, opt, loss)
        _record(hist, loss_fn, float(loss.detach()))
    model.eval()
    return hist


def _ft_opt(model, lr):
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)


def _ft_lr(opt: torch.optim.Optimizer, step: int, total: int, lr: float, floor: float) -> None:
    """Fine-tuning lr at optimizer step ``step`` of ``total``: cosine from ``lr`` to ``floor · lr``."""
    for g in opt.param_groups:
        g["lr"] = cosine_lr(step, total, lr, floor)


def finetune_accumulative(model: nn.Module, loss_fn: nn.Module, data: np.ndarray, K: int, iters: int, batch: int,
                          lr: float, seed: int, inputs_log: list | None = None, floor: float = 0.03) -> History:
    """For each batch: x ← x₀; for j = 1..K: ŷ = f(x); loss; backward; clip; step; x ← ŷ.detach().
    The lr decays (cosine, to ``floor · lr``) over the ``iters · K`` optimizer steps."""
    rng = np.random.default_rng(seed)
    opt = _ft_opt(model, lr)
    hist = History()
    model.train()
    for i in range(iters):
        x, y = sample_batch(data, batch, K, rng)
        for j in range(K):
            if inputs_log is not None:
                inputs_log.append(x.requires_grad)
            _ft_lr(opt, i * K + j, iters * K, lr, floor)
            pred = model(x)
            loss = loss_fn(pred, y[:, j])
            _update(model, opt, loss)
            x = pred.detach()                      # the detach that keeps memory flat in K
            hist.loss.append(loss.item())
    model.eval()
    return hist


def finetune_bptt(model: nn.Module, loss_fn: nn.Module, data: np.ndarray, K: int, iters: int, batch: int,
                  lr: float, seed: int, floor: float = 0.03) -> History:
    """Backpropagation through time: mean loss over the K-step rollout, one optimizer step per batch; the lr
    decays (cosine, to ``floor · lr``) over the ``iters`` steps."""
    rng = np.random.default_rng(seed)
    opt = _ft_opt(model, lr)
    hist = History()
    model.train()
    for i in range(iters):
        _ft_lr(opt, i, iters, lr, floor)
        x, y = sample_batch(data, batch, K, rng)
        total = 0.0
        for j in range(K):
            x = model(x)
            total = total + loss_fn(x, y[:, j])
        total = total / K
        _update(model, opt, total)
        hist.loss.append(total.item())
    model.eval()
    return hist


def continue_one_step(model: nn.Module, loss_fn: nn.Module, data: np.ndarray, steps: int, batch: int, lr: float,
                      seed: int, floor: float = 0.03) -> History:
    """The control of C3: ``steps`` more one-step updates at the fine-tuning lr and its decay (no rollout)."""
    rng = np.random.default_rng(seed)
    opt = _ft_opt(model, lr)
    hist = History()
    model.train()
    for i in range(steps):
        _ft_lr(opt, i, steps, lr, floor)
        x, y = sample_batch(data, batch, 1, rng)
        loss = loss_fn(model(x), y[:, 0])
        _update(model, opt, loss)
        hist.loss.append(loss.item())
    model.eval()
    return hist


@torch.no_grad()
def rollout(model: nn.Module, x0: np.ndarray, leads: int, chunk: int = 64) -> np.ndarray:
    """Autoregressive forecast (N, leads, 4, ny, nx) from x0 (N, 4, ny, nx)."""
    model.eval()
    out = np.empty((x0.shape[0], leads) + x0.shape[1:], np.float32)
    for a in range(0, x0.shape[0], chunk):
        x = torch.from_numpy(np.ascontiguousarray(x0[a:a + chunk]))
        for k in range(leads):
            x = model(x)
            out[a:a + chunk, k] = x.numpy()
    return out


def saved_bytes(model: nn.Module, loss_fn: nn.Module, x0: torch.Tensor, y: torch.Tensor, kind: str) -> int:
    """Peak bytes of tensors saved for backward within one fine-tuning iteration of ``kind`` ("accumulative" or
    "bptt") on the batch (x0, y[:, :K]). Counted by ``torch.autograd.graph.saved_tensors_hooks``; a graph's bytes
    are released by its backward, so accumulative FT's peak is one step's graph and BPTT's the whole rollout's."""
    model = copy.deepcopy(model)
    model.train()
    live = {"now": 0, "peak": 0}

    def pack(t):
        live["now"] += t.numel() * t.element_size()
        live["peak"] = max(live["peak"], live["now"])
        return t

    K = y.shape[1]
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        x = x0
        if kind == "accumulative":
            for j in range(K):
                pred = model(x)
                loss_fn(pred, y[:, j]).backward()
                live["now"] = 0
                x = pred.detach()
        elif kind == "bptt":
            total = 0.0
            for j in range(K):
                x = model(x)
                total = total + loss_fn(x, y[:, j])
            (total / K).backward()
        else:
            raise ValueError(f"kind must be 'accumulative' or 'bptt', got {kind!r}")
    return int(live["peak"])
