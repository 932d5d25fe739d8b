"""The DeepSpeed training loop: learning, resume, early stop, HF checkpoints, kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.config import TrainingRunConfig
from ih_kedro.science.training.run import train_run

TINY = {"family": "attention_only", "n_layer": 2, "n_head": 2, "d_model": 32}
VOCAB = 64


def make_packed(n_tokens: int = 20_000, seed: int = 0) -> PackedTokens:
    """A learnable stream: a noisy cycle through the vocabulary."""
    rng = np.random.default_rng(seed)
    cycle = np.arange(n_tokens) % (VOCAB - 1) + 1
    noise = rng.integers(1, VOCAB, size=n_tokens)
    tokens = np.where(rng.random(n_tokens) < 0.2, noise, cycle).astype(np.uint16)
    return PackedTokens(tokens=tokens, vocab_size=VOCAB, eos_token_id=0, checksum="test")


def make_config(name: str = "tiny", **overrides) -> TrainingRunConfig:
    fields = {
        "run_name": name,
        "preset": TINY,
        "batch_size": 8,
        "context_length": 16,
        "seed": 0,
        "data_variant": "copy_spans",
        "variant_options": {"copy_rate": 1.0},
        "learning_rate": 1e-2,
        "warmup_steps": 2,
        "max_steps": 12,
        "checkpoint_every": 4,
        "checkpoint_dense_until": 0,
        "log_every": 2,
        "eval_every": 2,
        "deepspeed": {"zero_optimization": {"stage": 0}},
    }
    fields.update(overrides)
    return TrainingRunConfig(**fields)


class RecordingTracker:
    """A tracker that keeps everything in memory."""

    def __init__(self) -> None:
        self.metrics: list[tuple[int, dict]] = []
        self.artifacts: list[str] = []
        self.runs: list[str] = []

    def run(self, name, params, run_id=None):  # noqa: ANN001, ANN201
        import contextlib

        self.runs.append(name)
        return contextlib.nullcontext(f"id-{name}")

    def log_metrics(self, metrics, step):  # noqa: ANN001, ANN201
        self.metrics.append((step, dict(metrics)))

    def log_artifact(self, path):  # noqa: ANN001, ANN201
        self.artifacts.append(path)


def final_state(store: CheckpointStore, name: str) -> tuple[dict, dict]:
    """HF weights of the last checkpoint and the DeepSpeed optimizer state."""
    step = store.checkpoint_steps(name)[-1]
    weights = load_file(store.checkpoint_dir(name, step) / "model.safetensors")
    ds_dir = store.deepspeed_dir(name)
    tag = store.latest_deepspeed_tag(name)
    blob = torch.load(ds_dir / tag / "mp_rank_00_model_states.pt", weights_only=False)
    return weights, blob["optimizer"]["state"]


def assert_same_state(a: tuple[dict, dict], b: tuple[dict, dict]) -> None:
    weights_a, opt_a = a
    weights_b, opt_b = b
    assert weights_a.keys() == weights_b.keys()
    for key in weights_a:
        assert torch.equal(weights_a[key], weights_b[key]), key
    assert opt_a.keys() == opt_b.keys()
    for index in opt_a:
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(opt_a[index][key], opt_b[index][key]), (index, key)


@pytest.mark.parametrize("stage", [1, 2])
def test_zero_partitioned_run_with_one_rank_trains_as_zero_0(tmp_path, stage):
    """ZeRO-1/2 in a world of one (the paper configuration: one rank per run) trains, and in fp32
    reaches the weights of the ZeRO-0 run: its gradients must reach the ZeRO optimizer."""
    plain = CheckpointStore(tmp_path / "zero0")
    train_run(make_config(), make_packed(), plain)
    zero = CheckpointStore(tmp_path / f"zero{stage}")
    summary = train_run(
        make_config(deepspeed={"zero_optimization": {"stage": stage}}), make_packed(), zero
    )
    assert summary["steps_trained"] == 12 and np.isfinite(summary["final_loss"])
    expected = load_file(plain.checkpoint_dir("tiny", 12) / "model.safetensors")
    actual = load_file(zero.checkpoint_dir("tiny", 12) / "model.safetensors")
    initial = load_file(plain.checkpoint_dir("tiny", 0) / "model.safetensors")
    for key in expected:
        assert not torch.equal(expected[key], initial[key]) or expected[key].numel() == 0, key
        torch.testing.assert_close(actual[key], expected[key], rtol=1e-5, atol=1e-6)


def test_bf16_zero_2_run_with_one_rank_learns(tmp_path):
    """The paper's DeepSpeed set-up (bf16, ZeRO-2, clipping 1.0) with one rank: loss goes down."""
    tracker = RecordingTracker()
    deepspeed = {"zero_optimization": {"stage": 2}, "bf16": {"enabled": True},
                 "gradient_clipping": 1.0}  # fmt: skip
    config = make_config(max_steps=40, log_every=5, checkpoint_every=40, deepspeed=deepspeed)
    train_run(config, make_packed(), CheckpointStore(tmp_path), tracker=tracker)
    losses = [m["loss"] for _, m in tracker.metrics if "loss" in m]
    assert losses[-1] < losses[0] - 0.5


