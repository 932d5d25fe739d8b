"""Resumable training runs through a DeepSpeed engine, with early stop on emergence.

One code path for a laptop CPU and a GPU node: every run goes through
``deepspeed.initialize``. On CPU without the ``deepspeed`` launcher the process initialises a
one-rank gloo group itself (once per process; every run of a sweep reuses it). A multi-rank run
is one job of the ``deepspeed`` launcher started by :mod:`ih_kedro.science.training.sweep`
(``ranks_per_run``): its environment names the ranks, and ZeRO / bf16 come from the DeepSpeed
config dict in the parameters.

Determinism: the model's initialisation is seeded by the run seed, the batch of step ``s`` is a
pure function of (seed, s) (:mod:`ih_kedro.science.data.batches`), there is no dropout, and the
DeepSpeed checkpoint carries weights, optimizer and LR-scheduler state. A run killed at any
point resumes from its latest DeepSpeed checkpoint and ends bitwise-equal (on CPU) to a run
that was never interrupted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shutil
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ih_kedro.science.data.batches import (
    DATA_VARIANTS,
    VARIANT_CHECKS,
    count_copy_events,
    load_variant_providers,
    sample_batch,
    span_length_bounds,
)
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.training.models import build_model, count_parameters, training_flops_per_token
from ih_kedro.science.training.runtime import configure_runtime

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

STEP_DIR = re.compile(r"^step_(\d+)$")
SCHEDULES = ("constant", "cosine")

# Grid parameter that names each per-run field in error messages.
_PARAM_NAMES = {
    "batch_size": "training.batch_sizes",
    "context_length": "training.context_lengths",
    "preset": "training.presets",
    "seed": "training.seeds",
    "data_variant": "training.data_variants",
}


def _param(name: str) -> str:
    return _PARAM_NAMES.get(name, f"training.{name}")


@dataclass
class TrainingRunConfig:
    """Everything that defines one training run (one cell of a sweep).

    Budgets: the run trains ``min(max_steps, ceil(max_tokens / (B·C)))`` optimizer steps
    (either may be ``None``, not both). Tokens are counted as model inputs: ``B·C`` per step.
    Checkpoints: steps ``1, 2, 4, … ≤ checkpoint_dense_until`` then every ``checkpoint_every``,
    in ``checkpoint_unit`` (``steps`` or ``tokens``), plus step 0 and the final step.
    """

    run_name: str
    preset: str | dict[str, Any]
    batch_size: int
    context_length: int
    seed: int = 0
    data_variant: str = "natural"
    variant_options: dict[str, Any] = field(default_factory=dict)
    n_positions: int | None = None  # the model's positions; default: context_length
    attn_implementation: str = "sdpa"
    learning_rate: float = 3e-3
    warmup_steps: int = 50
    schedule: str = "constant"  # or "cosine" (to min_lr_ratio at decay_steps)
    min_lr_ratio: float = 0.1
    decay_steps: int | None = None  # cosine horizon in steps; default: the run's budget
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-8
    max_steps: int | None = None
    max_tokens: int | None = None
    checkpoint_every: int = 250
    checkpoint_dense_until: int = 512
    checkpoint_unit: str = "steps"
    log_every: int = 10
    eval_every: int = 50
    early_stop: bool = True
    early_stop_metric: str = "prefix_matching_best_layer1"
    early_stop_threshold: float = 0.4
    early_stop_margin_factor: float = 1.5
    early_stop_min_extra_steps: int = 100
    deepspeed: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens_per_step(self) -> int:
        """Input tokens consumed per optimizer step (``B·C``)."""
        return self.batch_size * self.context_length

    @property
    def total_steps(self) -> int:
        """The step budget implied by ``max_steps`` and ``max_tokens``."""
        budgets = []
        if self.max_steps is not None:
            budgets.append(int(self.max_steps))
        if self.max_tokens is not None:
            budgets.append(math.ceil(int(self.max_tokens) / self.tokens_per_step))
        if not budgets:
            raise ValueError("training.max_steps / training.max_tokens: give at least one budget")
        return min(budgets)

    @property
    def positions(self) -> int:
        """The model's ``n_positions``: ``n_positions`` if given, else ``context_length``."""
        return self.n_positions if self.n_positions is not None else self.context_length

    @property
    def run_variant_options(self) -> dict[str, Any]:
        """The variant's options plus ``total_steps`` (the run's step budget, for schedules
        such as an annealed snippet mix ratio)."""
        return {**self.variant_options, "total_steps": self.total_steps}

    @property
    def copy_rate(self) -> float:
        """Probability that a sequence carries a copied span (0 for natural text)."""
        if self.data_variant == "natural":
            return 0.0
        return float(self.variant_options.get("copy_rate", 1.0))

    def params(self) -> dict[str, Any]:
        """The config as a flat-able dict (for trackers and ``run_summary.json``)."""
        out = asdict(self)
        out["betas"] = list(self.betas)
        return out


