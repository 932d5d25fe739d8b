"""The pareto figures checked through what they draw.

Cell edges, heatmap arrays, frontier and band coordinates, error-bar segments, tick labels,
legend entries and titles are compared with values worked out here from the inputs (edges as
geometric midpoints by hand, the growth line as ``exp(alpha + beta d)``), together with the
visual encoding that carries meaning (grey = none formed, dashed = extrapolated, open triangles
= censored, the colour scales' limits).
"""

from __future__ import annotations

import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.collections import FillBetweenPolyCollection, PathCollection, QuadMesh
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.ticker import NullLocator

from ih_kedro.science.statistics.pareto_frontier import GrowthFit
from ih_kedro.science.statistics.plots import pareto as pareto_plots
from ih_kedro.science.statistics.plots.pareto import (
    _edges,
    _frontier,
    _grid,
    plot_frontier_heatmap,
    plot_sstar_vs_distance,
)
from tests.science.statistics.plots.artists import legend_texts, tick_texts

# ------------------------------------------------------------------ pareto: grid helpers


def test_edges_are_geometric_midpoints_extended_by_half_a_step() -> None:
    np.testing.assert_allclose(_edges(np.array([1, 4])), [0.5, 2.0, 8.0])
    np.testing.assert_allclose(_edges([1, 2, 8]), [2**-0.5, 2**0.5, 4.0, 16.0])
    np.testing.assert_allclose(_edges([3]), [3 * math.exp(-0.5), 3 * math.exp(0.5)])


def cells() -> pd.DataFrame:
    """A 2 x 3 grid (f in {1, 4}, r in {0.25, 0.5, 1}) with the cell (4, 0.5) missing."""
    return pd.DataFrame(
        {
            "frequency": [4, 1, 1, 4, 1],
            "reliability": [0.25, 0.25, 1.0, 1.0, 0.5],
            "formed_share": [0.5, 0.0, 1.0, 0.75, 0.0],
            "sstar_median": [100.0, np.nan, 10.0, 1000.0, np.nan],
        }
    )


def test_grid_puts_each_cell_at_its_frequency_and_reliability() -> None:
    fs, rs, values = _grid(cells(), "formed_share")
    np.testing.assert_array_equal(fs, [1, 4])
    np.testing.assert_array_equal(rs, [0.25, 0.5, 1.0])
    np.testing.assert_array_equal(values, [[0.0, 0.5], [0.0, np.nan], [1.0, 0.75]])
    _, _, sstar = _grid(cells(), "sstar_median")
    np.testing.assert_array_equal(sstar, [[np.nan, 100.0], [np.nan, np.nan], [10.0, 1000.0]])


# ------------------------------------------------------------------ pareto: the heatmap

F_EDGES = [0.5, 2.0, 8.0]
R_EDGES = [0.25 / 2**0.5, 0.25 * 2**0.5, 0.5 * 2**0.5, 2**0.5]


def contour() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "frequency": [1.0, 2.0, 4.0],
            "reliability_50": [0.8, 0.5, 0.3],
            "band_low": [0.1, 0.4, 0.2],  # 0.1 is below the grid: clipped to its edge
            "band_high": [2.5, 0.6, 0.4],  # 2.5 is above it
            "level": 0.9,
        }
    )


def shift() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "budget_factor": [2, 2, 4, 4, 1.5, 1.5],
            "frequency": [1.0, 2.0, 1.0, 2.0, 1.0, 4.0],
            "reliability_50": [0.7, 0.4, np.nan, np.nan, np.nan, 0.9],
        }
    )


def heatmap(**kwargs) -> Figure:
    args = {"contour": contour(), "pareto_set": pd.DataFrame({"frequency": [1.0, 4.0],
            "reliability": [1.0, 0.25]}), "shift": shift(), "budget_label": " (budget 500 steps)"}  # fmt: skip
    return plot_frontier_heatmap(cells(), **{**args, **kwargs})


