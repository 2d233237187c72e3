"""Chapter 12's claims and controls, and the functions that decide them from measured numbers.

Every function returns the keyword arguments of :meth:`repro.common.Ledger.control` (controls: ``holds``,
``threshold``, ``numbers``, ``reason``) or :meth:`~repro.common.Ledger.record` (claims: also ``inconclusive``
and ``needs``), so the notebook writes ``ledger.record("C1", **verdicts.c1(...))``. Reasons are sentences
computed from the numbers; thresholds are the card's (:data:`THRESHOLDS`), never tuned.

Metrics (issue 14). The *primary* metric of C1 and C3 is the sampled accuracy at the rollout temperature τ on
the hard split (``n_eval_samples`` samples per problem, the same random numbers for every model): RL sharpens
the sampling distribution long before it flips a greedy argmax, so this is where RL's effect, and any
difference between GRPO and RLTT, can be seen at all. Greedy accuracy, the card's original metric, is kept as
a secondary number with its own paired comparison.

Rules.

* Controls. **K1**: the SFT model's per-loop accuracy (decoding every token with only t loops) rises strictly
  through the loops, by >= 3 points from the first to the last, greedy and sampled, so that the intermediate
  loops carry a graded computation that trajectory credit (C3) can act on. **K2**: GRPO's mean gain over SFT
  on the primary metric exceeds twice the half-width of its 95 % CI over seeds, i.e. RL moves the policy well
  beyond seed noise (the card's "GRPO's own gain is inside its CI" rule, made a guard for holds and fails alike),
  measured against the SFT model at its best temperature (greedy or re-tempered; chosen on a validation split
  and scored on the test split), or greedy against greedy (issue 46), so that sharpening alone, which re-tempering reproduces and which leaves greedy decoding unchanged,
  does not pass it.
  C1, C3, C4, C5a, C5b need K2; C3 also needs K1.
* C1, C3 (the card's "in >= 4 of 5 seeds"; CONTRIBUTING's seed-count rule of issue 41): hold only when RLTT wins
  in >= ceil(0.8 n) seeds *and* the paired comparison (:func:`repro.common.compare_paired`) says ``better``; fail
  only when the count is missed *and* the comparison says ``worse`` (GRPO measurably higher); anything else -- a
  count met inside seed noise, or a count missed while the paired CI contains 0 -- is ``inconclusive`` (a seed
  count is itself a noisy statistic, and a miss decided on it alone flips with the next seeds). C3 also keeps the
  card's rule: if neither method's intermediate-loop change over SFT is outside seed noise, it is
  ``inconclusive``.
  The difference is also given in units of GRPO's own gain over SFT, with the smallest advantage the run
  could have detected (80 % power, two-sided 5 %), so that a null result says how large an effect it rules out.
* C4 is a "no worse than" claim with the card's margin of 1 point: holds when the paired CI of RLTT − GRPO on
  task B lies above −1 point, fails when it lies wholly below, inconclusive when it straddles.
* C5 ("RLTT-trained >= GRPO-trained in mean log-GSNR", no margin in the card) is decided in its two parts
  (issue 46), because the repo's mean puts every prompt without reward variance at log 1e-8 and so mixes how
  often a prompt carries signal with how clean that signal is: C5a, the share of prompts at that floor (RLTT's
  no larger), and C5b, the mean log-GSNR over the other prompts (RLTT's no smaller). Each holds on ``better``,
  fails on ``worse``, and is inconclusive on ``no measurable difference`` of its paired CI over seeds.
* C2 compares median wall times within one process (methods alternate step by step). The ratio of medians is
  decided by its 95 % bootstrap interval (:func:`step_ratio_ci`): seeds resampled, then steps within each drawn
  seed, the same (seed, step) pairs for both methods; it holds when the interval lies at or below 1.10, fails when
  it lies wholly above, and is inconclusive otherwise (issue 41). The smoke profile's few steps are timing noise,
  so it is inconclusive there.
* Fewer than 3 seeds: every comparative claim is inconclusive (a paired CI over 2 seeds decides nothing).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

from repro.common import compare_paired
from repro.common.stats import mean_ci, threshold_from_ci

THRESHOLDS = {
    "K1_min_rise": 0.03,        # last-loop minus first-loop accuracy after SFT, and strictly increasing
    "K2_ci_multiple": 2.0,      # GRPO's mean gain over SFT > 2 × the half-width of its 95 % CI over seeds
    "C1_min_win_frac": 0.8,     # RLTT > GRPO (primary metric) in >= 4 of 5 seeds
    "C2_max_ratio": 1.10,       # median wall time per RL step, RLTT / GRPO
    "C3_min_win_frac": 0.8,     # intermediate-loop gain RLTT − GRPO > 0 in >= 4 of 5 seeds
    "C4_tolerance": 0.01,       # task B: RLTT >= GRPO − 1 point
    "min_seeds": 3,             # fewer seeds decide no comparison
}
T = THRESHOLDS

#: The card's claims (C1 and C3 name the primary metric of issue 14; greedy accuracy is secondary).
CLAIMS = {
    "C1": "Effectiveness: after the same number of RL steps from the same SFT checkpoint, RLTT (exit_pdf "
          "weights) reaches higher held-out accuracy on the hard split (depth 5-6) than GRPO in >= 4 of 5 seeds "
          "(primary: sampled accuracy at the rollout temperature; greedy secondary; mean paired difference ± 95 % "
          "CI and a paired t-test).",
    "C2": "Negligible overhead: median wall time per RL step of RLTT <= 1.10 × GRPO's (same rollouts).",
    "C3": "Trajectory credit: per-loop accuracy (decoding with only t loops) improves more under RLTT than "
          "under GRPO for intermediate loops: mean gain over t < T_max of RLTT minus GRPO > 0 in >= 4 of 5 seeds "
          "(primary: sampled accuracy; greedy secondary).",
    "C4": "Transfer: trained with RL only on the arithmetic task, RLTT's accuracy on the held-out "
          "non-arithmetic task B is >= GRPO's − 1 point (no negative transfer).",
    "C5a": "Signal quality (a), the floor: of the GSNR prompts of the repo's metric (final-loop logit gradients, same "
           "GRPO loss for both, >= 256 held-out prompts), the RL-trained RLTT checkpoints have no larger a share at "
           "the floor (all rollouts rewarded alike, GSNR 0) than the GRPO-trained ones; with C5b the card's "
           "'RLTT >= GRPO in mean log-GSNR', whose mean mixes the two parts.",
    "C5b": "Signal quality (b), the signal prompts: over the GSNR prompts that carry signal, mean log-GSNR of the "
           "RLTT-trained checkpoints >= the GRPO-trained ones'.",
}

#: Positive controls: could this run see an effect of each claim's kind?
CONTROLS = {
    "K1": "Loops matter: after SFT, per-loop accuracy on the hard split (decoding every token with only t loops) "
          "rises strictly through the loops t = 1..T_max, by >= 3 points from the first loop to the last "
          "(greedy and sampled).",
    "K2": "RL moves the policy beyond sharpening: GRPO's mean gain exceeds twice the half-width of its 95 % CI "
          "over seeds either (i) on the primary metric (sampled hard accuracy at τ) against the SFT model at its "
          "best temperature (greedy, or re-tempered to τ ∈ {0.3, 0.5, 0.7, τ}; chosen on a validation split, "
          "scored on the test split), or (ii) greedy against greedy (re-tempering leaves greedy decoding "
          "unchanged).",
}


# ----------------------------------------------------------------------------- helpers

def _pts(x: float) -> str:
    """A fraction as signed points: 0.0123 -> '+1.23'."""
    return f"{100 * x:+.2f}"


def _ci_pts(lo: float, hi: float) -> str:
    return f"[{_pts(lo)}, {_pts(hi)}] points"


def _few_seeds(n: int) -> str | None:
    return (f"only {n} seed(s): a paired comparison over fewer than {T['min_seeds']} seeds decides nothing "
            "(the full profile runs 5)" if n < T["min_seeds"] else None)


def _wins_needed(n: int, frac: float) -> int:
    return math.ceil(frac * n - 1e-9)


def detectable_effect(diffs: Sequence[float], power: float = 0.8, level: float = 0.95) -> float:
    """The smallest true mean paired difference that a two-sided paired t-test at ``level`` would detect with
    probability ``power`` given the observed spread of ``diffs``: (t_{1-α/2} + t_{power}) · sd / √n
    (normal-shift approximation with the t quantiles of n − 1 degrees of freedom). NaN for n < 2."""
    d = np.asarray(diffs, float)
    n = d.size
    if n < 2:
        return float("nan")
    df = n - 1
    q = stats.t.ppf(1 - (1 - level) / 2, df) + stats.t.ppf(power, df)
    return float(q * d.std(ddof=1) / math.sqrt(n))


def in_gain_units(lo: float, hi: float, gain: float) -> list[float] | None:
    """An interval of RLTT − GRPO in units of GRPO's own mean gain over SFT (None when GRPO did not gain)."""
    return [lo / gain, hi / gain] if gain > 0 else None


