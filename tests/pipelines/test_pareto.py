"""pareto: wiring, the frontier nodes on synthetic cell tables, the probe-vocabulary check, and
``kedro run --pipeline=pareto`` end to end on a micro grid (2 x 2 cells, a few steps)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import matplotlib.pyplot as plt
import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from ih_kedro.pipelines.pareto import nodes
from ih_kedro.pipelines.pareto.pipeline import EXPERIMENT
from ih_kedro.science.data.variants.bigram_model import BigramModel
from ih_kedro.science.statistics import pareto_cells
from tests.micro_project import (
    SEQUENTIAL_EXECUTOR,
    kedro_run,
    micro_data_engineering,
    new_micro_project,
    run_output,
    write_local_parameters,
)


def test_registry_wires_the_bigram_model_into_training(project_root: Path) -> None:
    bootstrap_project(project_root)
    pipe = pipelines["pareto"]
    namespaces = {node.namespace for node in pipe.nodes}
    assert {
        "data_engineering",
        "pareto.semi_natural",
        "pareto.training",
        "pareto.telemetry",
        "pareto.frontier",
    } <= namespaces
    by_name = {node.name: node for node in pipe.nodes}
    sweep = by_name["pareto.training.train_sweep"]
    assert "pareto.variant_data" in sweep.inputs
    assert by_name["pareto.semi_natural.semi_natural_variant_data"].outputs == [
        "pareto.variant_data"
    ]
    # Every stage reads the experiment's own streams (its model vocabulary), none the shared ones.
    assert by_name["pareto.vocabulary.compact_token_streams"].outputs == [
        "pareto.train_tokens",
        "pareto.validation_tokens",
    ]
    readers = {n.name for n in pipe.nodes if {"train_tokens", "validation_tokens"} & set(n.inputs)}
    assert readers == {"pareto.vocabulary.compact_token_streams"}
    assert "pareto.train_tokens" in sweep.inputs
    assert "pareto.bigram_model" in by_name["pareto.semi_natural.build_bigram_model"].outputs
    # The variant data node runs before training (a real edge in the DAG).
    order = [node.name for node in pipe.nodes]  # topologically sorted
    assert order.index("pareto.semi_natural.semi_natural_variant_data") < order.index(sweep.name)
    # law_fit is unchanged: its sweep reads no variant data.
    law_sweep = {n.name: n for n in pipelines["law_fit"].nodes}["law_fit.training.train_sweep"]
    assert law_sweep.inputs == [
        "train_tokens",
        "law_fit.checkpoint_store",
        "params:law_fit.training",
    ]


def _synthetic_cell_table(seed: int = 0) -> pd.DataFrame:
    """A 4 x 4 grid x 2 seeds whose outcomes follow logit P = 5 + 1.5 log f + 1.5 log r."""
    rng = np.random.default_rng(seed)
    rows = []
    for f in (0.125, 0.25, 0.5, 1.0):
        for r in (0.125, 0.25, 0.5, 1.0):
            eta = 5 + 1.5 * math.log(f) + 1.5 * math.log(r)
            for s in (0, 1):
                formed = rng.random() < 1 / (1 + math.exp(-eta))
                step = float(np.exp(6.0 - 0.5 * eta / math.hypot(1.5, 1.5))) if formed else np.nan
                rows.append({
                    "run_name": f"m_B8_C16_f{f:g}_r{r:g}_s{s}", "label": f"f{f:g}_r{r:g}",
                    "seed": s, "frequency": f, "reliability": r, "realised_frequency": f,
                    "realised_frequency_se": 0.01, "realised_reliability": r,
                    "realised_reliability_se": 0.01,
                    "status": "emerged" if formed else "censored", "formed": float(formed),
                    "step": step, "ci_low": step * 0.9, "ci_high": step * 1.1,
                    "tokens": step * 128, "last_step": 1500.0, "budget_steps": 1500,
                    "budget_tokens": 1500 * 128, "steps_trained": 1500, "tokens_seen": 0,
                    "stop_reason": "budget", "online_emergence_step": np.nan, "preset": "p",
                    "batch_size": 8, "context_length": 16, "metric": "prefix_matching",
                    "method": "threshold",
                })  # fmt: skip
    return pd.DataFrame(rows)


FRONTIER_PARAMS = {"n_bootstrap": 30, "n_grid": 5, "seed": 0, "budget_factors": [2, 4]}


def ratio_of(summary: dict) -> float:
    coefficients = summary["coefficients"]
    return coefficients["log_frequency"]["estimate"] / coefficients["log_reliability"]["estimate"]


def test_estimate_frontier_tables_figures_and_mlflow() -> None:
    cells = _synthetic_cell_table()
    table, summary = nodes.estimate_frontier(cells, FRONTIER_PARAMS)
    assert summary["status"] == "ok" and summary["n_runs_fitted"] == 32
    assert summary["n_runs_formed"] == int(cells["formed"].sum())
    assert summary["budget_steps"] == [1500] and summary["monotone_increasing"] is True
    assert summary["growth"]["status"] == "ok" and summary["growth"]["beta"] < 0
    # S* was generated as exp(6 - 0.5 d): the growth slope is -0.5 up to the fitted frontier.
    assert summary["growth"]["beta"] == pytest.approx(-0.5, abs=0.25)
    kinds = table["kind"].value_counts().to_dict()
    assert kinds["coefficient"] == 3 and kinds["contour"] == 5 and kinds["growth"] == 2
    # The coefficient ratio b1 / b2 follows the coefficients, in the table and the summary.
    assert table["kind"].tolist()[:9] == (
        ["coefficient"] * 3 + ["coefficient_ratio"] + ["coefficient_bootstrap"] * 4 + ["contour"]
    )
    # The seed-resampled percentile CIs (the default unit) sit beside the Wald CIs.
    assert summary["bootstrap"]["unit"] == "seed"
    boot = table[table["kind"] == "coefficient_bootstrap"].set_index("name")
    assert boot.loc["ratio", "estimate"] == pytest.approx(ratio_of(summary))
    for name, (low, high) in summary["bootstrap"]["coefficients"].items():
        assert (boot.loc[name, "ci_low"], boot.loc[name, "ci_high"]) == pytest.approx((low, high))
        assert low <= high
    coefficients = summary["coefficients"]
    ratio = summary["coefficient_ratio"]
    assert ratio["name"] == "log_frequency/log_reliability"
    assert ratio["estimate"] == pytest.approx(
        coefficients["log_frequency"]["estimate"] / coefficients["log_reliability"]["estimate"]
    )
    assert ratio["ci_low"] < ratio["estimate"] < ratio["ci_high"]
    row = table[table["kind"] == "coefficient_ratio"].iloc[0]
    assert (row["estimate"], row["ci_low"], row["ci_high"]) == pytest.approx(
        (ratio["estimate"], ratio["ci_low"], ratio["ci_high"])
    )
    # Every replicate is either in the band or counted as dropped.
    bootstrap = summary["bootstrap"]
    assert bootstrap["method"] == "firth" and bootstrap["n_bootstrap"] == 30
    assert list(bootstrap["dropped"]) == ["one_outcome", "fit_failed", "not_converged",
                                          "no_contour"]  # fmt: skip
    assert bootstrap["dropped"]["fit_failed"] == 0
    assert (
        sum(bootstrap["dropped"].values()) + table.loc[table["kind"] == "contour", "n"].max() == 30
    )
    # Each shift is flagged by whether it lies within the distances of the runs fitted.
    d_min, d_max = summary["growth"]["distance_range"]
    assert d_min < d_max
    assert summary["budget_shift_extrapolated"] == {
        k: not d_min <= shift <= d_max for k, shift in summary["budget_shift"].items()
    }
    assert kinds["budget_shift"] == 10 and kinds["pareto_set"] == len(summary["pareto_set"])
    contour = table[table["kind"] == "contour"]
    assert (contour["ci_low"] <= contour["reliability"]).all()
    assert (contour["reliability"] <= contour["ci_high"]).all()
    # A longer budget moves the frontier to the non-forming side (negative distance).
    assert summary["budget_shift"]["x2"] < 0 and summary["budget_shift"]["x4"] < 0
    json.dumps(summary, allow_nan=False)  # the catalog writes it with allow_nan=False

    heatmap = nodes.plot_frontier(cells, table, summary)
    distance = nodes.plot_sstar_distance(cells, summary)
    assert len(heatmap.axes[0].lines) >= 1  # the frontier is drawn
    assert len(distance.axes[0].lines) >= 1
    run = mlflow.start_run(run_name="pareto-test")
    try:
        nodes.log_pareto_to_mlflow(summary)
    finally:
        mlflow.end_run()
    logged = mlflow.get_run(run.info.run_id)
    assert logged.data.metrics["pareto.n_runs_fitted"] == 32.0
    assert logged.data.metrics["pareto.log_reliability.estimate"] == pytest.approx(
        summary["coefficients"]["log_reliability"]["estimate"]
    )
    assert logged.data.metrics["pareto.coefficient_ratio.estimate"] == pytest.approx(
        summary["coefficient_ratio"]["estimate"]
    )
    assert logged.data.tags["pareto.status"] == "ok"
    plt.close("all")


def test_frontier_outside_the_grid_is_reported_not_faked() -> None:
    cells = _synthetic_cell_table().assign(formed=0.0, status="censored", step=np.nan)
    table, summary = nodes.estimate_frontier(cells, FRONTIER_PARAMS)
    assert summary["status"] == "none_formed" and summary["pareto_set"] == []
    assert summary["coefficients"]["intercept"]["estimate"] is None
    assert summary["coefficient_ratio"]["estimate"] is None and summary["bootstrap"] is None
    assert "longer budget" in summary["longer_budget"]
    assert table[table["kind"] == "coefficient"]["estimate"].isna().all()
    nodes.plot_frontier(cells, table, summary)
    nodes.plot_sstar_distance(cells, summary)
    plt.close("all")


def test_probe_pools_must_stay_inside_the_model_vocabulary(tmp_path: Path) -> None:
    n = 20
    model = BigramModel(
        transition=np.full((n, n), 1 / n), initial=np.full(n, 1 / n),
        token_ids=np.arange(n, dtype=np.int64), counts=np.zeros((n, n), dtype=np.int64),
        smoothing=0.0, other_bucket=True, vocab_size=50,
    )  # fmt: skip
    model = BigramModel.load(model.save(tmp_path / "m.npz"))
    training = {"online_emergence": {"token_pool_size": 19}}
    telemetry = {"probe": {"source": "frequent", "top_k": 19}}
    options = nodes.semi_natural_variant_data(model, training, telemetry)
    assert options == {"model_path": str((tmp_path / "m.npz").resolve()),
                       "model_checksum": model.checksum()}  # fmt: skip
    with pytest.raises(ValueError, match="token_pool_size: 20 probe tokens exceed"):
        nodes.semi_natural_variant_data(
            model, {"online_emergence": {"token_pool_size": 20}}, telemetry
        )
    with pytest.raises(ValueError, match="telemetry.probe.source"):
        nodes.semi_natural_variant_data(model, training, {"probe": {"source": "uniform"}})


# --------------------------------------------------------------------------------------------
# End to end
# --------------------------------------------------------------------------------------------
CELLS = [(0.25, 0.5), (0.25, 1.0), (1.0, 0.5), (1.0, 1.0)]


def _micro_overrides(project: Path) -> dict:
    pareto = yaml.safe_load((project / "conf/base/parameters_pareto.yml").read_text())[EXPERIMENT]
    training = {
        **pareto["training"],
        "batch_sizes": [8],
        "context_lengths": [16],
        "seeds": [0],
        "data_variants": [
            {
                "variant": "semi_natural",
                "label": f"f{f:g}_r{r:g}",
                "options": {"frequency": f, "reliability": r},
            }
            for f, r in CELLS
        ],  # fmt: skip
        "max_steps": 8,
        "checkpoint_every": 4,
        "checkpoint_dense_until": 2,
        "log_every": 4,
        **SEQUENTIAL_EXECUTOR,
    }
    training["online_emergence"] = {
        **training["online_emergence"], "eval_every": 4, "n_probes": 4, "token_pool_size": 40,
    }  # fmt: skip
    telemetry = {**pareto["telemetry"], "batch_size": 4, "n_validation_sequences": 2}
    telemetry["probe"] = {**telemetry["probe"], "n_samples": 4, "top_k": 40}
    telemetry["emergence"] = {**telemetry["emergence"], "n_bootstrap": 5}
    return {
        "data_engineering": micro_data_engineering(project),
        EXPERIMENT: {
            **pareto,
            "vocabulary": {"compact": True, "size": 41},
            "semi_natural": {**pareto["semi_natural"], "n_types": 40},
            "training": training,
            "telemetry": telemetry,
            "frontier": {**pareto["frontier"], "n_bootstrap": 10, "realised_batches": 16},
        },
    }


@pytest.fixture()
def micro_project(tmp_path: Path) -> Path:
    project = new_micro_project(tmp_path, n_documents=40, docs_per_shard=20)
    write_local_parameters(project, _micro_overrides(project))
    return project


def test_pareto_kedro_run_end_to_end(micro_project: Path) -> None:
    result = kedro_run(micro_project, "--pipeline=pareto")
    assert result.returncode == 0, run_output(result)
    data = micro_project / "data"

    model = BigramModel.load(data / "05_model_input" / EXPERIMENT / "bigram_model.npz")
    assert model.n_states == 41 and model.other_bucket
    # In the compact vocabulary the 40 types + the other bucket's token are ids 0..40, every
    # rarer type is id 41 (pooled into the other bucket), EOS 42: the models' 43 logits.
    np.testing.assert_array_equal(model.token_ids, np.arange(41))
    configs = list((data / "06_models").rglob("config.json"))
    assert configs and {json.loads(c.read_text())["vocab_size"] for c in configs} == {43}
    variant_data = json.loads(
        (data / "05_model_input" / EXPERIMENT / "variant_data.json").read_text()
    )
    assert variant_data["model_checksum"] == model.checksum()

    cells = pd.read_parquet(data / "07_model_output" / EXPERIMENT / "cell_table.parquet")
    assert sorted(zip(cells["frequency"], cells["reliability"], strict=True)) == CELLS
    assert list(cells.columns) == [
        *pareto_cells.CELL_COLUMNS, "formation_score", "peak",
        "step_at_0.3", "formed_at_0.3", "step_at_0.4", "formed_at_0.4", "step_at_0.5",
        "formed_at_0.5",
    ]  # fmt: skip
    # Realised knobs measured on the runs' own batches: within 4 SE of the targets.
    assert (
        (cells["realised_frequency"] - cells["frequency"]).abs()
        <= 4 * cells["realised_frequency_se"] + 1e-9
    ).all()
    assert (
        (cells["realised_reliability"] - cells["reliability"]).abs()
        <= 4 * cells["realised_reliability_se"] + 1e-9
    ).all()
    assert (cells.loc[cells["reliability"] == 1.0, "realised_reliability"] == 1.0).all()
    # 8 steps: no induction head; every run censored at the budget, reported, not dropped.
    assert (cells["status"] == "censored").all() and (cells["formed"] == 0.0).all()
    # ... at every threshold too; the formation score is the curve's mean over 8 steps, a PS
    # level in [0, 0.4) for a run whose best head never reached 0.3.
    for t in ("0.3", "0.4", "0.5"):
        assert cells[f"formed_at_{t}"].tolist() == [False] * len(CELLS)
    assert ((cells["formation_score"] >= 0) & (cells["formation_score"] < 0.3)).all()
    assert (cells["formation_score"] <= cells["peak"] + 1e-12).all()
    # Both labels per run: the mean PS and the best (head, parity) one.
    emergence = pd.read_parquet(data / "07_model_output" / EXPERIMENT / "emergence_table.parquet")
    assert emergence.groupby("metric")["run_name"].nunique().to_dict() == {
        "prefix_matching": len(CELLS),
        "prefix_matching_by_parity": len(CELLS),
    }
    assert (cells["steps_trained"] == 8).all() and (cells["budget_steps"] == 8).all()
    assert (cells["budget_tokens"] == 8 * 8 * 16).all()

    # The training batches are the semi-natural sequences: only model tokens, repeated bigrams.
    manifest = pd.read_parquet(data / "07_model_output" / EXPERIMENT / "sweep_manifest.parquet")
    assert set(manifest["data_variant"]) == {"semi_natural"}
    reporting = data / "08_reporting" / EXPERIMENT
    summary = json.loads((reporting / "frontier_summary.json").read_text())
    assert summary["status"] == "none_formed" and summary["budget_steps"] == [8]
    table = pd.read_csv(reporting / "frontier_table.csv")
    assert table["kind"].tolist() == ["coefficient"] * 3
    robustness = pd.read_csv(reporting / "threshold_robustness.csv")
    assert robustness["measure"].tolist() == [
        "formed at 0.3", "formed at 0.4", "formed at 0.5", "formation score",
    ]  # fmt: skip
    assert robustness["status"].tolist()[:3] == ["none_formed"] * 3
    assert set(robustness["both_knobs_matter"][:3]) == {"undecided"}
    cell_summary = pd.read_csv(reporting / "cell_summary.csv")
    assert len(cell_summary) == len(CELLS) and (cell_summary["formed_share_at_0.4"] == 0).all()
    assert summary["verdicts"]["both_knobs_matter"]["verdict"] == "undecided"
    assert (reporting / "frontier_heatmap.png").stat().st_size > 0
    assert (reporting / "sstar_vs_distance.png").stat().st_size > 0
    assert (reporting / "threshold_robustness.png").stat().st_size > 0

    mlflow.set_tracking_uri(f"sqlite:///{micro_project / 'mlflow.db'}")
    try:
        runs = mlflow.search_runs(search_all_experiments=True)
        assert "metrics.pareto.frontier_fitted" in runs.columns
        top = runs[runs["metrics.pareto.frontier_fitted"].notna()]["run_id"].iloc[0]
        client = mlflow.MlflowClient()
        artifacts = {a.path for a in client.list_artifacts(top, "pareto")}
        assert {"pareto/frontier_heatmap.png", "pareto/sstar_vs_distance.png"} <= artifacts
        # The stage figures (telemetry) go under pareto/figures/, the frontier figures only once.
        figures = {a.path for a in client.list_artifacts(top, "pareto/figures")}
        assert figures and not {"frontier_heatmap", "sstar_vs_distance_plot"} & {
            p.rsplit("/", 1)[-1].removesuffix(".png") for p in figures
        }
        nested = runs[runs["tags.mlflow.parentRunId"].notna()]
        assert len(nested) >= len(CELLS)
    finally:
        mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
