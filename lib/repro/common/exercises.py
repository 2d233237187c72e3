"""Auto-checked exercises: each chapter's companion notebook ``exercises/NN_slug.ipynb`` in otter-assign format.

A companion notebook (the *master*) holds at least two of its chapter's exercises in a form a machine can check: a
setup cell that calls the chapter's library at tiny sizes, then per exercise a ``# BEGIN QUESTION`` block with the
question, the reference solution between ``# BEGIN SOLUTION`` / ``# END SOLUTION``, and exception-based tests
(``def test_…(names…): assert …, "hint"``) that compare with the library's own computation within a tolerance or
check a property, a shape, a sign — never the text of one solution. Every test cell's config also carries a
``mutant``: code run after the reference solution that makes one plausible mistake, which that test must catch.

This module reads masters, checks them in-process (fast: no kernel), and wraps ``otter assign`` / ``otter run``:

    python -m repro.common.exercises assign [SLUG ...]             # -> _build/assign/<slug>/{student,autograder}
    python -m repro.common.exercises grade SLUG DIR [--out CSV]    # local grading, no Docker -> one CSV row each

Outputs go under ``_build/assign/`` (``REPRO_ASSIGN`` moves it; the tests use a temporary folder).
Grading runs each submission with ``otter run`` (the submission executes in this environment's ``python3`` kernel,
a cell that raises does not stop it); a submission otter cannot grade at all scores 0 on every exercise and the
error goes in the CSV's ``error`` column.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .paths import REPO_ROOT

EXERCISES_DIR = REPO_ROOT / "exercises"
ASSIGN_DIR = Path(os.environ.get("REPRO_ASSIGN", REPO_ROOT / "_build" / "assign"))

_CONFIG_BEGIN = re.compile(r'^\s*(?:\w+\s*=\s*)?"""\s*#\s*BEGIN\s+TEST\s+CONFIG', re.I)
_CONFIG_END = re.compile(r'^\s*"""\s*#\s*END\s+TEST\s+CONFIG', re.I)
_SOLUTION_LINE = re.compile(r"#\s*SOLUTION\s*$")


@dataclass
class Check:
    """One test cell: the function's source (without its config), its config (hint, mutant, points)."""

    source: str
    failure_message: str
    mutant: str
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        m = re.search(r"^def\s+(\w+)", self.source, re.M)
        return m.group(1) if m else "<no function>"


@dataclass
class Question:
    """One auto-checked exercise: its otter name (``ex2`` checks the chapter's ``<slug>-ex2``), its cells."""

    name: str
    points: Any
    solution_cells: list[str]
    checks: list[Check]


@dataclass
class Master:
    """A parsed master notebook: code cells in order, each tagged with the question it belongs to (or None)."""

    path: Path
    slug: str
    config: dict[str, Any]
    cells: list[tuple[str | None, str]]          # (question name or None, code) for every non-test code cell
    questions: dict[str, Question]


def _source(cell: dict) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def exercise_slugs() -> list[str]:
    """Slugs of the chapters that have a companion exercises notebook (``exercises/NN_slug.ipynb``)."""
    return [p.stem.split("_", 1)[1] for p in sorted(EXERCISES_DIR.glob("[0-9][0-9]_*.ipynb"))]


def master_path(slug: str, root: Path | None = None) -> Path:
    """The master notebook of ``slug`` (``exercises/NN_slug.ipynb``)."""
    hits = sorted((root or EXERCISES_DIR).glob(f"[0-9][0-9]_{slug}.ipynb"))
    if len(hits) != 1:
        raise FileNotFoundError(f"no exercises notebook for {slug!r} in {root or EXERCISES_DIR} "
                                f"(have: {', '.join(exercise_slugs()) or 'none'})")
    return hits[0]


def parse_check(source: str) -> Check:
    """Split a test cell into its YAML config (``failure_message``, ``mutant``, …) and the test function."""
    lines = source.splitlines()
    config: dict[str, Any] = {}
    if lines and _CONFIG_BEGIN.match(lines[0]):
        end = next(i for i, line in enumerate(lines) if i > 0 and _CONFIG_END.match(line))
        config = yaml.safe_load("\n".join(lines[1:end])) or {}
        lines = lines[end + 1:]
    return Check("\n".join(lines).strip() + "\n", str(config.get("failure_message", "")),
                 str(config.get("mutant", "")), config)


