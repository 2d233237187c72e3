"""Chapter 19 · PULSE: self-supervised pretraining for physiological time series that keeps a signal's
dynamical *system* and discards window-specific state and noise, by reconstructing a trajectory from a
system code (ICML 2026; official code github.com/yenhochen/PULSE).

Modules: ``generators`` (Lorenz SDE family, McSharry ECGSYN, PPG-like pulses, windows and subject splits),
``_kernels`` (compiled batched RK4 integrators; numpy references in ``generators``), ``encoders`` (the shared
dilated-conv backbone), ``pulse`` (PULSE and its variants), ``baselines`` (SimCLR, TS2Vec-lite, MAE, DSVAE,
supervised), ``training`` (the common loop and cache keys), ``evaluate`` (linear probe, label efficiency,
ridge R^2, transfer), ``experiments`` (drivers and claims).
"""
from .baselines import DSVAE, MaskedAE, SimCLR, Supervised, TS2VecLite, hierarchical_contrastive, nt_xent
from .config import ECG_METHODS, LORENZ_METHODS, Config
from .encoders import DilatedConvEncoder
from .evaluate import (C_GRID, bootstrap_drop_diff, finetune_transfer, fit_logreg, label_efficiency,
                       label_subset, linear_probe, probe_objective, ridge_r2)
from .experiments import (LABELS, code_swap_test, claim_c1, claim_c2, claim_c3, claim_c4, claim_c5, claim_c6, make_ecg,
                          make_lorenz, make_ppg, mechanism_r2, run_ecg, run_label_efficiency, run_lorenz,
                          run_noise, run_transfer, seeds, summarise)
from .generators import (ECG_CLASSES, HAVE_KERNEL, PPG_CLASSES, Dataset, WindowSet, add_nuisance, ecg_dataset,
                         ecgsyn, integrate_ecg, integrate_lorenz, lorenz_dataset, lorenz_sde, lorenz_speed,
                         make_windows, ppg_dataset, ppg_like, sample_ppg_subjects, sample_subjects,
                         subject_split, two_channels)
from .pulse import PULSE, InitConditionEncoder, ReconstructionGRU, TimeVarying, shift_and_mask, train_pulse
from .training import embed, fit

#: The card's claims (ids and statements exactly as in ../shared/papers/19_pulse.md).
CLAIMS = {
    "C1": "(synthetic: class identity) On Lorenz-SDE windows (5 classes = 5 values of ρ; noise 10% of RMS), "
          "PULSE's linear-probe accuracy is ≥ that of DSVAE, MAE and SimCLR in ≥ 2/3 seeds; "
          "PULSE-oracle ≥ PULSE − 0.02.",
    "C2": "(transferable vs. non-transferable, Lorenz) Ridge R² (5-fold CV) from the pooled embedding to the "
          "window's own state (average of the R² for x(t₀) and for the window-mean state, both set by the initial "
          "condition) is lower for PULSE than for DSVAE and MAE, and PULSE's R² for log ρ is ≥ theirs − 0.02 "
          "(so a collapsed encoder cannot pass).",
    "C3": "(semantic classes, ECG-like) On synthetic McSharry-ECG with 4 morphology/rhythm classes, PULSE's "
          "macro-F1 is within 0.01 of, or above, the best of SimCLR, TS2Vec-lite, MAE and DSVAE in ≥ 2/3 seeds.",
    "C4": "(label efficiency) With 1% and 5% of labels, a linear probe on PULSE beats the same encoder trained "
          "supervised from scratch on the same labels, in 3/3 seeds.",
    "C5": "(transfer) Pretrain on ECG, fine-tune end-to-end on PPG-like pulse waveforms (3 vascular classes). "
          "PULSE init ≥ random init and ≥ SimCLR init in accuracy.",
    "C6": "(noise robustness) As noise goes 0 → 0.3 RMS, PULSE's Lorenz accuracy drops less than DSVAE's "
          "(seed 0 only; bootstrap CI over test windows).",
}

__all__ = [
    "Config", "CLAIMS", "ECG_METHODS", "LORENZ_METHODS", "LABELS",
    # generators
    "HAVE_KERNEL", "ECG_CLASSES", "PPG_CLASSES", "Dataset", "WindowSet", "lorenz_sde", "lorenz_speed",
    "integrate_lorenz", "integrate_ecg", "sample_subjects", "ecgsyn", "two_channels", "add_nuisance",
    "sample_ppg_subjects", "ppg_like", "make_windows", "subject_split", "lorenz_dataset", "ecg_dataset",
    "ppg_dataset",
    # models
    "DilatedConvEncoder", "PULSE", "InitConditionEncoder", "TimeVarying", "ReconstructionGRU", "shift_and_mask",
    "train_pulse", "SimCLR", "TS2VecLite", "MaskedAE", "DSVAE", "Supervised", "nt_xent", "hierarchical_contrastive",
    "fit", "embed",
    # evaluation
    "C_GRID", "probe_objective", "fit_logreg", "linear_probe", "label_subset", "label_efficiency", "ridge_r2",
    "finetune_transfer", "bootstrap_drop_diff",
    # experiments
    "code_swap_test", "seeds", "make_lorenz", "make_ecg", "make_ppg", "mechanism_r2", "run_lorenz", "run_ecg",
    "run_label_efficiency", "run_transfer", "run_noise", "summarise",
    "claim_c1", "claim_c2", "claim_c3", "claim_c4", "claim_c5", "claim_c6",
]
