"""Chapter 10's claims and controls, and the functions that decide them from measured numbers.

Every function returns the keyword arguments of :meth:`repro.common.Ledger.control` (``holds``, ``threshold``,
``numbers``, ``reason``) or :meth:`~repro.common.Ledger.record` (also ``inconclusive`` and ``needs``). Reasons
are sentences computed from the numbers; thresholds are the card's (:data:`THRESHOLDS`), never tuned. All
quantities are fractions (AUC 0.80); the sentences say "points" for hundredths.

Rules.

* The card's seed rule ("true for the mean and in ≥ 4 of 5 seeds") plus the book's paired comparison
  (:func:`repro.common.compare_paired`, 95 % CI over seeds). A part "A ≥ B + m" *holds* when A − B ≥ m in
  ≥ ⌈0.8 n⌉ seeds and the paired CI lies above m; it *fails* when the seed count is missed; otherwise it is
  undecided (the count is met inside seed noise). A part "A ≥ B" or "A ≥ B − m" is a "no worse than" part:
  it holds when the count of seeds with A − B ≥ −m is met and the CI's lower end is above −m, fails when the
  count is missed or the CI lies wholly below −m, and is undecided otherwise. Where the card gives no margin
  for a "≥" (C1's ensemble, C6's FairFed) we use m = 0.5 point, fixed before any run of this chapter.
* A claim with several parts holds when all hold, fails when one fails, and is inconclusive otherwise.
  Fewer than 3 seeds decide no comparison.
* Controls (card, *Controls and risks*): K1 gates C1, C2, C4; K2 gates C1–C4; K3 (aggregation exercised) gates
  C3 (its mechanism number) and C4 (the aggregation ablation); K4 gates C6. The card's K3 has a third check — the
  β sweep spans heterogeneity — that concerns the sweep, not the aggregation; it is its own control K5, needed by
  C3 only (CONTRIBUTING: a control guards the claims that rest on it).
  "(CI)" in the card means: the mean difference meets the margin and its paired 95 % CI over seeds excludes 0.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from repro.common import compare_paired

THRESHOLDS = {
    "K1_worst": 0.75, "K1_gap": 0.04,
    "K2_overall": 0.85, "K2_group": 0.65,
    "K3_groups": 2, "K3_sites": 2, "K3_min_count": 10, "K3_tv_omega": 0.10, "K3_tv_hetero": 0.4,
    "K3_tv_iid": 0.1, "K3_beta_hetero": 0.1, "K3_beta_iid": 10.0,
    "K4_gap": 0.02, "K4_move": 0.05,
    "win_frac": 0.8, "min_seeds": 3,
    "C1_res_gain": 0.02, "C1_ens_margin": 0.005, "C1_auc_tol": 0.01,
    "C2_gain": 0.03,
    "C3_harm": 0.005,
    "C4_drop": 0.01,
    "C5a_tol": 1e-9, "C5a_min_gap": 0.01, "C5b_ratio": 0.5,
    "C6_tol": 0.02, "C6_fairfed_margin": 0.005,
}
T = THRESHOLDS

CLAIMS = {
    "C1": "Fairness gain without accuracy loss: Fair-FedMOE's RES-AUC >= one-shot FedAvg's + 2 points and >= the "
          "one-shot ensemble's (no worse by more than 0.5 point); overall AUC >= one-shot FedAvg's - 1 point "
          "(mean and >= 4 of 5 seeds, paired 95 % CI).",
    "C2": "Worst group: Fair-FedMOE's worst-group AUC >= one-shot FedAvg's + 3 points.",
    "C3": "Heterogeneity: the RES-AUC gain over one-shot FedAvg is larger at beta = 0.1 than at beta = 10, and at "
          "beta = 10 it is >= -0.5 point (no harm).",
    "C4": "Both components matter: removing expert routing (one shared head; adapter by TIES, head by counts) and "
          "removing prototype-guided aggregation (experts and adapter averaged by counts) each lower RES-AUC by "
          ">= 1 point versus the full method.",
    "C5a": "RES-AUC under group duplication: duplicating every test sample with a new sub-group label leaves AUC "
           "and RES-AUC unchanged (|diff| < 1e-9) while ES-AUC decreases (some group gap >= 0.01).",
    "C5b": "RES-AUC as groups increase: with binormal scores, equal group sizes and group AUCs evenly spaced in "
           "[0.75, 0.90] for G in {2, 4, 8}, the coefficient of variation of RES-AUC across G is <= half that of "
           "ES-AUC.",
    "C6": "One round vs many: Fair-FedMOE (1 round) reaches RES-AUC within 2 points of 20-round FedAvg and >= "
          "FairFed's (20 rounds; no worse by more than 0.5 point), at 1/20 of the communication.",
}

CONTROLS = {
    "K1": "Room to improve: the centralized known-group MoE reaches worst-group AUC >= 0.75, and its RES-AUC is "
          ">= one-shot FedAvg's + 4 points with the paired 95 % CI of the difference excluding 0 (default beta).",
    "K2": "Routing is exercised: after aggregation, argmax_g cos(h, p_g) names the true group of >= 85 % of test "
          "samples and of >= 65 % in every group (means over seeds, default beta).",
    "K3": "Aggregation is exercised, per beta: >= 2 groups have >= 2 sites with n_g^k >= 10 (every seed), and the "
          "mean TV(omega_g, count weights) is >= 0.10.",
    "K4": "The iterative baselines train: FedAvg-20's RES-AUC is >= one-shot FedAvg's + 2 points with the paired "
          "95 % CI excluding 0; FairFed's site weights move >= 0.05 from n_k/n (largest |w_k - n_k/n| after the "
          "last round, mean over seeds).",
    "K5": "The beta sweep spans heterogeneity (the third check of the card's K3): the drawn site group mixes have "
          "mean TV to pi >= 0.4 at beta = 0.1 and <= 0.1 at beta = 10.",
}


# ----------------------------------------------------------------------------- helpers

def _pts(x: float) -> str:
    return f"{100 * x:+.2f}"


def _need(n: int) -> int:
    return math.ceil(T["win_frac"] * n - 1e-9)


def _few(n: int) -> str | None:
    return (f"only {n} seed(s): a paired comparison over fewer than {T['min_seeds']} seeds decides nothing "
            "(the full profile runs 5)") if n < T["min_seeds"] else None


def _mean_ci_gap(a, b) -> tuple[float, float, float, int]:
    c = compare_paired(np.asarray(a, float), np.asarray(b, float))
    return c.mean_diff, c.ci_lo, c.ci_hi, c.n


def part_better(a: Sequence[float], b: Sequence[float], margin: float, what: str) -> tuple[str, str, dict]:
    """"A ≥ B + margin": (state, sentence, numbers); state in holds / fails / undecided."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    d = a - b
    n, need = d.size, _need(d.size)
    wins = int((d >= margin - 1e-12).sum())
    cmp = compare_paired(a, b, margin=margin)
    state = "fails" if wins < need else "holds" if cmp.better else "undecided"
    sent = (f"{what}: {_pts(cmp.mean_diff)} points, 95 % CI [{_pts(cmp.ci_lo)}, {_pts(cmp.ci_hi)}], "
            f">= {100 * margin:.1f} points in {wins} of {n} seeds (needs {need})")
    if state == "undecided":
        sent += "; the CI does not clear the margin"
    return state, sent, {f"{what} mean diff": cmp.mean_diff, f"{what} diff ci95": [cmp.ci_lo, cmp.ci_hi],
                         f"{what} seeds meeting": f"{wins} of {n}"}


