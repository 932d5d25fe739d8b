"""Checkpoint schedule (log then regular), LR warm-up and decay, early stop margin."""

from __future__ import annotations

import pytest

from ih_kedro.science.training.schedules import (
    EarlyStopOnEmergence,
    checkpoint_schedule,
    lr_factor,
)


def test_checkpoint_schedule_is_log_then_regular():
    assert checkpoint_schedule(1000, every=250, dense_until=64) == [
        0,
        1,
        2,
        4,
        8,
        16,
        32,
        64,
        250,
        500,
        750,
        1000,
    ]
    assert checkpoint_schedule(10, every=4) == [0, 4, 8, 10]
    # In tokens: every 1000 tokens at 128 tokens/step is every 8 steps.
    assert checkpoint_schedule(20, every=1000, unit="tokens", tokens_per_step=128) == [
        0,
        8,
        16,
        20,
    ]
    # Not a multiple: each checkpoint is the first step reaching k * 100 tokens (no drift).
    assert checkpoint_schedule(8, every=100, unit="tokens", tokens_per_step=64) == [
        0,
        2,
        4,
        5,
        7,
        8,
    ]


def test_lr_schedule_warms_up_then_holds_or_decays():
    assert lr_factor(0, 4, "constant", 100, 0.1) == 0.25
    assert lr_factor(3, 4, "constant", 100, 0.1) == 1.0
    assert lr_factor(50, 4, "constant", 100, 0.1) == 1.0
    assert lr_factor(100, 4, "cosine", 100, 0.1) == pytest.approx(0.1)
    assert 0.1 < lr_factor(50, 4, "cosine", 100, 0.1) < 1.0


def test_early_stop_policy_margin():
    policy = EarlyStopOnEmergence("ps", threshold=0.4, margin_factor=1.5, min_extra_steps=100)
    policy.update(100, {"ps": 0.3})
    assert policy.stop_step is None
    policy.update(150, {"ps": 0.5})
    policy.update(200, {"ps": 0.9})
    assert policy.first_crossing == 150
    assert policy.stop_step == 250  # max(225, 150 + 100)
    policy.min_extra_steps = 10
    assert policy.stop_step == 225
    assert policy.should_stop(225) and not policy.should_stop(224)
