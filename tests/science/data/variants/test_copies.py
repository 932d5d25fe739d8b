"""The copy data variants through the sampler: copied-span placement and copy events."""

from __future__ import annotations

import numpy as np
import pytest

from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.variants.copies import (
    check_fixed_rate_copies,
    count_copy_events,
    expected_copied_fraction,
    expected_copy_events,
    fixed_rate_copies,
    fixed_rate_layout,
    span_length_bounds,
)
from ih_kedro.science.data.variants.registry import VARIANT_CHECKS


@pytest.fixture()
def stream() -> np.ndarray:
    # Strictly increasing tokens make every window's provenance readable.
    return np.arange(5_000, dtype=np.uint32)


def test_copy_spans_copy_a_span_to_a_later_offset(stream):
    context = 32
    batch = sample_batch(
        stream,
        64,
        context,
        seed=1,
        step=5,
        data_variant="copy_spans",
        variant_options={"copy_rate": 1.0},
    )
    low, high = span_length_bounds(context, 0.125, 0.375)
    assert (low, high) == (4, 12)
    rows = batch.tokens.numpy()
    for row, mask in zip(rows, batch.copied, strict=True):
        positions = np.flatnonzero(mask)
        length = len(positions)
        assert low <= length <= high
        assert np.all(np.diff(positions) == 1)  # one contiguous span
        dest = positions[0]
        # The copied tokens equal an earlier, non-overlapping run of the same row.
        copied = row[dest : dest + length]
        start = row[0]  # the natural window is start, start+1, ...
        source = int(copied[0] - start)
        assert 0 <= source <= dest - length
        assert np.all(np.diff(copied) == 1)
    fraction = batch.copied_fraction
    assert fraction == pytest.approx(expected_copied_fraction(context, 1.0, 0.125, 0.375), abs=0.05)


def test_copy_rate_controls_the_share_of_sequences(stream):
    batch = sample_batch(
        stream,
        400,
        16,
        seed=0,
        step=0,
        data_variant="copy_spans",
        variant_options={"copy_rate": 0.5},
    )
    share = batch.copied.any(axis=1).mean()
    assert 0.4 < share < 0.6


def test_span_bounds_scale_with_context():
    assert span_length_bounds(64, 0.125, 0.375) == (8, 24)
    assert span_length_bounds(4, 0.125, 0.375) == (1, 2)


@pytest.mark.parametrize("context", [16, 32, 64])
def test_fixed_rate_copies_hold_c_over_t_events_copied_from_earlier(stream, context):
    batch = sample_batch(stream, 32, context, seed=2, step=9, data_variant="fixed_rate_copies",
                         variant_options={"tokens_per_event": 16, "span_min": 4, "span_max": 8})  # fmt: skip
    rows = batch.tokens.numpy()
    # C / 16 events in every sequence (an integer here), each a separate run of the mask.
    assert count_copy_events(batch.copied) == 32 * context // 16
    for row, mask in zip(rows, batch.copied, strict=True):
        starts = np.flatnonzero(mask & ~np.concatenate([[False], mask[:-1]]))
        ends = np.flatnonzero(mask & ~np.concatenate([mask[1:], [False]]))
        for start, end in zip(starts, ends, strict=True):
            length = end - start + 1
            assert 4 <= length <= 8
            span = row[start : end + 1]
            # The same tokens occur earlier, ending before the copy starts (a source may
            # overlap an earlier copy, so the span need not be a contiguous slice of the stream).
            assert any(np.array_equal(row[s : s + length], span) for s in range(start - length + 1))
    # The copied share is E[length] / T, the same at every C (6/16 of C of C + 1 positions).
    assert batch.copied_fraction == pytest.approx(6 / 16 * context / (context + 1), abs=0.05)


def test_fixed_rate_copies_fractional_rate_and_option_check(stream):
    batch = sample_batch(stream, 400, 24, seed=0, step=0, data_variant="fixed_rate_copies")
    # 24 / 16 = 1.5 events per sequence: one, plus a second with probability 0.5.
    assert count_copy_events(batch.copied) / 400 == pytest.approx(1.5, abs=0.08)
    assert expected_copy_events(24, 16) == 1.5
    with pytest.raises(ValueError, match="variant_options.fixed_rate_copies"):
        VARIANT_CHECKS["fixed_rate_copies"]({"span_max": 12}, 16)
    with pytest.raises(ValueError, match="tokens_per_event"):
        VARIANT_CHECKS["fixed_rate_copies"]({"tokens_per_event": 0}, 16)


@pytest.mark.parametrize(("context_length", "k"), [(64, 8), (256, 12), (1024, 32)])
def test_max_distance_never_places_a_source_beyond_k(context_length: int, k: int) -> None:
    options = {"tokens_per_event": 16, "span_min": 4, "span_max": 8, "max_distance": k}
    for seed in range(5):
        rng = np.random.default_rng(seed)
        active, lengths, dest, source = fixed_rate_layout(64, context_length + 1, rng, options)
        distance = (dest - source)[active]  # (m,) tokens from a span's source to its copy
        assert distance.max() <= k
        assert (distance >= lengths[active]).all()  # the source ends before its copy starts
        assert (source[active] >= 0).all()
    # Without the window, sources reach far back at a long context (the dilution k removes).
    rng = np.random.default_rng(0)
    active, _, dest, source = fixed_rate_layout(64, context_length + 1, rng, {})
    assert (dest - source)[active].max() > k


def test_max_distance_copies_the_tokens_from_within_k() -> None:
    # Distinct tokens per position and events far apart (no chained copies): every copied
    # token's value is its source position, at most k before it.
    k = 10
    windows = np.tile(np.arange(257), (32, 1))  # (B, C+1)
    options = {"tokens_per_event": 64, "span_min": 2, "span_max": 4, "max_distance": k}
    copied = fixed_rate_copies(windows, np.random.default_rng(3), options)
    rows, positions = np.nonzero(copied)
    assert len(rows) > 0
    assert ((positions - windows[rows, positions]) <= k).all()
    assert ((positions - windows[rows, positions]) >= 2).all()


def test_max_distance_below_span_max_is_refused() -> None:
    with pytest.raises(ValueError, match=r"max_distance: 6 tokens cannot hold a source of up to"):
        check_fixed_rate_copies({"span_max": 8, "max_distance": 6}, 64)