def validate_run_config(config: TrainingRunConfig, vocab_size: int, corpus_tokens: int) -> None:
    """Raise ``ValueError`` naming the parameter if ``config`` cannot train; return ``None``.

    Checked before any training so a sweep fails fast: sizes, preset, positions, data variant
    and span lengths, the corpus length, optimizer, schedule, budget, checkpoint and early-stop
    options, and the DeepSpeed dict (it must not carry its own optimizer or scheduler).
    """
    from ih_kedro.science.training.models import load_model_presets

    name = config.run_name
    where = f" (run {name!r})"
    if not name or not re.fullmatch(r"[A-Za-z0-9._=-]+", name):
        raise ValueError(f"training.run_name: {name!r} must be non-empty [A-Za-z0-9._=-]")
    for key in ("batch_size", "context_length"):
        value = getattr(config, key)
        if not isinstance(value, int | np.integer) or value <= 0:
            label = key.replace("_", " ")
            raise ValueError(f"{_param(key)}: {label} must be a positive integer, got {value!r}")
    if isinstance(config.preset, str):
        presets = load_model_presets()
        if config.preset not in presets:
            raise ValueError(
                f"{_param('preset')}: unknown preset {config.preset!r}; choose one of "
                f"{sorted(presets)}"
            )
    elif not isinstance(config.preset, Mapping) or "family" not in config.preset:
        raise ValueError(f"{_param('preset')}: a preset is a name or a mapping with 'family'")
    if config.context_length > config.positions:
        raise ValueError(
            f"{_param('context_length')}: context length {config.context_length} exceeds the "
            f"model's n_positions={config.positions}{where}"
        )
    if vocab_size <= 0:
        raise ValueError(f"vocab_size: must be positive, got {vocab_size}")
    width = config.context_length + 1
    if corpus_tokens < width:
        raise ValueError(
            f"train_tokens: the corpus has {corpus_tokens} tokens, fewer than one sequence of "
            f"context_length + 1 = {width}{where}"
        )
    load_variant_providers()
    if config.data_variant not in DATA_VARIANTS:
        raise ValueError(
            f"{_param('data_variant')}: unknown data variant {config.data_variant!r}; choose "
            f"one of {sorted(DATA_VARIANTS)}"
        )
    if config.data_variant == "copy_spans":
        options = config.variant_options
        rate = float(options.get("copy_rate", 1.0))
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"training.copy_rate: must be in [0, 1], got {rate}")
        low_f = float(options.get("span_min_fraction", 0.125))
        high_f = float(options.get("span_max_fraction", 0.375))
        if not 0.0 < low_f <= high_f:
            raise ValueError(
                "training.span_min_fraction / training.span_max_fraction: need "
                f"0 < min <= max, got {low_f}, {high_f}"
            )
        _, high = span_length_bounds(config.context_length, low_f, high_f)
        if 2 * high > width:
            raise ValueError(
                f"training.span_max_fraction: a span of up to {high} tokens (source + copy) is "
                f"longer than the context of {config.context_length} tokens{where}"
            )
    if not config.learning_rate > 0:
        raise ValueError(f"training.learning_rate: must be positive, got {config.learning_rate}")
    if config.warmup_steps < 0:
        raise ValueError(f"training.warmup_steps: must be >= 0, got {config.warmup_steps}")
    if config.schedule not in SCHEDULES:
        raise ValueError(f"training.schedule: {config.schedule!r} is not one of {SCHEDULES}")
    if config.weight_decay < 0:
        raise ValueError(f"training.weight_decay: must be >= 0, got {config.weight_decay}")
    if len(config.betas) != 2 or not all(0.0 <= b < 1.0 for b in config.betas):
        raise ValueError(f"training.betas: need two values in [0, 1), got {config.betas}")
    for key in ("max_steps", "max_tokens"):
        value = getattr(config, key)
        if value is not None and value <= 0:
            raise ValueError(f"training.{key}: must be positive, got {value}")
    config.total_steps  # noqa: B018 - raises if neither budget is given
    if config.data_variant in VARIANT_CHECKS:
        VARIANT_CHECKS[config.data_variant](config.run_variant_options, config.context_length)
    if config.checkpoint_unit not in ("steps", "tokens"):
        raise ValueError(
            f"training.checkpoint_unit: 'steps' or 'tokens', got {config.checkpoint_unit!r}"
        )
    for key, label in (
        ("checkpoint_every", "training.checkpoint_every"),
        ("log_every", "training.log_every"),
        ("eval_every", "training.online_emergence.eval_every"),
    ):
        if getattr(config, key) <= 0:
            raise ValueError(f"{label}: must be positive, got {getattr(config, key)}")
    if config.checkpoint_dense_until < 0:
        raise ValueError("training.checkpoint_dense_until: must be >= 0")
    if config.early_stop_margin_factor < 1.0:
        raise ValueError(
            "training.online_emergence.margin_factor: must be >= 1, got "
            f"{config.early_stop_margin_factor}"
        )
    if config.early_stop_min_extra_steps < 0:
        raise ValueError("training.online_emergence.min_extra_steps: must be >= 0")
    if not isinstance(config.deepspeed, Mapping):
        raise ValueError("training.deepspeed: must be a mapping (a DeepSpeed config dict)")
    for key in ("optimizer", "scheduler"):
        if key in config.deepspeed:
            raise ValueError(
                f"training.deepspeed.{key}: set the {key} in training's parameters, not in the "
                "DeepSpeed config (the run passes its own torch AdamW and LR schedule)"
            )


