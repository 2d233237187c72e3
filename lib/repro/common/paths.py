"""Where the book keeps things: the repository root, ``results/`` and ``data/cache/``.

Both can be moved with environment variables (``REPRO_RESULTS``, ``REPRO_CACHE``), which the tests use
to keep their runs apart from a reader's.
"""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = REPO_ROOT / "notebooks"


def results_dir(slug: str | None = None) -> Path:
    """``results/`` (or ``results/<slug>/``), created on demand."""
    root = Path(os.environ.get("REPRO_RESULTS", REPO_ROOT / "results"))
    path = root / slug if slug else root
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir(slug: str) -> Path:
    """``data/cache/<slug>/`` for models a chapter trains once and reuses, keyed by their config."""
    root = Path(os.environ.get("REPRO_CACHE", REPO_ROOT / "data" / "cache"))
    path = root / slug
    path.mkdir(parents=True, exist_ok=True)
    return path


def notebook_path(slug: str) -> Path:
    """``notebooks/NN_<slug>.ipynb``; raises a clear error naming the chapters that exist."""
    hits = sorted(NOTEBOOKS.glob(f"[0-9][0-9]_{slug}.ipynb"))
    if len(hits) != 1:
        known = ", ".join(chapter_slugs()) or "none"
        raise SystemExit(f"no chapter '{slug}': known chapters are {known}")
    return hits[0]


def chapter_slugs() -> list[str]:
    """Slugs of every chapter notebook, in book order."""
    return [p.stem[3:] for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))]
