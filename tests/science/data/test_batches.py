"""Deterministic batches by (seed, step)."""

from __future__ import annotations

import numpy as np
import pytest

from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.variants.registry import DATA_VARIANTS


@pytest.fixture()
def stream() -> np.ndarray:
    # Strictly increasing tokens make every window's provenance readable.
    return np.arange(5_000, dtype=np.uint32)


def test_batch_is_a_pure_function_of_seed_and_step(stream):
    a = sample_batch(stream, 8, 16, seed=3, step=7, data_variant="copy_spans")
    _ = sample_batch(stream, 8, 16, seed=3, step=8, data_variant="copy_spans")
    b = sample_batch(stream, 8, 16, seed=3, step=7, data_variant="copy_spans")
    assert a.tokens.shape == (8, 17)
    assert a.inputs.shape == (8, 16) and a.targets.shape == (8, 16)
    assert np.array_equal(a.tokens.numpy(), b.tokens.numpy())
    assert np.array_equal(a.copied, b.copied)
    other_step = sample_batch(stream, 8, 16, seed=3, step=8)
    other_seed = sample_batch(stream, 8, 16, seed=4, step=7)
    assert not np.array_equal(a.tokens.numpy(), other_step.tokens.numpy())
    assert not np.array_equal(a.tokens.numpy(), other_seed.tokens.numpy())


def test_natural_windows_are_contiguous_slices(stream):
    batch = sample_batch(stream, 16, 16, seed=0, step=0)
    rows = batch.tokens.numpy()
    assert np.all(np.diff(rows, axis=1) == 1)
    assert rows.max() < len(stream)
    assert batch.copied_fraction == 0.0


def test_unknown_variant_and_short_corpus_are_rejected(stream):
    with pytest.raises(ValueError, match="training.data_variants"):
        sample_batch(stream, 2, 8, seed=0, step=0, data_variant="nope")
    with pytest.raises(ValueError, match="fewer than one sequence"):
        sample_batch(stream[:5], 2, 8, seed=0, step=0)
    assert {"natural", "copy_spans"} <= set(DATA_VARIANTS)
