"""Build the book: execute what changed, gather the scorecard, stage the sources, render with Jupyter Book.

``make book`` calls :func:`build`. Each chapter is executed by papermill (two at a time, one thread each)
only when :func:`repro.common.runner.inputs_hash` differs from the hash stored beside its last executed
copy; Jupyter Book's own cache looks at code cells only and would miss a change in ``lib/``. The sources
are staged into ``_build/src`` (the pages, the executed notebooks, the generated scorecard, a local copy
of MathJax so the site reads offline) and rendered with execution off and warnings as errors.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import reference
from .claims import fmt, load_ledgers
from .paths import REPO_ROOT, chapter_slugs, notebook_path, results_dir
from .cluster import Job, run_many
from .robustness import across_seeds, chapter_section, count_text, heatmap, ledgers_for
from .runner import RunError, inputs_hash

STAGE = REPO_ROOT / "_build" / "src"
SCORECARD_MARK = "<!-- scorecard-table -->"
COURSE_MARK = "<!-- course-times -->"
#: What the site needs of MathJax 3: the combined TeX/MathML + CHTML component, the fonts and the parts it
#: loads on demand (extensions, menu, accessibility).
MATHJAX_PARTS = ("tex-mml-chtml.js", "input", "output", "ui", "a11y", "sre", "adaptors")


def _hash_file(slug: str, profile: str, seed: int = 0) -> Path:
    return results_dir(slug) / f"{profile}-seed{seed}.hash"


def is_current(slug: str, profile: str, seed: int = 0) -> bool:
    """True when the executed notebook and ledger of this seed exist and their inputs hash the same as now."""
    params = {"profile": profile, "seed": seed}
    h, nb = _hash_file(slug, profile, seed), results_dir(slug) / f"{profile}-seed{seed}.ipynb"
    ledger = results_dir(slug) / f"{profile}-seed{seed}.json"
    return h.exists() and nb.exists() and ledger.exists() and h.read_text().strip() == inputs_hash(slug, params)


def offline_available() -> bool:
    """Whether ``unshare -rn`` can cut this process's children off the network (Linux user namespaces)."""
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0


def execute_changed(profile: str, jobs: int = 2, slugs: list[str] | None = None, timeout_s: int | None = None,
                    offline: bool = False, seeds: list[int] | None = None, scheduler: str | None = None) -> list[str]:
    """Execute every (chapter, seed) whose inputs changed, on Dask (:func:`repro.common.cluster.run_many`), storing
    each one's inputs hash (computed before it runs); return the failures' messages (empty when all ran)."""
    seeds = seeds or [0]
    slugs = slugs or chapter_slugs()
    todo = [Job(s, {"profile": profile, "seed": k}, inputs_hash(s, {"profile": profile, "seed": k}))
            for s in slugs for k in seeds if not is_current(s, profile, k)]
    todo.sort(key=lambda j: -_last_wall_s(j.slug, profile))  # longest first: the run that ends last is short
    fresh = sorted({f"{s} (seed {k})" if len(seeds) > 1 else s for s in slugs for k in seeds
                    if is_current(s, profile, k)})
    if fresh:
        print(f"up to date ({profile}): {', '.join(fresh)}")
    if not todo:
        return []
    print(f"executing ({profile}, {jobs} at a time): {', '.join(j.key for j in todo)}", flush=True)
    failed = run_many(todo, jobs=jobs, scheduler=scheduler, offline=offline, timeout_s=timeout_s)
    # messages start with the slug, as callers (and tests) look failures up by chapter
    return [f"{key.split('-')[0]}: {key}: {msg}" for key, msg in failed.items()]


# ---------------------------------------------------------------------------------------------- scorecard
def _last_wall_s(slug: str, profile: str) -> float:
    """The longest wall time among ``slug``'s saved ``profile`` ledgers (inf when it has none: run the unknown
    first), the expected cost used to order runs."""
    return max((d.get("wall_s", 0.0) for d in load_ledgers(slug, profile)), default=float("inf"))


def current_seeds(slug: str, profile: str) -> list[int]:
    """Seeds of ``slug`` whose executed notebook and ledger are current (their inputs hash the same as now)."""
    seeds = sorted({d["seed"] for d in load_ledgers(slug, profile)})
    return [k for k in seeds if is_current(slug, profile, k)]


