"""Frontier model: recovery of a known frontier from synthetic outcomes, separation, the Pareto
set, S* growth and the budget shift."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.statistics import pareto_bootstrap as pb
from ih_kedro.science.statistics import pareto_frontier as pf

# True model: logit P = 6 + 2 log f + 2.5 log r  ->  50% contour log r = -(6 + 2 log f) / 2.5,
# which crosses the grid (r = 0.47, 0.23, 0.11 at f = 0.13, 0.32, 0.8).
TRUE = np.array([6.0, 2.0, 2.5])
FS = np.exp(np.linspace(np.log(0.02), np.log(0.8), 5))
RS = np.exp(np.linspace(np.log(0.05), np.log(1.0), 5))


def _synthetic_runs(n_seeds: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for f in FS:
        for r in RS:
            p = 1 / (1 + math.exp(-(TRUE[0] + TRUE[1] * math.log(f) + TRUE[2] * math.log(r))))
            for s in range(n_seeds):
                rows.append(
                    {"frequency": f, "reliability": r, "seed": s, "cell": f"{f:.4f}_{r:.4f}",
                     "formed": float(rng.random() < p)}
                )  # fmt: skip
    return pd.DataFrame(rows)


def _true_contour(f: np.ndarray) -> np.ndarray:
    return np.exp(-(TRUE[0] + TRUE[1] * np.log(f)) / TRUE[2])


def test_recovers_a_known_frontier_and_the_band_covers_it():
    # 25 cells x 6 seeds. Over data seeds 0-5 the coefficient CIs and the pointwise 95% band
    # (at all three frequencies) covered the truth 6/6 times; seed 0 is the first.
    runs = _synthetic_runs(n_seeds=6, seed=0)
    fit = pf.fit_frontier(runs["frequency"], runs["reliability"], runs["formed"])
    ci = fit.conf_int()
    assert ((ci[:, 0] <= TRUE) & (TRUE <= ci[:, 1])).all(), (fit.coef, ci)
    assert fit.monotone_increasing and fit.converged and not fit.separated
    grid = FS[2:5]  # interior frequencies, where the true contour lies inside the grid
    band = pb.bootstrap_contour(runs, grid, n_bootstrap=60, seed=1, unit="cell")
    truth = _true_contour(grid)
    assert ((band["band_low"] <= truth) & (truth <= band["band_high"])).all(), band
    # The point estimate is close to the truth (within 10% in reliability).
    assert np.all(np.abs(np.log(band["reliability_50"] / truth)) < np.log(1.1))
    assert (band["n_replicates"] >= 55).all()


def test_firth_matches_statsmodels_mle_without_separation():
    runs = _synthetic_runs(n_seeds=20, seed=3)
    firth = pf.fit_frontier(runs["frequency"], runs["reliability"], runs["formed"])
    mle = pf.fit_frontier(runs["frequency"], runs["reliability"], runs["formed"], method="mle")
    # Firth shrinks towards 0 by O(1/n): with 500 runs the two agree closely.
    np.testing.assert_allclose(firth.coef, mle.coef, rtol=0.1)
    assert np.all(np.abs(firth.coef) <= np.abs(mle.coef) + 1e-9)


def test_separated_outcomes_give_a_finite_firth_fit_and_refuse_mle():
    f = np.repeat(FS, 5)
    r = np.tile(RS, 5)
    formed = (np.log(f) + np.log(r) > np.log(0.02)).astype(float)  # a line separates them
    fit = pf.fit_frontier(f, r, formed)
    assert fit.separated and np.isfinite(fit.coef).all() and fit.monotone_increasing
    # The contour passes between the two groups: f * r = 0.02 lies inside the band of cells.
    contour = fit.contour(np.array([0.1]))
    assert 0.05 < contour[0] < 0.8
    with pytest.raises(ValueError, match="perfectly separated"):
        pf.fit_frontier(f, r, formed, method="mle")
    with pytest.raises(ValueError, match="must be > 0"):
        pf.fit_frontier(np.r_[0.0, f[1:]], r, formed)


def test_emergence_status_uses_the_column_or_derives_it():
    table = pd.DataFrame({"step": [120.0, np.nan, np.nan], "censored": [False, True, False]})
    derived = pf.emergence_status(table)
    assert derived.tolist() == ["emerged", "censored", "fit_failed"]
    assert pf.formed_from_status(derived).tolist()[:2] == [1.0, 0.0]
    assert np.isnan(pf.formed_from_status(derived).iloc[2])
    given = table.assign(status=["left_censored", "censored", "emerged"])
    assert pf.emergence_status(given).tolist() == ["left_censored", "censored", "emerged"]
    assert pf.formed_from_status(pf.emergence_status(given)).tolist() == [1.0, 0.0, 1.0]


def test_pareto_minimal_cells():
    cells = pd.DataFrame(
        {
            "frequency": [0.1, 0.1, 0.2, 0.2, 0.4, 0.4, 0.8],
            "reliability": [0.5, 1.0, 0.25, 1.0, 0.125, 0.25, 0.125],
            "formed_share": [1.0, 1.0, 0.5, 1.0, 1.0, 1.0, 0.0],
        }
    )
    minimal = pf.pareto_minimal_cells(cells)
    got = list(zip(minimal["frequency"], minimal["reliability"], strict=True))
    assert got == [(0.1, 0.5), (0.2, 0.25), (0.4, 0.125)]


def test_growth_fit_and_budget_shift():
    d = np.linspace(0.2, 3.0, 12)
    sstar = np.exp(7.0 - 0.8 * d)
    growth = pf.fit_sstar_growth(d, sstar)
    assert growth.status == "ok" and growth.n == 12
    assert growth.beta == pytest.approx(-0.8) and growth.alpha == pytest.approx(7.0)
    fit = pf.FrontierFit(coef=TRUE, cov=np.eye(3), method="firth", n_runs=10, n_formed=5,
                         converged=True)  # fmt: skip
    shift = pf.budget_shift(fit, growth, np.array([0.1]), factors=(2.0,))
    assert shift["shift"].iloc[0] == pytest.approx(math.log(2) / -0.8)
    # The moved frontier lies |shift| further on the non-forming side: lower reliability.
    moved = shift["reliability_50"].iloc[0]
    assert moved < _true_contour(np.array([0.1]))[0]
    assert fit.distance(0.1, moved) == pytest.approx(shift["shift"].iloc[0])
    # Too few emerged runs: no growth fit, no shift.
    none = pf.fit_sstar_growth([1.0, 2.0], [100.0, 50.0])
    assert none.status == "too_few_emerged_runs"
    assert pf.budget_shift(fit, none, np.array([0.1]))["shift"].isna().all()
