"""Statistics nodes: fit the emergence law, predict new configurations, plot, log to MLflow.

Thin adapters from the catalog (the emergence table, the tidy head scores, the sweep
manifest, ``params:statistics``) to the science: the fit in
:mod:`ih_kedro.science.statistics.emergence_law`, predictions and summaries in
:mod:`ih_kedro.science.statistics.emergence_prediction`, the figures in
:mod:`ih_kedro.science.statistics.plots.law`.
"""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ih_kedro.science.statistics.emergence_law import (
    CENSORED_HANDLING,
    SEED_EXPONENTS,
    fit_emergence_law,
)
from ih_kedro.science.statistics.emergence_prediction import (
    covariate_values,
    fit_summary_dict,
    fit_summary_table,
    flatten_numbers,
    is_fitted,
    nan_predictions,
    observed_vs_predicted,
    predict_emergence,
)
from ih_kedro.science.statistics.law_design import RESPONSES
from ih_kedro.science.statistics.plots import law as law_plots
from ih_kedro.science.telemetry.emergence_table import (
    select_emergence_rows as emergence_table_rows,
)

logger = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    "metric": "prefix_matching",
    "method": "threshold",
    "threshold": None,
    "response": "step",
    "censored": "exclude",
    "extra_covariates": [],
    "seed_exponents": dict(SEED_EXPONENTS),
    "level": 0.95,
    "predict_for": [],
    "trajectory_metric": "prefix_matching",
    "trajectory_min_layer": 1,
}


def _params(params: dict[str, Any] | None) -> dict[str, Any]:
    merged = {**DEFAULTS, **(params or {})}
    if merged["censored"] not in CENSORED_HANDLING:
        raise ValueError(
            f"statistics.censored: expected one of {CENSORED_HANDLING}, got {merged['censored']!r}"
        )
    # Checked here, not in the fit, so that a typo fails the run instead of being reported as
    # "insufficient_data" by fit_emergence_law_node.
    if merged["response"] not in RESPONSES:
        raise ValueError(
            f"statistics.response: expected one of {RESPONSES}, got {merged['response']!r}"
        )
    if not 0 < float(merged["level"]) < 1:
        raise ValueError(f"statistics.level: must be in (0, 1), got {merged['level']!r}")
    return merged


