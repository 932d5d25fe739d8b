"""``mlflow ui`` on the test's own SQLite store lists a kedro run's parent and nested runs, and a
nested run's page shows its loss, in headless Chromium.

The store is filled the way a ``kedro run`` fills it: the experiment created with the
project's tags, a parent run described by the project's hook, and training runs opened through
``MlflowTracker`` (the class the training loop uses) logging a loss. This happens in a
subprocess, so MLflow's process-wide state does not leak into other tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.ui.conftest import free_port, serve

NESTED = ["attn-only-2l-d128_B32_C24_s0", "attn-only-2l-d128_B128_C24_s0"]
POPULATE = textwrap.dedent(
    """
    import json, sys
    import mlflow
    from ih_kedro.hooks import EXPERIMENT_DESCRIPTION, kedro_run_description
    from ih_kedro.science.training.tracking import NOTE_TAG, MlflowTracker, describe_experiment

    client = mlflow.MlflowClient()
    experiment_id = client.create_experiment(
        "ih_kedro", tags={"mlflow.experimentKind": "custom_model_development"}
    )
    describe_experiment(client, experiment_id, EXPERIMENT_DESCRIPTION)
    mlflow.set_experiment(experiment_id=experiment_id)
    tracker = MlflowTracker()
    with mlflow.start_run(run_name="law_fit") as parent:
        mlflow.set_tag(NOTE_TAG, kedro_run_description(["law_fit"], "local"))
        for name in json.loads(sys.argv[1]):
            batch = int(name.split("_B")[1].split("_")[0])
            params = {"preset": "attn-only-2l-d128", "batch_size": batch,
                      "context_length": 24, "seed": 0}
            with tracker.run(name, params):
                for step in range(0, 50, 10):
                    tracker.log_metrics({"loss": 6.5 - step / 20}, step=step)
    print(json.dumps({"experiment_id": experiment_id, "parent": parent.info.run_id}))
    """
)


@pytest.fixture()
def mlflow_store(tmp_path: Path) -> dict:
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    result = subprocess.run(
        [sys.executable, "-c", POPULATE, json.dumps(NESTED)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return {"uri": env["MLFLOW_TRACKING_URI"], **json.loads(result.stdout.splitlines()[-1])}


def test_mlflow_ui_lists_parent_and_nested_runs_and_shows_the_loss(
    browser_page, mlflow_store: dict, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", mlflow_store["uri"]]
    command += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    # One worker and no background job runner: the UI only reads this store.
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with serve(command, f"{url}/health", tmp_path / "mlflow-ui.log", cwd=tmp_path, env=env):
        page = browser_page
        experiment = mlflow_store["experiment_id"]
        # The link `make mlflow-ui` prints: the experiment's training runs.
        page.goto(f"{url}/#/experiments/{experiment}/runs?workflowType=machine_learning")
        page.get_by_text("law_fit", exact=True).first.wait_for()
        # Nested runs sit under their parent; expanding it lists them.
        assert page.get_by_text(NESTED[0], exact=True).count() == 0
        page.locator("[data-component-id$='runnamecellrenderer.tsx_46']").first.click()
        for name in NESTED:
            page.get_by_text(name, exact=True).first.wait_for()
        # A nested run's page: its description and its loss metric.
        page.get_by_text(NESTED[0], exact=True).first.click()
        page.wait_for_url("**/runs/**")
        page.get_by_text("loss", exact=True).first.wait_for()
        # The parent run is linked from the nested run's page.
        page.get_by_role("link", name="law_fit", exact=True).first.wait_for()
        page.screenshot(path=str(tmp_path / "nested-run.png"))
        body = page.inner_text("body")
        assert f"Training run {NESTED[0]} (preset attn-only-2l-d128, B = 32, C = 24" in body
