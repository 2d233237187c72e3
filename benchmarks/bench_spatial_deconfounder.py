"""Costs of chapter 13 (the Spatial Deconfounder), one thread, best-of CPU time.

1. Patch extraction: one ``sliding_window_view`` (``patches.extract_patches``) against the per-unit Python loop of
   the official code, for the full profile's 48 × 48 grid and r_enc = 2 — the card's reason for having no kernel.
2. Method costs on one full-profile grid: a C-VAE fit, an outcome-head fit, each linear baseline, so the chapter's
   budget can be read off per component.

    .venv/bin/python benchmarks/bench_spatial_deconfounder.py
"""
from __future__ import annotations

import numpy as np

from repro.common import seed_everything
from repro.common.timing import best_cpu_time
from repro.spatial_deconfounder import Config, baselines as B, experiment as E, extract_patches, simulate


def loop_patches(fields: np.ndarray, radius: int, idx: np.ndarray) -> np.ndarray:
    """The reference: one slice per unit in Python."""
    w = fields.shape[1]
    out = []
    for k in idx:
        i, j = divmod(int(k), w)
        out.append(fields[i - radius:i + radius + 1, j - radius:j + radius + 1])
    return np.stack(out)


def main() -> None:
    seed_everything(0)
    cfg = Config.from_profile("full")
    data = simulate(cfg.grid_size, cfg.kappa, cfg.lengthscale, cfg.tau_direct, cfg.tau_spill, 0, cfg.margin)
    fields = np.concatenate([data.A[..., None], data.X], -1)
    t_vec, P = best_cpu_time(lambda: extract_patches(fields, cfg.r_enc, data.idx), repeat=20)
    t_loop, Q = best_cpu_time(lambda: loop_patches(fields, cfg.r_enc, data.idx), repeat=5)
    assert np.array_equal(P, Q)
    print(f"patches of {data.idx.size} units, radius {cfg.r_enc}: sliding_window_view {1e3 * t_vec:.2f} ms, "
          f"Python loop {1e3 * t_loop:.2f} ms ({t_loop / t_vec:.1f} ×)")
    train, val = E.split_for(cfg, data, 0)
    W = B.lag_weights(cfg.grid_size, cfg.grid_size)
    rows = {"C-VAE fit (GMRF prior)": lambda: E._cvae(cfg, data, train, val, 0),
            "outcome head fit + effects": lambda: E._head(cfg, data, None, 0),
            "OLS": lambda: B.ols(data), "linear proxy": lambda: B.linear_proxy(data),
            "Spatial (ridge, GCV)": lambda: B.spatial_ridge(data, cfg.n_basis),
            "Spatial+": lambda: B.spatial_plus(data, cfg.n_basis), "S2SLS-lag1": lambda: B.s2sls_lag1(data, W)}
    for name, fn in rows.items():
        t, _ = best_cpu_time(fn, repeat=1 if "fit" in name else 3)
        print(f"{name:28s} {t:8.3f} s CPU")


if __name__ == "__main__":
    main()
