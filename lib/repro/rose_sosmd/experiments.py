"""Experiment drivers and claim computations for chapter 08 (ROSE / SOS-MD, arXiv 2605.13025).

Pure functions with plain arguments; the notebook orchestrates. Each driver returns a tidy pandas
DataFrame (one row per seed x setting x method) that the claim helpers turn into numbers:

* :func:`rate_sweep`  -- gaps vs n for every method on paired data (C1, C2, C3(a), C4).
* :func:`t_sweep`     -- SOS-MD's optimisation error e(T) against ROSE at one n (C3(b)).
* :func:`beta_sweep`  -- ROSE's regularised gap for several beta at the largest n (C5).
* :func:`fit_slope`   -- log-log least-squares slope of the seed-mean of log(gap), bootstrap CI.
* ``claim_c1`` .. ``claim_c5`` -- each claim's numbers and whether the card's threshold is met.

Seeding (card, "Setting"): seed k generates game k and the behaviour logits from child streams;
the dataset at size n comes from ``default_rng([k, 2, n])``, so every method sees the same data at
each (seed, n), and a dataset does not depend on which other sizes are in the grid.
"""
from __future__ import annotations

import time
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from .algos import plugin_nash, pnvi, rose, rose_lcb, sos_md
from .evaluate import reg_gap, unreg_gap
from .game import (Dataset, Game, behavior_policies, empty_cell_fraction, random_markov_game,
                   sample_dataset, uniform_policies)

__all__ = [
    "THRESHOLDS", "METHODS", "make_instance", "make_dataset", "run_method", "rate_sweep", "t_sweep",
    "beta_sweep", "fit_slope", "gap_matrix", "seed_summary",
    "claim_c1", "claim_c2", "claim_c3", "claim_c4", "claim_c5",
]

#: Claim thresholds exactly as in the chapter card (never loosened).
THRESHOLDS = {
    "C1_slope_max": -0.8,
    "C2_band": (-0.8, -0.3),
    "C2_min_steeper": 0.25,
    "C3_rel_tol": 0.10,
    "C3_abs_tol": 1e-3,
    "C3_slope_max": -0.5,
    "C3_e_floor": 1e-9,
    "C3_min_points": 3,
    "C4_slope_max": -0.8,
    "C4_n_last": 4,
    "C5_band": (-1.5, -0.5),
}

#: Method names used in the DataFrames. "pnvi" uses ``bonus_c``; "pnvi_c1" is PNVI with c = 1.
METHODS = ("rose", "sos_md", "plugin", "pnvi", "pnvi_c1", "rose_lcb")


# ----------------------------------------------------------------------------- instances

def make_instance(seed: int, S: int, A: int, B: int, H: int, behavior_temp: float = 1.0,
                  behavior_mix: float = 0.05) -> tuple[Game, np.ndarray, np.ndarray]:
    """Game k and behaviour policies (mu_b, nu_b) for seed k (logits independent of the temperature)."""
    game = random_markov_game(S, A, B, H, np.random.default_rng([seed, 0]))
    mu_b, nu_b = behavior_policies(game, behavior_temp, behavior_mix, np.random.default_rng([seed, 1]))
    return game, mu_b, nu_b


def make_dataset(seed: int, n: int, game: Game, mu_b: np.ndarray, nu_b: np.ndarray) -> Dataset:
    """The dataset of seed k at size n (stream ``[k, 2, n]``)."""
    return sample_dataset(game, mu_b, nu_b, n, np.random.default_rng([seed, 2, int(n)]))


def _refs(reference: str, game: Game, mu_b: np.ndarray, nu_b: np.ndarray):
    if reference == "behavior":
        return mu_b, nu_b
    if reference == "uniform":
        return uniform_policies(*game.shape)
    raise ValueError(f"reference must be 'behavior' or 'uniform', got {reference!r}")


