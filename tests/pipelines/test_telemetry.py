import json

import numpy as np
import pandas as pd
import pytest
import yaml
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner

from ih_kedro.pipelines.telemetry import create_pipeline
from ih_kedro.pipelines.telemetry.nodes import (
    discover_external_checkpoints,
    make_probe_set,
)
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.training.models import build_model

VOCAB, CONTEXT = 64, 32


@pytest.fixture()
def params(project_root):
    text = (project_root / "conf/base/parameters_telemetry.yml").read_text()
    params = yaml.safe_load(text)["telemetry"]
    params["probe"].update(n_samples=6, top_k=60)
    params["batch_size"] = 6
    params["n_validation_sequences"] = 2
    params["emergence"]["n_bootstrap"] = 10
    params["emergence"]["methods"] = ["threshold"]
    return params


@pytest.fixture()
def fake_sweep(tmp_path):
    run_dir = tmp_path / "run_a"
    for step in (0, 10):
        folder = run_dir / "checkpoints" / f"step_{step:07d}"
        build_model("attn-only-2l-d64", VOCAB, CONTEXT, seed=step).save_pretrained(folder)
        state = {"run_name": "run_a", "step": step, "tokens_seen": step * 4 * CONTEXT,
                 "batch_size": 4, "context_length": CONTEXT, "seed": 0, "preset": "attn-only-2l-d64"}  # fmt: skip
        (folder / "trainer_state.json").write_text(json.dumps(state))
    manifest = pd.DataFrame([{"run_name": "run_a", "run_dir": str(run_dir), "mlflow_run_id": None,
                              "context_length": CONTEXT, "preset": "attn-only-2l-d64",
                              "batch_size": 4, "seed": 0}])  # fmt: skip
    rng = np.random.default_rng(0)
    tokens = PackedTokens(rng.integers(0, VOCAB, 4000).astype(np.uint16), VOCAB, 0)
    return manifest, tokens


def _loaded(outputs):
    return {k: (v.load() if hasattr(v, "load") else v) for k, v in outputs.items()}


def test_make_probe_set_uses_frequent_tokens(fake_sweep, params):
    _, tokens = fake_sweep
    probe_set = make_probe_set(tokens, params)
    assert probe_set.tokens.shape == (6, 100) and probe_set.source == "frequent"
    assert not (probe_set.tokens == 0).any()  # EOS excluded


def test_telemetry_pipeline_runs(fake_sweep, params, tmp_path):
    manifest, tokens = fake_sweep
    catalog = DataCatalog(
        {
            "sweep_manifest": MemoryDataset(manifest),
            "train_tokens": MemoryDataset(tokens, copy_mode="assign"),
            "validation_tokens": MemoryDataset(tokens, copy_mode="assign"),
            "params:telemetry": MemoryDataset(params),
        }
    )
    scoring = create_pipeline().only_nodes("make_probe_set", "score_checkpoints")
    outputs = _loaded(SequentialRunner().run(scoring, catalog))
    head_scores, model_scores = outputs["head_scores"], outputs["model_scores"]
    samples = outputs["score_samples"]
    assert list(head_scores.columns) == ["run_name", "step", "tokens_seen", "layer", "head",
                                         "metric", "value", "sd", "probe_source",
                                         "probe_length"]  # fmt: skip
    # One probe length for the sweep: min(50, smallest C // 2), on every score.
    assert set(head_scores["probe_length"]) == set(model_scores["probe_length"]) == {CONTEXT // 2}
    assert sorted(head_scores["step"].unique()) == [0, 10]
    assert "icl_score" in set(model_scores["metric"])
    run = samples["run_a"]
    assert run["prefix_matching"].shape == (2, 6, 2, 4)  # (K, n, layers, heads)
    assert run["associative_recall"].shape == (2, 6)
    assert run["tokens"].tolist() == [0, 10 * 4 * CONTEXT]
    catalog = DataCatalog({**{k: MemoryDataset(v, copy_mode="assign") for k, v in outputs.items()},
                           "sweep_manifest": MemoryDataset(manifest),
                           "params:telemetry": MemoryDataset(params)})  # fmt: skip
    rest = create_pipeline().only_nodes(
        "detect_emergence",
        "log_telemetry_to_mlflow",
        "plot_head_heatmaps",
        "plot_prefix_matching_over_training",
    )
    outputs = _loaded(SequentialRunner().run(rest, catalog))
    emergence = outputs["emergence_table"]
    assert set(emergence["metric"]) <= {"prefix_matching", "associative_recall",
                                        "repeated_loss_drop"}  # fmt: skip
    assert set(emergence["probe_length"]) == {CONTEXT // 2}
    assert set(emergence["status"]) <= {"emerged", "censored", "left_censored", "fit_failed"}
    assert outputs["telemetry_head_heatmaps"] is not None


def test_discover_external_checkpoints(fake_sweep, params):
    manifest, _ = fake_sweep
    run_dir = manifest.loc[0, "run_dir"]
    frame = discover_external_checkpoints({**params, "external_checkpoints": run_dir})
    assert frame.loc[0, "context_length"] == CONTEXT and frame.loc[0, "run_name"] == "run_a"
