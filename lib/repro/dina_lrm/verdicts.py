"""Chapter 11's claims and controls, and the functions that decide them from measured numbers.

Every function returns the keyword arguments of :meth:`repro.common.Ledger.control` (``holds``, ``threshold``,
``numbers``, ``reason``) or :meth:`~repro.common.Ledger.record` (also ``inconclusive`` and ``needs``). Reasons are
sentences computed from the numbers; the thresholds are the card's (:data:`THRESHOLDS`), never tuned.

Accuracy is the expected agreement with the oracle's annotators, mean Φ(sign(Δŝ)·Δr*/s_h) (card, Controls and
risks), in [0, 1]; "points" are hundredths.

Rules.

* A margin claim "A ≥ B + m" (C1, C3) is decided per part by the paired comparison over seeds
  (:func:`repro.common.compare_paired` with ``margin = m``): ``better`` → the part holds; the whole 95 % CI below
  +m → the part fails; otherwise the part is undecided. A claim holds when all its parts hold, fails when any part
  fails, and is otherwise inconclusive (the card's threshold cannot be told from seed noise).
* "Within 3 points" (C4) is a no-worse-than claim with margin 3 points: CI of DiNa − pixel above −3 → holds, wholly
  below → fails, straddling → undecided.
* Thresholds are decided by their 95 % interval (issue 41): holds when the interval clears the bar, fails when it
  lies wholly on the other side, else inconclusive (within noise of the bar). C2a: every step up in σ has a paired
  t interval over seeds of the per-seed rise; the claim holds when every step's interval lies at or below +1 point
  and fails when one lies wholly above it. C4's time ratio (the pixel RM's median reward+gradient time over
  DiNa's): a paired bootstrap over the interleaved timing rounds. C6: the t interval over seeds of the mean
  Spearman against 0.7; the count "≥ 0.7 in ⌈2n/3⌉ of n seeds" is needed for a hold but is no fail condition.
* Fewer than 3 seeds: every comparative claim is inconclusive (a paired CI over 2 seeds decides nothing).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

from repro.common import compare_paired
from repro.common.stats import decide_threshold, mean_ci, threshold_from_ci

THRESHOLDS = {
    "K1_min_ceiling": 0.75,       # Acc* = mean Φ(|Δr*|/s_h)
    "K1_learn_frac": 0.6,         # clean RM (and pixel RM) at σ = 0 >= 0.5 + 0.6 (Acc* − 0.5)
    "K1_max_excess": 0.01,        # no RM above Acc* + 1 point
    "K2a_min_drop": 0.05,         # clean RM loses >= 5 points at σ = 0.4
    "K2b_min_disagree": 0.04,     # two single-draw DiNa scorings disagree on >= 4 % of pairs
    "K2c_min_ratio": 2.0,         # BT's ECE at σ >= 0.6 >= 2 × the resampled-label floor
    "K3a_min_gain": 0.3,          # oracle-ReFL gain >= 0.3 sd(r*) (paired CI)
    "K3a_min_se": 5.0,            # ... which must be >= 5 standard errors of one checkpoint
    "K3b_min_implicit": 0.55,     # DPO held-out implicit accuracy
    "K4a_min_ratio": 3.0,         # pixel-10× reward+grad time >= 3 × FLOP-matched pixel RM's
    "K4a_max_cv": 0.10,           # timing coefficient of variation
    "K4b_min_sd": 3.0,            # ReFL step times of DiNa and pixel differ by >= 3 sd
    "C1_bt_margin": 0.01,         # DiNa >= BT-LRM + 1 point
    "C1_clean_margin": 0.05,      # DiNa >= clean RM + 5 points
    "C2a_tolerance": 0.01,        # non-increasing within 1 point
    "C2b_ece_ratio": 0.5,         # ECE(nll DiNa) <= half of BT's at σ >= 0.6
    "C3_gain": 0.01,              # K=8 >= K=1 + 1 point
    "C3_saturation": 0.005,       # K=16 − K=8 < 0.5 point
    "C4_within": 0.03,            # DiNa within 3 points of the pixel RM
    "C4_min_time_ratio": 3.0,     # reward+gradient wall-clock per sample >= 3× lower
    "C5_reach": 0.5,              # 50 % of the achievable gain
    "C5_dpo_margin": 0.1,         # "≥ DPO" decided with a margin of 0.1 sd(r*) (a third of K3's movement)
    "C6_min_spearman": 0.7,
    "min_seeds": 3,
    "n_boot": 2000,               # bootstrap resamples of C4's timing interval (fixed rng seed 0)
}
T = THRESHOLDS

CLAIMS = {
    "C1": "Vs diffusion-based baselines: at sigma = 0.4, DiNa-LRM accuracy >= BT-LRM accuracy + 1 point and >= the "
          "clean-trained latent RM (evaluated on noisy latents) + 5 points, paired on the same pairs and noise.",
    "C2a": "Noise calibration (a): accuracy is non-increasing in sigma in {0, 0.2, ..., 1.0} within 1 point "
           "(at sigma = 1 every RM scores a tie, 50 % by construction).",
    "C2b": "Noise calibration (b): DiNa-LRM trained with the NLL loss has a lower sigma-averaged Brier score than "
           "BT-LRM's sigmoid(s_w - s_l), and ECE at sigma >= 0.6 <= half of BT-LRM's.",
    "C3": "Noise ensembling: at sigma = 0.4, accuracy with K = 8 averaged noise draws >= K = 1 accuracy + 1 point, "
          "and gains saturate (K = 16 - K = 8 < 0.5 point).",
    "C4": "Competitive with the pixel-space 'VLM' proxy at lower cost: DiNa-LRM (best sigma, K = 8) is within 3 "
          "points of a pixel RM whose reward path costs ~10x the FLOPs, while reward+gradient time per sample is "
          ">= 3x lower (decoder included for the pixel RM).",
    "C5": "Preference optimization: ReFL with DiNa-LRM reaches 50 % of the achievable (oracle-ReFL) gain in fewer "
          "optimizer steps and less time than ReFL with the pixel RM; at equal time its oracle reward >= "
          "Diffusion-DPO's on the oracle-labelled pairs.",
    "C6": "No reward hacking at this budget (diagnostic): during ReFL with DiNa-LRM the oracle reward and the RM "
          "reward are positively correlated across checkpoints (Spearman >= 0.7).",
}

CONTROLS = {
    "K1": "Learnable, unsaturated signal: oracle ceiling Acc* >= 0.75; the clean latent RM at sigma = 0 and the "
          "pixel RM reach >= 0.5 + 0.6 (Acc* - 0.5); no RM exceeds Acc* + 1 point.",
    "K2a": "Noise changes decisions (clean RM): at sigma = 0.4 the clean RM loses >= 5 points against its own "
           "sigma = 0 accuracy.",
    "K2b": "Noise changes decisions (DiNa draws): at sigma = 0.4 two independent single-draw DiNa scorings "
           "disagree on >= 4 % of the pairs.",
    "K2c": "Calibration is resolvable: BT-LRM's ECE at sigma >= 0.6 is >= 2x the ECE floor of labels resampled from "
           "BT's own probabilities.",
    "K3a": "Alignment moves the generator: oracle-ReFL gains >= 0.3 sd(r*) (paired 95 % CI over seeds above 0.3), "
           "which is >= 5 standard errors of one checkpoint.",
    "K3b": "DPO learns: Diffusion-DPO's held-out implicit accuracy >= 0.55 (every beta).",
    "K4a": "Timing resolves FLOPs: at the timing batch the 10x pixel RM's reward+gradient time is >= 3x the "
           "FLOP-matched pixel RM's, with timing CV < 10 %.",
    "K4b": "Timing resolves ReFL steps: the ReFL step times of DiNa and of the pixel RM differ by >= 3 sd, sd being "
           "that of the per-step paired differences (each pair: the same prompts, noise and ReFL step j; each "
           "step's difference the median of repeated back-to-back executions).",
}


# ----------------------------------------------------------------------------- helpers

def _pts(x: float) -> str:
    return f"{100 * x:+.2f}"


def _few(n: int) -> str | None:
    return (f"only {n} seed(s): a paired comparison over fewer than {T['min_seeds']} seeds decides nothing"
            if n < T["min_seeds"] else None)


def margin_part(a: Sequence[float], b: Sequence[float], margin: float, what: str) -> tuple[str, dict, str]:
    """'A >= B + margin' by the paired CI over seeds: ('holds' | 'fails' | 'undecided', numbers, sentence)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    cmp = compare_paired(a, b, margin=margin)
    state = "holds" if cmp.better else "fails" if cmp.ci_hi < margin else "undecided"
    nums = {f"{what} mean diff (points)": 100 * cmp.mean_diff,
            f"{what} ci95 (points)": [100 * cmp.ci_lo, 100 * cmp.ci_hi]}
    sent = (f"{what} = {_pts(cmp.mean_diff)} points, 95 % CI [{_pts(cmp.ci_lo)}, {_pts(cmp.ci_hi)}] against the "
            f"margin {_pts(margin)}: " + {"holds": "met", "fails": "the whole CI is below the margin",
                                            "undecided": "the CI straddles the margin"}[state])
    return state, nums, sent