def test_heatmap_meshes_colour_scales_and_colorbars() -> None:
    fig = heatmap()
    share_ax, sstar_ax, share_bar, sstar_bar = fig.axes
    (share,) = [c for c in share_ax.collections if isinstance(c, QuadMesh)]
    np.testing.assert_array_equal(
        np.ma.filled(share.get_array(), -1), [[0.0, 0.5], [0.0, -1], [1.0, 0.75]]
    )
    coordinates = share.get_coordinates()  # (R + 1, F + 1, 2)
    np.testing.assert_allclose(coordinates[0, :, 0], F_EDGES)
    np.testing.assert_allclose(coordinates[:, 0, 1], R_EDGES)
    assert share.get_clim() == (0.0, 1.0) and share.get_cmap().name == "RdYlGn"
    (sstar,) = [c for c in sstar_ax.collections if isinstance(c, QuadMesh)]
    np.testing.assert_allclose(
        np.ma.filled(sstar.get_array(), -1), [[-1, 2.0], [-1, -1], [1.0, 3.0]]
    )  # log10 of the median S*; no S* where none formed
    np.testing.assert_allclose(sstar.get_coordinates(), coordinates)
    assert sstar.get_cmap().name == "viridis"
    assert sstar.get_clim() == (1.0, 3.0)
    assert sstar_ax.get_facecolor() == to_rgba("0.85")  # what shows through: grey
    assert share_ax.get_facecolor() == to_rgba("white")
    # Each colour bar belongs to its own panel's mesh and sits beside it (panels side by side).
    assert share.colorbar.ax is share_bar and sstar.colorbar.ax is sstar_bar
    assert [ax.get_subplotspec().get_geometry() for ax in (share_ax, sstar_ax)] == [
        (1, 2, 0, 0),
        (1, 2, 1, 1),
    ]
    fig.canvas.draw()
    left = [ax.get_position().x0 for ax in (share_ax, share_bar, sstar_ax, sstar_bar)]
    assert left == sorted(left)
    assert share_bar.get_ylabel() == "share of seeds formed"
    assert sstar_bar.get_ylabel() == "log10 median S* (steps); grey: none formed"
    assert tuple(fig.get_size_inches()) == (12.0, 5.0)
    assert isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)


def test_heatmap_of_a_zero_sstar_warns_nothing_and_masks_the_cell() -> None:
    zero = cells()
    zero.loc[0, "sstar_median"] = 0.0  # log10(0): -inf, not drawn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plot_frontier_heatmap(zero, contour(), pd.DataFrame(columns=["frequency"]))
    (sstar,) = [c for c in fig.axes[1].collections if isinstance(c, QuadMesh)]
    np.testing.assert_array_equal(np.ma.getmaskarray(sstar.get_array()),
                                  [[True, True], [True, True], [False, False]])  # fmt: skip


def test_heatmap_axes_ticks_at_the_grid_values_and_titles() -> None:
    fig = heatmap()
    titles = ["IH formed within the budget", "S* of the seeds that formed"]
    for ax, title in zip(fig.axes[:2], titles, strict=True):
        assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
        np.testing.assert_array_equal(ax.get_xticks(), [1, 4])
        assert tick_texts(ax.get_xticklabels()) == ["1", "4"]
        np.testing.assert_array_equal(ax.get_yticks(), [0.25, 0.5, 1.0])
        assert tick_texts(ax.get_yticklabels()) == ["0.25", "0.5", "1"]
        assert isinstance(ax.xaxis.get_minor_locator(), NullLocator)
        assert isinstance(ax.yaxis.get_minor_locator(), NullLocator)
        np.testing.assert_allclose(ax.get_xlim(), (F_EDGES[0], F_EDGES[-1]))
        np.testing.assert_allclose(ax.get_ylim(), (R_EDGES[0], R_EDGES[-1]))
        assert ax.get_xlabel() == "repetition frequency f"
        assert ax.get_ylabel() == "repetition reliability r"
        assert ax.get_title() == f"{title} (budget 500 steps)"
    assert fig.axes[0].get_title() == "IH formed within the budget (budget 500 steps)"
    assert heatmap(budget_label="").axes[1].get_title() == "S* of the seeds that formed"


