"""Every chapter's run time and peak memory against the book's budgets (DESIGN: smoke <= 60 s, full <= 8 min on
2 cores, memory well under 8 GiB), read from the ledgers under ``results/`` that ``make run`` / ``make test`` /
``make sweep`` wrote. Run those alone on the machine first: a ledger's wall time includes whatever else ran.

    make bench NB=budgets
"""
from __future__ import annotations

import json

from repro.common.paths import chapter_slugs, results_dir

BUDGET_S = {"smoke": 60.0, "full": 480.0}
MEMORY_MIB = 8 * 1024


def main() -> None:
    print(f"{'chapter':24s} {'profile':7s} {'seed':>4s} {'wall s':>8s} {'budget':>7s} {'peak MiB':>9s}  status")
    over = 0
    for slug in chapter_slugs():
        for profile, budget in BUDGET_S.items():
            for path in sorted(results_dir(slug).glob(f"{profile}-seed*.json")):
                d = json.loads(path.read_text())
                ok = d["wall_s"] <= budget and d["peak_rss_mib"] < MEMORY_MIB
                over += not ok
                print(f"{slug:24s} {profile:7s} {d['seed']:>4d} {d['wall_s']:8.1f} {budget:7.0f} "
                      f"{d['peak_rss_mib']:9.0f}  {'ok' if ok else 'OVER'}")
    print(f"{over} ledger(s) over budget" if over else "every ledger within budget")


if __name__ == "__main__":
    main()
