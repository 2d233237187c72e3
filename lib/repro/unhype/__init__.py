"""Chapter 01 · UnHype: CLIP-guided hypernetworks for dynamic LoRA unlearning (Wójcik, Petrenko, Gromski, Spurek,
Zięba; arXiv 2602.03410, ICML 2026), at toy scale: a text-conditioned generator of 8x8 digits whose text path
(the ``attn2.to_k/to_v`` analogue) is adapted by LoRAs that a hypernetwork writes from the prompt's MiniLM embedding.

Modules: ``data`` (digits, prompts, the offline MiniLM encoder), ``models`` (the rectified-flow and DDPM
backbones, the sampler, the frozen classifier), ``hyperlora`` (H(c, k) -> LoRA factors, injection), ``erase``
(the ESD objective, UnHype's training, ESD-x, LoRA-ESD, UCE, Concept Ablation), ``metrics``, ``experiments``
(the chapter's runs) and ``plots``. No compiled kernel: the card finds none worth it (small dense matmuls in BLAS).
"""
from .config import Config
from .data import (TRAIN_TEMPLATES, WORDS, PromptBank, TextEncoder, TextEncoderMissing, embed_prompts,
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

#: The card's claims, verbatim in substance (thresholds included).
CLAIMS = {
    "C1": "Single-concept erasure: erasing digit 7, UnHype's target rate <= 0.15 (base >= 0.85) and its retain "
          "accuracy is at most 5 points below the base's (mean over seeds and in >= 2 of 3 seeds).",
    "C2": "Locality vs a static LoRA: at matched erasure (both target rates <= 0.15), UnHype's retain accuracy on the "
          "3 digits nearest to the target in prompt-embedding space is >= 3 points above static LoRA-ESD's, and its "
          "paired drift on them is lower.",
    "C3": "Dynamic adapters: (a) mean ||A(c)B(c)||_F at k=K is >= 10x larger for target than for retain prompts; "
          "(b) L_ESD(H(c*,K)) <= 0.5 L_ESD(H(c*,0)); (c, may not hold) L_ESD along k in {0, K/8, ..., K} is "
          "monotone (Spearman rho <= -0.9).",
    "C4": "Paraphrases (may not hold): on held-out paraphrases of the target, UnHype's target rate <= 0.30 and below "
          "UCE's; retained digits' paraphrases keep retain accuracy >= base - 5 points.",
    "C5": "Multi-concept (expected partially): erasing m in {1, 3, 5} digits with one H (same iteration budget), target "
          "rate <= 0.2 for every erased digit at every m; the retain-accuracy drop grows <= 5 points from m=1 to m=5, "
          "while one static LoRA on all m loses >= 2 points more at m=5; cost: 1 UnHype run vs m per-concept runs.",
    "C6": "Backbone-agnostic: UnHype's target rate <= 0.2 on both the eps-prediction DDPM ('SD-like') and the "
          "rectified-flow ('Flux-like') backbone, with the same hypernetwork code.",
}

__all__ = [name for name in dir() if not name.startswith("_")]
