"""Chapter 02's claims (the card's ids C1a–C1c, C2–C5), its controls (K1–K7) and the conditions that decide them,
computed from measured numbers only. Each ``claim_*`` function returns the keyword arguments of
:meth:`repro.common.Ledger.record` (holds, threshold, numbers, reason, inconclusive, needs); each ``control_*``
those of :meth:`repro.common.Ledger.control` (holds, threshold, numbers, reason).

Comparative claims (C1a–C1c, C5) are noise-aware (DESIGN item 10): the card's seed-count rule stays the threshold,
and the paired per-seed comparison :func:`repro.common.compare_paired` must also say ``better`` — a win in 4 of 5
seeds whose paired 95% interval contains 0 is not evidence and is recorded ``inconclusive``.
"""
from __future__ import annotations

import math

import numpy as np

from repro.common import compare_paired
from repro.common.stats import threshold_from_ci

from .agents import AGENT_LABELS
from .run import SettingResult, window_ratio

__all__ = ["CLAIMS", "CONTROLS", "C1_BASELINES", "C5_BASELINES", "NEEDS", "seeds_below", "claim_c1", "claim_c2",
           "claim_c3", "claim_c4", "claim_c5", "claim_beats", "control_k1", "control_k2", "control_k3",
           "control_k4", "control_k5", "control_k6", "control_k7", "locked_in"]

CLAIMS: dict[str, str] = {
    "C1a": "Latent features present (d_x*=d_y*=6, d_x=d_y=4, M=N=10, T=2000): BiRoLF's R(T) is below each of LinUCB-Kron, LinTS-Kron, DR-Lasso-Kron, ESTR+LowOFUL and RoLF, each configured as in the authors' code / its own paper, in >= 4 of 5 seeds.",
    "C1b": "Sensitivity to the baseline's exploration constant: in the C1a setting BiRoLF's R(T) is below OFUL-Kron's (theory radius, lambda=1, S=1) in >= 4 of 5 seeds.",
    "C1c": "Against ignoring the features: in the C1a setting BiRoLF's R(T) is below that of UCB(delta) over the M N pairs in >= 4 of 5 seeds.",
    "C2": "Sublinear after exploration: on BiRoLF's seed-median regret curve the mean per-round regret over (3T/4, T] is <= 0.8x that over (T/4, T/2] (1/sqrt(t) exploration predicts ~0.65, linear regret 1); LinUCB-Kron's ratio reported.",
    "C3": "Exact blockwise update: on 20 random instances (M=N=20, d_x=d_y=4, B ~ N(0,1), mu = 0.05 max|B|) the blockwise and the full-matrix FISTA solvers, each run to KKT <= 1e-9 max|B| (cap 1e5 iterations), agree to max-abs 1e-6 and both match cvxpy (Clarabel) to 1e-5.",
    "C4": "Computational gain: along 200 recorded main-estimator problems of a BiRoLF run at each M=N in {10, 20, 40}, warm-started and stopped at KKT <= 1e-6 max|B_t|, the blockwise update is >= 3x faster than full-matrix FISTA at M=N=20 and the ratio grows with M N.",
    "C5": "Robustness to no latent part: with d_x=d_x*, d_y=d_y* BiRoLF's R(T) is within 1.5x of the best baseline (OFUL-Kron included).",
}

CONTROLS: dict[str, str] = {
    "K1": "Solver exact in the loop: along a main-setting BiRoLF run every main estimate has KKT residual <= 1e-5 max|B_t|, and sampled estimates agree with cvxpy (Clarabel) within 1e-4 max|B_t|.",
    "K2": "Latent structure exercised: in the main setting the complement blocks of Phi* carry >= 10% of its Frobenius norm and the observed-Kronecker least-squares fit of R_bar leaves >= 10% relative residual on every seed; in the no-latent setting both are <= 1e-8.",
    "K3": "The paired 5-seed comparison resolves an exploration-constant effect: OFUL-Kron (theory radius) vs LinUCB-Kron (the authors' width), same features and ridge model, differ in R(T) with a paired 95% CI excluding 0.",
    "K4": "Features can beat ignoring them here: OFUL on the true features x*_i (x) y*_j has lower R(T) than UCB(delta), paired 95% CI excluding 0.",
    "K5": "C2's window ratio can see sublinear regret: the forced phase ends by T/4 (2MN <= T/4) and a correctly specified learner (OFUL on the true features) has a seed-median window ratio <= 0.8.",
    "K6": "C4 compares at matched accuracy: at every timing size both solvers reached KKT <= kkt_tol max|B_t| on every recorded update and their final solutions agree within 1e-4 max|B|.",
    "K7": "C3's check is not vacuous: in every instance each block (oo, ou, uo, uu) of the solution has a non-zero entry, and the l1 term is active (some entry exactly zero).",
}

