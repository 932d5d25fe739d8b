"""Score external checkpoints with the telemetry nodes under the ``external`` namespace.

``kedro run --pipeline=telemetry_external --params=telemetry.external_checkpoints=/path``
writes ``external.head_scores``, ``external.model_scores``, ... (catalog factories). For a
model with a foreign tokenizer set ``telemetry.probe.source=uniform`` and
``telemetry.probe.vocab_size``; ICL metrics are skipped when our validation tokens fall
outside its vocabulary.
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from ih_kedro.pipelines.telemetry.nodes import (
    discover_external_checkpoints,
    make_probe_set,
    plot_head_heatmaps,
    plot_prefix_matching_over_training,
    score_checkpoints,
)


def create_pipeline(**kwargs) -> Pipeline:
    """Discover checkpoints, then probe, score and plot them (no emergence, no MLflow)."""
    return Pipeline(
        [
            Node(discover_external_checkpoints, "params:telemetry", "sweep_manifest",
                 name="discover_external_checkpoints"),
            Node(make_probe_set, ["train_tokens", "params:telemetry"], "probe_set",
                 name="make_probe_set"),
            Node(score_checkpoints,
                 ["sweep_manifest", "probe_set", "validation_tokens", "params:telemetry"],
                 ["head_scores", "model_scores", "score_samples"], name="score_checkpoints"),
            Node(plot_prefix_matching_over_training, "head_scores",
                 "telemetry_prefix_matching_plot", name="plot_prefix_matching_over_training"),
            Node(plot_head_heatmaps, ["head_scores", "params:telemetry"],
                 "telemetry_head_heatmaps", name="plot_head_heatmaps"),
        ],
        namespace="external",
        inputs={"train_tokens", "validation_tokens"},
        parameters={"params:telemetry"},
    )  # fmt: skip