def parse(path: Path) -> Master:
    """Read a master notebook into its questions, solution cells and checks."""
    nb = json.loads(Path(path).read_text())
    config: dict[str, Any] = {}
    cells: list[tuple[str | None, str]] = []
    questions: dict[str, Question] = {}
    current: Question | None = None
    in_tests = False
    for cell in nb["cells"]:
        src = _source(cell)
        head = src.lstrip().splitlines()[0].strip().upper() if src.strip() else ""
        if cell["cell_type"] == "raw":
            body = "\n".join(src.lstrip().splitlines()[1:])
            if head.startswith("# ASSIGNMENT CONFIG"):
                config = yaml.safe_load(body) or {}
            elif head.startswith("# BEGIN QUESTION"):
                q = yaml.safe_load(body) or {}
                current = Question(str(q["name"]), q.get("points"), [], [])
                questions[current.name] = current
            elif head.startswith("# BEGIN TESTS"):
                in_tests = True
            elif head.startswith("# END TESTS"):
                in_tests = False
            elif head.startswith("# END QUESTION"):
                current = None
            continue
        if cell["cell_type"] != "code":
            continue
        if in_tests:
            assert current is not None, f"{path}: a test cell outside a question"
            current.checks.append(parse_check(src))
        else:
            cells.append((current.name if current else None, src))
            if current is not None:
                current.solution_cells.append(src)
    return Master(Path(path), Path(path).stem.split("_", 1)[1], config, cells, questions)


def solution_lines(master: Master) -> list[str]:
    """The code lines a student must not see: those between BEGIN/END SOLUTION and those marked ``# SOLUTION``."""
    out = []
    for q in master.questions.values():
        for src in q.solution_cells:
            inside = False
            for line in src.splitlines():
                s = line.strip()
                if re.match(r"#\s*BEGIN\s+SOLUTION", s, re.I):
                    inside = True
                elif re.match(r"#\s*END\s+SOLUTION", s, re.I):
                    inside = False
                elif inside and s and not s.startswith("#"):
                    out.append(s)
                elif _SOLUTION_LINE.search(s):
                    out.append(s.split("=", 1)[1].split("#")[0].strip() if "=" in s else s)
    return out


# ------------------------------------------------------------------------------------------ in-process checking
def _exec(code: str, env: dict, name: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, name, "exec"), env)


def reference_run(master: Master) -> tuple[dict, dict[str, dict]]:
    """Execute the master's code cells (setup and reference solutions) in one namespace, as a kernel would.

    Returns the final namespace and, per question, a shallow copy of the namespace just before its first
    solution cell (so a mutant can be tried without re-running the setup; solution cells therefore must not
    change setup objects in place — a good rule anyway for a cell a student re-runs). Exceptions propagate:
    the reference must run cleanly.
    """
    env: dict[str, Any] = {"__name__": "__main__"}
    snapshots: dict[str, dict] = {}
    for i, (qname, code) in enumerate(master.cells):
        if qname is not None and qname not in snapshots:
            snapshots[qname] = dict(env)
        _exec(code, env, f"<{master.slug} cell {i}>")
    return env, snapshots


def mutant_run(master: Master, snapshots: dict[str, dict], question: str, mutant: str) -> dict:
    """The namespace after ``question``'s reference solution followed by ``mutant`` (one plausible mistake)."""
    env = dict(snapshots[question])
    for code in master.questions[question].solution_cells:
        _exec(code, env, f"<{master.slug} {question}>")
    _exec(mutant, env, f"<{master.slug} mutant of {question}>")
    return env


def run_check(check: Check, env: dict) -> tuple[bool, str]:
    """Run one exception-based test the way otter does: in a fresh module namespace, each parameter of the
    test function taken from the notebook's globals (``None`` when undefined). Returns (passed, message)."""
    ns: dict[str, Any] = {"__name__": "otter_test"}
    exec(compile(check.source, f"<test {check.name}>", "exec"), ns)
    func = ns[check.name]
    import inspect

    kwargs = {p: (env if p == "env" else env.get(p)) for p in inspect.signature(func).parameters}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            func(**kwargs)
    except Exception as e:  # noqa: BLE001 - any exception is a failed check, as in otter
        return False, f"{type(e).__name__}: {e}"
    return True, ""


# ------------------------------------------------------------------------------------------ otter wrappers
def assign(slug: str, out: Path | None = None, *, root: Path | None = None, run_tests: bool = False) -> Path:
    """``otter assign`` the master of ``slug`` into ``out`` (default ``_build/assign/<slug>``): ``student/``
    (no solutions, outputs cleared, public checks in the notebook's metadata) and ``autograder/`` (the
    reference notebook and ``autograder.zip``). Returns ``out``."""
    from otter.assign import main as otter_assign

    master = master_path(slug, root)
    out = Path(out or ASSIGN_DIR / slug)
    if out.exists():
        import shutil

        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.redirect_stdout(io.StringIO()) as buf:
        try:
            otter_assign(str(master), str(out), no_pdfs=True, no_run_tests=not run_tests)
        except Exception:
            sys.stderr.write(buf.getvalue())
            raise
    return out


def autograder_zip(assign_dir: Path) -> Path:
    """The autograder bundle written by :func:`assign`."""
    zips = sorted(Path(assign_dir, "autograder").glob("*.zip"))
    if not zips:
        raise FileNotFoundError(f"no autograder zip under {assign_dir}/autograder: run `make assign` first")
    return zips[-1]