def scorecard_rows(profile: str, seeds: dict[str, list[int]] | None = None) -> list[dict[str, Any]]:
    """One row per control, then one per claim, of every chapter: seed 0's verdict and numbers and, with several
    seeds, the count of seeds each held in. ``seeds`` maps a chapter to the seeds to use (all saved when None)."""
    rows = []
    for slug in chapter_slugs():
        use = None if seeds is None else seeds.get(slug, [0])
        ledgers = ledgers_for(slug, profile, use)
        if not ledgers:
            rows.append({"chapter": slug, "kind": "claim", "claim": "—", "verdict": "not run", "numbers": "",
                         "seeds": "", "wall": ""})
            continue
        first = ledgers[0]
        items = {(k, c["id"]): c for k in ("controls", "claims") for c in first.get(k, [])}
        for r in across_seeds(slug, profile, [d["seed"] for d in ledgers]):
            item = items[(r["kind"] + "s", r["id"])]
            numbers = "; ".join(f"{k} = {fmt(v)}" for k, v in list(item["numbers"].items())[:2])
            rows.append({"chapter": slug, "kind": r["kind"], "claim": r["name"], "verdict": r["seed0"],
                         "across": count_text(r) if r["n"] > 1 else "", "numbers": numbers,
                         "needs": ", ".join(item.get("needs", [])), "seeds": ",".join(str(d["seed"]) for d in ledgers),
                         "wall": f"{first['wall_s']:.0f} s"})
    return rows


_VERDICT_HTML = {v: f'<b style="color:{c}">{v}</b>' for v, c in
                 (("holds", "#1a7f37"), ("fails", "#cf222e"), ("inconclusive", "#9a6700"), ("passed", "#1a7f37"),
                  ("failed", "#cf222e"))}


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def scorecard_markdown(profile: str, seeds: dict[str, list[int]] | None = None, figure: str | None = None) -> str:
    """The scorecard as Markdown: one line per chapter, then one row per control and claim (rendered into
    ``book/scorecard.md`` when staging). Controls come first: a claim whose control failed is inconclusive. With
    several seeds, a column counts the seeds each held in and marks seed-dependent verdicts."""
    rows = scorecard_rows(profile, seeds)
    pages = {s: notebook_path(s).stem for s in chapter_slugs()}
    multi = any(r.get("across") for r in rows)

    def link(slug: str) -> str:
        name = slug.replace("_", r"\_")  # a bare underscore would start emphasis in the Markdown table
        return f"[{pages[slug][:2]} {name}](../notebooks/{pages[slug]}.ipynb)"

    out = [f"Profile **{profile}**. Each chapter links to its page, where every verdict is explained. A *control* "
           "checks that the run could see an effect of the kind a claim is about; a claim whose control failed is "
           "inconclusive. Verdicts and numbers are seed 0's" + (", and *across seeds* counts the seeds in which each "
           "control passed or claim held." if multi else ".") + " Wall times are those of the runs shown, which `make book` "
           "executes `JOBS` at a time (2 by default): a chapter run alone is faster, and the 8-minute budget of the full "
           "profile is for a run alone (`make run`, then `make bench NB=budgets`).", "",
           "| chapter | controls passed | claims | holds | fails | inconclusive | seeds | wall time (seed 0) |",
           "|---|---|---|---|---|---|---|---|"]
    for slug in chapter_slugs():
        mine = [r for r in rows if r["chapter"] == slug]
        if mine[0]["verdict"] == "not run":
            out.append(f"| {link(slug)} | — | — | | | | | not run |")
            continue
        claims = [r for r in mine if r["kind"] == "claim"]
        controls = [r for r in mine if r["kind"] == "control"]
        n = {v: sum(r["verdict"] == v for r in claims) for v in ("holds", "fails", "inconclusive")}
        ctl = f"{sum(r['verdict'] == 'passed' for r in controls)}/{len(controls)}" if controls else "none declared"
        out.append(f"| {link(slug)} | {ctl} | {len(claims)} | {n['holds']} | {n['fails']} | {n['inconclusive']} | "
                   f"{mine[0]['seeds']} | {mine[0]['wall']} |")
    claims = [r for r in rows if r["kind"] == "claim"]
    counts = {v: sum(r["verdict"] == v for r in claims) for v in ("holds", "fails", "inconclusive")}
    dependent = sum("seed-dependent" in r.get("across", "") for r in claims)
    out += ["", f"In all, at seed 0, {counts['holds']} claims hold, {counts['fails']} fail and "
                f"{counts['inconclusive']} are inconclusive" + (f"; {dependent} verdicts are seed-dependent." if multi
                                                              else "."), ""]
    if figure:
        out += [f"![Share of seeds in which each control passed and each claim held]({figure})", ""]
    out += ["## Every control and claim", "",
            "| chapter | control or claim | needs | verdict | " + ("across seeds | " if multi else "")
            + "key numbers (seed 0) |", "|---|---|---|---|---|" + ("---|" if multi else "")]
    for r in rows:
        if r["verdict"] == "not run":
            continue
        verdict = _VERDICT_HTML.get(r["verdict"], r["verdict"])
        numbers = "; ".join(_short(part) for part in r["numbers"].split("; ")).replace("|", "\\|")
        name = r["claim"].replace("|", "\\|")
        across = f"{r['across'] or '1 seed'} | " if multi else ""
        out.append(f"| {link(r['chapter'])} | {name} | {r.get('needs', '')} | {verdict} | {across}{numbers} |")
    return "\n".join(out)


