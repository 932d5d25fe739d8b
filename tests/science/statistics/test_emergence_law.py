"""The emergence law fit: known exponents from synthetic emergence points, and its internals.

The fit recovers known exponents, CIs cover, censoring and status are handled; its helpers
(Pearson r with a Fisher-z CI, the Wald test, leave-one-configuration-out, the run table) are
checked on tiny hand-built inputs against values computed here independently (numpy least
squares, statsmodels OLS, scipy and an independent censored MLE), or against literal messages.
"""

from __future__ import annotations

import logging
import math
import re

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats

from ih_kedro.science.statistics import emergence_law as el
from ih_kedro.science.statistics.censored_regression import RegressionFit
from ih_kedro.science.statistics.emergence_law import fit_emergence_law
from ih_kedro.science.statistics.emergence_prediction import (
    fit_summary_dict,
    predict_emergence,
)
from tests.science.statistics.censored_mle import independent_tobit
from tests.science.statistics.law_tables import A, B, T, law_table, synthetic_table

LOGGER = "ih_kedro.science.statistics.emergence_law"


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_recovers_known_exponents():
    fit = fit_emergence_law(synthetic_table())
    assert fit.a_ci[0] <= A <= fit.a_ci[1]
    assert fit.b_ci[0] <= B <= fit.b_ci[1]
    assert fit.T_ci[0] <= T <= fit.T_ci[1]
    assert fit.a == pytest.approx(A, abs=0.05) and fit.b == pytest.approx(B, abs=0.05)
    assert fit.r_squared > 0.95 and fit.pearson_r_log > 0.97 and fit.pearson_r_linear > 0.95
    assert fit.pearson_r_log_ci[0] < fit.pearson_r_log < fit.pearson_r_log_ci[1]
    assert fit.loo_r_log > 0.95
    assert fit.n_runs == 27 and fit.n_configurations == 9 and fit.seeds == [0, 1, 2]
    assert fit.wald_p_value > 0.01  # the truth is not rejected
    assert len(fit.results.resid) == 27


def test_ci_coverage_over_simulated_datasets():
    n_sim = 200
    hits = {"a": 0, "b": 0}
    for seed in range(n_sim):
        fit = fit_emergence_law(synthetic_table(seed=seed), leave_one_out=False)
        hits["a"] += fit.a_ci[0] <= A <= fit.a_ci[1]
        hits["b"] += fit.b_ci[0] <= B <= fit.b_ci[1]
    for key, count in hits.items():
        assert 0.88 <= count / n_sim <= 0.99, (key, count)


def test_wald_rejects_wrong_exponents_with_large_n():
    table = synthetic_table(seed=1, n_seeds=10, a=0.5, b=0.8)
    fit = fit_emergence_law(table, leave_one_out=False)
    # Hotelling's T² on the exponents' Bell–McCaffrey df (about 3.6 here): strong, not 1e-6.
    assert fit.wald_p_value < 1e-3
    truth = fit_emergence_law(table, seed_exponents={"a": 0.5, "b": 0.8}, leave_one_out=False)
    assert truth.wald_p_value > 0.01


def test_tokens_response_shifts_exponents_by_one():
    table = synthetic_table()
    steps = fit_emergence_law(table, leave_one_out=False)
    tokens = fit_emergence_law(table, response="tokens", leave_one_out=False)
    assert tokens.a == pytest.approx(steps.a - 1)
    assert tokens.b == pytest.approx(steps.b - 1)
    assert tokens.wald_null == pytest.approx({"a": A - 1, "b": B - 1})
    assert tokens.wald_statistic == pytest.approx(steps.wald_statistic)
    pred_s = predict_emergence(steps, 64, 64)
    pred_t = predict_emergence(tokens, 64, 64)
    assert pred_t.step.iloc[0] == pytest.approx(pred_s.step.iloc[0])
    assert pred_t.tokens.iloc[0] == pytest.approx(pred_s.step.iloc[0] * 64 * 64)


