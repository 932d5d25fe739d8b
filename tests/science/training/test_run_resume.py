"""Interrupt a run mid-way, resume it, and get the uninterrupted run back bit for bit.

Everything a resumed run must restore is checked against a straight run of the same config:
the weights and AdamW state, the online evaluator's history, the early-stop state (the crossing
happened before the interruption, so a resumed run that forgot it would stop later), the
learning-rate schedule, and the MLflow run (the same run reopened, each step logged once).
Only the public ``train_run`` API is used, with the real DeepSpeed engine and a real SQLite
MLflow store.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.config import TrainingRunConfig
from ih_kedro.science.training.run import train_run
from ih_kedro.science.training.schedules import lr_factor

from .test_run import assert_same_state

VOCAB = 48
TINY = {"family": "attention_only", "n_layer": 2, "n_head": 2, "d_model": 32}
LEARNING_RATE = 1e-2


def make_packed() -> PackedTokens:
    rng = np.random.default_rng(0)
    cycle = np.arange(8_000) % (VOCAB - 1) + 1
    noise = rng.integers(1, VOCAB, size=8_000)
    tokens = np.where(rng.random(8_000) < 0.2, noise, cycle).astype(np.uint16)
    return PackedTokens(tokens=tokens, vocab_size=VOCAB, eos_token_id=0, checksum="resume")


def make_config() -> TrainingRunConfig:
    """Crossing at the first evaluation (step 2): stop at max(ceil(1.5 * 2), 2 + 8) = 10.

    A resumed run that lost the crossing would cross again at its first evaluation after the
    resume (step 8) and stop at 16 instead.
    """
    return TrainingRunConfig(
        run_name="resume",
        preset=TINY,
        batch_size=4,
        context_length=16,
        seed=3,
        data_variant="copy_spans",
        variant_options={"copy_rate": 1.0},
        learning_rate=LEARNING_RATE,
        warmup_steps=4,
        schedule="cosine",
        decay_steps=12,
        max_steps=20,
        checkpoint_every=100,
        checkpoint_dense_until=0,
        log_every=1,
        eval_every=2,
        early_stop_metric="ps_layer1",
        early_stop_threshold=0.0,
        early_stop_margin_factor=1.5,
        early_stop_min_extra_steps=8,
        deepspeed={"zero_optimization": {"stage": 0}},
    )


def make_evaluator():
    """The online evaluator's computation: best prefix-matching head per layer on fixed probes."""
    from ih_kedro.science.telemetry.probes import repeated_token_probes
    from ih_kedro.science.telemetry.scores import prefix_matching_scores

    probes = repeated_token_probes(4, 8, np.arange(1, VOCAB), seed=0)  # (4, 16)

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        scores = prefix_matching_scores(model, probes, batch_size=4)  # (layers, heads)
        return {"ps_layer1": float(scores[1].max()), "ps_layer0": float(scores[0].max())}

    return evaluate


def weights_and_optimizer(store: CheckpointStore, name: str) -> tuple[dict, dict]:
    step = store.checkpoint_steps(name)[-1]
    weights = load_file(store.checkpoint_dir(name, step) / "model.safetensors")
    tag = store.latest_deepspeed_tag(name)
    blob = torch.load(
        store.deepspeed_dir(name) / tag / "mp_rank_00_model_states.pt", weights_only=False
    )
    return weights, blob["optimizer"]["state"]


