"""The card's claims as functions of measured numbers: each returns (holds, numbers, inconclusive reason or None).

Rules (from the card; thresholds in :data:`THRESHOLDS`, never loosened):

* C1-C4 are judged over the replicate seeds: a claim holds if its condition is true for the seed mean *and* in
  at least ceil(2/3 n_seeds) seeds (2 of 3). With fewer than 3 seeds the verdict is inconclusive.
* C5-C6 use seed 0 only and decide on 95% bootstrap intervals over samples: a condition holds if its whole
  interval satisfies the threshold, fails if the whole interval violates it, and is undecided otherwise.
* Every claim needs a base generator that makes the target (base target rate >= 0.85); otherwise inconclusive.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

THRESHOLDS = {
    "rate": 0.15, "base_rate": 0.85, "retain_drop": 0.05, "near_gain": 0.03, "norm_ratio": 10.0,
    "esd_ratio": 0.5, "rho": -0.9, "para_rate": 0.30, "para_drop": 0.05, "multi_rate": 0.2,
    "multi_growth": 0.05, "multi_lora_extra": 0.02, "backbone_rate": 0.2,
}
T = THRESHOLDS


def _votes(flags: list[bool]) -> tuple[int, int]:
    need = math.ceil(2 * len(flags) / 3)
    return int(sum(flags)), need


def _seed_rule(mean_ok: bool, flags: list[bool]) -> tuple[bool, dict]:
    n_ok, need = _votes(flags)
    return bool(mean_ok and n_ok >= need), {"seeds meeting it": f"{n_ok} of {len(flags)}"}


def _few_seeds(n: int) -> str | None:
    return (f"only {n} seed(s): the card's rule needs the condition in >= 2 of 3 seeds" if n < 3 else None)


def _base_gate(base_rates: list[float]) -> str | None:
    b = float(np.mean(base_rates))
    return (f"the base generator makes the target in only {b:.2f} of samples (< 0.85): nothing to erase"
            if b < T["base_rate"] else None)


def c1(m: list[dict]) -> tuple[bool, dict, str | None]:
    """``m``: per seed, metrics {'base': {...}, 'UnHype': {...}}."""
    tr = [s["UnHype"]["target_rate"] for s in m]
    br = [s["base"]["target_rate"] for s in m]
    drop = [s["base"]["retain_acc"] - s["UnHype"]["retain_acc"] for s in m]
    ok = [a <= T["rate"] and b >= T["base_rate"] and d <= T["retain_drop"] for a, b, d in zip(tr, br, drop)]
    mean_ok = np.mean(tr) <= T["rate"] and np.mean(br) >= T["base_rate"] and np.mean(drop) <= T["retain_drop"]
    holds, extra = _seed_rule(mean_ok, ok)
    nums = {"UnHype target rate": float(np.mean(tr)), "base target rate": float(np.mean(br)),
            "retain drop (points)": 100 * float(np.mean(drop)), "per-seed target rate": tr, **extra}
    return holds, nums, _base_gate(br) or _few_seeds(len(m))


def c2(m: list[dict], matched: list[bool]) -> tuple[bool, dict, str | None]:
    """UnHype vs LoRA-ESD on the 3 nearest digits; ``matched``: LoRA-ESD reached <= 0.15 at a checkpoint."""
    gain = [s["UnHype"]["retain_acc_near"] - s["LoRA-ESD"]["retain_acc_near"] for s in m]
    du = [s["UnHype"]["drift_near"] for s in m]
    dl = [s["LoRA-ESD"]["drift_near"] for s in m]
    both = [s["UnHype"]["target_rate"] <= T["rate"] and s["LoRA-ESD"]["target_rate"] <= T["rate"] for s in m]
    ok = [b and g >= T["near_gain"] and a < c for b, g, a, c in zip(both, gain, du, dl)]
    mean_ok = all(both) and np.mean(gain) >= T["near_gain"] and np.mean(du) < np.mean(dl)
    holds, extra = _seed_rule(mean_ok, ok)
    nums = {"retain acc near, UnHype": float(np.mean([s["UnHype"]["retain_acc_near"] for s in m])),
            "retain acc near, LoRA-ESD": float(np.mean([s["LoRA-ESD"]["retain_acc_near"] for s in m])),
            "gain (points)": 100 * float(np.mean(gain)), "drift near, UnHype": float(np.mean(du)),
            "drift near, LoRA-ESD": float(np.mean(dl)),
            "target rates (UnHype, LoRA-ESD)": [float(np.mean([s[k]["target_rate"] for s in m]))
                                                for k in ("UnHype", "LoRA-ESD")],
            "LoRA-ESD matched in": f"{sum(matched)} of {len(matched)} seeds", **extra}
    return holds, nums, _base_gate([s["base"]["target_rate"] for s in m]) or _few_seeds(len(m))


def c3(ratios: list[float], esd_curves: list[list[float]], base_rates: list[float]) -> tuple[bool, dict, str | None]:
    """(a) norm ratio target/retain >= 10; (b) L(K) <= 0.5 L(0); (c) Spearman rho(k, L) <= -0.9."""
    curves = np.asarray(esd_curves, float)
    red = curves[:, -1] / curves[:, 0]
    rho = [float(stats.spearmanr(np.arange(curves.shape[1]), c).statistic) for c in curves]
    a = [r >= T["norm_ratio"] for r in ratios]
    b = [x <= T["esd_ratio"] for x in red]
    c = [x <= T["rho"] for x in rho]
    mean_curve = curves.mean(0)
    rho_mean = float(stats.spearmanr(np.arange(len(mean_curve)), mean_curve).statistic)
    pa, ea = _seed_rule(np.mean(ratios) >= T["norm_ratio"], a)
    pb, eb = _seed_rule(mean_curve[-1] / mean_curve[0] <= T["esd_ratio"], b)
    pc, ec = _seed_rule(rho_mean <= T["rho"], c)
    nums = {"(a) norm ratio": float(np.mean(ratios)), "(a) holds": pa,
            "(b) L(K)/L(0)": float(mean_curve[-1] / mean_curve[0]), "(b) holds": pb,
            "(c) Spearman rho": rho_mean, "(c) holds": pc, "per-seed rho": rho}
    return bool(pa and pb and pc), nums, _base_gate(base_rates) or _few_seeds(len(ratios))


def c4(m: list[dict]) -> tuple[bool, dict, str | None]:
    pu = [s["UnHype"]["para_target_rate"] for s in m]
    pc = [s["UCE"]["para_target_rate"] for s in m]
    drop = [s["base"]["para_retain_acc"] - s["UnHype"]["para_retain_acc"] for s in m]
    ok = [u <= T["para_rate"] and u < c and d <= T["para_drop"] for u, c, d in zip(pu, pc, drop)]
    mean_ok = np.mean(pu) <= T["para_rate"] and np.mean(pu) < np.mean(pc) and np.mean(drop) <= T["para_drop"]
    holds, extra = _seed_rule(mean_ok, ok)
    nums = {"UnHype paraphrase target rate": float(np.mean(pu)), "UCE paraphrase target rate": float(np.mean(pc)),
            "base paraphrase target rate": float(np.mean([s["base"]["para_target_rate"] for s in m])),
            "paraphrase retain drop (points)": 100 * float(np.mean(drop)), **extra}
    return holds, nums, _base_gate([s["base"]["target_rate"] for s in m]) or _few_seeds(len(m))


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


def _combine(parts: list[str]) -> tuple[bool | None, str | None]:
    if "fails" in parts:
        return False, None
    if all(p == "holds" for p in parts):
        return True, None
    return None, "a 95% bootstrap interval straddles its threshold"


def c5(results: list, ms: tuple[int, ...]) -> tuple[bool | None, dict, str | None]:
    """``results``: :class:`~repro.unhype.experiments.MultiResult` per m (seed 0)."""
    by_m = {r.m: r for r in results}
    nums: dict = {}
    parts = []
    worst = {}
    for r in results:
        for d, hits in r.unhype_hits.items():
            lo, hi = _boot(np.mean, [hits])
            parts.append(_decide(lo, hi, T["multi_rate"], below=True))
        worst[r.m] = max(r.unhype_rates.values())
    nums["max UnHype target rate per m"] = {m: worst[m] for m in sorted(worst)}
    nums["drop UnHype per m (points)"] = {r.m: 100 * (r.retain["base"] - r.retain["UnHype"]) for r in results}
    nums["drop one LoRA per m (points)"] = {r.m: 100 * (r.retain["base"] - r.retain["LoRA-ESD (one on all)"])
                                            for r in results}
    nums["drop summed LoRAs per m (points)"] = {r.m: 100 * (r.retain["base"] - r.retain["LoRA-ESD (summed)"])
                                                for r in results}
    # the cost comparison (CPU seconds) is reported beside the ledger, not in it: timings are not reproducible
    if 1 not in by_m or 5 not in by_m:
        return None, nums, f"the m grid {list(ms)} lacks m = 1 or m = 5"
    r1, r5 = by_m[1], by_m[5]
    drop = lambda base, meth: float(np.mean(base) - np.mean(meth))  # noqa: E731
    g_lo, g_hi = _boot(lambda b1, u1, b5, u5: drop(b5, u5) - drop(b1, u1),
                       [r1.retain_hits["base"], r1.retain_hits["UnHype"], r5.retain_hits["base"], r5.retain_hits["UnHype"]])
    # paired at m = 5: same samples for UnHype and the LoRA
    idx = np.arange(len(r5.retain_hits["UnHype"]))
    e_lo, e_hi = _boot(lambda i: float(np.mean(r5.retain_hits["UnHype"][i]) - np.mean(r5.retain_hits["LoRA-ESD (one on all)"][i])),
                       [idx])
    parts += [_decide(g_lo, g_hi, T["multi_growth"], below=True), _decide(e_lo, e_hi, T["multi_lora_extra"], below=False)]
    nums["drop growth m=1->5, UnHype (points) CI"] = [100 * g_lo, 100 * g_hi]
    nums["extra drop one LoRA vs UnHype at m=5 (points) CI"] = [100 * e_lo, 100 * e_hi]
    holds, why = _combine(parts)
    return holds, nums, why


def c6(rows: dict[str, tuple[float, np.ndarray]]) -> tuple[bool | None, dict, str | None]:
    """``rows``: backbone -> (base target rate, UnHype hit indicators)."""
    nums, parts = {}, []
    for name, (base, hits) in rows.items():
        lo, hi = _boot(np.mean, [hits])
        nums[f"{name}: base rate"] = base
        nums[f"{name}: UnHype rate [CI]"] = [float(np.mean(hits)), lo, hi]
        parts.append(_decide(lo, hi, T["backbone_rate"], below=True))
    if len(rows) < 2:
        return None, nums, "only one backbone was run in this profile (run_ddpm is off)"
    gate = _base_gate([min(b for b, _ in rows.values())])
    holds, why = _combine(parts)
    return holds, nums, gate or why


THRESHOLD_TEXT = {
    "C1": "UnHype rate <= 0.15, base rate >= 0.85, retain drop <= 5 points; mean and >= 2 of 3 seeds",
    "C2": "both rates <= 0.15; near-digit retain acc gain >= 3 points and lower near drift; mean and >= 2 of 3 seeds",
    "C3": "(a) ratio >= 10; (b) L(K)/L(0) <= 0.5; (c) Spearman rho <= -0.9; mean and >= 2 of 3 seeds",
    "C4": "paraphrase rate <= 0.30 and < UCE's; paraphrase retain drop <= 5 points; mean and >= 2 of 3 seeds",
    "C5": "every erased digit's rate <= 0.2 at every m; drop growth m=1->5 <= 5 points; one LoRA >= 2 points "
          "worse at m=5; on 95% bootstrap CIs",
    "C6": "UnHype rate <= 0.2 on both backbones, on 95% bootstrap CIs",
}


def explain(cid: str, holds: bool | None, nums: dict) -> str:
    """A sentence naming which measured sub-condition missed its threshold ('' when the claim holds)."""
    if holds is None or holds:
        return ""
    n, bad = nums, []
    if cid == "C1":
        if n["UnHype target rate"] > T["rate"]:
            bad.append(f"UnHype still makes the target in {n['UnHype target rate']:.2f} of samples (> 0.15)")
        if n["retain drop (points)"] > 100 * T["retain_drop"]:
            bad.append(f"retain accuracy drops {n['retain drop (points)']:.1f} points (> 5)")
    elif cid == "C2":
        if n["gain (points)"] < 100 * T["near_gain"]:
            bad.append(f"the near-digit retain-accuracy gain over LoRA-ESD is {n['gain (points)']:.1f} points (< 3)")
        if n["drift near, UnHype"] >= n["drift near, LoRA-ESD"]:
            bad.append("UnHype's near-digit drift is not lower than LoRA-ESD's")
        if max(n["target rates (UnHype, LoRA-ESD)"]) > T["rate"]:
            bad.append("erasure was not matched (a target rate above 0.15)")
    elif cid == "C3":
        if not n["(a) holds"]:
            bad.append(f"(a) the adapter-norm ratio is {n['(a) norm ratio']:.1f} (< 10)")
        if not n["(b) holds"]:
            bad.append(f"(b) L(K)/L(0) = {n['(b) L(K)/L(0)']:.2f} (> 0.5)")
        if not n["(c) holds"]:
            bad.append(f"(c) the ESD loss is not monotone in k (Spearman rho {n['(c) Spearman rho']:.2f} > -0.9): "
                       "it reaches its minimum before k = K and rises again, i.e. the update overshoots")
    elif cid == "C4":
        if n["UnHype paraphrase target rate"] > T["para_rate"]:
            bad.append(f"UnHype's paraphrase target rate is {n['UnHype paraphrase target rate']:.2f} (> 0.30)")
        if n["UnHype paraphrase target rate"] >= n["UCE paraphrase target rate"]:
            bad.append(f"it is not below UCE's ({n['UCE paraphrase target rate']:.2f})")
        if n["paraphrase retain drop (points)"] > 100 * T["para_drop"]:
            bad.append(f"paraphrase retain accuracy drops {n['paraphrase retain drop (points)']:.1f} points (> 5)")
    elif cid == "C5":
        w = n["max UnHype target rate per m"]
        if any(v > T["multi_rate"] for v in w.values()):
            bad.append(f"some erased digit keeps a target rate above 0.2 (max per m: "
                       + ", ".join(f"m={m}: {v:.2f}" for m, v in w.items()) + ")")
        ci = n.get("drop growth m=1->5, UnHype (points) CI")
        if ci and ci[0] > 100 * T["multi_growth"]:
            bad.append(f"UnHype's retain drop grows by more than 5 points from m=1 to m=5 (CI {ci[0]:.1f}..{ci[1]:.1f})")
        ce = n.get("extra drop one LoRA vs UnHype at m=5 (points) CI")
        if ce and ce[1] < 100 * T["multi_lora_extra"]:
            bad.append(f"one static LoRA does not lose >= 2 points more than UnHype at m=5 (CI {ce[0]:.1f}..{ce[1]:.1f})")
    elif cid == "C6":
        for k, v in n.items():
            if k.endswith("UnHype rate [CI]") and v[1] > T["backbone_rate"]:
                bad.append(f"{k.split(':')[0]}: UnHype rate {v[0]:.2f}, CI above 0.2")
    return "; ".join(bad) + "." if bad else "a sub-condition missed its threshold (see numbers)."
