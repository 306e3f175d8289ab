# The README's commands. `make test` sets everything up on a fresh machine and runs the
# whole suite (lint, types, tests with coverage); `make setup` only builds the virtual
# environment. CONTRIBUTING.md says how the rest fits together.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_WORKERS ?= 3
# Python caches compiled modules, and pytest its rewritten test modules, as bytecode; where
# the environment forbids it (some images set PYTHONDONTWRITEBYTECODE) each test worker
# rewrote ~370 modules again, ~3 s of CPU each, and every process started compiled the package.
unexport PYTHONDONTWRITEBYTECODE
# The installer of the locked versions: uv puts them in a new environment in ~15 s where pip
# took ~80 s of the CI's eight minutes (it installs exactly the lock, as pip did).
UV := uv==0.13.9
# The TRD's floor: at least 80 % of lines on the services and the repository.
CORE := jlg_pipeline/services/*,jlg_pipeline/adapters/repository.py

.PHONY: setup dev test lint format bench trial test-embedded migrate clean

setup: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "Python 3.11 is required, found " + sys.version)'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(UV)
	$(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode -r requirements.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	touch $(STAMP)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Three workers on two cores, an idle one taking tests a busy one has not started
# (worksteal): the end-to-end tests, dealt to two of them and run first (tests/conftest.py),
# wait on their daemons most of the time, and the third uses the CPU they leave (290-295 s;
# with them dealt to all three, 317 s; four workers: 266-311 s, a quarter more CPU spent on
# contention and slower end-to-end tests). Each worker has its own databases, and killing
# tests touch only their own process group.
test: lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal --cov --cov-report=term:skip-covered
	$(BIN)/coverage report --include='$(CORE)' --fail-under=80

# The same PostgreSQL tests on an embedded server started by the suite itself, as on a
# machine where no PostgreSQL runs.
test-embedded: setup
	JLG_TEST_PG=embedded $(BIN)/python -m pytest tests/integration/test_claim_race.py tests/integration/test_migrations.py

# The quick benchmarks (a few minutes in all, each printing its ratios beside their targets,
# PASS or MISS); a MISS fails the target (--strict). The long ones through the real daemon are
# run one by one (README, "Benchmarks").
bench: setup
	$(BIN)/python -m bench.timing.gate --sessions 2000 --rounds 200 --strict
	$(BIN)/python -m bench.timing.local_registrar --registrants 2000 --repeat 2 --strict
	$(BIN)/python -m bench.timing.sync_idle_check --rows 100000 --waiting 2000 --repeat 50 --strict
	$(BIN)/python -m bench.timing.sweep_query --rows 100000 --due 1000 --poison 10000 --repeat 10 --strict
	$(BIN)/python -m bench.timing.sqs_intake --messages 500 --strict
	$(BIN)/python -m bench.timing.daemon_burst --sizes 60 --strict

# The chaos trial's five-minute seed (the suite runs a smoke of it): the whole system as
# deployed, a drawn timeline of faults while admins arm sessions; exit 1 on any violation.
# Longer seeds: README, "Benchmarks".
trial: setup
	$(BIN)/python -m bench.trials.chaos --seed 20261244 --minutes 5 --sessions 12 --strict

# The whole system on this machine: embedded PostgreSQL and AWS emulation unless configured.
dev: setup
	$(BIN)/jlg dev $(if $(ONLINE_SESSION),--online-session=$(ONLINE_SESSION))

migrate: setup
	$(BIN)/jlg migrate

clean:
	rm -rf $(VENV) .data .pgdata .pytest_cache .mypy_cache .ruff_cache .coverage