def checkpoint_schedule(
    total_steps: int,
    every: int,
    dense_until: int = 0,
    unit: str = "steps",
    tokens_per_step: int = 1,
) -> list[int]:
    """Return the sorted optimizer steps at which to checkpoint a run of ``total_steps``.

    Log-spaced early, regular later (Pythia): step 0, powers of two up to ``dense_until``,
    multiples of ``every``, and the final step. With ``unit="tokens"``, ``every`` and
    ``dense_until`` are token counts: each multiple ``k·every`` becomes the first step that
    reaches it given ``tokens_per_step`` (so checkpoints do not drift when ``every`` is not a
    multiple of ``tokens_per_step``), and ``dense_until`` likewise.
    """
    if unit not in ("steps", "tokens"):
        raise ValueError(f"training.checkpoint_unit: 'steps' or 'tokens', got {unit!r}")
    if every <= 0:
        raise ValueError(f"training.checkpoint_every: must be positive, got {every}")
    steps = {0, total_steps}
    if unit == "tokens":
        dense_until = math.ceil(dense_until / tokens_per_step)
        if every <= tokens_per_step:  # a multiple of ``every`` falls within every step
            steps.update(range(1, total_steps + 1))
        else:
            n_multiples = total_steps * tokens_per_step // every
            steps.update(-(-k * every // tokens_per_step) for k in range(1, n_multiples + 1))
    else:
        steps.update(range(every, total_steps + 1, every))
    power = 1
    while power <= min(dense_until, total_steps):
        steps.add(power)
        power *= 2
    return sorted(steps)


def lr_factor(
    step: int, warmup_steps: int, schedule: str, decay_steps: int, min_lr_ratio: float
) -> float:
    """LR multiplier for the update after ``step`` completed steps (linear warm-up, then
    constant or cosine to ``min_lr_ratio`` at ``decay_steps``)."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    span = max(1, decay_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


@dataclass
class EarlyStopOnEmergence:
    """Stop a run a margin after an online metric first crosses a threshold.

    With the first crossing at step ``S`` the run stops at
    ``max(ceil(margin_factor·S), S + min_extra_steps)`` (steps), so the post-emergence plateau
    is recorded too. ``first_crossing`` survives resumes through :meth:`state_dict`.
    """

    metric: str
    threshold: float
    margin_factor: float = 1.5
    min_extra_steps: int = 100
    first_crossing: int | None = None

    def update(self, step: int, metrics: Mapping[str, float]) -> None:
        """Record an evaluation at ``step``; the first value above threshold sets ``S``."""
        value = metrics.get(self.metric)
        if self.first_crossing is None and value is not None and value > self.threshold:
            self.first_crossing = int(step)

    @property
    def stop_step(self) -> int | None:
        """The step to stop at, or ``None`` before the first crossing."""
        if self.first_crossing is None:
            return None
        crossing = self.first_crossing
        return max(math.ceil(self.margin_factor * crossing), crossing + self.min_extra_steps)

    def should_stop(self, step: int) -> bool:
        return self.stop_step is not None and step >= self.stop_step

    def state_dict(self) -> dict[str, Any]:
        return {"first_crossing": self.first_crossing}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.first_crossing = state.get("first_crossing")


class CheckpointStore:
    """A folder of training runs, laid out as in docs/architecture.md::

    <root>/<run_name>/checkpoints/step_0000100/   HF save_pretrained + trainer_state.json
    <root>/<run_name>/deepspeed/                  DeepSpeed state of the latest checkpoint
    <root>/<run_name>/run_summary.json            written when the run finished
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"CheckpointStore({str(self.root)!r})"

    def run_dir(self, run_name: str) -> Path:
        return self.root / run_name

    def checkpoints_dir(self, run_name: str) -> Path:
        return self.run_dir(run_name) / "checkpoints"

    def deepspeed_dir(self, run_name: str) -> Path:
        return self.run_dir(run_name) / "deepspeed"

    def summary_path(self, run_name: str) -> Path:
        return self.run_dir(run_name) / "run_summary.json"

    def checkpoint_dir(self, run_name: str, step: int) -> Path:
        return self.checkpoints_dir(run_name) / f"step_{step:07d}"

    def runs(self) -> list[str]:
        """Names of the runs with at least one folder in the store, sorted."""
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())

    def checkpoint_steps(self, run_name: str) -> list[int]:
        """Steps of the complete HF checkpoints of a run, sorted."""
        folder = self.checkpoints_dir(run_name)
        if not folder.is_dir():
            return []
        steps = []
        for child in folder.iterdir():
            match = STEP_DIR.match(child.name)
            if match and (child / "trainer_state.json").is_file():
                steps.append(int(match.group(1)))
        return sorted(steps)

    def read_summary(self, run_name: str) -> dict[str, Any] | None:
        """The finished run's summary, or ``None`` if the run has not finished."""
        path = self.summary_path(run_name)
        return json.loads(path.read_text()) if path.is_file() else None

    def write_summary(self, run_name: str, summary: Mapping[str, Any]) -> Path:
        path = self.summary_path(run_name)
        _atomic_write_text(path, json.dumps(dict(summary), indent=2, default=_json_default))
        return path

    def save_hf_checkpoint(
        self, run_name: str, step: int, model: torch.nn.Module, trainer_state: Mapping[str, Any]
    ) -> Path:
        """Write ``save_pretrained`` + ``trainer_state.json`` atomically (temp folder, rename)."""
        final = self.checkpoint_dir(run_name, step)
        tmp = final.with_name(final.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # a shard bar per checkpoint drowns the run's bar
        try:
            model.save_pretrained(tmp)
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        (tmp / "trainer_state.json").write_text(json.dumps(dict(trainer_state), indent=2))
        if final.exists():  # left by a run killed after this write; identical content
            shutil.rmtree(final)
        tmp.rename(final)
        return final

    def latest_deepspeed_tag(self, run_name: str) -> str | None:
        """Tag of the DeepSpeed checkpoint to resume from, or ``None``.

        DeepSpeed writes ``latest`` after the tag's files, and older tags are deleted only after
        that, so ``latest`` names a complete checkpoint; a torn ``latest`` falls back to the
        highest remaining tag.
        """
        folder = self.deepspeed_dir(run_name)
        if not folder.is_dir():
            return None
        latest = folder / "latest"
        if latest.is_file():
            tag = latest.read_text().strip()
            if tag and (folder / tag).is_dir():
                return tag
        tags = sorted(p.name for p in folder.iterdir() if p.is_dir() and STEP_DIR.match(p.name))
        return tags[-1] if tags else None

    def prune_deepspeed(self, run_name: str, keep: str) -> None:
        """Delete every DeepSpeed tag except ``keep`` (the latest)."""
        folder = self.deepspeed_dir(run_name)
        for child in folder.iterdir():
            if child.is_dir() and child.name != keep and STEP_DIR.match(child.name):
                shutil.rmtree(child, ignore_errors=True)


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value)}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def init_distributed() -> tuple[int, int]:
    """Initialise the process group once per process; return ``(rank, world_size)``.

    Under the ``deepspeed`` launcher the environment names the ranks. Without it (a plain
    ``kedro run``, a notebook, a test) this process becomes a one-rank group on 127.0.0.1 with a
    free port. The backend is the accelerator's (gloo on CPU, nccl on CUDA).

    A world of one always takes a fresh port: nobody else joins it, and a ``MASTER_PORT``
    inherited from a parent process that trained (a notebook or test runner that started
    ``kedro run``) belongs to the parent's still-open group, so binding it would fail.
    """
    configure_runtime()
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if os.environ.get("WORLD_SIZE", "1") == "1":
        os.environ.setdefault("RANK", "0")
        os.environ["WORLD_SIZE"] = "1"
        os.environ.setdefault("LOCAL_RANK", "0")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(_free_port())
    import deepspeed
    from deepspeed.accelerator import get_accelerator

    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
    with _no_shm_op_in_a_world_of_one(get_accelerator().device_name()):
        deepspeed.init_distributed(
            dist_backend=get_accelerator().communication_backend_name(), verbose=False
        )
    return dist.get_rank(), dist.get_world_size()


