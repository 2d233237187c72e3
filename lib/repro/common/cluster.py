"""Run many chapter executions on Dask: a local cluster by default, an existing one when given its address.

Every multi-run command (``make sweep``, ``make book``, ``make book SEEDS=0-4``) goes through :func:`run_many`.
A task executes one (chapter, parameters) on a worker in a private, temporary results folder and returns the
*contents* of the executed notebook and its ledger; the client writes them under its own ``results/``
atomically. Nothing depends on a filesystem shared between client and workers: a worker needs only this checkout
and its ``.venv`` (see the README, "A seed sweep on a cluster").

- Locally: a ``LocalCluster`` of ``jobs`` worker processes, one thread each (notebooks run one thread each too).
- ``scheduler="tcp://host:8786"``: the same tasks go to that cluster's workers.
- A task lost with its worker is rescheduled by Dask; a task that raises is retried once (``retries=1``); a run
  that fails twice is reported by name and the others still complete.
- Ctrl-C cancels what is left; what completed was written whole, what did not left nothing behind.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .claims import write_json_atomic
from .paths import results_dir
from .runner import execute


@dataclass
class Job:
    """One execution: a chapter, its notebook parameters, and (for the book) the inputs hash to store."""

    slug: str
    params: dict[str, Any]
    digest: str = ""

    @property
    def stem(self) -> str:
        """``<profile>-seed<seed>``: the name of its notebook and ledger (parameters validated before submitting)."""
        return f"{self.params.get('profile', 'full')}-seed{self.params.get('seed', 0)}"

    @property
    def key(self) -> str:
        return f"{self.slug}-{self.stem}"


def run_task(slug: str, params: dict[str, Any], offline: bool = False, timeout_s: int | None = None) -> dict:
    """Executed on a worker: run the chapter into a private results folder and return what it wrote.

    With ``offline`` the notebook's kernel runs in a new network namespace with no interface up (``unshare -rn``),
    so a chapter that tries to download anything fails.
    """
    with tempfile.TemporaryDirectory(prefix="repro-task-") as tmp:
        t0 = time.perf_counter()
        old = os.environ.get("REPRO_RESULTS")
        os.environ["REPRO_RESULTS"] = tmp  # the kernel inherits it: the ledger goes to the private folder
        try:
            execute(slug, params, timeout_s=timeout_s, offline=offline)
        finally:
            if old is None:
                os.environ.pop("REPRO_RESULTS", None)
            else:
                os.environ["REPRO_RESULTS"] = old
        stem = Job(slug, params).stem
        out = Path(tmp) / slug
        return {"slug": slug, "stem": stem, "seconds": time.perf_counter() - t0,
                "notebook": (out / f"{stem}.ipynb").read_text(), "ledger": (out / f"{stem}.json").read_text()}


def store(result: dict, digest: str = "") -> Path:
    """Write a task's notebook and ledger under this machine's ``results/<slug>/`` (each atomically), and the
    inputs hash when given; return the ledger's path."""
    folder = results_dir(result["slug"])
    stem = result["stem"]
    hash_file = folder / f"{stem}.hash"
    hash_file.unlink(missing_ok=True)
    nb_path = folder / f"{stem}.ipynb"
    fd, tmp = tempfile.mkstemp(prefix=f".{nb_path.name}.", suffix=".tmp", dir=folder)
    with os.fdopen(fd, "w") as fh:
        fh.write(result["notebook"])
    os.replace(tmp, nb_path)
    ledger = write_json_atomic(folder / f"{stem}.json", json.loads(result["ledger"]))
    if digest:
        hash_file.write_text(digest + "\n")
    return ledger


def client(jobs: int = 2, scheduler: str | None = None):
    """A Dask client: to ``scheduler`` when given, else to a new local cluster of ``jobs`` one-thread processes."""
    import logging

    from dask.distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.WARNING)  # runs are reported one line each, by run_many
    if scheduler:
        return Client(scheduler, timeout="30s")
    cluster = LocalCluster(n_workers=max(1, jobs), threads_per_worker=1, processes=True, dashboard_address=":0",
                           silence_logs=50)
    return Client(cluster)


def run_many(jobs_list: list[Job], *, jobs: int = 2, scheduler: str | None = None, offline: bool = False,
             timeout_s: int | None = None, task: Callable[..., dict] = run_task,
             on_done: Callable[[Job, dict], None] | None = None) -> dict[str, str]:
    """Run every job on Dask, store each result as it arrives; return ``{job key: error}`` for those that failed.

    ``task(slug, params, offline, timeout_s)`` is :func:`run_task` unless a test substitutes another.
    """
    if not jobs_list:
        return {}
    from dask.distributed import as_completed
    from tqdm.auto import tqdm

    errors: dict[str, str] = {}
    with client(jobs=min(jobs, len(jobs_list)), scheduler=scheduler) as c:
        for job in jobs_list:
            for suffix in (".json", ".hash"):  # an old ledger must not pass for this run's
                (results_dir(job.slug) / f"{job.stem}{suffix}").unlink(missing_ok=True)
        # Only as many runs are in flight as the cluster has threads; the next is submitted when one ends.
        # Submitted all at once, each run is its own task group (one task each), which Dask assigns to workers
        # eagerly at submission: a worker that ended its share early then sat idle while the other still had a
        # queue (a fifth of a smoke book's 2-worker time was idle, measured).
        # (The thread count is read again after each run, so workers that join a remote cluster later are used.)
        pending = list(reversed(jobs_list))
        futures: dict = {}
        running = as_completed()

        def top_up() -> None:
            slots = max(1, sum(c.nthreads().values()))
            while pending and sum(not f.done() for f in futures) < slots:
                job = pending.pop()
                fut = c.submit(task, job.slug, job.params, offline, timeout_s, key=f"{job.key}-{time.time_ns()}",
                               retries=1, pure=False)
                futures[fut] = job
                running.add(fut)

        top_up()
        bar = tqdm(total=len(jobs_list), desc="runs", unit="run", file=sys.stdout, disable=None)
        try:
            for fut in running:
                job = futures[fut]
                top_up()
                try:
                    result = fut.result()
                except Exception as exc:  # noqa: BLE001 - every run is reported, the others go on
                    errors[job.key] = f"{type(exc).__name__}: {exc}"
                    bar.write(f"  {job.key}: FAILED — {errors[job.key]}")
                else:
                    store(result, job.digest)
                    bar.write(f"  {job.key}: {result['seconds']:.1f} s")
                    if on_done:
                        on_done(job, result)
                bar.update()
        except KeyboardInterrupt:
            pending.clear()
            c.cancel(list(futures))
            raise
        finally:
            bar.close()
    return errors
