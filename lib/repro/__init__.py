"""repro: the tested library behind *Reproducing ICML 2026*.

``repro.common`` holds what every chapter shares (configs and their validation, the claims ledger,
seeding, statistics, the plotting style, running notebooks); ``repro.<slug>`` holds one paper's
method, baselines, data generators and, where one pays off, a compiled kernel.
"""
__version__ = "0.1.0"
