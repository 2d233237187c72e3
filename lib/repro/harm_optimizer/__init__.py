"""Chapter 09 · Harm-aware optimizer updates: remove the per-sample harm of SGD-momentum / AdamW steps with a
batch-size-dimensional last-layer QP (*Mitigating Per-Sample Harm in Stochastic Optimization*, ICML 2026; no
public code — the objective, the solver and the way the correction enters each optimizer are our
reconstruction from the abstract, as the card lays it out).

Modules: ``data`` (MNIST-1D generated offline, scikit-learn digits), ``models`` (1-D CNN, MLP; ``features`` +
``head``), ``qp`` (the dual problem, the last-layer Gram, FISTA in torch and ``_kernels`` in C++),
``optim`` (Harm-SGDM, Harm-AdamW, the torch baselines, per-sample gradients), ``diagnostics`` (measured harm,
Gram agreement), ``experiments`` (training runs, the proxy-vs-exact runs, controls' extra runs, timing),
``plots``, ``verdicts`` (CLAIMS, CONTROLS and the functions that decide them).
"""
from . import diagnostics, experiments, plots, qp, verdicts
from .config import DATASETS, OPTIMIZERS, Config
from .data import Split, interpolate_length, load, load_digits_split, load_mnist1d
from .diagnostics import first_order_agreement, gram_agreement, gram_report, harm_stats
from .experiments import (RunResult, ablation_runs, checkpoint_frame, exact_runs, extra_baselines, lr_grid,
                          main_runs, overhead_table, run_seed, steps_for, summary_frame, timing_sweep, train_run)
from .models import CNN1D, MLP, build_model, n_params
from .optim import HarmAdamW, HarmSGDM, TorchBaseline, make_optimizer, per_sample_grads
from .qp import (cap_correction, lastlayer_c, lastlayer_gram, solve_nonneg_qp, solve_nonneg_qp_torch, violations,
                 with_bias)
from .verdicts import CLAIMS, CONTROLS, THRESHOLDS

__all__ = [
    "Config", "CLAIMS", "CONTROLS", "THRESHOLDS", "DATASETS", "OPTIMIZERS", "verdicts", "diagnostics",
    "experiments", "plots", "qp",
    "Split", "load", "load_mnist1d", "load_digits_split", "interpolate_length",
    "CNN1D", "MLP", "build_model", "n_params",
    "solve_nonneg_qp", "solve_nonneg_qp_torch", "lastlayer_gram", "lastlayer_c", "cap_correction", "violations",
    "with_bias",
    "HarmSGDM", "HarmAdamW", "TorchBaseline", "make_optimizer", "per_sample_grads",
    "harm_stats", "gram_agreement", "gram_report", "first_order_agreement",
    "RunResult", "train_run", "run_seed", "steps_for", "lr_grid", "main_runs", "exact_runs", "extra_baselines",
    "ablation_runs", "summary_frame", "checkpoint_frame", "timing_sweep", "overhead_table",
]
