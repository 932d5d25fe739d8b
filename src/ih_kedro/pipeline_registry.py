"""Project pipelines: the stage pipelines on their own, and the experiments that reuse them."""

from __future__ import annotations

from kedro.framework.project import find_pipelines
from kedro.pipeline import Pipeline


def register_pipelines() -> dict[str, Pipeline]:
    """Register the project's pipelines.

    Stage pipelines (``data_engineering``, ``training``, ``telemetry``, ``statistics``) are
    found automatically; experiment pipelines (``law_fit``) reuse them through namespaces.
    ``kedro run`` with no ``--pipeline`` runs ``law_fit``, the study's headline experiment.
    """
    pipelines = find_pipelines(raise_errors=True)
    if "law_fit" in pipelines:
        pipelines["__default__"] = pipelines["law_fit"]
    else:
        pipelines["__default__"] = sum(pipelines.values(), Pipeline([]))
    return pipelines
