"""Chapter 08 · ROSE / SOS-MD: KL-regularised offline learning of Nash equilibria in two-player
zero-sum Markov games (Chen, Zhang, Liu, Xie, Liu, Jiang, arXiv 2605.13025, ICML 2026).

Modules: ``game`` (random tabular games, behaviour policies, offline datasets), ``stage``
(regularised stage-game solvers and the LP), ``algos`` (ROSE, SOS-MD, plug-in NVI, PNVI, ROSE-LCB),
``evaluate`` (exact regularised / unregularised duality gaps), ``experiments`` (sweeps, slopes, the
measurements behind the controls), ``verdicts`` (CLAIMS, CONTROLS and the functions deciding them). The hot loop has a compiled kernel ``_kernels`` with the numpy reference in ``stage``.
"""
from .config import Config
from .algos import bonus, estimate_q, plugin_nash, pnvi, rose, rose_lcb, sos_md
from .evaluate import (q_estimation_error, reg_best_response, reg_gap, reg_value, unreg_best_response,
                       unreg_gap, unreg_value)
from .experiments import (METHODS, beta_sweep, closed_form_checks, fit_slope, gap_matrix, kernel_check,
                          lp_checks, make_dataset, make_instance, rate_sweep, run_method, seed_summary,
                          t_sweep, true_model_floors)
from .game import (Dataset, Game, behavior_policies, dataset_hash, empty_cell_fraction, exact_dataset,
                   random_markov_game, sample_dataset, uniform_policies)
from . import verdicts
from .verdicts import CLAIMS, CONTROLS, THRESHOLDS
from .stage import (HAVE_KERNEL, ConvergenceError, fixed_point_residual, half_range, md_iterate,
                    mmd_step, reg_stage_value, solve_regularized, stage_duality_gap, step_sizes,
                    zero_sum_lp, zero_sum_lp_batch)

__all__ = [
    # game
    "Game", "Dataset", "random_markov_game", "behavior_policies", "uniform_policies",
    "sample_dataset", "exact_dataset", "empty_cell_fraction", "dataset_hash",
    # stage
    "HAVE_KERNEL", "ConvergenceError", "half_range", "step_sizes", "mmd_step", "md_iterate",
    "solve_regularized", "fixed_point_residual", "reg_stage_value", "stage_duality_gap",
    "zero_sum_lp", "zero_sum_lp_batch",
    # algos
    "estimate_q", "bonus", "rose", "sos_md", "plugin_nash", "pnvi", "rose_lcb",
    # evaluate
    "reg_value", "reg_best_response", "reg_gap", "unreg_value", "unreg_best_response", "unreg_gap",
    "q_estimation_error",
    # experiments
    "METHODS", "make_instance", "make_dataset", "run_method", "rate_sweep", "t_sweep",
    "beta_sweep", "fit_slope", "gap_matrix", "seed_summary", "closed_form_checks", "kernel_check",
    "lp_checks", "true_model_floors",
    # verdicts
    "verdicts", "CLAIMS", "CONTROLS", "THRESHOLDS",
]
