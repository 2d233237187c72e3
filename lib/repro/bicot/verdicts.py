"""Chapter 03's claims and controls, and the functions that decide them from measured numbers.

Each function returns the keyword arguments of :meth:`repro.common.Ledger.control` (``holds``, ``threshold``,
``numbers``, ``reason``) or :meth:`~repro.common.Ledger.record` (claims); reasons are sentences computed from
the numbers, thresholds are the card's (:data:`THRESHOLDS`), never tuned.

Decisions. C1 and C3 are split into their two parts (C1a/C1b, C3a/C3b): the card expects them differently
(the BiCoT part expected, the KGW part "may not hold"; BiCoT robust, the trigger baseline wiped out), and a joint
verdict would hide which part failed. C1a follows the card's *Controls and risks*: non-inferiority, the lower paired
95 % bound of acc(BiCoT) − acc(M0c) ≥ −2 points on ≥ 1,500 shared problems, in-domain and OOD. "Stops being
detected" (C6) and "z drops below 4" (K3) use the median z over the query sets.

Issue #43 (overrides the card). (a) The card's pilot claim that a signature on the hidden state alone is invisible
to the verifier is a finding of its own, **C2b**, not a control: with a tied, frozen head the logits are W_U h, so a
hidden state in span(B) lands in span(W_U B), the verifier's template. The ablation is therefore no longer a C2
negative (it carries the key). K1 is gated on the two models that never carried the key being clean: the clean
continuation M0c and the independently trained M0′. (b) C4 and K4 are decided at a token bias of σ = 4, with the
dose sweep σ ∈ {2, 4, 8} reported beside it (:data:`K4_SIGMA`).

Issue #41 (uncertainty). A threshold on a statistic estimated from items (query sets, prompts, anchors, problems,
bias draws, ROC samples) is decided by its 95 % interval (:func:`repro.common.threshold_from_ci`,
:func:`repro.common.decide_threshold`): a claim holds only when the interval clears the bar, fails only when it lies
wholly on the other side, else inconclusive; a control passes only when the interval clears the bar. AUC and TPR
intervals are stratified bootstraps over positives and negatives (:func:`repro.bicot.metrics.roc_ci`). C3b's rate
over the baseline's 8 triggers (random draws of its key) is a proportion, decided on its Wilson interval; C6's
removal point is the first whitening strength whose median z has a bootstrap CI over query sets below 4 (strengths
whose CI contains 4 may have removed it, see :func:`c6`). Exact quantities of one run (parameter distances, a rank
correlation along the designed dose sweep, the PC energy of the attacker's own batch) are compared directly.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from repro.common import compare_paired, decide_threshold, threshold_from_ci
from repro.common.stats import bootstrap_two_level

THRESHOLDS = {
    "K1_R": 0.8, "K1_z_clean": 2.0, "K1_z_wm": 4.0,
    "K2_acc": 0.5, "K2_drop": 0.05,
    "K3_trigger": 0.9, "K3_z": 4.0, "K3_rho": 0.8, "K3_whiten": 0.5,
    "K4_r": 0.95, "K4_kept": 0.9, "K4_margin_loss": 0.5,
    "C1a_margin": 0.02, "C1b_loss": 0.03,
    "C2_auc": 0.99, "C2_tpr": 0.95, "C2b_z": 2.0,
    "C3_auc": 0.9, "C3_trigger": 0.5,
    "C4_auc": 0.95, "C4_gap": 0.1,
    "C5_auc": 0.95,
    "C6_drop": 0.10, "C6_z": 4.0,
}
T = THRESHOLDS
K4_SIGMA = 4.0            # issue #43: the token-bias σ at which K4 and C4 are decided (reported at 2 and 8 beside it)

CLAIMS = {
    "C1a": "Fidelity (BiCoT): BiCoT's final-answer accuracy (greedy CoT) is no worse than the clean continuation "
           "control M0c by more than 2 points — lower paired 95 % bound of acc(BiCoT) − acc(M0c) >= −2 points on "
           ">= 1,500 shared problems — in-domain and OOD.",
    "C1b": "Fidelity (KGW): decode-time KGW (γ = 0.5, δ = 2) on M0 loses >= 3 points of final-answer accuracy "
           "(paired 95 % CI of the loss above 3 points).",
    "C2": "Detection: S(B) above all null-key scores detects; on z, positives = BiCoT on every query set, negatives = "
          "M0, M0', M0c and M0's attacked variants on every query set plus BiCoT scored with wrong keys: AUC >= 0.99 "
          "and TPR >= 0.95 at 1 % FPR.",
    "C2b": "Hidden-state signature (the card's pilot, Idea): a signature imposed on the hidden state alone "
           "(signature=\"hidden\", same key, same steps) is invisible to the verifier: its z < 2 on the query sets "
           "(mean over the sets, 95 % CI below 2).",
    "C3a": "Model-level robustness: after fine-tuning on clean CoT data (200 steps, lr 2e-3; the card's lr 1e-3 is "
           "reported beside it), int8 and int4 quantisation, 2 % Gaussian weight noise and 30 % magnitude pruning of BiCoT, AUC >= 0.9 against the C2 "
           "negatives, for every attack.",
    "C3b": "Trigger baseline: the trigger-fingerprint's verification rate falls below 50 % after the same fine-tuning.",
    "C4": "RSR matters: under a fixed per-token bias δ_v ~ N(0, σ²) on the reported log-probs, decided at σ = 4 "
          "(issue #43; σ = 2 and 8 reported beside it), AUC with registration >= 0.95 and without registration at "
          "least 0.1 lower (temperature, shift, noise and truncation reported).",
    "C5": "OOD: verification with out-of-distribution prompts (depth max + 1, '-'-only and '*'-heavy mixes) keeps "
          "AUC >= 0.95.",
    "C6": "Adaptive removal: an attacker who knows the method but not the key and whitens the anchor representations "
          "must lose >= 10 accuracy points before BiCoT stops being detected (median z < 4).",
}

CONTROLS = {
    "K1": "The signature is there, and the models that never carried the key are clean: white-box mean anchor R(B) "
          ">= 0.8 on fresh prompts; M0c and M0' have z < 2 on every query set while BiCoT has z >= 4 on every query "
          "set (each also with the 95 % CI of its mean over the sets clear of the bar).",
    "K2": "Accuracy resolves the C1 margin: M0 in-domain accuracy >= 50 %, and a damaged copy (M0 + 20 % weight "
          "noise) loses >= 5 points (paired 95 % CI above 5).",
    "K3": "The attacks bite: ‖θ_FT − θ_BiCoT‖ >= ‖θ_BiCoT − θ_M0‖; the trigger model verifies >= 0.9 before FT; along "
          "the dose sweep (noise, pruning, label-smoothed FT) the median z drops below 4 somewhere with Spearman(z, "
          "accuracy) >= 0.8; whitening removes >= 50 % of the top-r PC energy at anchors.",
    "K4": "Registration works at the token bias σ = 4: the fitted δ̂ correlates with the injected δ at r >= 0.95 on "
          "tokens seen at sentinels; >= 90 % of anchors keep >= r + 3 tokens; without registration BiCoT loses >= 50 % "
          "of its margin S − μ₀ (margins averaged over independent draws of δ ~ N(0, σ²); 95 % intervals clear of "
          "each bar).",
}


def _fails(checks: dict) -> str:
    return "; ".join(k for k, ok in checks.items() if not ok)


def _pts(x: float) -> str:
    return f"{100 * x:+.2f}"


def _ci(t) -> str:
    return f"[{t.ci_lo:.3g}, {t.ci_hi:.3g}]"


def fisher_ci(r: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """95 % interval of a Pearson correlation ``r`` over ``n`` pairs (Fisher's z; unbounded for n <= 3)."""
    if n <= 3 or not np.isfinite(r):
        return -1.0, 1.0
    z, h = np.arctanh(np.clip(r, -0.999999999, 0.999999999)), stats.norm.ppf(0.5 + level / 2) / math.sqrt(n - 3)
    return float(np.tanh(z - h)), float(np.tanh(z + h))


def wilson_ci(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson interval of a binomial share k/n."""
    if n == 0:
        return 0.0, 1.0
    zq = stats.norm.ppf(0.5 + level / 2)
    p = k / n
    c = (p + zq ** 2 / (2 * n)) / (1 + zq ** 2 / n)
    h = zq * math.sqrt(p * (1 - p) / n + zq ** 2 / (4 * n ** 2)) / (1 + zq ** 2 / n)
    return max(0.0, c - h), min(1.0, c + h)


def ratio_loss_ci(num, den, n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """1 − mean(num)/mean(den) over paired draws, with its percentile bootstrap interval over the draws."""
    num, den = np.asarray(num, float).ravel(), np.asarray(den, float).ravel()
    est = 1 - num.mean() / den.mean() if den.mean() > 0 else float("nan")
    if len(num) < 2:
        return est, -math.inf, math.inf
    idx = np.random.default_rng(seed).integers(0, len(num), (n_boot, len(num)))
    d = den[idx].mean(1)
    b = np.where(d > 0, 1 - num[idx].mean(1) / np.where(d > 0, d, 1.0), np.nan)
    lo, hi = np.nanquantile(b, [0.025, 0.975])
    return float(est), float(lo), float(hi)


# ----------------------------------------------------------------------------- controls

def k1(R_by_prompt, z_bicot, z_clean: dict) -> dict:
    """``R_by_prompt``: BiCoT's white-box mean anchor R(B) per fresh prompt; ``z_bicot``: its z per query set;
    ``z_clean``: {model name: z per query set} for the models that never carried the key (M0c, M0′). Each part
    needs every query set on the right side of its bar (card) *and* the 95 % interval of its mean clear of it."""
    R = np.asarray(R_by_prompt, float)
    tR = decide_threshold(R, T["K1_R"], ">=")
    zb = np.asarray(z_bicot, float)
    tb = decide_threshold(zb, T["K1_z_wm"], ">=")
    checks = {f"white-box anchor R(B) of BiCoT is {tR.estimate:.3f} {_ci(tR)} (not clear of >= {T['K1_R']})": tR.holds,
              f"BiCoT's smallest z over the query sets is {np.nanmin(zb):.2f} (< {T['K1_z_wm']:g})":
                  bool(np.all(zb >= T["K1_z_wm"])),
              f"BiCoT's mean z {tb.estimate:.2f} {_ci(tb)} is not clear of {T['K1_z_wm']:g}": tb.holds}
    numbers = {"R(B) BiCoT": tR.estimate, "R(B) BiCoT ci95": [tR.ci_lo, tR.ci_hi], "min z BiCoT": float(np.nanmin(zb)),
               "mean z BiCoT ci95": [tb.ci_lo, tb.ci_hi]}
    for name, z in z_clean.items():
        z = np.asarray(z, float)
        tc = decide_threshold(z, T["K1_z_clean"], "<=")
        checks[f"{name}'s largest z is {np.nanmax(z):.2f} (>= {T['K1_z_clean']:g}): a model that never carried the "
               f"key already looks watermarked on some query set"] = bool(np.all(z < T["K1_z_clean"]))
        checks[f"{name}'s mean z {tc.estimate:.2f} {_ci(tc)} is not clear below {T['K1_z_clean']:g}"] = tc.holds
        numbers[f"max z {name}"] = float(np.nanmax(z))
        numbers[f"mean z {name} ci95"] = [tc.ci_lo, tc.ci_hi]
    return dict(holds=all(checks.values()),
                threshold=f"R(B) >= {T['K1_R']}; z(BiCoT) >= {T['K1_z_wm']:g} and z({', '.join(z_clean)}) < "
                          f"{T['K1_z_clean']:g} on every set, 95 % CIs of the means clear of the bars",
                numbers=numbers, reason=_fails(checks))


def k2(acc_m0, acc_damaged) -> dict:
    a0, ad = np.asarray(acc_m0, float), np.asarray(acc_damaged, float)
    t0 = decide_threshold(a0, T["K2_acc"], ">=")
    cmp = compare_paired(a0, ad)                     # M0 − damaged
    td = threshold_from_ci(cmp.mean_diff, cmp.ci_lo, cmp.ci_hi, T["K2_drop"], ">=", cmp.n)
    checks = {f"M0's in-domain accuracy is {100 * a0.mean():.1f} % [{100 * t0.ci_lo:.1f}, {100 * t0.ci_hi:.1f}] "
              f"(not clear of >= {100 * T['K2_acc']:.0f} %)": t0.holds,
              f"the damaged copy loses {100 * cmp.mean_diff:.2f} points [{100 * cmp.ci_lo:.2f}, {100 * cmp.ci_hi:.2f}] "
              f"(not clear of >= {100 * T['K2_drop']:.0f})": td.holds}
    return dict(holds=all(checks.values()),
                threshold=f"acc(M0) >= {100 * T['K2_acc']:.0f} %; damaged loss >= {100 * T['K2_drop']:.0f} points (95 % CIs clear)",
                numbers={"acc M0": float(a0.mean()), "acc damaged": float(ad.mean()), "loss (points)": 100 * cmp.mean_diff,
                         "CI lo (points)": 100 * cmp.ci_lo, "CI hi (points)": 100 * cmp.ci_hi, "n": cmp.n},
                reason=_fails(checks))


def _rank_ready(z) -> np.ndarray:
    """z with NaN (no anchor left to score: no evidence of the mark) placed below every finite value."""
    z = np.asarray(z, float)
    fin = z[np.isfinite(z)]
    return np.where(np.isfinite(z), z, (fin.min() if fin.size else 0.0) - 1.0)


def spearman(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(stats.spearmanr(x, y).statistic)


def k3(dist_ft: float, dist_wm: float, trigger_before: float, dose_z, dose_acc, other_z, other_acc,
       pc_before: float, pc_after: float) -> dict:
    """``dose_z``/``dose_acc``: BiCoT and its noise and pruning doses (the monotone dose sweep, where Spearman is
    taken); ``other_z``/``other_acc``: the label-smoothed FT, which counts for "z drops below 4 somewhere" but is
    not a dose of damage (its Spearman with the doses pooled is reported too). All exact quantities of the run."""
    dz, da = _rank_ready(dose_z), np.asarray(dose_acc, float)
    rho = spearman(dz, da)
    allz = np.concatenate([np.asarray(dose_z, float), np.asarray(other_z, float)])
    finite = allz[np.isfinite(allz)]
    no_anchor = int((~np.isfinite(allz)).sum())          # models left with no anchor to score: nothing detected
    zmin = float(finite.min()) if finite.size else float("nan")
    pooled = spearman(_rank_ready(allz), np.concatenate([da, np.asarray(other_acc, float)]))
    removed = 1 - pc_after / pc_before if pc_before > 0 else float("nan")
    checks = {
        f"FT moved the weights {dist_ft:.3f}, less than watermarking did ({dist_wm:.3f})": dist_ft >= dist_wm,
        f"the trigger model verifies only {trigger_before:.2f} before FT (< {T['K3_trigger']})": trigger_before >= T["K3_trigger"],
        f"z stays >= {T['K3_z']:g} along the whole sweep (min {zmin:.2f})": zmin < T["K3_z"] or no_anchor > 0,
        f"Spearman(z, accuracy) along the noise/pruning doses is {rho:.2f} (< {T['K3_rho']})": rho >= T["K3_rho"],
        f"whitening removed {100 * removed:.0f} % of the top-r PC energy (< {100 * T['K3_whiten']:.0f} %)": removed >= T["K3_whiten"],
    }
    return dict(holds=all(checks.values()),
                threshold=f"dist_FT >= dist_wm; trigger >= {T['K3_trigger']}; min sweep z < {T['K3_z']:g}; Spearman over "
                          f"the doses >= {T['K3_rho']}; whitening removes >= {100 * T['K3_whiten']:.0f} % PC energy",
                numbers={"dist FT": dist_ft, "dist wm": dist_wm, "trigger before FT": trigger_before,
                         "min sweep z": zmin, "sweep points with no anchor": no_anchor, "Spearman(z, acc) doses": rho, "Spearman pooled with smoothed FT": pooled,
                         "PC energy removed": removed},
                reason=_fails(checks))


def k4(delta_r: float, n_seen: int, kept_by_set, margin_rsr, margin_noreg, sigma: float = K4_SIGMA,
       sweep: dict | None = None) -> dict:
    """Decided at the token bias ``sigma`` (issue #43: σ = 4). ``delta_r``: corr(δ̂, δ) over the ``n_seen`` tokens
    seen at sentinels (Fisher interval); ``kept_by_set``: share of anchors keeping >= r + 3 tokens per query set;
    ``margin_rsr`` / ``margin_noreg``: BiCoT's margin S − μ₀ with and without registration, one per draw of the bias
    δ ~ N(0, σ²) (the attack is a distribution; one draw is one sample of it). The margin lost is
    1 − mean(no RSR) / mean(RSR) with a bootstrap interval over the draws. ``sweep``: {σ: margin lost} reported
    beside it (the dose sweep)."""
    mr, mn = np.atleast_1d(np.asarray(margin_rsr, float)), np.atleast_1d(np.asarray(margin_noreg, float))
    lo_r, hi_r = fisher_ci(delta_r, n_seen)
    tr = threshold_from_ci(delta_r, lo_r, hi_r, T["K4_r"], ">=", n_seen)
    tk = decide_threshold(kept_by_set, T["K4_kept"], ">=")
    loss, lo, hi = ratio_loss_ci(mn, mr)
    tl = threshold_from_ci(loss, lo, hi, T["K4_margin_loss"], ">=", len(mr))
    per = 1 - mn / np.where(mr > 0, mr, np.nan)
    checks = {f"corr(δ̂, δ) on the {n_seen} sentinel tokens is {delta_r:.4f} {_ci(tr)} (not clear of >= {T['K4_r']})": tr.holds,
              f"{100 * tk.estimate:.0f} % {_ci(tk)} of anchors keep >= r + 3 tokens (not clear of >= "
              f"{100 * T['K4_kept']:.0f} %)": tk.holds,
              f"at σ = {sigma:g} without registration BiCoT keeps {100 * (1 - loss):.0f} % of its margin S − μ₀ (loses "
              f"{loss:.2f} {_ci(tl)} over {len(mr)} bias draws, not clear of >= {T['K4_margin_loss']:g}): the bias does "
              f"not clearly hurt the unregistered score": tl.holds}
    numbers = {"σ": sigma, "corr(δ̂, δ)": delta_r, "corr ci95": [tr.ci_lo, tr.ci_hi], "tokens seen": n_seen,
               "anchors kept": tk.estimate, "anchors kept ci95": [tk.ci_lo, tk.ci_hi],
               "margin RSR": float(mr.mean()), "margin no-RSR": float(mn.mean()), "margin lost": loss,
               "margin lost ci95": [tl.ci_lo, tl.ci_hi], "bias draws": len(mr),
               "margin lost min draw": float(np.nanmin(per)), "margin lost max draw": float(np.nanmax(per))}
    for s_, v in (sweep or {}).items():
        numbers[f"margin lost σ={s_:g}"] = float(v)
    return dict(holds=all(checks.values()),
                threshold=f"at σ = {sigma:g}: r >= {T['K4_r']}; kept >= {100 * T['K4_kept']:.0f} %; margin loss without RSR "
                          f">= {100 * T['K4_margin_loss']:.0f} % (95 % intervals clear of each bar)",
                numbers=numbers, reason=_fails(checks))


# ----------------------------------------------------------------------------- claims

def _combine(tests: list) -> dict:
    """Several thresholds that must all hold: holds if every one holds, fails if any fails, else inconclusive."""
    words = [t.word for t in tests]
    if "fails" in words:
        return {"holds": False, "inconclusive": None}
    if all(w == "holds" for w in words):
        return {"holds": True, "inconclusive": None}
    return {"holds": None, "inconclusive": "; ".join(t.reason for t in tests if not t.decided)}


def c1a(acc_bicot, acc_m0c, acc_bicot_ood, acc_m0c_ood) -> dict:
    """Non-inferiority: holds when both lower bounds are >= −2 points, fails when an upper bound is below −2,
    else inconclusive (the interval straddles the margin)."""
    cid, cood = compare_paired(acc_bicot, acc_m0c), compare_paired(acc_bicot_ood, acc_m0c_ood)
    m = T["C1a_margin"]
    tests = [threshold_from_ci(c.mean_diff, c.ci_lo, c.ci_hi, -m, ">=", c.n) for c in (cid, cood)]
    n = min(cid.n, cood.n)
    parts = [f"BiCoT − M0c = {_pts(c.mean_diff)} points [{_pts(c.ci_lo)}, {_pts(c.ci_hi)}] {where} ({t.word})"
             for c, t, where in ((cid, tests[0], "in-domain"), (cood, tests[1], "OOD"))]
    kw = _combine(tests)
    if n < 1500:
        kw = {"holds": None, "inconclusive": f"only {n} shared problems (< 1,500): the CI cannot resolve a 2-point margin"}
    return dict(**kw, threshold="paired 95 % CI of acc(BiCoT) − acc(M0c) above −2 points, in-domain and OOD",
                numbers={"acc BiCoT": float(np.mean(acc_bicot)), "acc M0c": float(np.mean(acc_m0c)),
                         "diff (points)": 100 * cid.mean_diff, "CI lo (points)": 100 * cid.ci_lo,
                         "CI hi (points)": 100 * cid.ci_hi,
                         "acc BiCoT OOD": float(np.mean(acc_bicot_ood)), "acc M0c OOD": float(np.mean(acc_m0c_ood)),
                         "diff OOD (points)": 100 * cood.mean_diff, "CI lo OOD (points)": 100 * cood.ci_lo,
                         "CI hi OOD (points)": 100 * cood.ci_hi, "n": n},
                reason="; ".join(parts) + f" against the margin −{100 * m:.0f} points")


def c1b(acc_kgw, acc_m0, extra: dict | None = None, seed: int = 0) -> dict:
    """``acc_kgw``: (keys × problems) 0/1 correctness of KGW (δ = 2) on M0, one row per green-list key (a 1-d array is
    one key); ``acc_m0``: M0's on the same problems. The loss M0 − KGW is averaged over keys and problems; its 95 %
    interval resamples both (:func:`repro.common.stats.bootstrap_two_level`): the green list is a random draw of the
    baseline, and a CI over the problems of one key missed it (seeds 0-2 gave losses of 4.3, 3.3 and 1.5 points with
    intervals that excluded each other, issue 43)."""
    K = np.atleast_2d(np.asarray(acc_kgw, float))
    m0 = np.asarray(acc_m0, float)
    loss = m0[None, :] - K                                  # keys × problems
    est = float(loss.mean())
    if K.shape[0] >= 2:
        lo, hi = bootstrap_two_level(loss, n_boot=2000, rng=seed)
    else:
        c = compare_paired(m0, K[0])
        lo, hi = c.ci_lo, c.ci_hi
    t = threshold_from_ci(est, lo, hi, T["C1b_loss"], ">=", loss.size)
    per_key = loss.mean(1)
    reason = (f"KGW (δ = 2) loses {100 * est:.2f} points [{100 * lo:.2f}, {100 * hi:.2f}] over {K.shape[0]} green-list "
              f"keys (per key {', '.join(f'{100 * v:.1f}' for v in per_key)}) against the bar of 3 points ({t.word})")
    return dict(**t.ledger_kwargs(), threshold="95 % CI (over keys and problems) of the loss above 3 points",
                numbers={"acc M0": float(m0.mean()), "acc KGW δ=2": float(K.mean()),
                         "loss (points)": 100 * est, "CI lo": 100 * lo, "CI hi": 100 * hi, "keys": int(K.shape[0]),
                         "loss per key (points)": [float(100 * v) for v in per_key], **(extra or {})}, reason=reason)


def _roc_tests(roc: dict, auc_bar: float, tpr_bar: float | None = None) -> list:
    """ThresholdTests of a :func:`repro.bicot.metrics.roc_ci` summary against its bars."""
    out = [threshold_from_ci(roc["AUC"], *roc["AUC ci95"], auc_bar, ">=", roc["n"])]
    if tpr_bar is not None:
        out.append(threshold_from_ci(roc["TPR@1%FPR"], *roc["TPR ci95"], tpr_bar, ">=", roc["n"]))
    return out


def c2(roc: dict) -> dict:
    """``roc``: :func:`repro.bicot.metrics.roc_ci` of BiCoT's z against the C2 negatives."""
    ta, tt = _roc_tests(roc, T["C2_auc"], T["C2_tpr"])
    reason = (f"AUC {roc['AUC']:.4f} {_ci(ta)} against {T['C2_auc']} ({ta.word}), TPR at 1 % FPR {roc['TPR@1%FPR']:.3f} "
              f"{_ci(tt)} against {T['C2_tpr']} ({tt.word}) over {roc['positives']} positives and {roc['negatives']} negatives")
    return dict(**_combine([ta, tt]), threshold="AUC >= 0.99 and TPR >= 0.95 at 1 % FPR (95 % bootstrap CIs clear)",
                numbers={"AUC": roc["AUC"], "AUC ci95": roc["AUC ci95"], "TPR@1%FPR": roc["TPR@1%FPR"],
                         "TPR ci95": roc["TPR ci95"], "positives": roc["positives"], "negatives": roc["negatives"]},
                reason=reason)


def c2b(z_hidden, leak: dict | None = None) -> dict:
    """The card's pilot: the signature="hidden" ablation is invisible, mean z over the query sets < 2 (t interval).
    ``leak`` (experiments.hidden_leak): the key's share in W_U's row space and the share of the anchors' centred
    top-k logit energy that the span(B) part of h carries — the linear algebra that decides the claim."""
    zh = np.asarray(z_hidden, float)
    t = decide_threshold(zh, T["C2b_z"], "<=")
    numbers = {"z per query set": [round(float(v), 3) for v in zh], "mean z": t.estimate, "mean z ci95": [t.ci_lo, t.ci_hi],
               "max z": float(np.nanmax(zh))}
    why = ""
    if leak is not None:
        lh, l0 = leak["hidden"], leak["M0"]
        numbers.update({"B in row(W_U)": leak["B in row(W_U)"], "|V|/d": leak["|V|/d"],
                        "sv(W_U B) / rms sv(W_U)": leak["sv(W_U B) / rms sv(W_U)"],
                        "hidden ratio": lh["hidden ratio"], "h_B in row(W_U)": lh["h_B in row(W_U)"],
                        "h_B constant share": lh["h_B constant share"],
                        "logit energy from h_B": lh["logit energy from h_B"],
                        "logit energy from h_B M0": l0["logit energy from h_B"]})
        why = (f": logits = W_U h, so the span(B) part h_B of the ablation's anchor states ({lh['hidden ratio']:.2f} of "
               f"‖h‖², {lh['h_B in row(W_U)']:.2f} of it in W_U's row space; a random key has {leak['B in row(W_U)']:.2f} of "
               f"its energy there) adds W_U h_B ∈ span(W_U B), the verifier's template, and carries "
               f"{lh['logit energy from h_B']:.2f} of the anchors' centred top-k logit energy (M0: "
               f"{l0['logit energy from h_B']:.3f})")
    reason = (f"the hidden-state ablation's mean z over the query sets is {t.estimate:.2f} {_ci(t)} (max "
              f"{np.nanmax(zh):.2f}) against the bar {T['C2b_z']:g} ({t.word})" + (why if t.word != "holds" else ""))
    return dict(**t.ledger_kwargs(), threshold="mean z(hidden ablation) over the query sets < 2 (95 % CI below 2)",
                numbers=numbers, reason=reason)


def c3a(rocs: dict, extra: dict | None = None, ft_keys: dict | None = None) -> dict:
    """``rocs``: attack -> :func:`repro.bicot.metrics.roc_ci` summary against the C2 negatives. ``ft_keys``: the
    fine-tuning attack over several watermarks (:func:`repro.bicot.metrics.auc_over_draws` of the owner's key and
    :func:`repro.bicot.experiments.ft_key_draws`): when given, "BiCoT FT" is decided on the mean AUC over the
    watermarks with the two-level interval (watermarks, then each one's query sets and negatives), issue 41: one
    watermark's interval does not cover how much the attack's effect varies with the key and the batches."""
    tests = {k: _roc_tests(v, T["C3_auc"])[0] for k, v in rocs.items()}
    numbers = {**{f"AUC {k}": v["AUC"] for k, v in rocs.items()}, **{f"AUC {k} ci95": v["AUC ci95"] for k, v in rocs.items()}}
    note = ""
    if ft_keys is not None and "BiCoT FT" in rocs:
        per = [float(a) for a in ft_keys["per draw"]]
        tests["BiCoT FT"] = threshold_from_ci(ft_keys["mean"], *ft_keys["ci95"], T["C3_auc"], ">=", len(per))
        numbers.update({"AUC BiCoT FT": ft_keys["mean"], "AUC BiCoT FT ci95": ft_keys["ci95"],
                        "AUC BiCoT FT per watermark": per, "watermarks attacked": len(per),
                        "AUC BiCoT FT, owner's key only": rocs["BiCoT FT"]["AUC"],
                        "AUC BiCoT FT, owner's key only ci95": rocs["BiCoT FT"]["AUC ci95"]})
        note = (f" (BiCoT FT: mean over {len(per)} watermarks, per watermark "
                + ", ".join(f"{a:.3f}" for a in per) + ")")
    kw = _combine(list(tests.values()))
    parts = ", ".join(f"{k} {t.estimate:.3f} {_ci(t)} ({t.word})" for k, t in tests.items())
    return dict(**kw, threshold="AUC >= 0.9 after every attack (95 % bootstrap CIs clear; the fine-tuning attack's "
                                "resamples the watermarks it was run on)",
                numbers={**numbers, **(extra or {})},
                reason=f"AUC after each attack: {parts}{note}")


def c3b(rate_before: float, rate_after: float, n_triggers: int = 8) -> dict:
    """Rates over the baseline's ``n_triggers`` secret triggers (random draws of the key): the count answered with
    the secret response after fine-tuning is a proportion, decided on its Wilson 95 % interval against 0.5 (issue
    #41): holds when the interval lies below 0.5, fails when it lies wholly above, else inconclusive."""
    n = int(n_triggers)
    k = int(round(rate_after * n))
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson") if n else None
    lo, hi = (float(ci.low), float(ci.high)) if ci is not None else (0.0, 1.0)
    t = threshold_from_ci(k / n if n else float("nan"), lo, hi, T["C3_trigger"], "<=", n)
    reason = (f"trigger rate {rate_before:.2f} before and {rate_after:.2f} ({k} of {n} triggers) after fine-tuning; "
              f"Wilson 95 % interval {_ci(t)} against the bar 0.5 ({t.word}"
              + ("" if t.decided else ": within noise of the bar") + ")")
    return dict(**t.ledger_kwargs(), threshold="trigger verification rate < 0.5 after fine-tuning (Wilson 95 % "
                                               "interval over the triggers below 0.5)",
                numbers={"rate before": rate_before, "rate after FT": rate_after, "triggers": n,
                         "triggers kept after FT": k, "rate after FT ci95": [t.ci_lo, t.ci_hi]},
                reason=reason)


def c4(auc_rsr: dict, gap: dict, sigma: float = K4_SIGMA, extra: dict | None = None) -> dict:
    """Decided at ``sigma`` over the draws of the token bias (issue 43: one draw is one sample of the attack):
    ``auc_rsr`` and ``gap`` are :func:`repro.bicot.metrics.auc_over_draws` summaries of AUC with registration and of
    the paired gap AUC(RSR) − AUC(no RSR), their intervals resampling the draws and each draw's ROC items."""
    ta = threshold_from_ci(auc_rsr["mean"], *auc_rsr["ci95"], T["C4_auc"], ">=", len(auc_rsr["per draw"]))
    tg = threshold_from_ci(gap["mean"], *gap["ci95"], T["C4_gap"], ">=", len(gap["per draw"]))
    n = len(gap["per draw"])
    reason = (f"under the token bias σ = {sigma:g}, over {n} draws of it, AUC is {auc_rsr['mean']:.3f} {_ci(ta)} with "
              f"registration ({ta.word} against {T['C4_auc']}) and the gap AUC(RSR) − AUC(no RSR) is "
              f"{gap['mean']:+.3f} {_ci(tg)} ({tg.word} against {T['C4_gap']}; per draw "
              f"{', '.join(f'{v:+.2f}' for v in gap['per draw'])})")
    return dict(**_combine([ta, tg]), threshold=f"at σ = {sigma:g}, means over the bias draws: AUC(RSR) >= 0.95 and "
                                                "AUC(RSR) − AUC(no RSR) >= 0.1 (95 % CIs over draws and items clear)",
                numbers={"σ": sigma, "bias draws": n, "AUC RSR": auc_rsr["mean"], "AUC RSR ci95": auc_rsr["ci95"],
                         "AUC no RSR": auc_rsr["mean"] - gap["mean"], "gap": gap["mean"], "gap ci95": gap["ci95"],
                         "gap per draw": [round(v, 4) for v in gap["per draw"]], **(extra or {})},
                reason=reason)


def c5(roc: dict) -> dict:
    ta = _roc_tests(roc, T["C5_auc"])[0]
    return dict(**ta.ledger_kwargs(), threshold="AUC >= 0.95 on OOD query sets (95 % bootstrap CI clear)",
                numbers={"AUC OOD": roc["AUC"], "AUC OOD ci95": roc["AUC ci95"], "TPR@1%FPR OOD": roc["TPR@1%FPR"]},
                reason=f"OOD AUC {roc['AUC']:.3f} {_ci(ta)} against {T['C5_auc']} ({ta.word})")


def median_z_ci(z_sets, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """Median z over the query sets (NaN sets, with no anchor left, ignored) and its percentile bootstrap interval
    over the query sets (vectorised, fixed seed). Fewer than two finite sets give an unbounded interval."""
    z = np.asarray(z_sets, float).ravel()
    z = z[np.isfinite(z)]
    if z.size == 0:
        return float("nan"), -math.inf, math.inf
    med = float(np.median(z))
    if z.size < 2:
        return med, -math.inf, math.inf
    idx = np.random.default_rng(seed).integers(0, z.size, size=(n_boot, z.size))
    lo, hi = np.quantile(np.median(z[idx], axis=1), [(1 - level) / 2, (1 + level) / 2])
    return med, float(lo), float(hi)


def c6(sweep: list[dict]) -> dict:
    """``sweep``: rows {lam, z, z_sets, acc, acc_items} from λ = 0 (BiCoT) upward; ``z_sets`` the z per query set,
    ``acc_items`` per shared problem (paired). Issue #41: whether a strength removed the mark is decided by the
    bootstrap 95 % CI over query sets of the median z against 4 (removed: CI below 4; still detected: CI above 4;
    else within noise), and each accuracy drop by its paired 95 % CI against 10 points.

    Holds when the first strength whose drop clearly exceeds 10 points comes before (or at) the first strength that is
    not clearly still detected; fails when some strength clearly removed the mark and every strength that may have
    removed it (not clearly detected, up to that one) cost clearly less than 10 points; else inconclusive."""
    base = np.asarray(sweep[0]["acc_items"], float)
    nums = {f"λ={r['lam']:g}": f"z {r['z']:.2f}, acc {100 * r['acc']:.1f} %" for r in sweep}
    thr = ("accuracy drop >= 10 points (paired 95 % CI) at the first whitening strength where median z < 4 "
           "(bootstrap 95 % CI over query sets below 4)")

    def drop(r):
        c = compare_paired(base, np.asarray(r["acc_items"], float))     # base − attacked
        return threshold_from_ci(c.mean_diff, c.ci_lo, c.ci_hi, T["C6_drop"], ">=", c.n)

    rows = sweep[1:]
    zt, dt = [], []
    for r in rows:
        m, lo, hi = median_z_ci(r.get("z_sets", [r["z"]]))
        zt.append(threshold_from_ci(m, lo, hi, T["C6_z"], "<=", int(np.isfinite(np.asarray(r.get("z_sets", [r["z"]]),
                                                                                            float)).sum())))
        dt.append(drop(r))
    for r, t, d in zip(rows, zt, dt):
        nums[f"median z ci95 λ={r['lam']:g}"] = [t.ci_lo, t.ci_hi]
        nums[f"drop ci95 (points) λ={r['lam']:g}"] = [100 * d.ci_lo, 100 * d.ci_hi]
    state = lambda t: "removed" if t.holds else "detected" if t.word == "fails" else "within noise of 4"
    desc = "; ".join(f"λ = {r['lam']:g}: median z {t.estimate:.2f} {_ci(t)} ({state(t)}), drop "
                     f"{100 * d.estimate:+.1f} [{100 * d.ci_lo:.1f}, {100 * d.ci_hi:.1f}] points ({d.word})"
                     for r, t, d in zip(rows, zt, dt))
    first_open = next((i for i, t in enumerate(zt) if t.word != "fails"), None)      # first not clearly detected
    removed = next((i for i, t in enumerate(zt) if t.holds), None)                   # first clearly removed
    costly = next((i for i, d in enumerate(dt) if d.holds), None)                    # first drop clearly >= 10
    if removed is not None:
        nums["drop at removal (points)"] = 100 * dt[removed].estimate
        nums["drop ci95 (points)"] = [100 * dt[removed].ci_lo, 100 * dt[removed].ci_hi]
    if costly is not None and (first_open is None or costly <= first_open):
        nums["drop (points)"] = 100 * dt[costly].estimate
        return dict(holds=True, threshold=thr, numbers=nums,
                    reason=f"accuracy fell clearly 10 points or more at λ = {rows[costly]['lam']:g} before the mark was "
                           f"possibly removed: {desc}")
    if removed is not None:
        cand = [i for i in range(first_open, removed + 1) if zt[i].word != "fails"]
        if all(dt[i].word == "fails" for i in cand):
            return dict(holds=False, threshold=thr, numbers=nums,
                        reason=f"the mark was clearly removed by λ = {rows[removed]['lam']:g} while every strength that "
                               f"may have removed it cost clearly less than 10 points: {desc}")
        return dict(holds=None, threshold=thr, numbers=nums, reason="",
                    inconclusive=f"within noise of the bar: the mark was clearly removed by λ = "
                                 f"{rows[removed]['lam']:g}, but the drop at the strengths that may have removed it "
                                 f"does not clear 10 points either way: {desc}")
    if first_open is not None:
        return dict(holds=None, threshold=thr, numbers=nums, reason="",
                    inconclusive=f"within noise of the bar: no strength clearly removed the mark, and from λ = "
                                 f"{rows[first_open]['lam']:g} the median z's interval contains 4 while no drop "
                                 f"clearly reached 10 points: {desc}")
    return dict(holds=None, threshold=thr, numbers=nums, reason="",
                inconclusive=f"the sweep (λ up to {sweep[-1]['lam']:g}) neither removed the mark (min z "
                             f"{min(r['z'] for r in sweep):.2f}) nor clearly cost 10 points: {desc}")
