"""``law_fit``: data engineering → training sweep → telemetry → the emergence law.

The experiment reuses the stage pipelines through namespaces, never copies: its datasets are
``law_fit.<name>`` (the sweep, scores and fit of this experiment) except the corpus products
shared by every experiment (``tokenizer``, ``train_tokens``, ``validation_tokens``), and its
parameters are ``params:law_fit.<stage>``. In kedro-viz each stage collapses into a super-node
``law_fit.training``, ``law_fit.telemetry``, ``law_fit.statistics``.
"""

from __future__ import annotations

from kedro.pipeline import Pipeline

from ih_kedro.pipelines import data_engineering, statistics, telemetry, training

EXPERIMENT = "law_fit"

# Products of data engineering that every experiment reads as they are.
SHARED_DATASETS = frozenset({"tokenizer", "train_tokens", "validation_tokens"})


def experiment_stage(stage: Pipeline, experiment: str, stage_name: str) -> Pipeline:
    """Place a stage pipeline inside an experiment namespace.

    Node namespaces become ``<experiment>.<stage_name>`` (a super-node in kedro-viz); dataset
    names get the ``<experiment>.`` prefix unless they are shared corpus products; parameters
    ``params:<stage>`` become ``params:<experiment>.<stage>``.
    """
    grouped = Pipeline(stage, namespace=stage_name, prefix_datasets_with_namespace=False)
    shared = {name for name in grouped.inputs() if name in SHARED_DATASETS}
    return Pipeline(grouped, namespace=experiment, inputs=shared)


def corpus_stage() -> Pipeline:
    """The data-engineering stage every experiment starts from (its products are shared, not
    namespaced: one corpus, tokenizer and token stream for all experiments)."""
    return Pipeline(
        data_engineering.create_pipeline(),
        namespace="data_engineering",
        prefix_datasets_with_namespace=False,
    )


def create_pipeline(**kwargs) -> Pipeline:  # noqa: ANN003 - Kedro's signature
    return (
        corpus_stage()
        + experiment_stage(training.create_pipeline(), EXPERIMENT, "training")
        + experiment_stage(telemetry.create_pipeline(), EXPERIMENT, "telemetry")
        + experiment_stage(statistics.create_pipeline(), EXPERIMENT, "statistics")
    )
