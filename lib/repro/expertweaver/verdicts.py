"""Chapter 05's claims and controls, and the functions that decide them from measured numbers.

Every function returns the keyword arguments of :meth:`repro.common.Ledger.control` (controls: ``holds``,
``threshold``, ``numbers``, ``reason``) or :meth:`~repro.common.Ledger.record` (claims: also ``inconclusive`` and
``needs``), so the notebook writes ``ledger.record("C1", **verdicts.c1(...))``. Reasons are sentences computed from
the numbers; thresholds are the card's (:data:`THRESHOLDS`), never tuned.

Rules.

* Controls (card, *Controls and risks*). **K1**: the dense model is trained (held-out loss <= 0.75 × the domain's
  unigram byte entropy, every domain) and every routed conversion with all experts on reproduces its logits to
  1e-4. **K2a/b/c** (one per budget 50 / 25 / 12.5 %): headroom — random-split minus oracle held-out loss >= 0.05
  nats/byte with its paired 95 % CI above 0 — and matched budgets — a forward hook counts every method's active
  neurons per token within ρ_b·d_ff ± 1 % of d_ff. **K3**: every downcycling init, in every seed, loses >= 0.05
  nats/byte of validation loss over continued training. **K4**: a contiguous 25 % slice of an FFN runs >= 1.3 ×
  faster than the whole FFN at batch 1. **K5**: the layer-adaptive shared sizes differ from the uniform size by
  >= 5 % of d_ff in at least one layer (otherwise C3 compares a method with itself).
* Seed-count rules under noise (CONTRIBUTING, issue 41): where the card asks "in all 3 seeds", a comparison holds
  only when the count is met *and* :func:`repro.common.compare_paired` says ``better``; it fails only when the count
  is missed *and* the paired CI says ``worse``; anything else (a count met, or missed, inside seed noise) is
  ``inconclusive``. A claim made of several comparisons fails if any fails, else is inconclusive if any is, else
  holds. With n = 3 seeds the t-multiplier is 4.3, and the seeds vary only the conversion (calibration sample,
  k-means init, random split) of one dense model.
* Thresholds with uncertainty (issue 41): C1's per-layer universal fractions (>= 5 %) and their spread across layers
  (>= 5 points) are decided on percentile-bootstrap 95 % intervals over the calibration sequences (resampled within
  each domain, the same draws for every layer); C4 compares the inits with a paired CI over seeds at every checkpoint;
  C5's latency speed-up (>= 1.3 ×) is decided on a bootstrap interval over the timing repeats. Each holds when its
  interval clears the bar, fails when it lies wholly on the other side, and is inconclusive otherwise.
* C2 is split by budget (C2a 50 %, C2b 25 %, C2c 12.5 %): the card expects it at 50 %, "likely" at 25 %, and its
  risks add 12.5 % because at 50 % every method may sit within noise of dense.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from repro.common import compare_paired
from repro.common.stats import threshold_from_ci

THRESHOLDS = {
    "K1_entropy_frac": 0.75,     # dense held-out loss <= 0.75 × unigram entropy, every domain
    "K1_logit_tol": 1e-4,        # all experts on: max |Δ logit| <= 1e-4
    "K2_headroom": 0.05,         # random split − oracle >= 0.05 nats/byte, CI > 0
    "K2_budget_tol": 0.01,       # active count within ρ_b·d_ff ± 1 % of d_ff per token
    "K3_min_drop": 0.05,         # every init loses >= 0.05 nats/byte over continued training
    "K4_min_speedup": 1.3,       # 25 % slice >= 1.3 × faster than the full FFN
    "K5_min_diff": 0.05,         # adaptive |U_l| differs from uniform by >= 5 % of d_ff in some layer
    "C1_universal": 0.9,         # active on >= 90 % of tokens in every domain
    "C1_min_frac": 0.05,         # >= 5 % universal neurons ...
    "C1_layer_share": 0.5,       # ... in at least half of the layers
    "C1_layer_spread": 0.05,     # universal fraction differs across layers by >= 5 points
    "C1_null_q": 95,             # median selectivity > 95th percentile of the permutation null
    "C5_speedup": 1.3,           # latency speed-up at 25 % active
    "C5_mac_tol": 0.01,          # neuron MACs / dense MACs within ρ_b ± 1 point
}
T = THRESHOLDS
BUDGET_IDS = {0.5: "a", 0.25: "b", 0.125: "c"}
#: The card's budgets (its parameter table); C3 and K5 are decided at these. At the 12.5 % budget that the card's risks
#: add for C2, the card's clip |U_l| <= ρ_b·d_ff − |e_l| leaves the shared sizes no room to differ between layers.
CARD_BUDGETS = (0.5, 0.25)

CLAIMS = {
    "C1": "The structure exists: universal neurons (active on >= 90 % of tokens in each of the three domains) make "
          "up >= 5 % of neurons in at least half of the layers of the trained dense model and 0 % at random init; the "
          "universal fraction differs across layers by >= 5 points; the specialised neurons' median selectivity "
          "exceeds the 95th percentile of a domain-label permutation null.",
    "C2a": "Training-free pruning at 50 % active: ExpertWeaver's held-out loss is lower than MoEfication (both "
           "routers), random split and static pruning, in each domain, for all conversion seeds.",
    "C2b": "Training-free pruning at 25 % active: as C2a.",
    "C2c": "Training-free pruning at 12.5 % active (added by the card's risks): as C2a.",
    "C3": "Layer-adaptive: layer-adaptive shared sizes beat a uniform shared fraction at the same total budget "
          "(held-out loss, all conversion seeds), at each of the card's budgets (50 %, 25 %).",
    "C4": "Downcycling: as the init of a sparse MoE (1 shared + top-2 of 16 routed, about 20 % active), continued "
          "training gives lower mean validation loss than random-split and MoEfication inits at every checkpoint "
          "(step 0 included), and the gap at the end is > 0 in all seeds (by the seed-count rule, with its paired CI "
          "above 0).",
    "C5": "Efficiency: FFN multiply-adds per token fall proportionally to the active budget (counted exactly), and "
          "measured CPU latency at batch 1 improves by >= 1.3 × at 25 % active.",
}

CONTROLS = {
    "K1": "A trained dense model that converts exactly: held-out loss <= 0.75 × unigram byte entropy in every "
          "domain, and with all experts on every routed conversion reproduces the dense logits to <= 1e-4.",
    "K2a": "Headroom and matched budgets at 50 %: random-split − oracle loss >= 0.05 nats/byte (paired CI > 0); "
           "every method's per-token active count within ρ_b·d_ff ± 1 % of d_ff.",
    "K2b": "Headroom and matched budgets at 25 % (as K2a).",
    "K2c": "Headroom and matched budgets at 12.5 % (as K2a).",
    "K3": "Continued training moves the models: every init loses >= 0.05 nats/byte of validation loss from step 0 "
          "to the last step, in every seed.",
    "K4": "The timer can see a speed-up: a contiguous 25 % slice of the FFN runs >= 1.3 × faster than the full FFN "
          "at batch 1.",
    "K5": "Layer adaptivity is exercised: the layer-adaptive shared size differs from the uniform size by >= 5 % of "
          "d_ff in at least one layer, at each of the card's budgets (50 %, 25 %).",
}


def _join(parts: Sequence[str]) -> str:
    return "; ".join(p for p in parts if p)


# ----------------------------------------------------------------------------- controls

def k1(dense_loss: Mapping[str, float], entropy: Mapping[str, float], max_logit_diff: Mapping[str, float]) -> dict:
    """Dense held-out loss and unigram entropy per domain; max |Δ logit| with all experts on, per method."""
    bad = [f"{d}: dense loss {dense_loss[d]:.3f} > {T['K1_entropy_frac']} × entropy {entropy[d]:.3f} = "
           f"{T['K1_entropy_frac'] * entropy[d]:.3f}" for d in entropy
           if not dense_loss[d] <= T["K1_entropy_frac"] * entropy[d]]
    bad += [f"{m} with all experts on differs from dense by {v:.2e} > {T['K1_logit_tol']:g}"
            for m, v in max_logit_diff.items() if not v <= T["K1_logit_tol"]]
    numbers = {**{f"dense loss {d}": dense_loss[d] for d in entropy},
               **{f"loss/entropy {d}": dense_loss[d] / entropy[d] for d in entropy},
               "max |Δ logit| (all on)": max(max_logit_diff.values()) if max_logit_diff else float("nan")}
    return dict(holds=not bad, threshold=f"loss <= {T['K1_entropy_frac']} × unigram entropy (each domain); "
                f"max |Δ logit| <= {T['K1_logit_tol']:g}", numbers=numbers, reason=_join(bad))


def k2(budget: float, random_loss: Sequence[float], oracle_loss: Sequence[float],
       active_range: Mapping[str, tuple[int, int]], d_ff: int) -> dict:
    """Per-seed mean held-out loss of random split and oracle at ``budget``; per method the (min, max) active
    neurons per token over all layers, tokens and seeds."""
    cmp = compare_paired(oracle_loss, random_loss, higher_is_better=False)     # diff = random − oracle
    B = budget * d_ff
    tol = T["K2_budget_tol"] * d_ff
    off = {m: r for m, r in active_range.items() if not (B - tol <= r[0] and r[1] <= B + tol)}
    parts = []
    if not (cmp.mean_diff >= T["K2_headroom"] and cmp.ci_lo > 0):
        parts.append(f"headroom random − oracle = {cmp.mean_diff:+.3f} nats/byte, 95 % CI [{cmp.ci_lo:+.3f}, "
                     f"{cmp.ci_hi:+.3f}] (needs >= {T['K2_headroom']} with CI > 0)")
    parts += [f"{m} activates {lo}–{hi} neurons per token, outside {B:.1f} ± {tol:.2f}" for m, (lo, hi) in off.items()]
    return dict(holds=not parts,
                threshold=f"random − oracle >= {T['K2_headroom']} nats/byte, CI > 0; active count in ρ_b·d_ff ± 1 % d_ff",
                numbers={"budget": budget, "random − oracle": cmp.mean_diff, "ci95": [cmp.ci_lo, cmp.ci_hi],
                         "seeds": cmp.n, "active range": {m: list(r) for m, r in active_range.items()}},
                reason=_join(parts))


def k3(curves: Mapping[str, np.ndarray]) -> dict:
    """Per init, validation loss [seeds, checkpoints] of continued training."""
    drops = {m: np.asarray(c)[:, 0] - np.asarray(c)[:, -1] for m, c in curves.items()}
    bad = [f"{m} drops only {d.min():.3f} nats/byte (seed {int(d.argmin())})" for m, d in drops.items()
           if not d.min() >= T["K3_min_drop"]]
    return dict(holds=not bad, threshold=f"step-0 minus last-step validation loss >= {T['K3_min_drop']} "
                "nats/byte for every init and seed",
                numbers={f"{m} drop (min over seeds)": float(d.min()) for m, d in drops.items()},
                reason=_join(bad))


def k4(full_s: float, slice_s: float, where: str) -> dict:
    ratio = full_s / slice_s
    return dict(holds=ratio >= T["K4_min_speedup"],
                threshold=f"full / 25 % slice >= {T['K4_min_speedup']} ×",
                numbers={"FFN": where, "full": f"{1e6 * full_s:.1f} µs", "25 % slice": f"{1e6 * slice_s:.1f} µs",
                         "speed-up": f"{ratio:.2f} ×"},
                reason=f"the 25 % slice runs only {ratio:.2f} × faster than the full FFN ({where}): at this size "
                       "per-call overhead, not arithmetic, sets the time")


def k5(adaptive: Mapping[float, Sequence[int]], uniform: Mapping[float, Sequence[int]], d_ff: int) -> dict:
    """Shared sizes per layer at each budget, layer-adaptive and uniform."""
    diffs = {b: int(np.max(np.abs(np.asarray(adaptive[b]) - np.asarray(uniform[b])))) for b in adaptive}
    need = T["K5_min_diff"] * d_ff
    bad = [f"at {100 * b:g} % the largest layer difference is {v} neurons < {need:.1f}" for b, v in diffs.items()
           if not v >= need] or ([] if diffs else ["none of the card's budgets (50 %, 25 %) was run"])
    return dict(holds=not bad, threshold=f"max_l |U_l adaptive − U_l uniform| >= {100 * T['K5_min_diff']:g} % of "
                "d_ff at every budget",
                numbers={**{f"{100 * b:g} % adaptive |U_l|": list(adaptive[b]) for b in adaptive},
                         **{f"{100 * b:g} % uniform |U_l|": list(uniform[b]) for b in uniform},
                         **{f"{100 * b:g} % max diff": v for b, v in diffs.items()}},
                reason=_join(bad))


# ----------------------------------------------------------------------------- claims

def c1(universal_frac: Sequence[float], universal_frac_init: Sequence[float], selectivity: float,
       null_q95: float, extra: Mapping | None = None, universal_boot: np.ndarray | None = None) -> dict:
    """Per-layer universal fractions (trained and random init); the specialised neurons' median selectivity
    (pooled over layers) and the 95th percentile of its label-permutation null.

    ``universal_boot`` [n_boot, n_layers]: bootstrap draws of the trained fractions over calibration sequences
    (:func:`repro.expertweaver.profile.universal_fraction_bootstrap`). Issue 41: each layer's fraction is >= 5 % when
    its 95 % interval lies at or above 5 % and below it when the interval lies wholly below; the "at least half of the
    layers" part holds when enough layers are clearly above, fails when so many are clearly below that the count
    cannot be met, else is inconclusive. The spread (max − min over layers) is decided on its interval over the same
    draws. Without draws these two parts are inconclusive (no interval). The init part (exactly 0 %) and the
    selectivity part (a permutation test) are decided as before. All parts hold -> holds; one fails -> fails."""
    u, u0 = np.asarray(universal_frac, float), np.asarray(universal_frac_init, float)
    need = int(np.ceil(T["C1_layer_share"] * u.size))
    spread = float(u.max() - u.min())
    if universal_boot is not None and np.asarray(universal_boot).shape[0] >= 2:
        B = np.asarray(universal_boot, float)
        lo, hi = np.percentile(B, [2.5, 97.5], axis=0)
        s_lo, s_hi = np.percentile(B.max(1) - B.min(1), [2.5, 97.5])
    else:
        lo, hi = np.full(u.size, -np.inf), np.full(u.size, np.inf)
        s_lo, s_hi = -np.inf, np.inf
    layer_tests = [threshold_from_ci(u[i], lo[i], hi[i], T["C1_min_frac"], ">=") for i in range(u.size)]
    n_clear = sum(t.word == "holds" for t in layer_tests)
    n_below = sum(t.word == "fails" for t in layer_tests)
    n_big = int((u >= T["C1_min_frac"]).sum())
    share_word = "holds" if n_clear >= need else "fails" if u.size - n_below < need else "inconclusive"
    spread_test = threshold_from_ci(spread, s_lo, s_hi, T["C1_layer_spread"], ">=")
    init_ok, sel_ok = bool(u0.max() == 0), bool(selectivity > null_q95)
    ci_txt = ", ".join(f"{100 * a:.1f} [{100 * b:.1f}, {100 * c:.1f}]" for a, b, c in zip(u, lo, hi))
    share_txt = (f"universal >= {100 * T['C1_min_frac']:g} % clearly in {n_clear} of {u.size} layers, clearly below in "
                 f"{n_below} (needs {need}; % by layer with 95 % CI: {ci_txt})")
    spread_txt = (f"universal fraction spans {100 * spread:.1f} points across layers (95 % CI [{100 * s_lo:.1f}, "
                  f"{100 * s_hi:.1f}], needs >= {100 * T['C1_layer_spread']:g})")
    init_txt = (f"no universal neurons at random init" if init_ok else
                f"random init has universal neurons (max {100 * u0.max():.1f} %)")
    sel_txt = (f"specialised median selectivity {selectivity:.3f} {'>' if sel_ok else '<='} null 95th percentile "
               f"{null_q95:.3f}")
    parts = [(share_txt, share_word), (spread_txt, spread_test.word), (init_txt, "holds" if init_ok else "fails"),
             (sel_txt, "holds" if sel_ok else "fails")]
    words = [w for _, w in parts]
    word = "fails" if "fails" in words else "holds" if all(w == "holds" for w in words) else "inconclusive"
    met = [t for t, w in parts if w == "holds"]
    if word == "holds":
        reason = "all four parts hold: " + _join(met)
    elif word == "fails":
        reason = _join([t for t, w in parts if w == "fails"]) + (f" (met: {_join(met)})" if met else "")
    else:
        reason = ("within noise of the bar: " + _join([t for t, w in parts if w == "inconclusive"])
                  + (f" (met: {_join(met)})" if met else ""))
    numbers = {"universal % by layer": [100 * x for x in u], "universal % ci95 by layer":
               [[100 * a, 100 * b] for a, b in zip(lo, hi)], "layers >= 5 % (point)": n_big,
               "layers clearly >= 5 %": n_clear, "layers clearly < 5 %": n_below,
               "spread (points)": 100 * spread, "spread ci95 (points)": [100 * s_lo, 100 * s_hi],
               "init universal % by layer": [100 * x for x in u0], "specialised median selectivity": selectivity,
               "null q95": null_q95, **(extra or {})}
    return dict(holds=None if word == "inconclusive" else word == "holds",
                inconclusive=reason if word == "inconclusive" else None,
                threshold="universal >= 5 % in >= half the layers, 0 % at init; spread >= 5 points (each by its 95 % "
                "bootstrap CI over calibration sequences); selectivity > null q95",
                numbers=numbers, reason=reason, needs=("K1",))


def seed_rule(a: Sequence[float], b: Sequence[float]) -> tuple[str, dict]:
    """Lower-is-better comparison of A against B under the card's "all seeds" count plus the paired CI (issue 41):
    'holds' when the count is met and the CI says ``better``, 'fails' when the count is missed and the CI says
    ``worse``, else 'inconclusive'. Returns (state, numbers)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    wins = int((a < b).sum())
    cmp = compare_paired(a, b, higher_is_better=False)
    met = wins == a.size
    state = "holds" if met and cmp.better else "fails" if not met and cmp.worse else "inconclusive"
    return state, {"wins": f"{wins}/{a.size}", "met": met, "diff": cmp.mean_diff, "ci": [cmp.ci_lo, cmp.ci_hi],
                   "word": cmp.word}


