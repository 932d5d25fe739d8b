"""Exact values of the DeepSpeed training loop, checked against a plain-torch replay.

On CPU a DeepSpeed ZeRO-0 engine with the run's torch AdamW and LR schedule gives the same
numbers as a plain torch loop over the same batches (``sample_batch(seed, step)``). So each
test trains a tiny run through ``train_run`` and compares it with :func:`replay`: the logged
losses and learning rates, the variant-token metrics, the weights at every HF checkpoint, the
DeepSpeed client state, the summary and what the tracker received. ``time.perf_counter`` is
replaced by a clock that advances one second per call, so wall times and throughput are exact
numbers too. The engine's optimizer and schedule (``build_engine``) and the one-rank process
group (``init_distributed``) are checked on their own in ``test_distributed.py``.
"""

from __future__ import annotations

import contextlib
import json
import math
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from deepspeed.runtime.utils import clip_grad_norm_
from safetensors.torch import load_file

from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.variants.copies import count_copy_events
from ih_kedro.science.training import run as training
from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.config import TrainingRunConfig
from ih_kedro.science.training.distributed import init_distributed
from ih_kedro.science.training.models import build_model, training_flops_per_token
from ih_kedro.science.training.run import train_run
from ih_kedro.science.training.schedules import lr_factor

TINY = {"family": "attention_only", "n_layer": 2, "n_head": 2, "d_model": 32}
VOCAB = 64
B, C = 4, 16
TOKENS_PER_STEP = B * C


def make_packed(n_tokens: int = 4_000, seed: int = 0) -> PackedTokens:
    """A learnable stream: a noisy cycle through the vocabulary."""
    rng = np.random.default_rng(seed)
    cycle = np.arange(n_tokens) % (VOCAB - 1) + 1
    noise = rng.integers(1, VOCAB, size=n_tokens)
    tokens = np.where(rng.random(n_tokens) < 0.2, noise, cycle).astype(np.uint16)
    return PackedTokens(tokens=tokens, vocab_size=VOCAB, eos_token_id=0, checksum="engine")


def make_config(name: str, **overrides: Any) -> TrainingRunConfig:
    fields: dict[str, Any] = {
        "run_name": name,
        "preset": TINY,
        "batch_size": B,
        "context_length": C,
        "data_variant": "copy_spans",
        "variant_options": {"copy_rate": 1.0},
        "learning_rate": 1e-2,
        "warmup_steps": 1,
        "checkpoint_every": 100,
        "checkpoint_dense_until": 0,
        "log_every": 2,
        "eval_every": 2,
        "early_stop_metric": "ps",
        "deepspeed": {"zero_optimization": {"stage": 0}},
    }
    fields.update(overrides)
    return TrainingRunConfig(**fields)


