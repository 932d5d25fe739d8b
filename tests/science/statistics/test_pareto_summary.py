"""The pareto frontier summary's helpers: the frontier status rules, JSON safety and the
budget sentence, checked against literal values."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.statistics import pareto_frontier as pf
from ih_kedro.science.statistics import pareto_summary
from ih_kedro.science.statistics.paired_seeds import json_safe
from tests.science.statistics.pareto_tables import frontier_cells


def test_frontier_status_rules() -> None:
    def runs(*formed: float) -> pd.DataFrame:
        return pd.DataFrame({"formed": list(formed)})

    assert pareto_summary._frontier_status(runs(1.0, 0.0)) == "too_few_runs"
    assert pareto_summary._frontier_status(runs(1.0, 0.0, 1.0)) == "ok"
    assert pareto_summary._frontier_status(runs(0.0, 1.0, 0.0)) == "ok"
    assert pareto_summary._frontier_status(runs(1.0, 1.0, 1.0)) == "all_formed"
    assert pareto_summary._frontier_status(runs(0.0, 0.0, 0.0)) == "none_formed"


def test_finite_or_none() -> None:
    assert pareto_summary._finite_or_none(None) is None
    assert pareto_summary._finite_or_none(math.nan) is None
    assert pareto_summary._finite_or_none(-math.inf) is None
    value = pareto_summary._finite_or_none(np.float32(1.5))
    assert value == 1.5 and type(value) is float


def test_json_safe_converts_nested_numpy_values() -> None:
    got = json_safe({
        "a": (np.float64(1.5), np.int64(3), np.bool_(True)), "b": [math.inf, {"c": np.nan}],
        "d": "text", "e": None, "f": 2, "g": np.float32(0.25),
    })  # fmt: skip
    assert got == {"a": [1.5, 3, True], "b": [None, {"c": None}], "d": "text", "e": None,
                   "f": 2, "g": 0.25}  # fmt: skip
    assert [type(v) for v in got["a"]] == [float, int, bool] and type(got["g"]) is float


def _growth(
    status: str = "ok", beta: float = -0.5, distance_range: tuple = (math.nan, math.nan)
) -> pf.GrowthFit:
    return pf.GrowthFit(alpha=1.0, beta=beta, alpha_ci=(0.0, 2.0), beta_ci=(-1.0, 0.0), n=4,
                        r_squared=0.5, status=status, distance_range=distance_range)  # fmt: skip


def test_longer_budget_sentences() -> None:
    assert pareto_summary._longer_budget_sentence(_growth("too_few_emerged_runs"), (2.0,)) == (
        "not estimated (too_few_emerged_runs): too few runs formed to fit how S* grows near "
        "the frontier"
    )
    assert pareto_summary._longer_budget_sentence(_growth(beta=0.0), (2.0,)) == (
        "S* does not grow towards the frontier in these runs (beta = 0.00); the frontier is "
        "not budget-limited at this scale as far as the data show"
    )
    assert pareto_summary._longer_budget_sentence(_growth(beta=math.nan), (2.0,)).startswith(
        "S* does not grow towards the frontier in these runs (beta = nan)"
    )
    assert pareto_summary._longer_budget_sentence(_growth(beta=-0.5), (2.0, 4.0)) == (
        "S* grows by a factor exp(0.50) per unit of log-distance towards the frontier; "
        "extrapolating, a longer budget moves the frontier by (2x: -1.39, 4x: -2.77) in "
        "(log f, log r) distance, towards rarer and less reliable repetition"
    )


MOVES = (
    "S* grows by a factor exp(0.50) per unit of log-distance towards the frontier; "
    "extrapolating, a longer budget moves the frontier by (2x: -1.39, 4x: -2.77) in "
    "(log f, log r) distance, towards rarer and less reliable repetition"
)


def test_longer_budget_sentence_says_whether_the_shifts_lie_within_the_fitted_distances():
    # beta = -0.5: the 2x shift is -1.386, the 4x one -2.773.
    within = _growth(distance_range=(-3.0, 1.0))
    assert pareto_summary._longer_budget_sentence(within, (2.0, 4.0)) == (
        MOVES + "; every shift lies within the distances of the runs fitted ([-3.00, +1.00])"
    )
    outside = _growth(distance_range=(-2.0, 0.5))
    assert pareto_summary._longer_budget_sentence(outside, (2.0, 4.0)) == (
        MOVES + "; the 4x shift lies outside the distances of the runs fitted "
        "([-2.00, +0.50]): a straight-line extrapolation"
    )
    # Every factor outside is named, in the order given; the range's ends count as inside.
    assert pareto_summary._extrapolation_clause(outside, (4.0, 2.0, 0.25, 8.0)) == (
        "; the 4x, 0.25x, 8x shifts lie outside the distances of the runs fitted "
        "([-2.00, +0.50]): a straight-line extrapolation"
    )
    edge = _growth(distance_range=(math.log(4.0) / -0.5, 0.0))
    assert pareto_summary._extrapolation_clause(edge, (2.0, 4.0)) == (
        "; every shift lies within the distances of the runs fitted ([-2.77, +0.00])"
    )
    # An unknown range (a fit built by hand) adds nothing, one unknown end too.
    assert pareto_summary._longer_budget_sentence(_growth(), (2.0, 4.0)) == MOVES
    for half_known in ((-3.0, math.nan), (math.nan, 1.0), (-math.inf, 1.0)):
        assert (
            pareto_summary._extrapolation_clause(_growth(distance_range=half_known), (2.0,)) == ""
        )


def _no_call(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("nothing may be computed before the check")


def test_estimate_frontier_checks_formed_against_status_before_anything_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("fit_frontier", "fit_sstar_growth", "budget_shift", "pareto_minimal_cells"):
        monkeypatch.setattr(pf, name, _no_call)
    monkeypatch.setattr(pareto_summary.pb, "bootstrap_frontier", _no_call)
    monkeypatch.setattr(pareto_summary, "fit_runs", _no_call)
    monkeypatch.setattr(pareto_summary, "aggregate_cells", _no_call)
    cells = frontier_cells()
    cells.loc[cells["run_name"] == "a_s1", "formed"] = 1.0  # status censored
    cells.loc[cells["run_name"] == "e_s0", "status"] = "emerged"  # formed NaN
    expected = (
        "pareto.cell_table: formed disagrees with status for 2 run(s): "
        "a_s1 (formed=1.0, status=censored), e_s0 (formed=nan, status=emerged)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        pareto_summary.estimate_frontier(cells, {})
    # The same table with consistent columns gets past the check (to the first stub).
    with pytest.raises(AssertionError, match="nothing may be computed"):
        pareto_summary.estimate_frontier(frontier_cells(), {})


def test_estimate_frontier_reads_the_verdicts_from_a_given_robustness_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The pipeline fits the robustness table once (summarise_robustness); the summary reads
    # its verdicts from it and fits nothing again, even when the cell table could.
    monkeypatch.setattr(pareto_summary.robustness, "robustness_table", _no_call)
    table = pd.DataFrame(
        {"measure": ["formed at 0.4", "formation score"], "threshold": [0.4, math.nan],
         "both_knobs_matter": ["supported", "undecided"],
         "reliability_weighs_more": ["supported", "supported"]}
    )  # fmt: skip
    cells = frontier_cells().assign(**{"formed_at_0.4": True})
    params = {"n_bootstrap": 5, "decision_threshold": 0.4}
    _, summary = pareto_summary.estimate_frontier(cells, params, table)
    knobs = summary["verdicts"]["both_knobs_matter"]
    assert knobs["verdict"] == "supported" and knobs["agrees_across_measures"] is False
    assert knobs["by_measure"] == {"formed at 0.4": "supported", "formation score": "undecided"}
    assert summary["verdicts"]["reliability_weighs_more"]["agrees_across_measures"] is True
    # Without a table and without formation columns: no verdicts.
    assert pareto_summary.estimate_frontier(frontier_cells(), params)[1]["verdicts"] is None
