"""Chapter 07's experiment: pre-train once, calibrate the attack radius, fine-tune every method per seed,
evaluate on the zero-shot suite under attack, sweep ε, sweep τ_rob, check for gradient masking. The claims and
controls are decided from these tables in :mod:`repro.dirichlet_clip.verdicts`.

Calibration (:func:`calibrate_eps`): ε_test is the smallest radius of ``cfg.eps_grid`` at which the pre-trained
model's suite-average robust accuracy on the *validation* split is ≤ 0.3 — the rule is fixed before any
fine-tuning runs, and the test split never enters it.

Common random numbers: seed index ``s`` of a run with master seed ``cfg.seed`` draws from one stream per
phase, ``SeedSequence([cfg.seed, s, phase, ...])`` — the batch order, the training attack's starts, each task's
evaluation-attack starts, each (task, ε) of the sweep, the masking check — and *every method uses the same
streams*, so method differences within a seed are paired: same batches, same PGD starts. The data, the
pre-trained model and the text embeddings are the same for every seed (card, "Claims").
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
import torch
from .attacks import pgd_ce, pgd_ce_restarts
from .config import METHOD_NAMES, Config
from .data import AFT_CLASSES, Splits, Task, TextBank, load_digit_splits, zero_shot_suite
from .losses import dirichlet_alpha, dirichlet_kl, ucat_lambda
from .metrics import TaskEval, entropy, evaluate_task, summarize
from .model import PretrainResult, ToyCLIP, frozen_copy, pretrain_clip
from .train import FinetuneLog, adversarial_finetune

TASKS = ("T1", "T2", "T3", "T4")
MASK_STEPS, MASK_RESTARTS, MASK_FLAG = 50, 2, 0.05  # the gradient-masking check on T1 (card, "Pitfalls")
_PHASE = {"batches": 1, "eval": 2, "sweep": 3, "mask": 4, "aft_pgd": 5, "calibrate": 6}


def torch_gen(*key: int) -> torch.Generator:
    """A torch.Generator seeded from a SeedSequence over integer ``key``s (no global state)."""
    seed = int(np.random.SeedSequence(list(key)).generate_state(1, dtype=np.uint64)[0] % (2**63 - 1))
    return torch.Generator().manual_seed(seed)


@dataclass
class Setup:
    """What every seed shares: data, the zero-shot suite, the pre-trained toy CLIP and its text features."""

    splits: Splits
    suite: dict[str, Task]
    pretrain: PretrainResult
    G: dict[str, torch.Tensor]          # task → (C, 64) normalised class-prompt features
    x_aft: torch.Tensor                  # fine-tuning images: train split, digits 0–4
    y_aft: torch.Tensor
    val_suite: dict[str, Task]           # the same four tasks on the validation split (ε calibration)

    @property
    def clip(self) -> ToyCLIP:
        return self.pretrain.model


def build_setup(cfg: Config, bank: TextBank | None = None) -> Setup:
    """Load the digits, build the suite, pre-train (or load) the toy CLIP and embed every task's prompts."""
    splits = load_digit_splits()
    suite = zero_shot_suite(splits, cfg.t4_rotation_deg)
    bank = bank or TextBank()
    pre = pretrain_clip(splits, bank, cfg.pretrain_steps)
    with torch.no_grad():
        G = {k: pre.model.text_features(bank.embed(list(t.class_prompts))) for k, t in suite.items()}
    keep = np.isin(splits.y_train, AFT_CLASSES)
    val_suite = zero_shot_suite(splits, cfg.t4_rotation_deg, split="val")
    return Setup(splits, suite, pre, G, torch.from_numpy(splits.x_train[keep]), torch.from_numpy(splits.y_train[keep]),
                 val_suite)


# ------------------------------------------------------------------------------------------- calibration
@dataclass
class Calibration:
    """The ε calibration: the original model's suite-average robust accuracy per candidate radius (validation
    split) and the radius the rule chose (``None`` when no candidate reached the target)."""

    table: pd.DataFrame      # index eps; columns T1..T4 and "suite"
    max_rob_acc: float
    chosen: float | None
    given: bool              # True when eps_test was set by the user and the rule was not applied

    @property
    def eps(self) -> float:
        """The radius to use: the chosen one, else (no candidate qualified) the largest candidate."""
        return float(self.chosen if self.chosen is not None else self.table.index.max())

    def rule(self) -> str:
        if self.given:
            return f"ε_test = {self.eps:g} given as a parameter (no calibration)"
        return (f"smallest ε in {{{', '.join(f'{e:g}' for e in self.table.index)}}} at which the original model's "
                f"suite-average robust accuracy on the validation split is ≤ {self.max_rob_acc:g}")