def combine(states: list[str]) -> tuple[bool | None, bool]:
    """(holds, undecided): holds if all parts hold, fails if any fails, else undecided."""
    if any(s == "fails" for s in states):
        return False, False
    if all(s == "holds" for s in states):
        return True, False
    return None, True


# ----------------------------------------------------------------------------- controls

def k1(acc_star: float, clean_sigma0: Sequence[float], pixel_sigma0: Sequence[float],
       max_rm_acc: float) -> dict:
    """Oracle ceiling, the clean RM's and the pixel RM's σ = 0 accuracies per seed, the largest RM accuracy seen."""
    floor = 0.5 + T["K1_learn_frac"] * (acc_star - 0.5)
    c, p = float(np.mean(clean_sigma0)), float(np.mean(pixel_sigma0)) if len(pixel_sigma0) else math.nan
    checks = {
        f"Acc* = {acc_star:.4f} < {T['K1_min_ceiling']}": acc_star >= T["K1_min_ceiling"],
        f"the clean RM reaches {c:.4f} at σ = 0 < the learnability floor {floor:.4f}": c >= floor,
        f"the pixel RM reaches {p:.4f} < the learnability floor {floor:.4f}": bool(p >= floor),
        f"an RM reaches {max_rm_acc:.4f} > Acc* + {100 * T['K1_max_excess']:.0f} point = "
        f"{acc_star + T['K1_max_excess']:.4f} (a leak)": max_rm_acc <= acc_star + T["K1_max_excess"],
    }
    return dict(holds=all(checks.values()),
                threshold=f"Acc* >= {T['K1_min_ceiling']}; clean and pixel RM >= 0.5 + {T['K1_learn_frac']} (Acc* − 0.5); "
                          f"max RM <= Acc* + {100 * T['K1_max_excess']:.0f} pt",
                numbers={"Acc*": acc_star, "learnability floor": floor, "clean RM at sigma=0": c,
                         "pixel RM (10x) at sigma=0": p, "largest RM accuracy": max_rm_acc},
                reason="; ".join(k for k, ok in checks.items() if not ok))


