"""Why chapter 06 has no compiled kernel: rendering boards (a numpy table lookup) against one training step.

The card measured ~40 µs for a 64-board batch; this script prints, on one thread, the CPU time of rendering a
batch of 64 boards, of generating them, and of one fine-tuning step (image batch + text batch) of the chapter's
model, and the share of a step that data generation takes. A kernel could only speed up that share.

    .venv/bin/python benchmarks/bench_fractured_magnitude.py
"""
from __future__ import annotations

import numpy as np
import torch

from repro.common import seed_everything
from repro.common.timing import best_cpu_time
from repro.fractured_magnitude import Config, TinyVLM, model, random_boards, render_patches
from repro.fractured_magnitude.tasks import num_batch, random_eq_batch
from repro.fractured_magnitude.train import batch_loss, lr_groups


def main() -> None:
    seed_everything(0)
    cfg = Config.from_profile("full")
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 12, cfg.batch_size)
    t_gen, boards = best_cpu_time(lambda: random_boards(counts, 6, 5, rng), repeat=50)
    t_render, _ = best_cpu_time(lambda: render_patches(boards), repeat=50)
    t_batch, _ = best_cpu_time(lambda: (num_batch(counts, "image", rng), num_batch(counts, "text", rng)), repeat=20)
    vlm = TinyVLM(model.build_vit(cfg.d_model, 36, 25, 0), model.build_decoder(cfg.d_model, 0))
    opt = torch.optim.AdamW(lr_groups(vlm, cfg))

    def step():
        loss = batch_loss(vlm, num_batch(counts, "image", rng)) + batch_loss(vlm, random_eq_batch(0, 23, cfg.batch_size,
                                                                                                "text", rng))
        opt.zero_grad()
        loss.backward()
        opt.step()

    t_step, _ = best_cpu_time(step, repeat=10)
    print(f"generate {cfg.batch_size} boards: {1e6 * t_gen:8.1f} µs")
    print(f"render   {cfg.batch_size} boards: {1e6 * t_render:8.1f} µs")
    print(f"build an image + a text batch: {1e3 * t_batch:6.2f} ms")
    print(f"one fine-tuning step (forward + backward + AdamW): {1e3 * t_step:6.1f} ms")
    print(f"data generation is {100 * t_batch / t_step:.1f} % of a step: no kernel worth it")


if __name__ == "__main__":
    main()
