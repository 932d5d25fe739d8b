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


def test_deepspeed_config_accumulates_micro_batches():
    config = deepspeed_config_for_run({}, batch_size=24, world_size=2, micro_batch_rows=4)
    assert config["train_micro_batch_size_per_gpu"] == 4
    assert config["gradient_accumulation_steps"] == 3  # 12 rows per rank in 3 passes
    whole = deepspeed_config_for_run({}, batch_size=24, world_size=2, micro_batch_rows=12)
    assert whole["gradient_accumulation_steps"] == 1
    for bad in (5, 0):
        with pytest.raises(ValueError, match=r"training\.micro_batch_tokens: "):
            deepspeed_config_for_run({}, batch_size=24, world_size=2, micro_batch_rows=bad)
