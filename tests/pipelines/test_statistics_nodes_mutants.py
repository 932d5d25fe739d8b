"""The statistics pipeline's table nodes checked through exact values (mutation-testing kills).

Parameter merging and validation, row selection, the failed-fit summary, predictions, the
observed-vs-predicted table and the MLflow logging (into the test session's SQLite MLflow
store). Expected values are written out by hand, or from the law's formula
``S* = exp(X @ params)`` applied here to the summary's model block.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from ih_kedro.pipelines.statistics.nodes import (
    _failed_summary,
    _observed_vs_predicted,
    _params,
    fit_emergence_law_node,
    log_law_fit_to_mlflow,
    predict_emergence_node,
    select_emergence_rows,
)

A, B, T = 0.37, 0.62, 1e5


def table(censor: tuple[str, ...] = ("b32_c64_s1",)) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows = []
    for bs in (32, 64, 128):
        for c in (32, 64):
            for s in range(2):
                name = f"b{bs}_c{c}_s{s}"
                step = T / (bs**A * c**B) * math.exp(rng.normal(0, 0.05))
                rows.append(
                    {
                        "run_name": name,
                        "metric": "prefix_matching",
                        "method": "threshold",
                        "threshold": 0.4,
                        "step": np.nan if name in censor else step,
                        "tokens": np.nan if name in censor else step * bs * c,
                        "censored": name in censor,
                        "status": "censored" if name in censor else "emerged",
                        "last_step": 1.2 * step if name in censor else 3 * step,
                        "preset": "attn2l",
                        "batch_size": bs,
                        "context_length": c,
                        "seed": s,
                    }
                )
    return pd.DataFrame(rows)


def law(summary: dict, batch, context) -> np.ndarray:
    model = summary["model"]
    columns = {
        "const": np.ones(len(batch)),
        "log_batch_size": np.log(np.asarray(batch, float)),
        "log_context_length": np.log(np.asarray(context, float)),
    }
    X = np.column_stack([columns[name] for name in model["coef_names"]])
    return np.exp(X @ np.asarray(model["params"], float))


def exact(message: str) -> str:
    return f"^{re.escape(message)}$"


# ------------------------------------------------------------------ _params


def test_params_defaults_and_overrides():
    expected = {
        "metric": "prefix_matching",
        "method": "threshold",
        "threshold": None,
        "response": "step",
        "censored": "exclude",
        "extra_covariates": [],
        "seed_exponents": {"a": 0.37, "b": 0.62},
        "level": 0.95,
        "predict_for": [],
        "trajectory_metric": "prefix_matching",
        "trajectory_min_layer": 1,
    }
    assert _params(None) == expected
    assert _params({}) == expected
    assert _params({"metric": "x", "level": 0.5, "censored": "tobit", "response": "tokens"}) == {
        **expected,
        "metric": "x",
        "level": 0.5,
        "censored": "tobit",
        "response": "tokens",
    }


@pytest.mark.parametrize("level", [1e-9, 0.5, 0.999999, "0.9"])
def test_params_accepts_levels_inside_the_unit_interval(level):
    assert _params({"level": level})["level"] == level


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"censored": "drop"}, "statistics.censored: expected one of ('exclude', 'tobit'), got 'drop'"),
        ({"response": "flops"}, "statistics.response: expected one of ('step', 'tokens'), got 'flops'"),
        ({"level": 1}, "statistics.level: must be in (0, 1), got 1"),
        ({"level": 0.0}, "statistics.level: must be in (0, 1), got 0.0"),
        ({"level": -0.5}, "statistics.level: must be in (0, 1), got -0.5"),
        ({"level": 1.5}, "statistics.level: must be in (0, 1), got 1.5"),
    ],
)  # fmt: skip
def test_params_messages(overrides, message):
    with pytest.raises(ValueError, match=exact(message)):
        _params(overrides)


# ------------------------------------------------------------------ select_emergence_rows


def mixed() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "metric": ["pm", "pm", "ar", "pm", "pm"],
            "method": ["threshold", "logistic", "threshold", "threshold", "threshold"],
            "threshold": [0.4, 0.4, 0.4, 0.4, np.nan],
            "run_name": ["a", "b", "c", "d", "e"],
        },
        index=[10, 11, 12, 13, 14],
    )


def test_select_emergence_rows_filters_and_resets_the_index():
    rows = select_emergence_rows(mixed(), {"metric": "pm"})
    assert rows["run_name"].tolist() == ["a", "d", "e"] and rows.index.tolist() == [0, 1, 2]
    rows = select_emergence_rows(mixed(), {"metric": "pm", "threshold": 0.4})
    assert rows["run_name"].tolist() == ["a", "d"] and rows.index.tolist() == [0, 1]
    rows = select_emergence_rows(mixed(), {"metric": "pm", "method": "logistic"})
    assert rows["run_name"].tolist() == ["b"]
    rows = select_emergence_rows(mixed(), {"metric": "ar"})
    assert rows["run_name"].tolist() == ["c"]
    no_threshold = mixed().drop(columns="threshold")
    rows = select_emergence_rows(no_threshold, {"metric": "pm"})
    assert rows["run_name"].tolist() == ["a", "d", "e"]


def test_select_emergence_rows_messages():
    message = (
        "statistics.metric/method: no emergence rows for metric='pm', method='threshold', "
        "threshold=0.5"
    )
    with pytest.raises(ValueError, match=exact(message)):
        select_emergence_rows(mixed(), {"metric": "pm", "threshold": 0.5})
    message = (
        "statistics.metric/method: no emergence rows for metric='prefix_matching', "
        "method='threshold', threshold=None"
    )
    with pytest.raises(ValueError, match=exact(message)):
        select_emergence_rows(mixed(), {})
    two = mixed()
    two.loc[13, "threshold"] = 0.6
    message = (
        "statistics.threshold: the table has thresholds [0.4, 0.6] for pm/threshold; choose one"
    )
    with pytest.raises(ValueError, match=exact(message)):
        select_emergence_rows(two, {"metric": "pm"})
    # A chosen threshold keeps the rows within float noise of it, without a "choose one" error.
    noisy = mixed()
    noisy.loc[13, "threshold"] = 0.4 + 1e-10
    chosen = select_emergence_rows(noisy, {"metric": "pm", "threshold": 0.4})
    expected = select_emergence_rows(mixed(), {"metric": "pm", "threshold": 0.4})
    assert chosen["run_name"].tolist() == expected["run_name"].tolist()
    # isclose picks a threshold written with float noise
    rows = select_emergence_rows(two, {"metric": "pm", "threshold": 0.6000000001})
    assert rows["run_name"].tolist() == ["d"]
    with pytest.raises(ValueError, match=r"^statistics\.level"):
        select_emergence_rows(mixed(), {"metric": "pm", "level": 2})


# ------------------------------------------------------------------ _failed_summary


def test_failed_summary_counts():
    p = _params({"response": "tokens", "censored": "tobit"})
    rows = pd.DataFrame(
        {
            "censored": [True, False, True, False],
            "status": ["censored", "emerged", "censored", "not_reached"],
            "seed": [2.0, 0.0, np.nan, 2.0],
        }
    )
    assert _failed_summary(p, rows, "too few") == {
        "status": "insufficient_data: too few",
        "response": "tokens",
        "censored_handling": "tobit",
        "n_runs": 4,
        "n_censored": 2,
        "status_counts": {"censored": 2, "emerged": 1, "not_reached": 1},
        "seeds": [0, 2],
    }
    bare = _failed_summary(p, pd.DataFrame({"x": [1, 2, 3]}), "r")
    assert bare == {
        "status": "insufficient_data: r",
        "response": "tokens",
        "censored_handling": "tobit",
        "n_runs": 3,
        "n_censored": 0,
        "status_counts": {},
        "seeds": [],
    }
    assert all(type(v) is int for v in _failed_summary(p, rows, "")["status_counts"].values())


# ------------------------------------------------------------------ fit_emergence_law_node


def test_fit_node_reports_insufficient_data_with_the_selection():
    data = table(censor=()).iloc[[0, 2, 5]]
    summary, fit_table = fit_emergence_law_node(data, {"censored": "exclude"})
    assert summary["status"].startswith("insufficient_data: emergence law: 3 usable runs")
    assert {k: v for k, v in summary.items() if k != "status"} == {
        "response": "step",
        "censored_handling": "exclude",
        "n_runs": 3,
        "n_censored": 0,
        "status_counts": {"emerged": 3},
        "seeds": [0, 1],
        "metric": "prefix_matching",
        "method": "threshold",
        "threshold": 0.4,
    }
    assert fit_table.empty
    assert list(fit_table.columns) == ["parameter", "estimate", "ci_low", "ci_high"]


def test_fit_node_summary_selection_and_status_counts():
    data = table()
    summary, fit_table = fit_emergence_law_node(data, {"level": 0.9})
    assert summary["status"] == "ok"
    assert (summary["metric"], summary["method"], summary["threshold"]) == (
        "prefix_matching",
        "threshold",
        0.4,
    )
    assert type(summary["threshold"]) is float
    assert summary["status_counts"] == {"emerged": 11, "censored": 1}
    assert summary["level"] == 0.9 and summary["response"] == "step"
    assert (summary["n_runs"], summary["n_censored"]) == (11, 1)
    assert summary["seeds"] == [0, 1]
    assert abs(summary["a"]["estimate"] - A) < 0.1 and abs(summary["b"]["estimate"] - B) < 0.1
    assert list(summary)[:4] == ["status", "metric", "method", "threshold"]
    estimates = fit_table.set_index("parameter")["estimate"]
    assert estimates["a"] == pytest.approx(summary["a"]["estimate"], rel=1e-12)
    assert estimates["b"] == pytest.approx(summary["b"]["estimate"], rel=1e-12)


def test_fit_node_without_threshold_or_status_columns():
    data = table().drop(columns=["threshold", "status"])
    summary, _ = fit_emergence_law_node(data, {})
    assert summary["status"] == "ok" and summary["threshold"] is None
    assert "status_counts" not in summary


def test_fit_node_passes_the_options_to_the_fit():
    data = table()
    tokens, _ = fit_emergence_law_node(data, {"response": "tokens", "censored": "tobit"})
    assert tokens["response"] == "tokens" and tokens["censored_handling"] == "tobit"
    assert tokens["n_runs"] == 12
    other, _ = fit_emergence_law_node(data, {"seed_exponents": {"a": 0.1, "b": 0.2}})
    assert other["wald"]["null_a"] == 0.1 and other["wald"]["null_b"] == 0.2


# ------------------------------------------------------------------ predict_emergence_node


def test_predict_node_without_configurations_or_with_missing_keys():
    empty = predict_emergence_node({"status": "ok", "model": {}}, {})
    assert empty.empty and list(empty.columns) == ["batch_size", "context_length", "step", "tokens"]
    message = "statistics.predict_for: every entry needs ['batch_size', 'context_length']"
    with pytest.raises(ValueError, match=exact(message)):
        predict_emergence_node({}, {"predict_for": [{"seed": 1}]})
    message = "statistics.predict_for: every entry needs ['context_length']"
    with pytest.raises(ValueError, match=exact(message)):
        predict_emergence_node({}, {"predict_for": [{"batch_size": 1}]})


def test_predict_node_unfitted_is_nan_at_the_level():
    configs = [
        {"batch_size": 32, "context_length": 64, "x": 1},
        {"batch_size": 8, "context_length": 16},
    ]
    pred = predict_emergence_node({"status": "ok"}, {"predict_for": configs, "level": 0.8})
    assert list(pred.columns) == ["batch_size", "context_length", "step", "step_low", "step_high",
                                  "tokens", "tokens_low", "tokens_high", "log_se", "level",
                                  "extrapolated", "extrapolated_axis"]  # fmt: skip
    assert pred["batch_size"].tolist() == [32.0, 8.0]
    assert pred["context_length"].tolist() == [64.0, 16.0]
    assert pred["batch_size"].dtype == float
    numbers = pred.drop(columns=["batch_size", "context_length", "level", "extrapolated_axis"])
    assert numbers.isna().all().all()  # extrapolation unknown without a fitted range
    assert pred["extrapolated_axis"].tolist() == ["unknown range"] * 2
    assert pred["level"].tolist() == [0.8, 0.8]


def test_predict_node_fitted_uses_the_law():
    summary, _ = fit_emergence_law_node(table(), {})
    configs = [{"batch_size": 16, "context_length": 256}, {"batch_size": 512, "context_length": 8}]
    pred = predict_emergence_node(summary, {"predict_for": configs, "level": 0.5})
    expected = law(summary, [16, 512], [256, 8])
    np.testing.assert_allclose(pred["step"], expected, rtol=1e-10)
    np.testing.assert_allclose(pred["tokens"], expected * np.array([16 * 256, 512 * 8]), rtol=1e-10)
    assert pred["level"].tolist() == [0.5, 0.5]
    wide = predict_emergence_node(summary, {"predict_for": configs, "level": 0.99})
    assert (wide["step_high"] > pred["step_high"]).all()


# ------------------------------------------------------------------ observed vs predicted


def test_observed_vs_predicted_keeps_emerged_runs_and_logs_the_residual():
    data = table()
    data.loc[data.run_name == "b64_c32_s0", "status"] = "not_reached"  # has a step, not emerged
    data.loc[data.run_name == "b128_c64_s1", "censored"] = True  # censored, with a step
    summary, _ = fit_emergence_law_node(table(), {})
    out = _observed_vs_predicted(data, summary, {"level": 0.8})
    dropped = {"b32_c64_s1", "b64_c32_s0", "b128_c64_s1"}
    assert out["run_name"].tolist() == [n for n in data.run_name if n not in dropped]
    assert out.index.tolist() == list(range(9))
    kept = data[~data.run_name.isin(dropped)]
    np.testing.assert_allclose(out["observed"], kept["step"], rtol=1e-12)
    expected = law(summary, kept.batch_size, kept.context_length)
    np.testing.assert_allclose(out["predicted"], expected, rtol=1e-10)
    np.testing.assert_allclose(out["residual"], np.log(kept["step"]) - np.log(expected), atol=1e-10)
    assert (out["low"] < out["predicted"]).all() and (out["predicted"] < out["high"]).all()
    wide = _observed_vs_predicted(data, summary, {"level": 0.99})
    assert (wide["high"] > out["high"]).all() and (wide["low"] < out["low"]).all()


def test_observed_vs_predicted_without_status_or_censored_columns():
    data = table(censor=()).drop(columns=["status", "censored"])
    data.loc[0, "step"] = np.nan
    summary, _ = fit_emergence_law_node(table(), {})
    out = _observed_vs_predicted(data, summary, {})
    assert out["run_name"].tolist() == data.run_name.tolist()[1:]


def test_observed_vs_predicted_in_tokens():
    data = table()
    summary, _ = fit_emergence_law_node(data, {"response": "tokens"})
    out = _observed_vs_predicted(data, summary, {})
    kept = data[~data.censored]
    tokens = kept["step"] * kept["batch_size"] * kept["context_length"]
    np.testing.assert_allclose(out["observed"], tokens, rtol=1e-12)
    np.testing.assert_allclose(out["predicted"], law(summary, kept.batch_size, kept.context_length),
                               rtol=1e-10)  # fmt: skip
    np.testing.assert_allclose(out["residual"], np.log(out["observed"]) - np.log(out["predicted"]))


# ------------------------------------------------------------------ MLflow


def _store_runs(name: str) -> list:
    """Runs of the test session's SQLite MLflow store (tests/conftest.py) with this run name."""
    import mlflow

    client = mlflow.tracking.MlflowClient()
    experiments = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(experiments, filter_string=f"attributes.run_name = '{name}'")


