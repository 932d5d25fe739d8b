"""Each mechanism arm against the reference arm: planted differences of the exponents.

Arms are drawn by ``arm_table`` (``S* = T / (B^a C^b)``, 3 x 3 grid, 2 seeds, log-normal noise
sd 0.05): the pooled fit's differences equal the difference of the arms' own fits, cover the
planted difference, and the verdicts follow the CI rule.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.statistics.law_mechanisms import (
    CONTRAST_COLUMNS,
    contrast_verdict,
    mechanism_contrasts,
    mechanism_fit_table,
)
from tests.science.statistics.test_law_mechanisms import arm_table


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    return {
        "today": arm_table(0.85, 0.0, 1),
        "toward": arm_table(0.85, 0.4, 2),  # b closes 80 % of the gap to 0.5
        "away": arm_table(0.85, -0.4, 3),
        "same": arm_table(0.85, 0.0, 4),  # another draw of today's law
        "a_only": arm_table(0.5, 0.0, 5),  # a moves to the published 0.5, b does not
    }


def test_differences_equal_the_arms_own_fits_and_cover_the_planted_ones(tables) -> None:
    contrasts = mechanism_contrasts(tables).set_index("arm")
    assert list(contrasts.columns) == CONTRAST_COLUMNS[1:]
    assert list(contrasts.index) == ["toward", "away", "same", "a_only"]
    own = mechanism_fit_table(tables).set_index("arm")
    planted = {"toward": (0.0, 0.4), "away": (0.0, -0.4), "same": (0.0, 0.0), "a_only": (-0.35, 0)}
    for arm, (da, db) in planted.items():
        row = contrasts.loc[arm]
        # The pooled fit shares no coefficient, so its differences are the own fits' differences.
        assert row["delta_b"] == pytest.approx(own.loc[arm, "b"] - own.loc["today", "b"])
        assert row["delta_a"] == pytest.approx(own.loc[arm, "a"] - own.loc["today", "a"])
        assert row["delta_b_ci_low"] <= db <= row["delta_b_ci_high"], arm
        assert row["delta_a_ci_low"] <= da <= row["delta_a_ci_high"], arm
        # 2 arms x 9 configurations, 6 coefficients: t on 12 df.
        assert row["n_clusters"] == 18 and row["df_resid"] == 12.0
        assert row["n_runs"] == 36  # 18 emerged runs per arm (the censored run is left out)
    gap = 0.5 - own.loc["today", "b"]
    assert contrasts.loc["toward", "share_of_b_gap"] == pytest.approx(
        contrasts.loc["toward", "delta_b"] / gap
    )
    assert contrasts.loc["toward", "share_of_b_gap"] == pytest.approx(0.8, abs=0.1)


def test_verdicts_follow_the_ci_rule(tables) -> None:
    contrasts = mechanism_contrasts(tables, margin=0.2).set_index("arm")
    assert contrasts.loc["toward", "verdict_b"] == "moves toward"
    assert contrasts.loc["away", "verdict_b"] == "moves away"
    assert contrasts.loc["same", "verdict_b"] == "no effect"
    assert contrasts.loc["a_only", "verdict_a"] == "moves toward"  # 0.85 -> 0.5
    assert contrasts.loc["a_only", "verdict_b"] == "no effect"
    # A margin too small for the CI leaves "same" undecided rather than "no effect".
    tight = mechanism_contrasts(tables, margin=0.001).set_index("arm")
    assert tight.loc["same", "verdict_b"] == "undecided"


@pytest.mark.parametrize(
    ("delta", "ci", "toward", "verdict"),
    [
        (0.3, (0.1, 0.5), 0.5, "moves toward"),
        (0.3, (0.1, 0.5), -0.5, "moves away"),
        (-0.3, (-0.5, -0.1), -0.2, "moves toward"),
        (0.05, (-0.1, 0.2), 0.5, "no effect"),
        (0.05, (-0.1, 0.21), 0.5, "undecided"),
        (0.0, (-0.2, 0.2), 0.5, "no effect"),  # the margin's edges count as inside
        (0.0, (math.nan, math.nan), 0.5, "undecided"),
    ],
)
def test_contrast_verdict(delta, ci, toward, verdict) -> None:
    assert contrast_verdict(delta, ci, toward, margin=0.2) == verdict


def test_an_arm_with_one_context_level_is_undecided_with_a_note(tables) -> None:
    flat = arm_table(0.85, 0.0, 6, contexts=(64,))
    row = mechanism_contrasts({"today": tables["today"], "flat": flat}).iloc[0]
    assert row["verdict_b"] == "undecided" and row["verdict_a"] == "undecided"
    assert row["note"].startswith("not fitted") and np.isnan(row["delta_b"])


def test_bad_reference_and_margin_raise(tables) -> None:
    with pytest.raises(ValueError, match="reference arm 'base'"):
        mechanism_contrasts(tables, reference="base")
    with pytest.raises(ValueError, match="margin"):
        mechanism_contrasts(tables, margin=-0.1)
