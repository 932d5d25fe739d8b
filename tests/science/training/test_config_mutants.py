"""Exact values and boundaries of the run config (mutation-testing kills).

Config budgets and params, and every ``validate_run_config`` boundary: the valid edge passes,
one step past it fails naming the parameter. No engine is built here.
"""

from __future__ import annotations

import numpy as np
import pytest

from ih_kedro.science.training.config import TrainingRunConfig, _param, validate_run_config

TINY = {"family": "attention_only", "n_layer": 2, "n_head": 2, "d_model": 32}


def make_config(**overrides) -> TrainingRunConfig:
    fields = {
        "run_name": "tiny",
        "preset": TINY,
        "batch_size": 8,
        "context_length": 16,
        "data_variant": "copy_spans",
        "variant_options": {"copy_rate": 1.0},
        "max_steps": 12,
    }
    fields.update(overrides)
    return TrainingRunConfig(**fields)


# --- TrainingRunConfig -------------------------------------------------------------------


def test_budget_from_tokens_rounds_up_and_takes_the_smaller():
    config = TrainingRunConfig("r", "p", batch_size=4, context_length=8, max_tokens=33)
    assert config.tokens_per_step == 32
    assert config.total_steps == 2  # ceil(33 / 32)
    config.max_tokens = 64
    assert config.total_steps == 2
    config.max_steps = 7
    assert config.total_steps == 2  # min(7, 2)
    config.max_tokens = None
    assert config.total_steps == 7


def test_no_budget_names_both_parameters():
    config = TrainingRunConfig("r", "p", batch_size=4, context_length=8)
    with pytest.raises(ValueError, match=r"^training\.max_steps / training\.max_tokens: give"):
        config.total_steps  # noqa: B018


def test_run_variant_options_add_the_step_budget():
    config = make_config(variant_options={"copy_rate": 0.5, "x": 3}, max_steps=9)
    assert config.run_variant_options == {"copy_rate": 0.5, "x": 3, "total_steps": 9}
    assert config.variant_options == {"copy_rate": 0.5, "x": 3}
    assert config.copy_rate == 0.5
    assert make_config(variant_options={}).copy_rate == 1.0
    assert make_config(data_variant="natural", variant_options={"copy_rate": 0.5}).copy_rate == 0.0


def test_params_are_the_fields_with_betas_as_a_list():
    config = make_config(betas=(0.8, 0.95), n_positions=32)
    params = config.params()
    assert params["betas"] == [0.8, 0.95] and isinstance(params["betas"], list)
    assert params["run_name"] == "tiny" and params["n_positions"] == 32
    assert params["preset"] == TINY and params["max_steps"] == 12
    assert config.betas == (0.8, 0.95)
    assert config.positions == 32


def test_config_defaults():
    config = TrainingRunConfig("r", "p", batch_size=1, context_length=2)
    assert (config.seed, config.data_variant, config.variant_options) == (0, "natural", {})
    assert config.n_positions is None and config.positions == 2
    assert config.learning_rate == 3e-3 and config.warmup_steps == 50
    assert config.schedule == "constant" and config.min_lr_ratio == 0.1
    assert config.betas == (0.9, 0.98) and config.eps == 1e-8
    assert (config.checkpoint_every, config.checkpoint_dense_until) == (250, 512)
    assert config.checkpoint_unit == "steps" and config.early_stop is True
    assert config.early_stop_threshold == 0.4 and config.early_stop_margin_factor == 1.5
    assert config.early_stop_min_extra_steps == 100 and config.deepspeed == {}


# --- validate_run_config -----------------------------------------------------------------

VALID_EDGES = [
    {},
    {"run_name": "A-z0.9_=x"},
    {"batch_size": np.int64(1)},
    {"context_length": 16, "n_positions": 16},
    {"preset": "attn-only-2l-d64"},
    {"variant_options": {"copy_rate": 0.0}},
    {"variant_options": {"copy_rate": 1.0}},
    {"variant_options": {"span_min_fraction": 0.25, "span_max_fraction": 0.25}},
    # C = 16: a span of round(0.5 * 16) = 8 tokens, source + copy = 16 <= C + 1 = 17.
    {"variant_options": {"span_max_fraction": 0.5}},
    # C = 15: round(8 / 15 * 15) = 8 tokens, source + copy = 16 = C + 1 still fits.
    {"context_length": 15, "variant_options": {"span_max_fraction": 8 / 15}},
    {"data_variant": "fixed_rate_copies", "variant_options": {}},
    {"learning_rate": 1e-12},
    {"warmup_steps": 0},
    {"weight_decay": 0.0},
    {"betas": (0.0, 0.999)},
    {"max_steps": 1},
    {"max_steps": None, "max_tokens": 1},
    {"checkpoint_unit": "tokens"},
    {"checkpoint_every": 1, "log_every": 1, "eval_every": 1},
    {"checkpoint_dense_until": 0},
    {"early_stop_margin_factor": 1.0},
    {"early_stop_min_extra_steps": 0},
    {"schedule": "cosine"},
    {"data_variant": "natural", "variant_options": {"span_max_fraction": 5.0}},
]