def test_log_law_fit_opens_and_closes_its_own_run():
    import mlflow

    summary = {"status": "ok", "metric": "pm", "threshold": 0.4, "seeds": [0, 1], "a": {"e": 2},
               "method": "threshold", "response": "step", "censored_handling": "exclude",
               "covariance": "HC3"}  # fmt: skip
    before = len(_store_runs("statistics"))
    log_law_fit_to_mlflow(summary)
    assert mlflow.active_run() is None  # the run it opened is closed again
    runs = _store_runs("statistics")
    assert len(runs) == before + 1
    run = runs[0]  # newest first
    assert run.info.status == "FINISHED"
    assert run.data.metrics == {"law.threshold": 0.4, "law.a.e": 2.0}
    tags = {k: v for k, v in run.data.tags.items() if k.startswith("law.")}
    assert tags == {
        "law.status": "ok",
        "law.metric": "pm",
        "law.method": "threshold",
        "law.threshold": "0.4",
        "law.response": "step",
        "law.censored_handling": "exclude",
        "law.seeds": "[0, 1]",
    }


def test_log_law_fit_uses_an_active_run_and_skips_empty_metrics():
    import mlflow

    with mlflow.start_run(run_name="kedro-parent") as parent:
        log_law_fit_to_mlflow({"status": "insufficient_data: x"})
        assert mlflow.active_run().info.run_id == parent.info.run_id  # left open for kedro
    run = mlflow.get_run(parent.info.run_id)
    assert run.data.metrics == {}
    assert {k: v for k, v in run.data.tags.items() if k.startswith("law.")} == {
        "law.status": "insufficient_data: x"
    }


