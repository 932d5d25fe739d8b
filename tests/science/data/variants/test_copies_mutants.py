"""Value tests for the copy data variants, written against mutation-testing survivors.

The variants are driven by a scripted generator (each draw returns a value given here), so the
edited windows and masks below are worked out by hand from the documented algorithm. The
``fixed_rate_copies`` batches are also checked against a row-by-row reference of that algorithm.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.variants import copies
from ih_kedro.science.data.variants.copies import count_copy_events, expected_copy_events
from ih_kedro.science.data.variants.registry import VARIANT_CHECKS


class ScriptedRng:
    """A generator stand-in that returns scripted draws and checks each call's arguments."""

    def __init__(self, *draws):
        self.draws = list(draws)

    def random(self, size):
        kind, want_size, value = self.draws.pop(0)
        assert (kind, size) == ("random", want_size)
        return np.asarray(value, dtype=float)

    def integers(self, low, high, size):
        kind, want, value = self.draws.pop(0)
        assert (kind, (low, high, size)) == ("integers", want)
        return np.asarray(value, dtype=np.int64)


# --- copy_spans, by hand -------------------------------------------------------------------


def test_copy_spans_by_hand_with_scripted_draws():
    # C = 8, W = 9; default fractions give spans of round(1) = 1 .. round(3) = 3 tokens.
    windows = np.stack([np.arange(9), np.arange(100, 109)]).astype(np.int64)
    rng = ScriptedRng(
        ("random", 2, [0.5, 0.5]),  # selected: both below copy_rate 0.6
        ("integers", (1, 4, 2), [2, 3]),  # lengths in [1, 3]
        ("random", 2, [0.5, 0.0]),  # u_source
        ("random", 2, [0.99, 0.0]),  # u_dest
    )
    copied = copies.copy_spans(windows, rng, {"copy_rate": 0.6}, 0)
    assert rng.draws == []
    # Row 0: L = 2, source = floor(0.5 * (9 - 4 + 1)) = 3, first dest = 5,
    # dest = 5 + floor(0.99 * (9 - 2 - 5 + 1)) = 5 + 2 = 7: tokens 3, 4 land on 7, 8.
    assert windows[0].tolist() == [0, 1, 2, 3, 4, 5, 6, 3, 4]
    # Row 1 is selected too (0.5 < 0.6): L = 3, source 0, dest = 3 + floor(0) = 3.
    assert windows[1].tolist() == [100, 101, 102, 100, 101, 102, 106, 107, 108]
    assert copied.dtype == np.bool_
    assert copied.tolist() == [
        [False] * 7 + [True, True],
        [False] * 3 + [True] * 3 + [False] * 3,
    ]


def test_copy_spans_unselected_rows_are_untouched_but_draw():
    windows = np.stack([np.arange(9), np.arange(100, 109)]).astype(np.int64)
    rng = ScriptedRng(
        ("random", 2, [0.25, 0.75]),  # copy_rate 0.5: row 0 selected, row 1 not
        ("integers", (2, 4, 2), [3, 3]),  # fractions 0.25 / 0.375 of 8: spans 2 .. 3
        ("random", 2, [0.0, 0.0]),
        ("random", 2, [0.0, 0.0]),
    )
    opts = {"copy_rate": 0.5, "span_min_fraction": 0.25, "span_max_fraction": 0.375}
    copied = copies.copy_spans(windows, rng, opts, 0)
    assert windows[0].tolist() == [0, 1, 2, 0, 1, 2, 6, 7, 8]
    assert windows[1].tolist() == list(range(100, 109))
    assert copied.sum(axis=1).tolist() == [3, 0]


def test_copy_spans_rate_zero_never_copies_even_on_a_zero_draw():
    windows = np.arange(9, dtype=np.int64)[None, :].copy()
    rng = ScriptedRng(
        ("random", 1, [0.0]),  # u = 0 is not below copy_rate 0
        ("integers", (1, 4, 1), [3]),
        ("random", 1, [0.0]),
        ("random", 1, [0.0]),
    )
    copied = copies.copy_spans(windows, rng, {"copy_rate": 0.0}, 0)
    assert windows[0].tolist() == list(range(9))
    assert not copied.any()


def test_copy_spans_default_rate_selects_every_row_and_defaults_set_spans():
    tokens = np.arange(1_000, dtype=np.uint32)
    batch = sample_batch(tokens, 200, 32, 4, 2, data_variant="copy_spans")
    lengths = batch.copied.sum(axis=1)
    # Default fractions 0.125 / 0.375 of 32: every row copies 4 .. 12 tokens, both ends reached.
    assert lengths.min() == 4 and lengths.max() == 12
    assert batch.copied.dtype == np.bool_


