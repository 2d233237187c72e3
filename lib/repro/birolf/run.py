"""The bandit loop and the regret experiments of chapter 02: settings, trials, seeds, summaries.

Pseudo-regret R(T) = Σ_t (max R̄ − R̄_{a_t}) (card *Claims*). Every agent of one trial faces the same instance
and the same noise ε_t in round t (common random numbers); each agent has its own generator, derived from
(seed, setting, trial, agent), so adding or removing an agent changes no other agent's numbers.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from .agents import AGENT_LABELS, Agent, BiRoLF, make_agent
from .env import BilinearInstance, make_bilinear_instance, noise_stream

__all__ = ["Setting", "run_trial", "run_setting", "SettingResult", "settings_from_config", "window_ratio",
           "tail_slope"]


def _code(name: str) -> int:
    return zlib.crc32(name.encode())


@dataclass(frozen=True)
class Setting:
    """One environment family: sizes, horizon and the agents' constants."""

    name: str
    M: int
    N: int
    d_x_star: int
    d_y_star: int
    d_x: int
    d_y: int
    T: int
    noise_std: float = 0.1
    p: float = 0.6
    delta: float = 0.1
    lam_c_impute: float = 0.01
    lam_c_main: float = 0.01
    explore_mult: int = 2

    @property
    def explore_rounds(self) -> int:
        return self.explore_mult * self.M * self.N

    def instance(self, seed: int, trial: int) -> tuple[BilinearInstance, np.ndarray]:
        """The instance and noise sequence of trial ``trial`` (independent of the agents)."""
        rng = np.random.default_rng([seed, _code(self.name), trial])
        inst = make_bilinear_instance(self.M, self.N, self.d_x_star, self.d_y_star, self.d_x, self.d_y, rng,
                                      self.noise_std)
        return inst, noise_stream(self.T, self.noise_std, rng)

    def agent(self, name: str, inst: BilinearInstance, seed: int, trial: int, stream: str | None = None,
              **overrides) -> Agent:
        """Agent ``name`` for trial ``trial``; its generator is keyed by ``stream`` (default: the agent's name)."""
        rng = np.random.default_rng([seed, _code(self.name), trial, _code(stream or name)])
        kw = dict(p=self.p, delta=self.delta, sigma=self.noise_std, lam_c_impute=self.lam_c_impute,
                  lam_c_main=self.lam_c_main, explore_mult=self.explore_mult)
        kw.update(overrides)
        return make_agent(name, inst, rng, **kw)


def run_trial(agent: Agent, inst: BilinearInstance, noise: np.ndarray,
              actions: np.ndarray | None = None) -> np.ndarray:
    """Play ``len(noise)`` rounds; return the cumulative pseudo-regret R(1..T).

    ``actions``, if given (length T), receives the pulled pair of every round as a flat index i·N + j.
    """
    gaps = inst.gaps
    R = inst.R_bar
    T = len(noise)
    N = inst.N
    regret = np.empty(T)
    for t in range(T):
        i, j = agent.choose()
        regret[t] = gaps[i, j]
        if actions is not None:
            actions[t] = i * N + j
        agent.update(i, j, float(R[i, j] + noise[t]))
    return np.cumsum(regret)


@dataclass
class SettingResult:
    """Cumulative regret curves (agent -> array (n_seeds, T)), per-trial diagnostics of BiRoLF, the pulled pairs
    (agent -> flat indices i·N + j, array (n_seeds, T)) and the best pair of every seed's instance."""

    setting: Setting
    curves: dict[str, np.ndarray]
    diagnostics: dict[str, np.ndarray]
    actions: dict[str, np.ndarray] = field(default_factory=dict)
    best_arm: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))

    def pulls_of_best(self, key: str, upto: int | None = None) -> np.ndarray:
        """Pulls of the seed's best pair by agent ``key`` in rounds 1..upto (default T), per seed."""
        a = self.actions[key][:, :upto]
        return np.array([int(np.sum(a[s] == self.best_arm[s])) for s in range(a.shape[0])])

    def never_pulled(self, key: str, upto: int) -> np.ndarray:
        """Fraction of the MN pairs that agent ``key`` never pulled in rounds 1..upto, per seed."""
        K = self.setting.M * self.setting.N
        a = self.actions[key][:, :upto]
        return np.array([1.0 - np.unique(a[s]).size / K for s in range(a.shape[0])])

    @property
    def forced_end(self) -> int:
        """min(2MN, T): the last round of the forced-exploration phase inside the horizon (0 if none)."""
        return min(self.setting.explore_rounds, self.setting.T)

    def forced(self, key: str) -> np.ndarray:
        """R(2MN) per seed (0 without a forced phase)."""
        t0 = self.forced_end
        return self.curves[key][:, t0 - 1] if t0 >= 1 else np.zeros(self.curves[key].shape[0])

    def final(self) -> dict[str, np.ndarray]:
        """R(T) per seed for every agent."""
        return {a: c[:, -1] for a, c in self.curves.items()}

    def at(self, t: int) -> dict[str, np.ndarray]:
        """R(t) per seed (t counted from 1)."""
        return {a: c[:, t - 1] for a, c in self.curves.items()}

    def late_per_round(self):
        """Mean per-round regret over the last quarter (3T/4, T], per agent (rows) and seed (columns)."""
        import pandas as pd

        T = self.setting.T
        q3 = (3 * T) // 4
        return pd.DataFrame({AGENT_LABELS.get(a.split("@")[0], a) + (f" ({a.split('@')[1]})" if "@" in a else ""):
                             (c[:, -1] - c[:, q3 - 1]) / (T - q3) for a, c in self.curves.items()}).T.rename(
            columns=lambda k: f"seed {k}")

    def table(self):
        """R(T) mean ± 95% CI, median, and R(T) − R(2MN) for every agent (a pandas DataFrame)."""
        import pandas as pd

        from repro.common import mean_ci

        rows = []
        for a, c in self.curves.items():
            m, h = mean_ci(c[:, -1])
            m2, h2 = mean_ci(c[:, -1] - self.forced(a))
            rows.append({"agent": AGENT_LABELS.get(a, a), "R(T) mean": m, "± 95% CI": h,
                         "R(T) median": float(np.median(c[:, -1])), "R(T) − R(2MN)": m2, "± 95% CI ": h2})
        return pd.DataFrame(rows).set_index("agent")


