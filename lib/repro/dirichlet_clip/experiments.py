"""Chapter 07's experiment: pre-train once, fine-tune every method per seed, evaluate on the zero-shot suite
under attack, sweep ε, check for gradient masking, and turn the numbers into the card's claims C1–C6.

Seeds: seed index ``s`` of a run with master seed ``cfg.seed`` draws its batch orders, training-PGD starts and
evaluation-attack starts from ``SeedSequence([cfg.seed, s, purpose, method, task])``; the data, the
pre-trained model and the text embeddings are the same for every seed (card, "Claims").

Decision rule (card): a claim holds if its condition holds on the seed-mean numbers *and* in at least 2 of 3
seeds (in general ⌈2n/3⌉ of n). With fewer than 3 seeds the rule cannot be applied and the claim is
recorded as inconclusive, its condition kept for information.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
import torch
from scipy import stats as st

from repro.common import mean_ci

from .attacks import pgd_ce, pgd_ce_restarts
from .config import METHOD_NAMES, Config
from .data import AFT_CLASSES, Splits, Task, TextBank, load_digit_splits, zero_shot_suite
from .losses import dirichlet_alpha, dirichlet_kl, ucat_lambda
from .metrics import TaskEval, evaluate_task, summarize
from .model import PretrainResult, ToyCLIP, pretrain_clip
from .train import FinetuneLog, adversarial_finetune

TASKS = ("T1", "T2", "T3", "T4")
MASK_STEPS, MASK_RESTARTS, MASK_FLAG = 50, 2, 0.05  # the gradient-masking check on T1 (card, "Pitfalls")
_PURPOSE = {"aft": 1, "eval": 2, "sweep": 3, "mask": 4}


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
    return Setup(splits, suite, pre, G, torch.from_numpy(splits.x_train[keep]), torch.from_numpy(splits.y_train[keep]))


@dataclass
class SeedRun:
    """Everything one seed produced (per-example outputs are kept for the figures)."""

    seed_index: int
    logs: dict[str, FinetuneLog] = field(default_factory=dict)
    evals: dict[tuple[str, str], TaskEval] = field(default_factory=dict)           # (method, task)
    sweep: dict[tuple[str, float, str], dict[str, float]] = field(default_factory=dict)  # (method, ε, task)
    masking: dict[str, dict[str, float]] = field(default_factory=dict)               # method → accuracies


def run_seed(cfg: Config, setup: Setup, s: int, log: Callable[[str], None] | None = None) -> SeedRun:
    """Fine-tune every method of ``cfg.methods`` with seed index ``s`` and evaluate it (suite, sweep, masking)."""
    run = SeedRun(s)
    T1 = setup.suite["T1"]
    for mi, method in enumerate(cfg.methods):
        mid = METHOD_NAMES.index(method)
        if method == "orig":
            model = setup.clip
        else:
            model, run.logs[method] = adversarial_finetune(
                setup.clip, method, setup.x_aft, setup.y_aft, setup.G["T1"], steps=cfg.aft_steps, lr=cfg.aft_lr,
                eps=cfg.eps_train, pgd_steps=cfg.train_pgd_steps, tau=cfg.tau, tau_rob=cfg.tau_rob,
                generator=torch_gen(cfg.seed, s, _PURPOSE["aft"], mid))
        for ti, (name, task) in enumerate(setup.suite.items()):
            run.evals[method, name] = evaluate_task(
                model, task.images, task.labels, setup.G[name], eps=cfg.eps_test, steps=cfg.test_pgd_steps,
                generator=torch_gen(cfg.seed, s, _PURPOSE["eval"], mid, ti), name=name)
            if method in cfg.sweep_methods:
                for ei, eps in enumerate(cfg.eps_sweep):
                    if math.isclose(eps, cfg.eps_test):
                        ev = run.evals[method, name]  # the main evaluation is the sweep's ε_test point
                    else:
                        ev = evaluate_task(model, task.images, task.labels, setup.G[name], eps=eps,
                                           steps=cfg.test_pgd_steps,
                                           generator=torch_gen(cfg.seed, s, _PURPOSE["sweep"], mid, ti, ei), name=name)
                    run.sweep[method, eps, name] = summarize(ev)
        robust = pgd_ce_restarts(model, T1.images, T1.labels, setup.G["T1"], eps=cfg.eps_test, steps=MASK_STEPS,
                                 step_size=cfg.eps_test / 4, restarts=MASK_RESTARTS,
                                 generator=torch_gen(cfg.seed, s, _PURPOSE["mask"], mid))
        pgd20 = summarize(run.evals[method, "T1"])["rob_acc"]
        run.masking[method] = {"pgd_main": pgd20, "pgd50x2": float(robust.float().mean()),
                               "drop": pgd20 - float(robust.float().mean())}
        if log:
            log(f"seed {s}: {method} done")
    return run


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
    """Zero-shot accuracy and cosine statistics of the pre-trained toy CLIP on the clean suite."""
    rows = {}
    with torch.no_grad():
        for name, task in setup.suite.items():
            cos = setup.clip.cos(task.images, setup.G[name])
            rows[name] = {"task": task.description, "classes": task.n_classes, "images": len(task.labels),
                          "zero-shot acc": float((cos.argmax(1) == task.labels).float().mean()),
                          "mean top cos": float(cos.max(1).values.mean()), "mean cos": float(cos.mean())}
    return pd.DataFrame(rows).T


def dirichlet_view(setup: Setup, cfg: Config, task: str = "T2", n: int = 3) -> pd.DataFrame:
    """The Dirichlet reading of a few images, clean and under the evaluation attack, by the pre-trained model:
    cosines, the pattern α/α₀ (semantic structure) and the strength log10 α₀ (confidence magnitude)."""
    t, G, model = setup.suite[task], setup.G[task], setup.clip
    x, y = t.images[:n], t.labels[:n]
    x_adv = pgd_ce(model, x, y, G, eps=cfg.eps_test, steps=cfg.test_pgd_steps, step_size=cfg.eps_test / 4,
                   generator=torch_gen(cfg.seed, 97))
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
    float64 and float32. The CE term is shown for scale."""
    t, G, model = setup.suite["T1"], setup.G["T1"], setup.clip
    x_adv = pgd_ce(model, t.images, t.labels, G, eps=cfg.eps_train, steps=cfg.train_pgd_steps,
                   step_size=cfg.eps_train, generator=torch_gen(cfg.seed, 98))
    with torch.no_grad():
        c0, ca = model.cos(t.images, G).double(), model.cos(x_adv, G).double()
        ce = float(torch.nn.functional.cross_entropy(model.scale * ca.float(), t.labels))
    lam = ucat_lambda(cfg.tau, cfg.tau_rob)
    top = float(c0.max(1).values.mean())
    rows = {}
    for name, shift in (("toy CLIP (measured cosines)", 0.0), (f"shifted to mean top cos {target_top_cos}",
                                                                target_top_cos - top)):
        a, b = dirichlet_alpha(ca + shift, cfg.tau), dirichlet_alpha(c0 + shift, cfg.tau)
        kl64 = dirichlet_kl(a, b).mean().item()
        kl32 = dirichlet_kl(a, b, dtype=torch.float32).mean().item()
        rows[name] = {"mean top cos": top + shift, "max α": float(b.max()), "λ": lam, "λ·KL (float64)": lam * kl64,
                      "λ·KL (float32)": lam * kl32, "CE (adv)": ce}
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


