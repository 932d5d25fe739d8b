"""Statistics nodes checked through values: the figures' plotted data, the censored and
extra-covariate options, the level, and the parameter-validation messages.

Expected numbers come from the law's own formula applied here to the summary's coefficients
(``log S* = const + c_B log B + c_C log C``), not from the plotting code.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection, PathCollection

from ih_kedro.pipelines.statistics.nodes import (
    fit_emergence_law_node,
    plot_predicted_vs_observed,
    plot_residuals_vs_model_size,
    plot_trajectories,
    predict_emergence_node,
    select_emergence_rows,
)

A, B, T = 0.37, 0.62, 1e5
PARAMS = {
    "metric": "prefix_matching",
    "method": "threshold",
    "threshold": None,
    "response": "step",
    "censored": "exclude",
    "extra_covariates": [],
    "seed_exponents": {"a": 0.37, "b": 0.62},
    "level": 0.95,
    "predict_for": [{"batch_size": 32, "context_length": 32}],
    "trajectory_metric": "prefix_matching",
    "trajectory_min_layer": 1,
}


def params(**overrides) -> dict:
    return {**PARAMS, **overrides}


def table(censor: tuple[str, ...] = ("b32_c64_s1",), seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
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
                        "last_step": 1.2 * step if name in censor else 3 * step,
                        "preset": "attn2l" if bs < 128 else "attn3l",
                        "batch_size": bs,
                        "context_length": c,
                        "seed": s,
                        "log_params": 10.0 + (bs == 128),
                    }
                )
    return pd.DataFrame(rows)


def law_prediction(summary: dict, batch, context, covariates=None) -> np.ndarray:
    """exp(X @ params), computed from the summary's model block."""
    model = summary["model"]
    columns = {
        "const": np.ones(len(batch)),
        "log_batch_size": np.log(np.asarray(batch, float)),
        "log_context_length": np.log(np.asarray(context, float)),
        **(covariates or {}),
    }
    X = np.column_stack([columns[name] for name in model["coef_names"]])
    return np.exp(X @ np.asarray(model["params"], float))


# ------------------------------------------------------------------ options


def test_censored_option_reaches_the_fit():
    data = table(censor=("b32_c64_s1", "b32_c64_s0", "b64_c64_s1"))
    excluded, _ = fit_emergence_law_node(data, params(censored="exclude"))
    tobit, tobit_table = fit_emergence_law_node(data, params(censored="tobit"))
    assert excluded["censored_handling"] == "exclude" and tobit["censored_handling"] == "tobit"
    assert (excluded["n_runs"], excluded["n_censored"], excluded["n_censored_excluded"]) == (
        9,
        3,
        3,
    )
    assert (tobit["n_runs"], tobit["n_censored"], tobit["n_censored_excluded"]) == (12, 3, 0)
    # Seed replicates: the Tobit covariance is clustered by configuration, t on G - k df, and
    # its Wald test is F on the same df (the CIs' reference distribution, not chi2).
    assert excluded["wald"]["test"] == "F" and tobit["wald"]["test"] == "F"
    assert tobit["n_clusters"] == 6 and tobit["model"]["df_resid"] == 6 - 3
    assert tobit["wald"]["df_denominator"] == 6 - 3
    # Tobit knows the censored cell emerged after its last step; exclude never saw it.
    at_censored = [law_prediction(s, [32], [64])[0] for s in (tobit, excluded)]
    assert at_censored[0] > at_censored[1]
    rows = tobit_table.set_index("parameter")
    assert rows.loc["n_censored_excluded", "estimate"] == 0 and rows.loc["n_runs", "estimate"] == 12