def run_setting(setting: Setting, agents: list[str] | tuple[str, ...], n_seeds: int, seed: int,
                overrides: dict[str, dict] | None = None, shared_stream: bool = False) -> SettingResult:
    """Run every agent on ``n_seeds`` instances of ``setting``; agent keys may carry overrides
    (e.g. ``{"birolf@c0.1": {"lam_c_main": 0.1}}`` runs BiRoLF with another c_main under that key).

    ``shared_stream``: every agent of a trial draws its internal randomness from one generator seeded the same
    way ("paired streams"); meaningful for agents that consume randomness identically (BiRoLF, its full-matrix
    variant, RoLF), whose differences then come from their estimators alone.
    """
    overrides = overrides or {}
    keys = list(agents) + [k for k in overrides if k not in agents]
    curves = {k: np.empty((n_seeds, setting.T)) for k in keys}
    actions = {k: np.empty((n_seeds, setting.T), dtype=np.int32) for k in keys}
    best = np.empty(n_seeds, dtype=int)
    diag = {k: np.empty(n_seeds) for k in ("match_rate", "unmatched", "impute_iters_per_update",
                                           "main_iters_per_update")}
    for s in range(n_seeds):
        inst, noise = setting.instance(seed, s)
        best[s] = int(np.argmax(inst.R_bar))
        for key in keys:
            name = key.split("@")[0]
            agent = setting.agent(name, inst, seed, s, stream="shared" if shared_stream else None,
                                  **overrides.get(key, {}))
            curves[key][s] = run_trial(agent, inst, noise, actions[key][s])
            if key == "birolf" and isinstance(agent, BiRoLF):
                diag["match_rate"][s] = agent.Gamma / setting.T
                diag["unmatched"][s] = agent.n_unmatched
                diag["impute_iters_per_update"][s] = agent.impute_iter_total / max(agent.Gamma, 1)
                diag["main_iters_per_update"][s] = agent.main_iter_total / max(agent.Gamma, 1)
    return SettingResult(setting, curves, diag, actions, best)


def settings_from_config(cfg) -> dict[str, Setting]:
    """The chapter's three settings: the card's main case, the authors' default case and the no-latent case."""
    common = dict(noise_std=cfg.noise_std, p=cfg.p, delta=cfg.delta, lam_c_impute=cfg.lam_c_impute,
                  lam_c_main=cfg.lam_c_main, explore_mult=cfg.explore_mult)
    return {
        "main": Setting("main", cfg.M, cfg.N, cfg.d_x_star, cfg.d_y_star, cfg.d_x, cfg.d_y, cfg.T, **common),
        # the authors' defaults (cfg.py): M=N=5, d*=4, d=3, T=1000, same σ, p, δ and multipliers
        "authors_default": Setting("authors_default", 5, 5, 4, 4, 3, 3, cfg.default_T, **common),
        # nothing hidden: d = d*
        "no_latent": Setting("no_latent", cfg.M, cfg.N, cfg.d_x_star, cfg.d_y_star, cfg.d_x_star, cfg.d_y_star,
                             cfg.T, **common),
    }


def window_ratio(curve: np.ndarray) -> float:
    """Mean per-round regret over (3T/4, T] divided by that over (T/4, T/2] of one cumulative curve (C2)."""
    T = len(curve)
    q1, q2, q3 = T // 4, T // 2, (3 * T) // 4
    late = (curve[T - 1] - curve[q3 - 1]) / (T - q3)
    mid = (curve[q2 - 1] - curve[q1 - 1]) / (q2 - q1)
    return float(late / mid) if mid > 0 else float("nan")


def tail_slope(curve: np.ndarray, t0: int = 0) -> float:
    """Least-squares slope of log(R(t) − R(t0)) against log(t − t0) on t ∈ [T/2, T] (NaN if R is flat)."""
    T = len(curve)
    t = np.arange(T // 2, T + 1)
    y = curve[t - 1] - (curve[t0 - 1] if t0 >= 1 else 0.0)
    x = t - t0
    ok = (y > 0) & (x > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])
