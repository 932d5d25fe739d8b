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
    _SESSION_MLFLOW_ENV.update(
        {key: os.environ.get(key) for key in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID")}
    )
    yield store


# MLflow's environment at session start; every test ends with it restored.
_SESSION_MLFLOW_ENV: dict[str, str | None] = {}


@pytest.fixture(autouse=True)
def _mlflow_isolation(_mlflow_store):
    """No test leaks MLflow state into the next: stray runs are ended, the store restored.

    MLflow keeps a process-wide tracking URI, active experiment and run stack; a test that calls
    ``mlflow.set_tracking_uri``/``set_experiment`` or leaves a run open would otherwise change
    where every later test writes.
    """
    yield
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None:
        while mlflow.active_run() is not None:
            mlflow.end_run(status="KILLED")
    # Back to the session's values, not this test's start: a module- or session-scoped fixture
    # runs before this one and may have leaked too. set_tracking_uri() and set_experiment()
    # also export MLFLOW_TRACKING_URI / MLFLOW_EXPERIMENT_ID for subprocesses.
    for key, value in _SESSION_MLFLOW_ENV.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    if mlflow is None:  # never imported: nothing else to restore
        return
    mlflow.set_tracking_uri(_SESSION_MLFLOW_ENV["MLFLOW_TRACKING_URI"])
    from mlflow.tracking import fluent

    fluent._active_experiment_id = None  # forget set_experiment(); the default applies again


@pytest.fixture()
def project_root() -> Path:
    return PROJECT_ROOT


def _logging_state() -> dict[str, tuple[int, bool, bool]]:
    """Level, propagate and disabled of the root logger and every logger created so far."""
    import logging

    loggers = {"": logging.getLogger()}
    loggers.update(
        (name, logger)
        for name, logger in logging.Logger.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    )
    return {name: (lg.level, lg.propagate, lg.disabled) for name, lg in loggers.items()}


@pytest.fixture(autouse=True, scope="session")
def _session_logging_state() -> tuple[dict[str, tuple[int, bool, bool]], int]:
    import logging

    return _logging_state(), logging.root.manager.disable


@pytest.fixture(autouse=True)
def _logging_isolation(_session_logging_state):
    """No test leaks logging configuration into the next: after each test, logger levels,
    propagation, ``disabled`` flags and ``logging.disable`` are back to the session's start, and
    a logger created since then has no level of its own (NOTSET) and is enabled.

    A test (or a module fixture) that creates a Kedro session sets the ``ih_kedro`` logger to
    INFO, after which every module's INFO records reached a later test's ``caplog`` (measured:
    tests/pipelines/ in one process). Back to the session's values rather than the test's start,
    as in ``_mlflow_isolation``: a module fixture runs before this one and may have leaked too.
    """
    import logging

    yield
    before, disabled = _session_logging_state
    logging.disable(disabled)
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and name not in before:
            if logger.level != logging.NOTSET:  # setLevel clears every logger's cache
                logger.setLevel(logging.NOTSET)
            logger.disabled = False
    for name, (level, propagate, was_disabled) in before.items():
        logger = logging.getLogger(name or None)
        if logger.level != level:
            logger.setLevel(level)
        logger.propagate, logger.disabled = propagate, was_disabled