def test_heatmap_frontier_band_and_budget_shifts_on_both_panels() -> None:
    fig = heatmap()
    reference = plt.figure().subplots()
    low = [R_EDGES[0], 0.4, 0.2]  # the band clipped to the grid
    high = [R_EDGES[-1], 0.6, 0.4]
    expected = reference.fill_between([1.0, 2.0, 4.0], low, high).get_paths()[0].vertices
    for ax in fig.axes[:2]:
        (band,) = [c for c in ax.collections if isinstance(c, FillBetweenPolyCollection)]
        np.testing.assert_allclose(band.get_paths()[0].vertices, expected)
        assert band.get_label() == "90% bootstrap band"
        assert to_rgba(band.get_facecolor()[0]) == to_rgba("black", 0.15)
        assert band.get_alpha() == 0.15 and list(band.get_linewidths()) == [0.0]
        frontier, *shifts = ax.lines
        assert frontier.get_label() == "P = 0.5"
        np.testing.assert_array_equal(frontier.get_xdata(), [1.0, 2.0, 4.0])
        np.testing.assert_array_equal(frontier.get_ydata(), [0.8, 0.5, 0.3])
        assert (frontier.get_color(), frontier.get_linewidth()) == ("black", 2.0)
        # One dashed line per budget factor with a frontier (the x4 shift has none).
        assert [s.get_label() for s in shifts] == [
            "1.5x budget (extrapolated)",
            "2x budget (extrapolated)",
        ]
        np.testing.assert_array_equal(shifts[0].get_xdata(), [1.0, 4.0])
        np.testing.assert_array_equal(shifts[0].get_ydata(), [np.nan, 0.9])
        np.testing.assert_array_equal(shifts[1].get_xdata(), [1.0, 2.0])
        np.testing.assert_array_equal(shifts[1].get_ydata(), [0.7, 0.4])
        assert [(s.get_linestyle(), s.get_linewidth(), s.get_color()) for s in shifts] == [
            ("--", 1.0, "tab:blue")
        ] * 2
    legend = fig.axes[0].get_legend()
    assert legend_texts(fig.axes[0]) == [
        "Pareto set",
        "90% bootstrap band",
        "P = 0.5",
        "1.5x budget (extrapolated)",
        "2x budget (extrapolated)",
    ]
    assert legend._loc == 3 and legend.get_texts()[0].get_fontsize() == 8  # lower left
    assert fig.axes[1].get_legend() is None


def test_frontier_band_is_clipped_to_the_grid_from_both_sides() -> None:
    ax = plt.figure().subplots()
    band = pd.DataFrame({"frequency": [1.0, 2.0], "reliability_50": [0.5, 0.5],
                         "band_low": [0.01, 5.0], "band_high": [0.05, 9.0], "level": 0.5})  # fmt: skip
    _frontier(ax, band, (1.0, 2.0), (0.1, 1.0), None)
    (fill,) = ax.collections
    reference = plt.figure().subplots().fill_between([1.0, 2.0], [0.1, 1.0], [0.1, 1.0])
    np.testing.assert_allclose(fill.get_paths()[0].vertices, reference.get_paths()[0].vertices)
    assert fill.get_label() == "50% bootstrap band"


def test_frontier_draws_the_wald_band_dotted_when_the_contour_has_it() -> None:
    ax = plt.figure().subplots()
    band = pd.DataFrame({"frequency": [1.0, 2.0], "reliability_50": [0.5, 0.5],
                         "band_low": [0.4, 0.4], "band_high": [0.6, 0.6], "level": 0.95,
                         "wald_low": [0.05, 0.3], "wald_high": [0.7, np.inf]})  # fmt: skip
    _frontier(ax, band, (1.0, 2.0), (0.1, 1.0), None)
    low, high, frontier = ax.lines
    assert (low.get_label(), frontier.get_label()) == ("95% Wald band", "P = 0.5")
    assert high.get_label().startswith("_")  # one legend entry for the pair
    np.testing.assert_array_equal(low.get_ydata(), [0.1, 0.3])  # clipped to the grid
    np.testing.assert_array_equal(high.get_ydata(), [0.7, 1.0])
    assert (low.get_linestyle(), low.get_linewidth(), low.get_color()) == (":", 1.0, "black")


def test_heatmap_circles_the_pareto_set() -> None:
    fig = heatmap()
    (circles,) = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    np.testing.assert_array_equal(
        np.ma.filled(circles.get_offsets(), np.nan), [[1.0, 1.0], [4.0, 0.25]]
    )
    assert circles.get_label() == "Pareto set"
    assert list(circles.get_sizes()) == [160.0] and list(circles.get_linewidths()) == [2.0]
    assert len(circles.get_facecolors()) == 0  # open circles
    assert [to_rgba(c) for c in circles.get_edgecolors()] == [to_rgba("black")]
    assert not [c for c in fig.axes[1].collections if isinstance(c, PathCollection)]


def test_heatmap_without_a_frontier_pareto_set_or_shift() -> None:
    unfitted = contour().assign(reliability_50=np.nan)
    for frontier in (unfitted, contour().iloc[:0]):
        fig = heatmap(contour=frontier, pareto_set=pd.DataFrame(columns=["frequency"]), shift=None)
        for ax in fig.axes[:2]:
            assert not ax.lines
            assert not [c for c in ax.collections if not isinstance(c, QuadMesh)]
            np.testing.assert_allclose(ax.get_xlim(), (F_EDGES[0], F_EDGES[-1]))
            np.testing.assert_allclose(ax.get_ylim(), (R_EDGES[0], R_EDGES[-1]))
        assert fig.axes[0].get_legend() is None
    fig = heatmap(shift=shift().iloc[:0])
    assert [line.get_label() for line in fig.axes[0].lines] == ["P = 0.5"]


