"""Nodes of the ``pareto`` experiment: the bigram model, the cell table, the frontier, figures.

Thin adapters over catalog data; the science lives in
``ih_kedro.science.data.variants`` (the semi-natural data and its bigram model) and
``ih_kedro.science.statistics``: :mod:`~ih_kedro.science.statistics.pareto_cells` (the cell
table), :mod:`~ih_kedro.science.statistics.pareto_summary` (the frontier's tables and summary,
on :mod:`~ih_kedro.science.statistics.pareto_frontier`) and
:mod:`~ih_kedro.science.statistics.plots.pareto` (the figures).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.variants.bigram_model import BigramModel, estimate_bigram_model
from ih_kedro.science.data.variants.semi_natural import VARIANT
from ih_kedro.science.statistics import pareto_cells, pareto_robustness, pareto_summary
from ih_kedro.science.statistics.plots import pareto as pareto_plots
from ih_kedro.science.telemetry.emergence_table import emergence_min_layer
from ih_kedro.science.telemetry.formation import DEFAULT_THRESHOLDS, formation_table

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Data engineering: the bigram model
# --------------------------------------------------------------------------------------------
def build_bigram_model(train_tokens: PackedTokens, params: Mapping[str, Any]) -> BigramModel:
    """Estimate the bigram model of the deduplicated training stream (``params:pareto.semi_natural``)."""
    size = train_tokens.compact_vocabulary_size
    n_states = int(params.get("n_types", 255)) + int(bool(params.get("other_bucket", True)))
    if size is not None and size < n_states:
        raise ValueError(
            f"pareto.vocabulary.size: {size} tokens cannot hold the bigram model's "
            f"{n_states} states (semi_natural.n_types + the other bucket); set it >= {n_states}"
        )
    model = estimate_bigram_model(
        np.asarray(train_tokens.tokens),
        train_tokens.vocab_size,
        int(params.get("n_types", 255)),
        float(params.get("smoothing", 0.01)),
        eos_token_id=train_tokens.eos_token_id,
        other_bucket=bool(params.get("other_bucket", True)),
        pooled_token_ids=train_tokens.other_token_ids,
    )
    covered = model.counts.sum() / max(len(train_tokens) - 1, 1)
    logger.info(
        "bigram model: %d states (other bucket: %s), smoothing %g, %.1f%% of token pairs counted",
        model.n_states,
        model.other_bucket,
        model.smoothing,
        100 * covered,
    )
    return model


def _pool_sizes(training: Mapping[str, Any], telemetry: Mapping[str, Any]) -> dict[str, int]:
    online = dict(training.get("online_emergence") or {})
    probe = dict(telemetry.get("probe") or {})
    sizes = {"training.online_emergence.token_pool_size": int(online.get("token_pool_size", 500))}
    if probe.get("source", "frequent") == "frequent":
        sizes["telemetry.probe.top_k"] = int(probe.get("top_k", 500))
    else:
        sizes["telemetry.probe.source"] = -1  # uniform over the whole vocabulary
    return sizes


def semi_natural_variant_data(
    bigram_model: BigramModel, training: Mapping[str, Any], telemetry: Mapping[str, Any]
) -> dict[str, str]:
    """The options every ``semi_natural`` run reads the model with (its path and checksum).

    Also checks, before any training, that the induction probes (online early stop and offline
    telemetry) draw their tokens from the model's vocabulary: both pools are the most frequent
    training tokens, the model's states are the ``n_types`` most frequent, so each pool size
    must be ``<= n_types``.
    """
    n_types = bigram_model.n_states - int(bigram_model.other_bucket)
    for name, size in _pool_sizes(training, telemetry).items():
        if size < 0:
            raise ValueError(
                f"pareto.{name}: probes drawn uniformly from the vocabulary use tokens the "
                "semi-natural model never emits; use source: frequent"
            )
        if size > n_types:
            raise ValueError(
                f"pareto.{name}: {size} probe tokens exceed the bigram model's {n_types} types "
                "(probes would use tokens the model never trains on); set it <= "
                "pareto.semi_natural.n_types"
            )
    return bigram_model.variant_options()


# --------------------------------------------------------------------------------------------
# The cell table
# --------------------------------------------------------------------------------------------
def _run_knobs(training: Mapping[str, Any]) -> pd.DataFrame:
    from ih_kedro.science.training.grid import expand_grid

    rows = []
    for config in expand_grid(training):
        if config.data_variant != VARIANT:
            raise ValueError(
                f"pareto.training.data_variants: every cell must use the {VARIANT!r} variant, "
                f"run {config.run_name} uses {config.data_variant!r}"
            )
        options = config.variant_options
        rows.append(
            {
                "run_name": config.run_name,
                "label": config.run_name.split(f"_C{config.context_length}_", 1)[-1].rsplit(
                    "_s", 1
                )[0],
                "frequency": float(options["frequency"]),
                "reliability": float(options["reliability"]),
                "budget_steps": int(config.total_steps),
                "budget_tokens": int(config.total_steps * config.tokens_per_step),
                "config": config,
            }
        )
    return pd.DataFrame(rows)


def build_cell_table(
    sweep_manifest: pd.DataFrame,
    emergence_table: pd.DataFrame,
    score_samples: Mapping[str, Any],
    train_tokens: PackedTokens,
    variant_data: Mapping[str, Any],
    training: Mapping[str, Any],
    telemetry: Mapping[str, Any],
    frontier: Mapping[str, Any],
) -> pd.DataFrame:
    """One row per run of the grid (``params:training``): targets, realised knobs, emergence
    status, S* with its CI, tokens (``params:frontier``: ``metric``, ``method``,
    ``realised_batches``, ``tolerance``): :func:`~ih_kedro.science.statistics.pareto_cells.
    build_cell_table`; plus the threshold-free formation score and the formed verdict at each
    of ``frontier.thresholds`` (:func:`~ih_kedro.science.telemetry.formation.formation_table`
    on the best head's curve of ``frontier.metric``)."""
    knobs = _run_knobs(training)
    metric = str(frontier.get("metric", "prefix_matching"))
    thresholds = [float(t) for t in frontier.get("thresholds", DEFAULT_THRESHOLDS)]
    online = dict(training.get("online_emergence") or {})
    if online.get("enabled") and online.get("early_stop"):
        pareto_robustness.check_thresholds(thresholds, float(online.get("threshold", 0.4)))
    budgets = dict(zip(knobs["run_name"], knobs["budget_steps"], strict=True))
    formation = formation_table(
        {name: score_samples[name] for name in knobs["run_name"] if name in score_samples},
        budgets,
        metric=metric,
        min_layer=emergence_min_layer(telemetry, metric),
        thresholds=thresholds,
    )
    return pareto_cells.build_cell_table(
        knobs, sweep_manifest, emergence_table, train_tokens, variant_data, frontier, formation
    )


# --------------------------------------------------------------------------------------------
# The frontier
# --------------------------------------------------------------------------------------------
def estimate_frontier(
    cell_table: pd.DataFrame,
    params: Mapping[str, Any],
    threshold_robustness: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``frontier_table`` and ``frontier_summary`` of the cell table (``params:frontier``), its
    verdicts read from ``threshold_robustness`` (fitted once, by :func:`summarise_robustness`):
    :func:`~ih_kedro.science.statistics.pareto_summary.estimate_frontier`."""
    return pareto_summary.estimate_frontier(cell_table, params, threshold_robustness)


def summarise_robustness(
    cell_table: pd.DataFrame, params: Mapping[str, Any]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``cell_summary`` (one row per cell, seeds as the unit: formed shares per threshold, the
    formation score and S* with t CIs over seeds) and ``threshold_robustness`` (the knobs'
    coefficients, ratio and verdicts at every threshold and on the formation score):
    :func:`~ih_kedro.science.statistics.pareto_cells.cell_summary`,
    :func:`~ih_kedro.science.statistics.pareto_robustness.robustness_table`."""
    level = float(params.get("level", 0.95))
    cells = pareto_cells.cell_summary(cell_table, level=level)
    table = pareto_robustness.robustness_table(
        cell_table, fit_method=str(params.get("fit_method", "firth")), level=level
    )
    for row in table.itertuples(index=False):
        logger.info(
            "pareto %s: both knobs matter %s, reliability weighs more %s (ratio %.2f [%.2f, %.2f])",
            row.measure,
            row.both_knobs_matter,
            row.reliability_weighs_more,
            row.ratio,
            row.ratio_ci_low,
            row.ratio_ci_high,
        )
    return cells, table


# --------------------------------------------------------------------------------------------
# Figures and MLflow
# --------------------------------------------------------------------------------------------
def plot_frontier(
    cell_table: pd.DataFrame, frontier_table: pd.DataFrame, frontier_summary: Mapping[str, Any]
) -> plt.Figure:
    """Heatmaps of status and S* over the grid with the frontier, its band and the Pareto set:
    :func:`~ih_kedro.science.statistics.plots.pareto.plot_frontier`."""
    return pareto_plots.plot_frontier(cell_table, frontier_table, frontier_summary)


def plot_sstar_distance(
    cell_table: pd.DataFrame, frontier_summary: Mapping[str, Any]
) -> plt.Figure:
    """S* against the signed distance to the frontier, with the growth fit:
    :func:`~ih_kedro.science.statistics.plots.pareto.plot_sstar_distance`."""
    return pareto_plots.plot_sstar_distance(cell_table, frontier_summary)


def plot_robustness(threshold_robustness: pd.DataFrame) -> plt.Figure:
    """The coefficient ratio and both verdicts at every threshold and on the formation score:
    :func:`~ih_kedro.science.statistics.plots.pareto.plot_threshold_robustness`."""
    return pareto_plots.plot_threshold_robustness(threshold_robustness)


def log_pareto_to_mlflow(frontier_summary: Mapping[str, Any]) -> None:
    """Log the frontier's numbers as metrics (and its verdicts as tags) to the active run.

    The figures reach MLflow through the catalog (``MlflowArtifactDataset``).
    kedro-mlflow opens a run during ``kedro run``; outside it a run is started and closed here.
    """
    import mlflow

    metrics: dict[str, float] = {
        "pareto.frontier_fitted": float(frontier_summary["status"] == "ok")
    }
    for name, block in frontier_summary["coefficients"].items():
        for key, value in block.items():
            if value is not None:
                metrics[f"pareto.{name}.{key}"] = float(value)
    for key in ("estimate", "ci_low", "ci_high"):
        value = frontier_summary.get("coefficient_ratio", {}).get(key)
        if value is not None:
            metrics[f"pareto.coefficient_ratio.{key}"] = float(value)
    for key in ("n_runs", "n_runs_fitted", "n_runs_formed", "n_runs_excluded"):
        metrics[f"pareto.{key}"] = float(frontier_summary[key])
    growth = frontier_summary["growth"]
    for key in ("beta", "r_squared"):
        if growth.get(key) is not None:
            metrics[f"pareto.growth.{key}"] = float(growth[key])
    for key, value in frontier_summary["budget_shift"].items():
        if value is not None:
            metrics[f"pareto.budget_shift.{key}"] = float(value)
    verdict_tags = {
        f"pareto.verdict.{claim}": f"{v['verdict']} (agree across thresholds: "
        f"{v['agrees_across_measures']})"
        for claim, v in (frontier_summary.get("verdicts") or {}).items()
    }
    started = mlflow.active_run() is None
    if started:
        mlflow.start_run(run_name="pareto")
    try:
        mlflow.log_metrics(metrics)
        mlflow.set_tags({"pareto.status": frontier_summary["status"],
                         "pareto.monotone_increasing": str(frontier_summary["monotone_increasing"]),
                         "pareto.separated": str(frontier_summary["separated"]),
                         "pareto.longer_budget": frontier_summary["longer_budget"][:5000],
                         **verdict_tags})  # fmt: skip
        logger.info("pareto: logged %d metrics to MLflow", len(metrics))
    finally:
        if started:
            mlflow.end_run()
