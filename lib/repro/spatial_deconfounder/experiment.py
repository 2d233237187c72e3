"""The replicates of chapter 13: one main replicate per seed (C1-C3, controls K1-K4) and one sweep replicate
per seed (C4-C6, the unmasked ablation). Biases are standardized, (τ̂ − τ)/sd(Y), signed."""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
from sklearn.linear_model import LinearRegression, LogisticRegression

from . import baselines as B
from .config import Config
from .cvae import CVAEFit, fit_cvae, predictive_pvalue, substitute_confounder
from .data import SpatialData, neighbour_mean, simulate
from .heads import head_effects
from .patches import block_split

LINEAR = ("ols", "oracle_ols", "proxy", "spatial", "spatial_plus", "s2sls")
HEAD_LR = 3e-3      # the card's 1e-3 left the oracle head biased after 30 epochs (K1); see heads.PatchHead


def recovery_r2(Z: np.ndarray, target: np.ndarray, train: np.ndarray, test: np.ndarray) -> float:
    """Held-out R² of a linear regression of ``target`` on ``Z`` (multivariate: invariant to linear maps of Z)."""
    m = LinearRegression().fit(Z[train], target[train])
    return float(m.score(Z[test], target[test]))


def overlap(Z: np.ndarray, data: SpatialData, lo: float = 0.05, hi: float = 0.95) -> float:
    """Share of units whose logistic propensity P(A_s = 1 | Ẑ, X) lies in [lo, hi] (K4)."""
    F = np.column_stack([Z, data.at(data.X)])
    F = (F - F.mean(0)) / (F.std(0) + 1e-12)
    p = LogisticRegression(C=1e4, max_iter=2000).fit(F, data.at(data.A)).predict_proba(F)[:, 1]
    return float(np.mean((p >= lo) & (p <= hi)))


def _bias(est: dict, data: SpatialData) -> dict[str, float]:
    s = data.sd_y
    return {"direct": (est["direct"] - data.direct_true) / s, "spill": (est["spill"] - data.spill_true) / s}


def _cvae(cfg: Config, data, train, val, seed, **kw) -> CVAEFit:
    args = dict(epochs=cfg.cvae_epochs, latent_dim=cfg.latent_dim, beta_max=cfg.beta_max, warmup=cfg.beta_warmup,
                tau=cfg.gmrf_tau, seed=seed, radius=cfg.r_enc, mask_radius=0 if cfg.mask_center else None)
    args.update(kw)
    return fit_cvae(data, train=train, val=val, **args)


def _head(cfg: Config, data, Z, seed) -> dict:
    return head_effects(data, Z, cfg.r_out, cfg.head_epochs, seed, lr=HEAD_LR)


def linear_baselines(cfg: Config, data: SpatialData, W: np.ndarray | None = None,
                     which: tuple[str, ...] = LINEAR) -> dict[str, dict]:
    U = data.at(data.U)
    fns = {"ols": lambda: B.ols(data), "oracle_ols": lambda: B.ols(data, np.column_stack([U, U ** 2])),
           "proxy": lambda: B.linear_proxy(data), "spatial": lambda: B.spatial_ridge(data, cfg.n_basis),
           "spatial_plus": lambda: B.spatial_plus(data, cfg.n_basis), "s2sls": lambda: B.s2sls_lag1(data, W)}
    return {m: _bias(fns[m](), data) for m in which}


def rep_seed(cfg: Config, i: int) -> int:
    """Data seed of replicate i: distinct across the notebook's ``seed`` and across replicates."""
    return 1000 * cfg.seed + i


def split_for(cfg: Config, data: SpatialData, seed: int) -> tuple[np.ndarray, np.ndarray]:
    buf = max(cfg.r_enc, max(cfg.radius_sweep))
    return block_split(data.coords, 8, 0.2, buf, np.random.default_rng([seed, 7]))