def grade_one(submission: Path, zip_path: Path, questions: list[str]) -> dict[str, Any]:
    """Grade one submission with ``otter run`` (no container), in this process. A crash of the grader itself
    (an unreadable notebook, say) scores 0, with the reason in ``error``."""
    from otter.run import main as otter_run

    row: dict[str, Any] = {"submission": Path(submission).name, **{q: 0.0 for q in questions},
                           "total": 0.0, "possible": 0.0, "error": ""}
    try:
        with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
            res = otter_run(str(submission), autograder=str(zip_path), output_dir=tmp, no_logo=True)
        if res.catastrophic_error:
            row["error"] = f"{type(res.catastrophic_error).__name__}: {res.catastrophic_error}"
        for q in questions:
            if q in res.results:
                row[q] = float(res.results[q].score)
        row["total"] = float(sum(row[q] for q in questions))
    except Exception as e:  # noqa: BLE001 - one bad submission must not stop the others
        row["error"] = f"{type(e).__name__}: {e}".splitlines()[0]
    return row


def grade_isolated(submission: Path, zip_path: Path, questions: list[str], timeout: float) -> dict[str, Any]:
    """:func:`grade_one` in a child process that is killed after ``timeout`` seconds (a submission that loops
    forever scores 0 with ``error`` saying so, and the others are still graded). The kernel it started exits with
    it (ipykernel stops when its parent dies)."""
    import subprocess

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "row.json"
        cmd = [sys.executable, "-m", "repro.common.exercises", "_grade_one", str(submission), str(zip_path),
               ",".join(questions), str(out)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"submission": Path(submission).name, **{q: 0.0 for q in questions}, "total": 0.0,
                    "possible": 0.0, "error": f"timed out after {timeout:g} s"}
        if out.exists():
            return json.loads(out.read_text())
        err = (r.stderr.strip().splitlines() or [f"grader exited with {r.returncode}"])[-1]
        return {"submission": Path(submission).name, **{q: 0.0 for q in questions}, "total": 0.0,
                "possible": 0.0, "error": err}


def grade(slug: str, submissions: Path, out_csv: Path | None = None, *, assign_dir: Path | None = None,
          root: Path | None = None, timeout: float = 600.0) -> Path:
    """Grade every ``*.ipynb`` under ``submissions`` against ``slug``'s autograder, each in its own process with a
    ``timeout`` in seconds; write one CSV row per submission with the score of each exercise, the total, the
    points possible and any error. Returns the CSV's path."""
    assign_dir = Path(assign_dir or ASSIGN_DIR / slug)
    master = parse(master_path(slug, root))
    questions = list(master.questions)
    possible = float(sum(_points(q) for q in master.questions.values()))
    if not list(Path(assign_dir, "autograder").glob("*.zip")):
        assign(slug, assign_dir, root=root)          # grading needs the autograder bundle: make it first
    zip_path = autograder_zip(assign_dir)
    subs = sorted(p for p in Path(submissions).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    if not subs:
        raise FileNotFoundError(f"no .ipynb submissions under {submissions}")
    rows = []
    for sub in subs:
        row = grade_isolated(sub, zip_path, questions, timeout)
        row["possible"] = possible
        rows.append(row)
        print(f"{sub.name}: {row['total']:g}/{possible:g}" + (f"  ({row['error']})" if row["error"] else ""))
    out_csv = Path(out_csv or assign_dir / "grades.csv")
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    with open(out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["submission", *questions, "total", "possible", "error"])
        w.writeheader()
        w.writerows(rows)
    return out_csv


def _points(q: Question) -> float:
    if q.points is None:
        return float(len(q.checks))
    if isinstance(q.points, (list, tuple)):
        return float(sum(q.points))
    if isinstance(q.points, dict):
        return float(q.points.get("each", 1)) * len(q.checks)
    return float(q.points)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m repro.common.exercises", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("assign", help="student notebook + autograder zip under _build/assign/<slug>/")
    a.add_argument("slugs", nargs="*")
    a.add_argument("--run-tests", action="store_true", help="also let otter run the reference through its checks")
    g = sub.add_parser("grade", help="grade a folder of student notebooks locally into a CSV")
    g.add_argument("slug")
    g.add_argument("dir", type=Path)
    g.add_argument("--out", type=Path, default=None)
    g.add_argument("--timeout", type=float, default=600.0, help="seconds per submission (default 600)")
    one = sub.add_parser("_grade_one")                   # internal: one submission, in a child process
    for name in ("submission", "zip", "questions", "out"):
        one.add_argument(name)
    args = ap.parse_args(argv)
    if args.cmd == "assign":
        for slug in args.slugs or exercise_slugs():
            out = assign(slug, run_tests=args.run_tests)
            print(f"{slug}: {out.relative_to(REPO_ROOT) if out.is_relative_to(REPO_ROOT) else out}/student/ "
                  f"(hand out) · {autograder_zip(out).name} (grade)")
    elif args.cmd == "_grade_one":
        row = grade_one(Path(args.submission), Path(args.zip), args.questions.split(","))
        Path(args.out).write_text(json.dumps(row))
    else:
        print(f"grades: {grade(args.slug, args.dir, args.out, timeout=args.timeout)}")


if __name__ == "__main__":
    main()