class Tracker:
    """Keeps every call: ``run(name, params, run_id)``, metrics by step, artifacts."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.runs: list[tuple[str, dict[str, Any], str | None]] = []
        self.metrics: list[tuple[int, dict[str, float]]] = []
        self.artifacts: list[str] = []

    @contextlib.contextmanager
    def run(self, name: str, params: dict[str, Any], run_id: str | None = None) -> Iterator[str]:
        self.runs.append((name, dict(params), run_id))
        yield run_id or self.run_id

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self.metrics.append((step, dict(metrics)))

    def log_artifact(self, path: str) -> None:
        self.artifacts.append(path)


def fake_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """``time.perf_counter`` in the training module returns 1, 2, 3, … (one per call)."""
    ticks = iter(range(1, 10_000))
    monkeypatch.setattr(training, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))


class Evaluator:
    """Returns the next value of ``values`` as ``{"ps": tensor}``; records the model's mode."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)
        self.calls: list[tuple[bool, bool]] = []  # (model.training, grad enabled)
        self.module: torch.nn.Module | None = None

    def __call__(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        self.module = model
        self.calls.append((model.training, torch.is_grad_enabled()))
        return {"ps": torch.tensor(self.values.pop(0), dtype=torch.float64)}


def replay(config: TrainingRunConfig, packed: PackedTokens, steps: int) -> dict[str, Any]:
    """The run in plain torch: losses, lrs, weights after each step, the batches' masks.

    As the engine does: AdamW with decay on matrices, ``lr_factor`` per step, gradients clipped
    to norm 1 (DeepSpeed's default ``gradient_clipping``) by DeepSpeed's own function.
    """
    init_distributed()  # DeepSpeed's clip_grad_norm_ asks for the data-parallel group
    model = build_model(
        config.preset,
        packed.vocab_size,
        config.positions,
        seed=config.seed,
        attn_implementation=config.attn_implementation,
    )
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": config.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=config.learning_rate,
        betas=config.betas,
        eps=config.eps,
    )
    horizon = config.decay_steps or config.total_steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: lr_factor(s, config.warmup_steps, config.schedule, horizon, config.min_lr_ratio),
    )
    out: dict[str, Any] = {
        "losses": [],
        "lrs": [],
        "copied": [],
        "weights": [{k: v.clone() for k, v in model.state_dict().items()}],
    }
    for step in range(steps):
        batch = sample_batch(
            packed.tokens,
            config.batch_size,
            config.context_length,
            config.seed,
            step,
            data_variant=config.data_variant,
            variant_options=config.run_variant_options,
        )
        logits = model(input_ids=batch.tokens[:, :-1]).logits  # (B, C, vocab)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)).float(), batch.tokens[:, 1:].reshape(-1)
        )
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm_(model.parameters(), max_norm=1.0)  # DeepSpeed's default clipping
        optimizer.step()
        scheduler.step()
        out["losses"].append(loss.detach())
        out["lrs"].append(scheduler.get_last_lr()[0])
        out["copied"].append(batch.copied)
        out["weights"].append({k: v.clone() for k, v in model.state_dict().items()})
    out["n_parameters"] = sum(p.numel() for p in model.parameters())
    out["flops_per_token"] = training_flops_per_token(model, config.context_length)
    return out


def window_mean(losses: list[torch.Tensor]) -> float:
    total = torch.zeros(())
    for loss in losses:
        total += loss
    return float(total) / len(losses)


def log_metrics(ref: dict[str, Any], first: int, last: int, elapsed: float) -> dict[str, float]:
    """The loss-window metrics logged at step ``last`` for the window of steps first…last."""
    window = ref["copied"][first - 1 : last]
    every = ref["copied"][:last]
    copied = sum(int(m.sum()) for m in window)
    tokens_seen = last * TOKENS_PER_STEP
    return {
        "loss": window_mean(ref["losses"][first - 1 : last]),
        "lr": ref["lrs"][last - 1],
        "tokens_seen": float(tokens_seen),
        "flops": ref["flops_per_token"] * tokens_seen,
        "tokens_per_second": len(window) * TOKENS_PER_STEP / elapsed,
        "copied_token_fraction": sum(int(m.sum()) for m in every) / sum(m.size for m in every),
        "variant_tokens_per_step": copied / len(window),
        "variant_batch_share": copied / (len(window) * window[0].size),
    }


def assert_metrics(got: list[tuple[int, dict]], expected: list[tuple[int, dict]]) -> None:
    assert [step for step, _ in got] == [step for step, _ in expected]
    for (step, values), (_, wanted) in zip(got, expected, strict=True):
        assert values.keys() == wanted.keys(), step
        for key, value in wanted.items():
            assert values[key] == pytest.approx(value, rel=1e-6), (step, key)


def assert_weights(store: CheckpointStore, name: str, ref: dict[str, Any]) -> None:
    for step in store.checkpoint_steps(name):
        weights = load_file(store.checkpoint_dir(name, step) / "model.safetensors")
        expected = ref["weights"][step]
        assert weights.keys() == expected.keys()
        for key, value in expected.items():
            assert torch.equal(weights[key], value), (step, key)


def client_state(store: CheckpointStore, name: str) -> dict[str, Any]:
    tag = store.latest_deepspeed_tag(name)
    blob = torch.load(
        store.deepspeed_dir(name) / tag / "mp_rank_00_model_states.pt", weights_only=False
    )
    return blob["ih_state"]