def run_main(cfg: Config, i: int, W: np.ndarray | None = None, keep: bool = False) -> dict:
    """Main replicate i at κ = cfg.kappa: C-VAEs with the GMRF and iid priors and the ring-masked variant,
    the SD / SD-ring / naive / oracle heads, the linear baselines, and the controls' numbers."""
    t0 = time.perf_counter()
    seed = rep_seed(cfg, i)
    data = simulate(cfg.grid_size, cfg.kappa, cfg.lengthscale, cfg.tau_direct, cfg.tau_spill, seed, cfg.margin)
    train, val = split_for(cfg, data, seed)
    U, X = data.at(data.U), data.at(data.X)
    Abar = data.at(neighbour_mean(data.A, 1))
    out: dict = {"seed": seed, "bias": {}, "r2": {}}
    fits = {"gmrf": _cvae(cfg, data, train, val, seed),
            "iid": _cvae(cfg, data, train, val, seed, prior="iid"),
            "ring": _cvae(cfg, data, train, val, seed, mask_radius=cfg.r_out)}
    Z = {k: substitute_confounder(f) for k, f in fits.items()}
    for k in fits:
        out["r2"][k] = recovery_r2(Z[k], U, train, val)
    out["r2"]["nbr24"] = recovery_r2(np.column_stack([data.at(neighbour_mean(data.A, 2)), X]), U, train, val)
    out["r2"]["X"] = recovery_r2(X, U, train, val)
    out["r2"]["ring_mean"] = recovery_r2(np.column_stack([B.outer_ring_mean(data), X]), U, train, val)
    out["kl_per_dim"] = fits["gmrf"].kl_per_dim().tolist()
    out["kl_per_dim_iid"] = fits["iid"].kl_per_dim().tolist()
    out["overlap"] = overlap(Z["gmrf"], data)
    out["overlap_ring"] = overlap(Z["ring"], data)
    out["r2_abar"] = recovery_r2(np.column_stack([Z["gmrf"], X]), Abar, train, val)
    out["r2_abar_ring"] = recovery_r2(np.column_stack([Z["ring"], X]), Abar, train, val)
    out["ppc"] = predictive_pvalue(fits["gmrf"], data.at(data.A), 100, seed)
    out["best_epoch"] = fits["gmrf"].history["best_epoch"]
    for name, z in (("sd", Z["gmrf"]), ("sd_ring", Z["ring"]), ("naive", None), ("oracle_head", U[:, None])):
        out["bias"][name] = _bias(_head(cfg, data, z, seed), data)
    out["bias"].update(linear_baselines(cfg, data, W))
    out["sd_y"] = data.sd_y
    out["seconds"] = time.perf_counter() - t0
    if keep:
        out["data"], out["fits"], out["Z"], out["split"] = data, fits, Z, (train, val)
    return out


def run_sweep(cfg: Config, i: int, W: np.ndarray | None = None) -> dict:
    """Sweep replicate i (same data seed as main replicate i): encoder radii (C4), κ = 0 (C5), the other κ of
    the sweep with common random numbers (C6, K2's trend), and the unmasked encoder (ablation)."""
    t0 = time.perf_counter()
    seed = rep_seed(cfg, i)
    out: dict = {"seed": seed, "r2_radius": {}, "kappa": {}}
    data = simulate(cfg.grid_size, cfg.kappa, cfg.lengthscale, cfg.tau_direct, cfg.tau_spill, seed, cfg.margin)
    train, val = split_for(cfg, data, seed)
    U = data.at(data.U)
    for r in cfg.radius_sweep:
        if r == cfg.r_enc:
            continue                                       # taken from the main replicate
        f = _cvae(cfg, data, train, val, seed, radius=r)
        out["r2_radius"][r] = recovery_r2(substitute_confounder(f), U, train, val)
    # the unmasked (official) encoder at the main κ
    f = _cvae(cfg, data, train, val, seed, mask_radius=None)
    Zu = substitute_confounder(f)
    out["unmasked"] = {"bias": _bias(_head(cfg, data, Zu, seed), data), "r2": recovery_r2(Zu, U, train, val),
                       "overlap": overlap(Zu, data)}
    for kappa in sorted({0.0, *cfg.kappa_sweep}):
        if kappa == cfg.kappa:
            continue                                       # taken from the main replicate
        d = simulate(cfg.grid_size, kappa, cfg.lengthscale, cfg.tau_direct, cfg.tau_spill, seed, cfg.margin)
        fz = _cvae(cfg, d, train, val, seed)
        Zk = substitute_confounder(fz)
        which = LINEAR if kappa == 0 else ("ols", "spatial_plus")
        res = {"sd": _bias(_head(cfg, d, Zk, seed), d), **linear_baselines(cfg, d, W, which)}
        if kappa == 0:
            res["naive"] = _bias(_head(cfg, d, None, seed), d)
        out["kappa"][kappa] = {"bias": res, "overlap": overlap(Zk, d), "r2": recovery_r2(Zk, U, train, val)}
    out["seconds"] = time.perf_counter() - t0
    return out


