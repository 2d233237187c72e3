"""What every chapter shares: config validation, the claims ledger with its controls, seeding, statistics
(including the noise-aware paired comparison), text glued from the run, plotting style."""
from . import style
from .claims import Ledger, load_ledgers
from .params import BaseConfig, ConfigError, knob
from .seeding import child_rngs, limit_threads, seed_everything
from .stats import (Comparison, ThresholdTest, bootstrap_ci, bootstrap_two_level, compare_paired, decide_threshold,
                    loglog_slope, mean_ci, paired_summary, threshold_from_ci)
from .text import ci_text, fmt_value, glue

__all__ = [
    "BaseConfig", "ConfigError", "knob", "Ledger", "load_ledgers", "seed_everything", "limit_threads",
    "child_rngs", "mean_ci", "bootstrap_ci", "loglog_slope", "paired_summary", "compare_paired", "Comparison",
    "ThresholdTest", "decide_threshold", "threshold_from_ci", "bootstrap_two_level",
    "glue", "fmt_value", "ci_text", "style",
]
