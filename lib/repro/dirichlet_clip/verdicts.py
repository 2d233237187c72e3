"""The verdicts of chapter 07: the card's claims C1–C6, the controls K1–K2 they rest on, and the functions that
decide them from the measured tables (:func:`~repro.dirichlet_clip.experiments.results_table` and
:func:`~repro.dirichlet_clip.experiments.sweep_table`).

Each function returns the keyword arguments of ``ledger.control`` or ``ledger.record`` (holds, threshold,
numbers, reason, and for claims ``inconclusive`` and ``needs``); the notebook only passes them on.

Every claim is decided by intervals over the seeds (issue 41): a seed re-draws the fine-tuning batches, the
training attack's starts and the evaluation attack's starts, while the data, the test split and the pre-trained
model are the same for every seed, so the seed is the unit whose variation an interval must cover.

* **thresholds and comparisons** — a claim's condition "statistic ≥ bar" holds only when the 95% interval clears
  the bar, fails only when it lies wholly on the other side, and is otherwise inconclusive (within noise of the
  bar). Paired differences between methods use :func:`repro.common.compare_paired` (the methods share their
  random streams, so the pairing is real): "lower than" holds on ``better`` and fails on ``worse``; a "no worse
  than by m" is :func:`repro.common.stats.threshold_from_ci` of the paired interval against −m. A claim with
  several parts holds when every part holds and fails when any part fails.
* **the card's seed rule** — the condition on the seed means and in at least ⌈2n/3⌉ of the n seeds ("2 of 3") —
  is a further condition for ``holds``, never a reason for ``fails`` (a count missed inside seed noise decides
  nothing); with fewer than 3 seeds it cannot be applied and the claim is inconclusive.

Controls: **K1** the attack degrades the undefended model as it does real CLIP at 1/255 (the paper's setting);
**K2** adversarial fine-tuning moves the model. C3 and C4 ("no worse than TeCoA") mean nothing when no model
moved, so they need K2; every claim about behaviour under attack needs K1.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as st

from repro.common import compare_paired
from repro.common.stats import ThresholdTest, decide_threshold, threshold_from_ci

CLAIMS: dict[str, str] = {
    "C1": "For the pretrained toy CLIP and for TeCoA, mean predictive entropy on PGD inputs is lower than on clean "
          "inputs on ≥ 3 of 4 suite tasks, while accuracy drops; adversarial ECE ≥ 2× clean ECE.",
    "C2": "UCAT's adversarial ECE averaged over the suite is ≥ 25% (relative) lower than TeCoA's and lower than "
          "PMG-AFT's and FARE's.",
    "C3": "UCAT's suite-average robust accuracy ≥ TeCoA's − 3 points.",
    "C4": "UCAT's suite-average clean accuracy ≥ TeCoA's and is within 8 points of the original model.",
    "C5": "Mean entropy over ε ∈ {0, ε/2, ε, 2ε} is non-decreasing for UCAT (Spearman ρ ≥ 0.8 on the 4 points, "
          "averaged over tasks), but not for TeCoA (ρ < 0.8).",
    "C6": "Ablation softmax-KL (same anchor and direction, KL(softmax(s·cos_θ(x+δ)) ‖ softmax(s·cos_θ0(x))), weight 1) "
          "gives higher adversarial ECE than UCAT.",
}

CONTROLS: dict[str, str] = {
    "K1": "The attack degrades the undefended model: the pre-trained toy CLIP's suite-average robust accuracy under "
          "the evaluation PGD at ε_test is ≤ 0.3 (real CLIP at the paper's 1/255 is near 0).",
    "K2a": "Adversarial fine-tuning moves the model on T1 (the fine-tuning classes): TeCoA's robust accuracy exceeds "
           "the original model's by ≥ 10 points, with the paired 95% CI over seeds above 0.",
    "K2b": "The same on T2 (digits 5–9, classes unseen in fine-tuning): TeCoA − original robust accuracy ≥ 10 points, "
           "paired 95% CI above 0.",
    "K2c": "The same on T3 (parity, a label space unseen in fine-tuning): ≥ 10 points, paired 95% CI above 0.",
    "K2d": "The same on T4 (all digits rotated, a distribution shift): ≥ 10 points, paired 95% CI above 0.",
    "K2": "Adversarial fine-tuning moves the model zero-shot: K2a passes and at least one zero-shot task (T2–T4) "
          "passes its K2b–K2d. The claims about fine-tuned models are decided on the tasks that passed their K2x "
          "(the claims' suite); a task where TeCoA gains no robustness tests nothing about a defence.",
    "K3": "The frozen model is uncertain on clean inputs: the pre-trained toy CLIP's mean normalised predictive "
          "entropy H/log C on clean test images is ≥ 0.15 on every task (95% t interval over images above 0.15), "
          "so an attack can lower it (C1) and an anchor to it can carry uncertainty (C2, C5, C6).",
}

K2_TASKS = {"K2a": "T1", "K2b": "T2", "K2c": "T3", "K2d": "T4"}
ZERO_SHOT_TASKS = ("T2", "T3", "T4")
K3_MIN_ENTROPY = 0.15   # K3: mean clean H / log C of the original model, every task
K1_MAX_ROB = 0.3        # K1, and the calibration rule that chooses ε_test
K2_MIN_GAIN = 0.10      # K2: TeCoA − original, suite-average robust accuracy
C2_REL = 0.25           # C2: relative ECE reduction against TeCoA
C3_MARGIN = 0.03        # C3: "≥ TeCoA's − 3 points"
C4_WITHIN = 0.08        # C4: within 8 points of the original model
C4_MARGIN = 0.01        # C4: "no worse than TeCoA" margin (the card gives none; a third of C3's)
C5_RHO = 0.8            # C5: Spearman threshold
C1_MIN_TASKS, C1_ECE_FACTOR = 3, 2.0


# --------------------------------------------------------------------------------------------- helpers
def suite_average(results: pd.DataFrame) -> pd.DataFrame:
    """Suite-average metrics per (method, seed): the mean over the tasks."""
    return results.drop(columns="task").groupby(["method", "seed"], sort=False).mean()


def per_seed(results: pd.DataFrame, method: str, col: str) -> np.ndarray:
    """Suite-average ``col`` of ``method``, one value per seed (in seed order)."""
    avg = suite_average(results)
    return avg.xs(method, level="method").sort_index()[col].to_numpy()


def seeds_needed(n: int) -> int:
    """⌈2n/3⌉: "in ≥ 2 of 3 seeds", generalised."""
    return math.ceil(2 * n / 3)


def seed_rule(mean_ok: bool, seed_ok: list[bool]) -> tuple[bool, dict[str, Any], str | None]:
    """The card's rule: the condition on the seed means and in ≥ ⌈2n/3⌉ seeds; fewer than 3 seeds → undecidable.

    Its first value is a further condition for ``holds`` only (issue 41): a count missed inside seed noise decides
    nothing, so ``fails`` comes from an interval lying wholly on the other side (see :func:`_decide`)."""
    n, k = len(seed_ok), int(sum(bool(v) for v in seed_ok))
    numbers = {"mean condition": bool(mean_ok), "seeds meeting it": f"{k} of {n}"}
    why = None if n >= 3 else f"the card's rule (seed mean and ≥ 2 of 3 seeds) needs 3 seeds; this run has {n}"
    return bool(mean_ok) and k >= seeds_needed(n), numbers, why


def _pts(x: float) -> str:
    return f"{100 * x:+.1f} points"


def _claim(holds, threshold, numbers, reason, needs, inconclusive=None) -> dict[str, Any]:
    return {"holds": bool(holds) if holds is not None else None, "threshold": threshold, "numbers": numbers,
            "reason": reason, "inconclusive": inconclusive, "needs": tuple(needs)}


# --------------------------------------------------------------------------------------------- controls
def control_k1(results: pd.DataFrame, eps_test: float, max_rob: float = K1_MAX_ROB) -> dict[str, Any]:
    """K1: the original model's suite-average robust accuracy at ε_test is ≤ ``max_rob`` on the mean and every seed."""
    r = per_seed(results, "orig", "rob_acc")
    c = per_seed(results, "orig", "clean_acc")
    holds = bool(r.mean() <= max_rob and np.all(r <= max_rob))
    numbers = {"eps_test": eps_test, "original clean acc": float(c.mean()), "original robust acc": float(r.mean()),
               "robust acc per seed": r.tolist()}
    reason = (f"at ε_test = {eps_test:g} the undefended model keeps {r.mean():.3f} robust accuracy "
              f"(max over seeds {r.max():.3f}; ≤ {max_rob:g} needed): the attack does not degrade it as it does "
              f"real CLIP, so nothing here can show what the paper's attack does")
    return {"holds": holds, "threshold": f"robust acc(original) ≤ {max_rob:g} (mean and every seed)",
            "numbers": numbers, "reason": reason}


