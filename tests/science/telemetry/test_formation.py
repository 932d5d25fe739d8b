"""Value tests of the formation measures: hand-computed areas, crossings and verdicts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.telemetry.formation import (
    formation_score,
    formation_table,
    formed_column,
    step_column,
    threshold_outcomes,
)


def test_column_names():
    assert formed_column(0.4) == "formed_at_0.4"
    assert formed_column(1) == "formed_at_1"
    assert step_column(0.30) == "step_at_0.3"


def test_formation_score_is_the_trapezoid_mean_over_the_budget():
    # Checkpoints 0, 10, 20 with values 0, 1, 1, budget 20: area 5 + 10 = 15 over 20 steps.
    assert formation_score(np.array([0, 10, 20]), np.array([0.0, 1.0, 1.0]), 20) == 0.75
    # Unsorted input is sorted first.
    assert formation_score(np.array([20, 0, 10]), np.array([1.0, 0.0, 1.0]), 20) == 0.75


def test_formation_score_carries_the_last_value_to_the_budget():
    # Stopped at step 10 with value 0.8 of a 40-step budget: 0.5 * 10 * 0.8 + 30 * 0.8 = 28.
    score = formation_score(np.array([0, 10]), np.array([0.0, 0.8]), 40)
    assert score == pytest.approx(28 / 40)


def test_formation_score_ignores_checkpoints_after_the_budget_and_nan_points():
    steps = np.array([0.0, 10.0, 15.0, 20.0, 30.0])
    curve = np.array([0.2, 0.4, np.nan, 0.4, 5.0])
    # Budget 20: [0, 10] area 3, [10, 20] area 4 -> 7 / 20.
    assert formation_score(steps, curve, 20) == pytest.approx(0.35)


def test_formation_score_first_checkpoint_after_zero():
    # The budget span starts at the first checkpoint (step 5): [5, 10] values 0 -> 1, area 2.5;
    # [10, 25] value 1 carried, area 15; 17.5 over 20 steps.
    assert formation_score(np.array([5, 10]), np.array([0.0, 1.0]), 25) == pytest.approx(0.875)


def test_formation_score_orders_early_and_late_formation():
    steps = np.arange(0, 101, 10)
    early = np.where(steps >= 20, 0.8, 0.1)
    late = np.where(steps >= 80, 0.8, 0.1)
    never = np.full(steps.shape, 0.1)
    scores = [formation_score(steps, c, 100) for c in (early, late, never)]
    assert scores[0] > scores[1] > scores[2] == pytest.approx(0.1)


def test_formation_score_errors_and_empty():
    with pytest.raises(ValueError, match="not after the first checkpoint"):
        formation_score(np.array([10, 20]), np.array([0.1, 0.2]), 10)
    with pytest.raises(ValueError, match="equal length"):
        formation_score(np.array([0, 1]), np.array([0.1]), 10)
    assert math.isnan(formation_score(np.array([np.nan]), np.array([0.3]), 10))


def test_threshold_outcomes_formed_not_formed_and_unobserved():
    steps = np.array([0, 100, 200])
    curve = np.array([0.1, 0.35, 0.45])
    # Reached the budget (200): 0.3 crossed at 0 + (0.3-0.1)/(0.25)*100 = 80, 0.4 at
    # 100 + (0.05/0.1)*100 = 150, 0.5 never -> not formed.
    out = threshold_outcomes(steps, curve, 200, [0.3, 0.4, 0.5])
    assert out[step_column(0.3)] == pytest.approx(80.0)
    assert out[step_column(0.4)] == pytest.approx(150.0)
    assert math.isnan(out[step_column(0.5)])
    assert out[formed_column(0.3)] is True
    assert out[formed_column(0.4)] is True
    assert out[formed_column(0.5)] is False
    # The same curve stopped at step 200 of a 1,000-step budget: 0.5 is unobserved.
    early = threshold_outcomes(steps, curve, 1000, [0.5])
    assert early[formed_column(0.5)] is None


def test_threshold_outcomes_left_censored_counts_as_formed():
    out = threshold_outcomes(np.array([0, 10]), np.array([0.6, 0.7]), 10, [0.5])
    assert out[formed_column(0.5)] is True
    assert out[step_column(0.5)] == 0.0


def _samples(curve: list[float]) -> np.ndarray:
    # (K, n=2, layers=2, heads=1): layer 1 carries the curve, layer 0 a constant 0.9 that
    # min_layer=1 must exclude.
    k = len(curve)
    samples = np.zeros((k, 2, 2, 1))
    samples[:, :, 0, 0] = 0.9
    samples[:, 0, 1, 0] = np.array(curve) - 0.1
    samples[:, 1, 1, 0] = np.array(curve) + 0.1
    return samples


def test_formation_table_rows():
    score_samples = {
        "b": {"steps": np.array([0, 50, 100]), "ps": _samples([0.1, 0.5, 0.6])},
        "a": {"steps": np.array([0, 50]), "ps": _samples([0.1, 0.45])},
    }
    table = formation_table(score_samples, {"a": 100, "b": 100}, metric="ps", min_layer=1)
    assert table["run_name"].tolist() == ["a", "b"]
    a, b = table.iloc[0], table.iloc[1]
    # a: [0, 50] area (0.1 + 0.45) / 2 * 50 = 13.75, [50, 100] 0.45 * 50 = 22.5 -> 0.3625.
    assert a["formation_score"] == pytest.approx(0.3625)
    assert a["peak"] == pytest.approx(0.45)
    assert a["last_step"] == 50
    assert bool(a[formed_column(0.4)]) is True
    assert pd.isna(a[formed_column(0.5)])  # stopped at 50 of 100 below 0.5: unobserved
    # b: (0.1 + 0.5) / 2 * 50 + (0.5 + 0.6) / 2 * 50 = 15 + 27.5 = 42.5 -> 0.425.
    assert b["formation_score"] == pytest.approx(0.425)
    assert bool(b[formed_column(0.5)]) is True
    assert b[step_column(0.5)] == pytest.approx(50.0)
    assert str(table[formed_column(0.3)].dtype) == "boolean"
    # Without the layer restriction layer 0 (0.9 everywhere) is the best head.
    unrestricted = formation_table(score_samples, {"a": 100, "b": 100}, metric="ps", min_layer=0)
    assert unrestricted["formation_score"].tolist() == pytest.approx([0.9, 0.9])


def test_formation_table_errors():
    samples = {"a": {"steps": np.array([0, 1]), "ps": _samples([0.1, 0.2])}}
    with pytest.raises(ValueError, match="no 'other' samples"):
        formation_table(samples, {"a": 10}, metric="other")
    with pytest.raises(ValueError, match="no step budget for run 'a'"):
        formation_table(samples, {}, metric="ps")
