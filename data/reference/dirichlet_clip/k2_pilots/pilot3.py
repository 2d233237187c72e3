import sys, time, math, numpy as np, torch, argparse, pathlib
torch.set_num_threads(1)
import torch.nn.functional as F
ap = argparse.ArgumentParser()
ap.add_argument("--width", type=int, default=64)
ap.add_argument("--rot", type=float, default=0)
ap.add_argument("--steps", type=int, default=1500)
ap.add_argument("--aft", type=int, default=300)
ap.add_argument("--arch", default="base")
ap.add_argument("--seeds", type=int, default=1)
ap.add_argument("--attr", type=int, default=0)
ap.add_argument("--methods", nargs="+", default=["tecoa"])
a = ap.parse_args()
import repro.dirichlet_clip.model as M
import repro.dirichlet_clip.experiments as E
M.EMBED_DIM = a.width
d = list(M.ToyCLIP.__init__.__defaults__); d[2] = a.width; M.ToyCLIP.__init__.__defaults__ = tuple(d)
M.ImageEncoder.__init__.__defaults__ = (a.width,)
from torch import nn
class Deep(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1); self.conv2 = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(64, 64, 3, stride=2, padding=1); self.fc = nn.Linear(64 * 2 * 2, width)
    def forward(self, x):
        h = F.relu(self.conv1(x)); h = F.relu(self.conv2(h)); h = F.relu(self.conv3(h)); return self.fc(h.flatten(1))
class Pool(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1); self.conv2 = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(64, 128, 3, padding=1); self.fc = nn.Linear(128, width)
    def forward(self, x):
        h = F.relu(self.conv1(x)); h = F.relu(self.conv2(h)); h = F.relu(self.conv3(h)); return self.fc(h.mean((2, 3)))
if a.arch != "base":
    M.ImageEncoder = {"deep": Deep, "pool": Pool}[a.arch]
    d = list(M.ToyCLIP.__init__.__defaults__)
    M._VERSION = a.arch
cdir = pathlib.Path("/tmp/p07/cache"); cdir.mkdir(exist_ok=True)
M.cache_dir = lambda slug: cdir
M.PRETRAIN = dict(M.PRETRAIN, rot=a.rot)
orig_aug = M.augment
def rot_batch(x, deg, gen):
    B = x.shape[0]
    th = (torch.rand(B, generator=gen) * 2 - 1) * deg * math.pi / 180
    c, s = torch.cos(th), torch.sin(th)
    A = torch.stack([torch.stack([c, -s, torch.zeros(B)], 1), torch.stack([s, c, torch.zeros(B)], 1)], 1)
    grid = F.affine_grid(A, x.shape, align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False).clamp(0, 1)
if a.rot:
    M.augment = lambda x, gen, shift=1, noise=0.05: orig_aug(rot_batch(x, a.rot, gen), gen, shift, noise)
import repro.dirichlet_clip.data as D
if a.attr:
    LOOP = {0: "with a loop", 6: "with a loop", 8: "with two loops", 9: "with a loop", 4: "with a closed corner"}
    SHAPE = {0: "round", 1: "straight", 2: "curved", 3: "curved", 4: "straight", 5: "curved", 6: "round", 7: "straight", 8: "round", 9: "round"}
    oa = D._attrs
    def _attrs(c):
        d = oa(c); d["loop"] = LOOP.get(c, "without a loop"); d["shape"] = SHAPE[c]; return d
    D._attrs = _attrs
    if a.attr == 2:
        TOP = {5: "a flat top", 7: "a flat top", 2: "a flat bottom", 4: "a crossbar", 1: "a single stroke", 3: "two bumps", 8: "two bumps"}
        def _attrs(c, _a=_attrs):
            d = _a(c); d["top"] = TOP.get(c, "no flat edge"); return d
        D._attrs = _attrs
        D.TEMPLATES = D.TEMPLATES + ("a digit with {top}", "a {shape} digit with {top}", "{word}: {shape}, {loop}, with {top}",
                                     "a {shape} shape {loop}", "a handwritten digit with {top}, {loop}")
    D.TEMPLATES = D.TEMPLATES + ("a {shape} digit {loop}", "a {shape} handwritten {word}", "the digit {word}, {loop}",
                                 "a digit {loop}", "a {shape} digit")
from repro import dirichlet_clip as dc
from repro.dirichlet_clip.experiments import build_setup, torch_gen, calibrate_eps
from repro.dirichlet_clip.metrics import evaluate_task, summarize
from repro.dirichlet_clip.train import adversarial_finetune
cfg = dc.Config.from_profile("full", seed=100, pretrain_steps=a.steps)
t0 = time.time()
setup = build_setup(cfg)
print(f"arch {a.arch} nparams {sum(p.numel() for p in setup.clip.image_enc.parameters())} width {a.width} rot {a.rot}: pretrain {time.time()-t0:.0f}s scale {setup.clip.scale:.2f}", flush=True)
print(dc.pretrain_summary(setup)[["zero-shot acc", "mean H/log C", "mean top cos"]].T.round(3).to_string())
cal = calibrate_eps(cfg, setup)
print("calibration", cal.table["suite"].round(3).to_dict(), "->", cal.eps, flush=True)
eps = cal.eps
suite = setup.val_suite; G = setup.G; MS = 100
def ev(model):
    row = {}
    for ti, (name, task) in enumerate(suite.items()):
        sm = summarize(evaluate_task(model, task.images, task.labels, G[name], eps=eps, steps=20,
                                     generator=torch_gen(MS, 0, 2, ti), name=name))
        row[name] = (round(sm["clean_acc"], 3), round(sm["rob_acc"], 3))
    return row
import numpy as np
gains = {}
for sd in range(a.seeds):
    def ev(model, sd=sd):
        row = {}
        for ti, (name, task) in enumerate(suite.items()):
            sm = summarize(evaluate_task(model, task.images, task.labels, G[name], eps=eps, steps=20, generator=torch_gen(MS, sd, 2, ti), name=name))
            row[name] = round(sm["rob_acc"], 3)
        return row
    o = ev(setup.clip)
    for m in a.methods:
        model, _ = adversarial_finetune(setup.clip, m, setup.x_aft, setup.y_aft, G["T1"], steps=a.aft, lr=1e-3, eps=eps,
            pgd_steps=2, tau=0.07, tau_rob=1e5, generator=torch_gen(MS, sd, 5), batch_generator=torch_gen(MS, sd, 1))
        r = ev(model); g = {t: round(r[t]-o[t], 3) for t in r}; gains.setdefault(m, []).append(list(g.values()))
        print(sd, m, "orig", o, "ft", r, "gain", g, flush=True)
for m, v in gains.items():
    v = np.array(v); print(m, "mean gain T1..T4", v.mean(0).round(3), "sd", v.std(0, ddof=1).round(3) if len(v) > 1 else "")