def _censor_slowest(table: pd.DataFrame, budget: float) -> pd.DataFrame:
    table = table.copy()
    slow = table.step > budget
    table.loc[slow, "censored"] = True
    table.loc[slow, ["step", "tokens"]] = np.nan
    table["last_step"] = budget
    return table


def test_censored_exclude_counts_and_warns(caplog):
    table = synthetic_table()
    table = _censor_slowest(table, budget=float(np.quantile(table.step, 0.85)))
    n_cens = int(table.censored.sum())
    assert 0 < n_cens < 10
    with caplog.at_level(logging.WARNING):
        fit = fit_emergence_law(table, censored="exclude")
    assert fit.n_censored == n_cens and fit.n_censored_excluded == n_cens
    assert fit.n_runs == len(table) - n_cens
    assert "censored" in caplog.text


def test_tobit_beats_exclude_when_slowest_runs_censored():
    errors = {"exclude": [], "tobit": []}
    for seed in range(10):
        table = synthetic_table(seed=seed, sd=0.1)
        budget = float(np.quantile(table.step, 0.7))
        table = _censor_slowest(table, budget)
        for method, squared_errors in errors.items():
            fit = fit_emergence_law(table, censored=method, leave_one_out=False)
            squared_errors.append((fit.a - A) ** 2 + (fit.b - B) ** 2)
    assert np.mean(errors["tobit"]) < np.mean(errors["exclude"])
    fit = fit_emergence_law(table, censored="tobit")
    assert fit.n_censored_excluded == 0 and fit.n_runs == len(table)
    assert fit.a_ci[0] <= A <= fit.a_ci[1] and fit.b_ci[0] <= B <= fit.b_ci[1]


def test_tobit_without_censoring_matches_ols():
    table = synthetic_table()
    ols = fit_emergence_law(table, leave_one_out=False)
    tobit = fit_emergence_law(table, censored="tobit", leave_one_out=False)
    assert tobit.a == pytest.approx(ols.a, abs=1e-4)
    assert tobit.b == pytest.approx(ols.b, abs=1e-4)
    # ML standard errors are the OLS ones scaled by sqrt((n - p) / n).
    width = lambda ci: ci[1] - ci[0]  # noqa: E731
    assert width(tobit.a_ci) == pytest.approx(width(ols.a_ci), rel=0.25)


def test_degenerate_inputs():
    table = synthetic_table()
    with pytest.raises(ValueError, match="need at least"):
        fit_emergence_law(table.iloc[[0, 3, 9]])  # 3 runs, 3 coefficients
    with pytest.raises(ValueError, match="censored"):
        fit_emergence_law(table, censored="drop")
    with pytest.raises(ValueError, match="response"):
        fit_emergence_law(table, response="flops")
    with pytest.raises(ValueError, match="missing columns"):
        fit_emergence_law(table.drop(columns="batch_size"))
    with pytest.raises(ValueError, match="one law per metric"):
        fit_emergence_law(pd.concat([table, table.assign(metric="associative_recall")]))
    diagonal = table[table.batch_size == table.context_length]
    with pytest.raises(ValueError, match="collinear"):
        fit_emergence_law(diagonal)


def test_single_batch_size_fits_only_context_exponent(caplog):
    table = synthetic_table(batches=(64,))
    with caplog.at_level(logging.WARNING):
        fit = fit_emergence_law(table)
    assert "not identifiable" in caplog.text
    assert math.isnan(fit.a) and fit.b_ci[0] <= B <= fit.b_ci[1]
    pred = predict_emergence(fit, [64, 128], [64, 64])
    assert np.isfinite(pred.step.iloc[0]) and np.isnan(pred.step.iloc[1])


def test_tiny_grid_one_seed():
    fit = fit_emergence_law(synthetic_table(batches=(32, 64), contexts=(32, 64), n_seeds=1))
    assert fit.n_runs == 4 and np.isfinite(fit.a) and np.isfinite(fit.b)
    assert math.isnan(fit.loo_r_log)  # 3 runs left cannot fit 3 coefficients plus error


