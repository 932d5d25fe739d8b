"""Paired seeds, value checks: every interval is worked by hand from the t quantiles below
(mean +/- t * sd / sqrt(n), sd with n - 1), and the paired rule's verdict and reason are
written out in full for each branch."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.statistics import paired_seeds as ps
from ih_kedro.science.statistics.paired_seeds import (
    CONTRADICTED,
    SUPPORTED,
    UNDECIDED,
    PairedDifference,
    equivalence,
    judge_pair,
    mean_interval,
    paired_difference,
)

T975_DF1 = 12.706205  # t_{0.975, 1}
T975_DF2 = 4.302653  # t_{0.975, 2}
T950_DF2 = 2.919986  # t_{0.95, 2}
ROOT3 = math.sqrt(3.0)


# --------------------------------------------------------------------------------------------
# paired_difference and mean_interval
# --------------------------------------------------------------------------------------------
def test_paired_t_interval_of_one_two_three():
    # d = [1, 2, 3]: mean 2, sd 1, half-width t_{0.975,2} / sqrt(3) = 2.484138.
    treatment = pd.Series([3.0, 5.0, 7.0], index=[0, 1, 2])
    control = pd.Series([2.0, 3.0, 4.0], index=[0, 1, 2])
    d = paired_difference(treatment, control)
    assert d.seeds == (0, 1, 2)
    assert d.treatment == (3.0, 5.0, 7.0) and d.control == (2.0, 3.0, 4.0)
    assert d.differences == (1.0, 2.0, 3.0)
    assert d.mean == 2.0 and d.n == 3 and d.level == 0.95 and d.dropped_seeds == ()
    assert d.ci_low == pytest.approx(2.0 - T975_DF2 / ROOT3, abs=1e-6)  # -0.484138
    assert d.ci_high == pytest.approx(2.0 + T975_DF2 / ROOT3, abs=1e-6)  # 4.484138
    assert d.ci_low == pytest.approx(-0.484138, abs=1e-6)
    assert (d.all_positive, d.all_negative, d.excludes_zero) == (True, False, False)


def test_paired_interval_at_another_level_and_the_sign_flipped():
    # Same differences, level 0.90: 2 +/- t_{0.95,2} / sqrt(3) = 2 +/- 1.685854.
    d = paired_difference(pd.Series([1.0, 2.0, 3.0]), pd.Series([0.0, 0.0, 0.0]), level=0.90)
    assert (d.ci_low, d.ci_high) == pytest.approx((0.314146, 3.685854), abs=1e-6)
    assert d.level == 0.90 and d.excludes_zero
    flipped = paired_difference(pd.Series([0.0, 0.0, 0.0]), pd.Series([1.0, 2.0, 3.0]), level=0.9)
    assert flipped.differences == (-1.0, -2.0, -3.0)
    assert (flipped.ci_low, flipped.ci_high) == pytest.approx((-3.685854, -0.314146), abs=1e-6)
    assert (flipped.all_positive, flipped.all_negative, flipped.excludes_zero) == (
        False,
        True,
        True,
    )


def test_pairs_on_common_finite_seeds_and_names_the_dropped_ones():
    # Seed 1: NaN treatment; seed 3: no control; seed 4: no treatment. Pairs: seeds 0 and 2,
    # d = [1, 2]: mean 1.5, sd 0.707107, half = t_{0.975,1} * 0.707107 / sqrt(2) = 6.353102.
    treatment = pd.Series({2: 3.0, 0: 1.0, 1: math.nan, 3: 5.0})
    control = pd.Series({0: 0.0, 1: 0.0, 2: 1.0, 4: 1.0})
    d = paired_difference(treatment, control)
    assert d.seeds == (0, 2) and d.differences == (1.0, 2.0) and d.n == 2
    assert d.dropped_seeds == (1, 3, 4)
    assert d.mean == 1.5
    assert (d.ci_low, d.ci_high) == pytest.approx(
        (1.5 - T975_DF1 / 2, 1.5 + T975_DF1 / 2), abs=1e-5
    )


def test_one_seed_has_no_interval_and_identical_differences_collapse_it():
    one = paired_difference(pd.Series({7: 0.9}), pd.Series({7: 0.4}))
    assert one.mean == pytest.approx(0.5) and one.n == 1
    assert math.isnan(one.ci_low) and math.isnan(one.ci_high)
    assert one.all_positive and not one.excludes_zero
    same = paired_difference(pd.Series([0.75, 0.5, 1.0]), pd.Series([0.5, 0.25, 0.75]))
    assert same.differences == (0.25, 0.25, 0.25)
    assert (same.mean, same.ci_low, same.ci_high) == (0.25, 0.25, 0.25)
    # 0.7 three times: the float mean is not 0.7 and the float sd not 0, the CI still collapses.
    inexact = paired_difference(pd.Series([1.4] * 3), pd.Series([0.7] * 3))
    assert inexact.ci_low == inexact.mean == inexact.ci_high == pytest.approx(0.7)
    none = paired_difference(pd.Series({0: math.nan}), pd.Series({1: 1.0}))
    assert none.n == 0 and none.seeds == () and none.dropped_seeds == (0, 1)
    assert math.isnan(none.mean) and not none.all_positive and not none.all_negative


def test_paired_difference_rejects_repeated_seeds_and_bad_levels():
    with pytest.raises(ValueError, match=r"control has seeds \[1\] more than once"):
        paired_difference(pd.Series([1.0, 2.0], index=[0, 1]), pd.Series([1.0, 2.0], index=[1, 1]))
    with pytest.raises(ValueError, match=r"level: a confidence level in \(0, 1\)"):
        paired_difference(pd.Series([1.0]), pd.Series([1.0]), level=1.0)


def test_mean_interval_skips_nan():
    # [0.2, 0.4, 0.6]: mean 0.4, sd 0.2, half = t_{0.975,2} * 0.2 / sqrt(3) = 0.496828.
    mean, low, high = mean_interval([0.2, math.nan, 0.4, 0.6])
    assert mean == pytest.approx(0.4)
    assert (low, high) == pytest.approx((0.4 - 0.496828, 0.4 + 0.496828), abs=1e-6)
    assert mean_interval([0.3])[0] == 0.3 and math.isnan(mean_interval([0.3])[1])
    assert all(math.isnan(v) for v in mean_interval([math.nan]))
    assert mean_interval([0.5, 0.5]) == (0.5, 0.5, 0.5)


def test_to_dict_is_json_safe():
    d = PairedDifference(
        seeds=(np.int64(0),),
        treatment=(1.0,),
        control=(0.5,),
        differences=(0.5,),
        mean=0.5,
        ci_low=math.nan,
        ci_high=math.nan,
        level=0.95,
        n=1,
        dropped_seeds=(np.int64(3),),
    )
    out = d.to_dict()
    assert out == {
        "seeds": [0],
        "treatment": [1.0],
        "control": [0.5],
        "differences": [0.5],
        "dropped_seeds": [3],
        "mean": 0.5,
        "ci_low": None,
        "ci_high": None,
        "level": 0.95,
        "n": 1,
        "all_positive": True,
        "all_negative": False,
        "excludes_zero": False,
    }
    assert type(out["seeds"][0]) is int
    json.dumps(out, allow_nan=False)


def test_equivalence_needs_the_interval_inside_the_margin():
    # d = [0.01, 0.02, 0.03]: 0.02 +/- t_{0.975,2} * 0.01 / sqrt(3) = [-0.004841, 0.044841].
    d = paired_difference(pd.Series([0.01, 0.02, 0.03]), pd.Series([0.0, 0.0, 0.0]))
    assert (d.ci_low, d.ci_high) == pytest.approx((-0.004841, 0.044841), abs=1e-6)
    assert equivalence(d, 0.05) and equivalence(d, 0.045)
    assert not equivalence(d, 0.044)
    negative = paired_difference(pd.Series([0.0, 0.0, 0.0]), pd.Series([0.01, 0.02, 0.03]))
    assert equivalence(negative, 0.045) and not equivalence(negative, 0.044)
    one = paired_difference(pd.Series([0.0]), pd.Series([0.0]))
    assert not equivalence(one, 1.0)
    for margin in (0.0, -0.1, math.inf, math.nan):
        with pytest.raises(ValueError, match="margin must be positive and finite"):
            equivalence(d, margin)


# --------------------------------------------------------------------------------------------
# judge_pair: the paired rule
# --------------------------------------------------------------------------------------------
def _frame(scores, formed, seeds=None):
    index = list(range(len(scores))) if seeds is None else seeds
    return pd.DataFrame({"score": scores, "formed": pd.array(formed, dtype="boolean")}, index=index)


def test_supported_pair_in_full():
    # d = [0.3, 0.4, 0.5]: 0.4 +/- t_{0.975,2} * 0.1 / sqrt(3) = [0.151586, 0.648414].
    t = _frame([0.7, 0.8, 0.9], [True, True, True])
    k = _frame([0.4, 0.4, 0.4], [False, False, False])
    out = judge_pair(t, k, threshold=0.4)
    assert out["verdict"] == SUPPORTED
    assert out["reason"] == (
        "in every seed T formed and K did not at 0.4; every difference > 0, paired CI "
        "[0.152, 0.648] above 0"
    )
    assert out["seeds"][0] == {"seed": 0, "treatment_score": 0.7, "control_score": 0.4,
                               "difference": pytest.approx(0.3), "treatment_formed": True,
                               "control_formed": False}  # fmt: skip
    assert [r["seed"] for r in out["seeds"]] == [0, 1, 2]
    assert out["mean"] == pytest.approx(0.4) and out["n"] == 3 and out["level"] == 0.95
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((0.151586, 0.648414), abs=1e-6)
    assert out["dropped_seeds"] == []
    json.dumps(out, allow_nan=False)


def test_contradicted_pairs():
    # K formed in every seed, d = [0.1, -0.1, 0.0]: CI 0 +/- t * 0.1 / sqrt(3) includes 0.
    t = _frame([0.6, 0.4, 0.5], [True, True, True])
    k = _frame([0.5, 0.5, 0.5], [True, True, True])
    assert judge_pair(t, k, threshold=0.3)["verdict"] == CONTRADICTED
    assert judge_pair(t, k, threshold=0.3)["reason"] == (
        "K formed in every seed at 0.3 and the paired CI [-0.248, 0.248] does not lie above 0"
    )
    # K robustly ahead though neither formed: d = [-0.3, -0.4, -0.5], CI [-0.648, -0.152].
    t = _frame([0.1, 0.1, 0.1], [False, False, False])
    k = _frame([0.4, 0.5, 0.6], [False, False, False])
    out = judge_pair(t, k)
    assert (out["verdict"], out["reason"]) == (
        CONTRADICTED,
        "every difference < 0 and the paired CI [-0.648, -0.152] lies below 0",
    )


def test_undecided_pairs_name_what_failed():
    formed, not_formed = [True] * 3, [False] * 3
    # Seeds disagree (the scores would support T).
    out = judge_pair(
        _frame([0.7, 0.8, 0.9], formed),
        _frame([0.4, 0.4, 0.4], [False, True, False]),
        threshold=0.4,
    )
    assert (out["verdict"], out["reason"]) == (
        UNDECIDED,
        "seeds disagree: s0 T formed/K not, s1 both formed, s2 T formed/K not",
    )
    # Every seed agrees, but d = [0.5, 0.01, 0.02]: mean 0.176667, sd 0.280060, CI
    # 0.176667 +/- t_{0.975,2} * 0.280060 / sqrt(3) = [-0.519040, 0.872373].
    out = judge_pair(_frame([0.9, 0.5, 0.5], formed), _frame([0.4, 0.49, 0.48], not_formed))
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((-0.519040, 0.872373), abs=1e-5)
    assert (out["verdict"], out["reason"]) == (UNDECIDED, "paired CI [-0.519, 0.872] includes 0")
    # One seed.
    out = judge_pair(_frame([0.9], [True]), _frame([0.1], [False]))
    assert (out["verdict"], out["reason"]) == (UNDECIDED, "one seed: no CI")
    # Unobserved at the threshold.
    out = judge_pair(
        _frame([0.7, 0.8, 0.9], [True, None, True]), _frame([0.4, 0.4, 0.4], [False, False, None]),
        threshold=0.5,
    )  # fmt: skip
    assert (out["verdict"], out["reason"]) == (UNDECIDED, "<NA>: unobserved at 0.5 (T s1, K s2)")
    assert [(r["treatment_formed"], r["control_formed"]) for r in out["seeds"]] == [
        (True, False), (None, False), (True, None)
    ]  # fmt: skip


def test_undecided_pairs_with_agreeing_patterns_missing_seeds_and_negative_differences():
    # Both formed in every seed with T ahead: not supported, not contradicted.
    out = judge_pair(_frame([0.7, 0.8, 0.9], [True] * 3), _frame([0.4, 0.4, 0.4], [True] * 3))
    assert (out["verdict"], out["reason"]) == (UNDECIDED, "every seed: both formed")
    # Seed 2 has no control run, seed 1 no treatment score: both left out of the pairing, the
    # missing run is unobserved; d = [0.3, -0.1] over seeds 0 and 3.
    t = _frame([0.7, math.nan, 0.8, 0.3], [True, True, True, True], seeds=[0, 1, 2, 3])
    k = _frame([0.4, 0.4, 0.4], [False, False, False], seeds=[0, 1, 3])
    out = judge_pair(t, k, threshold=0.4)
    assert out["verdict"] == UNDECIDED
    # d = [0.3, -0.1]: mean 0.1, sd 0.282843, half = t_{0.975,1} * 0.282843 / sqrt(2) = 2.541241.
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((-2.441241, 2.641241), abs=1e-5)
    assert out["reason"] == (
        "<NA>: unobserved at 0.4 (K s2); no score for s1, s2; paired CI [-2.44, 2.64] includes "
        "0; not every difference > 0 (s3: -0.1)"
    )
    assert out["dropped_seeds"] == [1, 2] and out["n"] == 2
    assert out["seeds"][2] == {"seed": 2, "treatment_score": 0.8, "control_score": None,
                               "difference": None, "treatment_formed": True,
                               "control_formed": None}  # fmt: skip
    # No seed at all in common.
    out = judge_pair(_frame([0.5], [True], seeds=[0]), _frame([0.5], [False], seeds=[1]))
    assert out["reason"] == (
        "<NA>: unobserved (K s0, T s1); no score for s0, s1; no seed with both scores: no CI"
    )


def test_seed_names_and_order_for_odd_seeds():
    assert ps._seed_value(np.int64(3)) == 3 and type(ps._seed_value(np.int64(3))) is int
    assert ps._seed_value(2.0) == 2 and ps._seed_value(2.5) == 2.5
    assert ps._seed_value("a") == "a" and ps._seed_name(4.0) == "s4"
    assert ps._seed_order(["b", 1, "a"]) == [1, "a", "b"]


def _rows(*seeds: tuple[bool | None, bool | None, float | None]) -> dict:
    return {"seeds": [{"seed": i, "treatment_formed": t, "control_formed": k, "difference": d}
                      for i, (t, k, d) in enumerate(seeds)]}  # fmt: skip


@pytest.mark.parametrize(
    ("seeds", "expected"),
    [
        # every seed T formed / K not, T ahead: supported is still open (a wider CI only)
        (((True, False, 0.3), (True, False, 0.1)), True),
        # K formed in every seed: contradicted is still open
        (((True, True, 0.3), (False, True, 0.2)), True),
        # every difference < 0: contradicted by the sign is still open
        (((True, False, -0.1), (False, False, -0.2)), True),
        # the measured case: both formed in one seed with T ahead, K not formed in another
        (((True, False, 0.3), (True, True, 0.1)), False),
        # T formed / K not everywhere, but one difference <= 0: neither outcome is reachable
        (((True, False, 0.3), (True, False, -0.01)), False),
        # neither formed, T ahead
        (((False, False, 0.1), (False, False, 0.2)), False),
        # an unknown difference breaks both difference conditions; K not formed breaks the rest
        (((True, False, None), (True, False, 0.2)), False),
        # an unknown flag is not "K formed"
        (((True, True, -0.1), (True, None, 0.2)), False),
    ],
)
def test_can_still_decide_follows_the_paired_rule(seeds, expected):
    assert ps.can_still_decide(_rows(*seeds)) is expected
    assert ps.can_still_decide({"seeds": []}) is True
