"""Chapter 04's claims (the card's C1–C7, with C2 and C4 split into their lettered parts), its controls, and the
functions that decide them from measured numbers.

Every ``claim_*`` function returns the keyword arguments of :meth:`repro.common.Ledger.record` (``holds``,
``threshold``, ``numbers``, ``reason``, ``inconclusive``); every ``control_*`` those of
:meth:`repro.common.Ledger.control`. Their inputs are the plain dictionaries of numbers that
:mod:`repro.fmss.experiments` measures (``summarise_c*`` for claims, ``numbers_k*`` for controls), so each
verdict can be tested on synthetic numbers. Reasons are computed from the numbers; thresholds are the card's.

Which control guards which claim is :data:`NEEDS`: a claim whose control failed is recorded ``inconclusive``
by the ledger, whatever its own condition says.
"""
from __future__ import annotations

import math
from typing import Any

__all__ = ["CLAIMS", "CONTROLS", "NEEDS", "CARD_MDPS", "control_k1", "control_k2", "control_k3", "control_k4",
           "control_k5", "control_k6", "control_k7", "control_k8", "control_k9", "control_k10", "control_k11",
           "claim_c1", "claim_c2a", "claim_c2b", "claim_c3", "claim_c4a", "claim_c4b", "claim_c4c", "claim_c5",
           "claim_c6", "claim_c7"]

CLAIMS: dict[str, str] = {
    "C1": ("Surrogate is a valid, tight-when-reversible bound: for 200 random feasible policies on 10 random MDPs, "
           "σ(π) ≥ SLEM(P_π) − 1e-8 always, and |σ − SLEM| ≤ 1e-6 on μ-reversible chains (P = D⁻¹W, W symmetric "
           "non-negative). Must hold."),
    "C2a": ("Faster mixing than the LP vertex: on 20 random MDPs (S=12, A=3), FMSS's true SLEM is below that of the "
            "LP-vertex policy (what a generic LP solver returns for the steady-state feasibility LP) on ≥ 18/20, "
            "with median relative reduction ≥ 10%. Expected."),
    "C2b": ("Faster mixing than the max-entropy policy: on the same 20 MDPs, FMSS's true SLEM is below that of the "
            "max-entropy feasible policy on ≥ 10/20. May not hold."),
    "C3": ("Approximation quality vs the non-convex optimum: median over the 20 MDPs of SLEM(FMSS) − SLEM(best found "
           "by the multistart local search, which starts from FMSS) ≤ 0.05. May not hold; the search result is never "
           "called the global optimum."),
    "C4a": ("σ certifies χ² decay: χ²(e_sᵀP_π^k‖μ) ≤ σ^{2k} χ²(e_s‖μ) for every policy evaluated, every start state "
            "and k ≤ 30, up to 1e-12. Must hold."),
    "C4b": ("σ buys finite-time mixing: worst-start TV ‖e_sᵀP_π^k − μ‖_TV at k=10 is smaller for FMSS than for the "
            "LP-vertex policy on ≥ 16/20 MDPs. Expected."),
    "C4c": ("TV decays at the SLEM: for every policy the slope of log worst-start TV over k ∈ [10, 30] (points with "
            "TV ≥ 1e-13) gives a rate within 0.05 of its SLEM. Must hold up to near-defective eigenvalues "
            "(exceptions listed)."),
    "C5": ("Tractability: Clarabel solves S ∈ {10,20,30,40} (A=3) in < 20 s at S=40, SCS (eps 1e-6) solves "
           "S ∈ {10,20,40,60} in < 20 s at S=60, with SCS's objective and stationarity error vs Clarabel and "
           "log–log slopes reported. Expected."),
    "C6": ("FMSS-SV finite-sample: for n ∈ {30,…,10000} samples per (s,a), 5 seeds, min-slack mode, ‖μ_{π̂_n} − μ‖₁ "
           "and |σ̂_n − σ*| decrease with n, the first with log–log slope in [−0.75, −0.3] fitted on n ≥ 100 "
           "(theory ≈ −½); in the theory-slack variant (c_ε = 1) the true optimum satisfies its constraint in ≥ 95% "
           "of draws, and its stationarity error is expected flat on this grid. Expected. (Decided in the card's "
           "interior-target regime and in an added boundary-target regime where min-slack's phase 1 is exercised, "
           "ε̂ > 0; each must meet every condition.)"),
    "C7": ("Feasibility detection: for an unachievable μ (μ(s) > max_{s',a} P(s|s',a) for some s) the program reports "
           "infeasible; for feasible μ it never does. Must hold."),
}

