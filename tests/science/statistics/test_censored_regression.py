"""Known answers for the censored regression core: OLS with clustered covariance, the Tobit
likelihood, Newton's method, the cluster sandwich and the Tobit fit.

The estimators are called directly on tiny hand-built inputs, and every expected value is
computed here independently (statsmodels OLS, scipy densities, numerical derivatives and an
independent censored MLE), or is a literal message. Newton's method is pinned on stub
objectives whose line-search outcome is known exactly.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats

from ih_kedro.science.statistics import censored_regression as cr
from tests.science.statistics.censored_mle import independent_tobit
from tests.science.statistics.cr2_reference import cr2_reference

LOGGER = "ih_kedro.science.statistics.censored_regression"


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


# ------------------------------------------------------------------ fit_ols


def _ols_data(n_configs: int, n_seeds: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    b = np.repeat(np.log(2.0 ** np.arange(n_configs)), n_seeds)
    c = np.repeat(np.log(3.0 ** ((np.arange(n_configs) * 2) % 5)), n_seeds)
    X = np.column_stack([np.ones(b.size), b, c])  # (n, 3)
    y = 8.0 - 0.4 * b - 0.6 * c + rng.normal(0, 0.2, b.size)
    return y, X, np.repeat(np.arange(n_configs), n_seeds)


def test_ols_without_repeats_or_with_few_clusters_is_classical() -> None:
    for n_configs, n_seeds in ((10, 1), (4, 2)):  # no repeats; G = k + 1
        y, X, groups = _ols_data(n_configs, n_seeds)
        core = cr.fit_ols(y, X, groups)
        ols = sm.OLS(y, X).fit()
        assert core.n_clusters == 0 and core.df_resid == len(y) - 3
        np.testing.assert_allclose(core.cov, ols.cov_params(), rtol=1e-10)
        np.testing.assert_allclose(core.params, ols.params, rtol=1e-10)


def test_ols_with_k_plus_two_clusters_is_cr2_with_bell_mccaffrey_df() -> None:
    y, X, groups = _ols_data(5, 2)  # G = 5 = k + 2
    core = cr.fit_ols(y, X, groups)
    params, cov, df = cr2_reference(y, X, groups)
    assert core.n_clusters == 5 and core.df_resid == 2.0
    np.testing.assert_allclose(core.params, params, rtol=1e-10)
    np.testing.assert_allclose(core.cov, cov, rtol=1e-8)
    np.testing.assert_allclose(core.df_coef, df, rtol=1e-8)
    # Each coefficient's CI is t on its own df.
    se = math.sqrt(cov[1, 1])
    q = stats.t.ppf(0.975, df[1])
    assert cr.coefficient_ci(core, 1, 0.95) == pytest.approx(
        (params[1] - q * se, params[1] + q * se), rel=1e-9
    )
    # The kept statsmodels results are the classical OLS fit (residuals, diagnostics).
    np.testing.assert_allclose(core.results.resid, y - X @ params, atol=1e-10)


def test_cr2_of_singletons_is_hc2_and_of_a_mean_is_the_classical_t() -> None:
    y, X, _ = _ols_data(8, 1)
    cov, _ = cr.cr2_covariance(X, y - X @ np.linalg.lstsq(X, y, rcond=None)[0], np.arange(8))
    np.testing.assert_allclose(cov, sm.OLS(y, X).fit(cov_type="HC2").cov_params(), rtol=1e-8)
    # A mean over balanced clusters: CR2 is the variance of the cluster means over G, on G - 1
    # Bell–McCaffrey df, whatever the within-cluster scatter.
    groups = np.repeat(np.arange(6), 3)
    y = np.random.default_rng(0).normal(size=18)
    ones = np.ones((18, 1))
    cov, blocks = cr.cr2_covariance(ones, y - y.mean(), groups)
    means = y.reshape(6, 3).mean(axis=1)
    assert cov[0, 0] == pytest.approx(np.var(means, ddof=1) / 6, rel=1e-10)
    assert cr.bell_mccaffrey_df(blocks, np.ones(1)) == pytest.approx(5.0, rel=1e-10)


def test_clustered_ols_sigma_is_the_sd_of_a_new_run_at_a_new_configuration() -> None:
    # Balanced seeds: between-configuration mean square (G - k df) + (1 - 1/m) within.
    y, X, groups = _ols_data(6, 2)
    core = cr.fit_ols(y, X, groups)
    resid = (y - X @ np.linalg.lstsq(X, y, rcond=None)[0]).reshape(6, 2)
    between = 2 * np.sum(resid.mean(axis=1) ** 2) / (2 * (6 - 3))
    within = np.sum((resid - resid.mean(axis=1, keepdims=True)) ** 2) / (12 - 6)
    assert core.sigma == pytest.approx(math.sqrt(between + 0.5 * within), rel=1e-10)


# ------------------------------------------------------------------ Tobit likelihood


def test_tobit_terms_equal_scipy_densities_and_numerical_derivatives() -> None:
    rng = np.random.default_rng(5)
    X = np.column_stack([np.ones(6), np.log([1.0, 2, 4, 8, 16, 32])])  # (6, 2)
    y = 5.0 - 0.5 * X[:, 1] + rng.normal(0, 0.3, 6)
    censored = np.array([False, True, False, False, True, False])
    beta, sigma = np.array([4.8, -0.45]), 0.4
    theta = np.append(beta / sigma, 1.0 / sigma)  # Olsen: (beta / sigma, 1 / sigma)
    nll, grad, hessian, scores = cr._tobit_terms(theta, y, X, censored)
    mu = X @ beta
    expected = -(
        stats.norm.logpdf(y[~censored], mu[~censored], sigma).sum()
        + stats.norm.logsf(y[censored], mu[censored], sigma).sum()
    )
    assert nll == pytest.approx(expected, rel=1e-12)

    def f(t: np.ndarray) -> float:
        return cr._tobit_terms(t, y, X, censored)[0]

    h = 1e-5
    eye = np.eye(3)
    num_grad = np.array([(f(theta + h * e) - f(theta - h * e)) / (2 * h) for e in eye])
    np.testing.assert_allclose(grad, num_grad, rtol=1e-6)
    np.testing.assert_allclose(scores.sum(axis=0), grad, rtol=1e-12)
    num_hess = np.array(
        [
            (
                cr._tobit_terms(theta + h * e, y, X, censored)[1]
                - cr._tobit_terms(theta - h * e, y, X, censored)[1]
            )
            / (2 * h)
            for e in eye
        ]
    )
    np.testing.assert_allclose(hessian, num_hess, rtol=1e-5)


# ------------------------------------------------------------------ Newton on stub objectives

Terms = tuple[float, np.ndarray, np.ndarray, np.ndarray]


def _stub(
    table: Callable[[tuple[float, ...]], tuple[float, list[float], list[list[float]]]],
) -> Callable[..., Terms]:
    calls = {"n": 0}

    def terms(theta: np.ndarray, y: Any, X: Any, censored: Any) -> Terms:
        calls["n"] += 1
        if calls["n"] > 2000:
            raise RuntimeError("Newton's line search does not end")
        nll, grad, hessian = table(tuple(float(v) for v in theta))
        return nll, np.array(grad, float), np.array(hessian, float), np.zeros((1, 2))

    return terms


def _newton(monkeypatch: pytest.MonkeyPatch, table: Callable, theta0: list[float]):
    monkeypatch.setattr(cr, "_tobit_terms", _stub(table))
    theta, converged = cr._tobit_newton(np.array(theta0), None, None, None)
    return [float(v) for v in theta], converged


EYE = [[1.0, 0.0], [0.0, 1.0]]
ZERO = [0.0, 0.0]


def _points(values: dict[tuple[float, ...], float], start: tuple[float, ...] = (0.0, 1.0)):
    """nll by point; the start has gradient (1, 0) and identity Hessian (a unit step along
    -x), every other point zero gradient; points not listed have nll 2 (never accepted)."""

    def table(theta: tuple[float, ...]):
        if theta == start:
            return 1.0, [1.0, 0.0], EYE
        return values.get(theta, 2.0), ZERO, EYE

    return table


def test_newton_backtracks_by_halves_with_the_armijo_condition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Step 1 rises, step 1/2 decreases by 1e-4: accepted at 1/2 (Armijo 1e-4 * 1/2 * 1).
    table = _points({(-1.0, 1.0): 1.00001, (-0.5, 1.0): 0.9999})
    assert _newton(monkeypatch, table, [0.0, 1.0]) == ([-0.5, 1.0], True)
    # Full step taken when it decreases (not a doubled step).
    table = _points({(-1.0, 1.0): 0.5, (-2.0, 1.0): 0.0})
    assert _newton(monkeypatch, table, [0.0, 1.0]) == ([-1.0, 1.0], True)
    # Exactly the Armijo bound is enough.
    table = _points({(-1.0, 1.0): 1.0 - 1e-4 * 1.0 * 1.0})
    assert _newton(monkeypatch, table, [0.0, 1.0]) == ([-1.0, 1.0], True)
    # Accepted at 1/4 after two halvings.
    table = _points({(-0.25, 1.0): 0.5})
    assert _newton(monkeypatch, table, [0.0, 1.0]) == ([-0.25, 1.0], True)


def test_newton_keeps_tau_positive(monkeypatch: pytest.MonkeyPatch) -> None:
    def table(theta: tuple[float, ...]):
        if theta == (0.0, 1.0):
            return 1.0, [0.0, 1.0], EYE  # the unit step lands on tau = 0
        return (0.0 if theta == (0.0, 0.0) else 0.5 if theta == (0.0, 0.5) else 2.0), ZERO, EYE

    assert _newton(monkeypatch, table, [0.0, 1.0]) == ([0.0, 0.5], True)


@pytest.mark.parametrize(
    ("nll", "decrement", "moves"),
    [(100.0, 1e-11, False), (0.5, 1.5e-12, True), (0.5, 1e-12, True)],
)
def test_newton_stops_when_the_decrement_is_below_1e_12_of_the_nll(
    monkeypatch: pytest.MonkeyPatch, nll: float, decrement: float, moves: bool
) -> None:
    def table(theta: tuple[float, ...]):
        if theta == (0.0, 1.0):  # gradient (1, 0), Hessian diag(1 / decrement, 1)
            return nll, [1.0, 0.0], [[1.0 / decrement, 0.0], [0.0, 1.0]]
        return -1.0, ZERO, EYE

    theta, converged = _newton(monkeypatch, table, [0.0, 1.0])
    direction = np.linalg.solve([[1.0 / decrement, 0.0], [0.0, 1.0]], [1.0, 0.0])
    assert converged and theta == ([-float(direction[0]), 1.0] if moves else [0.0, 1.0])


@pytest.mark.parametrize(
    ("nll", "decrement", "converged"),
    [
        (0.5, 1e-8, False),
        (0.5, 5e-9, True),
        (0.5, 1.5e-8, False),
        (100.0, 1e-7, True),
        (100.0, 1e-5, False),
    ],
)
def test_newton_without_any_decrease_converged_only_below_1e_8_of_the_nll(
    monkeypatch: pytest.MonkeyPatch, nll: float, decrement: float, converged: bool
) -> None:
    hessian = [[1.0 / decrement, 0.0], [0.0, 1.0]]

    def table(theta: tuple[float, ...]):
        return (nll if theta == (0.0, 1.0) else nll + 1.0), [1.0, 0.0], hessian

    assert _newton(monkeypatch, table, [0.0, 1.0]) == ([0.0, 1.0], converged)


def test_newton_fails_on_a_singular_hessian_and_after_200_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    singular = _newton(
        monkeypatch, lambda t: (1.0, [1.0, 0.0], [[0.0, 0.0], [0.0, 0.0]]), [0.0, 1.0]
    )
    assert singular == ([0.0, 1.0], False)
    # An unbounded objective: every unit step is accepted; Newton gives up after 200.
    endless = _newton(monkeypatch, lambda t: (t[0], [1.0, 0.0], EYE), [0.0, 1.0])
    assert endless == ([-200.0, 1.0], False)


# ------------------------------------------------------------------ _cluster_meat


def test_cluster_meat_sums_scores_within_clusters() -> None:
    scores = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5], [2.0, 1.0], [-1.0, 4.0]])  # (5, 2)
    groups = np.array(["a", "a", "b", "c", "c"])
    sums = np.array([[4.0, 1.0], [0.5, 0.5], [1.0, 5.0]])  # (G, p)
    np.testing.assert_allclose(cr._cluster_meat(scores, groups), sums.T @ sums * 3 / 2, rtol=1e-15)
    # G = 2 clusters with one score column: G > p, so a meat.
    one = scores[:4, :1]
    two = np.array(["a", "a", "b", "b"])
    np.testing.assert_allclose(cr._cluster_meat(one, two), [[(16.0 + 2.5**2) * 2]], rtol=1e-15)
    assert cr._cluster_meat(scores, np.arange(5)) is None  # no repeated configuration
    assert cr._cluster_meat(scores[:4], two) is None  # G = p
    assert cr._cluster_meat(scores, None) is None


# ------------------------------------------------------------------ fit_tobit


def _two_emerged() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two emerged runs at B = 2, censored at B = 1 (above) and B = 8 (below): a finite MLE
    with no more emerged runs than coefficients (no OLS start)."""
    b = np.array([2.0, 2.0, 1.0, 1.0, 8.0, 8.0])
    y = np.log([1100.0, 900.0, 1200.0, 1300.0, 400.0, 450.0])
    X = np.column_stack([np.ones(6), np.log(b)])  # (6, 2)
    return y, X, np.array([False, False, True, True, True, True])


