"""The chapter contract of DESIGN.md, as the project's own test (what ../shared/tools/check_contract.py checks,
and a little more): every notebook has its library package, tests, TOC entry, bibliography entry, one
parameters cell whose names are exactly its Config's fields, the contract's sections, a ledger cell marked for
the determinism check, and no outputs in git."""
from __future__ import annotations

import dataclasses
import importlib
import json
import re

import nbformat
import pytest

from repro.common.nbtools import parameter_names
from repro.common.paths import REPO_ROOT, chapter_slugs, notebook_path

SLUGS = chapter_slugs()
SECTIONS = ["claims we test", "parameters", "setting", "results", "claims ledger", "exercises", "references"]


def test_there_are_chapters():
    assert SLUGS, "no notebooks/NN_slug.ipynb found"


@pytest.mark.parametrize("slug", SLUGS)
def test_chapter_has_every_part(slug):
    toc = (REPO_ROOT / "_toc.yml").read_text()
    bib = (REPO_ROOT / "book" / "references.bib").read_text()
    nb_path = notebook_path(slug)
    assert (REPO_ROOT / "lib" / "repro" / slug / "__init__.py").exists()
    assert (REPO_ROOT / "tests" / f"test_{slug}.py").exists()
    assert f"notebooks/{nb_path.stem}" in toc
    assert re.search(rf"@\w+\{{[^,]*{slug}", bib), f"book/references.bib has no entry whose key contains {slug}"
    if list((REPO_ROOT / "lib" / "repro" / slug).glob("_kernels*.cpp")):
        assert (REPO_ROOT / "benchmarks" / f"bench_{slug}.py").exists()


@pytest.mark.parametrize("slug", SLUGS)
def test_notebook_follows_the_contract(slug):
    nb = nbformat.read(notebook_path(slug), as_version=4)
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for section in SECTIONS:
        assert re.search(rf"^#+\s*{section}", md, re.I | re.M), f"no '{section}' heading"
    assert re.search(r"\{exercise\}", md) and re.search(r"\{solution\}", md), "exercises need a hidden solution"
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    assert sum("nbval-check-output" in t for t in tags) >= 1, "mark the ledger cell for the determinism check"
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "ledger.save()" in code


@pytest.mark.parametrize("slug", SLUGS)
def test_parameters_match_config(slug):
    params = parameter_names(notebook_path(slug))
    assert params.get("profile") == "full" and params.get("seed") == 0
    config = importlib.import_module(f"repro.{slug}").Config
    fields = {f.name for f in dataclasses.fields(config)}
    assert set(params) == fields, f"parameters cell vs Config: {sorted(set(params) ^ fields)}"
    assert all(v is None for k, v in params.items() if k not in ("profile", "seed"))
    assert set(config.PROFILES) == {"full", "smoke"}
    claims = importlib.import_module(f"repro.{slug}").CLAIMS
    assert claims and all(re.fullmatch(r"C\d+[a-z]?", k) for k in claims)  # the card's ids, e.g. C1a


@pytest.mark.parametrize("slug", SLUGS)
def test_notebook_in_git_has_no_outputs(slug):
    nb = json.loads(notebook_path(slug).read_text())
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, f"cells {dirty} keep outputs; run python -m repro.common.nbtools strip"


# ---------------------------------------------------------------------------------------------- negative twins
_TWIN = re.compile(r"negative_twin\(([^)]*)\)")
_PENDING = re.compile(r"^NEGATIVE_TWINS_PENDING\s*=\s*\(([^)]*)\)", re.M)


def negative_twins(slug: str) -> tuple[set[str], set[str]]:
    """The control ids that ``tests/test_<slug>.py`` gives a negative twin (``@pytest.mark.negative_twin("K1")``)
    and those it declares still without one (``NEGATIVE_TWINS_PENDING = ("K2", ...)``), read statically."""
    text = (REPO_ROOT / "tests" / f"test_{slug}.py").read_text()
    twins = {k for m in _TWIN.finditer(text) for k in re.findall(r"['\"](\w+)['\"]", m.group(1))}
    m = _PENDING.search(text)
    pending = set(re.findall(r"['\"](\w+)['\"]", m.group(1))) if m else set()
    return twins, pending


@pytest.mark.parametrize("slug", SLUGS)
def test_every_control_has_a_negative_twin(slug):
    """Issue 41, rule 1: every control of the chapter has a test showing that it fails on a blinded apparatus, or
    is listed as still pending in the chapter's test module (so the gap is visible and can only shrink)."""
    controls = set(importlib.import_module(f"repro.{slug}.verdicts").CONTROLS)
    twins, pending = negative_twins(slug)
    assert not (twins - controls), f"negative twins for unknown controls: {sorted(twins - controls)}"
    assert not (pending - controls), f"NEGATIVE_TWINS_PENDING names unknown controls: {sorted(pending - controls)}"
    assert not (twins & pending), f"controls both twinned and pending (remove them from the pending list): " \
                                  f"{sorted(twins & pending)}"
    assert controls == twins | pending, f"controls with no negative twin: {sorted(controls - twins - pending)}"


def test_readme_lists_every_chapter():
    """Issue 40: the README's chapters table names every chapter, in order (it listed 8 of 19)."""
    readme = (REPO_ROOT / "README.md").read_text()
    listed = re.findall(r"^\| (\d\d) \| [^|]+ \|", readme, re.M)
    assert listed == [notebook_path(s).stem[:2] for s in SLUGS]
