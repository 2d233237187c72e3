"""Chapter 12 · RLTT: reward the whole latent-thought trajectory of a looped language model
(ICML 2026; authors' code github.com/jonwill8/RLTT).

A looped LM applies one shared block T times per token and can read a distribution P^(t) out after
every loop. GRPO credits only log P^(T); RLTT keeps GRPO's group-normalised advantage but credits
Σ_t ω_t log P^(t), every loop directly. Modules: ``tasks`` (the chain-arithmetic RL task, the string
transfer task, verifiers), ``model`` (the looped decoder with exit gate and per-loop KV cache),
``decode`` (batched greedy / sampled decoding), ``sft`` (Ouro's all-loop objective, cached), ``rl``
(the one GRPO/RLTT loss, rollouts, training), ``evaluate`` (accuracies, exit distribution, GSNR),
``experiments`` (the paired seeds), ``verdicts`` (CLAIMS, CONTROLS and the functions that decide them). No
compiled kernel: a 52 k-parameter model is bound
by per-operation overhead, not arithmetic (card, "Compiled kernel").
"""
from .config import WEIGHTINGS, Config
from .decode import completion_mask, generate, generate_full
from .evaluate import (accuracy, evaluate_model, gsnr, gsnr_from_grads, mean_exit_pdf, per_loop_accuracy,
                       rollout_logit_grads, sft_by_temperature, best_temperature, val_set, held_out, task_a_correct, task_b_correct)
from . import verdicts
from .experiments import Experiment, paired_t, reward_curves, rl_seeds, run_experiment
from .model import LoopedLM, LoopOutput, build_model, exit_pdf_from_gates, n_params
from .rl import (STRATEGIES, RLRun, clone_model, group_advantages, join_completions, k3_kl, loop_weights,
                 per_loop_token_logprobs, rl_prompts, rl_step, rltt_loss, sample_rollouts, train_rl)
from .sft import SFT_WINDOW, check_sft, load_or_train_sft, ouro_sft_loss, sft_key, sft_path, train_sft
from .tasks import (TOK, Problem, Tokenizer, batch_rewards, chain_batch, chain_reference, completion_len, eval_sets,
                    exact_match, has_teacher_fact, lucky_guesses, make_chain_problem, make_sort_problem, reward, sft_batch,
                    trace_is_consistent, trace_slots, TEACHER_FACT, TEACHER_SHIFT)
from .verdicts import CLAIMS, CONTROLS, THRESHOLDS

__all__ = [
    "Config", "CLAIMS", "CONTROLS", "verdicts", "WEIGHTINGS", "STRATEGIES", "THRESHOLDS",
    # tasks
    "TOK", "Tokenizer", "Problem", "make_chain_problem", "make_sort_problem", "chain_batch", "sft_batch",
    "eval_sets", "reward", "exact_match", "batch_rewards", "trace_is_consistent", "trace_slots", "completion_len",
    "chain_reference", "lucky_guesses", "has_teacher_fact", "TEACHER_FACT", "TEACHER_SHIFT",
    # model and decoding
    "LoopedLM", "LoopOutput", "build_model", "exit_pdf_from_gates", "n_params", "generate", "generate_full",
    "completion_mask",
    # SFT
    "ouro_sft_loss", "train_sft", "check_sft", "SFT_WINDOW", "load_or_train_sft", "sft_key", "sft_path",
    # RL
    "loop_weights", "group_advantages", "per_loop_token_logprobs", "k3_kl", "rltt_loss", "sample_rollouts",
    "join_completions", "rl_prompts", "rl_step", "train_rl", "RLRun", "clone_model",
    # evaluation
    "accuracy", "per_loop_accuracy", "task_a_correct", "task_b_correct", "mean_exit_pdf", "evaluate_model",
    "gsnr", "gsnr_from_grads", "rollout_logit_grads", "sft_by_temperature", "best_temperature", "val_set", "held_out",
    # experiments
    "Experiment", "run_experiment", "rl_seeds", "paired_t", "reward_curves",
]
