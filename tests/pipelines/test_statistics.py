"""Statistics pipeline: nodes on a synthetic emergence table, then a SequentialRunner run."""

from __future__ import annotations

import json
import math

import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner
from matplotlib.figure import Figure

from ih_kedro.pipelines.statistics import create_pipeline
from ih_kedro.pipelines.statistics.nodes import (
    fit_emergence_law_node,
    plot_predicted_vs_observed,
    plot_residuals_vs_model_size,
    plot_trajectories,
    predict_emergence_node,
)

A, B, T = 0.37, 0.62, 1e5


@pytest.fixture()
def params(project_root) -> dict:
    with open(project_root / "conf/base/parameters_statistics.yml") as f:
        return yaml.safe_load(f)["statistics"]


def _emergence_table(batches=(32, 64, 128), contexts=(32, 64), n_seeds=2, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for bs in batches:
        for c in contexts:
            for s in range(n_seeds):
                step = T / (bs**A * c**B) * math.exp(rng.normal(0, 0.05))
                for metric in ("prefix_matching", "associative_recall"):
                    rows.append(
                        {
                            "run_name": f"b{bs}_c{c}_s{s}",
                            "metric": metric,
                            "method": "threshold",
                            "step": step,
                            "tokens": step * bs * c,
                            "ci_low": 0.9 * step,
                            "ci_high": 1.1 * step,
                            "censored": False,
                            "threshold": 0.4,
                            "last_step": 3 * step,
                            "preset": "attn2l",
                            "batch_size": bs,
                            "context_length": c,
                            "seed": s,
                            "copy_rate": 1.0,
                            "data_variant": "copy_spans",
                        }
                    )
    table = pd.DataFrame(rows)
    # One censored run of the law's metric, which must be counted, not dropped silently.
    slow = (table.run_name == "b32_c64_s1") & (table.metric == "prefix_matching")
    table.loc[slow, ["step", "tokens", "ci_low", "ci_high"]] = np.nan
    table.loc[slow, "censored"] = True
    return table


def _head_scores(table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for run in table[table.metric == "prefix_matching"].itertuples():
        s_star = T / (run.batch_size**A * run.context_length**B)
        for step in np.arange(50, 3 * s_star, 50.0):
            ps = 0.03 + 0.6 / (1 + np.exp(-(np.log(step) - np.log(s_star)) / 0.15))
            for layer in (0, 1):
                for head in range(2):
                    value = ps if (layer, head) == (1, 0) else 0.03
                    rows.append(
                        (
                            run.run_name,
                            step,
                            step * run.batch_size * run.context_length,
                            layer,
                            head,
                            "prefix_matching",
                            value,
                            0.1,
                            "repeated_tokens",
                        )
                    )
    return pd.DataFrame(
        rows,
        columns=[
            "run_name",
            "step",
            "tokens_seen",
            "layer",
            "head",
            "metric",
            "value",
            "sd",
            "probe_source",
        ],
    )


def _manifest(table: pd.DataFrame) -> pd.DataFrame:
    runs = table.drop_duplicates("run_name")[
        ["run_name", "preset", "batch_size", "context_length", "seed"]
    ]
    return runs.assign(n_parameters=420_000)


def test_fit_and_predict_nodes(params):
    table = _emergence_table()
    summary, fit_table = fit_emergence_law_node(table, params)
    assert summary["status"] == "ok"
    assert (summary["metric"], summary["method"], summary["threshold"]) == (
        "prefix_matching",
        "threshold",
        0.4,
    )
    assert summary["n_runs"] == 11 and summary["n_censored"] == 1
    assert summary["n_censored_excluded"] == 1 and summary["seeds"] == [0, 1]
    assert summary["a"]["estimate"] == pytest.approx(A, abs=0.1)
    assert summary["a"]["ci_low"] < summary["a"]["estimate"] < summary["a"]["ci_high"]
    json.dumps(summary, allow_nan=False)
    assert {"a", "b", "T", "wald_p_value"} <= set(fit_table.parameter)

    prediction = predict_emergence_node(summary, params)
    assert len(prediction) == len(params["predict_for"])
    row = prediction.iloc[0]  # B32 C32
    assert row.step_low < T / (32**A * 32**B) < row.step_high
    assert row.tokens == pytest.approx(row.step * 32 * 32)


def test_tiny_grid_is_handled(params):
    full = _emergence_table(batches=(32, 64), contexts=(32, 64), n_seeds=1)
    tiny = full.copy()
    slow = (tiny.run_name == "b32_c64_s0") & (tiny.metric == "prefix_matching")
    tiny.loc[slow, "step"] = np.nan
    tiny.loc[slow, "censored"] = True
    summary, fit_table = fit_emergence_law_node(tiny, params)
    # 2x2, one seed, one run censored: 3 runs cannot fit 3 coefficients plus an error.
    assert summary["status"].startswith("insufficient_data")
    assert summary["n_censored"] == 1 and fit_table.empty
    prediction = predict_emergence_node(summary, params)
    assert prediction.step.isna().all()
    assert isinstance(plot_predicted_vs_observed(tiny, summary, params), Figure)
    # With all four runs emerged the 2x2 grid fits (no leave-one-configuration-out r).
    summary, _ = fit_emergence_law_node(full, params)
    assert summary["status"] == "ok" and summary["loo_r_log"] is None


def test_figures(params):
    table = _emergence_table()
    summary, _ = fit_emergence_law_node(table, params)
    heads = _head_scores(table)
    assert isinstance(plot_trajectories(heads, table, summary, params), Figure)
    assert isinstance(plot_predicted_vs_observed(table, summary, params), Figure)
    fig = plot_residuals_vs_model_size(table, summary, _manifest(table), params)
    assert isinstance(fig, Figure)
    assert isinstance(plot_residuals_vs_model_size(table, summary, None, params), Figure)


class _FakeMlflow:
    """Records what the MLflow node logs, without a tracking store (which takes seconds)."""

    def __init__(self):
        self.metrics, self.tags, self.active, self.started = {}, {}, None, 0

    def active_run(self):
        return self.active

    def start_run(self, run_name=None):
        self.active, self.started = run_name, self.started + 1

    def end_run(self):
        self.active = None

    def log_metrics(self, metrics):
        self.metrics.update(metrics)

    def set_tags(self, tags):
        self.tags.update(tags)


def test_pipeline_runs_with_sequential_runner(params, monkeypatch):
    fake = _FakeMlflow()
    for name in ("active_run", "start_run", "end_run", "log_metrics", "set_tags"):
        monkeypatch.setattr(mlflow, name, getattr(fake, name))
    table = _emergence_table()
    catalog = DataCatalog(
        {
            "emergence_table": MemoryDataset(table),
            "head_scores": MemoryDataset(_head_scores(table)),
            "sweep_manifest": MemoryDataset(_manifest(table)),
            "params:statistics": MemoryDataset(params),
        }
    )
    outputs = SequentialRunner().run(create_pipeline(), catalog)
    assert set(outputs) == {
        "law_fit_table",
        "emergence_prediction",
        "ps_trajectories_plot",
        "law_predicted_vs_observed_plot",
        "law_residuals_plot",
    }
    assert len(outputs["emergence_prediction"].load()) == len(params["predict_for"])
    assert isinstance(outputs["law_predicted_vs_observed_plot"].load(), Figure)
    fit_table = outputs["law_fit_table"].load().set_index("parameter")
    # No active run: the node opened and closed its own.
    assert fake.started == 1 and fake.active is None
    assert fake.metrics["law.a.estimate"] == pytest.approx(fit_table.loc["a", "estimate"])
    assert fake.tags["law.metric"] == "prefix_matching"


@pytest.mark.slow
def test_log_law_fit_to_real_mlflow(params):
    from ih_kedro.pipelines.statistics.nodes import log_law_fit_to_mlflow

    summary, _ = fit_emergence_law_node(_emergence_table(), params)
    log_law_fit_to_mlflow(summary)
    assert mlflow.active_run() is None
    runs = mlflow.search_runs(search_all_experiments=True)
    assert (runs["metrics.law.a.estimate"] - summary["a"]["estimate"]).abs().min() < 1e-9
