"""Resumable training runs through a DeepSpeed engine, with early stop on emergence.

One code path for a laptop CPU and a GPU node: every run goes through
``deepspeed.initialize``. On CPU without the ``deepspeed`` launcher the process initialises a
one-rank gloo group itself (once per process; every run of a sweep reuses it). A multi-rank run
is one job of the ``deepspeed`` launcher started by :mod:`ih_kedro.science.training.launcher`
(``ranks_per_run``): its environment names the ranks, and ZeRO / bf16 come from the DeepSpeed
config dict in the parameters.

Determinism: the model's initialisation is seeded by the run seed, the batch of step ``s`` is a
pure function of (seed, s) (:mod:`ih_kedro.science.data.batches`), there is no dropout, and the
DeepSpeed checkpoint carries weights, optimizer and LR-scheduler state. A run killed at any
point resumes from its latest DeepSpeed checkpoint and ends bitwise-equal (on CPU) to a run
that was never interrupted.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ih_kedro.science.data.batches import Batch, sample_batch
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.variants.copies import count_copy_events
from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.chunked_cross_entropy import (
    hidden_states_instead_of_logits,
    linear_cross_entropy,
)
from ih_kedro.science.training.config import TrainingRunConfig, validate_run_config
from ih_kedro.science.training.distributed import build_engine, init_distributed
from ih_kedro.science.training.models import (
    build_model,
    count_parameters,
    load_model_presets,
    training_flops_per_token,
)
from ih_kedro.science.training.schedules import EarlyStopOnEmergence, checkpoint_schedule
from ih_kedro.science.training.tracking import NullTracker

logger = logging.getLogger(__name__)

Evaluator = Callable[[torch.nn.Module], Mapping[str, float]]
"""``evaluate(model) -> {metric: value}``; called in eval mode under ``torch.no_grad``."""

MANIFEST_COLUMNS = (
    "run_name",
    "preset",
    "family",
    "batch_size",
    "context_length",
    "seed",
    "data_variant",
    "copy_rate",
    "copy_events_per_sequence",
    "copied_token_fraction",
    "learning_rate",
    "max_steps",
    "steps_trained",
    "tokens_seen",
    "flops",
    "stop_reason",
    "online_emergence_step",
    "run_dir",
    "mlflow_run_id",
    "wall_seconds",
    "n_parameters",
)
"""Columns of ``sweep_manifest`` (docs/architecture.md); ``train_run`` summaries carry them all."""


def _family(preset: str | Mapping[str, Any]) -> str:
    """The model family of a preset name or an inline preset mapping."""
    spec = load_model_presets()[preset] if isinstance(preset, str) else preset
    return str(spec["family"])


@dataclass
class _Run:
    """One training run between its steps: what the set-up built and what the steps update.

    ``state`` is what each DeepSpeed checkpoint carries (``client_state["ih_state"]``): the
    step, wall seconds, copy counts, MLflow run id, early-stop state, evaluations and last loss.
    ``wall_before`` is the wall time of earlier segments of a resumed run, ``segment_start``
    the clock when this segment started.
    """

    config: TrainingRunConfig
    store: CheckpointStore
    tracker: Any
    evaluate: Evaluator | None
    rank: int
    world_size: int
    total_steps: int
    schedule: set[int]
    engine: Any
    scheduler: Any
    policy: EarlyStopOnEmergence
    n_parameters: int
    flops_per_token: float
    state: dict[str, Any]
    wall_before: float = 0.0
    segment_start: float = 0.0

    def wall(self) -> float:
        """Return the run's wall seconds so far (earlier segments plus this one's clock)."""
        return self.wall_before + time.perf_counter() - self.segment_start

    def trainer_state(self, step: int) -> dict[str, Any]:
        """Return the ``trainer_state.json`` of the HF checkpoint at ``step``."""
        config = self.config
        return {
            "run_name": config.run_name,
            "step": step,
            "tokens_seen": step * config.tokens_per_step,
            "batch_size": config.batch_size,
            "context_length": config.context_length,
            "seed": config.seed,
            "preset": config.preset,
        }

    def save(self, step: int, wall: float) -> None:
        """Write the HF checkpoint (rank 0) and the DeepSpeed state at ``step``; keep only it."""
        name = self.config.run_name
        if self.rank == 0:
            self.store.save_hf_checkpoint(name, step, self.engine.module, self.trainer_state(step))
        self.state.update(step=step, wall_seconds=wall, policy=self.policy.state_dict())
        tag = f"step_{step:07d}"
        self.engine.save_checkpoint(
            str(self.store.deepspeed_dir(name)),
            tag=tag,
            client_state={"ih_state": dict(self.state)},
        )  # ends with a barrier: every rank's files are written
        if self.rank == 0:
            self.store.mark_deepspeed_complete(name, tag)
            self.store.prune_deepspeed(name, keep=tag)

    def run_evaluation(self, step: int) -> dict[str, float]:
        """Evaluate the model in eval mode without gradients; record and return the metrics."""
        module = self.engine.module
        module.eval()
        with torch.no_grad():
            metrics = {k: float(v) for k, v in self.evaluate(module).items()}
        module.train()
        self.state["evaluations"].append({"step": step, **metrics})
        return metrics


@dataclass
class _LogWindow:
    """The steps since the last logged metrics: summed loss, counts, variant tokens, start."""

    loss_sum: torch.Tensor  # ()
    start: float
    loss_count: int = 0
    steps: int = 0
    variant_tokens: int = 0


def train_run(
    config: TrainingRunConfig,
    packed: PackedTokens,
    store: CheckpointStore,
    tracker: Any | None = None,
    evaluate: Evaluator | None = None,
    *,
    step_hook: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Train one run to its budget or to the early stop; return its summary dict.

    Resumes from the run's latest DeepSpeed checkpoint if there is one; returns the stored
    summary with ``stop_reason="already_complete"`` if the run already finished. Every
    ``eval_every`` steps ``evaluate(model)`` is logged and fed to the early-stop policy (when
    ``config.early_stop``); once the metric crosses, every eval step is also a checkpoint.
    ``step_hook(step)`` runs after each step's bookkeeping (tests use it to interrupt).

    Summary keys: the ``sweep_manifest`` columns (steps, tokens, FLOPs, ``stop_reason``
    ``emerged``/``budget``, ``online_emergence_step`` …) plus ``copied_token_fraction``,
    ``final_loss`` (nats), ``checkpoint_steps`` and ``evaluations``.
    """
    tracker = tracker or NullTracker()
    validate_run_config(config, packed.vocab_size, len(packed))
    name = config.run_name
    finished = store.read_summary(name)
    if finished is not None:
        logger.info("%s: already complete, skipping", name)
        return {**finished, "stop_reason": "already_complete"}

    run = _set_up(config, packed, store, tracker, evaluate)
    resume_tag = _resume(run)
    family = _family(config.preset)
    params = {**config.params(), "family": family, "n_parameters": run.n_parameters}
    run.wall_before = float(run.state["wall_seconds"])
    run.segment_start = time.perf_counter()
    stop_reason = "budget"
    with run.tracker.run(name, params, run_id=run.state["mlflow_run_id"]) as run_id:
        run.state["mlflow_run_id"] = run_id
        step = int(run.state["step"])
        if resume_tag is None:  # a fresh run: step 0 is always in the schedule
            run.save(0, run.wall_before)
        step = _train_until_stop(run, packed, step, step_hook)
        if run.policy.should_stop(step):
            stop_reason = "emerged"
        wall = run.wall()
        summary = _summary(run, step, stop_reason, wall, run_id, family)
        if run.rank == 0:
            _publish(run, summary, wall, step)
    tokens_seen = summary["tokens_seen"]
    logger.info(
        "%s: %s after %d steps (%d tokens, %.0f s)", name, stop_reason, step, tokens_seen, wall
    )
    run.engine.destroy()  # release hooks and buffers before the next run of a sweep
    return summary