def test_extra_covariates_flow_through_fit_and_prediction():
    data = table(censor=())
    data["step"] = data["step"] * np.exp(-0.3 * (data["log_params"] - 10.0))
    summary, _ = fit_emergence_law_node(data, params(extra_covariates=["log_params"]))
    assert summary["status"] == "ok" and summary["extra_covariates"] == ["log_params"]
    assert summary["model"]["coef_names"][-1] == "log_params"
    with pytest.raises(ValueError, match=r"statistics.predict_for: the law uses extra covariates"):
        predict_emergence_node(summary, params())
    for_config = [{"batch_size": 32, "context_length": 32, "log_params": 11.0}]
    pred = predict_emergence_node(summary, params(predict_for=for_config))
    expected = law_prediction(summary, [32], [32], {"log_params": np.array([11.0])})
    assert pred.step.iloc[0] == pytest.approx(expected[0], rel=1e-10)


@pytest.mark.parametrize("level", [0.8, 0.95])
def test_level_sets_the_prediction_interval(level):
    summary, _ = fit_emergence_law_node(table(), params(level=level))
    pred = predict_emergence_node(summary, params(level=level))
    df = summary["model"]["df_resid"]
    from scipy import stats

    q = stats.t.ppf(0.5 + level / 2, df)
    row = pred.iloc[0]
    assert row.level == level
    assert math.log(row.step_high / row.step) == pytest.approx(q * row.log_se, rel=1e-10)
    assert math.log(row.step / row.step_low) == pytest.approx(q * row.log_se, rel=1e-10)
    assert summary["level"] == level
    width = summary["a"]["ci_high"] - summary["a"]["ci_low"]
    se = width / (2 * q)
    assert summary["a"]["estimate"] == pytest.approx(summary["a"]["ci_low"] + q * se)


def test_unfitted_law_predicts_nan_at_the_level():
    summary = {"status": "insufficient_data: too few runs"}
    pred = predict_emergence_node(summary, params(level=0.8))
    assert pred.step.isna().all() and pred.step_high.isna().all()
    assert list(pred.level) == [0.8] and list(pred.batch_size) == [32.0]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"censored": "drop"}, r"statistics.censored: expected one of \('exclude', 'tobit'\)"),
        ({"response": "flops"}, r"statistics.response: expected one of \('step', 'tokens'\)"),
        ({"level": 1.0}, r"statistics.level: must be in \(0, 1\), got 1.0"),
        ({"level": 0}, r"statistics.level: must be in \(0, 1\), got 0"),
        ({"metric": "nope"}, r"statistics.metric/method: no emergence rows for metric='nope'"),
        ({"method": "logistic"}, r"method='logistic'"),
        ({"threshold": 0.5}, r"threshold=0.5"),
    ],
)
def test_parameter_errors_name_the_parameter(overrides, message):
    with pytest.raises(ValueError, match=message):
        fit_emergence_law_node(table(), params(**overrides))


def test_threshold_choice_and_predict_for_errors():
    data = table()
    two = pd.concat([data, data.assign(threshold=0.6)])
    with pytest.raises(ValueError, match=r"statistics.threshold: the table has thresholds"):
        select_emergence_rows(two, params())
    picked = select_emergence_rows(two, params(threshold=0.6))
    assert len(picked) == len(data) and (picked.threshold == 0.6).all()
    summary, _ = fit_emergence_law_node(data, params())
    with pytest.raises(ValueError, match=r"statistics.predict_for: every entry needs \['batch"):
        predict_emergence_node(summary, params(predict_for=[{"context_length": 32}]))


def test_too_few_runs_is_reported_not_raised():
    data = table(censor=()).iloc[[0, 2, 5]]  # B32 C32 s0, B32 C64 s0, B64 C32 s1
    summary, fit_table = fit_emergence_law_node(data, params())
    assert summary["status"].startswith("insufficient_data: emergence law: 3 usable runs")
    assert "need at least 4" in summary["status"]
    assert summary["n_runs"] == 3 and summary["seeds"] == [0, 1] and fit_table.empty


# ------------------------------------------------------------------ figures, through their data


