"""Training nodes: expand the sweep grid, validate every cell, then train each run.

The one sanctioned side effect of the project's nodes: runs write checkpoints into the
``CheckpointStore`` the catalog hands in (resumable training is stateful). The node returns
the ``sweep_manifest`` table; a rerun skips runs whose ``run_summary.json`` exists.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.telemetry.online import make_online_evaluator
from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.config import TrainingRunConfig, validate_run_config
from ih_kedro.science.training.grid import (
    expand_grid,
    run_name,
    sweep_probe_length,
    with_variant_data,
)
from ih_kedro.science.training.run import MANIFEST_COLUMNS

logger = logging.getLogger(__name__)


def grid_configs(params: Mapping[str, Any]) -> list[TrainingRunConfig]:
    """The sweep's runs: ``expand_grid(params)`` less those ``seed_cells`` leaves out.

    ``seed_cells`` (adaptive seeds: later seeds train only where a verdict is still open) is a
    list of ``{seeds, labels}``: a run of one of those seeds is kept only in the cells whose
    ``data_variants`` label is listed; seeds no entry names train in every cell. Raises naming
    a label that no cell of the grid has.
    """
    configs = expand_grid(params)
    for entry in params.get("seed_cells") or []:
        seeds = {int(s) for s in entry.get("seeds") or []}
        labels = [str(label) for label in entry.get("labels") or []]

        def named(config: TrainingRunConfig, label: str) -> bool:
            name = run_name(config.preset, config.batch_size, config.context_length, label,
                            config.seed)  # fmt: skip
            return config.run_name == name

        unknown = [lb for lb in labels if not any(named(c, lb) for c in configs)]
        if unknown:
            raise ValueError(f"training.seed_cells: labels {unknown} name no cell of the grid")
        configs = [c for c in configs
                   if c.seed not in seeds or any(named(c, lb) for lb in labels)]  # fmt: skip
    return configs


def train_sweep(
    train_tokens: PackedTokens,
    checkpoint_store: CheckpointStore,
    params: dict[str, Any],
    variant_data: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Train every cell of the sweep grid (:func:`grid_configs`; resuming or skipping finished
    runs).

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

    configs = with_variant_data(grid_configs(params), variant_data)
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
