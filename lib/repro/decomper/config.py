"""Parameters of chapter 16 (Decomper): the card's table, with the ``full`` profile as the field defaults.

Every knob is validated before any work starts (papermill checks nothing); a bad value raises a one-line
:class:`repro.common.ConfigError` that names the parameter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from repro.common import BaseConfig, knob

from .compensate import VARIANTS
from .decompose import METHODS

SMOKE = dict(n_calib_seeds=1, n_layers=2, d_model=32, d_ff=64, train_steps=30, use_cached_base=False,
             ratios=(0.4,), methods=("svd", "svdllm"), variants=("refit",), n_calib=8, comp_steps=5,
             eval_windows=16, headline_windows=32, probe_n=200, latency_runs=10, global_steps=5)


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 16's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists."""

    slug: ClassVar[str] = "decomper"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    # model (LLaMA-style byte-level decoder)
    n_layers: int = knob(8, ge=1, le=24, doc="blocks L (depth matters for drift)")
    d_model: int = knob(64, ge=8, le=512, doc="width d (n_heads heads)")
    n_heads: int = knob(4, ge=1, le=16, doc="attention heads (must divide d_model)")
    d_ff: int = knob(172, ge=8, le=2048, doc="SwiGLU hidden width")
    seq_len: int = knob(64, ge=8, le=512, doc="context length in bytes (windows, calibration, probe)")
    # training (cached, retrained when missing)
    train_steps: int = knob(3000, ge=1, le=20_000, doc="AdamW steps of the dense model; the card's 900 raised because "
                                                      "compression hurt too little for controls K1 and K3 (at 2000 "
                                                      "steps K3's probe drop was 5.8-8.8 points on the byte split)")
    batch_size: int = knob(32, ge=1, le=1024, doc="training windows per step")
    lr: float = knob(3e-3, gt=0, le=0.1, doc="peak learning rate (5 % warm-up, cosine to 10 %)")
    weight_decay: float = knob(0.1, ge=0, le=1, doc="AdamW weight decay on matrices")
    use_cached_base: bool = knob(True, doc="reuse the dense checkpoint in data/cache/decomper/ if its config matches")
    base_seed: int = knob(-1, ge=-1, doc="seed of the dense model's training; -1 (default): the master seed, so that "
                                         "seeds 0-4 train five dense models and their spread includes the model's")
    split_seed: int = knob(-1, ge=-1, doc="seed of the 90/5/5 % (of bytes) file split; -1 (default): the master seed (a test set "
                                          "per seed)")
    # compression and compensation
    ratios: tuple[float, ...] = knob((0.2, 0.4, 0.6), gt=0, lt=1, min_len=1,
                                     doc="fractions of block parameters removed")
    headline_ratio: float = knob(0.4, gt=0, lt=1, doc="the ratio of C2's per-seed test, C1, C3, C4, C5, C6")
    methods: tuple[str, ...] = knob(METHODS, choices=METHODS, min_len=1, doc="decompositions compared")
    variants: tuple[str, ...] = knob(("affine", "refit"), choices=("refit", "affine", "moments"), min_len=1,
                                     doc="closed-form compensation variants run on every cell (claims use refit)")
    n_calib_seeds: int = knob(3, ge=1, le=10, doc="calibration sets drawn for the headline cell (C2)")
    n_calib: int = knob(64, ge=2, le=4096, doc="calibration windows of seq_len bytes per calibration seed")
    ridge: float = knob(1e-3, ge=0, le=10, doc="λ of the refit, relative to the mean squared code (tr(ZᵀZ)/r)")
    asvd_alpha: float = knob(0.5, ge=0, le=2, doc="α of ASVD's activation scaling")
    fisher_batches: int = knob(8, ge=1, le=64, doc="calibration mini-batches of FWSVD's Fisher importance")
    comp_steps: int = knob(100, ge=1, le=5000, doc="Adam steps per block of the adam variant (headline cell only)")
    moment_weight: float = knob(0.1, ge=0, le=100, doc="μ of the adam variant's moment-matching term")
    global_steps: int = knob(50, ge=1, le=5000, doc="Adam steps of the global re-fit baseline (final-logit KL)")
    # evaluation
    eval_windows: int = knob(256, ge=4, le=100_000, doc="test windows of seq_len bytes for every cell")
    headline_windows: int = knob(1024, ge=4, le=100_000, doc="test windows of the headline cell (C2 at 40 %)")
    probe_n: int = knob(1600, ge=8, le=100_000, doc="bracket/quote multiple-choice items (balanced over ) ] ' \")")
    latency_runs: int = knob(400, ge=3, le=10_000, doc="interleaved timed forwards per model (batch 1); the card's 50 "
                                                       "raised: on a shared machine their A/A spread exceeded 2 %")

    @property
    def dense_seed(self) -> int:
        """The dense model's training seed: ``base_seed``, or the master seed when it is -1 (issue 47)."""
        return self.seed if self.base_seed < 0 else self.base_seed

    @property
    def data_split_seed(self) -> int:
        """The file split's seed: ``split_seed``, or the master seed when it is -1 (issue 47)."""
        return self.seed if self.split_seed < 0 else self.split_seed

    def check(self) -> None:
        if self.d_model % self.n_heads:
            self.fail("d_model", f"must be divisible by n_heads={self.n_heads}; got {self.d_model}")
        if self.headline_ratio not in self.ratios:
            self.fail("headline_ratio", f"must be one of ratios {list(self.ratios)}; got {self.headline_ratio}")
        if "svdllm" not in self.methods:
            self.fail("methods", f"must include 'svdllm' (the headline decomposition); got {list(self.methods)}")
        if "refit" not in self.variants:
            self.fail("variants", f"must include 'refit' (the claims are evaluated on it); got {list(self.variants)}")
        for name in ("ratios", "methods", "variants"):
            v = getattr(self, name)
            if len(set(v)) != len(v):
                self.fail(name, f"has duplicates: {list(v)}")
