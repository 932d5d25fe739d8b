"""Statistics pipeline: emergence law fit, predictions, figures, MLflow metrics."""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from .nodes import (
    fit_emergence_law_node,
    log_law_fit_to_mlflow,
    plot_predicted_vs_observed,
    plot_residuals_vs_model_size,
    plot_trajectories,
    predict_emergence_node,
)


def create_pipeline(**kwargs) -> Pipeline:
    """Fit ``S* = T / (B^a C^b)`` to the emergence table and report it.

    Inputs: ``emergence_table``, ``head_scores``, ``sweep_manifest``, ``params:statistics``.
    Outputs: ``law_fit_summary`` (json), ``law_fit_table`` and ``emergence_prediction`` (csv),
    the figures ``ps_trajectories_plot``, ``law_predicted_vs_observed_plot``,
    ``law_residuals_plot``, and the fit's numbers as MLflow metrics.
    """
    return Pipeline(
        [
            Node(
                fit_emergence_law_node,
                inputs=["emergence_table", "params:statistics"],
                outputs=["law_fit_summary", "law_fit_table"],
                name="fit_emergence_law",
            ),
            Node(
                predict_emergence_node,
                inputs=["law_fit_summary", "params:statistics"],
                outputs="emergence_prediction",
                name="predict_emergence",
            ),
            Node(
                plot_trajectories,
                inputs=["head_scores", "emergence_table", "law_fit_summary", "params:statistics"],
                outputs="ps_trajectories_plot",
                name="plot_ps_trajectories",
            ),
            Node(
                plot_predicted_vs_observed,
                inputs=["emergence_table", "law_fit_summary", "params:statistics"],
                outputs="law_predicted_vs_observed_plot",
                name="plot_law_predicted_vs_observed",
            ),
            Node(
                plot_residuals_vs_model_size,
                inputs=[
                    "emergence_table",
                    "law_fit_summary",
                    "sweep_manifest",
                    "params:statistics",
                ],
                outputs="law_residuals_plot",
                name="plot_law_residuals",
            ),
            Node(
                log_law_fit_to_mlflow,
                inputs="law_fit_summary",
                outputs=None,
                name="log_law_fit_to_mlflow",
            ),
        ]
    )