def times_markdown() -> str:
    """Measured wall time and peak memory of each chapter's latest seed-0 ledgers, smoke and full (course page)."""
    out = ["| chapter | smoke: wall time | full: wall time | full: peak memory |", "|---|---|---|---|"]
    for slug in chapter_slugs():
        cells = []
        for profile in ("smoke", "full"):
            d = next((d for d in load_ledgers(slug, profile) if d["seed"] == 0), None)
            cells.append(f"{d['wall_s']:.0f} s" if d else "—")
            if profile == "full":
                cells.append(f"{d['peak_rss_mib']:.0f} MiB" if d else "—")
        out.append(f"| {notebook_path(slug).stem[:2]} {slug.replace('_', chr(92) + '_')} | " + " | ".join(cells) + " |")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- staging
def _sync(src: Path, dst: Path) -> None:
    """Copy only when the content differs, so Sphinx's incremental build sees unchanged files as unchanged."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if not dst.exists() or dst.read_bytes() != src.read_bytes():
        shutil.copy2(src, dst)


def _sync_text(text: str, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if not dst.exists() or dst.read_text() != text:
        dst.write_text(text)


def _mathjax_dir() -> Path:
    import mathjax  # django-static-mathjax, pinned in requirements.txt

    return Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"


def _with_section(executed: Path, section: str) -> str:
    """The executed notebook with a Markdown cell ``section`` right after its ledger cell (the one tagged
    ``nbval-check-output``), or at the end when there is none."""
    nb = json.loads(executed.read_text())
    cells = nb["cells"]
    at = next((i + 1 for i, c in enumerate(cells) if "nbval-check-output" in c.get("metadata", {}).get("tags", [])),
              len(cells))
    cells.insert(at, {"cell_type": "markdown", "id": "across-seeds", "metadata": {}, "source": section})
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def stage(profile: str) -> Path:
    """Lay out ``_build/src``: config, TOC, pages, executed notebooks (seed 0), scorecard, local MathJax. Where
    other seeds' ledgers are current too, the scorecard counts them, each chapter page gets an "Across seeds"
    section under its ledger, and the scorecard a chapters × claims figure."""
    for name in ("_config.yml", "_toc.yml"):
        _sync(REPO_ROOT / name, STAGE / name)
    for page in (REPO_ROOT / "book").rglob("*"):
        if page.is_file():
            _sync(page, STAGE / page.relative_to(REPO_ROOT))
    seeds = {slug: sorted({0, *current_seeds(slug, profile)}) for slug in chapter_slugs()}
    figure = heatmap(profile, sorted({k for v in seeds.values() for k in v}), chapter_slugs(),
                     STAGE / "book" / "robustness.png") if any(len(v) > 1 for v in seeds.values()) else None
    if figure is None:
        (STAGE / "book" / "robustness.png").unlink(missing_ok=True)
    course = (REPO_ROOT / "book" / "course.md").read_text()
    _sync_text(course.replace(COURSE_MARK, times_markdown()), STAGE / "book" / "course.md")
    card = (REPO_ROOT / "book" / "scorecard.md").read_text()
    table = scorecard_markdown(profile, seeds, "robustness.png" if figure else None)
    table += "\n\n" + (reference.reproduced_markdown(reproduced(profile)) if profile == reference.PROFILE else
                        "The shipped reference ledgers (`data/reference/`) are of the full profile; this build is of "
                        f"profile {profile}, so its verdicts are not compared with them.")
    _sync_text(card.replace(SCORECARD_MARK, table), STAGE / "book" / "scorecard.md")
    missing = []
    for slug in chapter_slugs():
        executed = results_dir(slug) / f"{profile}-seed0.ipynb"
        if not executed.exists():
            missing.append(slug)
            continue
        section = chapter_section(slug, profile, seeds[slug]) or reference_section(slug, profile)
        if section:
            _sync_text(_with_section(executed, section), STAGE / "notebooks" / notebook_path(slug).name)
        else:
            _sync(executed, STAGE / "notebooks" / notebook_path(slug).name)
    if missing:
        raise RunError(f"no executed notebook for {', '.join(missing)} in profile {profile}; run make book first")
    # Not under _static/: Jupyter Book would add every .js found there as a <script> on every page.
    shutil.rmtree(STAGE / "_static", ignore_errors=True)
    mj_src, mj_dst = _mathjax_dir(), STAGE / "_vendor" / "mathjax"
    if not (mj_dst / "tex-mml-chtml.js").exists():
        for part in MATHJAX_PARTS:
            src = mj_src / part
            if src.is_dir():
                shutil.copytree(src, mj_dst / part, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.map"))
            else:
                _sync(src, mj_dst / part)
    return STAGE


def reproduced(profile: str) -> dict[str, Any]:
    """This checkout's current seed-0 ledgers of ``profile`` against the shipped reference ledgers."""
    mine = {}
    for slug in chapter_slugs():
        path = results_dir(slug) / f"{profile}-seed0.json"
        mine[slug] = json.loads(path.read_text()) if is_current(slug, profile, 0) else None
    return reference.reproduced(chapter_slugs(), mine)