def part_no_worse(a: Sequence[float], b: Sequence[float], margin: float, what: str) -> tuple[str, str, dict]:
    """"A ≥ B − margin" (no worse than): (state, sentence, numbers)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    d = a - b
    n, need = d.size, _need(d.size)
    wins = int((d >= -margin - 1e-12).sum())
    cmp = compare_paired(a, b)
    if wins < need or cmp.ci_hi < -margin:
        state = "fails"
    elif cmp.no_worse_than(margin):
        state = "holds"
    else:
        state = "undecided"
    sent = (f"{what}: {_pts(cmp.mean_diff)} points, 95 % CI [{_pts(cmp.ci_lo)}, {_pts(cmp.ci_hi)}] against the "
            f"margin of -{100 * margin:.1f}; >= -{100 * margin:.1f} points in {wins} of {n} seeds (needs {need})")
    if state == "undecided":
        sent += "; the CI straddles the margin"
    return state, sent, {f"{what} mean diff": cmp.mean_diff, f"{what} diff ci95": [cmp.ci_lo, cmp.ci_hi],
                         f"{what} seeds meeting": f"{wins} of {n}"}


def _combine(parts: list[tuple[str, str, dict]], n: int, threshold: str, needs: tuple[str, ...],
             extra: dict | None = None, inconclusive: str | None = None) -> dict:
    states = [p[0] for p in parts]
    numbers = {**(extra or {})}
    for p in parts:
        numbers.update(p[2])
    reason = "; ".join(p[1] for p in parts)
    inc = inconclusive or _few(n)
    if not inc and "fails" not in states and "undecided" in states:
        inc = "undecided within seed noise: " + reason
    holds = all(s == "holds" for s in states)
    return dict(holds=holds, threshold=threshold, numbers=numbers, reason=reason, inconclusive=inc, needs=needs)


# ----------------------------------------------------------------------------- controls

def k1(central_worst: Sequence[float], central_res: Sequence[float], fedavg_res: Sequence[float]) -> dict:
    w = float(np.mean(central_worst))
    m, lo, hi, n = _mean_ci_gap(central_res, fedavg_res)
    checks = {
        f"the centralized known-group MoE's worst-group AUC is {w:.3f} (< {T['K1_worst']})": w >= T["K1_worst"],
        f"its RES-AUC exceeds one-shot FedAvg's by {_pts(m)} points (< {100 * T['K1_gap']:.0f})": m >= T["K1_gap"],
        f"the paired 95 % CI of that gap, [{_pts(lo)}, {_pts(hi)}] points over {n} seed(s), does not exclude 0":
            lo > 0,
    }
    return dict(holds=all(checks.values()),
                threshold=f"worst-group AUC >= {T['K1_worst']}; RES gap >= {100 * T['K1_gap']:.0f} points, CI > 0",
                numbers={"central known-group worst AUC": w, "RES gap central - FedAvg": m, "gap ci95": [lo, hi],
                         "seeds": n},
                reason="; ".join(k for k, ok in checks.items() if not ok))


def k2(route_acc: Sequence[float], route_acc_group: np.ndarray) -> dict:
    overall = float(np.mean(route_acc))
    per_group = np.asarray(route_acc_group, float).mean(0)
    worst_g = int(per_group.argmin())
    checks = {f"the aggregated router names the true group of {100 * overall:.1f} % of test samples "
              f"(< {100 * T['K2_overall']:.0f} %)": overall >= T["K2_overall"],
              f"group {worst_g} is routed right for only {100 * per_group[worst_g]:.1f} % "
              f"(< {100 * T['K2_group']:.0f} %)": per_group[worst_g] >= T["K2_group"]}
    return dict(holds=all(checks.values()),
                threshold=f"routing accuracy >= {100 * T['K2_overall']:.0f} % overall, >= "
                          f"{100 * T['K2_group']:.0f} % in every group (means over seeds)",
                numbers={"routing accuracy": overall, "per group": per_group.tolist(),
                         "lowest seed": float(np.min(route_acc))},
                reason="; ".join(k for k, ok in checks.items() if not ok))


def sites_per_group(counts: np.ndarray, min_count: int = T["K3_min_count"]) -> np.ndarray:
    """How many sites have >= min_count training samples of each group, [G]."""
    return (np.asarray(counts) >= min_count).sum(0)


def k3(per_beta: dict[float, dict], outlier: dict | None = None) -> dict:
    """``per_beta[β]`` holds ``counts`` (list over seeds of [K, G]) and ``tv_omega`` (list of [G]). ``outlier``:
    the planted site's ω share / count share (reported, not a condition)."""
    checks, numbers = {}, {}
    for beta, d in sorted(per_beta.items()):
        groups_ok = [int((sites_per_group(c) >= T["K3_sites"]).sum()) for c in d["counts"]]
        tv = float(np.mean([np.mean(t) for t in d["tv_omega"]]))
        numbers[f"β={beta:g}: groups with >=2 sites (min over seeds)"] = min(groups_ok)
        numbers[f"β={beta:g}: TV(ω, counts)"] = tv
        checks[f"at β = {beta:g} a seed has only {min(groups_ok)} group(s) with >= {T['K3_sites']} sites of "
               f">= {T['K3_min_count']} samples"] = min(groups_ok) >= T["K3_groups"]
        checks[f"at β = {beta:g} the mean TV(ω, count weights) is {tv:.3f} (< {T['K3_tv_omega']})"] = \
            tv >= T["K3_tv_omega"]
    if outlier:
        numbers.update(outlier)
    return dict(holds=all(checks.values()),
                threshold=f"per β: >= {T['K3_groups']} groups with >= {T['K3_sites']} sites of n >= "
                          f"{T['K3_min_count']}; TV(ω, counts) >= {T['K3_tv_omega']}",
                numbers=numbers, reason="; ".join(k for k, ok in checks.items() if not ok))


