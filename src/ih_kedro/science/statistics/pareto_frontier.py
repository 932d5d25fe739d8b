"""The frequency x reliability frontier of induction-head formation (Experiment 2).

Each training run of the ``pareto`` grid has a repetition **frequency** ``f`` and
**reliability** ``r`` (:mod:`ih_kedro.science.data.variants.repetition`) and an outcome: did an induction
head form within the step budget? This module estimates

* **P(formed | f, r)** with a logistic model on the log scale,
  ``logit P = b0 + b1 log f + b2 log r``. The linear index makes P monotone in each knob by
  construction; the direction is estimated, and ``b1 > 0, b2 > 0`` (more frequent, more reliable
  repetition helps) is reported as ``monotone_increasing``, never forced. Small grids are often
  perfectly separated (every cell on one side of a line formed, every other did not), where the
  maximum-likelihood estimate does not exist, so the default fit is **Firth's** penalised
  likelihood (Jeffreys prior; finite under separation); ``method="mle"`` uses statsmodels' Logit.
  Coefficient CIs are Wald intervals from the (penalised) information matrix.
* the **frontier**: the 50% contour ``log r = (logit(0.5) - b0 - b1 log f) / b2`` on a grid of
  frequencies (its bootstrap band: :mod:`ih_kedro.science.statistics.pareto_bootstrap`).
* the empirical **Pareto set**: successful cells (formed in at least half their seeds) that no
  other successful cell dominates from below (lower or equal f and r).
* **S* growth near the frontier**: OLS of ``log S*`` on the signed distance ``d`` of a run from
  the fitted frontier in the (log f, log r) plane (``d = eta / ||(b1, b2)||``, positive on the
  forming side), on emerged runs. With slope ``beta < 0`` (S* grows towards the frontier), a
  budget ``k`` times longer moves the frontier by ``log(k) / beta`` in ``d`` (towards rarer /
  less reliable repetition): :func:`budget_shift`. That is an extrapolation of the observed
  trend, reported as such.

Plain numpy / scipy / pandas / statsmodels; no Kedro imports.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit, logit
from scipy.stats import norm

logger = logging.getLogger(__name__)

FORMED_STATUSES = frozenset({"emerged", "left_censored"})
"""Emergence statuses that count as "an induction head formed within the budget"."""
NOT_FORMED_STATUSES = frozenset({"censored"})
"""Statuses that count as "did not form within the budget"; any other (``fit_failed``) is
left out of the frontier fit and counted."""

COEFFICIENTS = ("intercept", "log_frequency", "log_reliability")
METHODS = ("firth", "mle")


def emergence_status(table: pd.DataFrame) -> pd.Series:
    """The emergence status of each row: ``emerged``, ``censored``, ``left_censored``, ...

    Uses the emergence table's ``status`` column when it has one; otherwise derives it from
    ``censored`` and ``step`` (``censored`` -> ``censored``, a finite step -> ``emerged``,
    anything else -> ``fit_failed``). The one place that reads the status.
    """
    if "status" in table.columns:
        return table["status"].astype(str)
    censored = table["censored"].astype(bool)
    finite = np.isfinite(pd.to_numeric(table["step"], errors="coerce").astype(float))
    status = np.where(censored, "censored", np.where(finite, "emerged", "fit_failed"))
    return pd.Series(status, index=table.index, name="status")


def formed_from_status(status: pd.Series) -> pd.Series:
    """1.0 when formed, 0.0 when not formed within the budget, NaN when unknown (fit failed)."""
    values = np.where(
        status.isin(FORMED_STATUSES), 1.0, np.where(status.isin(NOT_FORMED_STATUSES), 0.0, np.nan)
    )
    return pd.Series(values, index=status.index, name="formed")


# --------------------------------------------------------------------------------------------
# Logistic model
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FrontierFit:
    """``logit P(formed) = b0 + b1 log f + b2 log r`` with its covariance."""

    coef: np.ndarray  # (3,) intercept, log f, log r
    cov: np.ndarray  # (3, 3)
    method: str
    n_runs: int
    n_formed: int
    converged: bool
    level: float = 0.95
    separated: bool = False  # the outcomes are perfectly separable by a line (MLE does not exist)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def se(self) -> np.ndarray:
        return np.sqrt(np.clip(np.diag(self.cov), 0.0, None))  # (3,)

    def conf_int(self) -> np.ndarray:
        """(3, 2) Wald intervals at ``level``."""
        z = norm.ppf(0.5 + self.level / 2)
        return np.stack([self.coef - z * self.se, self.coef + z * self.se], axis=1)

    @property
    def monotone_increasing(self) -> bool:
        """Both knobs raise P(formed): ``b1 > 0`` and ``b2 > 0``."""
        return bool(self.coef[1] > 0 and self.coef[2] > 0)

    def linear_predictor(self, frequency: Any, reliability: Any) -> np.ndarray:
        f, r = np.asarray(frequency, dtype=float), np.asarray(reliability, dtype=float)
        return self.coef[0] + self.coef[1] * np.log(f) + self.coef[2] * np.log(r)

    def probability(self, frequency: Any, reliability: Any) -> np.ndarray:
        return expit(self.linear_predictor(frequency, reliability))

    def contour(self, frequency: Any, p: float = 0.5) -> np.ndarray:
        """Reliability on the ``p`` contour at each frequency (NaN when ``b2 <= 0``)."""
        f = np.asarray(frequency, dtype=float)
        if not self.coef[2] > 0:
            return np.full(f.shape, np.nan)
        return np.exp((logit(p) - self.coef[0] - self.coef[1] * np.log(f)) / self.coef[2])

    def coefficient_ratio(self) -> tuple[float, float, float]:
        """``b1 / b2`` (how much log frequency weighs against log reliability) and its Wald CI
        at ``level`` by the delta method: ``(ratio, ci_low, ci_high)``, NaN when ``b2 = 0``.

        On the 50% contour ``b1 log f + b2 log r = const``: a ratio of 0.5 means halving the
        reliability costs what a quarter of the frequency does ("reliability weighs twice").
        """
        return coefficient_ratio(self.coef, self.cov, float(norm.ppf(0.5 + self.level / 2)))

    def log_contour(self, frequency: Any, p: float = 0.5) -> np.ndarray:
        """``log`` of :meth:`contour`, computed on the log scale (no overflow when ``b2`` is
        tiny): NaN when ``b2 <= 0`` and wherever the value is not finite."""
        f = np.asarray(frequency, dtype=float)
        if not self.coef[2] > 0:
            return np.full(f.shape, np.nan)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            log_r = (logit(p) - self.coef[0] - self.coef[1] * np.log(f)) / self.coef[2]
        return np.where(np.isfinite(log_r), log_r, np.nan)

    def log_contour_interval(self, frequency: Any, p: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
        """The Wald (delta-method) interval of :meth:`log_contour` at ``level``, ``(low, high)``
        per frequency (NaN where the contour is): ``g = (logit p - b0 - b1 log f) / b2`` has
        gradient ``(-1, -log f, -g) / b2``. Measured coverage at the default Pareto design:
        docs/coverage.md (the percentile bootstrap bands under-cover there)."""
        f = np.asarray(frequency, dtype=float)
        g = self.log_contour(f, p)
        with np.errstate(divide="ignore", invalid="ignore"):
            grad = np.stack([-np.ones_like(f), -np.log(f), -g], axis=-1) / self.coef[2]  # (G, 3)
            se = np.sqrt(
                np.einsum("gi,ij,gj->g", grad.reshape(-1, 3), self.cov, grad.reshape(-1, 3))
            )
        half = norm.ppf(0.5 + self.level / 2) * se.reshape(f.shape)
        return g - half, g + half

    def distance(self, frequency: Any, reliability: Any) -> np.ndarray:
        """Signed distance from the 50% frontier in the (log f, log r) plane (+ = forming side)."""
        norm_b = float(np.hypot(self.coef[1], self.coef[2]))
        if not norm_b > 0:
            return np.full(np.shape(frequency), np.nan)
        return self.linear_predictor(frequency, reliability) / norm_b


def coefficient_ratio(
    coef: np.ndarray, cov: np.ndarray, quantile: float
) -> tuple[float, float, float]:
    """``coef[1] / coef[2]`` of a ``(b0, b1, b2)`` fit and its delta-method interval
    ``ratio +/- quantile * se``: ``(ratio, ci_low, ci_high)``, NaN when ``b2 = 0``. The logistic
    frontier (:meth:`FrontierFit.coefficient_ratio`, normal quantile) and the linear fit of the
    formation score (t quantile) read the ratio the same way."""
    b1, b2 = float(coef[1]), float(coef[2])
    if b2 == 0 or not math.isfinite(b2):
        return math.nan, math.nan, math.nan
    ratio = b1 / b2
    gradient = np.array([0.0, 1.0 / b2, -b1 / b2**2])  # d(b1/b2)/d(b0, b1, b2)
    half = quantile * math.sqrt(max(float(gradient @ cov @ gradient), 0.0))
    return ratio, ratio - half, ratio + half


def _design(frequency: np.ndarray, reliability: np.ndarray) -> np.ndarray:
    f, r = np.asarray(frequency, dtype=float), np.asarray(reliability, dtype=float)
    if (f <= 0).any() or (r <= 0).any():
        raise ValueError("pareto frontier: frequency and reliability must be > 0 (log scale)")
    return np.column_stack([np.ones_like(f), np.log(f), np.log(r)])  # (n, 3)


def _penalised_loglik(X: np.ndarray, y: np.ndarray, beta: np.ndarray) -> float:
    eta = X @ beta  # (n,)
    p = expit(eta)
    w = p * (1 - p)
    info = X.T @ (X * w[:, None])  # (3, 3)
    sign, logdet = np.linalg.slogdet(info)
    if sign <= 0:
        return -math.inf
    loglik = float(np.sum(y * eta - np.logaddexp(0.0, eta)))
    return loglik + 0.5 * logdet


def _firth(X: np.ndarray, y: np.ndarray, max_iter: int = 200, tol: float = 1e-8):
    """Firth-penalised logistic regression by modified-score Newton steps with step halving."""
    beta = np.zeros(X.shape[1])
    current = _penalised_loglik(X, y, beta)
    converged = False
    for _ in range(max_iter):
        p = expit(X @ beta)  # (n,)
        w = p * (1 - p)
        info = X.T @ (X * w[:, None])  # (3, 3)
        inverse = np.linalg.pinv(info)
        hat = w * np.einsum("ij,jk,ik->i", X, inverse, X)  # (n,) leverages
        score = X.T @ (y - p + hat * (0.5 - p))  # (3,)
        step = inverse @ score
        scale = 1.0
        while scale > 1e-6:
            candidate = beta + scale * step
            value = _penalised_loglik(X, y, candidate)
            if value >= current - 1e-12:
                break
            scale /= 2
        beta, current = candidate, value
        if np.max(np.abs(scale * step)) < tol:
            converged = True
            break
    p = expit(X @ beta)
    info = X.T @ (X * (p * (1 - p))[:, None])
    return beta, np.linalg.pinv(info), converged


def _separable(X: np.ndarray, y: np.ndarray) -> bool:
    """Whether a line separates formed from not-formed runs (quasi-complete counts too)."""
    from scipy.optimize import linprog

    if y.min() == y.max():
        return True
    signs = np.where(y > 0.5, 1.0, -1.0)
    # Find beta with signs * (X beta) >= 0 and sum(signs * X beta) = 1 (a non-trivial separator).
    a_ub = -(signs[:, None] * X)
    a_eq = (signs[:, None] * X).sum(axis=0, keepdims=True)
    result = linprog(
        np.zeros(X.shape[1]),
        A_ub=a_ub,
        b_ub=np.zeros(len(y)),
        A_eq=a_eq,
        b_eq=[1.0],
        bounds=[(None, None)] * X.shape[1],
        method="highs",
    )
    return bool(result.status == 0)


def fit_frontier(
    frequency: Any,
    reliability: Any,
    formed: Any,
    *,
    method: str = "firth",
    level: float = 0.95,
) -> FrontierFit:
    """Fit ``logit P(formed) = b0 + b1 log f + b2 log r`` to one row per run.

    Args:
        frequency, reliability: (n,) knob values (> 0) of each run.
        formed: (n,) 0/1 outcome (NaN rows must be dropped before).
        method: ``firth`` (default; finite under separation) or ``mle`` (statsmodels Logit;
            raises under perfect separation).
        level: confidence level of :meth:`FrontierFit.conf_int`.
    """
    if method not in METHODS:
        raise ValueError(f"pareto.frontier.method: {method!r} is not one of {METHODS}")
    y = np.asarray(formed, dtype=float)
    X = _design(np.asarray(frequency), np.asarray(reliability))  # (n, 3)
    if y.shape[0] != X.shape[0] or not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("pareto frontier: formed must be one 0/1 value per run")
    if len(y) < 3:
        raise ValueError(f"pareto frontier: need at least 3 runs, got {len(y)}")
    separated = _separable(X, y)
    return _fit(X, y, method, level, separated)


def _fit(X: np.ndarray, y: np.ndarray, method: str, level: float, separated: bool) -> FrontierFit:
    """The logistic fit of checked outcomes ``y`` (n,) on the design ``X`` (n, 3)."""
    if method == "mle":
        import statsmodels.api as sm

        if separated:
            raise ValueError(
                "pareto.frontier.method: the outcomes are perfectly separated, the "
                "maximum-likelihood fit does not exist; use method: firth"
            )
        result = sm.Logit(y, X).fit(disp=0)
        coef, cov, converged = (
            np.asarray(result.params),
            np.asarray(result.cov_params()),
            bool(result.mle_retvals.get("converged", True)),
        )
    else:
        coef, cov, converged = _firth(X, y)
    return FrontierFit(
        coef=np.asarray(coef, dtype=float),
        cov=np.asarray(cov, dtype=float),
        method=method,
        n_runs=int(len(y)),
        n_formed=int(y.sum()),
        converged=converged,
        level=level,
        separated=separated,
    )


# --------------------------------------------------------------------------------------------
# Pareto set and S* growth
# --------------------------------------------------------------------------------------------
def pareto_minimal_cells(cells: pd.DataFrame, min_share: float = 0.5) -> pd.DataFrame:
    """Successful cells that no other successful cell dominates from below.

    ``cells`` has one row per grid cell with ``frequency, reliability, formed_share`` (share of
    seeds that formed). A cell succeeds when ``formed_share >= min_share``; it is minimal when
    no other successful cell has ``f' <= f`` and ``r' <= r`` (one of them strictly).
    """
    ok = cells[cells["formed_share"] >= min_share]
    keep = []
    for row in ok.itertuples(index=False):
        dominated = (
            (ok["frequency"] <= row.frequency)
            & (ok["reliability"] <= row.reliability)
            & ((ok["frequency"] < row.frequency) | (ok["reliability"] < row.reliability))
        ).any()
        keep.append(not dominated)
    return ok[np.array(keep, dtype=bool)].sort_values("frequency").reset_index(drop=True)


@dataclass(frozen=True)
class GrowthFit:
    """OLS ``log S* = alpha + beta * d`` on emerged runs (``d``: distance to the frontier)."""

    alpha: float
    beta: float
    alpha_ci: tuple[float, float]
    beta_ci: tuple[float, float]
    n: int
    r_squared: float
    status: str  # "ok" or why not
    distance_range: tuple[float, float] = (math.nan, math.nan)  # of the runs fitted

    def predict(self, distance: Any) -> np.ndarray:
        return np.exp(self.alpha + self.beta * np.asarray(distance, dtype=float))

    def within_fitted_distances(self, distance: float) -> bool:
        """Whether ``distance`` lies in :attr:`distance_range` (ends included; False when the
        range is unknown): inside, the fit interpolates; outside, it extrapolates."""
        d_min, d_max = self.distance_range
        return bool(d_min <= distance <= d_max)


def fit_sstar_growth(distance: Any, sstar: Any, level: float = 0.95) -> GrowthFit:
    """Fit how S* (steps) grows as runs approach the frontier (``d -> 0``)."""
    import statsmodels.api as sm

    d = np.asarray(distance, dtype=float)
    s = np.asarray(sstar, dtype=float)
    keep = np.isfinite(d) & np.isfinite(s) & (s > 0)
    n = int(keep.sum())
    nan2 = (math.nan, math.nan)
    if n < 3 or np.ptp(d[keep]) == 0:
        return GrowthFit(math.nan, math.nan, nan2, nan2, n, math.nan, "too_few_emerged_runs")
    observed = (float(d[keep].min()), float(d[keep].max()))
    result = sm.OLS(np.log(s[keep]), sm.add_constant(d[keep])).fit()
    ci = np.asarray(result.conf_int(alpha=1 - level))
    return GrowthFit(
        alpha=float(result.params[0]),
        beta=float(result.params[1]),
        alpha_ci=(float(ci[0, 0]), float(ci[0, 1])),
        beta_ci=(float(ci[1, 0]), float(ci[1, 1])),
        n=n,
        r_squared=float(result.rsquared),
        status="ok",
        distance_range=observed,
    )


def budget_shift(
    fit: FrontierFit,
    growth: GrowthFit,
    frequency_grid: np.ndarray,
    factors: tuple[float, ...] = (2.0, 4.0),
) -> pd.DataFrame:
    """Where the frontier would move with a budget ``k`` times longer (extrapolated).

    Under ``log S* = alpha + beta d``, S* at the current frontier equals the budget; ``k``
    times the budget reaches ``d_k = log(k) / beta`` (negative: the non-forming side). The
    moved frontier is the line ``eta = d_k * ||(b1, b2)||``. Returns one row per factor and
    frequency: ``budget_factor, frequency, shift, shift_low, shift_high`` (``d_k`` and its range
    from ``beta``'s CI), ``reliability_50`` on the moved frontier and ``extrapolated``: True
    when ``d_k`` lies outside the distances of the runs the growth was fitted on (the moved
    frontier is then a straight-line extrapolation of the trend, not an interpolation). Rows
    are NaN (``extrapolated`` False) when the growth fit is unavailable or ``beta >= 0`` (no
    sign that S* grows near the frontier).
    """
    grid = np.asarray(frequency_grid, dtype=float)
    norm_b = float(np.hypot(fit.coef[1], fit.coef[2]))
    rows = []
    for k in factors:
        usable = growth.status == "ok" and growth.beta < 0 and fit.coef[2] > 0
        shift = math.log(k) / growth.beta if usable else math.nan
        ends = [math.log(k) / b if usable and b < 0 else math.nan for b in growth.beta_ci]
        finite = [e for e in ends if math.isfinite(e)]
        low = min(finite) if len(finite) == 2 else -math.inf if usable else math.nan
        high = max(finite) if finite else math.nan
        extrapolated = bool(usable and not growth.within_fitted_distances(shift))
        if usable:
            log_r = (shift * norm_b - fit.coef[0] - fit.coef[1] * np.log(grid)) / fit.coef[2]
            reliability = np.exp(log_r)
        else:
            reliability = np.full(grid.shape, np.nan)
        for f, r in zip(grid, reliability, strict=True):
            rows.append(
                {
                    "budget_factor": float(k),
                    "frequency": float(f),
                    "shift": shift,
                    "shift_low": low,
                    "shift_high": high,
                    "reliability_50": float(r),
                    "extrapolated": extrapolated,
                }
            )
    return pd.DataFrame(rows)


__all__ = [
    "COEFFICIENTS",
    "FORMED_STATUSES",
    "FrontierFit",
    "GrowthFit",
    "budget_shift",
    "coefficient_ratio",
    "emergence_status",
    "fit_frontier",
    "fit_sstar_growth",
    "formed_from_status",
    "pareto_minimal_cells",
]
