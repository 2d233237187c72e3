"""Experiment drivers and claim computations for chapter 08 (ROSE / SOS-MD, arXiv 2605.13025).

Pure functions with plain arguments; the notebook orchestrates. Each driver returns a tidy pandas
DataFrame (one row per seed x setting x method) that the claim helpers turn into numbers:

* :func:`rate_sweep`  -- gaps vs n for every method on paired data (C1, C2, C3(a), C4).
* :func:`t_sweep`     -- SOS-MD's optimisation error e(T) against ROSE at one n (C3(b)).
* :func:`beta_sweep`  -- ROSE's regularised gap for several beta at the largest n (C5).
* :func:`fit_slope`   -- log-log least-squares slope of the seed-mean of log(gap), bootstrap CI.
* :func:`closed_form_checks`, :func:`kernel_check`, :func:`lp_checks`, :func:`true_model_floors` --
  the measurements behind the chapter's controls (decided in :mod:`.verdicts`).

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
from .evaluate import q_estimation_error, reg_gap, unreg_gap
from .game import (Dataset, Game, behavior_policies, dataset_hash, empty_cell_fraction, exact_dataset,
                   random_markov_game, sample_dataset, uniform_policies)
from .stage import HAVE_KERNEL, half_range, md_iterate, solve_regularized, zero_sum_lp_batch

__all__ = [
    "METHODS", "make_instance", "make_dataset", "run_method", "rate_sweep", "t_sweep",
    "beta_sweep", "fit_slope", "gap_matrix", "seed_summary", "closed_form_checks", "kernel_check",
    "lp_checks", "true_model_floors",
]

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

def _policy_distance(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """max over (h, s) of |pi_a - pi_b|_1 + |nu_a - nu_b|_1."""
    return float((np.abs(a[0] - b[0]).sum(-1) + np.abs(a[1] - b[1]).sum(-1)).max())


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
    ``data_hash`` (:func:`~.game.dataset_hash` of the dataset the method saw), ``wall_s`` (time to
    compute the policies), ``solver_iters`` (ROSE: the most extragradient iterations any stage game
    needed; -1 for other methods), ``pi_dist_rose`` (max_{h,s} L1 distance of the method's policies
    to ROSE's on the same data; NaN when ROSE is not among ``methods``), and on ROSE's rows
    ``rho_beta_min`` / ``rho_beta_max`` (range of rho(Q_hat)/beta over its stage games),
    ``q_err_beta_max`` (largest one-step Q estimation error in units of beta) and
    ``q_err_beta_frac`` (fraction of cells whose error exceeds beta); plus ``beta``, ``behavior_temp``.
    """
    methods = tuple(methods)
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"unknown method {m!r}; choose from {METHODS}")
    order = sorted(methods, key=lambda m: m != "rose")          # ROSE first: the others are compared to it
    rows = []
    for seed in seeds:
        game, mu_b, nu_b = make_instance(seed, S, A, B, H, behavior_temp, behavior_mix)
        refs = _refs(reference, game, mu_b, nu_b)
        for n in n_list:
            data = make_dataset(seed, n, game, mu_b, nu_b)
            empty = empty_cell_fraction(data)
            digest = dataset_hash(data)
            rose_pol = None
            for m in order:
                info: dict = {}
                t0 = time.perf_counter()
                pi, nu = run_method(m, data, beta, refs, T, eta, rose_tol, bonus_c, delta, solver,
                                    info=info)
                wall = time.perf_counter() - t0
                row = dict(seed=int(seed), n=int(n), method=m,
                           reg_gap=reg_gap(game, pi, nu, beta, refs),
                           unreg_gap=unreg_gap(game, pi, nu), empty_frac=empty, data_hash=digest,
                           wall_s=wall, solver_iters=int(info["iters"].max()) if "iters" in info else -1,
                           pi_dist_rose=float("nan"), rho_beta_min=float("nan"),
                           rho_beta_max=float("nan"), q_err_beta_max=float("nan"),
                           q_err_beta_frac=float("nan"), beta=float(beta),
                           behavior_temp=float(behavior_temp))
                if m == "rose":
                    rose_pol = (pi, nu)
                    rb = half_range(info["Q"]) / beta
                    err = q_estimation_error(game, info["Q"], info["V"]) / beta
                    row.update(rho_beta_min=float(rb.min()), rho_beta_max=float(rb.max()),
                               q_err_beta_max=float(err.max()), q_err_beta_frac=float(np.mean(err > 1.0)))
                if rose_pol is not None:
                    row["pi_dist_rose"] = _policy_distance((pi, nu), rose_pol)
                rows.append(row)
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
    DataFrame with one row per (seed, T): ``e_T``, SOS-MD's ``reg_gap``, ROSE's ``rose_reg_gap`` and
    the ``data_hash`` of the dataset.
    """
    rows = []
    for seed in seeds:
        game, mu_b, nu_b = make_instance(seed, S, A, B, H, behavior_temp, behavior_mix)
        refs = _refs(reference, game, mu_b, nu_b)
        data = make_dataset(seed, n, game, mu_b, nu_b)
        digest = dataset_hash(data)
        pi_r, nu_r = rose(data, beta, refs, tol=rose_tol, solver=solver)
        g_rose = reg_gap(game, pi_r, nu_r, beta, refs)
        for T in T_list:
            pi, nu = sos_md(data, beta, refs, int(T), eta=eta, solver=solver)
            e = (np.abs(pi - pi_r).sum(-1) + np.abs(nu - nu_r).sum(-1)).max()
            rows.append(dict(seed=int(seed), n=int(n), T=int(T), method="sos_md", eta=str(eta), e_T=float(e),
                             reg_gap=reg_gap(game, pi, nu, beta, refs), rose_reg_gap=g_rose,
                             data_hash=digest))
    return pd.DataFrame(rows)


def beta_sweep(S: int, A: int, B: int, H: int, n_list: Sequence[int], seeds: Sequence[int],
               beta_list: Sequence[float], rose_tol: float = 1e-11, behavior_temp: float = 1.0,
               behavior_mix: float = 0.05, reference: str = "behavior",
               solver: str | None = None) -> pd.DataFrame:
    """ROSE's regularised gap (at the same beta it was trained with) for each beta, paired data.

    Returns
    -------
    DataFrame with one row per (seed, n, beta): ``reg_gap``, ``unreg_gap``, ``n_gap`` = n * reg_gap,
    ``empty_frac``, ``data_hash``, ``rho_beta_max`` (largest rho(Q_hat)/beta of its stage games), ``wall_s``.
    """
    rows = []
    for seed in seeds:
        game, mu_b, nu_b = make_instance(seed, S, A, B, H, behavior_temp, behavior_mix)
        refs = _refs(reference, game, mu_b, nu_b)
        for n in n_list:
            data = make_dataset(seed, n, game, mu_b, nu_b)
            digest = dataset_hash(data)
            for beta in beta_list:
                t0 = time.perf_counter()
                info: dict = {}
                pi, nu = rose(data, beta, refs, tol=rose_tol, solver=solver, info=info)
                wall = time.perf_counter() - t0
                g = reg_gap(game, pi, nu, beta, refs)
                rows.append(dict(seed=int(seed), n=int(n), beta=float(beta), method="rose",
                                 reg_gap=g, n_gap=n * g, unreg_gap=unreg_gap(game, pi, nu),
                                 empty_frac=empty_cell_fraction(data), data_hash=digest,
                                 rho_beta_max=float((half_range(info["Q"]) / beta).max()), wall_s=wall))
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


# ----------------------------------------------------------------------------- control measurements

def _unit_range(x: np.ndarray) -> np.ndarray:
    """Rescale each row of x (k, m) to min 0 and max 1."""
    lo, hi = x.min(axis=-1, keepdims=True), x.max(axis=-1, keepdims=True)
    return (x - lo) / (hi - lo)


def closed_form_checks(betas: Sequence[float], A: int, B: int, rho_beta_max: float, tol: float,
                       n_games: int = 64, solver: str | None = None, rng_seed: int = 0) -> dict:
    """The exact stage solver against two closed forms, at every beta and rho/beta up to ``rho_beta_max``.

    * *Separable payoff* Q(a, b) = u(a) + v(b), random references: the regularised equilibrium is
      p ∝ p_ref exp(u/beta), q ∝ q_ref exp(-v/beta), with value
      beta log sum p_ref e^{u/beta} - beta log sum q_ref e^{-v/beta} (each player's problem decouples).
    * *Planted equilibrium* (couples the players): pick p*, q*, references and a random R, and set
      Q = R + x 1^T + 1 y^T with x = beta log(p*/p_ref) - R q* and y = -beta log(q*/q_ref) - R^T p*.
      Then Q q* = beta log(p*/p_ref) + const and Q^T p* = -beta log(q*/q_ref) + const, which is the
      fixed point p ∝ p_ref e^{Qq/beta}, q ∝ q_ref e^{-Q^T p/beta}: (p*, q*) is the unique solution,
      with value p*^T Q q* - beta KL(p*||p_ref) + beta KL(q*||q_ref). Best-response iteration would
      oscillate on these games once rho/beta > 1; the solver starts from the references, not from p*.

    The scale of u, v and R is spread geometrically so that rho/beta = half_range(Q)/beta covers
    [0.5, rho_beta_max] (the run's range); the range actually reached is returned.

    Returns
    -------
    dict: ``sep_policy_err`` and ``planted_policy_err`` (max L1 error of p plus q), ``sep_value_err``
    and ``planted_value_err`` (max absolute value error), ``rho_beta_checked`` ([min, max] reached),
    ``max_iters``, ``n_games`` (per beta and form), ``betas``.
    """
    rng = np.random.default_rng([rng_seed, 7])
    ratios = np.geomspace(0.5, max(float(rho_beta_max), 0.5), n_games)
    out = dict(sep_policy_err=0.0, sep_value_err=0.0, planted_policy_err=0.0, planted_value_err=0.0,
               max_iters=0)
    reached = []

    def lse(z):
        m = z.max(-1)
        return m + np.log(np.exp(z - m[..., None]).sum(-1))

    for beta in betas:
        # separable: rho(Q) = (range u + range v) / 2 = beta * ratio
        u = _unit_range(rng.random((n_games, A))) * (beta * ratios)[:, None]
        v = _unit_range(rng.random((n_games, B))) * (beta * ratios)[:, None]
        Q = u[:, :, None] + v[:, None, :]
        p_ref, q_ref = rng.dirichlet(np.ones(A), n_games), rng.dirichlet(np.ones(B), n_games)
        p, q, val, it = solve_regularized(Q, p_ref, q_ref, beta, tol=tol, solver=solver)
        zp, zq = np.log(p_ref) + u / beta, np.log(q_ref) - v / beta
        p_cf, q_cf = np.exp(zp - lse(zp)[:, None]), np.exp(zq - lse(zq)[:, None])
        v_cf = beta * lse(zp) - beta * lse(zq)
        out["sep_policy_err"] = max(out["sep_policy_err"],
                                    float((np.abs(p - p_cf).sum(-1) + np.abs(q - q_cf).sum(-1)).max()))
        out["sep_value_err"] = max(out["sep_value_err"], float(np.abs(val - v_cf).max()))
        out["max_iters"] = max(out["max_iters"], int(np.max(it)))
        reached.append(half_range(Q) / beta)
        # planted equilibrium (p*, q*) with random references
        p_star, q_star = rng.dirichlet(np.ones(A), n_games), rng.dirichlet(np.ones(B), n_games)
        p_ref, q_ref = rng.dirichlet(np.ones(A), n_games), rng.dirichlet(np.ones(B), n_games)
        R = 2 * _unit_range(rng.random((n_games, A * B))).reshape(n_games, A, B) * (beta * ratios)[:, None, None]
        x = beta * np.log(p_star / p_ref) - np.einsum("kab,kb->ka", R, q_star)
        y = -beta * np.log(q_star / q_ref) - np.einsum("kab,ka->kb", R, p_star)
        Q = R + x[:, :, None] + y[:, None, :]
        p, q, val, it = solve_regularized(Q, p_ref, q_ref, beta, tol=tol, solver=solver)
        kl = lambda a, b: (a * np.log(a / b)).sum(-1)
        v_cf = (np.einsum("ka,kab,kb->k", p_star, Q, q_star) - beta * kl(p_star, p_ref) + beta * kl(q_star, q_ref))
        out["planted_policy_err"] = max(out["planted_policy_err"],
                                        float((np.abs(p - p_star).sum(-1) + np.abs(q - q_star).sum(-1)).max()))
        out["planted_value_err"] = max(out["planted_value_err"], float(np.abs(val - v_cf).max()))
        out["max_iters"] = max(out["max_iters"], int(np.max(it)))
        reached.append(half_range(Q) / beta)
    reached = np.concatenate(reached)
    out.update(rho_beta_checked=[float(reached.min()), float(reached.max())], n_games=int(n_games),
               betas=[float(b) for b in betas])
    return out


def kernel_check(Q: np.ndarray, p_ref: np.ndarray, q_ref: np.ndarray, beta: float, tol: float,
                 T: int) -> dict:
    """The compiled kernel against the batched numpy reference on given stage games (e.g. a run's Q-hat).

    Returns ``{"kernel": bool, "solve_diff": max |p_cpp - p_np| + |q ...| of the exact solver,
    "md_diff": the same for T self-play steps, "stages": number of stage games}``; the diffs are NaN
    when the kernel is not built (numpy is then the only solver and there is nothing to compare).
    """
    Q = np.asarray(Q, dtype=np.float64).reshape(-1, *np.shape(Q)[-2:])
    p_ref = np.asarray(p_ref, dtype=np.float64).reshape(Q.shape[0], -1)
    q_ref = np.asarray(q_ref, dtype=np.float64).reshape(Q.shape[0], -1)
    if not HAVE_KERNEL:
        return dict(kernel=False, solve_diff=float("nan"), md_diff=float("nan"), stages=int(Q.shape[0]))
    a = solve_regularized(Q, p_ref, q_ref, beta, tol=tol, solver="cpp")
    b = solve_regularized(Q, p_ref, q_ref, beta, tol=tol, solver="numpy")
    c = md_iterate(Q, p_ref, q_ref, beta, T, solver="cpp")
    d = md_iterate(Q, p_ref, q_ref, beta, T, solver="numpy")
    return dict(kernel=True, solve_diff=float(np.abs(a[0] - b[0]).max() + np.abs(a[1] - b[1]).max()),
                md_diff=float(np.abs(c[0] - d[0]).max() + np.abs(c[1] - d[1]).max()), stages=int(Q.shape[0]))


def lp_checks(A: int, B: int, n_games: int = 32, rng_seed: int = 0) -> dict:
    """The zero-sum LP (plug-in NVI, PNVI) against closed forms.

    * Double-centred payoff M + c (zero row and column sums): the uniform pair is an equilibrium and
      the value is exactly c.
    * Random payoffs: the LP's (p, q) is a Nash equilibrium, i.e. its exploitability
      max_a (Q q)_a - min_b (Q^T p)_b is 0.

    Returns ``{"dc_value_err", "exploitability", "n_games"}`` (maxima over the games).
    """
    rng = np.random.default_rng([rng_seed, 8])
    M = rng.standard_normal((n_games, A, B))
    M = M - M.mean(axis=2, keepdims=True) - M.mean(axis=1, keepdims=True) + M.mean(axis=(1, 2), keepdims=True)
    c = rng.uniform(0, 4, n_games)
    _, _, val = zero_sum_lp_batch(M + c[:, None, None])
    Q = rng.uniform(0, 4, (n_games, A, B))
    p, q, _ = zero_sum_lp_batch(Q)
    expl = np.einsum("kab,kb->ka", Q, q).max(-1) - np.einsum("kab,ka->kb", Q, p).min(-1)
    return dict(dc_value_err=float(np.abs(val - c).max()), exploitability=float(expl.max()),
                n_games=int(n_games))


def true_model_floors(S: int, A: int, B: int, H: int, seeds: Sequence[int], beta: float = 0.1,
                      rose_tol: float = 1e-11, behavior_temp: float = 1.0, behavior_mix: float = 0.05,
                      reference: str = "behavior", solver: str | None = None) -> pd.DataFrame:
    """The evaluation's zero: gaps of ROSE and plug-in NVI run on the *true* model of each game.

    With exact r and P (:func:`~.game.exact_dataset`) ROSE returns the regularised equilibrium and the
    plug-in the Nash equilibrium, whose gaps are 0 in exact arithmetic; what the evaluation returns is
    the numerical floor below which no measured gap means anything.

    Returns
    -------
    DataFrame, one row per seed: ``rose_reg_gap``, ``plugin_unreg_gap``.
    """
    rows = []
    for seed in seeds:
        game, mu_b, nu_b = make_instance(seed, S, A, B, H, behavior_temp, behavior_mix)
        refs = _refs(reference, game, mu_b, nu_b)
        exact = exact_dataset(game)
        pi, nu = rose(exact, beta, refs, tol=rose_tol, solver=solver)
        pi0, nu0 = plugin_nash(exact)
        rows.append(dict(seed=int(seed), rose_reg_gap=reg_gap(game, pi, nu, beta, refs),
                         plugin_unreg_gap=unreg_gap(game, pi0, nu0)))
    return pd.DataFrame(rows)