CONTROLS: dict[str, str] = {
    "K1": ("The FMSS solutions of the comparison are verified: every solve has status optimal, the returned policy's "
           "chain has μ stationary (‖μᵀP_π − μᵀ‖₁ ≤ 1e-8), cvxpy's optimal value equals numpy's σ of the returned "
           "policy (≤ 1e-6), and on every MDP FMSS's σ is the smallest among the feasible policies evaluated."),
    "K2": ("The convex program reproduces a closed form: on the free-move graph MDPs with uniform μ, FMSS equals "
           "cos(π/n) on paths, the FMMC SDP of Boyd–Diaconis–Xiao and its symmetric variant, and σ equals the SLEM "
           "of its (reversible) chain, all to 1e-5."),
    "K3": ("C1's test is exercised: the random feasible policies are μ-stationary (≤ 1e-9), built from ≥ 2 LP "
           "vertices per MDP, and non-reversible (median σ − SLEM ≥ 0.01, so the inequality is tested strictly); the "
           "reversible chains satisfy detailed balance (≤ 1e-12) and are ergodic (SLEM ≤ 1 − 1e-6)."),
    "K4": ("The direct SLEM search can resolve gaps at C3's scale: started away from the known optimum cos(π/n) on "
           "path MDPs (where every feasible chain is reversible), it ends within 0.01 of it on every path, from a "
           "start ≥ 0.02 away on at least one; its policies in the comparison are μ-stationary (≤ 1e-6) and never "
           "above their FMSS start."),
    "K5": ("There is room to optimise: the SLEMs of the feasible policies evaluated on an MDP (LP vertex, "
           "max-entropy, FMSS, search) span ≥ 0.05 on ≥ 90% of the MDPs."),
    "K6": ("C4(a)'s check can fail: run with the SLEM in place of σ (a rate the χ² bound does not promise), it "
           "reports a violation for ≥ 25% of the policies."),
    "K7": ("C4(b)'s comparison is above the numerical floor: the smallest worst-start TV at k of FMSS and the LP "
           "vertex is ≥ 100× their largest stationarity error."),
    "K8": ("C4(c)'s rate check is exercised: ≥ 90% of the policies have ≥ 5 TV points above 1e-13 in the fit window, "
           "and the check has power: the fitted rates miss σ (not the decay rate) by > 0.05 for ≥ 50% of them."),
    "K9": ("The timed solves are real solves: every C5 solve has status optimal, Clarabel's policies are μ-stationary "
           "to 1e-8, and SCS's are to 1e-4 with values within 1e-4 of Clarabel's where both run."),
    "K10": ("C6's estimation regime is exercised: the model error max ‖P̂ − P‖₁ falls with log–log slope in "
            "[−0.6, −0.4] (the n^{−½} law); in the boundary regime min-slack's phase 1 finds ε̂ > 0 in ≥ 50% of the "
            "draws at every n of the fit (where min-slack differs from plug-in); every σ* solve is optimal and every "
            "min-slack solve returns a policy."),
    "K11": ("C7's targets are certified without a solver: every achievable target has a witness occupation measure "
            "(residual ≤ 1e-9), and every unachievable one exceeds the inflow bound by ≥ 1e-3."),
}

NEEDS: dict[str, tuple[str, ...]] = {
    "C1": ("K3",), "C2a": ("K1", "K2", "K5"), "C2b": ("K1", "K2", "K5"), "C3": ("K1", "K2", "K4"),
    "C4a": ("K6",), "C4b": ("K1", "K7"), "C4c": ("K8",), "C5": ("K9",), "C6": ("K10",), "C7": ("K11",),
}

CARD_MDPS = 20           # C2–C4's counts are out of 20 MDPs
ME_ABOVE = "MDPs where max-entropy's σ is above FMSS's"
SEARCH_ABOVE = "MDPs where the search's σ is above FMSS's"
C4C_TOL = 0.05


