"""``base_calibration``: which repetition dose is the natural-most Bi-Induct base?

Plain natural text forms no induction head at CPU scale, so the base closest to the study's
natural-only one is the least enrichment that still forms heads. The stage pipelines (reused
through the namespace ``base_calibration``) train ``fixed_rate_copies`` at log-spaced doses (one
copy event per N tokens, ``params:base_calibration.training.data_variants``) and score every
checkpoint; ``bi_induct``'s own nodes check matched compute, evaluate the runs (copy accuracy, the
top-2 %-per-layer ablation against random heads) and reduce them to one row per run; then
``calibrate_base`` applies the dose rule (``science.statistics.base_calibration``):
``base_calibration.dose_choice`` (json), ``.dose_response`` (csv) and its figure.
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from ih_kedro.pipelines.bi_induct.claims_nodes import build_run_table
from ih_kedro.pipelines.bi_induct.nodes import evaluate_runs, matched_compute
from ih_kedro.pipelines.law_fit.pipeline import experiment_pipeline

from .nodes import calibrate_base

EXPERIMENT = "base_calibration"


def run_evaluation_nodes() -> Pipeline:
    """Matched compute, evaluation of every run's final checkpoint and the per-run table
    (``bi_induct``'s nodes), un-namespaced; ``model_choice`` reuses them."""
    return Pipeline(
        [
            Node(matched_compute, "sweep_manifest", "compute_table", name="matched_compute"),
            Node(evaluate_runs,
                 ["compute_table", "sweep_manifest", "tokenizer", "train_tokens",
                  "validation_tokens", "params:evaluation", "params:training"],
                 ["checkpoint_metrics", "final_evaluations"], name="evaluate_runs"),
            Node(build_run_table, ["final_evaluations", "compute_table", "checkpoint_metrics",
                 "emergence_table", "params:evaluation"], "runs_table", name="build_run_table"),
        ]
    )  # fmt: skip


def evaluation_pipeline() -> Pipeline:
    """Evaluation and the dose rule, un-namespaced (``experiment_stage`` adds the prefix)."""
    return run_evaluation_nodes() + Pipeline(
        [
            Node(calibrate_base, ["runs_table", "params:training", "params:calibration"],
                 ["dose_choice", "dose_response", "dose_response_plot"], name="calibrate_base"),
        ]
    )  # fmt: skip


def create_pipeline(**kwargs) -> Pipeline:  # noqa: ANN003 - Kedro's signature
    return experiment_pipeline(EXPERIMENT, evaluation_pipeline(), "evaluation")
