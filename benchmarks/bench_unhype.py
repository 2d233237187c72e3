"""Chapter 01 (UnHype) cost benchmark, the cost part of claim C5: one hypernetwork run that erases m digits
against m per-concept static LoRA-ESD runs, in CPU seconds per run and per iteration (one thread).

No compiled kernel exists for this chapter (the card finds none worth it); this measures the method's own cost.
Uses the smoke-sized base generator so that it runs in well under a minute: ``python benchmarks/bench_unhype.py``.
The number of steps an early-stopped LoRA needs is measured here with the chapter's matched-erasure check (and, if
a full-profile ledger exists under ``results/unhype/``, quoted from it), never assumed.
"""
from __future__ import annotations

import json
import time

from repro.common import seed_everything
from repro.common.paths import results_dir
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
    for j, d in enumerate(erased):   # fixed step count (threshold -1 never stops early): equal work per run
        r = unhype.train_lora_esd(model, {d: banks[d]}, world.emb, lambda f: 1.0, rank=cfg.rank,
                                  max_steps=lora_steps, check_every=lora_steps, threshold=-1.0, seed=j)
        t_l += r.seconds
    print(f"erasing m = {m} digits {erased}")
    print(f"UnHype, one run of {unhype_steps} iterations: {t_h:.2f} CPU s ({1e3 * t_h / unhype_steps:.1f} ms/iteration)")
    print(f"LoRA-ESD, {m} runs of {lora_steps} steps:      {t_l:.2f} CPU s ({1e3 * t_l / (m * lora_steps):.1f} ms/step)")
    print(f"ratio UnHype / per-concept LoRAs at equal steps: {t_h / t_l:.2f}")
    # how many steps does an early-stopped LoRA need? measured with the chapter's check (this smoke-sized base)
    stops = []
    for j, d in enumerate(erased):
        _, check_factors = unhype.make_check(world, model, [d], seed=1)
        r = unhype.train_lora_esd(model, {d: banks[d]}, world.emb, check_factors, rank=cfg.rank,
                                  max_steps=lora_steps, check_every=10, threshold=unhype.RATE_OK, seed=j)
        stops.append(f"digit {d}: {'stopped at step ' + str(r.steps) if r.matched else f'not matched in {r.steps} steps'}"
                     f" (check rate {r.stop_rate:.2f})")
    print("early-stopped LoRA-ESD on this benchmark's base (check every 10 steps, rate <= 0.15): " + "; ".join(stops))
    path = results_dir("unhype") / "full-seed0.json"
    if path.exists():
        led = json.loads(path.read_text())
        k2 = next((k for k in led.get("controls", []) if k["id"] == "K2"), None)
        if k2:
            print(f"in the chapter's last full run (seed 0) LoRA-ESD stopped at steps "
                  f"{k2['numbers'].get('LoRA-ESD stop step per seed')}, UnHype ran {led['params']['unlearn_steps']} "
                  "iterations")


if __name__ == "__main__":
    main()
