"""Known answers for the emergence law: interval levels, LOO r, extra covariates, Tobit CIs.

Every expected value is computed here independently of the code under test (numpy least
squares, scipy quantiles, statsmodels' own confidence intervals), so a wrong quantile, a wrong
level or a leave-one-out that is not one is caught, not only a crash.
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
from tests.science.statistics.censored_mle import censored_normal_mle, censored_normal_nll
from tests.science.statistics.cr2_reference import cr2_reference
from tests.science.statistics.law_tables import GRID, A, B, T, design, grid_table
from tests.science.statistics.law_tables import classical_fit as fit_emergence_law

# ------------------------------------------------------------------ CIs and their level


@pytest.mark.parametrize("level", [0.8, 0.95])
def test_ols_cis_equal_statsmodels_at_the_level(level):
    table = grid_table()
    fit = fit_emergence_law(table, level=level, leave_one_out=False)
    ols = sm.OLS(np.log(table.step.to_numpy()), design(table)).fit()
    ci = ols.conf_int(alpha=1 - level)  # (3, 2): const, log B, log C
    assert fit.level == level
    assert fit.log_T_ci == pytest.approx(tuple(ci[0]), rel=1e-10)
    # a and b are minus the coefficients: the CI flips.
    assert fit.a_ci == pytest.approx((-ci[1, 1], -ci[1, 0]), rel=1e-10)
    assert fit.b_ci == pytest.approx((-ci[2, 1], -ci[2, 0]), rel=1e-10)
    assert fit.T_ci == pytest.approx((math.exp(ci[0, 0]), math.exp(ci[0, 1])), rel=1e-10)
    assert fit.a == pytest.approx(-ols.params[1], rel=1e-12)
    assert fit.residual_sd == pytest.approx(math.sqrt(ols.scale), rel=1e-12)
    # Fisher-z CI of the log-space r at the same level.
    n = len(table)
    r = np.corrcoef(ols.fittedvalues, np.log(table.step))[0, 1]
    half = stats.norm.ppf(0.5 + level / 2) / math.sqrt(n - 3)
    expected = (math.tanh(math.atanh(r) - half), math.tanh(math.atanh(r) + half))
    assert fit.pearson_r_log == pytest.approx(r, rel=1e-12)
    assert fit.pearson_r_log_ci == pytest.approx(expected, rel=1e-10)
    # The summary table carries the same numbers.
    rows = fit_summary_table(fit).set_index("parameter")
    assert (rows.loc["a", "ci_low"], rows.loc["a", "ci_high"]) == pytest.approx(fit.a_ci)
    assert rows.loc["n_runs", "estimate"] == 27


def test_ci_width_ratio_between_levels_is_the_t_quantile_ratio():
    table = grid_table(seed=3)
    wide = fit_emergence_law(table, level=0.95, leave_one_out=False)
    narrow = fit_emergence_law(table, level=0.8, leave_one_out=False)
    df = 27 - 3
    ratio = stats.t.ppf(0.9, df) / stats.t.ppf(0.975, df)  # ≈ 0.64
    for name in ("a_ci", "b_ci", "log_T_ci"):
        w, n = getattr(wide, name), getattr(narrow, name)
        assert (n[1] - n[0]) / (w[1] - w[0]) == pytest.approx(ratio, rel=1e-9), name
    assert narrow.a == wide.a


@pytest.mark.parametrize(("level", "window"), [(0.8, (0.7, 0.9)), (0.95, (0.9, 0.99))])
def test_ci_coverage_matches_the_level(level, window):
    """Coverage of the true exponents over 60 simulated grids; windows reject the other level.

    The exact level is pinned by the statsmodels comparisons above; this checks the intervals
    mean what they say on data drawn from the law.
    """
    n_sim, hits = 60, 0
    for seed in range(n_sim):
        fit = fit_emergence_law(grid_table(seed=seed, n_seeds=2), level=level, leave_one_out=False)
        hits += fit.a_ci[0] <= A <= fit.a_ci[1]
        hits += fit.b_ci[0] <= B <= fit.b_ci[1]
    coverage = hits / (2 * n_sim)
    assert window[0] <= coverage <= window[1], coverage


def test_level_outside_unit_interval_is_rejected():
    table = grid_table()
    with pytest.raises(ValueError, match=r"level: must be in \(0, 1\), got 1.5"):
        fit_emergence_law(table, level=1.5)
    fit = fit_emergence_law(table, leave_one_out=False)
    with pytest.raises(ValueError, match=r"level: must be in \(0, 1\), got 0"):
        predict_emergence(fit, 64, 64, level=0)
    with pytest.raises(ValueError, match="batch_size, context_length: must be positive"):
        predict_emergence(fit, -1, 64)


# ------------------------------------------------------------------ Tobit


@pytest.mark.parametrize("level", [0.8, 0.95])
def test_tobit_cis_are_normal_wald_intervals_at_the_level(level):
    table = grid_table(seed=2, sd=0.1)
    budget = float(np.quantile(table.step, 0.75))
    slow = table.step > budget
    table.loc[slow, "censored"] = True
    table.loc[slow, "step"] = np.nan
    table["last_step"] = budget
    fit = fit_emergence_law(table, censored="tobit", level=level, leave_one_out=False)
    assert fit.wald_test == "chi2" and math.isinf(fit.df_resid)
    assert fit.n_censored == int(slow.sum()) and fit.n_runs == 27
    q = stats.norm.ppf(0.5 + level / 2)
    se = np.sqrt(np.diag(fit.cov))  # (3,)
    assert fit.log_T_ci == pytest.approx((fit.log_T - q * se[0], fit.log_T + q * se[0]))
    assert fit.a_ci == pytest.approx((fit.a - q * se[1], fit.a + q * se[1]))
    # The censored likelihood pulls the fit towards the truth: exponents within 0.1.
    assert fit.a == pytest.approx(A, abs=0.1) and fit.b == pytest.approx(B, abs=0.1)
    pred = predict_emergence(fit, 64, 64, level=level)
    log_se = math.sqrt(
        np.array([1, math.log(64), math.log(64)])
        @ fit.cov
        @ np.array([1, math.log(64), math.log(64)])
        + fit.residual_sd**2
    )
    assert pred.log_se.iloc[0] == pytest.approx(log_se, rel=1e-10)
    assert math.log(pred.step_high.iloc[0] / pred.step.iloc[0]) == pytest.approx(q * log_se)


def test_tobit_censoring_point_is_last_step():
    """A censored run counts as 'later than last_step': raising last_step raises the fit's T."""
    table = grid_table(seed=4, sd=0.1)
    slow = table.step > float(np.quantile(table.step, 0.8))
    table.loc[slow, "censored"] = True
    table.loc[slow, "step"] = np.nan
    low = fit_emergence_law(
        table.assign(last_step=table.step.max() * 1.0), censored="tobit", leave_one_out=False
    )
    high = fit_emergence_law(
        table.assign(last_step=table.step.max() * 5.0), censored="tobit", leave_one_out=False
    )
    assert high.log_T > low.log_T + 0.05
    excluded = fit_emergence_law(table, censored="exclude", leave_one_out=False)
    assert excluded.n_runs == 27 - int(slow.sum()) and excluded.n_censored_excluded == slow.sum()
    with pytest.raises(ValueError, match="censored runs need a last_step column"):
        fit_emergence_law(table, censored="tobit")


