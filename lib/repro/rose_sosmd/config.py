"""Parameters of chapter 08 (ROSE / SOS-MD): the card's table, with the full profile as defaults."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from repro.common import BaseConfig, knob

SMOKE = dict(n_seeds=1, S=4, A=3, B=3, H=3, n_list=(256, 1024), slope_min_n=256, skew_n_list=(256, 1024),
             skew_slope_min_n=256, beta_list=(0.1,), T_md=30, T_list=(5, 20), rose_tol=1e-9)


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 08's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists."""

    slug: ClassVar[str] = "rose_sosmd"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    n_seeds: int = knob(5, ge=1, le=50, doc="games (and datasets) averaged in every curve")
    S: int = knob(6, ge=2, le=50, doc="states per step")
    A: int = knob(3, ge=2, le=10, doc="actions of the max-player")
    B: int = knob(3, ge=2, le=10, doc="actions of the min-player")
    H: int = knob(4, ge=1, le=20, doc="horizon (steps per episode)")
    n_list: tuple[int, ...] = knob(tuple(2 ** k for k in range(8, 18)), ge=16, le=2**22, min_len=2,
                                   doc="dataset sizes n (episodes), standard coverage (C1-C3, C5)")
    slope_min_n: int = knob(2 ** 14, ge=1, doc="C1/C2 slopes are fitted on n >= this (the four largest sizes; "
                                              "the card's 2^12..2^15 is reported beside)")
    skew_n_list: tuple[int, ...] = knob(tuple(2 ** k for k in range(8, 21)), ge=16, le=2**22, min_len=2,
                                        doc="dataset sizes n under skewed coverage (C4)")
    skew_slope_min_n: int = knob(2 ** 17, ge=1, doc="C4a's slope is fitted on n >= this (the four largest sizes)")
    beta: float = knob(0.1, gt=0, le=10, doc="KL regularisation strength β")
    beta_list: tuple[float, ...] = knob((0.05, 0.1, 0.2, 0.5), gt=0, le=10, min_len=1, doc="β values of C5")
    T_md: int = knob(300, ge=1, le=100_000, doc="SOS-MD self-play iterations T per stage")
    T_list: tuple[int, ...] = knob((5, 10, 20, 40, 80, 160, 320, 640), ge=1, le=100_000, min_len=1,
                                   doc="iteration counts of the e(T) sweep (C3b)")
    eta: float | Literal["auto"] = knob("auto", gt=0, doc='SOS-MD step size, or "auto" = 0.5/(ρ(Q)+β) per state')
    rose_tol: float = knob(1e-11, gt=0, lt=1e-3, doc="fixed-point residual at which the ROSE solver stops")
    behavior_temp: float = knob(1.0, gt=0, le=100, doc="temperature τ_b of the behaviour policies")
    behavior_mix: float = knob(0.05, gt=0, lt=1, doc="uniform mass mixed into the behaviour policies")
    skewed_temp: float = knob(0.3, gt=0, le=100, doc="τ_b of the skewed-coverage variant (C4)")
    bonus_c: float = knob(0.1, ge=0, le=10, doc="bonus scale c of PNVI and ROSE-LCB")
    delta: float = knob(0.1, gt=0, lt=1, doc="confidence level δ in the bonus")
    reference: Literal["behavior", "uniform"] = knob("behavior", doc="reference policies of the KL term")

    def check(self) -> None:
        if list(self.n_list) != sorted(set(self.n_list)):
            self.fail("n_list", f"must be strictly increasing; got {list(self.n_list)}")
        if self.slope_min_n > max(self.n_list):
            self.fail("slope_min_n", f"must be <= the largest n ({max(self.n_list)}); got {self.slope_min_n}")
        if list(self.skew_n_list) != sorted(set(self.skew_n_list)):
            self.fail("skew_n_list", f"must be strictly increasing; got {list(self.skew_n_list)}")
        if self.skew_slope_min_n > max(self.skew_n_list):
            self.fail("skew_slope_min_n", f"must be <= the largest n ({max(self.skew_n_list)}); "
                                          f"got {self.skew_slope_min_n}")
