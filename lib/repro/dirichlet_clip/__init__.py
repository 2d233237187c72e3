"""Chapter 07 · Dirichlet-CLIP (UCAT): calibrated adversarial fine-tuning of CLIP through a Dirichlet view of
its cosine similarities (Lu, Tao, Zhang, Qiu, Yang, Zhao, "Calibrating Uncertainty for Zero-Shot Adversarial
CLIP", arXiv 2512.12997, ICML 2026; code github.com/VivienLu/UCAT).

Modules: ``data`` (digits, captions, the zero-shot suite, the frozen MiniLM text tower), ``model`` (the toy
two-tower CLIP and its contrastive pre-training), ``attacks`` (L∞ PGD), ``losses`` (UCAT's Dirichlet KL and the
baselines TeCoA, PMG-AFT, FARE, softmax-KL), ``train`` (adversarial fine-tuning), ``metrics`` (ECE, entropy,
Dirichlet uncertainty, evaluation under attack), ``experiments`` (ε calibration, seeds with common random
numbers, tables), ``verdicts`` (the claims C1–C6, the controls K1–K3 and the functions deciding them). No compiled kernel:
the time goes into autograd passes through the CNN; everything else is a vectorised one-liner.
"""
from . import verdicts
from .attacks import pgd_ce, pgd_ce_restarts, pgd_embedding, pgd_linf
from .config import EPS_GRID, METHOD_NAMES, Config, eps_sweep_around
from .data import (CLASS_TEMPLATE, WORDS, MiniLMMissing, Splits, Task, TextBank, caption, caption_table,
                   caption_templates, load_digit_splits, load_minilm, rotate_images, zero_shot_suite)
from .experiments import (TASKS, Calibration, SeedRun, Setup, build_setup, calibrate_eps, choose_eps, collapse_table,
                          dirichlet_view, evaluate_suite, finetune, float32_kl_error, loss_ratio, loss_scale_table,
                          masking_table, original_clean_entropy, per_task_table, pretrain_summary, results_table, run_seed, strength_table, suite_average,
                          sweep_table, t4_diagnosis, tau_rob_panel, torch_gen)
from .losses import (dirichlet_alpha, dirichlet_kl, fare_loss, pmg_aft_loss, softmax_kl, softmax_kl_loss,
                     tecoa_loss, ucat_lambda, ucat_loss)
from .metrics import (TaskEval, dirichlet_expected_entropy, ece, entropy, eval_alpha, evaluate_task,
                      reliability_bins, summarize)
from .model import (ImageEncoder, PretrainResult, ToyCLIP, augment, frozen_copy, noisy_caption_classes, pretrain_clip,
                    pretrain_key)
from .train import AFT_BATCH, AFT_METHODS, FinetuneLog, adversarial_finetune, batch_plan
from .verdicts import (CLAIMS, CONTROLS, K2_TASKS, claim_c1, claim_c2, claim_c3, claim_c4, claim_c5, claim_c6,
                       claims_suite, control_k1, control_k2, control_k2_task, control_k3, spearman_over_tasks)

__all__ = [
    "Config", "CLAIMS", "CONTROLS", "METHOD_NAMES", "AFT_METHODS", "AFT_BATCH", "TASKS", "EPS_GRID",
    "eps_sweep_around", "verdicts",
    # data
    "WORDS", "CLASS_TEMPLATE", "Splits", "Task", "TextBank", "MiniLMMissing", "load_minilm", "load_digit_splits",
    "caption", "caption_table", "caption_templates", "rotate_images", "zero_shot_suite",
    # model
    "ImageEncoder", "ToyCLIP", "PretrainResult", "augment", "frozen_copy", "pretrain_clip", "pretrain_key",
    "noisy_caption_classes",
    # attacks
    "pgd_linf", "pgd_ce", "pgd_embedding", "pgd_ce_restarts",
    # losses
    "dirichlet_alpha", "dirichlet_kl", "ucat_lambda", "softmax_kl", "tecoa_loss", "ucat_loss", "softmax_kl_loss",
    "pmg_aft_loss", "fare_loss",
    # train / metrics
    "FinetuneLog", "adversarial_finetune", "batch_plan", "TaskEval", "ece", "reliability_bins", "entropy",
    "dirichlet_expected_entropy", "eval_alpha", "evaluate_task", "summarize",
    # experiments
    "Setup", "SeedRun", "Calibration", "build_setup", "calibrate_eps", "choose_eps", "finetune", "evaluate_suite", "run_seed",
    "tau_rob_panel", "results_table", "sweep_table", "masking_table", "suite_average", "loss_ratio",
    "collapse_table", "pretrain_summary", "dirichlet_view", "loss_scale_table", "float32_kl_error",
    "strength_table", "torch_gen", "spearman_over_tasks", "original_clean_entropy", "per_task_table",
    "t4_diagnosis",
    # verdicts
    "control_k1", "control_k2", "control_k2_task", "control_k3", "claims_suite", "K2_TASKS", "claim_c1", "claim_c2", "claim_c3", "claim_c4", "claim_c5", "claim_c6",
]
