"""Parameters of chapter 03 (BiCoT): the card's table, with the ``full`` profile as the field defaults.

Every knob is validated before any work starts (papermill checks nothing); a bad value raises a one-line
:class:`repro.common.ConfigError` naming the parameter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from repro.common import BaseConfig, knob

SMOKE = dict(modulus=5, depth_range=(1, 2), d_model=32, n_layers=1, base_steps=40, base2_steps=20,
             use_cached_base=False, wm_steps=10, top_k=6, n_verify=8, n_query_sets=2, n_null_keys=20,
             ft_attack_steps=5, quant_bits=(8,), trunc_k=5, n_acc=64, n_kgw_keys=2, n_wrong_keys=20, whiten_steps=3,
             whiten_lams=(3.0,), trigger_steps=5, n_bias_draws=2, n_ft_keys=2, dose_noise=(0.1,), dose_prune=(0.6,), n_white_box=16)


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 03's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists."""

    slug: ClassVar[str] = "bicot"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    # task
    modulus: int = knob(7, ge=3, le=10, doc="p: chain arithmetic mod p (digits 0..p-1 are single tokens)")
    depth_range: tuple[int, ...] = knob((1, 3), ge=1, le=4, min_len=2, doc="[min, max] in-domain chain depth")
    # models
    d_model: int = knob(64, ge=16, le=256, doc="width d (4 heads, SwiGLU d_ff = 4d)")
    n_layers: int = knob(2, ge=1, le=6, doc="transformer blocks")
    base_steps: int = knob(1600, ge=1, le=20_000, doc="cap on M0's training steps (trained to result-token "
                                                      "accuracy >= 0.8, the card's criterion; the card's 1,100 is the pilot's count)")
    base2_steps: int = knob(600, ge=1, le=20_000, doc="steps of M0' (independently trained negative)")
    use_cached_base: bool = knob(True, doc="reuse M0 / M0' from data/cache/bicot/ when their spec matches")
    # watermark
    wm_steps: int = knob(400, ge=1, le=5000, doc="cap on BiCoT's watermark fine-tune (stops at mean R >= 0.9); the "
                                                "earlier cap of 150 stopped every seed before the rule did (issue 43)")
    key_rank: int = knob(2, ge=1, le=8, doc="r: rank of the secret subspace B")
    top_k: int = knob(10, ge=4, le=19, doc="k: top-k log-probs the API returns")
    lam_ctrl: float = knob(1.0, ge=0, le=100, doc="λ_c of the control-token regulariser")
    wm_lr: float = knob(2e-4, gt=0, le=0.1, doc="Adam lr of the watermark fine-tune (not in the card; at the attack's 1e-3 "
                                                "watermarking moved the weights ~1.4 × further than the 200-step FT attack, K3)")
    # verification
    n_verify: int = knob(32, ge=2, le=512, doc="n: prompts per query set")
    n_query_sets: int = knob(8, ge=2, le=64, doc="disjoint query sets per suspect")
    n_null_keys: int = knob(200, ge=10, le=5000, doc="random keys of the null distribution")
    n_wrong_keys: int = knob(200, ge=8, le=5000, doc="wrong keys scored on BiCoT (negatives; disjoint from the null)")
    n_white_box: int = knob(256, ge=8, le=4096, doc="fresh prompts of K1's white-box anchor energy check")
    # accuracy
    n_kgw_keys: int = knob(5, ge=1, le=32, doc="green-list keys of KGW at δ = 2 (C1b); its loss is averaged over "
                                                "keys and problems, and its CI resamples both")
    n_acc: int = knob(1500, ge=16, le=20_000, doc="shared problems of the accuracy comparisons (C1, K2)")
    # attacks
    ft_attack_steps: int = knob(200, ge=1, le=5000, doc="fine-tuning attack steps (clean CoT data, the card's 200)")
    ft_attack_lr: float = knob(2e-3, gt=0, le=0.1, doc="Adam lr of the fine-tuning attacks; the card's 1e-3 saturates "
                                                        "(3.2 at 200 steps, 3.4 at 400 and 800 from BiCoT at seed 0) "
                                                        "short of the watermark's own 3.9, so K3 failed; the card's "
                                                        "setting is scored beside it")
    n_ft_keys: int = knob(3, ge=1, le=20, doc="watermarks the fine-tuning attack of C3a is run on: the owner's key and "
                                               "the next-best vetted keys, each embedded on its own batches and "
                                               "attacked with its own fine-tuning batches; C3a's interval resamples "
                                               "them (issue 41: the attack's AUC varied 0.59-1.00 over the book's "
                                               "seeds with one watermark each)")
    quant_bits: tuple[int, ...] = knob((8, 4), ge=2, le=16, min_len=1, doc="weight quantisation bit widths")
    trunc_k: int = knob(6, ge=3, le=19, doc="top-k truncation of the output attack")
    bias_sigma: float = knob(4.0, gt=0, le=20, doc="std σ of the fixed per-token bias at which C4 and K4 are decided "
                                                    "(issue #43: 4; the card's 2 sits on K4's line and is reported in the sweep)")
    bias_sweep: tuple[float, ...] = knob((2.0, 4.0, 8.0), gt=0, le=20, min_len=1,
                                         doc="token-bias σ dose sweep reported beside the deciding σ (issue #43)")
    n_bias_draws: int = knob(8, ge=1, le=64, doc="draws of the token bias over which K4 averages BiCoT's margin S − μ₀ "
                                                 "(C4 scores the first; one draw is one sample of the attack)")
    dose_noise: tuple[float, ...] = knob((0.1, 0.3), gt=0, le=2, doc="K3 dose sweep: weight-noise levels beyond 2 %")
    dose_prune: tuple[float, ...] = knob((0.6, 0.9), gt=0, lt=1, doc="K3 dose sweep: pruning fractions beyond 30 %")
    whiten_steps: int = knob(100, ge=1, le=5000, doc="steps of each whitening-attack fine-tune (C6)")
    whiten_lams: tuple[float, ...] = knob((1.0, 3.0, 10.0, 30.0), gt=0, le=1000, min_len=1,
                                          doc="λ sweep of the whitening attack, stopped once z < 4 or accuracy is down 10 points")
    trigger_steps: int = knob(100, ge=1, le=5000, doc="fine-tune steps of the trigger-fingerprint baseline")
    trigger_copies: int = knob(2, ge=1, le=8, doc="copies of each of the 8 triggers in every batch of 64 (the trigger "
                                                   "model must verify >= 0.9 before FT, K3)")

    def check(self) -> None:
        lo, hi = self.depth_range[0], self.depth_range[-1]
        if len(self.depth_range) != 2 or lo > hi:
            self.fail("depth_range", f"must be [min, max] with min <= max; got {list(self.depth_range)}")
        if hi + 1 > 4:
            self.fail("depth_range", f"max depth must be <= 3 (OOD prompts use max + 1 <= 4 to fit the context 48); got {hi}")
        if self.d_model % 4:
            self.fail("d_model", f"must be divisible by the 4 attention heads; got {self.d_model}")
        if self.top_k - 2 <= self.key_rank:
            self.fail("top_k", f"must satisfy k − 2 > r = {self.key_rank} (else the energy ratio is identically 1); got {self.top_k}")
        if self.trunc_k - 2 <= self.key_rank:
            self.fail("trunc_k", f"must satisfy k' − 2 > r = {self.key_rank}; got {self.trunc_k}")
        if self.trunc_k >= self.top_k:
            self.fail("trunc_k", f"must be below top_k = {self.top_k} to truncate anything; got {self.trunc_k}")
        if self.bias_sigma not in self.bias_sweep:
            self.fail("bias_sweep", f"must contain the deciding bias_sigma = {self.bias_sigma:g}; got {list(self.bias_sweep)}")
        if self.top_k > self.vocab:
            self.fail("top_k", f"must be <= the vocabulary size {self.vocab}; got {self.top_k}")

    @property
    def vocab(self) -> int:
        return self.modulus + 12

    @property
    def d_ff(self) -> int:
        return 4 * self.d_model
