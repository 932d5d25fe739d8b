"""Telemetry pipeline: probes -> scores per checkpoint -> emergence, MLflow, figures."""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from ih_kedro.pipelines.telemetry.nodes import (
    detect_emergence,
    log_telemetry_to_mlflow,
    make_probe_set,
    plot_head_heatmaps,
    plot_prefix_matching_over_training,
    score_checkpoints,
)


def scoring_pipeline() -> Pipeline:
    """Probe, score every checkpoint of ``sweep_manifest``, plot: shared with ``telemetry_external``."""
    return Pipeline(
        [
            Node(make_probe_set, ["train_tokens", "params:telemetry"], "probe_set",
                 name="make_probe_set"),
            Node(score_checkpoints,
                 ["sweep_manifest", "probe_set", "validation_tokens", "params:telemetry"],
                 ["head_scores", "model_scores", "score_samples"], name="score_checkpoints"),
            Node(plot_prefix_matching_over_training, "head_scores",
                 "telemetry_prefix_matching_plot", name="plot_prefix_matching_over_training"),
            Node(plot_head_heatmaps, ["head_scores", "params:telemetry"],
                 "telemetry_head_heatmaps", name="plot_head_heatmaps"),
        ]
    )  # fmt: skip


def create_pipeline(**kwargs) -> Pipeline:
    """Nodes reading ``sweep_manifest``, ``train_tokens``, ``validation_tokens``, ``params:telemetry``."""
    return scoring_pipeline() + Pipeline(
        [
            Node(detect_emergence, ["score_samples", "sweep_manifest", "params:telemetry"],
                 "emergence_table", name="detect_emergence"),
            Node(log_telemetry_to_mlflow, ["head_scores", "model_scores", "sweep_manifest"],
                 None, name="log_telemetry_to_mlflow"),
        ]
    )  # fmt: skip