def _aggregate(results: Mapping[str, tuple[str, dict]], what: str) -> tuple[bool | None, str | None, str]:
    failed = [k for k, (s, _) in results.items() if s == "fails"]
    noisy = [k for k, (s, _) in results.items() if s == "inconclusive"]

    def line(k):
        n = results[k][1]
        return f"{k}: {what} lower in {n['wins']} seeds, baseline − ours {n['diff']:+.4f} [{n['ci'][0]:+.4f}, {n['ci'][1]:+.4f}]"

    def why(k):
        n = results[k][1]
        return line(k) + f" (count {'met' if n['met'] else 'missed'}, paired CI: {n['word']})"
    if failed:
        return False, None, (f"{len(failed)} of {len(results)} comparisons miss the seed count with the paired CI on "
                             "the wrong side of 0 — " + _join([line(k) for k in failed]))
    if noisy:
        return None, (f"{len(noisy)} of {len(results)} comparisons are within seed noise (the count and the paired "
                      "95 % CI do not agree on a side) — " + _join([why(k) for k in noisy])), ""
    worst = min(results, key=lambda k: results[k][1]["ci"][0])
    return True, None, f"all {len(results)} comparisons hold; the closest is {line(worst)}"


def c2(budget: float, ours: Mapping[str, np.ndarray], baselines: Mapping[str, Mapping[str, np.ndarray]],
       domains: Sequence[str]) -> dict:
    """Per-seed held-out loss per domain: ``ours[dom]`` and ``baselines[method][dom]`` (arrays over seeds)."""
    res = {f"{m} / {d}": seed_rule(ours[d], baselines[m][d]) for m in baselines for d in domains}
    holds, inconc, reason = _aggregate(res, "ExpertWeaver")
    numbers = {k: f"{v[1]['wins']} seeds, Δ {v[1]['diff']:+.4f} [{v[1]['ci'][0]:+.4f}, {v[1]['ci'][1]:+.4f}]"
               for k, v in res.items()}
    bid = BUDGET_IDS.get(budget, "")
    return dict(holds=holds, inconclusive=inconc, reason=reason, numbers=numbers,
                threshold=f"at {100 * budget:g} % active: lower loss than every baseline in every domain and seed, "
                          "paired CI of baseline − ours > 0",
                needs=("K1", f"K2{bid}"))


