"""Chapter 19's claims and controls, and the functions that decide them from measured numbers.

Every function returns the keyword arguments of :meth:`repro.common.Ledger.control` (controls: ``holds``,
``threshold``, ``numbers``, ``reason``) or :meth:`~repro.common.Ledger.record` (claims: also ``inconclusive``
and ``needs``), so the notebook writes ``ledger.record("C1", **verdicts.c1(...))``. Reasons are sentences
computed from the numbers; the thresholds are the card's (:data:`THRESHOLDS`), never tuned.

Controls (issue 13): could this run see an effect of each claim's kind?

* **K1** Lorenz training did its job: held-out reconstruction R^2 >= 0.5 for PULSE and the reconstruction
  baselines (MAE, DSVAE) in every Lorenz run, the noise study's included (a decoder that relaxes to a constant
  scores about 0), and more training would not change the result (issue 42's *doubling test*): every pretrained
  encoder of the first seed, retrained at twice the steps (its own one-cycle schedule), moves its own objective on
  held-out windows (fixed draws) by < 5% and its probe accuracy by < 3 points. The earlier rule, "the last 10% of
  steps improve the held-out objective by < 5%", passed by construction under the one-cycle schedule: those steps
  carry 0.3% of the summed learning rate.
* **K4** the same on ECG (the data of C3, C4 and C5; C5's PULSE init is the ECG-pretrained encoder). Issue 13's
  K1 names no data set; it is split so that each claim rests on the training of the models it compares. Its
  reconstruction bar is not a fixed R^2 (issue 42): PULSE's forecast and MAE's infill must beat a *system-blind*
  predictor given the same inputs (the better of a ridge on the visible samples and a nearest neighbour over
  other subjects' training windows), paired over seeds with the 95% CI of the gap above 0; DSVAE, an
  autoencoder whose per-step latent reads the window it rebuilds, keeps R^2 >= 0.5. The code-swap test of the ECG
  PULSE models (own / same-class / other-class code) is reported beside it: it shows whether the decoder uses
  the code at all.
* **K2** pretraining moves the code: on Lorenz *and* on ECG, at least one label-free pretrained encoder's probe
  accuracy beats the random-init floor (the mean probe accuracy of several untrained encoders on the seed's
  data) by >= 3 points, with a paired 95% CI over seeds that excludes 0.
  (PULSE-oracle uses labels and the supervised model is trained on them: neither counts.)
* **K3** the apparatus can see a system code: PULSE-oracle's code-swap test gives a lower error with a code from
  a same-class window (another trajectory) than with a code from another class, paired over the oracle's seeds
  (the run's seeds and more, trained for K3 alone), CI excluding 0; each seed's errors average several partner
  draws per held-out window.

* **K5** the transfer task leaves headroom (issue 42: every initialisation fine-tuned to 99.7-100%): the
  fine-tuned PPG accuracy of the inits PULSE is compared with (random and SimCLR) has its 95% CI over seeds at
  or below 1 - 0.03 (K2's 3 points below a perfect score), so that a better init could show.

C1 needs K2; C3, C4 need K2 and K4; C5 needs K2, K4 and K5; C2 needs K1 and K3; C6 (PULSE and DSVAE trained at
three noise levels) needs K1.

Noise-aware rules. A claim of the card's form "A >= B [- margin] in >= k of n seeds" *holds* when the card's
seed-count rule is met **and** the paired comparison (:func:`repro.common.compare_paired`) over seeds supports
it (``better`` with no margin, :meth:`~repro.common.Comparison.no_worse_than` with one); it *fails* when the
seed-count rule is not met **and** the comparison refutes it (A measurably below B by more than the margin);
anything else is ``inconclusive`` (the seeds and the interval disagree, or the interval straddles). C6 uses the
bootstrap interval over test windows the card names: holds when it lies below 0, fails when above, else
inconclusive. C6 resamples both what a training run changes and the test windows (issue 42): a two-level
bootstrap over (training runs x test windows) of the paired per-window drop difference; one run per level is
inconclusive. C5 needs at least :data:`THRESHOLDS` ``C5_min_test_subjects`` PPG test subjects per seed.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from repro.common import compare_paired
from repro.common.stats import decide_threshold, mean_ci

THRESHOLDS = {
    "K1_min_recon_r2": 0.5,        # held-out reconstruction R^2 of PULSE, MAE, DSVAE
    "K1_max_double_obj_move": 0.05,   # doubling test: retrained at 2x steps, the held-out objective moves < 5%
    "K1_max_double_probe_move": 0.03,  # ... and the probe accuracy moves < 3 points
    "K2_min_lift": 0.03,           # best label-free encoder - random init, probe accuracy
    "K4_min_ae_r2": 0.5,           # DSVAE (an autoencoder): held-out reconstruction R^2 on ECG
    "K5_max_ref_acc": 0.97,        # transfer headroom: reference inits' fine-tuned accuracy CI <= 1 - 0.03
    "C1_oracle_margin": 0.02,      # PULSE-oracle >= PULSE - 0.02
    "C2_log_rho_margin": 0.02,     # R^2(log rho) of PULSE >= rival's - 0.02
    "C3_margin": 0.01,             # PULSE macro-F1 >= best rival - 0.01
    "seed_frac_c1_c3": 2 / 3,      # ">= 2/3 seeds"
    "C5_min_test_subjects": 15,    # PPG test subjects per seed (5 per class) for C5 to be decided
}
T = THRESHOLDS

#: The card's claims (ids and statements exactly as in ../shared/papers/19_pulse.md).
CLAIMS = {
    "C1": "(synthetic: class identity) On Lorenz-SDE windows (5 classes = 5 values of ρ; noise 10% of RMS), "
          "PULSE's linear-probe accuracy is ≥ that of DSVAE, MAE and SimCLR in ≥ 2/3 seeds; "
          "PULSE-oracle ≥ PULSE − 0.02.",
    "C2": "(transferable vs. non-transferable, Lorenz) Ridge R² (5-fold CV) from the pooled embedding to the "
          "window's own state (average of the R² for x(t₀) and for the window-mean state, both set by the initial "
          "condition) is lower for PULSE than for DSVAE and MAE, and PULSE's R² for log ρ is ≥ theirs − 0.02 "
          "(so a collapsed encoder cannot pass).",
    "C3": "(semantic classes, ECG-like) On synthetic McSharry-ECG with 4 morphology/rhythm classes, PULSE's "
          "macro-F1 is within 0.01 of, or above, the best of SimCLR, TS2Vec-lite, MAE and DSVAE in ≥ 2/3 seeds.",
    "C4": "(label efficiency) With 1% and 5% of labels, a linear probe on PULSE beats the same encoder trained "
          "supervised from scratch on the same labels, in 3/3 seeds.",
    "C5": "(transfer) Pretrain on ECG, fine-tune end-to-end on PPG-like pulse waveforms (3 vascular classes). "
          "PULSE init ≥ random init and ≥ SimCLR init in accuracy.",
    "C6": "(noise robustness) As noise goes 0 → 0.3 RMS, PULSE's Lorenz accuracy drops less than DSVAE's "
          "(seed 0 only; bootstrap CI over test windows).",
}

#: Positive controls: could this run see an effect of each claim's kind?
CONTROLS = {
    "K1": "Lorenz training did its job: held-out reconstruction R² ≥ 0.5 for PULSE and the reconstruction "
          "baselines (MAE, DSVAE) in every Lorenz run, and more training would not change the result: every "
          "pretrained encoder retrained at twice the steps on the first seed moves its held-out objective by < 5% "
          "and its probe accuracy by < 3 points.",
    "K2": "Pretraining moves the code: on Lorenz and on ECG, at least one label-free pretrained encoder's probe "
          "beats the random-init encoder (mean over several initialisations) by ≥ 3 points, with a paired 95% CI "
          "over seeds excluding 0.",
    "K3": "The apparatus can see a system code: PULSE-oracle's code-swap test separates own-class from "
          "other-class windows (a same-class code gives a lower reconstruction error than an other-class code; "
          "paired 95% CI over the oracle's seeds excluding 0).",
    "K4": "ECG training did its job: the held-out reconstruction R² of PULSE and MAE is above a system-blind "
          "predictor given the same inputs (ridge on the visible samples; nearest neighbour over other subjects' "
          "windows), paired over seeds with the 95% CI above 0; DSVAE's (an autoencoder) R² ≥ 0.5 in every ECG run; "
          "and K1's doubling test on the ECG encoders (2x steps on the first seed: held-out objective moves < 5%, "
          "probe < 3 points).",
    "K5": "The transfer task leaves headroom: the fine-tuned PPG accuracy of the inits PULSE is compared with "
          "(random, SimCLR) has its 95% CI over seeds at or below 97%, so a better init could show.",
}

NEEDS = {"C1": ("K2",), "C2": ("K1", "K3"), "C3": ("K2", "K4"), "C4": ("K2", "K4"), "C5": ("K2", "K4", "K5"),
         "C6": ("K1",)}

LABEL_FREE = ("pulse", "pulse_xwin", "simclr", "ts2vec", "mae", "dsvae")
NAMES = {"pulse": "PULSE", "pulse_xwin": "PULSE-xwin", "pulse_oracle": "PULSE-oracle", "simclr": "SimCLR",
         "ts2vec": "TS2Vec-lite", "mae": "MAE", "dsvae": "DSVAE", "supervised": "supervised",
         "random": "random init"}


# ----------------------------------------------------------------------------- helpers
def _a(x) -> np.ndarray:
    return np.asarray(x, float).ravel()


def _pts(x: float) -> str:
    """A fraction as signed points: 0.0123 -> '+1.2'."""
    return f"{100 * x:+.1f}"


def _ci(cmp) -> str:
    return f"[{cmp.ci_lo:+.3f}, {cmp.ci_hi:+.3f}]"


def _need(n: int, frac: float) -> int:
    return math.ceil(frac * n - 1e-9)


def _decide(rule_met: bool, supported: bool, refuted: bool) -> tuple[bool | None, str | None]:
    """(holds, inconclusive-reason-prefix) from the seed rule and the interval (see the module docstring)."""
    if rule_met and supported:
        return True, None
    if not rule_met and refuted:
        return False, None
    if rule_met:
        return None, "the card's seed-count rule is met but the paired 95% CI over seeds does not support it"
    return None, "the card's seed-count rule is not met but the paired 95% CI over seeds does not refute it"


def mean_and_ci(values) -> list[float]:
    """[mean, lo, hi] of the Student-t 95% interval over seeds (lo = hi = mean for one seed)."""
    v = _a(values)
    m, h = mean_ci(v)
    return [float(m), float(m - h), float(m + h)]


# ----------------------------------------------------------------------------- controls
def _doubling(doubling: Mapping[str, tuple[float, float]]) -> tuple[dict, list[str]]:
    """The doubling arm of K1/K4: ``doubling``: run name -> (relative move of the held-out objective, move of the
    probe accuracy) when the first seed's model is retrained at twice the steps."""
    numbers, bad = {}, []
    mo, mp = T["K1_max_double_obj_move"], T["K1_max_double_probe_move"]
    for k, (obj, acc) in doubling.items():
        obj, acc = float(obj), float(acc)
        numbers[f"2x steps: {k} objective move"] = obj
        numbers[f"2x steps: {k} probe move (points)"] = 100 * acc
        why = []
        if not obj < mo:
            why.append(f"objective moves {100 * obj:.1f}%" if math.isfinite(obj) else "objective not measured")
        if not abs(acc) < mp:
            why.append(f"probe moves {_pts(acc)} points" if math.isfinite(acc) else "probe not measured")
        if why:
            bad.append(f"{k} ({', '.join(why)})")
    parts = [f"retrained at twice the steps (first seed), still moving by >= {100 * mo:.0f}% (objective) or "
             f">= {100 * mp:.0f} points (probe): {', '.join(bad)}"] if bad else []
    return numbers, parts


