"""Chapter 13 · The Spatial Deconfounder (ICML 2026; authors' code github.com/moprescu/Spatial-CI).

On a grid, a smooth unmeasured field U drives both the treatments A and the outcomes Y, and Y_s also depends on
the neighbours' treatments. Because U is smooth, the treatments around a unit act as the "multiple causes" of
Wang & Blei's deconfounder: stage 1 fits a conditional VAE over treatment patches with a GMRF prior and keeps
its posterior mean Ẑ as a substitute confounder; stage 2 adds Ẑ to a flexible outcome model and reads direct
and spillover effects off plug-in contrasts. Modules: ``data`` (the SpaCE-like generator with exact
counterfactuals), ``patches`` (patches, interventions, grid Laplacian, block split), ``cvae`` (stage 1),
``heads`` (stage 2), ``baselines`` (OLS, linear proxy, Spatial, Spatial+, S2SLS-lag1), ``experiment`` (the
replicates), ``verdicts`` (CLAIMS, CONTROLS and the functions deciding them), ``plots``. No compiled kernel:
patch extraction is one ``sliding_window_view`` and the models are tiny (card, "Compiled kernel").
"""
from . import baselines, cvae, data, experiment, heads, patches, plots, verdicts
from .baselines import (laplacian_basis, linear_proxy, ols, outer_ring_mean, ridge, ridge_gcv, s2sls_fit, s2sls_lag1,
                        spatial_plus, spatial_ridge)
from .config import Config
from .cvae import (CVAEFit, PatchCVAE, fit_cvae, gmrf_kl, gmrf_precision, iid_kl, predictive_pvalue,
                   substitute_confounder)
from .data import SpatialData, gaussian_field, neighbour_mean, potential_outcomes, simulate
from .experiment import recovery_r2, run_all, run_main, run_sweep, summarize
from .heads import PatchHead, fit_head, head_effects, head_inputs, plugin_effects
from .patches import block_split, extract_patches, grid_laplacian, override
from .verdicts import CLAIMS, CONTROLS, THRESHOLDS

__all__ = [
    "Config", "CLAIMS", "CONTROLS", "THRESHOLDS", "verdicts", "baselines", "cvae", "data", "experiment", "heads",
    "patches", "plots",
    "SpatialData", "gaussian_field", "neighbour_mean", "potential_outcomes", "simulate",
    "extract_patches", "override", "grid_laplacian", "block_split",
    "PatchCVAE", "CVAEFit", "gmrf_kl", "gmrf_precision", "iid_kl", "fit_cvae", "substitute_confounder",
    "predictive_pvalue",
    "PatchHead", "fit_head", "head_inputs", "plugin_effects", "head_effects",
    "ols", "linear_proxy", "outer_ring_mean", "laplacian_basis", "ridge", "ridge_gcv", "spatial_ridge",
    "spatial_plus", "s2sls_fit", "s2sls_lag1",
    "run_main", "run_sweep", "run_all", "summarize", "recovery_r2",
]
