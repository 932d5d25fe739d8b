"""The design of a training sweep: one ``TrainingRunConfig`` per cell of the parameter grid.

No Kedro here: ``expand_grid(params)`` turns ``training``'s parameters (presets × batch sizes ×
contexts × data variants × seeds, minus ``exclude_cells``) into run configs with deterministic
names; the other helpers pick the online metric, the sweep's probe length and merge options
produced upstream (``variant_data``) into every run.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from ih_kedro.science.training.config import TrainingRunConfig

ONLINE_METRIC = "prefix_matching_best_layer1"
# training.online_emergence.metric -> the evaluator's key the early stop watches. The by-parity
# score is the best (head, query parity): data whose second halves alternate A B A B (repetition
# frequency 1) teach heads induction at every other position, which the mean PS halves.
ONLINE_METRICS = {
    "prefix_matching": ONLINE_METRIC,
    "prefix_matching_by_parity": "prefix_matching_by_parity_best_layer1",
}


def online_metric_key(online: Mapping[str, Any]) -> str:
    """The evaluator key of ``training.online_emergence.metric`` (default ``prefix_matching``)."""
    metric = online.get("metric") or "prefix_matching"
    if metric not in ONLINE_METRICS:
        raise ValueError(
            f"training.online_emergence.metric: {metric!r} is not one of {sorted(ONLINE_METRICS)}"
        )
    return ONLINE_METRICS[metric]


def _keep(value: Any) -> Any:
    return value


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


# Settings held fixed across the sweep: parameter -> (TrainingRunConfig field, cast). A parameter
# that is absent takes the field's default, so every default lives in TrainingRunConfig alone.
_SHARED_FIELDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "n_positions": ("n_positions", _keep),
    "attn_implementation": ("attn_implementation", _keep),
    "learning_rate": ("learning_rate", float),
    "warmup_steps": ("warmup_steps", _int_or_none),
    "warmup_fraction": ("warmup_fraction", _float_or_none),
    "horizon_tokens": ("horizon_tokens", _int_or_none),
    "schedule": ("schedule", _keep),
    "min_lr_ratio": ("min_lr_ratio", float),
    "decay_steps": ("decay_steps", _keep),
    "weight_decay": ("weight_decay", float),
    "betas": ("betas", tuple),
    "eps": ("eps", float),
    "max_steps": ("max_steps", _keep),
    "max_tokens": ("max_tokens", _keep),
    "checkpoint_every": ("checkpoint_every", int),
    "checkpoint_dense_until": ("checkpoint_dense_until", int),
    "checkpoint_unit": ("checkpoint_unit", _keep),
    "log_every": ("log_every", int),
    "micro_batch_tokens": ("micro_batch_tokens", _keep),
    "loss_implementation": ("loss_implementation", str),
}
# The same for ``online_emergence``'s options.
_ONLINE_FIELDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "eval_every": ("eval_every", int),
    "threshold": ("early_stop_threshold", float),
    "margin_factor": ("early_stop_margin_factor", float),
    "min_extra_steps": ("early_stop_min_extra_steps", int),
}


def _fields(params: Mapping[str, Any], spec: Mapping[str, tuple[str, Callable]]) -> dict[str, Any]:
    return {field: cast(params[key]) for key, (field, cast) in spec.items() if key in params}


def _as_list(params: Mapping[str, Any], key: str) -> list[Any]:
    value = params.get(key)
    if value is None:
        raise ValueError(f"training.{key}: missing from parameters")
    values = list(value) if isinstance(value, list | tuple) else [value]
    if not values:
        raise ValueError(f"training.{key}: the grid axis is empty")
    return values


def run_name(
    preset: str,
    batch_size: int,
    context_length: int,
    data_variant: str,
    seed: int,
    *,
    copy_rate: float = 1.0,
) -> str:
    """Deterministic run name, e.g. ``attn-only-2l-d128_B64_C32_copy_spans_s0``.

    A copy rate other than 1 is part of the name (``..._copy_spans_r0.5_s0``) so sweeps with
    different rates never share a folder.
    """
    variant = data_variant
    if data_variant == "copy_spans" and copy_rate != 1.0:
        variant = f"{data_variant}_r{copy_rate:g}"
    return f"{preset}_B{batch_size}_C{context_length}_{variant}_s{seed}"


def _variant_cells(params: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """The data-variant axis as ``(variant, label, options)`` triples.

    Each entry of ``data_variants`` is either a variant name (options from
    ``variant_options[<name>]``; for ``copy_spans`` also the top-level ``copy_rate`` /
    ``span_min_fraction`` / ``span_max_fraction``) or a mapping
    ``{variant: <name>, label: <short name for run names>, options: {...}}``, so an experiment can
    sweep a variant's options (e.g. frequency x reliability) as cells of the grid.
    """
    per_variant = dict(params.get("variant_options") or {})
    copy_rate = float(params.get("copy_rate", 1.0))
    cells = []
    for entry in _as_list(params, "data_variants"):
        if isinstance(entry, Mapping):
            if "variant" not in entry:
                raise ValueError(f"training.data_variants: {dict(entry)!r} has no 'variant' key")
            variant = str(entry["variant"])
            options = {**dict(per_variant.get(variant) or {}), **dict(entry.get("options") or {})}
            label = str(entry.get("label") or variant)
        else:
            variant = str(entry)
            options = dict(per_variant.get(variant) or {})
            label = variant
        if variant == "copy_spans":
            options = {
                "copy_rate": copy_rate,
                "span_min_fraction": float(params.get("span_min_fraction", 0.125)),
                "span_max_fraction": float(params.get("span_max_fraction", 0.375)),
                **options,
            }
            rate = float(options["copy_rate"])
            if not isinstance(entry, Mapping) and rate != 1.0:
                label = f"{variant}_r{rate:g}"
        cells.append((variant, label, options))
    return cells


def expand_grid(params: Mapping[str, Any]) -> list[TrainingRunConfig]:
    """One ``TrainingRunConfig`` per cell of presets × batch sizes × contexts × variants × seeds.

    Optimizer, LR schedule, budget, checkpoint and early-stop settings are shared by every
    cell (held fixed across the sweep).
    """
    online = dict(params.get("online_emergence") or {})
    shared = {
        **_fields(params, _SHARED_FIELDS),
        **_fields(online, _ONLINE_FIELDS),
        "early_stop": bool(online.get("enabled", True) and online.get("early_stop", True)),
        "early_stop_metric": online_metric_key(online),
        "deepspeed": dict(params.get("deepspeed") or {}),
    }
    configs = []
    for preset, batch_size, context_length, (
        data_variant,
        label,
        options,
    ), seed in itertools.product(
        _as_list(params, "presets"),
        _as_list(params, "batch_sizes"),
        _as_list(params, "context_lengths"),
        _variant_cells(params),
        _as_list(params, "seeds"),
    ):
        configs.append(
            TrainingRunConfig(
                run_name=run_name(str(preset), batch_size, context_length, label, seed),
                preset=preset,
                batch_size=batch_size,
                context_length=context_length,
                seed=seed,
                data_variant=data_variant,
                variant_options=dict(options),
                **shared,
            )
        )
    names = [c.run_name for c in configs]
    if len(set(names)) != len(names):
        raise ValueError("training: the grid has duplicate cells (repeated axis values)")
    return _without_excluded_cells(configs, params.get("exclude_cells") or [])


def _without_excluded_cells(
    configs: list[TrainingRunConfig], exclude: list[Mapping[str, Any]]
) -> list[TrainingRunConfig]:
    """Drop the runs matching any ``training.exclude_cells`` entry (a fractional design).

    An entry names grid axes with a value each, e.g. ``{batch_size: 32, context_length: 128}``;
    a run matches when every named axis has that value. An entry that names an unknown axis
    or matches no run is an error, so a typo cannot silently keep an expensive cell.
    """
    axes = {"preset", "batch_size", "context_length", "data_variant", "seed"}
    kept = list(configs)
    for entry in exclude:
        unknown = set(entry) - axes
        if unknown or not entry:
            raise ValueError(
                f"training.exclude_cells: {dict(entry)} must name grid axes among {sorted(axes)}"
            )
        matches = [c for c in kept if all(getattr(c, k) == v for k, v in entry.items())]
        if not matches:
            raise ValueError(f"training.exclude_cells: {dict(entry)} matches no run of the grid")
        kept = [c for c in kept if c not in matches]
    if not kept:
        raise ValueError("training.exclude_cells: every run of the grid is excluded")
    return kept


def sweep_probe_length(params: Mapping[str, Any]) -> int:
    """The probe half-length ``L`` shared by every run of a sweep.

    ``online_emergence.probe_length`` when set, else ``min(50, min(context_lengths) // 2)``: one
    length for the whole grid, so the probe's difficulty and prefix-matching baseline do not
    change with ``C`` (the term the law estimates). Raises naming the parameter when a run's
    context cannot hold the probe twice.
    """
    contexts = [int(c) for c in _as_list(params, "context_lengths")]
    online = dict(params.get("online_emergence") or {})
    length = online.get("probe_length")
    length = int(length) if length else min(50, min(contexts) // 2)
    if length < 1 or 2 * length > min(contexts):
        raise ValueError(
            f"training.online_emergence.probe_length: {length} needs 1 <= 2 * L <= the smallest "
            f"context length {min(contexts)}"
        )
    return length


def with_variant_data(
    configs: list[TrainingRunConfig], variant_data: Mapping[str, Any] | None
) -> list[TrainingRunConfig]:
    """Add ``variant_data`` (options produced upstream, e.g. a saved model's path) to every run.

    A cell's own options win over ``variant_data``. Values must be small and serialisable
    (paths, checksums): configs travel to worker processes.
    """
    if not variant_data:
        return configs
    if not isinstance(variant_data, Mapping):
        raise ValueError(
            f"variant_data: expected a mapping of variant options, got {type(variant_data).__name__}"
        )
    for config in configs:
        config.variant_options = {**dict(variant_data), **config.variant_options}
    return configs