def _k2_gain(results: pd.DataFrame, min_gain: float, what: str) -> dict[str, Any]:
    t, o = per_seed(results, "tecoa", "rob_acc"), per_seed(results, "orig", "rob_acc")
    cmp = compare_paired(t, o, higher_is_better=True)
    holds = bool(cmp.mean_diff >= min_gain and cmp.ci_lo > 0)
    numbers = {"robust acc TeCoA": float(t.mean()), "robust acc original": float(o.mean()),
               **cmp.numbers("TeCoA − original")}
    gain = f"TeCoA's {what} robust accuracy is {_pts(cmp.mean_diff)} from the original model's"
    if cmp.n < 2:
        reason = (f"{gain}, but {cmp.n} seed gives no confidence interval over seeds: the gain cannot be told "
                  "from seed noise")
    elif cmp.mean_diff < min_gain:
        reason = (f"{gain} (≥ {100 * min_gain:.0f} needed): fine-tuning barely moved the model, so comparisons "
                  "between fine-tuned models say little")
    else:
        reason = (f"{gain}, but its 95% CI [{cmp.ci_lo:+.3f}, {cmp.ci_hi:+.3f}] over {cmp.n} seeds does not lie "
                  "above 0: the gain is not distinguishable from seed noise")
    return {"holds": holds, "threshold": f"robust acc(TeCoA) − robust acc(original) ≥ {min_gain:g}, paired 95% CI > 0",
            "numbers": numbers, "reason": reason}


