"""The LR schedule in tokens and fractions: ``warmup_fraction`` and ``horizon_tokens``.

The reference recipe (``t-aoyam/predict-ih-review``, ``src/training/lm_trainer.py``) trains
``max_steps = int(1e9 / (B·C))`` steps with ``warmup_steps = int(max_steps * 0.01)``: a warm-up
and a cosine horizon fixed in tokens, so their length in steps scales as ``1/(B·C)``.
"""

from __future__ import annotations

import math

import pytest

from ih_kedro.science.training.config import TrainingRunConfig, validate_run_config
from ih_kedro.science.training.distributed import build_engine, init_distributed
from ih_kedro.science.training.grid import expand_grid
from ih_kedro.science.training.models import build_model
from ih_kedro.science.training.schedules import lr_factor

PAPER_BATCH_SIZES = (32, 64, 128, 256, 512)
PAPER_CONTEXTS = (128, 256, 512, 1024)
TINY = {"family": "attention_only", "n_layer": 1, "n_head": 2, "d_model": 16}


def paper_config(batch_size: int, context_length: int, **overrides) -> TrainingRunConfig:
    fields = {
        "run_name": "paper",
        "preset": TINY,
        "batch_size": batch_size,
        "context_length": context_length,
        "data_variant": "natural",
        "learning_rate": 2.5e-4,
        "schedule": "cosine",
        "min_lr_ratio": 0.0,
        "warmup_steps": None,
        "warmup_fraction": 0.01,
        "horizon_tokens": 1_000_000_000,
    }
    fields.update(overrides)
    return TrainingRunConfig(**fields)


@pytest.mark.parametrize("batch_size", PAPER_BATCH_SIZES)
@pytest.mark.parametrize("context_length", PAPER_CONTEXTS)
def test_paper_grid_steps_are_the_reference_formula(batch_size, context_length):
    config = paper_config(batch_size, context_length)
    tokens_per_step = batch_size * context_length
    reference_max_steps = int(1e9 / tokens_per_step)  # lm_trainer.py
    assert config.lr_schedule_steps() == (int(reference_max_steps * 0.01), reference_max_steps)
    # No budget given: the run trains to the end of the cosine, as the reference.
    assert config.total_steps == reference_max_steps


def test_paper_grid_warmup_and_horizon_scale_as_one_over_bc():
    steps = {
        (b, c): paper_config(b, c).lr_schedule_steps()
        for b in PAPER_BATCH_SIZES
        for c in PAPER_CONTEXTS
    }
    for (b, c), (warmup, horizon) in steps.items():
        # horizon · B·C is the token budget up to the floor of one step
        assert 1e9 - b * c < horizon * b * c <= 1e9
        # warm-up · B·C is 1 % of it up to the floor of one step
        assert 1e7 - 2 * b * c < warmup * b * c <= 1e7
    # Doubling B or C halves both (to the step): the same token budget either way.
    for b, c in steps:
        if 2 * b in PAPER_BATCH_SIZES:
            assert abs(2 * steps[(2 * b, c)][1] - steps[(b, c)][1]) <= 1
            assert abs(2 * steps[(2 * b, c)][0] - steps[(b, c)][0]) <= 1
        if 2 * b in PAPER_BATCH_SIZES and 2 * c in PAPER_CONTEXTS:
            assert steps[(2 * b, c)] == steps[(b, 2 * c)]  # only B·C matters
    # The extremes, as numbers: B·C 4,096 and 524,288.
    assert steps[(32, 128)] == (2441, 244140)
    assert steps[(512, 1024)] == (19, 1907)


@pytest.mark.parametrize(
    ("step", "lr"),
    [
        (0, 2.5e-4 / 19),  # linear warm-up: (step + 1) / 19
        (9, 2.5e-4 * 10 / 19),
        (18, 2.5e-4),  # the last warm-up step reaches the peak
        (19, 2.5e-4),  # cosine progress 0
        (19 + 472, 2.5e-4 * 0.5 * (1 + math.cos(math.pi / 4))),  # progress 1/4: 2.13388e-4
        (19 + 944, 1.25e-4),  # progress 1/2
        (19 + 1416, 2.5e-4 * 0.5 * (1 + math.cos(3 * math.pi / 4))),  # 3/4: 3.66117e-5
        (1907, 0.0),  # the horizon: cosine to 0 (min_lr_ratio 0, as HF's cosine)
        (1908, 0.0),
    ],
)
def test_lr_curve_values_at_b512_c1024(step, lr):
    config = paper_config(512, 1024)
    warmup, horizon = config.lr_schedule_steps()
    assert (warmup, horizon) == (19, 1907)
    factor = lr_factor(step, warmup, config.schedule, horizon, config.min_lr_ratio)
    assert config.learning_rate * factor == pytest.approx(lr, rel=1e-12, abs=1e-18)


