"""``markov``: designed Markov processes x repetition level x seeds -> training -> telemetry ->
conditions table and claim verdicts.

Own nodes (namespace ``markov``): ``design_processes`` (``markov.processes``, one ``.npz`` per
process, and ``markov.process_table``) -> the calibration sweep (``plan_calibration`` ->
``train_calibration_sweep`` -> ``measure_frontier_level``: ``markov.frontier_level``, the
near-frontier level measured on the processes) -> ``plan_variant_data`` (``markov.variant_data``:
the process files and the resolved repetition levels, read by the training sweep: a real graph
edge) -> the stage pipelines ``training`` and ``telemetry`` reused in the ``markov`` namespace ->
``build_conditions`` (``markov.conditions_table``, ``markov.runs_table``) -> ``judge``
(``markov.verdicts``), figures and MLflow.

:func:`markov_pipeline` builds the same graph in another namespace: ``markov_full_vocab``
(its own package) is the experiment over the tokenizer's full vocabulary, with its parameters
(``params:markov_full_vocab.*``) and its outputs (``.../markov_full_vocab/``) beside markov's.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial, update_wrapper

from kedro.pipeline import Node, Pipeline

from ih_kedro.pipelines import telemetry, training
from ih_kedro.pipelines.law_fit.pipeline import (
    SHARED_TOKENIZER,
    corpus_stage,
    experiment_stage,
    model_vocabulary_stage,
)

from .calibration_nodes import measure_frontier_level, plan_calibration, train_calibration_sweep
from .nodes import design_processes, plan_variant_data, processes_figure
from .report_nodes import (
    build_conditions,
    comparisons_figure,
    conditions_figure,
    judge,
    log_markov_to_mlflow,
)

EXPERIMENT = "markov"


def _bound(func: Callable, **keywords: str) -> Callable:
    """``func`` with ``keywords`` bound, keeping its name and type hints (Kedro reads both)."""
    return update_wrapper(partial(func, **keywords), func)


def markov_pipeline(namespace: str = EXPERIMENT) -> Pipeline:
    """The markov experiment in ``namespace``: datasets ``<namespace>.<name>``, parameters
    ``params:<namespace>.<block>``, node namespaces ``<namespace>`` / ``<namespace>.training``
    / ``<namespace>.telemetry``; the verdicts' next-look command and the MLflow tags name it."""
    design = Pipeline(
        [
            Node(design_processes,
                 ["train_tokens", "params:design", "params:training", "params:telemetry"],
                 ["processes", "process_table"], name="design_processes"),
            Node(plan_calibration, ["processes", "params:calibration"],
                 "calibration_variant_data", name="plan_calibration"),
            Node(train_calibration_sweep,
                 ["train_tokens", "checkpoint_store", "params:training", "params:calibration",
                  "calibration_variant_data"],
                 "calibration_sweep_manifest", name="train_calibration_sweep"),
            Node(measure_frontier_level,
                 ["calibration_sweep_manifest", "calibration_variant_data", "params:training",
                  "params:calibration"],
                 "frontier_level", name="measure_frontier_level"),
            Node(plan_variant_data, ["processes", "params:repetition", "frontier_level"],
                 "variant_data", name="plan_variant_data"),
            Node(processes_figure, "processes", "processes_plot", name="plot_processes"),
        ],
        namespace=namespace,
    )  # fmt: skip
    report = Pipeline(
        [
            Node(build_conditions,
                 ["emergence_table", "score_samples", "process_table", "processes",
                  "variant_data", "params:training", "params:telemetry", "params:conditions"],
                 ["conditions_table", "runs_table"], name="build_conditions"),
            Node(_bound(judge, experiment=namespace),
                 ["runs_table", "frontier_level", "params:conditions", "params:training"],
                 "verdicts", name="judge"),
            Node(conditions_figure, "conditions_table", "conditions_plot",
                 name="plot_conditions"),
            Node(comparisons_figure, "verdicts", "comparisons_plot",
                 name="plot_paired_comparisons"),
            Node(_bound(log_markov_to_mlflow, experiment=namespace),
                 ["verdicts", "conditions_table"], None, name="log_markov_to_mlflow"),
        ],
        namespace=namespace,
    )  # fmt: skip
    return (
        corpus_stage()
        + model_vocabulary_stage(namespace)
        + design
        + experiment_stage(
            training.create_pipeline(variant_data=True), namespace, "training", SHARED_TOKENIZER
        )
        + experiment_stage(telemetry.create_pipeline(), namespace, "telemetry", SHARED_TOKENIZER)
        + report
    )


def create_pipeline(**kwargs) -> Pipeline:  # noqa: ANN003 - Kedro's signature
    return markov_pipeline(EXPERIMENT)
