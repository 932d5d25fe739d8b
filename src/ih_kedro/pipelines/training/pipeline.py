"""``training``: the sweep of training runs (DeepSpeed engine, resumable, early stop)."""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from .nodes import train_sweep


def create_pipeline(variant_data: bool = False, **kwargs) -> Pipeline:  # noqa: ANN003
    """The sweep node; with ``variant_data`` it also reads the ``variant_data`` dataset.

    ``variant_data`` (a mapping of small variant options, e.g. a saved model's path) is produced
    by an experiment's own data node, which makes that node a real upstream of training.
    """
    inputs = ["train_tokens", "checkpoint_store", "params:training"]
    if variant_data:
        inputs.append("variant_data")
    return Pipeline(
        [
            Node(
                train_sweep,
                inputs=inputs,
                outputs="sweep_manifest",
                name="train_sweep",
            )
        ]
    )