def c3(adaptive: Mapping[float, np.ndarray], uniform: Mapping[float, np.ndarray]) -> dict:
    """Per budget, per-seed mean held-out loss of layer-adaptive (ExpertWeaver) and uniform (CMoE-style)."""
    res = {f"{100 * b:g} %": seed_rule(adaptive[b], uniform[b]) for b in adaptive}
    holds, inconc, reason = _aggregate(res, "layer-adaptive") if res else (
        None, "none of the card's budgets (50 %, 25 %) was run", "")
    numbers = {k: f"{v[1]['wins']} seeds, Δ {v[1]['diff']:+.4f} [{v[1]['ci'][0]:+.4f}, {v[1]['ci'][1]:+.4f}]"
               for k, v in res.items()}
    needs = ("K1", *(f"K2{BUDGET_IDS[b]}" for b in adaptive if b in BUDGET_IDS), "K5")
    return dict(holds=holds, inconclusive=inconc, reason=reason, numbers=numbers,
                threshold="uniform − adaptive > 0 in every seed with paired CI > 0, at every budget", needs=needs)


def c4(curves: Mapping[str, np.ndarray], ours: str = "expertweaver") -> dict:
    """Validation loss [seeds, checkpoints] per init (``ours`` and the baselines).

    Against each baseline init (issue 41): "lower at every checkpoint" is a paired comparison over seeds at each
    checkpoint — it holds when every one says ``better``, fails when one says ``worse``, else is inconclusive; "end gap
    > 0 in every seed" is the seed-count rule (holds: count met and the end CI ``better``; fails: count missed and
    ``worse``). The claim holds when every part holds against every baseline, fails when any part fails."""
    mine = np.asarray(curves[ours])
    numbers = {f"{m} mean val (first → last)": [float(np.mean(c[:, 0])), float(np.mean(c[:, -1]))]
               for m, c in curves.items()}
    held, failed, noisy = [], [], []
    for m, c in curves.items():
        if m == ours:
            continue
        c = np.asarray(c)
        cmps = [compare_paired(mine[:, j], c[:, j], higher_is_better=False) for j in range(c.shape[1])]
        worse = [j for j, x in enumerate(cmps) if x.worse]
        unsure = [j for j, x in enumerate(cmps) if not (x.better or x.worse)]
        end_gap = c[:, -1] - mine[:, -1]
        cmp = cmps[-1]
        met = bool((end_gap > 0).all())
        numbers[f"{m} − ours at end"] = float(end_gap.mean())
        numbers[f"{m} end ci95"] = [cmp.ci_lo, cmp.ci_hi]
        numbers[f"{m} − ours per checkpoint"] = [x.mean_diff for x in cmps]
        numbers[f"{m} per-checkpoint ci95"] = [[x.ci_lo, x.ci_hi] for x in cmps]
        numbers[f"{m} end gap > 0"] = f"{int((end_gap > 0).sum())} of {end_gap.size} seeds"
        lo_ci = min(range(len(cmps)), key=lambda j: cmps[j].ci_lo)
        end = (f"end gap {end_gap.mean():+.4f} nats/byte, > 0 in {int((end_gap > 0).sum())} of {end_gap.size} seeds "
               f"(paired CI [{cmp.ci_lo:+.4f}, {cmp.ci_hi:+.4f}], {cmp.word})")
        if worse or (not met and cmp.worse):
            failed.append(f"against {m}: " + _join([
                f"ours higher beyond seed noise at checkpoint(s) {worse}" if worse else "",
                end if not met and cmp.worse else ""]))
        elif unsure or not met or not cmp.better:
            noisy.append(f"against {m}: " + _join([
                (f"the paired CI contains 0 at checkpoint(s) {unsure}" if unsure else ""),
                (end if not met or not cmp.better else "")]))
        else:
            held.append(f"lower than {m} at every checkpoint beyond seed noise (the least clear: checkpoint {lo_ci}, "
                        f"CI [{cmps[lo_ci].ci_lo:+.4f}, {cmps[lo_ci].ci_hi:+.4f}]); {end}")
    thr = ("paired CI over seeds says lower at every checkpoint, and end gap > 0 in every seed with the end CI above 0, "
           "against each baseline init")
    needs = ("K1", "K3")
    if failed:
        return dict(holds=False, inconclusive=None, threshold=thr, numbers=numbers, reason=_join(failed), needs=needs)
    if noisy:
        reason = "within seed noise: " + _join(noisy)
        return dict(holds=None, inconclusive=reason, threshold=thr, numbers=numbers, reason=_join(noisy + held),
                    needs=needs)
    return dict(holds=True, inconclusive=None, threshold=thr, numbers=numbers, reason=_join(held), needs=needs)


