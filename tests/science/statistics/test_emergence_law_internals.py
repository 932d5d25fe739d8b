"""Known answers for the emergence law's internals: validation, design, estimators, summaries.

The helpers of ``emergence_law`` are called directly on tiny hand-built inputs, and every
expected value is computed here independently (numpy least squares, statsmodels OLS, scipy
densities and an independent censored MLE), or is a literal message. Newton's method is pinned
on stub objectives whose line-search outcome is known exactly.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats

from ih_kedro.science.statistics import emergence_law as el
from ih_kedro.science.statistics.emergence_law import (
    fit_emergence_law,
    fit_summary_dict,
    predict_emergence,
)
from tests.science.statistics.censored_mle import censored_normal_mle

LOGGER = "ih_kedro.science.statistics.emergence_law"
A, B, T = 0.37, 0.62, 1e5


def law_table(
    batches: tuple[float, ...] = (32, 64, 128),
    contexts: tuple[float, ...] = (32, 64, 128),
    n_seeds: int = 2,
    sd: float = 0.1,
    seed: int = 0,
) -> pd.DataFrame:
    """Emergence steps from the law with log-normal noise, one row per (B, C, seed)."""
    rng = np.random.default_rng(seed)
    rows = [
        {
            "run_name": f"b{bs}_c{c}_s{s}",
            "batch_size": bs,
            "context_length": c,
            "seed": s,
            "step": T / (bs**A * c**B) * math.exp(rng.normal(0, sd)),
        }
        for bs in batches
        for c in contexts
        for s in range(n_seeds)
    ]
    return pd.DataFrame(rows)


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def independent_tobit(y: np.ndarray, X: np.ndarray, censored: np.ndarray) -> np.ndarray:
    """Right-censored Gaussian MLE (beta, sigma) with scipy densities and Nelder-Mead."""
    theta = censored_normal_mle(y, X, censored, xatol=1e-11, fatol=1e-13)
    return np.append(theta[:-1], math.exp(theta[-1]))


# ------------------------------------------------------------------ _validate_table


def test_one_law_per_method_and_threshold_and_a_missing_value_is_no_second_law() -> None:
    table = law_table(n_seeds=1)
    two_methods = table.assign(method=["threshold", "changepoint"] * 4 + ["threshold"])
    with pytest.raises(
        ValueError,
        match="^"
        + re.escape(
            "emergence table: one law per method; got ['changepoint', 'threshold'] "
            "(select rows before fitting)"
        )
        + "$",
    ):
        el._validate_table(two_methods, "step", ())
    two_thresholds = table.assign(threshold=[0.4, 0.5] * 4 + [0.4])
    # plain floats, not numpy 2's np.float64(0.4)
    with pytest.raises(
        ValueError,
        match=r"^emergence table: one law per threshold; got \[0\.4, 0\.5\] "
        r"\(select rows before fitting\)$",
    ):
        el._validate_table(two_thresholds, "step", ())
    # A NaN metric is not a second metric.
    el._validate_table(table.assign(metric=["m"] * 8 + [np.nan]), "step", ())


def test_sizes_of_one_are_valid_and_non_numbers_are_named() -> None:
    table = pd.DataFrame({"step": [5.0, 3.0], "batch_size": [1, 2], "context_length": [1, 4]})
    el._validate_table(table, "step", ())
    with pytest.raises(ValueError, match="^emergence table: batch_size must be positive numbers$"):
        el._validate_table(table.assign(batch_size=["abc", 2]), "step", ())
    with pytest.raises(
        ValueError,
        match="^"
        + re.escape(
            "extra_covariates: 'family' is not numeric; encode it numerically "
            "(e.g. log n_parameters) before fitting"
        )
        + "$",
    ):
        el._validate_table(table.assign(family=["x", "y"]), "step", ("family",))


# ------------------------------------------------------------------ _censored_mask


def test_censored_mask_reads_nan_as_not_censored_and_checks_steps() -> None:
    table = pd.DataFrame({"censored": [0.0, np.nan, 1.0], "step": [10.0, 0.5, np.nan]})
    np.testing.assert_array_equal(el._censored_mask(table), [False, False, True])
    named = pd.DataFrame({"run_name": ["r0", "r1"], "step": [3.0, "abc"]})
    with pytest.raises(
        ValueError,
        match="^"
        + re.escape(
            "emergence table: step must be a positive number for uncensored runs; bad rows: ['r1']"
        )
        + "$",
    ):
        el._censored_mask(named)
    with pytest.raises(ValueError, match=re.escape("bad rows: ['r1']")):
        el._censored_mask(named.assign(step=[3.0, 0.0]))
    # Without run names the rows are named by position; at most five are listed.
    unnamed = pd.DataFrame({"step": [2.0, -1.0, 4.0]})
    with pytest.raises(ValueError, match=re.escape(f"bad rows: {list(np.arange(3)[[1]])}")):
        el._censored_mask(unnamed)
    many = pd.DataFrame({"run_name": [f"r{i}" for i in range(7)], "step": [-1.0] * 7})
    with pytest.raises(
        ValueError, match=re.escape("bad rows: ['r0', 'r1', 'r2', 'r3', 'r4']") + "$"
    ):
        el._censored_mask(many)


# ------------------------------------------------------------------ _build_design


def test_design_from_object_columns_equals_the_numeric_design() -> None:
    table = pd.DataFrame(
        {
            "step": [100, 80, np.nan, 50],
            "batch_size": [1, 2, 4, 8],
            "context_length": [16, 32, 16, 32],
            "last_step": [200, 200, 300, 200],
        }
    )
    censored = np.array([False, False, True, False])
    numeric = el._build_design(table, "step", censored, ())
    objects = el._build_design(table.astype(object), "step", censored, ())
    y = np.log([100.0, 80.0, 300.0, 50.0])
    np.testing.assert_allclose(objects.y, y, rtol=1e-15)
    np.testing.assert_allclose(numeric.y, y, rtol=1e-15)
    expected_X = np.column_stack(
        [np.ones(4), np.log([1.0, 2, 4, 8]), np.log([16.0, 32, 16, 32])]
    )  # (4, 3)
    np.testing.assert_allclose(objects.X.to_numpy(float), expected_X, rtol=1e-15)
    assert list(objects.X.columns) == ["const", "log_batch_size", "log_context_length"]


def test_design_last_step_checks_and_messages() -> None:
    table = pd.DataFrame({"step": [np.nan, 3.0], "batch_size": [2, 4], "context_length": [8, 8]})
    censored = np.array([True, False])
    with pytest.raises(
        ValueError, match="^emergence table: censored runs need a last_step column$"
    ):
        el._build_design(table, "step", censored, ())
    with pytest.raises(
        ValueError, match="^emergence table: last_step must be positive for censored runs$"
    ):
        el._build_design(table.assign(last_step=[0.0, 9.0]), "step", censored, ())
    half = el._build_design(table.assign(last_step=[0.5, 9.0]), "step", censored, ())
    np.testing.assert_allclose(half.y, np.log([0.5, 3.0]), rtol=1e-15)
    # A single C is held as a constant, not a column.
    assert half.constants == {"log_context_length": pytest.approx(math.log(8), rel=1e-15)}
    assert half.identifiable == {"a": True, "b": False}


def test_design_of_an_empty_and_of_a_single_row_table() -> None:
    empty = pd.DataFrame({"step": [], "batch_size": [], "context_length": []})
    design = el._build_design(empty, "step", np.zeros(0, dtype=bool), ())
    assert design.identifiable == {"a": False, "b": False} and design.constants == {}
    one = pd.DataFrame({"step": [7.0], "batch_size": [4], "context_length": [16]})
    design = el._build_design(one, "step", np.zeros(1, dtype=bool), ())
    assert design.identifiable == {"a": False, "b": False}
    assert design.constants == {
        "log_batch_size": pytest.approx(math.log(4), rel=1e-15),
        "log_context_length": pytest.approx(math.log(16), rel=1e-15),
    }


def test_design_skips_a_constant_covariate_and_keeps_the_next_and_the_index(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = pd.DataFrame(
        {
            "step": [9.0, 7.0, 5.0],
            "batch_size": [1, 2, 4],
            "context_length": [8, 16, 8],
            "flat": [3.0, 3.0, 3.0],
            "rope": [True, False, True],
        },
        index=[10, 11, 12],
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        design = el._build_design(table, "step", np.zeros(3, dtype=bool), ("flat", "rope"))
    assert messages(caplog) == ["extra_covariates: 'flat' is constant; left out of the design"]
    assert list(design.X.columns) == ["const", "log_batch_size", "log_context_length", "rope"]
    np.testing.assert_array_equal(design.X["rope"].to_numpy(), [1.0, 0.0, 1.0])
    assert list(design.X.index) == [10, 11, 12]


# ------------------------------------------------------------------ _fit_ols


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
        core = el._fit_ols(y, X, groups)
        ols = sm.OLS(y, X).fit()
        assert core.n_clusters == 0 and core.df_resid == len(y) - 3
        np.testing.assert_allclose(core.cov, ols.cov_params(), rtol=1e-10)
        np.testing.assert_allclose(core.params, ols.params, rtol=1e-10)


def test_ols_with_k_plus_two_clusters_is_cluster_robust_with_t_on_g_minus_one() -> None:
    y, X, groups = _ols_data(5, 2)  # G = 5 = k + 2
    core = el._fit_ols(y, X, groups)
    cluster = sm.OLS(y, X).fit(cov_type="cluster", cov_kwds={"groups": groups})
    assert core.n_clusters == 5 and core.df_resid == 2.0
    np.testing.assert_allclose(core.cov, cluster.cov_params(), rtol=1e-10)
    # The kept statsmodels results use t quantiles on G - 1 = 4 dof.
    se = np.sqrt(np.diag(cluster.cov_params()))
    q = stats.t.ppf(0.975, 4)
    expected = np.column_stack([cluster.params - q * se, cluster.params + q * se])
    np.testing.assert_allclose(np.asarray(core.results.conf_int(0.05)), expected, rtol=1e-10)


# ------------------------------------------------------------------ Tobit likelihood


def test_tobit_terms_equal_scipy_densities_and_numerical_derivatives() -> None:
    rng = np.random.default_rng(5)
    X = np.column_stack([np.ones(6), np.log([1.0, 2, 4, 8, 16, 32])])  # (6, 2)
    y = 5.0 - 0.5 * X[:, 1] + rng.normal(0, 0.3, 6)
    censored = np.array([False, True, False, False, True, False])
    beta, sigma = np.array([4.8, -0.45]), 0.4
    theta = np.append(beta / sigma, 1.0 / sigma)  # Olsen: (beta / sigma, 1 / sigma)
    nll, grad, hessian, scores = el._tobit_terms(theta, y, X, censored)
    mu = X @ beta
    expected = -(
        stats.norm.logpdf(y[~censored], mu[~censored], sigma).sum()
        + stats.norm.logsf(y[censored], mu[censored], sigma).sum()
    )
    assert nll == pytest.approx(expected, rel=1e-12)

    def f(t: np.ndarray) -> float:
        return el._tobit_terms(t, y, X, censored)[0]

    h = 1e-5
    eye = np.eye(3)
    num_grad = np.array([(f(theta + h * e) - f(theta - h * e)) / (2 * h) for e in eye])
    np.testing.assert_allclose(grad, num_grad, rtol=1e-6)
    np.testing.assert_allclose(scores.sum(axis=0), grad, rtol=1e-12)
    num_hess = np.array(
        [
            (
                el._tobit_terms(theta + h * e, y, X, censored)[1]
                - el._tobit_terms(theta - h * e, y, X, censored)[1]
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
    monkeypatch.setattr(el, "_tobit_terms", _stub(table))
    theta, converged = el._tobit_newton(np.array(theta0), None, None, None)
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
    np.testing.assert_allclose(el._cluster_meat(scores, groups), sums.T @ sums * 3 / 2, rtol=1e-15)
    # G = 2 clusters with one score column: G > p, so a meat.
    one = scores[:4, :1]
    two = np.array(["a", "a", "b", "b"])
    np.testing.assert_allclose(el._cluster_meat(one, two), [[(16.0 + 2.5**2) * 2]], rtol=1e-15)
    assert el._cluster_meat(scores, np.arange(5)) is None  # no repeated configuration
    assert el._cluster_meat(scores[:4], two) is None  # G = p
    assert el._cluster_meat(scores, None) is None


# ------------------------------------------------------------------ _fit_tobit


def _two_emerged() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two emerged runs at B = 2, censored at B = 1 (above) and B = 8 (below): a finite MLE
    with no more emerged runs than coefficients (no OLS start)."""
    b = np.array([2.0, 2.0, 1.0, 1.0, 8.0, 8.0])
    y = np.log([1100.0, 900.0, 1200.0, 1300.0, 400.0, 450.0])
    X = np.column_stack([np.ones(6), np.log(b)])  # (6, 2)
    return y, X, np.array([False, False, True, True, True, True])