DOUBLING_THRESHOLD = (f"retrained at 2x steps (first seed): held-out objective moves < "
                      f"{100 * T['K1_max_double_obj_move']:.0f}% and probe < {100 * T['K1_max_double_probe_move']:.0f}"
                      f" points (every pretrained method)")


def k1(recon_r2: Mapping[str, Sequence[float]], doubling: Mapping[str, tuple[float, float]]) -> dict:
    """K1 (Lorenz). ``recon_r2``: run name ("PULSE") -> held-out reconstruction R^2 per run (PULSE, MAE, DSVAE);
    ``doubling``: run name -> (objective move, probe move) of the first seed retrained at twice the steps (every
    pretrained method; issue 42: under the one-cycle schedule a "last 10% of steps" rule passes by construction,
    since those steps carry 0.3% of the summed learning rate)."""
    lo_r2 = {k: float(np.min(_a(v))) for k, v in recon_r2.items()}
    bad_r2 = [f"{k} (min over runs {v:.3f})" for k, v in lo_r2.items() if not v >= T["K1_min_recon_r2"]]
    parts = []
    if bad_r2:
        parts.append(f"held-out reconstruction R² below {T['K1_min_recon_r2']:g}: {', '.join(bad_r2)}")
    numbers = {f"recon R2 {k} (min)": v for k, v in lo_r2.items()}
    dn, dp = _doubling(doubling)
    numbers.update(dn)
    parts += dp
    ok = bool(recon_r2) and bool(doubling) and not parts
    return dict(holds=ok, numbers=numbers, reason="; ".join(parts) or ("nothing measured" if not ok else ""),
                threshold=f"min recon R² >= {T['K1_min_recon_r2']:g} (PULSE, MAE, DSVAE); {DOUBLING_THRESHOLD}")


