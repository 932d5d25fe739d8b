# `make smoke` (a micro study in minutes), `make run` (the main study at the embedded default
# scale) and `make test` (what CI runs).
# Each sets up .venv on first use, so a fresh machine needs nothing else.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export KEDRO_DISABLE_TELEMETRY := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: smoke run report test lint format viz mlflow-ui bench clean-data mutation

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, from the exact pin, so nothing later resolves a CUDA build.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

smoke: $(STAMP)
	$(BIN)/python -m ih_kedro.smoke

run: $(STAMP)
	$(BIN)/kedro run --pipeline=law_fit

# After a default run: its outputs -> docs/results/*.json -> the README's and docs' results.
# WALL_MINUTES=31 records that run's wall time with this machine's CPU.
report: $(STAMP)
	$(BIN)/python -m ih_kedro.report collect $(if $(WALL_MINUTES),--wall-minutes $(WALL_MINUTES))
	$(BIN)/python -m ih_kedro.report render

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	# The fast suite plus the slow tests marked `ci` (multi-rank equality and kill/resume, two
	# gloo ranks per job), on two workers; a test file stays on one worker (module fixtures);
	# in a random order (pytest-randomly; the seed is printed: SEED=<n> repeats an order).
	$(BIN)/python -m pytest -p randomly -n 2 --dist loadfile -m "not slow or ci" $(if $(SEED),--randomly-seed=$(SEED))

lint: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Mutation testing of science/ and pipelines/ (docs/testing.md): hours on 2 cores, not in CI.
# Narrow it with a mutant-name pattern: make mutation MUTANTS='ih_kedro.science.data.corpus.*'
mutation: $(STAMP)
	rm -rf mutants
	$(BIN)/mutmut run --max-children 2 $(MUTANTS)
	$(BIN)/mutmut results

viz: $(STAMP)
	$(BIN)/kedro viz build

MLFLOW_PORT ?= 5000
mlflow-ui: $(STAMP)
	@echo "MLflow UI, loopback only: http://127.0.0.1:$(MLFLOW_PORT)/#/experiments/1/runs?workflowType=machine_learning"
	@echo "(experiment ih_kedro's training runs; expand a parent run for its nested runs)"
	$(BIN)/mlflow ui --backend-store-uri sqlite:///mlflow.db --host 127.0.0.1 --port $(MLFLOW_PORT)

bench: $(STAMP)
	$(BIN)/python benchmarks/deepspeed_overhead.py
	$(BIN)/python benchmarks/dedup_throughput.py
	$(BIN)/python benchmarks/sharded_dedup.py
	$(BIN)/python benchmarks/telemetry_scoring.py
	$(BIN)/python benchmarks/vocabulary_step.py
	$(BIN)/python benchmarks/paper_projection.py