def run_all(cfg: Config, progress: Callable[[str], None] | None = print) -> tuple[list[dict], list[dict]]:
    """All main and sweep replicates; the first main replicate keeps its data and fits for the figures."""
    W = B.lag_weights(cfg.grid_size, cfg.grid_size)
    mains, sweeps = [], []
    for i in range(cfg.n_reps):
        mains.append(run_main(cfg, i, W, keep=(i == 0)))
        if progress:
            progress(f"main replicate {i + 1}/{cfg.n_reps}: {mains[-1]['seconds']:.1f} s")
    for i in range(cfg.n_sweep_reps):
        sweeps.append(run_sweep(cfg, i, W))
        if progress:
            progress(f"sweep replicate {i + 1}/{cfg.n_sweep_reps}: {sweeps[-1]['seconds']:.1f} s")
    return mains, sweeps


# ----------------------------------------------------------------------------- tables

def bias_matrix(mains: list[dict], effect: str) -> dict[str, np.ndarray]:
    """method -> per-seed signed standardized bias of ``effect``."""
    return {m: np.array([r["bias"][m][effect] for r in mains]) for m in mains[0]["bias"]}


def radius_r2(cfg: Config, mains: list[dict], sweeps: list[dict]) -> dict[int, np.ndarray]:
    """r_enc -> per-seed held-out R²(U | Ẑ) over the sweep seeds (the main replicate supplies r_enc)."""
    out = {}
    for r in cfg.radius_sweep:
        out[r] = np.array([mains[i]["r2"]["gmrf"] if r == cfg.r_enc else s["r2_radius"][r]
                           for i, s in enumerate(sweeps)])
    return out


def kappa_bias(cfg: Config, mains: list[dict], sweeps: list[dict], method: str, effect: str = "direct"
               ) -> dict[float, np.ndarray]:
    """κ -> per-seed signed bias of ``method`` over the sweep seeds (κ = cfg.kappa from the main replicates)."""
    out = {}
    for kappa in sorted({0.0, *cfg.kappa_sweep, cfg.kappa}):
        vals = []
        for i, s in enumerate(sweeps):
            src = mains[i]["bias"] if kappa == cfg.kappa else s["kappa"][kappa]["bias"]
            vals.append(src[method][effect] if method in src else np.nan)
        out[kappa] = np.array(vals)
    return out


def summarize(biases: dict[str, np.ndarray], truth_floor: float | None = None) -> "list[dict]":
    """Per method: mean signed bias with its 95 % t-interval, mean |bias|, RMSE."""
    from repro.common import mean_ci
    rows = []
    for m, b in biases.items():
        mean, half = mean_ci(b) if b.size > 1 else (float(b.mean()), float("nan"))
        rows.append({"method": m, "mean bias": float(mean), "ci95 half-width": float(half),
                     "mean |bias|": float(np.abs(b).mean()), "RMSE": float(np.sqrt((b ** 2).mean())),
                     "seeds": int(b.size)})
    return rows