def _set_up(
    config: TrainingRunConfig,
    packed: PackedTokens,
    store: CheckpointStore,
    tracker: Any,
    evaluate: Evaluator | None,
) -> _Run:
    """Join the process group, build the seeded model, its engine and the early-stop policy.

    Returns the run at step 0; only rank 0 keeps ``tracker`` (the others get a
    ``NullTracker``).
    """
    rank, world_size = init_distributed()
    if rank != 0:  # one MLflow run per training run, not one per rank
        tracker = NullTracker()
    total_steps = config.total_steps
    schedule = set(
        checkpoint_schedule(
            total_steps,
            config.checkpoint_every,
            config.checkpoint_dense_until,
            config.checkpoint_unit,
            config.tokens_per_step,
        )
    )
    model = build_model(
        config.preset,
        packed.vocab_size,
        config.positions,
        seed=config.seed,
        attn_implementation=config.attn_implementation,
    )
    n_parameters = count_parameters(model, non_embedding=False)
    flops_per_token = training_flops_per_token(model, config.context_length)
    engine, _, scheduler = build_engine(model, config, total_steps, world_size)
    policy = EarlyStopOnEmergence(
        config.early_stop_metric,
        config.early_stop_threshold,
        config.early_stop_margin_factor,
        config.early_stop_min_extra_steps,
    )
    return _Run(
        config=config,
        store=store,
        tracker=tracker,
        evaluate=evaluate,
        rank=rank,
        world_size=world_size,
        total_steps=total_steps,
        schedule=schedule,
        engine=engine,
        scheduler=scheduler,
        policy=policy,
        n_parameters=n_parameters,
        flops_per_token=flops_per_token,
        state=_fresh_state(policy),
    )