def _scattered_table(seed: int, config_sd: float = 0.2, seed_sd: float = 0.05) -> pd.DataFrame:
    """Two seeds per configuration sharing a configuration-level deviation from the law."""
    rng = np.random.default_rng(seed)
    table = synthetic_table(seed=seed, sd=0.0, n_seeds=2)
    shift = {key: rng.normal(0, config_sd) for key in table.run_name.str.rsplit("_", n=1).str[0]}
    noise = table.run_name.str.rsplit("_", n=1).str[0].map(shift) + rng.normal(
        0, seed_sd, len(table)
    )
    return table.assign(step=table.step * np.exp(noise))


def test_cluster_robust_cis_cover_under_configuration_scatter():
    # Seeds of a configuration share its deviation: treating them as independent runs
    # (classical OLS) undercovers; clustering by configuration restores coverage.
    n_sim = 150
    hits = {True: 0, False: 0}
    for seed in range(n_sim):
        table = _scattered_table(seed)
        for clustered in hits:
            fit = fit_emergence_law(table, leave_one_out=False, cluster_by_configuration=clustered)
            hits[clustered] += fit.a_ci[0] <= A <= fit.a_ci[1]
            assert fit.covariance == (
                "cluster-robust by configuration" if clustered else "classical"
            )
    assert hits[True] / n_sim >= 0.86, hits
    assert hits[False] / n_sim <= 0.83, hits


def test_tobit_cluster_covariance_is_the_delete_one_configuration_jackknife():
    # Without censoring the Tobit MLE is OLS, so its cluster covariance is the jackknife of the
    # OLS coefficients over left-out configurations, (G - 1) / G sum (beta_g - mean)^2, and
    # its CIs and Wald test are t / F on G - k df.
    table = _scattered_table(3)
    ols = fit_emergence_law(table, leave_one_out=False)
    tobit = fit_emergence_law(table, censored="tobit", leave_one_out=False)
    assert ols.n_clusters == tobit.n_clusters == 9 and ols.df_resid == tobit.df_resid == 6
    np.testing.assert_allclose(tobit.params, ols.params, rtol=1e-7)
    configs = table.batch_size.astype(str) + "_" + table.context_length.astype(str)
    X = np.column_stack(
        [np.ones(len(table)), np.log(table.batch_size), np.log(table.context_length)]
    )
    y = np.log(table.step.to_numpy())
    betas = np.array(
        [np.linalg.lstsq(X[configs != c], y[configs != c], rcond=None)[0] for c in configs.unique()]
    )
    centred = betas - betas.mean(axis=0)
    np.testing.assert_allclose(tobit.cov, centred.T @ centred * 8 / 9, rtol=1e-5)
    half = stats.t.ppf(0.975, 6) * math.sqrt(tobit.cov[1, 1])
    assert tobit.a_ci == pytest.approx((tobit.a - half, tobit.a + half), rel=1e-9)
    assert (tobit.wald_test, tobit.wald_df, tobit.wald_df_denominator) == ("F", 2, 6.0)


def test_tobit_converges_without_warnings_on_well_posed_data(caplog):
    table = synthetic_table(seed=2, sd=0.1)
    table = _censor_slowest(table, budget=float(np.quantile(table.step, 0.8)))
    assert 0 < table.censored.sum() < len(table) // 2
    with caplog.at_level(logging.WARNING, logger="ih_kedro.science.statistics.censored_regression"):
        fit = fit_emergence_law(
            table.drop(columns="censored").assign(
                status=np.where(table.censored, "censored", "emerged")
            ),
            censored="tobit",
        )
    assert not [r for r in caplog.records if "tobit" in r.getMessage()], caplog.text
    assert fit.a_ci[0] <= A <= fit.a_ci[1] and fit.b_ci[0] <= B <= fit.b_ci[1]
    assert fit.n_censored == int(table.censored.sum())


