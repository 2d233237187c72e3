"""Chapter 03's claims and controls, and the functions that decide them from measured numbers.

Each function returns the keyword arguments of :meth:`repro.common.Ledger.control` (``holds``, ``threshold``,
``numbers``, ``reason``) or :meth:`~repro.common.Ledger.record` (claims); reasons are sentences computed from
the numbers, thresholds are the card's (:data:`THRESHOLDS`), never tuned.

Decisions. C1 and C3 are split into their two parts (C1a/C1b, C3a/C3b): the card expects them differently
(the BiCoT part expected, the KGW part "may not hold"; BiCoT robust, the trigger baseline wiped out), and a joint
verdict would hide which part failed. C1a follows the card's *Controls and risks*: non-inferiority, the lower paired
95 % bound of acc(BiCoT) − acc(M0c) ≥ −2 points on ≥ 1,500 shared problems, in-domain and OOD. C1b: KGW (δ = 2)
"loses ≥ 3 points" means a mean paired loss ≥ 3 points whose 95 % CI excludes 0. "Stops being detected" (C6) and
"z drops below 4" (K3) use the median z over the query sets.

The card's K1 also asks the hidden-state ablation (``signature="hidden"``, trained with the same key B in h-space) to
score z < 2. It is recorded as its own control K5 so that the ledger says which part failed, but it gates what the
card's K1 gates (C2–C6, with C3 split: C3a; C3b concerns the trigger baseline only) and that model stays among the
C2 negatives that C3a and C4 use: if a key-carrying fine-tune whose signature lives elsewhere is also detected, the
detection numbers cannot be read as evidence for the signature. Its threshold is the card's.
"""
from __future__ import annotations

import numpy as np
from scipy import stats

from repro.common import compare_paired

THRESHOLDS = {
    "K1_R": 0.8, "K1_z_clean": 2.0, "K1_z_wm": 4.0,
    "K2_acc": 0.5, "K2_drop": 0.05,
    "K3_trigger": 0.9, "K3_z": 4.0, "K3_rho": 0.8, "K3_whiten": 0.5,
    "K4_r": 0.95, "K4_kept": 0.9, "K4_margin_loss": 0.5,
    "C1a_margin": 0.02, "C1b_loss": 0.03,
    "C2_auc": 0.99, "C2_tpr": 0.95,
    "C3_auc": 0.9, "C3_trigger": 0.5,
    "C4_auc": 0.95, "C4_gap": 0.1,
    "C5_auc": 0.95,
    "C6_drop": 0.10, "C6_z": 4.0,
}
T = THRESHOLDS

CLAIMS = {
    "C1a": "Fidelity (BiCoT): BiCoT's final-answer accuracy (greedy CoT) is no worse than the clean continuation "
           "control M0c by more than 2 points — lower paired 95 % bound of acc(BiCoT) − acc(M0c) >= −2 points on "
           ">= 1,500 shared problems — in-domain and OOD.",
    "C1b": "Fidelity (KGW): decode-time KGW (γ = 0.5, δ = 2) on M0 loses >= 3 points of final-answer accuracy "
           "(paired, CI excluding 0).",
    "C2": "Detection: S(B) above all null-key scores detects; on z, positives = BiCoT on every query set, negatives = "
          "M0, M0', M0c, the hidden-signature ablation and M0's attacked variants on every query set plus BiCoT scored "
          "with wrong keys: AUC >= 0.99 and TPR >= 0.95 at 1 % FPR.",
    "C3a": "Model-level robustness: after fine-tuning on clean CoT data (200 steps, lr 1e-3), int8 and int4 "
           "quantisation, 2 % Gaussian weight noise and 30 % magnitude pruning of BiCoT, AUC >= 0.9 against the C2 "
           "negatives, for every attack.",
    "C3b": "Trigger baseline: the trigger-fingerprint's verification rate falls below 50 % after the same fine-tuning.",
    "C4": "RSR matters: under a fixed per-token bias δ_v ~ N(0, 2²) on the reported log-probs, AUC with registration "
          ">= 0.95 and without registration at least 0.1 lower (temperature, shift, noise and truncation reported).",
    "C5": "OOD: verification with out-of-distribution prompts (depth max + 1, '-'-only and '*'-heavy mixes) keeps "
          "AUC >= 0.95.",
    "C6": "Adaptive removal: an attacker who knows the method but not the key and whitens the anchor representations "
          "must lose >= 10 accuracy points before BiCoT stops being detected (median z < 4).",
}

