"""What ``train_sweep`` and ``make_online_evaluator`` hand on, with the heavy parts replaced.

``train_sweep`` is called with ``run_sweep`` replaced by a recorder, so the configs, executor,
MLflow tracking spec and evaluator factory it passes are checked exactly, and the manifest is
built from known rows; nothing trains and no Ray starts. ``make_online_evaluator`` is called
with the probe builders and ``head_pattern_scores`` replaced by recorders, so the options it
reads (and their defaults) and the reduction of hand-written per-sample scores are exact.
"""

from __future__ import annotations

import functools
import math
import types
from typing import Any

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch

from ih_kedro.pipelines.training import nodes
from ih_kedro.pipelines.training.nodes import make_online_evaluator, train_sweep
from ih_kedro.science.data import vocabulary
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.telemetry import probes, scores
from ih_kedro.science.training import sweep
from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.grid import expand_grid
from ih_kedro.science.training.run import MANIFEST_COLUMNS
from ih_kedro.science.training.sweep import ExecutorConfig
from ih_kedro.science.training.tasks import TrackingSpec
from ih_kedro.science.training.tracking import absolute_tracking_uri

VOCAB = 64


def make_packed(n_tokens: int = 2_000) -> PackedTokens:
    tokens = np.random.default_rng(0).integers(1, VOCAB, size=n_tokens).astype(np.uint16)
    return PackedTokens(tokens=tokens, vocab_size=VOCAB, eos_token_id=0, checksum="sweep")


def sweep_params(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "presets": ["attn-only-2l-d64"],
        "batch_sizes": [4, 8],
        "context_lengths": [16, 32],
        "data_variants": ["copy_spans"],
        "seeds": [0],
        "max_steps": 6,
        "online_emergence": {"eval_every": 3, "n_probes": 4},
        "deepspeed": {"zero_optimization": {"stage": 0}},
        "executor": {"kind": "sequential"},
    }
    params.update(overrides)
    return params