def test_tobit_with_as_many_emerged_runs_as_coefficients_equals_an_independent_mle() -> None:
    y, X, censored = _two_emerged()
    core = el._fit_tobit(y, X, censored)
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
        core = el._fit_tobit(y, duplicate, censored)
    assert messages(caplog) == [
        "tobit: Newton's method did not converge",
        "tobit: singular information matrix; CIs are undefined",
    ]
    assert core.cov.shape == (3, 3) and np.isnan(core.cov).all()
    caplog.clear()
    newton = el._tobit_newton
    monkeypatch.setattr(el, "_tobit_newton", lambda *args: (newton(*args)[0], False))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        el._fit_tobit(y, X, censored)
    assert messages(caplog) == ["tobit: Newton's method did not converge"]


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


# ------------------------------------------------------------------ _coef_ci, _wald


def test_coefficient_ci_of_a_zero_and_of_a_negative_variance() -> None:
    core = el._Core(params=np.array([2.0, 3.0]), cov=np.diag([0.0, -1.0]), sigma=1.0, df_resid=5.0)
    assert el._coef_ci(core, 0, 0.95) == (2.0, 2.0)
    low, high = el._coef_ci(core, 1, 0.95)
    assert math.isnan(low) and math.isnan(high)


def test_wald_without_exponents_and_with_a_singular_covariance(
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = el._Core(
        params=np.array([1.0, -0.3, -0.6]), cov=np.zeros((3, 3)), sigma=0.0, df_resid=4.0
    )
    none = el._wald(core, ["const"], {"a": 0.37, "b": 0.62}, "exclude")
    assert none[1:] == (0, none[2], "F") and math.isnan(none[0]) and math.isnan(none[2])
    names = ["const", "log_batch_size", "log_context_length"]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        stat, df, p, kind = el._wald(core, names, {"a": 0.37, "b": 0.62}, "tobit")
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
