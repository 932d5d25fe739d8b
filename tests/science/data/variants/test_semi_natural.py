"""The semi_natural training variant: batches drawn from the saved bigram model, option checks."""

from __future__ import annotations

import numpy as np
import pytest

from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.variants.bigram_model import BigramModel
from ih_kedro.science.data.variants.repetition_stats import check_repetition, measure_repetition
from ih_kedro.science.data.variants.semi_natural import check_semi_natural_options


def test_training_variant_draws_from_the_saved_model(tmp_path, process):
    transition, initial, token_ids = process
    model = BigramModel(
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
    stats = measure_repetition(a.tokens.numpy())
    check_repetition(stats, 0.5, 0.8)
    assert int(a.copied.sum()) == stats.n_copies
    check_semi_natural_options(options, 31)
    with pytest.raises(ValueError, match="options.model_path"):
        check_semi_natural_options({"frequency": 0.5, "reliability": 0.5}, 31)
    with pytest.raises(ValueError, match="checksum"):
        check_semi_natural_options({**options, "model_checksum": "0" * 12}, 31)
    with pytest.raises(ValueError, match="cannot fill"):
        check_semi_natural_options(options, 63)