def select_emergence_rows(emergence_table: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """Rows of the emergence table for ``statistics.metric``/``method`` (and ``threshold``).

    Raises:
        ValueError: no rows match, or several thresholds remain and ``statistics.threshold``
            does not pick one.
    """
    p = _params(params)
    return emergence_table_rows(emergence_table, p["metric"], p["method"], p["threshold"])


def _failed_summary(p: dict[str, Any], rows: pd.DataFrame, reason: str) -> dict[str, Any]:
    censored = int(rows["censored"].sum()) if "censored" in rows else 0
    statuses = rows["status"].value_counts().to_dict() if "status" in rows else {}
    seeds = sorted(int(s) for s in rows["seed"].dropna().unique()) if "seed" in rows else []
    return {
        "status": f"insufficient_data: {reason}",
        "response": p["response"],
        "censored_handling": p["censored"],
        "n_runs": len(rows),
        "n_censored": censored,
        "status_counts": {str(k): int(v) for k, v in statuses.items()},
        "seeds": seeds,
    }


def fit_emergence_law_node(
    emergence_table: pd.DataFrame, params: dict[str, Any]
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Fit ``S* = T / (B^a C^b)`` to the selected emergence rows.

    Args:
        emergence_table: the telemetry pipeline's emergence table (steps, tokens).
        params: ``params:statistics`` (``metric``, ``method``, ``threshold``, ``response``,
            ``censored``, ``extra_covariates``, ``seed_exponents``, ``level``).

    Returns:
        ``law_fit_summary``: JSON dict (every estimate with its CI, n runs, seeds, censored
        count, metric/method/threshold, ``status``); ``law_fit_table``: the summary as rows
        ``parameter, estimate, ci_low, ci_high``. When the runs cannot identify the law (too
        few, or all censored) the summary says why in ``status`` and the table is empty,
        rather than failing a whole sweep at its last step.
    """
    p = _params(params)
    rows = select_emergence_rows(emergence_table, p)
    threshold = rows["threshold"].dropna().unique() if "threshold" in rows else []
    selection = {
        "metric": p["metric"],
        "method": p["method"],
        "threshold": float(threshold[0]) if len(threshold) else None,
    }
    try:
        fit = fit_emergence_law(
            rows,
            response=p["response"],
            censored=p["censored"],
            extra_covariates=tuple(p["extra_covariates"]),
            seed_exponents=p["seed_exponents"],
            level=float(p["level"]),
        )
    except ValueError as err:
        logger.warning("statistics: emergence law not fitted: %s", err)
        summary = {**_failed_summary(p, rows, str(err)), **selection}
        return summary, pd.DataFrame(columns=["parameter", "estimate", "ci_low", "ci_high"])
    summary = {"status": "ok", **selection, **fit_summary_dict(fit)}
    if "status" in rows:
        summary["status_counts"] = {
            str(k): int(v) for k, v in rows["status"].value_counts().items()
        }
    logger.info(
        "emergence law (%s, %s): a = %.3f [%.3f, %.3f], b = %.3f [%.3f, %.3f], r = %.3f, "
        "n = %d runs (%d censored), seeds %s",
        p["metric"],
        p["method"],
        fit.a,
        *fit.a_ci,
        fit.b,
        *fit.b_ci,
        fit.pearson_r_log,
        fit.n_runs,
        fit.n_censored,
        fit.seeds,
    )
    return summary, fit_summary_table(fit)


def predict_emergence_node(law_fit_summary: dict[str, Any], params: dict[str, Any]) -> pd.DataFrame:
    """Predicted S* (steps) and tokens with prediction intervals for ``statistics.predict_for``.

    Returns:
        One row per listed ``{batch_size, context_length}``: ``step, step_low, step_high,
        tokens, tokens_low, tokens_high, log_se, level``; NaN predictions when the law was not
        fitted.
    """
    p = _params(params)
    configs = pd.DataFrame(p["predict_for"])
    if configs.empty:
        return pd.DataFrame(columns=["batch_size", "context_length", "step", "tokens"])
    missing = {"batch_size", "context_length"} - set(configs.columns)
    if missing:
        raise ValueError(f"statistics.predict_for: every entry needs {sorted(missing)}")
    if not is_fitted(law_fit_summary):
        logger.warning("statistics: no fitted law; predictions are NaN")
        return nan_predictions(configs, float(p["level"]))
    return predict_emergence(
        law_fit_summary,
        configs["batch_size"].to_numpy(float),
        configs["context_length"].to_numpy(float),
        level=float(p["level"]),
        covariates=covariate_values(law_fit_summary, configs, "statistics.predict_for"),
    )


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------
def plot_trajectories(
    head_scores: pd.DataFrame,
    emergence_table: pd.DataFrame,
    law_fit_summary: dict[str, Any],
    params: dict[str, Any],
) -> Figure:
    """Best-head PS of every run against steps, and against steps / predicted S*
    (``statistics.trajectory_metric``, ``trajectory_min_layer``):
    :func:`~ih_kedro.science.statistics.plots.law.plot_trajectories`."""
    p = _params(params)
    return law_plots.plot_trajectories(
        head_scores,
        emergence_table,
        law_fit_summary,
        p["trajectory_metric"],
        p["trajectory_min_layer"],
    )


def _observed_vs_predicted(
    emergence_table: pd.DataFrame, law_fit_summary: dict[str, Any], params: dict[str, Any]
) -> pd.DataFrame:
    p = _params(params)
    rows = select_emergence_rows(emergence_table, p)
    return observed_vs_predicted(rows, law_fit_summary, level=float(p["level"]))


def plot_predicted_vs_observed(
    emergence_table: pd.DataFrame, law_fit_summary: dict[str, Any], params: dict[str, Any]
) -> Figure:
    """Observed vs predicted emergence (log-log) with the identity line and prediction bars:
    :func:`~ih_kedro.science.statistics.plots.law.plot_predicted_vs_observed`."""
    if not is_fitted(law_fit_summary):
        return law_plots.not_fitted_figure(law_fit_summary)
    data = _observed_vs_predicted(emergence_table, law_fit_summary, params)
    return law_plots.plot_predicted_vs_observed(data, law_fit_summary)


def plot_residuals_vs_model_size(
    emergence_table: pd.DataFrame,
    law_fit_summary: dict[str, Any],
    sweep_manifest: pd.DataFrame | None,
    params: dict[str, Any],
) -> Figure:
    """Log residuals (observed / predicted S*) per model size, one column per preset:
    :func:`~ih_kedro.science.statistics.plots.law.plot_residuals_vs_model_size`."""
    if not is_fitted(law_fit_summary):
        return law_plots.not_fitted_figure(law_fit_summary)
    data = _observed_vs_predicted(emergence_table, law_fit_summary, params)
    return law_plots.plot_residuals_vs_model_size(data, sweep_manifest)


# --------------------------------------------------------------------------------------------
# MLflow
# --------------------------------------------------------------------------------------------
def log_law_fit_to_mlflow(law_fit_summary: dict[str, Any]) -> None:
    """Log the fit's numbers as MLflow metrics (and its labels as tags) to the active run.

    kedro-mlflow opens a run during ``kedro run``; outside it a run is started and closed here.
    """
    import mlflow

    started = mlflow.active_run() is None
    if started:
        mlflow.start_run(run_name="statistics")
    try:
        metrics = flatten_numbers(law_fit_summary)
        if metrics:
            mlflow.log_metrics(metrics)
        tags = {
            f"law.{k}": str(law_fit_summary.get(k))
            for k in (
                "status",
                "metric",
                "method",
                "threshold",
                "response",
                "censored_handling",
                "seeds",
            )
            if k in law_fit_summary
        }
        mlflow.set_tags(tags)
        logger.info("statistics: logged %d law-fit metrics to MLflow", len(metrics))
    finally:
        if started:
            mlflow.end_run()