def calibrate_eps(cfg: Config, setup: Setup, max_rob_acc: float = 0.3) -> Calibration:
    """Apply the calibration rule: PGD (``cfg.test_pgd_steps`` steps, step ε/4) against the *pre-trained* model
    on the validation split at every radius of ``cfg.eps_grid``; choose the smallest whose suite-average robust
    accuracy is ≤ ``max_rob_acc``. When ``cfg.eps_test`` is given, only that radius is measured."""
    grid = (cfg.eps_test,) if cfg.eps_test is not None else cfg.eps_grid
    rows = {}
    for ei, eps in enumerate(grid):
        accs = {}
        for ti, (name, task) in enumerate(setup.val_suite.items()):
            ev = evaluate_task(setup.clip, task.images, task.labels, setup.G[name], eps=eps, steps=cfg.test_pgd_steps,
                               generator=torch_gen(cfg.seed, _PHASE["calibrate"], ti, ei), name=name)
            accs[name] = summarize(ev)["rob_acc"]
        accs["suite"] = float(np.mean(list(accs.values())))
        rows[float(eps)] = accs
    table = pd.DataFrame(rows).T
    table.index.name = "eps"
    chosen = float(cfg.eps_test) if cfg.eps_test is not None else choose_eps(table["suite"].to_dict(), max_rob_acc)
    return Calibration(table, max_rob_acc, chosen, cfg.eps_test is not None)


def choose_eps(suite_rob_acc: dict[float, float], max_rob_acc: float) -> float | None:
    """The calibration rule on measured numbers: the smallest ε whose robust accuracy is ≤ ``max_rob_acc``."""
    ok = [eps for eps, acc in suite_rob_acc.items() if acc <= max_rob_acc]
    return float(min(ok)) if ok else None


@dataclass
class SeedRun:
    """Everything one seed produced (per-example outputs are kept for the figures)."""

    seed_index: int
    logs: dict[str, FinetuneLog] = field(default_factory=dict)
    evals: dict[tuple[str, str], TaskEval] = field(default_factory=dict)           # (method, task)
    sweep: dict[tuple[str, float, str], dict[str, float]] = field(default_factory=dict)  # (method, ε, task)
    masking: dict[str, dict[str, float]] = field(default_factory=dict)               # method → accuracies


def aft_generators(cfg: Config, s: int) -> tuple[torch.Generator, torch.Generator]:
    """(batch-order generator, training-attack generator) of seed index ``s``: the same for every method."""
    return torch_gen(cfg.seed, s, _PHASE["batches"]), torch_gen(cfg.seed, s, _PHASE["aft_pgd"])


def finetune(cfg: Config, setup: Setup, method: str, s: int, tau_rob: float | None = None):
    """Fine-tune ``method`` with seed index ``s``'s shared streams (common random numbers across methods)."""
    gb, ga = aft_generators(cfg, s)
    return adversarial_finetune(
        setup.clip, method, setup.x_aft, setup.y_aft, setup.G["T1"], steps=cfg.aft_steps, lr=cfg.aft_lr,
        eps=cfg.eps_train, pgd_steps=cfg.train_pgd_steps, tau=cfg.tau,
        tau_rob=cfg.tau_rob if tau_rob is None else tau_rob, generator=ga, batch_generator=gb)


def evaluate_suite(cfg: Config, setup: Setup, model, s: int) -> dict[str, TaskEval]:
    """Every task of the suite, clean and under PGD at ε_test, with seed index ``s``'s evaluation streams."""
    return {name: evaluate_task(model, task.images, task.labels, setup.G[name], eps=cfg.eps_test,
                                steps=cfg.test_pgd_steps, generator=torch_gen(cfg.seed, s, _PHASE["eval"], ti),
                                name=name)
            for ti, (name, task) in enumerate(setup.suite.items())}