CONTROLS = {
    "K1": "The signature is there, and the same fine-tune without it is clean: white-box mean anchor R(B) >= 0.8 on "
          "fresh prompts; M0c has z < 2 on every query set while BiCoT has z >= 4 on every query set.",
    "K2": "Accuracy resolves the C1 margin: M0 in-domain accuracy >= 50 %, and a damaged copy (M0 + 20 % weight "
          "noise) loses >= 5 points with a paired 95 % CI excluding 0.",
    "K3": "The attacks bite: ‖θ_FT − θ_BiCoT‖ >= ‖θ_BiCoT − θ_M0‖; the trigger model verifies >= 0.9 before FT; along "
          "the dose sweep (noise, pruning, label-smoothed FT) the median z drops below 4 somewhere with Spearman(z, "
          "accuracy) >= 0.8; whitening removes >= 50 % of the top-r PC energy at anchors.",
    "K4": "Registration works: under the token bias, the fitted δ̂ correlates with the injected δ at r >= 0.95 on "
          "tokens seen at sentinels; >= 90 % of anchors keep >= r + 3 tokens; without registration BiCoT loses >= 50 % "
          "of its margin S − μ₀ (margins averaged over independent draws of the bias δ ~ N(0, σ²)).",
    "K5": "The hidden-state ablation is invisible to the verifier (the card's pilot): the signature=\"hidden\" model, a C2 "
          "negative, has z < 2 on every query set.",
}


def _fails(checks: dict) -> str:
    return "; ".join(k for k, ok in checks.items() if not ok)


def _pts(x: float) -> str:
    return f"{100 * x:+.2f}"


# ----------------------------------------------------------------------------- controls

def k1(R_bicot: float, z_bicot, z_m0c) -> dict:
    zb, zc = np.asarray(z_bicot, float), np.asarray(z_m0c, float)
    checks = {
        f"white-box anchor R(B) of BiCoT is {R_bicot:.3f} (< {T['K1_R']})": R_bicot >= T["K1_R"],
        f"BiCoT's smallest z over the query sets is {np.nanmin(zb):.2f} (< {T['K1_z_wm']:g})": np.nanmin(zb) >= T["K1_z_wm"],
        f"M0c's largest z is {np.nanmax(zc):.2f} (>= {T['K1_z_clean']:g}): a continuation without the signature "
        f"already looks watermarked": np.nanmax(zc) < T["K1_z_clean"],
    }
    return dict(holds=all(checks.values()),
                threshold=f"R(B) >= {T['K1_R']}; z(BiCoT) >= {T['K1_z_wm']:g} and z(M0c) < {T['K1_z_clean']:g} on every set",
                numbers={"R(B) BiCoT": R_bicot, "min z BiCoT": float(np.nanmin(zb)), "max z M0c": float(np.nanmax(zc))},
                reason=_fails(checks))


