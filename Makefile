# Two commands are the contract with users: `make demo` and `make test`.
# Both create (or update) the virtualenv in .venv themselves.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?= --durations=25
# pytest-xdist: the tests run on 2 worker processes (tests/helpers/parallel.py groups what must
# share a worker): 1,436 s of pytest for a fresh clone on a 2-core machine whose Python runs half
# as fast as the fastest seen (2,689 s before the bytecode was compiled). PYTEST_WORKERS=0 runs them serially in one process. The
# suite is CPU-bound on 2 cores (92 % busy on average with 2 workers, 99 % with 4).
PYTEST_WORKERS ?= 2
XDIST  := -n $(PYTEST_WORKERS) --dist loadgroup

.PHONY: help setup demo demo-spark test lint typecheck unit bench bench-quick bench-scale mutate clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# uv installs the packages: on a fresh 2-core machine the whole dev set (PySpark's 456 MB
# included) in about 50 s, where pip took about 140 s. --compile-bytecode writes the .pyc files
# as pip does: without them, where PYTHONDONTWRITEBYTECODE is set (as on this project's
# machines), every process compiles PySpark and pyarrow again on import (3 s of CPU each on a
# slow 2-core machine: the Spark tests start hundreds of Python processes).
$(BIN)/uv: | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check 'uv>=0.9'

$(VENV)/.core-installed: pyproject.toml | $(BIN)/uv
	$(BIN)/uv pip install --compile-bytecode --python $(BIN)/python -e .
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/uv
	$(BIN)/uv pip install --compile-bytecode --python $(BIN)/python -e '.[dev,spark,s3,gcs,azure]'
	touch $@ $(VENV)/.core-installed

# Azurite (Azure Blob Storage emulator) for the azure tests, from npm into .emulators/; where
# npm is absent the azure tests skip and say why.
AZURITE_VERSION := 3.37.0
.emulators/.azurite-$(AZURITE_VERSION):
	@if command -v npm >/dev/null 2>&1; then \
		npm install --prefix .emulators azurite@$(AZURITE_VERSION) --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "npm not found: the azure tests will be skipped"; fi

# The virtualenv and the emulators side by side (each mostly waits on downloads).
setup: ## install the virtualenv (with the test and Spark extras) and the emulators
	@$(MAKE) --no-print-directory -j2 $(VENV)/.dev-installed .emulators/.azurite-$(AZURITE_VERSION)

demo: $(VENV)/.core-installed ## run the demo pipeline on a local table
	$(BIN)/python -m appendtable.demo

demo-spark: $(VENV)/.dev-installed ## run the Spark streaming demo
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python -m appendtable_spark.demo

lint: $(VENV)/.dev-installed ## ruff
	$(BIN)/ruff check appendtable appendtable_spark tests benchmarks
	$(BIN)/ruff format --check appendtable appendtable_spark tests benchmarks

typecheck: $(VENV)/.dev-installed ## mypy --strict on the core and the Spark adapter
	$(BIN)/mypy

test: ## set up, lint, type-check and run the whole test suite (prints the time of each part)
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory setup lint typecheck || exit $$?; \
	$(BIN)/python -m compileall -q -j 0 appendtable appendtable_spark tests benchmarks >/dev/null; \
	ready=$$(date +%s); \
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS); status=$$?; \
	end=$$(date +%s); \
	echo "make test: $$(( end - start )) s in all: set-up, lint and type check $$(( ready - start )) s, pytest $$(( end - ready )) s"; \
	exit $$status

unit: $(VENV)/.dev-installed ## the fast tests only (no spark, object stores, slow)
	$(BIN)/python -m pytest $(XDIST) -m "not spark and not s3 and not gcs and not azure and not slow" $(PYTEST_ARGS)

bench: $(VENV)/.dev-installed ## run the benchmarks and write benchmarks/README.md
	$(BIN)/python -m benchmarks.run

bench-quick: $(VENV)/.dev-installed ## a quick benchmark run (small sizes)
	$(BIN)/python -m benchmarks.run --quick

# The million-file tables: metadata of 10 k, 100 k and 1 M files built and measured,
# next to delta-rs; under 15 minutes on 2 cores, so not part of `make bench`. Its rows join the
# others in benchmarks/README.md (section "A million files"), and `make bench` keeps them.
bench-scale: $(VENV)/.dev-installed ## the million-file tables, next to delta-rs (under 15 minutes)
	$(BIN)/python -m benchmarks.run --only million

# Mutation testing (mutmut, configured in pyproject.toml [tool.mutmut]): planning/, commit/ and
# the maintenance modules against the fast tests. Long (hours for everything on 2 cores): run it
# under the heavy lock, and narrow it with MUTANTS, globs of mutant names, e.g.
#   make mutate MUTANTS='appendtable.commit.expire.* appendtable.orphans.*'
MUTANTS ?=
mutate: $(VENV)/.dev-installed ## mutation testing of planning/, commit/ and maintenance (long; MUTANTS=globs)
	$(BIN)/mutmut run $(MUTANTS)
	$(BIN)/mutmut results

clean: ## remove the virtualenv, the emulators and caches
	rm -rf $(VENV) .emulators .pytest_cache .mypy_cache .ruff_cache mutants