def test_copy_spans_span_of_exactly_half_the_window_is_allowed():
    # C = 7, W = 8, span_max 0.5 -> round(3.5) = 4 and 2 * 4 == W: source 0, dest 4.
    tokens = np.arange(500, dtype=np.uint32)
    opts = {"span_min_fraction": 0.5, "span_max_fraction": 0.5}
    batch = sample_batch(tokens, 16, 7, 0, 0, data_variant="copy_spans", variant_options=opts)
    rows = batch.tokens.numpy()
    start = rows[:, :1]
    expected = np.concatenate([start + np.arange(4), start + np.arange(4)], axis=1)
    np.testing.assert_array_equal(rows, expected)
    assert batch.copied.tolist() == [[False] * 4 + [True] * 4] * 16


def test_copy_spans_overlong_span_message():
    windows = np.zeros((1, 11), dtype=np.int64)
    with pytest.raises(ValueError) as info:
        copies.copy_spans(windows, np.random.default_rng(0), {"span_max_fraction": 0.6}, 0)
    assert str(info.value) == (
        "training.span_max_fraction: a span of up to 6 tokens cannot be copied twice "
        "into a sequence of 11 tokens (context_length 10)"
    )


# --- fixed_rate_copies, by hand ------------------------------------------------------------


def test_fixed_rate_copies_by_hand_with_scripted_draws():
    # C = 15, W = 16, T = 5.5: C / T = 2.727..., n_max = 3, two events plus one with p = 0.727.
    windows = np.stack([np.arange(16), np.arange(100, 116)]).astype(np.int64)
    rng = ScriptedRng(
        ("random", 2, [0.5, 0.9]),  # extra: row 0 gets 3 events, row 1 gets 2
        ("integers", (1, 3, (2, 3)), [[2, 1, 2], [2, 2, 1]]),  # lengths in [1, 2]
        ("random", (2, 4), [[0.5, 0.25, 0.125, 0.125], [0.5, 0.25, 0.125, 0.25]]),
        ("random", (2, 3), [[0.0, 0.5, 0.99], [0.5, 0.5, 0.5]]),
    )
    opts = {"tokens_per_event": 5.5, "span_min": 1, "span_max": 2}
    copied = copies.fixed_rate_copies(windows, rng, opts, 0)
    assert rng.draws == []
    # Row 0: first = 2, free = 16 - 2 - 5 - 2 = 7, gaps floor(7 * [.5, .25, .125]) = 3, 1, 0,
    # spans + separators before = 0, 3, 5, dest = 2 + (3, 4, 4) + (0, 3, 5) = 5, 9, 11;
    # sources floor(u * (dest - L + 1)) = 0, floor(0.5 * 9) = 4, floor(0.99 * 10) = 9.
    # Written in order: w[5:7] = w[0:2]; w[9] = w[4]; w[11:13] = w[9:11] (reads the copy at 9).
    assert windows[0].tolist() == [0, 1, 2, 3, 4, 0, 1, 7, 8, 4, 10, 4, 10, 13, 14, 15]
    # Row 1: lengths 2, 2 (third inactive, its gap weight dropped), first = 2,
    # free = 16 - 2 - 4 - 1 = 9, gaps floor(9 * [.5, .25]) = 4, 2, dest = 2 + (4, 6) + (0, 3)
    # = 6, 11; sources floor(0.5 * 5) = 2, floor(0.5 * 10) = 5 (reads the copy at 6).
    assert windows[1].tolist() == [
        100, 101, 102, 103, 104, 105, 102, 103, 108, 109, 110, 105, 102, 113, 114, 115,
    ]  # fmt: skip
    assert copied.dtype == np.bool_
    assert np.flatnonzero(copied[0]).tolist() == [5, 6, 9, 11, 12]
    assert np.flatnonzero(copied[1]).tolist() == [6, 7, 11, 12]


def test_fixed_rate_copies_default_options_by_hand():
    # Defaults T = 16, spans 4 .. 8. C = 24, W = 25: 1.5 events, n_max = 2.
    windows = np.arange(25, dtype=np.int64)[None, :].copy()
    rng = ScriptedRng(
        ("random", 1, [0.25]),  # 0.25 < 0.5: two events
        ("integers", (4, 9, (1, 2)), [[4, 5]]),
        ("random", (1, 3), [[0.25, 0.25, 0.5]]),
        ("random", (1, 2), [[0.5, 0.5]]),
    )
    copied = copies.fixed_rate_copies(windows, rng, {}, 0)
    # first = 4, free = 25 - 4 - 9 - 1 = 11, gaps floor(11 * .25) = 2, 2; before 0, 5;
    # dest = 4 + (2, 4) + (0, 5) = 6, 13; sources floor(0.5 * 3) = 1, floor(0.5 * 9) = 4.
    expected = list(range(25))
    expected[6:10] = [1, 2, 3, 4]
    expected[13:18] = [4, 5, 1, 2, 3]
    assert windows[0].tolist() == expected
    assert np.flatnonzero(copied[0]).tolist() == [6, 7, 8, 9, 13, 14, 15, 16, 17]


