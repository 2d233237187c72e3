"""Where a number came from: git commit, package versions, wall time and peak memory of this process."""
from __future__ import annotations

import importlib.metadata
import platform
import resource
import subprocess
import sys
import time
from typing import Any

from .paths import REPO_ROOT

PACKAGES = ("numpy", "scipy", "pandas", "torch", "cvxpy", "scikit-learn", "matplotlib", "papermill", "repro")


def git_commit() -> dict[str, Any]:
    """HEAD of the checkout and whether the working tree differs from it (``unknown`` outside git)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--", "lib", "notebooks"))}
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": None}


def package_versions() -> dict[str, str]:
    """Versions of the packages a result depends on (only those installed)."""
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def peak_rss_mib() -> float:
    """Peak resident memory of this process (and its finished children), in MiB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    scale = 1 / 1024 if sys.platform != "darwin" else 1 / 2**20  # Linux reports KiB, macOS bytes
    return round(max(own, kids) * scale, 1)


class Stopwatch:
    """Wall-clock seconds since creation; ``lap(name)`` records named intervals for the ledger."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.laps: dict[str, float] = {}
        self._last = self.t0

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def lap(self, name: str) -> float:
        now = time.perf_counter()
        self.laps[name] = round(self.laps.get(name, 0.0) + now - self._last, 3)
        self._last = now
        return self.laps[name]
