import sys, time, math, numpy as np, torch, argparse
torch.set_num_threads(1)
import torch.nn.functional as F
from repro import dirichlet_clip as dc
from repro.dirichlet_clip.experiments import build_setup, torch_gen
from repro.dirichlet_clip.metrics import evaluate_task, summarize
from repro.dirichlet_clip.train import batch_plan
from repro.dirichlet_clip.model import frozen_copy, augment
from repro.dirichlet_clip.attacks import pgd_ce
from repro.dirichlet_clip import losses as L

def rot_batch(x, deg, gen):
    # random rotation in [-deg, deg] via affine_grid (bilinear)
    B = x.shape[0]
    th = (torch.rand(B, generator=gen) * 2 - 1) * deg * math.pi / 180
    c, s = torch.cos(th), torch.sin(th)
    A = torch.stack([torch.stack([c, -s, torch.zeros(B)], 1), torch.stack([s, c, torch.zeros(B)], 1)], 1)
    grid = F.affine_grid(A, x.shape, align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False).clamp(0, 1)

def ft(clip, x, y, G, steps, lr, eps, pgd_steps, gen, bgen, aug=None, rot=0, step_frac=1.0):
    model = frozen_copy(clip)
    for p in model.image_enc.parameters(): p.requires_grad_(True)
    opt = torch.optim.Adam(model.image_enc.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.5 * (1 + math.cos(math.pi * t / steps)))
    for idx in batch_plan(len(y), steps, 128, bgen):
        xb, yb = x[idx], y[idx]
        if rot: xb = rot_batch(xb, rot, gen)
        if aug: xb = augment(xb, gen, 1, aug)
        xa = pgd_ce(model, xb, yb, G, eps=eps, steps=pgd_steps, step_size=eps*step_frac, generator=gen)
        loss = L.tecoa_loss(model.scale * model.cos(xa, G), yb)
        opt.zero_grad(); loss.backward(); opt.step(); sched.step()
    for p in model.parameters(): p.requires_grad_(False)
    return model

ap = argparse.ArgumentParser()
ap.add_argument("--eps", type=float, default=0.15)
ap.add_argument("--variants", nargs="+", default=["base"])
a = ap.parse_args()
cfg = dc.Config.from_profile("full", seed=100)
setup = build_setup(cfg)
suite = setup.val_suite; G = setup.G; MS = 100; eps = a.eps
def ev(model):
    row = {}
    for ti, (name, task) in enumerate(suite.items()):
        sm = summarize(evaluate_task(model, task.images, task.labels, G[name], eps=eps, steps=20,
                                     generator=torch_gen(MS, 0, 2, ti), name=name))
        row[name] = (round(sm["clean_acc"], 3), round(sm["rob_acc"], 3))
    return row
o = ev(setup.clip); print("orig", o, flush=True)
VAR = {"base": {}, "aug": dict(aug=0.05), "s600": dict(steps=600), "lr3e-4": dict(lr=3e-4), "pgd5": dict(pgd_steps=5, step_frac=0.4),
       "rot20": dict(rot=20), "aug_rot": dict(aug=0.05, rot=20), "lr3e-3": dict(lr=3e-3)}
for v in a.variants:
    kw = dict(steps=300, lr=1e-3, pgd_steps=2); kw.update(VAR[v])
    t0 = time.time()
    m = ft(setup.clip, setup.x_aft, setup.y_aft, G["T1"], eps=eps, gen=torch_gen(MS, 0, 5), bgen=torch_gen(MS, 0, 1), **kw)
    r = ev(m)
    print(f"{v:8s} {time.time()-t0:.1f}s", r, "gain", {t: round(r[t][1]-o[t][1], 3) for t in r}, flush=True)