# ----------------------------------------------------------------------------- controls

def k1(items_greedy: np.ndarray, items_sampled: np.ndarray) -> dict:
    """The SFT model uses its loops: per-problem correctness on the hard split decoding with t = 1..T loops,
    [T, n] (greedy, and the mean over samples at τ). Decided against the problems' noise (issue 41): for greedy and
    sampled, the paired 95 % CI of last − first loop must clear ``K1_min_rise``, and no loop step may fall
    measurably (paired CI of acc(t+1) − acc(t) wholly below 0). The point-estimate rule it replaces ("rises at
    every step") failed two seeds of five on steps of −0.10 and −0.11 points, well inside their noise, while those
    seeds' models rose 13.8 and 20.6 points from loop 1 to loop 4."""
    checks, numbers = {}, {}
    for name, items in (("greedy", items_greedy), ("sampled", items_sampled)):
        a = np.asarray(items, float)
        if a.ndim != 2 or a.shape[0] < 2:
            checks["T_max = 1 has no intermediate loop"] = False
            continue
        means = a.mean(1)
        numbers[f"SFT per-loop {name}"] = means.tolist()
        rise = compare_paired(a[-1], a[0])
        tt = threshold_from_ci(rise.mean_diff, rise.ci_lo, rise.ci_hi, T["K1_min_rise"], ">=", rise.n)
        numbers[f"{name} rise first->last (points)"] = 100 * rise.mean_diff
        numbers[f"{name} rise ci95 (points)"] = [100 * rise.ci_lo, 100 * rise.ci_hi]
        steps = [compare_paired(a[t + 1], a[t]) for t in range(a.shape[0] - 1)]
        numbers[f"{name} steps (points)"] = [100 * c.mean_diff for c in steps]
        falls = [f"{t + 1}->{t + 2} ({_pts(c.mean_diff)} [{_pts(c.ci_lo)}, {_pts(c.ci_hi)}])"
                 for t, c in enumerate(steps) if c.ci_hi < 0]
        checks[f"{name} accuracy falls measurably at loop step(s) {', '.join(falls)}"] = not falls
        checks[f"{name} accuracy rises {_pts(rise.mean_diff)} points from loop 1 to loop {a.shape[0]}, 95 % CI "
               f"[{_pts(rise.ci_lo)}, {_pts(rise.ci_hi)}] over {rise.n} problems ({tt.word} against "
               f"{100 * T['K1_min_rise']:.0f})"] = tt.word == "holds"
    return dict(holds=all(checks.values()),
                threshold=f"last − first >= {100 * T['K1_min_rise']:.0f} points (paired 95 % CI over problems clear of "
                          "it) and no loop step with a measurable fall (paired CI wholly below 0), greedy and sampled",
                numbers=numbers, reason="; ".join(k for k, ok in checks.items() if not ok))