# the controls each claim rests on
NEEDS: dict[str, tuple[str, ...]] = {
    "C1a": ("K1", "K2", "K3"), "C1b": ("K1", "K2", "K3"), "C1c": ("K1", "K2", "K4"), "C2": ("K1", "K5"),
    "C3": ("K7",), "C4": ("K6",), "C5": ("K1", "K2", "K3"),
}

C1_BASELINES = ("linucb", "lints", "dr_lasso", "estr_lowoful", "rolf")
C5_BASELINES = ("rolf", "linucb", "oful", "lints", "dr_lasso", "estr_lowoful", "ucb")   # the card's baselines
MIN_SEEDS = 5
FRACTION = 0.8   # ">= 4 of 5 seeds"
LOCK_FRACTION = 0.5   # a run is "locked in" when the best pair gets < this share of the post-forced rounds


def seeds_below(res: SettingResult, a: str, b: str) -> int:
    """Number of seeds in which agent a's R(T) is strictly below agent b's."""
    f = res.final()
    return int(np.sum(f[a] < f[b]))


def _need(n: int) -> int:
    return math.ceil(FRACTION * n - 1e-12)


def locked_in(res: SettingResult, key: str = "birolf") -> np.ndarray:
    """Per seed: did ``key`` give the best pair less than half of the rounds after the forced phase?"""
    if key not in res.actions or res.best_arm.size == 0:
        return np.zeros(res.curves[key].shape[0], dtype=bool)
    t0, T = res.forced_end, res.setting.T
    late = res.pulls_of_best(key) - res.pulls_of_best(key, t0)
    return late < LOCK_FRACTION * (T - t0)


def _ci(c) -> str:
    return f"{c.mean_diff:.3g} [{c.ci_lo:.3g}, {c.ci_hi:.3g}]"


