"""Parameters of chapter 02 (BiRoLF): the card's papermill table, with the full profile as defaults.

Every field is one knob of the card (``../shared/papers/02_birolf.md``, *Papermill parameters*) plus four
that the card fixes in prose and we expose so that the smoke profile can shrink them: the horizon of the
authors'-default-setting comparison (``default_T``), the size and count of the random instances of the
exactness check (``c3_size``, ``c3_instances``) and the λ-multiplier of the sensitivity panel
(``lam_c_main_alt``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from repro.common import BaseConfig, knob

AgentName = Literal["birolf", "rolf", "linucb", "oful", "lints", "dr_lasso", "estr_lowoful", "ucb", "ucb_code"]
# the card's eight agents, plus UCB(δ) exactly as the authors' code computes it (integer bonus; issue 12)
ALL_AGENTS: tuple[str, ...] = ("birolf", "rolf", "linucb", "oful", "lints", "dr_lasso", "estr_lowoful", "ucb",
                               "ucb_code")

SMOKE = dict(
    n_seeds=2, T=150, M=5, N=5, d_x_star=4, d_y_star=4, d_x=3, d_y=3,
    agents=("birolf", "linucb", "oful", "dr_lasso", "ucb", "ucb_code"),
    timing_sizes=(5, 10), timing_updates=20, default_T=150, c3_size=8, c3_instances=3,
)


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 02's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists."""

    slug: ClassVar[str] = "birolf"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    n_seeds: int = knob(5, ge=1, le=50, doc="independent instances (and reward streams) per setting")
    T: int = knob(2000, ge=8, le=100_000, doc="horizon T of the main comparison (rounds)")
    M: int = knob(10, ge=2, le=200, doc="number of users M (rows of the reward matrix)")
    N: int = knob(10, ge=2, le=200, doc="number of items N (columns of the reward matrix)")
    d_x_star: int = knob(6, ge=1, le=200, doc="true user-feature dimension d_x*")
    d_y_star: int = knob(6, ge=1, le=200, doc="true item-feature dimension d_y*")
    d_x: int = knob(4, ge=1, le=200, doc="observed user-feature dimension d_x (first rows of X*)")
    d_y: int = knob(4, ge=1, le=200, doc="observed item-feature dimension d_y (first rows of Y*)")
    noise_std: float = knob(0.1, gt=0, le=10, doc="reward noise standard deviation σ (Gaussian)")
    p: float = knob(0.6, gt=0, lt=1, doc="matching probability p of the pseudo-action")
    delta: float = knob(0.1, gt=0, lt=1, doc="confidence level δ (λ schedules, ρ_t, baselines' radii)")
    lam_c_impute: float = knob(0.01, gt=0, le=100, doc="multiplier c_imp of the imputation λ")
    lam_c_main: float = knob(0.01, gt=0, le=100, doc="multiplier c_main of the main λ")
    agents: tuple[AgentName, ...] = knob(ALL_AGENTS, min_len=1, doc="agents run on every reward stream")
    explore_mult: int = knob(2, ge=0, le=100, doc="forced-exploration rounds = explore_mult · M · N")
    timing_sizes: tuple[int, ...] = knob((10, 20, 40), ge=3, le=80, min_len=1,
                                         doc="M = N of the timing study (C4)")
    timing_updates: int = knob(200, ge=2, le=5000, doc="recorded main-estimator updates per timing size")
    kkt_tol: float = knob(1e-6, gt=0, lt=1e-2, doc="matched-accuracy stop: KKT residual ≤ kkt_tol · max|B_t|")
    default_T: int = knob(1000, ge=8, le=100_000, doc="horizon of the authors'-default-setting run (M=N=5)")
    c3_size: int = knob(20, ge=6, le=60, doc="M = N of the random instances of the exactness check (C3)")
    c3_instances: int = knob(20, ge=1, le=200, doc="random instances of the exactness check (C3)")
    lam_c_main_alt: float = knob(0.1, gt=0, le=100, doc="c_main of the sensitivity panel (BiRoLF only)")

    def check(self) -> None:
        if self.d_x > self.d_x_star:
            self.fail("d_x", f"must be <= d_x_star ({self.d_x_star}): the observed features are rows of the true ones; got {self.d_x}")
        if self.d_y > self.d_y_star:
            self.fail("d_y", f"must be <= d_y_star ({self.d_y_star}): the observed features are rows of the true ones; got {self.d_y}")
        if self.d_x_star >= self.M:
            self.fail("d_x_star", f"must be < M ({self.M}) so that the no-latent setting (d_x = d_x*) keeps a complement; got {self.d_x_star}")
        if self.d_y_star >= self.N:
            self.fail("d_y_star", f"must be < N ({self.N}) so that the no-latent setting (d_y = d_y*) keeps a complement; got {self.d_y_star}")
        if len(set(self.agents)) != len(self.agents):
            self.fail("agents", f"lists an agent twice; got {list(self.agents)}")
        if "birolf" not in self.agents:
            self.fail("agents", f"must include 'birolf' (every claim compares against it); got {list(self.agents)}")
        if list(self.timing_sizes) != sorted(set(self.timing_sizes)):
            self.fail("timing_sizes", f"must be strictly increasing; got {list(self.timing_sizes)}")
        small = [s for s in self.timing_sizes if s <= self.d_x_star or s <= self.d_y_star]
        if small:
            self.fail("timing_sizes", f"must all exceed d_x_star and d_y_star ({self.d_x_star}, {self.d_y_star}); got {list(self.timing_sizes)}")
