"""``bi_induct``: data engineering → training sweep (variants) → telemetry → evaluation.

The stage pipelines are reused through namespaces (``experiment_stage`` of ``law_fit``): the
sweep trains natural-only and snippet variants of each model size on the shared corpus
products; telemetry scores every checkpoint; the experiment's own nodes check matched
compute, evaluate every checkpoint (perplexity, ICL score, function-vector probes, ablation of
the top induction heads vs random controls) and write the results table and figures.
Datasets are ``bi_induct.<name>``; parameters ``params:bi_induct.<stage>``.
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from ih_kedro.pipelines import data_engineering, telemetry, training
from ih_kedro.pipelines.law_fit.pipeline import experiment_stage

from .nodes import (
    build_results_table,
    evaluate_runs,
    log_bi_induct_to_mlflow,
    matched_compute,
    plot_ablation_over_training,
    plot_perplexity_gap,
    plot_signatures,
)

EXPERIMENT = "bi_induct"


def evaluation_pipeline() -> Pipeline:
    """The experiment's own nodes (namespace ``bi_induct.evaluation``)."""
    e = EXPERIMENT
    nodes = Pipeline(
        [
            Node(matched_compute, f"{e}.sweep_manifest", f"{e}.compute_table",
                 name="matched_compute"),
            Node(evaluate_runs,
                 [f"{e}.compute_table", f"{e}.sweep_manifest", "tokenizer", "train_tokens",
                  "validation_tokens", f"params:{e}.evaluation", f"params:{e}.training"],
                 [f"{e}.checkpoint_metrics", f"{e}.final_evaluations"], name="evaluate_runs"),
            Node(build_results_table,
                 [f"{e}.final_evaluations", f"{e}.compute_table", f"params:{e}.evaluation"],
                 f"{e}.results_table", name="build_results_table"),
            Node(plot_signatures, [f"{e}.head_scores", f"{e}.sweep_manifest"],
                 f"{e}.signatures_plot", name="plot_signatures"),
            Node(plot_ablation_over_training, f"{e}.checkpoint_metrics", f"{e}.ablation_plot",
                 name="plot_ablation_over_training"),
            Node(plot_perplexity_gap, [f"{e}.checkpoint_metrics", f"params:{e}.evaluation"],
                 f"{e}.perplexity_gap_plot", name="plot_perplexity_gap"),
            Node(log_bi_induct_to_mlflow,
                 [f"{e}.results_table", f"{e}.checkpoint_metrics", f"{e}.sweep_manifest"], None,
                 name="log_bi_induct_to_mlflow"),
        ]
    )  # fmt: skip
    return Pipeline(nodes, namespace=f"{e}.evaluation", prefix_datasets_with_namespace=False)


def create_pipeline(**kwargs) -> Pipeline:  # noqa: ANN003 - Kedro's signature
    corpus = Pipeline(
        data_engineering.create_pipeline(),
        namespace="data_engineering",
        prefix_datasets_with_namespace=False,
    )
    return (
        corpus
        + experiment_stage(training.create_pipeline(), EXPERIMENT, "training")
        + experiment_stage(telemetry.create_pipeline(), EXPERIMENT, "telemetry")
        + evaluation_pipeline()
    )
