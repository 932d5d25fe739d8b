"""Fixtures of the data-variant tests: a small first-order process for the repetition generator."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def process() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    n_states = 48
    transition = rng.random((n_states, n_states)) ** 4  # (V, V) peaked rows
    transition[3] = 0.0  # a row without mass: draws fall back to uniform
    initial = np.ones(n_states)
    token_ids = np.arange(n_states, dtype=np.int64) * 7 + 11
    return transition, initial, token_ids
