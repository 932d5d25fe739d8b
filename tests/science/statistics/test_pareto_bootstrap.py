"""Value tests of the frontier's bootstrap: bands, drops, units and coefficient CIs by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.statistics import pareto_bootstrap as pb
from ih_kedro.science.statistics import pareto_frontier as pf
from tests.science.statistics.test_pareto_frontier_values import F, R, Y, _x


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


def _reference_replicates(runs, n_bootstrap, seed, unit):
    """The resampled row indices of each replicate, drawn by hand."""
    rng = np.random.default_rng(seed)
    if unit in ("cell", "seed"):
        cells = list(dict.fromkeys(runs["cell"]))
        groups = [np.flatnonzero(runs["cell"].to_numpy() == c) for c in cells]
    else:
        groups = [np.array([i]) for i in range(len(runs))]
    for _ in range(n_bootstrap):
        if unit == "seed":
            yield np.concatenate([rng.choice(g, size=len(g), replace=True) for g in groups])
        else:
            picks = rng.integers(0, len(groups), size=len(groups))
            yield np.concatenate([groups[i] for i in picks])


def _reference_band(runs, grid, n_bootstrap, seed, unit, level):
    """Percentile band by hand: resample, refit with ``_firth`` and take percentiles; replicates
    with one outcome, an unconverged fit or ``b2 <= 0`` are left out and counted."""
    curves = []
    dropped = {"one_outcome": 0, "fit_failed": 0, "not_converged": 0, "no_contour": 0}
    for rows in _reference_replicates(runs, n_bootstrap, seed, unit):
        sample = runs.iloc[rows]
        y = sample["formed"].to_numpy(dtype=float)
        if y.min() == y.max():
            dropped["one_outcome"] += 1
            continue
        X = _x(sample["frequency"].to_numpy(), sample["reliability"].to_numpy())
        b, _, converged = pf._firth(X, y)
        if not converged:
            dropped["not_converged"] += 1
        elif not b[2] > 0:
            dropped["no_contour"] += 1
        else:
            curves.append((-b[0] - b[1] * np.log(grid)) / b[2])
    stack = np.array(curves)
    tail = 100 * (1 - level) / 2
    low = [np.exp(np.percentile(c, tail)) for c in stack.T]
    high = [np.exp(np.percentile(c, 100 - tail)) for c in stack.T]
    return np.array(low), np.array(high), np.isfinite(stack).sum(axis=0), dropped


@pytest.mark.parametrize(("unit", "level"), [("run", 0.8), ("cell", 0.9), ("seed", 0.8)])
def test_bootstrap_band_matches_a_hand_resampling(unit, level):
    runs = _bootstrap_runs()
    grid = np.array([0.15, 0.3, 0.6])
    band = pb.bootstrap_contour(runs, grid, n_bootstrap=12, seed=4, unit=unit, level=level)
    low, high, valid, dropped = _reference_band(runs, grid, 12, 4, unit, level)
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
        "wald_low",
        "wald_high",
        "n_replicates",
        "n_bootstrap",
        "level",
        "method",
        "unit",
        "n_dropped_one_outcome",
        "n_dropped_fit_failed",
        "n_dropped_not_converged",
        "n_dropped_no_contour",
    ]
    assert band["method"].tolist() == ["firth"] * 3
    for reason, n in dropped.items():
        assert band[f"n_dropped_{reason}"].tolist() == [n] * 3, reason
    assert band["unit"].tolist() == [unit] * 3
    if unit != "seed":
        assert band["n_dropped_no_contour"].iloc[0] > 0  # the count is exercised
    assert sum(dropped.values()) + band["n_replicates"].iloc[0] == 12


def test_bootstrap_point_contour_uses_the_chosen_method():
    runs = _bootstrap_runs()
    grid = np.array([0.3])
    band = pb.bootstrap_contour(runs, grid, n_bootstrap=0, method="mle")
    b = pf.fit_frontier(runs["frequency"], runs["reliability"], runs["formed"], method="mle").coef
    firth = pf.fit_frontier(runs["frequency"], runs["reliability"], runs["formed"]).coef
    expected = math.exp(-(b[0] + b[1] * math.log(0.3)) / b[2])
    assert band["reliability_50"].iloc[0] == pytest.approx(expected, rel=1e-9)
    assert abs(expected - math.exp(-(firth[0] + firth[1] * math.log(0.3)) / firth[2])) > 1e-3


def test_bootstrap_without_replicates_gives_nan_bands():
    runs = _bootstrap_runs()
    band = pb.bootstrap_contour(runs, np.array([0.2, 0.4]), n_bootstrap=0)
    assert band["band_low"].isna().all() and band["band_high"].isna().all()
    assert band["n_replicates"].tolist() == [0, 0] and band["n_bootstrap"].tolist() == [0, 0]
    with pytest.raises(ValueError, match=r"'probe' is not one of \('run', 'cell', 'seed'\)"):
        pb.bootstrap_contour(runs, np.array([0.2]), unit="probe")
    with pytest.raises(ValueError, match="'seed': runs need a 'cell' column"):
        pb.bootstrap_contour(runs.drop(columns="cell"), np.array([0.2]), unit="seed")


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
    band = pb.bootstrap_contour(runs, np.array([0.3]), n_bootstrap=10, seed=2, unit="cell")
    assert band["n_replicates"].tolist() == [mixed]
    assert band["band_low"].iloc[0] == pytest.approx(band["reliability_50"].iloc[0])
    assert band["band_high"].iloc[0] == pytest.approx(band["reliability_50"].iloc[0])
    assert band["n_dropped_one_outcome"].tolist() == [10 - mixed]
    for reason in ("fit_failed", "not_converged", "no_contour"):
        assert band[f"n_dropped_{reason}"].tolist() == [0], reason


def _separable_resamples(runs, n_bootstrap, seed):
    """(one outcome, separable with both outcomes) among run-resamples drawn as the bootstrap
    draws them."""
    rng = np.random.default_rng(seed)
    one, separable = 0, 0
    for _ in range(n_bootstrap):
        sample = runs.iloc[rng.integers(0, len(runs), size=len(runs))]
        y = sample["formed"].to_numpy(dtype=float)
        if y.min() == y.max():
            one += 1
        elif pf._separable(_x(sample["frequency"], sample["reliability"]), y):
            separable += 1
    return one, separable


def test_bootstrap_refits_every_replicate_with_the_chosen_method():
    # The 12 runs are not separable (the full MLE exists), but many run-resamples are: MLE
    # refuses those, Firth fits them.
    runs = pd.DataFrame({"frequency": F, "reliability": R, "formed": Y})
    grid = np.array([0.15, 0.3, 0.6])
    one, separable = _separable_resamples(runs, 20, 0)
    assert separable > 0
    mle = pb.bootstrap_contour(runs, grid, n_bootstrap=20, seed=0, method="mle")
    firth = pb.bootstrap_contour(runs, grid, n_bootstrap=20, seed=0, method="firth")
    assert mle["method"].tolist() == ["mle"] * 3 and firth["method"].tolist() == ["firth"] * 3
    assert mle["n_dropped_fit_failed"].tolist() == [separable] * 3
    assert firth["n_dropped_fit_failed"].tolist() == [0] * 3
    assert mle["n_dropped_one_outcome"].iloc[0] == firth["n_dropped_one_outcome"].iloc[0] == one
    for band in (mle, firth):
        drops = band[[f"n_dropped_{r}" for r in pb.BOOTSTRAP_DROPS]].iloc[0].sum()
        assert (drops + band["n_replicates"] == 20).all()
    # Firth keeps the separated resamples: more replicates than MLE.
    assert (firth["n_replicates"] > mle["n_replicates"]).all()


def test_bootstrap_band_narrows_with_the_level():
    runs = pd.DataFrame({"frequency": F, "reliability": R, "formed": Y})
    grid = np.array([0.15, 0.3, 0.6])
    wide = pb.bootstrap_contour(runs, grid, n_bootstrap=40, seed=3, level=0.95)
    narrow = pb.bootstrap_contour(runs, grid, n_bootstrap=40, seed=3, level=0.5)
    # Same replicates (same seed), a central 50% inside the central 95%, strictly here.
    assert narrow["n_replicates"].tolist() == wide["n_replicates"].tolist()
    assert (wide["band_low"] < narrow["band_low"]).all()
    assert (narrow["band_high"] < wide["band_high"]).all()
    assert (narrow["band_low"] < narrow["band_high"]).all()
    assert narrow["level"].tolist() == [0.5] * 3 and wide["level"].tolist() == [0.95] * 3
    pd.testing.assert_series_equal(narrow["reliability_50"], wide["reliability_50"])


def test_bootstrap_drops_unconverged_fits_and_fits_without_a_contour(monkeypatch):
    runs = _bootstrap_runs()
    grid = np.array([0.15, 0.3, 0.6])
    real = pf._firth  # fit_frontier looks _firth up in the module at call time
    reference = pb.bootstrap_contour(runs, grid, n_bootstrap=12, seed=4)
    calls = []

    def flaky(X, y, *args, **kwargs):
        calls.append(len(y))
        beta, cov, converged = real(X, y, *args, **kwargs)
        n = len(calls)
        if n > 1 and n % 3 == 2:  # replicates 1, 4, 7, 10: did not converge
            return beta, cov, False
        if n > 1 and n % 3 == 0:  # replicates 2, 5, 8, 11: b2 < 0, no contour
            return np.array([beta[0], beta[1], -abs(beta[2]) - 1.0]), cov, converged
        return beta, cov, converged

    monkeypatch.setattr(pf, "_firth", flaky)
    band = pb.bootstrap_contour(runs, grid, n_bootstrap=12, seed=4)
    n_fits = len(calls) - 1  # the first call is the fit on all runs
    assert n_fits == 12 - reference["n_dropped_one_outcome"].iloc[0]
    not_converged = sum(1 for n in range(2, len(calls) + 1) if n % 3 == 2)
    no_contour = sum(1 for n in range(2, len(calls) + 1) if n % 3 == 0)
    assert band["n_dropped_not_converged"].tolist() == [not_converged] * 3
    assert band["n_dropped_no_contour"].iloc[0] >= no_contour > 0
    assert band["n_dropped_one_outcome"].tolist() == reference["n_dropped_one_outcome"].tolist()
    assert band["n_dropped_fit_failed"].tolist() == [0] * 3
    drops = band[[f"n_dropped_{r}" for r in pb.BOOTSTRAP_DROPS]].iloc[0].sum()
    assert (drops + band["n_replicates"] == 12).all()
    pd.testing.assert_series_equal(band["reliability_50"], reference["reliability_50"])
    # Every refit after the first (the fit on all runs) unconverged: no replicate, NaN band,
    # the point contour still there.
    calls.clear()

    def only_the_first(X, y, *args, **kwargs):
        calls.append(len(y))
        beta, cov, converged = real(X, y, *args, **kwargs)
        return beta, cov, converged and len(calls) == 1

    monkeypatch.setattr(pf, "_firth", only_the_first)
    none = pb.bootstrap_contour(runs, grid, n_bootstrap=12, seed=4)
    assert none["n_replicates"].tolist() == [0] * 3
    assert none["band_low"].isna().all() and none["band_high"].isna().all()
    assert none["n_dropped_not_converged"].tolist() == [n_fits] * 3
    pd.testing.assert_series_equal(none["reliability_50"], reference["reliability_50"])


def test_bootstrap_band_is_finite_when_a_replicate_has_a_tiny_b2():
    # A replicate with b2 close to 0 puts its contour at exp(huge): taking the log of the
    # reliability overflowed to inf, which the percentiles then used (a NaN band edge). The
    # contour is now computed on the log scale; every band edge with replicates is finite.
    runs = _bootstrap_runs()
    band = pb.bootstrap_contour(runs, np.array([0.15, 0.3, 0.6]), n_bootstrap=40, seed=3)
    assert (band["n_replicates"] > 0).all()
    assert np.isfinite(band["band_low"]).all() and np.isfinite(band["band_high"]).all()


def test_seed_bootstrap_keeps_every_cell_and_its_size():
    # Cells of 3 seeds each; every replicate must hold 3 rows of every cell (never a cell
    # missing, never one doubled), which the cell and run units do not guarantee.
    runs = pd.DataFrame(
        {"frequency": np.repeat([0.1, 0.3, 1.0], 3), "reliability": np.repeat([0.3, 0.6, 1.0], 3),
         "formed": [0, 0, 1, 0, 1, 1, 1, 1, 1], "cell": np.repeat(["a", "b", "c"], 3)}
    )  # fmt: skip
    rng = np.random.default_rng(0)
    groups = pb._resampling_groups(runs, "seed")
    for _ in range(20):
        rows = pb._resample(groups, "seed", rng)
        assert runs["cell"].iloc[rows].value_counts().to_dict() == {"a": 3, "b": 3, "c": 3}


def test_seed_bootstrap_of_unanimous_cells_has_no_spread():
    # Every cell's seeds agree: each replicate is the full data again, so the band and the
    # coefficient CIs collapse onto the point fit (seed variation shows none).
    runs = pd.DataFrame(
        {"frequency": np.repeat([0.1, 0.1, 1.0, 1.0], 2),
         "reliability": np.repeat([0.3, 1.0, 0.3, 1.0], 2),
         "formed": np.repeat([0.0, 0.0, 0.0, 1.0], 2), "cell": np.repeat(list("abcd"), 2)}
    )  # fmt: skip
    boot = pb.bootstrap_frontier(runs, np.array([0.5]), n_bootstrap=10, seed=1, unit="seed")
    fit = pf.fit_frontier(runs["frequency"], runs["reliability"], runs["formed"])
    band = boot.contour.iloc[0]
    assert band["band_low"] == pytest.approx(band["reliability_50"], rel=1e-9)
    assert band["band_high"] == pytest.approx(band["reliability_50"], rel=1e-9)
    ci = boot.coefficients.set_index("name")
    for i, name in enumerate(pf.COEFFICIENTS):
        assert ci.loc[name, "ci_low"] == pytest.approx(fit.coef[i], rel=1e-9)
        assert ci.loc[name, "ci_high"] == pytest.approx(fit.coef[i], rel=1e-9)
    assert ci.loc["ratio", "ci_low"] == pytest.approx(fit.coef[1] / fit.coef[2], rel=1e-9)
    assert ci["n_replicates"].tolist() == [10] * 4
    assert boot.unit == "seed" and sum(boot.dropped.values()) == 0


def test_bootstrap_coefficient_cis_match_a_hand_resampling():
    runs = _bootstrap_runs()
    level = 0.8
    boot = pb.bootstrap_frontier(runs, np.array([0.3]), n_bootstrap=15, seed=2, level=level)
    coefs = []
    for rows in _reference_replicates(runs, 15, 2, "seed"):
        sample = runs.iloc[rows]
        y = sample["formed"].to_numpy(dtype=float)
        if y.min() == y.max():
            continue
        b, _, converged = pf._firth(_x(sample["frequency"], sample["reliability"]), y)
        if converged:
            coefs.append(b)
    coefs = np.array(coefs)  # (m, 3)
    ci = boot.coefficients.set_index("name")
    for i, name in enumerate(pf.COEFFICIENTS):
        low, high = np.percentile(coefs[:, i], [10, 90])
        assert ci.loc[name, "ci_low"] == pytest.approx(low, rel=1e-9)
        assert ci.loc[name, "ci_high"] == pytest.approx(high, rel=1e-9)
    low, high = np.percentile(coefs[:, 1] / coefs[:, 2], [10, 90])
    assert ci.loc["ratio", "ci_low"] == pytest.approx(low, rel=1e-9)
    assert ci.loc["ratio", "ci_high"] == pytest.approx(high, rel=1e-9)
    assert ci.loc["ratio", "n_replicates"] == len(coefs)
