"""Chapter 17's claims and controls, and the functions that decide them from measured numbers.

Every function returns the keyword arguments of :meth:`repro.common.Ledger.control` (controls) or
:meth:`~repro.common.Ledger.record` (claims, with ``needs``), so the notebook writes
``ledger.record("C1", **verdicts.c1(...))``. Reasons are sentences computed from the numbers; thresholds are the
card's (:data:`THRESHOLDS`), never tuned.

Rules (card, *Claims* and *Controls and risks*; CONTRIBUTING, *Seed-count rules and noise*).

* The primary metric is the mean held-out response loss: token NLL on the response per domain, averaged over the
  seven domains. Lower is better.
* Seed-count claims (C1 "≥ 4 of 5", C3 "≥ 2 of 3", applied as the fraction 2/3 of the ablation seeds: 4 of 5
  in the full profile) hold only when the count is met *and* the paired 95 % CI
  (:func:`repro.common.compare_paired`) says ``better``; they fail only when the count is missed *and* the CI says
  ``worse`` (issue 41/46: C3 had read "fails" on a seed count while its CI straddled 0); anything else — a count
  met or missed inside seed noise — is ``inconclusive``.
* C4 and C5 (no seed count) hold on ``better``, fail on ``worse`` and are inconclusive on ``no measurable
  difference``.
* C2 (issue 41): per domain, the paired 95 % CI over seeds of tolerance − EP-Order, the tolerance being the card's
  max(1.02 × random, random + 0.02 nats) of the same seed; a domain is *clearly within* when the CI lies above 0
  and *clearly outside* when it lies below 0. Only domains that pass K1's per-domain condition count. Holds when
  >= 5 domains are clearly within; fails when fewer than 5 K1 domains are left that are not clearly outside (with
  all seven passing K1: >= 3 clearly outside); else inconclusive.
* C6 (issue 41): the overhead ratio sum(overhead)/sum(main training) over seeds, decided by its percentile bootstrap
  95 % CI over seeds (overhead and training of a seed resampled together) against 0.25. The smoke profile's few
  steps are timing noise, so it is inconclusive there.
* Fewer than ``min_seeds`` paired seeds: every comparative claim is inconclusive.
* Forgetting (K2, C3), one definition everywhere: the rise of the held-out loss of the first-visited cluster's
  dominant domain from the end of its block in the last epoch to the last step before the next block that
  contains samples of that domain (or to the end of training if there is none), each evaluated at exactly those
  steps of each run (:func:`repro.ep_order.experiments.forgetting_window`). A later block of the same domain
  retrains it; relearning is not absence of forgetting, so the window ends before it.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from repro.common import compare_paired, threshold_from_ci

THRESHOLDS = {
    "K1_max_entropy_frac": 0.8,   # random shuffle's loss <= 0.8 × the domain's response-character unigram entropy
    "K1_min_domains": 5,          # ... on >= 5 of 7 domains
    "K2_min_diff": 0.03,          # |no-mix − random| >= 0.03 nats with the paired CI excluding 0
    "K2_min_forgetting": 0.05,    # no-mix: first cluster's domain loss rises >= 0.05 nats after its block (C3's window)
    "K3_min_purity": 0.8,         # cluster purity vs the true domain (every seed)
    "K3_max_path_ratio": 0.8,     # path length <= 0.8 × the mean over random cluster orders (every seed)
    "K4_min_gap": 0.1,            # mid-training gradient cosine: same-domain minus different-domain pairs
    "C1_min_win_frac": 0.8,       # EP-Order lower loss than random in >= 4 of 5 seeds
    "C2_ratio": 1.02,             # EP-Order's domain loss <= max(1.02 ×, +0.02 nats) random's ...
    "C2_abs": 0.02,
    "C2_min_domains": 5,          # ... on >= 5 of the 7 domains
    "C3_min_win_frac": 2 / 3,     # no-mix worse than EP-Order in >= 2/3 of the ablation seeds (card: 2 of 3), both
    "C6_max_ratio": 0.25,         # (warm-up + embedding + clustering + ordering) / main training, CPU time
    "min_seeds": 3,
}
T = THRESHOLDS

CLAIMS = {
    "C1": "Effectiveness: mean held-out response loss after training with EP-Order is lower than with random "
          "shuffling, in >= 4 of 5 seeds (paired; mean diff ± 95 % CI).",
    "C2": "Breadth: EP-Order's loss is <= 1.02 × random shuffle's (or within +0.02 nats, whichever is larger) on "
          ">= 5 of the 7 domains (per domain, paired 95 % CI over seeds; only domains that pass K1 count).",
    "C3": "Mixed regions: removing them (pure cluster blocks) raises mean loss and raises forgetting (increase of "
          "held-out loss on the first-visited cluster's dominant domain from the end of its block in the last "
          "epoch to the last step before the next block that contains samples of that domain, or to the end of "
          "training if there is none) versus full EP-Order, in >= 2/3 of the ablation seeds (the card: 2 of 3).",
    "C4": "Proximity ordering matters: EP-Order beats the same clusters with mixed regions in a random cluster order "
          "(mean loss over the ablation seeds, paired).",
    "C5": "Mechanism, fewer conflicts: the mean cosine similarity between the last block's gradients of consecutive "
          "mini-batches is higher under EP-Order than under random shuffle.",
    "C6": "Overhead: warm-up + embedding + clustering + ordering cost <= 25 % of the main training time.",
}

CONTROLS = {
    "K1": "Skills learned, not at the floor: random shuffle's response loss <= 0.8 × the domain's "
          "response-character unigram entropy on >= 5 of 7 domains.",
    "K2": "Order visibly matters: the paired 95 % CI of (no-mix − random) mean loss excludes 0 with |diff| >= 0.03 "
          "nats, and in no-mix the first cluster's domain loss rises >= 0.05 nats after its block (forgetting as in C3: "
          "until the next block that contains samples of that domain, or the end of training).",
    "K3": "The path is a real ordering: cluster purity >= 0.8 and path length <= 0.8 × the mean over random "
          "cluster orders, at every seed.",
    "K4": "Conflict exists: mid-training, the last-block gradient cosine of same-domain batch pairs exceeds that of "
          "different-domain pairs by >= 0.1.",
}


def _few(n: int) -> str | None:
    return (f"only {n} paired seed(s): fewer than {T['min_seeds']} decide no comparison"
            if n < T["min_seeds"] else None)


def _ci(c) -> str:
    return f"{c.mean_diff:+.4f} nats, 95 % CI [{c.ci_lo:+.4f}, {c.ci_hi:+.4f}]"


def unigram_entropy(responses: Sequence[str]) -> float:
    """Entropy (nats) of the character distribution of ``responses`` (each with its closing newline)."""
    chars = "".join(r + "\n" for r in responses)
    _, counts = np.unique(np.frombuffer(chars.encode(), dtype=np.uint8), return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


def k1_passing(random_loss: Mapping[str, float], entropy: Mapping[str, float]) -> list[str]:
    """Domains whose random-shuffle loss is <= 0.8 × their unigram entropy."""
    return [d for d in random_loss if random_loss[d] <= T["K1_max_entropy_frac"] * entropy[d]]


# ----------------------------------------------------------------------------- controls

def k1(random_loss: Mapping[str, float], entropy: Mapping[str, float]) -> dict:
    """Per-domain loss of random shuffle (mean over seeds) and the domain's response unigram entropy (nats)."""
    ok = k1_passing(random_loss, entropy)
    ratios = {d: random_loss[d] / entropy[d] for d in random_loss}
    low = ", ".join(f"{d} {ratios[d]:.2f}" for d in random_loss if d not in ok) or "none"
    return dict(holds=len(ok) >= T["K1_min_domains"],
                threshold=f"loss <= {T['K1_max_entropy_frac']} × unigram entropy on >= {T['K1_min_domains']} of "
                          f"{len(random_loss)} domains",
                numbers={"domains passing": len(ok), **{f"{d} loss/entropy": r for d, r in ratios.items()}},
                reason=f"only {len(ok)} of {len(random_loss)} domains fall below {T['K1_max_entropy_frac']} × their "
                       f"unigram entropy (loss/entropy of the others: {low}): the model has not learned enough skills "
                       "for orderings to differ in")


