"""Chapter 15 · DKMP: dilated, star-structured message passing for large-scale molecular dynamics (ICML 2026).

The paper's code (github.com/WanyuGroup/ICML2026-DKMP) is not publicly readable; everything here is **our
reading of the abstract**: atom-centred star graphs over progressively dilated regions.

Modules: ``potentials`` (LJ + screened tail, the reference energy/forces), ``neighbors`` (pair lists,
Poisson-disk centres, star memberships), ``simulate`` (clusters, Langevin sampling, velocity Verlet),
``models`` (DKMP, SchNet), ``train`` (fitting, metrics), ``bench`` (time/memory per force evaluation),
``analysis`` (g(r), drift, excursion), ``experiments`` (drivers), ``verdicts`` (claims, controls and
the functions deciding them). The compiled kernel ``_kernels``
(cell lists) has its numpy references in ``potentials`` and ``neighbors``.
"""
from .analysis import density, energy_deviation, max_excursion, radius_of_gyration, rdf, rdf_l1
from .bench import edges_per_atom, memory_estimate, time_model, timing_sweep
from .config import Config
from . import verdicts
from .experiments import (CLAIM_MODELS, MODELS, TIMED, LearnedPotential, dilation_reach, evaluate_models, make_data,
                          make_model, md_study, model_spec, nostar_width, set_label, star_centres, time_ratios,
                          timing_sizes, timing_study, train_models, truncated_reference)
from .models import DKMP, RBF, CFConv, Graph, SchNet, StarGraph, StarLayer, collate, n_params
from .neighbors import pair_list, poisson_disk_centres, radius_pairs, spatial_order, star_membership
from .potentials import HAVE_KERNEL, Potential, force_tail_fraction, lj_tail, lj_tail_full, switch
from .simulate import langevin, make_cluster, maxwell_boltzmann, sample_dataset, velocity_verlet
from .train import Dataset, evaluate, fit, fit_reference_energies, metrics, predict, to_dataset
from .verdicts import CLAIMS, CONTROLS, THRESHOLDS

__all__ = [
    "Config", "CLAIMS", "CONTROLS", "MODELS", "CLAIM_MODELS", "TIMED", "THRESHOLDS", "verdicts",
    "Potential", "lj_tail", "lj_tail_full", "switch", "force_tail_fraction", "HAVE_KERNEL",
    "pair_list", "radius_pairs", "spatial_order", "poisson_disk_centres", "star_membership",
    "make_cluster", "maxwell_boltzmann", "langevin", "sample_dataset", "velocity_verlet",
    "RBF", "CFConv", "StarLayer", "DKMP", "SchNet", "Graph", "StarGraph", "collate", "n_params",
    "Dataset", "to_dataset", "fit", "fit_reference_energies", "predict", "metrics", "evaluate",
    "time_model", "edges_per_atom", "memory_estimate", "timing_sweep",
    "rdf", "rdf_l1", "energy_deviation", "max_excursion", "radius_of_gyration", "density",
    "make_data", "make_model", "model_spec", "nostar_width", "dilation_reach", "train_models", "evaluate_models", "set_label", "star_centres",
    "truncated_reference", "timing_sizes", "timing_study", "time_ratios", "md_study", "LearnedPotential",
]
