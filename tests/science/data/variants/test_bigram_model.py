"""The bigram model: counts, the other bucket, smoothing, save and load."""

from __future__ import annotations

import numpy as np
import pytest

from ih_kedro.science.data.variants.bigram_model import BigramModel, estimate_bigram_model


def test_bigram_model_counts_and_other_bucket(tmp_path):
    # Stream over ids 0..5 with EOS = 5; types by frequency: 0 (4x), 1 (3x), 2 (2x), 3, 4.
    stream = np.array([0, 1, 0, 1, 2, 5, 0, 1, 2, 3, 0, 4, 5, 3], dtype=np.uint16)
    big = np.concatenate([stream, np.arange(6, 20, dtype=np.uint16)])  # 14 singleton types
    model = estimate_bigram_model(big, 20, 8, 0.0, eos_token_id=5)
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
    smoothed = estimate_bigram_model(big, 20, 8, 1.0, eos_token_id=5)
    assert smoothed.transition[0, 1] == pytest.approx((3 + 1) / (4 + 9))
    path = model.save(tmp_path / "bigram.npz")
    loaded = BigramModel.load(path)
    assert loaded.checksum() == model.checksum()
    np.testing.assert_array_equal(loaded.counts, model.counts)
    with pytest.raises(ValueError, match="semi_natural.n_types"):
        estimate_bigram_model(big, 20, 40, 0.0, eos_token_id=5)
