# Two entry points for a fresh clone: `make demo` and `make test`. Both create .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# `make serve` runs in its own environment: the server packages pin versions .venv does not share.
SERVE_VENV := .venv-serve
SERVE_STAMP := $(SERVE_VENV)/.installed

.PHONY: demo test lint typecheck unit matrix mutation clean serve serve-env serve-bench docs

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

serve-env: $(SERVE_STAMP)

# The example agents on LangGraph Server + PostgreSQL + Redis, on 127.0.0.1:$${PORT:-8123}.
# Needs DATABASE_URI and REDIS_URI; WORKERS (default 2), N_JOBS_PER_WORKER (default 10);
# CONFIG=path/to/langgraph.json serves your own graphs.
CONFIG ?= langgraph.json
serve: $(SERVE_STAMP)
	$(SERVE_VENV)/bin/python -m toolstop.deploy $(CONFIG)

# The figures of the README's scale-out section: throughput hard vs never on 2 workers, crash
# recovery of a SIGKILLed replica. Needs PostgreSQL and Redis (see src/toolstop/bench/serve.py).
serve-bench: $(STAMP) $(SERVE_STAMP)
	$(BIN)/python -m toolstop.bench.serve --out docs/bench/serve.json

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
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest

# The router contract on six stacks, from langgraph 0.6.6 to the newest langchain (noxfile.py),
# and the Pydantic AI adapter (tests and `toolstop check`) on its oldest tested and newest
# release (about 70 s from scratch here).
matrix: $(STAMP)
	$(BIN)/nox -s contract
	$(BIN)/nox -s pydantic_ai

test: lint typecheck unit matrix

# Mutation testing of the core with mutmut (docs/mutation.md; not part of `make test`: about 25
# minutes on 2 cores). MUTANTS narrows it, e.g. `make mutation MUTANTS="toolstop.decision*"`;
# a second run only retests what changed. `$(BIN)/mutmut browse` shows each survivor.
MUTANTS ?=
mutation: $(STAMP)
	$(BIN)/mutmut run --max-children $${JOBS:-2} $(MUTANTS)
	@echo "Survivors (and mutants that timed out); nothing listed: every mutant was killed:"
	@$(BIN)/mutmut results | grep -v ': not checked$$' || true

clean:
	rm -rf $(VENV) $(SERVE_VENV) .nox .mypy_cache .ruff_cache .pytest_cache site mutants