def reference_section(slug: str, profile: str) -> str:
    """Where the reader ran only seed 0: the across-seeds section from the shipped reference ledgers when they
    are current, or a line saying since which commit they are stale."""
    if profile != reference.PROFILE:
        return ""
    st = reference.status(slug)
    if len(st["current"]) > 1:
        return chapter_section(slug, profile, [r["seed"] for r in st["current"]], st["current"],
                               source=f"These are the *reference ledgers* shipped in `data/reference/{slug}/`, run by "
                                      "the book's maintainers on code with the same inputs hash as this page's; "
                                      "`make book SEEDS=0-4` runs the seeds here instead.")
    if st["stale"]:
        return ("### Across seeds\n\nThe reference ledgers shipped in `data/reference/" + slug + "/` (seeds "
                + ", ".join(str(r["seed"]) for r in st["stale"]) + f") are stale since {st['since']}: the "
                "chapter's code changed after they ran, so they are not shown. `make book SEEDS=0-4` runs the seeds here.")
    return ""


def render() -> int:
    """Jupyter Book (execution off) with warnings as errors, nitpicky, keep going; HTML in ``_build/html``."""
    cmd = [sys.executable, "-m", "jupyter_book", "build", str(STAGE), "--path-output", str(REPO_ROOT),
           "--builder", "html", "-W", "-n", "--keep-going"]
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    if jb:
        cmd[:3] = [jb]
    return subprocess.call(cmd, cwd=REPO_ROOT)


def build(profile: str = "full", jobs: int = 2, timeout_s: int | None = None, seeds: list[int] | None = None,
          scheduler: str | None = None) -> int:
    """``make book [SEEDS=0-4]``: execute what changed (at each seed), stage, render. Non-zero when a chapter or
    the render failed."""
    seeds = sorted({0, *(seeds or [0])})
    failures = execute_changed(profile, jobs=jobs, timeout_s=timeout_s, seeds=seeds, scheduler=scheduler)
    if failures:
        print("\n".join(["book: these runs failed:", *failures]), file=sys.stderr)
        return 1
    stage(profile)
    if profile == reference.PROFILE:
        print("book: " + reference.reproduced_text(reproduced(profile)))
    code = render()
    if code == 0:
        print(f"book: {REPO_ROOT / '_build' / 'html' / 'index.html'}")
    return code