def test_status_column_excludes_left_censored_and_failed_rows(caplog):
    table = synthetic_table(n_seeds=2)
    table["status"] = "emerged"
    table.loc[0, "status"] = "left_censored"
    table.loc[1, ["status", "step"]] = ["fit_failed", np.nan]
    table.loc[2, "status"] = "censored"
    table.loc[2, "last_step"] = table.loc[2, "step"]
    with caplog.at_level(logging.WARNING):
        fit = fit_emergence_law(table, censored="tobit", leave_one_out=False)
    assert (fit.n_left_censored, fit.n_fit_failed, fit.n_censored) == (1, 1, 1)
    assert fit.n_runs == len(table) - 2
    assert "1 left-censored runs" in caplog.text and "1 runs whose estimator failed" in caplog.text
    summary = fit_summary_dict(fit)
    assert summary["n_left_censored"] == 1 and summary["n_fit_failed"] == 1


# ------------------------------------------------------------------ fit_emergence_law: estimators


def test_tobit_fit_without_repeats_is_classical() -> None:
    table = law_table(n_seeds=1, seed=2)
    budget = float(np.quantile(table.step, 0.8))
    slow = table.step > budget
    table = table.assign(censored=slow, step=table.step.where(~slow), last_step=budget)
    fit = fit_emergence_law(table, censored="tobit", leave_one_out=False)
    assert fit.n_clusters == 0 and fit.covariance == "classical"
    summary = fit_summary_dict(fit)
    assert summary["covariance"] == "classical" and summary["n_clusters"] == 0


def test_min_runs_and_the_tobit_minimum() -> None:
    assert (el._min_runs(3, "exclude"), el._min_runs(3, "tobit")) == (4, 5)
    table = law_table(batches=(32, 64, 128), contexts=(32, 64), n_seeds=1, seed=4)
    table = table.iloc[[0, 1, 2, 3, 5]].reset_index(drop=True)  # 5 runs, 3 coefficients
    table = table.assign(censored=[False, False, False, False, True], last_step=1e6)
    table.loc[4, "step"] = np.nan
    fit = fit_emergence_law(table, censored="tobit", leave_one_out=False)
    assert fit.n_runs == 5
    with pytest.raises(
        ValueError,
        match="^"
        + re.escape(
            "emergence law: 4 usable runs for 3 coefficients "
            "['const', 'log_batch_size', 'log_context_length']; need at least 5 "
            "(censored='tobit', 0 censored runs excluded)"
        )
        + "$",
    ):
        fit_emergence_law(table.iloc[:4], censored="tobit")


def test_collinear_design_message() -> None:
    table = law_table(batches=(32, 64, 128), contexts=(32,), n_seeds=1)
    table = table.assign(context_length=table.batch_size)
    with pytest.raises(
        ValueError,
        match="^"
        + re.escape(
            "emergence law: the design ['const', 'log_batch_size', 'log_context_length'] is "
            "collinear (e.g. B and C always change together); vary them independently"
        )
        + "$",
    ):
        fit_emergence_law(pd.concat([table, table]))


# ------------------------------------------------------------------ _pearson_with_ci


def test_pearson_drops_non_finite_pairs_and_has_a_ci_from_four_points() -> None:
    x = np.array([1.0, 2.0, np.nan, 3.0, 4.0, 5.0])
    y = np.array([2.0, 1.0, 7.0, 4.0, 3.0, 6.0])
    r, ci = el._pearson_with_ci(x, y, 0.9)
    keep = np.isfinite(x)
    expected = stats.pearsonr(x[keep], y[keep])[0]
    half = stats.norm.ppf(0.95) / math.sqrt(5 - 3)
    assert r == pytest.approx(expected, rel=1e-12)
    assert ci == pytest.approx((math.tanh(math.atanh(r) - half), math.tanh(math.atanh(r) + half)))
    four, ci4 = el._pearson_with_ci(x[[0, 1, 3, 4]], y[[0, 1, 3, 4]], 0.95)
    z, half4 = math.atanh(four), stats.norm.ppf(0.975)
    assert ci4 == pytest.approx((math.tanh(z - half4), math.tanh(z + half4)), rel=1e-12)
    three, ci3 = el._pearson_with_ci(np.array([1.0, 2.0, 3.0]), np.array([2.0, 1.0, 4.0]), 0.95)
    assert three == pytest.approx(stats.pearsonr([1, 2, 3], [2, 1, 4])[0], rel=1e-12)
    assert all(math.isnan(v) for v in ci3)


