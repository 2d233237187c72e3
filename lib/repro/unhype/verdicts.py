"""Chapter 01's claims and controls, and the functions that decide them from measured numbers.

Every function returns the keyword arguments of :meth:`repro.common.Ledger.record` (claims: ``holds``,
``threshold``, ``numbers``, ``reason``, ``inconclusive``, ``needs``) or :meth:`~repro.common.Ledger.control`
(controls: ``holds``, ``threshold``, ``numbers``, ``reason``), so the notebook only writes
``ledger.record("C1", **verdicts.c1(...))``. Reasons are sentences computed from the numbers.

Rules (from the card; thresholds in :data:`THRESHOLDS`, never loosened):

* C1-C4 are judged over the replicate seeds (issue 41). Every threshold condition ("rate <= 0.15", "drop <= 5
  points", "ratio >= 10x", "rho <= -0.9") is decided by the 95% Student-t interval of its mean over the seeds
  (:func:`repro.common.stats.decide_threshold`; ratios on the log scale): a part holds only when the whole interval
  clears the bar, fails only when it lies wholly on the other side, and is inconclusive (within noise of the bar)
  otherwise. A seed re-draws the adapters' init, every batch *and* the evaluation noise, so the spread over seeds
  carries both the training and the test-sample noise. Comparisons between methods (C2, and C4's "below UCE's")
  are paired over seeds with :func:`repro.common.compare_paired`: ``better`` holds, ``worse`` fails, ``no
  measurable difference`` decides nothing. The card's "in >= 2 of 3 seeds" is a further condition of ``holds``
  only: a count missed while every interval clears its bar is inconclusive, never a failure (CONTRIBUTING's
  seed-count rule: a seed count is itself a noisy statistic). With fewer than 3 seeds the verdict is inconclusive.
* C5-C6 use seed 0 only and decide on 95% bootstrap intervals over samples: a condition holds if its whole
  interval satisfies the threshold, fails if the whole interval violates it, and is undecided otherwise.
* Controls (K1-K6) check that the run could see an effect of each claim's kind: the evaluator and the base
  generator work (K1), the static LoRA of C2 really stopped at the matched erasure level (K2), the explicit GD
  trajectory that H amortizes does fall monotonically (K3), the paraphrases are the target for the base model and
  UCE erases its own prompts (K4), the base draws every digit C5 erases (K5), both backbones draw the target (K6).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from repro.common import compare_paired
from repro.common.stats import ThresholdTest, decide_threshold, threshold_from_ci

THRESHOLDS = {
    "rate": 0.15, "base_rate": 0.85, "retain_drop": 0.05, "near_gain": 0.03, "norm_ratio": 10.0,
    "esd_ratio": 0.5, "rho": -0.9, "para_rate": 0.30, "para_drop": 0.05, "multi_rate": 0.2,
    "multi_growth": 0.05, "multi_lora_extra": 0.02, "backbone_rate": 0.2,
    # controls
    "clf_acc": 0.97, "clf_recall": 0.90, "base_retain": 0.90, "para_base": 0.60,
}
T = THRESHOLDS

#: The card's claims, verbatim in substance (thresholds included); C3's lettered parts are separate ids.
CLAIMS = {
    "C1": "Single-concept erasure: erasing digit 7, UnHype's target rate <= 0.15 (base >= 0.85) and its retain "
          "accuracy is at most 5 points below the base's (mean over seeds and in >= 2 of 3 seeds).",
    "C2": "Locality vs a static LoRA: at matched erasure (both target rates <= 0.15), UnHype's retain accuracy on the "
          "3 digits nearest to the target in prompt-embedding space is >= 3 points above static LoRA-ESD's, and its "
          "paired drift on them is lower.",
    "C3a": "Dynamic adapters: mean ||A(c)B(c)||_F at k=K is >= 10x larger for target than for retain prompts.",
    "C3b": "ESD loss falls along k: L_ESD(H(c*,K)) <= 0.5 L_ESD(H(c*,0)).",
    "C3c": "Monotone trajectory (may not hold): L_ESD along k in {0, K/8, ..., K} is monotone (Spearman rho <= -0.9).",
    "C4": "Paraphrases (may not hold): on held-out paraphrases of the target, UnHype's target rate <= 0.30 and below "
          "UCE's; retained digits' paraphrases keep retain accuracy >= base - 5 points.",
    "C5": "Multi-concept (expected partially): erasing m in {1, 3, 5} digits with one H (same iteration budget), target "
          "rate <= 0.2 for every erased digit at every m; the retain-accuracy drop grows <= 5 points from m=1 to m=5, "
          "while one static LoRA on all m loses >= 2 points more at m=5; cost: 1 UnHype run vs m per-concept runs.",
    "C6": "Backbone-agnostic: UnHype's target rate <= 0.2 on both the eps-prediction DDPM ('SD-like') and the "
          "rectified-flow ('Flux-like') backbone, with the same hypernetwork code.",
}

#: Positive controls: could this run see an effect of each claim's kind?
CONTROLS = {
    "K1": "Evaluator and generator: the frozen classifier is accurate on held-out real digits (>= 0.97, recall on "
          "the target >= 0.90), and the base generator draws the target (target rate >= 0.85) and the retained digits "
          "(retain accuracy >= 0.90 on training and on held-out templates), so erasure and collateral damage are "
          "measurable.",
    "K2": "Matched erasure for C2: static LoRA-ESD stopped by the matched-erasure rule (400-sample check <= 0.15) in "
          "every seed, both methods' evaluated target rates are <= 0.15 (mean over seeds), and LoRA-ESD erased no "
          "more than UnHype (its mean rate >= UnHype's), so C2 compares locality at equal or favourable-to-LoRA "
          "erasure.",
    "K3": "The trajectory H amortizes: plain GD on a static LoRA at the calibrated eta_int erases the target "
          "(rate <= 0.15 at k=K) and its ESD loss falls monotonically (Spearman rho <= -0.9) to <= 0.5 of its start.",
    "K4": "Paraphrases are the target: the base generator draws the target from its held-out paraphrases (rate >= "
          "0.60, twice C4's 0.30) and UCE, the comparator, erases the target's training prompts (rate <= 0.15).",
    "K5": "Multi-concept apparatus: the base generator draws every digit that C5 erases (rate >= 0.85 each, every m).",
    "K6": "Both backbones draw the target: base target rate >= 0.85 on the rectified-flow and on the DDPM backbone.",
}


def _votes(flags: list[bool]) -> tuple[int, int]:
    need = math.ceil(2 * len(flags) / 3)
    return int(sum(flags)), need


def _few_seeds(n: int) -> str | None:
    return (f"only {n} seed(s): the card's rule needs the condition in >= 2 of 3 seeds" if n < 3 else None)


def _mean(x) -> float:
    return float(np.mean(np.asarray(x, float)))


def _join(parts: list[str]) -> str:
    return "; ".join(p for p in parts if p) + "." if any(parts) else ""


def _why(parts: list[str]) -> str:
    """A control's failure reason (no final period: the ledger appends it to claims' reasons)."""
    return "; ".join(p for p in parts if p)


def _ci(lo: float, hi: float, scale: float = 1.0, fmt: str = ".3f") -> str:
    return f"[{scale * lo:{fmt}}, {scale * hi:{fmt}}]"


def _seed_word(words: list[str], count_met: bool) -> str:
    """Issue 41's rule for C1-C4: any part fails -> fails; every part holds and the card's seed count is met ->
    holds; anything else (a part within noise of its bar, or only the count missed) -> inconclusive."""
    if "fails" in words:
        return "fails"
    return "holds" if all(w == "holds" for w in words) and count_met else "inconclusive"


def _log_test(values, threshold: float, direction: str) -> ThresholdTest:
    """"geometric mean of ``values`` ``direction`` threshold": the t interval of the mean log over seeds, mapped back."""
    v = np.log(np.maximum(np.asarray(values, float), 1e-300))
    t = decide_threshold(v, math.log(threshold), direction)
    return ThresholdTest(math.exp(t.estimate), math.exp(t.ci_lo), math.exp(t.ci_hi), threshold, direction, t.n, t.word)


def _cmp_word(c) -> str:
    """A comparison "A beats B": ``better`` holds, ``worse`` fails, no measurable difference is inconclusive."""
    return "holds" if c.better else "fails" if c.worse else "inconclusive"


def _count_missed(n_ok: int, n: int, need: int) -> str:
    return (f"every 95% interval clears its bar, but the condition is met in only {n_ok} of {n} seeds (the card also "
            f"asks for >= {need}): a missed count is no failure under issue 41, and decides nothing")


# ====================================================================== controls

def k1(clf_acc: float, clf_recall: dict[int, float], m: list[dict]) -> dict:
    """``clf_recall``: per erased digit, the classifier's recall on real test digits; ``m``: per-seed metrics."""
    br = [s["base"]["target_rate"] for s in m]
    ra = [s["base"]["retain_acc_seen"] for s in m]
    rh = [s["base"]["retain_acc_heldout"] for s in m]
    worst_recall = min(clf_recall.values())
    checks = {
        f"classifier accuracy on held-out real digits {clf_acc:.3f} (< {T['clf_acc']})": clf_acc >= T["clf_acc"],
        f"its recall on the target {worst_recall:.3f} (< {T['clf_recall']})": worst_recall >= T["clf_recall"],
        f"base target rate {_mean(br):.3f} (< {T['base_rate']})": _mean(br) >= T["base_rate"],
        f"base retain accuracy on training templates {_mean(ra):.3f} (< {T['base_retain']})":
            _mean(ra) >= T["base_retain"],
        f"base retain accuracy on held-out templates {_mean(rh):.3f} (< {T['base_retain']})":
            _mean(rh) >= T["base_retain"],
    }
    return dict(holds=all(checks.values()),
                threshold=f"classifier acc >= {T['clf_acc']}, target recall >= {T['clf_recall']}; base target rate "
                          f">= {T['base_rate']}; base retain acc >= {T['base_retain']} (training and held-out "
                          "templates); means over seeds",
                numbers={"classifier test accuracy": clf_acc,
                         "classifier recall on the target": {str(d): v for d, v in clf_recall.items()},
                         "base target rate": _mean(br), "base retain acc (training templates)": _mean(ra),
                         "base retain acc (held-out templates)": _mean(rh)},
                reason=_why([k for k, ok in checks.items() if not ok]))


