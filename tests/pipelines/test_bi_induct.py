"""bi_induct: registry, matched-compute node, and ``kedro run --pipeline=bi_induct`` on a micro grid.

The end-to-end test copies conf/base into a temporary project with a small Pile-format shard
of KJV chapters and a conf/local that shrinks the experiment to seconds; it runs the real CLI
in a subprocess (KedroSession, catalog, DeepSpeed, kedro-mlflow, an SQLite MLflow store).
"""

from __future__ import annotations

import json
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
    MICRO_EXPERIMENT_TELEMETRY,
    MICRO_EXPERIMENT_TRAINING,
    base_parameters,
    deep_merge,
    kedro_run,
    micro_data_engineering,
    new_micro_project,
    run_output,
    write_local_parameters,
)

# The default's three arms (repetition-enriched base, induction and anti-induction snippets
# written over it), two seeds, spans drawn per snippet.
MICRO_TRAINING = {
    **MICRO_EXPERIMENT_TRAINING,
    "seeds": [0, 1],
    "variant_options": {"bi_induct_snippets": {"sep_token_id": 1, "span_length": [4, 6],
                                               "mix_ratio": 0.5, "anneal_fraction": 1.0}},
}  # fmt: skip
ARMS = ["anti_induction", "induction", "minimally_enriched"]
PREFIX = "gpt2-2l-d128-h8_B4_C48_"  # the default preset
# lm-eval on, on the fixture tasks (tests/fixtures/lm_eval), to run the node through the CLI.
MICRO_LM_EVAL = {"enabled": True, "tasks": ["fixture_mc", "fixture_ll"], "batch_size": 4,
                 "include_path": str(Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval")}  # fmt: skip
MICRO_EVALUATION = {"n_validation_sequences": 4, "n_prompts_per_task": 1, "n_probes": 4,
                    "n_controls": 1, "every_nth_checkpoint": 2, "shots": [1, 10],
                    "ablation_metrics": ["copy", "icl", "probe"], "ablation_shots": 10,
                    "span_probe_spans": [4, 8], "results": {"n_bootstrap": 20}}  # fmt: skip


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
            "telemetry": deep_merge(params["telemetry"], MICRO_EXPERIMENT_TELEMETRY),
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
    reports = data / "08_reporting" / EXPERIMENT
    compute = pd.read_csv(data / "07_model_output" / EXPERIMENT / "compute_table.csv")
    assert sorted(compute["variant"]) == sorted(ARMS * 2)
    assert compute["tokens_seen"].nunique() == 1 and compute["tokens_seen"].iloc[0] == 4 * 4 * 48
    assert compute["flops"].nunique() == 1

    table = pd.read_csv(reports / "results_table.csv")
    assert sorted(set(table["variant"])) == ARMS
    metrics = set(table["metric"])
    assert {
        "probe_accuracy_1shot",
        "probe_accuracy_10shot",
        "icl_score",
        "copy_accuracy",
        "copy_chance",
        "perplexity",
        "ablation_excess_copy_zero",
        "ablation_excess_icl_zero",
        "ablation_excess_probe_pattern_preserving",
    } <= metrics
    # 4 steps form no induction heads: every ablation row is flagged, never reported as a finding.
    ablation = table[table["metric"].str.startswith("ablation_")]
    assert not ablation["estimable"].any()
    assert ablation["note"].str.contains("not estimable").all()
    snippet_ablation = ablation[ablation["variant"] != "minimally_enriched"]
    assert snippet_ablation["diff_vs_natural"].isna().all()
    perplexity = table[(table["metric"] == "perplexity")].set_index("variant")
    assert perplexity["ci_low"].le(perplexity["value"]).all()
    assert perplexity.loc["induction", "diff_vs_natural"] == pytest.approx(
        perplexity.loc["induction", "value"] - perplexity.loc["minimally_enriched", "value"]
    )
    checkpoints = pd.read_parquet(
        data / "07_model_output" / EXPERIMENT / "checkpoint_metrics.parquet"
    )
    # Every second checkpoint (0, 4 of 0, 2, 4); the last one always.
    assert sorted(checkpoints["step"].unique()) == [0, 4]
    # The snippet-format induction score is measured (on snippets of the mean training span, 5).
    assert "snippet_induction_score" in set(table["metric"])
    assert checkpoints["metric"].eq("snippet_induction_score").sum() == 6 * 2
    head_scores = pd.read_parquet(data / "07_model_output" / EXPERIMENT / "head_scores.parquet")
    snippet_rows = head_scores["metric"].str.endswith("_snippet")
    assert set(head_scores.loc[snippet_rows, "probe_length"]) == {5}
    assert set(head_scores.loc[~snippet_rows, "probe_length"]) == {24}

    # One row per (arm, seed); the claims file holds the five claims, each with rule and numbers.
    runs = pd.read_csv(reports / "runs_table.csv")
    assert sorted(zip(runs["variant"], runs["seed"], strict=True)) == sorted(
        (arm, seed) for arm in ARMS for seed in (0, 1))  # fmt: skip
    assert (runs["final_step"] == 4).all() and (runs["perplexity"] > 1).all()
    assert runs["copy_gain"].equals(runs["copy_accuracy"] - runs["copy_chance"])
    claims = json.loads((reports / "claims.json").read_text())
    assert [c["id"] for c in claims["claims"]] == [
        "earlier_emergence", "icl_not_improved", "anti_induction_near_zero",
        "ablation_hurts_base_more", "perplexity_cost"]  # fmt: skip
    by_id = {c["id"]: c for c in claims["claims"]}
    assert all(c["verdict"] in {"supported", "contradicted", "undecided"} for c in by_id.values())
    assert all(c["rule"] and c["reason"] for c in by_id.values())
    # No heads in 4 steps: the ablation claim is not estimable, never a finding.
    assert by_id["ablation_hurts_base_more"]["verdict"] == "undecided"
    assert by_id["ablation_hurts_base_more"]["estimable"] is False
    perplexity_claim = by_id["perplexity_cost"]["difference"]
    loss = runs.set_index(["variant", "seed"])["loss"]
    assert perplexity_claim["differences"] == pytest.approx(
        [loss["induction", s] - loss["minimally_enriched", s] for s in (0, 1)])  # fmt: skip
    assert set(by_id["perplexity_cost"]["other_arms"]) == {"anti_induction"}
    # Adaptive seeds on claims 2 and 4 (3 planned, +2 per look, cap 9): two seeds make no look
    # yet; claims.json asks for seeds 0-2 and says how to train them.
    assert claims["sequential"]["plan"]["look_sizes"] == [3, 5, 7, 9]
    assert claims["sequential"]["next_look"]["seeds"] == [0, 1, 2]
    assert by_id["icl_not_improved"]["sequential"]["status"] == "continue"
    assert "sequential" not in by_id["perplexity_cost"]
    claims_rows = pd.read_csv(reports / "claims_table.csv")
    assert len(claims_rows) == 4 * 2 + 1  # four paired claims x two snippet arms, one bound
    spans = pd.read_csv(reports / "span_probe_table.csv")
    assert sorted(spans.loc[spans["probe"] == "snippet", "span"].unique()) == [4, 8]
    assert len(spans) == 6 * 3 and spans["score"].between(0, 1).all()

    # lm-eval: the final checkpoint (step 4) of each run, every fixture metric.
    lm_eval = pd.read_csv(reports / "lm_eval_scores.csv")
    assert sorted(lm_eval["variant"].unique()) == ARMS
    assert set(lm_eval["step"]) == {4}
    assert len(lm_eval) == 6 * 3  # fixture_mc acc, fixture_ll perplexity and acc, per run
    assert lm_eval.set_index(["task", "metric"]).loc[("fixture_mc", "acc"), "n_samples"].eq(4).all()
    for name in (
        "signatures_over_training.png",
        "ablation_over_training.png",
        "perplexity_gap.png",
        "load_bearing_over_training.png",
    ):
        assert (reports / name).stat().st_size > 0

    # MLflow: the snippet runs logged their snippet share per window; the results went to the
    # kedro-mlflow run.
    mlflow.set_tracking_uri(f"sqlite:///{micro_project / 'mlflow.db'}")
    try:
        client = mlflow.tracking.MlflowClient()
        manifest = pd.read_parquet(data / "07_model_output" / EXPERIMENT / "sweep_manifest.parquet")
        by_name = dict(zip(manifest["run_name"], manifest["mlflow_run_id"], strict=True))
        induction = client.get_metric_history(by_name[f"{PREFIX}induction_s0"],
                                              "variant_batch_share")  # fmt: skip
        assert [m.step for m in induction] == [2, 4]
        # The base arm's copy events are in its share too; the snippet arm holds more.
        base = client.get_metric_history(by_name[f"{PREFIX}minimally_enriched_s0"],
                                         "variant_batch_share")  # fmt: skip
        assert 0 < base[0].value < induction[0].value
        # The kedro-mlflow run holds the tables and figures as artifacts, and the claims.
        parent = client.get_run(client.get_run(by_name[f"{PREFIX}induction_s0"])
                                .data.tags["mlflow.parentRunId"])  # fmt: skip
        artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "bi_induct")}
        assert {"bi_induct/results_table.csv", "bi_induct/perplexity_gap.png",
                "bi_induct/signatures_over_training.png", "bi_induct/claims.json",
                "bi_induct/claims_table.csv", "bi_induct/runs_table.csv",
                "bi_induct/load_bearing_over_training.png",
                "bi_induct/ablation_over_training.png", "bi_induct/lm_eval_scores.csv"} <= artifacts  # fmt: skip
        assert (
            parent.data.tags["bi_induct/claims/ablation_hurts_base_more/induction"] == "undecided"
        )
        assert (
            parent.data.metrics["bi_induct/claims/ablation_hurts_base_more/induction/verdict"] == 0
        )
        assert client.get_metric_history(by_name[f"{PREFIX}minimally_enriched_s0"],
                                         "bi_induct/lm_eval/fixture_mc/acc")  # fmt: skip
        assert "bi_induct/gpt2-2l-d128-h8/induction/perplexity" in parent.data.metrics
        assert client.get_metric_history(by_name[f"{PREFIX}induction_s0"],
                                         "bi_induct/copy_accuracy")  # fmt: skip
    finally:
        mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
