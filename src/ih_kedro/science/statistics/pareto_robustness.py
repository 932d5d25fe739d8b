"""Does the frontier hold across formation thresholds? The knobs' verdicts at 0.3 / 0.4 / 0.5
and on a threshold-free formation score.

The frontier (:mod:`ih_kedro.science.statistics.pareto_frontier`) reads "formed" at one
threshold of the best head's score. Here the same logistic model is refitted with the formed
verdict at every threshold of the cell table's ``formed_at_<t>`` columns, and a linear model
``formation_score = a + c_f log f + c_r log r`` (OLS, CIs cluster-robust by cell with t
quantiles on ``n_cells - 1`` degrees of freedom) is fitted on the threshold-free score
(:func:`ih_kedro.science.telemetry.formation.formation_score`). Each fit gives the two knob
coefficients and their ratio (log frequency against log reliability, delta-method CI), and
two verdicts, decided by rules stated before any run (:data:`RULES`):

- ``both_knobs_matter``: ``supported`` when both knob coefficients' CIs lie above 0,
  ``contradicted`` when either lies below 0, else ``undecided``;
- ``reliability_weighs_more``: ``supported`` when the ratio's CI lies below 1 (a unit of log
  reliability moves formation more than a unit of log frequency), ``contradicted`` when it
  lies above 1, else ``undecided``.

:func:`robustness_verdicts` says, per claim, whether every fit (every threshold and the
threshold-free score) gives the same verdict. Plain numpy / pandas / statsmodels; no Kedro.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from ih_kedro.science.statistics import pareto_frontier as pf
from ih_kedro.science.statistics.pareto_cells import thresholds_of

logger = logging.getLogger(__name__)

SUPPORTED, CONTRADICTED, UNDECIDED = "supported", "contradicted", "undecided"

RULES = {
    "both_knobs_matter": (
        "supported when the CIs of both knob coefficients (log frequency, log reliability) lie "
        "above 0; contradicted when either lies below 0; otherwise undecided"
    ),
    "reliability_weighs_more": (
        "supported when the CI of the ratio (log-frequency coefficient / log-reliability "
        "coefficient) lies below 1; contradicted when it lies above 1; otherwise undecided"
    ),
}

ROBUSTNESS_COLUMNS = [
    "measure", "threshold", "model", "status", "n_runs", "n_formed",
    "beta_frequency", "beta_frequency_ci_low", "beta_frequency_ci_high",
    "beta_reliability", "beta_reliability_ci_low", "beta_reliability_ci_high",
    "ratio", "ratio_ci_low", "ratio_ci_high", "both_knobs_matter", "reliability_weighs_more",
]  # fmt: skip


def _verdicts(row: dict[str, Any]) -> dict[str, str]:
    """The two claims' verdicts of one fit (:data:`RULES`)."""
    lows = [row["beta_frequency_ci_low"], row["beta_reliability_ci_low"]]
    highs = [row["beta_frequency_ci_high"], row["beta_reliability_ci_high"]]
    if all(math.isfinite(x) and x > 0 for x in lows):
        knobs = SUPPORTED
    elif any(math.isfinite(x) and x < 0 for x in highs):
        knobs = CONTRADICTED
    else:
        knobs = UNDECIDED
    low, high = row["ratio_ci_low"], row["ratio_ci_high"]
    if math.isfinite(high) and high < 1:
        weighs = SUPPORTED
    elif math.isfinite(low) and low > 1:
        weighs = CONTRADICTED
    else:
        weighs = UNDECIDED
    return {"both_knobs_matter": knobs, "reliability_weighs_more": weighs}


def _row(
    measure: str,
    threshold: float,
    model: str,
    status: str,
    n: int,
    n_formed: float,
    b: np.ndarray,
    ci: np.ndarray,
    ratio: tuple[float, float, float],
) -> dict[str, Any]:
    row = {"measure": measure, "threshold": threshold, "model": model, "status": status,
           "n_runs": n, "n_formed": n_formed,
           "beta_frequency": b[1], "beta_frequency_ci_low": ci[1, 0],
           "beta_frequency_ci_high": ci[1, 1], "beta_reliability": b[2],
           "beta_reliability_ci_low": ci[2, 0], "beta_reliability_ci_high": ci[2, 1],
           "ratio": ratio[0], "ratio_ci_low": ratio[1], "ratio_ci_high": ratio[2]}  # fmt: skip
    return {**row, **_verdicts(row)}


def _unfitted(
    measure: str, threshold: float, model: str, status: str, n: int, n_formed: float
) -> dict[str, Any]:
    nan3 = np.full(3, math.nan)
    return _row(measure, threshold, model, status, n, n_formed, nan3, np.full((3, 2), math.nan),
                (math.nan, math.nan, math.nan))  # fmt: skip


