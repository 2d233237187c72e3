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

from repro.common import compare_paired, decide_threshold, threshold_from_ci

THRESHOLDS = {
    "K1_min_agree": 0.80,       # sign of full-network first-order change predicts measured harm
    "K1_max_viol_ratio": 0.50,  # last-layer violations after / before the correction
    "K2_ratio_lo": 0.80, "K2_ratio_hi": 1.25,
    "K3_min_gap": 0.10,         # Spearman(last layer, full) − Spearman(label Gram, full) (K3 on digits, C2a)
    "K3_max_gram_err": 1e-6,    # vmap Gram vs per-sample autograd dot products, relative
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
    "C2a": "Last layer beats class structure, MNIST-1D CNN: the median over checkpoints of the Spearman "
           "correlation between the off-diagonal entries of the cosine-normalised last-layer and full-network "
           "per-sample-gradient Gram matrices exceeds that of the label Gram 1[y_i = y_j] by >= 0.1 (95 % CI "
           "over training seeds). Until issue 44 this was control K3a.",
    "C2b": "Last layer captures second-order statistics, MNIST-1D CNN: the median over checkpoints of that "
           "Spearman correlation is >= 0.8 (95 % CI over training seeds; sign agreement reported). May not hold "
           "at toy scale. Was C2a before issue 44.",
    "C2c": "Last layer captures second-order statistics, digits MLP: as C2b on the digits MLP. Was C2b before "
           "issue 44.",
    "C3": "Proxy vs exact: the harm reduction (C1 fraction, X − Harm-X) of the last-layer proxy is >= 70 % of "
          "that of the exact full-gradient B-dimensional QP, on digits (SGDM, identical runs; 95 % CI from a "
          "bootstrap over seeds and measured steps).",
    "C4a": "Generalisation, MNIST-1D: test accuracy after the fixed budget of Harm-X >= X in >= 4/5 seeds "
           "(paired 95 % CI > 0) for X in {SGDM, AdamW}, and Harm-X beats X run for compute_match × the steps. "
           "May not hold at toy scale.",
    "C4b": "Generalisation, digits: as C4a on scikit-learn digits. Likely inconclusive: digits is at its ceiling.",
    "C5": "Favourable scaling: the relative per-step wall-time overhead Harm-X/X − 1 decreases as the MLP width "
          "grows and as the MNIST-1D input length grows (B fixed).",
}

#: Issue 44 re-lettered C2 and K3; the ids of earlier ledgers map to these.
RENAMED = {"K3a": "C2a", "C2a": "C2b", "C2b": "C2c", "K3b": "K3"}

