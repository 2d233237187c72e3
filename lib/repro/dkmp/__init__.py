"""Chapter 15 · DKMP: dilated, star-structured message passing for large-scale molecular dynamics (ICML 2026).

The paper's code (github.com/WanyuGroup/ICML2026-DKMP) is not publicly readable; everything here is **our
reading of the abstract**: atom-centred star graphs over progressively dilated regions.

Modules: ``potentials`` (LJ + screened tail, the reference energy/forces), ``neighbors`` (pair lists,
Poisson-disk centres, star memberships), ``simulate`` (clusters, Langevin sampling, velocity Verlet),
``models`` (DKMP, SchNet), ``train`` (fitting, metrics), ``bench`` (time/memory per force evaluation),
``analysis`` (g(r), drift, excursion), ``experiments`` (drivers and claims). The compiled kernel ``_kernels``
(cell lists) has its numpy references in ``potentials`` and ``neighbors``.
"""
from .analysis import density, energy_deviation, max_excursion, radius_of_gyration, rdf, rdf_l1
from .bench import edges_per_atom, memory_estimate, time_model, timing_sweep
from .config import Config
from .experiments import (MODELS, THRESHOLDS, LearnedPotential, claim_c1, claim_c2, claim_c3, claim_c4,
                          claim_c5, claim_c6, evaluate_models, make_data, make_model, md_study, model_spec,
                          timing_sizes, timing_study, train_models, truncated_reference)
from .models import DKMP, RBF, CFConv, Graph, SchNet, StarGraph, StarLayer, collate, n_params
from .neighbors import pair_list, poisson_disk_centres, star_membership
from .potentials import HAVE_KERNEL, Potential, force_tail_fraction, lj_tail, lj_tail_full, switch
from .simulate import langevin, make_cluster, maxwell_boltzmann, sample_dataset, velocity_verlet
from .train import Dataset, evaluate, fit, fit_reference_energies, metrics, predict, to_dataset

#: The card's claims, verbatim in substance (ids C1–C6).
CLAIMS = {
    "C1": "Accuracy vs a local MPNN: on held-out N=256 clusters, DKMP's force MAE is <= 0.8x that of SchNet-local "
          "(cutoff 2.5 sigma, same width and depth, parameter count within +-15%) in 3/3 seeds.",
    "C2": "Accuracy vs dense: DKMP's force MAE is <= 1.3x that of SchNet-wide, whose cutoff (8 sigma) covers the "
          "whole interaction range.",
    "C3": "Efficiency and scaling: (a) DKMP edges per atom max/min over N <= 1.3; (b) log-log slope of DKMP time "
          "(graph construction + forward + forces) vs N, fitted on N >= 2000, in [0.85, 1.2]; (c) at "
          "N = dense_max_atoms DKMP >= 5x faster than SchNet-wide with >= 5x lower peak memory.",
    "C4": "Size transfer: trained on N=64 and evaluated at N=1024, DKMP's per-atom energy MAE and force MAE are "
          "<= 1.5x its N=256 values, and degrade less than SchNet-local's.",
    "C5": "Usable for MD: NVE velocity Verlet with the learned potential (N=256, dt=0.002, 2000 steps, stars "
          "refreshed every 20 steps): no atom leaves 3x the initial radius of gyration, |E(t)-E(0)|/(N T) <= 0.1 "
          "at every step, and the g(r) L1 distance to the reference potential's is <= 0.15 over [0.8, 4] sigma.",
    "C6": "Dilation matters: DKMP with dilated regions beats the same network with both star layers at s_1 "
          "(equal depth) on force MAE: lower seed mean and lower in >= 2/3 seeds.",
}

__all__ = [
    "Config", "CLAIMS", "MODELS", "THRESHOLDS",
    "Potential", "lj_tail", "lj_tail_full", "switch", "force_tail_fraction", "HAVE_KERNEL",
    "pair_list", "poisson_disk_centres", "star_membership",
    "make_cluster", "maxwell_boltzmann", "langevin", "sample_dataset", "velocity_verlet",
    "RBF", "CFConv", "StarLayer", "DKMP", "SchNet", "Graph", "StarGraph", "collate", "n_params",
    "Dataset", "to_dataset", "fit", "fit_reference_energies", "predict", "metrics", "evaluate",
    "time_model", "edges_per_atom", "memory_estimate", "timing_sweep",
    "rdf", "rdf_l1", "energy_deviation", "max_excursion", "radius_of_gyration", "density",
    "make_data", "make_model", "model_spec", "train_models", "evaluate_models", "truncated_reference",
    "timing_sizes", "timing_study", "md_study", "LearnedPotential",
    "claim_c1", "claim_c2", "claim_c3", "claim_c4", "claim_c5", "claim_c6",
]
