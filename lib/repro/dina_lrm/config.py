"""Parameters of chapter 11 (DiNa-LRM): the card's table, with the ``full`` profile as the field defaults.

Every knob is validated before any work starts (papermill checks nothing); a bad value raises a one-line
:class:`repro.common.ConfigError` naming the parameter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from repro.common import BaseConfig, knob

SMOKE = dict(n_seeds=2, n_align_seeds=2, ae_steps=60, gen_steps=60, oracle_steps=40, n_oracle_fit=256,
             n_train_pairs=600, n_test_pairs=200, n_val_pairs=100, rm_steps=40, pixel_steps=25, ensemble_K=(1, 2),
             refl_steps=4, refl_log_every=2, refl_time_steps=2, refl_time_repeats=2, run_dpo=False, dpo_steps=10,
             n_refl_eval=16, use_cache=False)


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 11's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists."""

    slug: ClassVar[str] = "dina_lrm"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    n_seeds: int = knob(5, ge=1, le=20, doc="inner seeds (RM inits, batches, noise draws, alignment runs); "
                                            "the card's 3 raised to 5 by its Controls and risks for C1-C3")
    n_align_seeds: int = knob(3, ge=1, le=20, doc="inner seeds that also train the pixel RMs and run ReFL / DPO "
                                                 "(C4-C6; the card's 3)")
    # shared models (trained once with seed 0, cached)
    ae_steps: int = knob(2000, ge=1, le=50_000, doc="autoencoder 64->16->64 training steps (batch 256)")
    oracle_steps: int = knob(200, ge=1, le=50_000, doc="oracle digit classifier (CNN) steps: short, so that log p_O is graded rather than saturated")
    gen_steps: int = knob(1500, ge=1, le=50_000, doc="latent rectified-flow generator steps (batch 256), "
                                                    "deliberately under-trained")
    n_oracle_fit: int = knob(4096, ge=64, le=100_000, doc="base-generator samples that standardize the oracle")
    use_cache: bool = knob(True, doc="reuse the shared models in data/cache/dina_lrm/ when their config matches")
    cfg_scale: float = knob(1.5, ge=0, le=10, doc="classifier-free guidance scale of the generator")
    n_sample_steps: int = knob(20, ge=2, le=200, doc="N: Euler steps of sampling (and of the RM's sigma grid)")
    # preference data
    n_train_pairs: int = knob(10_000, ge=10, le=200_000, doc="oracle-labelled training pairs")
    n_test_pairs: int = knob(20_000, ge=10, le=200_000, doc="held-out test pairs: Controls and risks' 10k doubled "
                                                            "after K2c (ECE floor) failed at 10k")
    n_val_pairs: int = knob(2000, ge=10, le=100_000, doc="validation pairs (choose C4's best sigma)")
    s_h: float = knob(0.5, gt=0, le=10, doc="annotator noise s_h of the Thurstone labels")
    # reward models
    rm_steps: int = knob(1000, ge=1, le=50_000, doc="latent RM training steps (batch rm_batch pairs)")
    rm_batch: int = knob(128, ge=2, le=4096, doc="pairs per RM step")
    rm_lr: float = knob(5e-4, gt=0, le=1, doc="AdamW learning rate of every RM head")
    var_scale: float = knob(2.0, gt=0, le=100, doc="a in var(sigma) = a sigma^2 + b (released: 2.0)")
    var_min: float = knob(0.05, gt=0, le=100, doc="b in var(sigma) = a sigma^2 + b (released: 0.05)")
    loss: Literal["fidelity", "nll"] = knob("fidelity", doc="DiNa-LRM's loss on the Thurstone probability")
    pixel_steps: int = knob(1000, ge=1, le=50_000, doc="pixel RM training steps (clean decoded images, BT loss, batch "
                                                     "rm_batch pairs): the latent RMs' budget (baseline parity)")
    pixel_flops_ratio: float = knob(10.0, ge=1, le=100, doc="pixel RM path FLOPs / DiNa path FLOPs (C4)")
    # evaluation
    eval_sigma: float = knob(0.4, ge=0, le=1, doc="u: the noise level of C1 and C3 (released default 0.4)")
    ensemble_K: list[int] = knob([1, 2, 4, 8, 16], ge=1, le=64, min_len=2,
                                 doc="noise draws averaged at inference (C3)")
    time_batch: int = knob(256, ge=1, le=8192, doc="batch of the reward+gradient timings (C4, >= 128)")
    # alignment
    refl_steps: int = knob(150, ge=1, le=5000, doc="ReFL optimizer steps per reward")
    refl_batch: int = knob(32, ge=1, le=1024, doc="prompts per ReFL step")
    refl_lr: float = knob(1e-4, gt=0, le=1, doc="AdamW learning rate of the generator in ReFL and DPO")
    refl_log_every: int = knob(10, ge=1, le=1000, doc="oracle reward logged every this many steps")
    refl_time_steps: int = knob(40, ge=2, le=2000, doc="ReFL steps timed for control K4b (DiNa and pixel reward, "
                                                       "paired, after 3 warm-up steps)")
    refl_time_repeats: int = knob(5, ge=1, le=50, doc="back-to-back executions of each timed ReFL step with both "
                                                     "rewards; the step's difference is their median")
    n_refl_eval: int = knob(256, ge=8, le=8192, doc="fixed (prompt, noise) samples of the oracle log")
    run_dpo: bool = knob(True, doc="train Diffusion-DPO on the oracle-labelled pairs (C5)")
    dpo_steps: int = knob(300, ge=1, le=20_000, doc="Diffusion-DPO steps (batch 64 pairs)")
    dpo_betas: list[float] = knob([500.0, 2000.0], gt=0, le=1e6, min_len=1, doc="beta_dpo values, all reported")

    def check(self) -> None:
        if 1 not in self.ensemble_K:
            self.fail("ensemble_K", f"must contain 1 (the single-draw score); got {list(self.ensemble_K)}")
        if sorted(set(self.ensemble_K)) != list(self.ensemble_K):
            self.fail("ensemble_K", f"must be strictly increasing; got {list(self.ensemble_K)}")
        if self.n_align_seeds > self.n_seeds:
            self.fail("n_align_seeds", f"must be <= n_seeds ({self.n_seeds}); got {self.n_align_seeds}")
        if self.refl_log_every > self.refl_steps:
            self.fail("refl_log_every", f"must be <= refl_steps ({self.refl_steps}); got {self.refl_log_every}")

    @property
    def seeds(self) -> list[int]:
        """The inner seeds of this master seed (paired across every method)."""
        return [1000 * self.seed + i for i in range(self.n_seeds)]

    @property
    def sigma_grid(self) -> list[float]:
        """The evaluation noise levels of C2: 0, 0.2, ..., 1.0."""
        return [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