def k2a(clean_sigma0: Sequence[float], clean_at_u: Sequence[float], u: float) -> dict:
    drop = float(np.mean(clean_sigma0) - np.mean(clean_at_u))
    return dict(holds=drop >= T["K2a_min_drop"],
                threshold=f"clean RM accuracy at σ=0 − at σ={u} >= {100 * T['K2a_min_drop']:.0f} points",
                numbers={"clean RM at sigma=0": float(np.mean(clean_sigma0)),
                         f"clean RM at sigma={u}": float(np.mean(clean_at_u)), "drop (points)": 100 * drop},
                reason=f"the clean RM loses only {100 * drop:.2f} points from σ = 0 to σ = {u}: noise at this level "
                       "barely changes its decisions, so a margin over it says little about noise robustness")


def k2b(disagree: Sequence[float]) -> dict:
    d = float(np.mean(disagree))
    return dict(holds=d >= T["K2b_min_disagree"],
                threshold=f"two single-draw DiNa scorings disagree on >= {100 * T['K2b_min_disagree']:.0f} % of pairs",
                numbers={"disagreement": d, "per seed": list(map(float, disagree))},
                reason=f"only {100 * d:.2f} % of the pairs change decision between two noise draws: averaging "
                       "draws cannot gain a point")


def k2c(ece_bt: Sequence[float], floor: Sequence[float]) -> dict:
    e, f = float(np.mean(ece_bt)), float(np.mean(floor))
    ratio = e / f if f > 0 else math.inf
    return dict(holds=ratio >= T["K2c_min_ratio"],
                threshold=f"BT-LRM ECE at σ >= 0.6 >= {T['K2c_min_ratio']:g} × the resampled-label floor",
                numbers={"BT ECE (sigma>=0.6)": e, "ECE floor": f, "ratio": ratio},
                reason=f"BT-LRM's ECE {e:.4f} is only {ratio:.2f} × the floor {f:.4f} that sampling alone gives: "
                       "there is no miscalibration for DiNa to halve")


def k3a(oracle_start: Sequence[float], oracle_end: Sequence[float], sd_r: float, n_eval: int) -> dict:
    s, e = np.asarray(oracle_start, float), np.asarray(oracle_end, float)
    cmp = compare_paired(e, s, margin=T["K3a_min_gain"])
    se = sd_r / math.sqrt(n_eval)
    gain = float(cmp.mean_diff)
    ok = bool(cmp.better and gain >= T["K3a_min_se"] * se)
    return dict(holds=ok, threshold=f"oracle-ReFL gain paired CI > {T['K3a_min_gain']} sd(r*) and >= "
                                    f"{T['K3a_min_se']:g} SE of one checkpoint",
                numbers={"gain (sd of r*)": gain, "gain ci95": [cmp.ci_lo, cmp.ci_hi],
                         "SE of one checkpoint": se, "seeds": int(s.size)},
                reason=f"oracle-ReFL moved the oracle reward by {gain:+.3f} sd, 95 % CI [{cmp.ci_lo:+.3f}, "
                       f"{cmp.ci_hi:+.3f}] over {s.size} seed(s) (needs the CI above {T['K3a_min_gain']} and >= "
                       f"{T['K3a_min_se'] * se:.3f}): alignment did not move the generator beyond noise")


def k3b(implicit: dict) -> dict:
    """``implicit``: beta -> per-seed held-out implicit accuracies (empty when DPO did not run)."""
    if not implicit:
        return dict(holds=False, threshold=f"implicit accuracy >= {T['K3b_min_implicit']}", numbers={},
                    reason="Diffusion-DPO was not run (run_dpo = False)")
    means = {f"beta={b:g}": float(np.mean(v)) for b, v in implicit.items()}
    bad = [k for k, v in means.items() if v < T["K3b_min_implicit"]]
    return dict(holds=not bad, threshold=f"held-out implicit accuracy >= {T['K3b_min_implicit']} for every beta",
                numbers=means,
                reason=f"DPO's held-out implicit accuracy is below {T['K3b_min_implicit']} at {', '.join(bad)} "
                       f"({', '.join(f'{means[k]:.3f}' for k in bad)}): DPO did not learn the preferences")


SMOKE_TIMING = ("smoke profile: a few timing repeats of tiny runs on a shared machine are noise (and timings are "
                "kept out of the determinism check); the full profile decides")


