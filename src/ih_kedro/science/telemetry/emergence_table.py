"""The emergence table: every run's emergence estimate for every detection spec, with covariates.

One row per (run, spec) from the per-checkpoint samples telemetry scored
(:func:`detect_emergence_table`, estimates by :func:`ih_kedro.science.telemetry.emergence
.estimate_emergence`), joined to the sweep manifest's covariates; and the ``min_layer`` checks
that run before any training (:func:`validate_min_layers`) or per metric
(:func:`check_min_layer`).

Plain numpy/pandas; no Kedro imports.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ih_kedro.science.telemetry.emergence import EmergenceEstimate, estimate_emergence

logger = logging.getLogger(__name__)

EMERGENCE_COLUMNS = [
    "run_name",
    "metric",
    "method",
    "step",
    "tokens",
    "ci_low",
    "ci_high",
    "censored",
    "status",
    "reason",
    "threshold",
    "last_step",
    "min_layer",
    "probe_length",
]
COVARIATE_COLUMNS = [
    "preset",
    "batch_size",
    "context_length",
    "seed",
    "copy_rate",
    "data_variant",
    "copy_events_per_sequence",
    "copied_token_fraction",
]


def check_min_layer(min_layer: int, shape: tuple[int, ...], where: str) -> None:
    """Raise naming ``<where>.min_layer`` when it leaves no layer of a ``(K, n, layers, ...)``
    metric (model-level ``(K, n)`` metrics have no layers and accept any ``min_layer``)."""
    if min_layer < 0:
        raise ValueError(f"{where}.min_layer: must be >= 0, got {min_layer}")
    if len(shape) >= 3 and min_layer >= shape[2]:
        raise ValueError(
            f"{where}.min_layer: {min_layer} leaves no layers (the model has {shape[2]} layers; "
            f"use 0..{shape[2] - 1})"
        )


def _run_tokens(run_name: str, scores: dict[str, np.ndarray]) -> np.ndarray:
    for key in ("tokens", "tokens_seen"):
        if key in scores:
            return np.asarray(scores[key], dtype=float)
    raise ValueError(f"score_samples[{run_name!r}]: missing 'tokens' (tokens seen per step)")


def _table_row(
    run_name: str, metric: str, estimate: EmergenceEstimate, min_layer: int, probe_length: float
) -> dict[str, Any]:
    """One row of the emergence table (:data:`EMERGENCE_COLUMNS`) from a run's estimate."""
    return {
        "run_name": run_name,
        "metric": metric,
        "method": estimate.method,
        "step": estimate.step,
        "tokens": estimate.tokens,
        "ci_low": estimate.ci_low,
        "ci_high": estimate.ci_high,
        "censored": estimate.censored,
        "status": estimate.status,
        "reason": estimate.reason,
        "threshold": math.nan if estimate.threshold is None else estimate.threshold,
        "last_step": estimate.last_step,
        "min_layer": min_layer,
        "probe_length": probe_length,
    }


def _spec_row(
    run_name: str,
    scores: dict[str, np.ndarray],
    steps: np.ndarray,
    tokens: np.ndarray,
    index: int,
    spec: dict[str, Any],
) -> dict[str, Any]:
    """The table row of one run for detection spec ``index`` (its metric is in ``scores``);
    raises naming ``telemetry.emergence.metrics[index].min_layer`` when it leaves no layer."""
    metric = spec["metric"]
    min_layer = int(spec.get("min_layer", 0))
    check_min_layer(min_layer, np.shape(scores[metric]), f"telemetry.emergence.metrics[{index}]")
    estimate = estimate_emergence(
        steps,
        tokens,
        scores[metric],
        method=spec.get("method", "threshold"),
        threshold=spec.get("threshold"),
        n_bootstrap=int(spec.get("n_bootstrap", 200)),
        seed=int(spec.get("seed", 0)),
        ci=float(spec.get("ci", 0.95)),
        min_layer=min_layer,
    )
    if estimate.status != "emerged":
        logger.info(
            "run %s, %s/%s: %s (%s)",
            run_name,
            metric,
            estimate.method,
            estimate.status,
            estimate.reason,
        )
    probe_length = float(scores.get("probe_length", math.nan))
    return _table_row(run_name, metric, estimate, min_layer, probe_length)