@contextlib.contextmanager
def _no_shm_op_in_a_world_of_one(device_name: str) -> Iterator[None]:
    """Skip DeepSpeed's CPU shared-memory all-reduce op when there is one rank.

    On CPU, DeepSpeed JIT-compiles that op (a C++ build under a file lock in
    ``~/.cache/torch_extensions``) when the first process group starts, even for a world of
    one, which never communicates: every sweep worker would wait on that build. Ranks of a
    multi-rank job still get it.
    """
    if device_name != "cpu" or os.environ.get("WORLD_SIZE", "1") != "1":
        yield
        return
    import importlib

    # The module itself: ``deepspeed.comm.torch`` as an attribute is the torch package.
    ds_torch = importlib.import_module("deepspeed.comm.torch")
    build = ds_torch.build_shm_op
    ds_torch.build_shm_op = lambda: None
    try:
        yield
    finally:
        ds_torch.build_shm_op = build


def deepspeed_config_for_run(
    ds_config: Mapping[str, Any], batch_size: int, world_size: int
) -> dict[str, Any]:
    """The DeepSpeed config of one run: the run's ``B`` split over ranks, no accumulation."""
    if batch_size % world_size:
        raise ValueError(
            f"training.batch_sizes: batch size {batch_size} is not divisible by the "
            f"{world_size} data-parallel ranks"
        )
    config = json.loads(json.dumps(dict(ds_config)))  # deep copy of plain data
    config.pop("train_batch_size", None)
    config["train_micro_batch_size_per_gpu"] = batch_size // world_size
    config["gradient_accumulation_steps"] = 1
    config.setdefault("steps_per_print", 10**12)
    config.setdefault("wall_clock_breakdown", False)
    return config


