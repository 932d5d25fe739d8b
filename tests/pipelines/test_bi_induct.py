"""bi_induct: registry, matched-compute node, and ``kedro run --pipeline=bi_induct`` on a micro grid.

The end-to-end test copies conf/base into a temporary project with a small Pile-format shard
of KJV chapters and a conf/local that shrinks the experiment to seconds; it runs the real CLI
in a subprocess (KedroSession, catalog, DeepSpeed, kedro-mlflow, an SQLite MLflow store).
"""

from __future__ import annotations

import os
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from ih_kedro.pipelines.bi_induct.nodes import matched_compute
from ih_kedro.pipelines.bi_induct.pipeline import EXPERIMENT
from ih_kedro.science.evaluation.bi_induct import MatchedComputeError, variant_label
from tests.micro_project import (
    SEQUENTIAL_EXECUTOR,
    base_parameters,
    deep_merge,
    kedro_run,
    micro_data_engineering,
    new_micro_project,
    run_output,
    write_local_parameters,
)

MICRO_TRAINING = {
    "batch_sizes": [4],
    "context_lengths": [48],
    "data_variants": [
        "natural",
        {"variant": "bi_induct_snippets", "label": "balanced", "options": {"direction": "balanced"}},
    ],
    "max_steps": 4,
    "warmup_steps": 1,
    "checkpoint_every": 2,
    "log_every": 2,
    "variant_options": {"bi_induct_snippets": {"sep_token_id": 1, "span_length": 5,
                                               "mix_ratio": 0.5, "anneal_fraction": 1.0}},
    "online_emergence": {"eval_every": 2, "n_probes": 4},
    **SEQUENTIAL_EXECUTOR,
}  # fmt: skip
MICRO_TELEMETRY = {"probe": {"n_samples": 4, "snippet_length": 5}, "batch_size": 4, "n_validation_sequences": 2,
                   "emergence": {"n_bootstrap": 5}}  # fmt: skip
