"""The chapter's experiment: every method on the same federations (paired by replicate), the β sweep, the
centralized references and the multi-round baselines at the default β.

Replicate r of master seed s uses the seed 1000·s + r for its geometry, federation draws, initialisation and
mini-batch stream; within a replicate every method sees the same data, the same initial parameters and the same
batch indices (common random numbers), so differences between methods are paired.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from . import aggregate as AG
from . import metrics as M
from .config import Config
from .data import Federation, make_federation, mix_tv_to_pi
from .iterative import run_rounds
from .local import LossWeights, Stacked, batch_indices, train_stack
from .models import init_head, init_moe, predict, route_argmax, stack, unstack

#: Methods evaluated at every β (one-shot), then those run at the default β only.
ONE_SHOT = ("fair_fedmoe", "fedavg", "ensemble", "local", "abl_no_routing", "abl_counts", "abl_experts_counts",
            "abl_ties_only", "fair_fedmoe_known")
DEFAULT_ONLY = ("central_head", "central_moe", "central_moe_known", "fedavg20", "fairfed20")
LABELS = {"fair_fedmoe": "Fair-FedMOE", "fair_fedmoe_known": "Fair-FedMOE (known groups)",
          "fedavg": "FedAvg (1 round)", "ensemble": "Ensemble (1 round)", "local": "Local only (mean)",
          "abl_no_routing": "no routing (1 head; TIES adapter)", "abl_counts": "experts & adapter by counts",
          "abl_experts_counts": "experts by counts, TIES adapter", "abl_ties_only": "TIES only (experts too)",
          "central_head": "Centralized, 1 head", "central_moe": "Centralized MoE",
          "central_moe_known": "Centralized MoE (known groups)", "fedavg20": "FedAvg (20 rounds)",
          "fairfed20": "FairFed (20 rounds)"}


def replicate_seed(cfg: Config, rep: int) -> int:
    return 1000 * cfg.seed + rep


def loss_weights(cfg: Config) -> LossWeights:
    return LossWeights(cfg.tau_route, cfg.lambda_proto, cfg.lambda_sep, cfg.sep_margin)


def train_centralized(fed: Federation, cfg: Config, seed: int, kind: str):
    """One model on the pooled training data (same initialisation as the sites), ``central_steps`` steps."""
    pooled = Stacked.from_sites([fed.pooled()])
    init = init_moe(fed.n_groups, seed) if kind == "moe" else init_head(fed.n_groups, seed)
    idx = batch_indices(pooled.n, cfg.central_steps, seed + 29)
    return unstack(train_stack(stack(init, 1), pooled, idx, kind, cfg.lr, loss_weights(cfg)), 0)


@dataclass
class FedRun:
    """Everything measured on one federation (replicate ``rep``, heterogeneity ``beta``)."""

    rep: int
    beta: float
    fed: Federation
    metrics: dict[str, dict] = field(default_factory=dict)     # method -> evaluate(...)
    scores: dict[str, np.ndarray] = field(default_factory=dict)
    diag: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)


def run_federation(cfg: Config, rep: int, beta: float, default: bool, blind: str | None = None) -> FedRun:
    """Train the K local Fair-MoE and single-head models, aggregate them every way, evaluate on the pooled test
    set; at the default β also the centralized models and the multi-round baselines. ``blind`` draws a blinded
    federation (:func:`repro.fair_fedmoe.data.make_federation`; the controls' negative twins)."""
    seed = replicate_seed(cfg, rep)
    fed = make_federation(cfg.n_sites, cfg.n_groups, beta, seed, cfg.theta_deg, cfg.outlier_shift,
                          cfg.group_offset_sd, cfg.site_shift, blind=blind)
    G, K = fed.n_groups, cfg.n_sites
    counts = fed.counts()
    data = Stacked.from_sites(fed.sites)
    idx = batch_indices(data.n, cfg.local_steps, seed)
    init_m, init_h = init_moe(G, seed), init_head(G, seed)
    moe_stack = train_stack(stack(init_m, K), data, idx, "moe", cfg.lr, loss_weights(cfg))
    head_stack = train_stack(stack(init_h, K), data, idx, "head", cfg.lr)
    kw = dict(tau=cfg.tau_agg, gamma=cfg.filter_gamma, min_count=cfg.min_count, keep=cfg.ties_keep)
    full, dg = AG.aggregate_moe(moe_stack, init_m, counts, experts="proto", adapter_rule="ties", **kw)
    models = {
        "fair_fedmoe": ("moe", full),
        "abl_counts": ("moe", AG.aggregate_moe(moe_stack, init_m, counts, experts="counts", adapter_rule="counts",
                                               **kw)[0]),
        "abl_experts_counts": ("moe", AG.aggregate_moe(moe_stack, init_m, counts, experts="counts",
                                                       adapter_rule="ties", **kw)[0]),
        "abl_ties_only": ("moe", AG.aggregate_moe(moe_stack, init_m, counts, experts="ties", adapter_rule="ties",
                                                  **kw)[0]),
        "abl_no_routing": ("head", AG.aggregate_head(head_stack, init_h, counts, "ties", cfg.ties_keep)),
        "fedavg": ("head", AG.aggregate_head(head_stack, init_h, counts, "counts")),
    }
    T = fed.test
    run = FedRun(rep, beta, fed)
    for name, (kind, p) in models.items():
        run.scores[name] = predict(p, T.X, kind, cfg.tau_route)
    run.scores["fair_fedmoe_known"] = predict(full, T.X, "moe", cfg.tau_route, group=T.g)
    local = np.stack([predict(unstack(head_stack, k), T.X, "head") for k in range(K)])
    run.scores["ensemble"] = local.mean(0)
    local_metrics = [M.evaluate(s, T.y, T.g, G) for s in local]
    for name, s in run.scores.items():
        run.metrics[name] = M.evaluate(s, T.y, T.g, G)
    run.metrics["local"] = {k: (float(np.mean([m[k] for m in local_metrics])) if k != "group_auc" else
                                np.mean([m[k] for m in local_metrics], 0).tolist()) for k in local_metrics[0]}
    # diagnostics of the aggregation (K3) and routing (K2)
    route = route_argmax(full, T.X)
    ok = route == T.g
    share_counts = counts[-1] / np.maximum(counts.sum(0), 1)          # outlier site's count share per group
    run.diag = {"counts": counts, "omega": dg["omega_proto"], "omega_counts": dg["omega_counts"], "cos": dg["cos"],
                "tv_omega_counts": AG.tv_distance(dg["omega_proto"], dg["omega_counts"]),
                "route_acc": float(ok.mean()), "route_acc_group": [float(ok[T.g == k].mean()) for k in range(G)],
                "mix_tv_pi": mix_tv_to_pi(fed.mixes, fed.pi),
                "mix_tv_pi_empirical": mix_tv_to_pi(counts / counts.sum(1, keepdims=True), fed.pi),
                "outlier_share_counts": share_counts, "outlier_share_omega": dg["omega_proto"][:, -1],
                "n_draws": fed.n_draws}
    run.models = {"fair_fedmoe": full, "init_moe": init_m}
    if default:
        cm = train_centralized(fed, cfg, seed, "moe")
        ch = train_centralized(fed, cfg, seed, "head")
        extra = {"central_moe": predict(cm, T.X, "moe", cfg.tau_route),
                 "central_moe_known": predict(cm, T.X, "moe", cfg.tau_route, group=T.g),
                 "central_head": predict(ch, T.X, "head")}
        g20, _ = run_rounds(init_h, fed.sites, G, cfg.fl_rounds, cfg.round_steps, cfg.lr, seed)
        ff, hist = run_rounds(init_h, fed.sites, G, cfg.fl_rounds, cfg.round_steps, cfg.lr, seed, cfg.fairfed_eta)
        extra["fedavg20"] = predict(g20, T.X, "head")
        extra["fairfed20"] = predict(ff, T.X, "head")
        for name, s in extra.items():
            run.scores[name] = s
            run.metrics[name] = M.evaluate(s, T.y, T.g, G)
        W = np.array(hist["weights"])
        run.diag["fairfed_weights"] = W
        run.diag["fairfed_move"] = float(np.abs(W[-1] - W[0]).max())
        run.diag["fairfed_fallback_frac"] = float(np.mean(hist["fallback"])) if hist["fallback"] else float("nan")
        run.diag["central_moe_route_acc"] = float((route_argmax(cm, T.X) == T.g).mean())
        run.models["central_moe"] = cm
    return run


@dataclass
class Experiment:
    cfg: Config
    runs: list[FedRun]

    def at(self, beta: float) -> list[FedRun]:
        return [r for r in self.runs if abs(r.beta - beta) < 1e-12]

    @property
    def default(self) -> list[FedRun]:
        return self.at(self.cfg.beta)

    def table(self) -> pd.DataFrame:
        """One row per (replicate, β, method) with every scalar metric."""
        rows = []
        for r in self.runs:
            for m, met in r.metrics.items():
                rows.append({"rep": r.rep, "beta": r.beta, "method": m,
                             **{k: v for k, v in met.items() if k != "group_auc"},
                             **{f"auc_g{g}": v for g, v in enumerate(met["group_auc"])}})
        return pd.DataFrame(rows)

    def per_seed(self, method: str, metric: str = "res_auc", beta: float | None = None) -> np.ndarray:
        b = self.cfg.beta if beta is None else beta
        return np.array([r.metrics[method][metric] for r in self.at(b)])


def run_experiment(cfg: Config, progress=None, blind: str | None = None) -> Experiment:
    """Every replicate at every β of the sweep (the default β with the extra methods); ``blind``: see
    :func:`run_federation`."""
    torch.set_num_threads(1)
    runs = []
    for rep in range(cfg.n_seeds):
        for beta in cfg.beta_sweep:
            runs.append(run_federation(cfg, rep, beta, default=abs(beta - cfg.beta) < 1e-12, blind=blind))
            if progress:
                progress(rep, beta)
    return Experiment(cfg, runs)


def bootstrap_table(exp: Experiment, methods, n_boot: int) -> pd.DataFrame:
    """Per-seed bootstrap 95 % CIs (stratified by group, B = ``n_boot``) of AUC, worst-group AUC, ES- and RES-AUC
    at the default β, for ``methods``; one row per (replicate, method)."""
    rows = []
    for r in exp.default:
        T = r.fed.test
        for m in methods:
            boot = M.bootstrap_group_auc(r.scores[m], T.y, T.g, r.fed.n_groups, n_boot, seed=1000 * r.rep + 1)
            summ = M.bootstrap_summary(boot)
            rows.append({"rep": r.rep, "method": m, **{f"{k} ci95": v for k, v in summ.items()}})
    return pd.DataFrame(rows)


def c5_groups_sweep(groups_sweep, seed: int, n_per_class: int = 1000) -> pd.DataFrame:
    """C5b: AUC, ES-AUC and RES-AUC of binormal groups with AUCs evenly spaced in [0.75, 0.90]."""
    rows = []
    for G in groups_sweep:
        s, y, g = M.binormal_groups(G, n_per_class, seed=seed)
        met = M.evaluate(s, y, g, G)
        rows.append({"G": G, "auc": met["auc"], "worst_auc": met["worst_auc"], "es_auc": met["es_auc"],
                     "res_auc": met["res_auc"]})
    return pd.DataFrame(rows)


def group_probe_accuracy(cfg: Config, group_offset_sd: float, rep: int = 0) -> float:
    """How identifiable the groups are from the FM features: test accuracy of a multinomial logistic-regression
    probe trained on the pooled training features (default β, replicate ``rep``). An upper-bound-like reference
    for any prototype router (control K2)."""
    from sklearn.linear_model import LogisticRegression

    fed = make_federation(cfg.n_sites, cfg.n_groups, cfg.beta, replicate_seed(cfg, rep), cfg.theta_deg,
                          cfg.outlier_shift, group_offset_sd, cfg.site_shift)
    P = fed.pooled()
    probe = LogisticRegression(max_iter=2000).fit(P.X, P.g)
    return float(probe.score(fed.test.X, fed.test.g))


def tv_at_outlier_shift(cfg: Config, outlier_shift: float, beta: float) -> list[float]:
    """Mean TV(ω, count weights) per replicate at heterogeneity ``beta`` with another outlier shift (control K3's
    quantity; the rest of the configuration unchanged)."""
    import dataclasses

    alt = dataclasses.replace(cfg, outlier_shift=outlier_shift)
    return [float(run_federation(alt, rep, beta, default=False).diag["tv_omega_counts"].mean())
            for rep in range(cfg.n_seeds)]


def budget_table(cfg: Config) -> pd.DataFrame:
    """Baseline parity (issue 41, rule 3): for every method, its data, trainable parameters, Adam steps per site,
    rounds, and total Adam steps (batch 64, lr ``cfg.lr``, the same initialisation and mini-batch stream within a
    replicate). One-shot methods share the method's budget exactly; the 20-round baselines get more steps than
    the method (generous to them: C6 asks whether one round suffices)."""
    K = cfg.n_sites
    n_par = {kind: int(sum(t.numel() for t in f(cfg.n_groups, 0).values())) for kind, f in
             (("moe", init_moe), ("head", init_head))}
    one = cfg.local_steps
    multi = cfg.fl_rounds * cfg.round_steps
    rows = [
        ("fair_fedmoe", "the K sites' training splits", "moe", one, 1, "prototype-guided ω (experts), TIES (adapter)"),
        ("fedavg", "the K sites' training splits", "head", one, 1, "∝ n^k"),
        ("ensemble", "the K sites' training splits", "head", one, 1, "mean of the K local predictions"),
        ("local", "one site's training split", "head", one, 0, "none (mean over sites)"),
        ("abl_no_routing", "the K sites' training splits", "head", one, 1, "TIES (adapter), ∝ n^k (head)"),
        ("abl_counts", "the K sites' training splits", "moe", one, 1, "∝ n_g^k (experts), ∝ n^k (adapter)"),
        ("abl_experts_counts", "the K sites' training splits", "moe", one, 1, "∝ n_g^k (experts), TIES (adapter)"),
        ("abl_ties_only", "the K sites' training splits", "moe", one, 1, "TIES (experts and adapter)"),
        ("fedavg20", "the K sites' training splits", "head", multi, cfg.fl_rounds, "∝ n^k every round"),
        ("fairfed20", "the K sites' training splits", "head", multi, cfg.fl_rounds, "FairFed weights every round"),
        ("central_head", "the K splits pooled", "head", cfg.central_steps, 0, "none (one model)"),
        ("central_moe", "the K splits pooled", "moe", cfg.central_steps, 0, "none (one model)"),
    ]
    out = []
    for m, data, kind, steps, rounds, rule in rows:
        central = m.startswith("central")
        out.append({"method": LABELS.get(m, m), "data": data, "model": "adapter + G experts + prototypes"
                    if kind == "moe" else "adapter + one head (width 32·G)", "parameters": n_par[kind],
                    "Adam steps per site": "—" if central else steps, "rounds": rounds,
                    "Adam steps in all": steps if central else steps * (1 if m == "local" else K),
                    "merge": rule})
    return pd.DataFrame(out).set_index("method")