def control_k2_task(results: pd.DataFrame, task: str, min_gain: float = K2_MIN_GAIN) -> dict[str, Any]:
    """K2a–K2d: TeCoA − original robust accuracy on one ``task`` ≥ ``min_gain``, paired CI over seeds above 0."""
    return _k2_gain(results[results.task == task], min_gain, f"{task}")


def control_k2(results: pd.DataFrame, min_gain: float = K2_MIN_GAIN) -> dict[str, Any]:
    """K2: K2a (T1) passes and at least one zero-shot task passes its per-task control; numbers per task.

    The claims' suite (:func:`claims_suite`) is the tasks that passed; its suite-average gain is reported too."""
    per = {k: control_k2_task(results, t, min_gain) for k, t in K2_TASKS.items() if t in set(results.task)}
    passed = [K2_TASKS[k] for k, v in per.items() if v["holds"]]
    zs = [t for t in passed if t in ZERO_SHOT_TASKS]
    holds = "T1" in passed and bool(zs)
    numbers = {f"{t}: TeCoA − original": [per[k]["numbers"]["TeCoA − original mean diff"],
                                          *per[k]["numbers"]["TeCoA − original diff ci95"]]
               for k, t in K2_TASKS.items() if k in per}
    numbers["tasks passing"] = passed
    if passed:
        numbers.update({f"claims' suite {k}": v for k, v in
                        _k2_gain(results[results.task.isin(passed)], min_gain, "")["numbers"].items()})
    failed = [f"{K2_TASKS[k]} ({v['reason']})" for k, v in per.items() if not v["holds"]]
    if holds:
        reason = ""
    elif "T1" not in passed:
        reason = f"K2a (the fine-tuning classes, T1) failed: {per['K2a']['reason']}"
    else:
        reason = ("fine-tuning moved robust accuracy on T1 only; on no zero-shot task: " + "; ".join(failed))
    return {"holds": holds, "threshold": f"K2a passes and ≥ 1 of K2b–K2d passes (each: TeCoA − original ≥ "
                                         f"{min_gain:g}, paired 95% CI > 0)", "numbers": numbers, "reason": reason}


def claims_suite(results: pd.DataFrame, min_gain: float = K2_MIN_GAIN) -> list[str]:
    """The tasks the claims about fine-tuned models are decided on: those whose per-task K2 passes (T1..T4 order)."""
    return [t for k, t in K2_TASKS.items() if t in set(results.task)
            and control_k2_task(results, t, min_gain)["holds"]]


def control_k3(clean_entropy: dict[str, np.ndarray], min_entropy: float = K3_MIN_ENTROPY) -> dict[str, Any]:
    """K3: on every task the original model's mean normalised clean entropy is ≥ ``min_entropy``, decided by the
    Student-t interval over test images (:func:`decide_threshold`); the original model's clean outputs do not
    depend on the seed, so the images are the units."""
    tests = {t: decide_threshold(np.asarray(h, float), min_entropy, ">=") for t, h in clean_entropy.items()}
    holds = bool(tests) and all(tt.word == "holds" for tt in tests.values())
    numbers = {f"{t}: mean H/log C": [tt.estimate, tt.ci_lo, tt.ci_hi] for t, tt in tests.items()}
    low = [f"{t} {tt.estimate:.3f} [{tt.ci_lo:.3f}, {tt.ci_hi:.3f}]" for t, tt in tests.items() if tt.word != "holds"]
    reason = "" if holds else (f"the frozen model is near-certain on clean images of {', '.join(low)} (mean H/log C, "
                               f"95% CI; ≥ {min_entropy:g} needed): there is little clean uncertainty for an attack "
                               "to suppress or for an anchor to carry")
    return {"holds": holds, "threshold": f"mean clean H/log C of the original model ≥ {min_entropy:g} on every task "
                                         "(95% t interval over images)", "numbers": numbers, "reason": reason}


# --------------------------------------------------------------------------------------------- decision rules
N_BOOT = 2000           # bootstrap resamples (C5), fixed rng seed below
BOOT_SEED = 0