def run_seed(cfg: Config, setup: Setup, s: int, log: Callable[[str], None] | None = None) -> SeedRun:
    """Fine-tune every method of ``cfg.methods`` with seed index ``s`` and evaluate it (suite, sweep, masking).

    ``cfg`` must be resolved (:meth:`Config.resolved`): ε_test, ε_train and the sweep set.
    """
    if cfg.eps_test is None or cfg.eps_train is None or cfg.eps_sweep is None:
        raise ValueError("run_seed needs a resolved config: cfg.resolved(calibration.eps)")
    run = SeedRun(s)
    T1 = setup.suite["T1"]
    for method in cfg.methods:
        if method == "orig":
            model = setup.clip
        else:
            model, run.logs[method] = finetune(cfg, setup, method, s)
        for name, ev in evaluate_suite(cfg, setup, model, s).items():
            run.evals[method, name] = ev
        if method in cfg.sweep_methods:
            for ti, (name, task) in enumerate(setup.suite.items()):
                for ei, eps in enumerate(cfg.eps_sweep):
                    if math.isclose(eps, cfg.eps_test):
                        ev = run.evals[method, name]  # the main evaluation is the sweep's ε_test point
                    else:
                        ev = evaluate_task(model, task.images, task.labels, setup.G[name], eps=eps,
                                           steps=cfg.test_pgd_steps,
                                           generator=torch_gen(cfg.seed, s, _PHASE["sweep"], ti, ei), name=name)
                    run.sweep[method, eps, name] = summarize(ev)
        robust = pgd_ce_restarts(model, T1.images, T1.labels, setup.G["T1"], eps=cfg.eps_test, steps=MASK_STEPS,
                                 step_size=cfg.eps_test / 4, restarts=MASK_RESTARTS,
                                 generator=torch_gen(cfg.seed, s, _PHASE["mask"]))
        pgd20 = summarize(run.evals[method, "T1"])["rob_acc"]
        run.masking[method] = {"pgd_main": pgd20, "pgd50x2": float(robust.float().mean()),
                               "drop": pgd20 - float(robust.float().mean())}
        if log:
            log(f"seed {s}: {method} done")
    return run


def tau_rob_panel(cfg: Config, setup: Setup, run: SeedRun, values: tuple[float, ...] | None = None) -> pd.DataFrame:
    """UCAT at several τ_rob with seed index ``run.seed_index``'s streams: suite-average metrics and the size of
    λ·KL against CE at the start (first 10 steps) and end (last 50) of fine-tuning. τ_rob = 0 is TeCoA and
    ``cfg.tau_rob`` is UCAT, both taken from ``run``; the others are fine-tuned here."""
    values = cfg.tau_rob_panel if values is None else values
    s = run.seed_index
    rows = []
    todo = sorted({0.0, float(cfg.tau_rob), *map(float, values)})
    for tr in todo:
        if tr == 0.0 and "tecoa" in run.logs:
            log, evals = run.logs["tecoa"], {t: run.evals["tecoa", t] for t in setup.suite}
        elif tr == float(cfg.tau_rob):
            log, evals = run.logs["ucat"], {t: run.evals["ucat", t] for t in setup.suite}
        else:
            model, log = finetune(cfg, setup, "ucat", s, tau_rob=tr)
            evals = evaluate_suite(cfg, setup, model, s)
        m = pd.DataFrame([summarize(ev) for ev in evals.values()]).mean()
        lam = ucat_lambda(cfg.tau, tr)
        reg0, reg1 = float(log.reg[:10].mean()), float(log.reg[-50:].mean())
        ce0, ce1 = float(log.ce[:10].mean()), float(log.ce[-50:].mean())
        rows.append({"tau_rob": tr, "lambda": lam, "λ·KL / CE (start)": reg0 / ce0, "λ·KL / CE (end)": reg1 / ce1,
                     "clean_acc": m.clean_acc, "rob_acc": m.rob_acc, "ece_adv": m.ece_adv, "H_adv": m.H_adv})
    return pd.DataFrame(rows).set_index("tau_rob")


# ------------------------------------------------------------------------------------------------- tables
def results_table(runs: list[SeedRun]) -> pd.DataFrame:
    """One row per (method, seed, task) with every metric of :func:`~repro.dirichlet_clip.metrics.summarize`."""
    rows = [{"method": m, "seed": r.seed_index, "task": t, **summarize(ev)} for r in runs for (m, t), ev in r.evals.items()]
    return pd.DataFrame(rows)