def k5(mix_tv: dict[float, Sequence[float]], expected: dict[float, float] | None = None) -> dict:
    """``mix_tv[β]``: per-seed mean TV between the drawn site mixes and π; ``expected``: the generator's expected
    value at each β (reported)."""
    checks, numbers = {}, {}
    lo_b, hi_b = T["K3_beta_hetero"], T["K3_beta_iid"]
    for beta, v in sorted(mix_tv.items()):
        numbers[f"β={beta:g}: TV(mix, π)"] = float(np.mean(v))
        if expected and beta in expected:
            numbers[f"β={beta:g}: generator's expected TV"] = expected[beta]
    lo = [v for b, v in mix_tv.items() if abs(b - lo_b) < 1e-12]
    hi = [v for b, v in mix_tv.items() if abs(b - hi_b) < 1e-12]
    if not lo or not hi:
        checks[f"the β sweep {sorted(mix_tv)} lacks β = {lo_b:g} or β = {hi_b:g}"] = False
    else:
        m_lo, m_hi = float(np.mean(lo[0])), float(np.mean(hi[0]))
        checks[f"at β = {lo_b:g} the site mixes are only {m_lo:.3f} in TV from π (< {T['K3_tv_hetero']})"] = \
            m_lo >= T["K3_tv_hetero"]
        checks[f"at β = {hi_b:g} the site mixes are {m_hi:.3f} in TV from π (> {T['K3_tv_iid']})"] = \
            m_hi <= T["K3_tv_iid"]
    return dict(holds=all(checks.values()),
                threshold=f"TV(mix, π) >= {T['K3_tv_hetero']} at β = {lo_b:g} and <= {T['K3_tv_iid']} at β = {hi_b:g}",
                numbers=numbers, reason="; ".join(k for k, ok in checks.items() if not ok))


