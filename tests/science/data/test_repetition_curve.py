"""Value tests of the repetition curve: hand-worked windows, a periodic sequence and i.i.d.
tokens whose induction-predictable share is known in closed form."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.data.repetition_curve import (
    growth_exponent,
    iid_uniform_share,
    induction_predictable,
    log_spaced_lengths,
    mean_with_t_interval,
    predictable_share,
    repetition_curve,
)


def test_induction_predictable_by_hand():
    # A B C A B D A B: t=4 (B after A; A earlier at 0, followed by B) right; t=5 (D after B; B
    # at 1 followed by C) wrong; t=7 (B after A; most recent A at 3, followed by B) right.
    window = np.array([1, 2, 3, 1, 2, 4, 1, 2])
    assert induction_predictable(window).tolist() == [
        False, False, False, False, True, False, False, True,
    ]  # fmt: skip
    # The most recent occurrence decides: A B A C A C -> at t=3 the rule copies B (after the A
    # at 0) but x[3] is C: wrong; at t=5 it copies C (after the most recent A, at 2): right.
    assert induction_predictable(np.array([1, 2, 1, 3, 1, 3])).tolist() == [
        False, False, False, False, False, True,
    ]  # fmt: skip


def test_a_repeated_token_run_is_predictable_from_its_third_position():
    # x x x x: t=2 copies x[1] after the x at 0 -> right; so is every later one.
    assert induction_predictable(np.array([5, 5, 5, 5])).tolist() == [False, False, True, True]


@pytest.mark.parametrize(("period", "length"), [(3, 10), (5, 40), (7, 8)])
def test_a_periodic_sequence_is_predictable_after_one_period(period, length):
    window = np.arange(length) % period  # distinct tokens within a period
    expected = max(length - 1 - period, 0) / (length - 1)
    assert predictable_share(window[None, :])[0] == pytest.approx(expected)


def test_iid_uniform_tokens_match_the_closed_form():
    rng = np.random.default_rng(0)
    vocab, length, n = 8, 33, 4000
    windows = rng.integers(0, vocab, size=(n, length))
    shares = predictable_share(windows)
    expected = iid_uniform_share(vocab, length)
    # By hand for V=8, C=33: mean over t=1..32 of (1 - (7/8)^(t-1)) / 8.
    assert expected == pytest.approx(np.mean([(1 - (7 / 8) ** (t - 1)) / 8 for t in range(1, 33)]))
    se = shares.std(ddof=1) / math.sqrt(n)
    assert abs(shares.mean() - expected) < 4 * se
    assert iid_uniform_share(8, 2) == 0.0  # one position, no earlier occurrence possible


def test_predictable_share_checks_its_input():
    with pytest.raises(ValueError, match=r"expected \(n, C\) with C >= 2"):
        predictable_share(np.zeros(5))
    with pytest.raises(ValueError, match=r"expected \(n, C\) with C >= 2"):
        predictable_share(np.zeros((3, 1)))


def test_mean_with_t_interval_by_hand():
    mean, low, high = mean_with_t_interval(np.array([0.1, 0.2, 0.3]), 0.95)
    half = 4.302652729911275 * 0.1 / math.sqrt(3)  # t(0.975, 2) * sd / sqrt(n)
    assert (mean, low, high) == pytest.approx((0.2, 0.2 - half, 0.2 + half))
    one = mean_with_t_interval(np.array([0.4]), 0.95)
    assert one[0] == 0.4 and math.isnan(one[1]) and math.isnan(one[2])


def test_repetition_curve_rows():
    calls = []

    def windows_at(c):
        calls.append(c)
        return np.tile(np.arange(c) % 3, (2, 1))  # period 3, two identical windows

    curve = repetition_curve(windows_at, [4, 10], level=0.9)
    assert calls == [4, 10]
    assert curve["context_length"].tolist() == [4, 10]
    assert curve["share"].tolist() == pytest.approx([0.0, 6 / 9])
    # Identical windows: a zero-width interval.
    assert curve["ci_low"].tolist() == pytest.approx([0.0, 6 / 9])
    assert curve["n_windows"].tolist() == [2, 2]


def test_log_spaced_lengths():
    assert log_spaced_lengths(16, 1024, 7) == [16, 32, 64, 128, 256, 512, 1024]
    assert log_spaced_lengths(16, 16, 3) == [16]
    with pytest.raises(ValueError, match="need 2 <= low <= high"):
        log_spaced_lengths(1, 16, 3)


def _curve(lengths, shares):
    return pd.DataFrame({"context_length": lengths, "share": shares})


def test_growth_exponent_recovers_a_power_law():
    # share = 0.05 (C / 16)^0.4 inside [16, 256]; the rows outside break the law and, unsorted,
    # check that the range and the order come from context_length.
    inside = [256, 16, 64, 32, 128]
    curve = _curve([1024, *inside, 8], [0.9, *[0.05 * (c / 16) ** 0.4 for c in inside], 0.0])
    fit = growth_exponent(curve, 16, 256)
    assert fit["exponent"] == pytest.approx(0.4, abs=1e-12)
    assert fit["ci_low"] <= 0.4 + 1e-12 and fit["ci_high"] >= 0.4 - 1e-12
    assert fit["ci_high"] - fit["ci_low"] < 1e-9  # an exact law: no residual spread
    assert fit["n_points"] == 5
    assert (fit["min_context"], fit["max_context"]) == (16, 256)
    # 0.05 * 16^0.4 = 0.05 * 2^1.6 = 0.151572...
    assert fit["share_at_min"] == pytest.approx(0.05)
    assert fit["share_at_max"] == pytest.approx(0.05 * 2**1.6)
    # Log noise +e, -e, +e, -e, +e (e = 0.05) is even about the middle C while log C - mean is
    # odd, so the slope stays 0.4; residuals 0.04 (x3), -0.06 (x2): SSR 0.012, s^2 = 0.012 / 3,
    # Sxx = 10 ln^2 2, se = sqrt(0.004 / 10) / ln 2 = 0.02 / ln 2; t(0.975, 3) = 3.182446.
    lengths = [16, 32, 64, 128, 256]
    noise = np.exp([0.05, -0.05, 0.05, -0.05, 0.05])
    noisy = growth_exponent(
        _curve(lengths, 0.05 * (np.array(lengths) / 16) ** 0.4 * noise), 16, 256
    )
    half = 3.182446305284263 * 0.02 / math.log(2)
    assert noisy["exponent"] == pytest.approx(0.4)
    assert (noisy["ci_low"], noisy["ci_high"]) == pytest.approx((0.4 - half, 0.4 + half))


def test_growth_exponent_t_interval_by_hand():
    # C = 16, 32, 64 and shares 2^-6, 2^-4, 2^-4: in units of ln 2, x - mean(x) = -1, 0, 1 and
    # y = -6, -4, -4, so the slope is (-4 + 6) / 2 = 1 and the residuals -1/3, 2/3, -1/3:
    # s^2 = (6/9) ln^2 2 / (3 - 2) over Sxx = 2 ln^2 2 gives se^2 = 1/3.
    fit = growth_exponent(_curve([16, 32, 64], [2**-6, 2**-4, 2**-4]), 16, 64, level=0.95)
    half = 12.706204736174703 / math.sqrt(3)  # t(0.975, 1) * se
    assert fit["exponent"] == pytest.approx(1.0)
    assert (fit["ci_low"], fit["ci_high"]) == pytest.approx((1 - half, 1 + half))
    assert fit["n_points"] == 3
    # KJV's two ends (docs: 0.016 at C = 16, 0.164 at C = 1024): two points, slope
    # ln(10.25) / ln(64) = 2.32728 / 4.15888 = 0.55959, no interval.
    two = growth_exponent(_curve([16, 1024], [0.016, 0.164]), 1, 4096)
    assert two["exponent"] == pytest.approx(math.log(0.164 / 0.016) / math.log(64))
    assert two["exponent"] == pytest.approx(0.55959, abs=1e-5)
    assert math.isnan(two["ci_low"]) and math.isnan(two["ci_high"])
    assert (two["min_context"], two["max_context"], two["n_points"]) == (16, 1024, 2)


def test_growth_exponent_refuses_what_has_no_slope():
    curve = _curve([16, 32, 64], [0.02, 0.0, 0.05])
    zero = (
        r"curve rows with 16 <= context_length <= 64: share must be positive to take its log, "
        r"got 0\.0 at context_length 32"
    )
    with pytest.raises(ValueError, match=zero):
        growth_exponent(curve, 16, 64)
    with pytest.raises(ValueError, match=r"got nan at context_length 32"):
        growth_exponent(_curve([16, 32], [0.02, math.nan]), 16, 64)
    # One point in range (the zero share at 32 lies outside it).
    with pytest.raises(ValueError, match=r"<= context_length <= 20: need at least 2 distinct"):
        growth_exponent(curve, 10, 20)
    with pytest.raises(ValueError, match="need at least 2 distinct context lengths.*got 2 rows"):
        growth_exponent(_curve([32, 32], [0.1, 0.2]), 16, 64)
