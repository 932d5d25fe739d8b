"""Value tests of the near-frontier calibration: levels, outcomes and the stated rule."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ih_kedro.science.statistics import markov_calibration as mc


def test_calibration_levels_are_named_sorted_and_checked():
    levels = mc.calibration_levels(0.5, [1.0, 0.5, 0.71, 0.5])
    assert levels == {
        "calibration_r0.5": {"frequency": 0.5, "reliability": 0.5},
        "calibration_r0.71": {"frequency": 0.5, "reliability": 0.71},
        "calibration_r1": {"frequency": 0.5, "reliability": 1.0},
    }
    with pytest.raises(ValueError, match="1.5 is not in"):
        mc.calibration_levels(0.5, [1.5])
    with pytest.raises(ValueError, match="at least one reliability"):
        mc.calibration_levels(0.5, [])


def _manifest(steps: dict[tuple[str, int], float]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"run_name": f"{level}_s{seed}", "seed": seed, "level": level,
          "online_emergence_step": step} for (level, seed), step in steps.items()]
    )  # fmt: skip


LEVELS = mc.calibration_levels(0.5, [0.5, 0.71, 1.0])


def test_outcomes_read_the_online_step_against_the_budget():
    manifest = _manifest({("calibration_r1", 0): 700.0, ("calibration_r0.5", 0): math.nan,
                          ("calibration_r0.71", 0): 1600.0, ("calibration_r0.71", 1): 1500.0})  # fmt: skip
    out = mc.calibration_outcomes(manifest, LEVELS, budget_steps=1500)
    assert out["reliability"].tolist() == [0.5, 0.71, 0.71, 1.0]
    assert out["seed"].tolist() == [0, 0, 1, 0]
    # 1,600 > the 1,500-step budget: not formed; 1,500 is within it.
    assert out["formed"].tolist() == [False, False, True, True]
    assert out["step"].tolist()[2:] == [1500.0, 700.0] and out["step"].isna().tolist()[:2] == [
        True, True,
    ]  # fmt: skip


def test_frontier_level_is_the_lowest_reliability_formed_in_every_seed():
    outcomes = pd.DataFrame(
        {"reliability": [0.5, 0.5, 0.71, 0.71, 1.0, 1.0], "seed": [0, 1] * 3,
         "formed": [True, False, True, True, True, True],
         "step": [1400.0, math.nan, 900.0, 1000.0, 500.0, 600.0]}
    )  # fmt: skip
    level = mc.frontier_level(outcomes, frequency=0.5, budget_steps=1500, max_fraction=0.5)
    assert level["reliability"] == 0.71 and level["frequency"] == 0.5
    assert level["source"].startswith("calibration sweep: the lowest swept reliability")
    assert "within 0.5 of the main budget (1500 steps)" in level["rule"]
    assert level["per_reliability"][0] == {
        "reliability": 0.5, "n_seeds": 2, "n_formed": 1, "steps": [1400.0, None],
    }  # fmt: skip


def test_frontier_level_falls_back_to_the_highest_and_says_so():
    outcomes = pd.DataFrame(
        {"reliability": [0.5, 1.0], "seed": [0, 0], "formed": [False, False],
         "step": [math.nan, math.nan]}
    )  # fmt: skip
    level = mc.frontier_level(outcomes, frequency=0.5, budget_steps=1500, max_fraction=0.5)
    assert level["reliability"] == 1.0
    assert "no swept reliability formed in every seed within 1500 steps" in level["source"]
    with pytest.raises(ValueError, match="has no runs"):
        mc.frontier_level(outcomes.iloc[:0], frequency=0.5, budget_steps=1, max_fraction=0.5)
