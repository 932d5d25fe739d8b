"""The emergence law ``S* = T / (B^a C^b)``: fit, test, predict.

``S*`` is a run's emergence step (optimizer steps), ``B`` its batch size (sequences per step)
and ``C`` its context length (tokens per sequence). In log space the law is linear,

    log S* = log T - a log B - b log C,

and is fitted by OLS (statsmodels) over runs, or, when some runs never emerged within their
budget, by a right-censored Gaussian (Tobit) regression whose censoring point is each run's
``log(last_step)``. The same form is fitted to tokens at emergence (``tokens* = S* B C``), whose
exponents are the step exponents minus one.

Reported: ``a``, ``b``, ``log T``, ``T`` with CIs; R²; the Pearson r of predicted vs observed in
log and in linear space (Fisher-z CI); a leave-one-configuration-out predictive r; a Wald test
of reference exponents (the seed study's ``a = 0.37``, ``b = 0.62``); prediction intervals for
new configurations.

Plain numpy/scipy/statsmodels/pandas; no Kedro imports.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import special, stats

logger = logging.getLogger(__name__)

SEED_EXPONENTS = {"a": 0.37, "b": 0.62}
CENSORED_HANDLING = ("exclude", "tobit")
RESPONSES = ("step", "tokens")
_LOG_B = "log_batch_size"
_LOG_C = "log_context_length"


@dataclass
class EmergenceLawFit:
    """A fitted emergence law ``response = T / (B^a C^b)``.

    Attributes:
        response: ``step`` (S*, optimizer steps) or ``tokens`` (tokens at emergence).
        censored: censored-run handling, ``exclude`` or ``tobit``.
        level: CI level of every ``*_ci``.
        a, b: exponents of B and C (NaN when not identifiable: a single B or C in the data).
        log_T, T: the law's constant (natural log; ``T`` in units of the response).
        a_ci, b_ci, log_T_ci, T_ci: CIs (t-based for OLS, Wald/normal from the inverse
            Hessian for Tobit).
        r_squared: R² in log space (over uncensored runs for Tobit).
        pearson_r_log, pearson_r_linear: r of predicted vs observed response, uncensored runs,
            in log and linear space, with Fisher-z CIs ``*_ci``.
        loo_r_log, loo_r_linear: the same r when each configuration (unique B, C[, preset])
            is predicted by a fit without any of its seeds; NaN when too few configurations.
        n_runs: runs in the fit (including censored runs for Tobit).
        n_censored: censored runs in the input table.
        n_censored_excluded: censored runs dropped (``exclude``); 0 for Tobit.
        n_left_censored, n_fit_failed: rows excluded by their emergence ``status``.
        covariance: ``classical`` or ``cluster-robust by configuration``.
        n_clusters: configurations in the cluster-robust covariance (0 when classical).
        n_configurations: distinct configurations in the fit.
        seeds: training seeds of the runs in the fit.
        wald_null: reference exponents tested, ``{"a": ..., "b": ...}`` (for the response:
            step exponents minus one for ``tokens``).
        wald_statistic, wald_df, wald_p_value, wald_test: joint Wald test of ``wald_null``
            (``F`` for OLS, ``chi2`` for Tobit); only identifiable exponents are tested.
        residual_sd: residual sd in log space (sigma).
        identifiable: which exponents the data identify, ``{"a": bool, "b": bool}``.
        extra_covariates: additional numeric covariates in the design.
        coef_names, params, cov, df_resid, constants: the linear model in log space
            (coefficients on ``const, log_batch_size, log_context_length, *extra``; their
            covariance; residual degrees of freedom, ``inf`` for Tobit; the log B / log C
            values held fixed when not identifiable) used for prediction.
        data: one row per run: ``run_name, batch_size, context_length, seed, censored,
            observed, log_observed, log_predicted, residual, loo_log_predicted``.
        results: the statsmodels OLS results (residuals, diagnostics); None for Tobit.
    """

    response: str
    censored: str
    level: float
    a: float
    a_ci: tuple[float, float]
    b: float
    b_ci: tuple[float, float]
    log_T: float
    log_T_ci: tuple[float, float]
    T: float
    T_ci: tuple[float, float]
    r_squared: float
    pearson_r_log: float
    pearson_r_log_ci: tuple[float, float]
    pearson_r_linear: float
    pearson_r_linear_ci: tuple[float, float]
    loo_r_log: float
    loo_r_linear: float
    n_runs: int
    n_censored: int
    n_censored_excluded: int
    n_configurations: int
    n_left_censored: int
    n_fit_failed: int
    covariance: str
    n_clusters: int
    seeds: list[int]
    wald_null: dict[str, float]
    wald_statistic: float
    wald_df: int
    wald_p_value: float
    wald_test: str
    residual_sd: float
    identifiable: dict[str, bool]
    extra_covariates: tuple[str, ...]
    coef_names: list[str]
    params: np.ndarray
    cov: np.ndarray
    df_resid: float
    constants: dict[str, float]
    data: pd.DataFrame = field(repr=False)
    results: Any = field(default=None, repr=False)


# --------------------------------------------------------------------------------------------
# Design
# --------------------------------------------------------------------------------------------
@dataclass
class _Design:
    y: np.ndarray  # (n,) log response; for censored rows the censoring point
    X: pd.DataFrame  # (n, p) with columns const, [log_batch_size], [log_context_length], extra
    censored: np.ndarray  # (n,) bool
    constants: dict[str, float]
    identifiable: dict[str, bool]
    groups: np.ndarray | None = None  # (n,) configuration of each run, for clustered CIs


def _validate_table(table: pd.DataFrame, response: str, extra: Sequence[str]) -> None:
    if response not in RESPONSES:
        raise ValueError(f"response: expected one of {RESPONSES}, got {response!r}")
    required = ["step", "batch_size", "context_length", *extra]
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise ValueError(f"emergence table: missing columns {missing}")
    for column in ("metric", "method", "threshold"):
        if column in table.columns and table[column].nunique(dropna=True) > 1:
            values = sorted(table[column].dropna().unique().tolist())  # plain, not np.float64
            raise ValueError(
                f"emergence table: one law per {column}; got {values} (select rows before fitting)"
            )
    for column in ("batch_size", "context_length"):
        values = pd.to_numeric(table[column], errors="coerce")
        if values.isna().any() or (values <= 0).any():
            raise ValueError(f"emergence table: {column} must be positive numbers")
    for column in extra:
        if not pd.api.types.is_numeric_dtype(table[column]):
            raise ValueError(
                f"extra_covariates: {column!r} is not numeric; encode it numerically "
                "(e.g. log n_parameters) before fitting"
            )


def _censored_mask(table: pd.DataFrame) -> np.ndarray:
    if "censored" in table.columns:
        censored = table["censored"].fillna(False).astype(bool).to_numpy()
    else:
        censored = table["step"].isna().to_numpy()
    step = pd.to_numeric(table["step"], errors="coerce").to_numpy(dtype=float)
    bad = ~censored & ~(np.isfinite(step) & (step > 0))
    if bad.any():
        names = table.get("run_name", pd.Series(range(len(table)))).to_numpy()[bad]
        raise ValueError(
            f"emergence table: step must be a positive number for uncensored runs; "
            f"bad rows: {list(names)[:5]}"
        )
    return censored


def _build_design(
    table: pd.DataFrame, response: str, censored: np.ndarray, extra: Sequence[str]
) -> _Design:
    batch = table["batch_size"].to_numpy(dtype=float)
    context = table["context_length"].to_numpy(dtype=float)
    step = table["step"].to_numpy(dtype=float)
    if censored.any():
        if "last_step" not in table.columns:
            raise ValueError("emergence table: censored runs need a last_step column")
        last = table["last_step"].to_numpy(dtype=float)
        if not np.all(np.isfinite(last[censored]) & (last[censored] > 0)):
            raise ValueError("emergence table: last_step must be positive for censored runs")
        step = np.where(censored, last, step)
    y = np.log(step)
    if response == "tokens":
        y = y + np.log(batch) + np.log(context)

    columns: dict[str, np.ndarray] = {"const": np.ones(len(table))}
    constants: dict[str, float] = {}
    identifiable: dict[str, bool] = {}
    for name, key, values in ((_LOG_B, "a", batch), (_LOG_C, "b", context)):
        logs = np.log(values)
        identifiable[key] = bool(np.ptp(logs) > 0) if logs.size else False
        if identifiable[key]:
            columns[name] = logs
        elif logs.size:
            constants[name] = float(logs[0])
    for column in extra:
        values = table[column].to_numpy(dtype=float)
        if np.ptp(values) == 0:
            logger.warning("extra_covariates: %r is constant; left out of the design", column)
            continue
        columns[column] = values
    X = pd.DataFrame(columns, index=table.index)
    return _Design(y=y, X=X, censored=censored, constants=constants, identifiable=identifiable)


# --------------------------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------------------------
@dataclass
class _Core:
    params: np.ndarray  # (p,)
    cov: np.ndarray  # (p, p)
    sigma: float
    df_resid: float
    results: Any = None
    n_clusters: int = 0  # configurations in a cluster-robust covariance; 0 = classical


def _fit_ols(y: np.ndarray, X: np.ndarray, groups: np.ndarray | None = None) -> _Core:
    """OLS; with ``groups`` that repeat (seed replicates of a configuration) the covariance is
    cluster-robust by group (statsmodels ``cov_type="cluster"``, t with G - 1 df), so the CIs
    carry seed-to-seed scatter and correlation within a configuration; t quantiles on G - k
    degrees of freedom (k coefficients)."""
    n_groups = len(pd.unique(groups)) if groups is not None else 0
    if groups is not None and 1 < n_groups < len(groups) and n_groups > X.shape[1] + 1:
        codes = pd.factorize(groups)[0]
        results = sm.OLS(y, X).fit(cov_type="cluster", cov_kwds={"groups": codes}, use_t=True)
        # t on G - k df (not statsmodels' G - 1): B and C are constant within a cluster, and
        # with ~9 configurations G - 1 undercovers (simulated: 0.85 vs 0.88 at 95%).
        df = float(n_groups - X.shape[1])
    else:
        results = sm.OLS(y, X).fit()
        df, n_groups = float(results.df_resid), 0
    return _Core(
        params=np.asarray(results.params, dtype=float),
        cov=np.asarray(results.cov_params(), dtype=float),
        sigma=float(math.sqrt(results.scale)),
        df_resid=df,
        results=results,
        n_clusters=n_groups,
    )


def _tobit_terms(
    theta: np.ndarray, y: np.ndarray, X: np.ndarray, censored: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """NLL, gradient, Hessian and per-run scores of a right-censored Gaussian regression.

    Olsen's parameterisation ``theta = (delta, tau)`` with ``delta = beta / sigma`` and
    ``tau = 1 / sigma``: the negative log-likelihood is convex there, so Newton's method
    converges from any start with ``tau > 0``.

    Returns:
        ``(nll, grad (p+1,), hessian (p+1, p+1), scores (n, p+1))``; ``scores`` are each run's
        gradient contributions (for the cluster-robust covariance).
    """
    delta, tau = theta[:-1], float(theta[-1])
    obs = ~censored
    n, p = X.shape
    scores = np.zeros((n, p + 1))
    hessian = np.zeros((p + 1, p + 1))
    # Emerged runs: -log density = 0.5 (tau y - x delta)^2 - log tau + const.
    Xo, yo = X[obs], y[obs]
    r = tau * yo - Xo @ delta  # (n_obs,)
    scores[obs, :p] = -Xo * r[:, None]
    scores[obs, p] = r * yo - 1.0 / tau
    hessian[:p, :p] += Xo.T @ Xo
    hessian[:p, p] += -(Xo.T @ yo)
    hessian[p, p] += float(yo @ yo) + obs.sum() / tau**2
    nll = float(0.5 * r @ r - obs.sum() * math.log(tau) + 0.5 * obs.sum() * math.log(2 * math.pi))
    # Censored runs: -log P(latent > c) = -log Phi(x delta - tau c).
    Xc, c = X[censored], y[censored]
    z = Xc @ delta - tau * c  # (n_cens,)
    log_cdf = special.log_ndtr(z)
    mills = np.exp(-0.5 * z**2 - 0.5 * math.log(2 * math.pi) - log_cdf)  # phi(z) / Phi(z)
    scores[censored, :p] = -Xc * mills[:, None]
    scores[censored, p] = mills * c
    curvature = mills * (z + mills)  # d^2/dz^2 of -log Phi(z), >= 0
    dz = np.column_stack([Xc, -c])  # (n_cens, p+1)
    hessian += dz.T @ (dz * curvature[:, None])
    nll -= float(np.sum(log_cdf))
    hessian[p, :p] = hessian[:p, p]
    return nll, scores.sum(axis=0), hessian, scores


def _tobit_newton(
    theta: np.ndarray, y: np.ndarray, X: np.ndarray, censored: np.ndarray
) -> tuple[np.ndarray, bool]:
    """Damped Newton on the convex Olsen NLL; returns ``(theta, converged)``."""
    nll, grad, hessian, _ = _tobit_terms(theta, y, X, censored)
    for _ in range(200):
        try:
            direction = np.linalg.solve(hessian, grad)
        except np.linalg.LinAlgError:
            return theta, False
        decrement = float(grad @ direction)  # twice the predicted NLL decrease
        tolerance = 1e-12 * max(1.0, abs(nll))
        if decrement < tolerance:
            return theta, True
        scale = 1.0
        while scale > 1e-12:
            trial = theta - scale * direction
            if trial[-1] > 0:
                trial_nll = _tobit_terms(trial, y, X, censored)[0]
                if trial_nll <= nll - 1e-4 * scale * decrement:
                    break
            scale *= 0.5
        else:  # no decrease within rounding: converged when the decrement is negligible
            return theta, bool(decrement < 1e-8 * max(1.0, abs(nll)))
        theta = trial
        nll, grad, hessian, _ = _tobit_terms(theta, y, X, censored)
    return theta, False


def _cluster_meat(scores: np.ndarray, groups: np.ndarray | None) -> np.ndarray | None:
    """Sum over clusters of the outer product of cluster score sums, with G/(G-1); None when
    there are no clusters (or as many clusters as runs: no repeated configuration)."""
    if groups is None:
        return None
    labels = pd.unique(groups)
    if len(labels) in (len(groups), 1) or len(labels) <= scores.shape[1]:
        return None
    sums = np.stack([scores[groups == g].sum(axis=0) for g in labels])  # (G, p)
    return sums.T @ sums * len(labels) / (len(labels) - 1)


def _fit_tobit(
    y: np.ndarray, X: np.ndarray, censored: np.ndarray, groups: np.ndarray | None = None
) -> _Core:
    """Right-censored Gaussian regression by maximum likelihood (Newton, Olsen's convex
    parameterisation); Wald CIs from the inverse observed information, or cluster-robust
    (sandwich by ``groups``) when runs repeat a configuration."""
    n_params = X.shape[1]
    start = _fit_ols(y[~censored], X[~censored]) if (~censored).sum() > n_params else None
    beta0 = start.params if start is not None else np.linalg.lstsq(X, y, rcond=None)[0]
    sigma0 = start.sigma if start is not None and start.sigma > 0 else max(np.std(y), 1e-3)
    theta, converged = _tobit_newton(np.append(beta0, 1.0) / sigma0, y, X, censored)
    if not converged:
        logger.warning("tobit: Newton's method did not converge")
    _, _, hessian, scores = _tobit_terms(theta, y, X, censored)
    try:
        bread = np.linalg.inv(hessian)
    except np.linalg.LinAlgError:
        logger.warning("tobit: singular information matrix; CIs are undefined")
        bread = np.full_like(hessian, np.nan)
    meat = _cluster_meat(scores, groups)
    cov_theta = bread if meat is None else bread @ meat @ bread
    delta, tau = theta[:-1], float(theta[-1])
    # beta = delta / tau: delta method from (delta, tau) to beta.
    jacobian = np.column_stack([np.eye(n_params) / tau, -delta / tau**2])  # (p, p+1)
    n_groups = len(pd.unique(groups)) if meat is not None else 0
    return _Core(
        params=delta / tau,
        cov=jacobian @ cov_theta @ jacobian.T,
        sigma=1.0 / tau,
        df_resid=float(n_groups - n_params) if meat is not None else math.inf,
        n_clusters=n_groups,
    )


def _min_runs(n_params: int, censored: str) -> int:
    # OLS needs a residual degree of freedom; Tobit also estimates sigma.
    return n_params + 1 if censored == "exclude" else n_params + 2


def _fit_core(design: _Design, censored: str) -> _Core:
    X = design.X.to_numpy(dtype=float)
    if np.linalg.matrix_rank(X) < X.shape[1]:
        raise ValueError(
            f"emergence law: the design {list(design.X.columns)} is collinear (e.g. B and C "
            "always change together); vary them independently"
        )
    if censored == "exclude":
        return _fit_ols(design.y, X, design.groups)
    return _fit_tobit(design.y, X, design.censored, design.groups)


# --------------------------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------------------------
def _pearson_with_ci(x: np.ndarray, y: np.ndarray, level: float) -> tuple[float, tuple]:
    """Pearson r with a Fisher-z CI (NaN CI for n <= 3)."""
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, (math.nan, math.nan)
    r = float(np.corrcoef(x, y)[0, 1])
    if x.size <= 3:
        return r, (math.nan, math.nan)
    z = math.atanh(float(np.clip(r, -1 + 1e-15, 1 - 1e-15)))
    half = stats.norm.ppf(0.5 + level / 2) / math.sqrt(x.size - 3)
    return r, (math.tanh(z - half), math.tanh(z + half))


def _quantile(level: float, df: float) -> float:
    p = 0.5 + level / 2
    return float(stats.norm.ppf(p) if math.isinf(df) else stats.t.ppf(p, df))


def _coef_ci(core: _Core, index: int, level: float) -> tuple[float, float]:
    se = math.sqrt(core.cov[index, index]) if core.cov[index, index] >= 0 else math.nan
    q = _quantile(level, core.df_resid)
    return core.params[index] - q * se, core.params[index] + q * se


def _wald(
    core: _Core, names: list[str], null: dict[str, float], censored: str
) -> tuple[float, int, float, str]:
    rows, targets = [], []
    for name, key in ((_LOG_B, "a"), (_LOG_C, "b")):
        if name in names:
            row = np.zeros(len(names))
            row[names.index(name)] = 1.0
            rows.append(row)
            targets.append(-null[key])  # the coefficient of log B is -a
    kind = "F" if censored == "exclude" else "chi2"
    if not rows:
        return math.nan, 0, math.nan, kind
    R = np.array(rows)
    diff = R @ core.params - np.array(targets)
    try:
        stat = float(diff @ np.linalg.solve(R @ core.cov @ R.T, diff))
    except np.linalg.LinAlgError:
        # A zero-residual OLS fit has a singular covariance: the test is undefined.
        logger.warning("emergence law: singular coefficient covariance; Wald test undefined")
        return math.nan, len(rows), math.nan, kind
    df = len(rows)
    if kind == "F":
        stat /= df
        return stat, df, float(stats.f.sf(stat, df, core.df_resid)), kind
    return stat, df, float(stats.chi2.sf(stat, df)), kind


def _configuration_keys(table: pd.DataFrame) -> pd.Series:
    keys = ["batch_size", "context_length"] + (["preset"] if "preset" in table.columns else [])
    return table[keys].astype(str).agg("|".join, axis=1)


def _leave_one_configuration_out(design: _Design, configs: pd.Series, censored: str) -> np.ndarray:
    """Log predictions of each configuration's runs from a fit without that configuration."""
    predicted = np.full(len(configs), np.nan)
    config_values = configs.to_numpy()
    X_all = design.X.to_numpy(dtype=float)
    n_params = X_all.shape[1]
    for config in pd.unique(config_values):
        held = config_values == config
        X_train = X_all[~held]
        if len(X_train) < _min_runs(n_params, censored):
            continue
        # Every design column except the constant must still vary without this configuration.
        if n_params > 1 and np.any(np.ptp(X_train[:, 1:], axis=0) == 0):
            continue
        if np.linalg.matrix_rank(X_train) < n_params:
            continue
        sub = _Design(
            y=design.y[~held],
            X=design.X.loc[~held],
            censored=design.censored[~held],
            constants=design.constants,
            identifiable=design.identifiable,
            groups=None if design.groups is None else design.groups[~held],
        )
        if censored == "tobit" and (~sub.censored).sum() < 2:
            continue
        core = _fit_core(sub, censored)
        predicted[held] = X_all[held] @ core.params
    return predicted


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------
def fit_emergence_law(
    table: pd.DataFrame,
    response: str = "step",
    censored: str = "exclude",
    extra_covariates: Sequence[str] = (),
    *,
    seed_exponents: Mapping[str, float] | None = None,
    level: float = 0.95,
    leave_one_out: bool = True,
    cluster_by_configuration: bool = True,
) -> EmergenceLawFit:
    """Fit ``response = T / (B^a C^b)`` in log space over runs.

    Args:
        table: emergence table (one metric/method/threshold): ``step`` (S*, steps; NaN if
            censored), ``batch_size``, ``context_length``, optionally ``censored``,
            ``last_step``, ``run_name``, ``seed``, ``preset`` and the ``extra_covariates``.
        response: ``step`` (S*) or ``tokens`` (``S* B C``, tokens at emergence).
        censored: ``exclude`` (OLS on emerged runs; the dropped count is recorded and logged)
            or ``tobit`` (right-censored ML at ``log(last_step)``).
        extra_covariates: numeric columns added to the log-linear design (e.g. log parameters).
        seed_exponents: step exponents tested by the Wald test, default
            ``{"a": 0.37, "b": 0.62}``; for ``tokens`` the test uses them minus one.
        level: CI level.
        leave_one_out: compute the leave-one-configuration-out r (refits per configuration).
        cluster_by_configuration: when runs repeat a configuration (seed replicates), the
            coefficient covariance is cluster-robust by configuration (OLS: statsmodels
            ``cov_type="cluster"``; Tobit: the sandwich with cluster score sums), with t
            quantiles on G - k degrees of freedom (k coefficients): the CIs carry seed scatter. Without repeats
            (or with fewer clusters than coefficients + 1) the classical covariance is used.

    A ``status`` column (the emergence table's) decides which rows enter: ``emerged`` and
    ``censored`` (right-censored at ``last_step``) do; ``left_censored`` and ``fit_failed``
    rows are excluded, and their counts are logged and recorded.

    Returns:
        An :class:`EmergenceLawFit`.

    Raises:
        ValueError: bad columns or values, a collinear design, or fewer runs than
            parameters + 1 (+ 2 for Tobit, which also estimates sigma).
    """
    if censored not in CENSORED_HANDLING:
        raise ValueError(f"censored: expected one of {CENSORED_HANDLING}, got {censored!r}")
    if not 0 < level < 1:
        raise ValueError(f"level: must be in (0, 1), got {level}")
    extra = tuple(extra_covariates)
    _validate_table(table, response, extra)
    null_step = dict(SEED_EXPONENTS if seed_exponents is None else seed_exponents)
    shift = 1.0 if response == "tokens" else 0.0
    wald_null = {"a": float(null_step["a"]) - shift, "b": float(null_step["b"]) - shift}

    table = table.reset_index(drop=True)
    n_left_censored = n_fit_failed = 0
    if "status" in table.columns:
        status = table["status"].astype(str)
        n_left_censored = int((status == "left_censored").sum())
        n_fit_failed = int((status == "fit_failed").sum())
        if n_left_censored or n_fit_failed:
            logger.warning(
                "emergence law: %d left-censored runs (above threshold at the first checkpoint) "
                "and %d runs whose estimator failed are excluded from the fit (of %d)",
                n_left_censored,
                n_fit_failed,
                len(table),
            )
        table = table.loc[status.isin(["emerged", "censored"])].reset_index(drop=True)
        table = table.assign(censored=table["status"].astype(str) == "censored")
    is_censored = _censored_mask(table)
    n_censored = int(is_censored.sum())
    n_excluded = 0
    if censored == "exclude" and n_censored:
        n_excluded = n_censored
        logger.warning(
            "emergence law: %d of %d runs are censored (no emergence within budget) and are "
            "excluded; S* is biased low for slow configurations; consider censored='tobit'",
            n_censored,
            len(table),
        )
        table = table.loc[~is_censored].reset_index(drop=True)
        is_censored = np.zeros(len(table), dtype=bool)

    design = _build_design(table, response, is_censored, extra)
    configs = _configuration_keys(table)
    if cluster_by_configuration:
        design.groups = configs.to_numpy()
    for key, name in (("a", "B (batch_size)"), ("b", "C (context_length)")):
        if not design.identifiable[key] and len(table):
            logger.warning(
                "emergence law: a single %s in the data; exponent %s is not identifiable "
                "(reported as NaN), only the other terms are fitted",
                name,
                key,
            )
    n_params = design.X.shape[1]
    needed = _min_runs(n_params, censored)
    if len(table) < needed:
        raise ValueError(
            f"emergence law: {len(table)} usable runs for {n_params} coefficients "
            f"{list(design.X.columns)}; need at least {needed} (censored={censored!r}, "
            f"{n_excluded} censored runs excluded)"
        )
    if censored == "tobit" and (~is_censored).sum() < 2:
        raise ValueError("emergence law: tobit needs at least 2 runs that emerged")

    core = _fit_core(design, censored)
    names = list(design.X.columns)
    log_pred = design.X.to_numpy(dtype=float) @ core.params
    obs = ~is_censored

    def coefficient(name: str, sign: float) -> tuple[float, tuple[float, float]]:
        if name not in names:
            return math.nan, (math.nan, math.nan)
        i = names.index(name)
        lo, hi = _coef_ci(core, i, level)
        est = sign * core.params[i]
        return float(est), tuple(sorted((float(sign * lo), float(sign * hi))))

    a, a_ci = coefficient(_LOG_B, -1.0)
    b, b_ci = coefficient(_LOG_C, -1.0)
    log_T, log_T_ci = coefficient("const", 1.0)

    y_obs, pred_obs = design.y[obs], log_pred[obs]
    ss_tot = float(np.sum((y_obs - y_obs.mean()) ** 2)) if obs.any() else math.nan
    r_squared = 1.0 - float(np.sum((y_obs - pred_obs) ** 2)) / ss_tot if ss_tot else math.nan
    r_log, r_log_ci = _pearson_with_ci(pred_obs, y_obs, level)
    r_lin, r_lin_ci = _pearson_with_ci(np.exp(pred_obs), np.exp(y_obs), level)

    loo_pred = (
        _leave_one_configuration_out(design, configs, censored)
        if leave_one_out
        else np.full(len(table), np.nan)
    )
    loo_keep = obs & np.isfinite(loo_pred)
    loo_r_log = _pearson_with_ci(loo_pred[loo_keep], design.y[loo_keep], level)[0]
    loo_r_lin = _pearson_with_ci(np.exp(loo_pred[loo_keep]), np.exp(design.y[loo_keep]), level)[0]
    if leave_one_out and not np.isfinite(loo_r_log):
        logger.warning(
            "emergence law: leave-one-configuration-out r undefined (%d configurations)",
            configs.nunique(),
        )

    wald_stat, wald_df, wald_p, wald_kind = _wald(core, names, wald_null, censored)
    seeds = sorted(int(s) for s in pd.unique(table["seed"].dropna())) if "seed" in table else []
    data = pd.DataFrame(
        {
            "run_name": table["run_name"] if "run_name" in table else pd.RangeIndex(len(table)),
            "batch_size": table["batch_size"],
            "context_length": table["context_length"],
            "seed": table["seed"] if "seed" in table else np.nan,
            "censored": is_censored,
            "observed": np.where(obs, np.exp(design.y), np.nan),
            "log_observed": np.where(obs, design.y, np.nan),
            "log_predicted": log_pred,
            "residual": np.where(obs, design.y - log_pred, np.nan),
            "loo_log_predicted": loo_pred,
        }
    )
    return EmergenceLawFit(
        response=response,
        censored=censored,
        level=level,
        a=a,
        a_ci=a_ci,
        b=b,
        b_ci=b_ci,
        log_T=log_T,
        log_T_ci=log_T_ci,
        T=math.exp(log_T),
        T_ci=(math.exp(log_T_ci[0]), math.exp(log_T_ci[1])),
        r_squared=float(r_squared),
        pearson_r_log=r_log,
        pearson_r_log_ci=r_log_ci,
        pearson_r_linear=r_lin,
        pearson_r_linear_ci=r_lin_ci,
        loo_r_log=float(loo_r_log),
        loo_r_linear=float(loo_r_lin),
        n_runs=len(table),
        n_censored=n_censored,
        n_censored_excluded=n_excluded,
        n_configurations=int(configs.nunique()),
        n_left_censored=n_left_censored,
        n_fit_failed=n_fit_failed,
        covariance="cluster-robust by configuration" if core.n_clusters else "classical",
        n_clusters=core.n_clusters,
        seeds=seeds,
        wald_null=wald_null,
        wald_statistic=wald_stat,
        wald_df=wald_df,
        wald_p_value=wald_p,
        wald_test=wald_kind,
        residual_sd=core.sigma,
        identifiable=design.identifiable,
        extra_covariates=tuple(c for c in extra if c in names),
        coef_names=names,
        params=core.params,
        cov=core.cov,
        df_resid=core.df_resid,
        constants=design.constants,
        data=data,
        results=core.results,
    )