def _ci(lo: float, hi: float) -> str:
    def f(v: float) -> str:
        return "−∞" if v == -math.inf else "+∞" if v == math.inf else f"{v:+.3f}"
    return f"[{f(lo)}, {f(hi)}]"


def _cmp_word(c) -> str:
    """An "A better than B" part decided by its paired comparison: better holds, worse fails, else inconclusive."""
    return "holds" if c.better else "fails" if c.worse else "inconclusive"


def _decide(parts: dict[str, tuple[str, str]], count_ok: bool, rule: dict[str, Any], why: str | None
            ) -> tuple[bool | None, str | None]:
    """``holds`` and ``inconclusive`` of a claim made of ``parts`` (name → (word, sentence saying why it is within
    noise)): holds when every part holds and the card's seed count is met, fails when a part fails (its interval
    wholly on the other side) and the count is missed, inconclusive otherwise, with a sentence saying why."""
    if why:
        return None, why
    words = [w for w, _ in parts.values()]
    if "fails" in words:
        if not count_ok:
            return False, None
        return None, (f"a part's interval lies on the failing side, yet {rule['seeds meeting it']} seeds meet the "
                      "card's condition: the count and the interval disagree, which decides nothing")
    if all(w == "holds" for w in words):
        if count_ok:
            return True, None
        return None, (f"every interval clears its bar, but only {rule['seeds meeting it']} seeds meet the card's "
                      "condition (⌈2n/3⌉ needed): a count missed inside seed noise decides nothing")
    return None, "; ".join(f"{k}: {txt}" for k, (w, txt) in parts.items() if w == "inconclusive")


def _threshold_part(c, bar: float, what: str) -> tuple[ThresholdTest, tuple[str, str]]:
    """"paired difference ≥ ``bar``" (a "no worse than by |bar|") from a comparison's interval."""
    tt = threshold_from_ci(c.mean_diff, c.ci_lo, c.ci_hi, bar, ">=", c.n)
    return tt, (tt.word, f"within noise of the bar: the 95% CI {_ci(c.ci_lo, c.ci_hi)} of {what} "
                         f"({c.mean_diff:+.3f}) contains {bar:+g}")


# --------------------------------------------------------------------------------------------- claims
def _per_task(results: pd.DataFrame, method: str, col: str) -> pd.DataFrame:
    """``col`` of ``method`` as a (seed × task) table, seeds in order."""
    d = results[results.method == method]
    return d.pivot_table(index="seed", columns="task", values=col, aggfunc="mean").sort_index()