def _run_rows(
    run_name: str, scores: dict[str, np.ndarray], specs: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The table rows of one run, one per spec whose metric the run has (others are skipped
    with a warning); raises when the run has no steps or tokens or a spec no metric."""
    if "steps" not in scores:
        raise ValueError(f"score_samples[{run_name!r}]: missing 'steps'")
    steps = np.asarray(scores["steps"], dtype=float)
    tokens = _run_tokens(run_name, scores)
    rows: list[dict[str, Any]] = []
    for index, spec in enumerate(specs):
        if "metric" not in spec:
            raise ValueError(f"specs: every spec needs a 'metric', got {spec}")
        metric = spec["metric"]
        if metric not in scores:
            logger.warning("run %s has no %r samples: skipped for this spec", run_name, metric)
            continue
        rows.append(_spec_row(run_name, scores, steps, tokens, index, spec))
    return rows


def _typed_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows as a frame with columns :data:`EMERGENCE_COLUMNS` and their dtypes (also when
    there is no row)."""
    table = pd.DataFrame(rows, columns=EMERGENCE_COLUMNS)
    return table.astype(
        {
            "step": float,
            "tokens": float,
            "ci_low": float,
            "ci_high": float,
            "censored": bool,
            "status": str,
            "reason": str,
            "threshold": float,
            "last_step": float,
            "min_layer": int,
            "probe_length": float,
        }
    )


def _with_covariates(table: pd.DataFrame, sweep_manifest: pd.DataFrame | None) -> pd.DataFrame:
    """``table`` left-joined on ``run_name`` to the manifest's :data:`COVARIATE_COLUMNS` that
    exist; unchanged without a manifest (None, empty or without ``run_name``)."""
    if sweep_manifest is not None and len(sweep_manifest) and "run_name" in sweep_manifest:
        covariates = [c for c in COVARIATE_COLUMNS if c in sweep_manifest.columns]
        manifest = sweep_manifest[["run_name", *covariates]].drop_duplicates("run_name")
        table = table.merge(manifest, on="run_name", how="left", validate="many_to_one")
    return table


def detect_emergence_table(
    score_samples: dict[str, dict[str, np.ndarray]],
    sweep_manifest: pd.DataFrame | None,
    specs: list[dict[str, Any]],
) -> pd.DataFrame:
    """Emergence estimates for every run and every detection spec, joined to covariates.

    Args:
        score_samples: ``{run_name: {"steps": (K,), "tokens": (K,), <metric>: (K, n, ...)}}``
            as scored by telemetry (``tokens_seen`` is accepted for ``tokens``).
        sweep_manifest: one row per run (``run_name`` plus covariates); may be None or empty.
        specs: detection specs, e.g. ``{"metric": "prefix_matching", "method": "threshold",
            "threshold": 0.4, "min_layer": 1, "n_bootstrap": 200, "seed": 0, "ci": 0.95}``.

    Returns:
        One row per (run, spec) with columns :data:`EMERGENCE_COLUMNS` (``run_name, metric,
        method, step, tokens, ci_low, ci_high, censored, status, reason, threshold, last_step,
        min_layer, probe_length``; steps / tokens; ``probe_length`` from the scores, NaN if
        absent; ``threshold`` NaN when the method has none) and the manifest covariates of
        :data:`COVARIATE_COLUMNS` that exist. Every run is kept, with its ``status``
        (:data:`ih_kedro.science.telemetry.emergence.STATUSES`). A run lacking a spec's metric
        is skipped with a warning.

    Raises:
        ValueError: a spec's ``min_layer`` at or beyond a head-level metric's layers (named
            ``telemetry.emergence.metrics[i].min_layer``).
    """
    if not specs:
        raise ValueError("specs: at least one emergence detection spec is required")
    rows: list[dict[str, Any]] = []
    for run_name in sorted(score_samples):
        rows.extend(_run_rows(run_name, score_samples[run_name], specs))
    table = _typed_table(rows)
    if len(table):
        counts = table.groupby(["metric", "method"])["status"].value_counts().to_dict()
        logger.info("emergence status counts (metric, method, status): %s", counts)
    return _with_covariates(table, sweep_manifest).reset_index(drop=True)


MODEL_LEVEL_METRICS = frozenset({"associative_recall", "repeated_loss_drop"})
"""Metrics scored per model, not per head: ``min_layer`` does not apply to them."""


def emergence_min_layer(telemetry: Mapping[str, Any] | None, metric: str, default: int = 1) -> int:
    """The ``min_layer`` of the telemetry's emergence spec for ``metric``
    (``telemetry.emergence.metrics``; ``default`` when no spec names it or it sets none): the
    layers an experiment reading that metric's curve lets compete for the best head."""
    for spec in ((telemetry or {}).get("emergence") or {}).get("metrics") or []:
        if spec.get("metric") == metric:
            return int(spec.get("min_layer", default))
    return default


def select_emergence_rows(
    table: pd.DataFrame,
    metric: str,
    method: str,
    threshold: float | None = None,
    *,
    metric_parameter: str = "statistics.metric/method",
    threshold_parameter: str = "statistics.threshold",
) -> pd.DataFrame:
    """The rows of one ``metric`` / ``method`` (and ``threshold``, when given) of an emergence table.

    A chosen threshold keeps every row close to it (a saved table may carry float noise). The
    error messages name the parameters that chose (``metric_parameter``, ``threshold_parameter``).

    Raises:
        ValueError: no rows match, or several thresholds remain and ``threshold`` is None.
    """
    rows = table[(table["metric"] == metric) & (table["method"] == method)]
    if threshold is not None:
        rows = rows[np.isclose(rows["threshold"].astype(float), float(threshold))]
    if rows.empty:
        raise ValueError(
            f"{metric_parameter}: no emergence rows for metric={metric!r}, "
            f"method={method!r}, threshold={threshold!r}"
        )
    thresholds = rows["threshold"].dropna().unique() if "threshold" in rows else []
    if threshold is None and len(thresholds) > 1:
        raise ValueError(
            f"{threshold_parameter}: the table has thresholds {sorted(map(float, thresholds))} "
            f"for {metric}/{method}; choose one"
        )
    return rows.reset_index(drop=True)


def validate_min_layers(
    n_layers: int,
    telemetry: Mapping[str, Any] | None,
    statistics: Mapping[str, Any] | None = None,
    where: str = "",
) -> None:
    """Raise naming the parameter when a ``min_layer`` leaves no layer of an ``n_layers`` model.

    Checked before any training (the project's hook runs it for every experiment in the
    pipeline): ``telemetry.min_layer``, every head-level ``telemetry.emergence.metrics[i]
    .min_layer`` and ``statistics.trajectory_min_layer``. ``where`` prefixes the parameter names
    (e.g. ``law_fit.``).
    """
    checks: list[tuple[str, Any]] = []
    telemetry = telemetry or {}
    if "min_layer" in telemetry:
        checks.append(("telemetry.min_layer", telemetry["min_layer"]))
    metrics = (telemetry.get("emergence") or {}).get("metrics") or []
    for index, spec in enumerate(metrics):
        if spec.get("metric") not in MODEL_LEVEL_METRICS and "min_layer" in spec:
            checks.append((f"telemetry.emergence.metrics[{index}].min_layer", spec["min_layer"]))
    if statistics and "trajectory_min_layer" in statistics:
        checks.append(("statistics.trajectory_min_layer", statistics["trajectory_min_layer"]))
    for name, value in checks:
        if not isinstance(value, int | np.integer) or not 0 <= int(value) < n_layers:
            raise ValueError(
                f"{where}{name}: {value!r} is not a layer of the model (it has {n_layers} "
                f"layers: use 0..{n_layers - 1})"
            )