def k2(m: list[dict], lora: list[dict]) -> dict:
    """``lora``: per seed, LoRA-ESD's stop {'matched': bool, 'steps': int, 'stop_rate': float}."""
    matched = [bool(b["matched"]) for b in lora]
    ru = [s["UnHype"]["target_rate"] for s in m]
    rl = [s["LoRA-ESD"]["target_rate"] for s in m]
    checks = {
        f"LoRA-ESD never reached the check threshold in {len(matched) - sum(matched)} of {len(matched)} seeds":
            all(matched),
        f"LoRA-ESD's evaluated target rate is {_mean(rl):.3f} (> {T['rate']})": _mean(rl) <= T["rate"],
        f"UnHype's evaluated target rate is {_mean(ru):.3f} (> {T['rate']})": _mean(ru) <= T["rate"],
        f"LoRA-ESD erased more than UnHype (rate {_mean(rl):.3f} < {_mean(ru):.3f}), which tilts C2 towards UnHype":
            _mean(rl) >= _mean(ru),
    }
    return dict(holds=all(checks.values()),
                threshold=f"LoRA-ESD stopped by the rule in every seed; mean evaluated rates <= {T['rate']} for both; "
                          "LoRA-ESD's mean rate >= UnHype's",
                numbers={"LoRA-ESD stop step per seed": [int(b["steps"]) for b in lora],
                         "LoRA-ESD check rate at stop per seed": [float(b["stop_rate"]) for b in lora],
                         "LoRA-ESD evaluated target rate per seed": rl,
                         "UnHype evaluated target rate (mean)": _mean(ru),
                         "LoRA-ESD evaluated target rate (mean)": _mean(rl),
                         "LoRA-ESD matched in": f"{sum(matched)} of {len(matched)} seeds"},
                reason=_why([k for k, ok in checks.items() if not ok]))


