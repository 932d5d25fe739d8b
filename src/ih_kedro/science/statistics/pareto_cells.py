"""The cell table of the frequency x reliability experiment: one row per training run.

Each run of the ``pareto`` grid has target repetition knobs (frequency, reliability); the
realised knobs are measured on the run's own first training batches (the exact batches it
trained on, :func:`~ih_kedro.science.data.batches.sample_batch`) and must meet the targets. Its
emergence status decides whether an induction head formed within the budget. The table also
aggregates to one row per grid cell, and selects the runs the frontier fit can use.

Plain numpy/pandas; no Kedro imports.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.variants.repetition_stats import check_repetition, measure_repetition
from ih_kedro.science.statistics import pareto_frontier as pf
from ih_kedro.science.statistics.paired_seeds import mean_interval

logger = logging.getLogger(__name__)

CELL_COLUMNS = (
    "run_name",
    "label",
    "seed",
    "frequency",
    "reliability",
    "realised_frequency",
    "realised_frequency_se",
    "realised_reliability",
    "realised_reliability_se",
    "status",
    "formed",
    "step",
    "ci_low",
    "ci_high",
    "tokens",
    "last_step",
    "budget_steps",
    "budget_tokens",
    "steps_trained",
    "tokens_seen",
    "stop_reason",
    "online_emergence_step",
    "preset",
    "batch_size",
    "context_length",
    "metric",
    "method",
)
"""Columns of ``pareto.cell_table`` (docs/architecture.md)."""


def _realised(
    train_tokens: PackedTokens, config: Any, variant_data: Mapping[str, Any], n_batches: int
) -> tuple[np.ndarray, Any]:
    """Measure the knobs on the run's own first ``n_batches`` training batches."""
    options = {**dict(variant_data), **config.variant_options}
    batches = [
        sample_batch(
            train_tokens.tokens,
            config.batch_size,
            config.context_length,
            config.seed,
            step,
            data_variant=config.data_variant,
            variant_options=options,
        ).tokens.numpy()
        for step in range(n_batches)
    ]
    return measure_repetition(np.concatenate(batches))  # (n_batches * B, C+1)


def _emergence_rows(emergence_table: pd.DataFrame, metric: str, method: str) -> pd.DataFrame:
    """The emergence rows of ``metric`` / ``method``, one per run (the first), by run name."""
    emergence = emergence_table[
        (emergence_table["metric"] == metric) & (emergence_table["method"] == method)
    ]
    if emergence.empty:
        raise ValueError(
            f"pareto.frontier.metric / method: the emergence table has no rows for "
            f"{metric!r} / {method!r}; it has {sorted(set(emergence_table['metric']))} / "
            f"{sorted(set(emergence_table['method']))}"
        )
    return emergence.drop_duplicates("run_name").set_index("run_name")


def _cell_row(
    run: Any, stats: Any, status: str, done: pd.Series, est: pd.Series, metric: str, method: str
) -> dict[str, Any]:
    """One run's row of the cell table: its knobs (``run``), realised knobs (``stats``),
    emergence (``status``, ``est``) and training record (``done``)."""
    config = run.config
    return {
        "run_name": run.run_name,
        "label": run.label,
        "seed": int(config.seed),
        "frequency": run.frequency,
        "reliability": run.reliability,
        "realised_frequency": stats.frequency,
        "realised_frequency_se": stats.frequency_se,
        "realised_reliability": stats.reliability,
        "realised_reliability_se": stats.reliability_se,
        "status": status,
        "step": float(est["step"]),
        "ci_low": float(est["ci_low"]),
        "ci_high": float(est["ci_high"]),
        "tokens": float(est["tokens"]),
        "last_step": float(est["last_step"]),
        "budget_steps": run.budget_steps,
        "budget_tokens": run.budget_tokens,
        "steps_trained": int(done["steps_trained"]),
        "tokens_seen": int(done["tokens_seen"]),
        "stop_reason": str(done["stop_reason"]),
        "online_emergence_step": float(done["online_emergence_step"]),
        "preset": str(done["preset"]),
        "batch_size": int(config.batch_size),
        "context_length": int(config.context_length),
        "metric": metric,
        "method": method,
    }


