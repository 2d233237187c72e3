"""Chapter 09's claims and controls, and the functions that decide them from measured numbers.

Every function returns the keyword arguments of :meth:`repro.common.Ledger.control` (controls) or
:meth:`~repro.common.Ledger.record` (claims, with ``needs``), so the notebook writes
``ledger.record("C1", **verdicts.c1(summary))``. Reasons are sentences computed from the numbers; thresholds
are the card's (:data:`THRESHOLDS`), never tuned.

Inputs are the run summaries of :func:`repro.harm_optimizer.experiments.summary_frame` (one row per
dataset × optimizer × seed; columns ``frac_harmed``, ``mean_pos_inc``, ``test_acc``, ``train_loss``,
``upd_norm_median``, ``viol_before``, ``viol_after``, ...), the checkpoint table of
:func:`~repro.harm_optimizer.experiments.checkpoint_frame`, and the overhead table of
:func:`~repro.harm_optimizer.experiments.overhead_table`.

Rules.
* Seed-count claims (C1 "in 5/5 seeds", C4 "in >= 4/5 seeds") hold only when the count is met *and* the
  paired comparison (:func:`repro.common.compare_paired`) says ``better``; a count met inside seed noise is
  inconclusive; a count missed fails. Fewer than 3 seeds decide no comparison (inconclusive).
* C1b is a "no worse than" claim: the card's "not higher" with a stated margin of 10 % of the baseline's mean
  positive increase (our choice, fixed before any full run): holds when the paired 95 % CI of Harm-X − X lies
  below +10 % of X's mean, fails when it lies wholly above it, inconclusive otherwise. When K2 added X at
  lr × ratio, Harm-X must also meet the rule against that run.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from repro.common import compare_paired

THRESHOLDS = {
    "K1_min_agree": 0.80,       # sign of full-network first-order change predicts measured harm
    "K1_max_viol_ratio": 0.50,  # last-layer violations after / before the correction
    "K2_ratio_lo": 0.80, "K2_ratio_hi": 1.25,
    "K3_min_gap": 0.10,         # Spearman(last layer, full) − Spearman(label Gram, full)
    "K4_max_train_loss": 0.15,
    "K4_max_mde": 0.01,         # minimum detectable paired accuracy difference (80 % power), 1 point
    "K5_min_cut": 0.10,         # exact variant cuts the harmed fraction by >= 0.1 (absolute)
    "C1_min_rel_cut": 0.20,
    "C1_win_frac": 1.0,         # 5/5 seeds
    "C1b_rel_margin": 0.10,
    "C2_min_spearman": 0.80,
    "C3_min_ratio": 0.70,
    "C4_win_frac": 0.8,         # >= 4/5 seeds
    "C5_max_repeat_gap": 0.10,
    "min_seeds": 3,
}
T = THRESHOLDS

CLAIMS = {
    "C1": "Less harm (headline): the fraction of batch samples whose loss increases after the step (Δℓ_i > 1e-6, "
          "the same batch re-evaluated every harm_every-th step), averaged after the first 10 % of training, is "
          ">= 20 % lower (relative) for Harm-SGDM than SGDM and for Harm-AdamW than AdamW, in 5/5 seeds, on every "
          "dataset.",
    "C1b": "Not harder harm: the mean positive loss increase per sample, mean_i max(0, Δℓ_i), of Harm-X is not "
           "higher than X's (margin: 10 % of X's mean; also against X at lr × the update-norm ratio when K2 "
           "adds it). May not hold.",
    "C2a": "Last layer captures second-order statistics, MNIST-1D CNN: the median over checkpoints of the Spearman "
           "correlation between the off-diagonal entries of the cosine-normalised last-layer and full-network "
           "per-sample-gradient Gram matrices is >= 0.8 (sign agreement reported). May not hold at toy scale.",
    "C2b": "Last layer captures second-order statistics, digits MLP: as C2a on the digits MLP.",
    "C3": "Proxy vs exact: the harm reduction (C1 fraction, X − Harm-X) of the last-layer proxy is >= 70 % of "
          "that of the exact full-gradient B-dimensional QP, on digits (SGDM, identical runs).",
    "C4a": "Generalisation, MNIST-1D: test accuracy after the fixed budget of Harm-X >= X in >= 4/5 seeds "
           "(paired 95 % CI > 0) for X in {SGDM, AdamW}, and Harm-X beats X run for compute_match × the steps. "
           "May not hold at toy scale.",
    "C4b": "Generalisation, digits: as C4a on scikit-learn digits. Likely inconclusive: digits is at its ceiling.",
    "C5": "Favourable scaling: the relative per-step wall-time overhead Harm-X/X − 1 decreases as the MLP width "
          "grows and as the MNIST-1D input length grows (B fixed).",
}

CONTROLS = {
    "K1": "The harm is first-order and the QP removes it: at the checkpoints of the baseline runs, the first-"
          "order prediction −g_iᵀΔθ > 1e-6 (full network) agrees with the measured Δℓ_i > 1e-6 for >= 80 % of "
          "samples; and over every Harm-X run the last-layer violations (g_iᵀd < −1e-3‖g_i‖‖d_opt‖) after the "
          "correction are <= 50 % of their count before it.",
    "K2": "Effective step size: the median full-network update-norm ratio Harm-X / X lies in [0.8, 1.25], or X "
          "was also run at lr × that ratio so that C1b and C4 are judged against it.",
    "K3a": "The Gram metric beats class structure on MNIST-1D: the median last-layer Spearman exceeds that of the "
           "label Gram 1[y_i = y_j] by >= 0.1.",
    "K3b": "The Gram metric beats class structure on digits: as K3a on digits.",
    "K4a": "Accuracy can resolve a gain on MNIST-1D: every baseline's final train loss <= 0.15 and the minimum "
           "detectable paired accuracy difference (80 % power, 5 % two-sided) <= 1 point.",
    "K4b": "Accuracy can resolve a gain on digits: as K4a on digits.",
    "K5": "The exact QP has something to remove: the exact full-gradient variant lowers the harmed fraction by "
          ">= 0.1 (absolute, mean over seeds) against SGDM on the same runs.",
}

NAMES = {"sgdm": "SGDM", "adamw": "AdamW", "harm_sgdm": "Harm-SGDM", "harm_adamw": "Harm-AdamW",
         "mnist1d": "MNIST-1D", "digits": "digits"}


def numbers_line(numbers: dict) -> str:
    """A ledger entry's numbers as one line of prose: 'name = value; ...' (4 significant digits)."""
    from repro.common.claims import fmt

    return "; ".join(f"{k} = {fmt(v)}" for k, v in numbers.items() if k != "condition met") or "—"


