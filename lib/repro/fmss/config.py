"""Parameters of chapter 04 (FMSS): the card's table, with the full profile as the field defaults."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from repro.common import BaseConfig, knob

SMOKE = dict(n_mdps=3, n_mdps_count=8, S=6, A=3, support_k=3, scaling_S_clarabel=(6, 10), scaling_S_scs=(),
             sv_n_list=(30, 300), sv_seeds=1, n_restarts=2, maxfev=300, search_rounds=5, c1_mdps=3, c1_policies=30, grid_n=3)


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 04's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists."""

    slug: ClassVar[str] = "fmss"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    # random MDPs (C2, C3, C4, C7)
    n_mdps: int = knob(20, ge=1, le=200, doc="random MDPs of the method comparison with the SLEM search (C3, C4, C7)")
    n_mdps_count: int = knob(400, ge=1, le=5000, doc="random MDPs of the count claims C2a, C2b, C4b (the first "
                                                        "n_mdps of them are the searched ones): a share over 20 MDPs "
                                                        "cannot tell 0.94 from the bar 0.9")
    S: int = knob(12, ge=3, le=60, doc="states of the random MDPs")
    A: int = knob(3, ge=2, le=10, doc="actions of the random MDPs")
    support_k: int = knob(4, ge=1, le=60, doc="states in the random support of every P(·|s,a)")
    eps_mix: float = knob(0.05, gt=0, le=1, doc="uniform mass ε mixed into every P(·|s,a) (makes every policy ergodic)")
    # C1
    c1_mdps: int = knob(10, ge=1, le=100, doc="random MDPs on which C1 draws feasible policies")
    c1_policies: int = knob(200, ge=1, le=5000, doc="random feasible policies of C1 (also: reversible chains of C1)")
    c1_vertices: int = knob(10, ge=2, le=100, doc="random-objective LPs per MDP whose vertices C1 mixes")
    # C5
    scaling_S_clarabel: tuple[int, ...] = knob((10, 20, 30, 40), ge=3, le=60, min_len=1,
                                               doc="state counts S timed with Clarabel (A = 3)")
    scaling_S_scs: tuple[int, ...] = knob((10, 20, 40, 60), ge=3, le=120, min_len=0,
                                          doc="state counts S timed with SCS (empty: skip SCS)")
    scs_eps: float = knob(1e-6, gt=0, lt=1e-2, doc="SCS absolute and relative tolerance")
    # C6 (FMSS-SV)
    sv_n_list: tuple[int, ...] = knob((30, 100, 300, 1000, 3000, 10000), ge=2, le=10**6, min_len=2,
                                      doc="samples n per state-action pair")
    sv_seeds: int = knob(5, ge=1, le=50, doc="independent instances (MDP, target, samples) per n")
    sv_mode: Literal["min_slack", "theory"] = knob("min_slack", doc="FMSS-SV mode whose rate C6 tests")
    sv_slope_min_n: int = knob(100, ge=1, doc="C6's slope is fitted on n >= this (pre-registered)")
    c_eps: float = knob(1.0, gt=0, le=100, doc="constant c_ε of the theory slack ε_n")
    delta: float = knob(0.05, gt=0, lt=1, doc="confidence δ of the theory slack ε_n")
    # non-convex baseline (C3)
    n_restarts: int = knob(8, ge=1, le=64, doc="starts of the Nelder–Mead SLEM search (the first is FMSS)")
    maxfev: int = knob(3000, ge=10, le=100_000, doc="function evaluations per Nelder–Mead round")
    search_rounds: int = knob(4, ge=1, le=1000, doc="most Nelder–Mead rounds per start; a start stops earlier once "
                                                     "a round (fresh simplex) improves its SLEM by < 1e-5; hitting the cap is reported")
    # method
    solver: Literal["CLARABEL", "SCS"] = knob("CLARABEL", doc="cvxpy solver of the FMSS program")
    eps_pi: float = knob(0.0, ge=0, lt=1, doc="minimum exploration: x(s,a) >= ε_π μ(s)/A in FMSS")
    eps_pi_ablation: float = knob(0.05, ge=0, lt=1, doc="ε_π of the exploration ablation (0: skip it)")
    # mixing curves (C4)
    horizon: int = knob(30, ge=10, le=500, doc="steps k of the TV and χ² curves")
    tv_k: int = knob(10, ge=1, le=500, doc="step k at which C4(b) compares worst-start TV")
    fit_k_min: int = knob(10, ge=0, le=499, doc="C4(c) fits the TV rate on k in [fit_k_min, horizon]")
    # narrative grid world
    grid_n: int = knob(5, ge=2, le=8, doc="side of the thermostat grid world")
    slip: float = knob(0.1, gt=0, le=1, doc="slip probability of the grid world")

    def check(self) -> None:
        if self.n_mdps_count < self.n_mdps:
            self.fail("n_mdps_count", f"must be >= n_mdps ({self.n_mdps}); got {self.n_mdps_count}")
        if self.support_k > self.S:
            self.fail("support_k", f"must be <= S ({self.S}); got {self.support_k}")
        for name in ("scaling_S_clarabel", "scaling_S_scs", "sv_n_list"):
            v = list(getattr(self, name))
            if v != sorted(set(v)):
                self.fail(name, f"must be strictly increasing; got {v}")
        for name in ("scaling_S_clarabel", "scaling_S_scs"):
            if any(s < self.support_k for s in getattr(self, name)):
                self.fail(name, f"every S must be >= support_k ({self.support_k}); got {list(getattr(self, name))}")
        if self.sv_slope_min_n > max(self.sv_n_list):
            self.fail("sv_slope_min_n", f"must be <= the largest n ({max(self.sv_n_list)}); got {self.sv_slope_min_n}")
        if self.tv_k > self.horizon:
            self.fail("tv_k", f"must be <= horizon ({self.horizon}); got {self.tv_k}")
        if self.fit_k_min >= self.horizon:
            self.fail("fit_k_min", f"must be < horizon ({self.horizon}); got {self.fit_k_min}")
        if self.c1_policies < self.c1_mdps:
            self.fail("c1_policies", f"must be >= c1_mdps ({self.c1_mdps}); got {self.c1_policies}")


def knob_table():
    """The chapter's knobs with their ``full`` and ``smoke`` values as text (``1e-6``, not a float that a
    table's display precision rounds to ``0.0``), their allowed range and meaning."""
    import pandas as pd

    from repro.common import fmt_value

    df = pd.DataFrame(Config.describe()).set_index("name").drop(index="profile")
    for col in ("full", "smoke"):
        df[col] = [fmt_value(v) for v in df[col]]
    return df[["type", "full", "smoke", "allowed", "doc"]]
