"""Frontier model, value checks: every number is computed independently in the test (direct
stationarity of the (penalised) log-likelihood by finite differences, closed-form OLS, hand-worked
contours and budget shifts), so that a changed constant or operator in the module shows."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as student_t

from ih_kedro.science.statistics import pareto_frontier as pf

# 12 runs, not separable by any line in (log f, log r).
F = np.array([0.1, 0.1, 0.2, 0.2, 0.4, 0.4, 0.8, 0.8, 0.1, 0.8, 0.2, 0.4])
R = np.array([0.2, 0.5, 0.2, 0.5, 0.2, 0.5, 0.2, 0.5, 1.0, 1.0, 1.0, 0.2])
Y = np.array([0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0], dtype=float)


def _x(f, r):
    return np.column_stack([np.ones(len(f)), np.log(f), np.log(r)])


def _loglik(X, y, beta):
    eta = X @ beta
    return float(np.sum(y * eta - np.log1p(np.exp(eta))))


def _info(X, beta):
    p = 1 / (1 + np.exp(-(X @ beta)))
    return (X * (p * (1 - p))[:, None]).T @ X


def _penalised(X, y, beta):
    return _loglik(X, y, beta) + 0.5 * math.log(np.linalg.det(_info(X, beta)))


def _gradient(fun, beta, h=1e-5):
    """Central finite differences."""
    steps = np.eye(len(beta)) * h
    return np.array([(fun(beta + e) - fun(beta - e)) / (2 * h) for e in steps])


def _assert_maximum(fun, beta, tol=1e-6):
    """``beta`` is a stationary point of ``fun`` and ``fun`` is lower a little way off."""
    assert np.max(np.abs(_gradient(fun, beta))) < tol, _gradient(fun, beta)
    value = fun(beta)
    for e in np.vstack([np.eye(len(beta)), -np.eye(len(beta))]) * 1e-3:
        assert fun(beta + e) < value


def _fit(coef, cov=None, level=0.95):
    return pf.FrontierFit(
        coef=np.asarray(coef, dtype=float),
        cov=np.eye(3) if cov is None else np.asarray(cov, dtype=float),
        method="firth",
        n_runs=10,
        n_formed=5,
        converged=True,
        level=level,
    )


# --------------------------------------------------------------------------------------------
# Status helpers
# --------------------------------------------------------------------------------------------
def test_emergence_status_keeps_index_and_name_and_reads_step_strings():
    table = pd.DataFrame(
        {"step": ["120", "inf", "nan", "7"], "censored": [0, 0, 1, 0]}, index=[5, 6, 7, 8]
    )
    status = pf.emergence_status(table)
    assert status.tolist() == ["emerged", "fit_failed", "censored", "emerged"]
    assert status.index.tolist() == [5, 6, 7, 8] and status.name == "status"
    # A missing censored flag is "not censored".
    flags = pd.DataFrame({"censored": [True, None], "step": [3.0, 4.0]})
    assert pf.emergence_status(flags).tolist() == ["censored", "emerged"]
    given = pd.DataFrame({"status": [1, 2]}, index=[3, 4])
    assert pf.emergence_status(given).tolist() == ["1", "2"]


def test_formed_from_status_values_index_and_name():
    status = pd.Series(["censored", "left_censored", "fit_failed", "emerged"], index=[9, 8, 7, 6])
    formed = pf.formed_from_status(status)
    assert formed.index.tolist() == [9, 8, 7, 6] and formed.name == "formed"
    assert formed.iloc[[0, 1, 3]].tolist() == [0.0, 1.0, 1.0] and np.isnan(formed.iloc[2])


# --------------------------------------------------------------------------------------------
# FrontierFit
# --------------------------------------------------------------------------------------------
def test_se_and_wald_interval_values():
    fit = _fit([1.0, 2.0, -3.0], cov=np.diag([4.0, -1.0, 0.25]), level=0.9)
    np.testing.assert_allclose(fit.se, [2.0, 0.0, 0.5])
    z = 1.6448536269514722  # norm.ppf(0.95)
    np.testing.assert_allclose(
        fit.conf_int(), [[1 - 2 * z, 1 + 2 * z], [2.0, 2.0], [-3 - 0.5 * z, -3 + 0.5 * z]]
    )


def test_monotone_increasing_needs_both_slopes_strictly_positive():
    assert _fit([-5.0, 0.1, 0.2]).monotone_increasing is True
    assert _fit([0.0, 0.0, 1.0]).monotone_increasing is False
    assert _fit([0.0, 1.0, 0.0]).monotone_increasing is False
    assert _fit([0.0, -1.0, 1.0]).monotone_increasing is False
    assert _fit([0.0, 1.0, -1.0]).monotone_increasing is False


def test_linear_predictor_probability_contour_and_distance_values():
    fit = _fit([1.0, 2.0, 4.0])
    # eta = 1 + 2 log 0.5 + 4 log 0.25 = 1 - 10 log 2
    eta = 1 - 10 * math.log(2)
    assert fit.linear_predictor(0.5, 0.25) == pytest.approx(eta)
    assert fit.probability(0.5, 0.25) == pytest.approx(1 / (1 + math.exp(-eta)))
    # 50% contour: log r = -(1 + 2 log f) / 4; 80% contour: log r = (log 4 - 1 - 2 log f) / 4
    np.testing.assert_allclose(
        fit.contour(np.array([0.5, 2.0])),
        np.exp([-(1 - 2 * math.log(2)) / 4, -(1 + 2 * math.log(2)) / 4]),
    )
    assert fit.contour(np.array([0.5]), p=0.8)[0] == pytest.approx(
        math.exp((math.log(4) - 1 + 2 * math.log(2)) / 4)
    )
    assert fit.distance(0.5, 0.25) == pytest.approx(eta / math.sqrt(20))
    # |(b1, b2)| = 0.5 < 1 still has a distance.
    small = _fit([1.0, 0.3, 0.4])
    assert small.distance(1.0, 1.0) == pytest.approx(2.0)


def test_object_dtype_inputs_are_read_as_numbers():
    # Columns of a mixed table arrive as object arrays; the knobs are converted to float.
    fit = _fit([1.0, 2.0, 4.0])
    f, r = np.array([0.5], dtype=object), np.array([0.25], dtype=object)
    assert fit.linear_predictor(f, r)[0] == pytest.approx(1 - 10 * math.log(2))
    growth = pf.GrowthFit(7.0, -0.5, (6.0, 8.0), (-1.0, -0.25), 10, 0.9, "ok")
    assert growth.predict(np.array([2.0], dtype=object))[0] == pytest.approx(math.exp(6.0))
    d = np.array([0.0, 1.0, 2.0, None], dtype=object)
    s = np.array([100.0, 50.0, 25.0, None], dtype=object)
    ols = pf.fit_sstar_growth(d, s)
    assert ols.n == 3 and ols.beta == pytest.approx(-math.log(2))
    grid = np.array([0.5], dtype=object)
    row = pf.budget_shift(fit, growth, grid, factors=(2.0,)).iloc[0]
    shift = math.log(2) / -0.5
    expected = math.exp((shift * math.sqrt(20) - 1.0 - 2.0 * math.log(0.5)) / 4.0)
    assert row["reliability_50"] == pytest.approx(expected)


def test_contour_and_distance_are_nan_without_a_frontier():
    flat = _fit([1.0, 2.0, 0.0])
    contour = flat.contour(np.array([0.1, 0.2]))
    assert contour.shape == (2,) and np.isnan(contour).all()
    assert np.isnan(_fit([1.0, 2.0, -1.0]).contour(np.array([0.1]))).all()
    none = _fit([1.0, 0.0, 0.0])
    distance = none.distance(np.array([0.1, 0.2, 0.3]), np.array([0.5, 0.5, 0.5]))
    assert distance.shape == (3,) and np.isnan(distance).all()
    # Only one slope non-zero still has a distance: |b| = |b1|.
    assert _fit([1.0, -2.0, 0.0]).distance(1.0, 0.5) == pytest.approx(0.5)


# --------------------------------------------------------------------------------------------
# Design, penalised likelihood, Firth, separation
# --------------------------------------------------------------------------------------------
def test_design_matrix_and_its_domain():
    X = pf._design(np.array([1.0, math.e]), np.array([math.e**2, 1.0]))
    np.testing.assert_allclose(X, [[1.0, 0.0, 2.0], [1.0, 1.0, 0.0]])
    with pytest.raises(ValueError, match="must be > 0"):
        pf._design(np.array([0.5, 0.0]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="must be > 0"):
        pf._design(np.array([0.5, 0.5]), np.array([0.5, 0.0]))
    with pytest.raises(ValueError, match="must be > 0"):
        pf._design(np.array([0.5, 0.5]), np.array([-0.5, 0.5]))


def test_penalised_loglik_value_and_singular_information():
    X = _x(F, R)
    beta = np.array([0.3, -0.4, 0.7])
    expected = _loglik(X, Y, beta) + 0.5 * math.log(np.linalg.det(_info(X, beta)))
    assert pf._penalised_loglik(X, Y, beta) == pytest.approx(expected, rel=1e-12)
    # Two identical columns: the information matrix is singular.
    singular = np.column_stack([np.ones(4), np.arange(4.0), np.arange(4.0)])
    assert pf._penalised_loglik(singular, np.array([0, 1, 0, 1.0]), np.zeros(3)) == -math.inf


def test_firth_maximises_the_penalised_likelihood():
    X = _x(F, R)
    beta, cov, converged = pf._firth(X, Y)
    _assert_maximum(lambda b: _penalised(X, Y, b), beta)
    np.testing.assert_allclose(cov, np.linalg.inv(_info(X, beta)), rtol=1e-8)
    assert converged is True
    # One iteration cannot reach the optimum from zero.
    assert pf._firth(X, Y, max_iter=1)[2] is False


def test_firth_under_separation_is_finite_and_optimal():
    f = np.repeat([0.1, 0.2, 0.4, 0.8], 3)
    r = np.tile([0.1, 0.3, 0.9], 4)
    y = (np.log(f) + np.log(r) > math.log(0.05)).astype(float)
    X = _x(f, r)
    assert pf._separable(X, y)
    beta, _, converged = pf._firth(X, y)
    assert converged and np.isfinite(beta).all()
    _assert_maximum(lambda b: _penalised(X, y, b), beta)


def test_separable_cases():
    X = _x(F, R)
    assert pf._separable(X, Y) is False
    assert pf._separable(X, np.ones(len(Y))) is True
    assert pf._separable(X, np.zeros(len(Y))) is True
    # Quasi-complete: the two runs on the line x = 0 have both outcomes.
    Xq = np.column_stack([np.ones(5), [-2.0, -1.0, 0.0, 0.0, 1.0], np.zeros(5)])
    assert pf._separable(Xq, np.array([0, 0, 0, 1, 1.0])) is True
    assert pf._separable(Xq, np.array([1, 0, 0, 1, 0.0])) is False


# --------------------------------------------------------------------------------------------
# fit_frontier
# --------------------------------------------------------------------------------------------
def test_fit_frontier_firth_fields():
    fit = pf.fit_frontier(list(F), list(R), list(Y), level=0.8)
    X = _x(F, R)
    _assert_maximum(lambda b: _penalised(X, Y, b), fit.coef)
    np.testing.assert_allclose(fit.coef, [2.047006, 1.092818, 0.732251], atol=1e-6)
    np.testing.assert_allclose(fit.cov, np.linalg.inv(_info(X, fit.coef)), rtol=1e-8)
    assert (fit.method, fit.n_runs, fit.n_formed, fit.level) == ("firth", 12, 6, 0.8)
    assert fit.converged is True and fit.separated is False and fit.extra == {}


def test_fit_frontier_mle_maximises_the_likelihood():
    fit = pf.fit_frontier(F, R, Y, method="mle")
    X = _x(F, R)
    _assert_maximum(lambda b: _loglik(X, Y, b), fit.coef)
    np.testing.assert_allclose(fit.cov, np.linalg.inv(_info(X, fit.coef)), rtol=1e-6)
    assert (fit.method, fit.n_runs, fit.n_formed, fit.level) == ("mle", 12, 6, 0.95)
    assert fit.converged is True and fit.separated is False


def test_fit_frontier_rejects_bad_input():
    with pytest.raises(ValueError, match="'probit' is not one of"):
        pf.fit_frontier(F, R, Y, method="probit")
    with pytest.raises(ValueError, match="one 0/1 value per run"):
        pf.fit_frontier(F, R, Y[:-1])
    with pytest.raises(ValueError, match="one 0/1 value per run"):
        pf.fit_frontier(F, R, np.r_[Y[:-1], 0.5])
    with pytest.raises(ValueError, match="need at least 3 runs, got 2"):
        pf.fit_frontier(F[:2], R[:2], [0.0, 1.0])
    # Three runs are enough.
    fit = pf.fit_frontier(F[:3], R[:3], [0.0, 1.0, 0.0])
    assert fit.n_runs == 3 and fit.n_formed == 1


# --------------------------------------------------------------------------------------------
# bootstrap_contour
# --------------------------------------------------------------------------------------------
def _bootstrap_runs() -> pd.DataFrame:
    rows = []
    for i, (f, r, y) in enumerate(zip(F, R, Y, strict=True)):
        for seed in range(2):
            formed = y if seed == 0 else float((i * 7 + 3) % 5 < 2)
            rows.append({"frequency": f, "reliability": r, "formed": formed, "cell": i // 2})
    return pd.DataFrame(rows)


def _reference_band(runs, grid, n_bootstrap, seed, unit, level):
    """Percentile band by hand: resample, refit with ``_firth`` and take percentiles."""
    rng = np.random.default_rng(seed)
    if unit == "cell":
        cells = list(dict.fromkeys(runs["cell"]))
        groups = [np.flatnonzero(runs["cell"].to_numpy() == c) for c in cells]
    else:
        groups = [np.array([i]) for i in range(len(runs))]
    curves = []
    for _ in range(n_bootstrap):
        picks = rng.integers(0, len(groups), size=len(groups))
        sample = runs.iloc[np.concatenate([groups[i] for i in picks])]
        y = sample["formed"].to_numpy(dtype=float)
        if y.min() == y.max():
            continue
        b, _, _ = pf._firth(_x(sample["frequency"].to_numpy(), sample["reliability"].to_numpy()), y)
        with np.errstate(all="ignore"):
            log_r = (-b[0] - b[1] * np.log(grid)) / b[2] if b[2] > 0 else np.full(len(grid), np.nan)
        curves.append(log_r)
    stack = np.array(curves)
    tail = 100 * (1 - level) / 2
    with np.errstate(all="ignore"):
        low = [np.exp(np.percentile(c[np.isfinite(c)], tail)) for c in stack.T]
        high = [np.exp(np.percentile(c[np.isfinite(c)], 100 - tail)) for c in stack.T]
    return np.array(low), np.array(high), np.isfinite(stack).sum(axis=0)


@pytest.mark.parametrize(("unit", "level"), [("run", 0.8), ("cell", 0.9)])
def test_bootstrap_band_matches_a_hand_resampling(unit, level):
    runs = _bootstrap_runs()
    grid = np.array([0.15, 0.3, 0.6])
    band = pf.bootstrap_contour(runs, grid, n_bootstrap=12, seed=4, unit=unit, level=level)
    low, high, valid = _reference_band(runs, grid, 12, 4, unit, level)
    np.testing.assert_allclose(band["band_low"], low, rtol=1e-10)
    np.testing.assert_allclose(band["band_high"], high, rtol=1e-10)
    assert band["n_replicates"].tolist() == valid.tolist()
    assert band["n_replicates"].dtype.kind == "i"
    full = pf.fit_frontier(runs["frequency"], runs["reliability"], runs["formed"])
    b = full.coef
    np.testing.assert_allclose(band["reliability_50"], np.exp(-(b[0] + b[1] * np.log(grid)) / b[2]))
    np.testing.assert_allclose(band["frequency"], grid)
    assert band["n_bootstrap"].tolist() == [12] * 3 and band["level"].tolist() == [level] * 3
    assert list(band.columns) == [
        "frequency",
        "reliability_50",
        "band_low",
        "band_high",
        "n_replicates",
        "n_bootstrap",
        "level",
    ]


def test_bootstrap_point_contour_uses_the_chosen_method():
    runs = _bootstrap_runs()
    grid = np.array([0.3])
    band = pf.bootstrap_contour(runs, grid, n_bootstrap=0, method="mle")
    b = pf.fit_frontier(runs["frequency"], runs["reliability"], runs["formed"], method="mle").coef
    firth = pf.fit_frontier(runs["frequency"], runs["reliability"], runs["formed"]).coef
    expected = math.exp(-(b[0] + b[1] * math.log(0.3)) / b[2])
    assert band["reliability_50"].iloc[0] == pytest.approx(expected, rel=1e-9)
    assert abs(expected - math.exp(-(firth[0] + firth[1] * math.log(0.3)) / firth[2])) > 1e-3


def test_bootstrap_without_replicates_gives_nan_bands():
    runs = _bootstrap_runs()
    band = pf.bootstrap_contour(runs, np.array([0.2, 0.4]), n_bootstrap=0)
    assert band["band_low"].isna().all() and band["band_high"].isna().all()
    assert band["n_replicates"].tolist() == [0, 0] and band["n_bootstrap"].tolist() == [0, 0]
    with pytest.raises(ValueError, match="'seed' is not 'run' or 'cell'"):
        pf.bootstrap_contour(runs, np.array([0.2]), unit="seed")


def test_bootstrap_skips_replicates_with_one_outcome():
    # Two cells; a replicate that draws the same cell twice has one outcome only and is left
    # out. The others hold the same runs as the full data, so their contour is the full one.
    runs = pd.DataFrame(
        {
            "frequency": [0.1, 0.2, 0.4, 0.8],
            "reliability": [0.2, 0.3, 0.6, 0.9],
            "formed": [0.0, 0.0, 1.0, 1.0],
            "cell": ["a", "a", "b", "b"],
        }
    )
    rng = np.random.default_rng(2)
    mixed = sum(len(set(rng.integers(0, 2, size=2).tolist())) == 2 for _ in range(10))
    assert 0 < mixed < 10
    band = pf.bootstrap_contour(runs, np.array([0.3]), n_bootstrap=10, seed=2, unit="cell")
    assert band["n_replicates"].tolist() == [mixed]
    assert band["band_low"].iloc[0] == pytest.approx(band["reliability_50"].iloc[0])
    assert band["band_high"].iloc[0] == pytest.approx(band["reliability_50"].iloc[0])


# --------------------------------------------------------------------------------------------
# Pareto set
# --------------------------------------------------------------------------------------------
def test_pareto_minimal_cells_ties_threshold_order_and_index():
    cells = pd.DataFrame(
        {
            "frequency": [0.4, 0.1, 0.1, 0.2, 0.2, 0.3, 0.35, 0.05],
            "reliability": [0.1, 0.5, 0.8, 0.3, 0.3, 0.3, 0.2, 0.05],
            "formed_share": [1.0, 0.75, 1.0, 0.5, 0.5, 1.0, 0.6, 0.49],
            "cell": list("abcdefgh"),
        },
        index=[10, 11, 12, 13, 14, 15, 16, 17],
    )
    # c is dominated by b (same f, lower r), f by d (lower f, same r); d and e are identical
    # and do not dominate each other; h is below min_share.
    minimal = pf.pareto_minimal_cells(cells)
    assert minimal["frequency"].tolist() == [0.1, 0.2, 0.2, 0.35, 0.4]
    assert list(minimal.columns) == list(cells.columns)
    assert minimal["cell"].iloc[[0, 3, 4]].tolist() == ["b", "g", "a"]
    assert set(minimal["cell"].iloc[1:3]) == {"d", "e"}
    assert minimal.index.tolist() == [0, 1, 2, 3, 4]
    strict = pf.pareto_minimal_cells(cells, min_share=0.6)
    assert strict["cell"].tolist() == ["b", "f", "g", "a"]


# --------------------------------------------------------------------------------------------
# S* growth and budget shift
# --------------------------------------------------------------------------------------------
def test_growth_fit_matches_closed_form_ols():
    d = np.array([0.1, 0.5, 0.9, 1.4, 2.0, 2.2, 6.0, np.nan, 1.0, 1.0, 3.0])
    s = np.array([900.0, 700.0, 520.0, 400.0, 260.0, 250.0, 0.5, 300.0, 0.0, -5.0, np.inf])
    growth = pf.fit_sstar_growth(d, s, level=0.9)
    x, yv = d[:7], np.log(s[:7])
    n = 7
    beta = np.sum((x - x.mean()) * (yv - yv.mean())) / np.sum((x - x.mean()) ** 2)
    alpha = yv.mean() - beta * x.mean()
    resid = yv - alpha - beta * x
    sigma2 = np.sum(resid**2) / (n - 2)
    se_b = math.sqrt(sigma2 / np.sum((x - x.mean()) ** 2))
    se_a = math.sqrt(sigma2 * (1 / n + x.mean() ** 2 / np.sum((x - x.mean()) ** 2)))
    q = student_t.ppf(0.95, n - 2)
    assert growth.status == "ok" and growth.n == 7
    assert growth.beta == pytest.approx(beta) and growth.alpha == pytest.approx(alpha)
    assert growth.beta_ci == pytest.approx((beta - q * se_b, beta + q * se_b))
    assert growth.alpha_ci == pytest.approx((alpha - q * se_a, alpha + q * se_a))
    r2 = 1 - np.sum(resid**2) / np.sum((yv - yv.mean()) ** 2)
    assert growth.r_squared == pytest.approx(r2)
    assert growth.predict(2.0) == pytest.approx(math.exp(alpha + 2 * beta))


def test_growth_fit_needs_three_runs_with_spread():
    three = pf.fit_sstar_growth([0.0, 1.0, 2.0], [100.0, 50.0, 30.0])
    assert three.status == "ok" and three.n == 3
    flat = pf.fit_sstar_growth([1.0, 1.0, 1.0, 2.0], [100.0, 50.0, 30.0, 0.0])
    assert flat.status == "too_few_emerged_runs" and flat.n == 3
    assert math.isnan(flat.alpha) and math.isnan(flat.beta) and math.isnan(flat.r_squared)
    assert all(math.isnan(v) for v in flat.alpha_ci + flat.beta_ci)


def _growth(beta, beta_ci, status="ok"):
    return pf.GrowthFit(
        alpha=7.0, beta=beta, alpha_ci=(6.0, 8.0), beta_ci=beta_ci, n=10, r_squared=0.9,
        status=status,
    )  # fmt: skip


def test_budget_shift_values():
    fit = _fit([1.0, 3.0, 4.0])  # |(b1, b2)| = 5
    grid = np.array([0.5, 2.0])
    table = pf.budget_shift(fit, _growth(-0.5, (-1.0, -0.25)), grid, factors=(2.0, 8.0))
    assert table["budget_factor"].tolist() == [2.0, 2.0, 8.0, 8.0]
    assert table["frequency"].tolist() == [0.5, 2.0, 0.5, 2.0]
    for k, rows in table.groupby("budget_factor"):
        shift = math.log(k) / -0.5
        assert rows["shift"].tolist() == pytest.approx([shift, shift])
        assert rows["shift_low"].tolist() == pytest.approx([math.log(k) / -0.25] * 2)
        assert rows["shift_high"].tolist() == pytest.approx([math.log(k) / -1.0] * 2)
        expected = np.exp((5 * shift - 1.0 - 3.0 * np.log(grid)) / 4.0)
        np.testing.assert_allclose(rows["reliability_50"], expected)


def test_budget_shift_with_an_open_interval_and_without_growth():
    fit = _fit([1.0, 3.0, 4.0])
    grid = np.array([0.5])
    half = pf.budget_shift(fit, _growth(-0.5, (-1.0, 0.2)), grid, factors=(4.0,))
    row = half.iloc[0]
    assert row["shift"] == pytest.approx(math.log(4) / -0.5)
    assert row["shift_low"] == -math.inf
    assert row["shift_high"] == pytest.approx(math.log(4) / -1.0)
    upper_zero = pf.budget_shift(fit, _growth(-0.5, (-1.0, 0.0)), grid, factors=(4.0,))
    assert upper_zero["shift_low"].iloc[0] == -math.inf
    for growth, frontier in [
        (_growth(0.0, (-1.0, -0.5)), fit),
        (_growth(0.3, (0.1, 0.5)), fit),
        (_growth(-0.5, (-1.0, -0.25), status="too_few_emerged_runs"), fit),
        (_growth(-0.5, (-1.0, -0.25)), _fit([1.0, 3.0, 0.0])),
    ]:
        row = pf.budget_shift(frontier, growth, grid, factors=(2.0,)).iloc[0]
        assert all(math.isnan(row[c]) for c in ("shift", "shift_low", "shift_high")), row
        assert math.isnan(row["reliability_50"])
    # A frontier with 0 < b2 < 1 moves too.
    shallow = _fit([1.0, 0.3, 0.4])
    row = pf.budget_shift(shallow, _growth(-0.5, (-1.0, -0.25)), grid, factors=(2.0,)).iloc[0]
    shift = math.log(2) / -0.5
    expected = math.exp((shift * 0.5 - 1.0 - 0.3 * math.log(0.5)) / 0.4)
    assert row["reliability_50"] == pytest.approx(expected)
    default = pf.budget_shift(fit, _growth(-0.5, (-1.0, -0.25)), grid)
    assert default["budget_factor"].tolist() == [2.0, 4.0]


def test_emergence_status_values():
    table = pd.DataFrame(
        {"censored": [1, 0, 0, 0, 0], "step": ["10", "5", "abc", None, "inf"]},
        index=[4, 3, 2, 1, 0],
    )
    status = pf.emergence_status(table)  # shared with the markov verdicts
    assert status.tolist() == ["censored", "emerged", "fit_failed", "fit_failed", "fit_failed"]
    assert status.index.tolist() == [4, 3, 2, 1, 0]
    # A missing censored flag is "not censored".
    flags = pd.DataFrame({"censored": [True, False, None], "step": [10.0, 5.0, 7.0]})
    assert pf.emergence_status(flags).tolist() == ["censored", "emerged", "emerged"]
    given = pd.DataFrame({"status": [1, 2], "censored": [True, True], "step": [1.0, 1.0]})
    assert pf.emergence_status(given).tolist() == ["1", "2"]
