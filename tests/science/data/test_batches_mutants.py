"""Value tests for the training batches, written against mutation-testing survivors: the
``Batch`` properties, ``sample_batch``'s bounds and what it hands a data variant."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ih_kedro.science.data.batches import Batch, sample_batch
from ih_kedro.science.data.variants import registry


def test_empty_batch_has_zero_copied_fraction():
    empty = Batch(tokens=None, copied=np.zeros((0, 4), dtype=bool))
    assert empty.copied_fraction == 0.0
    half = Batch(tokens=None, copied=np.array([[True, False, True, False]]))
    assert half.copied_fraction == 0.5


def test_sample_batch_boundaries():
    tokens = np.arange(9, dtype=np.uint32)
    # A corpus of exactly one window: every row is the whole corpus.
    batch = sample_batch(tokens, 3, 8, 0, 0)
    assert batch.tokens.numpy().tolist() == [list(range(9))] * 3
    assert batch.tokens.dtype == torch.int64
    # Context length 1: windows of two consecutive tokens, offsets 0 .. 7.
    pairs = sample_batch(tokens, 64, 1, 0, 0).tokens.numpy()
    assert np.all(pairs[:, 1] == pairs[:, 0] + 1) and set(pairs[:, 0]) == set(range(8))
    with pytest.raises(ValueError, match=r"batch_size \(2\) and context_length \(0\)"):
        sample_batch(tokens, 2, 0, 0, 0)
    with pytest.raises(ValueError, match=r"batch_size \(-1\) and context_length \(4\)"):
        sample_batch(tokens, -1, 4, 0, 0)
    with pytest.raises(ValueError) as info:
        sample_batch(tokens, 1, 9, 0, 0)
    assert str(info.value) == "the corpus has 9 tokens, fewer than one sequence of 10 tokens"


def test_variant_receives_options_rng_and_step(monkeypatch):
    monkeypatch.setattr(registry, "DATA_VARIANTS", dict(registry.DATA_VARIANTS))
    monkeypatch.setattr(registry, "VARIANT_CHECKS", dict(registry.VARIANT_CHECKS))
    seen = {}

    def stamp(windows, rng, options, step):
        seen.update(options=dict(options), step=step, draw=float(rng.random()))
        windows[:, 0] = step
        mask = np.zeros(windows.shape, dtype=bool)
        mask[:, 0] = True
        return mask

    def check(options, context_length):
        raise AssertionError

    registry.register_variant("stamp", stamp)
    assert "stamp" not in registry.VARIANT_CHECKS
    registry.register_variant("stamp2", stamp, check)
    assert registry.DATA_VARIANTS["stamp"] is stamp and registry.VARIANT_CHECKS["stamp2"] is check
    tokens = np.arange(100, 200, dtype=np.uint32)
    batch = sample_batch(tokens, 2, 4, 3, 5, data_variant="stamp", variant_options={"a": 1})
    rng = np.random.default_rng([0x1DBA7C, 3, 5])
    offsets = rng.integers(0, 100 - 5 + 1, size=2)
    assert seen == {"options": {"a": 1}, "step": 5, "draw": float(rng.random())}
    assert batch.tokens.numpy().tolist() == [[5, *range(100 + o + 1, 100 + o + 5)] for o in offsets]
    assert batch.copied_fraction == 0.2
    sample_batch(tokens, 1, 4, 0, 9, data_variant="stamp")
    assert seen["options"] == {} and seen["step"] == 9
