"""Known answers for predictions and summaries of the emergence law: prediction intervals
and their level, the summary table and dict, JSON scalars and predictions from a summary dict.

Every expected value is computed here independently of the code under test (statsmodels' own
prediction intervals, scipy quantiles, the fit's attributes), so a wrong quantile or level is
caught, not only a crash.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats

from ih_kedro.science.statistics.emergence_prediction import (
    fit_summary_dict,
    fit_summary_table,
    predict_emergence,
)
from tests.science.statistics.law_tables import A, B, T, design, grid_table
from tests.science.statistics.law_tables import classical_fit as fit_emergence_law

# ------------------------------------------------------------------ prediction intervals


@pytest.mark.parametrize("level", [0.8, 0.95])
def test_prediction_interval_equals_statsmodels_obs_interval(level):
    table = grid_table(seed=1)
    fit = fit_emergence_law(table, level=level, leave_one_out=False)
    new = pd.DataFrame({"batch_size": [48.0, 256.0, 32.0], "context_length": [48.0, 32.0, 512.0]})
    pred = predict_emergence(fit, new.batch_size, new.context_length, level=level)
    ols = sm.OLS(np.log(table.step.to_numpy()), design(table)).fit()
    frame = ols.get_prediction(design(new)).summary_frame(alpha=1 - level)
    np.testing.assert_allclose(pred.step, np.exp(frame["mean"]), rtol=1e-10)
    np.testing.assert_allclose(pred.step_low, np.exp(frame["obs_ci_lower"]), rtol=1e-10)
    np.testing.assert_allclose(pred.step_high, np.exp(frame["obs_ci_upper"]), rtol=1e-10)
    np.testing.assert_allclose(
        pred.tokens_high, pred.step_high * new.batch_size * new.context_length, rtol=1e-12
    )
    assert (pred.level == level).all()
    # The JSON summary predicts the same interval.
    again = predict_emergence(fit_summary_dict(fit), new.batch_size, new.context_length, level)
    np.testing.assert_allclose(again.step_low, pred.step_low, rtol=1e-12)


@pytest.mark.parametrize(("level", "window"), [(0.8, (0.76, 0.84)), (0.95, (0.93, 0.97))])
def test_prediction_interval_coverage_matches_the_level(level, window):
    """New draws from the law land inside the interval at the nominal rate (over 25 fits)."""
    rng = np.random.default_rng(7)
    hits = total = 0
    for seed in range(25):
        fit = fit_emergence_law(
            grid_table(seed=100 + seed, sd=0.1), level=level, leave_one_out=False
        )
        pred = predict_emergence(fit, [48, 100], [100, 48], level=level)
        for row in pred.itertuples():
            truth = T / (row.batch_size**A * row.context_length**B)
            draws = truth * np.exp(rng.normal(0, 0.1, size=200))
            hits += int(np.sum((draws >= row.step_low) & (draws <= row.step_high)))
            total += draws.size
    assert window[0] <= hits / total <= window[1], hits / total


def test_summary_table_rows_are_the_fit_attributes():
    fit = fit_emergence_law(grid_table(seed=9))
    rows = fit_summary_table(fit)
    names = [
        "a", "b", "log_T", "T", "r_squared", "pearson_r_log", "pearson_r_linear", "loo_r_log",
        "loo_r_linear", "residual_sd", "wald_statistic", "wald_p_value", "n_runs", "n_censored",
        "n_censored_excluded", "n_configurations", "n_left_censored", "n_fit_failed", "n_clusters",
    ]  # fmt: skip
    assert list(rows.parameter) == names
    by_name = rows.set_index("parameter")
    for name in names:
        assert by_name.loc[name, "estimate"] == pytest.approx(float(getattr(fit, name))), name
    for name in ("a", "b", "log_T", "T", "pearson_r_log", "pearson_r_linear"):
        ci = getattr(fit, f"{name}_ci")
        assert (by_name.loc[name, "ci_low"], by_name.loc[name, "ci_high"]) == pytest.approx(ci)
    assert by_name.loc[["r_squared", "loo_r_log", "n_runs"], "ci_low"].isna().all()
    summary = fit_summary_dict(fit)
    assert summary["wald"] == {
        "null_a": 0.37, "null_b": 0.62, "test": "F", "statistic": pytest.approx(fit.wald_statistic),
        "df": 2, "df_denominator": 24.0, "p_value": pytest.approx(fit.wald_p_value),
    }  # fmt: skip
    assert summary["n_configurations"] == 9 and summary["seeds"] == [0, 1, 2]
    assert summary["identifiable"] == {"a": True, "b": True} and summary["level"] == 0.95


def test_summary_dict_holds_every_estimate_under_its_name():
    fit = fit_emergence_law(grid_table(seed=10))
    summary = fit_summary_dict(fit)
    assert summary["response"] == "step" and summary["censored_handling"] == "exclude"
    for name in ("a", "b", "log_T", "T", "pearson_r_log", "pearson_r_linear"):
        ci = getattr(fit, f"{name}_ci")
        assert summary[name] == {
            "estimate": pytest.approx(getattr(fit, name), rel=1e-12),
            "ci_low": pytest.approx(ci[0], rel=1e-12),
            "ci_high": pytest.approx(ci[1], rel=1e-12),
        }, name
    for name in ("r_squared", "loo_r_log", "loo_r_linear", "residual_sd"):
        assert summary[name] == pytest.approx(getattr(fit, name), rel=1e-12), name
    for name in ("n_runs", "n_censored", "n_censored_excluded", "n_configurations"):
        assert summary[name] == getattr(fit, name) and isinstance(summary[name], int), name
    model = summary["model"]
    assert model["coef_names"] == ["const", "log_batch_size", "log_context_length"]
    np.testing.assert_allclose(model["params"], fit.params, rtol=1e-12)
    np.testing.assert_allclose(model["cov"], fit.cov, rtol=1e-12)
    assert model["sigma"] == fit.residual_sd and model["df_resid"] == 24.0
    assert model["constants"] == {} and summary["extra_covariates"] == []
    # A single context length: b is NaN (None in JSON) and C is held as a constant.
    single = fit_summary_dict(fit_emergence_law(grid_table().query("context_length == 64")))
    assert single["b"] == {"estimate": None, "ci_low": None, "ci_high": None}
    assert single["model"]["constants"] == {"log_context_length": pytest.approx(math.log(64))}
    assert single["identifiable"] == {"a": True, "b": False}
    with pytest.raises(ValueError, match="a summary dict needs the 'model' block"):
        predict_emergence({"response": "step"}, 64, 64)


def test_prediction_boundaries_and_single_value_warning(caplog):
    fit = fit_emergence_law(grid_table(), leave_one_out=False)
    with pytest.raises(ValueError, match=r"level: must be in \(0, 1\), got 1.0"):
        predict_emergence(fit, 64, 64, level=1.0)
    for batch, context in ((0, 64), (64, 0)):
        with pytest.raises(ValueError, match="must be positive"):
            predict_emergence(fit, batch, context)
    single = fit_emergence_law(grid_table().query("batch_size == 64"), leave_one_out=False)
    with caplog.at_level(logging.WARNING):
        same = predict_emergence(single, 64, [32, 128])
    assert "saw a single log_batch_size" not in caplog.text and same.step.notna().all()
    with caplog.at_level(logging.WARNING):
        other = predict_emergence(single, [64, 32], 64)
    assert "saw a single log_batch_size" in caplog.text
    assert np.isfinite(other.step.iloc[0]) and np.isnan(other.step_high.iloc[1])


def test_summary_values_are_plain_json_scalars():
    from ih_kedro.science.statistics.emergence_prediction import _clean

    assert _clean(np.bool_(True)) is True and _clean(np.bool_(False)) is False
    assert _clean(np.int64(7)) == 7 and type(_clean(np.int64(7))) is int
    assert _clean(np.float32(0.5)) == 0.5 and type(_clean(np.float32(0.5))) is float
    assert _clean(np.inf) is None and _clean(-math.inf) is None and _clean(math.nan) is None
    assert _clean("tobit") == "tobit"


def test_a_summary_dict_predicts_like_the_fit_and_keeps_its_constants():
    """A fit on one context length stores log C as a constant: predictions from the summary
    dict (as the CLI reads it) equal the fit's at that C and are NaN at any other C."""
    table = grid_table(n_seeds=2)
    single_c = table[table["context_length"] == 64].reset_index(drop=True)
    fit = fit_emergence_law(single_c, leave_one_out=False)
    summary = fit_summary_dict(fit)
    assert summary["model"]["constants"] == {"log_context_length": pytest.approx(math.log(64))}
    from_fit = predict_emergence(fit, [32, 128], [64, 64], level=0.9)
    from_dict = predict_emergence(summary, [32, 128], [64, 64], level=0.9)
    pd.testing.assert_frame_equal(from_dict, from_fit)
    elsewhere = predict_emergence(summary, [32, 128], [32, 128])
    assert elsewhere["step"].isna().all() and elsewhere["step_high"].isna().all()


def test_a_summary_dict_without_residual_dof_uses_the_normal_quantile():
    fit = fit_emergence_law(grid_table(n_seeds=2), leave_one_out=False)
    summary = fit_summary_dict(fit)
    summary["model"]["df_resid"] = None  # as a Tobit fit writes it
    del summary["model"]["constants"]  # a summary written before constants were recorded
    pred = predict_emergence(summary, [64], [64], level=0.9)
    half_width = math.log(pred["step_high"].iloc[0]) - math.log(pred["step"].iloc[0])
    assert half_width == pytest.approx(stats.norm.ppf(0.95) * pred["log_se"].iloc[0], rel=1e-9)
    with pytest.raises(
        ValueError,
        match=r"^fit: a summary dict needs the 'model' block written by fit_summary_dict$",
    ):
        predict_emergence({k: v for k, v in summary.items() if k != "model"}, [64], [64])
