"""Shared test set-up: no telemetry, CPU DeepSpeed, an MLflow store per test session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

PROJECT_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True, scope="session")
def _mlflow_store(tmp_path_factory: pytest.TempPathFactory):
    """Every test talks to a throwaway SQLite MLflow store, never the project's mlflow.db."""
    store = tmp_path_factory.mktemp("mlflow")
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{store / 'mlflow.db'}"
    yield store


@pytest.fixture(autouse=True)
def _mlflow_isolation(_mlflow_store):
    """No test leaks MLflow state into the next: stray runs are ended, the store restored.

    MLflow keeps a process-wide tracking URI, active experiment and run stack; a test that calls
    ``mlflow.set_tracking_uri``/``set_experiment`` or leaves a run open would otherwise change
    where every later test writes.
    """
    experiment_env = os.environ.get("MLFLOW_EXPERIMENT_ID")
    store_uri = os.environ["MLFLOW_TRACKING_URI"]  # set_tracking_uri() overwrites the variable
    yield
    if experiment_env is None:  # set_experiment() exports it for subprocesses
        os.environ.pop("MLFLOW_EXPERIMENT_ID", None)
    else:
        os.environ["MLFLOW_EXPERIMENT_ID"] = experiment_env
    mlflow = sys.modules.get("mlflow")
    if mlflow is None:  # never imported: nothing to restore
        os.environ["MLFLOW_TRACKING_URI"] = store_uri
        return
    while mlflow.active_run() is not None:
        mlflow.end_run(status="KILLED")
    os.environ["MLFLOW_TRACKING_URI"] = store_uri
    mlflow.set_tracking_uri(store_uri)
    from mlflow.tracking import fluent

    fluent._active_experiment_id = None  # forget set_experiment(); the default applies again


@pytest.fixture()
def project_root() -> Path:
    return PROJECT_ROOT
