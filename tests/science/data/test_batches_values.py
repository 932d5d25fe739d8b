"""The batch sampler against a reference written from its documented algorithm.

The generator is ``default_rng([0x1DBA7C, seed, step])``; it draws the ``B`` window offsets,
then (``copy_spans``) per row: selected (``u < copy_rate``), span length in ``[low, high]``,
source ``floor(u (W - 2L + 1))`` and destination ``s + L + floor(u (W - L - (s + L) + 1))``. Any
change to the stream layout, a bound or the copy changes these exact tokens.
"""

from __future__ import annotations

import numpy as np
import pytest

from ih_kedro.science.data.batches import batch_rng, sample_batch
from ih_kedro.science.data.variants.copies import expected_copied_fraction, span_length_bounds


def reference_batch(tokens, batch, context, seed, step, rate, lo_frac, hi_frac):
    rng = np.random.default_rng([0x1DBA7C, seed, step])
    width = context + 1
    offsets = rng.integers(0, len(tokens) - width + 1, size=batch)
    windows = np.stack([tokens[o : o + width] for o in offsets]).astype(np.int64)
    copied = np.zeros(windows.shape, dtype=bool)
    if rate is None:
        return windows, copied
    low = max(1, round(lo_frac * context))
    high = max(low, round(hi_frac * context))
    selected = rng.random(batch) < rate
    lengths = rng.integers(low, high + 1, size=batch)
    u_source, u_dest = rng.random(batch), rng.random(batch)
    for row in range(batch):
        length = int(lengths[row])
        source = int(u_source[row] * (width - 2 * length + 1))
        first = source + length
        dest = first + int(u_dest[row] * (width - length - first + 1))
        if selected[row]:
            windows[row, dest : dest + length] = windows[row, source : source + length].copy()
            copied[row, dest : dest + length] = True
    return windows, copied


@pytest.mark.parametrize(
    ("context", "seed", "step", "rate", "fractions"),
    [
        (16, 0, 0, None, (0.125, 0.375)),
        (16, 3, 7, 1.0, (0.125, 0.375)),
        (32, 1, 123, 0.5, (0.25, 0.5)),
        (9, 2, 5, 1.0, (0.1, 0.5)),  # spans up to the whole half of the window
    ],
)
def test_batches_equal_the_reference(context, seed, step, rate, fractions):
    tokens = np.random.default_rng(99).integers(0, 1000, size=3_000).astype(np.uint16)
    variant = "natural" if rate is None else "copy_spans"
    options = (
        {}
        if rate is None
        else {
            "copy_rate": rate,
            "span_min_fraction": fractions[0],
            "span_max_fraction": fractions[1],
        }
    )
    batch = sample_batch(
        tokens, 64, context, seed, step, data_variant=variant, variant_options=options
    )
    windows, copied = reference_batch(tokens, 64, context, seed, step, rate, *fractions)
    np.testing.assert_array_equal(batch.tokens.numpy(), windows)
    np.testing.assert_array_equal(batch.copied, copied)
    assert batch.tokens.dtype.is_floating_point is False and batch.tokens.shape == (64, context + 1)
    np.testing.assert_array_equal(batch.inputs.numpy(), windows[:, :-1])
    np.testing.assert_array_equal(batch.targets.numpy(), windows[:, 1:])
    assert batch.copied_fraction == copied.mean()


def test_offsets_reach_both_ends_of_the_stream():
    tokens = np.arange(12, dtype=np.uint32)  # 12 tokens, windows of 5: offsets 0..7
    starts = set()
    for step in range(200):
        starts.update(sample_batch(tokens, 4, 4, 0, step).tokens[:, 0].tolist())
    assert starts == set(range(8))


def test_destination_reaches_the_window_end_and_source_its_start():
    tokens = np.arange(10_000, dtype=np.uint32)
    first_source, last_end = set(), set()
    options = {"copy_rate": 1.0, "span_min_fraction": 0.25, "span_max_fraction": 0.25}
    for step in range(40):
        batch = sample_batch(
            tokens, 32, 8, 1, step, data_variant="copy_spans", variant_options=options
        )
        rows = batch.tokens.numpy()
        for row, mask in zip(rows, batch.copied, strict=True):
            positions = np.flatnonzero(mask)
            assert len(positions) == 2  # round(0.25 * 8)
            first_source.add(int(row[positions[0]] - row[0]))  # the copied token's source slot
            last_end.add(int(positions[-1]))
    assert 0 in first_source and max(first_source) == 9 - 4  # source in [0, W - 2L]
    assert last_end == set(range(3, 9))  # dest + L - 1 in [2L - 1, W - 1]


def test_rng_and_helpers_values():
    assert batch_rng(3, 7).integers(0, 2**31) == np.random.default_rng([0x1DBA7C, 3, 7]).integers(
        0, 2**31
    )
    assert span_length_bounds(32, 0.25, 0.5) == (8, 16)
    assert span_length_bounds(10, 0.01, 0.02) == (1, 1)  # at least one token
    assert span_length_bounds(10, 0.3, 0.1) == (3, 3)  # max never below min
    assert expected_copied_fraction(32, 0.5, 0.25, 0.5) == pytest.approx(0.5 * 12 / 33)


def test_invalid_sizes_and_overlong_spans_are_errors():
    tokens = np.arange(100, dtype=np.uint32)
    with pytest.raises(ValueError, match=r"batch_size \(0\) and context_length \(8\)"):
        sample_batch(tokens, 0, 8, 0, 0)
    with pytest.raises(ValueError, match=r"training.span_max_fraction: a span of up to 6 tokens"):
        sample_batch(
            tokens,
            2,
            10,
            0,
            0,
            data_variant="copy_spans",
            variant_options={"span_max_fraction": 0.6},
        )
    with pytest.raises(
        ValueError, match="the corpus has 100 tokens, fewer than one sequence of 101"
    ):
        sample_batch(tokens, 2, 100, 0, 0)
