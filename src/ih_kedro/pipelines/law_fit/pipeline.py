"""``law_fit``: data engineering → training sweep → telemetry → the emergence law.

The experiment reuses the stage pipelines through namespaces, never copies: its datasets are
``law_fit.<name>`` (the sweep, scores and fit of this experiment) except the corpus products
shared by every experiment (``tokenizer``, ``train_tokens``, ``validation_tokens``), and its
parameters are ``params:law_fit.<stage>``. In kedro-viz each stage collapses into a super-node
``law_fit.training``, ``law_fit.telemetry``, ``law_fit.statistics``.
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from ih_kedro.pipelines import data_engineering, statistics, telemetry, training
from ih_kedro.pipelines.data_engineering.nodes import compact_token_streams

EXPERIMENT = "law_fit"

# Products of data engineering that every experiment reads as they are.
SHARED_DATASETS = frozenset({"tokenizer", "train_tokens", "validation_tokens"})


# What an experiment with its own model vocabulary shares (its token streams are its own).
SHARED_TOKENIZER = frozenset({"tokenizer"})


def experiment_stage(
    stage: Pipeline,
    experiment: str,
    stage_name: str,
    shared_datasets: frozenset[str] = SHARED_DATASETS,
) -> Pipeline:
    """Place a stage pipeline inside an experiment namespace.

    Node namespaces become ``<experiment>.<stage_name>`` (a super-node in kedro-viz); dataset
    names get the ``<experiment>.`` prefix unless they are in ``shared_datasets`` (the corpus
    products); parameters ``params:<stage>`` become ``params:<experiment>.<stage>``.
    """
    grouped = Pipeline(stage, namespace=stage_name, prefix_datasets_with_namespace=False)
    shared = {name for name in grouped.inputs() if name in shared_datasets}
    return Pipeline(grouped, namespace=experiment, inputs=shared)


def model_vocabulary_stage(experiment: str) -> Pipeline:
    """``train_tokens``, ``validation_tokens`` → ``<experiment>.train_tokens`` /
    ``.validation_tokens`` in the experiment's model vocabulary (``params:<experiment>.vocabulary``;
    a compact one for the synthetic experiments). Use with ``shared_datasets=SHARED_TOKENIZER``
    in the stages that follow, so they read the experiment's streams."""
    return Pipeline(
        [
            Node(compact_token_streams,
                 ["train_tokens", "validation_tokens", f"params:{experiment}.vocabulary"],
                 [f"{experiment}.train_tokens", f"{experiment}.validation_tokens"],
                 name="compact_token_streams", namespace=f"{experiment}.vocabulary"),
        ]
    )  # fmt: skip


def corpus_stage() -> Pipeline:
    """The data-engineering stage every experiment starts from (its products are shared, not
    namespaced: one corpus, tokenizer and token stream for all experiments)."""
    return Pipeline(
        data_engineering.create_pipeline(),
        namespace="data_engineering",
        prefix_datasets_with_namespace=False,
    )


def trained_stages(experiment: str) -> Pipeline:
    """The training sweep and its telemetry inside ``experiment``'s namespace."""
    return experiment_stage(training.create_pipeline(), experiment, "training") + experiment_stage(
        telemetry.create_pipeline(), experiment, "telemetry"
    )


def experiment_pipeline(experiment: str, stage: Pipeline, stage_name: str) -> Pipeline:
    """An experiment end to end: the corpus, :func:`trained_stages` and the experiment's own
    ``stage`` (written un-namespaced; placed as ``<experiment>.<stage_name>``)."""
    return (
        corpus_stage()
        + trained_stages(experiment)
        + experiment_stage(stage, experiment, stage_name)
    )


def create_pipeline(**kwargs) -> Pipeline:  # noqa: ANN003 - Kedro's signature
    return experiment_pipeline(EXPERIMENT, statistics.create_pipeline(), "statistics")
