"""The repetition-knob generator: realised frequency / reliability vs targets, purity, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from ih_kedro.science.data.variants.repetition import generate_repetition_sequences
from ih_kedro.science.data.variants.repetition_stats import check_repetition, measure_repetition


@pytest.mark.parametrize(
    ("frequency", "reliability"),
    [(0.0, 0.5), (0.05, 0.9), (0.2, 0.2), (0.5, 0.5), (0.9, 0.05), (1.0, 1.0), (0.3, 0.0)],
)
def test_realised_knobs_match_targets(process, frequency, reliability):
    tokens, copied = generate_repetition_sequences(
        *process, 3000, 33, frequency, reliability, np.random.default_rng(1), return_copied=True
    )
    stats = measure_repetition(tokens)
    assert stats.first_half_repeats == 0
    assert abs(stats.frequency - frequency) <= 4 * stats.frequency_se + 1e-12
    if frequency == 0.0:
        assert stats.n_reuses == 0 and np.isnan(stats.reliability)
    else:
        assert abs(stats.reliability - reliability) <= 4 * stats.reliability_se + 1e-12
    # The copied mask is exactly the measured copies.
    assert int(copied.sum()) == stats.n_copies
    check_repetition(stats, frequency, reliability)
    assert set(np.unique(tokens)) <= set(process[2].tolist())


def test_extreme_knobs_are_exact(process):
    tokens = generate_repetition_sequences(*process, 200, 16, 1.0, 1.0, np.random.default_rng(2))
    stats = measure_repetition(tokens)
    # L = 16, h = 8: slots at 8, 10, 12, 14 (every slot re-uses; 15 follows the re-use at 14).
    assert (stats.n_slots, stats.n_reuses, stats.n_copies) == (800, 800, 800)
    assert stats.frequency == 1.0 and stats.reliability == 1.0
    # Each second-half pair (A, B) is a first-half bigram.
    for row in tokens[:20]:
        first = {int(a): int(b) for a, b in zip(row[:7], row[1:8], strict=True)}
        for t in range(8, 16, 2):
            assert first[int(row[t])] == int(row[t + 1])


def test_generator_is_a_pure_function_of_the_rng(process):
    a = generate_repetition_sequences(*process, 8, 20, 0.4, 0.6, np.random.default_rng(5))
    b = generate_repetition_sequences(*process, 8, 20, 0.4, 0.6, np.random.default_rng(5))
    c = generate_repetition_sequences(*process, 8, 20, 0.4, 0.6, np.random.default_rng(6))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.dtype == np.int64 and a.shape == (8, 20)


def test_bad_inputs_name_the_parameter(process):
    transition, initial, token_ids = process
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="semi_natural.frequency"):
        generate_repetition_sequences(*process, 2, 16, 1.5, 0.5, rng)
    with pytest.raises(ValueError, match="length"):
        generate_repetition_sequences(*process, 2, 6, 0.5, 0.5, rng)
    with pytest.raises(ValueError, match="48 states cannot fill"):
        generate_repetition_sequences(*process, 2, 64, 0.5, 0.5, rng)
    with pytest.raises(ValueError, match="token_ids"):
        generate_repetition_sequences(transition, initial, token_ids * 0, 2, 16, 0.5, 0.5, rng)
