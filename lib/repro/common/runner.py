"""Run chapter notebooks: parameters parsed and validated first, papermill second, results written whole.

``make run NB=<slug> ARGS="-p seed 3 -y 'n_list: [256, 512]'"`` ends here. The parameters are parsed the way
papermill parses them (``-p`` guesses int/float/bool/None, ``-r`` keeps the raw string, ``-y`` reads
YAML), then checked by the chapter's own ``Config.from_profile`` *before* a kernel starts: papermill itself
only warns about an unknown name and runs a string where an int belongs.

The executed notebook goes to ``results/<slug>/<profile>-seed<seed>.ipynb`` through a temporary name; a
run that fails leaves ``…failed.ipynb`` beside it instead, never a file that looks complete.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from traitlets.config import Config as TraitletsConfig

from .paths import REPO_ROOT, notebook_path, results_dir
from .params import ConfigError
from .seeding import THREAD_VARS

MALLOC_TRIM = "MALLOC_TRIM_THRESHOLD_"  # see execute()


#: Modules of ``repro.common`` that build the site or drive runs but never run inside a notebook: changing
#: them does not change a chapter's results, so they stay out of :func:`inputs_hash`.
BUILD_ONLY = frozenset({"runner.py", "book.py", "cli.py", "sweep.py", "nbtools.py", "cluster.py", "robustness.py", "timing.py",
                        "exercises.py", "reference.py", "crosscheck.py"})


class RunError(RuntimeError):
    """A notebook failed; the message is one readable line (cell number, exception)."""


def _papermill_value(text: str) -> Any:
    """papermill's ``-p`` typing: True/False/None, then int, then float, else the string.

    One addition: a value written as a list, ``[256, 512]``, is read as YAML (papermill would pass the string).
    """
    if text.startswith("["):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            return text
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            continue
    return text


def parse_params(argv: list[str]) -> dict[str, Any]:
    """Parse ``-p NAME VALUE``, ``-r NAME VALUE`` and ``-y YAML`` (as papermill does) into a dict."""
    params: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        flag = argv[i]
        if flag in ("-p", "--parameters", "-r", "--parameters_raw"):
            if i + 2 >= len(argv):
                raise ConfigError(f"'{flag}' needs a name and a value, e.g. {flag} seed 3")
            name, value = argv[i + 1], argv[i + 2]
            params[name] = value if flag in ("-r", "--parameters_raw") else _papermill_value(value)
            i += 3
        elif flag in ("-y", "--parameters_yaml"):
            if i + 1 >= len(argv):
                raise ConfigError(f"'{flag}' needs a YAML mapping such as 'seed: 3'")
            loaded = yaml.safe_load(argv[i + 1])
            if not isinstance(loaded, dict):
                raise ConfigError(f"'-y' needs a YAML mapping such as 'seed: 3'; got {argv[i + 1]!r}")
            params.update(loaded)
            i += 2
        else:
            raise ConfigError(f"cannot read argument {flag!r}: use -p NAME VALUE, -r NAME VALUE or -y 'NAME: VALUE'")
    return params


def chapter_config(slug: str):
    """The chapter's ``Config`` class (``repro.<slug>.Config``)."""
    try:
        module = importlib.import_module(f"repro.{slug}")
    except ModuleNotFoundError as exc:
        raise ConfigError(f"chapter '{slug}' has no library package repro.{slug}: {exc}") from None
    return module.Config


def validate(slug: str, params: dict[str, Any]):
    """Build the chapter's config from notebook parameters (profile, seed, knobs); raises ConfigError."""
    params = dict(params)
    profile = params.pop("profile", "full")
    seed = params.pop("seed", 0)
    return chapter_config(slug).from_profile(profile, seed=seed, **params)


def inputs_hash(slug: str, params: dict[str, Any]) -> str:
    """What a chapter's result depends on: its notebook, the common and its own library code,
    ``requirements.txt`` and the parameters. ``make book`` re-executes a notebook only when this changes."""
    h = hashlib.sha256()
    files = [notebook_path(slug), REPO_ROOT / "requirements.txt", REPO_ROOT / "lib" / "repro" / "__init__.py"]
    for pkg in ("common", slug):
        files += sorted(p for p in (REPO_ROOT / "lib" / "repro" / pkg).rglob("*")
                        if p.suffix in (".py", ".cpp", ".h", ".hpp", ".json", ".csv", ".npz")
                        and p.name not in BUILD_ONLY)
    for path in files:
        h.update(str(path.relative_to(REPO_ROOT)).encode())
        h.update(path.read_bytes())
    h.update(json.dumps(params, sort_keys=True).encode())
    return h.hexdigest()