def k4(fedavg20_res: Sequence[float], fedavg_res: Sequence[float], fairfed_move: Sequence[float]) -> dict:
    m, lo, hi, n = _mean_ci_gap(fedavg20_res, fedavg_res)
    move = float(np.mean(fairfed_move))
    checks = {f"FedAvg-20's RES-AUC exceeds one-shot FedAvg's by {_pts(m)} points (< {100 * T['K4_gap']:.0f})":
              m >= T["K4_gap"],
              f"the paired 95 % CI of that gap, [{_pts(lo)}, {_pts(hi)}] points over {n} seed(s), does not "
              f"exclude 0": lo > 0,
              f"FairFed's weights move only {move:.3f} from n_k/n (< {T['K4_move']})": move >= T["K4_move"]}
    return dict(holds=all(checks.values()),
                threshold=f"RES gap >= {100 * T['K4_gap']:.0f} points with CI > 0; FairFed weight move >= "
                          f"{T['K4_move']}",
                numbers={"RES gap FedAvg-20 - FedAvg": m, "gap ci95": [lo, hi], "FairFed weight move": move,
                         "seeds": n},
                reason="; ".join(k for k, ok in checks.items() if not ok))


# ----------------------------------------------------------------------------- claims

def c1(res_full, res_fedavg, res_ens, auc_full, auc_fedavg) -> dict:
    parts = [part_better(res_full, res_fedavg, T["C1_res_gain"], "RES-AUC Fair-FedMOE - FedAvg"),
             part_no_worse(res_full, res_ens, T["C1_ens_margin"], "RES-AUC Fair-FedMOE - ensemble"),
             part_no_worse(auc_full, auc_fedavg, T["C1_auc_tol"], "AUC Fair-FedMOE - FedAvg")]
    extra = {"RES Fair-FedMOE": float(np.mean(res_full)), "RES FedAvg": float(np.mean(res_fedavg)),
             "RES ensemble": float(np.mean(res_ens)), "AUC Fair-FedMOE": float(np.mean(auc_full)),
             "AUC FedAvg": float(np.mean(auc_fedavg))}
    return _combine(parts, len(res_full), "RES >= FedAvg + 2 pts (CI > 2); RES >= ensemble - 0.5 pt; "
                    "AUC >= FedAvg - 1 pt; each in >= 4 of 5 seeds", ("K1", "K2"), extra)