def test_the_curve_does_not_depend_on_where_the_run_stops():
    """An early-stopped run (or a smaller budget) follows the same LR curve to its stop."""
    full = paper_config(64, 256)
    short = paper_config(64, 256, max_tokens=50_000_000)
    assert short.total_steps == 3052 < full.total_steps == 61035
    assert short.lr_schedule_steps() == full.lr_schedule_steps() == (610, 61035)
    assert short.lr_schedule_steps(total_steps=10) == (610, 61035)


def test_steps_units_are_unchanged_and_fraction_of_the_budget():
    config = paper_config(8, 16, warmup_fraction=None, warmup_steps=7, horizon_tokens=None)
    config.max_steps = 100
    assert config.lr_schedule_steps() == (7, 100)
    assert config.lr_schedule_steps(total_steps=40) == (7, 40)
    config.decay_steps = 60
    assert config.lr_schedule_steps() == (7, 60)
    config.warmup_steps, config.warmup_fraction = None, 0.05
    assert config.lr_schedule_steps() == (3, 60)  # floor(0.05 * 60)
    config.decay_steps = None
    assert config.lr_schedule_steps() == (5, 100)  # 5 % of the budget


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"warmup_steps": 10}, r"^training\.warmup_fraction: give the warm-up once"),
        ({"warmup_fraction": None}, r"^training\.warmup_steps: null needs"),
        ({"warmup_fraction": 1.0}, r"^training\.warmup_fraction: must be in \[0, 1\)"),
        ({"warmup_fraction": -0.1}, r"^training\.warmup_fraction: must be in \[0, 1\)"),
        ({"decay_steps": 100}, r"^training\.horizon_tokens: give the horizon once"),
        ({"horizon_tokens": 127}, r"^training\.horizon_tokens: 127 tokens is less than one step"),
        (
            {"warmup_fraction": None, "warmup_steps": 8, "horizon_tokens": 8 * 128},
            r"^training\.warmup_steps: a warm-up of 8 steps does not end before the horizon",
        ),
    ],
)
def test_impossible_combinations_name_the_parameter(overrides, message):
    config = paper_config(8, 16, **overrides)
    with pytest.raises(ValueError, match=message):
        validate_run_config(config, vocab_size=64, corpus_tokens=10_000)


def test_valid_token_schedule_passes_validation():
    validate_run_config(paper_config(8, 16), vocab_size=64, corpus_tokens=10_000)
    # The smallest horizon: one step, no warm-up.
    validate_run_config(
        paper_config(8, 16, horizon_tokens=128, warmup_fraction=0.5),
        vocab_size=64,
        corpus_tokens=10_000,
    )


def test_grid_carries_the_token_schedule():
    params = {
        "presets": ["attn-only-2l-d64"],
        "batch_sizes": [8, 16],
        "context_lengths": [32],
        "data_variants": ["natural"],
        "seeds": [0],
        "schedule": "cosine",
        "warmup_steps": None,
        "warmup_fraction": "0.01",
        "horizon_tokens": 1.0e9,  # YAML's 1.0e9 is a float
        "max_tokens": None,
    }
    configs = expand_grid(params)
    assert [c.warmup_steps for c in configs] == [None, None]
    assert [c.warmup_fraction for c in configs] == [0.01, 0.01]
    assert [c.horizon_tokens for c in configs] == [1_000_000_000, 1_000_000_000]
    assert [c.lr_schedule_steps() for c in configs] == [(39062, 3906250), (19531, 1953125)]


def test_engine_schedules_the_token_horizon():
    """build_engine's LambdaLR follows lr_schedule_steps, not the run's budget."""
    init_distributed()
    config = paper_config(
        4,
        8,
        horizon_tokens=320,  # 10 steps of 32 tokens
        warmup_fraction=0.2,  # 2 steps
        max_steps=4,
        deepspeed={"zero_optimization": {"stage": 0}},
    )
    engine, _, scheduler = build_engine(build_model(TINY, 32, 8, seed=0), config, 4, 1)
    try:
        for step in range(12):
            assert scheduler.lr_lambdas[0](step) == lr_factor(step, 2, "cosine", 10, 0.0)
        assert scheduler.lr_lambdas[0](6) == pytest.approx(0.5)
    finally:
        engine.destroy()