def _model_from(fit: EmergenceLawFit | Mapping[str, Any]) -> dict[str, Any]:
    """The predictive model (coefficients, covariance, sigma, dof) of a fit or summary dict."""
    if isinstance(fit, EmergenceLawFit):
        return {
            "response": fit.response,
            "coef_names": list(fit.coef_names),
            "params": np.asarray(fit.params, dtype=float),
            "cov": np.asarray(fit.cov, dtype=float),
            "sigma": fit.residual_sd,
            "df_resid": fit.df_resid,
            "constants": dict(fit.constants),
        }
    if "model" not in fit:
        raise ValueError("fit: a summary dict needs the 'model' block written by fit_summary_dict")
    model = fit["model"]
    df = model["df_resid"]
    return {
        "response": fit["response"],
        "coef_names": list(model["coef_names"]),
        "params": np.asarray(model["params"], dtype=float),
        "cov": np.asarray(model["cov"], dtype=float),
        "sigma": float(model["sigma"]),
        "df_resid": math.inf if df is None else float(df),
        "constants": dict(model.get("constants", {})),
    }


def predict_emergence(
    fit: EmergenceLawFit | Mapping[str, Any],
    batch_size: float | Sequence[float],
    context_length: float | Sequence[float],
    level: float = 0.95,
    covariates: Mapping[str, float | Sequence[float]] | None = None,
) -> pd.DataFrame:
    """Predicted emergence with a prediction interval for new configurations.

    The interval is the OLS prediction interval in log space (``t`` with the fit's residual
    dof; normal for Tobit), back-transformed, so ``step`` is the predicted *median* S*.

    Args:
        fit: an :class:`EmergenceLawFit`, or the dict from :func:`fit_summary_dict`.
        batch_size, context_length: one configuration or equal-length sequences (broadcast).
        level: prediction-interval level.
        covariates: values of the fit's extra covariates (required when it has any).

    Returns:
        One row per configuration: ``batch_size, context_length, step, step_low, step_high``
        (steps), ``tokens, tokens_low, tokens_high`` (tokens = step B C), ``log_se`` (sd of a
        new log observation) and ``level``. NaN for a B (C) different from the single value
        the fit saw when its exponent was not identifiable.
    """
    if not 0 < level < 1:
        raise ValueError(f"level: must be in (0, 1), got {level}")
    model = _model_from(fit)
    batch, context = np.broadcast_arrays(
        np.atleast_1d(np.asarray(batch_size, dtype=float)),
        np.atleast_1d(np.asarray(context_length, dtype=float)),
    )
    if np.any(batch <= 0) or np.any(context <= 0):
        raise ValueError("batch_size, context_length: must be positive")
    covariates = dict(covariates or {})
    columns: list[np.ndarray] = []
    valid = np.ones(batch.size, dtype=bool)
    for name in model["coef_names"]:
        if name == "const":
            columns.append(np.ones(batch.size))
        elif name == _LOG_B:
            columns.append(np.log(batch))
        elif name == _LOG_C:
            columns.append(np.log(context))
        else:
            if name not in covariates:
                raise ValueError(f"covariates: the fit uses {name!r}; give its value")
            columns.append(np.broadcast_to(np.asarray(covariates[name], float), batch.shape))
    for name, values in ((_LOG_B, batch), (_LOG_C, context)):
        if name in model["constants"]:
            same = np.isclose(np.log(values), model["constants"][name])
            if not same.all():
                logger.warning(
                    "predict_emergence: the fit saw a single %s; other values are not predicted",
                    name,
                )
            valid &= same
    X = np.column_stack(columns)  # (m, p)
    mean = X @ model["params"]
    var_mean = np.einsum("mp,pq,mq->m", X, model["cov"], X)
    log_se = np.sqrt(var_mean + model["sigma"] ** 2)
    q = _quantile(level, model["df_resid"])
    mean = np.where(valid, mean, np.nan)
    log_se = np.where(valid, log_se, np.nan)
    # A tokens fit predicts log(S* B C); steps follow by dividing out B C.
    to_step = -np.log(batch * context) if model["response"] == "tokens" else 0.0
    log_step = mean + to_step
    frame = pd.DataFrame(
        {
            "batch_size": batch,
            "context_length": context,
            "step": np.exp(log_step),
            "step_low": np.exp(log_step - q * log_se),
            "step_high": np.exp(log_step + q * log_se),
        }
    )
    for suffix in ("", "_low", "_high"):
        frame[f"tokens{suffix}"] = frame[f"step{suffix}"] * batch * context
    frame["log_se"] = log_se
    frame["level"] = level
    return frame


