"""Value tests of the frontier's robustness: fits per threshold, the threshold-free score fit on
a planted truth, and the verdict rules on rows whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as student_t

from ih_kedro.science.statistics import pareto_frontier as pf
from ih_kedro.science.statistics import pareto_robustness as rb

F = [0.25, 0.5, 1.0]
R = [0.5, 0.71, 1.0]


def _cells(score, formed_at, seeds=3) -> pd.DataFrame:
    """A 3 x 3 grid x ``seeds``; ``score(f, r, seed)`` and ``formed_at[t](f, r, seed)``."""
    rows = []
    for f in F:
        for r in R:
            for seed in range(seeds):
                row = {"label": f"f{f}_r{r}", "frequency": f, "reliability": r, "seed": seed,
                       "formation_score": score(f, r, seed)}  # fmt: skip
                for t, rule in formed_at.items():
                    row[f"formed_at_{t:g}"] = rule(f, r, seed)
                rows.append(row)
    table = pd.DataFrame(rows)
    for t in formed_at:
        table[f"formed_at_{t:g}"] = table[f"formed_at_{t:g}"].astype("boolean")
    return table


def _and_rule(f, r, seed):
    return bool(math.log(f) + math.log(r) > -1.2 + 0.1 * seed)


def test_threshold_fit_is_the_frontier_fit_on_the_observed_runs():
    cells = _cells(lambda f, r, s: 0.0, {0.4: _and_rule})
    cells.loc[[0, 5], "formed_at_0.4"] = pd.NA  # unobserved: left out
    row = rb.threshold_fit(cells, 0.4, fit_method="firth", level=0.9)
    kept = cells.drop(index=[0, 5])
    fit = pf.fit_frontier(kept["frequency"], kept["reliability"],
                          kept["formed_at_0.4"].astype(float), level=0.9)  # fmt: skip
    ci = fit.conf_int()
    assert row["status"] == "ok" and row["n_runs"] == 25 and row["n_formed"] == fit.n_formed
    assert row["beta_frequency"] == pytest.approx(fit.coef[1])
    assert row["beta_reliability_ci_high"] == pytest.approx(ci[2, 1])
    assert row["ratio"] == pytest.approx(fit.coef[1] / fit.coef[2])
    assert row["measure"] == "formed at 0.4" and row["model"] == "firth"


def test_threshold_fit_without_both_outcomes_is_not_faked():
    everything = _cells(lambda f, r, s: 0.0, {0.3: lambda f, r, s: True})
    row = rb.threshold_fit(everything, 0.3)
    assert row["status"] == "all_formed" and row["n_formed"] == 27
    assert math.isnan(row["beta_frequency"]) and row["both_knobs_matter"] == rb.UNDECIDED
    nothing = _cells(lambda f, r, s: 0.0, {0.5: lambda f, r, s: False})
    assert rb.threshold_fit(nothing, 0.5)["status"] == "none_formed"
    few = nothing.iloc[:2].copy()
    few["formed_at_0.5"] = pd.array([True, False], dtype="boolean")
    assert rb.threshold_fit(few, 0.5)["status"] == "too_few_runs"


def _planted(noise: float):
    rng = np.random.default_rng(0)
    jitter = {(f, r, s): rng.normal(0, noise) for f in F for r in R for s in range(3)}
    # formation score = 0.5 + 0.1 log f + 0.3 log r (+ noise): ratio 1/3.
    return lambda f, r, s: 0.5 + 0.1 * math.log(f) + 0.3 * math.log(r) + jitter[(f, r, s)]


def test_formation_score_fit_recovers_a_planted_plane():
    cells = _cells(_planted(0.01), {})
    row = rb.formation_score_fit(cells, level=0.95)
    assert row["status"] == "ok" and row["n_runs"] == 27 and row["model"] == "ols"
    assert row["beta_frequency"] == pytest.approx(0.1, abs=0.01)
    assert row["beta_reliability"] == pytest.approx(0.3, abs=0.02)
    assert row["ratio_ci_low"] < 1 / 3 < row["ratio_ci_high"]
    assert row["ratio_ci_high"] < 1
    assert row["both_knobs_matter"] == rb.SUPPORTED
    assert row["reliability_weighs_more"] == rb.SUPPORTED


def test_formation_score_fit_uses_cluster_robust_t_intervals():
    import statsmodels.api as sm

    cells = _cells(_planted(0.05), {})
    row = rb.formation_score_fit(cells, level=0.9)
    X = np.column_stack([np.ones(27), np.log(cells["frequency"]), np.log(cells["reliability"])])
    fit = sm.OLS(cells["formation_score"].to_numpy(), X).fit(
        cov_type="cluster", cov_kwds={"groups": pd.factorize(cells["label"])[0]}
    )
    q = student_t.ppf(0.95, 8)  # 9 cells -> 8 df
    se = np.sqrt(np.diag(fit.cov_params()))
    assert row["beta_reliability_ci_low"] == pytest.approx(fit.params[2] - q * se[2])
    assert row["beta_frequency_ci_high"] == pytest.approx(fit.params[1] + q * se[1])
    b, cov = fit.params, fit.cov_params()
    g = np.array([0.0, 1 / b[2], -b[1] / b[2] ** 2])
    half = q * math.sqrt(g @ cov @ g)
    assert row["ratio_ci_low"] == pytest.approx(b[1] / b[2] - half)


def test_formation_score_fit_needs_four_cells():
    cells = _cells(_planted(0.01), {})
    few = cells[cells["frequency"] == 1.0]
    assert rb.formation_score_fit(few)["status"] == "too_few_cells"


def _row(bf=(0.1, 0.5), br=(0.2, 0.9), ratio=(0.3, 0.8)) -> dict:
    return {"beta_frequency_ci_low": bf[0], "beta_frequency_ci_high": bf[1],
            "beta_reliability_ci_low": br[0], "beta_reliability_ci_high": br[1],
            "ratio_ci_low": ratio[0], "ratio_ci_high": ratio[1]}  # fmt: skip


@pytest.mark.parametrize(
    ("row", "knobs", "weighs"),
    [
        (_row(), rb.SUPPORTED, rb.SUPPORTED),
        (_row(bf=(-0.1, 0.5)), rb.UNDECIDED, rb.SUPPORTED),
        (_row(br=(-0.9, -0.2)), rb.CONTRADICTED, rb.SUPPORTED),
        (_row(bf=(0.0, 0.5)), rb.UNDECIDED, rb.SUPPORTED),  # 0 is not above 0
        (_row(ratio=(0.5, 1.0)), rb.SUPPORTED, rb.UNDECIDED),  # 1 is not below 1
        (_row(ratio=(1.2, 3.0)), rb.SUPPORTED, rb.CONTRADICTED),
        (_row(bf=(math.nan, math.nan), ratio=(math.nan, math.nan)), rb.UNDECIDED, rb.UNDECIDED),
    ],
)
def test_verdict_rules(row, knobs, weighs):
    assert rb._verdicts(row) == {"both_knobs_matter": knobs, "reliability_weighs_more": weighs}


def test_robustness_table_and_agreement():
    formed = {0.3: lambda f, r, s: True, 0.4: _and_rule, 0.5: _and_rule}
    cells = _cells(_planted(0.01), formed)
    table = rb.robustness_table(cells)
    assert table["measure"].tolist() == [
        "formed at 0.3", "formed at 0.4", "formed at 0.5", "formation score",
    ]  # fmt: skip
    assert table["status"].tolist() == ["all_formed", "ok", "ok", "ok"]
    assert list(table.columns) == rb.ROBUSTNESS_COLUMNS
    verdicts = rb.robustness_verdicts(table, 0.4)
    knobs = verdicts["both_knobs_matter"]
    assert knobs["by_measure"]["formed at 0.3"] == rb.UNDECIDED
    assert knobs["by_measure"]["formation score"] == rb.SUPPORTED
    assert knobs["verdict"] == knobs["by_measure"]["formed at 0.4"]
    assert knobs["agrees_across_measures"] is False
    assert knobs["rule"] == rb.RULES["both_knobs_matter"]
    same = rb.robustness_verdicts(table.iloc[[3]], 0.4)  # one measure, no 0.4 row
    assert same["both_knobs_matter"]["agrees_across_measures"] is True
    assert same["both_knobs_matter"]["verdict"] == rb.UNDECIDED