def test_predicted_vs_observed_plots_the_law_and_the_intervals():
    data = table()
    summary, _ = fit_emergence_law_node(data, params())
    fig = plot_predicted_vs_observed(data, summary, params())
    ax = fig.axes[0]
    emerged = data[~data.censored]
    predicted = law_prediction(summary, emerged.batch_size, emerged.context_length)
    points = np.concatenate(
        [c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)]
    )  # (n, 2): one point per emerged run
    expected = np.column_stack([predicted, emerged.step.to_numpy()])
    np.testing.assert_allclose(
        points[np.lexsort(points.T)], expected[np.lexsort(expected.T)], rtol=1e-9
    )
    assert len(points) == 11  # the censored run is not plotted
    # Error bars: horizontal segments at each observed value, from step_low to step_high.
    bars = [c for c in ax.collections if isinstance(c, LineCollection)][0].get_segments()
    pred = predict_emergence_node(
        summary,
        params(
            predict_for=[
                {"batch_size": b, "context_length": c}
                for b, c in zip(emerged.batch_size, emerged.context_length, strict=True)
            ]
        ),
    )
    spans = sorted((seg[0][1], seg[0][0], seg[1][0]) for seg in bars)
    wanted = sorted(zip(emerged.step, pred.step_low, pred.step_high, strict=True))
    np.testing.assert_allclose(spans, wanted, rtol=1e-9)
    identity = [line for line in ax.lines if line.get_label() == "identity"][0]
    np.testing.assert_array_equal(identity.get_xdata(), identity.get_ydata())
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "n = 11 runs (1 censored)" in ax.get_title()


def test_residuals_figure_plots_log_observed_over_predicted():
    data = table()
    summary, _ = fit_emergence_law_node(data, params())
    manifest = data[["run_name"]].assign(
        n_parameters=np.where(data.preset == "attn3l", 300_000, 100_000)
    )
    fig = plot_residuals_vs_model_size(data, summary, manifest, params())
    ax = fig.axes[0]
    plotted = np.concatenate(
        [c.get_offsets()[:, 1] for c in ax.collections if isinstance(c, PathCollection)]
    )
    emerged = data[~data.censored]
    residuals = np.log(emerged.step) - np.log(
        law_prediction(summary, emerged.batch_size, emerged.context_length)
    )
    np.testing.assert_allclose(np.sort(plotted), np.sort(residuals), atol=1e-9)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["attn2l\n(100k params)", "attn3l\n(300k params)"]  # ordered by size


def test_trajectories_are_rescaled_by_the_predicted_step():
    data = table(censor=())
    summary, _ = fit_emergence_law_node(data, params())
    runs = data.drop_duplicates("run_name").head(2)
    head_rows = []
    for run in runs.itertuples():
        for step in (100.0, 200.0, 400.0):
            for layer, head, value in ((0, 0, 0.9), (1, 0, step / 1000), (1, 1, step / 2000)):
                head_rows.append(
                    {
                        "run_name": run.run_name,
                        "step": step,
                        "tokens_seen": step * run.batch_size * run.context_length,
                        "layer": layer,
                        "head": head,
                        "metric": "prefix_matching",
                        "value": value,
                    }
                )
    fig = plot_trajectories(pd.DataFrame(head_rows), data, {**summary, "threshold": 0.4}, params())
    ax_steps, ax_scaled = fig.axes[:2]
    # The best layer>=1 head (layer 0's 0.9 excluded by trajectory_min_layer=1): step / 1000.
    curves = [
        (tuple(line.get_xdata()), tuple(line.get_ydata()))
        for line in ax_steps.lines
        if len(line.get_xdata()) == 3
    ]
    assert sorted(curves) == [((100.0, 200.0, 400.0), (0.1, 0.2, 0.4))] * 2
    predicted = law_prediction(summary, runs.batch_size, runs.context_length)
    scaled = sorted(
        tuple(np.round(line.get_xdata(), 9))
        for line in ax_scaled.lines
        if len(line.get_xdata()) == 3
    )
    wanted = sorted(tuple(np.round(np.array([100.0, 200.0, 400.0]) / p, 9)) for p in predicted)
    assert scaled == wanted
    thresholds = [line for line in ax_steps.lines if list(line.get_ydata()) == [0.4, 0.4]]
    assert len(thresholds) == 1