def test_log_law_fit_closes_its_run_on_error():
    import mlflow
    from mlflow.exceptions import MlflowException

    before = len(_store_runs("statistics"))
    # A metric name MLflow's store refuses ("!"): the call fails inside the run it opened.
    with pytest.raises(MlflowException, match="law.bad!"):
        log_law_fit_to_mlflow({"n_runs": 3, "bad!": 1.0})
    assert mlflow.active_run() is None
    runs = _store_runs("statistics")
    assert len(runs) == before + 1
    assert runs[0].data.metrics == {}
    assert runs[0].info.status == "FINISHED"


# ------------------------------------------------------------------ second round (survivors)


def test_select_emergence_rows_adds_no_index_column():
    rows = select_emergence_rows(mixed(), {"metric": "pm"})
    assert list(rows.columns) == ["metric", "method", "threshold", "run_name"]


def test_predict_node_unfitted_columns_are_float_nan():
    pred = predict_emergence_node({}, {"predict_for": [{"batch_size": 2, "context_length": 4}]})
    for column in ("step", "step_low", "step_high", "tokens", "tokens_low", "tokens_high",
                   "log_se"):  # fmt: skip
        assert pred[column].dtype == float and math.isnan(pred[column].iloc[0])


def node_messages(caplog) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "ih_kedro.pipelines.statistics.nodes"
    ]