def claim_beats(res: SettingResult, baselines: tuple[str, ...], what: str) -> dict:
    """BiRoLF's R(T) below each of ``baselines`` in >= 80% of the seeds (the card's rule) *and* the paired
    comparison of R(T) says ``better`` (C1a, C1b, C1c).

    Per baseline: holds when both; ``fails`` when the seed count is below the card's rule; a seed count that
    meets the rule with a paired CI containing 0 is a win inside seed noise: ``inconclusive``. Over several
    baselines: holds when each holds, fails when any fails, else inconclusive.
    """
    n = res.curves["birolf"].shape[0]
    f = res.final()
    need = _need(n)
    missing = [b for b in baselines if b not in res.curves]
    present = [b for b in baselines if b in res.curves]
    after = {a: f[a] - res.forced(a) for a in f}
    numbers = {"BiRoLF R(T) mean": float(f["birolf"].mean())}
    status = {}
    cmps = {}
    for b in present:
        k = seeds_below(res, "birolf", b)
        c = compare_paired(f["birolf"], f[b], higher_is_better=False)
        cmps[b] = c
        lab = AGENT_LABELS[b]
        numbers[f"seeds below {lab}"] = f"{k}/{n}"
        numbers[f"{lab} R(T) mean"] = float(f[b].mean())
        numbers.update(c.numbers(f"{lab} − BiRoLF"))
        numbers[f"after 2MN: {lab} − BiRoLF diff ci95"] = list(
            compare_paired(after["birolf"], after[b], higher_is_better=False).numbers()["diff ci95"])
        # issue 41: a missed seed count is a failure only when the paired interval shows the baseline measurably
        # lower (a count decided inside seed noise would flip with the next seeds)
        status[b] = "holds" if (k >= need and c.better) else "fails" if (k < need and c.worse) else "inconclusive"
    lock = locked_in(res)
    numbers["BiRoLF seeds locked in"] = int(lock.sum())
    holds = None
    inconclusive = None
    if missing:
        inconclusive = f"not run in this profile: {', '.join(AGENT_LABELS[b] for b in missing)}"
    elif n < MIN_SEEDS:
        inconclusive = f"{n} seeds; the card's test needs at least {MIN_SEEDS}"
    elif any(v == "fails" for v in status.values()):
        holds = False
    elif all(v == "holds" for v in status.values()):
        holds = True
    else:
        noisy = [b for b, v in status.items() if v == "inconclusive"]
        inconclusive = ("; ".join(f"below {AGENT_LABELS[b]} in {seeds_below(res, 'birolf', b)}/{n} seeds (the card "
                                  f"asks >= {need}) and the paired R(T) difference {_ci(cmps[b])} "
                                  + ("contains 0: a win inside seed noise" if seeds_below(res, 'birolf', b) >= need
                                     else "does not show the baseline lower: a missed count inside seed noise")
                                  for b in noisy))
    if holds is None and inconclusive is None:   # pragma: no cover - defensive
        inconclusive = "undecided"
    t0 = res.forced_end
    forced = float(res.forced("birolf").mean())
    reason = ""
    if holds is False:
        losers = [b for b in present if status[b] == "fails"]
        parts = [f"{AGENT_LABELS[b]}: below in {seeds_below(res, 'birolf', b)}/{n} seeds, paired difference "
                 f"(baseline − BiRoLF) {_ci(cmps[b])}, {cmps[b].word}" for b in losers]
        reason = (f"BiRoLF is not below {', '.join(AGENT_LABELS[b] for b in losers)} in >= {need} of {n} seeds, "
                  f"and the paired difference shows {'that baseline' if len(losers) == 1 else 'each'} measurably lower "
                  f"({what}) — {'; '.join(parts)}. {forced:.0f} of BiRoLF's mean R(T) = {f['birolf'].mean():.0f} "
                  f"is paid in the {t0} forced-exploration rounds, and in {int(lock.sum())} of {n} seeds it gave the "
                  f"best pair less than {LOCK_FRACTION:.0%} of the later rounds (locked onto a suboptimal pair)")
    return dict(holds=holds, threshold=f"BiRoLF below each in >= {need} of {n} seeds and paired R(T) comparison "
                                       "'better' (95% CI excludes 0)", numbers=numbers,
                reason=reason, inconclusive=inconclusive)


def claim_c1(res: SettingResult) -> dict:
    return {**claim_beats(res, C1_BASELINES, "against the five baselines of the authors' comparison"),
            "needs": NEEDS["C1a"]}


def claim_c1b(res: SettingResult) -> dict:
    return {**claim_beats(res, ("oful",), "OFUL-Kron with the theory radius"), "needs": NEEDS["C1b"]}


def claim_c1c(res: SettingResult) -> dict:
    out = claim_beats(res, ("ucb",), "UCB(δ) over the MN pairs")
    if "ucb_code" in res.curves:
        f = res.final()
        c = compare_paired(f["birolf"], f["ucb_code"], higher_is_better=False)
        out["numbers"]["(info) UCB(δ) as in the authors' code R(T) mean"] = float(f["ucb_code"].mean())
        out["numbers"]["(info) seeds below the authors'-code UCB(δ)"] = \
            f"{seeds_below(res, 'birolf', 'ucb_code')}/{res.curves['birolf'].shape[0]}"
        out["numbers"]["(info) authors'-code UCB(δ) − BiRoLF diff ci95"] = [c.ci_lo, c.ci_hi]
    return {**out, "needs": NEEDS["C1c"]}


