"""Semi-natural generator: realised frequency / reliability vs targets, bigram estimation,
measurement on hand-built sequences, the natural-data chunk selection and the training variant."""

from __future__ import annotations

import numpy as np
import pytest

from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.variants import semi_natural as sn


@pytest.fixture(scope="module")
def process() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    n_states = 48
    transition = rng.random((n_states, n_states)) ** 4  # (V, V) peaked rows
    transition[3] = 0.0  # a row without mass: draws fall back to uniform
    initial = np.ones(n_states)
    token_ids = np.arange(n_states, dtype=np.int64) * 7 + 11
    return transition, initial, token_ids


@pytest.mark.parametrize(
    ("frequency", "reliability"),
    [(0.0, 0.5), (0.05, 0.9), (0.2, 0.2), (0.5, 0.5), (0.9, 0.05), (1.0, 1.0), (0.3, 0.0)],
)
def test_realised_knobs_match_targets(process, frequency, reliability):
    tokens, copied = sn.generate_repetition_sequences(
        *process, 3000, 33, frequency, reliability, np.random.default_rng(1), return_copied=True
    )
    stats = sn.measure_repetition(tokens)
    assert stats.first_half_repeats == 0
    assert abs(stats.frequency - frequency) <= 4 * stats.frequency_se + 1e-12
    if frequency == 0.0:
        assert stats.n_reuses == 0 and np.isnan(stats.reliability)
    else:
        assert abs(stats.reliability - reliability) <= 4 * stats.reliability_se + 1e-12
    # The copied mask is exactly the measured copies.
    assert int(copied.sum()) == stats.n_copies
    sn.check_repetition(stats, frequency, reliability)
    assert set(np.unique(tokens)) <= set(process[2].tolist())


def test_extreme_knobs_are_exact(process):
    tokens = sn.generate_repetition_sequences(*process, 200, 16, 1.0, 1.0, np.random.default_rng(2))
    stats = sn.measure_repetition(tokens)
    # L = 16, h = 8: slots at 8, 10, 12, 14 (every slot re-uses; 15 follows the re-use at 14).
    assert (stats.n_slots, stats.n_reuses, stats.n_copies) == (800, 800, 800)
    assert stats.frequency == 1.0 and stats.reliability == 1.0
    # Each second-half pair (A, B) is a first-half bigram.
    for row in tokens[:20]:
        first = {int(a): int(b) for a, b in zip(row[:7], row[1:8], strict=True)}
        for t in range(8, 16, 2):
            assert first[int(row[t])] == int(row[t + 1])


def test_generator_is_a_pure_function_of_the_rng(process):
    a = sn.generate_repetition_sequences(*process, 8, 20, 0.4, 0.6, np.random.default_rng(5))
    b = sn.generate_repetition_sequences(*process, 8, 20, 0.4, 0.6, np.random.default_rng(5))
    c = sn.generate_repetition_sequences(*process, 8, 20, 0.4, 0.6, np.random.default_rng(6))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.dtype == np.int64 and a.shape == (8, 20)


def test_measure_on_hand_built_sequences():
    # 1 2 3 in the second half is one copied span: 3 continues 2's earlier bigram (a copy).
    span = sn.measure_repetition(np.array([[1, 2, 3, 4, 5, 1, 2, 3, 9, 8]]))
    assert (span.n_reuses, span.n_copies, span.n_continuations) == (1, 1, 1)
    # L = 10, h = 5. First half 1 2 3 4 5; second half: 7 (slot, fresh), 1 2 (re-use at a slot,
    # copy), 4 9 (re-use at a slot, no copy). Slots 5, 6, 8; continuations 7, 9.
    seq = np.array([[1, 2, 3, 4, 5, 7, 1, 2, 4, 9]])
    stats = sn.measure_repetition(seq)
    assert (stats.n_slots, stats.n_reuses) == (3, 2)
    assert (stats.n_continuations, stats.n_copies) == (2, 1)
    assert stats.frequency == pytest.approx(2 / 3) and stats.reliability == 0.5


def test_check_fails_loudly_when_a_target_is_missed(process):
    tokens = sn.generate_repetition_sequences(
        *process, 2000, 33, 0.5, 0.5, np.random.default_rng(3)
    )
    stats = sn.measure_repetition(tokens)
    with pytest.raises(ValueError, match="semi_natural.frequency: realised"):
        sn.check_repetition(stats, 0.3, 0.5)
    with pytest.raises(ValueError, match="semi_natural.reliability: realised"):
        sn.check_repetition(stats, 0.5, 0.8)


