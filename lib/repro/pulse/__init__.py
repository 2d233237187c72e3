"""Chapter 19 · PULSE: self-supervised pretraining for physiological time series that keeps a signal's
dynamical *system* and discards window-specific state and noise, by reconstructing a trajectory from a
system code (ICML 2026; official code github.com/yenhochen/PULSE).

Modules: ``generators`` (Lorenz SDE family, McSharry ECGSYN, PPG-like pulses, windows and subject splits),
``_kernels`` (compiled batched RK4 integrators; numpy references in ``generators``), ``encoders`` (the shared
dilated-conv backbone), ``pulse`` (PULSE and its variants), ``baselines`` (SimCLR, TS2Vec-lite, MAE, DSVAE,
supervised), ``training`` (the common loop and cache keys), ``evaluate`` (linear probe, label efficiency,
ridge R^2, reconstruction R^2, transfer), ``experiments`` (drivers), ``pretrain`` (every model trained up front on ``workers`` processes), ``verdicts`` (claims, controls and the
functions that decide them).
"""
from .baselines import DSVAE, MaskedAE, SimCLR, Supervised, TS2VecLite, hierarchical_contrastive, nt_xent
from .config import CARD_RHOS, ECG_FLOOR_TARGET, ECG_METHODS, ECG_SETTING_NAMES, HARD_RHOS, LORENZ_METHODS, Config
from .encoders import DilatedConvEncoder
from .evaluate import (C_GRID, bootstrap_drop_diff, finetune_transfer, fit_logreg, label_efficiency,
                       label_subset, linear_probe, loss_flattening, heldout_flattening, masked_r2, probe_objective,
                       reconstruction_r2, ridge_r2, ecg_prediction_ceiling, same_recording_nn_r2,
                       pulse_horizon_r2, blind_forecast_r2, blind_infill_r2, onecycle_tail_share)
from .experiments import (LABELS, C3_METHODS, card_setting_cfg, blind_bar, noise_drop_table, noise_seeds, code_swap_test, ecg_predictability, heldout, k3_seeds, random_inits, run_code_swap, swap_errors, make_ecg, make_lorenz, make_ppg, mechanism_r2, per_seed,
                          random_floor, ecg_random_floor, ecg_random_floors, ecg_difficulty_rule, ECG_CALIB_SEEDS, run_ecg, run_label_efficiency, run_lorenz, run_noise, run_transfer, seeds,
                          summarise, training_quality)
from .generators import (ECG_CLASSES, ECG_SETTINGS, HAVE_KERNEL, PPG_CLASSES, Dataset, WindowSet, add_nuisance, ecg_dataset,
                         ecgsyn, heart_rate_bpm, integrate_ecg, qrs_peaks, integrate_lorenz, lorenz_dataset, lorenz_sde, lorenz_speed,
                         make_windows, ppg_dataset, ppg_like, sample_ppg_subjects, sample_subjects,
                         subject_split, two_channels)
from .pretrain import Job, pretrain_all, training_jobs
from .pulse import PULSE, InitConditionEncoder, ReconstructionGRU, TimeVarying, shift_and_mask, train_pulse
from .training import embed, fit

from .verdicts import CLAIMS, CONTROLS

__all__ = [
    "Config", "CLAIMS", "CONTROLS", "ECG_METHODS", "LORENZ_METHODS", "CARD_RHOS", "HARD_RHOS", "LABELS",
    "ECG_SETTINGS", "ECG_SETTING_NAMES", "ECG_FLOOR_TARGET", "ecg_random_floor", "ecg_random_floors", "ecg_difficulty_rule", "ECG_CALIB_SEEDS",
    # generators
    "HAVE_KERNEL", "ECG_CLASSES", "PPG_CLASSES", "Dataset", "WindowSet", "lorenz_sde", "lorenz_speed",
    "integrate_lorenz", "integrate_ecg", "qrs_peaks", "heart_rate_bpm", "sample_subjects", "ecgsyn", "two_channels", "add_nuisance",
    "sample_ppg_subjects", "ppg_like", "make_windows", "subject_split", "lorenz_dataset", "ecg_dataset",
    "ppg_dataset",
    # models
    "DilatedConvEncoder", "PULSE", "InitConditionEncoder", "TimeVarying", "ReconstructionGRU", "shift_and_mask",
    "train_pulse", "SimCLR", "TS2VecLite", "MaskedAE", "DSVAE", "Supervised", "nt_xent", "hierarchical_contrastive",
    "fit", "embed",
    # evaluation
    "C_GRID", "probe_objective", "fit_logreg", "linear_probe", "label_subset", "label_efficiency", "ridge_r2",
    "finetune_transfer", "bootstrap_drop_diff", "masked_r2", "reconstruction_r2", "loss_flattening",
    "heldout_flattening", "ecg_prediction_ceiling", "same_recording_nn_r2", "pulse_horizon_r2",
    "blind_forecast_r2", "blind_infill_r2", "onecycle_tail_share",
    # experiments
    "code_swap_test", "seeds", "make_lorenz", "make_ecg", "make_ppg", "mechanism_r2", "run_lorenz", "run_ecg",
    "run_label_efficiency", "run_transfer", "run_noise", "summarise", "per_seed", "random_floor", "heldout",
    "training_quality", "k3_seeds", "random_inits", "run_code_swap", "swap_errors", "ecg_predictability", "C3_METHODS", "card_setting_cfg", "blind_bar", "noise_seeds", "noise_drop_table", "Job", "pretrain_all", "training_jobs",
]