def k2(acc: Mapping[str, Mapping[str, Sequence[float]]], random: Mapping[str, Sequence[float]]) -> dict:
    """``acc[dataset][method]``: probe accuracy per seed; ``random[dataset]``: the random-init encoder's, per seed
    (the same seeds, in the same order). Only label-free methods count."""
    numbers, fails, best_txt = {}, [], []
    for data, methods in acc.items():
        r = _a(random[data])
        best = None
        for m, v in methods.items():
            if m not in LABEL_FREE:
                continue
            cmp = compare_paired(_a(v), r)
            if best is None or cmp.mean_diff > best[1].mean_diff:
                best = (m, cmp)
        if best is None:
            fails.append(f"{data}: no label-free method")
            continue
        m, cmp = best
        ok = cmp.mean_diff >= T["K2_min_lift"] and cmp.better
        numbers[f"{data} random init"] = float(r.mean())
        numbers[f"{data} best label-free"] = NAMES.get(m, m)
        numbers[f"{data} lift (points)"] = 100 * cmp.mean_diff
        numbers[f"{data} lift ci95"] = [cmp.ci_lo, cmp.ci_hi]
        txt = (f"{data}: the best label-free encoder, {NAMES.get(m, m)}, is {_pts(cmp.mean_diff)} points above "
               f"random init (95% CI {_ci(cmp)} over {cmp.n} seeds)")
        best_txt.append(txt)
        if not ok:
            fails.append(txt)
    ok = bool(acc) and not fails
    return dict(holds=ok, numbers=numbers,
                reason=("; ".join(fails) + f" — needs >= {100 * T['K2_min_lift']:.0f} points with the CI above 0")
                if fails else "",
                threshold=f"on each dataset, max over label-free methods of (acc − random) >= "
                          f"{100 * T['K2_min_lift']:.0f} points, paired CI > 0")


