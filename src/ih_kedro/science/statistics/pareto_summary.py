"""The frequency x reliability frontier as tables and a JSON summary (Experiment 2).

:func:`estimate_frontier` runs the science of
:mod:`ih_kedro.science.statistics.pareto_frontier` on the cell table (the logistic frontier,
its bootstrap band, the Pareto set, the S* growth near the frontier and the budget shift) and
reports it as tidy rows and a JSON-safe summary. When every usable run has the same outcome no
model is fitted and the summary says where the frontier lies instead, never a faked fit.

Plain numpy/pandas; no Kedro imports.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ih_kedro.science.statistics import pareto_bootstrap as pb
from ih_kedro.science.statistics import pareto_frontier as pf
from ih_kedro.science.statistics import pareto_robustness as robustness
from ih_kedro.science.statistics.paired_seeds import json_safe
from ih_kedro.science.statistics.pareto_cells import (
    aggregate_cells,
    check_formed_matches_status,
    fit_runs,
)

logger = logging.getLogger(__name__)

TABLE_COLUMNS = ["kind", "name", "frequency", "reliability", "estimate", "se", "ci_low",
                 "ci_high", "n", "budget_factor"]  # fmt: skip


@dataclass
class _FrontierFits:
    """What the fitted frontier reports: the fit, its band, the S* growth, the budget shift."""

    fit: pf.FrontierFit
    contour: pd.DataFrame
    coefficient_cis: pd.DataFrame  # seed-resampled percentile CIs (pareto_bootstrap)
    growth: pf.GrowthFit
    factors: tuple[float, ...]
    shift: pd.DataFrame


def _base_summary(
    cell_table: pd.DataFrame,
    excluded: int,
    pareto_set: pd.DataFrame,
    fit_method: str,
    level: float,
) -> dict[str, Any]:
    """The summary's entries known without a fit: selection, counts, seeds, budgets, Pareto set."""
    return {
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


def _fit_the_frontier(
    runs: pd.DataFrame, params: Mapping[str, Any], fit_method: str, level: float
) -> _FrontierFits:
    """The logistic frontier, its bootstrap band on a grid of frequencies, the S* growth near
    it and the budget shift (``params``: ``n_grid``, ``n_bootstrap``, ``seed``,
    ``bootstrap_unit``, ``budget_factors``)."""
    fit = pf.fit_frontier(
        runs["frequency"], runs["reliability"], runs["formed"], method=fit_method, level=level
    )
    f_lo, f_hi = runs["frequency"].min(), runs["frequency"].max()
    grid = np.exp(np.linspace(np.log(f_lo), np.log(f_hi), int(params.get("n_grid", 25))))
    boot = pb.bootstrap_frontier(
        runs,
        grid,
        n_bootstrap=int(params.get("n_bootstrap", 200)),
        seed=int(params.get("seed", 0)),
        unit=str(params.get("bootstrap_unit", "seed")),
        method=fit_method,
        level=level,
    )
    distance = fit.distance(runs["frequency"], runs["reliability"])
    formed = runs["formed"] == 1
    growth = pf.fit_sstar_growth(distance[formed], runs.loc[formed, "step"], level=level)
    factors = tuple(float(k) for k in params.get("budget_factors", [2, 4]))
    shift = pf.budget_shift(fit, growth, grid, factors)
    return _FrontierFits(fit, boot.contour, boot.coefficients, growth, factors, shift)


def _frontier_rows(fits: _FrontierFits, ci: np.ndarray, pareto_set: pd.DataFrame) -> pd.DataFrame:
    """``frontier_table``: the coefficients, the contour, the Pareto set, the growth fit and
    the budget shift as tidy rows (columns :data:`TABLE_COLUMNS`)."""
    fit, contour, growth, shift = fits.fit, fits.contour, fits.growth, fits.shift
    rows: list[dict[str, Any]] = []
    for i, name in enumerate(pf.COEFFICIENTS):
        rows.append({"kind": "coefficient", "name": name, "estimate": fit.coef[i],
                     "se": fit.se[i], "ci_low": ci[i, 0], "ci_high": ci[i, 1]})  # fmt: skip
    ratio, ratio_low, ratio_high = fit.coefficient_ratio()
    rows.append({"kind": "coefficient_ratio", "name": "log_frequency/log_reliability",
                 "estimate": ratio, "ci_low": ratio_low, "ci_high": ratio_high})  # fmt: skip
    estimates = {**dict(zip(pf.COEFFICIENTS, fit.coef, strict=True)), "ratio": ratio}
    for row in fits.coefficient_cis.itertuples(index=False):
        rows.append({"kind": "coefficient_bootstrap", "name": row.name,
                     "estimate": estimates[row.name], "ci_low": row.ci_low,
                     "ci_high": row.ci_high, "n": row.n_replicates})  # fmt: skip
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
    return pd.DataFrame(rows).reindex(columns=TABLE_COLUMNS)


def _fitted_summary(base: dict[str, Any], fits: _FrontierFits, ci: np.ndarray) -> dict[str, Any]:
    """``frontier_summary`` of a fitted frontier (before :func:`json_safe`)."""
    fit, growth, factors, shift = fits.fit, fits.growth, fits.factors, fits.shift
    ratio, ratio_low, ratio_high = fit.coefficient_ratio()
    dropped = {
        reason: int(fits.contour[f"n_dropped_{reason}"].iloc[0]) for reason in pb.BOOTSTRAP_DROPS
    }
    return {
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
        # How much log frequency weighs against log reliability on the contour (delta method).
        "coefficient_ratio": {
            "name": "log_frequency/log_reliability",
            "estimate": ratio,
            "ci_low": ratio_low,
            "ci_high": ratio_high,
        },
        "bootstrap": {
            "method": fit.method,
            "unit": str(fits.contour["unit"].iloc[0]),
            "n_bootstrap": int(fits.contour["n_bootstrap"].iloc[0]),
            "dropped": dropped,
            # Percentile CIs of the refits (seed-resampled by default), beside the Wald CIs.
            "coefficients": {
                row.name: [row.ci_low, row.ci_high]
                for row in fits.coefficient_cis.itertuples(index=False)
            },
        },
        "growth": {
            "status": growth.status,
            "alpha": growth.alpha,
            "beta": growth.beta,
            "beta_ci": list(growth.beta_ci),
            "n": growth.n,
            "r_squared": growth.r_squared,
            "distance_range": list(growth.distance_range),
        },
        "budget_shift": {
            f"x{k:g}": _finite_or_none(shift.loc[shift["budget_factor"] == k, "shift"].iloc[0])
            for k in factors
        },
        "budget_shift_extrapolated": {
            f"x{k:g}": bool(shift.loc[shift["budget_factor"] == k, "extrapolated"].iloc[0])
            for k in factors
        },
        "longer_budget": _longer_budget_sentence(growth, factors),
    }


def estimate_frontier(
    cell_table: pd.DataFrame,
    params: Mapping[str, Any],
    robustness_table: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Fit the frontier, its bootstrap band, the Pareto set, the S* growth and the budget shift.

    When every usable run has the same outcome (or fewer than 3 are usable) no model is fitted:
    the summary's ``status`` says so (``none_formed``, ``all_formed``, ``too_few_runs``) with
    what would reveal the frontier, and the coefficients are null.

    Args:
        cell_table: the cell table (:func:`~ih_kedro.science.statistics.pareto_cells.
            build_cell_table`).
        params: the frontier options: ``level``, ``fit_method``, ``n_grid``, ``n_bootstrap``,
            ``seed``, ``bootstrap_unit``, ``budget_factors``, ``decision_threshold``.
        robustness_table: the knobs' fits at every threshold
            (:func:`~ih_kedro.science.statistics.pareto_robustness.robustness_table`), read for
            the summary's ``verdicts``; None: fitted here from the cell table's formation
            columns (no verdicts without them).

    Returns:
        ``frontier_table`` (tidy rows, ``kind`` in ``coefficient``, ``contour``,
        ``pareto_set``, ``growth``, ``budget_shift``) and ``frontier_summary`` (json).
    """
    level = float(params.get("level", 0.95))
    fit_method = str(params.get("fit_method", "firth"))
    check_formed_matches_status(cell_table)
    runs = fit_runs(cell_table)
    excluded = len(cell_table) - len(runs)
    cells = aggregate_cells(cell_table)
    pareto_set = pf.pareto_minimal_cells(
        cells[(cells["frequency"] > 0) & (cells["reliability"] > 0)]
    )
    base = _base_summary(cell_table, excluded, pareto_set, fit_method, level)
    base["verdicts"] = _robustness(cell_table, params, robustness_table)
    status = _frontier_status(runs)
    if status != "ok":
        logger.warning("pareto: no frontier fitted (%s)", status)
        return _degenerate_frontier(status, runs, pareto_set, base)
    fits = _fit_the_frontier(runs, params, fit_method, level)
    ci = fits.fit.conf_int()
    table = _frontier_rows(fits, ci, pareto_set)
    return table, json_safe(_fitted_summary(base, fits, ci))


def _robustness(
    cell_table: pd.DataFrame, params: Mapping[str, Any], table: pd.DataFrame | None
) -> dict[str, Any] | None:
    """The knob verdicts across thresholds and the formation score from ``table``, or from the
    cell table's formation columns when ``table`` is None (none without them)
    (:mod:`~ih_kedro.science.statistics.pareto_robustness`)."""
    if table is None:
        if not any(c.startswith("formed_at_") for c in cell_table.columns):
            return None
        table = robustness.robustness_table(
            cell_table,
            fit_method=str(params.get("fit_method", "firth")),
            level=float(params.get("level", 0.95)),
        )
    return robustness.robustness_verdicts(table, float(params.get("decision_threshold", 0.4)))


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
        "coefficient_ratio": {"name": "log_frequency/log_reliability", **nan3},
        "bootstrap": None,
        "growth": {
            "status": status,
            "alpha": None,
            "beta": None,
            "beta_ci": [None, None],
            "n": 0,
            "r_squared": None,
            "distance_range": [None, None],
        },  # fmt: skip
        "budget_shift": {},
        "budget_shift_extrapolated": {},
        "longer_budget": where,
    }
    return table, json_safe(summary)


def _finite_or_none(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


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
        f"(log f, log r) distance, towards rarer and less reliable repetition"
        + _extrapolation_clause(growth, factors)
    )


def _extrapolation_clause(growth: pf.GrowthFit, factors: tuple[float, ...]) -> str:
    """Whether each budget shift lies within the distances of the runs the growth was fitted
    on ('' when that range is unknown)."""
    d_min, d_max = growth.distance_range
    if not (math.isfinite(d_min) and math.isfinite(d_max)):
        return ""
    outside = [k for k in factors if not growth.within_fitted_distances(math.log(k) / growth.beta)]
    if not outside:
        return (
            f"; every shift lies within the distances of the runs fitted "
            f"([{d_min:+.2f}, {d_max:+.2f}])"
        )
    shifts = "shift lies" if len(outside) == 1 else "shifts lie"
    return (
        f"; the {', '.join(f'{k:g}x' for k in outside)} {shifts} outside the distances of the "
        f"runs fitted ([{d_min:+.2f}, {d_max:+.2f}]): a straight-line extrapolation"
    )