def _rho(curve) -> float:
    c = np.asarray(curve, float)
    return float(stats.spearmanr(np.arange(len(c)), c).statistic)


def k3(reached: bool, gd_rate: float, gd_loss: list[float]) -> dict:
    """The explicit GD trajectory of the eta calibration: did it erase, and is its loss monotone along k?"""
    rho, red = _rho(gd_loss), float(gd_loss[-1] / gd_loss[0])
    checks = {
        f"explicit GD leaves target rate {gd_rate:.3f} at k = K (> {T['rate']})": reached and gd_rate <= T["rate"],
        f"its ESD loss is not monotone along k (Spearman rho {rho:.2f} > {T['rho']})": rho <= T["rho"],
        f"its ESD loss only falls to {red:.2f} of its start (> {T['esd_ratio']})": red <= T["esd_ratio"],
    }
    return dict(holds=all(checks.values()),
                threshold=f"GD rate at k=K <= {T['rate']}; Spearman rho <= {T['rho']}; L(K)/L(0) <= {T['esd_ratio']}",
                numbers={"explicit GD target rate at k=K": gd_rate, "explicit GD Spearman rho": rho,
                         "explicit GD L(K)/L(0)": red},
                reason=_why([k for k, ok in checks.items() if not ok]))


def k4(m: list[dict]) -> dict:
    bp = [s["base"]["para_target_rate"] for s in m]
    uce = [s["UCE"]["target_rate"] for s in m]
    checks = {
        f"the base draws the target from its paraphrases in only {_mean(bp):.3f} of samples (< {T['para_base']})":
            _mean(bp) >= T["para_base"],
        f"UCE leaves target rate {_mean(uce):.3f} on the training prompts (> {T['rate']})": _mean(uce) <= T["rate"],
    }
    return dict(holds=all(checks.values()),
                threshold=f"base paraphrase target rate >= {T['para_base']}; UCE target rate <= {T['rate']}; means",
                numbers={"base paraphrase target rate": _mean(bp), "UCE target rate (training prompts)": _mean(uce)},
                reason=_why([k for k, ok in checks.items() if not ok]))


def k5(base_rates: dict[int, dict[int, float]]) -> dict:
    """``base_rates``: m -> {erased digit: base target rate}."""
    worst = {m: min(r.values()) for m, r in base_rates.items()}
    bad = [f"at m = {m} the base draws digit {min(r, key=r.get)} in only {worst[m]:.3f} of samples "
           f"(< {T['base_rate']})" for m, r in base_rates.items() if worst[m] < T["base_rate"]]
    return dict(holds=not bad, threshold=f"base target rate >= {T['base_rate']} for every erased digit at every m",
                numbers={"lowest base target rate per m": {str(m): v for m, v in worst.items()}},
                reason=_why(bad))


def k6(base_rates: dict[str, float]) -> dict:
    """``base_rates``: backbone name -> base target rate (only the backbones that were run)."""
    bad = [f"the {k} base draws the target in only {v:.3f} of samples (< {T['base_rate']})"
           for k, v in base_rates.items() if v < T["base_rate"]]
    if len(base_rates) < 2:
        bad.append("only one backbone was run (run_ddpm is off), so nothing shows the second one can draw the target")
    return dict(holds=not bad, threshold=f"base target rate >= {T['base_rate']} on both backbones",
                numbers={f"{k}: base target rate": v for k, v in base_rates.items()}, reason=_why(bad))