def _gain(values: Sequence[float], ref: float) -> tuple[float, float, bool, float]:
    """Mean gain over ``ref``, its 95 % CI half-width over seeds, whether mean > K2_ci_multiple × half-width,
    and gain / half-width."""
    gain = np.asarray(values, float) - float(ref)
    n = gain.size
    m, h = mean_ci(gain) if n > 1 else (float(gain.mean()) if n else float("nan"), float("inf"))
    m, h = float(m), float(h)
    # no spread at all over seeds (every RL seed gave the same number: RL switched off, or a degenerate metric) is
    # no interval, so it passes nothing
    ok = bool(n > 1 and math.isfinite(h) and h > 0 and m > T["K2_ci_multiple"] * h)
    return m, h, ok, (m / h if n > 1 and h > 0 else float("nan"))


def k2(grpo_primary: Sequence[float], sft_best: dict, rollout_tau: float,
       grpo_greedy: Sequence[float] | None = None, sft_greedy: float | None = None) -> dict:
    """GRPO's per-seed primary metric (sampled hard accuracy at the rollout τ) and greedy hard accuracy (test split);
    ``sft_best`` is :func:`repro.rltt.evaluate.best_temperature` of the SFT model (the same checkpoint for every
    seed): its temperature chosen on the validation split over greedy, the re-tempering grid and the rollout τ,
    its test accuracy there (``test``), and its test accuracy greedy and at the rollout τ (``test_all``).
    ``sft_greedy``: the SFT model's greedy accuracy on the same problems as ``grpo_greedy`` (default
    ``test_all["greedy"]``; the chapter measures greedy accuracy on a larger hard set).

    Temperature-aware (issue 46): RL that only sharpens the sampling distribution is reproduced by lowering the
    SFT model's temperature, and it leaves greedy decoding unchanged. So K2 holds when GRPO beats the SFT model
    (i) on the primary metric against the SFT model at *its best* temperature (chosen on validation, scored on
    test), or (ii) greedy against greedy, each by more than twice the 95 % CI half-width of the gain over seeds."""
    best_key = sft_best["best"]
    sft_at_best = float(sft_best["test"])
    test_all = sft_best["test_all"]
    tau = f"{float(rollout_tau):g}"
    sft_roll = float(test_all.get(tau, float("nan")))
    best_txt = "greedy" if best_key == "greedy" else f"τ = {best_key}"
    n = len(grpo_primary)
    m, h, ok_s, ratio = _gain(grpo_primary, sft_at_best)
    naive = float(np.mean(grpo_primary)) - sft_roll if n else float("nan")
    txt_s = (f"(i) GRPO at τ = {tau} gains {_pts(m)} points over the SFT model at its best temperature ({best_txt}, "
             f"chosen on the validation split: {100 * sft_at_best:.2f} % on test; {_pts(naive)} points over SFT at "
             f"τ = {tau}), 95 % CI half-width {100 * h:.2f} (gain/half-width {ratio:.2f})")
    ok_g, nums_g, txt_g = False, {}, "(ii) GRPO's greedy accuracy was not given"
    if grpo_greedy is not None:
        sg = float(test_all["greedy"] if sft_greedy is None else sft_greedy)
        mg, hg, ok_g, rg = _gain(grpo_greedy, sg)
        nums_g = {"GRPO greedy gain (points)": 100 * mg, "greedy CI half-width (points)": 100 * hg,
                  "greedy gain / half-width": rg, "GRPO greedy per seed": np.asarray(grpo_greedy, float).tolist()}
        txt_g = (f"(ii) greedy, GRPO gains {_pts(mg)} points over SFT's {100 * sg:.2f} %, 95 % CI "
                 f"half-width {100 * hg:.2f} (gain/half-width {rg:.2f})")
    ok = ok_s or ok_g
    head = f"over {n} seed(s): {txt_s}; {txt_g}"
    if n < 2:
        reason = f"{n} seed: no CI over seeds"
    elif ok:
        reason = head + f"; at least one > {T['K2_ci_multiple']:g}: RL moved the policy beyond re-tempering"
    else:
        reason = (head + f"; neither > {T['K2_ci_multiple']:g}: RL did not move the policy clearly beyond what "
                  "re-tempering the SFT model gives (sharpening), and seed noise")
    return dict(holds=ok, threshold=f"gain > {T['K2_ci_multiple']:g} × 95 % CI half-width over seeds, (i) sampled at "
                                    "τ vs SFT at its best temperature (chosen on a validation split), or (ii) greedy "
                                    "vs greedy",
                numbers={"GRPO gain over best-τ SFT (points)": 100 * m, "CI half-width (points)": 100 * h,
                         "gain / half-width": ratio, "seeds": n, "SFT best temperature (validation)": best_key,
                         "GRPO gain over SFT at rollout τ (points)": 100 * naive,
                         "GRPO per seed": np.asarray(grpo_primary, float).tolist(), **nums_g,
                         **{f"SFT val at {k}": float(v) for k, v in sft_best["val"].items()},
                         **{f"SFT test at {k}": float(v) for k, v in test_all.items()}},
                reason=reason)


