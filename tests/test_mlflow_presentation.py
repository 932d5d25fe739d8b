"""What the MLflow presentation hook attaches to a run, and how it describes it."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from ih_kedro.hooks import kedro_run_description, report_artifact_path
from ih_kedro.science.training.tracking import training_run_description


def test_report_artifact_paths() -> None:
    fig = Figure()
    assert report_artifact_path("law_fit.ps_trajectories_plot", fig) == (
        "law_fit/figures/ps_trajectories_plot.png"
    )
    assert report_artifact_path("law_residuals_plot", fig) == "figures/law_residuals_plot.png"
    table = pd.DataFrame({"a": [1]})
    assert report_artifact_path("law_fit.law_fit_table", table) == "law_fit/law_fit_table.csv"
    assert report_artifact_path("law_fit.law_fit_summary", {}) == "law_fit/law_fit_summary.json"
    # Everything else stays out of the run's artifacts.
    assert report_artifact_path("law_fit.head_scores", table) is None
    assert report_artifact_path("law_fit.sweep_manifest", table) is None


def test_descriptions_name_the_pipeline_and_the_run() -> None:
    assert kedro_run_description(["law_fit"], None).startswith(
        "`kedro run --pipeline=law_fit` (conf env: local)."
    )
    assert kedro_run_description(None, "paper").startswith(
        "`kedro run --pipeline=__default__` (conf env: paper)."
    )
    params = {"preset": "attn-only-2l-d128", "batch_size": 32, "context_length": 24, "seed": 1}
    assert training_run_description("r1", {**params, "data_variant": "copy_spans"}).startswith(
        "Training run r1 (preset attn-only-2l-d128, B = 32, C = 24, seed = 1, data: copy_spans),"
    )


def test_artifact_datasets_are_left_to_log_themselves():
    """An ``MlflowArtifactDataset`` logs its own artifact: the hook must not log it again."""
    from kedro.io import DataCatalog

    from ih_kedro.hooks import MlflowPresentationHooks

    figure = {"type": "matplotlib.MatplotlibDataset", "filepath": "/tmp/never-written.png"}
    catalog = DataCatalog.from_config(
        {
            "pareto.heatmap": {
                "type": "kedro_mlflow.io.artifacts.MlflowArtifactDataset",
                "artifact_path": "pareto",
                "dataset": figure,
            },
            "law_fit.ps_plot": figure,
        }
    )
    hooks = MlflowPresentationHooks()
    hooks._catalog = catalog
    assert hooks._logs_itself("pareto.heatmap") is True
    assert hooks._logs_itself("law_fit.ps_plot") is False
    assert hooks._logs_itself("not.in.the.catalog") is False