def k2(nomix: Sequence[float], random: Sequence[float], nomix_forgetting: Sequence[float]) -> dict:
    """Per ablation seed: mean loss of no-mix and of random shuffle, and no-mix's forgetting (nats): the rise of
    the first-visited cluster's domain loss from the end of its block to the last step before the next block that
    contains samples of that domain, or to the end of training if there is none
    (:func:`repro.ep_order.experiments.forgetting_window`)."""
    a, b, f = (np.asarray(x, float) for x in (nomix, random, nomix_forgetting))
    thr = (f"paired 95 % CI of no-mix − random excludes 0 with |diff| >= {T['K2_min_diff']} nats; "
           f"no-mix forgetting >= {T['K2_min_forgetting']} nats")
    if a.size < 2:
        return dict(holds=False, threshold=thr, numbers={"pairs": int(a.size)},
                    reason=f"{a.size} ablation seed(s): no paired interval of no-mix − random")
    c = compare_paired(a, b)                    # diff = no-mix − random
    excl = c.ci_lo > 0 or c.ci_hi < 0
    big = abs(c.mean_diff) >= T["K2_min_diff"]
    forg = float(f.mean())
    holds = bool(excl and big and forg >= T["K2_min_forgetting"])
    parts = []
    if not excl:
        parts.append("its CI contains 0")
    if not big:
        parts.append(f"|diff| < {T['K2_min_diff']}")
    if forg < T["K2_min_forgetting"]:
        parts.append(f"no-mix forgetting {forg:+.4f} < {T['K2_min_forgetting']}")
    return dict(holds=holds, threshold=thr,
                numbers={"no-mix − random": c.mean_diff, "diff ci95": [c.ci_lo, c.ci_hi], "pairs": c.n,
                         "no-mix forgetting": forg},
                reason=f"no-mix − random = {_ci(c)}; " + "; ".join(parts) + ": " + " and ".join(
                    ([] if excl and big else ["the order does not visibly change the mean loss at this scale"])
                    + ([] if forg >= T["K2_min_forgetting"] else ["pure cluster blocks do not visibly forget the "
                                                                  "first cluster"])))


