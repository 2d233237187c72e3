import sys, time, json, numpy as np, torch
torch.set_num_threads(1)
from repro import dirichlet_clip as dc
from repro.dirichlet_clip.experiments import build_setup, torch_gen
from repro.dirichlet_clip.metrics import evaluate_task, summarize
from repro.dirichlet_clip.train import adversarial_finetune
import argparse
ap = argparse.ArgumentParser()
ap.add_argument("--eps", type=float, nargs="+", default=[0.1, 0.125, 0.15])
ap.add_argument("--steps", type=int, default=300)
ap.add_argument("--lr", type=float, default=1e-3)
ap.add_argument("--methods", nargs="+", default=["tecoa"])
ap.add_argument("--seeds", type=int, default=1)
ap.add_argument("--split", default="val")
a = ap.parse_args()
cfg = dc.Config.from_profile("full", seed=100)
setup = build_setup(cfg)
suite = setup.val_suite if a.split == "val" else setup.suite
G = setup.G
MS = 100
for eps in a.eps:
    for s in range(a.seeds):
        res = {}
        for m in ["orig"] + a.methods:
            t0 = time.time()
            if m == "orig":
                model = setup.clip
            else:
                gb, ga = torch_gen(MS, s, 1), torch_gen(MS, s, 5)
                model, log = adversarial_finetune(setup.clip, m, setup.x_aft, setup.y_aft, G["T1"], steps=a.steps, lr=a.lr,
                    eps=eps, pgd_steps=2, tau=0.07, tau_rob=1e5, generator=ga, batch_generator=gb)
            tft = time.time() - t0
            row = {}
            for ti, (name, task) in enumerate(suite.items()):
                ev = evaluate_task(model, task.images, task.labels, G[name], eps=eps, steps=20,
                                   generator=torch_gen(MS, s, 2, ti), name=name)
                sm = summarize(ev)
                row[name] = (round(sm["clean_acc"], 3), round(sm["rob_acc"], 3))
            res[m] = row
            print(f"eps={eps} s={s} {m:10s} ft {tft:.1f}s eval {time.time()-t0-tft:.1f}s", row, flush=True)
        for m in a.methods:
            print("   gain", m, {t: round(res[m][t][1] - res['orig'][t][1], 3) for t in res[m]}, flush=True)