# ------------------------------------------------------------------------------------------------- claims
@dataclass
class Verdict:
    """A claim's condition on the seed-mean numbers and per seed, and the card's decision."""

    holds: bool | None
    numbers: dict
    inconclusive: str | None = None


def seeds_needed(n: int) -> int:
    """⌈2n/3⌉: "in ≥ 2 of 3 seeds", generalised."""
    return math.ceil(2 * n / 3)


def decide(mean_ok: bool, seed_ok: list[bool], numbers: dict, why_not: str | None = None) -> Verdict:
    """The card's rule: the condition holds on the mean and in ≥ ⌈2n/3⌉ seeds; < 3 seeds → inconclusive."""
    n = len(seed_ok)
    numbers = {**numbers, "mean condition": bool(mean_ok), "seeds meeting it": f"{sum(bool(v) for v in seed_ok)} of {n}"}
    holds = bool(mean_ok) and int(sum(bool(v) for v in seed_ok)) >= seeds_needed(n)
    if why_not:
        return Verdict(holds, numbers, why_not)
    if n < 3:
        return Verdict(holds, numbers, f"the card's rule (mean and ≥ 2 of 3 seeds) needs 3 seeds; this run has {n}")
    return Verdict(holds, numbers)


def _paired_ci(a: np.ndarray, b: np.ndarray) -> list[float]:
    """[lo, hi] of the mean paired difference a − b over seeds (a point when there is one seed)."""
    mu, half = mean_ci(np.asarray(a, float) - np.asarray(b, float))
    return [float(mu - half), float(mu + half)]


