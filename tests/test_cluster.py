"""Sweeps and multi-seed runs on Dask (``repro.common.cluster``): a local cluster of two workers runs a chapter's
smoke profile over three seeds; a worker killed mid-run is replaced and its run retried; a run that always fails
is named while the others complete."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import cloudpickle
import pytest

from repro.common.cluster import Job, run_many
from repro.common.paths import chapter_slugs
from repro.common.runner import execute, inputs_hash
from repro.common.sweep import summarise, sweep

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/

SLUG = "rose_sosmd" if "rose_sosmd" in chapter_slugs() else chapter_slugs()[0]


@pytest.fixture()
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results"


def _toy_ledger(slug: str, params: dict) -> str:
    return json.dumps({"slug": slug, "profile": params["profile"], "seed": params["seed"], "complete": True,
                       "wall_s": 0.0, "provenance": {"commit": "x"}, "controls": [],
                       "claims": [{"id": "C1", "statement": "s", "verdict": "holds", "numbers": {"x": params["seed"]}}]})


def flaky_task(slug: str, params: dict, offline: bool = False, timeout_s: int | None = None) -> dict:
    """Kills its own worker process the first time it runs seed 1; always raises for seed 2."""
    marker = Path(os.environ["FLAKY_MARKER"])
    if params["seed"] == 1 and not marker.exists():
        marker.write_text("killed once")
        os._exit(1)
    if params["seed"] == 2:
        raise RuntimeError("this seed always fails")
    return {"slug": slug, "stem": f"{params['profile']}-seed{params['seed']}", "seconds": 0.0, "notebook": "{}",
            "ledger": _toy_ledger(slug, params)}


def test_a_killed_worker_is_replaced_and_a_failing_run_is_named(results, tmp_path, monkeypatch):
    monkeypatch.setenv("FLAKY_MARKER", str(tmp_path / "marker"))  # the workers are started after this
    jobs = [Job("toy", {"profile": "smoke", "seed": s}) for s in (0, 1, 2, 3)]
    errors = run_many(jobs, jobs=2, task=flaky_task)
    assert (tmp_path / "marker").exists(), "the worker was never killed: the test tested nothing"
    assert list(errors) == ["toy-smoke-seed2"] and "always fails" in errors["toy-smoke-seed2"]
    written = sorted(p.name for p in (results / "toy").glob("*.json"))
    assert written == ["smoke-seed0.json", "smoke-seed1.json", "smoke-seed3.json"]
    assert not list((results / "toy").glob("*.tmp"))


def test_a_smoke_sweep_on_a_local_cluster_matches_a_direct_run(results):
    summary = sweep(SLUG, [0, 1, 2], {"profile": "smoke"}, jobs=2)
    assert summary["errors"] == [] and summary["seeds"] == [0, 1, 2]
    ledgers = {s: json.loads((results / SLUG / f"smoke-seed{s}.json").read_text()) for s in (0, 1, 2)}
    assert all((results / SLUG / f"smoke-seed{s}.ipynb").exists() for s in (0, 1, 2))
    # each run's inputs hash lies beside its ledger (make reference takes only ledgers whose hash matches the code)
    assert all((results / SLUG / f"smoke-seed{s}.hash").read_text().strip()
               == inputs_hash(SLUG, {"profile": "smoke", "seed": s}) for s in (0, 1, 2))
    assert json.loads((results / SLUG / "sweep-smoke.json").read_text())["claims"] == summary["claims"]
    assert summary["claims"] == summarise(SLUG, "smoke", [0, 1, 2])["claims"]
    # the path every sweep took before Dask (one execute per seed, in this process) gives the same ledger
    ledger1 = dict(ledgers[1])
    execute(SLUG, {"profile": "smoke", "seed": 1})
    direct = json.loads((results / SLUG / "smoke-seed1.json").read_text())
    for kind in ("controls", "claims"):
        assert [(c["id"], c["verdict"], c["numbers"]) for c in direct.get(kind, [])] == \
               [(c["id"], c["verdict"], c["numbers"]) for c in ledger1.get(kind, [])]


def test_the_kernel_does_not_inherit_the_dask_workers_malloc_setting(results, monkeypatch):
    """Dask starts its workers with ``MALLOC_TRIM_THRESHOLD_`` set (the control: checked on a real local worker),
    which halves the speed of a kernel that allocates many mid-sized arrays; ``execute`` starts the kernel without
    it (papermill is replaced here by a stub that records the environment the kernel would get)."""
    import papermill

    from repro.common.cluster import client
    from repro.common.runner import MALLOC_TRIM

    with client(jobs=1) as c:
        assert list(c.run(lambda: os.environ.get(MALLOC_TRIM)).values()) == ["65536"]
    seen = {}

    def stub(*args, **kwargs):
        seen["env"] = os.environ.get(MALLOC_TRIM, "unset")
        raise KeyboardInterrupt  # stops execute() before anything is written

    monkeypatch.setenv(MALLOC_TRIM, "65536")
    monkeypatch.setattr(papermill, "execute_notebook", stub)
    with pytest.raises(KeyboardInterrupt):
        execute(SLUG, {"profile": "smoke", "seed": 0})
    assert seen == {"env": "unset"}