def _g(x: Any, digits: int = 3) -> str:
    """A number for a reason: ``digits`` significant digits (scientific when small)."""
    if isinstance(x, (int,)) and not isinstance(x, bool):
        return str(x)
    try:
        x = float(x)
    except (TypeError, ValueError):
        return str(x)
    return "nan" if math.isnan(x) else f"{x:.{digits}g}"


def _control(checks: list[tuple[bool, str]], threshold: str, numbers: dict) -> dict:
    """A control's kwargs: it passes when every check passes; its reason lists the failed checks."""
    failed = [why for ok, why in checks if not ok]
    return dict(holds=not failed, threshold=threshold, numbers=numbers, reason="; ".join(failed))


# ---------------------------------------------------------------------------------------------- controls
def control_k1(n: dict, stat_tol: float = 1e-8, value_tol: float = 1e-6) -> dict:
    """K1 from :func:`repro.fmss.experiments.numbers_k1`."""
    solves, ok = n["FMSS solves"], n["solves with status optimal"]
    mdps, smallest = n["MDPs"], n["MDPs where FMSS has the smallest σ"]
    checks = [
        (ok == solves, f"only {ok}/{solves} FMSS solves reached status optimal"),
        (n["max ‖μᵀP_π − μᵀ‖₁"] <= stat_tol,
         f"a returned policy's chain misses μ by {_g(n['max ‖μᵀP_π − μᵀ‖₁'])} in ℓ₁ (> {stat_tol:g})"),
        (n["max |cvxpy value − σ(returned π)|"] <= value_tol,
         f"cvxpy's value and numpy's σ of the returned policy differ by {_g(n['max |cvxpy value − σ(returned π)|'])}"
         f" (> {value_tol:g})"),
        (smallest == mdps, f"another feasible policy has a smaller σ than FMSS on {mdps - smallest}/{mdps} MDPs "
                           f"(by up to {_g(n['max σ(FMSS) − min σ(others)'])}): the solver did not find the optimum"),
    ]
    return _control(checks, f"all optimal; stationarity ≤ {stat_tol:g}; |value − σ| ≤ {value_tol:g}; "
                            "smallest σ on every MDP", n)


def control_k2(n: dict, tol: float = 1e-5) -> dict:
    """K2 from :func:`repro.fmss.experiments.numbers_k2`."""
    checks = [(n[k] <= tol, f"{k} = {_g(n[k])} > {tol:g}") for k in
              ("max |FMSS − cos(π/n)| (paths)", "max |FMSS − FMMC SDP|", "max |FMSS − FMSS symmetric|",
               "max |σ − SLEM| of FMSS's chain")]
    return _control(checks, f"every difference ≤ {tol:g}", n)


def control_k3(n: dict) -> dict:
    """K3 from :func:`repro.fmss.experiments.numbers_k3`."""
    checks = [
        (n["max stationarity error (feasible)"] <= 1e-9,
         f"a 'feasible' policy misses μ by {_g(n['max stationarity error (feasible)'])} (> 1e-9), so σ ≥ SLEM need "
         "not hold for it"),
        (n["fewest LP vertices mixed on an MDP"] >= 2,
         f"only {n['fewest LP vertices mixed on an MDP']} LP vertex on some MDP: its 'random' policies are one point"),
        (n["median σ − SLEM (feasible)"] >= 0.01,
         f"median σ − SLEM of the feasible policies is {_g(n['median σ − SLEM (feasible)'])} (< 0.01): the chains are "
         "near-reversible and the inequality is barely tested"),
        (n["max reversibility defect (reversible)"] <= 1e-12,
         f"a 'reversible' chain breaks detailed balance by {_g(n['max reversibility defect (reversible)'])}"),
        (n["max SLEM (reversible)"] <= 1 - 1e-6,
         f"a reversible chain has SLEM {_g(n['max SLEM (reversible)'], 8)} (reducible): σ = SLEM = 1 tests nothing"),
    ]
    return _control(checks, "feasible: stationarity ≤ 1e-9, ≥ 2 vertices, median σ − SLEM ≥ 0.01; reversible: "
                            "defect ≤ 1e-12, SLEM ≤ 1 − 1e-6", n)


