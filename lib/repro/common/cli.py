"""Command line behind the Makefile: ``python -m repro.common.cli {run,sweep,book,reference,crosscheck,scorecard} ...``."""
from __future__ import annotations

import argparse
import sys

from .params import ConfigError
from .runner import RunError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="repro", description=__doc__, allow_abbrev=False)
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="one chapter through papermill; then -p NAME VALUE | -r NAME VALUE | -y YAML",
                         allow_abbrev=False)
    run.add_argument("slug")
    sw = sub.add_parser("sweep", help="one chapter over many seeds", allow_abbrev=False)
    sw.add_argument("slug")
    sw.add_argument("--seeds", default="0-4")
    sw.add_argument("--jobs", type=int, default=2)
    sw.add_argument("--scheduler", default="", help="Dask scheduler address, e.g. tcp://host:8786")
    bk = sub.add_parser("book", help="execute changed chapters, build the scorecard, render the site")
    bk.add_argument("--profile", default="full", choices=["full", "smoke"])
    bk.add_argument("--jobs", type=int, default=2)
    bk.add_argument("--seeds", default="", help="seeds besides 0 to execute for the across-seeds view, e.g. 0-4")
    bk.add_argument("--scheduler", default="", help="Dask scheduler address, e.g. tcp://host:8786")
    rf = sub.add_parser("reference", help="copy a chapter's current full-profile ledgers into data/reference/")
    rf.add_argument("slug")
    rf.add_argument("--seeds", default="", help="e.g. 0-4 (default: every full-profile ledger under results/)")
    cc = sub.add_parser("crosscheck", help="run chapters on two arithmetic set-ups and compare their verdicts")
    cc.add_argument("slugs", nargs="*")
    cc.add_argument("--profile", default="smoke", choices=["full", "smoke"])
    sc = sub.add_parser("scorecard", help="print the scorecard table")
    sc.add_argument("--profile", default="full", choices=["full", "smoke"])
    ns, params = ap.parse_known_args(argv)  # what argparse does not know are the notebook's parameters
    if params and ns.cmd not in ("run", "sweep"):
        ap.error(f"unrecognized arguments: {' '.join(params)}")
    try:
        if ns.cmd == "run":
            from .paths import notebook_path
            from .runner import execute, parse_params

            notebook_path(ns.slug)
            result = execute(ns.slug, parse_params(params))
            print(f"{ns.slug}: {result.seconds:.1f} s; ledger {result.ledger}; notebook {result.notebook}")
        elif ns.cmd == "sweep":
            from .paths import notebook_path
            from .runner import parse_params
            from .sweep import format_summary, parse_seeds, sweep

            notebook_path(ns.slug)
            summary = sweep(ns.slug, parse_seeds(ns.seeds), parse_params(params), jobs=ns.jobs,
                            scheduler=ns.scheduler or None)
            print(format_summary(summary))
            return 1 if summary["errors"] else 0
        elif ns.cmd == "book":
            from .book import build
            from .sweep import parse_seeds

            seeds = parse_seeds(ns.seeds) if ns.seeds else [0]
            return build(ns.profile, jobs=ns.jobs, seeds=seeds, scheduler=ns.scheduler or None)
        elif ns.cmd == "reference":
            from .reference import capture
            from .sweep import parse_seeds

            try:
                paths = capture(ns.slug, parse_seeds(ns.seeds) if ns.seeds else None)
            except ValueError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            print("\n".join(f"reference: {p}" for p in paths))
        elif ns.cmd == "crosscheck":
            from . import crosscheck

            report = crosscheck.run(ns.slugs or None, ns.profile)
            bad = crosscheck.failed(report)
            print(f"crosscheck ({ns.profile}): " + ("verdicts DIFFER or a run failed (above)" if bad else
                                                    f"every verdict agrees in {len(report)} chapter(s)"))
            return 1 if bad else 0
        elif ns.cmd == "scorecard":
            from .book import scorecard_markdown

            print(scorecard_markdown(ns.profile))
    except (ConfigError, RunError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