def _per_seed(avg: pd.DataFrame, method: str, col: str) -> np.ndarray:
    return avg.xs(method, level="method")[col].to_numpy()


def claim_c1(results: pd.DataFrame, models: tuple[str, ...] = ("orig", "tecoa"), min_tasks: int = 3,
             ece_factor: float = 2.0) -> Verdict:
    """C1: on PGD inputs entropy falls below clean on ≥ 3 of 4 tasks while accuracy drops; ECE_adv ≥ 2 ECE_clean."""
    def cond(df: pd.DataFrame) -> tuple[bool, dict]:
        out, ok = {}, True
        for m in models:
            d = df[df.method == m].groupby("task").mean(numeric_only=True)
            n_collapse = int(((d.H_adv < d.H_clean) & (d.rob_acc < d.clean_acc)).sum())
            ratio = float(d.ece_adv.mean() / max(d.ece_clean.mean(), 1e-12))
            out[f"{m}: tasks with H_adv < H_clean and acc drop"] = n_collapse
            out[f"{m}: ECE_adv / ECE_clean"] = ratio
            out[f"{m}: H clean→adv (suite)"] = [float(d.H_clean.mean()), float(d.H_adv.mean())]
            ok &= n_collapse >= min_tasks and ratio >= ece_factor
        return ok, out

    mean_ok, numbers = cond(results)
    seeds = sorted(results.seed.unique())
    seed_ok = [cond(results[results.seed == s])[0] for s in seeds]
    return decide(mean_ok, seed_ok, numbers)


def claim_c2(results: pd.DataFrame, rel: float = 0.25) -> Verdict:
    """C2: UCAT's suite-average adversarial ECE ≥ 25% below TeCoA's and below PMG-AFT's and FARE's."""
    avg = suite_average(results)
    present = set(results.method)
    missing = [m for m in ("pmg_aft", "fare") if m not in present]
    others = [m for m in ("tecoa", "pmg_aft", "fare") if m in present]
    e = {m: _per_seed(avg, m, "ece_adv") for m in ["ucat", *others]}

    def ok(i: slice | int) -> bool:
        u = np.mean(e["ucat"][i])
        return bool(u <= (1 - rel) * np.mean(e["tecoa"][i]) and all(u < np.mean(e[m][i]) for m in others[1:]))

    numbers = {f"ECE_adv {m}": float(v.mean()) for m, v in e.items()}
    numbers["relative reduction vs TeCoA"] = float(1 - e["ucat"].mean() / e["tecoa"].mean())
    numbers["UCAT − TeCoA, 95% CI over seeds"] = _paired_ci(e["ucat"], e["tecoa"])
    why = f"baselines {missing} were not run (methods parameter)" if missing else None
    return decide(ok(slice(None)), [ok(i) for i in range(len(e["ucat"]))], numbers, why)


