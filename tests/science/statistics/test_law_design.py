"""Known answers for the emergence law's design: table checks, censoring, log-space columns.

The helpers are called directly on tiny hand-built inputs; every expected value is computed
here independently (numpy) or is a literal message.
"""

from __future__ import annotations

import logging
import math
import re

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.statistics import law_design as ld
from tests.science.statistics.law_tables import law_table

LOGGER = "ih_kedro.science.statistics.law_design"


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


# ------------------------------------------------------------------ validate_table


def test_one_law_per_method_and_threshold_and_a_missing_value_is_no_second_law() -> None:
    table = law_table(n_seeds=1)
    two_methods = table.assign(method=["threshold", "changepoint"] * 4 + ["threshold"])
    with pytest.raises(
        ValueError,
        match="^"
        + re.escape(
            "emergence table: one law per method; got ['changepoint', 'threshold'] "
            "(select rows before fitting)"
        )
        + "$",
    ):
        ld.validate_table(two_methods, "step", ())
    two_thresholds = table.assign(threshold=[0.4, 0.5] * 4 + [0.4])
    # plain floats, not numpy 2's np.float64(0.4)
    with pytest.raises(
        ValueError,
        match=r"^emergence table: one law per threshold; got \[0\.4, 0\.5\] "
        r"\(select rows before fitting\)$",
    ):
        ld.validate_table(two_thresholds, "step", ())
    # A NaN metric is not a second metric.
    ld.validate_table(table.assign(metric=["m"] * 8 + [np.nan]), "step", ())


def test_sizes_of_one_are_valid_and_non_numbers_are_named() -> None:
    table = pd.DataFrame({"step": [5.0, 3.0], "batch_size": [1, 2], "context_length": [1, 4]})
    ld.validate_table(table, "step", ())
    with pytest.raises(ValueError, match="^emergence table: batch_size must be positive numbers$"):
        ld.validate_table(table.assign(batch_size=["abc", 2]), "step", ())
    with pytest.raises(
        ValueError,
        match="^"
        + re.escape(
            "extra_covariates: 'family' is not numeric; encode it numerically "
            "(e.g. log n_parameters) before fitting"
        )
        + "$",
    ):
        ld.validate_table(table.assign(family=["x", "y"]), "step", ("family",))


# ------------------------------------------------------------------ censored_mask


def test_censored_mask_reads_nan_as_not_censored_and_checks_steps() -> None:
    table = pd.DataFrame({"censored": [0.0, np.nan, 1.0], "step": [10.0, 0.5, np.nan]})
    np.testing.assert_array_equal(ld.censored_mask(table), [False, False, True])
    named = pd.DataFrame({"run_name": ["r0", "r1"], "step": [3.0, "abc"]})
    with pytest.raises(
        ValueError,
        match="^"
        + re.escape(
            "emergence table: step must be a positive number for uncensored runs; bad rows: ['r1']"
        )
        + "$",
    ):
        ld.censored_mask(named)
    with pytest.raises(ValueError, match=re.escape("bad rows: ['r1']")):
        ld.censored_mask(named.assign(step=[3.0, 0.0]))
    # Without run names the rows are named by position; at most five are listed.
    unnamed = pd.DataFrame({"step": [2.0, -1.0, 4.0]})
    with pytest.raises(ValueError, match=re.escape(f"bad rows: {list(np.arange(3)[[1]])}")):
        ld.censored_mask(unnamed)
    many = pd.DataFrame({"run_name": [f"r{i}" for i in range(7)], "step": [-1.0] * 7})
    with pytest.raises(
        ValueError, match=re.escape("bad rows: ['r0', 'r1', 'r2', 'r3', 'r4']") + "$"
    ):
        ld.censored_mask(many)


# ------------------------------------------------------------------ build_design


def test_design_from_object_columns_equals_the_numeric_design() -> None:
    table = pd.DataFrame(
        {
            "step": [100, 80, np.nan, 50],
            "batch_size": [1, 2, 4, 8],
            "context_length": [16, 32, 16, 32],
            "last_step": [200, 200, 300, 200],
        }
    )
    censored = np.array([False, False, True, False])
    numeric = ld.build_design(table, "step", censored, ())
    objects = ld.build_design(table.astype(object), "step", censored, ())
    y = np.log([100.0, 80.0, 300.0, 50.0])
    np.testing.assert_allclose(objects.y, y, rtol=1e-15)
    np.testing.assert_allclose(numeric.y, y, rtol=1e-15)
    expected_X = np.column_stack(
        [np.ones(4), np.log([1.0, 2, 4, 8]), np.log([16.0, 32, 16, 32])]
    )  # (4, 3)
    np.testing.assert_allclose(objects.X.to_numpy(float), expected_X, rtol=1e-15)
    assert list(objects.X.columns) == ["const", "log_batch_size", "log_context_length"]


def test_design_last_step_checks_and_messages() -> None:
    table = pd.DataFrame({"step": [np.nan, 3.0], "batch_size": [2, 4], "context_length": [8, 8]})
    censored = np.array([True, False])
    with pytest.raises(
        ValueError, match="^emergence table: censored runs need a last_step column$"
    ):
        ld.build_design(table, "step", censored, ())
    with pytest.raises(
        ValueError, match="^emergence table: last_step must be positive for censored runs$"
    ):
        ld.build_design(table.assign(last_step=[0.0, 9.0]), "step", censored, ())
    half = ld.build_design(table.assign(last_step=[0.5, 9.0]), "step", censored, ())
    np.testing.assert_allclose(half.y, np.log([0.5, 3.0]), rtol=1e-15)
    # A single C is held as a constant, not a column.
    assert half.constants == {"log_context_length": pytest.approx(math.log(8), rel=1e-15)}
    assert half.identifiable == {"a": True, "b": False}


def test_design_of_an_empty_and_of_a_single_row_table() -> None:
    empty = pd.DataFrame({"step": [], "batch_size": [], "context_length": []})
    design = ld.build_design(empty, "step", np.zeros(0, dtype=bool), ())
    assert design.identifiable == {"a": False, "b": False} and design.constants == {}
    one = pd.DataFrame({"step": [7.0], "batch_size": [4], "context_length": [16]})
    design = ld.build_design(one, "step", np.zeros(1, dtype=bool), ())
    assert design.identifiable == {"a": False, "b": False}
    assert design.constants == {
        "log_batch_size": pytest.approx(math.log(4), rel=1e-15),
        "log_context_length": pytest.approx(math.log(16), rel=1e-15),
    }


def test_design_skips_a_constant_covariate_and_keeps_the_next_and_the_index(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = pd.DataFrame(
        {
            "step": [9.0, 7.0, 5.0],
            "batch_size": [1, 2, 4],
            "context_length": [8, 16, 8],
            "flat": [3.0, 3.0, 3.0],
            "rope": [True, False, True],
        },
        index=[10, 11, 12],
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        design = ld.build_design(table, "step", np.zeros(3, dtype=bool), ("flat", "rope"))
    assert messages(caplog) == ["extra_covariates: 'flat' is constant; left out of the design"]
    assert list(design.X.columns) == ["const", "log_batch_size", "log_context_length", "rope"]
    np.testing.assert_array_equal(design.X["rope"].to_numpy(), [1.0, 0.0, 1.0])
    assert list(design.X.index) == [10, 11, 12]