def claim_c1(results: pd.DataFrame, models: tuple[str, ...] = ("orig", "tecoa"), min_tasks: int = C1_MIN_TASKS,
             ece_factor: float = C1_ECE_FACTOR) -> dict[str, Any]:
    """C1: on PGD inputs entropy falls below clean on ≥ 3 of 4 tasks while accuracy drops; ECE_adv ≥ 2 ECE_clean.

    Per model and task, two paired comparisons over seeds: H_clean − H_adv (the entropy fall) and clean − robust
    accuracy (the drop). A task *collapses* when both say ``better``, and *does not* when either says ``worse``
    (the other side, measurably). "ECE_adv ≥ 2 ECE_clean" on the suite means is "ECE_adv − 2 ECE_clean ≥ 0",
    decided by the Student-t interval of that per-seed difference (:func:`decide_threshold`). A model holds when
    ≥ ``min_tasks`` tasks collapse and the ECE interval clears 0; it fails when fewer than ``min_tasks`` tasks can
    still collapse or the ECE interval lies below 0. The claim holds when both models hold, fails when one fails.
    """
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
    seed_ok = [cond(results[results.seed == s])[0] for s in sorted(results.seed.unique())]
    count_ok, rule, why = seed_rule(mean_ok, seed_ok)
    parts, texts = {}, []
    for m in models:
        hc, ha = _per_task(results, m, "H_clean"), _per_task(results, m, "H_adv")
        ca, ra = _per_task(results, m, "clean_acc"), _per_task(results, m, "rob_acc")
        tasks = list(hc.columns)
        fall = [compare_paired(hc[t].to_numpy(), ha[t].to_numpy()) for t in tasks]
        drop = [compare_paired(ca[t].to_numpy(), ra[t].to_numpy()) for t in tasks]
        n_yes = sum(f.better and d.better for f, d in zip(fall, drop))
        n_no = sum(f.worse or d.worse for f, d in zip(fall, drop))
        ece = decide_threshold(per_seed(results, m, "ece_adv") - ece_factor * per_seed(results, m, "ece_clean"),
                               0.0, ">=")
        numbers[f"{m}: tasks with a measurable entropy fall and accuracy drop"] = n_yes
        numbers[f"{m}: tasks with entropy or accuracy measurably not falling"] = n_no
        numbers[f"{m}: per-task H_clean − H_adv ci95"] = [[f.ci_lo, f.ci_hi] for f in fall]
        numbers[f"{m}: per-task clean − robust acc ci95"] = [[d.ci_lo, d.ci_hi] for d in drop]
        numbers[f"{m}: ECE_adv − {ece_factor:g} ECE_clean"] = ece.estimate
        numbers[f"{m}: ECE_adv − {ece_factor:g} ECE_clean ci95"] = [ece.ci_lo, ece.ci_hi]
        tasks_word = "holds" if n_yes >= min_tasks else "fails" if len(tasks) - n_no < min_tasks else "inconclusive"
        word = ("fails" if "fails" in (tasks_word, ece.word) else
                "holds" if (tasks_word, ece.word) == ("holds", "holds") else "inconclusive")
        noise = []
        if tasks_word == "inconclusive":
            open_ = [f"{t} {_ci(f.ci_lo, f.ci_hi)} / {_ci(d.ci_lo, d.ci_hi)}" for t, f, d in zip(tasks, fall, drop)
                     if not (f.better and d.better) and not (f.worse or d.worse)]
            noise.append(f"{n_yes} of {len(tasks)} tasks show a measurable entropy fall with an accuracy drop and "
                         f"{n_no} measurably do not (≥ {min_tasks} needed); the other {len(open_)} are within noise "
                         "of the bar (paired 95% CIs of H_clean − H_adv / clean − robust accuracy: "
                         + ", ".join(open_) + ")")
        if ece.word == "inconclusive":
            noise.append(f"ECE_adv − {ece_factor:g} ECE_clean = {ece.estimate:+.3f} has the 95% CI "
                         f"{_ci(ece.ci_lo, ece.ci_hi)}, which contains 0: within noise of the bar")
        parts[m] = (word, "; ".join(noise))
        texts.append(f"{m}: entropy fell under attack (with an accuracy drop) on "
                     f"{numbers[f'{m}: tasks with H_adv < H_clean and acc drop']} of {len(tasks)} tasks in the seed "
                     f"means, measurably on {n_yes} (measurably not on {n_no}); ECE_adv/ECE_clean = "
                     f"{numbers[f'{m}: ECE_adv / ECE_clean']:.2f}, ECE_adv − {ece_factor:g} ECE_clean 95% CI "
                     f"{_ci(ece.ci_lo, ece.ci_hi)} ({ece.word} against 0)")
    holds, inconclusive = _decide(parts, count_ok, rule, why)
    reason = "; ".join(texts) + f" ({rule['seeds meeting it']} seeds meet both conditions)"
    return _claim(holds, f"orig and TeCoA: H_adv < H_clean with an accuracy drop (paired 95% CIs over seeds) on "
                         f"≥ {min_tasks} of 4 tasks, and the 95% CI of ECE_adv − {ece_factor:g} ECE_clean ≥ 0; "
                         "seed mean and ≥ 2/3 of seeds as a further condition for holds",
                  {**numbers, **rule}, reason, ("K1", "K3"), inconclusive)


def claim_c2(results: pd.DataFrame, rel: float = C2_REL) -> dict[str, Any]:
    """C2: UCAT's suite-average adversarial ECE ≥ 25% below TeCoA's and below PMG-AFT's and FARE's.

    "≥ 25% lower than TeCoA" is the paired comparison of ECE(UCAT) with 0.75·ECE(TeCoA). Every comparison
    ``better``: holds (with the seed count); any ``worse``: fails; otherwise (a comparison with no measurable
    difference, or a baseline not run) inconclusive."""
    present = set(results.method)
    missing = [m for m in ("pmg_aft", "fare") if m not in present]
    others = [m for m in ("tecoa", "pmg_aft", "fare") if m in present]
    e = {m: per_seed(results, m, "ece_adv") for m in ["ucat", *others]}

    def ok(i) -> bool:
        u = np.mean(e["ucat"][i])
        return bool(u <= (1 - rel) * np.mean(e["tecoa"][i]) and all(u < np.mean(e[m][i]) for m in others[1:]))

    # "≥ 25% lower than TeCoA": the paired CI of (1 − rel)·ECE(TeCoA) − ECE(UCAT) lies above 0
    cmps = {f"TeCoA×{1 - rel:g}": compare_paired(e["ucat"], (1 - rel) * e["tecoa"], higher_is_better=False)}
    cmps.update({m: compare_paired(e["ucat"], e[m], higher_is_better=False) for m in others[1:]})
    numbers = {f"ECE_adv {m}": float(v.mean()) for m, v in e.items()}
    numbers["relative reduction vs TeCoA"] = float(1 - e["ucat"].mean() / e["tecoa"].mean())
    for name, c in cmps.items():
        numbers.update(c.numbers(f"UCAT vs {name}"))
    count_ok, rule, why = seed_rule(ok(slice(None)), [ok(i) for i in range(len(e["ucat"]))])
    numbers.update(rule)
    parts = {f"vs {k}": (_cmp_word(c), f"the paired difference ({k} − UCAT) {_ci(c.ci_lo, c.ci_hi)} contains 0: "
                                       "within noise of the bar") for k, c in cmps.items()}
    # a baseline that was not run leaves its part open: the claim can still fail on another part, never hold
    parts.update({f"vs {m}": ("inconclusive", f"baseline {m} was not run (methods parameter)") for m in missing})
    holds, inconclusive = _decide(parts, count_ok, rule, why)
    reason = (f"UCAT's adversarial ECE is {numbers['relative reduction vs TeCoA']:.1%} below TeCoA's ({100 * rel:.0f}% "
              "needed); paired comparisons: " + ", ".join(f"vs {k}: {c.word} {_ci(c.ci_lo, c.ci_hi)}"
                                                          for k, c in cmps.items())
              + f"; {rule['seeds meeting it']} seeds meet the card's condition")
    return _claim(holds, f"ECE_adv(UCAT) ≤ {1 - rel:g}·ECE_adv(TeCoA) and < PMG-AFT's and FARE's: every paired "
                         "comparison 'better' (with the seed rule) holds, any 'worse' fails",
                  numbers, reason, ("K1", "K2", "K3"), inconclusive)


