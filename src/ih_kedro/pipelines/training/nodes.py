"""Training nodes: expand the sweep grid, validate every cell, then train each run.

The one sanctioned side effect of the project's nodes: runs write checkpoints into the
``CheckpointStore`` the catalog hands in (resumable training is stateful). The node returns
the ``sweep_manifest`` table; a rerun skips runs whose ``run_summary.json`` exists.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch

from ih_kedro.science.packed import PackedTokens
from ih_kedro.science.training import (
    MANIFEST_COLUMNS,
    CheckpointStore,
    TrainingRunConfig,
    train_run,
    validate_run_config,
)

logger = logging.getLogger(__name__)

ONLINE_METRIC = "prefix_matching_best_layer1"


def _keep(value: Any) -> Any:
    return value


# Settings held fixed across the sweep: parameter -> (TrainingRunConfig field, cast). A parameter
# that is absent takes the field's default, so every default lives in TrainingRunConfig alone.
_SHARED_FIELDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "n_positions": ("n_positions", _keep),
    "attn_implementation": ("attn_implementation", _keep),
    "learning_rate": ("learning_rate", float),
    "warmup_steps": ("warmup_steps", int),
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
        "early_stop_metric": ONLINE_METRIC,
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
    return configs


def make_online_evaluator(
    train_tokens: PackedTokens, context_length: int, options: Mapping[str, Any]
) -> Callable[[torch.nn.Module], dict[str, float]]:
    """Build ``evaluate(model)``: the best prefix-matching score of a head in layers ≥ 1.

    Probes: ``n_probes`` sequences of ``L = min(50, C // 2)`` unique tokens (or
    ``probe_length``) drawn from the ``token_pool_size`` most frequent training tokens, repeated
    twice (docs/calibration.md). Returns ``{"prefix_matching_best_layer1", "prefix_matching_best_layer0"}``
    (for a one-layer model the first is layer 0's best).
    """
    from ih_kedro.science.telemetry.probes import frequent_token_pool, repeated_token_probes
    from ih_kedro.science.telemetry.scores import prefix_matching_scores

    pool = frequent_token_pool(
        np.asarray(train_tokens.tokens),
        train_tokens.vocab_size,
        int(options.get("token_pool_size", 500)),
        exclude=(train_tokens.eos_token_id,),
    )
    length = options.get("probe_length") or min(50, context_length // 2)
    probes = repeated_token_probes(
        int(options.get("n_probes", 64)), int(length), pool, int(options.get("probe_seed", 0))
    )  # (n, 2L)

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        scores = prefix_matching_scores(model, probes, batch_size=64)  # (n_layers, n_heads)
        later = scores[1:] if scores.shape[0] > 1 else scores
        return {
            ONLINE_METRIC: float(later.max()),
            "prefix_matching_best_layer0": float(scores[0].max()),
        }

    return evaluate


def train_sweep(
    train_tokens: PackedTokens, checkpoint_store: CheckpointStore, params: dict[str, Any]
) -> pd.DataFrame:
    """Train every cell of the sweep grid (resuming or skipping finished runs).

    All configs are validated before the first step. Each run is an MLflow run nested under the
    active run (``params["mlflow"]``, default on). Returns the ``sweep_manifest``: one row per
    run with the columns of docs/architecture.md.
    """
    configs = expand_grid(params)
    for config in configs:
        validate_run_config(config, train_tokens.vocab_size, len(train_tokens))
    online = dict(params.get("online_emergence") or {})
    tracker = None
    if params.get("mlflow", True):
        from ih_kedro.science.tracking import MlflowTracker

        tracker = MlflowTracker()
    evaluators: dict[int, Callable] = {}
    rows = []
    logger.info("training sweep: %d runs into %s", len(configs), checkpoint_store.root)
    for index, config in enumerate(configs, start=1):
        evaluate = None
        if online.get("enabled", True):
            if config.context_length not in evaluators:
                evaluators[config.context_length] = make_online_evaluator(
                    train_tokens, config.context_length, online
                )
            evaluate = evaluators[config.context_length]
        logger.info("run %d/%d: %s", index, len(configs), config.run_name)
        summary = train_run(config, train_tokens, checkpoint_store, tracker, evaluate)
        rows.append({column: summary.get(column) for column in MANIFEST_COLUMNS})
    manifest = pd.DataFrame(rows, columns=list(MANIFEST_COLUMNS))
    manifest["online_emergence_step"] = manifest["online_emergence_step"].astype(float)
    return manifest