def control_k4(n: dict, resolve: float = 0.01, min_start_gap: float = 0.02) -> dict:
    """K4 from :func:`repro.fmss.experiments.numbers_k4`."""
    checks = [
        (n["max gap to cos(π/n) found"] <= resolve,
         f"on a path the search stops {_g(n['max gap to cos(π/n) found'])} above the known optimum (> {resolve:g}): "
         "it cannot resolve gaps at C3's scale"),
        (n["max gap to cos(π/n) at the start"] >= min_start_gap,
         f"the starts were already within {_g(n['max gap to cos(π/n) at the start'])} of the optimum (< "
         f"{min_start_gap:g}): the test shows nothing"),
        (n["max ‖μᵀP_π − μᵀ‖₁ of search policies"] <= 1e-6,
         f"a search policy misses μ by {_g(n['max ‖μᵀP_π − μᵀ‖₁ of search policies'])} (> 1e-6): it is not a "
         "steady-state controller"),
        (n["min SLEM(FMSS) − SLEM(search)"] >= -1e-9,
         f"the search ended {_g(-n['min SLEM(FMSS) − SLEM(search)'])} above its FMSS start"),
    ]
    # how many path searches stopped on their tolerance rather than on the round cap is reported beside the gap
    # (issue 40); the gap to the known optimum is what the control needs, and it is measured, not assumed
    return _control(checks, f"path gap found ≤ {resolve:g} (start gap ≥ {min_start_gap:g}); search policies "
                            "stationary ≤ 1e-6 and never above FMSS", n)


def control_k5(n: dict, spread: float = 0.05, frac: float = 0.9) -> dict:
    """K5 from :func:`repro.fmss.experiments.numbers_k5`."""
    mdps, wide = n["MDPs"], n[f"MDPs with SLEM range ≥ {spread:g}"]
    need = math.ceil(frac * mdps - 1e-12)
    return _control([(wide >= need, f"the feasible policies' SLEMs span ≥ {spread:g} on only {wide}/{mdps} MDPs "
                                    f"(median range {_g(n['median SLEM range'])}): little for a rate objective to win")],
                    f"SLEM range ≥ {spread:g} on ≥ {need}/{mdps} MDPs", n)


def control_k6(n: dict, frac: float = 0.25) -> dict:
    """K6 from :func:`repro.fmss.experiments.numbers_k6`."""
    f = n["fraction violating"]
    return _control([(f >= frac, f"with the SLEM in place of σ only {_g(f)} of the policies violate the χ² check "
                                 f"(< {frac:g}): the check could not tell a too-small certificate")],
                    f"fraction violating with SLEM ≥ {frac:g}", n)


def control_k7(n: dict, factor: float = 100.0) -> dict:
    """K7 from :func:`repro.fmss.experiments.numbers_k7`."""
    r = n["ratio"]
    return _control([(r >= factor, f"the smallest TV at k ({_g(n['min TV at k (FMSS, LP vertex)'])}) is only {_g(r)}× "
                                   "the stationarity error of the chains: the comparison reads solver tolerance")],
                    f"min TV at k ≥ {factor:g} × max stationarity error", n)


def control_k8(n: dict, min_points: int = 5, frac_points: float = 0.9, frac_power: float = 0.5) -> dict:
    """K8 from :func:`repro.fmss.experiments.numbers_k8`."""
    fp, fw = n[f"fraction with ≥ {min_points} fit points"], n[f"fraction with |rate − σ| > {C4C_TOL:g}"]
    checks = [(fp >= frac_points, f"only {_g(fp)} of the policies have ≥ {min_points} TV points above 1e-13 in the "
                                  "window: most rates would be 'too fast to fit'"),
              (fw >= frac_power, f"the fitted rates miss σ by > {C4C_TOL:g} for only {_g(fw)} of the policies: the "
                                 "check could not tell the SLEM from another rate")]
    return _control(checks, f"≥ {frac_points:g} with ≥ {min_points} points; |rate − σ| > {C4C_TOL:g} for "
                            f"≥ {frac_power:g}", n)


