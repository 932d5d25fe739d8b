"""Thin Kedro nodes around ``ih_kedro.science.evaluation.lm_eval_adapter``: lm-evaluation-harness
benchmarks of each run's final checkpoint, logged to MLflow (off at the default scale)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from ih_kedro.science.evaluation.bi_induct import runs_with_variants
from ih_kedro.science.evaluation.lm_eval_adapter import SCORE_COLUMNS
from ih_kedro.science.telemetry.checkpoints import list_checkpoints

logger = logging.getLogger(__name__)

LM_EVAL_COLUMNS = ["run_name", "preset", "variant", "seed", "step", "tokens_seen", *SCORE_COLUMNS]
MLFLOW_BATCH = 500  # metrics per log_metrics call (MLflow caps a batch at 1,000)


def evaluate_lm_eval(
    compute_table: pd.DataFrame,
    sweep_manifest: pd.DataFrame,
    tokenizer: Any,
    params: dict[str, Any],
) -> pd.DataFrame:
    """lm-evaluation-harness benchmarks of every run's final checkpoint (``bi_induct.lm_eval``).

    Disabled (the default scale): an empty table with the columns, no checkpoint loaded.
    ``compute_table`` only orders this node after the matched-compute check. Returns one row per
    (run, task, metric, filter): ``LM_EVAL_COLUMNS``.
    """
    if not params.get("enabled", False):
        logger.info("bi_induct: lm-eval benchmarks skipped (bi_induct.lm_eval.enabled is false)")
        return pd.DataFrame(columns=LM_EVAL_COLUMNS)
    if compute_table.empty:
        raise ValueError("bi_induct: the sweep has no runs")
    from ih_kedro.science.evaluation.lm_eval_adapter import evaluate_checkpoint_tasks

    frames = []
    for run in runs_with_variants(sweep_manifest).to_dict("records"):
        checkpoints = list_checkpoints(run["run_dir"])
        if not checkpoints:
            raise ValueError(f"run {run['run_name']}: no checkpoints under {run['run_dir']}")
        step, path, tokens_seen = checkpoints[-1]
        logger.info("bi_induct: lm-eval %s on %s (step %d)", list(params["tasks"]),
                    run["run_name"], step)  # fmt: skip
        table = evaluate_checkpoint_tasks(path, tokenizer, params)
        labels = {"run_name": run["run_name"], "preset": run["preset"], "variant": run["variant"],
                  "seed": int(run["seed"]), "step": int(step), "tokens_seen": float(tokens_seen)}  # fmt: skip
        frames.append(table.assign(**labels)[LM_EVAL_COLUMNS])
    return pd.concat(frames, ignore_index=True)


def _lm_eval_metric(task: str, metric: str, filter_name: str) -> str:
    """``lm_eval/<task>/<metric>`` (MLflow allows no ``:``; a group's task is ``group::task``)."""
    suffix = "" if filter_name == "none" else f"_{filter_name}"
    return f"lm_eval/{task.replace('::', '/')}/{metric}{suffix}"


def _log_in_batches(mlflow: Any, metrics: dict[str, float], step: int | None = None) -> None:
    items = list(metrics.items())
    for start in range(0, len(items), MLFLOW_BATCH):
        mlflow.log_metrics(dict(items[start : start + MLFLOW_BATCH]), step=step)


def log_lm_eval_to_mlflow(lm_eval_scores: pd.DataFrame, sweep_manifest: pd.DataFrame) -> None:
    """Each run's scores into its own nested run (``bi_induct/lm_eval/<task>/<metric>`` at the
    evaluated step) and the mean over seeds into the active run
    (``bi_induct/<preset>/<variant>/lm_eval/<task>/<metric>``). Nothing when the table is empty
    (benchmarks disabled)."""
    scores = lm_eval_scores[np.isfinite(lm_eval_scores["value"].astype(float))]
    if scores.empty:
        return
    import mlflow

    names = [_lm_eval_metric(t, m, f) for t, m, f in zip(scores["task"], scores["metric"],
             scores["filter"], strict=True)]  # fmt: skip
    scores = scores.assign(name=names)
    means = scores.groupby(["preset", "variant", "name"])["value"].mean()
    started = mlflow.active_run() is None
    if started:
        mlflow.start_run(run_name="bi_induct")
    try:
        _log_in_batches(mlflow, {f"bi_induct/{preset}/{variant}/{name}": float(value)
                                 for (preset, variant, name), value in means.items()})  # fmt: skip
    finally:
        if started:
            mlflow.end_run()
    run_ids = {}
    if "mlflow_run_id" in sweep_manifest:
        run_ids = dict(
            zip(sweep_manifest["run_name"], sweep_manifest["mlflow_run_id"], strict=True)
        )
    for run_name, rows in scores.groupby("run_name"):
        run_id = run_ids.get(run_name)
        if not isinstance(run_id, str) or not run_id:
            continue
        try:
            with mlflow.start_run(run_id=run_id, nested=True):
                _log_in_batches(mlflow, {f"bi_induct/{n}": float(v) for n, v in
                                         zip(rows["name"], rows["value"], strict=True)},
                                step=int(rows["step"].iloc[0]))  # fmt: skip
        except Exception as error:  # noqa: BLE001 - a missing run must not fail the pipeline
            logger.warning("run %s: MLflow logging skipped (%s)", run_name, error)