def _fresh_state(policy: EarlyStopOnEmergence) -> dict[str, Any]:
    """Return the state of a run at step 0 (what its DeepSpeed checkpoints carry)."""
    return {
        "step": 0,
        "wall_seconds": 0.0,
        "copied_tokens": 0,
        "copy_events": 0,
        "sequences": 0,
        "batch_tokens": 0,
        "mlflow_run_id": None,
        "policy": policy.state_dict(),
        "evaluations": [],
        "last_loss": float("nan"),
    }


def _resume(run: _Run) -> str | None:
    """Load the run's latest DeepSpeed checkpoint, if any, into the engine and the run's state.

    Returns the checkpoint's tag, or ``None`` for a fresh run.
    """
    name = run.config.run_name
    ds_dir = run.store.deepspeed_dir(name)
    resume_tag = run.store.latest_deepspeed_tag(name)
    if resume_tag is not None:
        _, client_state = run.engine.load_checkpoint(str(ds_dir), tag=resume_tag)
        run.state.update(client_state["ih_state"])
        run.policy.load_state_dict(run.state["policy"])
        logger.info("%s: resuming from %s (step %d)", name, resume_tag, run.state["step"])
    return resume_tag


def _train_until_stop(
    run: _Run, packed: PackedTokens, step: int, step_hook: Callable[[int], None] | None
) -> int:
    """Train from ``step`` to the budget or the early stop, logging, evaluating and
    checkpointing on the way; return the last step trained."""
    from tqdm.auto import tqdm

    config, policy = run.config, run.policy
    sub_batch = config.batch_size // run.world_size
    rows = slice(run.rank * sub_batch, (run.rank + 1) * sub_batch)
    device = run.engine.device
    progress = tqdm(
        total=run.total_steps,
        initial=step,
        desc=config.run_name,
        unit="step",
        disable=run.rank != 0,
    )
    window = _LogWindow(torch.zeros((), device=device), time.perf_counter())
    run.engine.train()
    variant_options = config.run_variant_options
    stopping = step >= run.total_steps or policy.should_stop(step)
    while not stopping:
        batch, loss = _train_step(run, packed, step, rows, device, variant_options)
        step += 1
        _count_batch(run.state, window, batch, loss)
        progress.update(1)
        if step % config.log_every == 0 or step == run.total_steps:
            _log_window(run, window, step, batch, progress)
        evaluated = run.evaluate is not None and step % config.eval_every == 0
        if evaluated:
            _evaluate_and_watch(run, step)
        dense = evaluated and policy.first_crossing is not None
        stopping = step >= run.total_steps or policy.should_stop(step)
        if step in run.schedule or dense or stopping:
            run.save(step, run.wall())
        if step_hook is not None:
            step_hook(step)
    progress.close()
    return step


