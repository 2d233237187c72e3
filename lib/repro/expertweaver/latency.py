"""Measured CPU latency of one FFN at batch 1 (claim C5, control K4).

All weights are pre-sliced into contiguous blocks before timing (views, no gather copies at run time): the dense
FFN, a contiguous slice of it (K4: can the timer see that less work is faster?), and the converted FFN — the shared
block always, the representative gate rows of the router, then the selected experts' blocks one by one. Times are
the best of ``repeats`` means over ``reps`` calls (``time.perf_counter``), under ``torch.inference_mode``, one
thread; they depend on the machine's load, so the ledger keeps them as strings. C5's speed-up is decided on a
bootstrap interval over those repeats (:func:`speedup_interval`).
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from .partition import LayerPlan


def repeat_mean_seconds(fn: Callable[[], object], reps: int, repeats: int = 5) -> np.ndarray:
    """The ``repeats`` mean wall times of ``reps`` calls of ``fn`` each (after a warm-up), in the order run."""
    for _ in range(max(1, reps // 10)):
        fn()
    out = np.empty(repeats)
    for i in range(repeats):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        out[i] = (time.perf_counter() - t) / reps
    return out


def best_mean_seconds(fn: Callable[[], object], reps: int, repeats: int = 5) -> float:
    """Best of ``repeats`` mean wall times of ``reps`` calls of ``fn`` (after a warm-up)."""
    return float(repeat_mean_seconds(fn, reps, repeats).min())


def speedup_interval(slow: np.ndarray, fast: np.ndarray, n_boot: int = 2000, rng: np.random.Generator | int = 0
                     ) -> tuple[float, float, float]:
    """best(slow) / best(fast) over timing repeats and its percentile-bootstrap 95 % interval (claim C5, issue 41):
    each draw resamples the repeats of each path with replacement (they were timed one path after the other, so
    independently) and takes the best of each. With few repeats the interval is coarse but says how far the ratio
    moves between repeats of the same measurement."""
    slow, fast = np.asarray(slow, float), np.asarray(fast, float)
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    est = float(slow.min() / fast.min())
    if slow.size < 2 or fast.size < 2:
        return est, -np.inf, np.inf
    bs = slow[rng.integers(0, slow.size, (n_boot, slow.size))].min(1)
    bf = fast[rng.integers(0, fast.size, (n_boot, fast.size))].min(1)
    lo, hi = np.percentile(bs / bf, [2.5, 97.5])
    return est, float(lo), float(hi)


class SlicedFFN:
    """A SwiGLU FFN's weights as contiguous blocks: shared, one per routed expert, and the router's gate rows.

    ``w_g, w_u``: [d_ff, d]; ``w_d``: [d, d_ff]; ``shared``: neuron ids; ``experts``: list of neuron-id tensors;
    ``reps``: [E, R] neuron ids.
    """

    def __init__(self, w_g, w_u, w_d, shared, experts, reps, k: int) -> None:
        def block(ids):
            ids = torch.as_tensor(ids, dtype=torch.long)
            return (torch.cat([w_g[ids], w_u[ids]]).contiguous(), w_d[:, ids].contiguous(), len(ids))
        self.shared = block(shared)
        self.experts = [block(e) for e in experts]
        self.router = w_g[torch.as_tensor(reps).reshape(-1)].contiguous()
        self.n_experts, self.R, self.k = len(experts), reps.shape[1], k

    @staticmethod
    def _glu(x, blk):
        gu, wd, n = blk
        z = F.linear(x, gu)
        return F.linear(F.silu(z[..., :n]) * z[..., n:], wd)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        y = self._glu(x, self.shared)
        scores = F.silu(F.linear(x, self.router)).abs().view(self.n_experts, self.R).sum(1)
        for e in torch.topk(scores, self.k).indices.tolist():
            y = y + self._glu(x, self.experts[e])
        return y


def dense_fn(w_g, w_u, w_d) -> Callable[[torch.Tensor], torch.Tensor]:
    gu = torch.cat([w_g, w_u]).contiguous()
    wd = w_d.contiguous()
    n = w_g.shape[0]

    def f(x):
        z = F.linear(x, gu)
        return F.linear(F.silu(z[..., :n]) * z[..., n:], wd)
    return f


def layer_latency(w_g, w_u, w_d, shared, experts, reps, k: int, frac: float, reps_calls: int,
                  generator: torch.Generator | None = None, with_repeats: bool = False):
    """Seconds per call at batch 1: dense FFN, a contiguous ``frac`` slice of it, and the converted FFN (the best
    of the repeats). With ``with_repeats`` also returns every repeat's mean per path (for C5's interval)."""
    d_ff, d = w_g.shape
    x = torch.randn(1, d, generator=generator)
    n = int(round(frac * d_ff))
    dense = dense_fn(w_g, w_u, w_d)
    sl = dense_fn(w_g[:n], w_u[:n], w_d[:, :n])
    moe = SlicedFFN(w_g, w_u, w_d, shared, experts, reps, k)
    with torch.inference_mode():
        rep = {"dense": repeat_mean_seconds(lambda: dense(x), reps_calls),
               "slice": repeat_mean_seconds(lambda: sl(x), reps_calls),
               "moe": repeat_mean_seconds(lambda: moe(x), reps_calls)}
    out = {k_: float(v.min()) for k_, v in rep.items()}
    return (out, rep) if with_repeats else out


def synthetic_ffn(d: int, d_ff: int, plan: LayerPlan, R: int, seed: int) -> tuple:
    """Random weights of a d × d_ff SwiGLU FFN and a converted structure with ``plan``'s sizes (shared block, then
    the experts in order, R representatives each): latency does not depend on which neurons are grouped."""
    g = torch.Generator().manual_seed(seed)
    w_g, w_u = torch.randn(d_ff, d, generator=g) / d ** 0.5, torch.randn(d_ff, d, generator=g) / d ** 0.5
    w_d = torch.randn(d, d_ff, generator=g) / d_ff ** 0.5
    shared = torch.arange(plan.u)
    bounds = torch.cumsum(torch.tensor((plan.u,) + plan.sizes), 0)
    experts = [torch.arange(int(bounds[i]), int(bounds[i + 1])) for i in range(len(plan.sizes))]
    reps = torch.stack([e[:R] for e in experts])
    return w_g, w_u, w_d, shared, experts, reps, g