def k3(purities: Sequence[float], path_ratios: Sequence[float]) -> dict:
    """Per seed: cluster purity vs the true domain; path length / mean random-order length."""
    p, r = np.asarray(purities, float), np.asarray(path_ratios, float)
    holds = bool(p.min() >= T["K3_min_purity"] and r.max() <= T["K3_max_path_ratio"])
    return dict(holds=holds,
                threshold=f"purity >= {T['K3_min_purity']} and path/random <= {T['K3_max_path_ratio']} at every seed",
                numbers={"min purity": float(p.min()), "mean purity": float(p.mean()),
                         "max path ratio": float(r.max()), "mean path ratio": float(r.mean())},
                reason=f"lowest purity {p.min():.3f} (needs >= {T['K3_min_purity']}), largest path ratio {r.max():.3f} "
                       f"(needs <= {T['K3_max_path_ratio']}): the clusters or the path do not carry the structure "
                       "EP-Order orders by")


def k4(same: Sequence[float], diff: Sequence[float]) -> dict:
    """Per seed: mean last-block gradient cosine of same-domain and of different-domain batch pairs, mid-training."""
    s, d = np.asarray(same, float), np.asarray(diff, float)
    gap = float((s - d).mean())
    return dict(holds=gap >= T["K4_min_gap"], threshold=f"same − different >= {T['K4_min_gap']}",
                numbers={"same-domain cos": float(s.mean()), "different-domain cos": float(d.mean()), "gap": gap},
                reason=f"same-domain batches agree only {gap:+.3f} more than different-domain ones: there is little "
                       "conflict for an ordering to remove")