def _train_step(
    run: _Run,
    packed: PackedTokens,
    step: int,
    rows: slice,
    device: Any,
    variant_options: Mapping[str, Any],
) -> tuple[Batch, torch.Tensor]:
    """One optimizer step on this rank's rows of the batch of ``step``, in the engine's
    micro-batches (``config.micro_batch_rows`` rows; gradient accumulation) when the rows exceed it.

    Returns the whole batch and this rank's mean next-token loss (nats).
    """
    config, engine = run.config, run.engine
    batch = sample_batch(
        packed.tokens,
        config.batch_size,
        config.context_length,
        config.seed,
        step,
        data_variant=config.data_variant,
        variant_options=variant_options,
    )
    tokens = batch.tokens[rows].to(device)  # (B/W, C+1)
    # The engine's micro-batch: config.micro_batch_rows, as build_engine configured it.
    micro_batches = tokens.split(engine.train_micro_batch_size_per_gpu())  # each (m, C+1)
    losses = []
    for micro in micro_batches:
        loss = _micro_batch_loss(engine, micro, config.loss_implementation)
        # DeepSpeed divides by the accumulation steps and steps the optimizer (and the LR
        # schedule) only after the last micro-batch of the step.
        engine.backward(loss)
        engine.step()
        losses.append(loss.detach())
    return batch, torch.stack(losses).mean()


def _micro_batch_loss(engine: Any, micro: torch.Tensor, implementation: str) -> torch.Tensor:
    """Mean next-token loss (nats, fp32) of one micro-batch ``(m, C+1)`` through the engine.

    ``full`` builds the ``(m·C, V)`` logits and casts them to fp32; ``chunked`` / ``liger``
    take the last hidden states instead and never build them (``chunked_cross_entropy``).
    """
    inputs, targets = micro[:, :-1], micro[:, 1:]  # (m, C) each
    if implementation == "full":
        logits = engine(input_ids=inputs).logits  # (m, C, vocab)
        return torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)).float(),  # (m·C, vocab)
            targets.reshape(-1),  # (m·C,)
        )
    with hidden_states_instead_of_logits(engine.module) as captured:
        engine(input_ids=inputs)
    head = captured["head"]
    return linear_cross_entropy(implementation, captured["hidden"], head.weight, targets, head.bias)


def _count_batch(
    state: dict[str, Any], window: _LogWindow, batch: Batch, loss: torch.Tensor
) -> None:
    """Add the batch's copy counts to the run's state and its loss to the log window."""
    state["copied_tokens"] += int(batch.copied.sum())
    state["copy_events"] += count_copy_events(batch.copied)
    state["sequences"] += batch.copied.shape[0]
    state["batch_tokens"] += batch.copied.size
    window.variant_tokens += int(batch.copied.sum())
    window.loss_sum += loss.detach()
    window.loss_count += 1
    window.steps += 1