def k4a(big: dict, matched: dict, smoke: bool = False) -> dict:
    """Timing summaries (ms, cv) of reward+gradient of the 10× and FLOP-matched pixel RMs."""
    if smoke:
        return dict(holds=False, threshold=f"time ratio >= {T['K4a_min_ratio']:g} and CV < "
                                           f"{100 * T['K4a_max_cv']:.0f} %", numbers={}, reason=SMOKE_TIMING)
    ratio = big["ms"] / matched["ms"]
    cv = max(big["cv"], matched["cv"])
    ok = ratio >= T["K4a_min_ratio"] and cv < T["K4a_max_cv"]
    return dict(holds=ok, threshold=f"time ratio >= {T['K4a_min_ratio']:g} and CV < {100 * T['K4a_max_cv']:.0f} %",
                numbers={"pixel 10x / matched": f"{ratio:.2f} ×", "largest CV": f"{100 * cv:.1f} %"},
                reason=f"the 10× pixel RM's reward+gradient time is {ratio:.2f} × the FLOP-matched one's (CV "
                       f"{100 * cv:.1f} %): at this batch the timings do not resolve a 10× FLOP difference")


def _paired_z(diff: Sequence[float]) -> tuple[float, float, float]:
    """(median of the per-step differences, their robust sd 1.4826 · MAD, |median| / sd)."""
    diff = np.asarray(diff, float)
    md = float(np.median(diff))
    sd = float(1.4826 * np.median(np.abs(diff - md)))
    return md, sd, (abs(md) / sd if sd > 0 else math.inf)


def k4b(dina_steps: Sequence[float], pixel_steps: Sequence[float], in_run: tuple | None = None,
        repeats: int | None = None, smoke: bool = False) -> dict:
    """CPU seconds of ReFL steps with the DiNa and with the pixel reward, step by step (paired).

    ``dina_steps[i]`` and ``pixel_steps[i]`` hold the same ReFL step — the same prompts, noise and ReFL step j — with
    each reward: a number, or the CPU times of ``repeats`` executions of it, the two rewards back to back
    (:func:`repro.dina_lrm.align.time_refl_steps`); then the step's paired difference is the median of its repeats'
    back-to-back differences and a reward's step time the median of its executions. The paired design removes the
    designed variation of the step time (15 to 19 gradient-free Euler steps, common to both rewards). "sd" is the sd
    of the per-step paired differences pixel − DiNa, estimated robustly (1.4826 MAD); the rule: |median difference|
    >= 3 such sd. ``in_run`` = (DiNa, pixel) per-step CPU times of the interleaved ReFL runs themselves (one
    execution per step, under whatever load the machine had): these are the times C5's "less time" part adds up, so
    when given they must clear the same bar (issue 46: the control certifies the timing that C5 uses).
    """
    thr = (f"|median per-step (pixel − DiNa)| >= {T['K4b_min_sd']:g} sd of the per-step paired differences "
           "(robust sd, 1.4826 MAD; each step's difference the median of its back-to-back repeats)")
    if smoke:
        return dict(holds=False, threshold=thr, numbers={}, reason=SMOKE_TIMING)
    d, p = np.asarray(dina_steps, float), np.asarray(pixel_steps, float)
    if d.ndim == 1:
        d, p = d[:, None], p[:, None]
    diff = np.median(p - d, axis=1)
    md, sd, z = _paired_z(diff)
    dm = float(np.median(np.median(d, axis=1)))
    nums = {"DiNa ReFL step": f"{1e3 * dm:.2f} ms",
            "pixel ReFL step": f"{1e3 * float(np.median(np.median(p, axis=1))):.2f} ms",
            "paired difference": f"{1e3 * md:.2f} ms", "sd of paired differences": f"{1e3 * sd:.2f} ms",
            "difference / sd": f"{z:.1f} ×", "steps timed": int(diff.size), "repeats per step": int(d.shape[1])}
    if d.shape[1] > 1:   # the same statistic from one execution per step (the first repeat)
        md1, sd1, z1 = _paired_z(p[:, 0] - d[:, 0])
        nums["one execution per step: difference / sd"] = f"{z1:.1f} × (sd {1e3 * sd1:.2f} ms)"
    tail, z_run = "", math.inf
    if in_run is not None:
        md_r, sd_r, z_r = _paired_z(np.asarray(in_run[1], float) - np.asarray(in_run[0], float))
        nums.update({"in-run paired difference": f"{1e3 * md_r:.2f} ms", "in-run sd": f"{1e3 * sd_r:.2f} ms",
                     "in-run difference / sd": f"{z_r:.1f} ×"})
        tail = (f"; in the ReFL runs themselves (one execution per step, the times C5 adds up): {1e3 * md_r:+.2f} ms,"
                f" {z_r:.1f} sd of {1e3 * sd_r:.2f} ms (needs {T['K4b_min_sd']:g})")
        z_run = z_r if md_r * md > 0 else 0.0    # the runs' difference must have the repeats' sign
    frac = float(np.mean(diff * np.sign(md) > 0)) if md != 0 else 0.0
    nums["steps with the median's sign"] = f"{100 * frac:.0f} %"
    holds = z >= T["K4b_min_sd"] and z_run >= T["K4b_min_sd"]
    return dict(holds=holds, threshold=thr + (", both back to back and in the ReFL runs" if in_run is not None else ""),
                numbers=nums,
                reason=f"the pixel reward's ReFL step costs {1e3 * md:+.2f} ms against DiNa's {1e3 * dm:.2f} ms, "
                       f"{z:.1f} sd of the per-step paired differences back to back ({1e3 * sd:.2f} ms; needs "
                       f"{T['K4b_min_sd']:g}){tail}" + ("" if holds else ": the two rewards' step times are not "
                       "resolved from timing noise, so the time part of C5 is not evidence"))


