"""law_fit end to end: ``kedro run --pipeline=law_fit`` of the whole experiment on a micro grid.

The project's own conf/base is copied into a temporary project, with a small Pile-format shard
of KJV chapters already in the raw folder (so the embedded corpus is not materialised) and a
conf/local that shrinks the sweep to seconds. Everything real: the CLI and its KedroSession, the
catalog, DeepSpeed, the kedro-mlflow hook and an SQLite MLflow store in the temporary project.
It runs in a subprocess, as a user runs it, so MLflow's process-wide state (tracking URI,
active experiment) cannot leak into other tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from ih_kedro.pipelines.law_fit.pipeline import EXPERIMENT
from tests.micro_project import (
    base_parameters,
    deep_merge,
    kedro_run,
    micro_data_engineering,
    new_micro_project,
    run_output,
    write_local_parameters,
)

MICRO_TRAINING = {
    "batch_sizes": [4, 8],
    "context_lengths": [8, 16],
    "seeds": [0],
    "max_steps": 12,
    "max_tokens": None,
    "checkpoint_every": 6,
    "checkpoint_dense_until": 2,
    "log_every": 4,
    "online_emergence": {"eval_every": 6, "n_probes": 4},
    # Spans short enough for C = 8 (the default's 4-8 tokens every 16 need C >= 16).
    "variant_options": {"fixed_rate_copies": {"tokens_per_event": 8, "span_min": 2, "span_max": 3}},
}
MICRO_TELEMETRY = {
    "probe": {"n_samples": 4},
    "batch_size": 4,
    "n_validation_sequences": 2,
    "emergence": {"n_bootstrap": 5},
}


@pytest.fixture(scope="module")
def micro_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return new_micro_project(tmp_path_factory.mktemp("law_fit"))


@pytest.fixture(scope="module")
def micro_params(micro_project: Path) -> dict:
    """Write conf/local overrides (merged key by key into base's) and return them."""
    law_fit = base_parameters(micro_project, EXPERIMENT)
    overrides = {
        "data_engineering": micro_data_engineering(micro_project),
        EXPERIMENT: {
            **law_fit,
            "training": deep_merge(law_fit["training"], MICRO_TRAINING),
            "telemetry": deep_merge(law_fit["telemetry"], MICRO_TELEMETRY),
        },
    }
    write_local_parameters(micro_project, overrides)
    return overrides


def test_registry_has_stage_and_experiment_pipelines(project_root: Path) -> None:
    bootstrap_project(project_root)
    names = set(pipelines)
    assert {"data_engineering", "training", "telemetry", "statistics", "law_fit"} <= names
    namespaces = {node.namespace for node in pipelines["law_fit"].nodes}
    assert {
        "data_engineering",
        f"{EXPERIMENT}.training",
        f"{EXPERIMENT}.telemetry",
        f"{EXPERIMENT}.statistics",
    } <= namespaces
    # The experiment reuses the shared corpus products, not copies of them.
    assert {"train_tokens", "validation_tokens"} <= pipelines["law_fit"].all_outputs()
    assert f"{EXPERIMENT}.sweep_manifest" in pipelines["law_fit"].all_outputs()


@pytest.fixture(scope="module")
def micro_run(micro_project: Path, micro_params: dict) -> subprocess.CompletedProcess:
    """``kedro run --pipeline=law_fit`` once for this module (the e2e checks and the notebook)."""
    return kedro_run(micro_project, "--pipeline=law_fit")


def test_law_fit_kedro_run_end_to_end(
    micro_project: Path, micro_run: subprocess.CompletedProcess
) -> None:
    result = micro_run
    assert result.returncode == 0, run_output(result)

    data = micro_project / "data"
    manifest = pd.read_parquet(data / "07_model_output" / EXPERIMENT / "sweep_manifest.parquet")
    assert sorted(manifest["batch_size"].unique()) == [4, 8]
    assert sorted(manifest["context_length"].unique()) == [8, 16]
    assert (manifest["steps_trained"] == 12).all()
    for run_dir in manifest["run_dir"]:
        steps = sorted(p.name for p in (Path(run_dir) / "checkpoints").iterdir())
        assert "step_0000012" in steps and (Path(run_dir) / "run_summary.json").exists()

    head_scores = pd.read_parquet(data / "07_model_output" / EXPERIMENT / "head_scores.parquet")
    assert set(head_scores["run_name"]) == set(manifest["run_name"])
    assert {"prefix_matching", "previous_token", "logit_attribution"} <= set(head_scores["metric"])

    emergence = pd.read_parquet(data / "07_model_output" / EXPERIMENT / "emergence_table.parquet")
    # 12 steps of training: nothing emerges, and every run is reported as censored, not dropped.
    pm = emergence[(emergence["metric"] == "prefix_matching")]
    assert set(pm["run_name"]) == set(manifest["run_name"])
    crossing = pm[pm["method"] == "threshold"]
    assert (crossing["status"] == "censored").all() and crossing["censored"].all()
    # Censored at the last checkpoint, with its tokens; one probe length for the sweep.
    assert (crossing["step"] == 12).all() and (crossing["step"] == crossing["last_step"]).all()
    assert (crossing["tokens"] == 12 * crossing["batch_size"] * crossing["context_length"]).all()
    assert set(emergence["probe_length"]) == {4}
    # fixed_rate_copies, one event every 8 tokens: C / 8 events per sequence, in the manifest.
    events = dict(
        zip(manifest["context_length"], manifest["copy_events_per_sequence"], strict=True)
    )
    assert events == {8: 1.0, 16: 2.0}

    reporting = data / "08_reporting" / EXPERIMENT
    summary = json.loads((reporting / "law_fit_summary.json").read_text())
    assert summary["status"].startswith("insufficient_data")
    assert (reporting / "emergence_prediction.csv").exists()
    assert any(reporting.glob("*.png"))
    assert (data / "08_reporting" / "dedup_report.json").exists()

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{micro_project / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ih_kedro")
    # The UI opens a model-training experiment on its runs (not the GenAI overview).
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert experiment.tags["mlflow.note.content"].startswith("ih-kedro: when and why")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    nested = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(nested) == len(manifest)
    parent = parents[0]
    assert parent.data.tags["mlflow.note.content"].startswith("`kedro run --pipeline=law_fit`")
    assert {r.data.tags["mlflow.parentRunId"] for r in nested} == {parent.info.run_id}
    assert all("loss" in r.data.metrics for r in nested)
    for run in nested:
        note = run.data.tags["mlflow.note.content"]
        assert note.startswith(f"Training run {run.data.tags['run_name']} (preset ")
    # Figures and the fit table are the parent's artifacts, next to its law.* metrics.
    artifacts = {f.path for f in client.list_artifacts(parent.info.run_id, EXPERIMENT)}
    assert {f"{EXPERIMENT}/law_fit_table.csv", f"{EXPERIMENT}/law_fit_summary.json"} <= artifacts
    figures = {f.path for f in client.list_artifacts(parent.info.run_id, f"{EXPERIMENT}/figures")}
    assert {
        f"{EXPERIMENT}/figures/{name}.png"
        for name in (
            "ps_trajectories_plot",
            "law_predicted_vs_observed_plot",
            "law_residuals_plot",
            "telemetry_prefix_matching_plot",
            "telemetry_head_heatmaps",
        )
    } <= figures


def test_notebook_runs_against_the_micro_run(
    micro_project: Path, micro_run: subprocess.CompletedProcess
) -> None:
    """notebooks/explore_induction_heads.ipynb executes top to bottom on a real run's outputs,
    loading them through the Kedro catalog, and draws its figure."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    assert micro_run.returncode == 0, micro_run.stderr[-3000:]
    notebooks = micro_project / "notebooks"
    notebooks.mkdir(exist_ok=True)
    source = Path(__file__).resolve().parents[2] / "notebooks" / "explore_induction_heads.ipynb"
    notebook = nbformat.read(source, as_version=4)
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(notebooks)}},
    )
    client.execute(cwd=str(notebooks), env=env)
    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]
    assert not [out for out in outputs if out.output_type == "error"]
    assert any("image/png" in out.get("data", {}) for out in outputs)
    text = "\n".join(
        out.get("text", "") + out.get("data", {}).get("text/plain", "") for out in outputs
    )
    manifest = pd.read_parquet(
        micro_project / "data" / "07_model_output" / EXPERIMENT / "sweep_manifest.parquet"
    )
    # The catalog-loaded manifest and the law's status are the run's own.
    for run_name in manifest["run_name"]:
        assert run_name in text
    assert "status: insufficient_data" in text
    # The notebook's own scoring, on the pipeline's probes, equals the pipeline's head_scores.
    difference = re.search(r"max \|notebook - pipeline head_scores\| = (\S+)", text)
    assert difference is not None, text[-2000:]
    assert float(difference.group(1)) <= 1e-6
    assert "prefix-matching baseline (uniform attention) at L = 4: 0.159" in text