def trainer_state(name: str, config: TrainingRunConfig, step: int) -> dict[str, Any]:
    return {
        "run_name": name,
        "step": step,
        "tokens_seen": step * TOKENS_PER_STEP,
        "batch_size": B,
        "context_length": C,
        "seed": config.seed,
        "preset": TINY,
    }


def copy_totals(ref: dict[str, Any], steps: int) -> dict[str, int]:
    masks = ref["copied"][:steps]
    return {
        "copied_tokens": sum(int(m.sum()) for m in masks),
        "copy_events": sum(count_copy_events(m) for m in masks),
        "sequences": sum(m.shape[0] for m in masks),
        "batch_tokens": sum(m.size for m in masks),
    }


def test_train_run_matches_a_torch_replay_step_by_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schedule {0, 1, 2, 4, 5}: powers of two up to 2, every 4, the last step 5."""
    config = make_config(
        "golden",
        seed=3,
        n_positions=24,
        attn_implementation="eager",
        variant_options={"copy_rate": 0.5},
        schedule="cosine",
        min_lr_ratio=0.2,
        weight_decay=0.05,
        betas=(0.85, 0.95),
        eps=1e-7,
        max_steps=5,
        checkpoint_every=4,
        checkpoint_dense_until=2,
        early_stop_threshold=0.9,
    )
    packed = make_packed()
    ref = replay(config, packed, 5)
    store = CheckpointStore(tmp_path)
    tracker = Tracker("id-golden")
    evaluator = Evaluator(0.25, 0.5)
    hooked: list[tuple[int, bool]] = []

    def hook(step: int) -> None:
        hooked.append((step, evaluator.module.training if evaluator.module else True))

    fake_clock(monkeypatch)
    summary = train_run(config, packed, store, tracker, evaluator, step_hook=hook)

    # Clock: segment start 1, window start 2; step 1 saves (3); step 2 logs (4), restarts the
    # window (5), saves (6); step 4 logs (7), restarts (8), saves (9); step 5 logs (10),
    # restarts (11), saves (12); the end reads 13. Wall = tick - 1.
    totals = copy_totals(ref, 5)
    fraction = totals["copied_tokens"] / totals["batch_tokens"]
    assert_metrics(
        tracker.metrics,
        [
            (2, log_metrics(ref, 1, 2, elapsed=2.0)),
            (2, {"ps": 0.25}),
            (4, log_metrics(ref, 3, 4, elapsed=2.0)),
            (4, {"ps": 0.5}),
            (5, log_metrics(ref, 5, 5, elapsed=2.0)),
            (5, {"wall_seconds": 12.0, "copied_token_fraction": fraction}),
        ],
    )
    params = {**config.params(), "family": "attention_only", "n_parameters": ref["n_parameters"]}
    assert tracker.runs == [("golden", params, None)]
    assert tracker.artifacts == [str(store.summary_path("golden"))]
    assert evaluator.calls == [(False, False), (False, False)]
    assert hooked == [(1, True), (2, True), (3, True), (4, True), (5, True)]

    evaluations = [{"step": 2, "ps": 0.25}, {"step": 4, "ps": 0.5}]
    expected = {
        "run_name": "golden",
        "preset": json.dumps(TINY),
        "family": "attention_only",
        "batch_size": B,
        "context_length": C,
        "seed": 3,
        "data_variant": "copy_spans",
        "copy_rate": 0.5,
        "learning_rate": 1e-2,
        "max_steps": 5,
        "steps_trained": 5,
        "tokens_seen": 5 * TOKENS_PER_STEP,
        "flops": ref["flops_per_token"] * 5 * TOKENS_PER_STEP,
        "stop_reason": "budget",
        "run_dir": str(tmp_path.resolve() / "golden"),
        "mlflow_run_id": "id-golden",
        "wall_seconds": 12.0,
        "n_parameters": ref["n_parameters"],
        "copied_token_fraction": fraction,
        "copy_events_per_sequence": totals["copy_events"] / totals["sequences"],
        "final_loss": window_mean(ref["losses"][4:5]),
        "flops_per_token": ref["flops_per_token"],
        "checkpoint_steps": [0, 1, 2, 4, 5],
        "evaluations": evaluations,
        "config": config.params(),
    }
    assert math.isnan(summary.pop("online_emergence_step"))
    assert summary == expected
    assert 0 < totals["copied_tokens"] < totals["batch_tokens"]  # copy_rate 0.5: not all, not none
    stored = store.read_summary("golden")
    assert math.isnan(stored.pop("online_emergence_step"))
    assert stored == {**expected, "config": {**config.params(), "betas": [0.85, 0.95]}}

    assert store.checkpoint_steps("golden") == [0, 1, 2, 4, 5]
    for step in (0, 1, 2, 4, 5):
        folder = store.checkpoint_dir("golden", step)
        assert json.loads((folder / "trainer_state.json").read_text()) == trainer_state(
            "golden", config, step
        )
    assert (
        json.loads((store.checkpoint_dir("golden", 5) / "config.json").read_text())["n_positions"]
        == 24
    )
    assert_weights(store, "golden", ref)
    tags = sorted(p.name for p in store.deepspeed_dir("golden").iterdir() if p.is_dir())
    assert tags == ["step_0000005"]
    assert (store.deepspeed_dir("golden") / "latest").read_text().strip() == "step_0000005"
    assert client_state(store, "golden") == {
        "step": 5,
        "wall_seconds": 11.0,
        **totals,
        "mlflow_run_id": "id-golden",
        "policy": {"first_crossing": None},
        "evaluations": evaluations,
        "last_loss": window_mean(ref["losses"][4:5]),
    }


def test_early_stop_resumes_from_the_dense_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ps crosses 0.5 at step 4: stop at max(ceil(1.5·4), 4 + 3) = 7; killed at step 5."""
    config = make_config(
        "resume",
        seed=1,
        max_steps=20,
        early_stop_threshold=0.5,
        early_stop_margin_factor=1.5,
        early_stop_min_extra_steps=3,
    )
    packed = make_packed(seed=1)
    ref = replay(config, packed, 7)
    store = CheckpointStore(tmp_path)

    class Interrupt(RuntimeError):
        pass

    def interrupt(step: int) -> None:
        if step == 5:
            raise Interrupt

    first = Tracker("id-first")
    fake_clock(monkeypatch)
    with pytest.raises(Interrupt):
        train_run(config, packed, store, first, Evaluator(0.2, 0.6), step_hook=interrupt)
    # Clock: start 1, window 2; step 2 logs (3), window (4); step 4 logs (5), window (6), and
    # saves at the crossing (7): wall 6.
    assert store.checkpoint_steps("resume") == [0, 4]
    assert store.latest_deepspeed_tag("resume") == "step_0000004"
    assert client_state(store, "resume") == {
        "step": 4,
        "wall_seconds": 6.0,
        **copy_totals(ref, 4),
        "mlflow_run_id": "id-first",
        "policy": {"first_crossing": 4},
        "evaluations": [{"step": 2, "ps": 0.2}, {"step": 4, "ps": 0.6}],
        "last_loss": window_mean(ref["losses"][2:4]),
    }

    second = Tracker("id-second")
    evaluator = Evaluator(0.7)
    steps: list[int] = []
    fake_clock(monkeypatch)
    summary = train_run(config, packed, store, second, evaluator, step_hook=steps.append)
    # Resumed with wall 6: start 1, window 2; step 6 logs (3), window (4), saves (5); step 7
    # stops and saves (6); the end reads 7: wall 6 + 7 - 1 = 12.
    assert steps == [5, 6, 7]
    assert second.runs[0][2] == "id-first"  # the MLflow run is reopened
    totals = copy_totals(ref, 7)
    fraction = totals["copied_tokens"] / totals["batch_tokens"]
    assert_metrics(
        second.metrics,
        [
            (6, log_metrics(ref, 5, 6, elapsed=1.0)),
            (6, {"ps": 0.7}),
            (7, {"wall_seconds": 12.0, "copied_token_fraction": fraction}),
        ],
    )
    assert {k: summary[k] for k in ("stop_reason", "steps_trained", "max_steps")} == {
        "stop_reason": "emerged",
        "steps_trained": 7,
        "max_steps": 20,
    }
    assert summary["online_emergence_step"] == 4.0
    assert summary["mlflow_run_id"] == "id-first"
    assert summary["wall_seconds"] == 12.0
    assert summary["tokens_seen"] == 7 * TOKENS_PER_STEP
    assert summary["copied_token_fraction"] == fraction
    assert summary["copy_events_per_sequence"] == totals["copy_events"] / totals["sequences"]
    assert summary["final_loss"] == pytest.approx(window_mean(ref["losses"][4:6]), rel=1e-6)
    assert summary["evaluations"] == [
        {"step": 2, "ps": 0.2},
        {"step": 4, "ps": 0.6},
        {"step": 6, "ps": 0.7},
    ]
    assert summary["checkpoint_steps"] == [0, 4, 6, 7]
    assert_weights(store, "resume", ref)
    assert client_state(store, "resume")["policy"] == {"first_crossing": 4}
    assert client_state(store, "resume")["wall_seconds"] == 11.0

    third = Tracker("id-third")
    again = train_run(config, packed, store, third, Evaluator())
    assert again == {**store.read_summary("resume"), "stop_reason": "already_complete"}
    assert third.runs == [] and third.metrics == []


