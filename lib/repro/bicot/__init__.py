"""Chapter 03 · BiCoT: a model watermark hidden in the geometry of chain-of-thought anchors, verified from top-k
log-probs (ICML 2026, arXiv 2605.28890; code not released — the verifier here is our reconstruction).

Modules: ``tasks`` (chain arithmetic with a written trace, token roles), ``model`` (a small GPT, greedy CoT, cached
bases), ``saliency`` (grad × input, anchor types), ``watermark`` (key, energy ratio, signature and control losses,
embedding), ``api`` (the top-k log-prob API and output attacks), ``verify`` (RSR registration, scores, null keys),
``attacks`` (fine-tuning, quantisation, noise, pruning, whitening), ``baselines`` (KGW, trigger fingerprint),
``metrics`` (AUC, TPR at FPR), ``experiments`` (the stages of the notebook), ``plots``, ``verdicts``.
No compiled kernel: null-key scoring is batched numpy (``benchmarks/bench_bicot.py`` times it).
"""
from .config import Config
from . import api, attacks, baselines, experiments, metrics, saliency, tasks, verify, watermark
from .api import Records, query, reported
from .attacks import finetune_attack, magnitude_prune, quantize, weight_noise, whitening_attack
from .baselines import green_lists, kgw_detect, kgw_generate, train_trigger_fp, trigger_rate
from .metrics import auc, tpr_at_fpr
from .model import GPT, GPTConfig, answer_accuracy, forward_hidden, greedy_cot, n_params
from .saliency import grad_x_input, select_anchor_types
from .tasks import Tokenizer, make_cot_problem, make_problems, token_roles
from .verify import register, scores, verify as verify_records
from .watermark import embed_watermark, energy_ratio_np, energy_ratio_torch, hidden_ratio, make_key, make_keys
from . import verdicts
from .verdicts import CLAIMS, CONTROLS, THRESHOLDS

__all__ = ["Config", "CLAIMS", "CONTROLS", "THRESHOLDS", "verdicts", "api", "attacks", "baselines", "experiments",
           "metrics", "saliency", "tasks", "verify", "watermark", "Records", "query", "reported", "finetune_attack",
           "magnitude_prune", "quantize", "weight_noise", "whitening_attack", "green_lists", "kgw_detect",
           "kgw_generate", "train_trigger_fp", "trigger_rate", "auc", "tpr_at_fpr", "GPT", "GPTConfig",
           "answer_accuracy", "forward_hidden", "greedy_cot", "n_params", "grad_x_input", "select_anchor_types",
           "Tokenizer", "make_cot_problem", "make_problems", "token_roles", "register", "scores", "verify_records",
           "embed_watermark", "energy_ratio_np", "energy_ratio_torch", "hidden_ratio", "make_key", "make_keys"]