def k4(ae_r2: Mapping[str, Sequence[float]], vs_blind: Mapping[str, tuple[Sequence[float], Sequence[float]]],
       doubling: Mapping[str, tuple[float, float]],
       swap: Mapping[str, tuple[Sequence[float], Sequence[float], Sequence[float]]] | None = None) -> dict:
    """K4 (ECG). ``ae_r2``: autoencoder name ("DSVAE") -> held-out reconstruction R^2 per run (>= 0.5);
    ``vs_blind``: "PULSE"/"MAE" -> (the model's held-out R^2 per seed, the system-blind predictor's per seed, same
    seeds in the same order; paired CI of the gap must lie above 0); ``doubling`` as :func:`k1`;
    ``swap``: "PULSE" -> (own, same-class, other-class code-swap error per seed), reported only."""
    numbers, parts = {}, []
    for k, v in ae_r2.items():
        lo = float(np.min(_a(v)))
        numbers[f"recon R2 {k} (min)"] = lo
        if not lo >= T["K4_min_ae_r2"]:
            parts.append(f"{k}'s held-out reconstruction R² {lo:.3f} < {T['K4_min_ae_r2']:g}")
    for k, (model, blind) in vs_blind.items():
        cmp = compare_paired(_a(model), _a(blind))
        numbers[f"recon R2 {k}"] = float(_a(model).mean())
        numbers[f"blind R2 {k}"] = float(_a(blind).mean())
        numbers[f"{k} − blind"] = cmp.mean_diff
        numbers[f"{k} − blind ci95"] = [cmp.ci_lo, cmp.ci_hi]
        numbers[f"{k} seeds"] = cmp.n
        if not cmp.better:
            parts.append(f"{k}'s held-out R² {_a(model).mean():.3f} vs the system-blind predictor's "
                         f"{_a(blind).mean():.3f}: gap {cmp.mean_diff:+.3f}, 95% CI {_ci(cmp)} over {cmp.n} seeds "
                         f"({cmp.word}; needs the CI above 0)")
    dn, dp = _doubling(doubling)
    numbers.update(dn)
    parts += dp
    for k, (own, same, other) in (swap or {}).items():
        numbers[f"{k} swap MSE own / same / other"] = [float(_a(own).mean()), float(_a(same).mean()),
                                                       float(_a(other).mean())]
        d = compare_paired(_a(own), _a(other), higher_is_better=False)
        numbers[f"{k} swap other − own ci95"] = [d.ci_lo, d.ci_hi]
    ok = bool(vs_blind) and bool(ae_r2) and bool(doubling) and not parts
    return dict(holds=ok, numbers=numbers, reason="; ".join(parts) or ("nothing measured" if not ok else ""),
                threshold=f"PULSE and MAE R² − system-blind R² paired CI > 0; DSVAE R² >= {T['K4_min_ae_r2']:g}; "
                          f"{DOUBLING_THRESHOLD}")


