"""Parameters of chapter 09 (harm-aware optimizer updates): the card's table, with the ``full`` profile as
the field defaults. Every knob is validated before any work starts; a bad value raises a one-line
:class:`repro.common.ConfigError` naming it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from repro.common import BaseConfig, knob

OPTIMIZERS = ("sgdm", "harm_sgdm", "adamw", "harm_adamw")
DATASETS = ("mnist1d", "digits")

SMOKE = dict(n_seeds=1, n_seeds_mnist1d=0, datasets=("digits",), epochs_mnist1d=0, epochs_digits=2, batch_size=32,
             optimizers=("sgdm", "harm_sgdm"), qp_iters=5, harm_every=1, exact_steps=20, exact_seeds=1,
             widths=(64,), lengths=(), gram_checkpoints=1, lr_grid_sgdm=(), lr_grid_adamw=(), compute_seeds=1,
             lr_matched_seeds=1, timing_steps=6, ablation_in_state=False)


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 09's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists."""

    slug: ClassVar[str] = "harm_optimizer"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    # experiment size
    n_seeds: int = knob(5, ge=1, le=20, doc="training seeds per optimizer (paired: same init and batches)")
    n_seeds_mnist1d: int = knob(8, ge=0, le=30,
                                doc="training seeds on MNIST-1D (0: n_seeds). Issue 44, K4a: 5 seeds left the "
                                    "minimum detectable paired accuracy difference above 1 point in one master "
                                    "seed of five; 8 seeds shrink it, at the same spread, by a factor 1.44 "
                                    "(t-quantiles and √n); 10 seeds (1.67) ran 10 min on the shared machine")
    datasets: tuple[str, ...] = knob(DATASETS, choices=DATASETS, min_len=1, doc="datasets of C1 and C4")
    epochs_mnist1d: int = knob(15, ge=0, le=200, doc="epochs on MNIST-1D (4,000 training sequences)")
    epochs_digits: int = knob(60, ge=0, le=500, doc="epochs on digits (1,437 training images)")
    batch_size: int = knob(64, ge=2, le=512, doc="B: batch size, also the dimension of the QP")
    optimizers: tuple[str, ...] = knob(OPTIMIZERS, choices=OPTIMIZERS, min_len=2,
                                       doc="optimizers trained (each Harm-X needs its X)")
    width: int = knob(256, ge=8, le=4096, doc="hidden width of the digits MLP")
    channels: int = knob(32, ge=4, le=256, doc="channels of the MNIST-1D CNN")
    cnn_head: str = knob("flatten", choices=("flatten", "mean"),
                         doc="what the MNIST-1D CNN's head sees: the flattened feature map (the reference MNIST-1D "
                             "CNN's layout) or the card's global mean pool")
    # optimizer hyper-parameters (the same for X and Harm-X)
    lr_sgdm_digits: float = knob(0.05, gt=0, le=10, doc="SGDM peak lr on digits (the card's)")
    lr_adamw_digits: float = knob(1e-3, gt=0, le=1, doc="AdamW peak lr on digits (the card's)")
    lr_sgdm_mnist1d: float = knob(0.05, gt=0, le=10, doc="SGDM peak lr on MNIST-1D when lr_grid_sgdm is empty")
    lr_adamw_mnist1d: float = knob(1e-3, gt=0, le=1, doc="AdamW peak lr on MNIST-1D when lr_grid_adamw is empty")
    lr_grid_sgdm: tuple[float, ...] = knob((0.05, 0.1, 0.2), gt=0, le=10,
                                           doc="MNIST-1D lrs tried once for SGDM on a validation split; Harm-SGDM "
                                                "uses SGDM's best (empty: no grid)")
    lr_grid_adamw: tuple[float, ...] = knob((1e-3, 3e-3, 1e-2), gt=0, le=1,
                                            doc="MNIST-1D lrs tried once for AdamW on a validation split; "
                                                 "Harm-AdamW uses AdamW's best (empty: no grid)")
    clip_norm: float = knob(2.0, ge=0, le=1000,
                            doc="gradient-norm clipping for every optimizer on both datasets, X and Harm-X alike: "
                                "the mean gradient is rescaled to norm <= clip_norm before it enters the optimizer "
                                "(0: off). Without it SGDM at MNIST-1D lr 0.2, which the validation grid can pick, "
                                "failed to train in one of five seeds (a gradient-norm spike of ~200 against a "
                                "median of ~0.3); at 2.0 it bound on 6-12 % of MNIST-1D steps and on none of digits' (seed 0)")
    momentum: float = knob(0.9, ge=0, lt=1, doc="β of SGDM")
    wd_sgdm: float = knob(5e-4, ge=0, le=1, doc="λ of SGDM (coupled, torch convention)")
    wd_adamw: float = knob(1e-2, ge=0, le=1, doc="λ of AdamW (decoupled)")
    # the harm-aware step
    qp_iters: int = knob(40, ge=1, le=1000, doc="FISTA iterations on the B-dim dual (Jacobi-scaled); the card's 10 "
                                                "raised to 40: with 10, K1's violations-after/before stays above 0.5")
    correction_cap: float = knob(1.0, gt=0, le=100, doc="‖correction‖ <= cap × ‖d_opt‖ on the layer(s) of the QP")
    correction_in_state: bool = knob(False, doc="feed the correction into the momentum / Adam state (the card's "
                                                "first design) instead of the current step only")
    ablation_in_state: bool = knob(True, doc="also train Harm-SGDM with the correction in the momentum (digits, "
                                             "first seed) as an ablation")
    # measurements
    harm_every: int = knob(4, ge=1, le=100, doc="re-evaluate the batch after every k-th step (measured harm)")
    gram_checkpoints: int = knob(5, ge=1, le=50, doc="checkpoints of the baseline runs where full per-sample "
                                                     "gradients are computed (C2, K1, K3)")
    exact_steps: int = knob(400, ge=2, le=5000, doc="steps of the proxy-vs-exact comparison (C3, digits, SGDM)")
    exact_seeds: int = knob(3, ge=1, le=20, doc="seeds of the proxy-vs-exact comparison")
    compute_match: float = knob(1.3, ge=1, le=5, doc="compute-matched control: X runs this many times the steps")
    compute_seeds: int = knob(3, ge=1, le=20, doc="seeds of the compute-matched control")
    lr_matched_seeds: int = knob(3, ge=1, le=20, doc="seeds of X at lr × (update-norm ratio), run when K2's ratio "
                                                     "leaves [0.8, 1.25]")
    widths: tuple[int, ...] = knob((64, 256, 1024), ge=8, le=4096, min_len=1, doc="MLP widths of the C5 sweep")
    lengths: tuple[int, ...] = knob((40, 80, 160), ge=8, le=2048, doc="MNIST-1D input lengths of the C5 sweep "
                                                                       "(linear interpolation)")
    timing_steps: int = knob(40, ge=3, le=1000, doc="timed steps per method and repeat in C5 (after 3 warm-up)")

    def check(self) -> None:
        for o in self.optimizers:
            if o.startswith("harm_") and o[5:] not in self.optimizers:
                self.fail("optimizers", f"lists {o} without its baseline {o[5:]}")
        if not any(o.startswith("harm_") for o in self.optimizers):
            self.fail("optimizers", "needs at least one harm-aware optimizer")
        if len(set(self.optimizers)) != len(self.optimizers):
            self.fail("optimizers", f"has duplicates: {list(self.optimizers)}")
        if len(set(self.datasets)) != len(self.datasets):
            self.fail("datasets", f"has duplicates: {list(self.datasets)}")
        for d in self.datasets:
            if self.epochs(d) < 1:
                self.fail(f"epochs_{d}", f"must be >= 1 when {d!r} is in datasets; got {self.epochs(d)}")
        if self.exact_seeds > self.n_seeds:
            self.fail("exact_seeds", f"must be <= n_seeds = {self.n_seeds}; got {self.exact_seeds}")
        if self.compute_seeds > self.n_seeds:
            self.fail("compute_seeds", f"must be <= n_seeds = {self.n_seeds}; got {self.compute_seeds}")
        if self.lr_matched_seeds > self.n_seeds:
            self.fail("lr_matched_seeds", f"must be <= n_seeds = {self.n_seeds}; got {self.lr_matched_seeds}")

    def epochs(self, dataset: str) -> int:
        return self.epochs_mnist1d if dataset == "mnist1d" else self.epochs_digits

    @property
    def pairs(self) -> list[str]:
        """The baselines X whose Harm-X is trained."""
        return [o for o in ("sgdm", "adamw") if o in self.optimizers and f"harm_{o}" in self.optimizers]
