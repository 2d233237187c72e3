"""Chapter 17 · EP-Order: ordering instruction-tuning data by embedding proximity, with mixed regions between
clusters (ICML 2026; no public code found).

Fine-tune a warm-up copy of the model on ~10 % of the data, embed every sample with it, cluster the embeddings,
visit the clusters along a short path (nearest next, improved by 2-opt) and soften every cluster boundary with a
mixed region; then instruction-tune in that order. Modules: ``tasks`` (seven synthetic instruction domains in
English templates), ``model`` (char-level GPT, response-only loss, metrics, the warm-up and MiniLM embedders),
``cluster`` (spherical k-means, purity), ``ordering`` (the proximity path with its compiled 2-opt kernel
``_kernels.cpp``, mixed regions, the baselines' orders), ``train`` (training with gradient logging; the cached base
model), ``experiments`` (the paired seeds), ``plots``, ``verdicts`` (CLAIMS, CONTROLS and their decisions).
"""
from . import verdicts
from .cluster import adjusted_rand_index, dominant_domain, kmeans, purity
from .config import ABLATIONS, Config
from .experiments import (CLUSTERED, METHODS, Experiment, SeedSetup, forgetting, forgetting_window, k_sweep,
                          minilm_purity, prepare_seed, run_experiment, run_method)
from .model import (Batch, CharGPT, MiniLM, MiniLMMissing, embed_samples, evaluate, exact_match, greedy_response,
                    minilm_embed, n_params, per_sample_loss, response_loss, sft_loss, token_nll)
from .ordering import (HAVE_KERNEL, centroid_distances, curriculum_order, domain_blocked_order, ep_keys, ep_order,
                       greedy_path, path_length, proximity_path, random_order, random_path_lengths, two_opt,
                       two_opt_reference)
from .tasks import (DOMAINS, MAX_LEN, TEMPLATES, VOCAB_SIZE, encode, format_sample, make_dataset, make_sample,
                    solve_brackets, solve_chain)
from .train import batches_of, domain_grad_cosines, load_or_train_base, lr_at, steps_per_epoch, train_it
from .verdicts import CLAIMS, CONTROLS, THRESHOLDS, unigram_entropy

__all__ = [
    "Config", "CLAIMS", "CONTROLS", "THRESHOLDS", "verdicts", "ABLATIONS", "METHODS", "CLUSTERED",
    "DOMAINS", "TEMPLATES", "MAX_LEN", "VOCAB_SIZE", "make_sample", "make_dataset", "format_sample", "encode",
    "solve_chain", "solve_brackets", "unigram_entropy",
    "CharGPT", "Batch", "sft_loss", "token_nll", "evaluate", "response_loss", "exact_match", "greedy_response",
    "per_sample_loss", "embed_samples", "MiniLM", "MiniLMMissing", "minilm_embed", "n_params",
    "kmeans", "purity", "dominant_domain", "adjusted_rand_index",
    "HAVE_KERNEL", "centroid_distances", "path_length", "greedy_path", "two_opt", "two_opt_reference",
    "proximity_path", "random_path_lengths", "ep_keys", "ep_order", "random_order", "curriculum_order",
    "domain_blocked_order",
    "train_it", "lr_at", "batches_of", "steps_per_epoch", "domain_grad_cosines", "load_or_train_base",
    "Experiment", "SeedSetup", "forgetting_window", "forgetting", "run_experiment", "prepare_seed", "run_method", "k_sweep", "minilm_purity",
]
