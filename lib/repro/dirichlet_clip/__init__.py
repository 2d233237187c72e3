"""Chapter 07 · Dirichlet-CLIP (UCAT): calibrated adversarial fine-tuning of CLIP through a Dirichlet view of
its cosine similarities (Lu, Tao, Zhang, Qiu, Yang, Zhao, "Calibrating Uncertainty for Zero-Shot Adversarial
CLIP", arXiv 2512.12997, ICML 2026; code github.com/VivienLu/UCAT).

Modules: ``data`` (digits, captions, the zero-shot suite, the frozen MiniLM text tower), ``model`` (the toy
two-tower CLIP and its contrastive pre-training), ``attacks`` (L∞ PGD), ``losses`` (UCAT's Dirichlet KL and the
baselines TeCoA, PMG-AFT, FARE, softmax-KL), ``train`` (adversarial fine-tuning), ``metrics`` (ECE, entropy,
Dirichlet uncertainty, evaluation under attack), ``experiments`` (seeds, tables, claims). No compiled kernel:
the time goes into autograd passes through the CNN; everything else is a vectorised one-liner.
"""
from .attacks import pgd_ce, pgd_ce_restarts, pgd_embedding, pgd_linf
from .config import METHOD_NAMES, Config
from .data import (CLASS_TEMPLATE, WORDS, MiniLMMissing, Splits, Task, TextBank, caption, caption_table,
                   caption_templates, load_digit_splits, load_minilm, rotate_images, zero_shot_suite)
from .experiments import (TASKS, SeedRun, Setup, Verdict, build_setup, claim_c1, claim_c2, claim_c3, claim_c4,
                          claim_c5, claim_c6, collapse_table, dirichlet_view, float32_kl_error, loss_scale_table, strength_table, loss_ratio, pretrain_summary, masking_table, results_table, run_seed,
                          spearman_over_tasks, suite_average, sweep_table, torch_gen)
from .losses import (dirichlet_alpha, dirichlet_kl, fare_loss, pmg_aft_loss, softmax_kl, softmax_kl_loss,
                     tecoa_loss, ucat_lambda, ucat_loss)
from .metrics import (TaskEval, dirichlet_expected_entropy, ece, entropy, eval_alpha, evaluate_task,
                      reliability_bins, summarize)
from .model import ImageEncoder, PretrainResult, ToyCLIP, augment, frozen_copy, pretrain_clip, pretrain_key
from .train import AFT_METHODS, FinetuneLog, adversarial_finetune

CLAIMS: dict[str, str] = {
    "C1": "For the pretrained toy CLIP and for TeCoA, mean predictive entropy on PGD inputs is lower than on clean "
          "inputs on ≥ 3 of 4 suite tasks, while accuracy drops; adversarial ECE ≥ 2× clean ECE.",
    "C2": "UCAT's adversarial ECE averaged over the suite is ≥ 25% (relative) lower than TeCoA's and lower than "
          "PMG-AFT's and FARE's.",
    "C3": "UCAT's suite-average robust accuracy ≥ TeCoA's − 3 points.",
    "C4": "UCAT's suite-average clean accuracy ≥ TeCoA's and is within 8 points of the original model.",
    "C5": "Mean entropy over ε ∈ {0, ε/2, ε, 2ε} is non-decreasing for UCAT (Spearman ρ ≥ 0.8 on the 4 points, "
          "averaged over tasks), but not for TeCoA (ρ < 0.8).",
    "C6": "Ablation softmax-KL (same anchor and direction, KL(softmax(s·cos_θ(x+δ)) ‖ softmax(s·cos_θ0(x))), weight 1) "
          "gives higher adversarial ECE than UCAT.",
}

__all__ = [
    "Config", "CLAIMS", "METHOD_NAMES", "AFT_METHODS", "TASKS",
    # data
    "WORDS", "CLASS_TEMPLATE", "Splits", "Task", "TextBank", "MiniLMMissing", "load_minilm", "load_digit_splits",
    "caption", "caption_table", "caption_templates", "rotate_images", "zero_shot_suite",
    # model
    "ImageEncoder", "ToyCLIP", "PretrainResult", "augment", "frozen_copy", "pretrain_clip", "pretrain_key",
    # attacks
    "pgd_linf", "pgd_ce", "pgd_embedding", "pgd_ce_restarts",
    # losses
    "dirichlet_alpha", "dirichlet_kl", "ucat_lambda", "softmax_kl", "tecoa_loss", "ucat_loss", "softmax_kl_loss",
    "pmg_aft_loss", "fare_loss",
    # train / metrics
    "FinetuneLog", "adversarial_finetune", "TaskEval", "ece", "reliability_bins", "entropy",
    "dirichlet_expected_entropy", "eval_alpha", "evaluate_task", "summarize",
    # experiments
    "Setup", "SeedRun", "Verdict", "build_setup", "run_seed", "results_table", "sweep_table", "masking_table",
    "suite_average", "loss_ratio", "collapse_table", "pretrain_summary", "dirichlet_view", "loss_scale_table", "float32_kl_error", "strength_table", "torch_gen", "spearman_over_tasks",
    "claim_c1", "claim_c2", "claim_c3", "claim_c4", "claim_c5", "claim_c6",
]