def test_pearson_of_a_unit_range_and_of_a_constant() -> None:
    x = np.array([0.0, 0.25, 0.5, 1.0])
    y = np.array([3.0, 1.0, 4.0, 1.5])
    assert el._pearson_with_ci(x, y, 0.95)[0] == pytest.approx(stats.pearsonr(x, y)[0])
    assert el._pearson_with_ci(y, x, 0.95)[0] == pytest.approx(stats.pearsonr(x, y)[0])
    with np.errstate(all="raise"):  # a constant side is NaN, without numpy arithmetic
        r, ci = el._pearson_with_ci(np.ones(4), y, 0.95)
    assert math.isnan(r) and all(math.isnan(v) for v in ci)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_pearson_of_a_perfect_correlation_clips_fisher_z(sign: float) -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    r, (low, high) = el._pearson_with_ci(x, sign * x, 0.95)
    assert r == pytest.approx(sign, abs=1e-15)
    z = math.atanh(float(np.clip(r, -1 + 1e-15, 1 - 1e-15)))
    half = stats.norm.ppf(0.975)
    assert (low, high) == (math.tanh(z - half), math.tanh(z + half))
    assert sign * math.tanh(math.atanh(1 - 1e-15) - half) == pytest.approx(
        low if sign > 0 else high, abs=1e-15
    )


# ------------------------------------------------------------------ _wald


