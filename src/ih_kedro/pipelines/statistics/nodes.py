"""Statistics nodes: fit the emergence law, predict new configurations, plot, log to MLflow.

Pure functions over the emergence table, the tidy head scores and the sweep manifest; the
science lives in :mod:`ih_kedro.science.statistics.emergence_law`.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from ih_kedro.science.statistics.emergence_law import (
    CENSORED_HANDLING,
    RESPONSES,
    SEED_EXPONENTS,
    fit_emergence_law,
    fit_summary_dict,
    fit_summary_table,
    predict_emergence,
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


def _covariates(summary: dict[str, Any], frame: pd.DataFrame, where: str) -> dict[str, np.ndarray]:
    """Values in ``frame`` of the fit's extra covariates, as :func:`predict_emergence` needs."""
    names = list(summary.get("extra_covariates", []))
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise ValueError(f"{where}: the law uses extra covariates {missing}; give their values")
    return {c: frame[c].to_numpy(float) for c in names}


def select_emergence_rows(emergence_table: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """Rows of the emergence table for ``statistics.metric``/``method`` (and ``threshold``).

    Raises:
        ValueError: no rows match, or several thresholds remain and ``statistics.threshold``
            does not pick one.
    """
    p = _params(params)
    rows = emergence_table[
        (emergence_table["metric"] == p["metric"]) & (emergence_table["method"] == p["method"])
    ]
    if p["threshold"] is not None:
        rows = rows[np.isclose(rows["threshold"].astype(float), float(p["threshold"]))]
    if rows.empty:
        raise ValueError(
            f"statistics.metric/method: no emergence rows for metric={p['metric']!r}, "
            f"method={p['method']!r}, threshold={p['threshold']!r}"
        )
    # A chosen threshold keeps every row close to it (a saved table may carry float noise).
    thresholds = rows["threshold"].dropna().unique() if "threshold" in rows else []
    if p["threshold"] is None and len(thresholds) > 1:
        raise ValueError(
            f"statistics.threshold: the table has thresholds {sorted(map(float, thresholds))} "
            f"for {p['metric']}/{p['method']}; choose one"
        )
    return rows.reset_index(drop=True)


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


def _fitted(summary: dict[str, Any]) -> bool:
    return summary.get("status") == "ok" and "model" in summary


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
    if not _fitted(law_fit_summary):
        logger.warning("statistics: no fitted law; predictions are NaN")
        frame = configs[["batch_size", "context_length"]].astype(float)
        for column in (
            "step",
            "step_low",
            "step_high",
            "tokens",
            "tokens_low",
            "tokens_high",
            "log_se",
        ):
            frame[column] = math.nan
        frame["level"] = float(p["level"])
        return frame
    return predict_emergence(
        law_fit_summary,
        configs["batch_size"].to_numpy(float),
        configs["context_length"].to_numpy(float),
        level=float(p["level"]),
        covariates=_covariates(law_fit_summary, configs, "statistics.predict_for"),
    )


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------
def _empty_figure(message: str) -> Figure:
    fig = Figure(figsize=(5, 3))
    ax = fig.subplots()
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    ax.set_axis_off()
    return fig


def _run_covariates(emergence_table: pd.DataFrame, extra: list[str]) -> pd.DataFrame:
    columns = ["run_name", "batch_size", "context_length", "seed", "preset", *extra]
    keep = list(dict.fromkeys(c for c in columns if c in emergence_table.columns))
    return emergence_table[keep].drop_duplicates("run_name")


def best_head_trajectories(
    head_scores: pd.DataFrame, metric: str = "prefix_matching", min_layer: int = 1
) -> pd.DataFrame:
    """Best head's score per run and step (heads in layers ``>= min_layer``).

    Returns:
        ``run_name, step, tokens_seen, value`` (falls back to all layers, with a warning, when
        no head is at ``min_layer`` or above).
    """
    scores = head_scores[head_scores["metric"] == metric]
    deep = scores[scores["layer"] >= min_layer]
    if deep.empty and not scores.empty:
        logger.warning(
            "statistics: no %s heads at layer >= %d; using all layers", metric, min_layer
        )
        deep = scores
    return (
        deep.groupby(["run_name", "step"], as_index=False)
        .agg(tokens_seen=("tokens_seen", "first"), value=("value", "max"))
        .sort_values(["run_name", "step"])
    )


def plot_trajectories(
    head_scores: pd.DataFrame,
    emergence_table: pd.DataFrame,
    law_fit_summary: dict[str, Any],
    params: dict[str, Any],
) -> Figure:
    """Best-head PS of every run against steps, and against steps / predicted S*.

    The second panel rescales each run by the law's predicted S* for its (B, C): if the law
    holds, all cells collapse onto one curve crossing the threshold near 1.
    """
    p = _params(params)
    curves = best_head_trajectories(head_scores, p["trajectory_metric"], p["trajectory_min_layer"])
    if curves.empty:
        return _empty_figure(f"no {p['trajectory_metric']} head scores")
    extra = list(law_fit_summary.get("extra_covariates", []))
    curves = curves.merge(_run_covariates(emergence_table, extra), on="run_name", how="left")
    has_config = {"batch_size", "context_length"} <= set(curves.columns)
    curves["cell"] = (
        [
            f"B{b:g} C{c:g}"
            for b, c in zip(curves["batch_size"], curves["context_length"], strict=True)
        ]
        if has_config
        else curves["run_name"]
    )
    if has_config:
        curves = curves.sort_values(["batch_size", "context_length", "run_name", "step"])
    fitted = _fitted(law_fit_summary) and has_config
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax_steps, ax_scaled = fig.subplots(1, 2)

    seeds = "seed" in curves and curves["seed"].nunique() > 1
    if seeds:
        curves["seed"] = curves["seed"].astype(int).astype(str)

    def one_line_per_run(x: str, ax: Any, legend: bool) -> None:
        # Colour = cell, line style = seed: every seed replicate is its own line.
        sns.lineplot(
            data=curves,
            x=x,
            y="value",
            hue="cell",
            style="seed" if seeds else None,
            units="run_name",
            estimator=None,
            ax=ax,
            lw=1,
            legend="auto" if legend else False,
        )

    one_line_per_run("step", ax_steps, legend=True)
    ax_steps.set(xscale="log", xlabel="step", ylabel=f"best-head {p['trajectory_metric']}")
    ax_steps.set_title("against steps")
    if fitted:
        predicted = predict_emergence(
            law_fit_summary,
            curves["batch_size"].to_numpy(float),
            curves["context_length"].to_numpy(float),
            covariates=_covariates(law_fit_summary, curves, "emergence_table"),
        )
        curves["scaled_step"] = curves["step"].to_numpy(float) / predicted["step"].to_numpy()
        one_line_per_run("scaled_step", ax_scaled, legend=False)
        ax_scaled.axvline(1.0, color="grey", ls="--", lw=0.8)
        ax_scaled.set(xscale="log", xlabel="step / predicted S*", ylabel="")
        ax_scaled.set_title("against steps / S* (law)")
    else:
        ax_scaled.text(0.5, 0.5, "no fitted law", ha="center", va="center")
        ax_scaled.set_axis_off()
    if law_fit_summary.get("threshold") is not None:
        for ax in (ax_steps, ax_scaled):
            ax.axhline(law_fit_summary["threshold"], color="black", ls=":", lw=0.8)
    return fig


def _observed_vs_predicted(
    emergence_table: pd.DataFrame, law_fit_summary: dict[str, Any], params: dict[str, Any]
) -> pd.DataFrame:
    p = _params(params)
    rows = select_emergence_rows(emergence_table, p)
    if "status" in rows:  # only runs that emerged have an observed S*
        rows = rows[rows["status"] == "emerged"]
    rows = rows[~rows["censored"].astype(bool)] if "censored" in rows else rows
    rows = rows[rows["step"].notna()]
    pred = predict_emergence(
        law_fit_summary,
        rows["batch_size"].to_numpy(float),
        rows["context_length"].to_numpy(float),
        level=float(p["level"]),
        covariates=_covariates(law_fit_summary, rows, "emergence_table"),
    )
    response = law_fit_summary.get("response", "step")
    observed = rows["step"].to_numpy(float)
    if response == "tokens":
        observed = observed * rows["batch_size"].to_numpy(float) * rows["context_length"]
    out = rows.reset_index(drop=True).copy()
    out["observed"] = np.asarray(observed, dtype=float)
    out["predicted"] = pred[response].to_numpy()
    out["low"] = pred[f"{response}_low"].to_numpy()
    out["high"] = pred[f"{response}_high"].to_numpy()
    out["residual"] = np.log(out["observed"]) - np.log(out["predicted"])
    return out


def plot_predicted_vs_observed(
    emergence_table: pd.DataFrame, law_fit_summary: dict[str, Any], params: dict[str, Any]
) -> Figure:
    """Observed vs predicted emergence (log-log) with the identity line and prediction bars."""
    if not _fitted(law_fit_summary):
        return _empty_figure("emergence law not fitted:\n" + law_fit_summary.get("status", ""))
    data = _observed_vs_predicted(emergence_table, law_fit_summary, params)
    response = law_fit_summary.get("response", "step")
    unit = "steps" if response == "step" else "tokens"
    fig = Figure(figsize=(5.2, 5), layout="constrained")
    ax = fig.subplots()
    ax.errorbar(
        data["predicted"],
        data["observed"],
        xerr=[data["predicted"] - data["low"], data["high"] - data["predicted"]],
        fmt="none",
        ecolor="lightgrey",
        lw=1,
        zorder=1,
    )
    data["cell"] = [
        f"B{b:g} C{c:g}" for b, c in zip(data["batch_size"], data["context_length"], strict=True)
    ]
    seeds = "seed" in data and data["seed"].nunique() > 1
    if seeds:
        data["seed"] = data["seed"].astype(int).astype(str)
    # One marker per seed: replicates of a cell show the seed-to-seed scatter the CIs carry.
    sns.scatterplot(data=data, x="predicted", y="observed", hue="cell",
                    style="seed" if seeds else None, ax=ax, zorder=2)  # fmt: skip
    lo = np.nanmin(data[["low", "observed"]].to_numpy()) * 0.8
    hi = np.nanmax(data[["high", "observed"]].to_numpy()) * 1.25
    ax.plot([lo, hi], [lo, hi], color="black", lw=0.8, ls="--", label="identity")
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi))
    ax.set(xlabel=f"predicted S* ({unit})", ylabel=f"observed S* ({unit})")
    a, b, r = law_fit_summary["a"], law_fit_summary["b"], law_fit_summary["pearson_r_log"]

    def fmt(value: Any) -> str:
        return "nan" if value is None else f"{value:.2f}"

    ax.set_title(
        f"a = {fmt(a['estimate'])} [{fmt(a['ci_low'])}, {fmt(a['ci_high'])}], "
        f"b = {fmt(b['estimate'])} [{fmt(b['ci_low'])}, {fmt(b['ci_high'])}], "
        f"r = {fmt(r['estimate'])}\n"
        f"n = {law_fit_summary['n_runs']} runs ({law_fit_summary['n_censored']} censored), "
        f"seeds {law_fit_summary['seeds']}, {law_fit_summary.get('covariance', 'classical')} CIs",
        fontsize=9,
    )
    return fig


