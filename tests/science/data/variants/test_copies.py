"""The copy data variants through the sampler: copied-span placement and copy events."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.variants.copies import (
    check_fixed_rate_copies,
    count_copy_events,
    effective_tokens_per_event,
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


# --- density_exponent: copies that grow with C as natural text does -------------------------


@pytest.mark.parametrize(
    ("context", "options", "fingerprint"),
    [
        # sha256 of (tokens, copied) bytes of sample_batch(arange(5000), 8, C, seed=3, step=7),
        # recorded with the code before density_exponent existed.
        (40, {}, "370204a3997bad52"),
        (24, {"tokens_per_event": 16, "span_min": 4, "span_max": 8}, "fe73af7ab028cee7"),
        (64, {"max_distance": 12}, "fc3b568c30cba83d"),
    ],
)
@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"density_exponent": None},
        {"density_exponent": None, "reference_context": 32},
        {"density_exponent": 0, "reference_context": 7},
    ],
)
def test_unset_density_exponent_gives_the_batches_of_before(
    stream, context, options, extra, fingerprint
):
    batch = sample_batch(stream, 8, context, seed=3, step=7, data_variant="fixed_rate_copies",
                         variant_options={**options, **extra})  # fmt: skip
    digest = hashlib.sha256(batch.tokens.numpy().tobytes() + batch.copied.tobytes()).hexdigest()
    assert digest[:16] == fingerprint


def test_effective_tokens_per_event_values():
    growing = {"tokens_per_event": 16, "reference_context": 32, "density_exponent": 0.5}
    # T(C) = 16 * (C / 32)^(-1/2): 16 at C_ref, 16 / 2 at 4 C_ref, 16 * 2 at C_ref / 4.
    assert effective_tokens_per_event(growing, 32) == 16.0
    assert effective_tokens_per_event(growing, 128) == 8.0
    assert effective_tokens_per_event(growing, 8) == 32.0
    assert effective_tokens_per_event(growing, 512) == 4.0
    assert effective_tokens_per_event(growing, 48) == pytest.approx(16 * math.sqrt(2 / 3))
    # Events per sequence C / T(C) = C^(3/2) / (16 sqrt(32)): 2 at 32, 16 at 128.
    assert expected_copy_events(32, effective_tokens_per_event(growing, 32)) == 2.0
    assert expected_copy_events(128, effective_tokens_per_event(growing, 128)) == 16.0
    # g = 1, C_ref 64, T0 24: at C = 16, T = 24 * 4 = 96.
    linear = {"tokens_per_event": 24, "reference_context": 64, "density_exponent": 1}
    assert effective_tokens_per_event(linear, 16) == 96.0
    # Unset (or g = 0): tokens_per_event at every C, 16 by default.
    assert effective_tokens_per_event({}, 1024) == 16.0
    assert effective_tokens_per_event({"tokens_per_event": 12}, 7) == 12.0
    assert effective_tokens_per_event({"density_exponent": 0, "reference_context": 5}, 80) == 16.0


def test_an_integer_event_count_stays_an_integer():
    # (256 / 8)^0.4 = 4, so T = 16 / 4 = 4 and 64 events; float pow gives 64.00000000000001,
    # which unsnapped would open a 65th event slot.
    options = {"tokens_per_event": 16, "reference_context": 8, "density_exponent": 0.4,
               "span_min": 1, "span_max": 2}  # fmt: skip
    assert effective_tokens_per_event(options, 256) == 4.0
    active, _, _, _ = fixed_rate_layout(16, 257, np.random.default_rng(0), options)
    assert active.shape == (16, 64)
    assert active.sum(axis=1).tolist() == [64] * 16


@pytest.mark.parametrize(
    ("context", "events"),
    # C / T(C) with T0 16, C_ref 32, g 1/2: (8/32)^(3/2) * 2 = 1/4; 3 sqrt(3/2); 16.
    [(8, 0.25), (48, 3 * math.sqrt(1.5)), (128, 16.0)],
)
def test_measured_copy_events_grow_as_c_to_the_one_plus_g(context, events):
    options = {"tokens_per_event": 16, "reference_context": 32, "density_exponent": 0.5,
               "span_min": 2, "span_max": 4}  # fmt: skip
    n = 4000
    windows = np.tile(np.arange(context + 1), (n, 1))  # (n, C+1)
    copied = fixed_rate_copies(windows, np.random.default_rng(11), options)
    per_row = np.array([count_copy_events(row[None, :]) for row in copied])  # (n,)
    # floor(e) events plus one with probability frac(e): a Bernoulli spread (none at 16).
    frac = events - math.floor(events)
    se = math.sqrt(frac * (1 - frac) / n)
    assert abs(per_row.mean() - events) <= 4 * se + 1e-12
    assert count_copy_events(copied) == per_row.sum()


def test_copied_share_grows_as_c_to_the_g():
    # Share of the C positions copied: E[length] / T(C) = 3 / 16 at C = 32, 3 / 8 at C = 128,
    # a ratio of 4^(1/2) = 2 (the fixed rate would give 1).
    options = {"tokens_per_event": 16, "reference_context": 32, "density_exponent": 0.5,
               "span_min": 2, "span_max": 4}  # fmt: skip
    shares = {}
    for context in (32, 128):
        windows = np.tile(np.arange(context + 1), (3000, 1))  # (n, C+1)
        copied = fixed_rate_copies(windows, np.random.default_rng(5), options)
        shares[context] = copied.sum() / (3000 * context)
    # Lengths uniform on 2..4 (variance 2/3): at C = 32, 2 events per row, so the share's
    # standard error is sqrt(2 * 2/3 / 3000) / 32 = 6.6e-4; at C = 128, 16 events, 4.7e-4.
    assert shares[32] == pytest.approx(3 / 16, abs=0.003)
    assert shares[128] == pytest.approx(3 / 8, abs=0.003)
    assert shares[128] / shares[32] == pytest.approx(4**0.5, abs=0.04)


def test_capacity_check_names_density_exponent_and_the_largest_context_that_fits():
    # g = 1, C_ref 32, T0 16: C^2 / 512 events. At C = 45, ceil(3.96) = 4 spans of up to 8 need
    # 8 + 32 + 3 = 43 <= 46 positions; at C = 46, ceil(4.13) = 5 need 52 > 47.
    options = {"tokens_per_event": 16, "reference_context": 32, "density_exponent": 1.0}
    check_fixed_rate_copies(options, 45)
    at_46 = (
        r"density_exponent: 1\.0 .* at context_length 46: up to 5 spans .* need 52 positions"
        r".*largest context_length that fits is 45"
    )
    with pytest.raises(ValueError, match=at_46):
        check_fixed_rate_copies(options, 46)
    at_128 = r"at context_length 128: up to 32 spans .* need 295 positions.*that fits is 45"
    with pytest.raises(ValueError, match=at_128):
        VARIANT_CHECKS["fixed_rate_copies"](options, 128)
    # The same spans at the fixed rate fit at C = 128 (8 spans: 8 + 64 + 7 = 79 <= 129).
    check_fixed_rate_copies({"tokens_per_event": 16}, 128)
    with pytest.raises(ValueError, match="density_exponent"):
        sample_batch(np.arange(500), 2, 128, seed=0, step=0, data_variant="fixed_rate_copies",
                     variant_options=options)  # fmt: skip


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"density_exponent": -0.1, "reference_context": 32},
         r"density_exponent: must be finite and >= 0, got -0\.1"),
        ({"density_exponent": math.nan, "reference_context": 32},
         "density_exponent: must be finite and >= 0, got nan"),
        ({"density_exponent": math.inf, "reference_context": 32},
         "density_exponent: must be finite and >= 0, got inf"),
        ({"density_exponent": "0.5", "reference_context": 32},
         "density_exponent: must be a number, got '0.5'"),
        ({"density_exponent": 0.5}, "reference_context: required when density_exponent is set"),
        ({"density_exponent": 0.5, "reference_context": 0},
         r"reference_context: must be a positive int \(tokens\), got 0"),
        ({"density_exponent": 0.5, "reference_context": 32.0},
         r"reference_context: must be a positive int \(tokens\), got 32\.0"),
        ({"reference_context": -4}, "reference_context: must be a positive int"),
    ],
)  # fmt: skip
def test_density_options_are_checked(options, message):
    with pytest.raises(ValueError, match=f"variant_options.fixed_rate_copies.{message}"):
        check_fixed_rate_copies(options, 64)