def control_k9(n: dict, cl_tol: float = 1e-8, scs_tol: float = 1e-4) -> dict:
    """K9 from :func:`repro.fmss.experiments.numbers_k9`."""
    solves, ok = n["solves"], n["solves with status optimal"]
    checks = [(ok == solves, f"only {ok}/{solves} timed solves reached status optimal"),
              (n["Clarabel max stationarity error"] <= cl_tol,
               f"a Clarabel policy misses μ by {_g(n['Clarabel max stationarity error'])} (> {cl_tol:g})")]
    if n["SCS solves"]:
        checks += [(n["SCS max stationarity error"] <= scs_tol,
                    f"an SCS policy misses μ by {_g(n['SCS max stationarity error'])} (> {scs_tol:g})"),
                   (not n["SCS max |value − Clarabel|"] > scs_tol,
                    f"SCS's value differs from Clarabel's by {_g(n['SCS max |value − Clarabel|'])} (> {scs_tol:g})")]
    return _control(checks, f"all optimal; Clarabel stationarity ≤ {cl_tol:g}; SCS stationarity and value gap "
                            f"≤ {scs_tol:g}", n)


def control_k10(n: dict, slope_range: tuple[float, float] = (-0.6, -0.4), frac: float = 0.5) -> dict:
    """K10 from :func:`repro.fmss.experiments.numbers_k10`."""
    lo, hi = slope_range
    sl, pos = n["model-error slope"], n["min over fitted n of boundary draws with ε̂ > 0"]
    checks = [
        (lo <= sl <= hi, f"the model error falls with slope {_g(sl)}, outside [{lo:g}, {hi:g}]: the sampler does not "
                         "produce the estimation error the claim is about"),
        (pos >= frac, f"in the boundary regime ε̂ > 0 in only {_g(pos)} of the draws at some n of the fit "
                      f"(< {frac:g}): min-slack is mostly plug-in there too"),
        (n["σ* solves optimal"] == n["σ* solves"], f"only {n['σ* solves optimal']}/{n['σ* solves']} σ* solves optimal"),
        (n["min-slack solves with a policy"] == n["min-slack solves"],
         f"only {n['min-slack solves with a policy']}/{n['min-slack solves']} min-slack solves returned a policy"),
    ]
    return _control(checks, f"model-error slope in [{lo:g}, {hi:g}]; boundary ε̂ > 0 in ≥ {frac:g} of draws at every "
                            "fitted n; all σ* optimal; every min-slack solve returns a policy", n)


def control_k11(n: dict, resid_tol: float = 1e-9, margin: float = 1e-3) -> dict:
    """K11 from :func:`repro.fmss.experiments.numbers_k11`."""
    checks = [(n["max witness residual"] <= resid_tol,
               f"a witness occupation measure misses its target by {_g(n['max witness residual'])} (> {resid_tol:g})"),
              (n["min inflow-bound violation"] >= margin,
               f"an 'unachievable' target exceeds the inflow bound by only {_g(n['min inflow-bound violation'])} "
               f"(< {margin:g})")]
    return _control(checks, f"witness residual ≤ {resid_tol:g}; inflow violation ≥ {margin:g}", n)


# ---------------------------------------------------------------------------------------------- claims
def _small(mdps: int) -> str | None:
    return None if mdps >= CARD_MDPS else f"the card's counts are over {CARD_MDPS} MDPs; this profile has {mdps}"