def plot_residuals_vs_model_size(
    emergence_table: pd.DataFrame,
    law_fit_summary: dict[str, Any],
    sweep_manifest: pd.DataFrame | None,
    params: dict[str, Any],
) -> Figure:
    """Log residuals (observed / predicted S*) per model size: one column per preset.

    Presets are ordered by their parameter count (from the manifest, when present) and labelled
    with it; runs of one preset differ in size only by their position table, so size is shown
    per preset rather than on a continuous axis. A flat pattern across presets supports the
    claim that the law does not depend on model size.
    """
    if not _fitted(law_fit_summary):
        return _empty_figure("emergence law not fitted:\n" + law_fit_summary.get("status", ""))
    data = _observed_vs_predicted(emergence_table, law_fit_summary, params)
    if "preset" not in data:
        data["preset"] = "all runs"
    data["model size"] = data["preset"].astype(str)
    order = sorted(data["model size"].unique())
    if sweep_manifest is not None and {"run_name", "n_parameters"} <= set(sweep_manifest.columns):
        sizes = sweep_manifest[["run_name", "n_parameters"]].drop_duplicates("run_name")
        data = data.merge(sizes, on="run_name", how="left")
        if data["n_parameters"].notna().all():
            per_preset = data.groupby("model size")["n_parameters"].median()
            labels = {
                name: f"{name}\n({size / 1e3:,.0f}k params)" for name, size in per_preset.items()
            }
            data["model size"] = data["model size"].map(labels)
            order = [labels[name] for name in per_preset.sort_values().index]
    fig = Figure(figsize=(5.5, 4), layout="constrained")
    ax = fig.subplots()
    sns.stripplot(
        data=data, x="model size", y="residual", hue="batch_size", order=order, ax=ax, size=7
    )
    ax.set(xlabel="model (preset)")
    ax.axhline(0.0, color="black", lw=0.8, ls="--")
    ax.set(ylabel="log(observed / predicted S*)")
    ax.set_title("residuals of the emergence law vs model size", fontsize=10)
    return fig


# --------------------------------------------------------------------------------------------
# MLflow
# --------------------------------------------------------------------------------------------
def flatten_numbers(summary: dict[str, Any], prefix: str = "law") -> dict[str, float]:
    """Numeric leaves of the summary as ``law.a.estimate``-style keys (the ``model`` block and
    None values skipped)."""
    flat: dict[str, float] = {}
    for key, value in summary.items():
        name = f"{prefix}.{key}"
        if key == "model":
            continue
        if isinstance(value, dict):
            flat.update(flatten_numbers(value, name))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isfinite(value):
                flat[name] = float(value)
    return flat


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
