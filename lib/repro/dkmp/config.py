"""Parameters of chapter 15 (DKMP): the card's table, with the full profile as defaults."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from repro.common import BaseConfig, knob

SMOKE = dict(
    n_train_configs=20, n_atoms_train=(32, 48), n_atoms_test=(64,), n_configs_test=(5,), timing_sizes=(100, 200),
    dense_max_atoms=200, hidden=8, train_steps=20, md_steps=50, refresh_every=10, n_seeds=1,
)


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 15's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists.

    Lengths are in units of the LJ σ, energies in units of ε_AA, temperatures in ε_AA / k_B.
    """

    slug: ClassVar[str] = "dkmp"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    # data
    n_train_configs: int = knob(200, ge=2, le=5000, doc="training configurations (one Langevin trajectory)")
    n_atoms_train: tuple[int, ...] = knob((64, 96, 128), ge=8, le=4096, min_len=1,
                                          doc="atoms per training cluster: a mix of sizes, the configurations "
                                              "split evenly among them")
    n_atoms_test: tuple[int, ...] = knob((256, 1024), ge=8, le=32768, min_len=1,
                                         doc="atoms per held-out cluster; the first is the main test set")
    n_configs_test: tuple[int, ...] = knob((50, 10), ge=1, le=1000, min_len=1,
                                           doc="held-out configurations at each size of n_atoms_test")
    k_Y: float = knob(4.0, ge=0, le=100, doc="strength k_Y of the screened attractive tail")
    lam: float = knob(3.0, gt=0, le=20, doc="screening length λ of the tail (σ)")
    jitter: float = knob(0.0, ge=0, le=0.2, doc="Gaussian jitter added to each snapshot (σ); the card's 0.03 "
                                                "fails the tail-share gate, see Setting")
    # timing (C3)
    timing_sizes: tuple[int, ...] = knob((500, 1000, 2000, 4000, 8000, 16000), ge=16, le=32768, min_len=1,
                                         doc="cluster sizes of the scaling study (N)")
    dense_max_atoms: int = knob(700, ge=16, le=4000, doc="largest N at which SchNet-wide / all-pairs are timed")
    # models
    hidden: int = knob(32, ge=2, le=256, doc="feature width F of every model")
    n_local: int = knob(1, ge=1, le=4, doc="local (radius-graph) layers of DKMP")
    n_star: int = knob(2, ge=0, le=4, doc="dilated star layers of DKMP")
    r_local: float = knob(2.5, gt=0.5, le=10, doc="cutoff of the local layers and of SchNet-local (σ)")
    s1: float = knob(1.35, gt=0.5, le=20, doc="region scale s_1 of the first star layer (σ); the card's 2.7 "
                                               "gives one centre per training cluster, see Setting")
    dilation: float = knob(2.0, ge=1, le=4, doc="dilation d: s_l = s_1 d^(l-1)")
    r_max: float = knob(8.0, gt=0.5, le=20, doc="cutoff of SchNet-wide = interaction range R_max (σ)")
    # training
    train_steps: int = knob(600, ge=1, le=100_000, doc="optimisation steps of every model (batch 2)")
    lr: float = knob(1e-3, gt=0, le=1, doc="Adam learning rate (cosine schedule)")
    force_weight: float = knob(100.0, ge=0, le=1e6, doc="weight of the force term in the loss")
    # molecular dynamics (C5)
    md_steps: int = knob(2000, ge=1, le=1_000_000, doc="NVE velocity-Verlet steps with the learned potential")
    refresh_every: int = knob(20, ge=1, le=100_000, doc="steps between re-selections of the star centres")
    n_seeds: int = knob(3, ge=1, le=20, doc="training seeds (initialisation and batch order)")

    def check(self) -> None:
        if len(self.n_atoms_test) != len(self.n_configs_test):
            self.fail("n_configs_test", f"needs one entry per n_atoms_test ({len(self.n_atoms_test)}); "
                                        f"got {list(self.n_configs_test)}")
        if list(self.timing_sizes) != sorted(set(self.timing_sizes)):
            self.fail("timing_sizes", f"must be strictly increasing; got {list(self.timing_sizes)}")
        if self.n_train_configs < 2 * len(self.n_atoms_train):
            self.fail("n_train_configs", f"needs >= 2 per training size ({len(self.n_atoms_train)} sizes); "
                                         f"got {self.n_train_configs}")
        if self.refresh_every > self.md_steps:
            self.fail("refresh_every", f"must be <= md_steps ({self.md_steps}); got {self.refresh_every}")
        if self.r_max <= self.r_local:
            self.fail("r_max", f"must exceed r_local ({self.r_local}); got {self.r_max}")