def claim_c2(res: SettingResult) -> dict:
    """Window ratio of the seed-median cumulative regret curve; LinUCB-Kron's for comparison."""
    n = res.curves["birolf"].shape[0]
    med = np.median(res.curves["birolf"], axis=0)
    ratio = window_ratio(med)
    numbers = {"BiRoLF ratio": ratio}
    if "linucb" in res.curves:
        numbers["LinUCB-Kron ratio"] = window_ratio(np.median(res.curves["linucb"], axis=0))
    per_seed = [window_ratio(c) for c in res.curves["birolf"]]
    numbers["BiRoLF per-seed ratios"] = per_seed
    lo, hi = median_ratio_ci(res.curves["birolf"])
    numbers["BiRoLF ratio ci95"] = [lo, hi]
    lock = locked_in(res)
    numbers["BiRoLF seeds locked in"] = int(lock.sum())
    tt = threshold_from_ci(ratio, lo, hi, C2_MAX_RATIO, "<=", n)
    inconclusive = (f"{n} seeds; the card's seed-median needs at least {MIN_SEEDS}" if n < MIN_SEEDS
                    else None if tt.decided else
                    f"the seed-median ratio {ratio:.2f} has a bootstrap 95% interval over seeds [{lo:.2f}, {hi:.2f}] "
                    f"that contains {C2_MAX_RATIO}: within noise of the bar")
    flat = int(sum(r > 0.9 for r in per_seed))
    reason = (f"the seed-median late/mid ratio is {ratio:.2f} [{lo:.2f}, {hi:.2f}]"
              + (f", at or below {C2_MAX_RATIO}" if tt.holds else
                 f", above {C2_MAX_RATIO}: {flat} of {n} seeds have a per-seed ratio above 0.9 (per-round regret not "
                 f"decaying) and {int(lock.sum())} of {n} gave the best pair less than {LOCK_FRACTION:.0%} of the "
                 f"post-forced rounds"))
    return dict(holds=tt.holds if tt.decided else None, threshold=f"ratio <= {C2_MAX_RATIO} (bootstrap 95% CI over seeds)",
                numbers=numbers, reason=reason, inconclusive=inconclusive, needs=NEEDS["C2"])


C2_MAX_RATIO = 0.8


