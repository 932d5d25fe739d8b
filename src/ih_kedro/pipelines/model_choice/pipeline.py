"""``model_choice``: which affordable model has a load-bearing top head in the Bi-Induct base?

Claim 4 of Bi-Induct presupposes that the base arm's top-2 %-per-layer heads carry its copying.
The stage pipelines (reused through the namespace ``model_choice``) train every candidate preset
(``params:model_choice.training.presets``) on the natural-most base, ``base_calibration``'s
evaluation nodes score the final checkpoints (copy accuracy, the top-2 %-per-layer ablation
against random heads, per seed with a bootstrap CI), and ``choose_model`` applies the rule of
``science.statistics.model_choice``: ``model_choice.model_choice`` (json), ``.model_table`` (csv)
and its figure.
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from ih_kedro.pipelines.base_calibration.pipeline import run_evaluation_nodes
from ih_kedro.pipelines.law_fit.pipeline import experiment_pipeline

from .nodes import choose_model

EXPERIMENT = "model_choice"


def evaluation_pipeline() -> Pipeline:
    """Evaluation and the model rule, un-namespaced (``experiment_stage`` adds the prefix)."""
    return run_evaluation_nodes() + Pipeline(
        [
            Node(choose_model, ["runs_table", "compute_table", "params:choice"],
                 ["model_choice", "model_table", "model_choice_plot"], name="choose_model"),
        ]
    )  # fmt: skip


def create_pipeline(**kwargs) -> Pipeline:  # noqa: ANN003 - Kedro's signature
    return experiment_pipeline(EXPERIMENT, evaluation_pipeline(), "evaluation")
