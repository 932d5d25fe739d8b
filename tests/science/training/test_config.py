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
