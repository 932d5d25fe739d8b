"""Shared test set-up: no telemetry, CPU DeepSpeed, an MLflow store per test session."""

from __future__ import annotations

import os
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


@pytest.fixture()
def project_root() -> Path:
    return PROJECT_ROOT
