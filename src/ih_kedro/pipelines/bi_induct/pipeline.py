"""``bi_induct``: data engineering → training sweep (variants) → telemetry → evaluation.

The stage pipelines are reused through namespaces (``experiment_stage`` of ``law_fit``): the
sweep trains natural-only and snippet variants of each model size on the shared corpus
products; telemetry scores every checkpoint; the experiment's own nodes check matched
compute, evaluate every checkpoint (perplexity, ICL score, copy accuracy, function-vector
probes, ablation of the top induction heads vs random controls), write the results table and
figures, reduce every run to one row (``runs_table``), decide the five claims with seeds as the
unit (``claims``, ``claims_table``), check the final models on snippet probes of several spans
(``span_probe_table``), draw the ablation drop over training (``load_bearing_plot``), and, when
``bi_induct.lm_eval.enabled`` (paper scale), run lm-evaluation-harness benchmarks on every
run's final checkpoint.
Datasets are ``bi_induct.<name>``; parameters ``params:bi_induct.<stage>``.
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from ih_kedro.pipelines.law_fit.pipeline import experiment_pipeline

from .claims_nodes import (
    build_run_table,
    build_span_probe_table,
    decide_bi_induct_claims,
    log_claims_to_mlflow,
    plot_load_bearing,
)
from .lm_eval_nodes import evaluate_lm_eval, log_lm_eval_to_mlflow
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
    """The experiment's own nodes, written un-namespaced (``experiment_stage`` adds
    ``bi_induct.`` to datasets and parameters, as for the reused stages)."""
    return Pipeline(
        [
            Node(matched_compute, "sweep_manifest", "compute_table", name="matched_compute"),
            Node(evaluate_runs,
                 ["compute_table", "sweep_manifest", "tokenizer", "train_tokens",
                  "validation_tokens", "params:evaluation", "params:training"],
                 ["checkpoint_metrics", "final_evaluations"], name="evaluate_runs"),
            Node(build_results_table,
                 ["final_evaluations", "compute_table", "params:evaluation"],
                 "results_table", name="build_results_table"),
            Node(plot_signatures, ["head_scores", "sweep_manifest"], "signatures_plot",
                 name="plot_signatures"),
            Node(plot_ablation_over_training, "checkpoint_metrics", "ablation_plot",
                 name="plot_ablation_over_training"),
            Node(plot_perplexity_gap, ["checkpoint_metrics", "params:evaluation"],
                 "perplexity_gap_plot", name="plot_perplexity_gap"),
            Node(build_run_table, ["final_evaluations", "compute_table", "checkpoint_metrics",
                 "emergence_table", "params:evaluation"], "runs_table", name="build_run_table"),
            Node(decide_bi_induct_claims, ["runs_table", "params:evaluation", "params:training"],
                 ["claims", "claims_table"], name="decide_claims"),
            Node(build_span_probe_table, ["final_evaluations", "sweep_manifest"],
                 "span_probe_table", name="build_span_probe_table"),
            Node(plot_load_bearing, ["checkpoint_metrics", "params:evaluation"],
                 "load_bearing_plot", name="plot_load_bearing"),
            Node(log_claims_to_mlflow, ["claims", "runs_table"], None,
                 name="log_claims_to_mlflow"),
            Node(log_bi_induct_to_mlflow, ["results_table", "checkpoint_metrics",
                 "sweep_manifest"], None, name="log_bi_induct_to_mlflow"),
            Node(evaluate_lm_eval, ["compute_table", "sweep_manifest", "tokenizer",
                 "params:lm_eval"], "lm_eval_scores", name="evaluate_lm_eval"),
            Node(log_lm_eval_to_mlflow, ["lm_eval_scores", "sweep_manifest"], None,
                 name="log_lm_eval_to_mlflow"),
        ]
    )  # fmt: skip


def create_pipeline(**kwargs) -> Pipeline:  # noqa: ANN003 - Kedro's signature
    return experiment_pipeline(EXPERIMENT, evaluation_pipeline(), "evaluation")