def test_node_warnings_and_info_messages(caplog):
    caplog.set_level("INFO", logger="ih_kedro.pipelines.statistics.nodes")
    predict_emergence_node({}, {"predict_for": [{"batch_size": 2, "context_length": 4}]})
    assert node_messages(caplog) == [
        "statistics: no fitted law; predictions are NaN",
    ]
    caplog.clear()
    summary, _ = fit_emergence_law_node(table(censor=()).iloc[[0, 2, 5]], {})
    assert node_messages(caplog) == [
        "statistics: emergence law not fitted: " + summary["status"][len("insufficient_data: ") :]
    ]
    caplog.clear()
    summary, _ = fit_emergence_law_node(table(), {})
    a, b, r = summary["a"], summary["b"], summary["pearson_r_log"]["estimate"]
    assert node_messages(caplog) == [
        f"emergence law (prefix_matching, threshold): a = {a['estimate']:.3f} "
        f"[{a['ci_low']:.3f}, {a['ci_high']:.3f}], b = {b['estimate']:.3f} "
        f"[{b['ci_low']:.3f}, {b['ci_high']:.3f}], r = {r:.3f}, n = 11 runs (1 censored), "
        "seeds [0, 1]"
    ]


def test_log_law_fit_reports_the_metric_count(caplog):
    caplog.set_level("INFO", logger="ih_kedro.pipelines.statistics.nodes")
    log_law_fit_to_mlflow({"a": {"estimate": 1.0, "ci_low": 0.5}, "n_runs": 3})
    assert node_messages(caplog) == ["statistics: logged 3 law-fit metrics to MLflow"]


