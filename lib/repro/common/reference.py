"""Reference ledgers: the full-profile ledgers of seeds 0–4 shipped in git, and a reader's run compared with them.

``make reference NB=<slug>`` copies ``results/<slug>/full-seed<k>.json`` into ``data/reference/<slug>/`` (JSON
only, no notebooks), each with the inputs hash (:func:`repro.common.runner.inputs_hash`) of the run that wrote it
and its commit. A reference is *current* while that hash equals the code's now; once the chapter's notebook, its
library, ``repro.common`` or the requirements change it is *stale since* the first commit that changed them.

``make book`` uses current references for the across-seeds view when the reader has not run the other seeds, and
compares the reader's own seed-0 verdicts with the reference's: "reproduced N/M verdicts", and which differ. Only
``make reference`` writes here: no run, failed or interrupted, ever deletes a reference ledger.
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from .claims import write_json_atomic
from .paths import REPO_ROOT, notebook_path, results_dir
from .runner import BUILD_ONLY, inputs_hash

REFERENCE = REPO_ROOT / "data" / "reference"
PROFILE = "full"  # references are of the profile the book shows


def reference_dir(slug: str) -> Path:
    return REFERENCE / slug


def _run_hash(slug: str, seed: int, profile: str = PROFILE) -> str | None:
    """The inputs hash stored beside ``results/<slug>/<profile>-seed<seed>.json`` by the run that wrote it."""
    path = results_dir(slug) / f"{profile}-seed{seed}.hash"
    return path.read_text().strip() if path.exists() else None


def capture(slug: str, seeds: list[int] | None = None) -> list[Path]:
    """Copy the chapter's current full-profile ledgers (their stored inputs hash equals the code's now) into
    ``data/reference/<slug>/``; raise ``ValueError`` naming every requested seed whose ledger is missing or stale, so
    that a reference is never taken from a run of other code."""
    notebook_path(slug)  # a clear error for an unknown chapter
    found = sorted(int(p.stem.split("seed")[1]) for p in results_dir(slug).glob(f"{PROFILE}-seed*.json"))
    seeds = sorted(seeds) if seeds is not None else found
    problems, ready = [], []
    for k in seeds:
        ledger_path = results_dir(slug) / f"{PROFILE}-seed{k}.json"
        digest, now = _run_hash(slug, k), inputs_hash(slug, {"profile": PROFILE, "seed": k})
        if not ledger_path.exists():
            problems.append(f"seed {k}: no ledger (make run NB={slug} ARGS=\"-p seed {k}\")")
        elif digest is None:
            problems.append(f"seed {k}: its run stored no inputs hash (run it again with make run)")
        elif digest != now:
            problems.append(f"seed {k}: its ledger comes from other code (inputs changed since it ran)")
        else:
            data = json.loads(ledger_path.read_text())
            if not data.get("complete"):
                problems.append(f"seed {k}: the ledger is not complete")
            else:
                ready.append((k, data, digest))
    if problems or not ready:
        raise ValueError(f"{slug}: no reference written: " + ("; ".join(problems) or "no full-profile ledgers"))
    out = []
    for k, data, digest in ready:
        data["reference"] = {"inputs_hash": digest, "commit": data.get("provenance", {}).get("commit", "unknown"),
                             "dirty": data.get("provenance", {}).get("dirty"),
                             "captured": time.strftime("%Y-%m-%d", time.gmtime())}
        out.append(write_json_atomic(reference_dir(slug) / f"{PROFILE}-seed{k}.json", data))
    return out


def load(slug: str) -> list[dict[str, Any]]:
    """Every shipped reference ledger of ``slug``, seed 0 first."""
    out = []
    for path in sorted(reference_dir(slug).glob(f"{PROFILE}-seed*.json")):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return sorted(out, key=lambda d: d["seed"])


def is_current(ref: dict[str, Any], slug: str) -> bool:
    return ref.get("reference", {}).get("inputs_hash") == inputs_hash(slug, {"profile": PROFILE, "seed": ref["seed"]})


def _input_paths(slug: str) -> list[str]:
    """What :func:`inputs_hash` reads, as paths for ``git log`` (build-only modules excluded)."""
    common = [f"lib/repro/common/{p.name}" for p in sorted((REPO_ROOT / "lib/repro/common").glob("*.py"))
              if p.name not in BUILD_ONLY]
    return [str(notebook_path(slug).relative_to(REPO_ROOT)), "requirements.txt", "lib/repro/__init__.py",
            f"lib/repro/{slug}", *common]


def stale_since(ref: dict[str, Any], slug: str) -> str:
    """The first commit after the reference's that changed the chapter's inputs (``"commit <short hash>"``), or ``"uncommitted
    changes"`` when only the working tree differs; ``"an unknown commit"`` when git cannot tell."""
    base = ref.get("reference", {}).get("commit", "")
    paths = _input_paths(slug)
    try:
        rng = [f"{base}..HEAD"] if base and base != "unknown" else ["-1"]
        log = subprocess.run(["git", "log", "--format=%h", *rng, "--", *paths], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=20, check=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return "an unknown commit"
    return f"commit {log[-1]}" if log else "uncommitted changes"


def status(slug: str) -> dict[str, Any]:
    """``{"current": [ledgers], "stale": [ledgers], "since": <commit or "">}`` for the chapter's references."""
    refs = load(slug)
    current = [r for r in refs if is_current(r, slug)]
    stale = [r for r in refs if not is_current(r, slug)]
    return {"current": current, "stale": stale, "since": stale_since(stale[0], slug) if stale else ""}


def _verdicts(ledger: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["verdict"] for kind in ("controls", "claims") for c in ledger.get(kind, [])}


def compare(mine: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """The reader's ledger against the reference of the same seed: ``{"n", "same", "differ": [(id, mine, ref)]}``.
    An id present in only one of them counts as differing (``missing``)."""
    a, b = _verdicts(mine), _verdicts(ref)
    ids = list(dict.fromkeys([*b, *a]))
    differ = [(i, a.get(i, "missing"), b.get(i, "missing")) for i in ids if a.get(i) != b.get(i)]
    return {"n": len(ids), "same": len(ids) - len(differ), "differ": differ}


def reproduced(slugs: list[str], mine: dict[str, dict[str, Any] | None]) -> dict[str, Any]:
    """Seed 0 of every chapter against its reference. ``mine`` maps a chapter to the reader's current seed-0
    full-profile ledger (None when it has none). Returns totals and, per chapter, the comparison or why none."""
    per, n, same = {}, 0, 0
    for slug in slugs:
        st = status(slug)
        ref = next((r for r in st["current"] if r["seed"] == 0), None)
        if mine.get(slug) is None:
            per[slug] = {"why": "not run here"}
        elif ref is None:
            stale = next((r for r in st["stale"] if r["seed"] == 0), None)
            per[slug] = {"why": f"reference stale since {st['since']}" if stale else "no reference shipped"}
        else:
            c = compare(mine[slug], ref)
            per[slug] = c
            n, same = n + c["n"], same + c["same"]
    return {"n": n, "same": same, "chapters": per}


def reproduced_text(result: dict[str, Any]) -> str:
    """One line, then one per differing verdict or uncompared chapter: what ``make book`` prints."""
    compared = [s for s, c in result["chapters"].items() if "n" in c]
    lines = [f"reproduced {result['same']}/{result['n']} verdicts of the shipped reference (seed 0, "
             f"{len(compared)} of {len(result['chapters'])} chapters compared)"]
    for slug, c in result["chapters"].items():
        if "why" in c:
            lines.append(f"  {slug}: not compared ({c['why']})")
        for cid, a, b in c.get("differ", []):
            lines.append(f"  {slug} {cid}: {a} here, {b} in the reference")
    return "\n".join(lines)


def reproduced_markdown(result: dict[str, Any]) -> str:
    """The scorecard's section: the reproduced line, then a row per chapter (compared, differing or why not)."""
    out = ["## Against the reference ledgers", "",
           "The book ships the full-profile ledgers of seeds 0–4 of its maintainers' runs in `data/reference/`, each "
           "with the inputs hash of its code. This build's own seed-0 verdicts, compared with the reference's where "
           f"that hash still matches: **{reproduced_text(result).splitlines()[0]}**.", "",
           "| chapter | verdicts reproduced | differ (here / reference) |", "|---|---|---|"]
    for slug, c in result["chapters"].items():
        name = slug.replace("_", r"\_")
        if "why" in c:
            out.append(f"| {name} | not compared: {c['why']} | |")
        else:
            diff = "; ".join(f"{i}: {a} / {b}" for i, a, b in c["differ"])
            out.append(f"| {name} | {c['same']}/{c['n']} | {diff} |")
    return "\n".join(out)
