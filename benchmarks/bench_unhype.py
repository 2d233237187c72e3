"""Chapter 01 (UnHype) cost benchmark, the cost part of claim C5: one hypernetwork run that erases m digits
against m per-concept static LoRA-ESD runs, in CPU seconds per run and per iteration (one thread).

No compiled kernel exists for this chapter (the card finds none worth it); this measures the method's own cost.
Uses the smoke-sized base generator so that it runs in well under a minute: ``python benchmarks/bench_unhype.py``.
"""
from __future__ import annotations

import time

from repro.common import seed_everything
from repro import unhype


def main(m: int = 3, unhype_steps: int = 200, lora_steps: int = 200) -> None:
    seed_everything(0)
    cfg = unhype.Config.from_profile("smoke", base_steps=300, sample_steps=10)
    world = unhype.build_world(cfg)
    model = unhype.base_model(world, "flow")
    erased = unhype.multi_order(world)[:m]
    banks = unhype.make_banks(world, model, erased, seed=1)
    hyper = unhype.new_hyper(world, model, seed=1)
    t0 = time.process_time()
    unhype.train_unhype(model, hyper, banks, world.emb, world.retain_pool(erased), steps=unhype_steps, eta_int=1.0,
                        lr=cfg.hyper_lr, seed=1)
    t_h = time.process_time() - t0
    t_l = 0.0
    for j, d in enumerate(erased):
        r = unhype.train_lora_esd(model, {d: banks[d]}, world.emb, lambda f: 1.0, rank=cfg.rank,
                                  max_steps=lora_steps, check_every=lora_steps, threshold=-1.0, seed=j)
        t_l += r.seconds
    print(f"erasing m = {m} digits {erased}")
    print(f"UnHype, one run of {unhype_steps} iterations: {t_h:.2f} CPU s ({1e3 * t_h / unhype_steps:.1f} ms/iteration)")
    print(f"LoRA-ESD, {m} runs of {lora_steps} steps:      {t_l:.2f} CPU s ({1e3 * t_l / (m * lora_steps):.1f} ms/step)")
    print(f"ratio UnHype / per-concept LoRAs at equal steps: {t_h / t_l:.2f}")
    print("(in the chapter, early-stopped LoRAs need 50-100 steps per digit, UnHype its full 600 iterations)")


if __name__ == "__main__":
    main()
