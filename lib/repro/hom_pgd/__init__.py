"""Chapter 14 · Hom-PGD⁺: projected gradient descent in the latent unit ball of a learned invertible map onto a
non-convex feasible set (ICML 2026; authors' code github.com/emliang/Homeomorphic-Optimization, read, not copied).

Modules: ``problems`` (the parametric non-convex QCQP family, ray re-entry check), ``inn`` (the map Φ: a
boundary-preserving star flow or a conditional RealNVP; its unsupervised MDH training; ε_inn and reach), ``optim`` (batched Hom-PGD⁺ with the segment bisection,
the gradient mapping), ``baselines`` (multistart SLSQP, PGD with exact projection, penalty / ALM, Shor SDP),
``experiments`` (the chapter's runs), ``verdicts`` (CLAIMS, CONTROLS and their decision functions), ``plots``.
``_kernels`` (compiled): the fused constraint evaluation of the feasibility check and the bisection
(``QCQPFamily.check_violation``; the torch ``violation`` stays the reference); ``benchmarks/bench_hom_pgd.py`` times both.
"""
from . import baselines, experiments, plots, verdicts
from .config import Config
from .inn import (REACH_TAU, CondRealNVP, CondStarFlow, MDHWeights, TrainResult, eps_inn, mdh_loss, n_params, preimage_norms, radial_map,
                  reach_misses, sample_ball, train_mdh)
from .optim import (FEAS_TOL, Result, gradient_mapping, hom_pgd, min_g2_curve, proj_ball, segment_bisection,
                    time_per_iteration)
from .problems import BOX, RADIUS, Instances, QCQPFamily, ray_reentry, sphere
from .verdicts import CLAIMS, CONTROLS, THRESHOLDS

__all__ = [
    "Config", "CLAIMS", "CONTROLS", "THRESHOLDS", "verdicts", "baselines", "experiments", "plots",
    "QCQPFamily", "Instances", "ray_reentry", "sphere", "BOX", "RADIUS",
    "CondRealNVP", "CondStarFlow", "reach_misses", "REACH_TAU", "MDHWeights", "TrainResult", "train_mdh", "mdh_loss", "sample_ball", "eps_inn", "preimage_norms",
    "radial_map", "n_params",
    "hom_pgd", "Result", "proj_ball", "segment_bisection", "gradient_mapping", "min_g2_curve", "time_per_iteration",
    "FEAS_TOL",
]