def c5(mac_fraction: Mapping[float, float], router_fraction: Mapping[float, float], speedup: float | None,
       latency_numbers: Mapping[str, str], smoke: bool = False, speedup_ci: Sequence[float] | None = None) -> dict:
    """Per budget: FFN MACs of ExpertWeaver / dense (neurons only) and the router's share; the measured batch-1
    speed-up at 25 % (None when not measured) and ``speedup_ci`` = (lo, hi), its bootstrap 95 % interval over the
    timing repeats (:func:`repro.expertweaver.latency.speedup_interval`). The MAC part is an exact count; the
    speed-up part holds when the interval lies at or above 1.3 ×, fails when wholly below, else is inconclusive
    (issue 41; without an interval it is inconclusive)."""
    off = [f"at {100 * b:g} % the neuron MACs are {100 * f:.2f} % of dense" for b, f in mac_fraction.items()
           if abs(f - b) > T["C5_mac_tol"]]
    numbers = {**{f"MACs/dense at {100 * b:g} %": mac_fraction[b] + router_fraction[b] for b in mac_fraction},
               **{f"router share at {100 * b:g} %": router_fraction[b] for b in router_fraction},
               **latency_numbers}
    thr = (f"neuron MACs/dense = ρ_b ± {T['C5_mac_tol']:g}; latency speed-up at 25 % >= {T['C5_speedup']} × "
           "(95 % interval over timing repeats)")
    if smoke or speedup is None:
        return dict(holds=None, threshold=thr, numbers=numbers, needs=("K4",),
                    inconclusive="smoke profile: timings of a tiny FFN are noise and kept out of the determinism "
                                 "check; the full profile decides")
    lo, hi = speedup_ci if speedup_ci is not None else (-np.inf, np.inf)
    test = threshold_from_ci(speedup, lo, hi, T["C5_speedup"], ">=")
    numbers["speed-up at 25 % ci95"] = [float(lo), float(hi)]
    sp = f"the converted FFN at 25 % runs {speedup:.2f} × the dense speed (95 % interval over repeats [{lo:.2f}, {hi:.2f}])"
    if off:
        return dict(holds=False, threshold=thr, numbers=numbers, reason=_join(off + [sp]), needs=("K4",))
    if test.word == "fails":
        return dict(holds=False, threshold=thr, numbers=numbers, needs=("K4",),
                    reason=f"{sp}, wholly below {T['C5_speedup']} ×")
    if test.word == "inconclusive":
        why = (f"MACs fall with the budget, but {sp} contains {T['C5_speedup']} ×: within noise of the bar"
               if speedup_ci is not None else f"MACs fall with the budget; {sp}: no interval over timing repeats")
        return dict(holds=None, threshold=thr, numbers=numbers, reason=why, inconclusive=why, needs=("K4",))
    return dict(holds=True, threshold=thr, numbers=numbers, needs=("K4",),
                reason=f"MACs fall with the budget and {sp}, at or above {T['C5_speedup']} ×")