# ----------------------------------------------------------------------------- claims

def c1(ep: Sequence[float], random: Sequence[float]) -> dict:
    """Per-seed mean response loss of EP-Order and random shuffle."""
    e, r = np.asarray(ep, float), np.asarray(random, float)
    n = e.size
    c = compare_paired(e, r, higher_is_better=False)        # mean_diff = random − EP (positive: EP better)
    wins, need = int((e < r).sum()), math.ceil(T["C1_min_win_frac"] * n - 1e-9)
    txt = (f"random − EP-Order = {_ci(c)} ({c.word}); EP-Order lower in {wins} of {n} seeds (needs {need})")
    inc = _few(n)
    holds = wins >= need and c.better
    if not inc and not holds and not (wins < need and c.worse):
        inc = txt + (": the count is met inside seed noise" if wins >= need else
                     ": the count is missed, but the paired CI does not show random shuffle lower (inside seed noise)")
    return dict(holds=bool(holds), threshold=f"EP-Order lower in >= {need} of {n} seeds and "
                f"paired 95 % CI of random − EP-Order > 0 (fails: count missed and CI < 0)",
                numbers={"EP-Order loss": float(e.mean()), "random loss": float(r.mean()), **c.numbers(),
                         "seeds EP lower": wins},
                reason=txt, inconclusive=inc, needs=("K1", "K2", "K3"))


def c2(ep: Mapping[str, Sequence[float]], random: Mapping[str, Sequence[float]], passing: Sequence[str],
       n_seeds: int | None = None) -> dict:
    """Per-domain loss per seed (paired: the same seed order in both) of EP-Order and random shuffle; ``passing``:
    domains that pass K1. Each domain is decided by the paired 95 % CI over seeds of tol − EP, with the card's
    tolerance tol = max(1.02 × random, random + 0.02) of the same seed (see the module's rules)."""
    need = T["C2_min_domains"]
    cmp, tol_mean = {}, {}
    for d in random:
        e, r = np.asarray(ep[d], float).ravel(), np.asarray(random[d], float).ravel()
        tol = np.maximum(T["C2_ratio"] * r, r + T["C2_abs"])
        cmp[d] = compare_paired(e, tol, higher_is_better=False)          # mean_diff = tol − EP (positive: within)
        tol_mean[d] = float(tol.mean())
    n = int(n_seeds) if n_seeds is not None else min(c.n for c in cmp.values())
    word = {d: ("within" if c.better else "outside" if c.worse else "within noise") for d, c in cmp.items()}
    within = [d for d in passing if cmp[d].better]
    outside = [d for d in cmp if cmp[d].worse]
    can = [d for d in passing if not cmp[d].worse]              # K1 domains that may still count
    em = {d: float(np.mean(np.asarray(ep[d], float))) for d in random}
    rm = {d: float(np.mean(np.asarray(random[d], float))) for d in random}
    per = "; ".join(f"{d} {em[d]:.3f} vs tolerance {tol_mean[d]:.3f}, tol − EP {cmp[d].mean_diff:+.4f} "
                    f"[{cmp[d].ci_lo:+.4f}, {cmp[d].ci_hi:+.4f}] ({word[d]}" + ("" if d in passing else ", fails K1")
                    + ")" for d in random)
    txt = (f"EP-Order clearly within max(1.02 ×, +0.02 nats) of random on {len(within)} of the {len(passing)} domains "
           f"that pass K1, clearly outside on {len(outside)} (needs {need} of 7 within; paired 95 % CIs over {n} "
           f"seeds): {per}")
    holds = len(within) >= need
    fails = len(can) < need
    inc = _few(n)
    if not inc and not holds and not fails:
        inc = (f"within noise of the bar: {len(within)} domain(s) clearly within and {len(can)} K1 domain(s) not "
               f"clearly outside, so the count of {need} is neither reached nor ruled out; " + txt)
    return dict(holds=bool(holds),
                threshold=f"paired 95 % CI of max(1.02 × random, random + 0.02) − EP above 0 on >= {need} of 7 "
                          f"domains that pass K1 (fails: fewer than {need} K1 domains not clearly outside)",
                numbers={"domains within": len(within), "domains counted": len(passing),
                         "domains clearly outside": len(outside),
                         **{f"{d} EP/random": em[d] / rm[d] for d in random},
                         **{f"{d} tol − EP ci95": [cmp[d].ci_lo, cmp[d].ci_hi] for d in random}},
                reason=txt, inconclusive=inc, needs=("K1", "K2"))