# lm-eval on, on the fixture tasks (tests/fixtures/lm_eval), to run the node through the CLI.
MICRO_LM_EVAL = {"enabled": True, "tasks": ["fixture_mc", "fixture_ll"], "batch_size": 4,
                 "include_path": str(Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval")}  # fmt: skip
MICRO_EVALUATION = {"n_validation_sequences": 4, "n_prompts_per_task": 1, "n_probes": 4,
                    "n_controls": 1, "every_nth_checkpoint": 2, "results": {"n_bootstrap": 20}}  # fmt: skip


def _manifest(**changes) -> pd.DataFrame:
    rows = []
    for label in ("natural", "induction"):
        rows.append({"run_name": f"llama-tiny_B4_C48_{label}_s0", "preset": "llama-tiny",
                     "batch_size": 4, "context_length": 48, "seed": 0,
                     "data_variant": "natural" if label == "natural" else "bi_induct_snippets",
                     "steps_trained": 8, "tokens_seen": 1536, "flops": 1.5e9})  # fmt: skip
    frame = pd.DataFrame(rows)
    for column, value in changes.items():
        frame.loc[1, column] = value
    return frame


def test_variant_label_and_matched_compute_table() -> None:
    manifest = _manifest()
    assert variant_label(manifest.iloc[0].to_dict()) == "natural"
    table = matched_compute(manifest)
    assert list(table["variant"]) == ["natural", "induction"]
    assert list(table["tokens_seen"]) == [1536, 1536]


@pytest.mark.parametrize(("column", "value"), [("tokens_seen", 1024), ("flops", 1.6e9),
                                               ("steps_trained", 6)])  # fmt: skip
def test_matched_compute_fails_when_variants_differ(column, value) -> None:
    with pytest.raises(MatchedComputeError, match=f"{column} differs between variants"):
        matched_compute(_manifest(**{column: value}))


def test_registry_has_bi_induct(project_root: Path) -> None:
    bootstrap_project(project_root)
    namespaces = {node.namespace for node in pipelines["bi_induct"].nodes}
    assert {f"{EXPERIMENT}.training", f"{EXPERIMENT}.telemetry",
            f"{EXPERIMENT}.evaluation"} <= namespaces  # fmt: skip
    outputs = pipelines["bi_induct"].all_outputs()
    assert {
        "bi_induct.sweep_manifest",
        "bi_induct.head_scores",
        "bi_induct.results_table",
    } <= outputs


@pytest.fixture()
def micro_project(tmp_path: Path) -> Path:
    project = new_micro_project(tmp_path)
    params = base_parameters(project, EXPERIMENT)
    overrides = {
        "data_engineering": micro_data_engineering(project),
        EXPERIMENT: {
            "training": deep_merge(params["training"], MICRO_TRAINING),
            "telemetry": deep_merge(params["telemetry"], MICRO_TELEMETRY),
            "evaluation": deep_merge(params["evaluation"], MICRO_EVALUATION),
            "lm_eval": deep_merge(params["lm_eval"], MICRO_LM_EVAL),
        },
    }
    write_local_parameters(project, overrides)
    return project


def test_bi_induct_kedro_run_end_to_end(micro_project: Path) -> None:
    result = kedro_run(micro_project, "--pipeline=bi_induct")
    assert result.returncode == 0, run_output(result)
    data = micro_project / "data"
    compute = pd.read_csv(data / "07_model_output" / EXPERIMENT / "compute_table.csv")
    assert sorted(compute["variant"]) == ["balanced", "natural"]
    assert compute["tokens_seen"].nunique() == 1 and compute["tokens_seen"].iloc[0] == 4 * 4 * 48
    assert compute["flops"].nunique() == 1

    table = pd.read_csv(data / "08_reporting" / EXPERIMENT / "results_table.csv")
    assert set(table["variant"]) == {"natural", "balanced"}
    metrics = set(table["metric"])
    assert {
        "probe_accuracy_1shot",
        "probe_accuracy_10shot",
        "icl_score",
        "perplexity",
        "ablation_excess_icl_zero",
        "ablation_excess_probe_pattern_preserving",
    } <= metrics
    # 4 steps form no induction heads: every ablation row is flagged, never reported as a finding.
    ablation = table[table["metric"].str.startswith("ablation_")]
    assert not ablation["estimable"].any()
    assert ablation["note"].str.contains("not estimable").all()
    snippet_ablation = ablation[ablation["variant"] != "natural"]
    assert snippet_ablation["diff_vs_natural"].isna().all()
    perplexity = table[(table["metric"] == "perplexity")].set_index("variant")
    assert perplexity["ci_low"].le(perplexity["value"]).all()
    assert (
        perplexity.loc["natural", "diff_vs_natural"] != perplexity.loc["natural", "diff_vs_natural"]
    )
    assert perplexity.loc["balanced", "diff_vs_natural"] == pytest.approx(
        perplexity.loc["balanced", "value"] - perplexity.loc["natural", "value"]
    )
    checkpoints = pd.read_parquet(
        data / "07_model_output" / EXPERIMENT / "checkpoint_metrics.parquet"
    )
    # Every second checkpoint (0, 4 of 0, 2, 4); the last one always.
    assert sorted(checkpoints["step"].unique()) == [0, 4]
    # The snippet-format induction score is measured (on snippets of the training span, 5).
    assert "snippet_induction_score" in set(table["metric"])
    assert checkpoints["metric"].eq("snippet_induction_score").sum() == 2 * 2
    head_scores = pd.read_parquet(data / "07_model_output" / EXPERIMENT / "head_scores.parquet")
    snippet_rows = head_scores["metric"].str.endswith("_snippet")
    assert set(head_scores.loc[snippet_rows, "probe_length"]) == {5}
    assert set(head_scores.loc[~snippet_rows, "probe_length"]) == {24}
    # lm-eval: the final checkpoint (step 4) of each run, every fixture metric.
    lm_eval = pd.read_csv(data / "08_reporting" / EXPERIMENT / "lm_eval_scores.csv")
    assert sorted(lm_eval["variant"].unique()) == ["balanced", "natural"]
    assert set(lm_eval["step"]) == {4}
    assert len(lm_eval) == 2 * 3  # fixture_mc acc, fixture_ll perplexity and acc, per run
    assert lm_eval.set_index(["task", "metric"]).loc[("fixture_mc", "acc"), "n_samples"].eq(4).all()
    for name in (
        "signatures_over_training.png",
        "ablation_over_training.png",
        "perplexity_gap.png",
    ):
        assert (data / "08_reporting" / EXPERIMENT / name).stat().st_size > 0

    # MLflow: the snippet runs logged their snippet share per window; the results went to the
    # kedro-mlflow run.
    mlflow.set_tracking_uri(f"sqlite:///{micro_project / 'mlflow.db'}")
    try:
        client = mlflow.tracking.MlflowClient()
        manifest = pd.read_parquet(data / "07_model_output" / EXPERIMENT / "sweep_manifest.parquet")
        by_name = dict(zip(manifest["run_name"], manifest["mlflow_run_id"], strict=True))
        induction = client.get_metric_history(by_name["llama-tiny_B4_C48_balanced_s0"],
                                              "variant_batch_share")  # fmt: skip
        natural = client.get_metric_history(by_name["llama-tiny_B4_C48_natural_s0"],
                                            "variant_batch_share")  # fmt: skip
        assert [m.step for m in induction] == [2, 4]
        assert all(m.value == 0 for m in natural)
        # m(step) = 0.5 (1 - step / 4), B x W = 196: steps 0-1 -> round(0.5*196/11) = 9 and
        # round(0.375*196/11) = 7 snippets of 11 tokens -> share (99 + 77) / 392.
        assert induction[0].value == pytest.approx((99 + 77) / 392)
        # The kedro-mlflow run holds the table and figures as artifacts, and the results.
        parent = client.get_run(client.get_run(by_name["llama-tiny_B4_C48_balanced_s0"])
                                .data.tags["mlflow.parentRunId"])  # fmt: skip
        artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "bi_induct")}
        assert {"bi_induct/results_table.csv", "bi_induct/perplexity_gap.png",
                "bi_induct/signatures_over_training.png",
                "bi_induct/ablation_over_training.png", "bi_induct/lm_eval_scores.csv"} <= artifacts  # fmt: skip
        assert client.get_metric_history(by_name["llama-tiny_B4_C48_natural_s0"],
                                         "bi_induct/lm_eval/fixture_mc/acc")  # fmt: skip
        assert "bi_induct/llama-tiny/balanced/perplexity" in parent.data.metrics
        assert client.get_metric_history(by_name["llama-tiny_B4_C48_balanced_s0"],
                                         "bi_induct/perplexity")  # fmt: skip
    finally:
        mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