def test_observed_vs_predicted_uses_the_params_selection():
    data = table()
    summary, _ = fit_emergence_law_node(data, {})
    other = pd.concat([data.assign(metric="ar"), data.assign(metric="pm_other", step=1.0)])
    out = _observed_vs_predicted(other, summary, {"metric": "ar"})
    kept = data[~data.censored]
    assert out["metric"].tolist() == ["ar"] * 11
    np.testing.assert_allclose(out["observed"], kept["step"], rtol=1e-12)
    np.testing.assert_allclose(out["predicted"], law(summary, kept.batch_size, kept.context_length),
                               rtol=1e-10)  # fmt: skip
    assert list(out.columns) == [*data.columns, "observed", "predicted", "low", "high", "residual"]


def test_observed_vs_predicted_with_an_extra_covariate():
    data = table(censor=())
    data["log_params"] = np.where(data.batch_size == 128, 11.0, 10.0)
    data["step"] = data["step"] * np.exp(-0.3 * (data["log_params"] - 10.0))
    summary, _ = fit_emergence_law_node(data, {"extra_covariates": ["log_params"]})
    out = _observed_vs_predicted(data, summary, {})
    model = summary["model"]
    X = np.column_stack(
        [
            np.ones(len(data)),
            np.log(data.batch_size),
            np.log(data.context_length),
            data.log_params,
        ]  # fmt: skip
    )
    assert model["coef_names"] == ["const", "log_batch_size", "log_context_length", "log_params"]
    np.testing.assert_allclose(
        out["predicted"], np.exp(X @ np.asarray(model["params"])), rtol=1e-10
    )
    message = "emergence_table: the law uses extra covariates ['log_params']; give their values"
    with pytest.raises(ValueError, match=exact(message)):
        _observed_vs_predicted(data.drop(columns="log_params"), summary, {})