# ----------------------------------------------------------------------------- claims

def c1(dina: Sequence[float], bt: Sequence[float], clean: Sequence[float], u: float,
       extra: dict | None = None) -> dict:
    """Per-seed accuracies at σ = u (single draw, same pairs and noise)."""
    s1, n1, t1 = margin_part(dina, bt, T["C1_bt_margin"], "DiNa − BT-LRM")
    s2, n2, t2 = margin_part(dina, clean, T["C1_clean_margin"], "DiNa − clean RM")
    holds, und = combine([s1, s2])
    n = len(dina)
    inc = _few(n) or (f"{t1}; {t2}" if und else None)
    return dict(holds=holds, threshold=f"paired CI of DiNa − BT above +{100 * T['C1_bt_margin']:.0f} pt and of DiNa − "
                                       f"clean above +{100 * T['C1_clean_margin']:.0f} pt (σ = {u})",
                numbers={"DiNa": float(np.mean(dina)), "BT-LRM": float(np.mean(bt)), "clean RM": float(np.mean(clean)),
                         **n1, **n2, **(extra or {}), "seeds": n},
                reason=f"{t1}; {t2}", inconclusive=inc, needs=("K1", "K2a"))


def c2a(sigmas: Sequence[float], curves: Sequence[Sequence[float]], others: dict | None = None) -> dict:
    """DiNa-LRM's accuracy curves over the σ grid, one row per seed ([seeds, σ]; a 1-d curve is one seed).

    Each step up in σ is decided by the paired t interval over seeds of the per-seed rise (next − this accuracy):
    the step passes when its interval lies at or below +1 point and misses when it lies wholly above. The claim
    holds when every step passes, fails when one misses, else is inconclusive (within noise of the tolerance)."""
    C = np.atleast_2d(np.asarray(curves, float))
    c = C.mean(axis=0)
    R = np.diff(C, axis=1)                            # [seeds, steps] per-seed rises
    rises = R.mean(axis=0) if R.size else np.zeros(0)
    thr = (f"every step up in σ lowers accuracy or raises it by <= {100 * T['C2a_tolerance']:.0f} point (paired "
           "95 % CI over seeds of each step's rise at or below it)")
    if not rises.size:
        return dict(holds=None, threshold=thr, numbers={"DiNa accuracy vs sigma": c.tolist()}, reason="",
                    inconclusive="no σ grid", needs=("K1",))
    tests = [decide_threshold(R[:, k], T["C2a_tolerance"], "<=") for k in range(R.shape[1])]
    words = [t.word for t in tests]
    worst = int(np.argmax(rises))
    nums = {"DiNa accuracy vs sigma": c.tolist(), "largest rise (points)": 100 * float(rises.max()),
            "rise per step (points)": [100 * float(v) for v in rises],
            "rise ci95 per step (points)": [[100 * t.ci_lo, 100 * t.ci_hi] for t in tests],
            "accuracy at sigma=1": float(c[-1]), "seeds": int(C.shape[0]), **(others or {})}
    step = lambda k: f"σ = {sigmas[k]:g} → {sigmas[k + 1]:g}"  # noqa: E731
    ci = lambda k: f"[{_pts(tests[k].ci_lo)}, {_pts(tests[k].ci_hi)}]"  # noqa: E731
    base = (f"the largest seed-mean rise is {_pts(float(rises.max()))} points ({step(worst)}, 95 % CI {ci(worst)}); "
            f"accuracy at σ = 1 is {c[-1]:.4f}")
    if "fails" in words:
        bad = [k for k, w in enumerate(words) if w == "fails"]
        holds, inc = False, None
        reason = base + "; the whole CI lies above +1 point at " + ", ".join(f"{step(k)} {ci(k)}" for k in bad)
    elif all(w == "holds" for w in words):
        holds, inc, reason = True, None, base + "; every step's CI lies at or below +1 point"
    else:
        und = [k for k, w in enumerate(words) if w == "inconclusive"]
        holds = None
        reason = base + "; within noise of the bar: the CI contains +1 point at " + ", ".join(
            f"{step(k)} {ci(k)}" for k in und)
        inc = reason if C.shape[0] >= 2 else f"one seed: no interval over seeds; {reason}"
    return dict(holds=holds, threshold=thr, numbers=nums, reason=reason, inconclusive=inc, needs=("K1",))


