"""Chapter 16 · Decomper: compensating the representation drift of SVD-compressed transformer blocks
(ICML 2026; authors' code github.com/xinhaoH/SVD-Compen, not available to us: the method is reconstructed from
the abstract, see the card).

Modules: ``data`` (the stdlib byte corpus, file split, windows, the bracket/quote probe), ``model`` (the LLaMA-style
byte decoder, ``LowRankLinear``), ``train`` (the cached dense model), ``decompose`` (SVD, FWSVD, ASVD, SVD-LLM and
sequential compression), ``compensate`` (Decomper's refit / affine / moments / adam variants, the global re-fit
baseline), ``metrics`` (test loss, drift profile, probe, parameters, latency), ``experiments`` (the whole run),
``plots``, ``verdicts`` (CLAIMS, CONTROLS and the functions that decide them). No compiled kernel: the heavy work
is LAPACK on ≤ 172 × 64 matrices and small matmuls (card, "Compiled kernel"); ``benchmarks/bench_decomper.py``
times the fused low-rank forward against the dense one instead.
"""
from . import verdicts
from .compensate import (VARIANTS, affine_ls, decomper, fit_block_adam, fold_affine, global_refit, moment_match,
                         refit_output_factor)
from .config import Config
from .data import (PROBE_PAIRS, batches, closing_probe, corpus_info, eval_windows, load_stdlib_corpus,
                   split_by_file, unigram_entropy)
from .decompose import (METHODS, asvd, block_params, compress_model, fisher_rows, fwsvd, rank_for_ratio, svd_truncate,
                        svdllm, whitening)
from .experiments import Experiment, calib_windows, pure_carry, run_experiment
from .metrics import drift_profile, latency, param_count, probe_correct, test_loss
from .model import LINEARS, Block, LlamaLM, LowRankLinear, build_model, clone, collect_block_io, lm_loss, n_params
from .train import base_key, base_path, load_or_train_base, train_base
from .verdicts import CLAIMS, CONTROLS, THRESHOLDS

__all__ = [
    "Config", "CLAIMS", "CONTROLS", "THRESHOLDS", "verdicts", "METHODS", "VARIANTS", "PROBE_PAIRS", "LINEARS",
    "load_stdlib_corpus", "corpus_info", "split_by_file", "batches", "eval_windows", "closing_probe", "unigram_entropy",
    "LlamaLM", "Block", "LowRankLinear", "build_model", "clone", "collect_block_io", "lm_loss", "n_params",
    "train_base", "load_or_train_base", "base_key", "base_path",
    "rank_for_ratio", "svd_truncate", "fwsvd", "asvd", "svdllm", "whitening", "fisher_rows", "compress_model",
    "block_params",
    "refit_output_factor", "affine_ls", "moment_match", "fold_affine", "fit_block_adam", "decomper", "global_refit",
    "test_loss", "drift_profile", "probe_correct", "param_count", "latency",
    "Experiment", "run_experiment", "calib_windows", "pure_carry",
]
