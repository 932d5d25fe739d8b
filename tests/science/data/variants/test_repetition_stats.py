"""Measuring repetition: hand-built sequences, the loud check, and the natural-data chunk selection."""

from __future__ import annotations

import numpy as np
import pytest

from ih_kedro.science.data.variants.repetition import generate_repetition_sequences
from ih_kedro.science.data.variants.repetition_stats import (
    check_repetition,
    has_repeated_bigram,
    measure_repetition,
    select_chunks_by_repetition,
)


def test_measure_on_hand_built_sequences():
    # 1 2 3 in the second half is one copied span: 3 continues 2's earlier bigram (a copy).
    span = measure_repetition(np.array([[1, 2, 3, 4, 5, 1, 2, 3, 9, 8]]))
    assert (span.n_reuses, span.n_copies, span.n_continuations) == (1, 1, 1)
    # L = 10, h = 5. First half 1 2 3 4 5; second half: 7 (slot, fresh), 1 2 (re-use at a slot,
    # copy), 4 9 (re-use at a slot, no copy). Slots 5, 6, 8; continuations 7, 9.
    seq = np.array([[1, 2, 3, 4, 5, 7, 1, 2, 4, 9]])
    stats = measure_repetition(seq)
    assert (stats.n_slots, stats.n_reuses) == (3, 2)
    assert (stats.n_continuations, stats.n_copies) == (2, 1)
    assert stats.frequency == pytest.approx(2 / 3) and stats.reliability == 0.5


def test_check_fails_loudly_when_a_target_is_missed(process):
    tokens = generate_repetition_sequences(*process, 2000, 33, 0.5, 0.5, np.random.default_rng(3))
    stats = measure_repetition(tokens)
    with pytest.raises(ValueError, match="semi_natural.frequency: realised"):
        check_repetition(stats, 0.3, 0.5)
    with pytest.raises(ValueError, match="semi_natural.reliability: realised"):
        check_repetition(stats, 0.5, 0.8)


def test_select_chunks_sets_the_repeated_bigram_share():
    rng = np.random.default_rng(0)
    stream = rng.integers(0, 30, size=20_000)
    chunks, flags = select_chunks_by_repetition(stream, 200, 24, 0.25, np.random.default_rng(1))
    assert chunks.shape == (200, 24) and int(flags.sum()) == 50
    np.testing.assert_array_equal(has_repeated_bigram(chunks), flags)
    assert has_repeated_bigram(np.array([[1, 2, 3, 1, 2], [1, 2, 2, 1, 3]])).tolist() == [
        True,
        False,
    ]
    with pytest.raises(ValueError, match="natural_repetition.share"):
        select_chunks_by_repetition(np.arange(1000), 10, 24, 0.5, np.random.default_rng(0))