def c3(ep_loss: Sequence[float], nomix_loss: Sequence[float], ep_forget: Sequence[float],
       nomix_forget: Sequence[float]) -> dict:
    """Per ablation seed: mean loss and forgetting (nats) of EP-Order and of no-mix. Forgetting, in both runs: the
    rise of the first-visited cluster's domain loss from the end of its block (the run's last batch holding one of
    its samples) to the last step before the next block that contains samples of that domain, or to the end of
    training if there is none (:func:`repro.ep_order.experiments.forgetting_window`)."""
    el, nl, ef, nf = (np.asarray(x, float) for x in (ep_loss, nomix_loss, ep_forget, nomix_forget))
    n = el.size
    need = math.ceil(T["C3_min_win_frac"] * n - 1e-9)
    cl = compare_paired(el, nl, higher_is_better=False)     # no-mix − EP (positive: mixing helps)
    cf = compare_paired(ef, nf, higher_is_better=False)
    wl, wf = int((nl > el).sum()), int((nf > ef).sum())
    txt = (f"no-mix − EP-Order: loss {_ci(cl)} ({cl.word}), higher in {wl} of {n} seeds; forgetting {_ci(cf)} "
           f"({cf.word}), higher in {wf} of {n} seeds (needs {need} for each)")
    met = wl >= need and wf >= need
    holds = met and cl.better and cf.better
    # fails only when a part is measurably the other way: its count missed and its paired CI below 0
    refuted = [name for name, w, c in (("loss", wl, cl), ("forgetting", wf, cf)) if w < need and c.worse]
    inc = _few(n)
    if not inc and not holds and not refuted:
        inc = txt + (": the counts are met inside seed noise" if met else
                     ": a count is missed, but no paired CI shows no-mix lower (inside seed noise)")
    return dict(holds=bool(holds),
                threshold=f"no-mix higher in loss and in forgetting in >= {need} of {n} seeds, paired CIs > 0 "
                          f"(fails: a count missed with its CI < 0)",
                numbers={"EP loss": float(el.mean()), "no-mix loss": float(nl.mean()), **cl.numbers("loss"),
                         "EP forgetting": float(ef.mean()), "no-mix forgetting": float(nf.mean()),
                         **cf.numbers("forgetting")},
                reason=txt, inconclusive=inc, needs=("K2",))


def c4(ep: Sequence[float], rco: Sequence[float]) -> dict:
    """Per ablation seed: mean loss of EP-Order and of its clusters in a random order (same mixing)."""
    e, r = np.asarray(ep, float), np.asarray(rco, float)
    c = compare_paired(e, r, higher_is_better=False)
    txt = f"random cluster order − EP-Order = {_ci(c)} ({c.word})"
    inc = _few(e.size)
    if not inc and not c.better and not c.worse:
        inc = txt + ": no measurable difference decides no comparison"
    return dict(holds=c.better, threshold="paired 95 % CI of random-cluster-order − EP-Order loss > 0",
                numbers={"EP loss": float(e.mean()), "random cluster order loss": float(r.mean()), **c.numbers()},
                reason=txt, inconclusive=inc, needs=("K1", "K2", "K3"))  # K1 gate restored (issue 46)


