"""Chapter 01 · UnHype: CLIP-guided hypernetworks for dynamic LoRA unlearning (Wójcik, Petrenko, Gromski, Spurek,
Zięba; arXiv 2602.03410, ICML 2026), at toy scale: a text-conditioned generator of 8x8 digits whose text path
(the ``attn2.to_k/to_v`` analogue) is adapted by LoRAs that a hypernetwork writes from the prompt's MiniLM embedding.

Modules: ``data`` (digits, prompts, the offline MiniLM encoder), ``models`` (the rectified-flow and DDPM
backbones, the sampler, the frozen classifier), ``hyperlora`` (H(c, k) -> LoRA factors, injection), ``erase``
(the ESD objective, UnHype's training, ESD-x, LoRA-ESD, UCE, Concept Ablation), ``metrics``, ``experiments``
(the chapter's runs) and ``plots``. No compiled kernel: the card finds none worth it (small dense matmuls in BLAS).
"""
from .config import Config
from .data import (RETAIN_HELDOUT, TRAIN_TEMPLATES, WORDS, PromptBank, TextEncoder, TextEncoderMissing, embed_prompts,
                   load_digit_tensors, paraphrases, prompt_bank)
from .erase import (BaselineResult, ESDBank, GDTrajectory, ablation_bank, apply_uce, bank_loss, esd_bank, esd_loss,
                    esd_target, explicit_gd_trajectory, removal_loss, retain_loss, train_concept_ablation, train_esd,
                    train_lora_esd, train_unhype, uce_edit, unhype_factors, unhype_step)
from .experiments import (RATE_OK, BackboneResult, Calibration, MultiResult, Replicate, Samples, World,
                          base_model, build_world, calibrate_eta, esd_curve, eval_prompts, generate, hyper_A0, k_grid,
                          make_banks, make_check, metric_table, multi_order, norm_ratio, paraphrase_table, new_hyper, replicate_seed, run_backbone, run_multi,
                          run_replicate, summarize)
from .hyperlora import (AdaptedLinear, HyperLoRA, HyperNet, LoRAContext, StaticLoRA, TimeFourier, cap_update,
                        delta_norms, flat, inject, lora_delta, sum_loras)
from .metrics import (bootstrap_rate, frechet_distance, h_o, mean_embeddings, nearest_concepts, paired_drift,
                      retain_acc, target_rate)
from . import plots, verdicts
from .models import CondMLP, DigitClassifier, cosine_alpha_bar, guided, sample, time_grid, train_base, train_classifier

from .verdicts import CLAIMS, CONTROLS

__all__ = [name for name in dir() if not name.startswith("_")]
