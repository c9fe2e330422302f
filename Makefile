# Two entry points for a fresh clone: `make demo` and `make test`. Both create .venv first.
# Plain `make` lists the targets: a `## ` line right above a target is its line in that list.
.DEFAULT_GOAL := help
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# `make serve` runs in its own environment: the server packages pin versions .venv does not share.
SERVE_VENV := .venv-serve
SERVE_STAMP := $(SERVE_VENV)/.installed

.PHONY: help demo test test-fast format lint typecheck unit matrix mutation clean serve serve-env \
	serve-bench docs counts

## List the targets and what each does (plain `make`).
help:
	@echo "On a fresh clone, start with make demo and make test (both create .venv)."
	@awk '/^## /{doc = substr($$0, 4); next} \
		doc && /^[a-z][a-z-]*:/ {sub(/:.*/, ""); names[++n] = $$0; docs[$$0] = doc} \
		{doc = ""} \
		END {printf "  make %-12s %s\n", "demo", docs["demo"]; \
			printf "  make %-12s %s\n", "test", docs["test"]; \
			for (i = 1; i <= n; i++) if (names[i] != "demo" && names[i] != "test") \
				printf "  make %-12s %s\n", names[i], docs[names[i]]}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev,agents]"
	touch $(STAMP)

$(SERVE_STAMP): pyproject.toml
	$(PYTHON) -m venv $(SERVE_VENV)
	$(SERVE_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SERVE_VENV)/bin/python -m pip install --quiet -e ".[serve-pg]"
	touch $(SERVE_STAMP)

## Only create .venv-serve, the environment of make serve.
serve-env: $(SERVE_STAMP)

# The example agents on LangGraph Server + PostgreSQL + Redis, on 127.0.0.1:$${PORT:-8123}.
# Needs DATABASE_URI and REDIS_URI; WORKERS (default 2), N_JOBS_PER_WORKER (default 10);
# CONFIG=path/to/langgraph.json serves your own graphs.
CONFIG ?= langgraph.json
## The example agents on LangGraph Server + PostgreSQL + Redis.
serve: $(SERVE_STAMP)
	$(SERVE_VENV)/bin/python scripts/serve.py $(CONFIG)

# The figures of docs/deployment.md: throughput hard vs never on 2 workers, crash
# recovery of a SIGKILLed replica. Needs PostgreSQL and Redis (see scripts/serve_bench.py).
## Measure make serve: throughput, recovery from a killed replica.
serve-bench: $(STAMP) $(SERVE_STAMP)
	$(BIN)/python scripts/serve_bench.py --out docs/bench/serve.json

## The search agent on a scripted model (no API key), then toolstop check.
demo: $(STAMP)
	$(BIN)/toolstop demo --outcome success
	$(BIN)/toolstop demo --outcome retryable
	$(BIN)/toolstop demo --outcome fatal
	$(BIN)/toolstop demo --outcome success --mode polish
	$(BIN)/toolstop demo --outcome success --mode never
	$(BIN)/toolstop demo --job
	$(BIN)/toolstop check

# The documentation site into site/ (guides from docs/, API reference from the docstrings);
# `make test` builds it with --strict too (tests/test_docs.py).
## Build the documentation site into site/ (mkdocs --strict).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

## ruff, ruff format --check and the layers (import-linter); changes nothing.
lint: $(STAMP)
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts
	$(BIN)/lint-imports

# The regression guard on toolstop's cost (tests/test_call_counts.py, part of `make test`)
# compares Python calls per run of each router with docs/bench/call_counts.json, one entry per
# stack. After a change meant to cost more (or one that saves), rewrite this stack's entry
# deliberately, and commit it with the change.
## Rewrite this stack's call-count baseline (docs/bench/call_counts.json).
counts: $(STAMP)
	$(BIN)/python scripts/call_counts.py --update

## mypy --strict over the package and tests/typecheck.
typecheck: $(STAMP)
	$(BIN)/mypy

## The whole test suite in one process, slow tests included.
unit: $(STAMP)
	$(BIN)/python -m pytest

## Format the code: ruff check --fix, then ruff format.
format: $(STAMP)
	$(BIN)/ruff check --fix src tests scripts
	$(BIN)/ruff format src tests scripts

# The edit loop: the suite on every core (pytest-xdist), without the version matrix and without
# the slow, server and live tests (`make test` runs the slow ones; CI runs everything). Narrow it
# with PYTEST_ARGS, e.g. `make test-fast PYTEST_ARGS="tests/test_decide.py -x"`.
PYTEST_ARGS ?=
## The edit loop: the fast tests in parallel (no matrix, no lint).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n auto -q -m "not slow and not server and not live" $(PYTEST_ARGS)

# The router contract on six stacks, from langgraph 0.6.6 to the newest langchain (noxfile.py),
# the Pydantic AI adapter (tests and `toolstop check`) on its oldest tested and newest
# release (about 70 s from scratch here), and the multi-agent tests on the newest Deep Agents,
# langgraph-swarm and langgraph-supervisor.
## The router contract on each stack of the version matrix (nox).
matrix: $(STAMP)
	$(BIN)/nox -s contract
	$(BIN)/nox -s pydantic_ai
	$(BIN)/nox -s multiagent

## Lint, typecheck, the whole suite and the version matrix.
test: lint typecheck unit matrix

# Mutation testing of the core and the tools around it with mutmut (docs/mutation.md; not part
# of `make test`: the core alone takes about 25 minutes on 2 cores, everything some hours).
# MUTANTS narrows it, e.g. `make mutation MUTANTS="toolstop.decision*"`; a second run only
# retests what changed. `$(BIN)/mutmut browse` shows each survivor.
MUTANTS ?=
## Mutation testing of the core and its tools with mutmut (slow, not in make test).
mutation: $(STAMP)
	$(BIN)/mutmut run --max-children $${JOBS:-2} $(MUTANTS)
	@echo "Survivors (and mutants that timed out); nothing listed: every mutant was killed:"
	@$(BIN)/mutmut results | grep -v ': not checked$$' || true

## Remove the environments, the caches, site/ and mutants/.
clean:
	rm -rf $(VENV) $(SERVE_VENV) .nox .mypy_cache .ruff_cache .pytest_cache site mutants
