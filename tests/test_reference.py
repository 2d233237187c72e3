"""Issue 40: reference ledgers shipped in git (capture, current/stale, reproduced-verdicts line) and the cross-set-up
comparison behind ``make crosscheck``."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

import pytest

from repro.common import BaseConfig, Ledger, knob
from repro.common import book, crosscheck, reference
from repro.common.paths import chapter_slugs, results_dir
from repro.common.runner import inputs_hash

SLUG = chapter_slugs()[0]


@dataclass(frozen=True)
class ChapterConfig(BaseConfig):
    slug: ClassVar[str] = SLUG
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": {}}
    n: int = knob(10, ge=1)


@pytest.fixture()
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(reference, "REFERENCE", tmp_path / "reference")
    return tmp_path


def _run(seed: int, ok: bool = True, store_hash: str | None = "current") -> None:
    """A ledger as ``make run`` leaves it: the JSON and, unless told otherwise, the inputs hash beside it."""
    ledger = Ledger(ChapterConfig.from_profile("full", seed=seed), {"C1": "Name: a claim"},
                    controls={"K1": "Trained: the model learned"})
    ledger.control("K1", holds=True, threshold="gain > 0", numbers={"gain": 1.0})
    ledger.record("C1", holds=ok, threshold="x > 0", numbers={"x": 1.0 if ok else -1.0}, needs=("K1",))
    ledger.save()
    if store_hash:
        digest = inputs_hash(SLUG, {"profile": "full", "seed": seed}) if store_hash == "current" else store_hash
        (results_dir(SLUG) / f"full-seed{seed}.hash").write_text(digest + "\n")


def test_capture_copies_current_ledgers_and_refuses_others(dirs):
    _run(0), _run(1)
    paths = reference.capture(SLUG)
    assert [p.name for p in paths] == ["full-seed0.json", "full-seed1.json"]
    ref = json.loads(paths[0].read_text())
    assert ref["reference"]["inputs_hash"] == inputs_hash(SLUG, {"profile": "full", "seed": 0})
    assert [c["verdict"] for c in ref["claims"]] == ["holds"]
    # a ledger of other code, or one whose run stored no hash, is never taken as a reference
    _run(2, store_hash="0" * 64)
    with pytest.raises(ValueError, match="seed 2: its ledger comes from other code"):
        reference.capture(SLUG, [0, 2])
    _run(3, store_hash=None)
    with pytest.raises(ValueError, match="seed 3: its run stored no inputs hash"):
        reference.capture(SLUG, [3])
    with pytest.raises(ValueError, match="seed 7: no ledger"):
        reference.capture(SLUG, [7])
    # a refused capture wrote and deleted nothing
    assert sorted(p.name for p in reference.reference_dir(SLUG).iterdir()) == ["full-seed0.json", "full-seed1.json"]


def test_status_tells_current_from_stale(dirs):
    _run(0), _run(1)
    reference.capture(SLUG)
    st = reference.status(SLUG)
    assert [r["seed"] for r in st["current"]] == [0, 1] and st["stale"] == []
    path = reference.reference_dir(SLUG) / "full-seed1.json"
    data = json.loads(path.read_text())
    data["reference"]["inputs_hash"] = "f" * 64  # as if the chapter's code changed after the run
    path.write_text(json.dumps(data))
    st = reference.status(SLUG)
    assert [r["seed"] for r in st["current"]] == [0] and [r["seed"] for r in st["stale"]] == [1]
    assert st["since"].startswith(("commit ", "uncommitted changes"))


def test_reproduced_counts_agreeing_verdicts_and_names_the_others(dirs):
    _run(0)
    reference.capture(SLUG)
    ref = reference.load(SLUG)[0]
    same = reference.reproduced([SLUG], {SLUG: ref})
    assert (same["same"], same["n"]) == (2, 2)
    flipped = json.loads(json.dumps(ref))
    flipped["claims"][0]["verdict"] = "fails"
    res = reference.reproduced([SLUG, chapter_slugs()[1]], {SLUG: flipped, chapter_slugs()[1]: None})
    assert (res["same"], res["n"]) == (1, 2)
    text = reference.reproduced_text(res)
    assert text.startswith("reproduced 1/2 verdicts") and f"{SLUG} C1: fails here, holds in the reference" in text
    assert f"{chapter_slugs()[1]}: not compared (not run here)" in text
    assert "| 1/2 | C1: fails / holds |" in reference.reproduced_markdown(res)


def test_the_across_seeds_section_falls_back_on_current_references(dirs):
    _run(0), _run(1, ok=False)
    reference.capture(SLUG)
    section = book.reference_section(SLUG, "full")
    assert "### Across seeds" in section and "reference ledgers" in section and "holds 1/2 · seed-dependent" in section
    assert book.reference_section(SLUG, "smoke") == ""  # references are of the full profile
    for path in reference.reference_dir(SLUG).iterdir():
        data = json.loads(path.read_text())
        data["reference"]["inputs_hash"] = "f" * 64
        path.write_text(json.dumps(data))
    stale = book.reference_section(SLUG, "full")
    assert "are stale since" in stale and "holds" not in stale


def test_crosscheck_flags_a_verdict_that_differs_and_measures_moved_numbers():
    a = {"controls": [{"id": "K1", "verdict": "passed", "numbers": {"gain": 1.0}}],
         "claims": [{"id": "C1", "verdict": "holds", "numbers": {"x": 2.0, "label": "n/a"}}]}
    b = json.loads(json.dumps(a))
    rows = crosscheck.compare_ledgers(a, b)
    assert all(r["agree"] for r in rows) and max(r["max_rel_diff"] for r in rows) == 0
    assert not crosscheck.failed({"toy": rows})
    b["claims"][0].update(verdict="fails", numbers={"x": 1.0})
    rows = crosscheck.compare_ledgers(a, b)
    assert [r["agree"] for r in rows] == [True, False] and rows[1]["max_rel_diff"] == pytest.approx(0.5)
    assert crosscheck.failed({"toy": rows}) and "C1: holds (book) vs fails (other-cpu)" in \
        crosscheck.summary_line("toy", rows)
