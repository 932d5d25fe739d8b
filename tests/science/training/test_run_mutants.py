"""Exact values and boundaries of training's pure helpers (mutation-testing kills).

Config budgets and params, every ``validate_run_config`` boundary (the valid edge passes, one
step past it fails naming the parameter), checkpoint schedules, the early-stop defaults, the
checkpoint store's layout, and the per-run DeepSpeed config. No engine is built here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ih_kedro.science.training.run import (
    CheckpointStore,
    EarlyStopOnEmergence,
    TrainingRunConfig,
    _atomic_write_text,
    _json_default,
    _param,
    checkpoint_schedule,
    deepspeed_config_for_run,
    validate_run_config,
)

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


# --- CheckpointStore ---------------------------------------------------------------------


class FakeModel:
    """Anything with ``save_pretrained`` will do for the store."""

    def save_pretrained(self, folder: Path) -> None:
        (Path(folder) / "model.txt").write_text("weights")


def test_store_layout_and_repr(tmp_path):
    root = tmp_path / "a" / "b"
    store = CheckpointStore(root)
    assert root.is_dir() and store.root == root.resolve()
    assert CheckpointStore(root).root == store.root  # an existing root is fine
    assert repr(store) == f"CheckpointStore({str(root.resolve())!r})"
    assert store.run_dir("r") == root / "r"
    assert store.checkpoints_dir("r") == root / "r" / "checkpoints"
    assert store.deepspeed_dir("r") == root / "r" / "deepspeed"
    assert store.summary_path("r") == root / "r" / "run_summary.json"
    assert store.checkpoint_dir("r", 42) == root / "r" / "checkpoints" / "step_0000042"
    assert store.runs() == []
    (root / "zeta").mkdir()
    (root / "alpha").mkdir()
    (root / "file.txt").write_text("x")
    assert store.runs() == ["alpha", "zeta"]


def test_checkpoint_steps_only_complete_and_sorted(tmp_path):
    store = CheckpointStore(tmp_path)
    assert store.checkpoint_steps("r") == []
    folder = store.checkpoints_dir("r")
    for name in ("step_0000010", "step_0000002", "step_0000100"):
        (folder / name).mkdir(parents=True)
        (folder / name / "trainer_state.json").write_text("{}")
    (folder / "step_0000050").mkdir()  # torn: no trainer_state.json
    (folder / "step_0000060.tmp").mkdir()
    (folder / "step_0000060.tmp" / "trainer_state.json").write_text("{}")
    (folder / "step_0000070").mkdir()
    (folder / "step_0000070" / "trainer_state.json").mkdir()  # not a file
    assert store.checkpoint_steps("r") == [2, 10, 100]


def test_summary_round_trip(tmp_path):
    store = CheckpointStore(tmp_path)
    assert store.read_summary("r") is None
    store.run_dir("r").mkdir()
    summary = {"n": np.int64(3), "x": np.float32(0.5), "dir": Path("a/b"), "t": (1, 2)}
    path = store.write_summary("r", summary)
    assert path == store.summary_path("r")
    expected = {"n": 3, "x": 0.5, "dir": "a/b", "t": [1, 2]}
    assert path.read_text() == json.dumps(expected, indent=2)
    assert store.read_summary("r") == expected
    assert sorted(p.name for p in store.run_dir("r").iterdir()) == ["run_summary.json"]


def test_save_hf_checkpoint_is_atomic_and_restores_progress_bars(tmp_path):
    from transformers.utils import logging as hf_logging

    store = CheckpointStore(tmp_path)
    was_enabled = hf_logging.is_progress_bar_enabled()
    try:
        hf_logging.enable_progress_bar()
        final = store.save_hf_checkpoint("r", 5, FakeModel(), {"step": 5})
        assert hf_logging.is_progress_bar_enabled()
        assert final == store.checkpoint_dir("r", 5)
        assert (final / "model.txt").read_text() == "weights"
        assert (final / "trainer_state.json").read_text() == json.dumps({"step": 5}, indent=2)
        # A stale temp folder and an existing final folder are replaced.
        stale = final.with_name(final.name + ".tmp")
        stale.mkdir()
        (stale / "junk").write_text("x")
        (final / "old").write_text("x")
        hf_logging.disable_progress_bar()
        assert store.save_hf_checkpoint("r", 5, FakeModel(), {"step": 6}) == final
        assert not hf_logging.is_progress_bar_enabled()
        assert sorted(p.name for p in final.iterdir()) == ["model.txt", "trainer_state.json"]
        assert json.loads((final / "trainer_state.json").read_text()) == {"step": 6}
        assert sorted(p.name for p in store.checkpoints_dir("r").iterdir()) == ["step_0000005"]
        assert store.checkpoint_steps("r") == [5]
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()
        else:
            hf_logging.disable_progress_bar()


def test_latest_deepspeed_tag_and_prune(tmp_path):
    store = CheckpointStore(tmp_path)
    assert store.latest_deepspeed_tag("r") is None
    folder = store.deepspeed_dir("r")
    folder.mkdir(parents=True)
    assert store.latest_deepspeed_tag("r") is None
    for name in ("step_0000004", "step_0000012", "step_0000008", "other"):
        (folder / name).mkdir()
    (folder / "step_0000099").write_text("a file, not a tag")
    assert store.latest_deepspeed_tag("r") == "step_0000012"  # no latest: the highest tag
    (folder / "latest").write_text(" step_0000008\n")
    assert store.latest_deepspeed_tag("r") == "step_0000008"
    (folder / "latest").write_text("step_0000020")  # torn: names a missing tag
    assert store.latest_deepspeed_tag("r") == "step_0000012"
    (folder / "latest").write_text("  ")
    assert store.latest_deepspeed_tag("r") == "step_0000012"
    # A tag that cannot be deleted (rmtree refuses a symlink) is left, not an error.
    (folder / "step_0000003").symlink_to(folder / "other", target_is_directory=True)
    store.prune_deepspeed("r", keep="step_0000008")
    assert sorted(p.name for p in folder.iterdir()) == [
        "latest",
        "other",
        "step_0000003",
        "step_0000008",
        "step_0000099",
    ]


def test_atomic_write_and_json_default(tmp_path):
    path = tmp_path / "f.json"
    path.write_text("old")
    _atomic_write_text(path, "new")
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]
    value = _json_default(np.float32(0.25))
    assert value == 0.25 and type(value) is float
    assert _json_default(Path("x") / "y") == "x/y"
    assert _json_default((1, "a")) == [1, "a"]
    with pytest.raises(TypeError) as error:
        _json_default({1, 2})
    assert str(error.value) == "not JSON serialisable: <class 'set'>"


# --- deepspeed_config_for_run ------------------------------------------------------------


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