def k5(acc: Mapping[str, Sequence[float]]) -> dict:
    """Transfer headroom. ``acc``: init ("random", "simclr") -> fine-tuned PPG test accuracy per seed; each must
    have its 95% CI at or below :data:`THRESHOLDS` ``K5_max_ref_acc`` (decided by its interval, not its mean)."""
    numbers, parts = {}, []
    bar = T["K5_max_ref_acc"]
    for k, v in acc.items():
        t = decide_threshold(_a(v), bar, "<=")
        numbers[f"{k} init acc"] = t.estimate
        numbers[f"{k} init acc ci95"] = [t.ci_lo, t.ci_hi]
        if not t.holds:
            parts.append(f"{k} init fine-tunes to {100 * t.estimate:.1f}% (95% CI [{100 * t.ci_lo:.1f}, "
                         f"{100 * t.ci_hi:.1f}] over {t.n} seeds): {'no headroom below' if t.decided else 'within noise of'}"
                         f" the {100 * bar:g}% bar")
    ok = bool(acc) and not parts
    return dict(holds=ok, numbers=numbers, reason="; ".join(parts) or ("nothing measured" if not ok else ""),
                threshold=f"95% CI of each reference init's fine-tuned accuracy <= {bar:g}")


def k3(own: Sequence[float], same: Sequence[float], other: Sequence[float]) -> dict:
    """PULSE-oracle's code-swap errors per seed: code from the window itself, from a same-class window of another
    trajectory, from a window of another class."""
    own, same, other = _a(own), _a(same), _a(other)
    if same.size == 0:
        return dict(holds=False, numbers={"seeds": 0}, reason="no PULSE-oracle in this run",
                    threshold="paired CI of (other-class − same-class swap error) > 0")
    cmp = compare_paired(same, other, higher_is_better=False)
    numbers = {"oracle swap MSE own / same / other": [float(own.mean()), float(same.mean()), float(other.mean())],
               "other − same": cmp.mean_diff, "other − same ci95": [cmp.ci_lo, cmp.ci_hi], "seeds": cmp.n,
               "other / same": float(other.mean() / same.mean())}
    reason = (f"an other-class code raises PULSE-oracle's error over a same-class code by {cmp.mean_diff:+.4f} "
              f"(95% CI {_ci(cmp)}, {cmp.n} seeds): {cmp.word}")
    return dict(holds=cmp.better, numbers=numbers, reason="" if cmp.better else reason,
                threshold="paired CI of (other-class − same-class swap error) > 0")


