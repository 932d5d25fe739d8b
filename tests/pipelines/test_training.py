"""The training pipeline: grid expansion, the sweep node, nested MLflow runs, the dataset."""

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
from ih_kedro.pipelines.training.nodes import (
    expand_grid,
    make_online_evaluator,
    run_name,
    sweep_probe_length,
    train_sweep,
)
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.training.models import build_model
from ih_kedro.science.training.run import MANIFEST_COLUMNS, CheckpointStore

VOCAB = 64


@pytest.fixture()
def packed() -> PackedTokens:
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, VOCAB, size=20_000).astype(np.uint16)
    return PackedTokens(tokens=tokens, vocab_size=VOCAB, eos_token_id=0, checksum="t")


def tiny_params(**overrides) -> dict:
    params = {
        "presets": ["attn-only-2l-d64"],
        "batch_sizes": [4, 8],
        "context_lengths": [16],
        "data_variants": ["copy_spans"],
        "seeds": [0],
        "copy_rate": 1.0,
        "learning_rate": 3e-3,
        "warmup_steps": 2,
        "max_steps": 6,
        "checkpoint_every": 3,
        "checkpoint_dense_until": 0,
        "log_every": 2,
        "online_emergence": {"enabled": False},
        "deepspeed": {"zero_optimization": {"stage": 0}},
        "executor": {"kind": "sequential"},
    }
    params.update(overrides)
    return params


def test_run_names_are_deterministic():
    assert run_name("attn-only-2l-d128", 64, 32, "copy_spans", 0) == (
        "attn-only-2l-d128_B64_C32_copy_spans_s0"
    )
    assert run_name("p", 8, 16, "copy_spans", 1, copy_rate=0.5) == "p_B8_C16_copy_spans_r0.5_s1"
    configs = expand_grid(tiny_params(seeds=[0, 1], data_variants=["natural", "copy_spans"]))
    assert len(configs) == 2 * 2 * 2
    natural = [c for c in configs if c.data_variant == "natural"]
    assert all(c.variant_options == {} and c.copy_rate == 0.0 for c in natural)


def test_exclude_cells_makes_a_fractional_design():
    params = tiny_params(batch_sizes=[4, 8, 16], context_lengths=[16, 32], seeds=[0, 1])
    exclude = [{"batch_size": 4, "context_length": 32}, {"batch_size": 16, "seed": 1}]
    cells = {(c.batch_size, c.context_length, c.seed) for c in expand_grid(
        {**params, "exclude_cells": exclude})}  # fmt: skip
    full = {(b, c, s) for b in (4, 8, 16) for c in (16, 32) for s in (0, 1)}
    dropped = {(4, 32, 0), (4, 32, 1), (16, 16, 1), (16, 32, 1)}
    assert cells == full - dropped
    for bad, message in [
        ({"batch_size": 5}, "matches no run"),
        ({"batch": 4}, "must name grid axes"),
        ({}, "must name grid axes"),
    ]:
        with pytest.raises(ValueError, match=f"training.exclude_cells: .*{message}"):
            expand_grid({**params, "exclude_cells": [bad]})
    with pytest.raises(ValueError, match="every run of the grid is excluded"):
        expand_grid({**params, "exclude_cells": [{"preset": "attn-only-2l-d64"}]})


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


def test_sweep_probe_length_is_fixed_by_the_smallest_context():
    params = {"context_lengths": [16, 32, 64], "online_emergence": {}}
    assert sweep_probe_length(params) == 8
    assert sweep_probe_length({**params, "context_lengths": [200, 400]}) == 50
    assert sweep_probe_length({**params, "online_emergence": {"probe_length": 6}}) == 6
    with pytest.raises(ValueError, match="online_emergence.probe_length"):
        sweep_probe_length({**params, "online_emergence": {"probe_length": 9}})


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


def test_variant_entries_with_options_become_labelled_cells():
    params = {
        "presets": ["p"],
        "batch_sizes": [8],
        "context_lengths": [16],
        "seeds": [0],
        "max_steps": 10,
        "data_variants": [
            "natural",
            {"variant": "copy_spans", "label": "cs_half", "options": {"copy_rate": 0.5}},
        ],
        "variant_options": {"copy_spans": {"span_max_fraction": 0.25}},
    }
    natural, half = expand_grid(params)
    assert natural.run_name == "p_B8_C16_natural_s0" and natural.variant_options == {}
    assert half.run_name == "p_B8_C16_cs_half_s0"
    assert half.data_variant == "copy_spans"
    assert half.variant_options == {
        "copy_rate": 0.5,
        "span_min_fraction": 0.125,
        "span_max_fraction": 0.25,
    }
    with pytest.raises(ValueError, match="training.data_variants"):
        expand_grid({**params, "data_variants": [{"label": "x"}]})


@pytest.mark.parametrize(
    ("metric", "key"),
    [
        (None, "prefix_matching_best_layer1"),
        ("prefix_matching", "prefix_matching_best_layer1"),
        ("prefix_matching_by_parity", "prefix_matching_by_parity_best_layer1"),
    ],
)
def test_the_online_metric_picks_what_the_early_stop_watches(metric, key):
    online = {"enabled": True, **({"metric": metric} if metric else {})}
    configs = expand_grid(tiny_params(online_emergence=online))
    assert [c.early_stop_metric for c in configs] == [key, key]


def test_an_unknown_online_metric_fails_before_any_run():
    with pytest.raises(ValueError, match=r"training\.online_emergence\.metric: 'induction'"):
        expand_grid(tiny_params(online_emergence={"metric": "induction"}))
