"""Timing for the benchmarks (``benchmarks/bench_<slug>.py``): best-of-``repeat`` CPU time of a call.

CPU time (``time.process_time``) rather than wall time, so that a benchmark run beside other work still measures
the code; no notebook imports this module.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable


def best_cpu_time(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """The smallest CPU time of ``repeat`` calls of ``fn`` and the last call's result."""
    best, out = math.inf, None
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t)
    return best, out