def c2b(brier_nll: Sequence[float], brier_bt: Sequence[float], ece_nll: Sequence[float],
        ece_bt: Sequence[float], extra: dict | None = None) -> dict:
    """Per-seed σ-averaged Brier scores and ECEs at σ >= 0.6 of the NLL-trained DiNa and of BT-LRM."""
    bn, bb, en, eb = (np.asarray(x, float) for x in (brier_nll, brier_bt, ece_nll, ece_bt))
    cb = compare_paired(bn, bb, higher_is_better=False)
    s1 = "holds" if cb.better else "fails" if cb.worse or cb.ci_hi <= 0 else "undecided"
    # ECE(nll) <= ½ ECE(BT): paired on ½ ECE(BT) − ECE(nll) >= 0
    ce = compare_paired(T["C2b_ece_ratio"] * eb, en)
    s2 = "holds" if ce.better else "fails" if ce.ci_hi < 0 else "undecided"
    holds, und = combine([s1, s2])
    t1 = (f"Brier (σ-averaged) NLL-DiNa − BT = {bn.mean() - bb.mean():+.4f}, 95 % CI [{-cb.ci_hi:+.4f}, "
          f"{-cb.ci_lo:+.4f}] ({'lower' if cb.better else 'higher' if cb.worse else 'no measurable difference'})")
    t2 = (f"ECE at σ >= 0.6: NLL-DiNa {en.mean():.4f} vs BT {eb.mean():.4f} (ratio {en.mean() / eb.mean():.2f}; "
          f"½ BT − NLL = {ce.mean_diff:+.4f}, 95 % CI [{ce.ci_lo:+.4f}, {ce.ci_hi:+.4f}])")
    n = bn.size
    return dict(holds=holds, threshold="paired CI: Brier(NLL-DiNa) < Brier(BT) and ECE(NLL-DiNa) < ½ ECE(BT), σ >= 0.6",
                numbers={"Brier NLL-DiNa": float(bn.mean()), "Brier BT": float(bb.mean()),
                         "ECE NLL-DiNa": float(en.mean()), "ECE BT": float(eb.mean()), **(extra or {}), "seeds": n},
                reason=f"{t1}; {t2}", inconclusive=_few(n) or (f"{t1}; {t2}: a part is undecided" if und else None),
                needs=("K1", "K2c"))


def variance_buys_calibration(brier_dina: Sequence[float], brier_const: Sequence[float],
                              ece_dina: Sequence[float], ece_const: Sequence[float]) -> tuple[dict, str]:
    """Reported beside C2b, deciding nothing: does DiNa's σ-dependent variance (var = a σ² + b) calibrate better than
    the Thurstone-constant ablation (var ≡ 0.5, same fidelity loss, same batches)? Paired over the seeds that trained
    both; returns (numbers, sentence)."""
    bd, bc, ed, ec = (np.asarray(x, float) for x in (brier_dina, brier_const, ece_dina, ece_const))
    if bd.size < 2:
        return {}, "the Thurstone-constant ablation ran on fewer than 2 seeds: no comparison"
    cb = compare_paired(bd, bc, higher_is_better=False)
    ce = compare_paired(ed, ec, higher_is_better=False)
    nums = {"Brier DiNa (ablation seeds)": float(bd.mean()), "Brier Thurstone-const": float(bc.mean()),
            "Brier DiNa − const ci95": [float(-cb.ci_hi), float(-cb.ci_lo)],
            "ECE DiNa (ablation seeds)": float(ed.mean()), "ECE Thurstone-const": float(ec.mean()),
            "ECE DiNa − const ci95": [float(-ce.ci_hi), float(-ce.ci_lo)]}
    buys = cb.better and not ce.worse
    text = (f"against the Thurstone-constant ablation (var ≡ 0.5, same loss and batches; {bd.size} seeds) DiNa's "
            f"σ-averaged Brier is {bd.mean():.4f} vs {bc.mean():.4f} (DiNa − const 95 % CI [{-cb.ci_hi:+.4f}, "
            f"{-cb.ci_lo:+.4f}]) and its ECE at σ ≥ 0.6 {ed.mean():.4f} vs {ec.mean():.4f} ([{-ce.ci_hi:+.4f}, "
            f"{-ce.ci_lo:+.4f}]): " + ("the σ-dependent variance buys calibration here" if buys else
                                       "the σ-dependent variance buys no calibration here"))
    return nums, text