@dataclass
class RunResult:
    slug: str
    profile: str
    seed: int
    notebook: Path
    ledger: Path
    seconds: float


@functools.cache
def offline_kernel_manager():
    """The kernel manager papermill uses for an offline run: it starts the kernel, where every line of the
    notebook runs, in a new network namespace with no interface up (``unshare -rn``), so that a chapter that
    tries to download anything fails. papermill itself stays outside and talks to the kernel over Unix sockets.
    """
    from jupyter_client.manager import AsyncKernelManager

    class OfflineKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments=None):
            return ["unshare", "-rn", *super().format_kernel_cmd(extra_arguments)]

    return OfflineKernelManager


def kernel_config(sockets: Path) -> TraitletsConfig:
    """Kernel and papermill talk over Unix sockets in ``sockets``, not TCP: a run then needs no network interface
    at all, not even loopback (``unshare -n`` brings none up)."""
    return TraitletsConfig({"KernelManager": {"transport": "ipc", "ip": str(sockets / "kernel")}})


def execute(slug: str, params: dict[str, Any], *, out_dir: Path | None = None, timeout_s: int | None = None,
            threads: int = 1, offline: bool = False) -> RunResult:
    """Validate ``params``, execute the chapter with papermill, and return where its outputs went.

    With ``offline`` the kernel runs with no network (:func:`offline_kernel_manager`)."""
    cfg = validate(slug, params)  # fails here, before a kernel starts
    import papermill as pm

    for var in (*THREAD_VARS, "REPRO_THREADS"):  # REPRO_THREADS: what the notebook's seed_everything pins
        os.environ[var] = str(threads)
    # The kernel inherits this process's environment. A Dask worker's has MALLOC_TRIM_THRESHOLD_=65536 (Dask's
    # `distributed.nanny.pre-spawn-environ`), and setting it switches off glibc's dynamic mmap threshold: every
    # array over 128 KiB is then mmap'd, page-faulted in and unmapped again at each allocation. Measured on
    # 16 rltt's full profile: 54 % of the kernel's CPU time went to the system (5 % without), half the speed.
    os.environ.pop(MALLOC_TRIM, None)
    out_dir = Path(out_dir) if out_dir else results_dir(slug)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{cfg.profile}-seed{cfg.seed}"
    final, partial, failed = (out_dir / f"{stem}{s}.ipynb" for s in ("", ".partial", ".failed"))
    ledger = results_dir(slug) / f"{stem}.json"
    hash_file = results_dir(slug) / f"{stem}.hash"
    for stale in (final, failed, ledger, hash_file):  # an old ledger must not pass for this run's
        stale.unlink(missing_ok=True)
    params = {"profile": cfg.profile, "seed": cfg.seed, **{k: v for k, v in params.items() if k not in ("profile", "seed")}}
    digest = inputs_hash(slug, params)  # of the inputs as they are when the run starts
    t0 = time.perf_counter()
    sockets = Path(tempfile.mkdtemp(prefix="repro-kernel-"))
    extra = {"kernel_manager_class": offline_kernel_manager()} if offline else {}
    try:
        pm.execute_notebook(
            str(notebook_path(slug)), str(partial), parameters=params, kernel_name="python3",
            cwd=str(notebook_path(slug).parent), progress_bar=False, execution_timeout=timeout_s,
            config=kernel_config(sockets), **extra,
            # killed once the last cell has replied (the ledger was written, atomically, by a cell): a graceful
            # shutdown let the kernel tear down torch and matplotlib first, 1.5 s of CPU and 2.5 s of wall per run
            shutdown_kernel="immediate",
        )
    except pm.PapermillExecutionError as exc:
        partial.replace(failed)
        raise RunError(f"{slug}: cell {exc.exec_count} raised {exc.ename}: {exc.evalue} "
                       f"(executed copy: {failed.relative_to(REPO_ROOT) if failed.is_relative_to(REPO_ROOT) else failed})") from None
    except BaseException:
        if partial.exists():
            partial.replace(failed)
        raise
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
    partial.replace(final)
    if not ledger.exists():
        raise RunError(f"{slug}: the notebook finished but wrote no ledger at {ledger}")
    hash_file.write_text(digest + "\n")  # what `make book` and `make reference` check the ledger against
    return RunResult(slug, cfg.profile, cfg.seed, final, ledger, time.perf_counter() - t0)
