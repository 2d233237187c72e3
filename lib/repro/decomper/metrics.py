"""What the chapter measures: test loss per window, the representation-drift profile through depth, the
multiple-choice bracket/quote probe, parameter counts and CPU latency.

Drift (card, C1): with h_l the dense model's block outputs and ĥ_l the compressed model's on the same inputs,
e_l = ‖ĥ_l − h_l‖_F / ‖h_l‖_F (relative), ‖ĥ_l − h_l‖_F (absolute), and the local error
ε_l = f̂_l(h_{l−1}) − f_l(h_{l−1}) (compressed block fed the *original* input), δ_l = ‖ε_l‖_F. The amplification
factors are A_L = ‖ĥ_L − h_L‖ / Σ_l δ_l (the triangle-inequality bound of pure carry, ≤ 1 without amplification)
and A′_L = ‖ĥ_L − h_L‖ / ‖Σ_l ε_l‖ (vector sum: exactly 1 when the errors are merely carried by the residual
stream, control K4). Norms run over all windows, positions and channels.
"""
from __future__ import annotations

import copy
import time

import numpy as np
import torch

from .model import LlamaLM, collect_block_io, lm_loss


@torch.no_grad()
def test_loss(model: LlamaLM, windows: torch.Tensor, batch: int = 256) -> np.ndarray:
    """Mean next-byte cross entropy (nats/byte) of each window [N, T+1] → array [N]."""
    return torch.cat([lm_loss(model, w, "window") for w in torch.split(windows, batch)]).double().numpy()


@torch.no_grad()
def drift_profile(model_c: LlamaLM, model_dense: LlamaLM, x: torch.Tensor) -> dict[str, np.ndarray | float]:
    """e_l, absolute and local errors per block, Σδ, ‖Σε‖ and the amplification factors A_L, A′_L (inputs x [N, T]),
    and the squared norms behind them per window (``abs_sq_w``, ``h_sq_w`` [N, L]; ``vec_sum_sq_w`` [N], the last
    block's ‖Σ_l ε_l‖²), from which the verdicts bootstrap over test windows."""
    ins, _, outs = collect_block_io(model_dense, x)
    _, _, outs_c = collect_block_io(model_c, x)
    eps = [model_c.blocks[l](ins[l]) - outs[l] for l in range(len(outs))]
    abs_err = np.array([float((outs_c[l] - outs[l]).double().norm()) for l in range(len(outs))])
    rel = abs_err / np.array([float(o.double().norm()) for o in outs])
    local = np.array([float(e.double().norm()) for e in eps])
    cum_vec = np.array([float(torch.stack(eps[: l + 1]).double().sum(0).norm()) for l in range(len(eps))])
    sum_local = np.cumsum(local)
    # the same squared norms per window (summed over positions and channels): the verdicts resample windows
    per_w = lambda t: t.double().pow(2).sum(dim=tuple(range(1, t.dim()))).numpy()
    abs_sq_w = np.stack([per_w(outs_c[l] - outs[l]) for l in range(len(outs))], axis=1)
    return {"rel": rel, "abs": abs_err, "local": local, "cum_local": sum_local, "vec_sum_local": cum_vec,
            "A_L": float(abs_err[-1] / sum_local[-1]) if sum_local[-1] > 0 else float("nan"),
            "A_prime_L": float(abs_err[-1] / cum_vec[-1]) if cum_vec[-1] > 0 else float("nan"),
            "fit_sq": float((abs_err ** 2).sum()),
            "abs_sq_w": abs_sq_w,                                          # [N, L] ‖ĥ_l − h_l‖² per window
            "h_sq_w": np.stack([per_w(o) for o in outs], axis=1),          # [N, L] ‖h_l‖² per window
            "vec_sum_sq_w": per_w(torch.stack(eps).double().sum(0))}       # [N] ‖Σ_l ε_l‖² per window


@torch.no_grad()
def probe_correct(model: LlamaLM, contexts: torch.Tensor, targets: torch.Tensor, alternatives: torch.Tensor,
                  batch: int = 512) -> np.ndarray:
    """1 where the model gives the right closing byte a higher log-likelihood than its alternative, per item."""
    out = []
    for c, t, a in zip(torch.split(contexts, batch), torch.split(targets, batch), torch.split(alternatives, batch)):
        logits = model(c)[:, -1]
        out.append((logits.gather(1, t[:, None]) > logits.gather(1, a[:, None])).squeeze(1))
    return torch.cat(out).double().numpy()


def param_count(model: torch.nn.Module) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def _frozen(model: torch.nn.Module) -> torch.nn.Module:
    m = copy.deepcopy(model)
    for p in m.parameters():
        p.requires_grad_(False)
    return m.eval()


@torch.no_grad()
def latency(models: dict[str, LlamaLM], x: torch.Tensor, n: int = 50, warmup: int = 5) -> dict[str, np.ndarray]:
    """CPU seconds per forward of each model on ``x`` (batch 1), ``n`` rounds with the models interleaved (order
    rotated every round) after ``warmup`` untimed rounds: per-model arrays of matched times.

    Thread CPU time (``time.thread_time``), not wall time: with one compute thread it equals the latency on an idle
    machine, and it does not count the time other processes hold the core (the book's machines are shared)."""
    models = {k: _frozen(m) for k, m in models.items()}   # deployed form: no parameter requires a gradient
    names = list(models)
    times = {k: [] for k in names}
    for i in range(warmup + n):
        order = names[i % len(names):] + names[: i % len(names)]
        for k in order:
            t0 = time.thread_time()
            models[k](x)
            dt = time.thread_time() - t0
            if i >= warmup:
                times[k].append(dt)
    return {k: np.array(v) for k, v in times.items()}