def c2(worst_full, worst_fedavg) -> dict:
    parts = [part_better(worst_full, worst_fedavg, T["C2_gain"], "worst-group AUC Fair-FedMOE - FedAvg")]
    extra = {"worst AUC Fair-FedMOE": float(np.mean(worst_full)), "worst AUC FedAvg": float(np.mean(worst_fedavg))}
    return _combine(parts, len(worst_full), "worst-group AUC >= FedAvg + 3 pts in >= 4 of 5 seeds, CI > 3 pts",
                    ("K1", "K2"), extra)


def c3(gain: dict[float, Sequence[float]], res_full_iid=None, res_fedavg_iid=None,
       mechanism: dict | None = None) -> dict:
    """``gain[β]``: per-seed RES-AUC gain of Fair-FedMOE over one-shot FedAvg; ``mechanism``: numbers shown."""
    lo_b, hi_b = T["K3_beta_hetero"], T["K3_beta_iid"]
    extra = {f"gain β={b:g}": float(np.mean(g)) for b, g in sorted(gain.items())}
    extra.update(mechanism or {})
    have = [b for b in (lo_b, hi_b) if any(abs(b - x) < 1e-12 for x in gain)]
    if len(have) < 2:
        return dict(holds=None, threshold="", numbers=extra, needs=("K2", "K3", "K5"),
                    inconclusive=f"the β sweep {sorted(gain)} lacks β = {lo_b:g} or β = {hi_b:g}")
    g_lo = next(v for b, v in gain.items() if abs(b - lo_b) < 1e-12)
    g_hi = next(v for b, v in gain.items() if abs(b - hi_b) < 1e-12)
    parts = [part_better(g_lo, g_hi, 0.0, f"gain at β={lo_b:g} - gain at β={hi_b:g}"),
             part_no_worse(res_full_iid, res_fedavg_iid, T["C3_harm"], f"RES-AUC gain at β={hi_b:g}")]
    return _combine(parts, len(g_lo), "gain(β=0.1) > gain(β=10) (CI > 0, >= 4 of 5 seeds); gain(β=10) >= -0.5 pt",
                    ("K2", "K3", "K5"), extra)