# ----------------------------------------------------------------------------- claims
def c1(acc: Mapping[str, Sequence[float]], note: str | None = None) -> dict:
    """Lorenz probe accuracy per seed for 'pulse', 'pulse_oracle', 'dsvae', 'mae', 'simclr'."""
    p = _a(acc["pulse"])
    n = p.size
    rivals = [m for m in ("dsvae", "mae", "simclr") if m in acc]
    R = np.stack([_a(acc[m]) for m in rivals]) if rivals else np.full((1, n), np.nan)
    wins = int((p >= R.max(axis=0)).sum())
    need = _need(n, T["seed_frac_c1_c3"])
    cmps = {m: compare_paired(p, _a(acc[m])) for m in rivals}
    numbers = {f"acc {NAMES[m]}": float(_a(v).mean()) for m, v in acc.items()}
    numbers["seeds PULSE >= all rivals"] = f"{wins}/{n}"
    for m, c in cmps.items():
        numbers[f"PULSE − {NAMES[m]}"] = c.mean_diff
        numbers[f"PULSE − {NAMES[m]} ci95"] = [c.ci_lo, c.ci_hi]
    # part 1: PULSE >= each rival
    h1, why1 = _decide(wins >= need and len(rivals) == 3, all(c.better for c in cmps.values()) and len(rivals) == 3,
                       any(c.worse for c in cmps.values()))
    parts = [f"PULSE ≥ every rival in {wins}/{n} seeds (needs {need}); "
             + ", ".join(f"PULSE − {NAMES[m]} = {_pts(c.mean_diff)} points {_ci(c)} ({c.word})"
                         for m, c in cmps.items())]
    # part 2: oracle >= PULSE - 0.02
    h2, why2 = True, None
    if "pulse_oracle" in acc:
        o = compare_paired(_a(acc["pulse_oracle"]), p)
        numbers["oracle − PULSE"] = o.mean_diff
        numbers["oracle − PULSE ci95"] = [o.ci_lo, o.ci_hi]
        mg = T["C1_oracle_margin"]
        h2 = True if o.no_worse_than(mg) else (False if o.ci_hi < -mg else None)
        why2 = None if h2 is not None else "the oracle's CI straddles −0.02"
        parts.append(f"oracle − PULSE = {_pts(o.mean_diff)} points {_ci(o)} (needs CI above −{100 * mg:.0f})")
    else:
        h2, why2 = None, "no PULSE-oracle in this run"
    holds = True if (h1 and h2) else (False if (h1 is False or h2 is False) else None)
    reason = "; ".join(parts)
    inconc = note or (None if holds is not None else "; ".join(w for w in (why1, why2) if w) + f" ({reason})")
    return dict(holds=holds, numbers=numbers, reason=reason, inconclusive=inconc, needs=NEEDS["C1"],
                threshold="PULSE >= DSVAE, MAE, SimCLR in >= 2/3 seeds with paired CI > 0; "
                          "oracle − PULSE CI above −0.02")


def c2(r2: Mapping[str, Mapping[str, Sequence[float]]], note: str | None = None) -> dict:
    """``r2[method][target]`` per seed, targets 'state', 'x_t0', 'x_mean', 'log_rho'; methods 'pulse',
    'dsvae', 'mae' (others are reported only)."""
    rivals = [m for m in ("dsvae", "mae") if m in r2]
    numbers = {}
    for m in r2:
        for t in ("state", "x_t0", "x_mean", "log_rho"):
            if t in r2[m]:
                numbers[f"R2 {t} {NAMES.get(m, m)}"] = mean_and_ci(r2[m][t])
    mg = T["C2_log_rho_margin"]
    sup, ref, parts = [], [], []
    for m in rivals:
        a = compare_paired(_a(r2["pulse"]["state"]), _a(r2[m]["state"]), higher_is_better=False)
        b = compare_paired(_a(r2["pulse"]["log_rho"]), _a(r2[m]["log_rho"]))
        numbers[f"state: {NAMES[m]} − PULSE"] = [a.mean_diff, a.ci_lo, a.ci_hi]
        numbers[f"log rho: PULSE − {NAMES[m]}"] = [b.mean_diff, b.ci_lo, b.ci_hi]
        sup += [a.better, b.no_worse_than(mg)]
        ref += [a.worse, b.ci_hi < -mg]
        parts.append(f"R²(state) {NAMES[m]} − PULSE = {a.mean_diff:+.3f} {_ci(a)} ({a.word}); "
                     f"R²(log ρ) PULSE − {NAMES[m]} = {b.mean_diff:+.3f} {_ci(b)}")
    ok = len(rivals) == 2
    holds = True if (ok and all(sup)) else (False if any(ref) else None)
    reason = "; ".join(parts) if parts else "no DSVAE or MAE in this run"
    inconc = note or (None if holds is not None else
                      f"the paired CIs over seeds neither support nor refute it ({reason})")
    return dict(holds=holds, numbers=numbers, reason=reason, inconclusive=inconc, needs=NEEDS["C2"],
                threshold="R²(state) PULSE < DSVAE and < MAE (paired CI); R²(log ρ) PULSE − rival CI above −0.02")


