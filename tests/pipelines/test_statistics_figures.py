"""The statistics pipeline's figure nodes: the parameters reach the figures, and a law that
was not fitted draws its status.

What the figures draw is checked in ``tests/science/statistics/plots/test_law.py``; here the
nodes' ``params:statistics`` (trajectory metric and layer, interval level, row selection) and
their handling of an unfitted law, on the same hand-built inputs (``law_inputs.py``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from matplotlib.collections import LineCollection
from scipy import stats

from ih_kedro.pipelines.statistics.nodes import (
    plot_predicted_vs_observed,
    plot_residuals_vs_model_size,
    plot_trajectories,
)
from tests.science.statistics.plots.law_inputs import (
    OBSERVED,
    SIGMA,
    THREE_RUNS,
    assert_empty_figure,
    data_lines,
    emergence,
    heads,
    law,
    observed_table,
    residual_table,
    summary,
)


def test_trajectories_metric_and_min_layer_parameters() -> None:
    scores = heads({"r1": 1.0, "r2": 2.0})
    params = {"trajectory_metric": "associative_recall", "trajectory_min_layer": 0}
    fig = plot_trajectories(scores.assign(metric="associative_recall"),
                            emergence(THREE_RUNS[:2]), summary(), params)  # fmt: skip
    ax_steps = fig.axes[0]
    assert ax_steps.get_ylabel() == "best-head associative_recall"
    ys = {tuple(line.get_ydata()) for line in data_lines(ax_steps) if len(line.get_ydata()) == 2}
    assert (0.99, 0.99) in ys  # layer 0 counts with min_layer 0


def test_predicted_vs_observed_of_an_unfitted_law() -> None:
    fig = plot_predicted_vs_observed(observed_table(), {"status": "insufficient_data: 3 runs"}, {})
    assert_empty_figure(fig, "emergence law not fitted:\ninsufficient_data: 3 runs")
    fig = plot_predicted_vs_observed(observed_table(), {"model": {}}, {})
    assert_empty_figure(fig, "emergence law not fitted:\n")


def test_residuals_of_an_unfitted_law() -> None:
    fig = plot_residuals_vs_model_size(residual_table(), {"status": "fit_failed"}, None, {})
    assert_empty_figure(fig, "emergence law not fitted:\nfit_failed")
    fig = plot_residuals_vs_model_size(residual_table(), {"status": "ok"}, None, {})
    assert_empty_figure(fig, "emergence law not fitted:\nok")
    fig = plot_residuals_vs_model_size(residual_table(), {}, None, {})
    assert_empty_figure(fig, "emergence law not fitted:\n")


def test_predicted_vs_observed_bars_at_the_chosen_level() -> None:
    """``statistics.level`` reaches the prediction bars: 0.8 gives S* exp(±z(0.9) sigma)."""
    fig = plot_predicted_vs_observed(observed_table(), summary(), {"level": 0.8})
    (bars,) = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    predicted = np.array([law(bs, c) for _, bs, c, _, _ in OBSERVED[:3]])
    z = float(stats.norm.ppf(0.9))
    expected = np.column_stack([predicted * math.exp(-z * SIGMA), predicted * math.exp(z * SIGMA)])
    np.testing.assert_allclose(np.array(bars.get_segments())[:, :, 0], expected, rtol=1e-12)


def test_residuals_select_rows_with_the_given_parameters() -> None:
    """The figure's rows come from ``statistics.metric`` (an unknown one has no rows)."""
    with pytest.raises(
        ValueError, match=r"^statistics.metric/method: no emergence rows for metric='nope'"
    ):
        plot_residuals_vs_model_size(residual_table(), summary(), None, {"metric": "nope"})
