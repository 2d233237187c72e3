"""Auto-checked exercises (exercises/NN_slug.ipynb, otter-assign format): every chapter that has them.

For each chapter: the reference solutions pass every check; every check catches its mutant (one plausible wrong
answer, kept in the check's config), so a check that cannot fail is caught; the student notebook that
``otter assign`` writes holds no solution code. Then ``make assign`` + ``make grade`` round-trip on one chapter:
the reference scores full marks, a notebook with the mutants scores less, a notebook that raises is graded (zero
on that exercise), not crashed. In-process checks need no kernel, so the per-chapter tests take seconds.
"""
from __future__ import annotations

import csv
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from repro.common import exercises as ex
from repro.common.paths import NOTEBOOKS, REPO_ROOT

SLUGS = ex.exercise_slugs()
ROUND_TRIP = "fmss"          # the chapter whose exercises go through make assign / make grade (numpy + cvxpy only)


@pytest.fixture(scope="module", params=SLUGS)
def run(request):
    """(master, reference namespace, snapshots before each question) for one chapter, executed once."""
    master = ex.parse(ex.master_path(request.param))
    env, snapshots = ex.reference_run(master)
    return master, env, snapshots


def test_there_are_exercises():
    assert SLUGS, "no exercises/NN_slug.ipynb found"


def test_checks_run_like_otter():
    """``run_check`` passes undefined names as None and counts any exception as a failure, as otter does."""
    check = ex.parse_check('"""  # BEGIN TEST CONFIG\nfailure_message: hint\nmutant: |\n  x = 2\n"""  # END TEST CONFIG\n'
                           "def test_x(x):\n    import math\n    assert math.isclose(x, 1.0)\n")
    assert check.name == "test_x" and check.failure_message == "hint" and check.mutant.strip() == "x = 2"
    assert ex.run_check(check, {"x": 1.0}) == (True, "")
    assert not ex.run_check(check, {"x": 2.0})[0]
    ok, msg = ex.run_check(check, {})
    assert not ok and "TypeError" in msg


@pytest.mark.parametrize("slug", SLUGS)
def test_master_is_well_formed(slug):
    path = ex.master_path(slug)
    assert (NOTEBOOKS / path.name).exists(), f"{path.name} has no chapter notebooks/{path.name}"
    master = ex.parse(path)
    cfg = master.config
    assert cfg.get("name") == path.stem, "ASSIGNMENT CONFIG name must be the notebook's stem"
    assert cfg.get("tests", {}).get("ok_format") is False, "checks are exception-based (tests: ok_format: false)"
    assert len(master.questions) >= 2, "at least two auto-checked exercises per chapter"
    labels = set(re.findall(r":label:\s*\S+-(ex\d+)", (NOTEBOOKS / path.name).read_text()))
    for q in master.questions.values():
        assert q.name in labels, f"{q.name} is not one of the chapter's exercises ({sorted(labels)})"
        assert q.solution_cells, f"{q.name} has no solution cell"
        assert q.checks, f"{q.name} has no checks"
        for c in q.checks:
            assert c.mutant.strip(), f"{q.name}.{c.name}: every check needs a mutant (a wrong answer it catches)"
            assert c.failure_message.strip(), f"{q.name}.{c.name}: every check needs a hint (failure_message)"
            assert '"' not in c.failure_message and "\\" not in c.failure_message, \
                f"{q.name}.{c.name}: otter writes the hint into a double-quoted string; no quotes or backslashes"
    nb = json.loads(path.read_text())
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), "strip outputs"


def test_reference_passes_every_check(run):
    master, env, _ = run
    failed = {f"{q.name}.{c.name}": msg for q in master.questions.values() for c in q.checks
              for ok, msg in [ex.run_check(c, env)] if not ok}
    assert not failed, f"{master.slug}: the reference solution fails {failed}"


def test_every_check_catches_its_mutant(run):
    master, _, snapshots = run
    missed = []
    for q in master.questions.values():
        for c in q.checks:
            ok, _ = ex.run_check(c, ex.mutant_run(master, snapshots, q.name, c.mutant))
            if ok:
                missed.append(f"{q.name}.{c.name}")
    assert not missed, f"{master.slug}: these checks pass a wrong answer: {missed}"