# ------------------------------------------------------------------ leave-one-configuration-out


def _reference_loo(table: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """Leave-one-configuration-out log predictions by plain least squares."""
    X, y = design(table), np.log(table.step.to_numpy(float))
    groups = table[keys].astype(str).agg("|".join, axis=1).to_numpy()
    predicted = np.full(len(table), np.nan)
    for group in pd.unique(groups):
        held = groups == group
        beta = np.linalg.lstsq(X[~held], y[~held], rcond=None)[0]
        predicted[held] = X[held] @ beta
    return predicted


def test_leave_one_configuration_out_r_has_the_known_value():
    """A grid with one outlying corner: in-sample r stays high, the held-out r drops.

    Two presets share every (B, C), so a configuration is (B, C, preset): holding out a whole
    (B, C) pair or single runs gives different numbers, and both are checked to differ.
    """
    rows = []
    rng = np.random.default_rng(0)
    for bs in GRID:
        for c in GRID:
            for preset in ("p1", "p2"):
                noise = rng.normal(0, 0.15)
                outlier = 1.2 if (bs, c) == (128, 128) else 0.0
                rows.append(
                    {
                        "run_name": f"{preset}_b{bs}_c{c}",
                        "batch_size": bs,
                        "context_length": c,
                        "preset": preset,
                        "seed": 0,
                        "step": T / (bs**A * c**B) * math.exp(noise + outlier),
                    }
                )
    table = pd.DataFrame(rows)
    fit = fit_emergence_law(table)
    y = np.log(table.step.to_numpy())
    expected = _reference_loo(table, ["batch_size", "context_length", "preset"])
    np.testing.assert_allclose(fit.data.loo_log_predicted, expected, rtol=1e-10)
    assert fit.loo_r_log == pytest.approx(np.corrcoef(expected, y)[0, 1], rel=1e-10)
    assert fit.loo_r_linear == pytest.approx(
        np.corrcoef(np.exp(expected), np.exp(y))[0, 1], rel=1e-10
    )
    assert fit.n_configurations == 18
    # The case separates the definitions: in-sample r, per-(B, C) and per-run hold-outs differ.
    assert fit.pearson_r_log - fit.loo_r_log > 0.1
    by_pair = np.corrcoef(_reference_loo(table, ["batch_size", "context_length"]), y)[0, 1]
    assert abs(by_pair - fit.loo_r_log) > 0.01
    summary = fit_summary_dict(fit)
    assert summary["loo_r_log"] == pytest.approx(fit.loo_r_log)


def test_leave_one_out_off_gives_nan():
    fit = fit_emergence_law(grid_table(), leave_one_out=False)
    assert math.isnan(fit.loo_r_log) and math.isnan(fit.loo_r_linear)
    assert fit.data.loo_log_predicted.isna().all()


# ------------------------------------------------------------------ extra covariates


def test_extra_covariate_is_fitted_and_required_for_prediction(caplog):
    table = grid_table(seed=5, n_seeds=2)
    # Two model sizes per cell: log_params 10 or 12, with a known effect of -0.25 per unit.
    table = pd.concat([table.assign(log_params=10.0), table.assign(log_params=12.0)])
    table["run_name"] = table.run_name + "_" + table.log_params.astype(str)
    table["step"] = table.step * np.exp(-0.25 * (table.log_params - 10.0))
    fit = fit_emergence_law(table, extra_covariates=["log_params"], leave_one_out=False)
    assert fit.coef_names == ["const", "log_batch_size", "log_context_length", "log_params"]
    assert fit.extra_covariates == ("log_params",)
    ols = sm.OLS(
        np.log(table.step.to_numpy()), np.column_stack([design(table), table.log_params])
    ).fit()
    np.testing.assert_allclose(fit.params, ols.params, rtol=1e-10)
    assert fit.params[3] == pytest.approx(-0.25, abs=0.03)
    with pytest.raises(ValueError, match="the fit uses 'log_params'; give its value"):
        predict_emergence(fit, 64, 64)
    small = predict_emergence(fit, 64, 64, covariates={"log_params": 10.0})
    large = predict_emergence(fit, 64, 64, covariates={"log_params": 12.0})
    assert large.step.iloc[0] / small.step.iloc[0] == pytest.approx(math.exp(2 * fit.params[3]))
    summary = fit_summary_dict(fit)
    assert summary["extra_covariates"] == ["log_params"]
    from_summary = predict_emergence(summary, 64, 64, covariates={"log_params": 12.0})
    assert from_summary.step.iloc[0] == pytest.approx(large.step.iloc[0], rel=1e-12)
    # A constant covariate is left out (with a warning), a non-numeric one is an error.
    with caplog.at_level(logging.WARNING):
        constant = fit_emergence_law(
            table.assign(width=3.0), extra_covariates=["width"], leave_one_out=False
        )
    assert "'width' is constant" in caplog.text and constant.extra_covariates == ()
    with pytest.raises(ValueError, match="extra_covariates: 'name' is not numeric"):
        fit_emergence_law(table.assign(name="x"), extra_covariates=["name"])
    with pytest.raises(ValueError, match=r"missing columns \['depth'\]"):
        fit_emergence_law(table, extra_covariates=["depth"])


def test_bad_values_name_the_column():
    table = grid_table()
    with pytest.raises(ValueError, match="batch_size must be positive numbers"):
        fit_emergence_law(table.assign(batch_size=0))
    with pytest.raises(ValueError, match="context_length must be positive numbers"):
        fit_emergence_law(table.assign(context_length=-4))
    bad = table.copy()
    bad.loc[3, "step"] = -1.0
    with pytest.raises(ValueError, match=r"bad rows: \['b32_c64_s0'\]"):
        fit_emergence_law(bad)
    censored = table.copy()
    censored.loc[0, ["censored", "step"]] = [True, np.nan]
    censored["last_step"] = 0.0
    with pytest.raises(ValueError, match="last_step must be positive for censored runs"):
        fit_emergence_law(censored, censored="tobit")
    with pytest.raises(ValueError, match="tobit needs at least 2 runs that emerged"):
        everything = table.assign(censored=True, step=np.nan, last_step=1e4)
        everything.loc[0, ["censored", "step"]] = [False, 100.0]
        fit_emergence_law(everything, censored="tobit")


# ------------------------------------------------------------------ Tobit against an independent MLE


def _independent_tobit(y, X, censored):
    """Right-censored Gaussian MLE with scipy.stats densities and a numerical Hessian."""
    nll = censored_normal_nll(y, X, censored)
    theta = censored_normal_mle(y, X, censored, xatol=1e-10, fatol=1e-12)
    h, k = 1e-4, theta.size
    hessian = np.empty((k, k))
    for i in range(k):
        for j in range(k):
            e_i, e_j = np.eye(k)[i] * h, np.eye(k)[j] * h
            hessian[i, j] = (
                nll(theta + e_i + e_j)
                - nll(theta + e_i - e_j)
                - nll(theta - e_i + e_j)
                + nll(theta - e_i - e_j)
            ) / (4 * h * h)
    return theta, np.linalg.inv(hessian), nll(theta)


def test_tobit_equals_an_independent_censored_mle():
    table = grid_table(seed=6, sd=0.15, n_seeds=2)
    budget = float(np.quantile(table.step, 0.7))
    slow = table.step > budget
    table.loc[slow, ["censored", "step"]] = [True, np.nan]
    table["last_step"] = budget
    fit = fit_emergence_law(table, censored="tobit", leave_one_out=False)
    y = np.log(np.where(slow, budget, table.step))
    theta, cov, _ = _independent_tobit(y, design(table), slow.to_numpy())
    np.testing.assert_allclose(fit.params, theta[:-1], atol=2e-5)
    assert fit.residual_sd == pytest.approx(math.exp(theta[-1]), rel=1e-4)
    np.testing.assert_allclose(np.sqrt(np.diag(fit.cov)), np.sqrt(np.diag(cov))[:-1], rtol=2e-3)
    # The joint Wald test of the seed exponents is chi2 with 2 dof on the same covariance.
    diff = np.array([fit.params[1] + A, fit.params[2] + B])
    stat = float(diff @ np.linalg.solve(fit.cov[1:, 1:], diff))
    assert fit.wald_statistic == pytest.approx(stat, rel=1e-9) and fit.wald_df == 2
    assert fit.wald_p_value == pytest.approx(stats.chi2.sf(stat, 2), rel=1e-9)


def test_ols_wald_f_test_equals_statsmodels():
    table = grid_table(seed=8)
    fit = fit_emergence_law(table, seed_exponents={"a": 0.3, "b": 0.7}, leave_one_out=False)
    ols = sm.OLS(np.log(table.step.to_numpy()), design(table)).fit()
    test = ols.f_test((np.array([[0, 1.0, 0], [0, 0, 1.0]]), np.array([-0.3, -0.7])))
    assert fit.wald_test == "F" and fit.wald_df == 2
    assert fit.wald_statistic == pytest.approx(float(np.squeeze(test.fvalue)), rel=1e-9)
    assert fit.wald_p_value == pytest.approx(float(test.pvalue), rel=1e-9)
    assert fit.wald_null == {"a": 0.3, "b": 0.7}


@pytest.mark.parametrize("level", [0.8, 0.95])
def test_cluster_robust_ols_cis_are_cr2_with_bell_mccaffrey_df(level):
    table = grid_table(n_seeds=3)
    fit = fit_emergence_law(table, level=level, leave_one_out=False, cluster_by_configuration=True)
    groups = (table.batch_size.astype(str) + "_" + table.context_length.astype(str)).to_numpy()
    params, cov, df = cr2_reference(np.log(table.step.to_numpy()), design(table), groups)
    half = stats.t.ppf(0.5 + level / 2, df) * np.sqrt(np.diag(cov))  # t on each coefficient's df
    assert fit.n_clusters == 9 and fit.df_resid == 6
    assert fit.a_ci == pytest.approx((-(params[1] + half[1]), -(params[1] - half[1])), rel=1e-9)
    assert fit.b_ci == pytest.approx((-(params[2] + half[2]), -(params[2] - half[2])), rel=1e-9)
    # The joint Wald test: Hotelling's T² on the smaller df of the two exponents.
    diff = params[1:] + np.array([0.37, 0.62])
    wald = diff @ np.linalg.solve(cov[1:, 1:], diff)
    eta = min(df[1:])
    assert fit.wald_df_denominator == pytest.approx(eta - 1, rel=1e-9)
    assert fit.wald_p_value == pytest.approx(
        stats.f.sf(wald * (eta - 1) / (2 * eta), 2, eta - 1), rel=1e-9
    )


def test_leave_one_out_skips_a_configuration_it_cannot_predict_and_goes_on():
    """Holding out the only B = 64 configuration leaves B constant: that one is NaN (skipped),
    every other configuration is still predicted from the rest."""
    rows = [(64, 32)] + [(32, c) for c in (32, 64, 128)]
    rng = np.random.default_rng(1)
    table = pd.DataFrame(
        [
            {
                "batch_size": bs,
                "context_length": c,
                "seed": s,
                "step": T / (bs**A * c**B) * math.exp(rng.normal(0, 0.1)),
            }
            for bs, c in rows
            for s in range(2)
        ]
    )
    fit = fit_emergence_law(table)
    loo = fit.data.loo_log_predicted.to_numpy()
    assert np.isnan(loo[:2]).all() and np.isfinite(loo[2:]).all()
    expected = np.empty(len(table) - 2)
    X, y = design(table), np.log(table.step.to_numpy())
    groups = table.batch_size.astype(str) + "|" + table.context_length.astype(str)
    for i, group in enumerate(groups.iloc[2:], start=2):
        held = (groups == group).to_numpy()
        beta = np.linalg.lstsq(X[~held], y[~held], rcond=None)[0]
        expected[i - 2] = X[i] @ beta
    np.testing.assert_allclose(loo[2:], expected, rtol=1e-10)
    assert fit.loo_r_log == pytest.approx(np.corrcoef(expected, y[2:])[0, 1], rel=1e-10)


# ------------------------------------------------------------------ LOO boundaries and Tobit LOO


def test_leave_one_out_refits_when_exactly_the_minimum_runs_remain():
    """Five single-run configurations and three coefficients: every hold-out leaves four runs,
    the least an OLS refit with one residual degree of freedom needs, so all five are predicted
    (none skipped), each by least squares on the other four."""
    cells = [(32, 32), (64, 32), (32, 64), (64, 64), (128, 128)]
    rng = np.random.default_rng(3)
    table = pd.DataFrame(
        [
            {"batch_size": bs, "context_length": c, "seed": 0,
             "step": T / (bs**A * c**B) * math.exp(rng.normal(0, 0.1))}
            for bs, c in cells
        ]
    )  # fmt: skip
    fit = fit_emergence_law(table)
    X, y = design(table), np.log(table.step.to_numpy())
    expected = np.array(
        [
            X[i] @ np.linalg.lstsq(np.delete(X, i, 0), np.delete(y, i), rcond=None)[0]
            for i in range(5)
        ]
    )
    np.testing.assert_allclose(fit.data.loo_log_predicted.to_numpy(), expected, rtol=1e-10)


def test_tobit_leave_one_out_equals_independent_censored_refits():
    """Each configuration held out, the rest refitted by an independent right-censored MLE
    (censoring flags of the *remaining* runs), and the held-out runs predicted from it."""
    table = grid_table(seed=11, sd=0.15, n_seeds=2)
    budget = float(np.quantile(table.step, 0.75))
    slow = (table.step > budget).to_numpy()
    table.loc[slow, ["censored", "step"]] = [True, np.nan]
    table["last_step"] = budget
    fit = fit_emergence_law(table, censored="tobit")
    X = design(table)
    y = np.log(np.where(slow, budget, table.step))
    configs = (table.batch_size.astype(str) + "|" + table.context_length.astype(str)).to_numpy()
    expected = np.empty(len(table))
    for config in pd.unique(configs):
        held = configs == config
        theta, _, _ = _independent_tobit(y[~held], X[~held], slow[~held])
        expected[held] = X[held] @ theta[:-1]
    np.testing.assert_allclose(fit.data.loo_log_predicted.to_numpy(), expected, atol=1e-4)
    # Censoring moves the answer: the same refits treating every row as observed differ.
    naive = np.empty(len(table))
    for config in pd.unique(configs):
        held = configs == config
        naive[held] = X[held] @ np.linalg.lstsq(X[~held], y[~held], rcond=None)[0]
    assert np.abs(naive - expected).max() > 0.05