# ====================================================================== claims C1-C4 (over seeds)

def c1(m: list[dict]) -> dict:
    """``m``: per seed, metrics {'base': {...}, 'UnHype': {...}}. Each of the rate and the two drops is decided by
    its 95% interval over seeds (see the module's rules)."""
    tr = [s["UnHype"]["target_rate"] for s in m]
    drop = [s["base"]["retain_acc"] - s["UnHype"]["retain_acc"] for s in m]
    droph = [s["base"]["retain_acc_heldout"] - s["UnHype"]["retain_acc_heldout"] for s in m]
    ok = [a <= T["rate"] and d <= T["retain_drop"] and h <= T["retain_drop"] for a, d, h in zip(tr, drop, droph)]
    n_ok, need = _votes(ok)
    votes = f"{n_ok} of {len(ok)}"
    t_rate = decide_threshold(tr, T["rate"], "<=")
    t_drop = decide_threshold(drop, T["retain_drop"], "<=")
    t_droph = decide_threshold(droph, T["retain_drop"], "<=")
    word = _seed_word([t_rate.word, t_drop.word, t_droph.word], n_ok >= need)
    parts = [(t_rate, f"UnHype's target rate {t_rate.estimate:.3f}, 95% CI {_ci(t_rate.ci_lo, t_rate.ci_hi)} over "
                      f"{t_rate.n} seeds,", f"{T['rate']}",
              f"UnHype still makes the target in {t_rate.estimate:.3f} of samples (95% CI "
              f"{_ci(t_rate.ci_lo, t_rate.ci_hi)}, wholly above {T['rate']})"),
             (t_drop, f"the retain drop {100 * t_drop.estimate:.1f} points, 95% CI {_ci(t_drop.ci_lo, t_drop.ci_hi, 100, '.1f')},",
              "5 points", f"retain accuracy drops {100 * t_drop.estimate:.1f} points (95% CI "
                          f"{_ci(t_drop.ci_lo, t_drop.ci_hi, 100, '.1f')}, wholly above 5)"),
             (t_droph, f"the held-out-template retain drop {100 * t_droph.estimate:.1f} points, 95% CI "
                       f"{_ci(t_droph.ci_lo, t_droph.ci_hi, 100, '.1f')},", "5 points",
              f"retain accuracy on held-out templates drops {100 * t_droph.estimate:.1f} points (95% CI "
              f"{_ci(t_droph.ci_lo, t_droph.ci_hi, 100, '.1f')}, wholly above 5)")]
    if word == "fails":
        reason = _join([bad for t, _, _, bad in parts if t.word == "fails"])
    elif word == "holds":
        reason = (f"target rate {t_rate.estimate:.3f} (95% CI {_ci(t_rate.ci_lo, t_rate.ci_hi)}) <= {T['rate']}; retain "
                  f"drop {100 * t_drop.estimate:.2f} points (CI {_ci(t_drop.ci_lo, t_drop.ci_hi, 100, '.2f')}) on all "
                  f"retain prompts and {100 * t_droph.estimate:.2f} (CI {_ci(t_droph.ci_lo, t_droph.ci_hi, 100, '.2f')}) on "
                  f"held-out templates (<= 5); met in {votes} seeds.")
    else:
        noisy = [f"{what} contains {bar}" for t, what, bar, _ in parts if t.word == "inconclusive"]
        reason = (_join(["within noise of the bar: " + "; ".join(noisy)]) if noisy
                  else _join([_count_missed(n_ok, len(ok), need)]))
    return dict(holds=None if word == "inconclusive" else word == "holds",
                threshold=f"UnHype rate <= {T['rate']}; retain drop <= 5 points on all retain prompts and on held-out "
                          "templates; each by its 95% CI over seeds (holds: clear of the bar and met in >= 2/3 of "
                          "seeds; fails: wholly on the other side)",
                numbers={"UnHype target rate": t_rate.estimate, "UnHype target rate ci95": [t_rate.ci_lo, t_rate.ci_hi],
                         "per-seed target rate": tr,
                         "retain drop (points)": 100 * t_drop.estimate,
                         "retain drop ci95 (points)": [100 * t_drop.ci_lo, 100 * t_drop.ci_hi],
                         "retain drop, held-out templates (points)": 100 * t_droph.estimate,
                         "retain drop, held-out templates ci95 (points)": [100 * t_droph.ci_lo, 100 * t_droph.ci_hi],
                         "seeds meeting it": votes},
                reason=reason if word != "inconclusive" else "",
                inconclusive=_few_seeds(len(m)) or (reason if word == "inconclusive" else None), needs=("K1",))


