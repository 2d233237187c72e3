"""Chapter 10 · Fair-FedMOE: group-fair one-shot federated fine-tuning with group experts routed by learnable
prototypes and prototype-guided merging (ICML 2026; no public code — the method is reconstructed from the
abstract, every choice is documented in the modules).

Modules: ``data`` (synthetic multi-site features through a frozen random "foundation model"), ``models``
(site-stacked Fair-MoE and single-head models), ``local`` (the routing loss, batched local training),
``aggregate`` (one-shot FedAvg, TIES, prototype-guided differential aggregation), ``iterative`` (FedAvg and
FairFed over rounds), ``metrics`` (AUC, ES-AUC, our RES-AUC, EOD, DPD, the bootstrap with its C++ kernel),
``experiments`` (paired replicates and the β sweep), ``verdicts`` (CLAIMS, CONTROLS and their rules), ``plots``.
"""
from . import aggregate, data, iterative, local, metrics, models, verdicts
from .aggregate import (aggregate_head, aggregate_moe, count_weights, fedavg, prototype_weights, ties_merge,
                        tv_distance)
from .config import Config
from .data import FMFeatureExtractor, Federation, SiteData, group_frequencies, make_federation, make_geometry
from .experiments import (LABELS, ONE_SHOT, Experiment, FedRun, bootstrap_table, c5_groups_sweep, run_experiment,
                          run_federation)
from .iterative import fairfed_deltas, run_rounds
from .local import LossWeights, Stacked, batch_indices, moe_loss, train_stack
from .metrics import (auc, bootstrap_group_auc, bootstrap_group_auc_reference, dpd, eod, es_auc, evaluate,
                      group_aucs, res_auc)
from .models import init_head, init_moe, predict, route_argmax
from .verdicts import CLAIMS, CONTROLS, THRESHOLDS

__all__ = [
    "Config", "CLAIMS", "CONTROLS", "THRESHOLDS", "verdicts", "aggregate", "data", "iterative", "local", "metrics",
    "models", "aggregate_head", "aggregate_moe", "count_weights", "fedavg", "prototype_weights", "ties_merge",
    "tv_distance", "FMFeatureExtractor", "Federation", "SiteData", "group_frequencies", "make_federation",
    "make_geometry", "LABELS", "ONE_SHOT", "Experiment", "FedRun", "bootstrap_table", "c5_groups_sweep",
    "run_experiment", "run_federation", "fairfed_deltas", "run_rounds", "LossWeights", "Stacked", "batch_indices",
    "moe_loss", "train_stack", "auc", "bootstrap_group_auc", "bootstrap_group_auc_reference", "dpd", "eod",
    "es_auc", "evaluate", "group_aucs", "res_auc", "init_head", "init_moe", "predict", "route_argmax",
]