def _log_window(run: _Run, window: _LogWindow, step: int, batch: Batch, progress: Any) -> None:
    """Log the window's mean loss, LR, throughput and data-variant metrics; restart it."""
    config, state = run.config, run.state
    elapsed = time.perf_counter() - window.start
    mean_loss = float(window.loss_sum) / window.loss_count
    state["last_loss"] = mean_loss
    tokens_seen = step * config.tokens_per_step
    metrics = {
        "loss": mean_loss,
        "lr": float(run.scheduler.get_last_lr()[0]),
        "tokens_seen": float(tokens_seen),
        "flops": run.flops_per_token * tokens_seen,
        "tokens_per_second": window.steps * config.tokens_per_step / elapsed,
        "copied_token_fraction": state["copied_tokens"] / state["batch_tokens"],
        # Tokens a data variant wrote (copied spans, snippets) per step of the
        # window since the last log, and their share of those batches.
        "variant_tokens_per_step": window.variant_tokens / window.steps,
        "variant_batch_share": window.variant_tokens / (window.steps * batch.copied.size),
    }
    run.tracker.log_metrics(metrics, step)  # a NullTracker on ranks other than 0
    progress.set_postfix(loss=f"{mean_loss:.3f}")
    window.loss_sum.zero_()
    window.loss_count = 0
    window.start = time.perf_counter()
    window.steps = 0
    window.variant_tokens = 0


def _evaluate_and_watch(run: _Run, step: int) -> None:
    """Log the evaluation at ``step`` and, with ``early_stop`` on, feed it to the policy."""
    metrics = run.run_evaluation(step)
    run.tracker.log_metrics(metrics, step)
    if run.config.early_stop:
        policy = run.policy
        before = policy.first_crossing
        policy.update(step, metrics)
        if before is None and policy.first_crossing is not None:
            logger.info(
                "%s: %s crossed %.3f at step %d; stopping at step %d",
                run.config.run_name,
                policy.metric,
                policy.threshold,
                step,
                min(policy.stop_step, run.total_steps),
            )


def _summary(
    run: _Run, step: int, stop_reason: str, wall: float, run_id: str | None, family: str
) -> dict[str, Any]:
    """Return the finished run's summary: the manifest columns and the run's details."""
    config, state, policy = run.config, run.state, run.policy
    name = config.run_name
    tokens_seen = step * config.tokens_per_step
    return {
        "run_name": name,
        "preset": config.preset if isinstance(config.preset, str) else json.dumps(config.preset),
        "family": family,
        "batch_size": config.batch_size,
        "context_length": config.context_length,
        "seed": config.seed,
        "data_variant": config.data_variant,
        "copy_rate": config.copy_rate,
        "learning_rate": config.learning_rate,
        "max_steps": run.total_steps,
        "steps_trained": step,
        "tokens_seen": tokens_seen,
        "flops": run.flops_per_token * tokens_seen,
        "stop_reason": stop_reason,
        "online_emergence_step": (
            float(policy.first_crossing) if policy.first_crossing is not None else math.nan
        ),
        "run_dir": str(run.store.run_dir(name)),
        "mlflow_run_id": run_id,
        "wall_seconds": wall,
        "n_parameters": run.n_parameters,
        "copied_token_fraction": (
            state["copied_tokens"] / state["batch_tokens"] if state["batch_tokens"] else 0.0
        ),
        "copy_events_per_sequence": (
            state.get("copy_events", 0) / state["sequences"] if state.get("sequences") else 0.0
        ),
        "final_loss": state["last_loss"],
        "flops_per_token": run.flops_per_token,
        "checkpoint_steps": run.store.checkpoint_steps(name),
        "evaluations": state["evaluations"],
        "config": config.params(),
    }


def _publish(run: _Run, summary: dict[str, Any], wall: float, step: int) -> None:
    """Write ``run_summary.json``; log the final metrics and the summary file (rank 0 only)."""
    path = run.store.write_summary(run.config.run_name, summary)
    run.tracker.log_metrics(
        {"wall_seconds": wall, "copied_token_fraction": summary["copied_token_fraction"]},
        step,
    )
    run.tracker.log_artifact(str(path))
