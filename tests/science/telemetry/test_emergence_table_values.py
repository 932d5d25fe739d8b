"""Value tests of the emergence table and the ``min_layer`` checks: rows equal the run's
estimates, spec fields and defaults pass through, covariates join once per run, errors name
the parameter.

Every expected number is worked out by hand or read from :func:`estimate_emergence` on the
same run (the table's one source of estimates), never from the table itself.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.telemetry.emergence import estimate_emergence
from ih_kedro.science.telemetry.emergence_table import (
    EMERGENCE_COLUMNS,
    check_min_layer,
    detect_emergence_table,
    emergence_min_layer,
    validate_min_layers,
)
from tests.science.telemetry.emergence_runs import model_level


def test_check_min_layer_names_the_parameter():
    check_min_layer(1, (5, 3, 2, 4), "x")
    check_min_layer(99, (5, 3), "x")  # model-level: no layers to leave
    with pytest.raises(ValueError, match=r"^x\.min_layer: must be >= 0, got -1$"):
        check_min_layer(-1, (5, 3), "x")
    with pytest.raises(
        ValueError,
        match=r"^w\.min_layer: 2 leaves no layers \(the model has 2 layers; use 0\.\.1\)$",
    ):
        check_min_layer(2, (5, 3, 2, 4), "w")
    with pytest.raises(ValueError, match=r"the model has 3 layers; use 0\.\.2"):
        check_min_layer(3, (5, 3, 3), "w")  # (K, n, layers): three axes suffice


# --------------------------------------------------------------------------------------------
# Table
# --------------------------------------------------------------------------------------------
def _runs():
    steps = np.array([0.0, 100.0, 200.0, 300.0])
    rng = np.random.default_rng(0)
    noisy = np.array([0.0, 0.25, 0.75, 1.0])[:, None] + rng.normal(0, 0.1, size=(4, 6))
    return {
        "z_run": {"steps": steps, "tokens": steps * 10, "ar": noisy, "probe_length": 16},
        "a_run": {"steps": steps, "tokens_seen": steps * 20, "ar": model_level([0.0] * 4)},
        "m_run": {"steps": steps, "tokens": steps * 30},  # lacks the metric: skipped
    }


def test_table_rows_match_estimates_with_the_spec_defaults():
    runs = _runs()
    table = detect_emergence_table(runs, None, [{"metric": "ar", "threshold": 0.5}])
    assert table.run_name.tolist() == ["a_run", "z_run"]  # sorted, m_run skipped
    ref = estimate_emergence(
        runs["z_run"]["steps"],
        runs["z_run"]["tokens"],
        runs["z_run"]["ar"],
        method="threshold",
        threshold=0.5,
        n_bootstrap=200,
        seed=0,
        ci=0.95,
        min_layer=0,
    )
    row = table.iloc[1]
    assert row.metric == "ar" and row.method == "threshold" and row.status == "emerged"
    assert row.step == ref.step and row.tokens == ref.tokens
    assert row.ci_low == ref.ci_low and row.ci_high == ref.ci_high
    assert row.ci_low < row.ci_high
    assert row.threshold == 0.5 and row.last_step == 300.0 and row.probe_length == 16.0
    assert row.min_layer == 0 and row.reason == "" and not row.censored
    censored = table.iloc[0]
    assert censored.status == "censored" and censored.censored
    assert censored.reason == "below 0.5 at every checkpoint"
    assert censored.tokens == 6000.0 and math.isnan(censored.probe_length)


def test_table_passes_every_spec_field():
    runs = _runs()
    spec = {"metric": "ar", "method": "threshold", "threshold": 0.4, "n_bootstrap": 30,
            "seed": 5, "ci": 0.5, "min_layer": 3}  # fmt: skip
    row = detect_emergence_table(runs, None, [spec]).iloc[1]
    ref = estimate_emergence(
        runs["z_run"]["steps"], runs["z_run"]["tokens"], runs["z_run"]["ar"], threshold=0.4,
        n_bootstrap=30, seed=5, ci=0.5,
    )  # fmt: skip
    assert (row.step, row.ci_low, row.ci_high) == (ref.step, ref.ci_low, ref.ci_high)
    assert row.min_layer == 3  # model-level metric: accepted and recorded
    logistic = detect_emergence_table(runs, None, [{"metric": "ar", "method": "logistic"}])
    assert logistic.method.tolist() == ["logistic", "logistic"]
    assert logistic.threshold.isna().all()


def test_table_validates_inputs():
    runs = _runs()
    with pytest.raises(ValueError, match=r"^specs: at least one emergence detection spec is"):
        detect_emergence_table(runs, None, [])
    with pytest.raises(ValueError, match=r"specs: every spec needs a 'metric'"):
        detect_emergence_table(runs, None, [{"threshold": 0.5}])
    with pytest.raises(ValueError, match=r"score_samples\['r'\]: missing 'steps'"):
        detect_emergence_table({"r": {"tokens": np.zeros(4)}}, None, [{"metric": "ar"}])
    with pytest.raises(ValueError, match=r"score_samples\['r'\]: missing 'tokens'"):
        detect_emergence_table({"r": {"steps": np.zeros(4)}}, None, [{"metric": "ar"}])


def test_table_without_rows_keeps_the_columns_and_dtypes():
    table = detect_emergence_table(_runs(), None, [{"metric": "other", "threshold": 0.5}])
    assert list(table.columns) == EMERGENCE_COLUMNS and len(table) == 0
    assert table.step.dtype == float and table.censored.dtype == bool
    assert table.min_layer.dtype == np.int64


def test_table_joins_manifest_covariates_once_per_run():
    runs = _runs()
    specs = [{"metric": "ar", "threshold": 0.5, "n_bootstrap": 0}]
    manifest = pd.DataFrame(
        {
            "run_name": ["z_run", "a_run", "z_run"],  # z_run listed twice: the first row counts
            "seed": [1, 2, 9],
            "copy_rate": [0.5, 0.25, 0.5],
            "learning_rate": [1e-3, 1e-3, 1e-3],  # not a covariate
        }
    )
    table = detect_emergence_table(runs, manifest, specs)
    assert list(table.columns) == [*EMERGENCE_COLUMNS, "seed", "copy_rate"]
    assert table.run_name.tolist() == ["a_run", "z_run"]
    assert table.seed.tolist() == [2, 1] and table.copy_rate.tolist() == [0.25, 0.5]
    assert table.index.tolist() == [0, 1]
    # An empty manifest or one without run names adds nothing.
    for empty in (manifest.iloc[:0], manifest.drop(columns="run_name")):
        assert list(detect_emergence_table(runs, empty, specs).columns) == EMERGENCE_COLUMNS
    # A run missing from the manifest is kept, without covariates.
    table = detect_emergence_table(runs, manifest.iloc[:1], specs)
    assert table.run_name.tolist() == ["a_run", "z_run"]
    assert math.isnan(table.seed.iloc[0]) and table.seed.iloc[1] == 1


def test_table_default_bootstrap_count_is_200():
    steps = np.array([0.0, 100.0, 200.0, 300.0])
    rng = np.random.default_rng(0)
    samples = np.array([0.0, 0.25, 0.75, 1.0])[:, None] + rng.normal(0, 0.1, size=(4, 30))
    runs = {"r": {"steps": steps, "tokens": steps, "ar": samples}}
    row = detect_emergence_table(runs, None, [{"metric": "ar", "threshold": 0.5, "ci": 0.5}])
    ref = estimate_emergence(steps, steps, samples, threshold=0.5, n_bootstrap=200, ci=0.5)
    other = estimate_emergence(steps, steps, samples, threshold=0.5, n_bootstrap=201, ci=0.5)
    assert (other.ci_low, other.ci_high) != (ref.ci_low, ref.ci_high)  # precondition
    assert (row.ci_low.iloc[0], row.ci_high.iloc[0]) == (ref.ci_low, ref.ci_high)


def test_a_missing_metric_skips_only_its_spec():
    steps = np.array([0.0, 100.0, 200.0])
    runs = {"r": {"steps": steps, "tokens": steps, "ar": model_level([0.0, 0.25, 0.75])}}
    specs = [{"metric": "missing", "threshold": 0.5}, {"metric": "ar", "threshold": 0.5}]
    table = detect_emergence_table(runs, None, specs)
    assert table.metric.tolist() == ["ar"] and table.step.tolist() == [150.0]


def test_table_prefers_tokens_over_tokens_seen():
    steps = np.array([0.0, 100.0, 200.0])
    runs = {"r": {"steps": steps, "tokens": steps * 3, "tokens_seen": steps * 7,
                  "ar": model_level([0.0, 0.25, 0.75])}}  # fmt: skip
    table = detect_emergence_table(runs, None, [{"metric": "ar", "threshold": 0.5}])
    assert table.step.tolist() == [150.0] and table.tokens.tolist() == [450.0]


# --------------------------------------------------------------------------------------------
# validate_min_layers
# --------------------------------------------------------------------------------------------
def test_validate_min_layers_accepts_every_layer_of_the_model():
    validate_min_layers(2, None)
    validate_min_layers(2, {})
    validate_min_layers(2, {"min_layer": 1, "emergence": None}, None)
    telemetry = {
        "min_layer": np.int64(0),
        "emergence": {
            "metrics": [
                {"metric": "prefix_matching", "min_layer": 1},
                {"metric": "associative_recall", "min_layer": 9},  # model-level: not checked
                {"metric": "repeated_loss_drop", "min_layer": -3},
                {"metric": "prefix_matching"},
            ]
        },
    }
    validate_min_layers(2, telemetry, {"trajectory_min_layer": 1})


@pytest.mark.parametrize(
    ("telemetry", "statistics", "name", "value"),
    [
        ({"min_layer": 2}, None, "telemetry.min_layer", "2"),
        ({"min_layer": -1}, None, "telemetry.min_layer", "-1"),
        ({"min_layer": 1.0}, None, "telemetry.min_layer", "1.0"),
        (
            {"emergence": {"metrics": [{"metric": "ar"}, {"metric": "prefix", "min_layer": 2}]}},
            None,
            r"telemetry\.emergence\.metrics\[1\]\.min_layer",
            "2",
        ),
        ({}, {"trajectory_min_layer": 5}, "statistics.trajectory_min_layer", "5"),
    ],
)
def test_validate_min_layers_names_the_bad_parameter(telemetry, statistics, name, value):
    with pytest.raises(
        ValueError,
        match=rf"^law_fit\.{name}: {value} is not a layer of the model \(it has 2 layers: use 0\.\.1\)$",
    ):
        validate_min_layers(2, telemetry, statistics, where="law_fit.")


def test_validate_min_layers_without_prefix():
    with pytest.raises(ValueError, match=r"^telemetry\.min_layer: 3 is not a layer"):
        validate_min_layers(3, {"min_layer": 3})


def test_emergence_min_layer_reads_the_metric_spec_or_the_default():
    telemetry = {"emergence": {"metrics": [{"metric": "a", "min_layer": 0},
                                           {"metric": "b"}, {"metric": "c", "min_layer": 2}]}}  # fmt: skip
    assert emergence_min_layer(telemetry, "a") == 0
    assert emergence_min_layer(telemetry, "c") == 2
    assert emergence_min_layer(telemetry, "b") == 1  # named, no min_layer: the default
    assert emergence_min_layer(telemetry, "b", default=3) == 3
    assert emergence_min_layer(telemetry, "missing") == 1
    assert emergence_min_layer(None, "a") == 1 and emergence_min_layer({}, "a", default=0) == 0


def test_select_emergence_rows_names_the_parameters_that_chose() -> None:
    import pandas as pd

    from ih_kedro.science.telemetry.emergence_table import select_emergence_rows

    table = pd.DataFrame({"run_name": ["r", "r", "r"], "metric": "pm",
                          "method": ["threshold", "threshold", "logistic"],
                          "threshold": [0.3, 0.5, None], "step": [100.0, 200.0, 150.0]})  # fmt: skip
    assert select_emergence_rows(table, "pm", "threshold", 0.5)["step"].tolist() == [200.0]
    assert select_emergence_rows(table, "pm", "logistic")["step"].tolist() == [150.0]
    with pytest.raises(ValueError, match=r"^x\.threshold: the table has thresholds \[0.3, 0.5\]"):
        select_emergence_rows(table, "pm", "threshold", threshold_parameter="x.threshold")
    with pytest.raises(ValueError, match=r"^x\.metric: no emergence rows for metric='nope'"):
        select_emergence_rows(table, "nope", "threshold", metric_parameter="x.metric")
