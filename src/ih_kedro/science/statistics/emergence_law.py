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

The fit lives here; the design (table checks, censoring, log-space columns) in
:mod:`ih_kedro.science.statistics.law_design`, the OLS and Tobit estimators in
:mod:`ih_kedro.science.statistics.censored_regression`, prediction and the summary tables in
:mod:`ih_kedro.science.statistics.emergence_prediction`.

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
from scipy import stats

from ih_kedro.science.statistics.censored_regression import (
    RegressionFit,
    coefficient_ci,
    coefficient_df,
    fit_ols,
    fit_tobit,
)
from ih_kedro.science.statistics.law_design import (
    LOG_BATCH_SIZE,
    LOG_CONTEXT_LENGTH,
    Design,
    build_design,
    censored_mask,
    configuration_keys,
    validate_table,
)

logger = logging.getLogger(__name__)

SEED_EXPONENTS = {"a": 0.37, "b": 0.62}
CENSORED_HANDLING = ("exclude", "tobit")


@dataclass
class EmergenceLawFit:
    """A fitted emergence law ``response = T / (B^a C^b)``.

    Attributes:
        response: ``step`` (S*, optimizer steps) or ``tokens`` (tokens at emergence).
        censored: censored-run handling, ``exclude`` or ``tobit``.
        level: CI level of every ``*_ci``.
        a, b: exponents of B and C (NaN when not identifiable: a single B or C in the data).
        log_T, T: the law's constant (natural log; ``T`` in units of the response).
        a_ci, b_ci, log_T_ci, T_ci: CIs: t on each coefficient's Bell–McCaffrey df with the
            CR2 cluster-robust covariance (OLS with repeated configurations), t on G - k df
            with the cluster sandwich (Tobit), t on n - k (classical OLS) or normal (classical
            Tobit); measured coverage in docs/coverage.md.
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
        wald_statistic, wald_df, wald_p_value, wald_test, wald_df_denominator: joint Wald
            test of ``wald_null`` on the CIs' reference distribution: ``F`` on (``wald_df``,
            ``wald_df_denominator``), ``chi2`` on ``wald_df`` for a classical Tobit fit
            (``wald_df_denominator`` inf); only identifiable exponents are tested.
        residual_sd: sd in log space of a run about the law (sigma; with a cluster-robust
            OLS covariance, of a new run at a new configuration: configuration plus seed
            scatter).
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
    wald_df_denominator: float
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
# Estimators
# --------------------------------------------------------------------------------------------
def _min_runs(n_params: int, censored: str) -> int:
    # OLS needs a residual degree of freedom; Tobit also estimates sigma.
    return n_params + 1 if censored == "exclude" else n_params + 2


def _fit_core(design: Design, censored: str) -> RegressionFit:
    X = design.X.to_numpy(dtype=float)
    if np.linalg.matrix_rank(X) < X.shape[1]:
        raise ValueError(
            f"emergence law: the design {list(design.X.columns)} is collinear (e.g. B and C "
            "always change together); vary them independently"
        )
    if censored == "exclude":
        return fit_ols(design.y, X, design.groups)
    return fit_tobit(design.y, X, design.censored, design.groups)


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


def _wald(
    core: RegressionFit, names: list[str], null: dict[str, float], censored: str
) -> tuple[float, int, float, str, float]:
    """The joint Wald test of ``null``: ``(statistic, df, p value, kind, denominator df)``.

    The reference distribution is the CIs' (:func:`coefficient_df`): with per-coefficient
    (Bell–McCaffrey) df, Hotelling's T² on ``eta`` = the smallest df of the tested exponents,
    ``F = W (eta - q + 1) / (q eta)`` on ``(q, eta - q + 1)`` (for one exponent: the CI's t²);
    otherwise ``F = W / q`` on ``(q, df_resid)``, and ``chi2`` on ``q`` only when ``df_resid``
    is infinite (a classical Tobit fit)."""
    rows, targets, indices = [], [], []
    for name, key in ((LOG_BATCH_SIZE, "a"), (LOG_CONTEXT_LENGTH, "b")):
        if name in names:
            row = np.zeros(len(names))
            row[names.index(name)] = 1.0
            rows.append(row)
            indices.append(names.index(name))
            targets.append(-null[key])  # the coefficient of log B is -a
    kind = "chi2" if math.isinf(core.df_resid) else "F"
    if not rows:
        return math.nan, 0, math.nan, kind, math.nan
    R = np.array(rows)
    diff = R @ core.params - np.array(targets)
    df = len(rows)
    try:
        stat = float(diff @ np.linalg.solve(R @ core.cov @ R.T, diff))
    except np.linalg.LinAlgError:
        # A zero-residual OLS fit has a singular covariance: the test is undefined.
        logger.warning("emergence law: singular coefficient covariance; Wald test undefined")
        return math.nan, df, math.nan, kind, math.nan
    if kind == "chi2":
        return stat, df, float(stats.chi2.sf(stat, df)), kind, math.inf
    if core.df_coef is not None:
        eta = min(coefficient_df(core, i) for i in indices)
        stat *= (eta - df + 1) / (df * eta)
        denominator = eta - df + 1
    else:
        stat /= df
        denominator = core.df_resid
    return stat, df, float(stats.f.sf(stat, df, denominator)), kind, float(denominator)


def _leave_one_configuration_out(design: Design, configs: pd.Series, censored: str) -> np.ndarray:
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
        sub = Design(
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
# The fit, step by step
# --------------------------------------------------------------------------------------------
@dataclass
class _Runs:
    """The runs that enter the fit, and the counts of the runs left out."""

    table: pd.DataFrame  # one row per usable run, index 0..n-1
    censored: np.ndarray  # (n,) bool
    n_censored: int
    n_censored_excluded: int
    n_left_censored: int
    n_fit_failed: int


def _checked_arguments(
    table: pd.DataFrame,
    response: str,
    censored: str,
    extra_covariates: Sequence[str],
    seed_exponents: Mapping[str, float] | None,
    level: float,
) -> tuple[tuple[str, ...], dict[str, float]]:
    """Check the arguments and the table.

    Returns:
        ``(extra covariates, reference exponents)``: the exponents the Wald test tests, for
        the response (step exponents minus one for ``tokens``).
    """
    if censored not in CENSORED_HANDLING:
        raise ValueError(f"censored: expected one of {CENSORED_HANDLING}, got {censored!r}")
    if not 0 < level < 1:
        raise ValueError(f"level: must be in (0, 1), got {level}")
    extra = tuple(extra_covariates)
    validate_table(table, response, extra)
    null_step = dict(SEED_EXPONENTS if seed_exponents is None else seed_exponents)
    shift = 1.0 if response == "tokens" else 0.0
    return extra, {"a": float(null_step["a"]) - shift, "b": float(null_step["b"]) - shift}


def _usable_runs(table: pd.DataFrame, censored: str) -> _Runs:
    """The runs that enter the fit: by ``status`` (``emerged`` and ``censored``), and without
    the censored runs under ``exclude``; every exclusion is counted and logged."""
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
    is_censored = censored_mask(table)
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
    return _Runs(table, is_censored, n_censored, n_excluded, n_left_censored, n_fit_failed)


def _checked_design(
    runs: _Runs,
    response: str,
    censored: str,
    extra: tuple[str, ...],
    cluster_by_configuration: bool,
) -> tuple[Design, pd.Series]:
    """The design of the usable runs and each run's configuration; warns about exponents the
    data cannot identify and rejects too few runs for the coefficients."""
    table, is_censored = runs.table, runs.censored
    design = build_design(table, response, is_censored, extra)
    configs = configuration_keys(table)
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
            f"{runs.n_censored_excluded} censored runs excluded)"
        )
    if censored == "tobit" and (~is_censored).sum() < 2:
        raise ValueError("emergence law: tobit needs at least 2 runs that emerged")
    return design, configs


def _exponents(core: RegressionFit, names: list[str], level: float) -> dict[str, Any]:
    """``a, b, log_T, T`` with their CIs (NaN for a coefficient not in the design)."""

    def coefficient(name: str, sign: float) -> tuple[float, tuple[float, float]]:
        if name not in names:
            return math.nan, (math.nan, math.nan)
        i = names.index(name)
        lo, hi = coefficient_ci(core, i, level)
        est = sign * core.params[i]
        return float(est), tuple(sorted((float(sign * lo), float(sign * hi))))

    a, a_ci = coefficient(LOG_BATCH_SIZE, -1.0)
    b, b_ci = coefficient(LOG_CONTEXT_LENGTH, -1.0)
    log_T, log_T_ci = coefficient("const", 1.0)
    return {
        "a": a,
        "a_ci": a_ci,
        "b": b,
        "b_ci": b_ci,
        "log_T": log_T,
        "log_T_ci": log_T_ci,
        "T": math.exp(log_T),
        "T_ci": (math.exp(log_T_ci[0]), math.exp(log_T_ci[1])),
    }


def _goodness_of_fit(
    y: np.ndarray, log_pred: np.ndarray, obs: np.ndarray, level: float
) -> dict[str, Any]:
    """R² in log space and the Pearson r of predicted vs observed in log and linear space, over
    the runs that emerged (``obs``)."""
    y_obs, pred_obs = y[obs], log_pred[obs]
    ss_tot = float(np.sum((y_obs - y_obs.mean()) ** 2)) if obs.any() else math.nan
    r_squared = 1.0 - float(np.sum((y_obs - pred_obs) ** 2)) / ss_tot if ss_tot else math.nan
    r_log, r_log_ci = _pearson_with_ci(pred_obs, y_obs, level)
    r_lin, r_lin_ci = _pearson_with_ci(np.exp(pred_obs), np.exp(y_obs), level)
    return {
        "r_squared": float(r_squared),
        "pearson_r_log": r_log,
        "pearson_r_log_ci": r_log_ci,
        "pearson_r_linear": r_lin,
        "pearson_r_linear_ci": r_lin_ci,
    }


def _leave_one_out_r(
    design: Design,
    configs: pd.Series,
    censored: str,
    obs: np.ndarray,
    level: float,
    leave_one_out: bool,
) -> tuple[np.ndarray, dict[str, float]]:
    """Each run's leave-one-configuration-out log prediction (NaN without ``leave_one_out``)
    and the r of those predictions, in log and linear space, over the runs that emerged."""
    loo_pred = (
        _leave_one_configuration_out(design, configs, censored)
        if leave_one_out
        else np.full(len(configs), np.nan)
    )
    loo_keep = obs & np.isfinite(loo_pred)
    loo_r_log = _pearson_with_ci(loo_pred[loo_keep], design.y[loo_keep], level)[0]
    loo_r_lin = _pearson_with_ci(np.exp(loo_pred[loo_keep]), np.exp(design.y[loo_keep]), level)[0]
    if leave_one_out and not np.isfinite(loo_r_log):
        logger.warning(
            "emergence law: leave-one-configuration-out r undefined (%d configurations)",
            configs.nunique(),
        )
    return loo_pred, {"loo_r_log": float(loo_r_log), "loo_r_linear": float(loo_r_lin)}


def _run_table(
    runs: _Runs, design: Design, log_pred: np.ndarray, loo_pred: np.ndarray
) -> pd.DataFrame:
    """One row per run of the fit: ``run_name, batch_size, context_length, seed, censored,
    observed, log_observed, log_predicted, residual, loo_log_predicted``."""
    table, obs = runs.table, ~runs.censored
    return pd.DataFrame(
        {
            "run_name": table["run_name"] if "run_name" in table else pd.RangeIndex(len(table)),
            "batch_size": table["batch_size"],
            "context_length": table["context_length"],
            "seed": table["seed"] if "seed" in table else np.nan,
            "censored": runs.censored,
            "observed": np.where(obs, np.exp(design.y), np.nan),
            "log_observed": np.where(obs, design.y, np.nan),
            "log_predicted": log_pred,
            "residual": np.where(obs, design.y - log_pred, np.nan),
            "loo_log_predicted": loo_pred,
        }
    )


def _summarise(
    runs: _Runs,
    design: Design,
    configs: pd.Series,
    core: RegressionFit,
    *,
    response: str,
    censored: str,
    extra: tuple[str, ...],
    wald_null: dict[str, float],
    level: float,
    leave_one_out: bool,
) -> EmergenceLawFit:
    """The :class:`EmergenceLawFit` of a fitted core: estimates, fit quality, leave-one-out r,
    the Wald test and the run table."""
    names = list(design.X.columns)
    log_pred = design.X.to_numpy(dtype=float) @ core.params
    obs = ~runs.censored
    exponents = _exponents(core, names, level)
    goodness = _goodness_of_fit(design.y, log_pred, obs, level)
    loo_pred, loo_r = _leave_one_out_r(design, configs, censored, obs, level, leave_one_out)
    wald = _wald(core, names, wald_null, censored)
    table = runs.table
    seeds = sorted(int(s) for s in pd.unique(table["seed"].dropna())) if "seed" in table else []
    return EmergenceLawFit(
        response=response,
        censored=censored,
        level=level,
        **exponents,
        **goodness,
        **loo_r,
        n_runs=len(table),
        n_censored=runs.n_censored,
        n_censored_excluded=runs.n_censored_excluded,
        n_configurations=int(configs.nunique()),
        n_left_censored=runs.n_left_censored,
        n_fit_failed=runs.n_fit_failed,
        covariance="cluster-robust by configuration" if core.n_clusters else "classical",
        n_clusters=core.n_clusters,
        seeds=seeds,
        wald_null=wald_null,
        **dict(
            zip(
                ("wald_statistic", "wald_df", "wald_p_value", "wald_test", "wald_df_denominator"),
                wald,
                strict=True,
            )
        ),
        residual_sd=core.sigma,
        identifiable=design.identifiable,
        extra_covariates=tuple(c for c in extra if c in names),
        coef_names=names,
        params=core.params,
        cov=core.cov,
        df_resid=core.df_resid,
        constants=design.constants,
        data=_run_table(runs, design, log_pred, loo_pred),
        results=core.results,
    )


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
    extra, wald_null = _checked_arguments(
        table, response, censored, extra_covariates, seed_exponents, level
    )
    runs = _usable_runs(table, censored)
    design, configs = _checked_design(runs, response, censored, extra, cluster_by_configuration)
    core = _fit_core(design, censored)
    return _summarise(
        runs,
        design,
        configs,
        core,
        response=response,
        censored=censored,
        extra=extra,
        wald_null=wald_null,
        level=level,
        leave_one_out=leave_one_out,
    )
