"""Parameters of chapter 14 (Hom-PGD⁺): the card's table, with the ``full`` profile as the field defaults.

Every knob is validated before any work starts (papermill checks nothing); a bad value raises a one-line
:class:`repro.common.ConfigError` naming the parameter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from repro.common import BaseConfig, knob

SMOKE = dict(n_var=4, n_qua=3, scale_sizes=(6,), scale_train_steps=50, scale_timing_steps=25, scale_train_batch=128,
             scale_instances=8, n_test=16, inn_blocks=3, inn_hidden=16, train_steps=100,
             train_batch=128, checkpoints=(50, 100), latent_iters=30, slsqp_starts=2, n_exact_proj=4,
             exact_proj_iters=10, widths_sweep=(8, 16), n_sdp=8, n_multistart_check=4, eps_samples=20_000,
             n_rays=200, train_steps_2d=50, alm_iters=100, k1_instances=64)


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 14's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists."""

    slug: ClassVar[str] = "hom_pgd"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    # problem
    n_var: int = knob(10, ge=2, le=200, doc="n: decision variables of the main experiment")
    n_qua: int = knob(10, ge=1, le=200, doc="m: non-convex quadratic constraints (plus box [-5, 5]^n and ball R = 5)")
    scale_sizes: tuple[int, ...] = knob((30, 60), ge=4, le=200, doc="extra n (with m = n) timed for C3 "
                                                                    "(empty: skip; C3 then inconclusive)")
    n_test: int = knob(256, ge=4, le=4096, doc="test instances of the main experiment")
    # INN and its MDH training
    inn_blocks: int = knob(6, ge=1, le=16, doc="affine coupling blocks (alternating halves) + a final affine")
    inn_hidden: int = knob(64, ge=4, le=1024, doc="hidden width of every coupling net (2 hidden layers)")
    inn_arch: str = knob("star", choices=("star", "realnvp"), doc="the map Φ: 'star' = boundary-preserving radial "
                         "spline flow (keeps the unit sphere on the R-sphere); 'realnvp' = affine couplings (see ball_gauge)")
    spline_bins: int = knob(8, ge=2, le=64, doc="bins of the star flow's monotone radial spline")
    w_lip: float = knob(0.0, ge=0, le=100, doc="weight of the Lipschitz term 0.1·max D (authors: 0.1; 0 for the star "
                                               "flow, whose pinned sphere makes max D > 0 for every carving map)")
    ball_gauge: bool = knob(True, doc="wrap the flow in exact radial maps onto the R-ball (the authors' CvxINN "
                                      "construction for the convex part of C); False: the plain flow, x = 5 F(z)")
    train_steps: int = knob(4000, ge=10, le=100_000, doc="Adam steps of MDH training (lr 1e-3, EMA 0.99)")
    train_batch: int = knob(512, ge=8, le=8192, doc="ball samples (each with its own scale factors) per step")
    checkpoints: tuple[int, ...] = knob((250, 1000, 4000), ge=1, min_len=2, doc="EMA checkpoints compared in C5 "
                                                                            "(the last must be train_steps)")
    w_pen: float = knob(10.0, gt=0, le=1e4, doc="weight of the linear hinge penalty (authors: 10)")
    scale_train_steps: int = knob(3000, ge=10, le=100_000, doc="MDH steps of the n = 30 INN (its gap is checked by K3; "
                                                                "the card's 1,500 at batch 512 left it at 10.4 % > 10 %)")
    scale_train_batch: int = knob(256, ge=8, le=8192, doc="batch of the scale-size INNs (card: 512; halved to pay "
                                                           "for the doubled steps)")
    scale_timing_steps: int = knob(300, ge=10, le=100_000, doc="MDH steps of the INNs at the other scale_sizes "
                                                                "(timing only: an iteration costs the same)")
    scale_instances: int = knob(64, ge=2, le=1024, doc="instances per scale size (Hom-PGD+ batched, one SLSQP "
                                                       "start each)")
    k1_instances: int = knob(1024, ge=8, le=100_000, doc="fresh instances (one SLSQP start each) on which K1 counts "
                             "active constraints at n_var and n = 30 (Wilson interval; 64 gave ±6 points)")
    # Hom-PGD+
    latent_iters: int = knob(300, ge=10, le=10_000, doc="K: latent iterations (fixed budget for C2, C4, C5)")
    lr_latent: float = knob(0.1, gt=0, le=10, doc="α0: initial latent step (×0.999 after a non-improving step)")
    bisection_steps: int = knob(10, ge=1, le=60, doc="halvings of the latent segment bisection")
    time_tol: float = knob(1e-5, gt=0, le=1, doc="early-stop tolerance of the timed Hom-PGD+ runs (C3)")
    # baselines
    slsqp_starts: int = knob(5, ge=1, le=50, doc="SLSQP starts (uniform in [-1, 1]^n) for f_ref")
    n_multistart_check: int = knob(32, ge=1, le=1024, doc="instances on which best-of-5 is compared with 20 starts (K3)")
    n_sdp: int = knob(64, ge=1, le=4096, doc="instances with a Shor-SDP lower bound (cvxpy + Clarabel)")
    n_exact_proj: int = knob(16, ge=1, le=256, doc="instances of PGD with exact (SLSQP) projection")
    exact_proj_iters: int = knob(50, ge=1, le=1000, doc="iterations of PGD with exact projection")
    alm_iters: int = knob(1000, ge=10, le=100_000, doc="Adam steps of the penalty and ALM baselines")
    # diagnostics
    eps_samples: int = knob(100_000, ge=1000, le=10_000_000, doc="ball samples for eps_inn (K2: >= 1e5)")
    n_rays: int = knob(1000, ge=10, le=100_000, doc="rays from 0 checked for re-entering C (K1)")
    widths_sweep: tuple[int, ...] = knob((32, 64, 128, 256), ge=2, le=2048, min_len=2,
                                         doc="hidden widths timed for C6 (untrained INNs, batch 256)")
    train_steps_2d: int = knob(600, ge=10, le=100_000, doc="MDH steps of the 2-D picture model (n = 2, m = 3)")

    def check(self) -> None:
        if list(self.checkpoints) != sorted(set(self.checkpoints)):
            self.fail("checkpoints", f"must be strictly increasing; got {list(self.checkpoints)}")
        if self.checkpoints[-1] != self.train_steps:
            self.fail("checkpoints", f"the last must equal train_steps = {self.train_steps}; got {list(self.checkpoints)}")
        if self.slsqp_starts > 20:
            self.fail("slsqp_starts", f"must be <= 20 (K3 compares with 20 starts); got {self.slsqp_starts}")
        for name, k in (("n_sdp", self.n_sdp), ("n_multistart_check", self.n_multistart_check),
                        ("n_exact_proj", self.n_exact_proj)):
            if k > self.n_test:
                self.fail(name, f"must be <= n_test = {self.n_test}; got {k}")
