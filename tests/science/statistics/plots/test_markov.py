"""The markov figures checked through what they draw: the designed processes (transition
matrices, stationary vs target distributions, titles) and the condition outcomes (the formed
grid with its labels, the emergence steps with their intervals)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ih_kedro.science.data.variants.markov_process import MarkovProcess, MarkovSpec
from ih_kedro.science.statistics.plots.markov import (
    plot_conditions,
    plot_paired_comparisons,
    plot_processes,
)
from tests.science.statistics.plots.artists import legend_texts, tick_texts

# ------------------------------------------------------------------ markov: processes


def process(name: str, groups: np.ndarray, seed: int) -> MarkovProcess:
    v = len(groups)
    rng = np.random.default_rng(seed)
    transition = rng.random((v, v))
    transition /= transition.sum(axis=1, keepdims=True)
    return MarkovProcess(
        spec=MarkovSpec(name=name, vocab_size=v),
        transition=transition,
        stationary=rng.random(v),
        target=np.full(v, 1 / v),
        groups=np.asarray(groups),
        properties={
            "entropy_ratio": 0.5049,
            "within_similarity": 0.125,
            "across_similarity": -0.0312,
            "kl_to_target": 0.00123,
        },
    )


def test_processes_one_column_each_sorted_by_name() -> None:
    tied = np.repeat([1, 0], 40)  # many ties: only a stable sort keeps the state order
    small = np.array([1, 0, 1, 0])
    processes = {"zipf": process("zipf", tied, 0), "base": process("base", small, 1)}
    fig = plot_processes(processes)
    assert len(fig.axes) == 4
    (base_matrix, zipf_matrix), (base_marginal, zipf_marginal) = np.array(fig.axes).reshape(2, 2)
    for ax, name, order in (
        (base_matrix, "base", [1, 3, 0, 2]),
        (zipf_matrix, "zipf", [*range(40, 80), *range(40)]),
    ):
        (image,) = ax.images
        transition = processes[name].transition
        matrix = np.ma.filled(image.get_array(), np.nan)
        np.testing.assert_array_equal(matrix, transition[np.ix_(order, order)])
        assert image.get_cmap().name == "viridis" and ax.get_aspect() == "auto"
        assert ax.get_title() == f"{name}\nH ratio 0.50, within 0.12, across -0.03"
        assert ax.title.get_fontsize() == 8
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("next state (by group)", "state (by group)")
    for ax, name in ((base_marginal, "base"), (zipf_marginal, "zipf")):
        target, stationary = ax.lines
        states = np.arange(processes[name].vocab_size)
        np.testing.assert_array_equal(target.get_xdata(), states)
        np.testing.assert_array_equal(target.get_ydata(), processes[name].target)
        assert (target.get_linestyle(), target.get_color()) == ("--", "k")
        np.testing.assert_array_equal(stationary.get_xdata(), states)
        np.testing.assert_array_equal(stationary.get_ydata(), processes[name].stationary)
        assert legend_texts(ax) == ["target", "stationary"]
        assert ax.get_legend().get_texts()[0].get_fontsize() == 7
        assert ax.get_title() == "KL 0.0012 nats" and ax.title.get_fontsize() == 8
        assert ax.get_xlabel() == "state"
    assert fig.get_suptitle() == "Designed Markov processes"
    assert tuple(fig.get_size_inches()) == (6.4, 6.4)


def test_a_single_process_is_one_column() -> None:
    fig = plot_processes({"only": process("only", np.array([0, 1]), 2)})
    assert len(fig.axes) == 2 and fig.axes[0].get_title().startswith("only\n")
    np.testing.assert_allclose(fig.get_size_inches(), (3.2, 6.4))


# ------------------------------------------------------------------ markov: conditions


def conditions() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "condition": ["zipf@low", "zipf@high", "base@low", "base@high", "odd@low"],
            "process": ["zipf", "zipf", "base", "base", "odd"],
            "level": ["low", "high", "low", "high", "low"],
            "formed": ["yes", "mixed", "no", "unknown", "maybe"],
            "s_star": [1234.4, 800.0, np.nan, np.nan, 50.0],
            "ci_low": [1234.15, np.nan, np.nan, np.nan, 60.0],  # 60 > 50: no lower bar
            "ci_high": [1500.6, np.nan, np.nan, np.nan, 40.0],  # 40 < 50: no upper bar
        }
    )


def test_conditions_grid_in_order_of_appearance_with_labels() -> None:
    fig = plot_conditions(conditions())
    left, right = fig.axes
    (image,) = left.images
    # Rows: processes, columns: levels, both in table order; yes 1, mixed/unknown 0.5, no 0.
    grid = np.ma.filled(image.get_array().astype(float), np.nan)  # masked entries as NaN
    np.testing.assert_array_equal(grid, [[1.0, 0.5], [0.0, 0.5], [np.nan, np.nan]])
    assert image.get_cmap().name == "RdYlGn" and image.get_clim() == (0.0, 1.0)
    # The colour scale stays 0..1 when no condition is a plain "no".
    formed = plot_conditions(conditions().iloc[[0, 1]]).axes[0].images[0]
    assert formed.get_clim() == (0.0, 1.0)
    assert left.get_aspect() == "auto"
    labels = [(t.get_position(), t.get_text(), t.get_ha(), t.get_va()) for t in left.texts]
    assert labels == [
        ((0, 0), "yes\nS* 1234 [1234, 1501]", "center", "center"),
        ((1, 0), "mixed\nS* 800 [nan, nan]", "center", "center"),
        ((0, 1), "no", "center", "center"),
        ((1, 1), "unknown", "center", "center"),
        ((0, 2), "maybe\nS* 50 [60, 40]", "center", "center"),
    ]
    assert {t.get_fontsize() for t in left.texts} == {8}
    np.testing.assert_array_equal(left.get_xticks(), [0, 1])
    assert tick_texts(left.get_xticklabels()) == ["low", "high"]
    np.testing.assert_array_equal(left.get_yticks(), [0, 1, 2])
    assert tick_texts(left.get_yticklabels()) == ["zipf", "base", "odd"]
    assert left.get_title() == "Induction heads formed within the budget?"
    np.testing.assert_allclose(fig.get_size_inches(), (12.0, 0.6 * 5 + 1.5))


def test_conditions_emergence_steps_with_their_intervals() -> None:
    fig = plot_conditions(conditions())
    right = fig.axes[1]
    (container,) = right.containers
    points, caps, (bars,) = container.lines
    np.testing.assert_array_equal(points.get_xdata(), [1234.4, 800.0, 50.0])
    np.testing.assert_array_equal(points.get_ydata(), [0, 1, 2])
    assert (points.get_marker(), points.get_linestyle()) == ("o", "None")
    # A missing bound draws no bar on its side, nor does a bound on the wrong side.
    segments = np.array(bars.get_segments())
    np.testing.assert_allclose(segments[:, :, 0], [[1234.15, 1500.6], [800.0, 800.0],
                                                   [50.0, 50.0]])  # fmt: skip
    np.testing.assert_array_equal(segments[:, :, 1], [[0, 0], [1, 1], [2, 2]])
    assert caps[0].get_markersize() == 6.0  # capsize 3
    np.testing.assert_array_equal(right.get_yticks(), [0, 1, 2])
    assert tick_texts(right.get_yticklabels()) == ["zipf@low", "zipf@high", "odd@low"]
    assert right.get_xlabel() == "S* (steps), 95% CI"
    assert right.get_title() == "Emergence step of the conditions that formed"


def test_conditions_without_any_emerged_or_any_row() -> None:
    none_formed = conditions().assign(s_star=np.nan)
    fig = plot_conditions(none_formed)
    right = fig.axes[1]
    (text,) = right.texts
    assert (text.get_text(), text.get_position(), text.get_ha()) == (
        "no condition formed",
        (0.5, 0.5),
        "center",
    )
    assert text.get_transform() == right.transAxes
    assert not right.containers
    assert right.get_title() == "Emergence step of the conditions that formed"
    fig = plot_conditions(conditions().iloc[:0])
    left, right = fig.axes
    (text,) = left.texts
    assert (text.get_text(), text.get_position(), text.get_ha()) == (
        "no conditions",
        (0.5, 0.5),
        "center",
    )
    assert not left.images and not right.texts and right.get_title() == ""
    np.testing.assert_allclose(fig.get_size_inches(), (12.0, 0.6 * 4 + 1.5))


def _comparison(t, k, verdict, diffs, mean, low, high):
    seeds = [{"seed": i, "difference": d} for i, d in enumerate(diffs)]
    return {"treatment": t, "control": k, "verdict": verdict, "seeds": seeds, "mean": mean,
            "ci_low": low, "ci_high": high}  # fmt: skip


def test_paired_comparisons_one_row_per_comparison_with_seeds_and_ci() -> None:
    verdicts = {
        "ld_necessary": {"comparisons": [_comparison("A@h", "B@h", "supported",
                                                     [0.4, 0.5, None], 0.45, 0.3, 0.6)]},
        "cat": {"comparisons": [_comparison("C@n", "D@n", "contradicted", [-0.1, -0.2], -0.15,
                                            None, None)]},
    }  # fmt: skip
    fig = plot_paired_comparisons(verdicts)
    ax = fig.axes[0]
    assert tick_texts(ax.get_yticklabels()) == ["ld_necessary\nA@h − B@h", "cat\nC@n − D@n"]
    scatters = [c for c in ax.collections if type(c).__name__ == "PathCollection"]
    dots = [c.get_offsets().tolist() for c in scatters]
    assert [[0.4, 0.0], [0.5, 0.0]] in dots and [[-0.1, 1.0], [-0.2, 1.0]] in dots
    bars = [c for c in ax.collections if type(c).__name__ == "LineCollection"]
    segments = [seg.tolist() for c in bars for seg in c.get_segments()]
    assert [[0.3, 0.0], [0.6, 0.0]] in segments and len(segments) == 1  # no CI: no bar
    colours = {tuple(np.round(c.get_facecolor()[0], 3)) for c in scatters}
    assert len(colours) == 2  # supported and contradicted differ


def test_paired_comparisons_without_any() -> None:
    fig = plot_paired_comparisons({"x": {"comparisons": []}})
    assert fig.axes[0].texts[0].get_text() == "no paired comparison"
