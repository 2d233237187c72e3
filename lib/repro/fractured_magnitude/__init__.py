"""Chapter 06 · The Fractured Magnitude Hypothesis: why a vision-language model that "sees" how many stones
are on a Go board still cannot say the number (Pang, Hou, Wang, Sachan, ICML 2026; authors' code
github.com/Russellpang/semproj).

A tiny VLM (patch encoder → projector → causal decoder) whose decoder first learns to count letters in strings
(to the text boundary), then whose vision side learns to count black stones only up to the vision boundary.
Modules: ``boards`` (procedural boards and strings), ``tokenizer``, ``tasks`` (NUM and EQ sequences),
``model``, ``train`` (cached training), ``metrics`` (greedy decoding, per-regime metrics), ``probes``
(individuation, magnitude, fractured-space map), ``experiments`` (the diagnostics of the chapter),
``plots``, ``verdicts`` (CLAIMS, CONTROLS and their decisions).
"""
from .boards import cell_table, count_strings, eq_pairs, random_boards, render_image, render_patches
from .config import Config
from .experiments import (analyse_unified, analyse_vlm, analyse_vx_reference, eval_sets, pixel_oracle,
                          probe_floors, regimes, text_side)
from .metrics import accuracy_by_count, eq_accuracy_by_gap, regime_summary
from .model import Decoder, PatchViT, TinyVLM, UnifiedSpaceVLM, n_params
from .probes import centroid_map_analysis, linear_cka, patch_probe_fit, probe_count, ridge_magnitude_probe
from .tokenizer import VOCAB, Vocab
from .train import finetune_multimodal, pretrain_text, train_unified
from .verdicts import CLAIMS, CONTROLS

__all__ = [
    "Config", "CLAIMS", "CONTROLS", "random_boards", "render_patches", "render_image", "cell_table",
    "count_strings", "eq_pairs", "Vocab", "VOCAB", "Decoder", "PatchViT", "TinyVLM", "UnifiedSpaceVLM", "n_params",
    "pretrain_text", "finetune_multimodal", "train_unified", "eval_sets", "analyse_vlm", "analyse_vx_reference",
    "analyse_unified", "probe_floors", "pixel_oracle", "text_side", "regimes", "accuracy_by_count",
    "regime_summary", "eq_accuracy_by_gap", "patch_probe_fit", "probe_count", "ridge_magnitude_probe",
    "centroid_map_analysis", "linear_cka",
]