# ----------------------------------------------------------------------------- claims

def _comparative(rltt: np.ndarray, grpo: np.ndarray, gain: float, min_win_frac: float, what: str,
                 prefix: str = "") -> tuple[str, dict, str, str]:
    """The card's seed count and a paired comparison, combined by CONTRIBUTING's seed-count rule (issue 41):
    ``holds`` when the count is met and the comparison says better, ``fails`` when the count is missed and it says
    worse, else ``inconclusive``. Numbers include the gain-unit interval and the detectable effect.
    Returns (word, numbers, sentence, why-inconclusive)."""
    n = rltt.size
    wins, need = int((rltt > grpo).sum()), _wins_needed(n, min_win_frac)
    cmp = compare_paired(rltt, grpo)
    mde = detectable_effect(rltt - grpo)
    units = in_gain_units(cmp.ci_lo, cmp.ci_hi, gain)
    p = f"{prefix} " if prefix else ""
    nums = {f"{p}RLTT wins": f"{wins} of {n}", **cmp.numbers(prefix), f"{p}t-test p": cmp.p_value,
            f"{p}detectable diff (80 % power)": mde,
            f"{p}diff ci95 in GRPO-gain units": units}
    met = wins >= need
    word = "holds" if (met and cmp.better) else "fails" if (not met and cmp.worse) else "inconclusive"
    unit_txt = (f" = [{units[0]:+.2f}, {units[1]:+.2f}] × GRPO's own gain of {_pts(gain)}" if units else
                f" (GRPO's own gain {_pts(gain)} points is not positive)")
    sentence = (f"{what}: RLTT − GRPO = {_pts(cmp.mean_diff)} points, 95 % CI {_ci_pts(cmp.ci_lo, cmp.ci_hi)}"
                f"{unit_txt} ({cmp.word}); RLTT higher in {wins} of {n} seeds (needs {need}); the smallest "
                f"advantage this run would detect with 80 % power is {100 * mde:.2f} points")
    if met and not cmp.better:
        why = (f"RLTT is higher in {wins} of {n} seeds but the paired 95 % CI {_ci_pts(cmp.ci_lo, cmp.ci_hi)} "
               + ("contains 0: a win inside seed noise" if not cmp.worse else "shows GRPO higher: count and mean disagree"))
    elif not met and not cmp.worse:
        why = (f"RLTT is higher in only {wins} of {n} seeds (the card asks >= {need}) and the paired 95 % CI "
               f"{_ci_pts(cmp.ci_lo, cmp.ci_hi)} does not show GRPO higher: a missed count inside seed noise")
    elif not met and cmp.better:     # rare: the paired CI above 0 with too few wins (ties, or a few large wins)
        why = f"the paired 95 % CI is above 0 but RLTT is higher in only {wins} of {n} seeds (< {need})"
    else:
        why = ""
    return word, nums, sentence, why