def c2(m: list[dict]) -> dict:
    """UnHype vs LoRA-ESD on the 3 nearest digits, paired over seeds (the matched erasure is control K2).

    The gain ">= 3 points" is decided by the paired 95% CI against the margin (:func:`threshold_from_ci`), "drift
    lower" by :func:`compare_paired` (better holds, worse fails); the seed count only further conditions a hold."""
    un = [s["UnHype"]["retain_acc_near"] for s in m]
    ln = [s["LoRA-ESD"]["retain_acc_near"] for s in m]
    du = [s["UnHype"]["drift_near"] for s in m]
    dl = [s["LoRA-ESD"]["drift_near"] for s in m]
    g = compare_paired(un, ln, higher_is_better=True, margin=T["near_gain"])
    d = compare_paired(du, dl, higher_is_better=False)
    gain_part = threshold_from_ci(g.mean_diff, g.ci_lo, g.ci_hi, T["near_gain"], ">=", g.n).word
    drift_part = _cmp_word(d)
    ok = [a - b >= T["near_gain"] and x < y for a, b, x, y in zip(un, ln, du, dl)]
    n_ok, need = _votes(ok)
    nums = {"retain acc near, UnHype": _mean(un), "retain acc near, LoRA-ESD": _mean(ln),
            "near acc gain (points)": 100 * g.mean_diff, "near acc gain ci95 (points)": [100 * g.ci_lo, 100 * g.ci_hi],
            "pairs (seeds)": g.n, "near acc comparison (margin 3 points)": g.word,
            "near acc gain vs 3 points": gain_part,
            "drift near, UnHype": _mean(du), "drift near, LoRA-ESD": _mean(dl),
            **d.numbers("drift (LoRA-ESD - UnHype)"),
            "retain acc near, held-out templates (UnHype, LoRA-ESD)":
                [_mean([s[k]["retain_acc_near_heldout"] for s in m]) for k in ("UnHype", "LoRA-ESD")],
            "seeds meeting it": f"{n_ok} of {len(ok)}"}
    gain_txt = (f"the near-digit retain-accuracy gain over LoRA-ESD is {100 * g.mean_diff:.1f} points, 95% CI "
                f"[{100 * g.ci_lo:.1f}, {100 * g.ci_hi:.1f}] over {g.n} seeds")
    drift_txt = (f"LoRA-ESD's near-digit drift exceeds UnHype's by {d.mean_diff:.3f}, 95% CI "
                 f"[{d.ci_lo:.3f}, {d.ci_hi:.3f}]")
    holds: bool | None
    inconclusive = _few_seeds(len(m))
    word = _seed_word([gain_part, drift_part], n_ok >= need)
    if word == "fails":
        holds = False
        reason = _join([f"{gain_txt} (wholly below 3)" if gain_part == "fails" else "",
                        f"{drift_txt} (UnHype's is not lower)" if drift_part == "fails" else ""])
    elif word == "holds":
        holds = True
        reason = f"{gain_txt} (above 3); {drift_txt} (above 0); met in {n_ok} of {len(ok)} seeds."
    else:
        holds, reason = None, ""
        noisy = [f"{gain_txt}, which straddles the 3-point margin" if gain_part == "inconclusive" else "",
                 f"{drift_txt}, which straddles 0" if drift_part == "inconclusive" else ""]
        inconclusive = inconclusive or (_join(["within noise of the bar: " + "; ".join(p for p in noisy if p)])
                                        if any(noisy) else _join([_count_missed(n_ok, len(ok), need)]))
    return dict(holds=holds, threshold="paired over seeds: near-digit retain acc gain 95% CI at or above 3 points and "
                                       "near drift lower (CI above 0); a hold also needs the condition in >= 2/3 of "
                                       "seeds (a missed count alone is inconclusive)",
                numbers=nums, reason=reason, inconclusive=inconclusive, needs=("K1", "K2"))


def _log_ratio_claim(t: ThresholdTest, n_ok: int, n: int, need: int, base: str, away: str) -> tuple[str, str]:
    """C3a/C3b: the word of a (log-scale) threshold test with the card's seed count, and its reason sentence built
    on ``base``; ``away`` says on which side of the bar a failing interval lies ("below", "above")."""
    word = _seed_word([t.word], n_ok >= need)
    bar = f"{t.threshold:g}"
    reason = {"holds": f"{base}.", "fails": f"{base}: the interval lies wholly {away} {bar}.",
              "inconclusive": (f"{base}: the interval contains {bar}, within noise of the bar."
                               if t.word == "inconclusive" else f"{base}: {_count_missed(n_ok, n, need)}.")}[word]
    return word, reason


def c3a(ratios: list[float]) -> dict:
    """Norm ratio >= 10x, decided on the per-seed log ratio's 95% interval over seeds (geometric mean)."""
    ok = [r >= T["norm_ratio"] for r in ratios]
    n_ok, need = _votes(ok)
    votes = f"{n_ok} of {len(ok)}"
    t = _log_test(ratios, T["norm_ratio"], ">=")
    base = (f"target prompts' adapters are {t.estimate:.1f}x the retain prompts' (geometric mean over seeds, 95% CI "
            f"{_ci(t.ci_lo, t.ci_hi, fmt='.1f')}; per seed {', '.join(f'{r:.1f}' for r in ratios)}); "
            f">= {T['norm_ratio']:g} in {votes} seeds")
    word, reason = _log_ratio_claim(t, n_ok, len(ok), need, base, "below")
    return dict(holds=None if word == "inconclusive" else word == "holds",
                threshold=f"norm ratio >= {T['norm_ratio']:g} (95% CI of the geometric mean over seeds; a hold also "
                          "needs >= 2/3 of seeds)",
                numbers={"norm ratio (mean)": _mean(ratios), "norm ratio (geometric mean)": t.estimate,
                         "norm ratio (geometric mean) ci95": [t.ci_lo, t.ci_hi], "per-seed ratio": list(ratios),
                         "seeds meeting it": votes},
                reason=reason if word != "inconclusive" else "",
                inconclusive=_few_seeds(len(ratios)) or (reason if word == "inconclusive" else None), needs=("K1",))


