"""The dose-response figure of the natural-most base."""

from __future__ import annotations

import numpy as np

from ih_kedro.science.statistics.base_calibration import dose_response_table
from ih_kedro.science.statistics.plots.base_calibration import plot_dose_response
from tests.science.statistics.test_base_calibration import DOSES, STEPS, _outcomes


def test_figure_marks_the_chosen_dose():
    outcomes = _outcomes(STEPS, {d: list(np.linspace(0.1, 0.3, 3)) for d in DOSES})
    fig = plot_dose_response(outcomes, dose_response_table(outcomes))
    left, right = fig.axes
    assert any(line.get_xdata()[0] == 64 for line in left.get_lines() if line.get_ls() == "--")
    assert right.get_xscale() == "log"
