"""Parameters of chapter 01 (UnHype): the card's papermill table, with the full profile as defaults."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from repro.common import BaseConfig, knob

SMOKE = dict(
    n_seeds=1, width=64, n_blocks=2, base_steps=150, ddpm_steps=100, unlearn_steps=20, K_hyper=10, rank=2,
    hyper_width=16, internal_lr_grid=(1.0,), multi_m=(1, 2), n_eval_samples=20, sample_steps=5, baseline_steps=40, check_every=10,
    run_ddpm=False, run_pure_ablation=False,
)


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 01's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists."""

    slug: ClassVar[str] = "unhype"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    n_seeds: int = knob(5, ge=1, le=20, doc="unlearning seeds for C1-C4 (each re-draws H/LoRA init, batches, noise); the card's 3 give paired CIs with 2 degrees of freedom")
    width: int = knob(128, ge=16, le=1024, doc="hidden width of the base generator (MLP on the 64-d image)")
    n_blocks: int = knob(3, ge=1, le=8, doc="residual FiLM blocks; each has one cond_k and one cond_v (LoRA targets)")
    base_steps: int = knob(1000, ge=10, le=20_000, doc="Adam steps of the rectified-flow base generator")
    ddpm_steps: int = knob(1000, ge=10, le=20_000, doc="Adam steps of the eps-prediction DDPM base generator (C6)")
    unlearn_steps: int = knob(600, ge=1, le=20_000, doc="UnHype hypernetwork iterations (same budget for every m)")
    K_hyper: int = knob(100, ge=2, le=10_000, doc="pseudo-time horizon K of the hypernetwork (k in 0..K)")
    rank: int = knob(4, ge=1, le=64, doc="LoRA rank r (UnHype and static LoRA-ESD)")
    hyper_width: int = knob(32, ge=4, le=1024, doc="hidden width of each hypernetwork head L_l, R_l")
    hyper_lr: float = knob(1e-3, gt=0, le=1.0, doc="Adam lr of the removal optimizer (retain uses 3x, as 1e-4/3e-4)")
    internal_lr_grid: tuple[float, ...] = knob((0.3, 1.0, 3.0), gt=0, le=100.0, min_len=1,
                                               doc="candidate internal step sizes eta_int (explicit-GD calibration)")
    aux_to_hyper: bool = knob(True, doc="let the ESD loss's own gradient reach H (the repository's update)")
    neg_guidance: float = knob(1.0, ge=0, le=10.0, doc="ESD negative guidance eta_neg")
    targets: tuple[int, ...] = knob((7,), ge=0, le=9, min_len=1, doc="digits erased in C1-C4 (the card erases 7)")
    multi_m: tuple[int, ...] = knob((1, 3, 5), ge=1, le=9, min_len=1, doc="numbers of concepts erased at once (C5)")
    baseline_steps: int = knob(400, ge=1, le=20_000, doc="most Adam steps of ESD-x, LoRA-ESD, Concept Ablation")
    check_every: int = knob(10, ge=1, le=20_000, doc="baseline checkpoint interval of the matched-erasure stop")
    n_check: int = knob(400, ge=10, le=5000, doc="samples per erased digit in the matched-erasure check (card: 100; "
                                                 "a small check stops on lucky draws)")
    n_eval_samples: int = knob(200, ge=4, le=5000, doc="generated samples per digit prompt group in every evaluation")
    sample_steps: int = knob(20, ge=2, le=1000, doc="Euler (flow) / DDIM (DDPM) sampling steps, also the ESD grid")
    run_ddpm: bool = knob(True, doc="train the eps-prediction DDPM backbone and unlearn on it (C6)")
    run_pure_ablation: bool = knob(True, doc="also train H with aux_to_hyper flipped (the pure amortized update)")
    anchor: Literal["empty", "mapping"] = knob("empty", doc='ESD anchor c_a: "" (ESD paper) or "a handwritten digit"')

    def check(self) -> None:
        if len(set(self.targets)) != len(self.targets):
            self.fail("targets", f"must not repeat a digit; got {list(self.targets)}")
        if list(self.multi_m) != sorted(set(self.multi_m)):
            self.fail("multi_m", f"must be strictly increasing; got {list(self.multi_m)}")
        if max(self.multi_m) > 9:
            self.fail("multi_m", "must leave at least one digit to retain (m <= 9)")
        if self.check_every > self.baseline_steps:
            self.fail("check_every", f"must be <= baseline_steps ({self.baseline_steps}); got {self.check_every}")
        if len(self.targets) > 9:
            self.fail("targets", "must leave at least one digit to retain")
