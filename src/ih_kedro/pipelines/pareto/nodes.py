"""Nodes of the ``pareto`` experiment: the bigram model, the cell table, the frontier, figures.

Pure functions over catalog data; the science lives in ``ih_kedro.science.data.variants.semi_natural`` and
``ih_kedro.science.statistics.pareto_frontier`` / ``pareto_plots``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.variants.semi_natural import (
    VARIANT,
    BigramModel,
    check_repetition,
    estimate_bigram_model,
    measure_repetition,
)
from ih_kedro.science.statistics import pareto_frontier as pf
from ih_kedro.science.statistics.plots.pareto import plot_frontier_heatmap, plot_sstar_vs_distance

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


# --------------------------------------------------------------------------------------------
# Data engineering: the bigram model
# --------------------------------------------------------------------------------------------
def build_bigram_model(train_tokens: PackedTokens, params: Mapping[str, Any]) -> BigramModel:
    """Estimate the bigram model of the deduplicated training stream (``params:pareto.semi_natural``)."""
    size = train_tokens.compact_vocabulary_size
    n_states = int(params.get("n_types", 255)) + int(bool(params.get("other_bucket", True)))
    if size is not None and size < n_states:
        raise ValueError(
            f"pareto.vocabulary.size: {size} tokens cannot hold the bigram model's "
            f"{n_states} states (semi_natural.n_types + the other bucket); set it >= {n_states}"
        )
    model = estimate_bigram_model(
        np.asarray(train_tokens.tokens),
        train_tokens.vocab_size,
        int(params.get("n_types", 255)),
        float(params.get("smoothing", 0.01)),
        eos_token_id=train_tokens.eos_token_id,
        other_bucket=bool(params.get("other_bucket", True)),
        pooled_token_ids=train_tokens.other_token_ids,
    )
    covered = model.counts.sum() / max(len(train_tokens) - 1, 1)
    logger.info(
        "bigram model: %d states (other bucket: %s), smoothing %g, %.1f%% of token pairs counted",
        model.n_states,
        model.other_bucket,
        model.smoothing,
        100 * covered,
    )
    return model


def _pool_sizes(training: Mapping[str, Any], telemetry: Mapping[str, Any]) -> dict[str, int]:
    online = dict(training.get("online_emergence") or {})
    probe = dict(telemetry.get("probe") or {})
    sizes = {"training.online_emergence.token_pool_size": int(online.get("token_pool_size", 500))}
    if probe.get("source", "frequent") == "frequent":
        sizes["telemetry.probe.top_k"] = int(probe.get("top_k", 500))
    else:
        sizes["telemetry.probe.source"] = -1  # uniform over the whole vocabulary
    return sizes


def semi_natural_variant_data(
    bigram_model: BigramModel, training: Mapping[str, Any], telemetry: Mapping[str, Any]
) -> dict[str, str]:
    """The options every ``semi_natural`` run reads the model with (its path and checksum).

    Also checks, before any training, that the induction probes (online early stop and offline
    telemetry) draw their tokens from the model's vocabulary: both pools are the most frequent
    training tokens, the model's states are the ``n_types`` most frequent, so each pool size
    must be ``<= n_types``.
    """
    n_types = bigram_model.n_states - int(bigram_model.other_bucket)
    for name, size in _pool_sizes(training, telemetry).items():
        if size < 0:
            raise ValueError(
                f"pareto.{name}: probes drawn uniformly from the vocabulary use tokens the "
                "semi-natural model never emits; use source: frequent"
            )
        if size > n_types:
            raise ValueError(
                f"pareto.{name}: {size} probe tokens exceed the bigram model's {n_types} types "
                "(probes would use tokens the model never trains on); set it <= "
                "pareto.semi_natural.n_types"
            )
    return bigram_model.variant_options()


# --------------------------------------------------------------------------------------------
# The cell table
# --------------------------------------------------------------------------------------------
def _run_knobs(training: Mapping[str, Any]) -> pd.DataFrame:
    from ih_kedro.pipelines.training.nodes import expand_grid

    rows = []
    for config in expand_grid(training):
        if config.data_variant != VARIANT:
            raise ValueError(
                f"pareto.training.data_variants: every cell must use the {VARIANT!r} variant, "
                f"run {config.run_name} uses {config.data_variant!r}"
            )
        options = config.variant_options
        rows.append(
            {
                "run_name": config.run_name,
                "label": config.run_name.split(f"_C{config.context_length}_", 1)[-1].rsplit(
                    "_s", 1
                )[0],
                "frequency": float(options["frequency"]),
                "reliability": float(options["reliability"]),
                "budget_steps": int(config.total_steps),
                "budget_tokens": int(config.total_steps * config.tokens_per_step),
                "config": config,
            }
        )
    return pd.DataFrame(rows)


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


def build_cell_table(
    sweep_manifest: pd.DataFrame,
    emergence_table: pd.DataFrame,
    train_tokens: PackedTokens,
    variant_data: Mapping[str, Any],
    training: Mapping[str, Any],
    frontier: Mapping[str, Any],
) -> pd.DataFrame:
    """One row per run: targets, realised knobs, emergence status, S* with its CI, tokens.

    The realised frequency and reliability are measured on the run's own first
    ``frontier.realised_batches`` training batches (the exact batches it trained on) and must
    meet the targets within ``frontier.tolerance`` (``check_repetition``), else this fails.
    """
    metric = str(frontier.get("metric", "prefix_matching"))
    method = str(frontier.get("method", "threshold"))
    knobs = _run_knobs(training)
    emergence = emergence_table[
        (emergence_table["metric"] == metric) & (emergence_table["method"] == method)
    ]
    if emergence.empty:
        raise ValueError(
            f"pareto.frontier.metric / method: the emergence table has no rows for "
            f"{metric!r} / {method!r}; it has {sorted(set(emergence_table['metric']))} / "
            f"{sorted(set(emergence_table['method']))}"
        )
    emergence = emergence.drop_duplicates("run_name").set_index("run_name")
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
        config = run.config
        stats = _realised(train_tokens, config, variant_data, n_batches)
        check_repetition(
            stats, run.frequency, run.reliability, tolerance, where=f" (run {run.run_name})"
        )
        done, est = manifest.loc[run.run_name], emergence.loc[run.run_name]
        rows.append(
            {
                "run_name": run.run_name,
                "label": run.label,
                "seed": int(config.seed),
                "frequency": run.frequency,
                "reliability": run.reliability,
                "realised_frequency": stats.frequency,
                "realised_frequency_se": stats.frequency_se,
                "realised_reliability": stats.reliability,
                "realised_reliability_se": stats.reliability_se,
                "status": status.loc[run.run_name],
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
        )
    table = pd.DataFrame(rows)
    table["formed"] = pf.formed_from_status(table["status"])
    logger.info(
        "pareto: %d runs, %d formed, %d not formed, %d unknown",
        len(table),
        int((table["formed"] == 1).sum()),
        int((table["formed"] == 0).sum()),
        int(table["formed"].isna().sum()),
    )
    return table[list(CELL_COLUMNS)]


# --------------------------------------------------------------------------------------------
# The frontier
# --------------------------------------------------------------------------------------------
def _fit_runs(cell_table: pd.DataFrame) -> pd.DataFrame:
    """Runs usable by the log-scale fit: known outcome, both knobs > 0."""
    runs = cell_table[cell_table["formed"].notna()].copy()
    runs = runs[(runs["frequency"] > 0) & (runs["reliability"] > 0)]
    runs["cell"] = runs["label"]
    return runs


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


def estimate_frontier(
    cell_table: pd.DataFrame, params: Mapping[str, Any]
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Fit the frontier, its bootstrap band, the Pareto set, the S* growth and the budget shift.

    When every usable run has the same outcome (or fewer than 3 are usable) no model is fitted:
    the summary's ``status`` says so (``none_formed``, ``all_formed``, ``too_few_runs``) with
    what would reveal the frontier, and the coefficients are null. Returns ``frontier_table`` (tidy rows, ``kind`` in ``coefficient``, ``contour``,
    ``pareto_set``, ``growth``, ``budget_shift``) and ``frontier_summary`` (json).
    """
    level = float(params.get("level", 0.95))
    fit_method = str(params.get("fit_method", "firth"))
    runs = _fit_runs(cell_table)
    excluded = len(cell_table) - len(runs)
    cells = aggregate_cells(cell_table)
    pareto_set = pf.pareto_minimal_cells(
        cells[(cells["frequency"] > 0) & (cells["reliability"] > 0)]
    )
    base = {
        "metric": str(cell_table["metric"].iloc[0]),
        "method": str(cell_table["method"].iloc[0]),
        "fit_method": fit_method,
        "level": level,
        "n_runs": int(len(cell_table)),
        "n_runs_excluded": int(excluded),
        "seeds": sorted({int(s) for s in cell_table["seed"]}),
        "budget_steps": sorted({int(b) for b in cell_table["budget_steps"]}),
        "budget_tokens": sorted({int(b) for b in cell_table["budget_tokens"]}),
        "pareto_set": [
            {"frequency": float(r.frequency), "reliability": float(r.reliability)}
            for r in pareto_set.itertuples(index=False)
        ],
    }
    status = _frontier_status(runs)
    if status != "ok":
        logger.warning("pareto: no frontier fitted (%s)", status)
        return _degenerate_frontier(status, runs, pareto_set, base)
    fit = pf.fit_frontier(
        runs["frequency"], runs["reliability"], runs["formed"], method=fit_method, level=level
    )
    f_lo, f_hi = runs["frequency"].min(), runs["frequency"].max()
    grid = np.exp(np.linspace(np.log(f_lo), np.log(f_hi), int(params.get("n_grid", 25))))
    contour = pf.bootstrap_contour(
        runs,
        grid,
        n_bootstrap=int(params.get("n_bootstrap", 200)),
        seed=int(params.get("seed", 0)),
        unit=str(params.get("bootstrap_unit", "run")),
        method=fit_method,
        level=level,
    )
    distance = fit.distance(runs["frequency"], runs["reliability"])
    formed = runs["formed"] == 1
    growth = pf.fit_sstar_growth(distance[formed], runs.loc[formed, "step"], level=level)
    factors = tuple(float(k) for k in params.get("budget_factors", [2, 4]))
    shift = pf.budget_shift(fit, growth, grid, factors)

    ci = fit.conf_int()
    rows: list[dict[str, Any]] = []
    for i, name in enumerate(pf.COEFFICIENTS):
        rows.append({"kind": "coefficient", "name": name, "estimate": fit.coef[i],
                     "se": fit.se[i], "ci_low": ci[i, 0], "ci_high": ci[i, 1]})  # fmt: skip
    for row in contour.itertuples(index=False):
        rows.append({"kind": "contour", "name": "p50", "frequency": row.frequency,
                     "reliability": row.reliability_50, "ci_low": row.band_low,
                     "ci_high": row.band_high, "n": row.n_replicates})  # fmt: skip
    for row in pareto_set.itertuples(index=False):
        rows.append({"kind": "pareto_set", "name": "minimal_successful_cell",
                     "frequency": row.frequency, "reliability": row.reliability,
                     "estimate": row.formed_share, "n": row.n_seeds})  # fmt: skip
    for name, value, bounds in (("alpha", growth.alpha, growth.alpha_ci),
                                ("beta", growth.beta, growth.beta_ci)):  # fmt: skip
        rows.append({"kind": "growth", "name": name, "estimate": value, "ci_low": bounds[0],
                     "ci_high": bounds[1], "n": growth.n})  # fmt: skip
    for row in shift.itertuples(index=False):
        rows.append({"kind": "budget_shift", "name": f"x{row.budget_factor:g}",
                     "frequency": row.frequency, "reliability": row.reliability_50,
                     "estimate": row.shift, "ci_low": row.shift_low, "ci_high": row.shift_high,
                     "budget_factor": row.budget_factor})  # fmt: skip
    table = pd.DataFrame(rows).reindex(columns=TABLE_COLUMNS)

    summary: dict[str, Any] = {
        "status": "ok",
        **base,
        "n_runs_fitted": fit.n_runs,
        "n_runs_formed": fit.n_formed,
        "separated": fit.separated,
        "converged": fit.converged,
        "monotone_increasing": fit.monotone_increasing,
        "coefficients": {
            name: {
                "estimate": float(fit.coef[i]),
                "ci_low": float(ci[i, 0]),
                "ci_high": float(ci[i, 1]),
            }  # fmt: skip
            for i, name in enumerate(pf.COEFFICIENTS)
        },
        "growth": {
            "status": growth.status,
            "alpha": growth.alpha,
            "beta": growth.beta,
            "beta_ci": list(growth.beta_ci),
            "n": growth.n,
            "r_squared": growth.r_squared,
        },
        "budget_shift": {
            f"x{k:g}": _finite_or_none(shift.loc[shift["budget_factor"] == k, "shift"].iloc[0])
            for k in factors
        },
        "longer_budget": _longer_budget_sentence(growth, factors),
    }
    return table, _json_safe(summary)


