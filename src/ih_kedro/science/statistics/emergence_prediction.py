"""Predictions and summaries of a fitted emergence law ``S* = T / (B^a C^b)``.

:func:`predict_emergence` gives the predicted emergence step (and tokens) with a prediction
interval for new configurations, from an :class:`~ih_kedro.science.statistics.emergence_law.
EmergenceLawFit` or from the JSON-able summary of :func:`fit_summary_dict`, whose ``model``
block carries what prediction needs; :func:`fit_summary_table` is the fit as rows.

For the statistics stage's law-fit summary (``status`` plus :func:`fit_summary_dict`):
:func:`is_fitted`, the values of the fit's extra covariates, the observed-vs-predicted table of
the runs that emerged, NaN predictions for a law that was not fitted, and the summary's numbers
flattened to ``law.a.estimate``-style keys (:func:`flatten_numbers`, for MLflow).

Plain numpy/pandas; no Kedro imports.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ih_kedro.science.statistics.censored_regression import interval_quantile
from ih_kedro.science.statistics.emergence_law import EmergenceLawFit
from ih_kedro.science.statistics.law_design import LOG_BATCH_SIZE, LOG_CONTEXT_LENGTH

logger = logging.getLogger(__name__)


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


def _new_design(
    model: Mapping[str, Any],
    batch: np.ndarray,
    context: np.ndarray,
    covariates: Mapping[str, float | Sequence[float]] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """The model's design rows ``(m, p)`` for new configurations, and which of them it can
    predict ``(m,)`` (a B or C the fit saw a single value of must equal that value)."""
    covariates = dict(covariates or {})
    columns: list[np.ndarray] = []
    valid = np.ones(batch.size, dtype=bool)
    for name in model["coef_names"]:
        if name == "const":
            columns.append(np.ones(batch.size))
        elif name == LOG_BATCH_SIZE:
            columns.append(np.log(batch))
        elif name == LOG_CONTEXT_LENGTH:
            columns.append(np.log(context))
        else:
            if name not in covariates:
                raise ValueError(f"covariates: the fit uses {name!r}; give its value")
            columns.append(np.broadcast_to(np.asarray(covariates[name], float), batch.shape))
    for name, values in ((LOG_BATCH_SIZE, batch), (LOG_CONTEXT_LENGTH, context)):
        if name in model["constants"]:
            same = np.isclose(np.log(values), model["constants"][name])
            if not same.all():
                logger.warning(
                    "predict_emergence: the fit saw a single %s; other values are not predicted",
                    name,
                )
            valid &= same
    X = np.column_stack(columns)  # (m, p)
    return X, valid


RANGE_AXES = (("batch_size", "B"), ("context_length", "C"))


def fitted_range(fit: EmergenceLawFit | Mapping[str, Any]) -> dict[str, tuple[float, float]] | None:
    """The smallest and largest B and C of the runs a law was fitted on, ``{"batch_size": (lo,
    hi), "context_length": (lo, hi)}``; None for a summary written without them."""
    if isinstance(fit, EmergenceLawFit):
        return {
            column: (float(fit.data[column].min()), float(fit.data[column].max()))
            for column, _ in RANGE_AXES
        }
    stored = fit.get("fitted_range")
    if not stored:
        return None
    return {
        column: (float(stored[column][0]), float(stored[column][1])) for column, _ in RANGE_AXES
    }


def extrapolation(
    batch: np.ndarray, context: np.ndarray, ranges: Mapping[str, tuple[float, float]] | None
) -> tuple[Any, np.ndarray]:
    """Which configurations lie outside the fitted B or C range, and along which axis.

    Returns:
        ``(extrapolated (m,) bool, axis (m,) str)``: ``axis`` is ``""``, ``"B"``, ``"C"`` or
        ``"B, C"``; with no known range (``ranges`` None) a nullable boolean of NA and
        ``"unknown range"``.
    """
    if ranges is None:
        return pd.array([pd.NA] * batch.size, dtype="boolean"), np.full(batch.size, "unknown range")
    outside = []
    for (column, _), values in zip(RANGE_AXES, (batch, context), strict=True):
        low, high = ranges[column]
        # A relative slack: a grid value read back from JSON is inside its own range.
        outside.append((values < low * (1 - 1e-9)) | (values > high * (1 + 1e-9)))
    labels = [", ".join(n for (_, n), o in zip(RANGE_AXES, flags, strict=True) if o)
              for flags in zip(*outside, strict=True)]  # fmt: skip
    return outside[0] | outside[1], np.array(labels, dtype=object)


def _warn_extrapolation(
    batch: np.ndarray,
    context: np.ndarray,
    extrapolated: Any,
    ranges: Mapping[str, tuple[float, float]] | None,
) -> None:
    """One warning line naming the predicted configurations outside the fitted range (a
    configuration the fit cannot predict, NaN, is warned about by :func:`_new_design`)."""
    if ranges is None:
        logger.warning(
            "predict_emergence: the fit does not record its B and C range; extrapolation "
            "cannot be flagged (refit the law to record it)"
        )
        return
    flags = np.asarray(extrapolated, dtype=bool)
    if not flags.any():
        return
    (b_lo, b_hi), (c_lo, c_hi) = ranges["batch_size"], ranges["context_length"]
    shown = ", ".join(f"B {b:g} C {c:g}" for b, c in zip(batch[flags], context[flags], strict=True))
    logger.warning(
        "predict_emergence: %d of %d configurations lie outside the fitted range "
        "(B %g-%g, C %g-%g): %s; their intervals extrapolate the law",
        int(flags.sum()),
        flags.size,
        b_lo,
        b_hi,
        c_lo,
        c_hi,
        shown,
    )


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
        new log observation), ``level``, ``extrapolated`` (outside the fitted B or C range,
        see :func:`extrapolation`; each such configuration is also named in a warning) and
        ``extrapolated_axis``. NaN for a B (C) different from the single value the fit saw
        when its exponent was not identifiable.
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
    X, valid = _new_design(model, batch, context, covariates)
    mean = X @ model["params"]
    var_mean = np.einsum("mp,pq,mq->m", X, model["cov"], X)
    log_se = np.sqrt(var_mean + model["sigma"] ** 2)
    q = interval_quantile(level, model["df_resid"])
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
    ranges = fitted_range(fit)
    frame["extrapolated"], frame["extrapolated_axis"] = extrapolation(batch, context, ranges)
    predicted = frame["extrapolated"].fillna(False).to_numpy(bool) & valid
    _warn_extrapolation(batch, context, predicted, ranges)
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
            "df_denominator": _clean(fit.wald_df_denominator),
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
        "fitted_range": {k: [_clean(v) for v in pair] for k, pair in fitted_range(fit).items()},
        "model": {
            "coef_names": list(fit.coef_names),
            "params": [_clean(v) for v in fit.params],
            "cov": [[_clean(v) for v in row] for row in fit.cov],
            "sigma": _clean(fit.residual_sd),
            "df_resid": _clean(fit.df_resid),
            "constants": {k: _clean(v) for k, v in fit.constants.items()},
        },
    }


def flatten_numbers(summary: dict[str, Any], prefix: str = "law") -> dict[str, float]:
    """Numeric leaves of the summary as ``law.a.estimate``-style keys (the ``model`` block and
    None values skipped)."""
    flat: dict[str, float] = {}
    for key, value in summary.items():
        name = f"{prefix}.{key}"
        if key == "model":
            continue
        if isinstance(value, dict):
            flat.update(flatten_numbers(value, name))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isfinite(value):
                flat[name] = float(value)
    return flat


# --------------------------------------------------------------------------------------------
# Predictions from a law-fit summary (the statistics stage's ``law_fit_summary``)
# --------------------------------------------------------------------------------------------
def is_fitted(summary: Mapping[str, Any]) -> bool:
    """Whether a law-fit summary holds a fitted law (``status`` ok and a ``model`` block)."""
    return summary.get("status") == "ok" and "model" in summary


def nan_predictions(configs: pd.DataFrame, level: float) -> pd.DataFrame:
    """The predictions of a law that was not fitted, in :func:`predict_emergence`'s layout.

    Returns:
        ``configs``' ``batch_size, context_length`` (as floats) with NaN ``step, step_low,
        step_high, tokens, tokens_low, tokens_high, log_se``, the ``level`` and an unknown
        ``extrapolated`` (NA, ``extrapolated_axis`` ``"unknown range"``).
    """
    frame = configs[["batch_size", "context_length"]].astype(float)
    for column in (
        "step",
        "step_low",
        "step_high",
        "tokens",
        "tokens_low",
        "tokens_high",
        "log_se",
    ):
        frame[column] = math.nan
    frame["level"] = level
    frame["extrapolated"], frame["extrapolated_axis"] = extrapolation(
        frame["batch_size"].to_numpy(), frame["context_length"].to_numpy(), None
    )
    return frame


def covariate_values(
    summary: Mapping[str, Any], frame: pd.DataFrame, where: str
) -> dict[str, np.ndarray]:
    """Values in ``frame`` of the fit's extra covariates, as :func:`predict_emergence` needs.

    Raises:
        ValueError: ``frame`` lacks one of them (the message starts with ``where``).
    """
    names = list(summary.get("extra_covariates", []))
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise ValueError(f"{where}: the law uses extra covariates {missing}; give their values")
    return {c: frame[c].to_numpy(float) for c in names}


def observed_vs_predicted(
    rows: pd.DataFrame, law_fit_summary: Mapping[str, Any], level: float
) -> pd.DataFrame:
    """Observed and predicted emergence of the runs that emerged, in the fit's response.

    Args:
        rows: emergence rows of the law's metric/method/threshold.
        law_fit_summary: a fitted law's summary (:func:`fit_summary_dict` layout).
        level: prediction-interval level.

    Returns:
        ``rows`` of the emerged runs (index reset) with ``observed, predicted, low, high``
        (steps or tokens) and ``residual`` (log observed - log predicted).
    """
    if "status" in rows:  # only runs that emerged have an observed S*
        rows = rows[rows["status"] == "emerged"]
    rows = rows[~rows["censored"].astype(bool)] if "censored" in rows else rows
    rows = rows[rows["step"].notna()]
    pred = predict_emergence(
        law_fit_summary,
        rows["batch_size"].to_numpy(float),
        rows["context_length"].to_numpy(float),
        level=level,
        covariates=covariate_values(law_fit_summary, rows, "emergence_table"),
    )
    response = law_fit_summary.get("response", "step")
    observed = rows["step"].to_numpy(float)
    if response == "tokens":
        observed = observed * rows["batch_size"].to_numpy(float) * rows["context_length"]
    out = rows.reset_index(drop=True).copy()
    out["observed"] = np.asarray(observed, dtype=float)
    out["predicted"] = pred[response].to_numpy()
    out["low"] = pred[f"{response}_low"].to_numpy()
    out["high"] = pred[f"{response}_high"].to_numpy()
    out["residual"] = np.log(out["observed"]) - np.log(out["predicted"])
    return out
