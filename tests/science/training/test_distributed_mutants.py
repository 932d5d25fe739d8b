"""The per-run DeepSpeed config, exactly (mutation-testing kills). No engine is built here."""

from __future__ import annotations

import pytest

from ih_kedro.science.training.distributed import deepspeed_config_for_run


def test_deepspeed_config_splits_the_batch_and_copies():
    given = {"train_batch_size": 99, "zero_optimization": {"stage": 1}}
    config = deepspeed_config_for_run(given, batch_size=12, world_size=3)
    assert config == {
        "zero_optimization": {"stage": 1},
        "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": 1,
        "steps_per_print": 10**12,
        "wall_clock_breakdown": False,
    }
    assert type(config["train_micro_batch_size_per_gpu"]) is int
    config["zero_optimization"]["stage"] = 3
    assert given == {"train_batch_size": 99, "zero_optimization": {"stage": 1}}
    kept = deepspeed_config_for_run(
        {"steps_per_print": 5, "wall_clock_breakdown": True, "gradient_accumulation_steps": 4},
        batch_size=8,
        world_size=1,
    )
    assert kept == {
        "steps_per_print": 5,
        "wall_clock_breakdown": True,
        "gradient_accumulation_steps": 1,
        "train_micro_batch_size_per_gpu": 8,
    }
    with pytest.raises(ValueError) as error:
        deepspeed_config_for_run({}, batch_size=8, world_size=3)
    assert str(error.value) == (
        "training.batch_sizes: batch size 8 is not divisible by the 3 data-parallel ranks"
    )