def c3(f1: Mapping[str, Sequence[float]], note: str | None = None) -> dict:
    """ECG macro-F1 per seed for 'pulse' and its rivals 'simclr', 'ts2vec', 'mae', 'dsvae' (others reported)."""
    p = _a(f1["pulse"])
    n = p.size
    rivals = [m for m in ("simclr", "ts2vec", "mae", "dsvae") if m in f1]
    numbers = {f"F1 {NAMES.get(m, m)}": float(_a(v).mean()) for m, v in f1.items()}
    if not rivals:
        return dict(holds=None, numbers=numbers, reason="", inconclusive=note or "no rival in this run",
                    needs=NEEDS["C3"], threshold="PULSE macro-F1 >= best rival − 0.01")
    best = np.stack([_a(f1[m]) for m in rivals]).max(axis=0)
    mg = T["C3_margin"]
    wins = int((p >= best - mg).sum())
    need = _need(n, T["seed_frac_c1_c3"])
    cmp = compare_paired(p, best)
    numbers.update({"seeds within 0.01 of best": f"{wins}/{n}", "PULSE − best rival": cmp.mean_diff,
                    "PULSE − best rival ci95": [cmp.ci_lo, cmp.ci_hi]})
    holds, why = _decide(wins >= need and len(rivals) == 4, cmp.no_worse_than(mg), cmp.ci_hi < -mg)
    reason = (f"PULSE is within 0.01 of the best rival in {wins}/{n} seeds (needs {need}); PULSE − best rival = "
              f"{cmp.mean_diff:+.3f} macro-F1, 95% CI {_ci(cmp)} (needs the CI above −{mg:g})")
    return dict(holds=holds, numbers=numbers, reason=reason, inconclusive=note or (why and f"{why} ({reason})"),
                needs=NEEDS["C3"], threshold="PULSE >= best rival − 0.01 in >= 2/3 seeds; paired CI above −0.01")


def c4(probe: Mapping[float, Sequence[float]], supervised: Mapping[float, Sequence[float]],
       n_labels: Mapping[float, int] | None = None, note: str | None = None) -> dict:
    """Per label fraction (0.01, 0.05): per-seed accuracy (mean over label draws) of the PULSE probe and of the
    encoder trained from scratch on the same labels."""
    numbers, parts, sup, ref, rule = {}, [], [], [], []
    fracs = [f for f in (0.01, 0.05) if f in probe and f in supervised]
    for f in fracs:
        p, s = _a(probe[f]), _a(supervised[f])
        wins = int((p > s).sum())
        cmp = compare_paired(p, s)
        numbers[f"{f:.0%} PULSE probe"] = float(p.mean())
        numbers[f"{f:.0%} supervised"] = float(s.mean())
        numbers[f"{f:.0%} seeds PULSE wins"] = f"{wins}/{p.size}"
        numbers[f"{f:.0%} diff ci95"] = [cmp.ci_lo, cmp.ci_hi]
        if n_labels:
            numbers[f"{f:.0%} labels"] = int(n_labels[f])
        rule.append(wins == p.size)
        sup.append(cmp.better)
        ref.append(cmp.worse)
        lab = f" ({int(n_labels[f])} labels)" if n_labels else ""
        parts.append(f"at {f:.0%}{lab} the PULSE probe wins {wins}/{p.size} seeds, probe − supervised = "
                     f"{_pts(cmp.mean_diff)} points {_ci(cmp)} ({cmp.word})")
    if len(fracs) < 2:
        return dict(holds=None, numbers=numbers, reason="", needs=NEEDS["C4"],
                    inconclusive=note or "C4 needs label fractions 0.01 and 0.05",
                    threshold="probe > supervised at 1% and 5%, 3/3 seeds, paired CI > 0")
    holds = True if (all(rule) and all(sup)) else (False if any((not r) and x for r, x in zip(rule, ref)) else None)
    reason = "; ".join(parts)
    return dict(holds=holds, numbers=numbers, reason=reason, needs=NEEDS["C4"],
                inconclusive=note or (None if holds is not None else
                                      f"the seed rule and the paired CIs do not agree ({reason})"),
                threshold="probe > supervised at 1% and 5% in every seed, paired CI > 0")


