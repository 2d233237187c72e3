"""The chapter's experiment: for every seed, the warm-up, embeddings, clusters and proximity path (the overhead
of C6), then instruction tuning of the same base model in each order; evaluation, forgetting, gradient cosines.

Within a seed every ordering trains the same base model on the same data with the same optimiser; only the
permutation differs (card, Pitfalls). Seed ``i`` of a notebook run with master seed ``m`` draws its data from
stream ``100 m + i``; the base model is pre-trained once per master seed (cached).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from .cluster import dominant_domain, kmeans, purity
from .model import CharGPT, MiniLM, embed_samples, evaluate, per_sample_loss
from .ordering import (curriculum_order, domain_blocked_order, ep_order, path_length, proximity_path,
                       random_order, random_path_lengths)
from .tasks import DOMAINS, make_dataset
from .train import batches_of, clone, domain_grad_cosines, load_or_train_base, steps_per_epoch, train_it

#: every ordering, main arms first
METHODS = ("random", "ep_order", "no_mix", "random_cluster_order", "curriculum", "domain_blocked")
CLUSTERED = ("ep_order", "no_mix", "random_cluster_order")


@dataclass
class SeedSetup:
    """What EP-Order computes before training, for one seed (its CPU seconds are C6's overhead)."""

    seed: int
    train: list
    eval: list
    domains: np.ndarray
    embeddings: np.ndarray
    labels: np.ndarray
    centroids: np.ndarray
    path: np.ndarray
    purity: float
    path_len: float
    random_path_len: float
    overhead_s: dict
    warm: CharGPT
    warm_losses: np.ndarray | None = None


@dataclass
class Experiment:
    cfg: object
    base_info: dict
    setups: list = field(default_factory=list)
    evals: pd.DataFrame | None = None            # method, seed, domain, loss, em
    runs: dict = field(default_factory=dict)     # (method, seed) -> history and extras
    seconds: dict = field(default_factory=dict)

    def metric(self, method: str, what: str = "loss", seeds=None) -> np.ndarray:
        """Per-seed mean over domains of ``what`` for ``method`` (seed order)."""
        d = self.evals[self.evals.method == method]
        if seeds is not None:
            d = d[d.seed.isin(list(seeds))]
        return d.groupby("seed")[what].mean().sort_index().to_numpy(float)

    def per_domain(self, method: str, what: str = "loss", seeds=None) -> pd.DataFrame:
        """[seeds, domains] table of ``what``."""
        d = self.evals[self.evals.method == method]
        if seeds is not None:
            d = d[d.seed.isin(list(seeds))]
        return d.pivot(index="seed", columns="domain", values=what)[list(DOMAINS)]

    def run_values(self, method: str, key: str, seeds=None) -> np.ndarray:
        return np.array([r[key] for (m, s), r in sorted(self.runs.items()) if m == method
                         and (seeds is None or s in seeds)], float)

    @property
    def ablation_seeds(self) -> list[int]:
        return [s.seed for s in self.setups[: self.cfg.n_ablation_seeds]]

    @property
    def all_seeds(self) -> list[int]:
        return [s.seed for s in self.setups]


def prepare_seed(cfg, base: CharGPT, i: int) -> SeedSetup:
    """Data of seed ``i``, then EP-Order's pre-training work: warm-up (1 epoch on a random ``warmup_frac``),
    embeddings, k-means and the proximity path, each timed in CPU seconds."""
    s = 100 * cfg.seed + i
    train = make_dataset(cfg.n_per_domain, s, "train")
    held = make_dataset(cfg.n_eval_per_domain, s, "eval")
    domains = np.array([DOMAINS.index(x["domain"]) for x in train])
    rng = np.random.default_rng([cfg.seed, i, 1])
    t = {}
    t0 = time.process_time()
    warm = clone(base)
    sub = rng.choice(len(train), size=int(round(cfg.warmup_frac * len(train))), replace=False)
    train_it(warm, [train[k] for k in sub], [np.arange(len(sub))], cfg.batch_size, cfg.lr)
    t["warm-up"] = time.process_time() - t0
    t0 = time.process_time()
    if cfg.embedder == "minilm":
        E = MiniLM().encode([x["text"] for x in train])
    else:
        E = embed_samples(warm, train, cfg.embed_positions, cfg.embed_center)
    t["embedding"] = time.process_time() - t0
    t0 = time.process_time()
    labels, C = kmeans(E, cfg.n_clusters, cfg.kmeans_iters, cfg.kmeans_restarts, rng)
    t["clustering"] = time.process_time() - t0
    t0 = time.process_time()
    path = proximity_path(C)
    t["ordering"] = time.process_time() - t0
    rand_len = float(random_path_lengths(C, cfg.n_random_paths, np.random.default_rng([cfg.seed, i, 2])).mean())
    return SeedSetup(seed=s, train=train, eval=held, domains=domains, embeddings=E, labels=labels, centroids=C,
                     path=path, purity=purity(labels, domains), path_len=path_length(C, path),
                     random_path_len=rand_len, overhead_s=t, warm=warm)


def epoch_orders(method: str, setup: SeedSetup, cfg, i: int) -> tuple[list[np.ndarray], np.ndarray | None]:
    """Per-epoch permutations of ``method`` and the cluster path it follows (None for unclustered orders)."""
    rng = np.random.default_rng([cfg.seed, i, 3, METHODS.index(method)])
    N = len(setup.train)
    if method == "random":
        return [random_order(N, rng) for _ in range(cfg.epochs)], None
    if method in CLUSTERED:
        path = setup.path if method != "random_cluster_order" else rng.permutation(cfg.n_clusters).astype(np.int32)
        rho = 0.0 if method == "no_mix" else cfg.mix_frac
        keys_t0 = time.process_time()
        orders = [ep_order(setup.labels, path, rho, cfg.mix_width, rng) for _ in range(cfg.epochs)]
        if method == "ep_order":
            setup.overhead_s["ordering"] += time.process_time() - keys_t0
        return orders, path
    if method == "curriculum":
        if setup.warm_losses is None:
            setup.warm_losses = per_sample_loss(setup.warm, setup.train)
        o = curriculum_order(setup.warm_losses, rng)
        return [o for _ in range(cfg.epochs)], None
    if method == "domain_blocked":
        return [domain_blocked_order(setup.domains, rng) for _ in range(cfg.epochs)], None
    raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")


def forgetting_window(batches, labels, path, cluster_domain, first_batch: int = 0) -> dict:
    """The steps between which the forgetting of the first-visited cluster is measured (C3, K2).

    Forgetting of the first cluster = the rise of the held-out loss of its dominant domain ``d`` from the end of
    its block to the last step before the next block that contains samples of ``d`` (or to the end of training
    when no later block does): loss(``end``) − loss(``start``). A later block of the same domain retrains it, and
    relearning is not absence of forgetting, so the window stops there.

    * Blocks are the cluster stretches along ``path``; a block contains samples of ``d`` when its cluster's
      dominant domain (``cluster_domain[c]``) is ``d``. The first cluster's block is extended over the clusters
      that follow it directly with the same dominant domain (a domain usually owns two or three neighbouring
      clusters on a proximity path; the loss cannot rise while its own samples are still being trained).
    * ``start``: the step after the last batch, from batch ``first_batch`` on (the last epoch's first batch),
      that holds a sample of that first block (with mixed regions, its last mixed sample; the card's risks).
    * ``end``: the step before the first later batch that holds a sample of the next cluster of domain ``d``
      along the path; the last step of training if there is none.

    Steps count updates (step s = after s batches; step 0 = before training), as ``train_it``'s probes do.
    Returns ``domain``, ``clusters`` (the first block's), ``sibling`` (the next cluster of ``d`` or None),
    ``start``, ``end`` and ``total``.
    """
    labels = np.asarray(labels)
    path = [int(c) for c in path]
    dom = [int(cluster_domain[c]) for c in path]
    d = dom[0]
    r = 1
    while r < len(path) and dom[r] == d:
        r += 1
    first = path[:r]
    sibling = next((c for c, dc in zip(path[r:], dom[r:]) if dc == d), None)
    in_first = np.isin(labels, first)
    last = first_batch
    for k in range(first_batch, len(batches)):
        if in_first[np.asarray(batches[k])].any():
            last = k
    start, end = last + 1, len(batches)
    if sibling is not None:
        for k in range(last + 1, len(batches)):
            if (labels[np.asarray(batches[k])] == sibling).any():
                end = k
                break
    return {"domain": d, "clusters": first, "sibling": sibling, "start": start, "end": end, "total": len(batches)}


def forgetting(loss_at, window: dict) -> float:
    """loss(end) − loss(start) of :func:`forgetting_window`'s ``window``; ``loss_at`` maps steps to losses."""
    return float(loss_at[window["end"]] - loss_at[window["start"]])


def _forgetting_plan(orders, path, setup: SeedSetup, cfg) -> dict:
    """:func:`forgetting_window` of a clustered run, searched in its last epoch."""
    cdom = {c: dominant_domain(setup.labels, setup.domains, c) for c in range(len(setup.centroids))}
    per_epoch = steps_per_epoch(len(setup.train), cfg.batch_size)
    return forgetting_window(batches_of(orders, cfg.batch_size), setup.labels, path, cdom,
                             first_batch=(cfg.epochs - 1) * per_epoch)


def run_method(method: str, base: CharGPT, setup: SeedSetup, cfg, i: int) -> dict:
    """Instruction-tune a copy of the base (or of the warm-up model) in ``method``'s order; evaluate."""
    orders, path = epoch_orders(method, setup, cfg, i)
    model = clone(setup.warm if cfg.init_from_warmup else base)
    plan, probe, probe_steps = None, None, []
    total = cfg.epochs * steps_per_epoch(len(setup.train), cfg.batch_size)
    if path is not None:
        plan = _forgetting_plan(orders, path, setup, cfg)
        dom_eval = [x for x in setup.eval if x["domain"] == DOMAINS[plan["domain"]]]
        probe_steps = sorted({*range(0, total + 1, cfg.eval_every), plan["start"], plan["end"], total})
        probe = lambda m, step: evaluate(m, dom_eval)["loss"][DOMAINS[plan["domain"]]]  # noqa: E731
    elif method == "random":
        grng = np.random.default_rng([cfg.seed, i, 4])
        probe_steps = [total // 2]
        probe = lambda m, step: domain_grad_cosines(m, setup.train, setup.domains, cfg.batch_size,  # noqa: E731
                                                    len(DOMAINS), grng)
    hist = train_it(model, setup.train, orders, cfg.batch_size, cfg.lr, probe=probe, probe_steps=probe_steps)
    ev = evaluate(model, setup.eval)
    gc = np.asarray(hist["grad_cos"][1:], float)
    out = {"history": hist, "eval": ev, "path": path, "grad_cos_mean": float(np.nanmean(gc)),
           "train_cpu_s": hist["train_cpu_s"], "mean_loss": float(np.mean(list(ev["loss"].values())))}
    if plan is not None:
        out.update(forget=plan, forgetting=forgetting(hist["probes"], plan),
                   first_loss_block=float(hist["probes"][plan["start"]]),
                   first_loss_end=float(hist["probes"][plan["end"]]))
    if method == "random":
        out["k4"] = hist["probes"][total // 2]
    return out


def _warm_torch(base: CharGPT, cfg) -> None:
    """One untimed training step and forward pass on a throwaway copy: PyTorch's one-time lazy initialisation
    (about a second of CPU on the first backward in a process) must not be billed to EP-Order's overhead (C6)."""
    data = make_dataset(2, 0, "warm")
    train_it(clone(base), data, [np.arange(len(data))], min(cfg.batch_size, len(data)), cfg.lr)
    embed_samples(base, data)


def run_experiment(cfg, progress: Callable[[str], None] | None = None) -> Experiment:
    """Everything the chapter's results and ledger need."""
    say = progress or (lambda s: None)
    t0 = time.time()
    base, info = load_or_train_base(cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff, cfg.n_per_domain,
                                    cfg.base_epochs, cfg.batch_size, cfg.base_lr, cfg.seed, cfg.use_cached_base,
                                    cfg.positions, cfg.base_boost)
    _warm_torch(base, cfg)
    exp = Experiment(cfg, info)
    exp.base_eval = None
    rows = []
    for i in range(cfg.n_seeds):
        setup = prepare_seed(cfg, base, i)
        exp.setups.append(setup)
        if i == 0:
            exp.base_eval = evaluate(base, setup.eval)
            exp.warm_eval = evaluate(setup.warm, setup.eval)
        methods = ["random", "ep_order"] + (list(cfg.ablations) if i < cfg.n_ablation_seeds else [])
        for m in methods:
            r = run_method(m, base, setup, cfg, i)
            exp.runs[(m, setup.seed)] = r
            for d in r["eval"]["loss"]:
                rows.append({"method": m, "seed": setup.seed, "domain": d, "loss": r["eval"]["loss"][d],
                             "em": r["eval"]["em"][d]})
        say(f"seed {setup.seed}: purity {setup.purity:.3f}, random {exp.runs[('random', setup.seed)]['mean_loss']:.4f}"
            f", EP-Order {exp.runs[('ep_order', setup.seed)]['mean_loss']:.4f}  ({time.time() - t0:.0f} s)")
    exp.evals = pd.DataFrame(rows)
    exp.seconds["total"] = time.time() - t0
    return exp


def k_sweep(setup: SeedSetup, ks, cfg) -> pd.DataFrame:
    """Purity and path length (vs random cluster orders) for each K, on one seed's embeddings (no training)."""
    rows = []
    for k in ks:
        rng = np.random.default_rng([cfg.seed, k, 5])
        labels, C = kmeans(setup.embeddings, k, cfg.kmeans_iters, cfg.kmeans_restarts, rng)
        t0 = time.process_time()
        path = proximity_path(C)
        t_path = time.process_time() - t0
        L = path_length(C, path)
        R = float(random_path_lengths(C, cfg.n_random_paths, rng).mean())
        rows.append({"K": k, "purity": purity(labels, setup.domains), "path length": L,
                     "random order length": R, "ratio": L / R, "path ms": 1e3 * t_path})
    return pd.DataFrame(rows)


def minilm_purity(setup: SeedSetup, n: int, cfg) -> dict:
    """Purity of k-means (K = n_clusters) on ``n`` samples embedded by MiniLM and by the warm-up model."""
    idx = np.random.default_rng([cfg.seed, 6]).choice(len(setup.train), size=min(n, len(setup.train)), replace=False)
    t0 = time.process_time()
    E = MiniLM().encode([setup.train[k]["text"] for k in idx])
    cpu = time.process_time() - t0
    out = {"n": len(idx), "cpu_s": cpu}
    for name, X in (("minilm", E), ("warmup", setup.embeddings[idx])):
        lab, _ = kmeans(X, cfg.n_clusters, cfg.kmeans_iters, cfg.kmeans_restarts, np.random.default_rng([cfg.seed, 8]))
        out[name] = purity(lab, setup.domains[idx])
    return out
