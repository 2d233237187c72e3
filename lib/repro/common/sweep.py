"""One chapter over many seeds, in parallel, then one table of every claim across seeds.

The executor is a local process pool (one notebook per worker, one thread each) unless a Dask scheduler
address is given, in which case the same :func:`repro.common.runner.execute` calls are submitted to that
cluster (``pip install dask[distributed]`` there; every worker needs this checkout and its ``.venv``).
"""
from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from .claims import fmt, load_ledgers, write_json_atomic
from .paths import results_dir
from .runner import execute, validate
from .stats import mean_ci


def parse_seeds(text: str) -> list[int]:
    """``"0-4"`` -> [0, 1, 2, 3, 4]; ``"0,3,7"`` -> [0, 3, 7]; mixed forms allowed."""
    seeds: list[int] = []
    try:
        for part in str(text).split(","):
            if "-" in part:
                lo, hi = part.split("-")
                seeds += list(range(int(lo), int(hi) + 1))
            elif part.strip():
                seeds.append(int(part))
    except ValueError:
        raise SystemExit(f"SEEDS must look like 0-4 or 0,3,7; got {text!r}") from None
    if not seeds or min(seeds) < 0:
        raise SystemExit(f"SEEDS must name at least one seed >= 0; got {text!r}")
    return sorted(set(seeds))


def _run(slug: str, params: dict[str, Any]) -> str:
    return str(execute(slug, params).ledger)


def sweep(slug: str, seeds: list[int], params: dict[str, Any], jobs: int = 2, scheduler: str | None = None) -> dict:
    """Run ``slug`` for every seed (parameters validated once, up front) and summarise the ledgers."""
    for seed in seeds:
        validate(slug, {**params, "seed": seed})
    jobs_params = [{**params, "seed": s} for s in seeds]
    errors: list[str] = []
    if scheduler:
        from dask.distributed import Client  # optional: only a cluster run needs it

        with Client(scheduler) as client:
            futures = client.map(_run, [slug] * len(seeds), jobs_params)
            for seed, fut in zip(seeds, futures):
                try:
                    fut.result()
                except Exception as exc:  # noqa: BLE001 - report each seed, then fail
                    errors.append(f"seed {seed}: {exc}")
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_run, slug, p) for p in jobs_params]
            for seed, fut in zip(seeds, futures):
                try:
                    fut.result()
                    print(f"  seed {seed}: done", flush=True)
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"seed {seed}: {exc}")
    profile = validate(slug, params).profile
    summary = summarise(slug, profile, seeds)
    summary["errors"] = errors
    write_json_atomic(results_dir(slug) / f"sweep-{profile}.json", summary)
    return summary


def summarise(slug: str, profile: str, seeds: list[int]) -> dict:
    """Per control and per claim: the verdict counts and, for every scalar number, mean ± 95% CI over the seeds."""
    ledgers = [d for d in load_ledgers(slug, profile) if d["seed"] in seeds]
    out = {"slug": slug, "profile": profile, "seeds": sorted(d["seed"] for d in ledgers), "controls": {},
           "claims": {}}
    for kind in ("controls", "claims"):
        items: dict[str, dict] = {}
        for d in ledgers:
            for c in d.get(kind, []):
                entry = items.setdefault(c["id"], {"statement": c["statement"], "verdicts": defaultdict(int),
                                                   "numbers": defaultdict(list)})
                entry["verdicts"][c["verdict"]] += 1
                for k, v in c["numbers"].items():
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        entry["numbers"][k].append(v)
        for cid, e in items.items():
            nums = {}
            for k, vals in e["numbers"].items():
                m, h = mean_ci(np.array(vals))
                nums[k] = {"mean": float(m), "ci95": float(h), "n": len(vals)}
            out[kind][cid] = {"statement": e["statement"], "verdicts": dict(e["verdicts"]), "numbers": nums}
    return out


def format_summary(summary: dict) -> str:
    """The sweep's table as plain text."""
    lines = [f"{summary['slug']} · profile {summary['profile']} · seeds {summary['seeds']}"]
    for cid, c in {**summary.get("controls", {}), **summary["claims"]}.items():
        verdicts = ", ".join(f"{v} {n}/{len(summary['seeds'])}" for v, n in sorted(c["verdicts"].items()))
        lines.append(f"{cid:>4}  {verdicts}")
        for k, s in c["numbers"].items():
            lines.append(f"        {k}: {fmt(s['mean'])} ± {fmt(s['ci95'])} (n={s['n']})")
    for err in summary.get("errors", []):
        lines.append(f"FAILED {err}")
    return "\n".join(lines)

