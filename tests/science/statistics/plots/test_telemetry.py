"""The telemetry figures checked through what they draw: lines per head, heatmap panels."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.statistics.plots.telemetry import (
    plot_head_heatmaps,
    plot_prefix_matching_over_training,
)


@pytest.fixture(autouse=True)
def _close_figures() -> Any:
    yield
    plt.close("all")


def head_rows(runs: dict[str, tuple[int, ...]], tokens: bool = True) -> pd.DataFrame:
    rows = [
        {"run_name": run, "step": step, "tokens_seen": step * 4.0 if tokens else float("nan"),
         "layer": layer, "head": head, "metric": "prefix_matching",
         "value": step / 100 + layer / 10 + head / 100}
        for run, steps in runs.items() for step in steps for layer in range(2) for head in range(2)
    ]  # fmt: skip
    rows.append({**rows[0], "metric": "copying", "value": 0.99})
    return pd.DataFrame(rows)


def lines(ax: plt.Axes) -> list[tuple[list[float], list[float]]]:
    return [(list(map(float, line.get_xdata())), list(map(float, line.get_ydata())))
            for line in ax.lines if len(line.get_xdata())]  # fmt: skip


def test_prefix_matching_over_training_plots_one_line_per_head_over_tokens() -> None:
    fig = plot_prefix_matching_over_training(head_rows({"a": (0, 10), "b": (0, 50), "c": (0, 1),
                                                        "d": (0, 1)}))  # fmt: skip
    a, b, _, d = fig.axes
    assert [ax.get_title() for ax in fig.axes] == [f"run_name = {r}" for r in "abcd"]
    assert (d.get_xlabel(), a.get_ylabel()) == ("tokens_seen", "prefix-matching score")
    assert lines(a) == [([0.0, 40.0], [y / 10 + h / 100, 0.1 + y / 10 + h / 100])
                        for y in range(2) for h in range(2)]  # fmt: skip
    assert lines(b)[0] == ([0.0, 200.0], [0.0, 0.5])  # the copying row is not plotted
    assert a.get_xlim() != b.get_xlim()  # each run its own x axis
    assert [t.get_text() for t in fig.legends[0].texts] == ["L0H0", "L0H1", "L1H0", "L1H1"]
    # Three panels a row, each 3 inches high.
    assert [ax.get_subplotspec().get_geometry()[:2] for ax in fig.axes] == [(2, 3)] * 4
    assert fig.get_size_inches()[1] == pytest.approx(6.0)


def test_prefix_matching_over_training_falls_back_to_steps() -> None:
    data = head_rows({"a": (0, 10)}, tokens=False)
    fig = plot_prefix_matching_over_training(data)
    (ax,) = fig.axes
    assert ax.get_xlabel() == "step" and lines(ax)[0] == ([0.0, 10.0], [0.0, 0.1])


def test_head_heatmaps_label_ticks_and_blank_the_missing_panels() -> None:
    rows = head_rows({"b": (0, 10, 20), "a": (10,)})
    rows.loc[rows["head"] == 1, "head"] = 7  # head ids label the columns
    fig = plot_head_heatmaps(rows, [0, 10, 20])
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["a\nstep 10", "b\nstep 0", "b\nstep 10",
                                                 "b\nstep 20"]  # fmt: skip
    grid_axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(grid_axes) == 6  # 2 runs x 3 columns
    assert [ax.axison for ax in grid_axes] == [True, False, False, True, True, True]
    first = panels[0]
    assert [t.get_text() for t in first.get_xticklabels()] == ["0", "7"]
    assert [t.get_text() for t in first.get_yticklabels()] == ["0", "1"]
    assert list(first.get_xticks()) == [0, 1] and list(first.get_yticks()) == [0, 1]
    assert first.get_xticklabels()[0].get_fontsize() == 6
    assert first.get_yticklabels()[0].get_fontsize() == 6
    assert (first.get_xlabel(), first.get_ylabel()) == ("head", "layer")
    assert first.xaxis.label.get_fontsize() == 7 and first.yaxis.label.get_fontsize() == 7
    assert first.title.get_fontsize() == 7
    image = first.images[0]
    np.testing.assert_allclose(image.get_array(), [[0.1, 0.11], [0.2, 0.21]])
    assert image.get_cmap().name == "viridis" and image.get_interpolation() == "nearest"
    assert first.get_aspect() == "auto"
    (colorbar,) = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert colorbar.get_ylabel() == "prefix-matching score"
    assert tuple(fig.get_size_inches()) == pytest.approx((9.0, 5.0))


def test_head_heatmaps_of_a_run_with_two_steps_show_both_once() -> None:
    fig = plot_head_heatmaps(head_rows({"a": (3, 8)}), None)
    assert [ax.get_title() for ax in fig.axes if ax.images] == ["a\nstep 3", "a\nstep 8"]


def test_head_heatmaps_of_steps_no_run_has_are_blank_panels() -> None:
    fig = plot_head_heatmaps(head_rows({"a": (0,), "b": (1,)}), [99])
    assert [ax.axison for ax in fig.axes] == [False, False]  # one blank column, no colorbar
    assert tuple(fig.get_size_inches()) == pytest.approx((3.0, 5.0))


def test_head_heatmaps_without_scores_are_one_empty_panel() -> None:
    fig = plot_head_heatmaps(head_rows({"a": (0,)}).iloc[-1:], None)
    (ax,) = fig.axes  # no colorbar either
    assert not ax.images and tuple(fig.get_size_inches()) == pytest.approx((3.0, 2.5))


def test_head_heatmaps_plot_each_runs_scores_at_its_first_middle_and_last_step():
    rows = [
        {"run_name": run, "step": step, "layer": layer, "head": head,
         "metric": "prefix_matching", "value": offset + step / 100 + layer / 10 + head / 100}
        for run, offset in (("a", 0.0), ("b", 0.5))
        for step in (0, 10, 20, 30)
        for layer in range(2)
        for head in range(3)
    ]  # fmt: skip
    other = {**rows[0], "metric": "previous_token", "value": 0.99}
    fig = plot_head_heatmaps(pd.DataFrame([*rows, other]), None)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 6  # 2 runs x (first, middle, last)
    titles = [ax.get_title() for ax in panels]
    assert titles == [f"{r}\nstep {s}" for r in "ab" for s in (0, 20, 30)]
    # Panel b, step 20: rows are layers, columns heads, previous_token rows left out.
    image = np.asarray(panels[4].images[0].get_array())  # (layers, heads)
    expected = [[0.5 + 0.2 + layer / 10 + head / 100 for head in range(3)] for layer in range(2)]
    np.testing.assert_allclose(image, expected)
    assert panels[4].images[0].get_clim() == (0, 1)
    chosen = plot_head_heatmaps(pd.DataFrame(rows), [10])
    assert [ax.get_title() for ax in chosen.axes if ax.images] == ["a\nstep 10", "b\nstep 10"]