def test_param_names_grid_fields_and_falls_back_to_training():
    assert _param("seed") == "training.seeds" and _param("preset") == "training.presets"
    assert _param("learning_rate") == "training.learning_rate"


@pytest.mark.parametrize("overrides", VALID_EDGES)
def test_valid_edges_pass(overrides):
    assert validate_run_config(make_config(**overrides), 1, 17) is None


INVALID = [
    ({"run_name": ""}, "training.run_name: '' must be non-empty"),
    ({"run_name": "a b"}, "training.run_name: 'a b' must"),
    ({"batch_size": 8.0}, "training.batch_sizes: batch size must be a positive integer, got 8.0"),
    ({"batch_size": 0}, "training.batch_sizes: batch size must be a positive integer, got 0"),
    ({"context_length": 0}, "training.context_lengths: context length must be a positive"),
    ({"preset": "nope"}, "training.presets: unknown preset 'nope'; choose one of ['attn"),
    ({"preset": {"n_layer": 2}}, "training.presets: a preset is a name or a mapping with"),
    ({"preset": 5}, "training.presets: a preset is a name or a mapping with 'family'"),
    (
        {"context_length": 16, "n_positions": 15},
        "training.context_lengths: context length 16 exceeds the model's n_positions=15 "
        "(run 'tiny')",
    ),
    ({"data_variant": "mystery"}, "training.data_variants: unknown data variant 'mystery'"),
    ({"variant_options": {"copy_rate": -0.01}}, "training.copy_rate: must be in [0, 1], got"),
    ({"variant_options": {"copy_rate": 1.01}}, "training.copy_rate: must be in [0, 1], got 1.01"),
    (
        {"variant_options": {"span_min_fraction": 0.0}},
        "training.span_min_fraction / training.span_max_fraction: need 0 < min <= max, got "
        "0.0, 0.375",
    ),
    (
        {"variant_options": {"span_min_fraction": 0.3, "span_max_fraction": 0.25}},
        "training.span_min_fraction / training.span_max_fraction: need",
    ),
    # round(0.5625 * 16) = 9 tokens: 18 > C + 1 = 17.
    (
        {"variant_options": {"span_max_fraction": 0.5625}},
        "training.span_max_fraction: a span of up to 9 tokens (source + copy) is longer than "
        "the context of 16 tokens (run 'tiny')",
    ),
    ({"learning_rate": -1.0}, "training.learning_rate: must be positive, got -1.0"),
    ({"warmup_steps": -1}, "training.warmup_steps: must be >= 0, got -1"),
    ({"schedule": "linear"}, "training.schedule: 'linear' is not one of ('constant', 'cosine')"),
    ({"weight_decay": -0.01}, "training.weight_decay: must be >= 0, got -0.01"),
    ({"betas": (0.9,)}, "training.betas: need two values in [0, 1), got (0.9,)"),
    ({"betas": (0.9, 0.98, 0.5)}, "training.betas: need two values"),
    ({"betas": (1.0, 0.9)}, "training.betas: need two values"),
    ({"betas": (0.9, -0.1)}, "training.betas: need two values"),
    ({"max_steps": 0}, "training.max_steps: must be positive, got 0"),
    ({"max_tokens": -5}, "training.max_tokens: must be positive, got -5"),
    ({"checkpoint_unit": "epochs"}, "training.checkpoint_unit: 'steps' or 'tokens', got 'epochs'"),
    ({"checkpoint_every": 0}, "training.checkpoint_every: must be positive, got 0"),
    ({"log_every": 0}, "training.log_every: must be positive, got 0"),
    ({"eval_every": 0}, "training.online_emergence.eval_every: must be positive, got 0"),
    ({"checkpoint_dense_until": -1}, "training.checkpoint_dense_until: must be >= 0"),
    (
        {"early_stop_margin_factor": 0.99},
        "training.online_emergence.margin_factor: must be >= 1, got 0.99",
    ),
    ({"early_stop_min_extra_steps": -1}, "training.online_emergence.min_extra_steps: must be"),
    ({"deepspeed": [1]}, "training.deepspeed: must be a mapping (a DeepSpeed config dict)"),
    (
        {"deepspeed": {"scheduler": {}}},
        "training.deepspeed.scheduler: set the scheduler in training's parameters, not in the "
        "DeepSpeed config",
    ),
    (
        {"data_variant": "fixed_rate_copies", "variant_options": {"tokens_per_event": 0}},
        "training.variant_options.fixed_rate_copies.tokens_per_event: must be positive",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), INVALID)
def test_invalid_configs_fail_with_the_message(overrides, message):
    with pytest.raises(ValueError) as error:
        validate_run_config(make_config(**overrides), 1, 17)
    assert str(error.value).startswith(message)


def test_vocab_and_corpus_sizes():
    with pytest.raises(ValueError) as error:
        validate_run_config(make_config(), 0, 17)
    assert str(error.value) == "vocab_size: must be positive, got 0"
    with pytest.raises(ValueError) as error:
        validate_run_config(make_config(), 1, 16)
    assert str(error.value) == (
        "train_tokens: the corpus has 16 tokens, fewer than one sequence of "
        "context_length + 1 = 17 (run 'tiny')"
    )
