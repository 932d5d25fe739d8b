"""The model choice's figure: each seed's excess with its CI, coloured by load-bearing, and the
chosen candidate's label in bold."""

from __future__ import annotations

from ih_kedro.science.statistics.model_choice import model_table
from ih_kedro.science.statistics.plots.model_choice import plot_model_choice
from tests.science.statistics.test_model_choice import CANDIDATES, _outcomes


def test_figure_marks_load_bearing_seeds_and_the_chosen_model():
    outcomes = _outcomes(CANDIDATES)
    fig = plot_model_choice(outcomes, model_table(outcomes))
    left, right = fig.axes
    labels = [label.get_text() for label in left.get_yticklabels()]
    assert labels == ["shared", "late", "mid", "dear"]
    bold = [
        label.get_text() for label in left.get_yticklabels() if label.get_fontweight() == "bold"
    ]
    assert bold == ["mid"]
    # 12 seeds, one error bar each; "shared" seed 0 (CI low -0.02) is the only grey one.
    colors = [c.lines[0].get_color() for c in left.containers]
    assert len(colors) == 12 and colors.count("tab:gray") == 1
    # The censored-free candidates: 12 emergence markers, the budget and margin lines.
    assert [line.get_xdata()[0] for line in right.get_lines()] == [1500.0, 1000.0]
