# Two entry points for a fresh clone: `make demo` and `make test`. Both create .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit matrix clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev,agents]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/toolstop demo --outcome success
	$(BIN)/toolstop demo --outcome retryable
	$(BIN)/toolstop demo --outcome fatal
	$(BIN)/toolstop demo --outcome success --mode polish
	$(BIN)/toolstop demo --outcome success --mode never
	$(BIN)/toolstop demo --job
	$(BIN)/toolstop check

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest

# The router contract on langgraph 0.6.6 (legacy), langchain 1.4.2 + langgraph 1.2.11, newest.
matrix: $(STAMP)
	$(BIN)/nox -s contract

test: lint typecheck unit matrix

clean:
	rm -rf $(VENV) .nox .mypy_cache .ruff_cache .pytest_cache
