"""What defines one training run (``TrainingRunConfig``) and the checks that it can train.

``validate_run_config`` runs before any training so a sweep fails fast; each of its errors
starts with the parameter to fix (``training.batch_sizes: …``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ih_kedro.science.data.variants.copies import span_length_bounds
from ih_kedro.science.data.variants.registry import (
    DATA_VARIANTS,
    VARIANT_CHECKS,
    load_variant_providers,
)
from ih_kedro.science.training.chunked_cross_entropy import LOSS_IMPLEMENTATIONS
from ih_kedro.science.training.models import load_model_presets

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
    """The parameter that sets the config field ``name`` (``training.<name>`` by default)."""
    return _PARAM_NAMES.get(name, f"training.{name}")


@dataclass
class TrainingRunConfig:
    """Everything that defines one training run (one cell of a sweep).

    Budgets: the run trains ``min(max_steps, ceil(max_tokens / (B·C)))`` optimizer steps
    (either may be ``None``; with both ``None`` the budget is the cosine horizon of
    ``horizon_tokens``, and without that it is an error). Tokens are counted as model inputs:
    ``B·C`` per step.
    LR schedule (:meth:`lr_schedule_steps`): a linear warm-up of ``warmup_steps`` steps, or of
    ``warmup_fraction`` of the horizon; then ``constant`` or ``cosine`` down to
    ``min_lr_ratio`` at the horizon: ``decay_steps`` steps, or ``horizon_tokens`` tokens
    (``floor(horizon_tokens / (B·C))`` steps), or else the run's budget. Given in tokens and
    fractions, warm-up and horizon in steps scale as ``1/(B·C)`` (the reference recipe:
    ``warmup_fraction: 0.01``, ``horizon_tokens: 1e9``); the LR of step ``s`` depends on the
    horizon, never on where the run stops, so a run ended by the early stop has followed the
    same LR curve as an unstopped one up to its stop.
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
    warmup_steps: int | None = 50  # None when warmup_fraction sets the warm-up
    schedule: str = "constant"  # or "cosine" (to min_lr_ratio at the horizon)
    min_lr_ratio: float = 0.1
    decay_steps: int | None = None  # cosine horizon in steps; default: the run's budget
    # The schedule in tokens and fractions (scales as 1/(B·C)): warm-up steps =
    # floor(warmup_fraction · horizon steps); horizon steps = floor(horizon_tokens / (B·C)).
    warmup_fraction: float | None = None
    horizon_tokens: int | None = None
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
    # The most tokens one forward/backward pass holds: a rank's B/W rows go through in equal
    # micro-batches of at most this many tokens whose gradients add up to one optimizer step
    # (DeepSpeed gradient accumulation). None: the rank's whole batch in one pass.
    micro_batch_tokens: int | None = None
    # How the step's loss is computed (chunked_cross_entropy.py): "full" builds the (m·C, V)
    # logits; "chunked" never does (same loss and gradients to rounding); "liger" is
    # Liger-Kernel's fused kernel (CUDA, optional package).
    loss_implementation: str = "full"

    def micro_batch_rows(self, world_size: int = 1) -> int:
        """Rows per forward pass on a rank: the largest divisor of ``B / world_size`` whose
        micro-batch holds at most ``micro_batch_tokens`` tokens (all rows when unset)."""
        rows = self.batch_size // world_size
        if self.micro_batch_tokens is None:
            return rows
        fitting = max(1, int(self.micro_batch_tokens) // self.context_length)
        return max(d for d in range(1, min(rows, fitting) + 1) if rows % d == 0)

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
        if not budgets and self.horizon_tokens is not None:
            budgets.append(self._horizon_token_steps())
        if not budgets:
            raise ValueError(
                "training.max_steps / training.max_tokens: give at least one budget "
                "(or training.horizon_tokens, to train to the end of the cosine)"
            )
        return min(budgets)

    def _horizon_token_steps(self) -> int:
        """``floor(horizon_tokens / (B·C))``: the reference's ``int(1e9 / tokens_per_step)``."""
        return int(self.horizon_tokens) // self.tokens_per_step

    def lr_schedule_steps(self, total_steps: int | None = None) -> tuple[int, int]:
        """Return ``(warmup_steps, horizon_steps)`` of the LR schedule, in optimizer steps.

        Horizon: ``floor(horizon_tokens / (B·C))`` if ``horizon_tokens`` is set, else
        ``decay_steps``, else ``total_steps`` (default: the run's budget). Warm-up:
        ``floor(warmup_fraction · horizon)`` if ``warmup_fraction`` is set (as the reference's
        ``int(max_steps * 0.01)``), else ``warmup_steps``.
        """
        if self.horizon_tokens is not None:
            horizon = self._horizon_token_steps()
        elif self.decay_steps:
            horizon = int(self.decay_steps)
        else:
            horizon = self.total_steps if total_steps is None else int(total_steps)
        if self.warmup_fraction is not None:
            warmup = math.floor(float(self.warmup_fraction) * horizon)
        else:
            warmup = int(self.warmup_steps or 0)
        return warmup, horizon

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
    _check_run_name(config.run_name)
    _check_sizes(config)
    _check_micro_batch(config)
    _check_loss_implementation(config)
    _check_preset(config.preset)
    _check_corpus(config, vocab_size, corpus_tokens)
    _check_data_variant(config)
    _check_optimizer(config)
    _check_budget_and_variant_options(config)
    _check_checkpoints_and_early_stop(config)
    _check_deepspeed(config.deepspeed)


def _where(config: TrainingRunConfig) -> str:
    """The run named at the end of an error message: `` (run '<name>')``."""
    return f" (run {config.run_name!r})"


def _check_run_name(name: str) -> None:
    """Raise unless ``name`` is a non-empty folder-safe name."""
    if not name or not re.fullmatch(r"[A-Za-z0-9._=-]+", name):
        raise ValueError(f"training.run_name: {name!r} must be non-empty [A-Za-z0-9._=-]")


def _check_sizes(config: TrainingRunConfig) -> None:
    """Raise unless the batch size and context length are positive integers."""
    for key in ("batch_size", "context_length"):
        value = getattr(config, key)
        if not isinstance(value, int | np.integer) or value <= 0:
            label = key.replace("_", " ")
            raise ValueError(f"{_param(key)}: {label} must be a positive integer, got {value!r}")


def _check_micro_batch(config: TrainingRunConfig) -> None:
    """Raise unless ``micro_batch_tokens`` is unset or holds at least one sequence of ``C``."""
    value = config.micro_batch_tokens
    if value is None:
        return
    if not isinstance(value, int | np.integer) or value < config.context_length:
        raise ValueError(
            f"{_param('micro_batch_tokens')}: a micro-batch must hold at least one sequence of "
            f"the context length {config.context_length} tokens, got {value!r}{_where(config)}"
        )


def _check_preset(preset: Any) -> None:
    """Raise unless ``preset`` is a shipped preset's name or a mapping with ``family``."""
    if isinstance(preset, str):
        presets = load_model_presets()
        if preset not in presets:
            raise ValueError(
                f"{_param('preset')}: unknown preset {preset!r}; choose one of {sorted(presets)}"
            )
    elif not isinstance(preset, Mapping) or "family" not in preset:
        raise ValueError(f"{_param('preset')}: a preset is a name or a mapping with 'family'")


def _check_corpus(config: TrainingRunConfig, vocab_size: int, corpus_tokens: int) -> None:
    """Raise unless the context fits the model's positions and the corpus holds one sequence."""
    if config.context_length > config.positions:
        raise ValueError(
            f"{_param('context_length')}: context length {config.context_length} exceeds the "
            f"model's n_positions={config.positions}{_where(config)}"
        )
    if vocab_size <= 0:
        raise ValueError(f"vocab_size: must be positive, got {vocab_size}")
    width = config.context_length + 1
    if corpus_tokens < width:
        raise ValueError(
            f"train_tokens: the corpus has {corpus_tokens} tokens, fewer than one sequence of "
            f"context_length + 1 = {width}{_where(config)}"
        )


def _check_data_variant(config: TrainingRunConfig) -> None:
    """Raise unless the data variant is registered (and, for copy spans, its spans fit)."""
    load_variant_providers()
    if config.data_variant not in DATA_VARIANTS:
        raise ValueError(
            f"{_param('data_variant')}: unknown data variant {config.data_variant!r}; choose "
            f"one of {sorted(DATA_VARIANTS)}"
        )
    if config.data_variant == "copy_spans":
        _check_copy_spans(config)


def _check_copy_spans(config: TrainingRunConfig) -> None:
    """Raise unless the copy rate is a probability and a span plus its copy fit the context."""
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
    if 2 * high > config.context_length + 1:
        raise ValueError(
            f"training.span_max_fraction: a span of up to {high} tokens (source + copy) is "
            f"longer than the context of {config.context_length} tokens{_where(config)}"
        )


def _check_optimizer(config: TrainingRunConfig) -> None:
    """Raise unless the AdamW settings and the LR schedule are usable."""
    if not config.learning_rate > 0:
        raise ValueError(f"training.learning_rate: must be positive, got {config.learning_rate}")
    _check_schedule_units(config)
    if config.schedule not in SCHEDULES:
        raise ValueError(f"training.schedule: {config.schedule!r} is not one of {SCHEDULES}")
    if config.weight_decay < 0:
        raise ValueError(f"training.weight_decay: must be >= 0, got {config.weight_decay}")
    if len(config.betas) != 2 or not all(0.0 <= b < 1.0 for b in config.betas):
        raise ValueError(f"training.betas: need two values in [0, 1), got {config.betas}")


def _check_schedule_units(config: TrainingRunConfig) -> None:
    """Raise unless the warm-up and the horizon are each given once, in steps or in tokens /
    fractions, and the warm-up ends before a horizon given in tokens."""
    fraction, steps = config.warmup_fraction, config.warmup_steps
    if fraction is not None and steps is not None:
        raise ValueError(
            f"training.warmup_fraction: give the warm-up once: warmup_fraction={fraction} and "
            f"warmup_steps={steps} are both set (set training.warmup_steps: null)"
        )
    if fraction is None and steps is None:
        raise ValueError("training.warmup_steps: null needs training.warmup_fraction")
    if steps is not None and steps < 0:
        raise ValueError(f"training.warmup_steps: must be >= 0, got {steps}")
    if fraction is not None and not 0.0 <= float(fraction) < 1.0:
        raise ValueError(f"training.warmup_fraction: must be in [0, 1), got {fraction}")
    horizon = config.horizon_tokens
    if horizon is None:
        return
    if config.decay_steps is not None:
        raise ValueError(
            f"training.horizon_tokens: give the horizon once: horizon_tokens={horizon} and "
            f"decay_steps={config.decay_steps} are both set (set training.decay_steps: null)"
        )
    if horizon < config.tokens_per_step:
        raise ValueError(
            f"training.horizon_tokens: {horizon} tokens is less than one step of B·C = "
            f"{config.tokens_per_step} tokens{_where(config)}"
        )
    warmup, steps_in_horizon = config.lr_schedule_steps()
    if warmup >= steps_in_horizon:
        raise ValueError(
            f"training.warmup_steps: a warm-up of {warmup} steps does not end before the "
            f"horizon of {steps_in_horizon} steps (horizon_tokens={horizon}){_where(config)}"
        )


def _check_loss_implementation(config: TrainingRunConfig) -> None:
    """Raise unless ``loss_implementation`` is one of ``LOSS_IMPLEMENTATIONS``."""
    if config.loss_implementation not in LOSS_IMPLEMENTATIONS:
        raise ValueError(
            f"training.loss_implementation: {config.loss_implementation!r} is not one of "
            f"{LOSS_IMPLEMENTATIONS}"
        )


def _check_budget_and_variant_options(config: TrainingRunConfig) -> None:
    """Raise unless a positive budget is given and the variant accepts its options."""
    for key in ("max_steps", "max_tokens"):
        value = getattr(config, key)
        if value is not None and value <= 0:
            raise ValueError(f"training.{key}: must be positive, got {value}")
    config.total_steps  # noqa: B018 - raises if neither budget is given
    if config.data_variant in VARIANT_CHECKS:
        VARIANT_CHECKS[config.data_variant](config.run_variant_options, config.context_length)


def _check_checkpoints_and_early_stop(config: TrainingRunConfig) -> None:
    """Raise unless the checkpoint, logging, evaluation and early-stop options are usable."""
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


def _check_deepspeed(ds_config: Any) -> None:
    """Raise unless ``ds_config`` is a mapping without its own optimizer or scheduler."""
    if not isinstance(ds_config, Mapping):
        raise ValueError("training.deepspeed: must be a mapping (a DeepSpeed config dict)")
    for key in ("optimizer", "scheduler"):
        if key in ds_config:
            raise ValueError(
                f"training.deepspeed.{key}: set the {key} in training's parameters, not in the "
                "DeepSpeed config (the run passes its own torch AdamW and LR schedule)"
            )
