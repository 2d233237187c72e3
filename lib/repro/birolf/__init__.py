"""Chapter 02 · BiRoLF: a bilinear bandit robust to latent user and item features, through orthogonal-complement
augmentation of both feature spaces and a bilinear doubly-robust (DR) Lasso solved exactly block by block
(ICML 2026; authors' code github.com/zaalophus/BiRoLF).

Modules: ``env`` (the authors' synthetic generator, the augmentation X̃ = [Xᵀ | B_x] and the representation
Φ* = X̃⁻¹R̄Ỹ⁻ᵀ), ``solvers`` (FISTA for the imputation and main Lassos, the blockwise and full-matrix main
solvers, cvxpy / SLSQP references, KKT residuals), ``agents`` (BiRoLF and every baseline of the card),
``run`` (the bandit loop, settings, seeds), ``experiments`` (exactness and timing studies, the in-loop
exactness and latent-structure checks, the authors' code's numbers), ``verdicts`` (claims C1a–C1c, C2–C5,
controls K1–K7 and their conditions), ``plots``. The FISTA loops have a compiled kernel ``_kernels`` whose
numpy reference is in ``solvers``.
"""
from .agents import (AGENT_LABELS, BiRoLF, DRLassoBandit, ESTRLowOFUL, LinTS, LinUCB, OFUL, Oracle, RoLF, UCBDelta,
                     UCBDeltaCode,
                     chosen_distribution, dr_expected, dr_pseudo_rewards, kron_features, make_agent, resample_pseudo_action, rho_t)
from .config import ALL_AGENTS, Config
from .env import (BilinearInstance, augment, gram_blocks, make_bilinear_instance, noise_stream,
                  orthogonal_complement, represent)
from .experiments import (MainSequence, authors_default_numbers, exactness_check, exactness_instance,
                          inloop_exactness, latent_structure, record_main_sequence, time_main_solvers)
from .run import Setting, SettingResult, run_setting, run_trial, settings_from_config, tail_slope, window_ratio
from .solvers import (CODE_CAPS, HAVE_KERNEL, ImputeLipschitz, fista_impute, fista_kkt_path, fista_matrix,
                      fista_vector_lasso, impute_lipschitz, impute_objective, kkt_residual, main_objective,
                      soft_threshold, solve_main_blockwise, solve_main_cvxpy, solve_main_full, solve_main_slsqp)
from .verdicts import (CLAIMS, CONTROLS, NEEDS, claim_beats, claim_c1, claim_c1b, claim_c1c, claim_c2, claim_c3,
                       claim_c4, claim_c5, control_k1, control_k2, control_k3, control_k4, control_k5, control_k6,
                       control_k7, locked_in)

__all__ = [
    "Config", "CLAIMS", "CONTROLS", "NEEDS", "ALL_AGENTS",
    # env
    "BilinearInstance", "make_bilinear_instance", "orthogonal_complement", "augment", "gram_blocks", "represent",
    "noise_stream",
    # solvers
    "HAVE_KERNEL", "CODE_CAPS", "soft_threshold", "kkt_residual", "main_objective", "fista_matrix",
    "fista_vector_lasso", "fista_kkt_path", "fista_impute", "impute_objective", "impute_lipschitz",
    "ImputeLipschitz", "solve_main_blockwise", "solve_main_full", "solve_main_cvxpy", "solve_main_slsqp",
    # agents
    "BiRoLF", "RoLF", "LinUCB", "OFUL", "LinTS", "DRLassoBandit", "ESTRLowOFUL", "UCBDelta", "UCBDeltaCode", "Oracle",
    "make_agent", "rho_t", "resample_pseudo_action", "dr_pseudo_rewards", "dr_expected", "chosen_distribution", "kron_features", "AGENT_LABELS",
    # run / experiments / verdicts
    "Setting", "SettingResult", "run_trial", "run_setting", "settings_from_config", "window_ratio", "tail_slope",
    "exactness_instance", "exactness_check", "MainSequence", "record_main_sequence", "time_main_solvers",
    "inloop_exactness", "latent_structure", "authors_default_numbers",
    "claim_beats", "claim_c1", "claim_c1b", "claim_c1c", "claim_c2", "claim_c3", "claim_c4", "claim_c5",
    "control_k1", "control_k2", "control_k3", "control_k4", "control_k5", "control_k6", "control_k7", "locked_in",
]