def history(client, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> dict:
    """The uninterrupted run, tracked in the session's MLflow store."""
    from ih_kedro.science.training.tracking import MlflowTracker

    store = CheckpointStore(tmp_path_factory.mktemp("straight"))
    tracker = MlflowTracker(experiment_name=f"resume-straight-{uuid.uuid4().hex[:8]}")
    summary = train_run(make_config(), make_packed(), store, tracker, make_evaluator())
    return {"store": store, "summary": summary}


def check_resumed_equals_straight(store: CheckpointStore, summary: dict, straight: dict) -> None:
    from mlflow.tracking import MlflowClient

    reference = straight["summary"]
    assert summary["stop_reason"] == reference["stop_reason"] == "emerged"
    assert summary["online_emergence_step"] == reference["online_emergence_step"] == 2.0
    assert summary["steps_trained"] == reference["steps_trained"] == 10
    assert summary["evaluations"] == reference["evaluations"]  # the evaluator's floats, exactly
    assert [e["step"] for e in summary["evaluations"]] == [2, 4, 6, 8, 10]
    assert summary["final_loss"] == reference["final_loss"]
    assert summary["copied_token_fraction"] == reference["copied_token_fraction"]
    assert store.checkpoint_steps("resume") == straight["store"].checkpoint_steps("resume")
    assert store.checkpoint_steps("resume") == [0, 2, 4, 6, 8, 10]
    assert_same_state(
        weights_and_optimizer(straight["store"], "resume"), weights_and_optimizer(store, "resume")
    )

    client = MlflowClient()
    run = client.get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.tags["run_name"] == "resume"
    for key in ("loss", "lr", "ps_layer1", "ps_layer0"):
        logged = history(client, summary["mlflow_run_id"], key)
        steps = [step for step, _ in logged]
        assert len(steps) == len(set(steps)), f"{key} logged twice at a step: {steps}"
        assert logged == history(client, reference["mlflow_run_id"], key), key
    # The engine's learning rate after step s is base * lr_factor(s) (cosine to 0.1 at 12).
    lrs = dict(history(client, summary["mlflow_run_id"], "lr"))
    assert sorted(lrs) == list(range(1, 11))
    for step, value in lrs.items():
        expected = LEARNING_RATE * lr_factor(step, 4, "cosine", 12, 0.1)
        assert value == pytest.approx(expected, rel=1e-6), step
    assert lrs[8] == pytest.approx(LEARNING_RATE * (0.1 + 0.45 * (1 + math.cos(math.pi / 2))))


def test_exception_mid_run_then_resume_equals_straight_run(tmp_path, straight):
    from ih_kedro.science.training.tracking import MlflowTracker

    class Interrupt(RuntimeError):
        pass

    def interrupt(step: int) -> None:
        if step == 7:  # one step after the checkpoint at step 6, past the crossing at 2
            raise Interrupt

    store = CheckpointStore(tmp_path)
    tracker = MlflowTracker(experiment_name=f"resume-{uuid.uuid4().hex[:8]}")
    with pytest.raises(Interrupt):
        train_run(
            make_config(), make_packed(), store, tracker, make_evaluator(), step_hook=interrupt
        )
    assert store.read_summary("resume") is None
    assert store.latest_deepspeed_tag("resume") == "step_0000006"
    summary = train_run(make_config(), make_packed(), store, tracker, make_evaluator())
    check_resumed_equals_straight(store, summary, straight)


KILL_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, uuid
    sys.path.insert(0, {tests!r})
    from science.training.test_run_resume import make_config, make_evaluator, make_packed
    from ih_kedro.science.training.tracking import MlflowTracker
    from ih_kedro.science.training.checkpoints import CheckpointStore
    from ih_kedro.science.training.run import train_run

    def kill(step):
        if step == 7:
            os.kill(os.getpid(), signal.SIGKILL)

    tracker = MlflowTracker(experiment_name="resume-killed-" + uuid.uuid4().hex[:8])
    train_run(
        make_config(), make_packed(), CheckpointStore({root!r}), tracker, make_evaluator(),
        step_hook=kill,
    )
    """
)


def test_sigkill_mid_run_then_resume_equals_straight_run(tmp_path, straight):
    """The process dies at step 7 with no chance to clean up (the MLflow run stays RUNNING)."""
    from mlflow.tracking import MlflowClient

    root = tmp_path / "killed"
    script = tmp_path / "run.py"
    tests = Path(__file__).resolve().parents[2]
    script.write_text(KILL_SCRIPT.format(tests=str(tests), root=str(root)))
    # This process's one-rank group holds MASTER_PORT: the child picks its own.
    rendezvous = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}
    env = {k: v for k, v in os.environ.items() if k not in rendezvous}
    env["PYTHONPATH"] = str(tests.parent / "src")
    result = subprocess.run([sys.executable, str(script)], env=env, timeout=300, check=False)
    assert result.returncode == -signal.SIGKILL
    store = CheckpointStore(root)
    assert store.read_summary("resume") is None
    assert store.latest_deepspeed_tag("resume") == "step_0000006"
    killed_run = store.checkpoint_steps("resume")
    assert killed_run == [0, 2, 4, 6]
    from ih_kedro.science.training.tracking import MlflowTracker

    summary = train_run(make_config(), make_packed(), store, MlflowTracker(), make_evaluator())
    check_resumed_equals_straight(store, summary, straight)
    assert MlflowClient().get_run(summary["mlflow_run_id"]).info.status == "FINISHED"
