"""The emergence-law figures and their tables checked through what they draw.

Every expected number comes from a hand-built law summary (``S* = T / (B^a C^b)``, zero
coefficient covariance, residual sd ``SIGMA``, infinite dof so the prediction interval is
``S* exp(+-z SIGMA)``, in ``law_inputs.py``) evaluated here, not from the plotting code: line
and point data, error bar segments, axis limits, tick labels, legend entries, titles with their
numbers, and the visual encoding that carries meaning (dashed identity, dotted threshold, grey
error bars). The best-head trajectories and the per-run covariates are checked as tables.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine

from ih_kedro.science.statistics.emergence_prediction import observed_vs_predicted
from ih_kedro.science.statistics.plots.law import (
    best_head_trajectories,
    plot_predicted_vs_observed,
    plot_residuals_vs_model_size,
    plot_trajectories,
    run_covariates,
)
from tests.science.statistics.plots.artists import legend_texts
from tests.science.statistics.plots.law_inputs import (
    OBSERVED,
    SIGMA,
    THREE_RUNS,
    Z,
    assert_empty_figure,
    data_lines,
    emergence,
    expected_residuals,
    heads,
    law,
    observed_table,
    residual_table,
    residuals_by_x,
    summary,
    the_text,
)


def predicted_vs_observed(
    rows: pd.DataFrame, law_fit_summary: dict[str, Any], level: float = 0.95
) -> Figure:
    """The figure of the emergence ``rows`` under the law: their observed-vs-predicted table
    drawn by :func:`plot_predicted_vs_observed`."""
    data = observed_vs_predicted(rows, law_fit_summary, level)
    return plot_predicted_vs_observed(data, law_fit_summary)


def residuals_vs_model_size(
    rows: pd.DataFrame, law_fit_summary: dict[str, Any], manifest: pd.DataFrame | None
) -> Figure:
    """The residual figure of the emergence ``rows`` under the law (95 % table)."""
    data = observed_vs_predicted(rows, law_fit_summary, 0.95)
    return plot_residuals_vs_model_size(data, manifest)


# ------------------------------------------------------------------ plot_trajectories


def test_trajectories_lines_per_run_and_rescaled_by_the_law() -> None:
    fig = plot_trajectories(
        heads({"r1": 1.0, "r2": 2.0, "r3": 3.0}), emergence(THREE_RUNS), summary()
    )
    assert len(fig.axes) == 2
    ax_steps, ax_scaled = fig.axes
    # Best head of layer >= 1 (layer 0's 0.99 left out), one line per run.
    runs = {1.0: (64, 16), 2.0: (32, 16), 3.0: (32, 16)}
    steps = [
        (tuple(line.get_xdata()), tuple(np.round(line.get_ydata(), 12)))
        for line in data_lines(ax_steps)
        if line.get_linestyle() != ":"
    ]
    assert sorted(steps) == [((10.0, 20.0), (k / 10, k / 5)) for k in sorted(runs)]
    scaled = {
        round(line.get_ydata()[0] * 10, 9): tuple(line.get_xdata())
        for line in data_lines(ax_scaled)
        if len(line.get_xdata()) == 2 and line.get_linestyle() != ":" and line.get_xdata()[0] != 1
    }
    assert scaled.keys() == runs.keys()
    for k, (bs, c) in runs.items():
        np.testing.assert_allclose(scaled[k], [10 / law(bs, c), 20 / law(bs, c)], rtol=1e-12)
    # Colour = cell (the two B32 seeds share one), line style = seed; lines of width 1.
    style = {
        round(line.get_ydata()[0] * 10, 9): (to_rgba(line.get_color()), line.get_linestyle())
        for line in data_lines(ax_steps)
        if line.get_linestyle() != ":"
    }
    assert style[2.0][0] == style[3.0][0] != style[1.0][0]
    assert (style[1.0][1], style[2.0][1], style[3.0][1]) == ("-", "-", "--")
    assert {line.get_linewidth() for line in data_lines(ax_steps)[:3]} == {1.0}
    # Cells sorted by batch size (the B64 run r1 comes first by name), then the seeds.
    assert legend_texts(ax_steps) == ["cell", "B32 C16", "B64 C16", "seed", "0", "1"]
    assert ax_scaled.get_legend() is None


def test_trajectories_axes_reference_lines_and_layout() -> None:
    fig = plot_trajectories(heads({"r1": 1.0, "r2": 2.0}), emergence(THREE_RUNS[:2]),
                            summary(threshold=0.25))  # fmt: skip
    ax_steps, ax_scaled = fig.axes
    assert (ax_steps.get_xscale(), ax_scaled.get_xscale()) == ("log", "log")
    assert (ax_steps.get_xlabel(), ax_steps.get_ylabel()) == ("step", "best-head prefix_matching")
    assert (ax_scaled.get_xlabel(), ax_scaled.get_ylabel()) == ("step / predicted S*", "")
    assert ax_steps.get_title() == "against steps"
    assert ax_scaled.get_title() == "against steps / S* (law)"
    # S* = 1 on the rescaled axis: a thin dashed grey vertical line.
    (one,) = [line for line in ax_scaled.lines if list(line.get_xdata()) == [1.0, 1.0]]
    assert (one.get_color(), one.get_linestyle(), one.get_linewidth()) == ("grey", "--", 0.8)
    # The threshold on both panels: a thin dotted black horizontal line.
    for ax in (ax_steps, ax_scaled):
        (level,) = [line for line in ax.lines if list(line.get_ydata()) == [0.25, 0.25]]
        assert (level.get_color(), level.get_linestyle(), level.get_linewidth()) == (
            "black",
            ":",
            0.8,
        )
    # One seed per cell: no line-style legend; the hue title names the cell.
    assert legend_texts(ax_steps) == ["B32 C16", "B64 C16"]
    assert ax_steps.get_legend().get_title().get_text() == "cell"
    assert tuple(fig.get_size_inches()) == (11.0, 4.2)
    assert isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)


def test_trajectories_draw_one_line_per_run_within_a_cell() -> None:
    table = emergence([("r2", 32, 16, 0, 100.0), ("r3", 32, 16, 0, 100.0)])  # one cell, one seed
    fig = plot_trajectories(heads({"r2": 2.0, "r3": 3.0}), table, summary())
    ys = sorted(tuple(np.round(ln.get_ydata(), 12)) for ln in data_lines(fig.axes[0])[:2])
    assert ys == [(0.2, 0.4), (0.3, 0.6)]
    assert legend_texts(fig.axes[0]) == ["B32 C16"]


def test_trajectories_float_seeds_are_labelled_as_integers() -> None:
    table = emergence(THREE_RUNS[1:], seed=[0.0, 1.0])
    fig = plot_trajectories(heads({"r2": 2.0, "r3": 3.0}), table, summary())
    assert legend_texts(fig.axes[0]) == ["cell", "B32 C16", "seed", "0", "1"]


def test_trajectories_without_a_fitted_law_or_threshold() -> None:
    unfitted = {"status": "insufficient_data: too few runs"}  # no extra_covariates, no threshold
    fig = plot_trajectories(heads({"r1": 1.0, "r2": 2.0}), emergence(THREE_RUNS[:2]),
                            unfitted)  # fmt: skip
    ax_steps, ax_scaled = fig.axes
    assert len(data_lines(ax_steps)) == 2 and not ax_scaled.lines
    assert the_text(ax_scaled) == ("no fitted law", (0.5, 0.5), "center", "center")
    assert not ax_scaled.axison and ax_steps.axison
    # A fitted law without a threshold: no horizontal line.
    fig = plot_trajectories(heads({"r1": 1.0, "r2": 2.0}), emergence(THREE_RUNS[:2]),
                            summary(threshold=None))  # fmt: skip
    assert [len(data_lines(ax)) for ax in fig.axes] == [2, 3]  # 2 runs (+ S* = 1 on the right)
    assert all(line.get_linestyle() != ":" for ax in fig.axes for line in ax.lines)


def test_trajectories_without_batch_and_context_are_labelled_by_run() -> None:
    table = emergence(THREE_RUNS[:2]).drop(columns=["batch_size", "context_length"])
    fig = plot_trajectories(heads({"zeta": 1.0, "alpha": 2.0}),
                            table.assign(run_name=["zeta", "alpha"]), summary())  # fmt: skip
    ax_steps, ax_scaled = fig.axes
    assert legend_texts(ax_steps) == ["alpha", "zeta"]  # run names, not cells
    assert the_text(ax_scaled)[0] == "no fitted law"


def test_trajectories_keep_runs_missing_from_the_emergence_table() -> None:
    fig = plot_trajectories(heads({"r1": 1.0, "r2": 2.0, "lost": 3.0}),
                            emergence(THREE_RUNS[:2]), summary())  # fmt: skip
    assert len(data_lines(fig.axes[0])) == 2 + 1 + 1  # three runs and the threshold
    assert legend_texts(fig.axes[0]) == ["B32 C16", "B64 C16", "Bnan Cnan"]


def test_trajectories_without_head_scores_is_an_empty_figure() -> None:
    scores = heads({"r1": 1.0}).assign(metric="associative_recall")
    fig = plot_trajectories(scores, emergence(THREE_RUNS[:1]), summary())
    assert_empty_figure(fig, "no prefix_matching head scores")
    fig = plot_trajectories(scores.assign(metric="x"), emergence(THREE_RUNS[:1]), summary(),
                            metric="y")  # fmt: skip
    assert_empty_figure(fig, "no y head scores")


def test_trajectories_rescale_with_an_extra_covariate() -> None:
    model = summary()["model"]
    with_x = summary(
        extra_covariates=["x"],
        model={
            **model,
            "coef_names": [*model["coef_names"], "x"],
            "params": [*model["params"], 2.0],
            "cov": [[0.0] * 4] * 4,
        },
    )
    table = emergence(THREE_RUNS[1:2], x=[0.5])
    fig = plot_trajectories(heads({"r2": 2.0}), table, with_x)
    (line,) = [ln for ln in data_lines(fig.axes[1]) if len(ln.get_xdata()) == 2][:1]
    predicted = law(32, 16) * math.exp(2 * 0.5)
    np.testing.assert_allclose(line.get_xdata(), [10 / predicted, 20 / predicted], rtol=1e-12)
    with pytest.raises(ValueError) as err:
        plot_trajectories(heads({"r2": 2.0}), table.drop(columns=["x"]), with_x)
    assert str(err.value) == (
        "emergence_table: the law uses extra covariates ['x']; give their values"
    )


# ------------------------------------------------------------------ plot_predicted_vs_observed


def test_predicted_vs_observed_points_bars_limits_and_identity() -> None:
    fig = predicted_vs_observed(observed_table(), summary())
    (ax,) = fig.axes
    runs = OBSERVED[:3]  # the censored and the not-emerged runs are left out
    predicted = np.array([law(bs, c) for _, bs, c, _, _ in runs])
    observed = np.array([step for *_, step in runs])
    (points,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    np.testing.assert_allclose(
        np.ma.filled(points.get_offsets(), np.nan), np.column_stack([predicted, observed])
    )
    assert points.get_zorder() == 2
    # Horizontal prediction bars: from S* exp(-z sigma) to S* exp(z sigma) at the observed S*.
    (bars,) = [c for c in ax.collections if isinstance(c, LineCollection)]
    low, high = predicted * math.exp(-Z * SIGMA), predicted * math.exp(Z * SIGMA)
    segments = np.array(bars.get_segments())
    np.testing.assert_allclose(segments[:, :, 0], np.column_stack([low, high]), rtol=1e-12)
    np.testing.assert_allclose(segments[:, :, 1], np.column_stack([observed, observed]))
    assert to_rgba(bars.get_colors()[0]) == to_rgba("lightgrey")
    assert list(bars.get_linewidths()) == [1.0] and bars.get_zorder() == 1
    # The identity spans the data with a margin, and so do both (log) axes.
    lo = min(low.min(), observed.min()) * 0.8
    hi = max(high.max(), observed.max()) * 1.25
    (identity,) = data_lines(ax)  # fmt="none": the bars draw no line through the points
    assert identity.get_label() == "identity"
    np.testing.assert_allclose(identity.get_xdata(), [lo, hi], rtol=1e-12)
    np.testing.assert_allclose(identity.get_ydata(), [lo, hi], rtol=1e-12)
    assert (identity.get_color(), identity.get_linestyle(), identity.get_linewidth()) == (
        "black",
        "--",
        0.8,
    )
    np.testing.assert_allclose(ax.get_xlim(), (lo, hi), rtol=1e-12)
    np.testing.assert_allclose(ax.get_ylim(), (lo, hi), rtol=1e-12)
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("predicted S* (steps)", "observed S* (steps)")
    assert legend_texts(ax) == ["cell", "B64 C16", "B32 C16", "seed", "0", "1"]
    assert tuple(fig.get_size_inches()) == (5.2, 5.0)
    assert isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)


def test_predicted_vs_observed_title_carries_the_estimates() -> None:
    fig = predicted_vs_observed(observed_table(), summary())
    title = fig.axes[0].title
    assert title.get_text() == (
        "a = 0.40 [0.30, 0.50], b = 0.60 [0.55, 0.65], r = 0.99\n"
        "n = 3 runs (1 censored), seeds [0, 1], classical CIs"
    )
    assert title.get_fontsize() == 9
    fig = predicted_vs_observed(
        observed_table(), summary(covariance="cluster", pearson_r_log={"estimate": None})
    )
    assert fig.axes[0].get_title().endswith("r = nan\nn = 3 runs (1 censored), seeds [0, 1], "
                                            "cluster CIs")  # fmt: skip


def test_predicted_vs_observed_in_tokens() -> None:
    tokens = summary(response="tokens")  # the same coefficients now predict S* B C
    table = observed_table().iloc[:2]
    fig = predicted_vs_observed(table, tokens)
    (ax,) = fig.axes
    (points,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    expected = [[law(64, 16), 120.0 * 64 * 16], [law(32, 16), 300.0 * 32 * 16]]
    np.testing.assert_allclose(np.ma.filled(points.get_offsets(), np.nan), expected, rtol=1e-12)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("predicted S* (tokens)", "observed S* (tokens)")
    assert legend_texts(ax) == ["B64 C16", "B32 C16"]  # one seed: no marker legend


def test_predicted_vs_observed_float_seeds_are_labelled_as_integers() -> None:
    table = observed_table().assign(seed=[0.0, 0.0, 1.0, 0.0, 1.0])
    fig = predicted_vs_observed(table, summary())
    assert legend_texts(fig.axes[0]) == ["cell", "B64 C16", "B32 C16", "seed", "0", "1"]


# ------------------------------------------------------------------ plot_residuals_vs_model_size


def test_residuals_per_preset_sorted_by_name_without_a_manifest() -> None:
    table = residual_table()
    fig = residuals_vs_model_size(table, summary(), None)
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["alpha", "zeta"]
    assert residuals_by_x(ax) == expected_residuals(table, {"z1": 1, "a1": 0, "a2": 0, "a3": 0})
    assert legend_texts(ax) == ["32", "64"]  # hue: batch size
    (zero,) = data_lines(ax)
    assert list(zero.get_ydata()) == [0.0, 0.0]
    assert (zero.get_color(), zero.get_linestyle(), zero.get_linewidth()) == ("black", "--", 0.8)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("model (preset)", "log(observed / predicted S*)")
    assert ax.get_title() == "residuals of the emergence law vs model size"
    assert ax.title.get_fontsize() == 10
    assert {size for c in ax.collections for size in c.get_sizes()} == {49.0}  # size=7 points
    assert tuple(fig.get_size_inches()) == (5.5, 4.0)
    assert isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)


def test_residuals_without_presets_are_one_column() -> None:
    table = residual_table().drop(columns=["preset"])
    fig = residuals_vs_model_size(table, summary(), None)
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["all runs"]
    assert residuals_by_x(ax) == expected_residuals(table, dict.fromkeys(table.run_name, 0))


def test_residual_columns_ordered_by_median_parameter_count() -> None:
    table = residual_table()
    manifest = pd.DataFrame(
        {
            "run_name": ["z1", "a1", "a2", "a3", "a1"],  # a repeated run: its first row counts
            "n_parameters": [5_000_000, 100_000, 110_000, 300_000, 9_000_000],
        }
    )
    fig = residuals_vs_model_size(table, summary(), manifest)
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["alpha\n(110k params)", "zeta\n(5,000k params)"]
    assert residuals_by_x(ax) == expected_residuals(table, {"z1": 1, "a1": 0, "a2": 0, "a3": 0})
    # Sizes order the columns, not names: a small "zeta" comes first.
    manifest["n_parameters"] = [50_000, 100_000, 110_000, 300_000, 9_000_000]
    fig = residuals_vs_model_size(table, summary(), manifest)
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["zeta\n(50k params)", "alpha\n(110k params)"]
    assert residuals_by_x(fig.axes[0]) == expected_residuals(
        table, {"z1": 0, "a1": 1, "a2": 1, "a3": 1}
    )


def test_residuals_fall_back_to_preset_names_without_every_size() -> None:
    table = residual_table()
    partial = pd.DataFrame({"run_name": ["z1", "a1", "a2"], "n_parameters": [5e6, 1e5, 1e5]})
    no_sizes = pd.DataFrame({"run_name": ["z1", "a1", "a2", "a3"], "preset": ["x"] * 4})
    for manifest in (partial, no_sizes):
        fig = residuals_vs_model_size(table, summary(), manifest)
        (ax,) = fig.axes
        assert [t.get_text() for t in ax.get_xticklabels()] == ["alpha", "zeta"]
        assert residuals_by_x(ax) == expected_residuals(table, {"z1": 1, "a1": 0, "a2": 0, "a3": 0})


# ------------------------------------------------------------------ tables: runs, best heads


def test_run_covariates_columns_in_order_one_row_per_run():
    frame = pd.DataFrame(
        {
            "x": [1, 2, 3],
            "seed": [0, 0, 1],
            "run_name": ["r1", "r1", "r2"],
            "metric": ["m", "n", "m"],
            "context_length": [16, 16, 32],
            "batch_size": [4, 4, 8],
        }
    )
    got = run_covariates(frame, ["x", "seed", "absent"])
    assert list(got.columns) == ["run_name", "batch_size", "context_length", "seed", "x"]
    assert got.to_dict("list") == {
        "run_name": ["r1", "r2"],
        "batch_size": [4, 8],
        "context_length": [16, 32],
        "seed": [0, 1],
        "x": [1, 3],
    }


def head_rows() -> pd.DataFrame:
    rows = [
        # run, step, tokens_seen, layer, metric, value
        ("r2", 20, 2000, 1, "prefix_matching", 0.5),
        ("r2", 10, 1000, 1, "prefix_matching", 0.2),
        ("r1", 10, 100, 0, "prefix_matching", 0.9),
        ("r1", 10, 100, 1, "prefix_matching", 0.3),
        ("r1", 10, 100, 1, "prefix_matching", 0.4),
        ("r1", 10, 100, 2, "prefix_matching", 0.1),
        ("r1", 20, 200, 1, "prefix_matching", 0.6),
        ("r1", 20, 200, 1, "other", 0.99),
    ]
    return pd.DataFrame(
        rows, columns=["run_name", "step", "tokens_seen", "layer", "metric", "value"]
    )


def test_best_head_trajectories_takes_the_best_deep_head():
    got = best_head_trajectories(head_rows())
    assert list(got.columns) == ["run_name", "step", "tokens_seen", "value"]
    assert got.to_dict("list") == {
        "run_name": ["r1", "r1", "r2", "r2"],
        "step": [10, 20, 10, 20],
        "tokens_seen": [100, 200, 1000, 2000],
        "value": [0.4, 0.6, 0.2, 0.5],
    }
    got = best_head_trajectories(head_rows(), min_layer=0)
    assert got["value"].tolist() == [0.9, 0.6, 0.2, 0.5]
    got = best_head_trajectories(head_rows(), min_layer=2)
    assert got["value"].tolist() == [0.1]
    got = best_head_trajectories(head_rows(), metric="other")
    assert got["value"].tolist() == [0.99]


def test_best_head_trajectories_falls_back_to_all_layers():
    shallow = head_rows().query("layer == 0 or metric == 'other'")
    got = best_head_trajectories(shallow, min_layer=1)
    assert got["value"].tolist() == [0.9]
    got = best_head_trajectories(shallow, metric="other", min_layer=5)
    assert got["value"].tolist() == [0.99]
    assert best_head_trajectories(shallow, metric="absent").empty


def test_run_covariates_keeps_the_preset():
    frame = pd.DataFrame({"run_name": ["r1", "r1"], "preset": ["p", "p"], "seed": [0, 0]})
    got = run_covariates(frame, [])
    assert got.to_dict("list") == {"run_name": ["r1"], "seed": [0], "preset": ["p"]}


def test_best_head_trajectories_warns_when_it_falls_back_to_all_layers(caplog):
    caplog.set_level("INFO", logger="ih_kedro.science.statistics.plots.law")
    best_head_trajectories(head_rows().query("layer == 0"), min_layer=3)
    messages = [
        r.getMessage() for r in caplog.records if r.name == "ih_kedro.science.statistics.plots.law"
    ]
    assert messages == ["statistics: no prefix_matching heads at layer >= 3; using all layers"]


def test_repetition_curves_one_line_and_band_per_source() -> None:
    from ih_kedro.science.statistics.plots.law import plot_repetition_curves

    curves = pd.DataFrame(
        {"source": ["corpus"] * 2 + ["copies"] * 2, "context_length": [32, 16, 16, 32],
         "share": [0.2, 0.1, 0.3, 0.28], "ci_low": [0.15, 0.05, 0.25, 0.2],
         "ci_high": [0.25, 0.15, 0.35, 0.3]}
    )  # fmt: skip
    fig = plot_repetition_curves(curves)
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines) == ["corpus", "copies"]
    # Sorted by C within a source.
    assert lines["corpus"].get_xdata().tolist() == [16, 32]
    assert lines["corpus"].get_ydata().tolist() == [0.1, 0.2]
    assert lines["copies"].get_ydata().tolist() == [0.3, 0.28]
    assert len(ax.collections) == 2 and ax.get_xscale() == "log"
    assert ax.get_ylabel() == "induction-predictable share"


# ------------------------------------------------------------------ plot_mechanism_exponents


def mechanism_table() -> pd.DataFrame:
    """Three arms as :func:`mechanism_fit_table` reports them; ``both`` was not fitted."""
    return pd.DataFrame(
        {"arm": ["today", "growing_repetition", "both"], "a": [0.52, 0.40, np.nan],
         "a_ci_low": [0.48, 0.30, np.nan], "a_ci_high": [0.56, 0.45, np.nan],
         "b": [0.49, 0.10, np.nan], "b_ci_low": [0.45, 0.02, np.nan],
         "b_ci_high": [0.55, 0.20, np.nan], "note": ["", "", "not identifiable: one B level"]}
    )  # fmt: skip


def test_mechanism_exponents_points_bars_and_published_lines() -> None:
    from ih_kedro.science.statistics.plots.law import plot_mechanism_exponents

    fig = plot_mechanism_exponents(mechanism_table())
    ax_b, ax_a = fig.axes
    expected = {  # panel: (estimates of the fitted arms, CI ends, published values and labels)
        ax_b: ([0.49, 0.10], [(0.45, 0.55), (0.02, 0.20)],
               {"aoyama_sqrt_BC (0.5)": 0.5, "seed_study (0.62)": 0.62}),
        ax_a: ([0.52, 0.40], [(0.48, 0.56), (0.30, 0.45)],
               {"aoyama_sqrt_BC (0.5)": 0.5, "seed_study (0.37)": 0.37}),
    }  # fmt: skip
    for ax, (estimates, cis, references) in expected.items():
        (points,) = [line for line in ax.lines if line.get_marker() == "o"]
        assert points.get_xdata().tolist() == [0, 1]  # the unfitted arm draws no point
        np.testing.assert_allclose(points.get_ydata(), estimates, rtol=1e-12)
        (bars,) = [c for c in ax.collections if isinstance(c, LineCollection)]
        segments = np.array(bars.get_segments())  # (arms, 2 ends, xy)
        np.testing.assert_allclose(segments[:, :, 1], cis, rtol=1e-12)
        np.testing.assert_allclose(segments[:, :, 0], [[0, 0], [1, 1]])
        lines = {line.get_label(): line for line in ax.lines if line.get_marker() != "o"}
        assert {k: v.get_ydata()[0] for k, v in lines.items() if k in references} == references
        for label in references:
            assert list(lines[label].get_ydata()) == [references[label]] * 2  # horizontal
        assert legend_texts(ax) == [*references, "estimate, CI"]
        assert [t.get_text() for t in ax.get_xticklabels()] == [
            "today", "growing_repetition", "both"]  # fmt: skip
        (text,) = ax.texts
        assert (text.get_text(), text.get_position()) == ("not fitted", (2, 0.5))
    assert ax_b.get_ylabel() == "b  (S* ∝ C^-b)" and ax_a.get_ylabel() == "a  (S* ∝ B^-a)"
    assert (ax_b.get_title(), ax_a.get_title()) == ("exponent of C: b", "exponent of B: a")
    assert tuple(fig.get_size_inches()) == (10.0, 4.2)


def test_mechanism_exponents_from_a_fitted_table_and_without_arms() -> None:
    from ih_kedro.science.statistics.law_mechanisms import mechanism_fit_table
    from ih_kedro.science.statistics.plots.law import plot_mechanism_exponents
    from tests.science.statistics.test_law_mechanisms import arm_table

    table = mechanism_fit_table(
        {"today": arm_table(0.5, 0.5, 1), "flat": arm_table(0.5, 0.0, 2)}, {"leave_one_out": False}
    )
    fig = plot_mechanism_exponents(table)
    (points,) = [line for line in fig.axes[0].lines if line.get_marker() == "o"]
    np.testing.assert_allclose(points.get_ydata(), table["b"], rtol=1e-12)
    assert not fig.axes[0].texts
    assert_empty_figure(plot_mechanism_exponents(table.iloc[:0]), "no mechanism arms to show")
