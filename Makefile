# Two commands are the contract with users: `make demo` and `make test`.
# Both create (or update) the virtualenv in .venv themselves.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: help demo demo-spark test lint typecheck unit bench bench-quick clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

$(VENV)/.core-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e .
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e '.[dev,spark,s3]'
	touch $@ $(VENV)/.core-installed

demo: $(VENV)/.core-installed ## run the demo pipeline on a local table
	$(BIN)/python -m appendtable.demo

demo-spark: $(VENV)/.dev-installed ## run the Spark streaming demo
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python -m appendtable_spark.demo

lint: $(VENV)/.dev-installed ## ruff
	$(BIN)/ruff check appendtable appendtable_spark tests benchmarks
	$(BIN)/ruff format --check appendtable appendtable_spark tests benchmarks

typecheck: $(VENV)/.dev-installed ## mypy --strict on the core
	$(BIN)/mypy

test: $(VENV)/.dev-installed lint typecheck ## lint, type-check and run the whole test suite
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python -m pytest $(PYTEST_ARGS)

unit: $(VENV)/.dev-installed ## the fast tests only (no spark, s3, slow)
	$(BIN)/python -m pytest -m "not spark and not s3 and not slow" $(PYTEST_ARGS)

bench: $(VENV)/.dev-installed ## run the benchmarks and write benchmarks/README.md
	$(BIN)/python -m benchmarks.run

bench-quick: $(VENV)/.dev-installed ## a quick benchmark run (small sizes)
	$(BIN)/python -m benchmarks.run --quick

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
