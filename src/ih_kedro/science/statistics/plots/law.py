"""Figures of the emergence law: trajectories, predicted vs observed, residuals vs model size,
the exponents per mechanism arm.

Plain matplotlib/seaborn on the emergence table, the tidy head scores and a law-fit summary
(``status`` and :func:`~ih_kedro.science.statistics.emergence_prediction.fit_summary_dict`'s
layout); the statistics nodes call these.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from ih_kedro.science.statistics.emergence_prediction import (
    covariate_values,
    is_fitted,
    predict_emergence,
)
from ih_kedro.science.statistics.law_mechanisms import PUBLISHED_FORMS

logger = logging.getLogger(__name__)


def empty_figure(message: str) -> Figure:
    """A small figure that only says ``message`` (no data to draw)."""
    fig = Figure(figsize=(5, 3))
    ax = fig.subplots()
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    ax.set_axis_off()
    return fig


def not_fitted_figure(law_fit_summary: Mapping[str, Any]) -> Figure:
    """The figure drawn in place of a law that was not fitted: its ``status``."""
    return empty_figure("emergence law not fitted:\n" + law_fit_summary.get("status", ""))


def run_covariates(emergence_table: pd.DataFrame, extra: list[str]) -> pd.DataFrame:
    """One row per run: ``run_name, batch_size, context_length, seed, preset`` and the ``extra``
    columns, those the table has."""
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


def _trajectory_curves(
    curves: pd.DataFrame, emergence_table: pd.DataFrame, extra: list[str]
) -> tuple[pd.DataFrame, bool]:
    """The best-head curves with each run's configuration and a ``cell`` label (``B.. C..``, or
    the run name without B and C), sorted by cell; and whether B and C are known."""
    curves = curves.merge(run_covariates(emergence_table, extra), on="run_name", how="left")
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
    return curves, has_config


def _one_line_per_run(curves: pd.DataFrame, x: str, ax: Any, legend: bool, seeds: bool) -> None:
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


def plot_trajectories(
    head_scores: pd.DataFrame,
    emergence_table: pd.DataFrame,
    law_fit_summary: Mapping[str, Any],
    metric: str = "prefix_matching",
    min_layer: int = 1,
) -> Figure:
    """Best-head score (``metric``, layers ``>= min_layer``) of every run against steps, and
    against steps / predicted S*.

    The second panel rescales each run by the law's predicted S* for its (B, C): if the law
    holds, all cells collapse onto one curve crossing the threshold near 1.

    Returns:
        A figure with the two panels (a message figure without head scores).
    """
    curves = best_head_trajectories(head_scores, metric, min_layer)
    if curves.empty:
        return empty_figure(f"no {metric} head scores")
    extra = list(law_fit_summary.get("extra_covariates", []))
    curves, has_config = _trajectory_curves(curves, emergence_table, extra)
    fitted = is_fitted(law_fit_summary) and has_config
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax_steps, ax_scaled = fig.subplots(1, 2)

    seeds = "seed" in curves and curves["seed"].nunique() > 1
    if seeds:
        curves["seed"] = curves["seed"].astype(int).astype(str)

    _one_line_per_run(curves, "step", ax_steps, legend=True, seeds=seeds)
    ax_steps.set(xscale="log", xlabel="step", ylabel=f"best-head {metric}")
    ax_steps.set_title("against steps")
    if fitted:
        predicted = predict_emergence(
            law_fit_summary,
            curves["batch_size"].to_numpy(float),
            curves["context_length"].to_numpy(float),
            covariates=covariate_values(law_fit_summary, curves, "emergence_table"),
        )
        curves["scaled_step"] = curves["step"].to_numpy(float) / predicted["step"].to_numpy()
        _one_line_per_run(curves, "scaled_step", ax_scaled, legend=False, seeds=seeds)
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


def _estimates_title(law_fit_summary: Mapping[str, Any]) -> str:
    """``a = .. [..], b = .. [..], r = ..`` and the runs, seeds and covariance of the fit."""
    a, b, r = law_fit_summary["a"], law_fit_summary["b"], law_fit_summary["pearson_r_log"]

    def fmt(value: Any) -> str:
        return "nan" if value is None else f"{value:.2f}"

    return (
        f"a = {fmt(a['estimate'])} [{fmt(a['ci_low'])}, {fmt(a['ci_high'])}], "
        f"b = {fmt(b['estimate'])} [{fmt(b['ci_low'])}, {fmt(b['ci_high'])}], "
        f"r = {fmt(r['estimate'])}\n"
        f"n = {law_fit_summary['n_runs']} runs ({law_fit_summary['n_censored']} censored), "
        f"seeds {law_fit_summary['seeds']}, {law_fit_summary.get('covariance', 'classical')} CIs"
    )


def plot_predicted_vs_observed(data: pd.DataFrame, law_fit_summary: Mapping[str, Any]) -> Figure:
    """Observed vs predicted emergence (log-log) with the identity line and prediction bars.

    Args:
        data: :func:`~ih_kedro.science.statistics.emergence_prediction.observed_vs_predicted`
            of the emergence rows (``batch_size, context_length, observed, predicted, low,
            high``, optionally ``seed``).
        law_fit_summary: the fitted law's summary (estimates for the title).

    Returns:
        One log-log panel: a point per run (colour = cell, marker = seed), horizontal
        prediction bars and the identity line.
    """
    data = data.copy()
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
    ax.set_title(_estimates_title(law_fit_summary), fontsize=9)
    return fig


def plot_residuals_vs_model_size(
    data: pd.DataFrame, sweep_manifest: pd.DataFrame | None = None
) -> Figure:
    """Log residuals (observed / predicted S*) per model size: one column per preset.

    Presets are ordered by their parameter count (from the manifest, when present) and labelled
    with it; runs of one preset differ in size only by their position table, so size is shown
    per preset rather than on a continuous axis. A flat pattern across presets supports the
    claim that the law does not depend on model size.

    Args:
        data: :func:`~ih_kedro.science.statistics.emergence_prediction.observed_vs_predicted`
            of the emergence rows (``run_name, batch_size, residual``, optionally ``preset``).
        sweep_manifest: the sweep's ``run_name, n_parameters`` (optional).

    Returns:
        One strip plot of the residuals, a column per preset, colour = batch size.
    """
    data = data.copy()
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


def plot_repetition_curves(curves: pd.DataFrame) -> Figure:
    """Induction-predictable share against the context length (log axis), one line per source
    (corpus, data variant) with its CI band over windows
    (:func:`ih_kedro.science.data.repetition_curve.repetition_curve` rows plus ``source``)."""
    fig = Figure(figsize=(6.5, 4))
    ax = fig.subplots()
    for source, group in curves.groupby("source", sort=False):
        curve = group.sort_values("context_length")
        (line,) = ax.plot(curve["context_length"], curve["share"], marker="o", label=source)
        ax.fill_between(curve["context_length"], curve["ci_low"], curve["ci_high"],
                        color=line.get_color(), alpha=0.2, linewidth=0)  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length C (tokens)")
    ax.set_ylabel("induction-predictable share")
    ax.set_title("How much of a window an induction rule predicts")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _exponent_panel(ax: Any, table: pd.DataFrame, exponent: str, references: dict) -> None:
    """One exponent per arm (point and CI bar), ``not fitted`` for a NaN estimate, and the
    published values as labelled horizontal lines."""
    x = np.arange(len(table))
    estimate = table[exponent].to_numpy(dtype=float)
    fitted = np.isfinite(estimate)
    low = table[f"{exponent}_ci_low"].to_numpy(dtype=float)
    high = table[f"{exponent}_ci_high"].to_numpy(dtype=float)
    ax.errorbar(x[fitted], estimate[fitted],
                yerr=[estimate[fitted] - low[fitted], high[fitted] - estimate[fitted]],
                fmt="o", color="black", ecolor="black", capsize=4, lw=1.2,
                label="estimate, CI")  # fmt: skip
    for i in x[~fitted]:
        # x in data, y in axes coordinates: the text sits mid-panel whatever the estimates.
        ax.text(i, 0.5, "not fitted", transform=ax.get_xaxis_transform(), ha="center",
                va="center", rotation=90, color="grey", fontsize=8)  # fmt: skip
    for (name, value), style in zip(references.items(), ("--", ":"), strict=False):
        ax.axhline(value, color="tab:red" if style == "--" else "tab:blue", ls=style, lw=1,
                   label=f"{name} ({value:g})")  # fmt: skip
    ax.set_xticks(x, table["arm"].astype(str).tolist(), rotation=30, ha="right")
    ax.set_xlim(-0.5, len(table) - 0.5)
    ax.legend(fontsize=8)


def plot_mechanism_exponents(table: pd.DataFrame) -> Figure:
    """The emergence-law exponents per mechanism arm against the published forms.

    Args:
        table: :func:`~ih_kedro.science.statistics.law_mechanisms.mechanism_fit_table` (``arm,
            a, a_ci_low, a_ci_high, b, b_ci_low, b_ci_high``).

    Returns:
        Two panels, one point per arm with its CI bar: ``b`` (exponent of C, S* ∝ C^-b) with
        the published 0.5 (1/sqrt(BC)) and 0.62 (seed study), and ``a`` (exponent of B) with
        0.5 and 0.37; an arm that was not fitted reads ``not fitted``. A message figure
        without arms.
    """
    if table.empty:
        return empty_figure("no mechanism arms to show")
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    ax_b, ax_a = fig.subplots(1, 2)
    for ax, exponent, index, name in ((ax_b, "b", 1, "C"), (ax_a, "a", 0, "B")):
        references = {form: values[index] for form, values in PUBLISHED_FORMS.items()}
        _exponent_panel(ax, table, exponent, references)
        ax.set(xlabel="mechanism arm", ylabel=f"{exponent}  (S* ∝ {name}^-{exponent})")
        ax.set_title(f"exponent of {name}: {exponent}", fontsize=10)
    return fig
