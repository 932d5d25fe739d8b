"""tests/conftest.py's MLflow isolation: what one test leaves behind, the next does not see.

Both tests check that they start from the session's clean MLflow state, then leak on purpose
(another tracking URI, an active experiment, an open run). Whichever of the two runs second
(pytest-randomly shuffles them) checks the other's leak did not reach it, so the check holds in
any order.
"""

from __future__ import annotations

import os

import mlflow

LEAKED: dict[str, str] = {}


def _starts_clean_then_leaks(tmp_path, name: str) -> None:
    earlier = dict(LEAKED)
    assert mlflow.active_run() is None
    assert mlflow.get_tracking_uri() == os.environ["MLFLOW_TRACKING_URI"]
    assert os.environ["MLFLOW_TRACKING_URI"].endswith("mlflow.db")
    assert "elsewhere.db" not in mlflow.get_tracking_uri()
    if earlier:  # the other test ran first and leaked
        assert os.environ.get("MLFLOW_EXPERIMENT_ID") != earlier["experiment_id"]
    with mlflow.start_run(run_name="isolated") as run:
        assert run.info.experiment_id != earlier.get("experiment_id")
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'elsewhere.db'}")
    experiment = mlflow.set_experiment(f"leaky-experiment-{name}")
    leaked = mlflow.start_run(run_name="never-ended")
    LEAKED.update(run_id=leaked.info.run_id, experiment_id=experiment.experiment_id)
    assert mlflow.active_run() is not None


def test_one_test_leaks_mlflow_state(tmp_path):
    _starts_clean_then_leaks(tmp_path, "one")


def test_another_test_sees_none_of_it(tmp_path):
    _starts_clean_then_leaks(tmp_path, "another")