def build_engine(
    model: torch.nn.Module, config: TrainingRunConfig, total_steps: int, world_size: int
) -> tuple[Any, torch.optim.Optimizer, Any]:
    """Wrap ``model`` in a DeepSpeed engine with our AdamW and LR schedule.

    Returns ``(engine, optimizer, lr_scheduler)``; DeepSpeed steps the scheduler.
    """
    import deepspeed

    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": config.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=config.learning_rate,
        betas=tuple(config.betas),
        eps=config.eps,
    )
    decay_steps = config.decay_steps or total_steps

    def factor(step: int) -> float:
        return lr_factor(
            step, config.warmup_steps, config.schedule, decay_steps, config.min_lr_ratio
        )

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    ds_config = deepspeed_config_for_run(config.deepspeed, config.batch_size, world_size)
    engine, optimizer, _, scheduler = deepspeed.initialize(
        model=model,
        optimizer=optimizer,
        lr_scheduler=scheduler,
        config=ds_config,
        dist_init_required=False,
    )
    skip_allreduce_in_world_of_one(engine, world_size)
    return engine, optimizer, scheduler


def skip_allreduce_in_world_of_one(engine: Any, world_size: int) -> None:
    """Turn off the engine's gradient all-reduce when there is one rank.

    Averaging gradients over a world of one flattens, "reduces" and copies back every gradient
    each step (~1 ms, ~4% of a step of the tiny CPU models); the result is the same gradients.
    With two or more ranks the all-reduce stays on.
    """
    if world_size == 1:
        engine.enable_backward_allreduce = False


