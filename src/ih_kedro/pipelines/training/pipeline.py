"""``training``: the sweep of training runs (DeepSpeed engine, resumable, early stop)."""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from .nodes import train_sweep


def create_pipeline(**kwargs) -> Pipeline:  # noqa: ANN003 - Kedro's signature
    return Pipeline(
        [
            Node(
                train_sweep,
                inputs=["train_tokens", "checkpoint_store", "params:training"],
                outputs="sweep_manifest",
                name="train_sweep",
            )
        ]
    )
