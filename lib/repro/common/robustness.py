"""Verdicts across seeds: how many seeds each control passed and each claim held in, for the book.

``make book SEEDS=0-4`` executes every chapter at each seed (cached per seed by the inputs hash); these functions
turn the ledgers whose inputs are current into the scorecard's "across seeds" column, the section added under each
chapter's ledger, and a chapters × claims figure. A verdict that differs between seeds is *seed-dependent*.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .claims import Claim, fmt, load_ledgers
from .sweep import summarise

_GOOD = {"controls": "passed", "claims": "holds"}
_NO_EVIDENCE = "#bdbdbd"  # the heatmap's fill for a claim inconclusive at every seed
_HATCH_EDGE = "#555555"


def ledgers_for(slug: str, profile: str, seeds: list[int] | None,
                ledgers: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The chapter's saved ledgers of ``profile`` for ``seeds`` (all seeds when None), seed 0 first; ``ledgers``
    (the shipped reference ledgers) replaces those saved under ``results/``."""
    pool = load_ledgers(slug, profile) if ledgers is None else ledgers
    out = [d for d in pool if seeds is None or d["seed"] in seeds]
    return sorted(out, key=lambda d: d["seed"])


def across_seeds(slug: str, profile: str, seeds: list[int] | None = None,
                 ledgers: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per control, then per claim: seed 0's verdict, the count of seeds it held/passed in, whether the
    verdict is seed-dependent, and the first numbers' mean ± 95% CI over the seeds."""
    ledgers = ledgers_for(slug, profile, seeds, ledgers)
    if not ledgers:
        return []
    summary = summarise(slug, profile, [d["seed"] for d in ledgers], ledgers)
    first = ledgers[0]
    rows = []
    for kind in ("controls", "claims"):
        for item in first.get(kind, []):
            verdicts = [next((c["verdict"] for c in d.get(kind, []) if c["id"] == item["id"]), "missing")
                        for d in ledgers]
            stats = summary[kind].get(item["id"], {}).get("numbers", {})
            numbers = "; ".join(f"{k} = {fmt(s['mean'])} ± {fmt(s['ci95'])}" for k, s in list(stats.items())[:2])
            good = _GOOD[kind]
            rows.append({
                "kind": kind[:-1], "id": item["id"], "name": Claim(item["id"], item["statement"]).name,
                "seed0": verdicts[0], "good": good, "count": sum(v == good for v in verdicts), "n": len(verdicts),
                "inconclusive": verdicts.count("inconclusive"), "seed_dependent": len(set(verdicts)) > 1,
                "verdicts": verdicts, "numbers": numbers,
            })
    return rows


def count_text(row: dict[str, Any]) -> str:
    """``"holds 4/5 · seed-dependent"``, ``"passed 5/5"``, or ``"holds 0/5 · inconclusive 5/5"``: a claim that did
    not hold because its control failed is counted apart, so that "holds 0/5" never hides "no evidence"."""
    text = f"{row['good']} {row['count']}/{row['n']}"
    if row.get("inconclusive"):
        text += f" · inconclusive {row['inconclusive']}/{row['n']}"
    return text + " · seed-dependent" if row["seed_dependent"] else text


def provenance_text(slug: str, profile: str, seeds: list[int], ledgers: list[dict[str, Any]] | None = None) -> str:
    """Which seeds and commits the rows come from."""
    ledgers = ledgers_for(slug, profile, seeds, ledgers)
    commits = sorted({d["provenance"]["commit"][:10] + (" (+local changes)" if d["provenance"].get("dirty") else "")
                      for d in ledgers})
    return (f"seeds {', '.join(str(d['seed']) for d in ledgers)} of profile {profile}, "
            f"commit{'s' if len(commits) > 1 else ''} {', '.join(commits)}")


def chapter_section(slug: str, profile: str, seeds: list[int], ledgers: list[dict[str, Any]] | None = None,
                    source: str = "") -> str:
    """The Markdown section shown under a chapter's ledger when more than one seed's ledger is current.
    ``ledgers`` and ``source`` (a sentence saying where they come from) show the shipped reference ledgers."""
    rows = across_seeds(slug, profile, seeds, ledgers)
    if not rows or rows[0]["n"] < 2:
        return ""
    out = ["### Across seeds", "",
           f"The same notebook, full parameters unchanged, at every seed: {provenance_text(slug, profile, seeds, ledgers)}. "
           + (source + " " if source else "")
           + "A verdict that differs between seeds is marked *seed-dependent*; numbers are means ± 95% CI over seeds.",
           "", "| control or claim | seed 0 | across seeds | numbers over seeds |", "|---|---|---|---|"]
    for r in rows:
        name = r["name"].replace("|", "\\|")
        out.append(f"| {name} | {r['seed0']} | {count_text(r)} | {r['numbers'].replace('|', chr(92) + '|')} |")
    return "\n".join(out)


def heatmap(profile: str, seeds: list[int], slugs: list[str], path: Path) -> Path | None:
    """Chapters × controls-and-claims, colour = share of seeds in which each held (passed); None with one seed.
    A claim inconclusive at every seed (a control failed each time) is grey, not red: the run said nothing about it;
    one inconclusive at some seeds is dotted."""
    table = {s: across_seeds(s, profile, seeds) for s in slugs}
    table = {s: rows for s, rows in table.items() if rows and rows[0]["n"] > 1}
    if not table:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Patch, Rectangle

    width = max(len(rows) for rows in table.values())
    share = np.full((len(table), width), np.nan)
    labels = []
    for i, (slug, rows) in enumerate(table.items()):
        labels.append(slug)
        for j, r in enumerate(rows):
            share[i, j] = r["count"] / r["n"]
    fig, ax = plt.subplots(figsize=(max(7.0, 2.0 + 0.55 * width), 1.6 + 0.45 * len(table)))
    cmap = plt.get_cmap("RdYlGn").with_extremes(bad="#eeeeee")
    im = ax.imshow(np.ma.masked_invalid(share), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for i, rows in enumerate(table.values()):
        for j, r in enumerate(rows):
            if r.get("inconclusive"):
                every = r["inconclusive"] == r["n"]
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=_NO_EVIDENCE if every else "none",
                                       edgecolor=_HATCH_EDGE, hatch="//" if every else "..", linewidth=0))
            ax.text(j, i, r["id"], ha="center", va="center", fontsize=7)
    ax.legend(handles=[Patch(facecolor=_NO_EVIDENCE, edgecolor=_HATCH_EDGE, hatch="//",
                             label="inconclusive at every seed (a control failed)"),
                       Patch(facecolor="white", edgecolor=_HATCH_EDGE, hatch="..", label="inconclusive at some seeds")],
              loc="upper center", bbox_to_anchor=(0.5, -0.04), ncol=2, fontsize=8, frameon=False)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xticks([])
    ax.set_xlabel("controls (K) then claims (C), in ledger order")
    ax.set_title(f"Verdicts across seeds {min(seeds)}–{max(seeds)} (profile {profile})\n"
                 "share of seeds in which each control passed / each claim held", fontsize=10)
    fig.colorbar(im, ax=ax, label="share of seeds")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