def test_token_checkpoints_without_tracker_or_early_stop(tmp_path: Path) -> None:
    """Every 96 tokens at 64 per step: steps 2, 3, 5 (ceil(k·96/64)); dense to 128 tokens: 1, 2.

    With ``early_stop`` off an evaluation that crosses neither stops the run nor adds
    checkpoints; natural text copies nothing.
    """
    config = make_config(
        "tokens",
        data_variant="natural",
        variant_options={},
        max_tokens=5 * TOKENS_PER_STEP - 10,  # ceil(310 / 64) = 5 steps
        checkpoint_unit="tokens",
        checkpoint_every=96,
        checkpoint_dense_until=128,
        log_every=10,
        eval_every=1,
        early_stop=False,
        early_stop_threshold=0.5,
    )
    packed = make_packed(seed=2)
    ref = replay(config, packed, 5)
    store = CheckpointStore(tmp_path)
    summary = train_run(config, packed, store, evaluate=Evaluator(*[1.0] * 5))
    assert summary["checkpoint_steps"] == [0, 1, 2, 3, 5]
    assert summary["stop_reason"] == "budget"
    assert summary["steps_trained"] == summary["max_steps"] == 5
    assert math.isnan(summary["online_emergence_step"])
    assert summary["copy_rate"] == 0.0
    assert summary["copied_token_fraction"] == 0.0
    assert summary["copy_events_per_sequence"] == 0.0
    assert summary["mlflow_run_id"] is None
    assert summary["final_loss"] == pytest.approx(window_mean(ref["losses"]), rel=1e-6)
    assert [e["step"] for e in summary["evaluations"]] == [1, 2, 3, 4, 5]
    assert client_state(store, "tokens")["policy"] == {"first_crossing": None}
    assert_weights(store, "tokens", ref)

    # Killed after the last checkpoint but before the summary: the rerun trains no step.
    store.summary_path("tokens").unlink()
    steps: list[int] = []
    again = train_run(config, packed, store, evaluate=Evaluator(), step_hook=steps.append)
    assert steps == []
    assert again["steps_trained"] == 5 and again["stop_reason"] == "budget"
    assert again["checkpoint_steps"] == [0, 1, 2, 3, 5]


def test_family_of_a_named_or_inline_preset() -> None:
    assert training._family("attn-only-2l-d64") == "attention_only"
    assert training._family({"family": "gpt2", "n_layer": 1}) == "gpt2"


def test_a_named_preset_is_reported_by_its_name(tmp_path: Path) -> None:
    """The summary names a preset from ``model_presets.yml`` as given (an inline one as JSON)."""
    config = make_config(
        "named", preset="attn-only-2l-d64", max_tokens=TOKENS_PER_STEP, early_stop=False
    )
    summary = train_run(config, make_packed(), CheckpointStore(tmp_path))
    assert summary["preset"] == "attn-only-2l-d64"
    assert summary["family"] == "attention_only"
    assert summary["steps_trained"] == 1
