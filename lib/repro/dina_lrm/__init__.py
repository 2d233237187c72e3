"""Chapter 11 · DiNa-LRM: a reward model that scores *noisy latents* of a latent diffusion / flow model with a
noise-calibrated Thurstone likelihood (ICML 2026; authors' code github.com/HKUST-C4G/diffusion-rm, read, not copied).

Modules: ``data`` (digits, autoencoder, oracle reward, preference pairs, the cached shared models), ``flow`` (the
latent rectified-flow generator and its feature taps), ``reward`` (the FiLM reward head, Thurstone / fidelity / BT
losses, joint RM training, noise-ensembled scoring, the pixel RM), ``align`` (ReFL and Diffusion-DPO), ``metrics``
(expected agreement, Brier, ECE, FLOPs, timings), ``experiments`` (the paired seeds), ``verdicts`` (CLAIMS,
CONTROLS and the functions that decide them), ``plots``. No compiled kernel (card: small dense matmuls under
autograd; C4 must compare equally implemented torch models).
"""
from . import align, data, flow, metrics, reward, verdicts
from .config import Config
from .verdicts import CLAIMS, CONTROLS, THRESHOLDS

__all__ = ["Config", "CLAIMS", "CONTROLS", "THRESHOLDS", "align", "data", "flow", "metrics", "reward", "verdicts"]