def threshold_fit(
    cell_table: pd.DataFrame, threshold: float, *, fit_method: str = "firth", level: float = 0.95
) -> dict[str, Any]:
    """The logistic frontier refitted with the formed verdict at ``threshold`` (runs whose
    verdict is unobserved there are left out): one row of :data:`ROBUSTNESS_COLUMNS`."""
    column = f"formed_at_{threshold:g}"
    runs = cell_table[cell_table[column].notna()]
    runs = runs[(runs["frequency"] > 0) & (runs["reliability"] > 0)]
    y = runs[column].astype(float)
    measure = f"formed at {threshold:g}"
    if len(runs) < 3 or y.nunique() < 2:
        status = "too_few_runs" if len(runs) < 3 else ("all_formed" if y.all() else "none_formed")
        return _unfitted(measure, threshold, fit_method, status, len(runs), float(y.sum()))
    fit = pf.fit_frontier(runs["frequency"], runs["reliability"], y, method=fit_method, level=level)
    ratio = fit.coefficient_ratio()
    return _row(measure, threshold, fit_method, "ok", fit.n_runs, fit.n_formed, fit.coef,
                fit.conf_int(), ratio)  # fmt: skip


def formation_score_fit(cell_table: pd.DataFrame, *, level: float = 0.95) -> dict[str, Any]:
    """OLS of the threshold-free ``formation_score`` on ``log f`` and ``log r``, CIs
    cluster-robust by cell (``label``) with t quantiles on ``n_cells - 1`` df."""
    import statsmodels.api as sm

    runs = cell_table[cell_table["formation_score"].notna()]
    runs = runs[(runs["frequency"] > 0) & (runs["reliability"] > 0)]
    n_cells = runs["label"].nunique()
    measure = "formation score"
    if n_cells < 4:
        return _unfitted(measure, math.nan, "ols", "too_few_cells", len(runs), math.nan)
    X = np.column_stack(
        [np.ones(len(runs)), np.log(runs["frequency"]), np.log(runs["reliability"])]
    )  # (n, 3)
    groups = pd.factorize(runs["label"])[0]  # (n,)
    fit = sm.OLS(runs["formation_score"].to_numpy(dtype=float), X).fit(
        cov_type="cluster", cov_kwds={"groups": groups}, use_t=True
    )
    b, cov = np.asarray(fit.params), np.asarray(fit.cov_params())
    quantile = float(student_t.ppf(0.5 + level / 2, n_cells - 1))
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))  # (3,)
    ci = np.stack([b - quantile * se, b + quantile * se], axis=1)  # (3, 2)
    return _row(measure, math.nan, "ols", "ok", len(runs), math.nan, b, ci,
                pf.coefficient_ratio(b, cov, quantile))  # fmt: skip


def robustness_table(
    cell_table: pd.DataFrame, *, fit_method: str = "firth", level: float = 0.95
) -> pd.DataFrame:
    """One row per threshold of the cell table's ``formed_at_<t>`` columns and one for the
    threshold-free formation score (when the table has it): :data:`ROBUSTNESS_COLUMNS`."""
    rows = [threshold_fit(cell_table, t, fit_method=fit_method, level=level)
            for t in thresholds_of(cell_table)]  # fmt: skip
    if "formation_score" in cell_table.columns:
        rows.append(formation_score_fit(cell_table, level=level))
    return pd.DataFrame(rows, columns=ROBUSTNESS_COLUMNS)


def robustness_verdicts(table: pd.DataFrame, decision_threshold: float) -> dict[str, Any]:
    """Per claim: the rule, the verdict at ``decision_threshold``, every fit's verdict and
    whether they all agree (``agrees_across_measures``)."""
    out: dict[str, Any] = {}
    for claim, rule in RULES.items():
        by_measure = dict(zip(table["measure"], table[claim], strict=True))
        at = table.loc[np.isclose(table["threshold"], decision_threshold), claim]
        verdict = str(at.iloc[0]) if len(at) else UNDECIDED
        out[claim] = {
            "rule": rule,
            "verdict": verdict,
            "by_measure": by_measure,
            "agrees_across_measures": len(set(by_measure.values())) == 1,
        }
    return out


def check_thresholds(thresholds: Sequence[float], online_threshold: float | None) -> None:
    """Raise when a robustness threshold lies above the online early stop's: a run stopped
    right after crossing the lower one never shows whether it reaches the higher one."""
    if online_threshold is None:
        return
    above = [t for t in thresholds if t > online_threshold]
    if above:
        logger.warning(
            "robustness thresholds %s lie above the online early stop's %g: runs stopped early "
            "are unobserved there and left out of those fits",
            above,
            online_threshold,
        )


__all__ = [
    "RULES",
    "ROBUSTNESS_COLUMNS",
    "check_thresholds",
    "formation_score_fit",
    "robustness_table",
    "robustness_verdicts",
    "threshold_fit",
]