CONTROLS = {
    "K1": "The harm is first-order and the QP removes it: at the checkpoints of the baseline runs, the first-"
          "order prediction −g_iᵀΔθ > 1e-6 (full network) agrees with the measured Δℓ_i > 1e-6 for >= 80 % of "
          "samples; and for every Harm-X the last-layer violations (g_iᵀd < −1e-3‖g_i‖‖d_opt‖) after the "
          "correction are <= 50 % of their count before it (both: 95 % CI over training seeds).",
    "K2": "Effective step size: the full-network update-norm ratio Harm-X / X (per seed, median over steps) lies "
          "in [0.8, 1.25] with its 95 % CI over seeds, or X was also run at lr × that ratio so that C1b and C4 "
          "are judged against it.",
    "K3": "The Gram apparatus is exact and can beat class structure: at every checkpoint the full-network Gram "
          "of vmap per-sample gradients equals the dot products of per-sample autograd gradients (max relative "
          "error <= 1e-6), and on the digits MLP the last-layer Spearman exceeds that of the label Gram "
          "1[y_i = y_j] by >= 0.1 (95 % CI over training seeds).",
    "K4a": "Accuracy can resolve a gain on MNIST-1D: every baseline's final train loss <= 0.15 (and the 95 % CI "
           "of its mean) and the minimum detectable paired accuracy difference (80 % power, 5 % two-sided) "
           "<= 1 point.",
    "K4b": "Accuracy can resolve a gain on digits: as K4a on digits.",
    "K5": "The exact QP has something to remove: the exact full-gradient variant lowers the harmed fraction by "
          ">= 0.1 (absolute, 95 % CI over seeds) against SGDM on the same runs.",
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

def per_seed(checkpoints: pd.DataFrame, col: str, dataset: str | None = None) -> pd.Series:
    """One value per training seed: the median of ``col`` over that seed's checkpoints (both baselines'
    runs; on ``dataset`` only, if given). The units of every checkpoint-based CI (K1, K3, C2)."""
    g = checkpoints if dataset is None else checkpoints[checkpoints.dataset == dataset]
    if not len(g):
        return pd.Series(dtype=float)
    key = ["dataset", "seed"] if dataset is None else ["seed"]
    return g.groupby(key)[col].median()


def _ci_text(t) -> str:
    return f"{t.estimate:.3f} (95 % CI [{t.ci_lo:.3f}, {t.ci_hi:.3f}], {t.n} seeds)"


def k1(checkpoints: pd.DataFrame, summary: pd.DataFrame) -> dict:
    """``checkpoints``: rows with ``first_order_agree`` (and ``seed``); ``summary``: Harm-X main runs' violation
    counts. Both halves are decided by :func:`repro.common.decide_threshold` over training seeds: the first over
    per-seed median agreements (>= 0.8), the second over per-seed after/before ratios (<= 0.5) per Harm-X."""
    agree = per_seed(checkpoints, "first_order_agree") if len(checkpoints) else pd.Series(dtype=float)
    t_agree = decide_threshold(agree.to_numpy(float), T["K1_min_agree"], ">=")
    h = summary[(summary.variant == "main") & summary.optimizer.str.startswith("harm_")]
    nums = {"first-order agreement": t_agree.estimate, "first-order agreement ci95": [t_agree.ci_lo, t_agree.ci_hi],
            "first-order agreement (min checkpoint)": float(checkpoints["first_order_agree"].min())
            if len(checkpoints) else float("nan"), "checkpoints": int(len(checkpoints))}
    bad = []
    if not t_agree.holds:
        bad.append(f"the first-order sign predicts the measured harm for {_ci_text(t_agree)} of samples, not "
                   f"clearly >= {T['K1_min_agree']:.2f}")
    tested = 0
    for opt, g in h.groupby("optimizer"):
        vb = g.viol_before.to_numpy(float)
        r = np.where(vb > 0, g.viol_after.to_numpy(float) / np.where(vb > 0, vb, 1), np.nan)
        t = decide_threshold(r, T["K1_max_viol_ratio"], "<=")
        tested += 1
        nums[f"{NAMES[opt]} violations before"] = int(g.viol_before.sum())
        nums[f"{NAMES[opt]} violations after"] = int(g.viol_after.sum())
        nums[f"{NAMES[opt]} after/before"] = t.estimate
        nums[f"{NAMES[opt]} after/before ci95"] = [t.ci_lo, t.ci_hi]
        if not t.holds:
            bad.append(f"{NAMES[opt]} leaves {_ci_text(t)} of its last-layer violations after the correction, not "
                       f"clearly <= {T['K1_max_viol_ratio']:.2f}")
    if not tested:
        bad.append("no Harm-X run")
    return dict(holds=not bad, threshold=f"agreement >= {T['K1_min_agree']:.2f} and violations after/before <= "
                                         f"{T['K1_max_viol_ratio']:.2f} for every Harm-X (95 % CI over seeds)",
                numbers=nums, reason="; ".join(bad))


def update_norm_ratio_tests(summary: pd.DataFrame) -> dict[tuple[str, str], tuple[float, bool]]:
    """Per (dataset, X): (median over seeds of the per-seed ratio of median update norms Harm-X / X, whether the
    95 % CI of the ratio's mean lies inside [0.8, 1.25]: both bounds decided by ``decide_threshold``)."""
    out = {}
    for ds, x in _pairs(summary):
        a, b = paired(summary, ds, f"harm_{x}", x, "upd_norm_median")
        r = a / b
        inside = (decide_threshold(r, T["K2_ratio_lo"], ">=").holds and decide_threshold(r, T["K2_ratio_hi"], "<=").holds)
        out[(ds, x)] = (float(np.median(r)) if len(r) else float("nan"), bool(inside))
    return out


def update_norm_ratios(summary: pd.DataFrame) -> dict[tuple[str, str], float]:
    """Median over seeds of the per-seed ratio of median update norms, Harm-X / X, per (dataset, X)."""
    return {k: v[0] for k, v in update_norm_ratio_tests(summary).items()}


def needs_lr_match(summary_or_ratios) -> dict:
    """The (dataset, X) whose update-norm ratio is not clearly inside [0.8, 1.25] -> the lr factor (the median
    ratio) of the step-size-matched X. Given a plain {key: ratio} dict (no seeds), the point ratio decides."""
    if isinstance(summary_or_ratios, pd.DataFrame):
        return {k: r for k, (r, inside) in update_norm_ratio_tests(summary_or_ratios).items() if not inside}
    return {k: r for k, r in summary_or_ratios.items() if not (T["K2_ratio_lo"] <= r <= T["K2_ratio_hi"])}


def k2(summary: pd.DataFrame) -> dict:
    tests = update_norm_ratio_tests(summary)
    lm = summary[summary.variant == "lr_matched"]
    have = set(zip(lm.dataset, lm.optimizer))
    nums, bad, matched = {}, [], []
    for (ds, x), (r, inside) in tests.items():
        a, b = paired(summary, ds, f"harm_{x}", x, "upd_norm_median")
        t = decide_threshold(a / b, T["K2_ratio_lo"], ">=")
        tag = f"{NAMES[ds]} {NAMES[f'harm_{x}']}/{NAMES[x]} update norm"
        nums[tag] = r
        nums[f"{tag} ci95"] = [t.ci_lo, t.ci_hi]
        if not inside:
            if (ds, x) in have:
                matched.append(f"{NAMES[x]} on {NAMES[ds]}")
            else:
                bad.append(f"{NAMES[ds]}: Harm-{NAMES[x]}'s updates are {r:.2f} × {NAMES[x]}'s (95 % CI of the mean "
                           f"[{t.ci_lo:.2f}, {t.ci_hi:.2f}] not inside [{T['K2_ratio_lo']}, {T['K2_ratio_hi']}]) and "
                           "no step-size-matched baseline was run")
    nums["step-size-matched baselines"] = ", ".join(matched) or "none needed"
    return dict(holds=bool(tests) and not bad,
                threshold=f"ratio's 95 % CI inside [{T['K2_ratio_lo']}, {T['K2_ratio_hi']}], or X re-run at lr × ratio",
                numbers=nums, reason="; ".join(bad) or "no Harm-X/X pair")


def gram_gap(checkpoints: pd.DataFrame, dataset: str):
    """Per-seed medians of ρ(last layer) − ρ(label Gram) on ``dataset`` and their ``decide_threshold`` against
    K3's gap (the test of K3's second half on digits, and of claim C2a on MNIST-1D)."""
    g = checkpoints[checkpoints.dataset == dataset]
    gap = (g.spearman_ll - g.spearman_label).rename("gap")
    per = pd.concat([g, gap], axis=1).groupby("seed").gap.median() if len(g) else pd.Series(dtype=float)
    return per, decide_threshold(per.to_numpy(float), T["K3_min_gap"], ">=")


def _gram_numbers(checkpoints: pd.DataFrame, dataset: str) -> dict:
    g = checkpoints[checkpoints.dataset == dataset]
    nums = {f"{NAMES[dataset]} {lab}": float(per_seed(g, c, dataset).median())
            for lab, c in (("last-layer ρ", "spearman_ll"), ("label ρ", "spearman_label"), ("e-only ρ", "spearman_e"))}
    if "head_share" in g:
        nums[f"{NAMES[dataset]} head share of ‖g_i‖²"] = float(per_seed(g, "head_share", dataset).median())
    return nums


def k3(checkpoints: pd.DataFrame, dataset: str = "digits") -> dict:
    """The apparatus of C2: (i) the full Gram equals per-sample autograd dot products at every checkpoint
    (``gram_exact_err``, relative, <= 1e-6: a property of the code, not noisy, so no interval); (ii) on
    ``dataset`` (the digits MLP) the last-layer Gram beats the label Gram by >= 0.1, 95 % CI over seeds."""
    bad, nums = [], {}
    err = float(checkpoints["gram_exact_err"].max()) if len(checkpoints) and "gram_exact_err" in checkpoints \
        else float("nan")
    nums["full Gram vs autograd (max rel. error)"] = err
    nums["checkpoints"] = int(len(checkpoints))
    if not err <= T["K3_max_gram_err"]:
        bad.append(f"the full-network Gram differs from the per-sample autograd dot products by up to {err:.2e} "
                   f"(relative; > {T['K3_max_gram_err']:g})")
    g = checkpoints[checkpoints.dataset == dataset] if len(checkpoints) else checkpoints
    if not len(g):
        bad.append(f"no checkpoint on {dataset}")
    else:
        nums.update(_gram_numbers(checkpoints, dataset))
        _, t = gram_gap(checkpoints, dataset)
        nums[f"{NAMES[dataset]} gap ρ(last layer) − ρ(label)"] = t.estimate
        nums[f"{NAMES[dataset]} gap ci95"] = [t.ci_lo, t.ci_hi]
        if not t.holds:
            bad.append(f"{NAMES[dataset]}: the last-layer ρ exceeds the label Gram's by {_ci_text(t)}, not clearly "
                       f">= {T['K3_min_gap']}")
    return dict(holds=not bad, threshold=f"Gram error <= {T['K3_max_gram_err']:g} and {NAMES.get(dataset, dataset)} "
                                         f"gap >= {T['K3_min_gap']} (95 % CI over seeds)",
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
        t = decide_threshold(loss, T["K4_max_train_loss"], "<=")
        nums[f"{NAMES[x]} max train loss"] = worst
        nums[f"{NAMES[x]} train loss ci95"] = [t.ci_lo, t.ci_hi]
        nums[f"{NAMES[x]} detectable diff (points)"] = 100 * mde
        nums[f"{NAMES[x]} seeds"] = int(len(a))
        if not (worst <= T["K4_max_train_loss"] and t.holds):
            bad.append(f"{NAMES[x]}'s final train loss reaches {worst:.3f} (mean {t.estimate:.3f}, 95 % CI "
                       f"[{t.ci_lo:.3f}, {t.ci_hi:.3f}]; needs every seed and the CI <= {T['K4_max_train_loss']})")
        if not mde <= T["K4_max_mde"]:
            bad.append(f"the smallest paired accuracy gain over Harm-{NAMES[x]} − {NAMES[x]} that {len(a)} seed(s) "
                       f"would detect is {'undefined' if math.isnan(mde) else f'{100 * mde:.2f} points'} "
                       f"(> {100 * T['K4_max_mde']:.0f})")
    if not nums:
        bad.append(f"{dataset} not run")
    return dict(holds=not bad, threshold=f"train loss <= {T['K4_max_train_loss']} (every seed and 95 % CI) and "
                                         f"detectable diff <= {100 * T['K4_max_mde']:.0f} point",
                numbers=nums, reason="; ".join(bad))


def k5(exact: pd.DataFrame) -> dict:
    base = exact[exact.variant == "short"].set_index("seed").frac_harmed
    ex = exact[exact.variant == "exact"].set_index("seed").frac_harmed
    cuts = (base - ex.loc[base.index]).to_numpy(float) if len(base) else np.array([])
    t = decide_threshold(cuts, T["K5_min_cut"], ">=")
    return dict(holds=t.holds, threshold=f"SGDM − exact harmed fraction >= {T['K5_min_cut']} (95 % CI over seeds)",
                numbers={"SGDM harmed": float(base.mean()), "exact harmed": float(ex.mean()), "cut": t.estimate,
                         "cut ci95": [t.ci_lo, t.ci_hi], "seeds": int(len(base))},
                reason=f"the exact QP lowers the harmed fraction by {_ci_text(t)}, not clearly >= {T['K5_min_cut']}")



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


def c2a(checkpoints: pd.DataFrame) -> dict:
    """Was control K3a (issue 44): on the MNIST-1D CNN the last-layer Gram tracks the full Gram better than the
    label Gram by >= 0.1 — a property of the method, decided over training seeds."""
    ds = "mnist1d"
    if not len(checkpoints) or not (checkpoints.dataset == ds).any():
        return dict(holds=None, threshold=f"gap >= {T['K3_min_gap']}", numbers={}, inconclusive=f"{ds} not run",
                    needs=("K3",))
    _, t = gram_gap(checkpoints, ds)
    nums = {**_gram_numbers(checkpoints, ds), **t.numbers("gap ρ(last layer) − ρ(label)")}
    lab = _gram_numbers(checkpoints, ds)
    reason = (f"MNIST-1D: the last-layer Gram's Spearman with the full Gram ({lab['MNIST-1D last-layer ρ']:.3f}, median "
              f"over seeds) minus the label Gram's ({lab['MNIST-1D label ρ']:.3f}) is {_ci_text(t)} against the bar "
              f"{T['K3_min_gap']}; the last layer holds a median "
              f"{100 * lab.get('MNIST-1D head share of ‖g_i‖²', float('nan')):.0f} % of a per-sample gradient's "
              "squared norm")
    out = dict(**t.ledger_kwargs(), threshold=f"median ρ(last layer) − ρ(label Gram) >= {T['K3_min_gap']} "
                                              "(95 % CI over seeds)",
               numbers=nums, reason=reason, needs=("K3",))
    if not t.decided:
        out["inconclusive"] = t.reason + "; " + reason
    return out


def c2(checkpoints: pd.DataFrame, dataset: str) -> dict:
    g = checkpoints[checkpoints.dataset == dataset] if len(checkpoints) else checkpoints
    if not len(g):
        return dict(holds=None, threshold=f"median Spearman >= {T['C2_min_spearman']}", numbers={},
                    inconclusive=f"{dataset} not run", needs=("K3",))
    rho = per_seed(g, "spearman_ll", dataset).to_numpy(float)
    t = decide_threshold(rho, T["C2_min_spearman"], ">=")
    sign = float(per_seed(g, "sign_ll", dataset).median())
    conf = float(per_seed(g, "conflict_frac", dataset).median())
    nums = {**t.numbers(f"{NAMES[dataset]} ρ"), f"{NAMES[dataset]} ρ range (checkpoints)":
            [float(g.spearman_ll.min()), float(g.spearman_ll.max())],
            f"{NAMES[dataset]} sign agreement": sign, f"{NAMES[dataset]} conflicting pairs": conf}
    reason = (f"{NAMES[dataset]}: Spearman {_ci_text(t)} over {len(g)} checkpoints against the bar "
              f"{T['C2_min_spearman']}; sign agreement {sign:.3f} with {conf:.2f} of pairs in conflict")
    out = dict(**t.ledger_kwargs(), threshold=f"median Spearman >= {T['C2_min_spearman']} (95 % CI over seeds)",
               numbers=nums, reason=reason, needs=("K3",))
    if not t.decided:
        out["inconclusive"] = t.reason + "; " + reason
    return out


def c2b(checkpoints: pd.DataFrame) -> dict:
    return c2(checkpoints, "mnist1d")


def c2c(checkpoints: pd.DataFrame) -> dict:
    return c2(checkpoints, "digits")


def proxy_exact_ci(exact: pd.DataFrame, n_boot: int = 2000, rng: int = 0) -> tuple[float, float, float]:
    """(proxy cut / exact cut, 95 % percentile interval) with the cuts' means taken over seeds and measured steps,
    resampling both (a two-level bootstrap as in :func:`repro.common.bootstrap_two_level`, but with one draw of
    steps shared by the three variants of a seed: they ran on identical batches at identical steps)."""
    seeds = list(exact[exact.variant == "short"].seed)
    tab = {v: exact[exact.variant == v].set_index("seed") for v in ("short", "proxy", "exact")}
    series = []
    for s in seeds:
        arrs = [np.asarray(tab[v].loc[s, "harm_late"], float) for v in ("short", "proxy", "exact")]
        m = min(len(a) for a in arrs)
        series.append(np.stack([a[:m] for a in arrs]))     # 3 × steps

    def ratio(cols):
        b, p, e = (np.mean(np.concatenate([c[k] for c in cols])) for k in range(3))
        return (b - p) / (b - e) if b - e > 0 else float("nan")

    est = ratio(series)
    if len(series) < 2:
        return est, -math.inf, math.inf
    g = np.random.default_rng(rng)
    boots = np.empty(n_boot)
    for i in range(n_boot):
        pick = g.integers(0, len(series), size=len(series))
        boots[i] = ratio([series[j][:, g.integers(0, series[j].shape[1], size=series[j].shape[1])] for j in pick])
    lo, hi = np.nanquantile(boots, [0.025, 0.975])
    return float(est), float(lo), float(hi)


def c3(exact: pd.DataFrame) -> dict:
    idx = exact[exact.variant == "short"].set_index("seed").frac_harmed
    base = idx.to_numpy(float)
    prox = exact[exact.variant == "proxy"].set_index("seed").frac_harmed.loc[idx.index].to_numpy(float)
    ex = exact[exact.variant == "exact"].set_index("seed").frac_harmed.loc[idx.index].to_numpy(float)
    cut_p, cut_e = float((base - prox).mean()), float((base - ex).mean())
    est, lo, hi = proxy_exact_ci(exact) if "harm_late" in exact else (cut_p / cut_e, -math.inf, math.inf)
    t = threshold_from_ci(est, lo, hi, T["C3_min_ratio"], ">=", n=len(base))
    per_seed_ratio = ((base - prox) / (base - ex)).tolist()
    reason = (f"the proxy lowers the harmed fraction by {cut_p:.3f}, the exact QP by {cut_e:.3f}: {est:.2f} of the "
              f"exact reduction (95 % CI [{lo:.2f}, {hi:.2f}] over {len(base)} seed(s) and their measured steps) "
              f"against the bar {T['C3_min_ratio']}")
    out = dict(**t.ledger_kwargs(), threshold=f"proxy cut / exact cut >= {T['C3_min_ratio']} (95 % CI)",
               numbers={"harmed SGDM / proxy / exact": [float(base.mean()), float(prox.mean()), float(ex.mean())],
                        **t.numbers("proxy/exact cut"), "per seed": per_seed_ratio},
               reason=reason, needs=("K1", "K5"))
    if not t.decided:
        out["inconclusive"] = t.reason + "; " + reason
    return out



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
