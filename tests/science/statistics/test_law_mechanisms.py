"""The emergence law per mechanism arm and the law with a size term, on synthetic emergence
tables drawn from a known law.

Each arm is ``S* = T / (B^a C^b)`` (``T = 2e4``) on a 3 x 3 (B, C) grid with 2 seeds and
log-normal noise (sd 0.05): the fits recover the planted exponents, their CIs cover them, and
the Wald test keeps the planted form and rejects the other. The CIs, Wald statistics and
p-values are also recomputed here from statsmodels' cluster-robust OLS with the t / F
quantiles on G - k residual df (G configurations, k coefficients).

With 9 clusters the cluster-robust CI covers about 0.88-0.9 of the time and the Wald test of the
true form rejects about 13 % of draws at 5 % (simulated, 200 draws), so the draws here are
fixed (``rng_seed``) rather than random.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats

from ih_kedro.science.statistics.law_mechanisms import (
    PUBLISHED_FORMS,
    emerged_mask,
    mechanism_fit_table,
    size_term_fit,
    table_columns,
    warmup_share_table,
)
from tests.science.statistics.cr2_reference import cr2_reference

T = 2e4
BATCHES = (8, 16, 32)
CONTEXTS = (64, 128, 256)
SIZES = (1e6, 4e6)


def arm_table(
    a: float,
    b: float,
    rng_seed: int,
    *,
    batches: tuple = BATCHES,
    contexts: tuple = CONTEXTS,
    sizes: tuple = (1e6,),
    c: float = 0.0,
    n_seeds: int = 2,
    sd: float = 0.05,
    censored_run: bool = True,
) -> pd.DataFrame:
    """Emergence rows from ``S* = T / (B^a C^b (size / 1e6)^c)`` with log-normal noise, one per
    (size, B, C, seed), and (``censored_run``) one run that never emerged."""
    rng = np.random.default_rng(rng_seed)
    rows = [
        {
            "run_name": f"n{size:g}_b{bs}_c{ctx}_s{seed}",
            "step": T / (bs**a * ctx**b * (size / 1e6) ** c) * math.exp(rng.normal(0, sd)),
            "censored": False,
            "status": "emerged",
            "last_step": 1e5,
            "batch_size": bs,
            "context_length": ctx,
            "seed": seed,
            "n_parameters": size,
        }
        for size in sizes
        for bs in batches
        for ctx in contexts
        for seed in range(n_seeds)
    ]
    if censored_run:  # never emerged: counted in n_runs, out of the fit
        rows.append({**rows[0], "run_name": "slow", "step": np.nan, "censored": True,
                     "status": "censored", "seed": 7})  # fmt: skip
    return pd.DataFrame(rows)


ARMS = {
    "today": (0.5, 0.5, 1),  # a, b, rng seed: the 1/sqrt(BC) form
    "flat_in_C": (0.5, 0.0, 2),  # no dependence on the context length
    "seed_like": (0.37, 0.62, 3),  # the seed study's form
}


@pytest.fixture(scope="module")
def fits() -> pd.DataFrame:
    tables = {arm: arm_table(a, b, seed) for arm, (a, b, seed) in ARMS.items()}
    return mechanism_fit_table(tables).set_index("arm")


def independent_fit(table: pd.DataFrame, null: tuple[float, float]) -> dict[str, float]:
    """a, b with 95 % CIs and the joint test of ``null``, from an independent CR2 cluster-robust
    OLS (clusters = (B, C)): t on each coefficient's Bell–McCaffrey df, Hotelling's T² on the
    smaller df of the two exponents."""
    runs = table[table["status"] == "emerged"]
    X = sm.add_constant(np.log(runs[["batch_size", "context_length"]].to_numpy(float)))
    groups = (runs["batch_size"].astype(str) + "_" + runs["context_length"].astype(str)).to_numpy()
    params, cov, df = cr2_reference(np.log(runs["step"].to_numpy()), X, groups)
    q = stats.t.ppf(0.975, df)  # (3,)
    diff = params[1:] + np.array(null)  # the coefficients are -a, -b
    eta = min(df[1:])
    f = diff @ np.linalg.solve(cov[1:, 1:], diff) * (eta - 1) / (2 * eta)
    se = np.sqrt(np.diag(cov))
    return {
        "a": -params[1],
        "a_ci_low": -params[1] - q[1] * se[1],
        "b": -params[2],
        "b_ci_high": -params[2] + q[2] * se[2],
        "F": f,
        "p": stats.f.sf(f, 2, eta - 1),
        "df_denominator": eta - 1,
    }


# ------------------------------------------------------------------ mechanism_fit_table


def test_each_arm_recovers_its_planted_exponents_and_the_cis_cover_them(fits) -> None:
    for arm, (a, b, _) in ARMS.items():
        row = fits.loc[arm]
        assert row["a"] == pytest.approx(a, abs=0.03), arm
        assert row["b"] == pytest.approx(b, abs=0.03), arm
        assert row["a_ci_low"] <= a <= row["a_ci_high"], arm
        assert row["b_ci_low"] <= b <= row["b_ci_high"], arm
        assert row["T"] == pytest.approx(T, rel=0.25), arm
        assert row["r_squared"] > 0.95 and row["loo_r_log"] > 0.95, arm
    # Measured on these draws (3 decimals): today a 0.516 b 0.492, flat_in_C b near 0.
    assert fits.loc["today", ["a", "b"]].round(3).tolist() == [0.516, 0.492]


def test_counts_clusters_and_test_kind(fits) -> None:
    for arm in ARMS:
        row = fits.loc[arm]
        # 18 runs emerged on 9 configurations x 2 seeds; the censored run is counted, not fitted.
        assert (row["n_runs"], row["n_emerged"], row["n_configurations"], row["n_seeds"]) == (
            19,
            18,
            9,
            2,
        )
        assert (row["n_clusters"], row["wald_test"], row["note"]) == (9, "F", "")
        # df_resid is the F's denominator: Hotelling's, from the exponents' Bell–McCaffrey df
        # (3.2 on this 3 x 3 grid, where G - k = 6 over-stated it).
        expected = independent_fit(arm_table(*ARMS[arm][:2], ARMS[arm][2]), (0.5, 0.5))
        assert row["df_resid"] == pytest.approx(expected["df_denominator"], rel=1e-9)
        assert row["df_resid"] == pytest.approx(3.1998, abs=1e-4)
        for form in PUBLISHED_FORMS:
            assert row[f"wald_{form}_df"] == 2


def test_wald_keeps_the_planted_form_and_rejects_the_other(fits) -> None:
    p = fits[[f"wald_{form}_p_value" for form in PUBLISHED_FORMS]]
    p.columns = list(PUBLISHED_FORMS)
    assert p.loc["today", "aoyama_sqrt_BC"] > 0.05 and p.loc["today", "seed_study"] < 0.01
    assert p.loc["seed_like", "seed_study"] > 0.05 and p.loc["seed_like", "aoyama_sqrt_BC"] < 0.01
    assert (p.loc["flat_in_C"] < 1e-3).all()  # b = 0 is far from both forms (T² on 3.2 df)


def test_estimates_and_wald_equal_an_independent_cluster_robust_fit(fits) -> None:
    for arm, (a, b, seed) in ARMS.items():
        table = arm_table(a, b, seed)
        for form, null in PUBLISHED_FORMS.items():
            expected = independent_fit(table, null)
            row = fits.loc[arm]
            assert row["a"] == pytest.approx(expected["a"], rel=1e-10)
            assert row["a_ci_low"] == pytest.approx(expected["a_ci_low"], rel=1e-10)
            assert row["b"] == pytest.approx(expected["b"], rel=1e-10, abs=1e-12)
            assert row["b_ci_high"] == pytest.approx(expected["b_ci_high"], rel=1e-10)
            assert row[f"wald_{form}_statistic"] == pytest.approx(expected["F"], rel=1e-9)
            assert row[f"wald_{form}_p_value"] == pytest.approx(expected["p"], rel=1e-9, abs=0)


def test_one_level_of_B_or_C_is_a_row_of_nans_with_a_note() -> None:
    tables = {
        "one_B": arm_table(0.5, 0.5, 1, batches=(16,)),
        "one_C": arm_table(0.5, 0.5, 1, contexts=(128,)),
        "today": arm_table(0.5, 0.5, 1),
    }
    got = mechanism_fit_table(tables)
    assert got["arm"].tolist() == ["one_B", "one_C", "today"]
    assert got["note"].tolist() == [
        "not identifiable: one B level",
        "not identifiable: one C level",
        "",
    ]
    estimates = [c for c in got.columns if c not in ("arm", "note", "wald_test") and "n_" not in c]
    assert got.loc[:1, estimates].isna().all().all()
    assert got.loc[2, estimates].notna().all()
    # Counts stay: 3 configurations x 2 seeds emerged, plus the censored run.
    assert got.loc[0, ["n_runs", "n_emerged", "n_configurations", "n_seeds"]].tolist() == [
        7,
        6,
        3,
        2,
    ]


def test_an_arm_that_cannot_be_fitted_is_a_nan_row_not_an_exception() -> None:
    few = arm_table(0.5, 0.5, 1, batches=(8, 16), contexts=(64,), n_seeds=1)  # 2 runs
    few.loc[1, "context_length"] = 128
    no_step = arm_table(0.5, 0.5, 1).drop(columns=["step"])
    got = mechanism_fit_table({"few": few, "no_step": no_step, "empty": few.iloc[:0]})
    assert got["note"].tolist() == [
        "not fitted: emergence law: 2 usable runs for 3 coefficients ['const', "
        "'log_batch_size', 'log_context_length']; need at least 4 (censored='exclude', "
        "1 censored runs excluded)",
        "not fitted: emergence table: missing columns ['step']",
        "not fitted: emergence law: 0 usable runs for 1 coefficients ['const']; need at least "
        "2 (censored='exclude', 0 censored runs excluded)",
    ]
    assert got[["a", "b", "T", "wald_seed_study_p_value"]].isna().all().all()
    assert got["n_runs"].tolist() == [3, 19, 0]
    assert got["n_emerged"].tolist() == [2, 0, 0]


def test_too_few_configurations_to_cluster_falls_back_to_classical_and_says_so() -> None:
    # 2 x 2 configurations: 4 clusters for 3 coefficients is too few (needs > 4).
    table = arm_table(0.5, 0.5, 4, batches=(8, 32), contexts=(64, 256), n_seeds=3)
    (row,) = mechanism_fit_table({"small": table}).to_dict("records")
    assert row["n_clusters"] == 0
    assert row["df_resid"] == 12 - 3  # classical: runs - coefficients
    assert row["note"] == "classical covariance: too few configurations to cluster by"
    assert row["a"] == pytest.approx(0.5, abs=0.05)


def test_columns_options_and_forms() -> None:
    assert table_columns() == [
        "arm", "n_runs", "n_emerged", "n_configurations", "n_seeds", "a", "a_ci_low",
        "a_ci_high", "b", "b_ci_low", "b_ci_high", "T", "r_squared", "loo_r_log",
        "wald_aoyama_sqrt_BC_statistic", "wald_aoyama_sqrt_BC_df", "wald_aoyama_sqrt_BC_p_value",
        "wald_seed_study_statistic", "wald_seed_study_df", "wald_seed_study_p_value",
        "n_clusters", "df_resid", "wald_test", "note",
    ]  # fmt: skip
    empty = mechanism_fit_table({})
    assert empty.empty and list(empty.columns) == table_columns()
    table = arm_table(0.5, 0.5, 1)
    own = mechanism_fit_table({"today": table}, {"forms": {"truth": (0.5, 0.5)}, "level": 0.9})
    assert [c for c in own.columns if c.startswith("wald_")] == [
        "wald_truth_statistic",
        "wald_truth_df",
        "wald_truth_p_value",
        "wald_test",
    ]
    default = mechanism_fit_table({"today": table})
    assert own.loc[0, "wald_truth_p_value"] == default.loc[0, "wald_aoyama_sqrt_BC_p_value"]
    assert default.loc[0, "a_ci_low"] < own.loc[0, "a_ci_low"] < own.loc[0, "a"]  # 90 % is shorter
    # Tokens at emergence: exponents one less, and the same Wald test (forms shifted by one).
    tokens = mechanism_fit_table({"today": table}, {"response": "tokens", "leave_one_out": False})
    assert tokens.loc[0, "a"] == pytest.approx(default.loc[0, "a"] - 1, rel=1e-12)
    assert tokens.loc[0, "wald_seed_study_statistic"] == pytest.approx(
        default.loc[0, "wald_seed_study_statistic"], rel=1e-9
    )
    with pytest.raises(ValueError, match=r"unknown options \['alpha'\]"):
        mechanism_fit_table({"today": table}, {"alpha": 0.05})
    with pytest.raises(ValueError, match="level: must be in"):
        mechanism_fit_table({"today": table}, {"level": 1.5})


def test_emerged_mask_reads_status_then_censored_then_step() -> None:
    frame = pd.DataFrame(
        {"step": [10.0, 20.0, np.nan, 30.0], "censored": [False, True, False, None],
         "status": ["emerged", "censored", "emerged", "left_censored"]}
    )  # fmt: skip
    assert emerged_mask(frame).tolist() == [True, False, False, False]
    assert emerged_mask(frame.drop(columns="status")).tolist() == [True, False, False, True]
    assert emerged_mask(frame[["step"]]).tolist() == [True, True, False, True]


# ------------------------------------------------------------------ size_term_fit


def sized(c: float, rng_seed: int = 0, sizes: tuple = SIZES) -> pd.DataFrame:
    return arm_table(0.5, 0.5, rng_seed, sizes=sizes, c=c)


def test_size_term_recovers_a_planted_size_exponent() -> None:
    got = size_term_fit(sized(0.3), margin=0.1)
    assert got["c"] == pytest.approx(0.3, abs=0.02)
    assert got["c_ci"][0] <= 0.3 <= got["c_ci"][1]
    assert got["inside_margin"] is False and got["p_value"] < 1e-10
    assert got["a"] == pytest.approx(0.5, abs=0.03) and got["b"] == pytest.approx(0.5, abs=0.03)
    # 36 emerged runs on 2 sizes x 9 configurations; t on 18 - 4 df.
    assert (got["n_runs"], got["n_clusters"], got["df_resid"]) == (36, 18, 14.0)
    assert round(got["c"], 3) == 0.287  # measured on this draw


def test_size_term_without_a_size_effect_is_inside_the_margin() -> None:
    got = size_term_fit(sized(0.0), margin=0.1)
    assert got["c_ci"][0] <= 0.0 <= got["c_ci"][1]
    assert got["inside_margin"] is True and got["p_value"] > 0.05
    # The margin is the CI's farthest end: just outside it the verdict flips.
    edge = max(abs(v) for v in got["c_ci"])
    assert size_term_fit(sized(0.0), margin=edge + 1e-12)["inside_margin"] is True
    assert size_term_fit(sized(0.0), margin=edge - 1e-6)["inside_margin"] is False


def test_size_term_equals_an_independent_cluster_robust_fit() -> None:
    table = sized(0.3)
    runs = table[table["status"] == "emerged"]
    X = sm.add_constant(
        np.log(runs[["batch_size", "context_length", "n_parameters"]].to_numpy(float))
    )
    groups = (
        runs["batch_size"].astype(str) + "|" + runs["context_length"].astype(str) + "|"
        + runs["n_parameters"].astype(str)
    ).to_numpy()  # fmt: skip
    params, cov, df = cr2_reference(np.log(runs["step"].to_numpy()), X, groups)
    se = np.sqrt(np.diag(cov))
    c = -params[3]
    q = stats.t.ppf(0.95, df)  # 90 % CIs, t on each coefficient's Bell–McCaffrey df
    got = size_term_fit(table, level=0.9)
    assert got["c"] == pytest.approx(c, rel=1e-10)
    assert got["c_ci"] == pytest.approx((c - q[3] * se[3], c + q[3] * se[3]), rel=1e-10)
    assert got["p_value"] == pytest.approx(2 * stats.t.sf(abs(c) / se[3], df[3]), rel=1e-8, abs=0)
    assert got["b_ci"] == pytest.approx(
        (-params[2] - q[2] * se[2], -params[2] + q[2] * se[2]), rel=1e-10
    )
    assert got["df_resid"] == 18 - 4  # G - k, the df a prediction would use


def test_size_term_needs_two_levels_of_size_b_and_c() -> None:
    with pytest.raises(ValueError) as err:
        size_term_fit(sized(0.0, sizes=(1e6,)))
    assert str(err.value) == (
        "size term: the runs that emerged need >= 2 levels of each of B, C and model size "
        "(a 2x2 B x C grid at two sizes at least); got 1 level(s) of size (n_parameters)"
    )
    one_b = arm_table(0.5, 0.5, 0, sizes=SIZES, batches=(16,))
    with pytest.raises(ValueError, match=r"got 1 level\(s\) of B \(batch_size\)$"):
        size_term_fit(one_b)
    with pytest.raises(ValueError, match=r"misses columns \['params'\]"):
        size_term_fit(sized(0.0), size_column="params")
    # Size moving with B: collinear.
    tied = sized(0.0)
    tied["n_parameters"] = tied["batch_size"] * 1e5
    with pytest.raises(ValueError, match="collinear"):
        size_term_fit(tied)


def test_warmup_share_is_warmup_over_the_median_emergence_step_per_cell() -> None:
    """Censored runs and runs of another cell do not count; a cell without an emerged run has
    no share; rows come smallest B·C first."""
    rows = pd.DataFrame({
        "batch_size": [32, 32, 32, 128, 128, 128, 64],
        "context_length": [32, 32, 32, 128, 128, 128, 64],
        "step": [1000.0, 1200.0, 5000.0, 800.0, 1000.0, np.nan, 900.0],
        "status": ["emerged", "emerged", "censored", "emerged", "emerged", "censored", "emerged"],
    })  # fmt: skip
    schedule = {(128, 128): (40, 4000), (32, 32): (640, 64000), (32, 64): (320, 32000)}
    table = warmup_share_table(rows, schedule)
    assert table[["batch_size", "context_length", "n_runs", "n_emerged"]].values.tolist() == [
        [32, 32, 3, 2], [32, 64, 0, 0], [128, 128, 3, 2]]  # fmt: skip
    assert table["emergence_step_median"].tolist()[0] == 1100.0
    assert table["warmup_share"].tolist()[0] == pytest.approx(640 / 1100)
    assert math.isnan(table["warmup_share"].tolist()[1])
    assert table["warmup_share"].tolist()[2] == pytest.approx(40 / 900)
    assert table["tokens_per_step"].tolist() == [1024, 2048, 16384]
