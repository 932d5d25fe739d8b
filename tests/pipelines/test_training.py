"""The training pipeline: the sweep node, nested MLflow runs, the online evaluator, the dataset.

The sweep design (grid expansion, run names, probe length) is tested in
``tests/science/training/test_grid.py``.
"""

from __future__ import annotations

import math

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch
from kedro.io import DataCatalog, DatasetError, MemoryDataset
from kedro.runner import SequentialRunner

from ih_kedro.datasets.checkpoint_store import CheckpointStoreDataset
from ih_kedro.pipelines.training import create_pipeline
from ih_kedro.pipelines.training.nodes import make_online_evaluator, train_sweep
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.models import build_model
from ih_kedro.science.training.run import MANIFEST_COLUMNS
from tests.science.training.test_grid import tiny_params

VOCAB = 64


@pytest.fixture()
def packed() -> PackedTokens:
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, VOCAB, size=20_000).astype(np.uint16)
    return PackedTokens(tokens=tokens, vocab_size=VOCAB, eos_token_id=0, checksum="t")


def test_sweep_validates_every_cell_before_training(packed, tmp_path):
    store = CheckpointStore(tmp_path)
    with pytest.raises(ValueError, match=r"training\.batch_sizes"):
        train_sweep(packed, store, tiny_params(batch_sizes=[4, 0]))
    assert store.runs() == []  # nothing trained


def test_sweep_writes_manifest_and_nested_mlflow_runs(packed, tmp_path):
    store = CheckpointStore(tmp_path / "store")
    mlflow.set_experiment("training-pipeline-test")
    with mlflow.start_run(run_name="parent") as parent:  # kedro-mlflow's run, in a test
        # The default executor: one Ray task per run on a local Ray instance.
        manifest = train_sweep(packed, store, tiny_params(executor={"kind": "ray"}))
    assert list(manifest.columns) == list(MANIFEST_COLUMNS)
    assert len(manifest) == 2
    assert set(manifest["stop_reason"]) == {"budget"}
    assert manifest["steps_trained"].tolist() == [6, 6]
    assert manifest["tokens_seen"].tolist() == [6 * 4 * 16, 6 * 8 * 16]
    assert manifest["family"].tolist() == ["attention_only"] * 2
    assert manifest["online_emergence_step"].isna().all()
    runs = mlflow.search_runs(
        experiment_ids=[parent.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'",
    )
    assert set(runs["tags.run_name"]) == set(manifest["run_name"])
    assert set(runs["run_id"]) == set(manifest["mlflow_run_id"])
    assert set(runs["tags.preset"]) == {"attn-only-2l-d64"}
    history = mlflow.MlflowClient().get_metric_history(manifest["mlflow_run_id"][0], "loss")
    assert [m.step for m in history] == [2, 4, 6]

    # A rerun of the sweep skips finished runs.
    again = train_sweep(packed, store, tiny_params(mlflow=False))
    assert set(again["stop_reason"]) == {"already_complete"}
    assert again["steps_trained"].tolist() == [6, 6]


def test_sweep_rejects_a_batch_that_ranks_cannot_split(packed, tmp_path):
    params = tiny_params(batch_sizes=[4, 6], executor={"kind": "sequential", "ranks_per_run": 4})
    with pytest.raises(ValueError, match=r"batch size 6 .*ranks_per_run=4"):
        train_sweep(packed, CheckpointStore(tmp_path), params)


def test_online_evaluator_scores_a_model(packed):
    evaluate = make_online_evaluator(
        packed, 16, {"n_probes": 8, "token_pool_size": 40, "probe_seed": 0}
    )
    model = build_model("attn-only-2l-d64", VOCAB, 16, seed=0).eval()
    with torch.no_grad():
        scores = evaluate(model)
    assert scores.pop("probe_length") == 8.0  # min(50, C // 2) without a sweep length
    assert set(scores) == {"prefix_matching_best_layer1", "prefix_matching_best_layer0",
                           "prefix_matching_by_parity_best_layer1"}  # fmt: skip
    assert all(0.0 <= v <= 1.0 and not math.isnan(v) for v in scores.values())
    # L = 8: four even and four odd queries, so each head's mean is the mean of its two parity
    # means and the best (head, parity) is at least the best head's mean.
    assert scores["prefix_matching_by_parity_best_layer1"] >= scores["prefix_matching_best_layer1"]


def test_checkpoint_store_dataset(tmp_path):
    dataset = CheckpointStoreDataset(path=str(tmp_path / "ckpt"))
    assert not dataset.exists()
    store = dataset.load()
    assert isinstance(store, CheckpointStore)
    assert store.root == (tmp_path / "ckpt").resolve() and dataset.exists()
    with pytest.raises(DatasetError, match="read-only"):
        dataset.save(store)


def test_pipeline_runs_on_an_in_memory_catalog(packed, tmp_path):
    pipeline = create_pipeline()
    assert pipeline.inputs() == {"train_tokens", "checkpoint_store", "params:training"}
    assert pipeline.outputs() == {"sweep_manifest"}
    catalog = DataCatalog(
        {
            "train_tokens": MemoryDataset(packed, copy_mode="assign"),
            "checkpoint_store": CheckpointStoreDataset(path=str(tmp_path / "store")),
            "params:training": MemoryDataset(
                tiny_params(batch_sizes=[4], max_steps=2, mlflow=False)
            ),
            "sweep_manifest": MemoryDataset(copy_mode="assign"),
        }
    )
    SequentialRunner().run(pipeline, catalog)
    manifest = catalog["sweep_manifest"].load()
    assert isinstance(manifest, pd.DataFrame) and len(manifest) == 1