def build_cell_table(
    knobs: pd.DataFrame,
    sweep_manifest: pd.DataFrame,
    emergence_table: pd.DataFrame,
    train_tokens: PackedTokens,
    variant_data: Mapping[str, Any],
    frontier: Mapping[str, Any],
    formation: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per run: targets, realised knobs, emergence status, S* with its CI, tokens, and
    (with ``formation``) the threshold-free formation score and the verdict at each threshold.

    The realised frequency and reliability are measured on the run's own first
    ``frontier.realised_batches`` training batches (the exact batches it trained on) and must
    meet the targets within ``frontier.tolerance`` (``check_repetition``), else this fails.

    Args:
        knobs: one row per run of the grid: ``run_name, label, frequency, reliability,
            budget_steps, budget_tokens, config`` (its training run configuration).
        sweep_manifest: the sweep's record of each run (steps trained, stop reason, preset).
        emergence_table: the telemetry's emergence table.
        train_tokens: the training stream the runs sampled their batches from.
        variant_data: the options every semi-natural run reads the bigram model with.
        frontier: ``metric``, ``method``, ``realised_batches``, ``tolerance``.
        formation: one row per run (:func:`ih_kedro.science.telemetry.formation.
            formation_table`): its ``formation_score, peak, step_at_<t>, formed_at_<t>``
            columns are appended; every run of the grid needs a row.

    Returns:
        The cell table, columns :data:`CELL_COLUMNS` (+ the formation columns).
    """
    metric = str(frontier.get("metric", "prefix_matching"))
    method = str(frontier.get("method", "threshold"))
    emergence = _emergence_rows(emergence_table, metric, method)
    manifest = sweep_manifest.set_index("run_name")
    status = pf.emergence_status(emergence)
    n_batches = int(frontier.get("realised_batches", 8))
    tolerance = float(frontier.get("tolerance", 0.03))
    rows = []
    for run in knobs.itertuples(index=False):
        if run.run_name not in manifest.index or run.run_name not in emergence.index:
            raise ValueError(
                f"pareto: run {run.run_name} of the grid is missing from the sweep manifest or "
                "the emergence table (rerun training / telemetry)"
            )
        stats = _realised(train_tokens, run.config, variant_data, n_batches)
        check_repetition(
            stats, run.frequency, run.reliability, tolerance, where=f" (run {run.run_name})"
        )
        done, est = manifest.loc[run.run_name], emergence.loc[run.run_name]
        rows.append(_cell_row(run, stats, status.loc[run.run_name], done, est, metric, method))
    table = pd.DataFrame(rows)
    table["formed"] = pf.formed_from_status(table["status"])
    logger.info(
        "pareto: %d runs, %d formed, %d not formed, %d unknown",
        len(table),
        int((table["formed"] == 1).sum()),
        int((table["formed"] == 0).sum()),
        int(table["formed"].isna().sum()),
    )
    return _with_formation(table[list(CELL_COLUMNS)], formation)


def _with_formation(table: pd.DataFrame, formation: pd.DataFrame | None) -> pd.DataFrame:
    """``table`` with the formation columns of ``formation`` joined by run name."""
    if formation is None:
        return table
    missing = sorted(set(table["run_name"]) - set(formation["run_name"]))
    if missing:
        raise ValueError(f"pareto: runs missing from the formation table: {missing}")
    columns = [
        c
        for c in formation.columns
        if c in {"formation_score", "peak"} or c.startswith(("step_at_", "formed_at_"))
    ]
    return table.merge(formation[["run_name", *columns]], on="run_name", how="left")


def thresholds_of(table: pd.DataFrame) -> list[float]:
    """The thresholds whose ``formed_at_<t>`` columns ``table`` holds, ascending."""
    return sorted(float(c.removeprefix("formed_at_")) for c in table.columns
                  if c.startswith("formed_at_"))  # fmt: skip


def check_formed_matches_status(cell_table: pd.DataFrame) -> None:
    """Raise ``ValueError`` naming every run whose ``formed`` disagrees with its ``status``.

    ``formed`` is what the frontier is fitted on; it must be the reading of ``status`` that
    :func:`~ih_kedro.science.statistics.pareto_frontier.formed_from_status` gives (1 for
    emerged / left-censored, 0 for censored, NaN otherwise), so an edited or stale column
    cannot silently move the frontier.
    """
    if "status" not in cell_table.columns:
        raise ValueError("pareto.cell_table: no status column to check formed against")
    expected = pf.formed_from_status(cell_table["status"].astype(str))
    given = pd.to_numeric(cell_table["formed"], errors="coerce").astype(float)
    agree = (given == expected) | (given.isna() & expected.isna())
    if not agree.all():
        bad = cell_table.loc[~agree]
        runs = ", ".join(
            f"{r.run_name} (formed={f}, status={r.status})"
            for r, f in zip(bad.itertuples(index=False), given[~agree], strict=True)
        )
        raise ValueError(
            f"pareto.cell_table: formed disagrees with status for {len(bad)} run(s): {runs}"
        )


def fit_runs(cell_table: pd.DataFrame) -> pd.DataFrame:
    """Runs usable by the log-scale fit: known outcome, both knobs > 0."""
    runs = cell_table[cell_table["formed"].notna()].copy()
    runs = runs[(runs["frequency"] > 0) & (runs["reliability"] > 0)]
    runs["cell"] = runs["label"]
    return runs


def cell_summary(cell_table: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """One row per grid cell, seeds as the unit: formed shares and the seeds' spread.

    Columns: ``label, frequency, reliability, n_seeds, formed_share`` (the frontier's reading
    of status), ``formed_share_at_<t>`` per threshold of the formation columns (unobserved
    seeds left out), ``formation_score`` with its Student-t CI over seeds, and ``sstar`` the
    geometric mean S* of the seeds that formed with a t CI on log S* over those seeds
    (``n_formed`` of them; NaN CI below 2).
    """
    rows = []
    for (label, f, r), group in cell_table.groupby(["label", "frequency", "reliability"],
                                                   sort=False):  # fmt: skip
        formed = group[group["formed"] == 1.0]
        row: dict[str, Any] = {"label": label, "frequency": f, "reliability": r,
                               "n_seeds": len(group), "n_formed": len(formed),
                               "formed_share": float(group["formed"].mean())}  # fmt: skip
        for t in thresholds_of(group):
            known = group[f"formed_at_{t:g}"].dropna()
            row[f"formed_share_at_{t:g}"] = float(known.mean()) if len(known) else math.nan
        if "formation_score" in group:
            score = mean_interval(
                pd.to_numeric(group["formation_score"], errors="coerce"), level=level
            )
            row.update(zip(("formation_score", "formation_score_ci_low",
                            "formation_score_ci_high"), score, strict=True))  # fmt: skip
        log_sstar = mean_interval(np.log(formed["step"].clip(lower=1.0)), level=level)
        row.update(zip(("sstar", "sstar_ci_low", "sstar_ci_high"), np.exp(log_sstar),
                       strict=True))  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)


def aggregate_cells(cell_table: pd.DataFrame) -> pd.DataFrame:
    """One row per grid cell: ``frequency, reliability, n_seeds, formed_share, sstar_median``.

    ``sstar_median`` is over the seeds that formed only (a censored row's ``step`` is the step
    at censoring, the budget, not an S*); NaN where none formed.
    """
    table = cell_table.assign(formed_step=cell_table["step"].where(cell_table["formed"] == 1.0))
    grouped = table.groupby(["frequency", "reliability"], as_index=False)
    cells = grouped.agg(
        n_seeds=("run_name", "size"),
        formed_share=("formed", "mean"),
        sstar_median=(
            "formed_step",
            lambda s: float(np.nanmedian(s)) if s.notna().any() else math.nan,
        ),
    )
    return cells