def test_heatmap_of_a_single_cell() -> None:
    one = cells().iloc[:1]
    fig = plot_frontier_heatmap(one, contour().iloc[:0], pd.DataFrame(columns=["frequency"]))
    (mesh,) = [c for c in fig.axes[0].collections if isinstance(c, QuadMesh)]
    np.testing.assert_allclose(mesh.get_coordinates()[0, :, 0], [4 * math.exp(-0.5),
                                                                 4 * math.exp(0.5)])  # fmt: skip
    assert fig.axes[0].get_title() == "IH formed within the budget"


# ------------------------------------------------------------------ pareto: S* vs distance


def runs() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "distance": [-0.5, 0.2, 0.8, 1.5, -1.0, 0.1, 0.3],
            "step": [900.0, 400.0, 300.0, 200.0, np.nan, np.nan, 50.0],
            "ci_low": [800.0, 450.0, np.nan, 150.0, np.nan, np.nan, 40.0],
            "ci_high": [900.25, 390.0, np.nan, np.inf, np.nan, np.nan, 60.0],
            "formed": [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, np.nan],
        }
    )


GROWTH = GrowthFit(alpha=6.0, beta=-0.5, alpha_ci=(5.0, 7.0), beta_ci=(-0.7, -0.3), n=4,
                   r_squared=0.9, status="ok")  # fmt: skip


def test_sstar_points_with_their_intervals() -> None:
    fig = plot_sstar_vs_distance(runs(), GROWTH, 1500.0)
    (ax,) = fig.axes
    (container,) = ax.containers
    points, caps, (bars,) = container.lines
    np.testing.assert_array_equal(points.get_xdata(), [-0.5, 0.2, 0.8, 1.5])
    np.testing.assert_array_equal(points.get_ydata(), [900.0, 400.0, 300.0, 200.0])
    assert (points.get_marker(), points.get_linestyle(), points.get_color()) == (
        "o",
        "None",
        "tab:green",
    )
    # Bars from step - low to step + high (a short one of 0.25 above); a CI entirely above or
    # below the step, a missing or an infinite bound give no bar on that side.
    segments = np.array(bars.get_segments())
    np.testing.assert_array_equal(segments[:, :, 0], [[-0.5, -0.5], [0.2, 0.2], [0.8, 0.8],
                                                      [1.5, 1.5]])  # fmt: skip
    np.testing.assert_array_equal(
        segments[:, :, 1], [[800.0, 900.25], [400.0, 400.0], [300.0, 300.0], [150.0, 200.0]]
    )
    assert to_rgba(bars.get_colors()[0]) == to_rgba("0.6")
    assert len(caps) == 2 and caps[0].get_markersize() == 4.0  # capsize 2
    assert container.get_label() == "formed: S* with CI"


def test_sstar_censored_runs_budget_and_growth_line() -> None:
    fig = plot_sstar_vs_distance(runs(), GROWTH, 1500.0)
    (ax,) = fig.axes
    (censored,) = ax.collections[1:]
    np.testing.assert_array_equal(
        np.ma.filled(censored.get_offsets(), np.nan), [[-1.0, 1500.0], [0.1, 1500.0]]
    )
    triangle = censored.get_paths()[0].vertices
    np.testing.assert_array_equal(triangle, [[0, 0.5], [-0.5, -0.5], [0.5, -0.5], [0, 0.5]])
    assert len(censored.get_facecolors()) == 0
    assert [to_rgba(c) for c in censored.get_edgecolors()] == [to_rgba("tab:red")]
    points, cap_low, cap_high, budget, zero, growth = ax.lines
    assert (list(budget.get_ydata()), budget.get_label()) == ([1500.0, 1500.0],
                                                              "budget 1500 steps")  # fmt: skip
    assert (budget.get_color(), budget.get_linestyle(), budget.get_linewidth()) == (
        "tab:red",
        ":",
        1.0,
    )
    assert list(zero.get_xdata()) == [0, 0]
    assert (zero.get_color(), zero.get_linewidth()) == ("black", 1.0)
    d = np.linspace(-1.0, 1.5, 100)  # from the smallest distance (censored runs included)
    np.testing.assert_allclose(growth.get_xdata(), d)
    np.testing.assert_allclose(growth.get_ydata(), np.exp(6.0 - 0.5 * d))
    assert growth.get_color() == "black"
    assert growth.get_label() == "log S* = 6.00 + (-0.50) d, CI [-0.70, -0.30], n=4"
    assert legend_texts(ax) == [
        "not formed (at the budget)",
        "budget 1500 steps",
        "log S* = 6.00 + (-0.50) d, CI [-0.70, -0.30], n=4",
        "formed: S* with CI",
    ]
    assert ax.get_legend().get_texts()[0].get_fontsize() == 8
    assert ax.get_yscale() == "log"
    assert ax.get_xlabel() == (
        "signed distance to the 50% frontier in (log f, log r)  (+ = forming side)"
    )
    assert ax.get_ylabel() == "S* (steps)"
    assert ax.get_title() == "S* grows as cells approach the frontier"
    assert tuple(fig.get_size_inches()) == (7.0, 5.0)
    assert isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)