def sweep_table(runs: list[SeedRun]) -> pd.DataFrame:
    rows = [{"method": m, "seed": r.seed_index, "eps": e, "task": t, **v} for r in runs for (m, e, t), v in r.sweep.items()]
    return pd.DataFrame(rows)


def masking_table(runs: list[SeedRun]) -> pd.DataFrame:
    rows = [{"method": m, "seed": r.seed_index, **v} for r in runs for m, v in r.masking.items()]
    return pd.DataFrame(rows)


def collapse_table(runs: list[SeedRun], methods) -> pd.DataFrame:
    """Where the entropy goes under attack: per method and task, pooled over seeds, the fraction of examples
    the attack flips (right when clean, wrong under PGD) and the mean normalised entropy of flipped and
    unflipped examples, clean and adversarial. The phenomenon of C1 lives in the flipped ones."""
    rows = []
    for m in methods:
        tasks = sorted({t for r in runs for (mm, t) in r.evals if mm == m})
        for t in tasks:
            c = [r.evals[m, t].view("clean") for r in runs]
            a = [r.evals[m, t].view("adv") for r in runs]
            cc, ac = np.concatenate([v["correct"] for v in c]), np.concatenate([v["correct"] for v in a])
            hc, ha = np.concatenate([v["entropy"] for v in c]), np.concatenate([v["entropy"] for v in a])
            flip, kept = cc & ~ac, cc & ac
            rows.append({"method": m, "task": t, "flipped": float(flip.mean()),
                         "H clean (flipped)": float(hc[flip].mean()) if flip.any() else np.nan,
                         "H adv (flipped)": float(ha[flip].mean()) if flip.any() else np.nan,
                         "H clean (kept)": float(hc[kept].mean()) if kept.any() else np.nan,
                         "H adv (kept)": float(ha[kept].mean()) if kept.any() else np.nan})
    return pd.DataFrame(rows).set_index(["method", "task"])


def pretrain_summary(setup: Setup) -> pd.DataFrame:
    """Zero-shot accuracy, confidence, normalised entropy and cosine statistics of the pre-trained toy CLIP on the
    clean suite."""
    rows = {}
    with torch.no_grad():
        for name, task in setup.suite.items():
            cos = setup.clip.cos(task.images, setup.G[name])
            p = torch.softmax(setup.clip.scale * cos.double(), -1)
            rows[name] = {"task": task.description, "classes": task.n_classes, "images": len(task.labels),
                          "zero-shot acc": float((cos.argmax(1) == task.labels).float().mean()),
                          "mean confidence": float(p.max(1).values.mean()),
                          "mean H/log C": float(entropy(p).mean()),
                          "mean top cos": float(cos.max(1).values.mean()), "mean cos": float(cos.mean())}
    return pd.DataFrame(rows).T


def dirichlet_view(setup: Setup, cfg: Config, task: str = "T2", n: int = 3) -> pd.DataFrame:
    """The Dirichlet reading of a few images, clean and under the evaluation attack, by the pre-trained model:
    cosines, the pattern α/α₀ (semantic structure) and the strength log10 α₀ (confidence magnitude)."""
    t, G, model = setup.suite[task], setup.G[task], setup.clip
    x, y = t.images[:n], t.labels[:n]
    x_adv = pgd_ce(model, x, y, G, eps=cfg.eps_test, steps=cfg.test_pgd_steps, step_size=cfg.eps_test / 4,
                   generator=torch_gen(cfg.seed, 97))  # an illustration, own stream
    rows = []
    with torch.no_grad():
        for name, xx in (("clean", x), ("PGD", x_adv)):
            cos = model.cos(xx, G)
            a = dirichlet_alpha(cos, cfg.tau)
            for i in range(n):
                rows.append({"image": i, "true class": t.class_prompts[int(y[i])].split()[-1], "input": name,
                             "predicted": t.class_prompts[int(cos[i].argmax())].split()[-1],
                             "cos": np.round(cos[i].numpy(), 2).tolist(),
                             "α/α₀": np.round((a[i] / a[i].sum()).numpy(), 3).tolist(),
                             "log10 α₀": round(float(torch.log10(a[i].sum())), 2)})
    return pd.DataFrame(rows).set_index(["image", "input"])


