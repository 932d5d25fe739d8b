"""``pareto``: semi-natural data → training sweep → telemetry → the frequency × reliability frontier.

Experiment 2: induction heads form only when in-context repetitions are frequent enough **and**
reliable enough. The stage pipelines are reused through namespaces (``experiment_stage``, as in
``law_fit``): ``pareto.training`` trains one run per (frequency, reliability, seed) cell of
``params:pareto.training.data_variants`` on the ``semi_natural`` variant, ``pareto.telemetry``
scores the checkpoints and detects emergence. The experiment's own nodes:

* ``pareto.semi_natural``: ``train_tokens`` → ``pareto.bigram_model`` (saved ``.npz``) →
  ``pareto.variant_data`` (the model's path and checksum), an input of the training sweep, so
  the model is a real upstream of training (Ray workers read the model from that path);
* ``pareto.frontier``: ``pareto.cell_table`` (one row per run, with the threshold-free
  formation score and the formed verdict at each threshold), ``pareto.cell_summary`` (one row
  per cell, seeds as the unit), ``pareto.threshold_robustness`` (the knobs' verdicts at every
  threshold), ``pareto.frontier_table`` and ``pareto.frontier_summary``, the figures (catalog:
  files and MLflow artifacts), MLflow metrics and verdict tags.
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from ih_kedro.pipelines import telemetry, training
from ih_kedro.pipelines.law_fit.pipeline import (
    SHARED_TOKENIZER,
    corpus_stage,
    experiment_stage,
    model_vocabulary_stage,
)

from .nodes import (
    build_bigram_model,
    build_cell_table,
    estimate_frontier,
    log_pareto_to_mlflow,
    plot_frontier,
    plot_robustness,
    plot_sstar_distance,
    semi_natural_variant_data,
    summarise_robustness,
)

EXPERIMENT = "pareto"


def semi_natural_pipeline() -> Pipeline:
    """``train_tokens`` → ``bigram_model`` → ``variant_data`` (``pareto.``-prefixed in the experiment)."""
    return Pipeline(
        [
            Node(build_bigram_model, ["train_tokens", "params:semi_natural"],
                 "bigram_model", name="build_bigram_model"),
            Node(semi_natural_variant_data,
                 ["bigram_model", "params:training", "params:telemetry"],
                 "variant_data", name="semi_natural_variant_data"),
        ]
    )  # fmt: skip


def frontier_pipeline() -> Pipeline:
    """Sweep + emergence → cell table → frontier, figures, MLflow."""
    return Pipeline(
        [
            Node(build_cell_table,
                 ["sweep_manifest", "emergence_table", "score_samples", "train_tokens",
                  "variant_data", "params:training", "params:telemetry", "params:frontier"],
                 "cell_table", name="build_cell_table"),
            Node(summarise_robustness, ["cell_table", "params:frontier"],
                 ["cell_summary", "threshold_robustness"], name="summarise_robustness"),
            Node(estimate_frontier, ["cell_table", "params:frontier", "threshold_robustness"],
                 ["frontier_table", "frontier_summary"], name="estimate_frontier"),
            Node(plot_frontier,
                 ["cell_table", "frontier_table", "frontier_summary"],
                 "frontier_heatmap", name="plot_frontier"),
            Node(plot_sstar_distance, ["cell_table", "frontier_summary"],
                 "sstar_vs_distance_plot", name="plot_sstar_vs_distance"),
            Node(plot_robustness, "threshold_robustness", "threshold_robustness_plot",
                 name="plot_threshold_robustness"),
            Node(log_pareto_to_mlflow, "frontier_summary", None, name="log_pareto_to_mlflow"),
        ]
    )  # fmt: skip


def create_pipeline(**kwargs) -> Pipeline:  # noqa: ANN003 - Kedro's signature
    return (
        corpus_stage()
        + model_vocabulary_stage(EXPERIMENT)
        + experiment_stage(semi_natural_pipeline(), EXPERIMENT, "semi_natural", SHARED_TOKENIZER)
        + experiment_stage(
            training.create_pipeline(variant_data=True), EXPERIMENT, "training", SHARED_TOKENIZER
        )
        + experiment_stage(telemetry.create_pipeline(), EXPERIMENT, "telemetry", SHARED_TOKENIZER)
        + experiment_stage(frontier_pipeline(), EXPERIMENT, "frontier", SHARED_TOKENIZER)
    )
