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
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from .claims import Claim, fmt, load_ledgers
from .paths import REPO_ROOT, chapter_slugs, notebook_path, results_dir
from .runner import RunError, execute, inputs_hash

STAGE = REPO_ROOT / "_build" / "src"
SCORECARD_MARK = "<!-- scorecard-table -->"
#: What the site needs of MathJax 3: the combined TeX/MathML + CHTML component, the fonts and the parts it
#: loads on demand (extensions, menu, accessibility).
MATHJAX_PARTS = ("tex-mml-chtml.js", "input", "output", "ui", "a11y", "sre", "adaptors")


def _hash_file(slug: str, profile: str) -> Path:
    return results_dir(slug) / f"{profile}-seed0.hash"


def is_current(slug: str, profile: str) -> bool:
    """True when the executed notebook and ledger exist and their inputs hash the same as now."""
    params = {"profile": profile, "seed": 0}
    h, nb = _hash_file(slug, profile), results_dir(slug) / f"{profile}-seed0.ipynb"
    ledger = results_dir(slug) / f"{profile}-seed0.json"
    return h.exists() and nb.exists() and ledger.exists() and h.read_text().strip() == inputs_hash(slug, params)


def offline_available() -> bool:
    """Whether ``unshare -rn`` can cut this process's children off the network (Linux user namespaces)."""
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0


def execute_one(slug: str, profile: str, timeout_s: int | None = None, offline: bool = False) -> tuple[str, float]:
    """Execute one chapter at seed 0 and store its inputs hash (computed before the run starts).

    With ``offline`` the run happens in a new network namespace with no interface up (``unshare -rn``):
    a chapter that tries to download anything fails there.
    """
    params = {"profile": profile, "seed": 0}
    digest = inputs_hash(slug, params)
    _hash_file(slug, profile).unlink(missing_ok=True)
    if offline:
        t0 = time.perf_counter()
        cmd = ["unshare", "-rn", sys.executable, "-m", "repro.common.cli", "run", slug, "-y", json.dumps(params)]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT,
                              timeout=None if timeout_s is None else 4 * timeout_s)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise RunError(f"{slug}: offline run failed: {last.removeprefix('error: ')}")
        seconds = time.perf_counter() - t0
    else:
        seconds = execute(slug, params, timeout_s=timeout_s).seconds
    _hash_file(slug, profile).write_text(digest + "\n")
    return slug, seconds


def execute_changed(profile: str, jobs: int = 2, slugs: list[str] | None = None,
                    timeout_s: int | None = None, offline: bool = False) -> list[str]:
    """Execute every chapter whose inputs changed; return the failures' messages (empty when all ran)."""
    todo = [s for s in (slugs or chapter_slugs()) if not is_current(s, profile)]
    skipped = sorted(set(slugs or chapter_slugs()) - set(todo))
    if skipped:
        print(f"up to date ({profile}): {', '.join(skipped)}")
    failures: list[str] = []
    if not todo:
        return failures
    print(f"executing ({profile}, {jobs} at a time): {', '.join(todo)}", flush=True)
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(todo)))) as pool:
        futures = {s: pool.submit(execute_one, s, profile, timeout_s, offline) for s in todo}
        for slug, fut in futures.items():
            try:
                _, seconds = fut.result()
                print(f"  {slug}: {seconds:.1f} s", flush=True)
            except (RunError, Exception) as exc:  # report every chapter, then fail
                failures.append(str(exc))
                print(f"  {slug}: FAILED — {exc}", flush=True)
    return failures


# ---------------------------------------------------------------------------------------------- scorecard
def _seed_verdict(verdicts: list[str]) -> str:
    """One verdict when every seed agrees, else each verdict with its count ("holds 4/5, fails 1/5")."""
    if len(set(verdicts)) == 1:
        return verdicts[0]
    return ", ".join(f"{v} {verdicts.count(v)}/{len(verdicts)}" for v in sorted(set(verdicts)))


