"""Figures of the frequency x reliability experiment (plain matplotlib; nodes call these).

:func:`plot_frontier` and :func:`plot_sstar_distance` draw from the experiment's tables (the
cell table, ``frontier_table``, ``frontier_summary``); :func:`plot_frontier_heatmap` and
:func:`plot_sstar_vs_distance` from the prepared cells, contour, runs and growth fit.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ih_kedro.science.statistics import pareto_frontier as pf  # noqa: E402
from ih_kedro.science.statistics.pareto_cells import aggregate_cells, fit_runs  # noqa: E402
from ih_kedro.science.statistics.pareto_frontier import GrowthFit  # noqa: E402


def _edges(values: np.ndarray) -> np.ndarray:
    """Cell edges on a log axis: geometric midpoints, extended by half a step at both ends."""
    logs = np.log(np.asarray(values, dtype=float))
    if logs.shape[0] == 1:
        return np.exp(np.array([logs[0] - 0.5, logs[0] + 0.5]))
    mids = (logs[1:] + logs[:-1]) / 2
    first, last = logs[0] - (mids[0] - logs[0]), logs[-1] + (logs[-1] - mids[-1])
    return np.exp(np.concatenate([[first], mids, [last]]))


def _grid(cells: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    fs = np.sort(cells["frequency"].unique())
    rs = np.sort(cells["reliability"].unique())
    values = np.full((rs.shape[0], fs.shape[0]), np.nan)  # (R, F)
    for row in cells.itertuples(index=False):
        values[np.searchsorted(rs, row.reliability), np.searchsorted(fs, row.frequency)] = getattr(
            row, column
        )
    return fs, rs, values


def _frontier(ax: plt.Axes, contour: pd.DataFrame, xlim, ylim, shift: pd.DataFrame | None) -> None:
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    if contour.empty or contour["reliability_50"].isna().all():
        return  # no frontier fitted (every run had the same outcome)
    ax.fill_between(
        contour["frequency"],
        contour["band_low"].clip(ylim[0], ylim[1]),
        contour["band_high"].clip(ylim[0], ylim[1]),
        color="black",
        alpha=0.15,
        linewidth=0,
        label=f"{contour['level'].iloc[0]:.0%} bootstrap band",
    )
    if "wald_low" in contour:
        # The fit's delta-method band: it keeps its level at the default design, where the
        # percentile bootstrap band under-covers (docs/coverage.md).
        for column, label in (("wald_low", f"{contour['level'].iloc[0]:.0%} Wald band"),
                              ("wald_high", None)):  # fmt: skip
            ax.plot(contour["frequency"], contour[column].clip(ylim[0], ylim[1]), color="black",
                    ls=":", lw=1, label=label)  # fmt: skip
    ax.plot(contour["frequency"], contour["reliability_50"], color="black", lw=2, label="P = 0.5")
    if shift is not None and not shift.empty:
        for factor, group in shift.groupby("budget_factor"):
            if group["reliability_50"].notna().any():
                ax.plot(group["frequency"], group["reliability_50"], ls="--", lw=1, color="tab:blue",
                        label=f"{factor:g}x budget (extrapolated)")  # fmt: skip


def plot_frontier_heatmap(
    cells: pd.DataFrame,
    contour: pd.DataFrame,
    pareto_set: pd.DataFrame,
    shift: pd.DataFrame | None = None,
    *,
    budget_label: str = "",
) -> plt.Figure:
    """Two panels over the frequency x reliability grid, both with the 50% frontier and band.

    Left: share of seeds in which an induction head formed within the budget; the empirical
    Pareto set of minimal successful cells is circled. Right: median S* (steps, log colour) of
    the seeds that formed; cells where none formed are grey.

    ``cells``: one row per cell with ``frequency, reliability, formed_share, sstar_median``.
    """
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), constrained_layout=True)
    fs, rs, share = _grid(cells, "formed_share")
    fe, re_ = _edges(fs), _edges(rs)
    xlim, ylim = (fe[0], fe[-1]), (re_[0], re_[-1])
    mesh = axes[0].pcolormesh(fe, re_, share, cmap="RdYlGn", vmin=0, vmax=1)
    fig.colorbar(mesh, ax=axes[0], label="share of seeds formed")
    if not pareto_set.empty:
        axes[0].scatter(pareto_set["frequency"], pareto_set["reliability"], s=160,
                        facecolors="none", edgecolors="black", lw=2, label="Pareto set")  # fmt: skip
    _, _, sstar = _grid(cells, "sstar_median")
    axes[1].set_facecolor("0.85")
    with np.errstate(divide="ignore", invalid="ignore"):
        mesh = axes[1].pcolormesh(fe, re_, np.log10(sstar), cmap="viridis")
    fig.colorbar(mesh, ax=axes[1], label="log10 median S* (steps); grey: none formed")
    titles = ("IH formed within the budget", "S* of the seeds that formed")
    fs, rs = np.sort(cells["frequency"].unique()), np.sort(cells["reliability"].unique())
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        # Ticks at the grid's own values, written plainly (log-scale labels such as 3x10^-1
        # collide on a narrow grid).
        ax.set_xticks(fs, [f"{f:g}" for f in fs])
        ax.set_yticks(rs, [f"{r:g}" for r in rs])
        ax.minorticks_off()
        _frontier(ax, contour, xlim, ylim, shift)
        ax.set_xlabel("repetition frequency f")
        ax.set_ylabel("repetition reliability r")
        ax.set_title(f"{title}{budget_label}")
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(loc="lower left", fontsize=8)
    return fig


def plot_sstar_vs_distance(
    runs: pd.DataFrame, growth: GrowthFit, budget_steps: float
) -> plt.Figure:
    """S* (steps, with its CI) against the signed distance to the fitted frontier.

    ``runs``: one row per run with ``distance, step, ci_low, ci_high, formed``; runs that did not
    form are drawn at the budget as censored (open triangles). The OLS fit of
    ``log S* = alpha + beta d`` is the line, with its slope in the legend.
    """
    fig, ax = plt.subplots(figsize=(7, 5), constrained_layout=True)
    formed = runs[runs["formed"] == 1.0]
    censored = runs[runs["formed"] == 0.0]
    low = (formed["step"] - formed["ci_low"]).clip(lower=0)
    high = (formed["ci_high"] - formed["step"]).clip(lower=0)
    high = high.where(np.isfinite(high), 0.0)
    ax.errorbar(formed["distance"], formed["step"], yerr=[low.fillna(0), high.fillna(0)], fmt="o",
                color="tab:green", ecolor="0.6", capsize=2, label="formed: S* with CI")  # fmt: skip
    if not censored.empty:
        ax.scatter(censored["distance"], np.full(len(censored), budget_steps), marker="^",
                   facecolors="none", edgecolors="tab:red", label="not formed (at the budget)")  # fmt: skip
    ax.axhline(budget_steps, color="tab:red", ls=":", lw=1, label=f"budget {budget_steps:g} steps")
    ax.axvline(0, color="black", lw=1)
    if growth.status == "ok":
        d = np.linspace(min(0.0, runs["distance"].min()), runs["distance"].max(), 100)
        ax.plot(d, growth.predict(d), color="black",
                label=f"log S* = {growth.alpha:.2f} + ({growth.beta:.2f}) d, "
                f"CI [{growth.beta_ci[0]:.2f}, {growth.beta_ci[1]:.2f}], n={growth.n}")  # fmt: skip
    ax.set_yscale("log")
    ax.set_xlabel("signed distance to the 50% frontier in (log f, log r)  (+ = forming side)")
    ax.set_ylabel("S* (steps)")
    ax.set_title("S* grows as cells approach the frontier")
    ax.legend(fontsize=8)
    return fig


def _fit_from_summary(summary: Mapping[str, Any]) -> pf.FrontierFit:
    """The fitted frontier of a ``frontier_summary`` (its coefficients; no covariance)."""
    coef = np.array([summary["coefficients"][name]["estimate"] for name in pf.COEFFICIENTS])
    return pf.FrontierFit(
        coef=coef, cov=np.zeros((3, 3)), method=summary["fit_method"],
        n_runs=summary["n_runs_fitted"], n_formed=summary["n_runs_formed"], converged=True,
    )  # fmt: skip


def plot_frontier(
    cell_table: pd.DataFrame, frontier_table: pd.DataFrame, frontier_summary: Mapping[str, Any]
) -> plt.Figure:
    """Heatmaps of status and S* over the grid with the frontier, its band and the Pareto set."""
    contour = frontier_table[frontier_table["kind"] == "contour"].rename(
        columns={"reliability": "reliability_50", "ci_low": "band_low", "ci_high": "band_high"}
    )
    contour = contour.assign(level=frontier_summary["level"]).dropna(subset=["frequency"])
    pareto_set = frontier_table[frontier_table["kind"] == "pareto_set"]
    shift = frontier_table[frontier_table["kind"] == "budget_shift"].rename(
        columns={"reliability": "reliability_50"}
    )
    cells = aggregate_cells(cell_table)
    cells = cells[(cells["frequency"] > 0) & (cells["reliability"] > 0)]
    budget = ", ".join(f"{b:g}" for b in frontier_summary["budget_steps"])
    return plot_frontier_heatmap(
        cells, contour, pareto_set, shift, budget_label=f" (budget {budget} steps)"
    )


def plot_sstar_distance(
    cell_table: pd.DataFrame, frontier_summary: Mapping[str, Any]
) -> plt.Figure:
    """S* against the signed distance to the frontier, with the growth fit."""
    if frontier_summary["status"] != "ok":
        fig, ax = plt.subplots(figsize=(7, 5), constrained_layout=True)
        ax.text(0.5, 0.5, f"no frontier ({frontier_summary['status']}):\n"
                + _wrap(frontier_summary["longer_budget"]), ha="center", va="center",
                transform=ax.transAxes, fontsize=9)  # fmt: skip
        ax.set_axis_off()
        return fig
    runs = fit_runs(cell_table)
    fit = _fit_from_summary(frontier_summary)
    runs = runs.assign(distance=fit.distance(runs["frequency"], runs["reliability"]))
    g = frontier_summary["growth"]
    nan = math.nan
    growth = pf.GrowthFit(
        alpha=g["alpha"] if g["alpha"] is not None else nan,
        beta=g["beta"] if g["beta"] is not None else nan,
        alpha_ci=(nan, nan),
        beta_ci=tuple(nan if v is None else v for v in g["beta_ci"]),
        n=g["n"],
        r_squared=g["r_squared"] if g["r_squared"] is not None else nan,
        status=g["status"],
    )
    return plot_sstar_vs_distance(runs, growth, float(max(frontier_summary["budget_steps"])))


def _wrap(text: str, width: int = 70) -> str:
    return "\n".join(textwrap.wrap(text, width))


__all__ = [
    "plot_frontier",
    "plot_frontier_heatmap",
    "plot_sstar_distance",
    "plot_sstar_vs_distance",
]


VERDICT_COLOURS = {"supported": "tab:green", "contradicted": "tab:red", "undecided": "tab:gray"}
"""One colour per verdict, in every figure that shows verdicts (pareto and markov)."""


def plot_threshold_robustness(table: pd.DataFrame) -> plt.Figure:
    """The ratio ``b_f / b_r`` with its CI for every measure of ``threshold_robustness.csv``
    (the frontier at each threshold, the formation-score fit), coloured by the
    ``reliability_weighs_more`` verdict, against the lines 0 and 1; each row says its
    ``both_knobs_matter`` verdict. A measure without a fit (e.g. nothing formed) is a label only."""
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.6 * max(len(table), 1)))
    labels = []
    for y, row in enumerate(table.itertuples(index=False)):
        labels.append(f"{row.measure}\n(both knobs: {row.both_knobs_matter})")
        colour = VERDICT_COLOURS.get(str(row.reliability_weighs_more), "tab:gray")
        if np.isfinite(row.ratio_ci_low) and np.isfinite(row.ratio_ci_high):
            ax.hlines(y, row.ratio_ci_low, row.ratio_ci_high, color=colour, linewidth=3)
        if np.isfinite(row.ratio):
            ax.plot([row.ratio], [y], marker="o", color=colour)
    for x, style in ((0.0, "-"), (1.0, "--")):
        ax.axvline(x, color="black", linewidth=0.8, linestyle=style)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("b_f / b_r (95 % CI); below 1: reliability weighs more")
    ax.set_title("Verdicts across thresholds: green supported, red contradicted, grey undecided",
                 fontsize=9)  # fmt: skip
    fig.tight_layout()
    return fig