def loss_scale_table(setup: Setup, cfg: Config, target_top_cos: float = 0.3) -> pd.DataFrame:
    """Size of UCAT's λ·KL term at the start of fine-tuning (θ = θ0) on T1 with the training attack, for the
    toy's cosines and for the same cosines shifted down to real CLIP's level (mean top cosine ≈ 0.3), in
    float64 and float32, with the CE term for scale — in value and in gradient: the norm of each term's
    gradient with respect to the image encoder's parameters (what the optimiser actually follows)."""
    t, G, clip = setup.suite["T1"], setup.G["T1"], setup.clip
    x_adv = pgd_ce(clip, t.images, t.labels, G, eps=cfg.eps_train, steps=cfg.train_pgd_steps,
                   step_size=cfg.eps_train, generator=torch_gen(cfg.seed, 98))
    model = frozen_copy(clip)
    params = list(model.image_enc.parameters())
    for p in params:
        p.requires_grad_(True)
    cos_adv = model.cos(x_adv, G)
    with torch.no_grad():
        c0 = clip.cos(t.images, G).double()
    ce_t = torch.nn.functional.cross_entropy(model.scale * cos_adv, t.labels)
    g_ce = torch.sqrt(sum((g.double() ** 2).sum() for g in torch.autograd.grad(ce_t, params, retain_graph=True)))
    ca = cos_adv.double()
    lam = ucat_lambda(cfg.tau, cfg.tau_rob)
    top = float(c0.max(1).values.mean())
    rows = {}
    for name, shift in (("toy CLIP (measured cosines)", 0.0), (f"shifted to mean top cos {target_top_cos}",
                                                                target_top_cos - top)):
        a, b = dirichlet_alpha(ca + shift, cfg.tau), dirichlet_alpha(c0 + shift, cfg.tau)
        kl = lam * dirichlet_kl(a, b).mean()
        g_kl = torch.sqrt(sum((g ** 2).sum() for g in torch.autograd.grad(kl, params, retain_graph=True)))
        kl32 = dirichlet_kl(a.detach(), b, dtype=torch.float32).mean().item()
        rows[name] = {"mean top cos": top + shift, "max α": float(b.max()), "λ": lam, "λ·KL (float64)": kl.item(),
                      "λ·KL (float32)": lam * kl32, "CE (adv)": ce_t.item(),
                      "‖∇λ·KL‖ / ‖∇CE‖": (g_kl / g_ce).item()}
    return pd.DataFrame(rows).T


def float32_kl_error(tau: float, gaps=(1e-1, 1e-2, 1e-3, 1e-4), n: int = 500, C: int = 5) -> pd.DataFrame:
    """Why the Dirichlet KL runs in float64: the closed form in float32 against float64, for cosine patterns
    c0 ~ U[0.2, 0.8] and c = c0 + gap·N(0, 1) (an adversarial image close to its anchor, late in training)."""
    g = torch.Generator().manual_seed(0)
    c0 = 0.2 + 0.6 * torch.rand(n, C, generator=g, dtype=torch.float64)
    rows = []
    for gap in gaps:
        c = c0 + gap * torch.randn(n, C, generator=g, dtype=torch.float64)
        a, b = dirichlet_alpha(c, tau), dirichlet_alpha(c0, tau)
        k64 = dirichlet_kl(a, b)
        k32 = dirichlet_kl(a, b, dtype=torch.float32).double()
        err = (k32 - k64).abs()
        rows.append({"cosine gap": gap, "median KL (float64)": float(k64.median()),
                     "median |float32 − float64|": float(err.median()),
                     "median relative error": float((err / k64).median()),
                     "float32 KL < 0 (fraction)": float((k32 < 0).double().mean())})
    return pd.DataFrame(rows).set_index("cosine gap")


def strength_table(runs: list[SeedRun], tau: float, methods) -> pd.DataFrame:
    """Dirichlet strength log10 α₀ (training parameterisation, all tasks pooled, mean over seeds): clean, under
    PGD, and the mean gap |log10 α₀_θ(x+δ) − log10 α₀_θ0(x)| between a model's attacked strength and the frozen
    model's clean strength on the same image — the gap UCAT's KL penalises. Needs "orig" among the runs."""
    rows = {}
    for m in methods:
        clean, adv, gap = [], [], []
        for r in runs:
            tasks = sorted({t for (mm, t) in r.evals if mm == m})
            for t in tasks:
                c = np.log10(r.evals[m, t].strength("clean", tau))
                a = np.log10(r.evals[m, t].strength("adv", tau))
                c0 = np.log10(r.evals["orig", t].strength("clean", tau))
                clean.append(c), adv.append(a), gap.append(np.abs(a - c0))
        rows[m] = {"log10 α₀ clean": float(np.concatenate(clean).mean()),
                   "log10 α₀ PGD": float(np.concatenate(adv).mean()),
                   "|PGD − frozen clean|": float(np.concatenate(gap).mean())}
    return pd.DataFrame(rows).T


