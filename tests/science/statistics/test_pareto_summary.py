"""The pareto frontier summary's helpers: the frontier status rules, JSON safety and the
budget sentence, checked against literal values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ih_kedro.science.statistics import pareto_frontier as pf
from ih_kedro.science.statistics import pareto_summary


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
    got = pareto_summary._json_safe({
        "a": (np.float64(1.5), np.int64(3), np.bool_(True)), "b": [math.inf, {"c": np.nan}],
        "d": "text", "e": None, "f": 2, "g": np.float32(0.25),
    })  # fmt: skip
    assert got == {"a": [1.5, 3, True], "b": [None, {"c": None}], "d": "text", "e": None,
                   "f": 2, "g": 0.25}  # fmt: skip
    assert [type(v) for v in got["a"]] == [float, int, bool] and type(got["g"]) is float


def _growth(status: str = "ok", beta: float = -0.5) -> pf.GrowthFit:
    return pf.GrowthFit(alpha=1.0, beta=beta, alpha_ci=(0.0, 2.0), beta_ci=(-1.0, 0.0), n=4,
                        r_squared=0.5, status=status)  # fmt: skip


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
