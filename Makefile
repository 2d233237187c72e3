# Reproducing ICML 2026 — every target bootstraps .venv from the pinned requirements.txt when needed.
#   make test                      what CI runs: unit tests, smoke notebooks (+ determinism), smoke book build
#   make book [PROFILE=smoke]      execute changed chapters, scorecard, render _build/html
#   make book SEEDS=0-4            the same, every chapter at each seed: verdicts across seeds (= make robustness)
#   make run NB=rose_sosmd ARGS="-p seed 3"
#   make sweep NB=rose_sosmd SEEDS=0-4 JOBS=2 [SCHEDULER=tcp://host:8786]
#   make bench [NB=rose_sosmd]     compiled kernels vs their references
#   make reference NB=fmss [SEEDS=0-4]   copy current full-profile ledgers into data/reference/<slug>/ (in git)
#   make crosscheck [NB=fmss] [PROFILE=smoke]   each chapter at 1 thread and at 2 threads + another BLAS kernel:
#                                  verdicts must agree (does any verdict rest on last-bit rounding?)
#   make assign [NB=fmss]          student notebook + autograder zip per chapter -> _build/assign/<slug>/
#   make grade NB=fmss DIR=submissions/ [OUT=grades.csv] [TIMEOUT=600]   grade notebooks locally (no Docker) -> CSV
#   make lab                       JupyterLab (its own .venv-lab) on notebooks/, kernel = .venv's python, offline
SHELL := /bin/bash
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
KERNELS := $(wildcard lib/repro/*/_kernels*.cpp)
KSTAMP := $(VENV)/.kernels
PROFILE ?= full
SEEDS ?=
JOBS ?= 2
SCHEDULER ?=
NB ?=
ARGS ?=
DIR ?=
OUT ?=
TIMEOUT ?=
LAB_VENV := .venv-lab
LAB_STAMP := $(LAB_VENV)/.installed
LAB_ARGS ?=
export OMP_NUM_THREADS ?= 1
export PYTHONHASHSEED := 0
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup test unit book robustness run sweep bench reference crosscheck assign grade lab clean distclean

$(STAMP): requirements.txt pyproject.toml setup.py
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q pip==26.3
	$(BIN)/python -m pip install -q --no-compile -r requirements.txt
	@# byte-compiled on every core: pip compiles one file at a time (about 80 s of its 117 s here; 32 s on two cores).
	@# The packages' own test suites (a fifth of the files, never imported) are skipped: 43 -> 29 s here. Compiling
	@# ahead matters where PYTHONDONTWRITEBYTECODE is set (as on this machine): imports would then never cache it.
	$(BIN)/python -m compileall -q -j 0 -x '/tests?/' "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" >/dev/null 2>&1 || true
	REPRO_NO_KERNELS=1 $(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	@touch $@

$(KSTAMP): $(STAMP) $(KERNELS) setup.py
	$(BIN)/python setup.py -q build_ext --inplace
	@touch $@

setup: $(STAMP) $(KSTAMP)

# two pytest-xdist workers: the smoke notebooks on one, the unit tests (a module at a time) on the other;
# tests/conftest.py puts the notebooks first
XDIST := -n 2 --dist loadfile --no-loadscope-reorder

test: setup
	$(BIN)/python -m pytest tests $(XDIST) --durations=12

unit: setup
	$(BIN)/python -m pytest tests --ignore=tests/test_notebooks.py $(XDIST)

book: setup
	$(BIN)/python -m repro.common.cli book --profile $(PROFILE) --jobs $(JOBS) --seeds "$(SEEDS)" --scheduler "$(SCHEDULER)"

robustness: setup
	$(BIN)/python -m repro.common.cli book --profile $(PROFILE) --jobs $(JOBS) --seeds "$(or $(SEEDS),0-4)" --scheduler "$(SCHEDULER)"

run: setup
	@test -n "$(NB)" || { echo "usage: make run NB=<slug> ARGS=\"-p seed 3\""; exit 2; }
	@$(BIN)/python -m repro.common.cli run $(NB) $(ARGS)

sweep: setup
	@test -n "$(NB)" || { echo "usage: make sweep NB=<slug> SEEDS=0-4 JOBS=2"; exit 2; }
	@$(BIN)/python -m repro.common.cli sweep $(NB) --seeds "$(or $(SEEDS),0-4)" --jobs $(JOBS) --scheduler "$(SCHEDULER)" $(ARGS)

reference: setup
	@test -n "$(NB)" || { echo "usage: make reference NB=<slug> [SEEDS=0-4]"; exit 2; }
	@$(BIN)/python -m repro.common.cli reference $(NB) --seeds "$(SEEDS)"

crosscheck: setup
	@$(BIN)/python -m repro.common.cli crosscheck $(NB) --profile $(if $(findstring command,$(origin PROFILE)),$(PROFILE),smoke)

bench: setup
	@set -e; for b in $(if $(NB),benchmarks/bench_$(NB).py,benchmarks/bench_*.py); do \
		echo "== $$b"; $(BIN)/python $$b; done

# Auto-checked exercises (exercises/NN_slug.ipynb, otter-assign format; see CONTRIBUTING and book/course.md).
assign: setup
	@$(BIN)/python -m repro.common.exercises assign $(NB)

grade: setup
	@test -n "$(NB)" -a -n "$(DIR)" || { echo "usage: make grade NB=<slug> DIR=submissions/ [OUT=grades.csv]"; exit 2; }
	@$(BIN)/python -m repro.common.exercises grade $(NB) "$(DIR)" $(if $(OUT),--out "$(OUT)") $(if $(TIMEOUT),--timeout $(TIMEOUT))

# JupyterLab lives in its own environment (requirements-lab.txt: it would add rfc3987-syntax's 1 s import to every
# nbformat user in .venv); its only kernel is .venv's python, so notebooks run exactly as papermill runs them.
$(LAB_STAMP): requirements-lab.txt requirements.txt $(STAMP)
	@test -x $(LAB_VENV)/bin/python || $(PY) -m venv $(LAB_VENV)
	$(LAB_VENV)/bin/python -m pip install -q pip==26.3
	$(LAB_VENV)/bin/python -m pip install -q -r requirements-lab.txt
	@touch $@

lab: setup $(LAB_STAMP)
	@$(BIN)/python -m ipykernel install --prefix $(LAB_VENV) --name python3 --display-name "Python 3 (repro .venv)" 2>/dev/null >/dev/null
	$(LAB_VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/notebooks \
		--LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
		--LabApp.extension_manager=readonly $(LAB_ARGS)

clean:
	rm -rf _build build results lib/repro/*/_kernels*.so lib/*.egg-info $(KSTAMP)

distclean: clean
	rm -rf $(VENV) $(LAB_VENV) data/cache