def median_ratio_ci(curves: np.ndarray, n_boot: int = 2000, rng_seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of C2's statistic, the window ratio of the seed-median cumulative regret curve,
    from a bootstrap over seeds (whole curves resampled: what changes with the seed)."""
    curves = np.atleast_2d(np.asarray(curves, float))
    if curves.shape[0] < 2:
        return -math.inf, math.inf
    idx = np.random.default_rng(rng_seed).integers(0, curves.shape[0], size=(n_boot, curves.shape[0]))
    boots = np.array([window_ratio(np.median(curves[i], axis=0)) for i in idx])
    lo, hi = np.nanpercentile(boots, [2.5, 97.5])
    return float(lo), float(hi)


def claim_c3(df) -> dict:
    """Blockwise = full = cvxpy on the random instances (``experiments.exactness_check``)."""
    bf = float(df["|blockwise − full|"].max())
    bc = float(df["|blockwise − cvxpy|"].max())
    fc = float(df["|full − cvxpy|"].max())
    kkt_ok = bool((df["KKT full"] <= 1.01 * df["kkt target"]).all() and (df["KKT blockwise"] <= 1.01 * df["kkt target"]).all())
    holds = bf <= 1e-6 and bc <= 1e-5 and fc <= 1e-5 and kkt_ok
    zeros = {f"zeros {b} (min..max)": [float(df[f'zeros {b}'].min()), float(df[f'zeros {b}'].max())]
             for b in ("oo", "ou", "uo", "uu")}
    numbers = {"instances": int(len(df)), "max |blockwise − full|": bf, "max |blockwise − cvxpy|": bc,
               "max |full − cvxpy|": fc, "both reached KKT target": kkt_ok, **zeros,
               "full@200 KKT (median)": float(df["KKT full@200"].median()),
               "full@200 max-abs diff (max)": float(df["|full@200 − blockwise|"].max())}
    over = [f"{name} = {v:.2g} > {lim:g}" for name, v, lim in (("max |blockwise − full|", bf, 1e-6),
                                                                ("max |blockwise − cvxpy|", bc, 1e-5),
                                                                ("max |full − cvxpy|", fc, 1e-5)) if v > lim]
    if not kkt_ok:
        over.append("a solver stopped above the KKT target (cap reached)")
    reason = "" if holds else "; ".join(over)
    return dict(holds=holds, threshold="|block−full| <= 1e-6, |·−cvxpy| <= 1e-5, KKT <= 1e-9 max|B|",
                numbers=numbers, reason=reason, inconclusive=None, needs=NEEDS["C3"])


def _ms(seconds: float) -> str:
    """A time as a string with its unit (the determinism check blanks timings, which vary run to run)."""
    return f"{seconds * 1e3:.3g} ms"


def claim_c4(timing: dict[int, dict]) -> dict:
    """Speed-up of blockwise over full FISTA at matched accuracy, per size M=N (``experiments.time_main_solvers``).

    Times vary from run to run, so they are recorded as strings with units ("0.12 ms", and the speed-up as
    "31.8 ×"), which the determinism check's sanitizers blank; iteration counts, which do not vary, are numbers.
    """
    sizes = sorted(timing)
    ratio = {m: timing[m][("full", "matched")]["seconds_per_update"]
             / timing[m][("blockwise", "matched")]["seconds_per_update"] for m in sizes}
    grows = all(ratio[a] < ratio[b] for a, b in zip(sizes, sizes[1:]))
    numbers = {
        "M=N": sizes,
        "blockwise per update": [_ms(timing[m][("blockwise", "matched")]["seconds_per_update"]) for m in sizes],
        "full per update": [_ms(timing[m][("full", "matched")]["seconds_per_update"]) for m in sizes],
        "speed-up (full / blockwise)": [f"{ratio[m]:.3g} ×" for m in sizes],
        "iterations blockwise": [round(timing[m][("blockwise", "matched")]["iters_per_update"], 1) for m in sizes],
        "iterations full": [round(timing[m][("full", "matched")]["iters_per_update"], 1) for m in sizes],
    }
    inconclusive = None
    if 20 not in timing:
        inconclusive = "M=N=20 is not among timing_sizes"
    elif len(sizes) < 2:
        inconclusive = "one timing size: cannot tell whether the ratio grows"
    if inconclusive:
        holds = None       # a timing-based condition would make the smoke ledger non-deterministic
    else:
        numbers["ratio grows with MN"] = grows
        holds = ratio[20] >= 3.0 and grows
    reason = ""
    if not holds and not inconclusive:
        reason = (f"speed-ups (full / blockwise) {', '.join(f'{ratio[m]:.3g} × at M=N={m}' for m in sizes)}: "
                  + ("below 3 × at M=N=20" if ratio[20] < 3.0 else "") + ("" if grows else
                                                                          (", and " if ratio[20] < 3.0 else "")
                                                                          + "not increasing with MN"))
    return dict(holds=holds, threshold="ratio >= 3 at M=N=20 and increasing in MN", numbers=numbers,
                reason=reason, inconclusive=inconclusive, needs=NEEDS["C4"])


def claim_c5(res: SettingResult) -> dict:
    """BiRoLF within 1.5x of the best baseline's R(T) with nothing hidden (a "no worse than" claim, margin 1.5x).

    The best baseline is the card's baseline with the lowest mean R(T). Noise-aware: per seed d = 1.5·R_best − R_BiRoLF;
    holds when the paired 95% CI of d lies above 0, fails when it lies below 0, else inconclusive (the card's
    mean-ratio condition is reported beside it).
    """
    n = res.curves["birolf"].shape[0]
    f = res.final()
    base = {a: float(f[a].mean()) for a in C5_BASELINES if a in f}
    best = min(base, key=base.get)
    ratio = float(f["birolf"].mean()) / base[best]
    c = compare_paired(1.5 * f[best], f["birolf"], higher_is_better=True)
    numbers = {"BiRoLF R(T) mean": float(f["birolf"].mean()), "best baseline": AGENT_LABELS[best],
               "best baseline R(T) mean": base[best], "ratio": ratio,
               **c.numbers("1.5×best − BiRoLF"),
               "BiRoLF R(T) − R(2MN)": float((f["birolf"] - res.forced("birolf")).mean()),
               f"{AGENT_LABELS[best]} R(T) − R(2MN)": float((f[best] - res.forced(best)).mean()),
               "BiRoLF R(2MN)": float(res.forced("birolf").mean())}
    if "ucb_code" in f:
        numbers["(info) UCB(δ) as in the authors' code R(T) mean"] = float(f["ucb_code"].mean())
    inconclusive = None
    if "oful" not in res.curves:
        inconclusive = "OFUL-Kron not run in this profile"
    elif n < MIN_SEEDS:
        inconclusive = f"{n} seeds; the card's comparison uses {MIN_SEEDS}"
    elif c.word == "no measurable difference":
        inconclusive = (f"the paired difference 1.5×{AGENT_LABELS[best]} − BiRoLF, {_ci(c)}, contains 0 "
                        f"(mean ratio {ratio:.2f})")
    holds = bool(c.better)
    forced = numbers["BiRoLF R(2MN)"]
    reason = "" if holds else (
        f"BiRoLF's mean R(T) is {ratio:.2f}× the best baseline's ({AGENT_LABELS[best]}, {base[best]:.0f}); "
        f"{forced:.0f} of BiRoLF's {f['birolf'].mean():.0f} is paid in the {res.forced_end} forced-exploration rounds, "
        f"and after them it still pays {numbers['BiRoLF R(T) − R(2MN)']:.0f} against "
        f"{numbers[f'{AGENT_LABELS[best]} R(T) − R(2MN)']:.0f}")
    return dict(holds=holds, threshold="1.5 × best baseline − BiRoLF: paired 95% CI of R(T) above 0 "
                                       "(card: mean R(T) of BiRoLF <= 1.5 × best)", numbers=numbers, reason=reason,
                inconclusive=inconclusive, needs=NEEDS["C5"])


# ==================================================================================================== controls
def control_k1(inloop: dict) -> dict:
    """K1 from :func:`repro.birolf.experiments.inloop_exactness` (and, for information, the authors' caps)."""
    ok_kkt = inloop["kkt_rel_max"] <= 1e-5
    ok_cvx = inloop["cvxpy_rel_max"] <= 1e-4
    numbers = {"updates": inloop["updates"], "max KKT / max|B_t|": inloop["kkt_rel_max"],
               "checked against cvxpy": inloop["checked"], "max |Φ̂ − Φ_cvxpy| / max|B_t|": inloop["cvxpy_rel_max"]}
    for k in ("caps_kkt_rel_max", "caps_frac_above_1e-5"):
        if k in inloop:
            numbers[f"(authors' caps) {k[5:].replace('_', ' ')}"] = inloop[k]
    parts = []
    if not ok_kkt:
        parts.append(f"an in-loop estimate stopped at KKT {inloop['kkt_rel_max']:.2g}·max|B_t| > 1e-5·max|B_t|")
    if not ok_cvx:
        parts.append(f"an in-loop estimate differs from cvxpy by {inloop['cvxpy_rel_max']:.2g}·max|B_t| > 1e-4·max|B_t|")
    return dict(holds=ok_kkt and ok_cvx, threshold="KKT <= 1e-5 max|B_t| on every update; |Φ̂ − cvxpy| <= 1e-4 max|B_t|",
                numbers=numbers, reason="; ".join(parts))


def control_k2(main: dict, nolat: dict) -> dict:
    """K2 from :func:`repro.birolf.experiments.latent_structure` on the main and the no-latent setting."""
    ms, mr = np.asarray(main["complement_share"]), np.asarray(main["kron_residual"])
    ns, nr = np.asarray(nolat["complement_share"]), np.asarray(nolat["kron_residual"])
    ok_main = bool(ms.min() >= 0.1 and mr.min() >= 0.1)
    ok_nolat = bool(ns.max() <= 1e-8 and nr.max() <= 1e-8)
    numbers = {"main: complement share of Φ* (min..max)": [float(ms.min()), float(ms.max())],
               "main: Kronecker LS residual (min..max)": [float(mr.min()), float(mr.max())],
               "no latent: complement share (max)": float(ns.max()), "no latent: Kronecker LS residual (max)": float(nr.max())}
    parts = []
    if not ok_main:
        parts.append(f"in the main setting the latent part is small on some seed (complement share {ms.min():.3g}, "
                     f"Kronecker residual {mr.min():.3g}; need >= 0.1)")
    if not ok_nolat:
        parts.append(f"the no-latent setting still has a latent part (share {ns.max():.2g}, residual {nr.max():.2g})")
    return dict(holds=ok_main and ok_nolat, threshold="main: both >= 0.1 on every seed; no latent: both <= 1e-8",
                numbers=numbers, reason="; ".join(parts))


def _paired_control(res: SettingResult, a: str, b: str, what: str) -> dict:
    """a has lower R(T) than b, paired 95% CI of b − a above 0."""
    missing = [k for k in (a, b) if k not in res.curves]
    if missing:
        return dict(holds=False, threshold="paired 95% CI of the R(T) difference excludes 0",
                    numbers={"not run": [AGENT_LABELS.get(k, k) for k in missing]},
                    reason=f"{', '.join(AGENT_LABELS.get(k, k) for k in missing)} not run in this profile")
    f = res.final()
    c = compare_paired(f[a], f[b], higher_is_better=False)
    numbers = {f"{AGENT_LABELS[a]} R(T) mean": float(f[a].mean()), f"{AGENT_LABELS[b]} R(T) mean": float(f[b].mean()),
               **c.numbers(f"{AGENT_LABELS[b]} − {AGENT_LABELS[a]}")}
    reason = "" if c.better else (f"{what}: the paired difference {AGENT_LABELS[b]} − {AGENT_LABELS[a]} is {_ci(c)} "
                                  f"over {c.n} seeds ({c.word})")
    return dict(holds=c.better, threshold=f"{AGENT_LABELS[a]} better than {AGENT_LABELS[b]}: paired 95% CI of "
                                          "the R(T) difference above 0", numbers=numbers, reason=reason)


def control_k3(res: SettingResult) -> dict:
    return _paired_control(res, "oful", "linucb", "the seeds cannot resolve an exploration-constant effect")


def control_k4(res: SettingResult) -> dict:
    return _paired_control(res, "oful_true", "ucb", "knowing the features does not beat ignoring them here")


def control_k5(res: SettingResult) -> dict:
    T, t0 = res.setting.T, res.setting.explore_rounds
    early = t0 <= T // 4
    numbers = {"2MN": t0, "T/4": T // 4}
    ratio = float("nan")
    if "oful_true" in res.curves:
        ratio = window_ratio(np.median(res.curves["oful_true"], axis=0))
        numbers["OFUL (true features) ratio"] = ratio
    sees = bool(ratio <= 0.8)
    parts = []
    if not early:
        parts.append(f"the forced phase (2MN = {t0}) reaches into the first window (T/4 = {T // 4})")
    if not sees:
        parts.append("OFUL on the true features was not run" if math.isnan(ratio) else
                     f"a correctly specified learner shows ratio {ratio:.2f} > 0.8: the windows cannot see sublinearity")
    return dict(holds=early and sees, threshold="2MN <= T/4 and OFUL (true features) seed-median ratio <= 0.8",
                numbers=numbers, reason="; ".join(parts))


def control_k6(timing: dict[int, dict], kkt_tol: float) -> dict:
    """K6 from ``experiments.time_main_solvers`` (matched mode): KKT reached, and the two solvers' last solutions agree."""
    sizes = sorted(timing)
    agree = {m: float(np.abs(timing[m][("blockwise", "matched")]["final"] - timing[m][("full", "matched")]["final"]).max())
             / timing[m][("blockwise", "matched")]["bmax_final"] for m in sizes}
    worst = {m: max(timing[m][("blockwise", "matched")]["kkt_rel_max"], timing[m][("full", "matched")]["kkt_rel_max"])
             for m in sizes}
    ok_kkt = all(w <= kkt_tol * (1 + 1e-9) for w in worst.values())
    ok_agree = all(v <= 1e-4 for v in agree.values())
    numbers = {"M=N": sizes, "max KKT / max|B_t| (both solvers)": [worst[m] for m in sizes],
               "final |blockwise − full| / max|B|": [agree[m] for m in sizes]}
    parts = []
    if not ok_kkt:
        parts.append(", ".join(f"M=N={m}: KKT {worst[m]:.2g}·max|B_t|" for m in sizes if worst[m] > kkt_tol)
                     + f" above the matched target {kkt_tol:g}")
    if not ok_agree:
        parts.append("final solutions differ by " + ", ".join(f"{agree[m]:.2g}" for m in sizes if agree[m] > 1e-4))
    return dict(holds=ok_kkt and ok_agree, threshold=f"KKT <= {kkt_tol:g} max|B_t| on every update; final gap <= 1e-4 max|B|",
                numbers=numbers, reason="; ".join(parts))


def control_k7(df) -> dict:
    """K7 from ``experiments.exactness_check``: every block of every solution non-zero somewhere; some zeros."""
    blocks = ("oo", "ou", "uo", "uu")
    all_zero = {b: int((df[f"zeros {b}"] >= 1.0).sum()) for b in blocks}
    active = int(sum((df[[f"zeros {b}" for b in blocks]].max(axis=1) > 0)))
    n = int(len(df))
    ok = all(v == 0 for v in all_zero.values()) and active == n
    numbers = {"instances": n, **{f"all-zero {b} blocks": all_zero[b] for b in blocks},
               "instances with an exact zero": active}
    parts = [f"{v} of {n} instances have an all-zero {b} block" for b, v in all_zero.items() if v]
    if active < n:
        parts.append(f"in {n - active} of {n} instances no entry is exactly zero (the l1 term never binds)")
    return dict(holds=ok, threshold="no all-zero block; an exact zero in every instance", numbers=numbers,
                reason="; ".join(parts))
