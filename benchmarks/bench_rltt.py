"""Cost of an RLTT update against a GRPO update (chapter 12, claim C2), on the chapter's model.

The update is the teacher-forced forward of the policy, the loss and the backward pass; GRPO reads out the
last loop only, RLTT reads out every loop and (exit-pdf weights) back-propagates through the exit gate.
The two are timed alternately on the same batch of 128 random rollouts, one thread; the script prints the
median ratio for the chapter's 19-token vocabulary and for a hypothetical 4,096-token head, where the
T_max − 1 extra readouts start to cost something (Ouro's head has 49 k rows).

    .venv/bin/python benchmarks/bench_rltt.py
"""
from __future__ import annotations

import time

import numpy as np
import torch

from repro.common import seed_everything
from repro.rltt import LoopedLM, group_advantages, loop_weights, per_loop_token_logprobs, rltt_loss


def update_time(model: LoopedLM, ids: torch.Tensor, mask: torch.Tensor, adv: torch.Tensor, method: str) -> float:
    t0 = time.perf_counter()
    last = method == "grpo"
    lp, ep, tm = per_loop_token_logprobs(model, ids, mask, 0.9, last_only=last)
    w = torch.ones(1) if last else loop_weights("exit_pdf", model.t_max, exit_pdf=ep)
    loss, _ = rltt_loss(lp, adv, tm, w)
    model.zero_grad(set_to_none=True)
    loss.backward()
    return time.perf_counter() - t0


def bench(vocab: int, reps: int = 30) -> tuple[float, float]:
    torch.manual_seed(0)
    model = LoopedLM(vocab, 64, 4, 1, 4, 24)
    ids = torch.randint(0, min(vocab, 19), (128, 22))
    mask = torch.zeros_like(ids, dtype=torch.bool)
    mask[:, 14:] = True
    adv = group_advantages(torch.randint(0, 2, (128,)).float(), 8)
    times = {"grpo": [], "exit_pdf": []}
    for r in range(reps + 3):
        for m in (("grpo", "exit_pdf") if r % 2 == 0 else ("exit_pdf", "grpo")):
            t = update_time(model, ids, mask, adv, m)
            if r >= 3:                       # warm-up
                times[m].append(t)
    return float(np.median(times["grpo"])), float(np.median(times["exit_pdf"]))


if __name__ == "__main__":
    seed_everything(0)
    for vocab in (19, 4096):
        g, r = bench(vocab)
        print(f"vocab {vocab:>5}: GRPO update {1e3 * g:6.1f} ms, RLTT (exit pdf) update {1e3 * r:6.1f} ms, "
              f"ratio {r / g:.2f}")
