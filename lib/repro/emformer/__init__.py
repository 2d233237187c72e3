"""Chapter 18 · EMFormer: an hourglass transformer whose attention uses one fused multi-scale convolution,
fine-tuned on its own rollouts, with a sinusoid-weighted composite loss (ICML 2026; authors' code
github.com/chenhao-zju/emformer, read, not copied).

Modules: ``sim`` (the shallow-water weather source; numpy reference and the compiled ``_kernels`` step),
``data`` (trajectories, splits by trajectory, anomaly normalization, the perfect-model twin), ``layers``
(fused multi-scale conv, attention, hourglass resampling), ``models`` (EMFormer, ViT), ``losses`` (the composite
loss), ``metrics`` (latitude-weighted RMSE / ACC, CSI), ``train`` (pretraining, accumulative fine-tuning, BPTT,
rollouts, saved bytes), ``experiments`` (the paired seeds, timings), ``verdicts`` (CLAIMS, CONTROLS and the
functions that decide them), ``plots``.
"""
from . import verdicts
from .config import Config
from .verdicts import CLAIMS, CONTROLS

__all__ = ["Config", "CLAIMS", "CONTROLS", "verdicts"]