@pytest.mark.parametrize("slug", SLUGS)
def test_student_notebook_holds_no_solution(slug, tmp_path):
    out = ex.assign(slug, tmp_path / slug)
    master = ex.parse(ex.master_path(slug))
    student = json.loads(next((out / "student").glob("*.ipynb")).read_text())
    code = "\n".join("".join(c["source"]) for c in student["cells"] if c["cell_type"] == "code")
    assert "SOLUTION" not in code and "BEGIN TEST" not in code
    leaked = [line for line in ex.solution_lines(master) if len(line) > 6 and line in code]
    assert not leaked, f"solution code in the student notebook: {leaked[:3]}"
    assert all(not c.get("outputs") for c in student["cells"] if c["cell_type"] == "code")
    for q in master.questions:
        assert f'grader.check("{q}")' in code, f"no check cell for {q}"
    tests = student["metadata"]["otter"]["tests"]
    assert set(tests) == set(master.questions), "the student notebook carries the public checks"
    assert ex.autograder_zip(out).exists()


def _write_broken(src: Path, dst: Path, master: ex.Master) -> None:
    """A submission derived from the reference notebook: the first question's answer cell raises before it defines
    anything, and every other question's answer cell ends with its checks' mutants (plausible wrong answers).
    An answer cell is the last code cell before the question's ``grader.check`` cell."""
    nb = json.loads(src.read_text())
    cells = nb["cells"]
    first = next(iter(master.questions))
    for i, cell in enumerate(cells):
        m = re.search(r'grader\.check\("(\w+)"\)', "".join(cell["source"]))
        if cell["cell_type"] != "code" or not m:
            continue
        j = max(k for k in range(i) if cells[k]["cell_type"] == "code")
        text = "".join(cells[j]["source"])
        if m.group(1) == first:
            text = 'raise RuntimeError("a student bug")\n' + text
        else:
            text += "\n" + "\n".join(c.mutant for c in master.questions[m.group(1)].checks)
        cells[j]["source"] = text
    dst.write_text(json.dumps(nb))


def test_assign_and_grade_round_trip(tmp_path):
    """One kernel run per submission (the slow part), so two submissions: the reference, and one that raises in
    its first exercise and answers the others wrongly."""
    env = {**os.environ, "REPRO_ASSIGN": str(tmp_path / "assign")}
    make = ["make", "-s", "--no-print-directory", "-C", str(REPO_ROOT)]
    subprocess.run([*make, "assign", f"NB={ROUND_TRIP}"], env=env, check=True, capture_output=True, text=True)
    out = tmp_path / "assign" / ROUND_TRIP
    master = ex.parse(ex.master_path(ROUND_TRIP))
    ref = next((out / "autograder").glob("*.ipynb"))
    subs = tmp_path / "submissions"
    subs.mkdir()
    (subs / "reference.ipynb").write_text(ref.read_text())
    _write_broken(ref, subs / "broken.ipynb", master)
    csv_path = tmp_path / "grades.csv"
    r = subprocess.run([*make, "grade", f"NB={ROUND_TRIP}", f"DIR={subs}", f"OUT={csv_path}"], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {row["submission"]: row for row in csv.DictReader(csv_path.open())}
    assert set(rows) == {"reference.ipynb", "broken.ipynb"}
    qs = list(master.questions)
    ref_row, bad = rows["reference.ipynb"], rows["broken.ipynb"]
    full = float(ref_row["possible"])
    assert float(ref_row["total"]) == full > 0 and not ref_row["error"], ref_row
    assert not bad["error"], f"a raising notebook must be graded, not crash the grader: {bad}"
    assert float(bad[qs[0]]) == 0.0, "the exercise whose cell raised scores zero"
    assert all(float(bad[q]) < float(ref_row[q]) for q in qs[1:]), f"wrong answers must score less: {bad}"
    assert float(bad["total"]) < full