def claim_c1(s: dict) -> dict:
    """C1 from :func:`repro.fmss.experiments.summarise_c1`."""
    lo, rev = s["min σ − SLEM (feasible)"], s["max |σ − SLEM| (reversible)"]
    a, b = lo >= -1e-8, rev <= 1e-6
    reason = "; ".join(t for ok, t in (
        (a, f"σ − SLEM reaches {_g(lo)} on a feasible policy (a bug: σ ≥ SLEM is a theorem for μ-stationary chains)"),
        (b, f"|σ − SLEM| reaches {_g(rev)} on a reversible chain (a bug: they are equal there)")) if not ok)
    return dict(holds=a and b, threshold="σ ≥ SLEM − 1e-8 on every feasible policy; |σ − SLEM| ≤ 1e-6 on every "
                                         "reversible chain", numbers=s, reason=reason)


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson 95 % interval of the share k/n (the same as scipy's ``binomtest(k, n).proportion_ci("wilson")``)."""
    if not 0 <= k <= n:
        raise ValueError(f"a share needs 0 <= k <= n; got k={k}, n={n}")
    if n == 0:
        return float("nan"), float("nan")
    p, d = k / n, 1 + z * z / n
    c, h = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def _share(k: int, n: int, bar: float) -> tuple[str, str]:
    """Decide "share k/n ≥ bar" on its Wilson 95 % interval: ("holds"|"fails"|"inconclusive", text). A count over a
    sample of random MDPs is a share of random MDPs; its point estimate near the bar decides nothing (issue 41)."""
    lo, hi = wilson(k, n)
    word = "holds" if lo >= bar else "fails" if hi < bar else "inconclusive"
    return word, f"{k}/{n} = {k / n:.1%} (Wilson 95 % CI [{lo:.1%}, {hi:.1%}]) against the bar {bar:.0%}"


def _count_claim(word: str, parts_failed: list[str], parts_open: list[str], why: str, n: int) -> dict:
    small = _small(n)
    if word == "fails":
        return dict(holds=False, reason="; ".join(parts_failed) + why, inconclusive=small)
    if word == "holds":
        return dict(holds=True, reason="", inconclusive=small)
    return dict(holds=False, reason="", inconclusive=small or ("; ".join(parts_open) + ": the 95 % interval "
                                                               "straddles the bar"))


def claim_c2a(s: dict) -> dict:
    """C2(a) from :func:`repro.fmss.experiments.summarise_c2`: the share of MDPs where FMSS's SLEM is below the LP
    vertex's (card: ≥ 18/20, i.e. ≥ 90 %) and the median relative reduction (≥ 10 %), each decided on its 95 %
    interval over the random MDPs; holds when both clear their bars, fails when either is wholly below."""
    n, below, red = s["MDPs"], s["FMSS below LP vertex"], s["median reduction vs LP vertex"]
    w1, t1 = _share(below, n, 0.9)
    lo, hi = s["median reduction vs LP vertex 95% CI"]
    w2 = "holds" if lo >= 0.10 else "fails" if hi < 0.10 else "inconclusive"
    t2 = f"median relative reduction {red:.1%} (95 % CI [{lo:.1%}, {hi:.1%}]) against the bar 10%"
    word = "fails" if "fails" in (w1, w2) else "holds" if (w1, w2) == ("holds", "holds") else "inconclusive"
    why = (": FMSS minimises σ, the worst one-step χ² contraction, not the SLEM, and on these non-reversible chains σ "
           f"sits above the SLEM (median σ − SLEM of FMSS {_g(s['median σ − SLEM of FMSS'])}), so an LP vertex with "
           "larger σ can mix faster")
    out = _count_claim(word, [t for w, t in ((w1, t1), (w2, t2)) if w == "fails"],
                       [t for w, t in ((w1, t1), (w2, t2)) if w == "inconclusive"], why, n)
    return dict(**out, threshold="share of MDPs with FMSS's SLEM below the LP vertex's ≥ 90 % (card: 18/20) and median "
                                 "reduction ≥ 10%, each on its 95 % interval",
                numbers={k: s[k] for k in ("MDPs", "FMSS below LP vertex", "median reduction vs LP vertex", "median reduction vs LP vertex 95% CI",
                                           "mean SLEM(LP vertex) − SLEM(FMSS) [95% CI]")})


def claim_c2b(s: dict) -> dict:
    """C2(b) from :func:`repro.fmss.experiments.summarise_c2`: the share of MDPs where FMSS's SLEM is below the
    max-entropy policy's (card: ≥ 10/20, i.e. ≥ 50 %), decided on its Wilson 95 % interval."""
    n, below = s["MDPs"], s["FMSS below max-entropy"]
    word, t = _share(below, n, 0.5)
    why = (f" (median relative reduction {s['median reduction vs max-entropy']:.1%}): the max-entropy policy has the "
           f"larger σ on {s[ME_ABOVE]}/{n} MDPs (FMSS minimises σ) yet spreads its actions over all next-state laws, "
           "which mixes well, and σ ≥ SLEM is loose for these non-reversible chains (median σ − SLEM of FMSS "
           f"{_g(s['median σ − SLEM of FMSS'])})")
    out = _count_claim(word, [f"FMSS's SLEM is below the max-entropy policy's on {t}"], [t], why, n)
    return dict(**out, threshold="share of MDPs with FMSS's SLEM below the max-entropy policy's ≥ 50 % (card: 10/20), "
                                 "on its Wilson 95 % interval",
                numbers={k: s[k] for k in ("MDPs", "FMSS below max-entropy", "median reduction vs max-entropy",
                                           "mean SLEM(max-entropy) − SLEM(FMSS) [95% CI]")})


def claim_c3(s: dict, mdps: int, full_search: bool) -> dict:
    """C3 from :func:`repro.fmss.experiments.summarise_c3`; ``full_search``: the card's 8 starts × 3000 evaluations."""
    med = s["median gap"]
    holds = med <= 0.05
    reason = "" if holds else (
        f"the direct search, started from FMSS, lowers the SLEM by more than 0.05 on {s['MDPs'] - s['MDPs with gap ≤ 0.05']}"
        f"/{s['MDPs']} MDPs (median gap {_g(med)}, range {_g(s['gap range'][0])}–{_g(s['gap range'][1])}), at a "
        f"larger σ on {s[SEARCH_ABOVE]}/{s['MDPs']}: σ ≥ SLEM is loose for "
        "non-reversible chains, so the σ minimiser is not near the SLEM minimiser")
    return dict(holds=holds, threshold="median SLEM(FMSS) − SLEM(best found) ≤ 0.05", numbers=s, reason=reason,
                inconclusive=_small(mdps) or (None if full_search else "the search is weaker than the card's 8 × 3000"))


def claim_c4a(s: dict) -> dict:
    """C4(a) from :func:`repro.fmss.experiments.summarise_c4`."""
    exc = s["max χ² excess over the bound"]
    holds = exc <= 1e-12
    return dict(holds=holds, threshold="χ²(e_sᵀP^k‖μ) ≤ σ^(2k) χ²(e_s‖μ) + 1e-12 for every policy, start, k ≤ horizon",
                numbers={"policies": s["policies"], "max χ² excess over the bound": exc},
                reason="" if holds else f"the χ² certificate is exceeded by {_g(exc)} (a bug: σ is the worst one-step "
                                        "χ² contraction of a μ-stationary chain)")


def claim_c4b(s: dict) -> dict:
    """C4(b) from :func:`repro.fmss.experiments.summarise_c4`: the share of MDPs where FMSS's worst-start TV at k is
    below the LP vertex's (card: ≥ 16/20, i.e. ≥ 80 %), decided on its Wilson 95 % interval."""
    n, below = s["MDPs"], s["FMSS TV below LP vertex"]
    word, t = _share(below, n, 0.8)
    why = (f" (median ratio {_g(s['median TV ratio FMSS/LP vertex'])}): σ orders certificates, not finite-time "
           "distances")
    out = _count_claim(word, [f"FMSS's worst-start TV at k is below the LP vertex's on {t}"], [t], why, n)
    return dict(**out, threshold="share of MDPs with TV at k below the LP vertex's ≥ 80 % (card: 16/20), on its Wilson "
                                 "95 % interval",
                numbers={k: s[k] for k in ("MDPs", "FMSS TV below LP vertex", "median TV ratio FMSS/LP vertex")})


def claim_c4c(s: dict) -> dict:
    """C4(c) from :func:`repro.fmss.experiments.summarise_c4`."""
    un = s["unexplained exceptions"]
    holds = un == 0
    reason = "" if holds else (
        f"{un} of {s['policies']} policies have a fitted rate more than {C4C_TOL:g} from their SLEM without a "
        f"near-defective top eigenvalue (max |rate − SLEM| {_g(s['max |rate − SLEM|'])}): "
        + "; ".join(s["exception list"][:5]))
    return dict(holds=holds, threshold=f"|rate − SLEM| ≤ {C4C_TOL:g} except near-defective (κ ≥ 20) or too fast to fit",
                numbers={k: s[k] for k in ("policies", "max |rate − SLEM|", "rate exceptions",
                                           "unexplained exceptions", "exception list",
                                           "near-defective policies by method") if k in s},
                reason=reason)


def claim_c5(s: dict, decidable: bool, limit_s: float = 20.0) -> dict:
    """C5 from :func:`repro.fmss.experiments.summarise_c5`; ``decidable``: the grid has S=40 (Clarabel) and S=60 (SCS)."""
    thr = f"Clarabel < {limit_s:g} s at S=40 and SCS < {limit_s:g} s at S=60 (CPU seconds of the solve)"
    timings = {k for k in s if " s at " in k or "slope" in k}
    if not decidable:
        return dict(holds=None, threshold=thr, numbers={k: v for k, v in s.items() if k not in timings},
                    inconclusive="the grid lacks S=40 (Clarabel) or S=60 (SCS); times are in the table, not in "
                                 "this ledger", reason="")
    cl, scs = s["CLARABEL CPU s at S max"], s["SCS CPU s at S max"]
    holds = cl < limit_s and scs < limit_s
    slow = [f"{name} took {_g(t)} CPU s at S = {s[f'{key} S max']}" for name, key, t in
            (("Clarabel", "CLARABEL", cl), ("SCS", "SCS", scs)) if not t < limit_s]
    return dict(holds=holds, threshold=thr, numbers=s, reason="; ".join(slow) + (f" (> {limit_s:g} s)" if slow else ""))


def _c6_conditions(s: dict) -> dict[str, bool]:
    slope, gap, cov = s["slope ‖μ_π̂ − μ‖₁"], s["slope |σ̂ − σ*|"], s["theory-slack coverage of x*"]
    return {"rate": -0.75 <= slope <= -0.3, "gap": gap < 0, "coverage": cov >= 0.95}


def claim_c6(regimes: list[dict], min_sizes: int = 3) -> dict:
    """C6 from one :func:`repro.fmss.experiments.summarise_c6` per target regime; every regime must meet every
    condition (slope of ‖μ_π̂ − μ‖₁ in [−0.75, −0.3], value-gap slope < 0, theory-slack coverage ≥ 95%)."""
    numbers: dict[str, Any] = {}
    reasons = []
    holds = True
    for s in regimes:
        r = s["regime"]
        c = _c6_conditions(s)
        numbers.update({f"{r}: slope ‖μ_π̂ − μ‖₁": s["slope ‖μ_π̂ − μ‖₁"],
                        f"{r}: slope CI": s["slope CI (bootstrap over seeds)"],
                        f"{r}: slope |σ̂ − σ*|": s["slope |σ̂ − σ*|"], f"{r}: slope |σ̂ − σ*| CI": s["slope |σ̂ − σ*| CI"],
                        f"{r}: theory-slack coverage": s["theory-slack coverage of x*"],
                        f"{r}: theory-slack slope ‖μ_π̂ − μ‖₁": s["theory-slack slope ‖μ_π̂ − μ‖₁"],
                        f"{r}: ε̂ > 0 draws": f"{s['min-slack draws with ε̂ > 0']}/{s['min-slack draws']}",
                        f"{r}: plug-in infeasible": f"{s['plug-in infeasible draws']}/{s['min-slack draws']}"})
        holds = holds and all(c.values())
        if not c["rate"]:
            reasons.append(f"{r}: the stationarity error's slope {_g(s['slope ‖μ_π̂ − μ‖₁'])} is outside [−0.75, −0.3]")
        if not c["gap"]:
            reasons.append(f"{r}: the optimal-value error does not decrease (slope {_g(s['slope |σ̂ − σ*|'])}, "
                           f"bootstrap CI {s['slope |σ̂ − σ*| CI']})")
        if not c["coverage"]:
            reasons.append(f"{r}: the theory slack covers x* in only {s['theory-slack coverage of x*']:.0%} of draws")
    fewest = min(s["sizes in the fit"] for s in regimes)
    return dict(holds=holds, threshold="in every regime: slope of ‖μ_π̂ − μ‖₁ in [−0.75, −0.3] (n ≥ 100); "
                                       "|σ̂ − σ*| decreasing (slope < 0); x* covered by the theory slack in ≥ 95% of draws",
                numbers=numbers, reason="; ".join(reasons),
                inconclusive=None if fewest >= min_sizes else
                f"only {fewest} sample size(s) in the fit: no slope to fit")


def claim_c7(s: dict) -> dict:
    """C7 from :func:`repro.fmss.experiments.summarise_c7`."""
    missed = s["unachievable targets"] - s["reported infeasible"]
    holds = missed == 0 and s["policies returned for them"] == 0 and s["achievable reported infeasible"] == 0
    reason = "" if holds else (
        f"{missed} unachievable target(s) not reported infeasible, {s['policies returned for them']} policies returned "
        f"for them, {s['achievable reported infeasible']} achievable target(s) reported infeasible: a bug")
    return dict(holds=holds, threshold="every unachievable μ reported infeasible (no policy); no achievable μ is",
                numbers=s, reason=reason)
