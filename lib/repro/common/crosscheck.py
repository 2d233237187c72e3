"""Does a verdict rest on last-bit rounding? Run chapters twice, on two arithmetic set-ups, and compare the ledgers.

``make crosscheck [NB=<slug>] [PROFILE=smoke]`` (issue 40) runs each chapter as the book does (one BLAS/torch
thread, numpy's OpenBLAS choosing its kernel for this CPU) and again with two threads and OpenBLAS forced to
another kernel family (``OPENBLAS_CORETYPE``): both change the order and width of floating-point reductions, as
another reader's CPU would. The verdicts must agree; numbers may move (a trained network follows another path),
and the largest relative move of each control's and claim's numbers is reported beside it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .claims import write_json_atomic
from .paths import chapter_slugs, results_dir

#: The two set-ups: name -> (threads, environment). Sandybridge (AVX) differs from what an AVX2 or AVX-512 CPU
#: picks by default (Haswell, SkylakeX), and two threads split every BLAS reduction differently.
SETUPS = {"book": (1, {}), "other-cpu": (2, {"OPENBLAS_CORETYPE": "Sandybridge"})}


def _numbers(item: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in item.get("numbers", {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def compare_ledgers(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per control and claim: both verdicts, whether they agree, and the largest relative difference of
    their scalar numbers (|x − y| / max(|x|, |y|, 1e-12))."""
    rows = []
    items_b = {c["id"]: c for kind in ("controls", "claims") for c in b.get(kind, [])}
    for kind in ("controls", "claims"):
        for c in a.get(kind, []):
            other = items_b.get(c["id"], {})
            na, nb = _numbers(c), _numbers(other)
            rel = max((abs(na[k] - nb[k]) / max(abs(na[k]), abs(nb[k]), 1e-12) for k in na if k in nb), default=0.0)
            rows.append({"id": c["id"], "verdict": c["verdict"], "other": other.get("verdict", "missing"),
                         "agree": c["verdict"] == other.get("verdict"), "max_rel_diff": rel})
    return rows


def run(slugs: list[str] | None = None, profile: str = "smoke") -> dict[str, Any]:
    """Execute every chapter under both set-ups (results under ``results/crosscheck/<set-up>/``) and compare.
    Returns ``{slug: rows}`` (or ``{slug: {"error": ...}}``) and writes ``results/crosscheck/<profile>.json``."""
    from .runner import RunError, execute

    slugs = slugs or chapter_slugs()
    root = results_dir() / "crosscheck"
    report: dict[str, Any] = {}
    saved = {k: os.environ.get(k) for k in ("REPRO_RESULTS", "OPENBLAS_CORETYPE")}
    try:
        for slug in slugs:
            ledgers = {}
            for name, (threads, env) in SETUPS.items():
                os.environ["REPRO_RESULTS"] = str(root / name)
                os.environ.pop("OPENBLAS_CORETYPE", None)
                os.environ.update(env)
                try:
                    res = execute(slug, {"profile": profile, "seed": 0}, threads=threads)
                    ledgers[name] = json.loads(Path(res.ledger).read_text())
                except RunError as exc:
                    ledgers[name] = {"error": str(exc)}
            if any("error" in d for d in ledgers.values()):
                report[slug] = {"error": "; ".join(d["error"] for d in ledgers.values() if "error" in d)}
            else:
                report[slug] = compare_ledgers(ledgers["book"], ledgers["other-cpu"])
            print(summary_line(slug, report[slug]), flush=True)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    write_json_atomic(results_dir() / "crosscheck" / f"{profile}.json", report)
    return report


def summary_line(slug: str, rows: Any) -> str:
    if isinstance(rows, dict):
        return f"{slug}: ERROR {rows['error']}"
    bad = [r for r in rows if not r["agree"]]
    moved = max((r["max_rel_diff"] for r in rows), default=0.0)
    text = f"{slug}: {len(rows) - len(bad)}/{len(rows)} verdicts agree; largest relative move of a number {moved:.2g}"
    return text + "".join(f"\n  {r['id']}: {r['verdict']} (book) vs {r['other']} (other-cpu)" for r in bad)


def failed(report: dict[str, Any]) -> bool:
    return any(isinstance(rows, dict) or any(not r["agree"] for r in rows) for rows in report.values())

