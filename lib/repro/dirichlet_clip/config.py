"""Parameters of chapter 07 (Dirichlet-CLIP / UCAT): the card's table, with the full profile as defaults.

The attack radii are not fixed numbers here: ``eps_test = None`` (the default) means "calibrated" — the
smallest radius of ``eps_grid`` at which the pre-trained toy CLIP's suite-average robust accuracy on the
validation split falls to ≤ 0.3 (:func:`repro.dirichlet_clip.experiments.calibrate_eps`), so that the undefended
model degrades under attack as real CLIP does at 1/255. ``eps_train = None`` trains at that radius (the paper
trains and tests at the same ε) and ``eps_sweep = None`` sweeps {0, ε/2, ε, 2ε} around it (C5).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from repro.common import BaseConfig, knob

METHOD_NAMES = ("orig", "clean_ft", "tecoa", "pmg_aft", "fare", "ucat", "softmax_kl")
"""Every model the chapter can evaluate: the pretrained toy CLIP, five fine-tunings and the C6 ablation."""

EPS_GRID = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3)
"""Candidate attack radii of the calibration (pixel units; 0.0625 is one of the digits' 17 gray levels)."""

SMOKE = dict(n_seeds=1, pretrain_steps=150, aft_steps=20, train_pgd_steps=1, test_pgd_steps=3,
             methods=("orig", "tecoa", "ucat"), sweep_methods=("ucat",), tau_rob_panel=(1e2,))


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 07's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists.

    Pixel values live in [0, 1]; every ε is in those units (digits have 17 gray levels, 1/16 apart).
    """

    slug: ClassVar[str] = "dirichlet_clip"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    n_seeds: int = knob(3, ge=1, le=20, doc="fine-tuning seeds (batch order, PGD starts, attack starts)")
    pretrain_steps: int = knob(1500, ge=1, le=20_000, doc="contrastive pre-training steps of the toy CLIP")
    aft_steps: int = knob(300, ge=1, le=10_000, doc="adversarial fine-tuning steps per method and seed")
    aft_lr: float = knob(1e-3, gt=0, le=1e-1, doc="Adam learning rate of fine-tuning (cosine decay to 0)")
    eps_grid: tuple[float, ...] = knob(EPS_GRID, gt=0, le=0.5, min_len=1,
                                       doc="candidate radii of the ε calibration (used when eps_test is None)")
    eps_test: float | None = knob(None, gt=0, le=0.5,
                                  doc="L∞ radius ε_test of the evaluation PGD; None = calibrated on eps_grid")
    eps_train: float | None = knob(None, ge=0, le=0.5,
                                   doc="L∞ radius ε_train of the training PGD; None = ε_test")
    train_pgd_steps: int = knob(2, ge=1, le=50, doc="steps of the training PGD (step size = ε_train)")
    test_pgd_steps: int = knob(20, ge=1, le=500, doc="steps of the evaluation PGD (step size ε/4, random start)")
    tau: float = knob(0.07, gt=0, le=10, doc="τ of α_k = exp((cos_k + 1)/τ) (the repo's target_concentration)")
    tau_rob: float = knob(1e5, ge=0, le=1e12, doc="τ_rob of λ = τ_rob / exp(softplus(2/τ)); 0 turns UCAT into TeCoA")
    tau_rob_panel: tuple[float, ...] = knob((1e1, 1e2, 1e3), ge=0, le=1e12, min_len=0,
                                            doc="extra τ_rob values of the UCAT panel (first seed only)")
    methods: tuple[str, ...] = knob(METHOD_NAMES, choices=METHOD_NAMES, min_len=1,
                                    doc="models evaluated (orig = the pretrained toy CLIP)")
    eps_sweep: tuple[float, ...] | None = knob(None, ge=0, le=1.0, min_len=2,
                                               doc="attack radii of the entropy-vs-ε sweep (C5); None = {0, ε/2, ε, 2ε}")
    sweep_methods: tuple[str, ...] = knob(("tecoa", "ucat"), choices=METHOD_NAMES, min_len=1,
                                          doc="methods run through the ε-sweep")
    t4_rotation_deg: float = knob(20.0, ge=0, le=180, doc="rotation (random sign) of the shifted task T4, degrees")

    def check(self) -> None:
        if len(set(self.methods)) != len(self.methods):
            self.fail("methods", f"lists a method twice; got {list(self.methods)}")
        missing = [m for m in ("orig", "tecoa", "ucat") if m not in self.methods]
        if missing:
            self.fail("methods", f"must include 'orig', 'tecoa' and 'ucat' (every claim compares them); "
                                 f"missing {missing}")
        extra = [m for m in self.sweep_methods if m not in self.methods]
        if extra:
            self.fail("sweep_methods", f"must be a subset of methods; {extra} are not in {list(self.methods)}")
        if len(set(self.sweep_methods)) != len(self.sweep_methods):
            self.fail("sweep_methods", f"lists a method twice; got {list(self.sweep_methods)}")
        if self.eps_sweep is not None and list(self.eps_sweep) != sorted(set(self.eps_sweep)):
            self.fail("eps_sweep", f"must be strictly increasing; got {list(self.eps_sweep)}")
        if list(self.eps_grid) != sorted(set(self.eps_grid)):
            self.fail("eps_grid", f"must be strictly increasing; got {list(self.eps_grid)}")

    def resolved(self, eps_test: float) -> "Config":
        """This config with the calibrated (or given) ε_test filled in, and ε_train and the sweep derived from it."""
        eps_train = self.eps_train if self.eps_train is not None else eps_test
        sweep = self.eps_sweep if self.eps_sweep is not None else eps_sweep_around(eps_test)
        return self.replace(eps_test=float(eps_test), eps_train=float(eps_train), eps_sweep=tuple(sweep))


def eps_sweep_around(eps: float) -> tuple[float, ...]:
    """{0, ε/2, ε, 2ε}: the card's C5 sweep, tied to ε_test."""
    return (0.0, eps / 2, eps, 2 * eps)