def c3b(esd_curves: list[list[float]]) -> dict:
    """L(K)/L(0) <= 0.5, decided on the per-seed log ratio's 95% interval over seeds (geometric mean)."""
    curves = np.asarray(esd_curves, float)
    red = curves[:, -1] / curves[:, 0]
    mc = curves.mean(0)
    n_ok, need = _votes([x <= T["esd_ratio"] for x in red])
    votes = f"{n_ok} of {len(red)}"
    t = _log_test(red, T["esd_ratio"], "<=")
    base = (f"L(K)/L(0) = {t.estimate:.3f} (geometric mean over seeds, 95% CI {_ci(t.ci_lo, t.ci_hi)}; per seed "
            f"{', '.join(f'{x:.3f}' for x in red)}; {mc[-1] / mc[0]:.3f} for the seed-mean curve); "
            f"<= {T['esd_ratio']} in {votes} seeds")
    word, reason = _log_ratio_claim(t, n_ok, len(red), need, base, "above")
    return dict(holds=None if word == "inconclusive" else word == "holds",
                threshold=f"L(K)/L(0) <= {T['esd_ratio']} (95% CI of the geometric mean over seeds; a hold also needs "
                          ">= 2/3 of seeds)",
                numbers={"L(K)/L(0)": float(mc[-1] / mc[0]), "L(K)/L(0) (geometric mean over seeds)": t.estimate,
                         "L(K)/L(0) (geometric mean) ci95": [t.ci_lo, t.ci_hi], "per-seed L(K)/L(0)": red.tolist(),
                         "seeds meeting it": votes},
                reason=reason if word != "inconclusive" else "",
                inconclusive=_few_seeds(len(curves)) or (reason if word == "inconclusive" else None), needs=("K1", "K3"))


def c3c(esd_curves: list[list[float]], ks: list[int]) -> dict:
    """Spearman rho <= -0.9, decided on the per-seed rho's 95% interval over seeds (the mean curve's rho is
    reported beside it)."""
    curves = np.asarray(esd_curves, float)
    rho = [_rho(c) for c in curves]
    mc = curves.mean(0)
    rho_mean = _rho(mc)
    n_ok, need = _votes([x <= T["rho"] for x in rho])
    votes = f"{n_ok} of {len(rho)}"
    t = decide_threshold(rho, T["rho"], "<=")
    word = _seed_word([t.word], n_ok >= need)
    j = int(np.argmin(mc))
    shape = (f"the seed-mean loss is lowest at k = {ks[j]} ({mc[j]:.4g}) and ends at {mc[-1]:.4g} at k = {ks[-1]}"
             + (f", {mc[-1] / mc[j]:.2f}x its minimum" if j < len(mc) - 1 else ""))
    base = (f"Spearman rho {t.estimate:.2f} (mean over seeds, 95% CI {_ci(t.ci_lo, t.ci_hi, fmt='.2f')}; per seed "
            f"{', '.join(f'{x:.2f}' for x in rho)}; {rho_mean:.2f} for the seed-mean curve) vs <= {T['rho']}, met in "
            f"{votes} seeds")
    tail = {"holds": "", "fails": f", the interval wholly above {T['rho']}",
            "inconclusive": (f", the interval contains {T['rho']}: within noise of the bar" if t.word == "inconclusive"
                             else f": {_count_missed(n_ok, len(rho), need)}")}[word]
    reason = f"{base}{tail}; {shape}."
    return dict(holds=None if word == "inconclusive" else word == "holds",
                threshold=f"Spearman rho <= {T['rho']} (95% CI of the mean over seeds; a hold also needs >= 2/3 of seeds)",
                numbers={"Spearman rho (mean curve)": rho_mean, "Spearman rho (mean over seeds)": t.estimate,
                         "Spearman rho (mean over seeds) ci95": [t.ci_lo, t.ci_hi], "per-seed rho": rho,
                         "argmin k (mean curve)": ks[j], "seeds meeting it": votes},
                reason=reason if word != "inconclusive" else "",
                inconclusive=_few_seeds(len(curves)) or (reason if word == "inconclusive" else None), needs=("K1", "K3"))