def test_sstar_line_starts_at_the_frontier_and_needs_a_growth_fit() -> None:
    forming = runs().iloc[[1, 2, 3]]  # every distance positive: the line starts at d = 0
    fig = plot_sstar_vs_distance(forming, GROWTH, 1e3)
    (ax,) = fig.axes
    assert len(ax.collections) == 1  # no censored run: no triangles
    growth = ax.lines[-1]
    np.testing.assert_allclose(growth.get_xdata(), np.linspace(0.0, 1.5, 100))
    assert legend_texts(ax) == ["budget 1000 steps", growth.get_label(), "formed: S* with CI"]
    failed = GrowthFit(math.nan, math.nan, (math.nan,) * 2, (math.nan,) * 2, 2, math.nan,
                       "too_few_emerged_runs")  # fmt: skip
    fig = plot_sstar_vs_distance(runs(), failed, 1500.0)
    assert legend_texts(fig.axes[0]) == [
        "not formed (at the budget)",
        "budget 1500 steps",
        "formed: S* with CI",
    ]


# ------------------------------------------------------------------ pareto: from the summary


def test_wrap() -> None:
    text = "word " * 30
    assert pareto_plots._wrap(text) == "\n".join(["word " * 13 + "word"] * 2 + ["word word"])
    assert pareto_plots._wrap("aa bb cc", width=5) == "aa bb\ncc"
    # A 71-character line is split at the default width of 70.
    assert pareto_plots._wrap("a" * 35 + " " + "b" * 35) == "a" * 35 + "\n" + "b" * 35
    assert pareto_plots._wrap("a" * 34 + " " + "b" * 35) == "a" * 34 + " " + "b" * 35


def test_fit_from_summary() -> None:
    summary = {"coefficients": {"intercept": {"estimate": 1.0}, "log_frequency": {"estimate": 2.0},
                                "log_reliability": {"estimate": 3.5}},
               "fit_method": "mle", "n_runs_fitted": 9, "n_runs_formed": 4}  # fmt: skip
    fit = pareto_plots._fit_from_summary(summary)
    np.testing.assert_array_equal(fit.coef, [1.0, 2.0, 3.5])
    np.testing.assert_array_equal(fit.cov, np.zeros((3, 3)))
    assert (fit.method, fit.n_runs, fit.n_formed, fit.converged) == ("mle", 9, 4, True)


def test_threshold_robustness_rows_ratio_and_verdict_colours() -> None:
    nan = float("nan")
    table = pd.DataFrame(
        {"measure": ["formed at 0.3", "formed at 0.5", "formation score"],
         "both_knobs_matter": ["supported", "undecided", "supported"],
         "reliability_weighs_more": ["supported", "undecided", "contradicted"],
         "ratio": [0.4, nan, 1.5], "ratio_ci_low": [0.2, nan, 1.2],
         "ratio_ci_high": [0.6, nan, 1.9]}
    )  # fmt: skip
    fig = pareto_plots.plot_threshold_robustness(table)
    ax = fig.axes[0]
    assert tick_texts(ax.get_yticklabels()) == [
        "formed at 0.3\n(both knobs: supported)", "formed at 0.5\n(both knobs: undecided)",
        "formation score\n(both knobs: supported)",
    ]  # fmt: skip
    points = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert [(p.get_xdata()[0], p.get_ydata()[0]) for p in points] == [(0.4, 0), (1.5, 2)]
    assert [to_rgba(p.get_color()) for p in points] == [to_rgba("tab:green"), to_rgba("tab:red")]
    bars = [seg.tolist() for c in ax.collections for seg in c.get_segments()]
    assert bars == [[[0.2, 0.0], [0.6, 0.0]], [[1.2, 2.0], [1.9, 2.0]]]  # none for the unfitted
    verticals = sorted(line.get_xdata()[0] for line in ax.get_lines() if line.get_marker() != "o")
    assert verticals == [0.0, 1.0]
