"""Costs behind chapter 16's claim C4 and its budget (one thread).

1. The factored map x ↦ A(Bx) against the dense x ↦ Wx for the chapter's shapes at the three ratios: the
   factored form does fewer multiply-adds, but at d = 64 a second small matmul costs about as much as it saves,
   which is why the card found no kernel worth writing.
2. Whole-model forward latency (batch 1, one 64-byte window): dense, SVD-LLM at 40 %, and SVD-LLM + Decomper
   (refit and affine), best CPU time of repeated runs: refit changes numbers, not the graph.
3. The cost of one cell of the experiment: SVD-LLM decomposition, then each compensation variant.

    .venv/bin/python benchmarks/bench_decomper.py
"""
from __future__ import annotations

import torch

from repro import decomper as D
from repro.common import seed_everything
from repro.common.timing import best_cpu_time


def per_call(fn, n: int) -> float:
    t, _ = best_cpu_time(lambda: [fn() for _ in range(n)])
    return t / n


if __name__ == "__main__":
    seed_everything(0)
    torch.set_num_threads(1)
    x = torch.randn(64, 64)
    h = torch.randn(64, 172)
    print("1 · one map on a 64-token window (µs per call)")
    for (m, n), inp in (((64, 64), x), ((172, 64), x), ((64, 172), h)):
        W = torch.randn(m, n)
        dense = torch.nn.Linear(n, m, bias=False)
        for ratio in (0.2, 0.4, 0.6):
            r = D.rank_for_ratio(m, n, ratio)
            A, B = D.svd_truncate(W, r)
            lr = D.LowRankLinear(A, B)
            with torch.no_grad():
                td, tl = per_call(lambda: dense(inp), 2000), per_call(lambda: lr(inp), 2000)
            print(f"  {m:>3} × {n:<3} ratio {ratio:.1f} (r = {r:>2}): dense {1e6 * td:6.1f}, factored {1e6 * tl:6.1f}, "
                  f"factored/dense {tl / td:.2f}")

    cfg = D.Config.from_profile("full")
    model = D.LlamaLM(cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.seq_len).eval()
    xy = torch.randint(0, 256, (cfg.n_calib, cfg.seq_len + 1))
    xc = xy[:, :-1]
    t_none, none = best_cpu_time(lambda: D.compress_model(model, "svdllm", 0.4, xc), repeat=3)
    t_refit, refit = best_cpu_time(lambda: D.decomper(none, model, xc, "refit"), repeat=3)
    t_aff, affine = best_cpu_time(lambda: D.decomper(none, model, xc, "affine"), repeat=3)
    x1 = xc[:1]
    print("2 · model forward, batch 1 (ms per call)")
    with torch.no_grad():
        base = per_call(lambda: model(x1), 200)
        for name, mod in (("dense", model), ("SVD-LLM 40 %", none), ("+ Decomper refit", refit),
                          ("+ Decomper affine", affine)):
            t = per_call(lambda: mod(x1), 200)
            print(f"  {name:<18} {1e3 * t:6.3f} ms  ({t / base:.2f} × dense)  {D.param_count(mod):,} parameters")
    print("3 · one cell of the experiment (s)")
    print(f"  SVD-LLM decomposition {t_none:.2f}, refit {t_refit:.2f}, affine {t_aff:.2f}")
