"""Parameters of chapter 12 (RLTT): the card's table, with the ``full`` profile as the field defaults.

Every knob is validated before any work starts (papermill checks nothing); a bad value raises a
one-line :class:`repro.common.ConfigError` that names the parameter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from repro.common import BaseConfig, knob

#: Loop-weighting strategies of the RLTT loss (rl.loop_weights). "grpo" is the one-hot last loop.
WEIGHTINGS = ("grpo", "uniform", "progressive", "exit_pdf", "exit_pdf_detached", "learned")

SMOKE = dict(n_seeds=2, t_max=2, d_model=32, sft_steps=60, rl_steps=4, prompts_per_step=4, group_size=4,
             n_eval_samples=2, ablation_weightings=(), n_eval=40, n_eval_greedy=80, use_cached_sft=False, gsnr_prompts=8)


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 12's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists."""

    slug: ClassVar[str] = "rltt"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    # experiment size
    n_seeds: int = knob(5, ge=1, le=20, doc="RL seeds per method (paired: same prompts and rollout seeds)")
    # looped model (Ouro-style)
    t_max: int = knob(4, ge=1, le=8, doc="T_max: times the shared block is applied per token")
    d_model: int = knob(64, ge=8, le=256, doc="width d (4 heads, SwiGLU d_ff = 8d/3 rounded up to 4)")
    layers_per_loop: int = knob(1, ge=1, le=4, doc="transformer layers in the shared block")
    # SFT (Ouro's entropy-regularised all-loop objective)
    sft_steps: int = knob(1500, ge=1, le=20_000, doc="SFT steps (batch sft_batch, one-cycle AdamW, run to the end of its schedule)")
    sft_batch: int = knob(64, ge=2, le=1024, doc="SFT batch size (70 % task A, 30 % task B)")
    sft_lr: float = knob(3e-3, gt=0, le=0.1, doc="peak learning rate of the one-cycle SFT schedule")
    sft_ent_coef: float = knob(0.05, ge=0, le=1, doc="entropy bonus on the exit distribution (Ouro stage 1)")
    teacher_error: float = knob(0.6, ge=0, le=0.95,
                                doc="the imperfect teacher of the SFT data: each '× 3' or '× 7' step is written wrong "
                                    "(ab + 5 mod 10, carried on) with this probability; above 1/2 the SFT model prefers the "
                                    "wrong fact, which RL against the true verifier can repair and no temperature "
                                    "can (issue 46, control K2); 0: the card's exact teacher")
    use_cached_sft: bool = knob(True, doc="reuse the SFT checkpoint in data/cache/rltt/ if its config matches")
    # RL (GRPO / RLTT, on-policy REINFORCE with group-normalised advantages)
    rl_steps: int = knob(400, ge=1, le=10_000, doc="RL steps (one gradient step per batch of rollouts); the card's "
                                                  "120 raised so that GRPO's gain clears seed noise (control K2)")
    prompts_per_step: int = knob(16, ge=1, le=512, doc="prompts per RL step (task A, rl_depths), the card's 16; the "
                                                        "budget goes into steps rather than bigger batches (issue 46)")
    rl_depths: tuple[int, ...] = knob((5, 6), min_len=1, doc="depths of the RL prompts, uniform over these (the "
                                      "card's 4-6 narrowed to the hard split's 5-6: issue 46, K2)")
    group_size: int = knob(8, ge=2, le=64, doc="G: rollouts per prompt")
    max_new_tokens: int = knob(8, ge=4, le=32, doc="rollout and evaluation length cap (task A needs 5 at stride 2, 8 at stride 1)")
    temperature: float = knob(0.9, gt=0, le=5, doc="rollout temperature τ (also the log-prob temperature)")
    rl_lr: float = knob(7e-5, ge=0, le=0.1, doc="Adam learning rate, the same for every method and seed (0 switches "
                                               "RL off: the negative twin of control K2)")
    beta_kl: float = knob(0.001, ge=0, le=10, doc="β of the k3 KL to the SFT model (final loop only)")
    loop_weighting: Literal["uniform", "progressive", "exit_pdf", "exit_pdf_detached", "learned"] = knob(
        "exit_pdf", doc="ω of the RLTT arm compared with GRPO in C1-C5")
    progressive_alpha: float = knob(1.0, ge=0, le=10, doc="α of the progressive weights t^α / Σ s^α")
    ablation_weightings: tuple[str, ...] = knob((), choices=WEIGHTINGS[1:],
                                                doc="extra RLTT weightings trained on the first seed only (the card's "
                                                    "exit_pdf_detached ablation; off in the full profile, whose 8 "
                                                    "minutes go to GRPO's and RLTT's steps: issue 46)")
    # tasks
    pad_slots: Literal["random", "end"] = knob("random", doc="where the '+ 0' padding of task A goes")
    trace_stride: int = knob(2, ge=1, le=3, doc="task A writes every s-th running result before '#' "
                                                "(1: the card's full trace; 2: r2 r4 # r6)")
    # evaluation
    n_eval: int = knob(600, ge=10, le=20_000, doc="held-out hard problems (easy: n_eval/2, task B: n_eval/3)")
    n_eval_greedy: int = knob(2400, ge=10, le=100_000,
                              doc="hard problems of the full-depth greedy accuracy (the n_eval hard ones and more; "
                                  "control K2's greedy gain, C1's secondary metric)")
    n_eval_samples: int = knob(8, ge=1, le=64,
                               doc="samples per problem for the sampled accuracy at τ (the primary metric; the "
                                   "card's 4 doubled)")
    gsnr_prompts: int = knob(256, ge=2, le=1024, doc="held-out prompts of the GSNR metric (the first of the hard split; the card's 32 raised to 256 so that C5a/C5b are decided on many prompts: issue 46)")
    gsnr_rollouts: int = knob(8, ge=2, le=64, doc="R: rollouts per prompt of the GSNR metric")
    gsnr_temperature: float = knob(0.2, gt=0, le=5, doc="sampling temperature of the GSNR rollouts")

    def check(self) -> None:
        if self.d_model % 4:
            self.fail("d_model", f"must be divisible by the 4 attention heads; got {self.d_model}")
        from .tasks import completion_len
        if self.max_new_tokens < completion_len(self.trace_stride):
            self.fail("max_new_tokens", f"must be >= {completion_len(self.trace_stride)}, the length of a task-A "
                      f"completion at trace_stride={self.trace_stride}; got {self.max_new_tokens}")
        if not all(2 <= d <= 6 for d in self.rl_depths) or len(set(self.rl_depths)) != len(self.rl_depths):
            self.fail("rl_depths", f"must be distinct depths in 2..6 (task A has six operation slots); "
                      f"got {list(self.rl_depths)}")
        if self.n_eval_greedy < self.n_eval:
            self.fail("n_eval_greedy", f"must be >= n_eval ({self.n_eval}), whose problems it includes; "
                      f"got {self.n_eval_greedy}")
        if self.gsnr_prompts > self.n_eval:
            self.fail("gsnr_prompts", f"must be <= n_eval ({self.n_eval}), the hard problems it is drawn from; "
                      f"got {self.gsnr_prompts}")
        if self.loop_weighting in self.ablation_weightings:
            self.fail("ablation_weightings", f"repeats the main arm {self.loop_weighting!r}; "
                      f"list only extra weightings")
        if len(set(self.ablation_weightings)) != len(self.ablation_weightings):
            self.fail("ablation_weightings", f"has duplicates: {list(self.ablation_weightings)}")

    @property
    def d_ff(self) -> int:
        """SwiGLU hidden width: 8d/3 rounded up to a multiple of 4 (172 for d = 64)."""
        return 4 * -(-(8 * self.d_model) // 12)

    @property
    def n_heads(self) -> int:
        return 4

    @property
    def max_len(self) -> int:
        """Positions the model needs: the 14-token task-A prompt plus the generation cap."""
        return 14 + self.max_new_tokens
