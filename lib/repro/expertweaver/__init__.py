"""Chapter 05 · ExpertWeaver: turning a dense SwiGLU MLP into shared + routed experts from its own activation
patterns, without training (arXiv 2602.15521, Zhao et al., ICML 2026; no public code found).

Modules: ``data`` (three byte-level domains available offline: CPython stdlib sources, pydoc topics, arithmetic),
``model`` (the dense SwiGLU GPT and the routed view of its MLPs; exact MAC counts), ``train`` (cached dense
training, held-out loss, downcycling), ``profile`` (gate activations, frequencies, universal neurons,
selectivity), ``partition`` (knee, layer-adaptive shared sizes, the budget rule, balanced k-means with its C++
assignment kernel, representative neurons), ``convert`` (ExpertWeaver and the baselines), ``latency`` (batch-1
timings on pre-sliced weights), ``experiments`` (the chapter's runs), ``plots``, ``verdicts`` (CLAIMS, CONTROLS
and the functions that decide them).
"""
from . import verdicts
from .config import Config
from . import convert
from .convert import LABELS, METHODS, all_experts_on, pattern_vectors, shared_plans
from .data import DOMAINS, MIX, Corpora, calibration_set, domain_corpora, heldout_set, mixed_batch, unigram_entropy
from .model import GPT, Routing, SwiGLU, build_model, ffn_macs, lm_loss, n_params
from .partition import (LayerPlan, balanced_assign, balanced_assign_ref, balanced_kmeans, expert_sizes,
                        knee_threshold, layer_adaptive_shared, plan_layer, plan_no_shared, representatives)
from .profile import (activation_frequency, active_mask, collect_gate_activations, frequency_by_domain,
                      profile_model, selectivity_index, selectivity_null, universal_fraction_bootstrap,
                      universal_neurons)
from .train import converted, downcycle, evaluate_loss, load_or_train_dense, max_logit_diff
from .verdicts import CLAIMS, CONTROLS, THRESHOLDS

__all__ = [
    "Config", "CLAIMS", "CONTROLS", "THRESHOLDS", "verdicts", "METHODS", "LABELS", "DOMAINS", "MIX",
    "Corpora", "domain_corpora", "calibration_set", "heldout_set", "mixed_batch", "unigram_entropy",
    "GPT", "SwiGLU", "Routing", "build_model", "ffn_macs", "lm_loss", "n_params",
    "LayerPlan", "balanced_assign", "balanced_assign_ref", "balanced_kmeans", "expert_sizes", "knee_threshold",
    "layer_adaptive_shared", "plan_layer", "plan_no_shared", "representatives",
    "activation_frequency", "active_mask", "collect_gate_activations", "frequency_by_domain", "profile_model",
    "selectivity_index", "selectivity_null", "universal_fraction_bootstrap", "universal_neurons",
    "convert", "all_experts_on", "pattern_vectors", "shared_plans",
    "converted", "downcycle", "evaluate_loss", "load_or_train_dense", "max_logit_diff",
]
