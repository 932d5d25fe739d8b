"""Exact values and boundaries of the checkpoint schedule and the early-stop policy
(mutation-testing kills)."""

from __future__ import annotations

import numpy as np
import pytest

from ih_kedro.science.training.schedules import EarlyStopOnEmergence, checkpoint_schedule

# --- checkpoint_schedule -----------------------------------------------------------------


def test_checkpoint_schedule_edges():
    assert checkpoint_schedule(9, every=5) == [0, 5, 9]  # no step past the budget
    assert checkpoint_schedule(5, every=2, unit="tokens") == [0, 2, 4, 5]  # 1 token per step
    assert checkpoint_schedule(3, every=128, unit="tokens", tokens_per_step=128) == [0, 1, 2, 3]
    assert checkpoint_schedule(3, every=50, unit="tokens", tokens_per_step=128) == [0, 1, 2, 3]
    # dense_until in tokens rounds up: 511 tokens at 128 per step reaches step 4.
    assert checkpoint_schedule(
        10, every=10_000, dense_until=511, unit="tokens", tokens_per_step=128
    ) == [0, 1, 2, 4, 10]
    assert checkpoint_schedule(5, every=100, dense_until=8) == [0, 1, 2, 4, 5]
    assert checkpoint_schedule(10, every=100, dense_until=4) == [0, 1, 2, 4, 10]
    assert checkpoint_schedule(0, every=3, dense_until=8) == [0]


def test_checkpoint_schedule_rejects_bad_options():
    with pytest.raises(ValueError) as error:
        checkpoint_schedule(10, every=2, unit="epochs")
    assert str(error.value) == "training.checkpoint_unit: 'steps' or 'tokens', got 'epochs'"
    with pytest.raises(ValueError) as error:
        checkpoint_schedule(10, every=0)
    assert str(error.value) == "training.checkpoint_every: must be positive, got 0"
    assert checkpoint_schedule(4, every=1) == [0, 1, 2, 3, 4]


# --- EarlyStopOnEmergence ----------------------------------------------------------------


def test_early_stop_defaults_and_integer_crossing():
    policy = EarlyStopOnEmergence("m", threshold=0.5)
    assert policy.margin_factor == 1.5 and policy.min_extra_steps == 100
    assert policy.first_crossing is None and policy.stop_step is None
    assert policy.state_dict() == {"first_crossing": None}
    assert not policy.should_stop(0)
    policy.update(np.int64(300), {"m": 0.6})
    assert policy.first_crossing == 300 and type(policy.first_crossing) is int
    assert policy.stop_step == 450  # max(ceil(1.5 * 300), 300 + 100)
    policy.update(10, {"m": 0.9})  # only the first crossing counts
    assert policy.first_crossing == 300
    assert policy.should_stop(450) and not policy.should_stop(449)
    policy.load_state_dict({"first_crossing": 2})
    assert policy.stop_step == 102  # max(3, 2 + 100)
