"""Parameters of chapter 18 (EMFormer): the card's papermill table, the ``full`` profile as the field defaults.

Every knob is validated before any work starts (papermill checks nothing); a bad value raises a one-line
:class:`repro.common.ConfigError` naming the parameter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from repro.common import BaseConfig, knob

SMOKE = dict(grid=(16, 32), n_traj=6, frames_per_traj=30, spinup_frames=10, dim=16, heads=2, valley_depth=2,
             pretrain_steps=15, finetune_iters=5, rollout_K=2, K_sweep=(2,), eval_leads=4, n_seeds=1,
             timing_runs=10)


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 18's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists."""

    slug: ClassVar[str] = "emformer"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    # data: the shallow-water simulator (repro.emformer.sim)
    grid: tuple[int, ...] = knob((32, 64), ge=8, le=128, min_len=2, doc="(latitude, longitude) cells, 375 km each")
    n_traj: int = knob(32, ge=3, le=256, doc="trajectories (split by trajectory: 1/8 validation, 1/4 test)")
    frames_per_traj: int = knob(120, ge=10, le=2000, doc="recorded 6-hour frames per trajectory")
    spinup_frames: int = knob(30, ge=0, le=2000, doc="frames discarded before recording")
    dt_seconds: float = knob(1440.0, gt=0, le=1800.0, doc="time step, s (must divide 6 h; CFL: <= 1800 s)")
    ic_stride: int = knob(12, ge=1, le=200, doc="every k-th test frame is an initial condition of the evaluation")
    # model (EMFormer-tiny; the ViT is parameter-matched to it)
    patch: int = knob(4, ge=1, le=16, doc="patch size p (tokens = grid / p)")
    dim: int = knob(64, ge=8, le=512, doc="token width d")
    heads: int = knob(4, ge=1, le=16, doc="attention heads")
    valley_depth: int = knob(4, ge=1, le=16, doc="fused-conv blocks in the valley (odd ones use 2×4 windows)")
    # training
    batch: int = knob(8, ge=1, le=256, doc="batch size of pretraining and fine-tuning")
    pretrain_steps: int = knob(300, ge=1, le=100_000, doc="one-step pretraining steps (AdamW, cosine to 3 %)")
    finetune_iters: int = knob(80, ge=1, le=100_000, doc="fine-tuning iterations (batches of K-step rollouts); the "
                                                         "card's 40 doubled after control K3 failed at master seed 1")
    rollout_K: int = knob(4, ge=1, le=32, doc="K: rollout length of accumulative fine-tuning and BPTT")
    K_sweep: tuple[int, ...] = knob((2, 4, 8), ge=1, le=32, min_len=1, doc="K values of the memory measurement (C4a)")
    eval_leads: int = knob(20, ge=1, le=200, doc="leads of the evaluation rollouts (one lead = 6 h)")
    loss: Literal["composite", "scheduled", "fixed", "mse"] = knob("composite", doc="EMFormer's pretraining loss")
    lr_pretrain: float = knob(1e-3, gt=0, le=1.0, doc="peak AdamW lr of pretraining")
    loss_lr: float = knob(2e-2, gt=0, le=1.0, doc="peak lr of the loss's own (θ, s_c) group (card, Risks)")
    lr_finetune: float = knob(1e-4, gt=0, le=1.0, doc="peak AdamW lr of fine-tuning and of the continued-training control")
    lr_finetune_floor: float = knob(0.03, gt=0, le=1.0, doc="the fine-tuning lr decays by a cosine to this fraction "
                                    "of lr_finetune (1 = the card's constant lr, which left K3 inside seed noise at "
                                    "master seed 1: each model stopped at a noisy last iterate)")
    n_seeds: int = knob(3, ge=1, le=20, doc="model seeds (inits and batch order; the data stay the same)")
    run_ablations: bool = knob(False, doc="seed-0 ablations: no conv, fixed w = 0.5, scheduled w")
    timing_runs: int = knob(150, ge=5, le=10_000, doc="interleaved timing repetitions of C2b/C2c")
    use_cache: bool = knob(True, doc="reuse pretrained models in data/cache/emformer/ when their config matches")

    def check(self) -> None:
        ny, nx = self.grid[0], self.grid[-1]
        if len(self.grid) != 2:
            self.fail("grid", f"must be [latitude, longitude]; got {list(self.grid)}")
        if ny % (2 * self.patch) or nx % (2 * self.patch):
            self.fail("grid", f"must be divisible by 2 × patch = {2 * self.patch} (patches, then 2×2 merging); "
                      f"got {list(self.grid)}")
        if self.dim % self.heads:
            self.fail("dim", f"must be divisible by heads = {self.heads}; got {self.dim}")
        if abs(21600.0 / self.dt_seconds - round(21600.0 / self.dt_seconds)) > 1e-9:
            self.fail("dt_seconds", f"must divide the 6-hour frame (21600 s); got {self.dt_seconds}")
        if self.eval_leads + 1 >= self.frames_per_traj:
            self.fail("eval_leads", f"must be < frames_per_traj − 1 = {self.frames_per_traj - 1}; got {self.eval_leads}")
        if self.rollout_K + 1 >= self.frames_per_traj:
            self.fail("rollout_K", f"must be < frames_per_traj − 1; got {self.rollout_K}")

    @property
    def csi_lead(self) -> int:
        """Lead of the extreme-event scores (the card's 8, or the last lead if shorter)."""
        return min(8, self.eval_leads)