def test_tobit_with_as_many_emerged_runs_as_coefficients_equals_an_independent_mle() -> None:
    y, X, censored = _two_emerged()
    core = cr.fit_tobit(y, X, censored)
    theta = independent_tobit(y, X, censored)
    np.testing.assert_allclose(core.params, theta[:-1], atol=1e-5)
    assert core.sigma == pytest.approx(theta[-1], rel=1e-5)
    assert core.n_clusters == 0 and math.isinf(core.df_resid)


def test_tobit_warns_when_newton_fails_and_on_a_singular_information(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    y, X, censored = _two_emerged()
    x = X[:, 1]
    duplicate = np.column_stack([np.ones(6), x, x])  # (6, 3): singular information
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        core = cr.fit_tobit(y, duplicate, censored)
    assert messages(caplog) == [
        "tobit: Newton's method did not converge",
        "tobit: singular information matrix; CIs are undefined",
    ]
    assert core.cov.shape == (3, 3) and np.isnan(core.cov).all()
    caplog.clear()
    newton = cr._tobit_newton
    monkeypatch.setattr(cr, "_tobit_newton", lambda *args: (newton(*args)[0], False))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        cr.fit_tobit(y, X, censored)
    assert messages(caplog) == ["tobit: Newton's method did not converge"]


# ------------------------------------------------------------------ coefficient_ci


def test_coefficient_ci_of_a_zero_and_of_a_negative_variance() -> None:
    core = cr.RegressionFit(
        params=np.array([2.0, 3.0]), cov=np.diag([0.0, -1.0]), sigma=1.0, df_resid=5.0
    )
    assert cr.coefficient_ci(core, 0, 0.95) == (2.0, 2.0)
    low, high = cr.coefficient_ci(core, 1, 0.95)
    assert math.isnan(low) and math.isnan(high)