def c4(m: list[dict]) -> dict:
    """Paraphrase rate <= 0.30 and the paraphrase retain drop <= 5 points, each by its 95% interval over seeds;
    "below UCE's" by the paired comparison (better holds, worse fails)."""
    pu = [s["UnHype"]["para_target_rate"] for s in m]
    pc = [s["UCE"]["para_target_rate"] for s in m]
    drop = [s["base"]["para_retain_acc"] - s["UnHype"]["para_retain_acc"] for s in m]
    cmp_ = compare_paired(pu, pc, higher_is_better=False)
    t_rate = decide_threshold(pu, T["para_rate"], "<=")
    t_drop = decide_threshold(drop, T["para_drop"], "<=")
    below = _cmp_word(cmp_)
    ok = [u <= T["para_rate"] and u < c and d <= T["para_drop"] for u, c, d in zip(pu, pc, drop)]
    n_ok, need = _votes(ok)
    cmp_txt = (f"UCE's paraphrase rate exceeds UnHype's by {cmp_.mean_diff:.3f}, 95% CI "
               f"[{cmp_.ci_lo:.3f}, {cmp_.ci_hi:.3f}] over {cmp_.n} seeds")
    rate_txt = f"UnHype's paraphrase target rate is {t_rate.estimate:.3f} (95% CI {_ci(t_rate.ci_lo, t_rate.ci_hi)})"
    drop_txt = (f"paraphrase retain accuracy drops {100 * t_drop.estimate:.1f} points (95% CI "
                f"{_ci(t_drop.ci_lo, t_drop.ci_hi, 100, '.1f')})")
    inconclusive = _few_seeds(len(m))
    holds: bool | None
    word = _seed_word([t_rate.word, below, t_drop.word], n_ok >= need)
    if word == "fails":
        holds = False
        reason = _join([f"{rate_txt}, wholly above {T['para_rate']}" if t_rate.word == "fails" else "",
                        f"{cmp_txt}: not below UCE's" if below == "fails" else "",
                        f"{drop_txt}, wholly above 5" if t_drop.word == "fails" else ""])
    elif word == "holds":
        holds = True
        reason = (f"{rate_txt} <= {T['para_rate']}; {cmp_txt}; paraphrase retain drop {100 * t_drop.estimate:.2f} "
                  f"points (CI {_ci(t_drop.ci_lo, t_drop.ci_hi, 100, '.2f')}); met in {n_ok} of {len(ok)} seeds.")
    else:
        holds, reason = None, ""
        noisy = [f"{rate_txt}, which contains {T['para_rate']}" if t_rate.word == "inconclusive" else "",
                 f"{cmp_txt}, which straddles 0: no measurable difference from UCE" if below == "inconclusive" else "",
                 f"{drop_txt}, which contains 5" if t_drop.word == "inconclusive" else ""]
        inconclusive = inconclusive or (_join(["within noise of the bar: " + "; ".join(p for p in noisy if p)])
                                        if any(noisy) else _join([_count_missed(n_ok, len(ok), need)]))
    return dict(holds=holds, threshold=f"paraphrase rate <= {T['para_rate']} and paraphrase retain drop <= 5 points "
                                       "(each by its 95% CI over seeds), below UCE's (paired 95% CI above 0); a hold "
                                       "also needs the condition in >= 2/3 of seeds",
                numbers={"UnHype paraphrase target rate": t_rate.estimate,
                         "UnHype paraphrase target rate ci95": [t_rate.ci_lo, t_rate.ci_hi],
                         "UCE paraphrase target rate": _mean(pc),
                         **cmp_.numbers("UCE - UnHype"),
                         "paraphrase retain drop (points)": 100 * t_drop.estimate,
                         "paraphrase retain drop ci95 (points)": [100 * t_drop.ci_lo, 100 * t_drop.ci_hi],
                         "seeds meeting it": f"{n_ok} of {len(ok)}"},
                reason=reason, inconclusive=inconclusive, needs=("K1", "K4"))


# ---------------------------------------------------------------------- C5, C6: bootstrap over samples