@pytest.mark.parametrize("stage", [0, 2])
def test_micro_batches_accumulate_to_the_whole_batch_step(tmp_path, stage):
    """Gradient accumulation over micro-batches (2 passes of 4 rows for B=8) takes the steps of
    the one-pass run: same losses, LR schedule and (fp32, up to summation order) weights."""
    deepspeed = {"zero_optimization": {"stage": stage}}
    whole, split = RecordingTracker(), RecordingTracker()
    train_run(make_config(deepspeed=deepspeed), make_packed(), CheckpointStore(tmp_path / "a"),
              tracker=whole)  # fmt: skip
    config = make_config(deepspeed=deepspeed, micro_batch_tokens=4 * 16)
    assert config.micro_batch_rows() == 4
    store = CheckpointStore(tmp_path / "b")
    summary = train_run(config, make_packed(), store, tracker=split)
    assert summary["steps_trained"] == 12 and summary["tokens_seen"] == 12 * 8 * 16

    def logged(tracker, key):
        return [m[key] for _, m in tracker.metrics if key in m]

    assert logged(split, "lr") == logged(whole, "lr")
    np.testing.assert_allclose(logged(split, "loss"), logged(whole, "loss"), rtol=1e-5)
    expected = load_file(
        CheckpointStore(tmp_path / "a").checkpoint_dir("tiny", 12) / "model.safetensors"
    )
    actual = load_file(store.checkpoint_dir("tiny", 12) / "model.safetensors")
    for key in expected:
        torch.testing.assert_close(actual[key], expected[key], rtol=1e-4, atol=1e-6)


def test_deepspeed_training_reduces_loss(tmp_path):
    tracker = RecordingTracker()
    config = make_config(max_steps=40, log_every=5, checkpoint_every=40)
    summary = train_run(config, make_packed(), CheckpointStore(tmp_path), tracker=tracker)
    losses = [m["loss"] for _, m in tracker.metrics if "loss" in m]
    assert losses[-1] < losses[0] - 0.5
    assert summary["steps_trained"] == 40
    assert summary["tokens_seen"] == 40 * 8 * 16
    assert summary["stop_reason"] == "budget"
    assert np.isnan(summary["online_emergence_step"])
    assert summary["flops"] > 0 and summary["n_parameters"] > 0
    assert 0.1 < summary["copied_token_fraction"] < 0.5
    logged = tracker.metrics[0][1]
    assert {"loss", "lr", "tokens_seen", "flops", "tokens_per_second"} <= logged.keys()


def test_resume_after_interruption_equals_straight_run(tmp_path):
    packed = make_packed()
    straight = CheckpointStore(tmp_path / "straight")
    train_run(make_config(), packed, straight)

    class Interrupt(RuntimeError):
        pass

    def interrupt(step: int) -> None:
        if step == 6:  # two steps after the checkpoint at step 4
            raise Interrupt

    resumed = CheckpointStore(tmp_path / "resumed")
    with pytest.raises(Interrupt):
        train_run(make_config(), packed, resumed, step_hook=interrupt)
    assert resumed.read_summary("tiny") is None
    assert resumed.latest_deepspeed_tag("tiny") == "step_0000004"
    summary = train_run(make_config(), packed, resumed)
    assert summary["steps_trained"] == 12
    assert_same_state(final_state(straight, "tiny"), final_state(resumed, "tiny"))
    # Only the latest DeepSpeed state is kept.
    tags = [p.name for p in resumed.deepspeed_dir("tiny").iterdir() if p.is_dir()]
    assert tags == ["step_0000012"]
    assert resumed.checkpoint_steps("tiny") == [0, 4, 8, 12]


