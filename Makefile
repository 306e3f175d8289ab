# The README's commands. `make test` sets everything up on a fresh machine and runs the
# whole suite (lint, types, tests); `make setup` only builds the virtual environment.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup dev test lint test-embedded migrate clean

setup: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "Python 3.11 is required, found " + sys.version)'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest

# The same PostgreSQL tests on an embedded server started by the suite itself, as on a
# machine where no PostgreSQL runs.
test-embedded: setup
	JLG_TEST_PG=embedded $(BIN)/python -m pytest tests/integration/test_claim_race.py tests/integration/test_migrations.py

# The whole system on this machine: embedded PostgreSQL and AWS emulation unless configured.
dev: setup
	$(BIN)/jlg dev

migrate: setup
	$(BIN)/jlg migrate

clean:
	rm -rf $(VENV) .data .pgdata .pytest_cache .mypy_cache .ruff_cache