def c4(res_full, res_no_routing, res_counts, extra: dict | None = None) -> dict:
    parts = [part_better(res_full, res_no_routing, T["C4_drop"], "RES-AUC full - no routing"),
             part_better(res_full, res_counts, T["C4_drop"], "RES-AUC full - aggregation by counts")]
    return _combine(parts, len(res_full), "each ablation lowers RES-AUC by >= 1 pt in >= 4 of 5 seeds, CI > 1 pt",
                    ("K1", "K2", "K3"), extra)


def c5a(before: Sequence[dict], after: Sequence[dict]) -> dict:
    """``before``/``after``: per-seed metrics dicts (auc, res_auc, es_auc, group_auc) of the original and
    duplicated test sets."""
    d_auc = max(abs(a["auc"] - b["auc"]) for a, b in zip(after, before))
    d_res = max(abs(a["res_auc"] - b["res_auc"]) for a, b in zip(after, before))
    d_es = [a["es_auc"] - b["es_auc"] for a, b in zip(after, before)]
    gap = min(max(abs(b["auc"] - g) for g in b["group_auc"]) for b in before)
    numbers = {"max |ΔAUC|": d_auc, "max |ΔRES-AUC|": d_res, "ΔES-AUC (max over seeds)": max(d_es),
               "smallest largest group gap": gap}
    inc = (f"the largest group gap is only {gap:.4f} (< {T['C5a_min_gap']}): ES-AUC has nothing to lose"
           if gap < T["C5a_min_gap"] else None)
    holds = d_auc < T["C5a_tol"] and d_res < T["C5a_tol"] and max(d_es) < 0
    reason = (f"duplicating every group changes AUC by at most {d_auc:.1e} and RES-AUC by at most {d_res:.1e}, "
              f"while ES-AUC changes by {max(d_es):+.4f} at most (largest group gap >= {gap:.3f} in every seed)")
    return dict(holds=holds, threshold=f"|ΔAUC|, |ΔRES| < {T['C5a_tol']:g}; ΔES < 0; a group gap >= "
                f"{T['C5a_min_gap']}", numbers=numbers, reason=reason, inconclusive=inc)


def cv(x: Sequence[float]) -> float:
    x = np.asarray(x, float)
    return float(x.std() / abs(x.mean()))


def c5b(groups: Sequence[int], res: Sequence[float], es: Sequence[float]) -> dict:
    numbers = {"G": list(groups), "RES-AUC": list(map(float, res)), "ES-AUC": list(map(float, es))}
    if len(groups) < 2:
        return dict(holds=None, threshold="", numbers=numbers,
                    inconclusive=f"one group count ({list(groups)}): no variation across G to compare")
    cr, ce = cv(res), cv(es)
    numbers.update({"CV RES-AUC": cr, "CV ES-AUC": ce, "ratio": cr / ce if ce > 0 else float("nan")})
    holds = cr <= T["C5b_ratio"] * ce
    return dict(holds=holds, threshold=f"CV(RES-AUC) <= {T['C5b_ratio']} × CV(ES-AUC) across G",
                numbers=numbers,
                reason=f"across G = {list(groups)} the coefficient of variation of RES-AUC is {cr:.4f} and of "
                       f"ES-AUC {ce:.4f} (ratio {cr / ce if ce > 0 else float('nan'):.3f}, needs <= "
                       f"{T['C5b_ratio']})")


def c6(res_full, res_fedavg20, res_fairfed20, rounds: int) -> dict:
    parts = [part_no_worse(res_full, res_fedavg20, T["C6_tol"], "RES-AUC Fair-FedMOE - FedAvg-20"),
             part_no_worse(res_full, res_fairfed20, T["C6_fairfed_margin"], "RES-AUC Fair-FedMOE - FairFed-20")]
    extra = {"RES Fair-FedMOE": float(np.mean(res_full)), "RES FedAvg-20": float(np.mean(res_fedavg20)),
             "RES FairFed-20": float(np.mean(res_fairfed20)), "communication ratio": f"1/{rounds}"}
    return _combine(parts, len(res_full), "RES >= FedAvg-20 - 2 pts and >= FairFed-20 - 0.5 pt, each in >= 4 of 5 "
                    "seeds with the CI's lower end above the margin", ("K4",), extra)