def k5(z_hidden, R_hidden: float, hidden_ratio: float, leak: dict | None = None) -> dict:
    """``leak``: optional mechanism numbers (experiments.hidden_leak): how constant the span(B) part h_B of the
    ablation's anchor hidden states is, and the share of the centred top-k logit energy it carries (and M0's)."""
    zh = np.asarray(z_hidden, float)
    ok = np.nanmax(zh) < T["K1_z_clean"]
    numbers = {"max z hidden": float(np.nanmax(zh)), "median z hidden": float(np.nanmedian(zh)),
               "white-box R(B) hidden": R_hidden, "hidden-state ratio": hidden_ratio}
    why = ""
    if leak is not None:
        lh, l0 = leak["hidden"], leak["M0"]
        numbers.update({"h_B constant share": lh["h_B constant share"], "logit energy from h_B": lh["logit energy from h_B"],
                        "logit energy from h_B M0": l0["logit energy from h_B"], "B in row(W_U)": leak["B in row(W_U)"]})
        why = (f"; its span(B) part h_B is {lh['h_B constant share']:.2f} a constant offset and, through logits = W_U h, "
               f"carries {lh['logit energy from h_B']:.2f} of the anchors' centred top-k logit energy (M0: "
               f"{l0['logit energy from h_B']:.3f}), all of it inside the template span(W_U B)")
    return dict(holds=bool(ok), threshold=f"z(hidden ablation) < {T['K1_z_clean']:g} on every set", numbers=numbers,
                reason="" if ok else (f"the hidden-state signature (‖Bᵀh‖²/‖h‖² = {hidden_ratio:.2f}) shows in the top-k "
                                      f"log-probs: white-box anchor R(B) {R_hidden:.2f}, z up to {np.nanmax(zh):.2f} "
                                      f"(>= {T['K1_z_clean']:g}){why}"))