def c3(acc_k: dict, u: float, var_k: dict | None = None) -> dict:
    """``acc_k``: K -> per-seed accuracies at σ = u with K averaged draws."""
    if 8 not in acc_k or 16 not in acc_k:
        return dict(holds=None, threshold="K = 8 vs 1 and K = 16 vs 8",
                    numbers={f"K={k}": float(np.mean(v)) for k, v in acc_k.items()},
                    inconclusive=f"ensemble_K = {sorted(acc_k)} lacks K = 8 or 16", needs=("K1", "K2b"))
    s1, n1, t1 = margin_part(acc_k[8], acc_k[1], T["C3_gain"], "K=8 − K=1")
    d = np.asarray(acc_k[16], float) - np.asarray(acc_k[8], float)
    cmp = compare_paired(acc_k[16], acc_k[8])
    s2 = "holds" if cmp.ci_hi < T["C3_saturation"] else "fails" if cmp.ci_lo >= T["C3_saturation"] else "undecided"
    t2 = (f"K=16 − K=8 = {_pts(float(d.mean()))} points, 95 % CI [{_pts(cmp.ci_lo)}, {_pts(cmp.ci_hi)}] against "
          f"the saturation bound {100 * T['C3_saturation']:.1f} point")
    holds, und = combine([s1, s2])
    n = d.size
    nums = {**{f"K={k}": float(np.mean(v)) for k, v in acc_k.items()}, **n1,
            "K=16 − K=8 (points)": 100 * float(d.mean()), "K=16 − K=8 ci95 (points)": [100 * cmp.ci_lo, 100 * cmp.ci_hi],
            **({f"score variance of the K-mean, K={k}": v for k, v in (var_k or {}).items()}), "seeds": n}
    return dict(holds=holds, threshold=f"paired CI of K=8 − K=1 above +{100 * T['C3_gain']:.0f} pt and of K=16 − K=8 "
                                       f"below {100 * T['C3_saturation']:.1f} pt (σ = {u})",
                numbers=nums, reason=f"{t1}; {t2}", inconclusive=_few(n) or (f"{t1}; {t2}" if und else None),
                needs=("K1", "K2b"))


def time_ratio_ci(num_rounds: Sequence[float], den_rounds: Sequence[float], n_boot: int | None = None,
                  rng_seed: int = 0) -> tuple[float, float, float]:
    """median(num)/median(den) of two paths' per-round times and its 95 % percentile interval from a paired bootstrap
    over the interleaved rounds (round i of both paths ran back to back, so a resample draws the same rounds for
    both). Fewer than two rounds: unbounded."""
    a, b = np.asarray(num_rounds, float), np.asarray(den_rounds, float)
    est = float(np.median(a) / np.median(b))
    if a.size < 2 or a.shape != b.shape:
        return est, -math.inf, math.inf
    idx = np.random.default_rng(rng_seed).integers(0, a.size, size=(n_boot or T["n_boot"], a.size))
    lo, hi = np.percentile(np.median(a[idx], axis=1) / np.median(b[idx], axis=1), [2.5, 97.5])
    return est, float(lo), float(hi)


def c4(dina_best: Sequence[float], pixel_big: Sequence[float], pixel_matched: Sequence[float],
       time_ratio: float, flop_ratio: float, best_sigmas: Sequence[float],
       time_rounds: tuple[Sequence[float], Sequence[float]] | None = None) -> dict:
    """Per-seed accuracies of DiNa (best σ, K = 8) and of the pixel RMs; reward+gradient time ratio pixel / DiNa.

    ``time_rounds`` = (pixel, DiNa) per-round reward+gradient times of the interleaved timing (``rounds_ms`` of
    :func:`repro.dina_lrm.metrics.timing_summary`): the ratio ≥ 3 is decided by its paired bootstrap interval over
    the rounds (:func:`time_ratio_ci`); without them the time part is undecided."""
    a, b = np.asarray(dina_best, float), np.asarray(pixel_big, float)
    cmp = compare_paired(a, b)
    m = T["C4_within"]
    s1 = "holds" if cmp.ci_lo > -m else "fails" if cmp.ci_hi < -m else "undecided"
    if time_rounds is not None:
        _, tlo, thi = time_ratio_ci(*time_rounds)
    else:
        tlo, thi = -math.inf, math.inf
    tt = threshold_from_ci(time_ratio, tlo, thi, T["C4_min_time_ratio"], ">=")
    s2 = {"holds": "holds", "fails": "fails", "inconclusive": "undecided"}[tt.word]
    holds, und = combine([s1, s2])
    t1 = (f"DiNa (best σ, K = 8) − pixel RM = {_pts(cmp.mean_diff)} points, 95 % CI [{_pts(cmp.ci_lo)}, "
          f"{_pts(cmp.ci_hi)}] against −{100 * m:.0f}")
    # timings stay strings with "×" (the determinism re-run blanks them; they change with the machine's load)
    t2 = (f"the pixel RM's reward+gradient costs {time_ratio:.2f} × DiNa's per sample, 95 % CI [{tlo:.2f} ×, "
          f"{thi:.2f} ×] over the timing rounds (needs >= {T['C4_min_time_ratio']:g}"
          + ("; within noise of the bar" if s2 == "undecided" else "")
          + (", no per-round timings" if time_rounds is None else "") + f") at {flop_ratio:.1f} × its FLOPs")
    n = a.size
    return dict(holds=holds, threshold=f"CI of DiNa − pixel above −{100 * m:.0f} pt and time ratio >= "
                                       f"{T['C4_min_time_ratio']:g} (its CI over timing rounds)",
                numbers={"DiNa best sigma K=8": float(a.mean()), "pixel RM 10x": float(b.mean()),
                         "pixel RM FLOP-matched": float(np.mean(pixel_matched)), **cmp.numbers(),
                         "pixel/DiNa time": f"{time_ratio:.2f} ×", "pixel/DiNa time ci95": f"[{tlo:.2f} ×, {thi:.2f} ×]",
                         "FLOP ratio": flop_ratio,
                         "best sigma per seed": list(map(float, best_sigmas)), "seeds": n},
                reason=f"{t1}; {t2}", inconclusive=_few(n) or (f"{t1}; {t2}" if und else None),
                needs=("K1", "K4a"))