def _boot(stat, arrays: list[np.ndarray], n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of stat(*arrays) resampling each array's rows independently."""
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(n_boot):
        vals.append(stat(*[a[rng.integers(0, len(a), len(a))] for a in arrays]))
    lo, hi = np.quantile(vals, [0.025, 0.975])
    return float(lo), float(hi)


def _decide(lo: float, hi: float, threshold: float, below: bool) -> str:
    """'holds' if the whole interval is on the right side of the threshold, 'fails' if wholly on the wrong side."""
    if below:
        return "holds" if hi <= threshold else ("fails" if lo > threshold else "undecided")
    return "holds" if lo >= threshold else ("fails" if hi < threshold else "undecided")


def _combine(parts: list[str], what: list[str]) -> tuple[bool | None, str | None]:
    """``what[i]`` describes part i with its numbers; the undecided ones make the inconclusive reason."""
    if "fails" in parts:
        return False, None
    if all(p == "holds" for p in parts):
        return True, None
    return None, _join([f"{w} straddles its threshold" for p, w in zip(parts, what) if p == "undecided"])


def c5(results: list, ms: tuple[int, ...]) -> dict:
    """``results``: :class:`~repro.unhype.experiments.MultiResult` per m (seed 0)."""
    by_m = {r.m: r for r in results}
    nums: dict = {}
    parts, bad, what = [], [], []
    worst = {}
    for r in results:
        for d, hits in r.unhype_hits.items():
            lo, hi = _boot(np.mean, [hits])
            parts.append(_decide(lo, hi, T["multi_rate"], below=True))
            what.append(f"digit {d}'s target rate at m = {r.m}, {float(np.mean(hits)):.3f} with 95% CI [{lo:.3f}, {hi:.3f}],")
            if parts[-1] == "fails":
                bad.append(f"digit {d} keeps target rate {float(np.mean(hits)):.3f} at m = {r.m} (CI [{lo:.3f}, {hi:.3f}] "
                           f"above {T['multi_rate']})")
        worst[r.m] = max(r.unhype_rates.values())
    nums["max UnHype target rate per m"] = {m: worst[m] for m in sorted(worst)}
    nums["drop UnHype per m (points)"] = {r.m: 100 * (r.retain["base"] - r.retain["UnHype"]) for r in results}
    nums["drop one LoRA per m (points)"] = {r.m: 100 * (r.retain["base"] - r.retain["LoRA-ESD (one on all)"])
                                            for r in results}
    nums["drop summed LoRAs per m (points)"] = {r.m: 100 * (r.retain["base"] - r.retain["LoRA-ESD (summed)"])
                                                for r in results}
    # the cost comparison (CPU seconds) is reported beside the ledger, not in it: timings are not reproducible
    base = dict(threshold=f"every erased digit's rate <= {T['multi_rate']} at every m; drop growth m=1->5 <= 5 points; "
                          "one LoRA >= 2 points worse at m=5; on 95% bootstrap CIs", needs=("K1", "K5"))
    if 1 not in by_m or 5 not in by_m:
        return dict(holds=None, numbers=nums, reason="", inconclusive=f"the m grid {list(ms)} lacks m = 1 or m = 5",
                    **base)
    r1, r5 = by_m[1], by_m[5]
    drop = lambda b, u: float(np.mean(b) - np.mean(u))  # noqa: E731
    g_lo, g_hi = _boot(lambda b1, u1, b5, u5: drop(b5, u5) - drop(b1, u1),
                       [r1.retain_hits["base"], r1.retain_hits["UnHype"], r5.retain_hits["base"], r5.retain_hits["UnHype"]])
    idx = np.arange(len(r5.retain_hits["UnHype"]))      # paired at m = 5: same samples for UnHype and the LoRA
    e_lo, e_hi = _boot(lambda i: float(np.mean(r5.retain_hits["UnHype"][i])
                                       - np.mean(r5.retain_hits["LoRA-ESD (one on all)"][i])), [idx])
    pg = _decide(g_lo, g_hi, T["multi_growth"], below=True)
    pe = _decide(e_lo, e_hi, T["multi_lora_extra"], below=False)
    parts += [pg, pe]
    what += [f"the drop growth m=1->5, CI [{100 * g_lo:.1f}, {100 * g_hi:.1f}] points,",
             f"one LoRA's extra drop at m=5, CI [{100 * e_lo:.1f}, {100 * e_hi:.1f}] points,"]
    nums["drop growth m=1->5, UnHype (points) CI"] = [100 * g_lo, 100 * g_hi]
    nums["extra drop one LoRA vs UnHype at m=5 (points) CI"] = [100 * e_lo, 100 * e_hi]
    if pg == "fails":
        bad.append(f"UnHype's retain drop grows by more than 5 points from m=1 to m=5 (CI {100 * g_lo:.1f}..{100 * g_hi:.1f})")
    if pe == "fails":
        bad.append(f"one static LoRA does not lose >= 2 points more than UnHype at m=5 (CI {100 * e_lo:.1f}..{100 * e_hi:.1f})")
    holds, why = _combine(parts, what)
    reason = _join(bad) if holds is False else (
        f"max erased-digit rate per m {', '.join(f'm={m}: {v:.3f}' for m, v in sorted(worst.items()))}; drop growth "
        f"CI [{100 * g_lo:.1f}, {100 * g_hi:.1f}] points; one LoRA's extra drop at m=5 CI [{100 * e_lo:.1f}, "
        f"{100 * e_hi:.1f}] points." if holds else "")
    return dict(holds=holds, numbers=nums, reason=reason, inconclusive=why, **base)


def c6(rows: dict[str, tuple[float, np.ndarray]]) -> dict:
    """``rows``: backbone -> (base target rate, UnHype hit indicators)."""
    nums, parts, bad, what = {}, [], [], []
    for name, (_, hits) in rows.items():
        lo, hi = _boot(np.mean, [hits])
        nums[f"{name}: UnHype rate [CI]"] = [float(np.mean(hits)), lo, hi]
        parts.append(_decide(lo, hi, T["backbone_rate"], below=True))
        what.append(f"{name}: UnHype rate {float(np.mean(hits)):.3f}, 95% CI [{lo:.3f}, {hi:.3f}],")
        if parts[-1] == "fails":
            bad.append(f"{name}: UnHype rate {float(np.mean(hits)):.3f}, CI [{lo:.3f}, {hi:.3f}] above {T['backbone_rate']}")
    base = dict(threshold=f"UnHype rate <= {T['backbone_rate']} on both backbones, on 95% bootstrap CIs",
                needs=("K1", "K6"))
    if len(rows) < 2:
        return dict(holds=None, numbers=nums, reason="",
                    inconclusive="only one backbone was run in this profile (run_ddpm is off)", **base)
    holds, why = _combine(parts, what)
    reason = _join(bad) if holds is False else ("; ".join(
        f"{k.split(':')[0]}: {v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]" for k, v in nums.items()) + "." if holds else "")
    return dict(holds=holds, numbers=nums, reason=reason, inconclusive=why, **base)
