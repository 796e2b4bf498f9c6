# rivet_workflows: set-up, demo, tests, lint, benchmarks.
# Set-up is idempotent: the venv is created once and re-installed only when pyproject.toml changes.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
LINT_PATHS := rivet_workflows tests project manage.py noxfile.py $(wildcard bench)

DIST ?= dist

.PHONY: setup migrate demo test docs golden lint format bench bench-smoke soak soak-short failover worker dist clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

migrate: setup
	$(PY) manage.py migrate --noinput

## make demo: run every example workflow end to end on the embedded stack (SQLite, no broker needed)
demo: migrate
	$(PY) manage.py rivet demo

## make test: the whole suite (SQLite by default; DATABASE_URL=postgres://... REDIS_URL=redis://... for services)
test: setup
	$(PY) -m pytest -q $(PYTEST_ARGS)

## make docs: the manual (docs/, Sphinx + MyST) in docs/_build/html; any warning is an error
docs: setup
	$(PY) -m sphinx -W --keep-going -q -b html docs docs/_build/html

## make golden: re-record tests/golden's histories from the current engine (only for an intended behaviour change)
golden: setup
	$(PY) -m tests.golden.generate

lint: setup
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/lint-imports --no-cache --no-logo

format: setup
	$(VENV)/bin/ruff check --fix $(LINT_PATHS)
	$(VENV)/bin/ruff format $(LINT_PATHS)

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install -q -e ".[dev,bench]"
	touch $(BENCH_STAMP)

## make bench: every benchmark, ours beside DBOS, on the local PostgreSQL (and Redis); under 10 minutes
bench: $(BENCH_STAMP)
	$(PY) -m bench

bench-smoke: $(BENCH_STAMP)
	$(PY) -m bench --smoke

## make soak: the chaos soak (~10 min): a few hundred actors on real workers, on a PostgreSQL cluster and a
## redis-server of its own (started in a temporary folder; needs PostgreSQL's server binaries and redis-server),
## with worker SIGKILLs/SIGSTOPs, a database and a broker restart, idle-session kills; checks the invariants
soak: setup
	$(PY) -m tests.soak $(SOAK_ARGS)

## make soak-short: the same in about two minutes (CI)
soak-short: setup
	$(PY) -m tests.soak --short $(SOAK_ARGS)

## make failover: a PostgreSQL primary and a synchronous standby of its own (pg_basebackup; needs PostgreSQL's
## server binaries), real workers on a multi-host DATABASE_URL, the primary SIGKILLed mid-load, the standby
## promoted; checks that no acknowledged step is lost or runs again (~30 s; also in `make test`'s PostgreSQL pass)
failover: setup
	$(PY) -m tests.failover $(FAILOVER_ARGS)

## make worker: a Celery worker with the sweep (beat) embedded; add more workers without -B
worker: migrate
	$(VENV)/bin/celery -A project worker -B -l info

## make dist: the wheel and the sdist in $(DIST)/ (pip install dist/rivet_workflows-<version>-py3-none-any.whl)
dist: setup
	rm -rf $(DIST)/rivet_workflows-* build/
	$(PY) -m build --outdir $(DIST) .

clean:
	rm -rf var/broker var/test.sqlite3* .pytest_cache .ruff_cache build docs/_build
