import sys, time, math, numpy as np, torch, argparse
torch.set_num_threads(1)
from repro import dirichlet_clip as dc
from repro.dirichlet_clip.experiments import build_setup, torch_gen
from repro.dirichlet_clip.metrics import evaluate_task, summarize
from repro.dirichlet_clip.train import batch_plan
from repro.dirichlet_clip.model import frozen_copy
from repro.dirichlet_clip.attacks import pgd_ce
from repro.dirichlet_clip import losses as L
cfg = dc.Config.from_profile("full", seed=100)
setup = build_setup(cfg)
suite = setup.val_suite; G = setup.G; MS = 100; eps = 0.15
def ev(model):
    row = {}
    for ti, (name, task) in enumerate(suite.items()):
        sm = summarize(evaluate_task(model, task.images, task.labels, G[name], eps=eps, steps=20, generator=torch_gen(MS, 0, 2, ti), name=name))
        row[name] = round(sm["rob_acc"], 3)
    return row
def ft(x, y, Gt, params="all", steps=300, lr=1e-3):
    model = frozen_copy(setup.clip)
    ps = [p for n, p in model.image_enc.named_parameters() if params == "all" or n.startswith(params)]
    for p in ps: p.requires_grad_(True)
    opt = torch.optim.Adam(ps, lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.5 * (1 + math.cos(math.pi * t / steps)))
    gen = torch_gen(MS, 0, 5)
    for idx in batch_plan(len(y), steps, 128, torch_gen(MS, 0, 1)):
        xb, yb = x[idx], y[idx]
        xa = pgd_ce(model, xb, yb, Gt, eps=eps, steps=2, step_size=eps, generator=gen)
        loss = L.tecoa_loss(model.scale * model.cos(xa, Gt), yb)
        opt.zero_grad(); loss.backward(); opt.step(); sched.step()
    for p in model.parameters(): p.requires_grad_(False)
    return model
o = ev(setup.clip); print("orig", o, flush=True)
Gall = G["T4"]  # 10 class prompts
xs, ys = torch.from_numpy(setup.splits.x_train), torch.from_numpy(setup.splits.y_train)
for name, kw in [("all10", dict(x=xs, y=ys, Gt=Gall)), ("conv_only", dict(x=setup.x_aft, y=setup.y_aft, Gt=G["T1"], params="conv")),
                 ("conv1_only", dict(x=setup.x_aft, y=setup.y_aft, Gt=G["T1"], params="conv1", lr=3e-3)),
                 ("fc_only", dict(x=setup.x_aft, y=setup.y_aft, Gt=G["T1"], params="fc"))]:
    t0 = time.time(); r = ev(ft(**kw)); print(f"{name:10s} {time.time()-t0:.0f}s", r, {t: round(r[t]-o[t], 3) for t in r}, flush=True)
