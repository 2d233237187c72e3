"""One chapter over many seeds, on Dask, then one table of every control and claim across seeds.

The runs go through :func:`repro.common.cluster.run_many`: a local cluster of ``jobs`` one-thread worker
processes by default, or an existing Dask cluster when a scheduler address is given. Workers return the executed
notebook and ledger contents; this process writes them under ``results/`` and the summary beside them.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from .claims import fmt, load_ledgers, write_json_atomic
from .cluster import Job, run_many
from .paths import results_dir
from .runner import inputs_hash, validate
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


def sweep(slug: str, seeds: list[int], params: dict[str, Any], jobs: int = 2, scheduler: str | None = None,
          **run_kw: Any) -> dict:
    """Run ``slug`` for every seed (parameters validated once, up front) and summarise the ledgers.

    The summary (``results/<slug>/sweep-<profile>.json``) covers the seeds that completed; ``errors`` names each
    seed that failed twice, with its message.
    """
    for seed in seeds:
        validate(slug, {**params, "seed": seed})
    profile = validate(slug, params).profile
    # each run's inputs hash (of the code as it is when the sweep starts) is stored beside its ledger, as make run
    # and make book store it: make reference takes only ledgers whose hash matches the code
    jobs_list = [Job(slug, p, inputs_hash(slug, p)) for p in ({**params, "profile": profile, "seed": s} for s in seeds)]
    failed = run_many(jobs_list, jobs=jobs, scheduler=scheduler, **run_kw)
    errors = [f"seed {job.params['seed']}: {failed[job.key]}" for job in jobs_list if job.key in failed]
    done = [job.params["seed"] for job in jobs_list if job.key not in failed]
    summary = summarise(slug, profile, done)
    summary["errors"] = errors
    write_json_atomic(results_dir(slug) / f"sweep-{profile}.json", summary)
    return summary


def summarise(slug: str, profile: str, seeds: list[int], ledgers: list[dict] | None = None) -> dict:
    """Per control and per claim: the verdict counts and, for every scalar number, mean ± 95% CI over the seeds.
    ``ledgers`` (e.g. the shipped reference ledgers) replaces those saved under ``results/``."""
    ledgers = [d for d in (load_ledgers(slug, profile) if ledgers is None else ledgers) if d["seed"] in seeds]
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

