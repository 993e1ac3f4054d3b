# Every target installs what it needs into .venv first (once; redone when pyproject changes).
#   make quickstart   the small JAX-vs-PyTorch comparison on CPU
#   make test         the test suite (what CI runs)
#   make test-fast    the fast tier: the tests that start no process (a few minutes on 2 cores)
#   make xla-env      the PyTorch/XLA worker env (.venv-xla: torch 2.9 + torch-xla 2.9, ~7 GB; once)
#   make docs         the manual, built into site/ (strict, offline); make docs-serve serves it
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch pinned: on this machine kind `torch==2.13.0` is a CPU build that lies on disk (a wheel folder in
# pip's config); a bare `torch` would pull a multi-GB CUDA build. Override TORCH on a GPU box (TORCH="torch").
TORCH ?= torch==2.13.0
# CI passes CONSTRAINTS="-c .ci/constraints.txt" (exact pins) on the command line, in a clean shell (.ci/run);
# a user's install uses pyproject ranges.
CONSTRAINTS ?=
STAMP := $(VENV)/.installed
UV_STAMP := $(VENV)/.uv
# The venvs are installed by uv, handed pip's settings (its indexes, wheel folders, certificate, proxy:
# src/repro/envs/pipconf.py, which needs only the standard library, so it runs from src/ before repro is
# installed). uv installs from its cache by hard links: a fresh clone's .venv took 2.5 s where pip took
# 94 s, and .venv-xla 23 s where pip took 102 s (the 2-core machine, warm caches, 2026-12-01; the same
# 217 distributions at the same versions, `pip freeze` compared). --compile-bytecode, as pip does: else
# a first run's `setup.import_s` would include compiling its framework's modules (and the suite's
# first minute compiles them in four processes at once); .venv's 23,320 files take 27 s of it.
UV_INSTALL := PYTHONPATH=src $(PY) -m repro.envs.pipconf --compile-bytecode

$(UV_STAMP):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(CONSTRAINTS) "uv>=0.13"
	touch $(UV_STAMP)

$(STAMP): pyproject.toml $(UV_STAMP)
	$(UV_INSTALL) -q --python $(PY) $(CONSTRAINTS) "$(TORCH)" -e ".[all]"
	touch $(STAMP)

.PHONY: install quickstart test test-fast bench
install: $(STAMP)

quickstart: $(STAMP)
	$(PY) -m repro +exp=quickstart

# The suite runs PyTorch/XLA in its own env, a real mlflow server on PostgreSQL and headless Chromium:
# all installed first (test-deps). One pytest-xdist worker per core plus two, 4 to 6 (TEST_WORKERS=0: one process);
# each test file is one group, kept on one worker, and files that read one session fixture share a group
# (tests/conftest.py: SHARED_FIXTURES), the longest groups handed out first (SLOWEST_SCOPES). The 15
# slowest tests are listed at the end.
# About 35-40 % of the suite's wall is waiting (SLURM, timeouts, process starts), not CPU: on the 2-core
# reference machine 3 workers took 1,001 s where 2 took 1,130-1,166 s (2026-11-27, all passing); with the
# suite grown to 855 tests, 4 workers took 1,238 s where 3 took 1,275 s (one run each, 1.2 cores busy on average).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); n=$$((n + 2)); [ $$n -lt 4 ] && n=4; [ $$n -gt 6 ] && n=6; echo $$n)
test: test-deps
	$(PY) -m pytest -n $(TEST_WORKERS)

# make test's three installs side by side: the main venv, the XLA venv and the system packages touch
# nothing of each other's (a fresh clone, the 2-core machine, 2026-12-01: with pip, 171 s one after
# another and 97 s together; with uv from its cache, 30-33 s together, .venv's bytecode compiled).
.PHONY: test-deps
test-deps:
	$(MAKE) --no-print-directory -j3 $(STAMP) xla-env system-deps

# The tests marked neither slow nor for other hardware: in this process, no worker, server or
# `python -m repro` (tests/conftest.py fails an unmarked test that starts one). Needs the venv only.
test-fast: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) -m "not slow"

bench: $(STAMP)
	$(PY) benchmarks/harness_overhead.py

# The manual (docs/, Sphinx + MyST + furo; docs/about.md): every warning fails the build (a broken link or
# anchor, a page in no toctree, a config key without a meaning line); nothing is fetched from the network.
# tests/test_docs.py builds it the same way. DOCS_PORT: where docs-serve listens (127.0.0.1 only).
DOCS_PORT ?= 8000
.PHONY: docs docs-serve
docs: $(STAMP)
	$(PY) -m sphinx -E -W --keep-going -q -b html docs site
	@echo "the manual: site/index.html (make docs-serve: http://127.0.0.1:$(DOCS_PORT)/)"

docs-serve: docs
	$(PY) -m http.server --bind 127.0.0.1 --directory site $(DOCS_PORT)

# framework=torch_xla runs its worker in its own venv (torch-xla 2.9 needs torch 2.9). It does
# not touch $(VENV); the script does nothing when XLA_VENV already imports torch_xla.
XLA_VENV ?= .venv-xla
.PHONY: xla-env
xla-env: $(UV_STAMP)
	PYTHON=$(PYTHON) UV_PYTHON=$(abspath $(PY)) bash scripts/make_xla_env.sh $(XLA_VENV)

# Debian's postgresql for tests/test_tracking_server.py, chromium for tests/test_report_browser.py and
# SLURM (slurmctld, slurmd, slurm-client, munge) for tests/test_slurm.py (installed when missing and root).
.PHONY: system-deps
system-deps:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	  else echo "make test needs PostgreSQL: sudo apt-get install postgresql" >&2; exit 1; fi; }
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "make test needs Chromium: sudo apt-get install chromium" >&2; exit 1; fi; }
	@{ command -v slurmctld && command -v slurmd && command -v sbatch && command -v munged; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null; \
	  else echo "make test needs SLURM: sudo apt-get install slurmctld slurmd slurm-client munge" >&2; exit 1; fi; }