def claim_c3(results: pd.DataFrame, margin: float = C3_MARGIN) -> dict[str, Any]:
    """C3: UCAT's suite-average robust accuracy ≥ TeCoA's − 3 points: the paired 95% CI of UCAT − TeCoA against
    −3 points (:func:`threshold_from_ci`: holds at or above, fails wholly below, else inconclusive)."""
    u, t = per_seed(results, "ucat", "rob_acc"), per_seed(results, "tecoa", "rob_acc")
    cmp = compare_paired(u, t)
    count_ok, rule, why = seed_rule(u.mean() >= t.mean() - margin, list(u >= t - margin))
    tt, part = _threshold_part(cmp, -margin, "UCAT − TeCoA robust accuracy")
    holds, inconclusive = _decide({"UCAT − TeCoA": part}, count_ok, rule, why)
    numbers = {"robust acc UCAT": float(u.mean()), "robust acc TeCoA": float(t.mean()), **cmp.numbers("UCAT − TeCoA"),
               f"UCAT − TeCoA ≥ −{margin:g}": tt.word, **rule}
    reason = (f"UCAT − TeCoA robust accuracy = {cmp.mean_diff:+.3f}, 95% CI {_ci(cmp.ci_lo, cmp.ci_hi)} "
              f"(≥ −{margin:g} needed: {tt.word}); {rule['seeds meeting it']} seeds within the margin")
    return _claim(holds, f"rob_acc(UCAT) ≥ rob_acc(TeCoA) − {margin:g}: the paired 95% CI at or above −{margin:g} "
                         f"holds (with the seed rule), wholly below fails",
                  numbers, reason, ("K1", "K2"), inconclusive)


def claim_c4(results: pd.DataFrame, within: float = C4_WITHIN, margin: float = C4_MARGIN) -> dict[str, Any]:
    """C4: UCAT's clean accuracy no worse than TeCoA's (margin 1 point) and within 8 points of the original.

    Each part is the paired 95% CI of the difference against its bar (−1 point vs TeCoA, −8 points vs the
    original): holds at or above, fails wholly below, else inconclusive; both must hold.

    The card writes "≥ TeCoA's" with no margin; a "no worse than" comparison needs one (DESIGN item 10), else
    its verdict is decided by differences the seeds cannot resolve. The stated margin is 1 point, a third of
    the one the card allows for robust accuracy (C3). The card's literal mean condition (UCAT ≥ TeCoA) is kept
    in the numbers for information.
    """
    u, t, o = (per_seed(results, m, "clean_acc") for m in ("ucat", "tecoa", "orig"))
    vs_t, vs_o = compare_paired(u, t), compare_paired(u, o)

    def ok(a, b, c) -> bool:
        return bool(np.mean(a) >= np.mean(b) - margin and abs(np.mean(a) - np.mean(c)) <= within)

    count_ok, rule, why = seed_rule(ok(u, t, o), [ok(*v) for v in zip(u, t, o)])
    tt_t, part_t = _threshold_part(vs_t, -margin, "UCAT − TeCoA clean accuracy")
    tt_o, part_o = _threshold_part(vs_o, -within, "UCAT − original clean accuracy")
    holds, inconclusive = _decide({"vs TeCoA": part_t, "vs original": part_o}, count_ok, rule, why)
    numbers = {"clean acc UCAT": float(u.mean()), "clean acc TeCoA": float(t.mean()), "clean acc original": float(o.mean()),
               **vs_t.numbers("UCAT − TeCoA"), **vs_o.numbers("UCAT − original"),
               f"UCAT − TeCoA ≥ −{margin:g}": tt_t.word, f"UCAT − original ≥ −{within:g}": tt_o.word, **rule,
               "mean UCAT ≥ TeCoA (card's wording, no margin)": bool(u.mean() >= t.mean())}
    reason = (f"clean accuracy UCAT − TeCoA = {vs_t.mean_diff:+.3f}, 95% CI {_ci(vs_t.ci_lo, vs_t.ci_hi)} "
              f"(≥ −{margin:g} needed: {tt_t.word}); UCAT − original = {vs_o.mean_diff:+.3f}, 95% CI "
              f"{_ci(vs_o.ci_lo, vs_o.ci_hi)} (≥ −{within:g} needed: {tt_o.word}); {rule['seeds meeting it']} seeds "
              "meet both conditions")
    return _claim(holds, f"clean_acc(UCAT) ≥ clean_acc(TeCoA) − {margin:g} and clean_acc(UCAT) ≥ clean_acc(original) "
                         f"− {within:g}: each paired 95% CI at or above its bar holds (with the seed rule), either "
                         "wholly below fails", numbers, reason, ("K2",), inconclusive)