class Recorder:
    """Stands in for ``run_sweep``: keeps its arguments, returns one known row per config."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(
        self, configs: list, packed: PackedTokens, store: CheckpointStore, executor: Any, **kw: Any
    ) -> list[dict[str, Any]]:
        self.calls.append({"configs": configs, "packed": packed, "store": store,
                           "executor": executor, **kw})  # fmt: skip
        return [row(config.run_name, index) for index, config in enumerate(configs)]


def row(name: str, index: int) -> dict[str, Any]:
    """A manifest row whose keys come in reverse order: the manifest still has the documented
    column order."""
    values: dict[str, Any] = {column: f"{column}-{index}" for column in MANIFEST_COLUMNS[::-1]}
    values["run_name"] = name
    values["online_emergence_step"] = 12 if index == 0 else None
    return values


@pytest.fixture()
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    monkeypatch.setattr(sweep, "run_sweep", recorder)
    return recorder


def test_train_sweep_passes_the_grid_executor_tracking_and_evaluator(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    parent = types.SimpleNamespace(info=types.SimpleNamespace(run_id="parent-run"))
    monkeypatch.setattr(mlflow, "active_run", lambda: parent)
    packed, store = make_packed(), CheckpointStore(tmp_path)
    params = sweep_params()
    manifest = train_sweep(packed, store, params, {"model_path": "m.json"})

    (call,) = recorder.calls
    expected = expand_grid(params)
    for config in expected:
        config.variant_options = {"model_path": "m.json", **config.variant_options}
    assert call["configs"] == expected
    assert call["packed"] is packed and call["store"] is store
    assert call["executor"] == ExecutorConfig(kind="sequential")
    assert call["tracking"] == TrackingSpec(
        absolute_tracking_uri(mlflow.get_tracking_uri()), "parent-run"
    )
    factory = call["evaluator_factory"]
    assert isinstance(factory, functools.partial)
    assert factory.func is nodes.make_online_evaluator and factory.args == ()
    # The sweep's probe length: min(50, smallest context // 2) = 8.
    assert factory.keywords == {"options": {"eval_every": 3, "n_probes": 4, "probe_length": 8}}

    rows = [row(c.run_name, i) for i, c in enumerate(expected)]
    wanted = pd.DataFrame(rows, columns=list(MANIFEST_COLUMNS))
    wanted["online_emergence_step"] = [12.0, math.nan, math.nan, math.nan]
    assert list(manifest.columns) == list(MANIFEST_COLUMNS)
    assert manifest["online_emergence_step"].dtype == np.float64
    pd.testing.assert_frame_equal(manifest, wanted)


def test_train_sweep_without_mlflow_or_online_evaluation(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setattr(mlflow, "active_run", lambda: None)
    store = CheckpointStore(tmp_path)
    train_sweep(make_packed(), store, sweep_params(online_emergence={"probe_length": 4}))
    assert recorder.calls[-1]["tracking"] == TrackingSpec(
        absolute_tracking_uri(mlflow.get_tracking_uri()), None
    )
    assert recorder.calls[-1]["evaluator_factory"].keywords == {"options": {"probe_length": 4}}
    train_sweep(
        make_packed(), store, sweep_params(mlflow=False, online_emergence={"enabled": False})
    )
    assert recorder.calls[-1]["tracking"] is None
    assert recorder.calls[-1]["evaluator_factory"] is None
    assert recorder.calls[-1]["configs"][0].early_stop is False


def test_train_sweep_validates_before_running(recorder: Recorder, tmp_path: Any) -> None:
    store = CheckpointStore(tmp_path)
    with pytest.raises(ValueError) as error:
        train_sweep(make_packed(20), store, sweep_params())
    assert str(error.value) == (
        "train_tokens: the corpus has 20 tokens, fewer than one sequence of context_length + 1 "
        "= 33 (run 'attn-only-2l-d64_B4_C32_copy_spans_s0')"
    )
    executor = {"kind": "sequential", "ranks_per_run": 4}
    with pytest.raises(ValueError) as error:
        train_sweep(make_packed(), store, sweep_params(batch_sizes=[8, 6], executor=executor))
    assert str(error.value) == (
        "training.batch_sizes: batch size 6 is not divisible by training.executor.ranks_per_run=4"
    )
    assert recorder.calls == []
    train_sweep(make_packed(), store, sweep_params(batch_sizes=[8, 4], executor=executor))
    assert recorder.calls[-1]["executor"].ranks_per_run == 4


class ProbeRecorder:
    """Stands in for the probe builders and ``head_pattern_scores``."""

    def __init__(self, per_sample: dict[str, torch.Tensor]) -> None:
        self.per_sample = per_sample
        self.pool_calls: list[tuple] = []
        self.probe_calls: list[tuple] = []
        self.score_calls: list[tuple] = []
        self.pool = np.array([7, 8, 9])
        self.probes = torch.arange(6).reshape(1, 6)

    def frequent_token_pool(self, tokens: Any, vocab: int, top_k: int, exclude: Any = ()) -> Any:
        self.pool_calls.append((tokens, vocab, top_k, tuple(exclude)))
        return self.pool

    def repeated_token_probes(self, n: int, length: int, pool: Any, seed: int) -> torch.Tensor:
        self.probe_calls.append((n, length, pool, seed))
        return self.probes

    def head_pattern_scores(self, model: Any, batch: Any, **kw: Any) -> dict[str, torch.Tensor]:
        self.score_calls.append((model, batch, kw))
        return self.per_sample


def install(monkeypatch: pytest.MonkeyPatch, per_sample: dict[str, torch.Tensor]) -> ProbeRecorder:
    fake = ProbeRecorder(per_sample)
    monkeypatch.setattr(vocabulary, "frequent_token_pool", fake.frequent_token_pool)
    monkeypatch.setattr(probes, "repeated_token_probes", fake.repeated_token_probes)
    monkeypatch.setattr(scores, "head_pattern_scores", fake.head_pattern_scores)
    return fake


# Per-sample scores (n = 2 samples, 3 layers, 2 heads). Sample means by layer:
# layer 0 [0.9, 0.1], layer 1 [0.3, 0.6], layer 2 [0.2, 0.4]: the best later head is 0.6 < 0.9.
PREFIX = torch.tensor(
    [
        [[1.0, 0.0], [0.2, 0.8], [0.1, 0.4]],
        [[0.8, 0.2], [0.4, 0.4], [0.3, 0.4]],
    ]
)
# Even / odd query means (over the 2 samples): even layer 1 head 0 = 0.7, odd layer 2 head 1
# = 0.75, layer 0 up to 0.95 (ignored).
EVEN = torch.tensor(
    [
        [[0.9, 0.0], [0.6, 0.1], [0.0, 0.0]],
        [[0.9, 0.0], [0.8, 0.1], [0.0, 0.0]],
    ]
)
ODD = torch.tensor(
    [
        [[1.0, 0.0], [0.0, 0.2], [0.0, 0.5]],
        [[0.9, 0.0], [0.0, 0.2], [0.0, 1.0]],
    ]
)


def test_online_evaluator_defaults_and_the_best_later_head(monkeypatch: pytest.MonkeyPatch) -> None:
    per_sample = {"prefix_matching": PREFIX, "prefix_matching_even": EVEN,
                  "prefix_matching_odd": ODD}  # fmt: skip
    fake = install(monkeypatch, per_sample)
    packed = make_packed()
    evaluate = make_online_evaluator(packed, 200, {})
    ((tokens, vocab, top_k, exclude),) = fake.pool_calls
    assert np.array_equal(tokens, packed.tokens) and isinstance(tokens, np.ndarray)
    assert (vocab, top_k, exclude) == (VOCAB, 500, packed.non_content_token_ids)
    assert fake.probe_calls == [(64, 50, fake.pool, 0)]  # L = min(50, 200 // 2)
    model = torch.nn.Identity()
    result = evaluate(model)
    assert fake.score_calls == [(model, fake.probes, {"batch_size": 64})]
    assert result == {
        "prefix_matching_best_layer1": pytest.approx(0.6),
        "prefix_matching_best_layer0": pytest.approx(0.9),
        "prefix_matching_by_parity_best_layer1": pytest.approx(0.75),
        "probe_length": 50.0,
    }
    assert all(type(v) is float for v in result.values())


def test_online_evaluator_two_and_one_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    """With two layers "later" is layer 1 alone; with one it is layer 0."""
    two = {"prefix_matching": PREFIX[:, :2], "prefix_matching_even": EVEN[:, :2],
           "prefix_matching_odd": ODD[:, :2]}  # fmt: skip
    install(monkeypatch, two)
    result = make_online_evaluator(make_packed(), 16, {})(torch.nn.Identity())
    assert result["prefix_matching_best_layer1"] == pytest.approx(0.6)
    assert result["prefix_matching_by_parity_best_layer1"] == pytest.approx(0.7)
    assert result["probe_length"] == 8.0
    one = {"prefix_matching": PREFIX[:, 1:2], "prefix_matching_even": EVEN[:, 1:2],
           "prefix_matching_odd": ODD[:, 1:2]}  # fmt: skip
    install(monkeypatch, one)
    result = make_online_evaluator(make_packed(), 16, {})(torch.nn.Identity())
    assert result["prefix_matching_best_layer1"] == pytest.approx(0.6)
    assert result["prefix_matching_best_layer0"] == pytest.approx(0.6)
    assert result["prefix_matching_by_parity_best_layer1"] == pytest.approx(0.7)


def test_online_evaluator_reads_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, {})
    options = {"token_pool_size": "30", "n_probes": "8", "probe_seed": "3", "probe_length": "8"}
    make_online_evaluator(make_packed(), 16, options)  # 2 x 8 = 16: fits exactly
    assert fake.pool_calls[0][2] == 30
    assert fake.probe_calls == [(8, 8, fake.pool, 3)]
    make_online_evaluator(make_packed(), 33, {})
    assert fake.probe_calls[-1][1] == 16  # min(50, 33 // 2)
    with pytest.raises(ValueError) as error:
        make_online_evaluator(make_packed(), 16, {"probe_length": 9})
    assert str(error.value) == (
        "training.online_emergence.probe_length: 2 x 9 tokens exceed the context length 16"
    )
    calls = len(fake.pool_calls)
    with pytest.raises(ValueError, match=r"training\.online_emergence\.metric: 'x'"):
        make_online_evaluator(make_packed(), 16, {"metric": "x"})
    assert len(fake.pool_calls) == calls  # the metric is checked first