def c1(rltt_s: Sequence[float], grpo_s: Sequence[float], sft_s: float,
       rltt_g: Sequence[float], grpo_g: Sequence[float], sft_g: float) -> dict:
    """Per-seed hard accuracy of RLTT and GRPO, sampled (primary, ``_s``) and greedy (secondary, ``_g``)."""
    rs, gs, rg, gg = (np.asarray(x, float) for x in (rltt_s, grpo_s, rltt_g, grpo_g))
    gain_s, gain_g = float(gs.mean() - sft_s), float(gg.mean() - sft_g)
    word, nums, sent, why = _comparative(rs, gs, gain_s, T["C1_min_win_frac"], "sampled hard accuracy")
    _, nums_g, sent_g, _ = _comparative(rg, gg, gain_g, T["C1_min_win_frac"], "greedy (secondary)", "greedy")
    numbers = {"RLTT sampled": float(rs.mean()), "GRPO sampled": float(gs.mean()), "SFT sampled": sft_s,
               "GRPO gain sampled (points)": 100 * gain_s, **nums,
               "RLTT greedy": float(rg.mean()), "GRPO greedy": float(gg.mean()), "SFT greedy": sft_g,
               **{k: v for k, v in nums_g.items() if "comparison" in k or "mean diff" in k or "ci95" in k}}
    reason = sent + "; " + sent_g.split("; the smallest")[0]
    inconclusive = _few_seeds(rs.size) or (f"{why}. {reason}" if word == "inconclusive" else None)
    return dict(holds=None if word == "inconclusive" else word == "holds",
                threshold="holds: RLTT > GRPO in >= 4 of 5 seeds and paired 95 % CI > 0 (sampled hard acc.); fails: "
                          "count missed and paired CI < 0; else inconclusive",
                numbers=numbers, reason=reason, inconclusive=inconclusive, needs=("K2",))


