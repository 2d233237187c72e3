# Reproducing ICML 2026 — every target bootstraps .venv from the pinned requirements.txt when needed.
#   make test                      what CI runs: unit tests, smoke notebooks (+ determinism), smoke book build
#   make book [PROFILE=smoke]      execute changed chapters, scorecard, render _build/html
#   make book SEEDS=0-4            the same, every chapter at each seed: verdicts across seeds (= make robustness)
#   make run NB=rose_sosmd ARGS="-p seed 3"
#   make sweep NB=rose_sosmd SEEDS=0-4 JOBS=2 [SCHEDULER=tcp://host:8786]
#   make bench [NB=rose_sosmd]     compiled kernels vs their references
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
export OMP_NUM_THREADS ?= 1
export PYTHONHASHSEED := 0
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup test unit book robustness run sweep bench clean distclean

$(STAMP): requirements.txt pyproject.toml setup.py
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q pip==26.3
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	@touch $@

$(KSTAMP): $(STAMP) $(KERNELS) setup.py
	$(BIN)/python setup.py -q build_ext --inplace
	@touch $@

setup: $(STAMP) $(KSTAMP)

test: setup
	$(BIN)/python -m pytest tests --durations=12

unit: setup
	$(BIN)/python -m pytest tests --ignore=tests/test_notebooks.py

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

bench: setup
	@set -e; for b in $(if $(NB),benchmarks/bench_$(NB).py,benchmarks/bench_*.py); do \
		echo "== $$b"; $(BIN)/python $$b; done

clean:
	rm -rf _build build results lib/repro/*/_kernels*.so lib/*.egg-info $(KSTAMP)

distclean: clean
	rm -rf $(VENV) data/cache