def scorecard_rows(profile: str) -> list[dict[str, Any]]:
    """One row per control, then one per claim, of every chapter, from the saved ledgers of ``profile``
    (all seeds; the numbers are seed 0's)."""
    rows = []
    for slug in chapter_slugs():
        ledgers = load_ledgers(slug, profile)
        if not ledgers:
            rows.append({"chapter": slug, "kind": "claim", "claim": "—", "verdict": "not run", "numbers": "",
                         "seeds": "", "wall": ""})
            continue
        seeds = sorted(d["seed"] for d in ledgers)
        by_seed0 = next((d for d in ledgers if d["seed"] == 0), ledgers[0])
        wall = max(d["wall_s"] for d in ledgers)
        for kind in ("controls", "claims"):
            for item in by_seed0.get(kind, []):
                verdicts = [next((c["verdict"] for c in d.get(kind, []) if c["id"] == item["id"]), "missing")
                            for d in ledgers]
                numbers = "; ".join(f"{k} = {fmt(v)}" for k, v in list(item["numbers"].items())[:2])
                rows.append({"chapter": slug, "kind": kind[:-1], "claim": Claim(item["id"], item["statement"]).name,
                             "verdict": _seed_verdict(verdicts), "numbers": numbers,
                             "needs": ", ".join(item.get("needs", [])),
                             "seeds": ",".join(map(str, seeds)), "wall": f"{wall:.0f} s"})
    return rows


_VERDICT_HTML = {v: f'<b style="color:{c}">{v}</b>' for v, c in
                 (("holds", "#1a7f37"), ("fails", "#cf222e"), ("inconclusive", "#9a6700"), ("passed", "#1a7f37"),
                  ("failed", "#cf222e"))}


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def scorecard_markdown(profile: str) -> str:
    """The scorecard as Markdown: one line per chapter, then one row per control and claim (rendered into
    ``book/scorecard.md`` when staging). Controls come first: a claim whose control failed is inconclusive."""
    rows = scorecard_rows(profile)
    pages = {s: notebook_path(s).stem for s in chapter_slugs()}

    def link(slug: str) -> str:
        name = slug.replace("_", r"\_")  # a bare underscore would start emphasis in the Markdown table
        return f"[{pages[slug][:2]} {name}](../notebooks/{pages[slug]}.ipynb)"

    out = [f"Profile **{profile}**. Each chapter links to its page, where every verdict is explained. A *control* "
           "checks that the run could see an effect of the kind a claim is about; a claim whose control failed is "
           "inconclusive.", "",
           "| chapter | controls passed | claims | holds | fails | inconclusive | seeds | wall time |",
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
    # a claim whose verdict differs across seeds counts under none of the three
    out += ["", f"In all, {counts['holds']} claims hold, {counts['fails']} fail and {counts['inconclusive']} are "
                "inconclusive.", "", "## Every control and claim", "",
            "| chapter | control or claim | needs | verdict | key numbers (seed 0) |", "|---|---|---|---|---|"]
    for r in rows:
        if r["verdict"] == "not run":
            continue
        verdict = _VERDICT_HTML.get(r["verdict"], r["verdict"])
        numbers = "; ".join(_short(part) for part in r["numbers"].split("; ")).replace("|", "\\|")
        name = r["claim"].replace("|", "\\|")
        out.append(f"| {link(r['chapter'])} | {name} | {r.get('needs', '')} | {verdict} | {numbers} |")
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


def stage(profile: str) -> Path:
    """Lay out ``_build/src``: config, TOC, pages, executed notebooks, scorecard, local MathJax."""
    for name in ("_config.yml", "_toc.yml"):
        _sync(REPO_ROOT / name, STAGE / name)
    for page in (REPO_ROOT / "book").rglob("*"):
        if page.is_file():
            _sync(page, STAGE / page.relative_to(REPO_ROOT))
    card = (REPO_ROOT / "book" / "scorecard.md").read_text()
    _sync_text(card.replace(SCORECARD_MARK, scorecard_markdown(profile)), STAGE / "book" / "scorecard.md")
    missing = []
    for slug in chapter_slugs():
        executed = results_dir(slug) / f"{profile}-seed0.ipynb"
        if not executed.exists():
            missing.append(slug)
            continue
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


def render() -> int:
    """Jupyter Book (execution off) with warnings as errors, nitpicky, keep going; HTML in ``_build/html``."""
    cmd = [sys.executable, "-m", "jupyter_book", "build", str(STAGE), "--path-output", str(REPO_ROOT),
           "--builder", "html", "-W", "-n", "--keep-going"]
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    if jb:
        cmd[:3] = [jb]
    return subprocess.call(cmd, cwd=REPO_ROOT)


def build(profile: str = "full", jobs: int = 2, timeout_s: int | None = None) -> int:
    """``make book``: execute what changed, stage, render. Non-zero when a chapter or the render failed."""
    failures = execute_changed(profile, jobs=jobs, timeout_s=timeout_s)
    if failures:
        print("\n".join(["book: these chapters failed:", *failures]), file=sys.stderr)
        return 1
    stage(profile)
    code = render()
    if code == 0:
        print(f"book: {REPO_ROOT / '_build' / 'html' / 'index.html'}")
    return code