def run_method(method: str, dataset: Dataset, beta: float, refs, T: int = 300, eta="auto",
               rose_tol: float = 1e-11, bonus_c: float = 0.1, delta: float = 0.1,
               solver: str | None = None, info: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Dispatch one method of :data:`METHODS` on a dataset; returns (pi, nu).

    ``info`` (optional dict) receives ROSE's value estimates and solver iterations.
    """
    if method == "rose":
        return rose(dataset, beta, refs, tol=rose_tol, solver=solver, info=info)
    if method == "sos_md":
        return sos_md(dataset, beta, refs, T, eta=eta, solver=solver)
    if method == "plugin":
        return plugin_nash(dataset)
    if method == "pnvi":
        return pnvi(dataset, bonus_c, delta)
    if method == "pnvi_c1":
        return pnvi(dataset, 1.0, delta)
    if method == "rose_lcb":
        return rose_lcb(dataset, beta, refs, bonus_c, delta, tol=rose_tol, solver=solver)
    raise ValueError(f"unknown method {method!r}; choose from {METHODS}")


# ----------------------------------------------------------------------------- sweeps

def rate_sweep(S: int, A: int, B: int, H: int, n_list: Sequence[int], seeds: Sequence[int],
               beta: float = 0.1, T: int = 300, eta="auto", rose_tol: float = 1e-11,
               behavior_temp: float = 1.0, behavior_mix: float = 0.05, bonus_c: float = 0.1,
               delta: float = 0.1, reference: str = "behavior",
               methods: Iterable[str] = ("rose", "sos_md", "plugin", "pnvi", "pnvi_c1"),
               solver: str | None = None) -> pd.DataFrame:
    """Gaps against n for several methods on paired datasets.

    Returns
    -------
    DataFrame with one row per (seed, n, method): ``reg_gap`` (beta-regularised gap, references
    ``reference``), ``unreg_gap``, ``empty_frac`` (fraction of (h,s,a,b) cells without data),
    ``wall_s`` (time to compute the policies), ``solver_iters`` (ROSE: the most extragradient
    iterations any stage game needed; -1 for other methods), and ``beta``, ``behavior_temp``.
    """
    methods = tuple(methods)
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"unknown method {m!r}; choose from {METHODS}")
    rows = []
    for seed in seeds:
        game, mu_b, nu_b = make_instance(seed, S, A, B, H, behavior_temp, behavior_mix)
        refs = _refs(reference, game, mu_b, nu_b)
        for n in n_list:
            data = make_dataset(seed, n, game, mu_b, nu_b)
            empty = empty_cell_fraction(data)
            for m in methods:
                info: dict = {}
                t0 = time.perf_counter()
                pi, nu = run_method(m, data, beta, refs, T, eta, rose_tol, bonus_c, delta, solver,
                                    info=info)
                wall = time.perf_counter() - t0
                rows.append(dict(seed=int(seed), n=int(n), method=m,
                                 reg_gap=reg_gap(game, pi, nu, beta, refs),
                                 unreg_gap=unreg_gap(game, pi, nu), empty_frac=empty, wall_s=wall,
                                 solver_iters=int(info["iters"].max()) if "iters" in info else -1,
                                 beta=float(beta), behavior_temp=float(behavior_temp)))
    return pd.DataFrame(rows)


def t_sweep(S: int, A: int, B: int, H: int, n: int, seeds: Sequence[int], T_list: Sequence[int],
            beta: float = 0.1, eta="auto", rose_tol: float = 1e-11, behavior_temp: float = 1.0,
            behavior_mix: float = 0.05, reference: str = "behavior",
            solver: str | None = None) -> pd.DataFrame:
    """SOS-MD's optimisation error e(T) = max_{h,s} (|pi_T - pi_ROSE|_1 + |nu_T - nu_ROSE|_1).

    Both run on the same dataset (seed, n); ``eta`` may be any rule of ``stage.step_sizes``
    (e.g. the appendix's "aggressive" 1/(rho+beta) or "maxabs" 0.5/(max|Q|+beta)).

    Returns
    -------
    DataFrame with one row per (seed, T): ``e_T``, SOS-MD's ``reg_gap`` and ROSE's ``rose_reg_gap``.
    """
    rows = []
    for seed in seeds:
        game, mu_b, nu_b = make_instance(seed, S, A, B, H, behavior_temp, behavior_mix)
        refs = _refs(reference, game, mu_b, nu_b)
        data = make_dataset(seed, n, game, mu_b, nu_b)
        pi_r, nu_r = rose(data, beta, refs, tol=rose_tol, solver=solver)
        g_rose = reg_gap(game, pi_r, nu_r, beta, refs)
        for T in T_list:
            pi, nu = sos_md(data, beta, refs, int(T), eta=eta, solver=solver)
            e = (np.abs(pi - pi_r).sum(-1) + np.abs(nu - nu_r).sum(-1)).max()
            rows.append(dict(seed=int(seed), n=int(n), T=int(T), method="sos_md", eta=str(eta), e_T=float(e),
                             reg_gap=reg_gap(game, pi, nu, beta, refs), rose_reg_gap=g_rose))
    return pd.DataFrame(rows)


def beta_sweep(S: int, A: int, B: int, H: int, n_list: Sequence[int], seeds: Sequence[int],
               beta_list: Sequence[float], rose_tol: float = 1e-11, behavior_temp: float = 1.0,
               behavior_mix: float = 0.05, reference: str = "behavior",
               solver: str | None = None) -> pd.DataFrame:
    """ROSE's regularised gap (at the same beta it was trained with) for each beta, paired data.

    Returns
    -------
    DataFrame with one row per (seed, n, beta): ``reg_gap``, ``unreg_gap``, ``n_gap`` = n * reg_gap,
    ``empty_frac``, ``wall_s``.
    """
    rows = []
    for seed in seeds:
        game, mu_b, nu_b = make_instance(seed, S, A, B, H, behavior_temp, behavior_mix)
        refs = _refs(reference, game, mu_b, nu_b)
        for n in n_list:
            data = make_dataset(seed, n, game, mu_b, nu_b)
            for beta in beta_list:
                t0 = time.perf_counter()
                pi, nu = rose(data, beta, refs, tol=rose_tol, solver=solver)
                wall = time.perf_counter() - t0
                g = reg_gap(game, pi, nu, beta, refs)
                rows.append(dict(seed=int(seed), n=int(n), beta=float(beta), method="rose",
                                 reg_gap=g, n_gap=n * g, unreg_gap=unreg_gap(game, pi, nu),
                                 empty_frac=empty_cell_fraction(data), wall_s=wall))
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- statistics

def _bootstrap(x: np.ndarray, Y: np.ndarray, reduce, n_boot: int, rng_seed: int):
    """Slope of reduce(Y[seeds]) against x and its percentile bootstrap CI over seeds (rows of Y)."""
    slope = np.polyfit(x, reduce(Y), 1)[0]
    k = Y.shape[0]
    rng = np.random.default_rng(rng_seed)
    idx = rng.integers(0, k, size=(n_boot, k))
    boots = np.array([np.polyfit(x, reduce(Y[i]), 1)[0] for i in idx])
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return float(slope), (float(lo), float(hi))


def fit_slope(ns: Sequence[float], gaps_by_seed: np.ndarray, n_min: float, n_boot: int = 2000,
              rng_seed: int = 0) -> tuple[float, tuple[float, float]]:
    """Least-squares slope of the seed-mean of log(gap) against log(n), for n >= n_min.

    Parameters
    ----------
    ns : sequence (K,)
        The grid (n, or T for C3(b)).
    gaps_by_seed : ndarray (n_seeds, K)
        One row per seed; entries must be > 0.
    n_min : float
        Fit only on ns >= n_min (the card's pre-registered range).
    n_boot, rng_seed : bootstrap over seeds (rows), 2,000 resamples with a fixed seed.

    Returns
    -------
    slope : float, and (lo, hi) the 95% percentile bootstrap interval (lo == hi with one seed).
    """
    ns = np.asarray(ns, dtype=np.float64)
    G = np.atleast_2d(np.asarray(gaps_by_seed, dtype=np.float64))
    keep = ns >= n_min
    if keep.sum() < 2:
        raise ValueError(f"need at least 2 grid points >= {n_min}, got {int(keep.sum())}")
    if np.any(G[:, keep] <= 0):
        raise ValueError("gaps must be positive to take logs")
    return _bootstrap(np.log(ns[keep]), np.log(G[:, keep]), lambda Y: Y.mean(axis=0), n_boot, rng_seed)


def gap_matrix(df: pd.DataFrame, method: str, metric: str = "reg_gap", by: str = "n",
               ) -> tuple[np.ndarray, np.ndarray]:
    """(grid, values[n_seeds, len(grid)]) for one method, seeds as rows."""
    sub = df[df["method"] == method] if "method" in df else df
    if sub.empty:
        raise ValueError(f"no rows for method {method!r}")
    tab = sub.pivot_table(index="seed", columns=by, values=metric, aggfunc="mean").sort_index(axis=1)
    return tab.columns.to_numpy(), tab.to_numpy()


def seed_summary(df: pd.DataFrame, by: Sequence[str], metric: str) -> pd.DataFrame:
    """Mean and 95% t-interval over seeds of ``metric``, grouped by ``by`` (e.g. ["method", "n"])."""
    def agg(x):
        k, m = len(x), float(np.mean(x))
        h = float(stats.t.ppf(0.975, k - 1) * np.std(x, ddof=1) / np.sqrt(k)) if k > 1 else np.nan
        return pd.Series(dict(mean=m, ci_lo=m - h, ci_hi=m + h, n_seeds=k))
    return df.groupby(list(by))[metric].apply(agg).unstack().reset_index()


def _slope_entry(df, method, metric, n_min):
    ns, G = gap_matrix(df, method, metric)
    if (ns >= n_min).sum() < 2:
        return dict(slope=float("nan"), ci=(float("nan"), float("nan")), n_fit=[])
    s, ci = fit_slope(ns, G, n_min)
    return dict(slope=s, ci=ci, n_fit=[int(v) for v in ns[ns >= n_min]])


# ----------------------------------------------------------------------------- claims

def _plain(x):
    """Recursively convert numpy scalars / arrays and tuples to plain Python (JSON-ready)."""
    if isinstance(x, dict):
        return {(k.item() if isinstance(k, np.generic) else k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_plain(v) for v in x]
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.generic):
        return x.item()
    return x


def claim_c1(rate_df: pd.DataFrame, n_min: int = 4096,
             slope_max: float = THRESHOLDS["C1_slope_max"]) -> dict:
    """C1: slope of ROSE's regularised gap vs n (n >= n_min) is <= -0.8."""
    e = _slope_entry(rate_df, "rose", "reg_gap", n_min)
    meets = None if np.isnan(e["slope"]) else bool(e["slope"] <= slope_max)
    return _plain(dict(claim="C1", rose_reg_slope=e["slope"], ci=e["ci"], n_fit=e["n_fit"],
                       threshold=slope_max, meets=meets))


def claim_c2(rate_df: pd.DataFrame, n_min: int = 4096, band: tuple = THRESHOLDS["C2_band"],
             min_steeper: float = THRESHOLDS["C2_min_steeper"]) -> dict:
    """C2: unregularised-gap slopes of plug-in NVI and PNVI(c=bonus_c) in [-0.8, -0.3], and ROSE's
    C1 slope steeper than the plug-in's by >= 0.25. PNVI(c=1) is reported, not claimed."""
    rose_e = _slope_entry(rate_df, "rose", "reg_gap", n_min)
    plug = _slope_entry(rate_df, "plugin", "unreg_gap", n_min)
    pn = _slope_entry(rate_df, "pnvi", "unreg_gap", n_min)
    out = dict(claim="C2", plugin_unreg_slope=plug["slope"], plugin_ci=plug["ci"],
               pnvi_unreg_slope=pn["slope"], pnvi_ci=pn["ci"], rose_reg_slope=rose_e["slope"],
               steeper_by=plug["slope"] - rose_e["slope"], band=band, min_steeper=min_steeper,
               n_fit=plug["n_fit"])
    if "pnvi_c1" in set(rate_df["method"]):
        c1 = rate_df[rate_df["method"] == "pnvi_c1"]
        out["pnvi_c1_unreg_slope"] = _slope_entry(rate_df, "pnvi_c1", "unreg_gap", n_min)["slope"]
        out["pnvi_c1_mean_gap_by_n"] = c1.groupby("n")["unreg_gap"].mean().to_dict()
    vals = [plug["slope"], pn["slope"], rose_e["slope"]]
    if any(np.isnan(v) for v in vals):
        out["meets"] = None
    else:
        out["meets"] = bool(band[0] <= plug["slope"] <= band[1] and band[0] <= pn["slope"] <= band[1]
                            and out["steeper_by"] >= min_steeper)
    return _plain(out)


def claim_c3(rate_df: pd.DataFrame, t_df: pd.DataFrame,
             rel_tol: float = THRESHOLDS["C3_rel_tol"], abs_tol: float = THRESHOLDS["C3_abs_tol"],
             slope_max: float = THRESHOLDS["C3_slope_max"], e_floor: float = THRESHOLDS["C3_e_floor"],
             min_points: int = THRESHOLDS["C3_min_points"]) -> dict:
    """C3(a): SOS-MD's seed-mean regularised gap within 10% or 1e-3 of ROSE's at every n.
    C3(b): log-log slope of e(T) <= -0.5, fitted on T whose geometric seed-mean e(T) > 1e-9
    (>= 3 points, else inconclusive); the geometric rate d log e / dT on the same points is reported.
    """
    r = rate_df[rate_df["method"] == "rose"].groupby("n")["reg_gap"].mean()
    s = rate_df[rate_df["method"] == "sos_md"].groupby("n")["reg_gap"].mean()
    diff = (s - r).abs()
    ok_n = (diff <= rel_tol * r) | (diff <= abs_tol)
    paired = rate_df.pivot_table(index=["seed", "n"], columns="method", values="reg_gap")
    cell_rel = ((paired["sos_md"] - paired["rose"]).abs() / paired["rose"]).max()
    a = dict(rel_diff_by_n=(diff / r).to_dict(), abs_diff_by_n=diff.to_dict(),
             worst_cell_rel_diff=float(cell_rel), meets=bool(ok_n.all()))
    Ts, E = gap_matrix(t_df, "sos_md", "e_T", by="T")
    geo = np.exp(np.log(np.maximum(E, 1e-300)).mean(axis=0))
    keep = geo > e_floor
    b = dict(T=[int(t) for t in Ts], e_T_geomean=geo.tolist(), T_fit=[int(t) for t in Ts[keep]])
    if keep.sum() >= min_points:
        b["slope"], b["ci"] = fit_slope(Ts[keep], E[:, keep], n_min=0)
        b["geometric_rate"] = float(np.polyfit(Ts[keep], np.log(geo[keep]), 1)[0])
        b["meets"] = bool(b["slope"] <= slope_max)
    else:
        b.update(slope=float("nan"), ci=(float("nan"), float("nan")), geometric_rate=float("nan"),
                 meets=None, note=f"only {int(keep.sum())} T with e(T) > {e_floor:g}")
    meets = None if b["meets"] is None else bool(a["meets"] and b["meets"])
    return _plain(dict(claim="C3", a=a, b=b, rel_tol=rel_tol, abs_tol=abs_tol, slope_max=slope_max,
                       meets=meets))


def claim_c4(skew_df: pd.DataFrame, n_min: int = 4096,
             slope_max: float = THRESHOLDS["C4_slope_max"], n_last: int = THRESHOLDS["C4_n_last"],
             ) -> dict:
    """C4 (skewed coverage): (a) ROSE's regularised-gap slope <= -0.8; (b) ROSE's seed-mean
    regularised gap <= ROSE-LCB's at each of the ``n_last`` largest n. Reports empty-cell fractions."""
    e = _slope_entry(skew_df, "rose", "reg_gap", n_min)
    r = skew_df[skew_df["method"] == "rose"].groupby("n")["reg_gap"].mean()
    lcb = skew_df[skew_df["method"] == "rose_lcb"].groupby("n")["reg_gap"].mean()
    last = sorted(r.index)[-n_last:]
    ok_b = all(r[n] <= lcb[n] for n in last)
    a_meets = None if np.isnan(e["slope"]) else bool(e["slope"] <= slope_max)
    empty = skew_df[skew_df["method"] == "rose"].groupby("n")["empty_frac"].mean().to_dict()
    return _plain(dict(claim="C4", rose_reg_slope=e["slope"], ci=e["ci"], n_fit=e["n_fit"],
                       a_meets=a_meets, lcb_over_rose_by_n={int(n): float(lcb[n] / r[n]) for n in last},
                       b_meets=bool(ok_b), empty_frac_by_n=empty,
                       meets=None if a_meets is None else bool(a_meets and ok_b)))


def claim_c5(beta_df: pd.DataFrame, n_avg: Sequence[int] | None = None,
             band: tuple = THRESHOLDS["C5_band"], n_boot: int = 2000, rng_seed: int = 0) -> dict:
    """C5: slope of log(n * Gap) against log(beta), n * Gap averaged over ``n_avg`` (default: the
    two largest n) and seeds, lies in [-1.5, -0.5]; bootstrap CI over seeds."""
    ns = sorted(beta_df["n"].unique())
    n_avg = list(n_avg) if n_avg is not None else ns[-2:]
    sub = beta_df[beta_df["n"].isin(n_avg)]
    per_seed = sub.groupby(["seed", "beta"])["n_gap"].mean().unstack("beta").sort_index(axis=1)
    betas = per_seed.columns.to_numpy(dtype=float)
    Y = per_seed.to_numpy()
    mean_ngap = dict(zip(betas.tolist(), Y.mean(axis=0).tolist()))
    if len(betas) < 2:
        return _plain(dict(claim="C5", slope=float("nan"), ci=(float("nan"),) * 2, n_avg=n_avg,
                    mean_n_gap_by_beta=mean_ngap, band=band, meets=None, note="fewer than 2 betas"))
    slope, ci = _bootstrap(np.log(betas), Y, lambda M: np.log(M.mean(axis=0)), n_boot, rng_seed)
    return _plain(dict(claim="C5", slope=slope, ci=ci, n_avg=[int(v) for v in n_avg],
                       mean_n_gap_by_beta=mean_ngap, band=band, meets=bool(band[0] <= slope <= band[1])))
