"""The emergence law fit recovers known exponents from synthetic emergence points."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.statistics.emergence_law import (
    fit_emergence_law,
    fit_summary_dict,
    fit_summary_table,
    predict_emergence,
)

A, B, T = 0.37, 0.62, 1e5
BATCHES = (32, 64, 128)
CONTEXTS = (32, 64, 128)


def synthetic_table(
    *,
    seed: int = 0,
    sd: float = 0.05,
    batches=BATCHES,
    contexts=CONTEXTS,
    n_seeds: int = 3,
    a: float = A,
    b: float = B,
) -> pd.DataFrame:
    """Emergence steps from the law with log-normal noise, one row per (B, C, seed)."""
    rng = np.random.default_rng(seed)
    rows = []
    for bs in batches:
        for c in contexts:
            for s in range(n_seeds):
                step = T / (bs**a * c**b) * math.exp(rng.normal(0, sd))
                rows.append(
                    {
                        "run_name": f"b{bs}_c{c}_s{s}",
                        "metric": "prefix_matching",
                        "method": "threshold",
                        "step": step,
                        "tokens": step * bs * c,
                        "censored": False,
                        "threshold": 0.4,
                        "last_step": 10 * step,
                        "preset": "attn2l",
                        "batch_size": bs,
                        "context_length": c,
                        "seed": s,
                    }
                )
    return pd.DataFrame(rows)


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
    assert fit.wald_p_value < 1e-6
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


def test_tobit_cluster_sandwich_matches_statsmodels_ols_cluster():
    # Without censoring the Tobit MLE is OLS, and its cluster sandwich (reparameterisation
    # invariant) equals statsmodels' cluster covariance up to its (N - 1) / (N - K) factor.
    table = _scattered_table(3)
    ols = fit_emergence_law(table, leave_one_out=False)
    tobit = fit_emergence_law(table, censored="tobit", leave_one_out=False)
    assert ols.n_clusters == tobit.n_clusters == 9 and ols.df_resid == tobit.df_resid == 6
    np.testing.assert_allclose(tobit.params, ols.params, rtol=1e-7)
    n, k = len(table), 3
    np.testing.assert_allclose(tobit.cov * (n - 1) / (n - k), ols.cov, rtol=1e-5)


def test_tobit_converges_without_warnings_on_well_posed_data(caplog):
    table = synthetic_table(seed=2, sd=0.1)
    table = _censor_slowest(table, budget=float(np.quantile(table.step, 0.8)))
    assert 0 < table.censored.sum() < len(table) // 2
    with caplog.at_level(logging.WARNING, logger="ih_kedro.science.statistics.emergence_law"):
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