def _family(preset: str | Mapping[str, Any]) -> str:
    from ih_kedro.science.training.models import load_model_presets

    spec = load_model_presets()[preset] if isinstance(preset, str) else preset
    return str(spec["family"])


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
    from ih_kedro.science.training.tracking import NullTracker

    tracker = tracker or NullTracker()
    validate_run_config(config, packed.vocab_size, len(packed))
    name = config.run_name
    finished = store.read_summary(name)
    if finished is not None:
        logger.info("%s: already complete, skipping", name)
        return {**finished, "stop_reason": "already_complete"}

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
    state: dict[str, Any] = {
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
    ds_dir = store.deepspeed_dir(name)
    resume_tag = store.latest_deepspeed_tag(name)
    if resume_tag is not None:
        _, client_state = engine.load_checkpoint(str(ds_dir), tag=resume_tag)
        state.update(client_state["ih_state"])
        policy.load_state_dict(state["policy"])
        logger.info("%s: resuming from %s (step %d)", name, resume_tag, state["step"])

    family = _family(config.preset)
    sub_batch = config.batch_size // world_size
    rows = slice(rank * sub_batch, (rank + 1) * sub_batch)
    device = engine.device
    params = {**config.params(), "family": family, "n_parameters": n_parameters}

    def trainer_state(step: int) -> dict[str, Any]:
        return {
            "run_name": name,
            "step": step,
            "tokens_seen": step * config.tokens_per_step,
            "batch_size": config.batch_size,
            "context_length": config.context_length,
            "seed": config.seed,
            "preset": config.preset,
        }

    def save(step: int, wall: float) -> None:
        if rank == 0:
            store.save_hf_checkpoint(name, step, engine.module, trainer_state(step))
        state.update(step=step, wall_seconds=wall, policy=policy.state_dict())
        tag = f"step_{step:07d}"
        engine.save_checkpoint(str(ds_dir), tag=tag, client_state={"ih_state": dict(state)})
        if rank == 0:
            store.prune_deepspeed(name, keep=tag)

    def run_evaluation(step: int) -> dict[str, float]:
        module = engine.module
        module.eval()
        with torch.no_grad():
            metrics = {k: float(v) for k, v in evaluate(module).items()}
        module.train()
        state["evaluations"].append({"step": step, **metrics})
        return metrics

    from tqdm.auto import tqdm

    wall_before = float(state["wall_seconds"])
    segment_start = time.perf_counter()
    stop_reason = "budget"
    with tracker.run(name, params, run_id=state["mlflow_run_id"]) as run_id:
        state["mlflow_run_id"] = run_id
        step = int(state["step"])
        if resume_tag is None:  # a fresh run: step 0 is always in the schedule
            save(0, wall_before)
        progress = tqdm(total=total_steps, initial=step, desc=name, unit="step", disable=rank != 0)
        loss_sum = torch.zeros((), device=device)
        loss_count = 0
        window_start = time.perf_counter()
        window_steps = 0
        engine.train()
        variant_options = config.run_variant_options
        window_variant_tokens = 0
        stopping = step >= total_steps or policy.should_stop(step)
        while not stopping:
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
            logits = engine(input_ids=tokens[:, :-1]).logits  # (B/W, C, vocab)
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.size(-1)).float(),  # (B/W·C, vocab)
                tokens[:, 1:].reshape(-1),  # (B/W·C,)
            )
            engine.backward(loss)
            engine.step()
            step += 1
            state["copied_tokens"] += int(batch.copied.sum())
            state["copy_events"] += count_copy_events(batch.copied)
            state["sequences"] += batch.copied.shape[0]
            state["batch_tokens"] += batch.copied.size
            window_variant_tokens += int(batch.copied.sum())
            loss_sum += loss.detach()
            loss_count += 1
            window_steps += 1
            progress.update(1)

            if step % config.log_every == 0 or step == total_steps:
                elapsed = time.perf_counter() - window_start
                mean_loss = float(loss_sum) / loss_count
                state["last_loss"] = mean_loss
                tokens_seen = step * config.tokens_per_step
                metrics = {
                    "loss": mean_loss,
                    "lr": float(scheduler.get_last_lr()[0]),
                    "tokens_seen": float(tokens_seen),
                    "flops": flops_per_token * tokens_seen,
                    "tokens_per_second": window_steps * config.tokens_per_step / elapsed,
                    "copied_token_fraction": state["copied_tokens"] / state["batch_tokens"],
                    # Tokens a data variant wrote (copied spans, snippets) per step of the
                    # window since the last log, and their share of those batches.
                    "variant_tokens_per_step": window_variant_tokens / window_steps,
                    "variant_batch_share": window_variant_tokens
                    / (window_steps * batch.copied.size),
                }
                tracker.log_metrics(metrics, step)  # a NullTracker on ranks other than 0
                progress.set_postfix(loss=f"{mean_loss:.3f}")
                loss_sum.zero_()
                loss_count = 0
                window_start = time.perf_counter()
                window_steps = 0
                window_variant_tokens = 0

            evaluated = evaluate is not None and step % config.eval_every == 0
            if evaluated:
                metrics = run_evaluation(step)
                tracker.log_metrics(metrics, step)
                if config.early_stop:
                    before = policy.first_crossing
                    policy.update(step, metrics)
                    if before is None and policy.first_crossing is not None:
                        logger.info(
                            "%s: %s crossed %.3f at step %d; stopping at step %d",
                            name,
                            policy.metric,
                            policy.threshold,
                            step,
                            min(policy.stop_step, total_steps),
                        )
            dense = evaluated and policy.first_crossing is not None
            stopping = step >= total_steps or policy.should_stop(step)
            if step in schedule or dense or stopping:
                save(step, wall_before + time.perf_counter() - segment_start)
            if step_hook is not None:
                step_hook(step)
        progress.close()
        if policy.should_stop(step):
            stop_reason = "emerged"
        wall = wall_before + time.perf_counter() - segment_start
        tokens_seen = step * config.tokens_per_step
        summary = {
            "run_name": name,
            "preset": config.preset
            if isinstance(config.preset, str)
            else json.dumps(config.preset),
            "family": family,
            "batch_size": config.batch_size,
            "context_length": config.context_length,
            "seed": config.seed,
            "data_variant": config.data_variant,
            "copy_rate": config.copy_rate,
            "learning_rate": config.learning_rate,
            "max_steps": total_steps,
            "steps_trained": step,
            "tokens_seen": tokens_seen,
            "flops": flops_per_token * tokens_seen,
            "stop_reason": stop_reason,
            "online_emergence_step": (
                float(policy.first_crossing) if policy.first_crossing is not None else math.nan
            ),
            "run_dir": str(store.run_dir(name)),
            "mlflow_run_id": run_id,
            "wall_seconds": wall,
            "n_parameters": n_parameters,
            "copied_token_fraction": (
                state["copied_tokens"] / state["batch_tokens"] if state["batch_tokens"] else 0.0
            ),
            "copy_events_per_sequence": (
                state.get("copy_events", 0) / state["sequences"] if state.get("sequences") else 0.0
            ),
            "final_loss": state["last_loss"],
            "flops_per_token": flops_per_token,
            "checkpoint_steps": store.checkpoint_steps(name),
            "evaluations": state["evaluations"],
            "config": config.params(),
        }
        if rank == 0:
            path = store.write_summary(name, summary)
            tracker.log_metrics(
                {"wall_seconds": wall, "copied_token_fraction": summary["copied_token_fraction"]},
                step,
            )
            tracker.log_artifact(str(path))
    logger.info(
        "%s: %s after %d steps (%d tokens, %.0f s)", name, stop_reason, step, tokens_seen, wall
    )
    engine.destroy()  # release hooks and buffers before the next run of a sweep
    return summary