def test_fixed_rate_copies_integer_rate_gives_exactly_c_over_t_events():
    # C = 16, T = 8: exactly 2 events; a zero draw must not add a third (frac(C / T) = 0).
    windows = np.arange(17, dtype=np.int64)[None, :].copy()
    rng = ScriptedRng(
        ("random", 1, [0.0]),
        ("integers", (2, 4, (1, 2)), [[2, 3]]),
        ("random", (1, 3), [[0.1171875, 0.5, 0.3828125]]),  # 15/128, 64/128, 49/128
        ("random", (1, 2), [[0.5, 0.0]]),
    )
    copied = copies.fixed_rate_copies(
        windows, rng, {"tokens_per_event": 8, "span_min": 2, "span_max": 3}, 0
    )
    # first = 2, free = 17 - 2 - 5 - 1 = 9, gaps floor(9 * 15/128) = 1, floor(4.5) = 4,
    # dest = 2 + (1, 5) + (0, 3) = 3, 10; sources floor(0.5 * 2) = 1, 0.
    assert windows[0].tolist() == [0, 1, 2, 1, 2, 5, 6, 7, 8, 9, 0, 1, 2, 13, 14, 15, 16]
    assert np.flatnonzero(copied[0]).tolist() == [3, 4, 10, 11, 12]
    assert count_copy_events(copied) == 2


def test_fixed_rate_copies_zero_context_returns_an_empty_mask():
    # C = 0: no events (n_max = 0); spans of one token fit the check (1 <= 0 + 1).
    windows = np.array([[7], [8]], dtype=np.int64)
    copied = copies.fixed_rate_copies(windows, ScriptedRng(), {"span_min": 1, "span_max": 1}, 0)
    assert copied.dtype == np.bool_
    assert copied.tolist() == [[False], [False]]
    assert windows.tolist() == [[7], [8]]


def test_fixed_rate_copies_rejects_bad_options_through_sample_batch():
    tokens = np.arange(200, dtype=np.uint32)
    with pytest.raises(ValueError, match="fixed_rate_copies: up to 1 spans of up to 9 tokens"):
        sample_batch(tokens, 2, 16, 0, 0, data_variant="fixed_rate_copies",
                     variant_options={"span_max": 9})  # fmt: skip


def reference_fixed_rate(tokens, batch, context, seed, step, per_event, low, high):
    """Row-by-row ``fixed_rate_copies`` from its docstring (generator layout as documented)."""
    rng = np.random.default_rng([0x1DBA7C, seed, step])
    width = context + 1
    offsets = rng.integers(0, len(tokens) - width + 1, size=batch)
    windows = np.stack([tokens[o : o + width] for o in offsets]).astype(np.int64)
    copied = np.zeros(windows.shape, dtype=bool)
    expected = context / per_event
    n_max = math.ceil(expected)
    extra = rng.random(batch) < expected - math.floor(expected)
    lengths = rng.integers(low, high + 1, size=(batch, n_max))
    weights = rng.random((batch, n_max + 1))
    u_source = rng.random((batch, n_max))
    for r in range(batch):
        n = math.floor(expected) + int(extra[r])
        spans = [int(lengths[r, j]) for j in range(n)]
        w = [float(weights[r, j]) for j in range(n)] + [float(weights[r, n_max])]
        first = spans[0] if n else 0
        free = width - first - sum(spans) - max(n - 1, 0)
        total = sum(w)
        pos = first
        for j in range(n):
            pos += math.floor(w[j] / total * free)
            dest, length = pos, spans[j]
            source = int(u_source[r, j] * (dest - length + 1))
            assert 0 <= source <= dest - length and dest + length <= width
            windows[r, dest : dest + length] = windows[r, source : source + length].copy()
            copied[r, dest : dest + length] = True
            pos += length + 1
    return windows, copied


