"""Parameters of chapter 05 (ExpertWeaver): the card's table, with the ``full`` profile as the field defaults.

Every knob is validated before any work starts (papermill checks nothing); a bad value raises a one-line
:class:`repro.common.ConfigError` that names the parameter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from repro.common import BaseConfig, knob

SMOKE = dict(n_seeds=1, n_layers=2, d_model=32, d_ff=64, context=32, train_steps=30, use_cached_base=False,
             n_calib_seqs=24, n_experts=8, budgets=(0.5, 0.25, 0.125), downcycle_steps=5, n_router_reps=2,
             downcycle_experts=4, eval_every=5, n_eval_seqs=8, moef_router_steps=20, n_perm=50,
             downcycle_batch=8, latency_reps=50)


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 05's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists."""

    slug: ClassVar[str] = "expertweaver"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    n_seeds: int = knob(3, ge=1, le=10, doc="conversion seeds (calibration sample, k-means init, random split)")
    # dense SwiGLU byte-level language model
    n_layers: int = knob(4, ge=1, le=8, doc="transformer blocks L")
    d_model: int = knob(96, ge=16, le=256, doc="width d (4 heads)")
    d_ff: int = knob(384, ge=16, le=2048, doc="SwiGLU hidden neurons per layer")
    context: int = knob(64, ge=8, le=256, doc="bytes of context")
    train_steps: int = knob(700, ge=1, le=20_000, doc="dense pre-training steps (AdamW, cosine)")
    batch_size: int = knob(32, ge=2, le=512, doc="sequences per training batch")
    lr: float = knob(3e-3, gt=0, le=0.1, doc="peak AdamW learning rate (cosine schedule)")
    weight_decay: float = knob(0.1, ge=0, le=1, doc="AdamW weight decay")
    use_cached_base: bool = knob(True, doc="reuse the dense checkpoint in data/cache/expertweaver/ if its config matches")
    # profiling and conversion
    n_calib_seqs: int = knob(256, ge=3, le=4096, doc="calibration sequences (equal per domain)")
    top_rho: float = knob(0.3, gt=0, le=1, doc="ρ: a neuron is active on a token if |a| is in that token's top-ρ")
    n_experts: int = knob(16, ge=2, le=64, doc="E: routed experts per layer in the training-free conversion")
    budgets: tuple[float, ...] = knob((0.5, 0.25, 0.125), gt=0, lt=1, min_len=1,
                                      doc="active FFN fractions ρ_b compared (card 50 %, 25 %; risks add 12.5 %)")
    n_router_reps: int = knob(4, ge=1, le=32, doc="R: representative neurons per expert in the router")
    kmeans_iters: int = knob(20, ge=1, le=200, doc="balanced k-means iterations")
    moef_router_steps: int = knob(200, ge=1, le=5000, doc="training steps of MoEfication's MLP router")
    n_perm: int = knob(200, ge=10, le=5000, doc="label permutations of the selectivity null")
    n_eval_seqs: int = knob(64, ge=2, le=1024, doc="held-out sequences per domain for every loss")
    # downcycling
    downcycle_steps: int = knob(80, ge=1, le=2000, doc="continued-training steps per init and seed")
    downcycle_experts: int = knob(16, ge=2, le=64, doc="routed experts of the downcycled MoE")
    downcycle_topk: int = knob(2, ge=1, le=16, doc="experts selected per token in the downcycled MoE")
    downcycle_active: float = knob(0.2, gt=0, lt=1, doc="average active FFN fraction of the downcycled MoE")
    downcycle_lr: float = knob(1e-3, gt=0, le=0.1, doc="AdamW learning rate of continued training (fresh optimiser)")
    downcycle_warmup: int = knob(10, ge=0, le=1000, doc="linear warm-up steps of continued training (card's risks)")
    downcycle_batch: int = knob(32, ge=2, le=512, doc="sequences per continued-training batch")
    lb_coef: float = knob(0.01, ge=0, le=1, doc="load-balancing loss coefficient")
    eval_every: int = knob(20, ge=1, le=1000, doc="validation checkpoints every this many steps (step 0 included)")
    # latency
    latency_reps: int = knob(300, ge=10, le=100_000, doc="timed calls per latency measurement (best of 5 medians)")

    def check(self) -> None:
        if self.d_model % 4:
            self.fail("d_model", f"must be divisible by the 4 attention heads; got {self.d_model}")
        if self.d_ff % self.n_experts:
            self.fail("n_experts", f"must divide d_ff = {self.d_ff} (baselines split it into equal experts); "
                      f"got {self.n_experts}")
        if len(set(self.budgets)) != len(self.budgets):
            self.fail("budgets", f"has duplicates: {list(self.budgets)}")
        for b in self.budgets:
            if b not in (0.5, 0.25, 0.125):
                self.fail("budgets", f"may hold only 0.5, 0.25 and 0.125 (claims C2a, C2b, C2c); got {b}")
            if abs(b * self.n_experts - round(b * self.n_experts)) > 1e-9:
                self.fail("budgets", f"{b} × n_experts = {b * self.n_experts:g} is not whole: baselines without a "
                          "shared expert must meet the budget with whole experts")
        if self.downcycle_topk >= self.downcycle_experts:
            self.fail("downcycle_topk", f"must be < downcycle_experts = {self.downcycle_experts}; got "
                      f"{self.downcycle_topk}")
        if self.n_calib_seqs < 3:
            self.fail("n_calib_seqs", "needs at least one sequence per domain")
        if self.downcycle_steps % self.eval_every:
            self.fail("eval_every", f"must divide downcycle_steps = {self.downcycle_steps}; got {self.eval_every}")

    @property
    def n_heads(self) -> int:
        return 4