def _few(n: int) -> str | None:
    return (f"only {n} seed(s): a paired comparison over fewer than {T['min_seeds']} seeds decides nothing "
            "(the full profile runs 5)" if n < T["min_seeds"] else None)


def detectable_effect(diffs: Sequence[float], power: float = 0.8, level: float = 0.95) -> float:
    """Smallest true mean paired difference a two-sided paired t-test at ``level`` detects with probability
    ``power`` given the observed spread: (t_{1−α/2} + t_power) · sd / √n. NaN for n < 2."""
    d = np.asarray(diffs, float)
    n = d.size
    if n < 2:
        return float("nan")
    q = stats.t.ppf(1 - (1 - level) / 2, n - 1) + stats.t.ppf(power, n - 1)
    return float(q * d.std(ddof=1) / math.sqrt(n))


def paired(summary: pd.DataFrame, dataset: str, a: str, b: str, col: str, variant_b: str = "main",
           seeds: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-seed values of ``col`` for optimizer ``a`` (main runs) and ``b`` (``variant_b`` runs), matched on
    seed (only seeds present in both)."""
    s = summary[summary.dataset == dataset]
    A = s[(s.optimizer == a) & (s.variant == "main")].set_index("seed")[col]
    B = s[(s.optimizer == b) & (s.variant == variant_b)].set_index("seed")[col]
    idx = [i for i in A.index if i in B.index and (seeds is None or i in seeds)]
    return A.loc[idx].to_numpy(float), B.loc[idx].to_numpy(float)


def _pairs(summary: pd.DataFrame) -> list[tuple[str, str]]:
    main = summary[summary.variant == "main"]
    out = []
    for ds in main.dataset.unique():
        for x in ("sgdm", "adamw"):
            opts = set(main[main.dataset == ds].optimizer)
            if x in opts and f"harm_{x}" in opts:
                out.append((ds, x))
    return out


# ----------------------------------------------------------------------------- controls

def k1(checkpoints: pd.DataFrame, summary: pd.DataFrame) -> dict:
    """``checkpoints``: rows with ``first_order_agree``; ``summary``: Harm-X main runs' violation counts."""
    agree = float(checkpoints["first_order_agree"].median()) if len(checkpoints) else float("nan")
    agree_min = float(checkpoints["first_order_agree"].min()) if len(checkpoints) else float("nan")
    h = summary[(summary.variant == "main") & summary.optimizer.str.startswith("harm_")]
    nums = {"first-order agreement (median)": agree, "first-order agreement (min)": agree_min,
            "checkpoints": int(len(checkpoints))}
    ratios = {}
    for opt, g in h.groupby("optimizer"):
        vb, va = int(g.viol_before.sum()), int(g.viol_after.sum())
        ratios[opt] = va / vb if vb else float("nan")
        nums[f"{NAMES[opt]} violations before"] = vb
        nums[f"{NAMES[opt]} violations after"] = va
        nums[f"{NAMES[opt]} after/before"] = ratios[opt]
    bad = []
    if not agree >= T["K1_min_agree"]:
        bad.append(f"the first-order sign predicts the measured harm for a median {agree:.3f} of samples "
                   f"(< {T['K1_min_agree']:.2f})")
    for opt, r in ratios.items():
        if not r <= T["K1_max_viol_ratio"]:
            bad.append(f"{NAMES[opt]} leaves {r:.3f} of its last-layer violations after the correction "
                       f"(> {T['K1_max_viol_ratio']:.2f})")
    if not ratios:
        bad.append("no Harm-X run")
    return dict(holds=not bad, threshold=f"agreement >= {T['K1_min_agree']:.2f} and violations after/before <= "
                                         f"{T['K1_max_viol_ratio']:.2f} for every Harm-X",
                numbers=nums, reason="; ".join(bad))


def update_norm_ratios(summary: pd.DataFrame) -> dict[tuple[str, str], float]:
    """Median over seeds of the per-seed ratio of median update norms, Harm-X / X, per (dataset, X)."""
    out = {}
    for ds, x in _pairs(summary):
        a, b = paired(summary, ds, f"harm_{x}", x, "upd_norm_median")
        out[(ds, x)] = float(np.median(a / b)) if len(a) else float("nan")
    return out


def needs_lr_match(ratios: dict) -> dict:
    """The (dataset, X) whose ratio leaves [0.8, 1.25] -> lr factor for the step-size-matched X."""
    return {k: r for k, r in ratios.items() if not (T["K2_ratio_lo"] <= r <= T["K2_ratio_hi"])}


def k2(summary: pd.DataFrame) -> dict:
    ratios = update_norm_ratios(summary)
    have = set(zip(summary[summary.variant == "lr_matched"].dataset, summary[summary.variant == "lr_matched"].optimizer))
    nums, bad, matched = {}, [], []
    for (ds, x), r in ratios.items():
        nums[f"{NAMES[ds]} {NAMES[f'harm_{x}']}/{NAMES[x]} update norm"] = r
        if not (T["K2_ratio_lo"] <= r <= T["K2_ratio_hi"]):
            if (ds, x) in have:
                matched.append(f"{NAMES[x]} on {NAMES[ds]}")
            else:
                bad.append(f"{NAMES[ds]}: Harm-{NAMES[x]}'s updates are {r:.2f} × {NAMES[x]}'s and no step-size-"
                           "matched baseline was run")
    nums["step-size-matched baselines"] = ", ".join(matched) or "none needed"
    return dict(holds=bool(ratios) and not bad,
                threshold=f"ratio in [{T['K2_ratio_lo']}, {T['K2_ratio_hi']}] or X re-run at lr × ratio",
                numbers=nums, reason="; ".join(bad) or "no Harm-X/X pair")


def k3(checkpoints: pd.DataFrame, dataset: str) -> dict:
    nums, bad = {}, []
    for ds, g in checkpoints[checkpoints.dataset == dataset].groupby("dataset", sort=False):
        ll, lab, e = (float(g[c].median()) for c in ("spearman_ll", "spearman_label", "spearman_e"))
        nums[f"{NAMES[ds]} last-layer ρ"] = ll
        nums[f"{NAMES[ds]} label ρ"] = lab
        nums[f"{NAMES[ds]} e-only ρ"] = e
        share = float(g["head_share"].median()) if "head_share" in g else float("nan")
        if not math.isnan(share):
            nums[f"{NAMES[ds]} head share of ‖g_i‖²"] = share
        if not ll - lab >= T["K3_min_gap"]:
            word = "exceeds" if ll >= lab else "falls short of"
            bad.append(f"{NAMES[ds]}: last-layer ρ {ll:.3f} {word} the label Gram's {lab:.3f} by {abs(ll - lab):.3f}"
                       f" (needs to exceed it by {T['K3_min_gap']})"
                       + ("" if math.isnan(share) else f"; the last layer holds a median {100 * share:.0f} % of a "
                                                      "per-sample gradient's squared norm"))
    if not nums:
        bad.append(f"no checkpoint on {dataset}")
    return dict(holds=not bad, threshold=f"median ρ(last layer) − ρ(label Gram) >= {T['K3_min_gap']}",
                numbers=nums, reason="; ".join(bad))


def k4(summary: pd.DataFrame, dataset: str) -> dict:
    nums, bad = {}, []
    for ds, x in _pairs(summary):
        if ds != dataset:
            continue
        a, b = paired(summary, ds, f"harm_{x}", x, "test_acc")
        _, loss = paired(summary, ds, f"harm_{x}", x, "train_loss")
        mde = detectable_effect(a - b)
        worst = float(np.nanmax(loss)) if len(loss) else float("nan")
        nums[f"{NAMES[x]} max train loss"] = worst
        nums[f"{NAMES[x]} detectable diff (points)"] = 100 * mde
        if not worst <= T["K4_max_train_loss"]:
            bad.append(f"{NAMES[x]}'s final train loss reaches {worst:.3f} (> {T['K4_max_train_loss']})")
        if not mde <= T["K4_max_mde"]:
            bad.append(f"the smallest paired accuracy gain over Harm-{NAMES[x]} − {NAMES[x]} that {len(a)} seed(s) "
                       f"would detect is {'undefined' if math.isnan(mde) else f'{100 * mde:.2f} points'} "
                       f"(> {100 * T['K4_max_mde']:.0f})")
    if not nums:
        bad.append(f"{dataset} not run")
    return dict(holds=not bad, threshold=f"train loss <= {T['K4_max_train_loss']} and detectable diff <= "
                                         f"{100 * T['K4_max_mde']:.0f} point",
                numbers=nums, reason="; ".join(bad))


def k5(exact: pd.DataFrame) -> dict:
    base = exact[exact.variant == "short"].set_index("seed").frac_harmed
    ex = exact[exact.variant == "exact"].set_index("seed").frac_harmed
    cut = float((base - ex.loc[base.index]).mean()) if len(base) else float("nan")
    return dict(holds=bool(cut >= T["K5_min_cut"]), threshold=f"SGDM − exact harmed fraction >= {T['K5_min_cut']}",
                numbers={"SGDM harmed": float(base.mean()), "exact harmed": float(ex.mean()), "cut": cut,
                         "seeds": int(len(base))},
                reason=f"the exact QP lowers the harmed fraction by only {cut:.3f} (< {T['K5_min_cut']})")


# ----------------------------------------------------------------------------- claims

def c1(summary: pd.DataFrame) -> dict:
    nums, parts, verdicts, ns = {}, [], [], []
    for ds, x in _pairs(summary):
        h, b = paired(summary, ds, f"harm_{x}", x, "frac_harmed")
        rel = 1 - h / b
        n = len(h)
        ns.append(n)
        wins, need = int((rel >= T["C1_min_rel_cut"]).sum()), math.ceil(T["C1_win_frac"] * n - 1e-9)
        cmp = compare_paired(h, b, higher_is_better=False)
        tag = f"{NAMES[ds]} {NAMES[x]}"
        nums[f"{tag} harmed"] = [float(b.mean()), float(h.mean())]
        nums[f"{tag} relative cut"] = float(rel.mean())
        nums[f"{tag} seeds >= 20 %"] = f"{wins} of {n}"
        nums[f"{tag} comparison"] = cmp.word
        ok = wins >= need and cmp.better
        verdicts.append("holds" if ok else ("inconclusive" if wins >= need else "fails"))
        parts.append(f"{tag}: harmed fraction {b.mean():.3f} → {h.mean():.3f} (relative cut {rel.mean():.1%}, "
                     f"range {rel.min():.1%}–{rel.max():.1%}), >= 20 % in {wins} of {n} seeds (needs {need}), "
                     f"paired difference {cmp.word}")
    holds = bool(verdicts) and all(v == "holds" for v in verdicts)
    inconc = _few(min(ns)) if ns else "no Harm-X/X pair"
    if not inconc and not holds and "fails" not in verdicts:
        inconc = "the seed count is met but the paired difference is inside seed noise: " + "; ".join(parts)
    return dict(holds=holds, threshold="relative cut >= 20 % in every seed and paired CI better, every pair",
                numbers=nums, reason="; ".join(parts), inconclusive=inconc, needs=("K1",))


def c1b(summary: pd.DataFrame) -> dict:
    nums, parts, verdicts, ns = {}, [], [], []
    lr_m = summary[summary.variant == "lr_matched"]
    for ds, x in _pairs(summary):
        refs = [("main", x)]
        if len(lr_m[(lr_m.dataset == ds) & (lr_m.optimizer == x)]):
            refs.append(("lr_matched", f"{x} at lr × ratio"))
        for var, label in refs:
            h, b = paired(summary, ds, f"harm_{x}", x, "mean_pos_inc", variant_b=var)
            ns.append(len(h))
            margin = T["C1b_rel_margin"] * float(b.mean())
            cmp = compare_paired(h, b, higher_is_better=False)   # positive = Harm-X lower
            v = "holds" if cmp.no_worse_than(margin) else ("fails" if cmp.ci_hi < -margin else "inconclusive")
            verdicts.append(v)
            tag = f"{NAMES[ds]} Harm-{NAMES[x]} vs {label.replace(x, NAMES[x])}"
            nums[f"{tag} mean pos. increase"] = [float(b.mean()), float(h.mean())]
            nums[f"{tag} ratio"] = float(h.mean() / b.mean()) if b.mean() > 0 else float("nan")
            parts.append(f"{tag}: mean positive increase {b.mean():.2e} → {h.mean():.2e} ({h.mean() / b.mean():.2f} ×), "
                         f"X − Harm-X 95 % CI [{cmp.ci_lo:.2e}, {cmp.ci_hi:.2e}] against the margin −{margin:.2e}")
    holds = bool(verdicts) and all(v == "holds" for v in verdicts)
    inconc = _few(min(ns)) if ns else "no Harm-X/X pair"
    if not inconc and not holds and "fails" not in verdicts:
        inconc = "a confidence interval straddles the margin: " + "; ".join(parts)
    return dict(holds=holds, threshold="paired CI of Harm-X − X below +10 % of X's mean, every pair",
                numbers=nums, reason="; ".join(parts), inconclusive=inconc, needs=("K2",))


def c2(checkpoints: pd.DataFrame, dataset: str) -> dict:
    nums, parts, ok = {}, [], []
    for ds, g in checkpoints[checkpoints.dataset == dataset].groupby("dataset", sort=False):
        rho, sign = float(g.spearman_ll.median()), float(g.sign_ll.median())
        nums[f"{NAMES[ds]} ρ median"] = rho
        nums[f"{NAMES[ds]} ρ range"] = [float(g.spearman_ll.min()), float(g.spearman_ll.max())]
        nums[f"{NAMES[ds]} sign agreement"] = sign
        nums[f"{NAMES[ds]} conflicting pairs"] = float(g.conflict_frac.median())
        ok.append(rho >= T["C2_min_spearman"])
        parts.append(f"{NAMES[ds]}: median Spearman {rho:.3f} over {len(g)} checkpoints "
                     f"({'>=' if ok[-1] else '<'} {T['C2_min_spearman']}), sign agreement {sign:.3f} "
                     f"with {g.conflict_frac.median():.2f} of pairs in conflict")
    control = "K3a" if dataset == "mnist1d" else "K3b"
    return dict(holds=bool(ok) and all(ok), threshold=f"median Spearman >= {T['C2_min_spearman']}",
                numbers=nums, reason="; ".join(parts) or f"no checkpoint on {dataset}",
                inconclusive=None if ok else f"{dataset} not run", needs=(control,))


def c2a(checkpoints: pd.DataFrame) -> dict:
    return c2(checkpoints, "mnist1d")


def c2b(checkpoints: pd.DataFrame) -> dict:
    return c2(checkpoints, "digits")


def c3(exact: pd.DataFrame) -> dict:
    idx = exact[exact.variant == "short"].set_index("seed").frac_harmed
    base = idx.to_numpy(float)
    prox = exact[exact.variant == "proxy"].set_index("seed").frac_harmed.loc[idx.index].to_numpy(float)
    ex = exact[exact.variant == "exact"].set_index("seed").frac_harmed.loc[idx.index].to_numpy(float)
    cut_p, cut_e = float((base - prox).mean()), float((base - ex).mean())
    ratio = cut_p / cut_e if cut_e > 0 else float("nan")
    per_seed = ((base - prox) / (base - ex)).tolist()
    return dict(holds=bool(ratio >= T["C3_min_ratio"]), threshold=f"proxy cut / exact cut >= {T['C3_min_ratio']}",
                numbers={"harmed SGDM / proxy / exact": [float(base.mean()), float(prox.mean()), float(ex.mean())],
                         "proxy/exact cut": ratio, "per seed": per_seed, "seeds": len(base)},
                reason=f"the proxy lowers the harmed fraction by {cut_p:.3f}, the exact QP by {cut_e:.3f}: "
                       f"{ratio:.2f} of the exact reduction over {len(base)} seed(s) "
                       f"({'>=' if ratio >= T['C3_min_ratio'] else '<'} {T['C3_min_ratio']})",
                needs=("K1", "K5"))


def _c4(summary: pd.DataFrame, dataset: str, control: str) -> dict:
    nums, parts, verdicts, ns = {}, [], [], []
    cm = summary[(summary.variant == "compute_matched") & (summary.dataset == dataset)]
    lm = summary[(summary.variant == "lr_matched") & (summary.dataset == dataset)]
    for ds, x in _pairs(summary):
        if ds != dataset:
            continue
        h, b = paired(summary, ds, f"harm_{x}", x, "test_acc")
        n = len(h)
        ns.append(n)
        wins, need = int((h >= b).sum()), math.ceil(T["C4_win_frac"] * n - 1e-9)
        cmp = compare_paired(h, b)
        v = "holds" if (wins >= need and cmp.better) else ("inconclusive" if wins >= need else "fails")
        tag = f"Harm-{NAMES[x]} vs {NAMES[x]}"
        nums[f"{tag} acc"] = [float(b.mean()), float(h.mean())]
        nums.update(cmp.numbers(tag))
        nums[f"{tag} seeds >="] = f"{wins} of {n}"
        parts.append(f"{tag}: test accuracy {100 * b.mean():.2f} → {100 * h.mean():.2f} % "
                     f"(difference {100 * cmp.mean_diff:+.2f} points, 95 % CI [{100 * cmp.ci_lo:+.2f}, "
                     f"{100 * cmp.ci_hi:+.2f}], {cmp.word}); Harm-X >= X in {wins} of {n} seeds (needs {need})")
        for var, frame, label in (("compute_matched", cm, "compute-matched"), ("lr_matched", lm, "lr-matched")):
            if not len(frame[frame.optimizer == x]):
                continue
            h2, b2 = paired(summary, ds, f"harm_{x}", x, "test_acc", variant_b=var)
            c2_ = compare_paired(h2, b2)
            nums[f"{tag} ({label}) diff"] = 100 * c2_.mean_diff
            nums[f"{tag} ({label}) comparison"] = c2_.word
            parts.append(f"against {NAMES[x]} {label} ({len(h2)} seeds) {100 * c2_.mean_diff:+.2f} points, {c2_.word}")
            if v == "holds" and not c2_.better:
                v = "fails" if c2_.worse else "inconclusive"
        verdicts.append(v)
    holds = bool(verdicts) and all(v == "holds" for v in verdicts)
    inconc = _few(min(ns)) if ns else f"{dataset} not run"
    if not inconc and not holds and "fails" not in verdicts:
        inconc = "differences inside seed noise: " + "; ".join(parts)
    return dict(holds=holds, threshold="Harm-X >= X in >= 4/5 seeds, paired CI better, and better than the "
                                       "compute-matched (and any lr-matched) X",
                numbers=nums, reason="; ".join(parts), inconclusive=inconc, needs=("K2", control))


def c4a(summary: pd.DataFrame) -> dict:
    return _c4(summary, "mnist1d", "K4a")


def c4b(summary: pd.DataFrame) -> dict:
    return _c4(summary, "digits", "K4b")


def c5(overhead: pd.DataFrame, harm_variants: Sequence[str]) -> dict:
    """``overhead``: rows axis, size, harm, overhead, extra_ms, repeats_agree; decided on ``harm_variants``
    (the Harm-X trained in the chapter)."""
    nums, parts, ok, disagree, short = {}, [], [], [], []
    for (axis, harm), g in overhead[overhead.harm.isin(harm_variants)].groupby(["axis", "harm"], sort=False):
        g = g.sort_values("size")
        ov = g.overhead.to_numpy(float)
        tag = f"{NAMES[harm]} vs {axis}"
        nums[f"{tag} sizes"] = [int(s) for s in g["size"]]
        nums[f"{tag} Harm-X/X time"] = " → ".join(f"{1 + o:.2f} ×" for o in ov)
        nums[f"{tag} extra"] = " → ".join(f"{m:.2f} ms" for m in g.extra_ms)
        if len(ov) < 2:
            short.append(tag)
            continue
        if not g.repeats_agree.all():
            disagree.append(tag)
        dec = bool(np.all(np.diff(ov) < 0))
        ok.append(dec)
        parts.append(f"{tag}: relative overhead {' → '.join(f'{100 * o:.0f} %' for o in ov)} "
                     f"({'decreasing' if dec else 'not decreasing'})")
    inconc = None
    if short and not ok:
        inconc = f"fewer than 2 sizes in {', '.join(short)}: no trend to judge (the full profile sweeps 3)"
    elif disagree:
        inconc = (f"the two timing repeats differ by more than {T['C5_max_repeat_gap']:.0%} in "
                  f"{', '.join(disagree)} (machine load): " + "; ".join(parts))
    return dict(holds=bool(ok) and all(ok), threshold="relative overhead strictly decreasing along every sweep",
                numbers=nums, reason="; ".join(parts), inconclusive=inconc)
