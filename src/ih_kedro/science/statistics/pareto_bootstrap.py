"""The frontier's bootstrap: refits on resampled runs for the contour band and coefficient CIs.

The logistic frontier of :mod:`ih_kedro.science.statistics.pareto_frontier` is refitted on
resampled runs, each replicate with the same method (Firth or MLE) as the full fit. What is
resampled (:data:`BOOTSTRAP_UNITS`): seeds within each cell (the default; the seed is the
unit of inference), whole cells with all their seeds, or runs over the whole grid. The
replicates give the 50% contour's pointwise percentile band and percentile CIs of the
coefficients and of their ratio ``b1 / b2``; replicates that cannot give a contour are counted
by reason (:data:`BOOTSTRAP_DROPS`), never silently kept.

Plain numpy / pandas; no Kedro imports.
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ih_kedro.science.statistics.pareto_frontier import (
    COEFFICIENTS,
    _design,
    _fit,
    _separable,
    fit_frontier,
)

logger = logging.getLogger(__name__)

BOOTSTRAP_DROPS = ("one_outcome", "fit_failed", "not_converged", "no_contour")
"""Why a bootstrap replicate gives no contour (counted per reason in the band's table)."""


BOOTSTRAP_UNITS = ("run", "cell", "seed")
"""What a bootstrap replicate resamples: runs over the whole grid, whole cells with all their
seeds, or seeds within each cell (every cell keeps its size; the seed is the unit)."""


def _replicate_fit(
    sample: pd.DataFrame, grid: np.ndarray, method: str, level: float
) -> tuple[np.ndarray | None, np.ndarray | None, str | None]:
    """One replicate's log contour on ``grid`` (G,) and coefficients (3,), or ``None`` and why
    it was dropped."""
    y = sample["formed"].to_numpy(dtype=float)
    if y.min() == y.max():
        return None, None, "one_outcome"
    try:
        X = _design(sample["frequency"].to_numpy(), sample["reliability"].to_numpy())  # (n, 3)
        # Only the MLE needs to know about separation (it does not exist there); Firth is
        # finite either way, so its replicates skip the linear program (slower than the fit).
        fit = _fit(X, y, method, level, separated=method == "mle" and _separable(X, y))
    except (ValueError, np.linalg.LinAlgError):
        return None, None, "fit_failed"  # e.g. method mle on a separated resample
    if not fit.converged:
        return None, None, "not_converged"
    curve = fit.log_contour(grid)  # (G,)
    if not np.isfinite(curve).any():
        return None, fit.coef, "no_contour"  # b2 <= 0: no 50% contour in reliability
    return curve, fit.coef, None


def _resampling_groups(runs: pd.DataFrame, unit: str) -> list[np.ndarray]:
    """Row indices per resampling group: one per run (``run``) or per cell (``cell``,
    ``seed``)."""
    if unit == "run":
        return [np.array([i]) for i in range(len(runs))]
    if "cell" not in runs.columns:
        raise ValueError(f"pareto.frontier.bootstrap_unit {unit!r}: runs need a 'cell' column")
    cells = runs["cell"].to_numpy()
    return [np.flatnonzero(cells == c) for c in pd.unique(cells)]


def _resample(groups: list[np.ndarray], unit: str, rng: np.random.Generator) -> np.ndarray:
    """Row indices of one replicate."""
    if unit == "seed":  # every cell keeps its size, its seeds drawn with replacement
        return np.concatenate([rng.choice(g, size=len(g), replace=True) for g in groups])
    picks = rng.integers(0, len(groups), size=len(groups))
    return np.concatenate([groups[i] for i in picks])


@dataclass(frozen=True)
class FrontierBootstrap:
    """A frontier's bootstrap: the contour band and the coefficients' percentile CIs."""

    contour: pd.DataFrame  # one row per frequency (bootstrap_contour's columns)
    coefficients: pd.DataFrame  # one row per name: estimate-free percentile CI, n replicates
    unit: str
    dropped: dict[str, int]


def _percentile_rows(coefs: np.ndarray, level: float) -> pd.DataFrame:
    """Percentile CIs of the replicates' coefficients ``(m, 3)`` and ratio ``b1 / b2``."""
    tail = (1 - level) / 2 * 100
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = coefs[:, 1] / coefs[:, 2] if len(coefs) else np.empty(0)  # (m,)
    columns = {**{n: coefs[:, i] for i, n in enumerate(COEFFICIENTS)}, "ratio": ratio}
    rows = []
    for name, values in columns.items():
        finite = values[np.isfinite(values)]  # (m',)
        low, high = (
            np.percentile(finite, [tail, 100 - tail]) if len(finite) else (math.nan, math.nan)
        )
        rows.append({"name": name, "ci_low": float(low), "ci_high": float(high),
                     "n_replicates": int(len(finite))})  # fmt: skip
    return pd.DataFrame(rows)


def bootstrap_frontier(
    runs: pd.DataFrame,
    frequency_grid: np.ndarray,
    *,
    n_bootstrap: int = 200,
    seed: int = 0,
    unit: str = "seed",
    method: str = "firth",
    level: float = 0.95,
) -> FrontierBootstrap:
    """Refit the frontier on resampled runs: the 50% contour's band and the coefficients' CIs.

    Every replicate is refitted with the same ``method`` as the full fit; bands and CIs span
    the central ``level`` of the replicates; ``wald_low, wald_high`` are the full fit's Wald
    (delta-method) band (:meth:`FrontierFit.log_contour_interval`), which covers at the default
    design where the percentile bands do not (docs/coverage.md). ``unit`` (:data:`BOOTSTRAP_UNITS`): ``seed``
    redraws each cell's seeds with replacement (the seed is the unit of inference; a cell
    whose seeds all agree contributes no spread, so a grid where every cell is unanimous has a
    zero-width band: seed variation shows none, the Wald CIs still hold the model's
    uncertainty), ``cell`` redraws whole cells, ``run`` redraws runs over the grid. A
    replicate is dropped, and counted by reason (:data:`BOOTSTRAP_DROPS`), when its resample
    has one outcome only, its fit fails (``mle`` under separation), did not converge, or has
    no contour (``b2 <= 0``; its coefficients still count).

    ``runs`` has columns ``frequency, reliability, formed`` (and ``cell`` unless ``unit`` is
    ``run``).
    """
    if unit not in BOOTSTRAP_UNITS:
        raise ValueError(
            f"pareto.frontier.bootstrap_unit: {unit!r} is not one of {BOOTSTRAP_UNITS}"
        )
    grid = np.asarray(frequency_grid, dtype=float)
    full = fit_frontier(
        runs["frequency"], runs["reliability"], runs["formed"], method=method, level=level
    )
    rng = np.random.default_rng(seed)
    groups = _resampling_groups(runs, unit)
    curves, coefs, dropped = [], [], dict.fromkeys(BOOTSTRAP_DROPS, 0)
    for _ in range(n_bootstrap):
        curve, coef, reason = _replicate_fit(runs.iloc[_resample(groups, unit, rng)], grid,
                                             method, level)  # fmt: skip
        if coef is not None:
            coefs.append(coef)
        if reason is not None:
            dropped[reason] += 1
        else:
            curves.append(curve)
    tail = (1 - level) / 2 * 100
    stack = np.array(curves) if curves else np.full((1, grid.shape[0]), np.nan)  # (m, G)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns give NaN bands
        low = np.exp(np.nanpercentile(stack, tail, axis=0))  # (G,)
        high = np.exp(np.nanpercentile(stack, 100 - tail, axis=0))  # (G,)
    valid = np.isfinite(stack).sum(axis=0)  # (G,)
    with np.errstate(over="ignore"):  # a wide log band's upper end is +inf: no upper bound
        wald_low, wald_high = np.exp(full.log_contour_interval(grid))  # (G,) each
    if sum(dropped.values()):
        logger.info("pareto bootstrap (%s, by %s): replicates dropped %s", method, unit, dropped)
    contour = pd.DataFrame(
        {
            "frequency": grid,
            "reliability_50": full.contour(grid),
            "band_low": low,
            "band_high": high,
            "wald_low": wald_low,
            "wald_high": wald_high,
            "n_replicates": valid.astype(int),
            "n_bootstrap": int(n_bootstrap),
            "level": float(level),
            "method": method,
            "unit": unit,
            **{f"n_dropped_{reason}": int(n) for reason, n in dropped.items()},
        }
    )
    coefficients = _percentile_rows(np.array(coefs).reshape(-1, 3), level)
    return FrontierBootstrap(contour, coefficients, unit, dropped)


def bootstrap_contour(
    runs: pd.DataFrame,
    frequency_grid: np.ndarray,
    *,
    n_bootstrap: int = 200,
    seed: int = 0,
    unit: str = "run",
    method: str = "firth",
    level: float = 0.95,
) -> pd.DataFrame:
    """The 50% contour on ``frequency_grid`` with a pointwise percentile bootstrap band: the
    ``contour`` of :func:`bootstrap_frontier`.

    Returns one row per frequency: ``frequency, reliability_50`` (the fit on all runs),
    ``band_low, band_high`` (percentile), ``wald_low, wald_high`` (delta method),
    ``n_replicates`` (replicates with a finite contour there), ``n_bootstrap``, ``level``, ``method``, ``unit`` and ``n_dropped_<reason>`` for each
    :data:`BOOTSTRAP_DROPS` reason.
    """
    return bootstrap_frontier(
        runs, frequency_grid, n_bootstrap=n_bootstrap, seed=seed, unit=unit, method=method,
        level=level,
    ).contour  # fmt: skip


__all__ = [
    "BOOTSTRAP_DROPS",
    "BOOTSTRAP_UNITS",
    "FrontierBootstrap",
    "bootstrap_contour",
    "bootstrap_frontier",
]