def claim_c3(results: pd.DataFrame, margin: float = 0.03) -> Verdict:
    """C3: UCAT's suite-average robust accuracy ≥ TeCoA's − 3 points."""
    avg = suite_average(results)
    u, t = _per_seed(avg, "ucat", "rob_acc"), _per_seed(avg, "tecoa", "rob_acc")
    numbers = {"robust acc UCAT": float(u.mean()), "robust acc TeCoA": float(t.mean()),
               "UCAT − TeCoA": float(u.mean() - t.mean())}
    return decide(u.mean() >= t.mean() - margin, list(u >= t - margin), numbers)


def claim_c4(results: pd.DataFrame, within: float = 0.08) -> Verdict:
    """C4: UCAT's suite-average clean accuracy ≥ TeCoA's and within 8 points of the original model's."""
    avg = suite_average(results)
    u, t, o = (_per_seed(avg, m, "clean_acc") for m in ("ucat", "tecoa", "orig"))
    numbers = {"clean acc UCAT": float(u.mean()), "clean acc TeCoA": float(t.mean()), "clean acc original": float(o.mean()),
               "UCAT − TeCoA": float(u.mean() - t.mean()), "UCAT − original": float(u.mean() - o.mean())}

    def ok(a, b, c) -> bool:
        return bool(a >= b and abs(a - c) <= within)

    return decide(ok(u.mean(), t.mean(), o.mean()), [ok(*v) for v in zip(u, t, o)], numbers)


def spearman_over_tasks(sw: pd.DataFrame, method: str) -> float:
    """Spearman ρ between ε and mean entropy, per task, averaged over tasks (ties/constant curves → ρ = 0)."""
    d = sw[sw.method == method].groupby(["task", "eps"]).H_adv.mean().reset_index()
    rhos = []
    for _, g in d.groupby("task"):
        rho = st.spearmanr(g.eps, g.H_adv).statistic if g.H_adv.nunique() > 1 else 0.0
        rhos.append(0.0 if np.isnan(rho) else float(rho))
    return float(np.mean(rhos))


def claim_c5(sweep: pd.DataFrame, eps_sweep: tuple[float, ...], rho_min: float = 0.8) -> Verdict:
    """C5: entropy rises with ε for UCAT (mean Spearman ρ ≥ 0.8) but not for TeCoA (ρ < 0.8)."""
    present = set(sweep.method) if len(sweep) else set()
    if not {"ucat", "tecoa"} <= present:
        rho_u = spearman_over_tasks(sweep, "ucat") if "ucat" in present else float("nan")
        return Verdict(None, {"rho UCAT": rho_u},
                       f"the ε-sweep ran for {sorted(present)} only; both halves need UCAT and TeCoA")
    why = None
    if len(eps_sweep) < 3:
        why = f"a rank correlation over {len(eps_sweep)} radii is not informative (the card uses 4)"

    def ok(df: pd.DataFrame) -> tuple[bool, float, float]:
        ru, rt = spearman_over_tasks(df, "ucat"), spearman_over_tasks(df, "tecoa")
        return ru >= rho_min and rt < rho_min, ru, rt

    mean_ok, ru, rt = ok(sweep)
    seeds = sorted(sweep.seed.unique())
    per = [ok(sweep[sweep.seed == s]) for s in seeds]
    numbers = {"rho UCAT (seed-mean curves)": ru, "rho TeCoA (seed-mean curves)": rt,
               "rho UCAT per seed": [p[1] for p in per], "rho TeCoA per seed": [p[2] for p in per]}
    return decide(mean_ok, [p[0] for p in per], numbers, why)


def claim_c6(results: pd.DataFrame) -> Verdict:
    """C6: the softmax-KL ablation has higher suite-average adversarial ECE than UCAT."""
    if "softmax_kl" not in set(results.method):
        return Verdict(None, {}, "the softmax-KL ablation was not run (methods parameter)")
    avg = suite_average(results)
    u, a = _per_seed(avg, "ucat", "ece_adv"), _per_seed(avg, "softmax_kl", "ece_adv")
    numbers = {"ECE_adv UCAT": float(u.mean()), "ECE_adv softmax-KL": float(a.mean()),
               "softmax-KL − UCAT, 95% CI over seeds": _paired_ci(a, u)}
    return decide(a.mean() > u.mean(), list(a > u), numbers)