def test_wald_without_exponents_and_with_a_singular_covariance(
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = RegressionFit(
        params=np.array([1.0, -0.3, -0.6]), cov=np.zeros((3, 3)), sigma=0.0, df_resid=4.0
    )
    none = el._wald(core, ["const"], {"a": 0.37, "b": 0.62}, "exclude")
    assert none[1] == 0 and none[3] == "F" and math.isnan(none[0]) and math.isnan(none[2])
    names = ["const", "log_batch_size", "log_context_length"]
    classical_tobit = RegressionFit(
        params=core.params, cov=core.cov, sigma=0.0, df_resid=math.inf
    )  # a classical Tobit fit: normal CIs, so a chi2 test
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        stat, df, p, kind, _ = el._wald(classical_tobit, names, {"a": 0.37, "b": 0.62}, "tobit")
    assert messages(caplog) == [
        "emergence law: singular coefficient covariance; Wald test undefined"
    ]
    assert (df, kind) == (2, "chi2") and math.isnan(stat) and math.isnan(p)


# ------------------------------------------------------------------ leave-one-configuration-out


def _lstsq_loo(X: np.ndarray, y: np.ndarray, groups: np.ndarray, skip: set) -> np.ndarray:
    out = np.full(len(y), np.nan)
    for g in pd.unique(groups):
        held = groups == g
        if g not in skip:
            out[held] = X[held] @ np.linalg.lstsq(X[~held], y[~held], rcond=None)[0]
    return out


def test_loo_goes_on_after_a_configuration_with_too_few_runs_left() -> None:
    table = pd.DataFrame(
        {
            "batch_size": [1, 1, 1, 2, 4],
            "context_length": [64] * 5,
            "step": [1500.0, 1400.0, 1650.0, 1100.0, 800.0],
        }
    )
    fit = fit_emergence_law(table)
    X = np.column_stack([np.ones(5), np.log(table.batch_size.to_numpy(float))])  # (5, 2)
    expected = _lstsq_loo(X, np.log(table.step.to_numpy()), table.batch_size.to_numpy(), {1})
    np.testing.assert_allclose(fit.data.loo_log_predicted, expected, rtol=1e-10)


def test_loo_goes_on_after_a_configuration_that_leaves_b_and_c_collinear() -> None:
    configs = [(2, 1), (1, 1), (2, 2), (4, 4)]  # without (2, 1): log B = log C
    rng = np.random.default_rng(8)
    table = pd.DataFrame(
        [
            {"batch_size": b, "context_length": c, "step": 1e4 / (b**A * c**B) * math.exp(e)}
            for b, c in configs
            for e in rng.normal(0, 0.1, 2)
        ]
    )
    fit = fit_emergence_law(table)
    X = np.column_stack(
        [
            np.ones(8),
            np.log(table.batch_size.to_numpy(float)),
            np.log(table.context_length.to_numpy(float)),
        ]
    )
    groups = (table.batch_size.astype(str) + "|" + table.context_length.astype(str)).to_numpy()
    expected = _lstsq_loo(X, np.log(table.step.to_numpy()), groups, {"2|1"})
    np.testing.assert_allclose(fit.data.loo_log_predicted, expected, rtol=1e-10)


def test_loo_with_an_extra_covariate_of_unit_range() -> None:
    table = law_table(batches=(32, 64, 128), contexts=(32, 64), n_seeds=1, seed=6)
    table["depth"] = [0.0, 1.0, 0.5, 1.0, 0.0, 0.5]
    fit = fit_emergence_law(table, extra_covariates=("depth",))
    X = np.column_stack(
        [
            np.ones(6),
            np.log(table.batch_size.to_numpy(float)),
            np.log(table.context_length.to_numpy(float)),
            table.depth.to_numpy(),
        ]
    )
    groups = (table.batch_size.astype(str) + "|" + table.context_length.astype(str)).to_numpy()
    expected = _lstsq_loo(X, np.log(table.step.to_numpy()), groups, set())
    np.testing.assert_allclose(fit.data.loo_log_predicted, expected, rtol=1e-9)


def test_tobit_loo_skips_a_hold_out_that_leaves_one_emerged_run() -> None:
    # B = 2 (first) holds two of the three emerged runs; B = 4 the third.
    table = pd.DataFrame(
        {
            "batch_size": [2, 2, 4, 1, 1, 8, 8],
            "context_length": [64] * 7,
            "step": [1100.0, 900.0, 700.0, np.nan, np.nan, np.nan, np.nan],
            "censored": [False, False, False, True, True, True, True],
            "last_step": [2000.0, 2000.0, 2000.0, 1200.0, 1300.0, 400.0, 450.0],
        }
    )
    fit = fit_emergence_law(table, censored="tobit", cluster_by_configuration=False)
    b = table.batch_size.to_numpy(float)
    X = np.column_stack([np.ones(7), np.log(b)])  # (7, 2)
    y = np.log(np.where(table.censored, table.last_step, table.step))
    censored = table.censored.to_numpy()
    expected = np.full(7, np.nan)
    for value in (4, 1, 8):
        held = b == value
        theta = independent_tobit(y[~held], X[~held], censored[~held])
        expected[held] = X[held] @ theta[:-1]
    np.testing.assert_allclose(fit.data.loo_log_predicted, expected, atol=1e-5)


# ------------------------------------------------------------------ fit_emergence_law


def test_levels_zero_and_one_are_rejected() -> None:
    table = law_table()
    for level in (0.0, 1.0):
        with pytest.raises(ValueError, match=rf"^level: must be in \(0, 1\), got {level}$"):
            fit_emergence_law(table, level=level)


def test_a_table_with_index_and_level_0_columns_fits_like_one_without(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = law_table(seed=1)
    table["status"] = "emerged"
    table.loc[3, "status"] = "left_censored"
    table.loc[5, ["status", "last_step"]] = ["censored", 1e6]
    table.loc[5, "step"] = np.nan
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        fit = fit_emergence_law(table.reset_index().reset_index(), leave_one_out=False)
    logged = messages(caplog)
    reference = fit_emergence_law(table, leave_one_out=False)
    np.testing.assert_allclose(fit.params, reference.params, rtol=1e-12)
    assert (fit.n_left_censored, fit.n_fit_failed, fit.n_censored_excluded) == (1, 0, 1)
    assert logged == [
        "emergence law: 1 left-censored runs (above threshold at the first checkpoint) "
        "and 0 runs whose estimator failed are excluded from the fit (of 18)",
        "emergence law: 1 of 17 runs are censored (no emergence within budget) and are "
        "excluded; S* is biased low for slow configurations; consider censored='tobit'",
    ]


def test_counts_are_zero_without_status_or_censoring(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        fit = fit_emergence_law(law_table(seed=3))
    assert (fit.n_left_censored, fit.n_fit_failed, fit.n_censored_excluded) == (0, 0, 0)
    assert messages(caplog) == []


@pytest.mark.parametrize(
    ("batches", "contexts", "name", "key"),
    [
        ((64,), (32, 64, 128), "B (batch_size)", "a"),
        ((32, 64, 128), (64,), "C (context_length)", "b"),
    ],
)
def test_a_single_b_or_c_warns_with_its_name(
    caplog: pytest.LogCaptureFixture,
    batches: tuple[int, ...],
    contexts: tuple[int, ...],
    name: str,
    key: str,
) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        fit_emergence_law(law_table(batches=batches, contexts=contexts), leave_one_out=False)
    assert messages(caplog) == [
        f"emergence law: a single {name} in the data; exponent {key} is not identifiable "
        "(reported as NaN), only the other terms are fitted"
    ]


def test_tobit_needs_two_emerged_runs_and_fits_with_exactly_two() -> None:
    table = pd.DataFrame(
        {
            "batch_size": [64] * 4,
            "context_length": [128] * 4,
            "step": [900.0, 1200.0, np.nan, np.nan],
            "censored": [False, False, True, True],
            "last_step": [5000.0, 5000.0, 1500.0, 1000.0],
        }
    )
    fit = fit_emergence_law(table, censored="tobit", leave_one_out=False)
    y = np.log([900.0, 1200.0, 1500.0, 1000.0])
    theta = independent_tobit(y, np.ones((4, 1)), table.censored.to_numpy())
    assert fit.log_T == pytest.approx(theta[0], abs=1e-5)
    one = table.assign(censored=[False, True, True, True], step=[900.0] + [np.nan] * 3)
    with pytest.raises(
        ValueError, match="^emergence law: tobit needs at least 2 runs that emerged$"
    ):
        fit_emergence_law(one, censored="tobit")


# ------------------------------------------------------------------ the fit's run table


def test_fit_data_without_run_names_or_seeds_and_with_censored_runs() -> None:
    table = pd.DataFrame(
        {
            "batch_size": [1, 2, 4, 8, 1, 2, 4, 8],
            "context_length": [64] * 8,
            "step": [2000.0, 1500.0, 1100.0, np.nan, 2100.0, 1400.0, 1000.0, 800.0],
            "censored": [False, False, False, True, False, False, False, False],
            "last_step": [5000.0] * 3 + [700.0] + [5000.0] * 4,
        }
    )
    fit = fit_emergence_law(table, censored="tobit", leave_one_out=False)
    data = fit.data
    assert list(data.columns) == [
        "run_name",
        "batch_size",
        "context_length",
        "seed",
        "censored",
        "observed",
        "log_observed",
        "log_predicted",
        "residual",
        "loo_log_predicted",
    ]
    assert list(data.context_length) == [64] * 8 and list(data.batch_size) == [1, 2, 4, 8] * 2
    assert (data[["observed", "log_observed", "residual"]].dtypes == np.float64).all()
    assert list(data.run_name) == list(range(8)) and data.seed.isna().all() and fit.seeds == []
    X = np.column_stack([np.ones(8), np.log(table.batch_size.to_numpy(float))])  # (8, 2)
    np.testing.assert_allclose(data.log_predicted, X @ fit.params, rtol=1e-12)
    obs = ~table.censored.to_numpy()
    y = np.log(table.step.to_numpy())
    np.testing.assert_allclose(data.log_observed[obs], y[obs], rtol=1e-15)
    np.testing.assert_allclose(data.observed[obs], table.step[obs], rtol=1e-12)
    np.testing.assert_allclose(data.residual[obs], (y - X @ fit.params)[obs], rtol=1e-10)
    assert data.loc[3, ["observed", "log_observed", "residual"]].isna().all()
    assert list(data.censored) == list(~obs)
    assert fit.T_ci == (math.exp(fit.log_T_ci[0]), math.exp(fit.log_T_ci[1]))


def test_fit_lists_only_fitted_covariates_and_sorted_seeds() -> None:
    table = law_table(seed=9, n_seeds=2)
    table["seed"] = np.tile([7, 3], 9)
    table["flat"] = 1.0
    table["depth"] = np.tile([1.0, 2.0, 4.0], 6)
    fit = fit_emergence_law(table, extra_covariates=("flat", "depth"), leave_one_out=False)
    assert fit.extra_covariates == ("depth",) and fit.seeds == [3, 7]
    assert list(fit.data.seed) == [7, 3] * 9
    assert list(fit.data.run_name) == list(table.run_name)
    assert fit.coef_names == ["const", "log_batch_size", "log_context_length", "depth"]


def test_undefined_leave_one_out_r_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    table = law_table(batches=(32, 64), contexts=(32, 64), n_seeds=1)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        fit = fit_emergence_law(table)
    assert math.isnan(fit.loo_r_log) and math.isnan(fit.loo_r_linear)
    assert messages(caplog) == [
        "emergence law: leave-one-configuration-out r undefined (4 configurations)"
    ]


def test_r_squared_is_statsmodels_for_ols_and_over_emerged_runs_for_tobit() -> None:
    table = law_table(seed=11, sd=0.2, n_seeds=1)
    fit = fit_emergence_law(table, leave_one_out=False)
    X = np.column_stack(
        [
            np.ones(9),
            np.log(table.batch_size.to_numpy(float)),
            np.log(table.context_length.to_numpy(float)),
        ]
    )  # (9, 3)
    y = np.log(table.step.to_numpy())
    assert fit.r_squared == pytest.approx(sm.OLS(y, X).fit().rsquared, rel=1e-12)
    budget = float(np.quantile(table.step, 0.75))
    slow = (table.step > budget).to_numpy()
    censored = table.assign(censored=slow, step=table.step.where(~slow), last_step=budget)
    tobit = fit_emergence_law(censored, censored="tobit", leave_one_out=False)
    resid = y[~slow] - X[~slow] @ tobit.params
    expected = 1.0 - resid @ resid / np.sum((y[~slow] - y[~slow].mean()) ** 2)
    assert tobit.r_squared == pytest.approx(expected, rel=1e-12)


def test_r_squared_is_nan_when_every_run_has_the_same_step() -> None:
    table = law_table(seed=12, n_seeds=1).assign(step=500.0)
    fit = fit_emergence_law(table, leave_one_out=False)
    assert math.isnan(fit.r_squared) and math.isnan(fit.pearson_r_log)


def test_tobit_loo_r_is_over_emerged_runs_only() -> None:
    table = law_table(seed=13, sd=0.15, n_seeds=2)
    budget = float(np.quantile(table.step, 0.8))
    slow = (table.step > budget).to_numpy()
    table = table.assign(censored=slow, step=table.step.where(~slow), last_step=budget)
    fit = fit_emergence_law(table, censored="tobit", cluster_by_configuration=False)
    loo = fit.data.loo_log_predicted.to_numpy()
    assert np.isfinite(loo).all()
    y = np.log(table.step.to_numpy()[~slow])
    assert fit.loo_r_log == pytest.approx(stats.pearsonr(loo[~slow], y)[0], rel=1e-12)
    assert fit.loo_r_linear == pytest.approx(
        stats.pearsonr(np.exp(loo[~slow]), np.exp(y))[0], rel=1e-12
    )


def test_no_leave_one_out_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        fit = fit_emergence_law(law_table(seed=14), leave_one_out=False)
    assert math.isnan(fit.loo_r_log) and messages(caplog) == []