def c5(acc: Mapping[str, Sequence[float]], n_test_subjects: int, note: str | None = None) -> dict:
    """Fine-tuned PPG accuracy per seed for inits 'pulse', 'random', 'simclr'; ``n_test_subjects`` per seed."""
    p = _a(acc["pulse"])
    numbers = {f"acc {k} init": float(_a(v).mean()) for k, v in acc.items()}
    numbers["PPG test subjects"] = int(n_test_subjects)
    cmps = {k: compare_paired(p, _a(acc[k])) for k in ("random", "simclr") if k in acc}
    for k, c in cmps.items():
        numbers[f"PULSE − {k} init"] = c.mean_diff
        numbers[f"PULSE − {k} init ci95"] = [c.ci_lo, c.ci_hi]
    reason = "; ".join(f"PULSE init − {k} init = {_pts(c.mean_diff)} points {_ci(c)} ({c.word})"
                       for k, c in cmps.items())
    why = note
    if why is None and n_test_subjects < T["C5_min_test_subjects"]:
        why = (f"underpowered: {n_test_subjects} PPG test subjects per seed (< {T['C5_min_test_subjects']})")
    holds = True if (len(cmps) == 2 and all(c.better for c in cmps.values())) else (
        False if any(c.worse for c in cmps.values()) else None)
    if why is None and holds is None:
        why = f"no measurable difference ({reason})"
    return dict(holds=holds, numbers=numbers, reason=reason, inconclusive=why, needs=NEEDS["C5"],
                threshold="PULSE init better than random init and than SimCLR init (paired CI > 0)")


def c6(drop_pulse: float, drop_dsvae: float, diff: float, lo: float, hi: float, levels: tuple[float, float],
       note: str | None = None, n_runs: int = 2) -> dict:
    """Accuracy drops from the lowest to the highest noise level (mean over ``n_runs`` training runs per method and
    level) and the two-level bootstrap 95% CI (training runs x test windows) of drop(PULSE) − drop(DSVAE)."""
    numbers = {"drop PULSE": drop_pulse, "drop DSVAE": drop_dsvae, "drop diff (PULSE − DSVAE)": diff,
               "drop diff 95% CI": [lo, hi], "training runs per method and level": int(n_runs)}
    holds = True if hi < 0 else (False if lo > 0 else None)
    reason = (f"from noise {levels[0]:g} to {levels[1]:g} PULSE's accuracy drops {_pts(drop_pulse)} points and "
              f"DSVAE's {_pts(drop_dsvae)} (mean of {n_runs} training runs each); the difference {_pts(diff)} points "
              f"has a bootstrap 95% CI [{_pts(lo)}, {_pts(hi)}] over training runs and test windows")
    if n_runs < 2 and not note:
        return dict(holds=None, numbers={**numbers, "condition met": holds}, reason=reason, needs=NEEDS["C6"],
                    inconclusive=f"one training run per method and level: its test-window interval misses the "
                                 f"run-to-run spread ({reason})",
                    threshold="two-level bootstrap CI of drop(PULSE) − drop(DSVAE) below 0")
    inconc = note or (None if holds is not None else f"the bootstrap CI contains 0 ({reason})")
    return dict(holds=holds, numbers=numbers, reason=reason, inconclusive=inconc, needs=NEEDS["C6"],
                threshold="two-level bootstrap CI of drop(PULSE) − drop(DSVAE) below 0")