TABLE_COLUMNS = ["kind", "name", "frequency", "reliability", "estimate", "se", "ci_low",
                 "ci_high", "n", "budget_factor"]  # fmt: skip


def _frontier_status(runs: pd.DataFrame) -> str:
    """``ok``, or why no frontier can be fitted (the frontier lies outside the grid)."""
    if len(runs) < 3:
        return "too_few_runs"
    if (runs["formed"] == 1).all():
        return "all_formed"
    if (runs["formed"] == 0).all():
        return "none_formed"
    return "ok"


def _degenerate_frontier(
    status: str, runs: pd.DataFrame, pareto_set: pd.DataFrame, base: dict[str, Any]
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Tables and summary when every run has the same outcome: reported, never faked."""
    where = {
        "none_formed": "no run formed an induction head within the budget: the frontier lies "
        "beyond the grid's most frequent and reliable cell at this budget; a longer budget "
        "(pareto.training.max_steps) or more frequent/reliable cells would be needed to see it",
        "all_formed": "every run formed an induction head: the frontier lies below the grid's "
        "rarest and least reliable cell; extend the grid downwards (or shorten the budget)",
        "too_few_runs": "fewer than 3 runs with a known outcome",
    }[status]
    rows = [{"kind": "coefficient", "name": name} for name in pf.COEFFICIENTS]
    rows += [{"kind": "pareto_set", "name": "minimal_successful_cell", "frequency": r.frequency,
              "reliability": r.reliability, "estimate": r.formed_share, "n": r.n_seeds}
             for r in pareto_set.itertuples(index=False)]  # fmt: skip
    table = pd.DataFrame(rows).reindex(columns=TABLE_COLUMNS)
    nan3 = {"estimate": None, "ci_low": None, "ci_high": None}
    summary = {
        "status": status,
        **base,
        "n_runs_fitted": int(len(runs)),
        "n_runs_formed": int((runs["formed"] == 1).sum()),
        "separated": None,
        "converged": None,
        "monotone_increasing": None,
        "coefficients": {name: dict(nan3) for name in pf.COEFFICIENTS},
        "growth": {
            "status": status,
            "alpha": None,
            "beta": None,
            "beta_ci": [None, None],
            "n": 0,
            "r_squared": None,
        },  # fmt: skip
        "budget_shift": {},
        "longer_budget": where,
    }
    return table, _json_safe(summary)


def _finite_or_none(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def _longer_budget_sentence(growth: pf.GrowthFit, factors: tuple[float, ...]) -> str:
    if growth.status != "ok":
        return (
            f"not estimated ({growth.status}): too few runs formed to fit how S* grows near the "
            "frontier"
        )
    if not growth.beta < 0:
        return (
            f"S* does not grow towards the frontier in these runs (beta = {growth.beta:.2f}); the "
            "frontier is not budget-limited at this scale as far as the data show"
        )
    moves = ", ".join(f"{k:g}x: {math.log(k) / growth.beta:+.2f}" for k in factors)
    return (
        f"S* grows by a factor exp({-growth.beta:.2f}) per unit of log-distance towards the "
        f"frontier; extrapolating, a longer budget moves the frontier by ({moves}) in "
        "(log f, log r) distance, towards rarer and less reliable repetition"
    )


# --------------------------------------------------------------------------------------------
# Figures and MLflow
# --------------------------------------------------------------------------------------------
def _fit_from_summary(summary: Mapping[str, Any]) -> pf.FrontierFit:
    coef = np.array([summary["coefficients"][name]["estimate"] for name in pf.COEFFICIENTS])
    return pf.FrontierFit(
        coef=coef, cov=np.zeros((3, 3)), method=summary["fit_method"],
        n_runs=summary["n_runs_fitted"], n_formed=summary["n_runs_formed"], converged=True,
    )  # fmt: skip


def plot_frontier(
    cell_table: pd.DataFrame, frontier_table: pd.DataFrame, frontier_summary: Mapping[str, Any]
) -> plt.Figure:
    """Heatmaps of status and S* over the grid with the frontier, its band and the Pareto set."""
    contour = frontier_table[frontier_table["kind"] == "contour"].rename(
        columns={"reliability": "reliability_50", "ci_low": "band_low", "ci_high": "band_high"}
    )
    contour = contour.assign(level=frontier_summary["level"]).dropna(subset=["frequency"])
    pareto_set = frontier_table[frontier_table["kind"] == "pareto_set"]
    shift = frontier_table[frontier_table["kind"] == "budget_shift"].rename(
        columns={"reliability": "reliability_50"}
    )
    cells = aggregate_cells(cell_table)
    cells = cells[(cells["frequency"] > 0) & (cells["reliability"] > 0)]
    budget = ", ".join(f"{b:g}" for b in frontier_summary["budget_steps"])
    return plot_frontier_heatmap(
        cells, contour, pareto_set, shift, budget_label=f" (budget {budget} steps)"
    )


def plot_sstar_distance(
    cell_table: pd.DataFrame, frontier_summary: Mapping[str, Any]
) -> plt.Figure:
    """S* against the signed distance to the frontier, with the growth fit."""
    if frontier_summary["status"] != "ok":
        fig, ax = plt.subplots(figsize=(7, 5), constrained_layout=True)
        ax.text(0.5, 0.5, f"no frontier ({frontier_summary['status']}):\n"
                + _wrap(frontier_summary["longer_budget"]), ha="center", va="center",
                transform=ax.transAxes, fontsize=9)  # fmt: skip
        ax.set_axis_off()
        return fig
    runs = _fit_runs(cell_table)
    fit = _fit_from_summary(frontier_summary)
    runs = runs.assign(distance=fit.distance(runs["frequency"], runs["reliability"]))
    g = frontier_summary["growth"]
    nan = math.nan
    growth = pf.GrowthFit(
        alpha=g["alpha"] if g["alpha"] is not None else nan,
        beta=g["beta"] if g["beta"] is not None else nan,
        alpha_ci=(nan, nan),
        beta_ci=tuple(nan if v is None else v for v in g["beta_ci"]),
        n=g["n"],
        r_squared=g["r_squared"] if g["r_squared"] is not None else nan,
        status=g["status"],
    )
    return plot_sstar_vs_distance(runs, growth, float(max(frontier_summary["budget_steps"])))


def _wrap(text: str, width: int = 70) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def log_pareto_to_mlflow(frontier_summary: Mapping[str, Any]) -> None:
    """Log the frontier's numbers as metrics (and its verdicts as tags) to the active run.

    The figures reach MLflow through the catalog (``MlflowArtifactDataset``).
    kedro-mlflow opens a run during ``kedro run``; outside it a run is started and closed here.
    """
    import mlflow

    metrics: dict[str, float] = {
        "pareto.frontier_fitted": float(frontier_summary["status"] == "ok")
    }
    for name, block in frontier_summary["coefficients"].items():
        for key, value in block.items():
            if value is not None:
                metrics[f"pareto.{name}.{key}"] = float(value)
    for key in ("n_runs", "n_runs_fitted", "n_runs_formed", "n_runs_excluded"):
        metrics[f"pareto.{key}"] = float(frontier_summary[key])
    growth = frontier_summary["growth"]
    for key in ("beta", "r_squared"):
        if growth.get(key) is not None:
            metrics[f"pareto.growth.{key}"] = float(growth[key])
    for key, value in frontier_summary["budget_shift"].items():
        if value is not None:
            metrics[f"pareto.budget_shift.{key}"] = float(value)
    started = mlflow.active_run() is None
    if started:
        mlflow.start_run(run_name="pareto")
    try:
        mlflow.log_metrics(metrics)
        mlflow.set_tags({"pareto.status": frontier_summary["status"],
                         "pareto.monotone_increasing": str(frontier_summary["monotone_increasing"]),
                         "pareto.separated": str(frontier_summary["separated"]),
                         "pareto.longer_budget": frontier_summary["longer_budget"][:5000]})  # fmt: skip
        logger.info("pareto: logged %d metrics to MLflow", len(metrics))
    finally:
        if started:
            mlflow.end_run()