def step_ratio_ci(steps_rltt: np.ndarray, steps_grpo: np.ndarray, n_boot: int = 2000, rng_seed: int = 0
                  ) -> tuple[float, float, float]:
    """C2's statistic, median(RLTT step times) / median(GRPO step times) pooled over seeds and steps, and its 95 %
    percentile interval from a paired two-level bootstrap: seeds resampled, then steps within each drawn seed,
    the same (seed, step) pairs for both methods (they alternate step by step on the same prompts and rollout
    seeds). Inputs are [seeds, steps] wall seconds. Returns (ratio, lo, hi); an unbounded interval for < 2 steps."""
    R, G = np.atleast_2d(np.asarray(steps_rltt, float)), np.atleast_2d(np.asarray(steps_grpo, float))
    if R.shape != G.shape:
        raise ValueError(f"per-step times must be paired: got {R.shape} and {G.shape}")
    ratio = float(np.median(R) / np.median(G))
    u, m = R.shape
    if u * m < 2 or m < 2:
        return ratio, -math.inf, math.inf
    rng = np.random.default_rng(rng_seed)
    rows = rng.integers(0, u, size=(n_boot, u, 1))
    cols = rng.integers(0, m, size=(n_boot, u, m))
    boots = np.median(R[rows, cols].reshape(n_boot, -1), axis=1) / np.median(G[rows, cols].reshape(n_boot, -1), axis=1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return ratio, float(lo), float(hi)


def c2(step_rltt_s: float, step_grpo_s: float, parts: dict[str, str] | None = None, smoke: bool = False,
       steps_rltt: np.ndarray | None = None, steps_grpo: np.ndarray | None = None) -> dict:
    """Median wall seconds per RL step (rollout + update) of RLTT and GRPO, from the same process, and the per-step
    times behind them ([seeds, steps], :meth:`repro.rltt.experiments.Experiment.step_times`), from which the ratio's
    bootstrap interval decides the claim (issue 41)."""
    thr = f"median step time RLTT <= {T['C2_max_ratio']:.2f} × GRPO (95 % bootstrap CI over seeds and steps)"
    nums = {"RLTT step": f"{1e3 * step_rltt_s:.1f} ms", "GRPO step": f"{1e3 * step_grpo_s:.1f} ms",
            **(parts or {})}
    if smoke:
        return dict(holds=None, threshold=thr, numbers=nums,
                    inconclusive="smoke profile: a few steps of a tiny model are timing noise (and timings are kept "
                                 "out of the determinism check); the full profile decides")
    if steps_rltt is None or steps_grpo is None:
        ratio = step_rltt_s / step_grpo_s
        return dict(holds=None, threshold=thr, numbers={"RLTT/GRPO": f"{ratio:.3f} ×", **nums},
                    inconclusive=f"RLTT's median step takes {ratio:.3f} × GRPO's, but the per-step times were not "
                                 "given, so the ratio has no interval and decides nothing")
    ratio, lo, hi = step_ratio_ci(steps_rltt, steps_grpo)
    tt = threshold_from_ci(ratio, lo, hi, T["C2_max_ratio"], "<=", int(np.size(steps_rltt)))
    nums = {"RLTT/GRPO": f"{ratio:.3f} ×", "RLTT/GRPO ci95": [lo, hi], "steps timed per method": int(np.size(steps_rltt)),
            **nums}
    base = (f"RLTT's median step takes {ratio:.3f} × GRPO's (95 % CI [{lo:.3f}, {hi:.3f}] over seeds and steps)")
    why = (": the extra readouts of loops 1..T−1 and the gradient through the exit gate are the difference")
    reason = {"holds": f"{base}, at or below the card's {T['C2_max_ratio']:.2f} ×{why}",
              "fails": f"{base}, wholly above the card's {T['C2_max_ratio']:.2f} ×{why}",
              "inconclusive": f"{base}, which contains the card's {T['C2_max_ratio']:.2f} ×: within noise of the bar"
              }[tt.word]
    return dict(holds=tt.holds if tt.decided else None, threshold=thr, numbers=nums, reason=reason,
                inconclusive=None if tt.decided else reason)


def c3(rltt_loops: np.ndarray, grpo_loops: np.ndarray, sft_loops: Sequence[float],
       rltt_loops_g: np.ndarray, grpo_loops_g: np.ndarray, sft_loops_g: Sequence[float]) -> dict:
    """Per-seed accuracies of the intermediate loops t < T, [seeds, T−1]: sampled (primary), greedy (secondary)."""
    R, G, S = np.atleast_2d(rltt_loops), np.atleast_2d(grpo_loops), np.asarray(sft_loops, float)
    n = R.shape[0]
    if R.shape[1] == 0:
        return dict(holds=None, threshold="", numbers={}, inconclusive="T_max = 1 has no intermediate loop",
                    needs=("K1", "K2"))
    gr, gg = (R - S).mean(1), (G - S).mean(1)                    # mean gain over t < T, per seed
    gr_g = (np.atleast_2d(rltt_loops_g) - np.asarray(sft_loops_g)).mean(1)
    gg_g = (np.atleast_2d(grpo_loops_g) - np.asarray(sft_loops_g)).mean(1)
    word, nums, sent, why = _comparative(gr, gg, float(gg.mean()), T["C3_min_win_frac"],
                                         "mean sampled gain over loops t < T")
    _, nums_g, sent_g, _ = _comparative(gr_g, gg_g, float(gg_g.mean()), T["C3_min_win_frac"], "greedy (secondary)",
                                        "greedy")
    moved = {}
    for name, g in (("RLTT", gr), ("GRPO", gg)):
        m, h = mean_ci(g) if n > 1 else (float(g.mean()), float("inf"))
        moved[name] = (float(m), float(m - h), float(m + h))
    numbers = {"RLTT gain t<T (points)": 100 * moved["RLTT"][0], "RLTT gain ci95": list(moved["RLTT"][1:]),
               "GRPO gain t<T (points)": 100 * moved["GRPO"][0], "GRPO gain ci95": list(moved["GRPO"][1:]),
               **nums, **{k: v for k, v in nums_g.items() if "comparison" in k or "mean diff" in k or "ci95" in k}}
    reason = sent + "; " + sent_g.split("; the smallest")[0]
    inconclusive = _few_seeds(n)
    if not inconclusive and word != "holds" and all(lo <= 0 <= hi for _, lo, hi in moved.values()):
        inconclusive = (f"neither method moved the intermediate loops beyond seed noise (RLTT "
                        f"{_pts(moved['RLTT'][0])}, GRPO {_pts(moved['GRPO'][0])} points, both 95 % CIs contain 0), "
                        "the card's rule for an undecidable C3")
    elif not inconclusive and word == "inconclusive":
        inconclusive = f"{why}. {reason}"
    return dict(holds=None if word == "inconclusive" else word == "holds",
                threshold="holds: RLTT − GRPO gain over t < T > 0 in >= 4 of 5 seeds and paired 95 % CI > 0 "
                          "(sampled); fails: count missed and paired CI < 0; else inconclusive",
                numbers=numbers, reason=reason, inconclusive=inconclusive, needs=("K1", "K2"))


def c4(rltt_b: Sequence[float], grpo_b: Sequence[float], sft_b: float) -> dict:
    """Per-seed greedy exact-match accuracy on task B (never seen in RL)."""
    r, g = np.asarray(rltt_b, float), np.asarray(grpo_b, float)
    cmp = compare_paired(r, g)
    tol = T["C4_tolerance"]
    nums = {"RLTT task B": float(r.mean()), "GRPO task B": float(g.mean()), "SFT task B": sft_b,
            **cmp.numbers(), "t-test p": cmp.p_value,
            "largest |RL − SFT| (points)": 100 * float(max(np.abs(r - sft_b).max(), np.abs(g - sft_b).max()))}
    txt = (f"RLTT − GRPO on task B = {_pts(cmp.mean_diff)} points, 95 % CI {_ci_pts(cmp.ci_lo, cmp.ci_hi)}, "
           f"against the margin of −{100 * tol:.0f} point")
    inconclusive = _few_seeds(r.size)
    holds = cmp.no_worse_than(tol)
    if not inconclusive and not holds and cmp.ci_hi >= -tol:
        inconclusive = txt + ": the interval straddles the margin"
    return dict(holds=holds, threshold=f"paired 95 % CI of RLTT − GRPO (task B) above −{100 * tol:.0f} point",
                numbers=nums, reason=txt + (" (wholly above it)" if holds else " (wholly below it)"),
                inconclusive=inconclusive, needs=("K2",))


def _c5_part(r: np.ndarray, g: np.ndarray, higher_is_better: bool, what: str, fmt: str, extra: dict | None) -> dict:
    cmp = compare_paired(r, g, higher_is_better=higher_is_better)
    nums = {f"RLTT {what}": float(r.mean()), f"GRPO {what}": float(g.mean()), **cmp.numbers(),
            "t-test p": cmp.p_value, **(extra or {})}
    sign = "" if higher_is_better else " (lower is better; the difference is GRPO − RLTT)"
    d = float(r.mean() - g.mean())
    txt = (f"RLTT − GRPO in {what} = {d:+{fmt}}, 95 % CI of the advantage [{cmp.ci_lo:+{fmt}}, {cmp.ci_hi:+{fmt}}]"
           f"{sign} ({cmp.word})")
    inconclusive = _few_seeds(r.size)
    if not inconclusive and not cmp.better and not cmp.worse:
        inconclusive = txt + ": the card's '>=' cannot be told from equality within seed noise"
    return dict(holds=cmp.better, numbers=nums, reason=txt, inconclusive=inconclusive, needs=("K2",))


def c5a(rltt_floor: Sequence[float], grpo_floor: Sequence[float], extra: dict | None = None) -> dict:
    """C5, part (a): per-seed share of the GSNR prompts at the floor (all R rollouts rewarded alike, so Â = 0 and
    GSNR = 0, log-GSNR = log 1e-8) for the RLTT- and GRPO-trained checkpoints. The card's mean log-GSNR is
    (1 − share) × (mean over signal prompts) + share × log 1e-8, so a lower share is a higher mean: RLTT's share
    <= GRPO's, decided by the paired 95 % CI over seeds (issue 46 decides this part and C5b separately)."""
    r, g = np.asarray(rltt_floor, float), np.asarray(grpo_floor, float)
    out = _c5_part(r, g, False, "share of prompts at the GSNR floor", ".3f", extra)
    return out | dict(threshold="paired 95 % CI of GRPO − RLTT in the floor share > 0 (RLTT's share lower)")


def c5b(rltt_signal: Sequence[float], grpo_signal: Sequence[float], extra: dict | None = None) -> dict:
    """C5, part (b): per-seed mean log-GSNR over the prompts that carry signal (rewards not all equal): RLTT >= GRPO,
    decided by the paired 95 % CI over seeds."""
    r, g = np.asarray(rltt_signal, float), np.asarray(grpo_signal, float)
    out = _c5_part(r, g, True, "mean log-GSNR of the signal prompts", ".3f", extra)
    return out | dict(threshold="paired 95 % CI of RLTT − GRPO in mean log-GSNR over signal prompts > 0")
