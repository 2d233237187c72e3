"""Chapter 04 · FMSS — fast-mixing steady-state policy synthesis for ergodic MDPs via a convex spectral surrogate.

Reproduces "Fast Mixing Steady-State Control in Markov Decision Processes" (ICML 2026) at book scale.
No public code exists; the surrogate σ(π) = ‖D^{1/2}(P_π − 1μᵀ)D^{−1/2}‖₂ is our reconstruction from the abstract.

Modules: :mod:`.mdp` (instances, chains, SLEM, σ, mixing curves), :mod:`.synth` (LP baselines, the FMSS
convex program, the non-convex SLEM search, the FMMC SDP), :mod:`.learn` (FMSS-SV), :mod:`.experiments`
(one function per claim group), :mod:`.config` (the chapter's parameters).
"""
from .config import Config
from .learn import fmss_sv, min_stationarity_violation, sample_kernel, theory_slack
from .mdp import (biased_grid_policy, chi2_curve, eigen_condition, graph_mdp, gridworld, induced_chain, max_inflow,
                  path_graph, random_ergodic_mdp, random_policy, random_target, reversible_chain, slem, stationary,
                  surrogate, surrogate_matrix, tv_curve)
from .synth import (InfeasibleTarget, NonconvexResult, Synthesis, fmmc_sdp, fmss_convex, fmss_nonconvex,
                    fmss_problem, lp_vertices, occupation, policy_from_occupation, steady_state_lp)

CLAIMS: dict[str, str] = {
    "C1": ("Surrogate is a valid, tight-when-reversible bound: for 200 random feasible policies on 10 random MDPs, "
           "σ(π) ≥ SLEM(P_π) − 1e-8 always, and |σ − SLEM| ≤ 1e-6 on μ-reversible chains (P = D⁻¹W, W symmetric "
           "non-negative). Must hold."),
    "C2": ("Faster mixing than steady-state-only synthesis, on 20 random MDPs (S=12, A=3): (a) FMSS's true SLEM is "
           "below the LP-vertex policy's on ≥ 18/20 with median relative reduction ≥ 10% (expected); (b) below the "
           "max-entropy feasible policy's on ≥ 10/20 (may not hold)."),
    "C3": ("Approximation quality vs the non-convex optimum: median over the 20 MDPs of SLEM(FMSS) − SLEM(best found "
           "by the multistart local search, which starts from FMSS) ≤ 0.05. May not hold; the search result is never "
           "called the global optimum."),
    "C4": ("What σ does and does not buy: (a) χ²(e_sᵀP_π^k‖μ) ≤ σ^{2k} χ²(e_s‖μ) for every policy, start and k ≤ 30 "
           "(up to 1e-12; must hold); (b) worst-start TV at k=10 is smaller for FMSS than for the LP vertex on ≥ 16/20 "
           "MDPs (expected); (c) the slope of log worst-start TV over k ∈ [10, 30] (TV ≥ 1e-13) gives a rate within "
           "0.05 of the SLEM for every policy (must hold up to near-defective eigenvalues; exceptions listed)."),
    "C5": ("Tractability: Clarabel solves S ∈ {10,20,30,40} (A=3) in < 20 s at S=40, SCS (eps 1e-6) solves "
           "S ∈ {10,20,40,60} in < 20 s at S=60, with SCS's objective and stationarity error vs Clarabel and "
           "log–log slopes reported. Expected."),
    "C6": ("FMSS-SV finite-sample: for n ∈ {30,…,10000} samples per (s,a), 5 seeds, min-slack mode, ‖μ_{π̂_n} − μ‖₁ "
           "and |σ̂_n − σ*| decrease with n, the first with log–log slope in [−0.75, −0.3] fitted on n ≥ 100 "
           "(theory ≈ −½); in the theory-slack variant (c_ε = 1) the true optimum satisfies its constraint in ≥ 95% "
           "of draws, and its stationarity error is expected flat on this grid. Expected."),
    "C7": ("Feasibility detection: for an unachievable μ (μ(s) > max_{s',a} P(s|s',a) for some s) the program reports "
           "infeasible; for feasible μ it never does. Must hold."),
}

__all__ = [
    "Config", "CLAIMS", "fmss_convex", "fmss_problem", "fmss_nonconvex", "fmmc_sdp", "steady_state_lp", "lp_vertices",
    "Synthesis", "NonconvexResult", "InfeasibleTarget", "occupation", "policy_from_occupation", "fmss_sv",
    "sample_kernel", "min_stationarity_violation", "theory_slack", "random_ergodic_mdp", "random_policy",
    "random_target", "gridworld", "biased_grid_policy", "graph_mdp", "path_graph", "reversible_chain",
    "induced_chain", "stationary", "slem", "surrogate", "surrogate_matrix", "tv_curve", "chi2_curve",
    "eigen_condition", "max_inflow",
]
