"""tests/conftest.py's MLflow isolation: what one test leaves behind, the next does not see.

The two tests run in file order: the first leaks on purpose (another tracking URI, an active
experiment, an open run), the second checks that none of it reached it.
"""

from __future__ import annotations

import os

import mlflow

LEAKED: dict[str, str] = {}


def test_a_test_that_leaks_mlflow_state(tmp_path):
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'elsewhere.db'}")
    experiment = mlflow.set_experiment("leaky-experiment")
    run = mlflow.start_run(run_name="never-ended")
    LEAKED.update(run_id=run.info.run_id, experiment_id=experiment.experiment_id)
    assert mlflow.active_run() is not None


def test_the_next_test_sees_the_session_store_and_no_run():
    assert LEAKED, "runs after test_a_test_that_leaks_mlflow_state"
    assert mlflow.active_run() is None
    assert mlflow.get_tracking_uri() == os.environ["MLFLOW_TRACKING_URI"]
    assert os.environ["MLFLOW_TRACKING_URI"].endswith("mlflow.db")
    assert "elsewhere.db" not in mlflow.get_tracking_uri()
    assert os.environ.get("MLFLOW_EXPERIMENT_ID") != LEAKED["experiment_id"]
    with mlflow.start_run(run_name="isolated") as run:
        assert run.info.experiment_id != LEAKED["experiment_id"]
