"""Parameters of chapter 06 (Fractured Magnitude): the card's table, with the ``full`` profile as the field
defaults. Every knob is validated before any work starts; a bad value raises a one-line
:class:`repro.common.ConfigError` naming the parameter."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from repro.common import BaseConfig, knob

SMOKE = dict(n_seeds=1, d_model=16, batch_size=32, text_steps=60, mm_steps=40, control_steps=20, control_restarts=1,
             eval_per_count=4, run_control=False, run_vx_reference=False)


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 06's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists."""

    slug: ClassVar[str] = "fractured_magnitude"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    n_seeds: int = knob(3, ge=1, le=10, doc="multimodal fine-tuning seeds (the text model is shared)")
    board_size: int = knob(6, ge=4, le=6, doc="s: an s×s board, one 5×5-px patch per intersection (the EQ "
                                                   "sequence of a 6×6 board fills the decoder's 76 positions)")
    vision_boundary: int = knob(11, ge=1, le=40, doc="largest black-stone count seen in vision fine-tuning (ID)")
    text_boundary: int = knob(23, ge=2, le=60, doc="largest count of the text pre-training (VX ends here)")
    max_count: int = knob(30, ge=3, le=81, doc="largest count evaluated (FX = text_boundary+1 .. max_count)")
    distractor_range: int = knob(5, ge=0, le=30, doc="white stones U[max(0,n−r), n+r] (the repo's 6×6 range)")
    d_model: int = knob(32, ge=8, le=128, doc="width d of encoder and decoder (2 layers, 2 heads, MLP ×2)")
    batch_size: int = knob(64, ge=4, le=1024, doc="sequences per batch (each of the image and the text batch)")
    text_steps: int = knob(2500, ge=10, le=20_000, doc="cap on text pre-training steps (stops at the criterion)")
    text_target: float = knob(0.95, gt=0, le=1, doc="criterion: held-out text NUM and EQ accuracy to stop at")
    text_lr: float = knob(2e-3, gt=0, le=0.1, doc="AdamW lr of the text pre-training (the repo's), 100 warm-up steps")
    mm_steps: int = knob(2000, ge=1, le=20_000, doc="cap on multimodal fine-tuning steps (image batch + text "
                                                    "batch; stops at the criterion)")
    mm_target: float = knob(0.95, gt=0, le=1, doc="criterion: held-out exact count on the training boards to stop at")
    lr_vision: float = knob(1e-3, gt=0, le=0.1, doc="lr of the vision encoder")
    lr_projector: float = knob(1e-3, gt=0, le=0.1, doc="lr of the projector (the repo's 1e-5; our decision)")
    lr_decoder: float = knob(1e-5, ge=0, le=0.1, doc="lr of the decoder during fine-tuning (nearly frozen)")
    control_steps: int = knob(600, ge=1, le=20_000, doc="cap on the vision-side steps of one attempt of the "
                                                        "unified-space control (C6; stops at its validation criterion)")
    control_lr: float = knob(1e-3, gt=0, le=0.1, doc="peak lr of the control's vision side and head")
    control_tasks: Literal["num", "num+eq"] = knob("num", doc="image batches of the control: the NUM batches only "
                                                              "(with EQ batches its head collapsed in pilots, K4)")
    control_restarts: int = knob(6, ge=1, le=20, doc="at most this many fresh inits of the control per seed; the "
                                                     "first meeting the validation criterion (held-out ID count and "
                                                     "letter purity) is kept, else the best held-out count")
    eval_per_count: int = knob(40, ge=2, le=1000, doc="evaluation boards (and strings) per count")
    run_control: bool = knob(True, doc="train the unified-space control VLM (C6, K3, K4)")
    run_vx_reference: bool = knob(True, doc="train the VX-trained reference (boards 0..text_boundary; K1)")
    use_cache: bool = knob(True, doc="reuse trained models in data/cache/fractured_magnitude/ keyed by config")

    def check(self) -> None:
        cells = self.board_size ** 2
        if self.d_model % 2:
            self.fail("d_model", f"must be divisible by the 2 attention heads; got {self.d_model}")
        if not self.vision_boundary < self.text_boundary:
            self.fail("text_boundary", f"must exceed vision_boundary={self.vision_boundary}; got {self.text_boundary}")
        if not self.text_boundary < self.max_count:
            self.fail("max_count", f"must exceed text_boundary={self.text_boundary}; got {self.max_count}")
        if self.max_count > min(cells, 99):
            self.fail("max_count", f"must be <= {min(cells, 99)} (cells of a {self.board_size}×{self.board_size} "
                      f"board, two-digit answers); got {self.max_count}")

    @property
    def n_cells(self) -> int:
        return self.board_size ** 2

    def seeds(self) -> list[int]:
        """The fine-tuning seeds of this run: 1000·seed + i, i < n_seeds."""
        return [1000 * self.seed + i for i in range(self.n_seeds)]