def test_early_stop_on_emergence_with_dense_checkpoints(tmp_path):
    calls = {"n": 0}

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        assert not model.training
        calls["n"] += 1
        return {"ps": 0.2 * calls["n"]}  # 0.2, 0.4, 0.6 at steps 2, 4, 6

    config = make_config(
        max_steps=40,
        checkpoint_every=100,
        early_stop_metric="ps",
        early_stop_threshold=0.5,
        early_stop_margin_factor=1.5,
        early_stop_min_extra_steps=2,
    )
    store = CheckpointStore(tmp_path)
    summary = train_run(config, make_packed(), store, evaluate=evaluate)
    assert summary["online_emergence_step"] == 6.0
    assert summary["stop_reason"] == "emerged"
    assert summary["steps_trained"] == 9  # max(ceil(1.5 * 6), 6 + 2)
    assert store.checkpoint_steps("tiny") == [0, 6, 8, 9]
    assert [e["step"] for e in summary["evaluations"]] == [2, 4, 6, 8]
    again = train_run(config, make_packed(), store, evaluate=evaluate)
    assert again["stop_reason"] == "already_complete"
    assert again["steps_trained"] == 9


def test_hf_checkpoints_load_with_auto_model(tmp_path):
    from transformers import AutoModelForCausalLM

    import ih_kedro.science.training.models  # noqa: F401 - registers the attention-only model

    store = CheckpointStore(tmp_path)
    train_run(make_config(max_steps=4), make_packed(), store)
    folder = store.checkpoint_dir("tiny", 4)
    state = json.loads((folder / "trainer_state.json").read_text())
    assert state["step"] == 4 and state["tokens_seen"] == 4 * 8 * 16
    assert set(state) == {
        "run_name",
        "step",
        "tokens_seen",
        "batch_size",
        "context_length",
        "seed",
        "preset",
    }
    model = AutoModelForCausalLM.from_pretrained(folder)
    logits = model(input_ids=torch.zeros(1, 16, dtype=torch.long)).logits  # (1, 16, vocab)
    assert logits.shape == (1, 16, VOCAB)


KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    sys.path.insert(0, {tests!r})
    from science.training.test_run import make_config, make_packed
    from ih_kedro.science.training.checkpoints import CheckpointStore
    from ih_kedro.science.training.run import train_run

    def slow(step):
        time.sleep(0.3)

    train_run(make_config(max_steps=40), make_packed(), CheckpointStore({root!r}), step_hook=slow)
    """
)


@pytest.fixture()
def private_tmp():
    """A temp folder outside pytest's basetemp, which concurrent sessions may prune."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ih-kedro-kill-") as folder:
        yield Path(folder)


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_equals_straight_run(private_tmp):
    tmp_path = private_tmp
    packed = make_packed()
    straight = CheckpointStore(tmp_path / "straight")
    train_run(make_config(max_steps=40), packed, straight)

    root = tmp_path / "killed"
    script = tmp_path / "run.py"
    script.write_text(
        KILL_SCRIPT.format(tests=str(Path(__file__).resolve().parents[2]), root=str(root))
    )
    # This process's one-rank group holds MASTER_PORT: the child picks its own.
    rendezvous = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}
    env = {k: v for k, v in os.environ.items() if k not in rendezvous}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2].parent / "src")
    process = subprocess.Popen([sys.executable, str(script)], env=env)
    store = CheckpointStore(root)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and max(store.checkpoint_steps("tiny"), default=0) < 12:
        assert process.poll() is None, "the training subprocess died before the kill"
        time.sleep(0.1)
    time.sleep(0.45)  # land somewhere between checkpoints, possibly inside a save
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert store.read_summary("tiny") is None
    summary = train_run(make_config(max_steps=40), packed, store)
    assert summary["steps_trained"] == 40
    assert_same_state(final_state(straight, "tiny"), final_state(store, "tiny"))
