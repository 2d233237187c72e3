"""What every chapter shares: config validation, the claims ledger, seeding, statistics, plotting style."""
from . import style
from .claims import Ledger, load_ledgers
from .params import BaseConfig, ConfigError, knob
from .seeding import child_rngs, limit_threads, seed_everything
from .stats import bootstrap_ci, loglog_slope, mean_ci, paired_summary

__all__ = [
    "BaseConfig", "ConfigError", "knob", "Ledger", "load_ledgers", "seed_everything", "limit_threads",
    "child_rngs", "mean_ci", "bootstrap_ci", "loglog_slope", "paired_summary", "style",
]