def spearman_over_tasks(sw: pd.DataFrame, method: str) -> float:
    """Spearman ρ between ε and mean entropy, per task, averaged over tasks (ties/constant curves → ρ = 0)."""
    d = sw[sw.method == method].groupby(["task", "eps"]).H_adv.mean().reset_index()
    rhos = []
    for _, g in d.groupby("task"):
        rho = st.spearmanr(g.eps, g.H_adv).statistic if g.H_adv.nunique() > 1 else 0.0
        rhos.append(0.0 if np.isnan(rho) else float(rho))
    return float(np.mean(rhos))


def spearman_rows(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Spearman ρ of every row of ``y`` (…, n) against ``x`` (n,): Pearson correlation of average ranks, as
    :func:`scipy.stats.spearmanr`; a constant (or NaN) row gives 0, as in :func:`spearman_over_tasks`."""
    ry = st.rankdata(np.asarray(y, float), axis=-1)
    rx = st.rankdata(np.asarray(x, float))
    ry, rx = ry - ry.mean(-1, keepdims=True), rx - rx.mean()
    den = np.sqrt((ry ** 2).sum(-1) * (rx ** 2).sum())
    good = np.isfinite(den) & (den > 0)
    return np.where(good, (ry * rx).sum(-1) / np.where(good, den, 1.0), 0.0)


def sweep_curves(sw: pd.DataFrame, method: str) -> tuple[np.ndarray, np.ndarray]:
    """Mean attacked entropy of ``method`` as a (seed × task × ε) array, and the ε values (ascending)."""
    d = sw[sw.method == method].groupby(["seed", "task", "eps"]).H_adv.mean()
    seeds, tasks, eps = (sorted(d.index.unique(level=k)) for k in ("seed", "task", "eps"))
    idx = pd.MultiIndex.from_product([seeds, tasks, eps], names=["seed", "task", "eps"])
    return d.reindex(idx).to_numpy().reshape(len(seeds), len(tasks), len(eps)), np.asarray(eps, float)


def rho_ci(sw: pd.DataFrame, method: str, n_boot: int = N_BOOT, rng_seed: int = BOOT_SEED) -> tuple[float, float]:
    """95% percentile interval of C5's statistic — the task mean of Spearman ρ(ε, seed-mean entropy curve) — from
    a bootstrap over seeds (whole curves resampled, what changes with the seed; the tasks and the test split are
    fixed). Fewer than 2 seeds: an unbounded interval."""
    curves, eps = sweep_curves(sw, method)
    n = curves.shape[0]
    if n < 2:
        return -math.inf, math.inf
    idx = np.random.default_rng(rng_seed).integers(0, n, size=(n_boot, n))
    boots = spearman_rows(curves[idx].mean(axis=1), eps).mean(axis=-1)   # (n_boot, tasks, ε) → (n_boot,)
    lo, hi = np.nanquantile(boots, [0.025, 0.975])
    return float(lo), float(hi)


def claim_c5(sweep: pd.DataFrame, eps_sweep: tuple[float, ...], rho_min: float = C5_RHO) -> dict[str, Any]:
    """C5: entropy rises with ε for UCAT (mean Spearman ρ ≥ 0.8) but not for TeCoA (ρ < 0.8).

    Each half by the bootstrap interval over seeds of its ρ (:func:`rho_ci`) against 0.8: UCAT's half holds when the
    interval lies at or above 0.8 and fails when it lies wholly below; TeCoA's holds when it lies wholly below and
    fails when it lies at or above. Both halves are required."""
    threshold = (f"mean over tasks of Spearman ρ(ε, entropy), bootstrap 95% CI over seeds: ≥ {rho_min:g} for UCAT and "
                 f"< {rho_min:g} for TeCoA; seed rule as a further condition for holds")
    present = set(sweep.method) if len(sweep) else set()
    if not {"ucat", "tecoa"} <= present:
        rho_u = spearman_over_tasks(sweep, "ucat") if "ucat" in present else float("nan")
        return _claim(None, threshold, {"rho UCAT": rho_u}, "", ("K1", "K2", "K3"),
                      f"the ε-sweep ran for {sorted(present)} only; both halves need UCAT and TeCoA")

    def ok(df: pd.DataFrame) -> tuple[bool, float, float]:
        ru, rt = spearman_over_tasks(df, "ucat"), spearman_over_tasks(df, "tecoa")
        return ru >= rho_min and rt < rho_min, ru, rt

    mean_ok, ru, rt = ok(sweep)
    per = [ok(sweep[sweep.seed == s]) for s in sorted(sweep.seed.unique())]
    count_ok, rule, why = seed_rule(mean_ok, [p[0] for p in per])
    if len(eps_sweep) < 3:
        why = f"a rank correlation over {len(eps_sweep)} radii is not informative (the card uses 4)"
    (lu, hu), (lt, ht) = rho_ci(sweep, "ucat"), rho_ci(sweep, "tecoa")
    tu = threshold_from_ci(ru, lu, hu, rho_min, ">=", len(per))
    tt = threshold_from_ci(rt, lt, ht, rho_min, ">=", len(per))   # TeCoA's half is the negation of "≥"
    t_word = {"holds": "fails", "fails": "holds"}.get(tt.word, "inconclusive")
    parts = {"UCAT": (tu.word, f"within noise of the bar: ρ = {ru:.2f}, 95% CI [{lu:.2f}, {hu:.2f}] contains "
                               f"{rho_min:g}"),
             "TeCoA": (t_word, f"within noise of the bar: ρ = {rt:.2f}, 95% CI [{lt:.2f}, {ht:.2f}] contains "
                               f"{rho_min:g}")}
    holds, inconclusive = _decide(parts, count_ok, rule, why)
    numbers = {"rho UCAT (seed-mean curves)": ru, "rho TeCoA (seed-mean curves)": rt,
               "rho UCAT ci95": [lu, hu], "rho TeCoA ci95": [lt, ht],
               "rho UCAT per seed": [p[1] for p in per], "rho TeCoA per seed": [p[2] for p in per], **rule}
    reason = (f"ρ(UCAT) = {ru:.2f} [{lu:.2f}, {hu:.2f}] (≥ {rho_min:g}: {tu.word}) and ρ(TeCoA) = {rt:.2f} "
              f"[{lt:.2f}, {ht:.2f}] (< {rho_min:g}: {t_word}); {rule['seeds meeting it']} seeds meet both")
    return _claim(holds, threshold, numbers, reason, ("K1", "K2", "K3"), inconclusive)


def claim_c6(results: pd.DataFrame) -> dict[str, Any]:
    """C6: the softmax-KL ablation has higher suite-average adversarial ECE than UCAT: the paired comparison says
    UCAT ``better`` → holds (with the seed count), ``worse`` → fails, no measurable difference → inconclusive."""
    threshold = ("ECE_adv(softmax-KL) > ECE_adv(UCAT): paired comparison 'better' for UCAT holds (with the seed "
                 "rule), 'worse' fails")
    if "softmax_kl" not in set(results.method):
        return _claim(None, threshold, {}, "", ("K1", "K2", "K3"), "the softmax-KL ablation was not run (methods parameter)")
    u, a = per_seed(results, "ucat", "ece_adv"), per_seed(results, "softmax_kl", "ece_adv")
    cmp = compare_paired(u, a, higher_is_better=False)
    count_ok, rule, why = seed_rule(a.mean() > u.mean(), list(a > u))
    part = (_cmp_word(cmp), f"no measurable difference: the paired difference (softmax-KL − UCAT) "
                            f"{_ci(cmp.ci_lo, cmp.ci_hi)} contains 0")
    holds, inconclusive = _decide({"vs softmax-KL": part}, count_ok, rule, why)
    numbers = {"ECE_adv UCAT": float(u.mean()), "ECE_adv softmax-KL": float(a.mean()),
               **cmp.numbers("softmax-KL − UCAT"), **rule}
    reason = (f"adversarial ECE softmax-KL {a.mean():.3f} vs UCAT {u.mean():.3f}: difference {cmp.mean_diff:+.3f}, "
              f"95% CI {_ci(cmp.ci_lo, cmp.ci_hi)} — {cmp.word}")
    return _claim(holds, threshold, numbers, reason, ("K1", "K2", "K3"), inconclusive)
