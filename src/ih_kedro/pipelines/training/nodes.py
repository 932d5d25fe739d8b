"""Training nodes: expand the sweep grid, validate every cell, then train each run.

The one sanctioned side effect of the project's nodes: runs write checkpoints into the
``CheckpointStore`` the catalog hands in (resumable training is stateful). The node returns
the ``sweep_manifest`` table; a rerun skips runs whose ``run_summary.json`` exists.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.config import validate_run_config
from ih_kedro.science.training.grid import (
    ONLINE_METRIC,
    ONLINE_METRICS,
    expand_grid,
    online_metric_key,
    sweep_probe_length,
    with_variant_data,
)
from ih_kedro.science.training.run import MANIFEST_COLUMNS

logger = logging.getLogger(__name__)


def make_online_evaluator(
    train_tokens: PackedTokens, context_length: int, options: Mapping[str, Any]
) -> Callable[[torch.nn.Module], dict[str, float]]:
    """Build ``evaluate(model)``: the best prefix-matching score of a head in layers ≥ 1.

    Probes: ``n_probes`` sequences of ``probe_length`` unique tokens (``train_sweep`` fills it
    with :func:`sweep_probe_length`, one length for the whole sweep; absent: ``min(50, C // 2)``)
    drawn from the ``token_pool_size`` most frequent training tokens, repeated twice
    (docs/calibration.md). Returns ``{"prefix_matching_best_layer1", "prefix_matching_best_layer0",
    "prefix_matching_by_parity_best_layer1", "probe_length"}``: the best head's mean score, and
    the best (head, query parity) one, whose mean over even or odd second-half queries finds a
    head gated to every other position (for a one-layer model "layer1" is layer 0's best).
    ``options["metric"]`` picks which of them the early stop watches (:func:`online_metric_key`).
    """
    from ih_kedro.science.data.vocabulary import frequent_token_pool
    from ih_kedro.science.telemetry.probes import repeated_token_probes
    from ih_kedro.science.telemetry.scores import head_pattern_scores

    online_metric_key(options)  # an unknown metric fails here, before any training

    pool = frequent_token_pool(
        np.asarray(train_tokens.tokens),
        train_tokens.vocab_size,
        int(options.get("token_pool_size", 500)),
        exclude=train_tokens.non_content_token_ids,
    )
    length = int(options.get("probe_length") or min(50, context_length // 2))
    if 2 * length > context_length:
        raise ValueError(
            f"training.online_emergence.probe_length: 2 x {length} tokens exceed the context "
            f"length {context_length}"
        )
    probes = repeated_token_probes(
        int(options.get("n_probes", 64)), int(length), pool, int(options.get("probe_seed", 0))
    )  # (n, 2L)

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        per_sample = head_pattern_scores(model, probes, batch_size=64)  # {metric: (n, l, H)}
        scores = per_sample["prefix_matching"].mean(0)  # (n_layers, n_heads)
        by_parity = torch.stack(
            [per_sample["prefix_matching_even"], per_sample["prefix_matching_odd"]]
        ).mean(1)  # (2, n_layers, n_heads)
        later = slice(1, None) if scores.shape[0] > 1 else slice(None)
        return {
            ONLINE_METRIC: float(scores[later].max()),
            "prefix_matching_best_layer0": float(scores[0].max()),
            ONLINE_METRICS["prefix_matching_by_parity"]: float(by_parity[:, later].max()),
            "probe_length": float(length),
        }

    return evaluate


def train_sweep(
    train_tokens: PackedTokens,
    checkpoint_store: CheckpointStore,
    params: dict[str, Any],
    variant_data: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Train every cell of the sweep grid (resuming or skipping finished runs).

    ``variant_data`` (optional input, see :func:`with_variant_data`) carries options that an
    upstream node produced for the data variant, e.g. the path of a saved bigram model; it
    makes that node a real dependency of the sweep. All configs are validated before the first
    step. ``params["executor"]`` says where the runs execute
    (:class:`~ih_kedro.science.training.sweep.ExecutorConfig`: Ray tasks by default, or
    ``kind: sequential`` in this process). Each run is an MLflow run nested under the active
    run (``params["mlflow"]``, default on). Returns the ``sweep_manifest``: one row per run with
    the columns of docs/architecture.md. Raises ``SweepFailedError`` naming the runs that
    failed (after the others finished).
    """
    from ih_kedro.science.training.sweep import ExecutorConfig, run_sweep
    from ih_kedro.science.training.tasks import TrackingSpec

    configs = with_variant_data(expand_grid(params), variant_data)
    for config in configs:
        validate_run_config(config, train_tokens.vocab_size, len(train_tokens))
    executor = ExecutorConfig.from_params(params.get("executor"))
    for config in configs:
        if config.batch_size % executor.ranks_per_run:
            raise ValueError(
                f"training.batch_sizes: batch size {config.batch_size} is not divisible by "
                f"training.executor.ranks_per_run={executor.ranks_per_run}"
            )
    online = {**dict(params.get("online_emergence") or {}),
              "probe_length": sweep_probe_length(params)}  # fmt: skip
    tracking = None
    if params.get("mlflow", True):
        import mlflow

        from ih_kedro.science.training.tracking import absolute_tracking_uri

        active = mlflow.active_run()
        tracking = TrackingSpec(
            absolute_tracking_uri(mlflow.get_tracking_uri()),
            active.info.run_id if active is not None else None,
        )
    factory = None
    if online.get("enabled", True):
        factory = functools.partial(make_online_evaluator, options=online)
    rows = run_sweep(
        configs,
        train_tokens,
        checkpoint_store,
        executor,
        tracking=tracking,
        evaluator_factory=factory,
    )
    manifest = pd.DataFrame(rows, columns=list(MANIFEST_COLUMNS))
    manifest["online_emergence_step"] = manifest["online_emergence_step"].astype(float)
    return manifest
