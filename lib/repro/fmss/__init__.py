"""Chapter 04 · FMSS — fast-mixing steady-state policy synthesis for ergodic MDPs via a convex spectral surrogate.

Reproduces "Fast Mixing Steady-State Control in Markov Decision Processes" (ICML 2026) at book scale.
No public code exists; the surrogate σ(π) = ‖D^{1/2}(P_π − 1μᵀ)D^{−1/2}‖₂ is our reconstruction from the abstract.

Modules: :mod:`.mdp` (instances, chains, SLEM, σ, mixing curves), :mod:`.synth` (LP baselines, the FMSS
convex program, the non-convex SLEM search, the FMMC SDP), :mod:`.learn` (FMSS-SV), :mod:`.experiments`
(one function per claim group), :mod:`.verdicts` (the claims, the controls and the functions deciding them),
:mod:`.config` (the chapter's parameters).
"""
from .config import Config, knob_table
from .learn import fmss_sv, min_stationarity_violation, sample_kernel, theory_slack
from .mdp import (biased_grid_policy, boundary_target, chi2_curve, eigen_condition, graph_mdp, gridworld,
                  induced_chain, max_inflow, path_graph, random_ergodic_mdp, random_policy, random_target,
                  reversibility_defect, reversible_chain, slem, stationary, surrogate, surrogate_matrix, tv_curve)
from .synth import (InfeasibleTarget, NonconvexResult, Synthesis, fmmc_sdp, fmss_convex, fmss_nonconvex,
                    fmss_problem, lp_vertices, occupation, policy_from_occupation, steady_state_lp)
from . import verdicts
from .verdicts import CLAIMS, CONTROLS, NEEDS

__all__ = [
    "Config", "knob_table", "CLAIMS", "CONTROLS", "NEEDS", "verdicts", "fmss_convex", "fmss_problem", "fmss_nonconvex", "fmmc_sdp",
    "steady_state_lp", "lp_vertices", "boundary_target", "reversibility_defect",
    "Synthesis", "NonconvexResult", "InfeasibleTarget", "occupation", "policy_from_occupation", "fmss_sv",
    "sample_kernel", "min_stationarity_violation", "theory_slack", "random_ergodic_mdp", "random_policy",
    "random_target", "gridworld", "biased_grid_policy", "graph_mdp", "path_graph", "reversible_chain",
    "induced_chain", "stationary", "slem", "surrogate", "surrogate_matrix", "tv_curve", "chi2_curve",
    "eigen_condition", "max_inflow",
]