def c5(steps_dina: Sequence[float], steps_pix: Sequence[float], time_dina: Sequence[float],
       time_pix: Sequence[float], dina_eq: dict, dpo_eq: dict, censored_at: float, extra: dict | None = None) -> dict:
    """Per-seed steps and CPU seconds to reach 50 % of the oracle-ReFL gain (``censored_at`` where never reached),
    and per-seed oracle reward of DiNa-ReFL's end vs each DPO run at equal time (``dpo_eq``: beta -> list)."""
    sd, sp, td, tp = (np.asarray(x, float) for x in (steps_dina, steps_pix, time_dina, time_pix))
    parts, texts, nums = [], [], {}
    for name, a, b in (("steps", sd, sp), ("CPU seconds", td, tp)):
        cmp = compare_paired(a, b, higher_is_better=False)
        parts.append("holds" if cmp.better else "fails" if cmp.worse else "undecided")
        u = " s" if name != "steps" else ""
        texts.append(f"{name} to 50 %: DiNa {a.mean():.2f}{u} vs pixel {b.mean():.2f}{u} ({cmp.word} for DiNa, "
                     f"pixel − DiNa 95 % CI [{cmp.ci_lo:+.2f}{u}, {cmp.ci_hi:+.2f}{u}])")
        if u:
            nums[f"DiNa {name} to 50%"], nums[f"pixel {name} to 50%"] = f"{a.mean():.3f} s", f"{b.mean():.3f} s"
        else:
            nums[f"DiNa {name} to 50%"], nums[f"pixel {name} to 50%"] = float(a.mean()), float(b.mean())
    nums["never reached: steps censored at"] = censored_at
    nums.update(extra or {})
    if not dpo_eq:
        parts.append("undecided")
        texts.append("Diffusion-DPO was not run")
    for beta, v in dpo_eq.items():
        cmp = compare_paired(dina_eq[beta], v)
        m = T["C5_dpo_margin"]
        parts.append("holds" if cmp.ci_lo > -m else "fails" if cmp.ci_hi < -m else "undecided")
        texts.append(f"at equal time DiNa-ReFL − DPO(β={beta:g}) = {cmp.mean_diff:+.3f} sd, 95 % CI "
                     f"[{cmp.ci_lo:+.3f}, {cmp.ci_hi:+.3f}] against −{m}")
        nums[f"DiNa − DPO(beta={beta:g}) at equal time"] = cmp.mean_diff
    holds, und = combine(parts)
    n = sd.size
    return dict(holds=holds, threshold="fewer steps and less time (paired CI) and DiNa − DPO at equal time above "
                                       f"−{T['C5_dpo_margin']} sd",
                numbers={**nums, "seeds": n}, reason="; ".join(texts),
                inconclusive=_few(n) or ("; ".join(texts) + ": a part is undecided" if und else None),
                needs=("K3a", "K3b", "K4b"))


def c6(oracle_curves: Sequence[Sequence[float]], rm_curves: Sequence[Sequence[float]],
       steps: Sequence[float]) -> dict:
    """Per-seed logged oracle and RM rewards of the DiNa-ReFL run, over checkpoints."""
    rhos, div = [], []
    for o, r in zip(oracle_curves, rm_curves):
        rhos.append(float(stats.spearmanr(o, r).statistic))
        k = int(np.argmax(o))
        div.append(float(steps[k]) if k < len(o) - 1 and r[-1] > r[k] else math.nan)
    rh = np.asarray(rhos)
    need = math.ceil(2 * rh.size / 3 - 1e-9)
    count = int((rh >= T["C6_min_spearman"]).sum())
    t = decide_threshold(rh, T["C6_min_spearman"], ">=")
    count_met = count >= need
    word = "fails" if t.word == "fails" else "holds" if (t.holds and count_met) else "inconclusive"
    divs = [d for d in div if not math.isnan(d)]
    reason = (f"Spearman(oracle, RM) over checkpoints is {np.mean(rh):.3f} on average, 95 % CI [{t.ci_lo:.3f}, "
              f"{t.ci_hi:.3f}] over {rh.size} seed(s), >= {T['C6_min_spearman']} in {count} of {rh.size} seeds "
              f"(needs {need})")
    if word == "inconclusive":
        reason += (f"; within noise of the bar: the CI contains {T['C6_min_spearman']}" if not t.decided else
                   f"; the CI clears {T['C6_min_spearman']} but the seed count is missed")
    reason += f"; the oracle peaked at step(s) {divs} while the RM reward kept rising" if divs else ""
    return dict(holds=None if word == "inconclusive" else word == "holds",
                threshold=f"mean Spearman >= {T['C6_min_spearman']} (95 % CI over seeds at or above it) and >= "
                          f"{T['C6_min_spearman']} in ⌈2n/3⌉ seeds; fails only when the CI lies wholly below",
                numbers={"Spearman per seed": rhos, "mean Spearman": float(np.mean(rh)),
                         "mean Spearman ci95": [t.ci_lo, t.ci_hi], "seeds >= 0.7": f"{count} of {rh.size}",
                         "oracle peak before the end (step)": divs or None},
                reason=reason, inconclusive=reason if word == "inconclusive" else None, needs=("K3a",))
