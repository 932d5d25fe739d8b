"""A run config that cannot train fails validation naming the parameter to fix."""

from __future__ import annotations

import pytest

from ih_kedro.science.training.config import validate_run_config

from .test_run import VOCAB, make_config


@pytest.mark.parametrize(
    ("overrides", "corpus", "parameter"),
    [
        ({"batch_size": 0}, 10_000, "training.batch_sizes"),
        ({"context_length": -1}, 10_000, "training.context_lengths"),
        ({"context_length": 32, "n_positions": 16}, 10_000, "training.context_lengths"),
        ({"preset": "no-such-preset"}, 10_000, "training.presets"),
        ({"variant_options": {"span_max_fraction": 0.75}}, 10_000, "training.span_max_fraction"),
        ({}, 10, "train_tokens"),
        ({"data_variant": "mystery"}, 10_000, "training.data_variants"),
        ({"learning_rate": 0.0}, 10_000, "training.learning_rate"),
        ({"schedule": "step"}, 10_000, "training.schedule"),
        ({"max_steps": None, "max_tokens": None}, 10_000, "training.max_steps"),
        ({"deepspeed": {"optimizer": {"type": "Adam"}}}, 10_000, "training.deepspeed.optimizer"),
        ({"variant_options": {"copy_rate": 2.0}}, 10_000, "training.copy_rate"),
        ({"micro_batch_tokens": 8}, 10_000, "training.micro_batch_tokens"),  # < one C=16 row
        ({"micro_batch_tokens": 64.0}, 10_000, "training.micro_batch_tokens"),
    ],
)
def test_validation_names_the_parameter(overrides, corpus, parameter):
    with pytest.raises(ValueError, match=parameter.replace(".", r"\.")):
        validate_run_config(make_config(**overrides), VOCAB, corpus)


@pytest.mark.parametrize(
    ("batch_size", "context_length", "tokens", "world_size", "rows"),
    [
        (8, 16, None, 1, 8),  # unset: the whole batch in one pass
        (8, 16, 64, 1, 4),  # 64 tokens hold 4 rows of 16
        (8, 16, 63, 1, 2),  # 3 rows fit but do not divide 8
        (96, 128, 1000, 1, 6),  # 7 fit, 6 is the largest divisor of 96 below
        (96, 128, 1000, 2, 6),  # a rank's 48 rows
        (96, 128, 1000, 4, 6),  # a rank's 24 rows
        (24, 16, 10_000, 2, 12),  # more than a rank's rows: one pass of its 12
        (8, 16, 16, 1, 1),  # exactly one row
    ],
)
def test_micro_batch_rows(batch_size, context_length, tokens, world_size, rows):
    config = make_config(
        batch_size=batch_size, context_length=context_length, micro_batch_tokens=tokens
    )
    assert config.micro_batch_rows(world_size) == rows


def test_a_micro_batch_of_exactly_one_sequence_is_valid():
    validate_run_config(make_config(micro_batch_tokens=16), VOCAB, 10_000)  # C = 16
