"""Exact values of a run config's budget, positions and copy rate."""

from __future__ import annotations

from ih_kedro.science.training.config import TrainingRunConfig


def test_budget_and_copy_rate_of_a_config():
    config = TrainingRunConfig("r", "p", batch_size=8, context_length=16, max_tokens=1000)
    assert config.tokens_per_step == 128 and config.total_steps == 8  # ceil(1000 / 128)
    config.max_steps = 5
    assert config.total_steps == 5
    assert config.positions == 16 and config.copy_rate == 0.0
    config.data_variant = "copy_spans"
    assert config.copy_rate == 1.0
    config.variant_options = {"copy_rate": 0.25}
    assert config.copy_rate == 0.25
    config.n_positions = 64
    assert config.positions == 64
