"""Predictions and summaries of a fitted emergence law: prediction intervals, the summary
table and dict, and the law-fit summary helpers (fitted or not, extra covariates, the numbers
flattened for MLflow)."""

from __future__ import annotations

import json
import logging
import math
import re

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.statistics.emergence_law import fit_emergence_law
from ih_kedro.science.statistics.emergence_prediction import (
    covariate_values,
    fit_summary_dict,
    fit_summary_table,
    flatten_numbers,
    is_fitted,
    predict_emergence,
)
from tests.science.statistics.law_tables import A, B, T, law_table, synthetic_table

LOGGER = "ih_kedro.science.statistics.emergence_prediction"


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_prediction_intervals_cover_new_draws():
    fit = fit_emergence_law(synthetic_table(seed=5), leave_one_out=False)
    rng = np.random.default_rng(11)
    configs = [(48, 48), (256, 32), (32, 256), (100, 100)]
    pred = predict_emergence(fit, [c[0] for c in configs], [c[1] for c in configs])
    hits, total = 0, 0
    for row in pred.itertuples():
        draws = (
            T / (row.batch_size**A * row.context_length**B) * np.exp(rng.normal(0, 0.05, size=500))
        )
        hits += int(np.sum((draws >= row.step_low) & (draws <= row.step_high)))
        total += draws.size
    assert 0.88 <= hits / total <= 0.995
    assert set(pred.columns) >= {"step", "step_low", "step_high", "tokens", "tokens_high"}
    # Predictions from the JSON summary match predictions from the fit object.
    summary = json.loads(json.dumps(fit_summary_dict(fit)))
    np.testing.assert_allclose(predict_emergence(summary, 48, 48).step_high, pred.step_high.iloc[0])


def test_summary_table_and_dict_are_complete_and_jsonable():
    fit = fit_emergence_law(synthetic_table())
    table = fit_summary_table(fit)
    assert list(table.columns) == ["parameter", "estimate", "ci_low", "ci_high"]
    assert {"a", "b", "T", "r_squared", "loo_r_log", "wald_p_value", "n_runs"} <= set(
        table.parameter
    )
    summary = fit_summary_dict(fit)
    text = json.dumps(summary, allow_nan=False)
    assert json.loads(text)["a"]["ci_low"] < A


# ------------------------------------------------------------------ predict_emergence


def test_predictions_from_integer_and_object_inputs_equal_float_inputs() -> None:
    table = law_table(seed=5)
    table["depth"] = np.tile([1.0, 2.0, 3.0], 6)
    fit = fit_emergence_law(table, extra_covariates=("depth",), leave_one_out=False)
    floats = predict_emergence(fit, [32.0, 1.0], [64.0, 1.0], covariates={"depth": [2.0, 1.0]})
    ints = predict_emergence(fit, [32, 1], [64, 1], covariates={"depth": [2, 1]})
    objects = predict_emergence(
        fit,
        pd.Series([32, 1], dtype=object),
        pd.Series([64, 1], dtype=object),
        covariates={"depth": pd.Series([2, 1], dtype=object)},
    )
    pd.testing.assert_frame_equal(ints, floats)
    pd.testing.assert_frame_equal(objects, floats)
    X = np.array([[1.0, math.log(32), math.log(64), 2.0], [1.0, 0.0, 0.0, 1.0]])  # (2, 4)
    np.testing.assert_allclose(floats.step, np.exp(X @ fit.params), rtol=1e-12)
    with pytest.raises(ValueError, match="^batch_size, context_length: must be positive$"):
        predict_emergence(fit, 32, 0, covariates={"depth": 1.0})


def test_a_fit_with_a_single_b_and_c_predicts_only_that_configuration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = law_table(batches=(64,), contexts=(128,), n_seeds=4)
    fit = fit_emergence_law(table, leave_one_out=False)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        pred = predict_emergence(fit, [64, 32], [128, 128])
    assert messages(caplog) == [
        "predict_emergence: the fit saw a single log_batch_size; other values are not predicted"
    ]
    assert pred.step.iloc[0] == pytest.approx(math.exp(np.log(table.step).mean()), rel=1e-12)
    assert math.isnan(pred.step.iloc[1])


# ------------------------------------------------------------------ fit_summary_dict


def test_summary_dict_reports_the_cluster_covariance() -> None:
    fit = fit_emergence_law(law_table(seed=7), leave_one_out=False)
    summary = fit_summary_dict(fit)
    assert fit.n_clusters == 9 and fit.covariance == "cluster-robust by configuration"
    assert summary["covariance"] == "cluster-robust by configuration"
    assert summary["n_clusters"] == 9


# ------------------------------------------------------------------ the law-fit summary


def exact(message: str) -> str:
    return f"^{re.escape(message)}$"


def test_covariates_values_and_message():
    frame = pd.DataFrame({"x": [1, 2], "y": [3.5, 4.0], "z": [0, 0]})
    got = covariate_values({"extra_covariates": ["y", "x"]}, frame, "here")
    assert list(got) == ["y", "x"]
    assert got["x"].dtype == float and got["x"].tolist() == [1.0, 2.0]
    assert got["y"].tolist() == [3.5, 4.0]
    assert covariate_values({}, frame, "here") == {}
    message = "here: the law uses extra covariates ['w', 'v']; give their values"
    with pytest.raises(ValueError, match=exact(message)):
        covariate_values({"extra_covariates": ["x", "w", "v"]}, frame, "here")


def test_fitted_needs_ok_status_and_model():
    assert is_fitted({"status": "ok", "model": {}})
    assert not is_fitted({"status": "ok"})
    assert not is_fitted({"model": {}})
    assert not is_fitted({"status": "insufficient_data: x", "model": {}})


def test_flatten_numbers_values():
    flat = flatten_numbers(
        {
            "a": {"estimate": 1, "ci": {"low": 0.5, "high": math.inf}, "model": 3.0},
            "model": {"sigma": 1.0},
            "ok": True,
            "nan": math.nan,
            "none": None,
            "text": "x",
            "neg": -2.5,
        },
        prefix="p",
    )
    assert flat == {"p.a.estimate": 1.0, "p.a.ci.low": 0.5, "p.neg": -2.5}
    assert type(flat["p.a.estimate"]) is float
    assert flatten_numbers({"n": 3}) == {"law.n": 3.0}


def test_flatten_numbers_skips_model_and_none():
    flat = flatten_numbers(
        {
            "a": {"estimate": 0.4, "ci_low": None},
            "model": {"sigma": 1.0},
            "n_runs": 9,
            "status": "ok",
        }
    )
    assert flat == {"law.a.estimate": 0.4, "law.n_runs": 9.0}
