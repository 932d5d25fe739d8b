"""Score external checkpoints with the telemetry nodes under the ``external`` namespace.

``kedro run --pipeline=telemetry_external --params=telemetry.external_checkpoints=/path``
writes ``external.head_scores``, ``external.model_scores``, ... (catalog factories). For a
model with a foreign tokenizer set ``telemetry.probe.source=uniform`` and
``telemetry.probe.vocab_size``; ICL metrics are skipped when our validation tokens fall
outside its vocabulary.
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from ih_kedro.pipelines.telemetry.nodes import discover_external_checkpoints
from ih_kedro.pipelines.telemetry.pipeline import scoring_pipeline


def create_pipeline(**kwargs) -> Pipeline:
    """Discover checkpoints, then probe, score and plot them (no emergence, no MLflow)."""
    discover = Node(
        discover_external_checkpoints,
        "params:telemetry",
        "sweep_manifest",
        name="discover_external_checkpoints",
    )
    return Pipeline(
        Pipeline([discover]) + scoring_pipeline(),
        namespace="external",
        inputs={"train_tokens", "validation_tokens"},
        parameters={"params:telemetry"},
    )
