"""PackedTokens windows: exact values, the dropped tail, and the too-short error."""

from __future__ import annotations

import numpy as np
import pytest

from ih_kedro.science.data.packed import PackedTokens


def test_sequences_are_consecutive_windows_of_context_plus_one():
    packed = PackedTokens(tokens=np.arange(23, dtype=np.uint16), vocab_size=30, eos_token_id=0)
    assert len(packed) == 23
    windows = packed.sequences(4)  # (4, 5): 4 windows of 5 tokens, tail 20..22 dropped
    np.testing.assert_array_equal(
        windows,
        [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [15, 16, 17, 18, 19]],
    )
    assert windows.dtype == np.uint16
    assert np.shares_memory(windows, packed.tokens)  # a view, not a copy
    np.testing.assert_array_equal(packed.sequences(10), [np.arange(11), np.arange(11, 22)])
    np.testing.assert_array_equal(packed.sequences(22), [np.arange(23)])


def test_too_short_and_bad_context_are_clear_errors():
    packed = PackedTokens(tokens=np.arange(5, dtype=np.uint32), vocab_size=8, eos_token_id=0)
    with pytest.raises(ValueError, match=r"5 tokens, fewer than one sequence of .* = 6"):
        packed.sequences(5)
    np.testing.assert_array_equal(packed.sequences(4), [[0, 1, 2, 3, 4]])
    with pytest.raises(ValueError, match="context_length must be positive, got 0"):
        packed.sequences(0)