def _clean(value: Any) -> Any:
    """JSON-able scalar: Python float/int/bool/str, NaN and inf as None."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def fit_summary_table(fit: EmergenceLawFit) -> pd.DataFrame:
    """The fit as a table: ``parameter, estimate, ci_low, ci_high`` (NaN where no CI).

    Rows: ``a, b, log_T, T`` (T in units of the response), ``r_squared``, ``pearson_r_log``,
    ``pearson_r_linear``, ``loo_r_log``, ``loo_r_linear``, ``residual_sd`` (log space),
    ``wald_statistic``, ``wald_p_value``, ``n_runs``, ``n_censored``, ``n_censored_excluded``,
    ``n_configurations``, ``n_left_censored``, ``n_fit_failed``, ``n_clusters``.
    """
    nan2 = (math.nan, math.nan)
    rows = [
        ("a", fit.a, fit.a_ci),
        ("b", fit.b, fit.b_ci),
        ("log_T", fit.log_T, fit.log_T_ci),
        ("T", fit.T, fit.T_ci),
        ("r_squared", fit.r_squared, nan2),
        ("pearson_r_log", fit.pearson_r_log, fit.pearson_r_log_ci),
        ("pearson_r_linear", fit.pearson_r_linear, fit.pearson_r_linear_ci),
        ("loo_r_log", fit.loo_r_log, nan2),
        ("loo_r_linear", fit.loo_r_linear, nan2),
        ("residual_sd", fit.residual_sd, nan2),
        ("wald_statistic", fit.wald_statistic, nan2),
        ("wald_p_value", fit.wald_p_value, nan2),
        ("n_runs", fit.n_runs, nan2),
        ("n_censored", fit.n_censored, nan2),
        ("n_censored_excluded", fit.n_censored_excluded, nan2),
        ("n_configurations", fit.n_configurations, nan2),
        ("n_left_censored", fit.n_left_censored, nan2),
        ("n_fit_failed", fit.n_fit_failed, nan2),
        ("n_clusters", fit.n_clusters, nan2),
    ]
    return pd.DataFrame(
        [(name, float(est), float(ci[0]), float(ci[1])) for name, est, ci in rows],
        columns=["parameter", "estimate", "ci_low", "ci_high"],
    )


def fit_summary_dict(fit: EmergenceLawFit) -> dict[str, Any]:
    """JSON-able summary: every estimate as ``{"estimate", "ci_low", "ci_high"}``.

    Numbers are Python floats (counts ints); NaN/inf become None. The ``model`` block lets
    :func:`predict_emergence` predict from the summary alone.
    """

    def est(value: float, ci: tuple[float, float] | None = None) -> dict[str, Any]:
        ci = ci or (math.nan, math.nan)
        return {"estimate": _clean(value), "ci_low": _clean(ci[0]), "ci_high": _clean(ci[1])}

    return {
        "response": fit.response,
        "censored_handling": fit.censored,
        "level": _clean(fit.level),
        "a": est(fit.a, fit.a_ci),
        "b": est(fit.b, fit.b_ci),
        "log_T": est(fit.log_T, fit.log_T_ci),
        "T": est(fit.T, fit.T_ci),
        "r_squared": _clean(fit.r_squared),
        "pearson_r_log": est(fit.pearson_r_log, fit.pearson_r_log_ci),
        "pearson_r_linear": est(fit.pearson_r_linear, fit.pearson_r_linear_ci),
        "loo_r_log": _clean(fit.loo_r_log),
        "loo_r_linear": _clean(fit.loo_r_linear),
        "residual_sd": _clean(fit.residual_sd),
        "wald": {
            "null_a": _clean(fit.wald_null["a"]),
            "null_b": _clean(fit.wald_null["b"]),
            "test": fit.wald_test,
            "statistic": _clean(fit.wald_statistic),
            "df": _clean(fit.wald_df),
            "p_value": _clean(fit.wald_p_value),
        },
        "n_runs": _clean(fit.n_runs),
        "n_censored": _clean(fit.n_censored),
        "n_censored_excluded": _clean(fit.n_censored_excluded),
        "n_configurations": _clean(fit.n_configurations),
        "n_left_censored": _clean(fit.n_left_censored),
        "n_fit_failed": _clean(fit.n_fit_failed),
        "covariance": fit.covariance,
        "n_clusters": _clean(fit.n_clusters),
        "seeds": [int(s) for s in fit.seeds],
        "identifiable": {k: bool(v) for k, v in fit.identifiable.items()},
        "extra_covariates": list(fit.extra_covariates),
        "model": {
            "coef_names": list(fit.coef_names),
            "params": [_clean(v) for v in fit.params],
            "cov": [[_clean(v) for v in row] for row in fit.cov],
            "sigma": _clean(fit.residual_sd),
            "df_resid": _clean(fit.df_resid),
            "constants": {k: _clean(v) for k, v in fit.constants.items()},
        },
    }
