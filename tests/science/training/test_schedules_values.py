"""Exact values of the training schedule helpers (LR factor at given steps, early-stop step)."""

from __future__ import annotations

import math

import pytest

from ih_kedro.science.training.schedules import EarlyStopOnEmergence, lr_factor


@pytest.mark.parametrize(
    ("step", "expected"),
    [(0, 0.25), (1, 0.5), (2, 0.75), (3, 1.0), (4, 1.0), (5000, 1.0)],
)
def test_constant_schedule_values(step, expected):
    assert lr_factor(step, 4, "constant", 104, 0.1) == expected


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (0, 0.25),
        (3, 1.0),
        (4, 1.0),  # progress 0: cos(0) = 1
        (29, 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.25))),  # progress 1/4: 0.86820
        (54, 0.55),  # progress 1/2
        (79, 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.75))),  # progress 3/4: 0.23180
        (104, 0.1),  # the end of the decay
        (500, 0.1),  # held at min_lr_ratio after decay_steps
    ],
)
def test_cosine_schedule_values(step, expected):
    assert lr_factor(step, 4, "cosine", 104, 0.1) == pytest.approx(expected, abs=1e-12)


def test_cosine_with_decay_not_after_warmup_and_no_warmup():
    # decay_steps <= warmup_steps: the span is clamped to one step, so it drops at once.
    assert lr_factor(4, 4, "cosine", 4, 0.2) == 1.0
    assert lr_factor(5, 4, "cosine", 4, 0.2) == pytest.approx(0.2)
    assert lr_factor(0, 0, "constant", 10, 0.1) == 1.0
    assert lr_factor(5, 0, "cosine", 10, 0.0) == pytest.approx(0.5)
    assert lr_factor(10, 0, "cosine", 10, 0.0) == pytest.approx(0.0)


def test_early_stop_step_rounds_up_and_ignores_missing_metric():
    policy = EarlyStopOnEmergence("ps", threshold=0.4, margin_factor=1.25, min_extra_steps=0)
    policy.update(10, {"other": 0.9})
    policy.update(11, {"ps": 0.4})  # not above the threshold
    assert policy.first_crossing is None and not policy.should_stop(10_000)
    policy.update(13, {"ps": 0.41})
    assert policy.stop_step == 17  # ceil(16.25)
    policy.load_state_dict({})
    assert policy.first_crossing is None
    policy.load_state_dict({"first_crossing": 40})
    assert policy.state_dict() == {"first_crossing": 40} and policy.stop_step == 50