@pytest.mark.parametrize(
    ("context", "seed", "step", "options"),
    [
        (24, 0, 0, {}),  # defaults: T = 16, spans 4 .. 8, 1.5 events
        (32, 1, 7, {"tokens_per_event": 8, "span_min": 2, "span_max": 5}),
        (13, 2, 3, {"tokens_per_event": 5, "span_min": 1, "span_max": 3}),  # needs all 14 slots
        (8, 3, 1, {"tokens_per_event": 16, "span_min": 2, "span_max": 3}),  # 0.5 events
        (20, 4, 11, {"tokens_per_event": 3.5, "span_min": 1, "span_max": 2}),
    ],
)
def test_fixed_rate_copies_equal_the_reference(context, seed, step, options):
    tokens = np.random.default_rng(5).integers(0, 50_000, size=4_000).astype(np.uint32)
    batch = sample_batch(tokens, 48, context, seed, step, data_variant="fixed_rate_copies",
                         variant_options=options)  # fmt: skip
    windows, copied = reference_fixed_rate(
        tokens,
        48,
        context,
        seed,
        step,
        float(options.get("tokens_per_event", 16.0)),
        int(options.get("span_min", 4)),
        int(options.get("span_max", 8)),
    )
    np.testing.assert_array_equal(batch.tokens.numpy(), windows)
    np.testing.assert_array_equal(batch.copied, copied)
    assert batch.copied.dtype == np.bool_


# --- the option check -----------------------------------------------------------------------


def test_fixed_rate_check_boundaries():
    check = VARIANT_CHECKS["fixed_rate_copies"]
    where = "training.variant_options.fixed_rate_copies"
    # C = 13, T = 5: 3 spans of up to 3 plus the first source and 2 separators = 14 = C + 1.
    check({"tokens_per_event": 5, "span_min": 1, "span_max": 3}, 13)
    with pytest.raises(ValueError) as info:
        check({"tokens_per_event": 5, "span_min": 1, "span_max": 4}, 13)
    assert str(info.value) == (
        f"{where}: up to 3 spans of up to 4 tokens (one every 5 tokens) need 18 positions, "
        "more than a sequence of context_length + 1 = 14; lower span_max or raise tokens_per_event"
    )
    # One event (C = 15 < T = 16): two spans' worth, no separator: 2 * 8 = 16 = C + 1.
    check({"tokens_per_event": 16, "span_min": 8, "span_max": 8}, 15)
    with pytest.raises(ValueError, match="need 18 positions"):
        check({"tokens_per_event": 16, "span_min": 9, "span_max": 9}, 16)
    # Spans of exactly one token and min == max are fine; any positive rate passes its check.
    check({"tokens_per_event": 0.5, "span_min": 1, "span_max": 1}, 0)
    check({"span_min": 6, "span_max": 6}, 16)
    check({"span_min": 1, "span_max": 1}, 0)
    with pytest.raises(ValueError) as info:
        check({"span_min": 0, "span_max": 4}, 64)
    assert str(info.value) == (f"{where}.span_min / span_max: need 1 <= min <= max, got 0, 4")
    with pytest.raises(ValueError, match=r"span_min / span_max: need 1 <= min <= max, got 5, 4"):
        check({"span_min": 5, "span_max": 4}, 64)
    with pytest.raises(ValueError) as info:
        check({"tokens_per_event": -2}, 64)
    assert str(info.value) == f"{where}.tokens_per_event: must be positive, got -2.0"
    # Defaults T = 16, spans 4 .. 8: at C = 15 one span of 8 plus its source fits 16.
    check({}, 15)
    with pytest.raises(ValueError, match="up to 1 spans of up to 8 tokens"):
        check({}, 14)


def test_expected_copy_events_values():
    assert expected_copy_events(24, 16) == 1.5
    assert expected_copy_events(10, 4.0) == 2.5


# --- counting and natural ------------------------------------------------------------------


def test_count_copy_events_values():
    assert count_copy_events(np.zeros((0, 5), dtype=bool)) == 0
    assert count_copy_events(np.zeros((2, 0), dtype=bool)) == 0
    # Integer masks are read as booleans; a run at position 0 counts.
    mask = np.array([[1, 1, 0, 1, 0, 0], [0, 0, 0, 0, 0, 1], [2, 0, 3, 3, 3, 0]])
    assert count_copy_events(mask) == 2 + 1 + 2
    assert count_copy_events([[True, True, True]]) == 1
    assert count_copy_events([[True]]) == 1
    assert count_copy_events([[False]]) == 0


def test_natural_returns_a_boolean_zero_mask():
    batch = sample_batch(np.arange(50, dtype=np.uint32), 3, 4, 0, 0)
    assert batch.copied.dtype == np.bool_
    assert batch.copied.shape == (3, 5) and not batch.copied.any()