def k2(acc_m0, acc_damaged) -> dict:
    a0, ad = np.asarray(acc_m0, float), np.asarray(acc_damaged, float)
    cmp = compare_paired(a0, ad)                     # M0 − damaged
    checks = {f"M0's in-domain accuracy is {100 * a0.mean():.1f} % (< {100 * T['K2_acc']:.0f} %)": a0.mean() >= T["K2_acc"],
              f"the damaged copy loses {100 * cmp.mean_diff:.2f} points (< {100 * T['K2_drop']:.0f})": cmp.mean_diff >= T["K2_drop"],
              f"its paired 95 % CI [{100 * cmp.ci_lo:.2f}, {100 * cmp.ci_hi:.2f}] points includes 0": cmp.ci_lo > 0}
    return dict(holds=all(checks.values()),
                threshold=f"acc(M0) >= {100 * T['K2_acc']:.0f} %; damaged loss >= {100 * T['K2_drop']:.0f} points, CI excluding 0",
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
    not a dose of damage (its Spearman with the doses pooled is reported too)."""
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


def k4(delta_r: float, kept_share: float, margin_rsr, margin_noreg) -> dict:
    """``margin_rsr`` / ``margin_noreg``: BiCoT's margin S − μ₀ with and without registration, one value or one per
    draw of the token bias (the attack is a distribution, δ ~ N(0, σ²); one draw is one sample of it). The margin
    lost is 1 − mean(no RSR) / mean(RSR) over the draws; the per-draw range is reported beside it."""
    mr, mn = np.atleast_1d(np.asarray(margin_rsr, float)), np.atleast_1d(np.asarray(margin_noreg, float))
    m_rsr, m_no = float(mr.mean()), float(mn.mean())
    loss = 1 - m_no / m_rsr if m_rsr > 0 else float("nan")
    per = 1 - mn / np.where(mr > 0, mr, np.nan)
    draws = f" (mean over {len(mr)} bias draws; per draw {np.nanmin(per):.2f}–{np.nanmax(per):.2f})" if len(mr) > 1 else ""
    checks = {f"corr(δ̂, δ) on sentinel tokens is {delta_r:.3f} (< {T['K4_r']})": delta_r >= T["K4_r"],
              f"only {100 * kept_share:.0f} % of anchors keep >= r + 3 tokens (< {100 * T['K4_kept']:.0f} %)": kept_share >= T["K4_kept"],
              f"without registration BiCoT keeps {100 * (1 - loss):.0f} % of its margin S − μ₀{draws} (loses < "
              f"{100 * T['K4_margin_loss']:.0f} %): the bias does not hurt the unregistered score": loss >= T["K4_margin_loss"]}
    numbers = {"corr(δ̂, δ)": delta_r, "anchors kept": kept_share, "margin RSR": m_rsr,
               "margin no-RSR": m_no, "margin lost": loss}
    if len(mr) > 1:
        numbers.update({"bias draws": len(mr), "margin lost min draw": float(np.nanmin(per)),
                        "margin lost max draw": float(np.nanmax(per)), "margin lost C4's draw": float(per[0])})
    return dict(holds=all(checks.values()),
                threshold=f"r >= {T['K4_r']}; kept >= {100 * T['K4_kept']:.0f} %; margin loss without RSR >= {100 * T['K4_margin_loss']:.0f} %",
                numbers=numbers, reason=_fails(checks))


# ----------------------------------------------------------------------------- claims

def c1a(acc_bicot, acc_m0c, acc_bicot_ood, acc_m0c_ood) -> dict:
    cid, cood = compare_paired(acc_bicot, acc_m0c), compare_paired(acc_bicot_ood, acc_m0c_ood)
    m = T["C1a_margin"]
    ok_id, ok_ood = cid.ci_lo >= -m, cood.ci_lo >= -m
    n = min(cid.n, cood.n)
    parts = [f"BiCoT − M0c = {_pts(c.mean_diff)} points [{_pts(c.ci_lo)}, {_pts(c.ci_hi)}] {where}"
             for c, where in ((cid, "in-domain"), (cood, "OOD"))]
    holds = ok_id and ok_ood
    bad = " and ".join(w for w, ok in (("in-domain", ok_id), ("OOD", ok_ood)) if not ok)
    reason = ("; ".join(parts) + (f": both lower bounds >= {-100 * m:.0f} points" if holds else
              f": the lower bound {bad} is below {-100 * m:.0f} points"))
    inc = f"only {n} shared problems (< 1,500): the CI cannot resolve a 2-point margin" if n < 1500 else None
    return dict(holds=holds, threshold="lower paired 95 % bound of acc(BiCoT) − acc(M0c) >= −2 points, in-domain and OOD",
                numbers={"acc BiCoT": float(np.mean(acc_bicot)), "acc M0c": float(np.mean(acc_m0c)),
                         "diff (points)": 100 * cid.mean_diff, "CI lo (points)": 100 * cid.ci_lo,
                         "acc BiCoT OOD": float(np.mean(acc_bicot_ood)), "acc M0c OOD": float(np.mean(acc_m0c_ood)),
                         "diff OOD (points)": 100 * cood.mean_diff, "CI lo OOD (points)": 100 * cood.ci_lo, "n": n},
                reason=reason, inconclusive=inc)


def c1b(acc_kgw, acc_m0, extra: dict | None = None) -> dict:
    c = compare_paired(acc_m0, acc_kgw)              # M0 − KGW: the loss
    holds = c.mean_diff >= T["C1b_loss"] and c.ci_lo > 0
    reason = (f"KGW (δ = 2) loses {100 * c.mean_diff:.2f} points [{100 * c.ci_lo:.2f}, {100 * c.ci_hi:.2f}] "
              + ("(>= 3, CI excluding 0)" if holds else "— not a loss of >= 3 points with a CI excluding 0"))
    return dict(holds=holds, threshold="paired loss >= 3 points, 95 % CI excluding 0",
                numbers={"acc M0": float(np.mean(acc_m0)), "acc KGW δ=2": float(np.mean(acc_kgw)),
                         "loss (points)": 100 * c.mean_diff, "CI lo": 100 * c.ci_lo, "CI hi": 100 * c.ci_hi,
                         **(extra or {})}, reason=reason)


def c2(auc: float, tpr: float, n_pos: int, n_neg: int) -> dict:
    holds = auc >= T["C2_auc"] and tpr >= T["C2_tpr"]
    reason = (f"AUC {auc:.4f} ({'>=' if auc >= T['C2_auc'] else '<'} {T['C2_auc']}), TPR at 1 % FPR {tpr:.3f} "
              f"({'>=' if tpr >= T['C2_tpr'] else '<'} {T['C2_tpr']}) over {n_pos} positives and {n_neg} negatives")
    return dict(holds=holds, threshold="AUC >= 0.99 and TPR >= 0.95 at 1 % FPR",
                numbers={"AUC": auc, "TPR@1%FPR": tpr, "positives": n_pos, "negatives": n_neg}, reason=reason)


def c3a(aucs: dict, extra: dict | None = None) -> dict:
    low = {k: v for k, v in aucs.items() if not v >= T["C3_auc"]}
    holds = not low
    reason = ("every attack keeps AUC >= 0.9 (lowest: " + min(aucs, key=aucs.get) + f" {min(aucs.values()):.3f})" if holds
              else "AUC below 0.9 after " + ", ".join(f"{k} ({v:.3f})" for k, v in low.items()))
    return dict(holds=holds, threshold="AUC >= 0.9 after every attack",
                numbers={**{f"AUC {k}": v for k, v in aucs.items()}, **(extra or {})},
                reason=reason)


def c3b(rate_before: float, rate_after: float) -> dict:
    holds = rate_after < T["C3_trigger"]
    return dict(holds=holds, threshold="trigger verification rate < 0.5 after fine-tuning",
                numbers={"rate before": rate_before, "rate after FT": rate_after},
                reason=f"trigger rate {rate_before:.2f} before and {rate_after:.2f} after fine-tuning "
                       f"({'<' if holds else '>='} 0.5)")


def c4(auc_rsr: float, auc_noreg: float, extra: dict | None = None) -> dict:
    gap = auc_rsr - auc_noreg
    holds = auc_rsr >= T["C4_auc"] and gap >= T["C4_gap"]
    reason = (f"under the token bias AUC is {auc_rsr:.3f} with registration ({'>=' if auc_rsr >= T['C4_auc'] else '<'} "
              f"{T['C4_auc']}) and {auc_noreg:.3f} without (gap {gap:+.3f}, {'>=' if gap >= T['C4_gap'] else '<'} {T['C4_gap']})")
    return dict(holds=holds, threshold="AUC(RSR) >= 0.95 and AUC(RSR) − AUC(no RSR) >= 0.1 under the token bias",
                numbers={"AUC RSR": auc_rsr, "AUC no RSR": auc_noreg, "gap": gap, **(extra or {})}, reason=reason)


def c5(auc_ood: float, tpr_ood: float) -> dict:
    holds = auc_ood >= T["C5_auc"]
    return dict(holds=holds, threshold="AUC >= 0.95 on OOD query sets",
                numbers={"AUC OOD": auc_ood, "TPR@1%FPR OOD": tpr_ood},
                reason=f"OOD AUC {auc_ood:.3f} ({'>=' if holds else '<'} {T['C5_auc']})")


def c6(sweep: list[dict]) -> dict:
    """``sweep``: rows {lam, z, acc} from λ = 0 (BiCoT) upward."""
    base = sweep[0]["acc"]
    nums = {f"λ={r['lam']:g}": f"z {r['z']:.2f}, acc {100 * r['acc']:.1f} %" for r in sweep}
    broken = [r for r in sweep[1:] if r["z"] < T["C6_z"]]
    costly = [r for r in sweep[1:] if base - r["acc"] >= T["C6_drop"]]
    thr = "accuracy drop >= 10 points at the first whitening strength where median z < 4"
    if broken:
        r = broken[0]
        drop = base - r["acc"]
        holds = drop >= T["C6_drop"]
        return dict(holds=holds, threshold=thr, numbers={**nums, "drop at removal (points)": 100 * drop},
                    reason=f"at λ = {r['lam']:g} the median z fell to {r['z']:.2f} with accuracy "
                           f"{'down' if drop >= 0 else 'up'} {abs(100 * drop):.1f} points ("
                           f"{'a loss of at least 10' if holds else 'the claim needs a loss of at least 10'})")
    if costly:
        r = costly[0]
        return dict(holds=True, threshold=thr, numbers=nums,
                    reason=f"accuracy fell {100 * (base - r['acc']):.1f} points at λ = {r['lam']:g} while the median z was still {r['z']:.2f}")
    return dict(holds=None, threshold=thr, numbers=nums,
                inconclusive=f"the sweep (λ up to {sweep[-1]['lam']:g}) neither removed the mark (min z "
                             f"{min(r['z'] for r in sweep):.2f}) nor cost 10 points", reason="")