def test_bad_inputs_name_the_parameter(process):
    transition, initial, token_ids = process
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="semi_natural.frequency"):
        sn.generate_repetition_sequences(*process, 2, 16, 1.5, 0.5, rng)
    with pytest.raises(ValueError, match="length"):
        sn.generate_repetition_sequences(*process, 2, 6, 0.5, 0.5, rng)
    with pytest.raises(ValueError, match="48 states cannot fill"):
        sn.generate_repetition_sequences(*process, 2, 64, 0.5, 0.5, rng)
    with pytest.raises(ValueError, match="token_ids"):
        sn.generate_repetition_sequences(transition, initial, token_ids * 0, 2, 16, 0.5, 0.5, rng)


def test_bigram_model_counts_and_other_bucket(tmp_path):
    # Stream over ids 0..5 with EOS = 5; types by frequency: 0 (4x), 1 (3x), 2 (2x), 3, 4.
    stream = np.array([0, 1, 0, 1, 2, 5, 0, 1, 2, 3, 0, 4, 5, 3], dtype=np.uint16)
    big = np.concatenate([stream, np.arange(6, 20, dtype=np.uint16)])  # 14 singleton types
    model = sn.estimate_bigram_model(big, 20, 8, 0.0, eos_token_id=5)
    assert model.n_states == 9
    assert model.token_ids[:3].tolist() == [0, 1, 2]
    other = 8
    # 0 -> 1 three times, 0 -> 4 once: P(1 | 0) = 3/4 without smoothing.
    assert model.counts[0, 1] == 3 and model.transition[0, 1] == pytest.approx(0.75)
    # Pairs across EOS are dropped: 2 -> EOS, EOS -> 0, 4 -> EOS, EOS -> 3 never counted.
    assert model.counts.sum() == len(big) - 1 - 4
    # The singleton ids 6..19 beyond the top 8 types share the other bucket.
    assert model.counts[other, other] >= 5
    np.testing.assert_allclose(model.transition.sum(axis=1), 1.0)
    smoothed = sn.estimate_bigram_model(big, 20, 8, 1.0, eos_token_id=5)
    assert smoothed.transition[0, 1] == pytest.approx((3 + 1) / (4 + 9))
    path = model.save(tmp_path / "bigram.npz")
    loaded = sn.BigramModel.load(path)
    assert loaded.checksum() == model.checksum()
    np.testing.assert_array_equal(loaded.counts, model.counts)
    with pytest.raises(ValueError, match="semi_natural.n_types"):
        sn.estimate_bigram_model(big, 20, 40, 0.0, eos_token_id=5)


def test_select_chunks_sets_the_repeated_bigram_share():
    rng = np.random.default_rng(0)
    stream = rng.integers(0, 30, size=20_000)
    chunks, flags = sn.select_chunks_by_repetition(stream, 200, 24, 0.25, np.random.default_rng(1))
    assert chunks.shape == (200, 24) and int(flags.sum()) == 50
    np.testing.assert_array_equal(sn.has_repeated_bigram(chunks), flags)
    assert sn.has_repeated_bigram(np.array([[1, 2, 3, 1, 2], [1, 2, 2, 1, 3]])).tolist() == [
        True,
        False,
    ]
    with pytest.raises(ValueError, match="natural_repetition.share"):
        sn.select_chunks_by_repetition(np.arange(1000), 10, 24, 0.5, np.random.default_rng(0))


def test_training_variant_draws_from_the_saved_model(tmp_path, process):
    transition, initial, token_ids = process
    model = sn.BigramModel(
        transition=transition / np.maximum(transition.sum(1, keepdims=True), 1e-12),
        initial=initial / initial.sum(),
        token_ids=token_ids,
        counts=np.zeros_like(transition, dtype=np.int64),
        smoothing=0.0,
        other_bucket=False,
        vocab_size=400,
    )
    path = model.save(tmp_path / "model.npz")
    options = {"model_path": str(path), "frequency": 0.5, "reliability": 0.8}
    stream = np.arange(1000, dtype=np.uint32)
    a = sample_batch(
        stream, 256, 31, seed=0, step=3, data_variant="semi_natural", variant_options=options
    )
    b = sample_batch(
        stream, 256, 31, seed=0, step=3, data_variant="semi_natural", variant_options=options
    )
    assert np.array_equal(a.tokens.numpy(), b.tokens.numpy())
    assert set(np.unique(a.tokens.numpy())) <= set(token_ids.tolist())
    stats = sn.measure_repetition(a.tokens.numpy())
    sn.check_repetition(stats, 0.5, 0.8)
    assert int(a.copied.sum()) == stats.n_copies
    sn.check_semi_natural_options(options, 31)
    with pytest.raises(ValueError, match="options.model_path"):
        sn.check_semi_natural_options({"frequency": 0.5, "reliability": 0.5}, 31)
    with pytest.raises(ValueError, match="checksum"):
        sn.check_semi_natural_options({**options, "model_checksum": "0" * 12}, 31)
    with pytest.raises(ValueError, match="cannot fill"):
        sn.check_semi_natural_options(options, 63)