def c5(ep: Sequence[float], random: Sequence[float]) -> dict:
    """Per seed: mean consecutive-batch gradient cosine (last block) of EP-Order and random shuffle."""
    e, r = np.asarray(ep, float), np.asarray(random, float)
    c = compare_paired(e, r)
    txt = f"EP-Order − random in consecutive-batch gradient cosine = {c.mean_diff:+.4f}, 95 % CI [{c.ci_lo:+.4f}, {c.ci_hi:+.4f}] ({c.word})"
    inc = _few(e.size)
    if not inc and not c.better and not c.worse:
        inc = txt + ": no measurable difference decides no comparison"
    return dict(holds=c.better, threshold="paired 95 % CI of EP-Order − random gradient cosine > 0",
                numbers={"EP-Order cos": float(e.mean()), "random cos": float(r.mean()), **c.numbers()},
                reason=txt, inconclusive=inc, needs=("K4",))


def ratio_of_sums_ci(num: Sequence[float], den: Sequence[float], n_boot: int = 2000, seed: int = 0,
                     level: float = 0.95) -> tuple[float, float, float]:
    """sum(num)/sum(den) and its percentile bootstrap interval over the paired units (seeds), each unit's numerator
    and denominator resampled together (vectorised, fixed seed). One unit: an unbounded interval."""
    a, b = np.asarray(num, float).ravel(), np.asarray(den, float).ravel()
    est = float(a.sum() / b.sum())
    if a.size < 2:
        return est, -math.inf, math.inf
    idx = np.random.default_rng(seed).integers(0, a.size, size=(n_boot, a.size))
    lo, hi = np.quantile(a[idx].sum(1) / b[idx].sum(1), [(1 - level) / 2, (1 + level) / 2])
    return est, float(lo), float(hi)


def c6(overhead_s: Sequence[float], train_s: Sequence[float], smoke: bool = False) -> dict:
    """Per seed: CPU seconds of warm-up + embedding + clustering + ordering, and of EP-Order's main training. The
    ratio of the sums is decided by its bootstrap 95 % CI over seeds against 0.25 (issue 41)."""
    o, t = np.asarray(overhead_s, float), np.asarray(train_s, float)
    ratio, lo, hi = ratio_of_sums_ci(o, t)
    thr = f"overhead <= {T['C6_max_ratio']:.2f} × main training (CPU time; bootstrap 95 % CI over seeds)"
    nums = {"overhead": f"{o.mean():.2f} s", "main training": f"{t.mean():.2f} s"}
    if smoke:
        return dict(holds=None, threshold=thr, numbers=nums,
                    inconclusive="smoke profile: a few steps of a tiny model are timing noise (and timings are kept "
                                 "out of the determinism check); the full profile decides")
    tt = threshold_from_ci(ratio, lo, hi, T["C6_max_ratio"], "<=", o.size)
    verb = {"holds": "within", "fails": "above", "inconclusive": "within noise of"}[tt.word]
    reason = (f"EP-Order's preparation costs {ratio:.3f} × its main training, 95 % CI [{tt.ci_lo:.3f}, {tt.ci_hi:.3f}] "
              f"over {o.size} seeds, {verb} the card's {T['C6_max_ratio']:.2f} ×")
    return dict(**tt.ledger_kwargs(), threshold=thr,
                numbers={"ratio": f"{ratio:.3f} ×", "ratio ci95": [tt.ci_lo, tt.ci_hi], **nums},
                reason=reason)