def original_clean_entropy(runs: list[SeedRun]) -> dict[str, np.ndarray]:
    """Per-example normalised clean entropy H/log C of the pre-trained model on each task (K3). Clean outputs of
    the frozen model do not depend on the seed, so the first run's are everyone's."""
    r = runs[0]
    return {t: r.evals["orig", t].view("clean")["entropy"] for t in sorted({t for (m, t) in r.evals if m == "orig"})}


def per_task_table(results: pd.DataFrame, methods, cols=("rob_acc", "ece_adv")) -> pd.DataFrame:
    """'mean ± 95% half-width over seeds' of ``cols`` per method (rows) and task (columns)."""
    from repro.common import mean_ci
    out = {}
    for m in methods:
        d = results[results.method == m]
        row = {}
        for c in cols:
            for t, g in d.groupby("task"):
                v = g.sort_values("seed")[c].to_numpy()
                mu, h = mean_ci(v)
                h = float(h)
                row[(c, t)] = f"{float(mu):.3f}" if (len(v) < 2 or h == 0 or math.isnan(h)) else f"{float(mu):.3f} ± {h:.3f}"
        out[m] = row
    df = pd.DataFrame(out).T
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    return df


def t4_diagnosis(runs: list[SeedRun], sweep: pd.DataFrame, method: str = "tecoa") -> dict[str, float]:
    """Why T4 can carry no robustness at ε_test: ``method``'s robust accuracy on T1 (digits 0–4, upright) against the
    same classes rotated inside T4, the original model's clean accuracy on T4 against T1, and ``method``'s robust
    accuracy on T4 over the ε-sweep (means over seeds; NaN where the sweep did not run ``method``)."""
    rob_t1, rob_t4_seen, clean_t4, clean_t1 = [], [], [], []
    for r in runs:
        if (method, "T4") not in r.evals:
            continue
        ev = r.evals[method, "T4"]
        seen = ev.labels <= 4
        rob_t4_seen.append(ev.view("adv")["correct"][seen].mean())
        rob_t1.append(r.evals[method, "T1"].view("adv")["correct"].mean())
        clean_t4.append(r.evals["orig", "T4"].view("clean")["correct"].mean())
        clean_t1.append(r.evals["orig", "T1"].view("clean")["correct"].mean())
    out = {"rob T1": float(np.mean(rob_t1)), "rob T4 digits 0-4": float(np.mean(rob_t4_seen)),
           "orig clean T1": float(np.mean(clean_t1)), "orig clean T4": float(np.mean(clean_t4))}
    if len(sweep) and method in set(sweep.method):
        d = sweep[(sweep.method == method) & (sweep.task == "T4")].groupby("eps").rob_acc.mean()
        out.update({f"rob T4 at eps {e:g}": float(v) for e, v in d.items()})
    return out


def suite_average(results: pd.DataFrame) -> pd.DataFrame:
    """Suite-average metrics per (method, seed): the mean over the 4 tasks."""
    return results.drop(columns="task").groupby(["method", "seed"], sort=False).mean()


def loss_ratio(runs: list[SeedRun], method: str = "ucat", last: int = 50) -> dict[str, float]:
    """UCAT's λ·KL and CE at the start (first 10 steps) and end (last ``last`` steps), averaged over seeds."""
    logs = [r.logs[method] for r in runs if method in r.logs]
    if not logs:
        return {}
    ce0 = float(np.mean([l.ce[:10].mean() for l in logs]))
    reg0 = float(np.mean([l.reg[:10].mean() for l in logs]))
    ce1 = float(np.mean([l.ce[-last:].mean() for l in logs]))
    reg1 = float(np.mean([l.reg[-last:].mean() for l in logs]))
    return {"lambda": logs[0].lam, "ce_start": ce0, "reg_start": reg0, "ratio_start": reg0 / ce0,
            "ce_end": ce1, "reg_end": reg1, "ratio_end": reg1 / ce1}


