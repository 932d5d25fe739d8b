"""Value tests of the repetition curve: hand-worked windows, a periodic sequence and i.i.d.
tokens whose induction-predictable share is known in closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ih_kedro.science.data.repetition_curve import (
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
