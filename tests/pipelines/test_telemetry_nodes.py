"""The telemetry pipeline's nodes checked through exact values (mutation-testing kills).

The science scorers are tested in ``tests/science/telemetry``; here only the nodes' own logic:
parameter reading and validation, the probe pool, the sweep's probe length, which checkpoints
are scored with which arguments (the scorer and the checkpoint loader are replaced by
recording fakes), the assembled tables, the MLflow metric rows (a recording fake ``mlflow``),
what the figure nodes hand to ``science.statistics.plots.telemetry`` (whose plotted data is
tested in ``tests/science/statistics/plots``) and the external-checkpoint manifest.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import matplotlib.pyplot as plt
import mlflow
import numpy as np
import pandas as pd
import pytest
import torch

from ih_kedro.pipelines.telemetry import nodes
from ih_kedro.pipelines.telemetry.nodes import (
    HEAD_COLUMNS,
    MODEL_COLUMNS,
    _mlflow_metric_frames,
    _run_probes,
    detect_emergence,
    discover_external_checkpoints,
    emergence_specs,
    list_checkpoints_safe,
    log_telemetry_to_mlflow,
    make_probe_set,
    plot_head_heatmaps,
    plot_prefix_matching_over_training,
    score_checkpoints,
    sweep_probe_length,
)
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.telemetry.probes import ProbeSet
from ih_kedro.science.telemetry.probes import make_probe_set as science_probe_set


@pytest.fixture(autouse=True)
def _close_figures() -> Any:
    yield
    plt.close("all")


def stream(counts: dict[int, int], vocab: int, eos: int, other: int | None = None) -> PackedTokens:
    """A token stream with ``counts[id]`` copies of each id (order irrelevant to the pool)."""
    tokens = np.concatenate([np.full(n, t) for t, n in counts.items()]).astype(np.uint16)
    meta = {} if other is None else {"compact_vocabulary": {"other_token_id": other, "size": vocab}}
    return PackedTokens(tokens, vocab, eos, meta=meta)


def probe_params(**probe: Any) -> dict[str, Any]:
    return {"probe": {"n_samples": 3, "seed": 5, "source": "frequent", "top_k": 4, **probe}}


def row_sets(tokens: torch.Tensor) -> list[set[int]]:
    return [set(row.tolist()) for row in tokens]


# ---------------------------------------------------------------- make_probe_set


def test_frequent_pool_is_the_top_k_ids_without_eos_and_the_compact_other_id() -> None:
    # Counts: 9 > 8 (eos, excluded) > 7 (other, excluded) > 6 > 5 > 4 > 3 > 2.
    counts = {1: 9, 3: 8, 4: 7, 2: 6, 6: 5, 7: 4, 8: 3, 9: 2}
    tokens = stream(counts, vocab=10, eos=3, other=4)
    probe_set = make_probe_set(tokens, probe_params(top_k=4))
    # Length null: min(50, pool size 4); each half is a permutation of the top-4 pool.
    assert probe_set.length == 4 and probe_set.n_samples == 3
    assert row_sets(probe_set.tokens) == [{1, 2, 6, 7}] * 3
    assert probe_set.source == "frequent" and probe_set.seed == 5
    assert probe_set.sep_token == 3  # SEP defaults to EOS
    expected = science_probe_set(np.array([1, 2, 6, 7]), 3, 4, 5, "frequent", sep_token=3)
    torch.testing.assert_close(probe_set.tokens, expected.tokens)
    torch.testing.assert_close(probe_set.variants["induction_snippet"][:, 4], torch.full((3,), 3))
    assert probe_set.snippet_length is None


def test_uniform_pool_uses_the_vocabulary_override_and_drops_the_separator() -> None:
    tokens = stream({1: 5, 2: 5}, vocab=12, eos=0)
    params = probe_params(source="uniform", vocab_size=7, sep_token_id=5, n_samples=2)
    probe_set = make_probe_set(tokens, params)
    # Pool: 0..6 without EOS 0 and SEP 5 -> {1, 2, 3, 4, 6}; length min(50, 5).
    assert probe_set.length == 5 and probe_set.source == "uniform"
    assert row_sets(probe_set.tokens) == [{1, 2, 3, 4, 6}] * 2
    assert probe_set.sep_token == 5 and isinstance(probe_set.sep_token, int)
    assert probe_set.variants["anti_induction_snippet"][:, 5].tolist() == [5, 5]


def test_uniform_pool_defaults_to_the_streams_vocabulary() -> None:
    probe_set = make_probe_set(stream({1: 1}, vocab=6, eos=2), probe_params(source="uniform"))
    assert probe_set.length == 5 and row_sets(probe_set.tokens) == [{0, 1, 3, 4, 5}] * 3


def test_separator_zero_is_a_separator_not_a_missing_value() -> None:
    tokens = stream({1: 5}, vocab=8, eos=7)
    probe_set = make_probe_set(tokens, probe_params(source="uniform", sep_token_id=0))
    assert probe_set.sep_token == 0
    assert row_sets(probe_set.tokens) == [{1, 2, 3, 4, 5, 6}] * 3  # 0 (SEP) and 7 (EOS) out


def test_uniform_pool_is_capped_at_the_reference_length() -> None:
    probe_set = make_probe_set(stream({1: 1}, vocab=80, eos=0), probe_params(source="uniform"))
    assert probe_set.length == 50 and probe_set.tokens.shape == (3, 100)


def test_probe_length_and_snippet_length_are_read_and_cast() -> None:
    tokens = stream({t: 10 - t for t in range(1, 9)}, vocab=10, eos=0)
    params = probe_params(top_k=8, length=5.0, snippet_length=3.0, n_samples=2.0, seed=1.0)
    probe_set = make_probe_set(tokens, params)
    assert probe_set.length == 5 and probe_set.snippet_length == 3
    assert isinstance(probe_set.snippet_length, int) and probe_set.seed == 1
    assert probe_set.tokens.shape == (2, 10)
    assert probe_set.variants["induction_snippet"].shape == (2, 7)  # 2 * 3 + 1
    expected = science_probe_set(np.arange(1, 9), 2, 5, 1, "frequent", 0, 3)
    torch.testing.assert_close(probe_set.tokens, expected.tokens)


def test_unknown_probe_source_is_rejected_by_name() -> None:
    with pytest.raises(ValueError) as error:
        make_probe_set(stream({1: 1}, 4, 0), probe_params(source="random"))
    assert (
        str(error.value) == "telemetry.probe.source must be 'frequent' or 'uniform', got 'random'"
    )


# ---------------------------------------------------------------- sweep_probe_length


def probes(length: int = 30, sep: int | None = 0, n: int = 2) -> ProbeSet:
    return science_probe_set(np.arange(1, 61), n, length, 0, "uniform", sep_token=sep)


def test_sweep_probe_length_without_runs_is_the_probe_sets() -> None:
    assert sweep_probe_length(probes(30), {"probe": {"length": 4}}, []) == 30


def test_sweep_probe_length_defaults_to_half_the_smallest_context() -> None:
    assert sweep_probe_length(probes(30), {"probe": {"length": None}}, [64, 21, 100]) == 10
    assert sweep_probe_length(probes(30), {"probe": {}}, [64, 40]) == 20
    # Capped by the probe set's own length.
    assert sweep_probe_length(probes(12), {"probe": {"length": None}}, [64, 40]) == 12


def test_sweep_probe_length_fixed_length_fits_twice_into_the_smallest_context() -> None:
    assert sweep_probe_length(probes(30), {"probe": {"length": 8.0}}, [40, 16]) == 8
    assert sweep_probe_length(probes(6), {"probe": {"length": 8}}, [40, 16]) == 6
    with pytest.raises(ValueError) as error:
        sweep_probe_length(probes(30), {"probe": {"length": 9}}, [40, 17, 30])
    assert str(error.value) == (
        "telemetry.probe.length: 9 tokens twice exceed the smallest context length 17 of the sweep"
    )


# ---------------------------------------------------------------- _run_probes


def test_run_probes_keep_the_snippets_that_fit_the_context() -> None:
    run = _run_probes(probes(30), 5, 11)  # 2 * 5 + 1 == 11 fits
    assert run.length == 5 and run.tokens.shape == (2, 10)
    assert run.variants["induction_snippet"].shape == (2, 11)
    # 2 * 5 + 1 <= 14: the run's own 5-token snippets, not (14 - 1) // 2 = 6 of the base set.
    assert _run_probes(probes(30), 5, 14).variants["anti_induction_snippet"].shape == (2, 11)


def test_run_probes_shorten_snippets_that_do_not_fit() -> None:
    base = probes(30)
    run = _run_probes(base, 5, 10)  # 11 > 10: snippets of (10 - 1) // 2 = 4
    assert run.length == 5 and run.tokens.shape == (2, 10)
    torch.testing.assert_close(run.tokens, base.with_length(5).tokens)
    for kind in ("induction_snippet", "anti_induction_snippet"):
        torch.testing.assert_close(run.variants[kind], base.with_length(4).variants[kind])
    assert _run_probes(base, 1, 2).variants["induction_snippet"].shape == (2, 3)  # max(1, 0)
    # An odd context: (9 - 1) // 2 = 4-token snippets, 2 * 4 + 1 == 9.
    assert _run_probes(base, 5, 9).variants["induction_snippet"].shape == (2, 9)


def test_run_probes_without_snippets_are_only_shortened() -> None:
    run = _run_probes(probes(30, sep=None), 5, 10)
    assert run.variants == {} and run.tokens.shape == (2, 10)


# ---------------------------------------------------------------- score_checkpoints


class FakeScorer:
    """Records every ``score_checkpoint`` call; returns rows derived from its arguments."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.progress: list[str] = []  # the progress bars' descriptions

    def __call__(self, model: Any, probe_set: ProbeSet, validation: Any, **kwargs: Any) -> Any:
        self.calls.append({"model": model, "probes": probe_set, "validation": validation, **kwargs})
        step, run = kwargs["step"], kwargs["run_name"]
        base = {"run_name": run, "step": step, "tokens_seen": kwargs["tokens_seen"], "sd": 0.0,
                "probe_source": probe_set.source}  # fmt: skip
        heads = [
            {**base, "layer": 0, "head": 1, "metric": "prefix_matching", "value": step / 10},
            {**base, "layer": 1, "head": 0, "metric": "prefix_matching_snippet", "value": 0.5},
        ]
        models = [{**base, "metric": "icl_score", "value": step + 0.25}]
        per_sample = {
            "prefix_matching": np.full((2, 1, 1), float(step)),
            "prefix_matching_by_parity": np.full((2, 2), step + 1.0),
            "associative_recall": np.array([step, -step], dtype=float),
            "repeated_loss_drop": np.array([0.5, step / 2]),
        }
        return heads, models, per_sample


@pytest.fixture()
def scorer(monkeypatch: pytest.MonkeyPatch) -> FakeScorer:
    fake = FakeScorer()
    checkpoints = {
        "dir_a": [(0, Path("a0"), 0.0), (10, Path("a10"), 320.0)],
        "dir_b": [(5, Path("b5"), float("nan"))],
        "dir_empty": [],
    }
    monkeypatch.setattr(nodes, "list_checkpoints", lambda run_dir: checkpoints[run_dir])
    monkeypatch.setattr(nodes, "load_checkpoint", lambda path: f"model<{path}>")
    monkeypatch.setattr(nodes, "score_checkpoint", fake)

    def progress(iterable: list, desc: str) -> list:
        fake.progress.append(desc)
        return iterable

    monkeypatch.setattr(nodes, "tqdm", progress)
    return fake


def manifest(*rows: tuple[str, str, int]) -> pd.DataFrame:
    return pd.DataFrame([{"run_name": n, "run_dir": d, "context_length": c} for n, d, c in rows])


def test_score_checkpoints_scores_every_checkpoint_with_the_runs_probes(
    scorer: FakeScorer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=nodes.__name__)
    base = science_probe_set(np.arange(1, 61), 2, 30, 0, "frequent", sep_token=0, snippet_length=9)
    runs = manifest(("a", "dir_a", 24), ("empty", "dir_empty", 8), ("b", "dir_b", 30.0))
    validation = PackedTokens(np.arange(100, dtype=np.uint16), 128, 0)
    params = {"probe": {"length": None}, "batch_size": 3.0, "n_validation_sequences": 2.0,
              "top_fraction": "0.5", "min_layer": 0.0}  # fmt: skip
    head, model, samples = score_checkpoints(runs, base, validation, params)
    # L = min(50, min(24, 8, 30) // 2) = 4 for every run; snippet span min(9, 4) = 4.
    assert [(c["model"], c["run_name"], c["step"]) for c in scorer.calls] == [
        ("model<a0>", "a", 0), ("model<a10>", "a", 10), ("model<b5>", "b", 5)]  # fmt: skip
    assert [c["tokens_seen"] for c in scorer.calls[:2]] == [0.0, 320.0]
    assert math.isnan(scorer.calls[2]["tokens_seen"])
    for call in scorer.calls:
        assert call["batch_size"] == 3 and isinstance(call["batch_size"], int)
        assert call["top_fraction"] == 0.5 and call["min_layer"] == 0
        assert isinstance(call["min_layer"], int)
        assert call["probes"].length == 4 and call["probes"].snippet_length == 4
        torch.testing.assert_close(call["probes"].tokens, base.with_length(4).tokens)
    # Validation: the first n sequences of the run's context length.
    np.testing.assert_array_equal(scorer.calls[0]["validation"], np.arange(50).reshape(2, 25))
    np.testing.assert_array_equal(scorer.calls[2]["validation"], np.arange(62).reshape(2, 31))
    assert list(head.columns) == HEAD_COLUMNS and list(model.columns) == MODEL_COLUMNS
    assert head[["run_name", "step", "metric", "value", "probe_length"]].values.tolist() == [
        ["a", 0, "prefix_matching", 0.0, 4],
        ["a", 0, "prefix_matching_snippet", 0.5, 4],
        ["a", 10, "prefix_matching", 1.0, 4],
        ["a", 10, "prefix_matching_snippet", 0.5, 4],
        ["b", 5, "prefix_matching", 0.5, 4],
        ["b", 5, "prefix_matching_snippet", 0.5, 4],
    ]
    assert model[["run_name", "step", "metric", "value", "probe_length"]].values.tolist() == [
        ["a", 0, "icl_score", 0.25, 4], ["a", 10, "icl_score", 10.25, 4],
        ["b", 5, "icl_score", 5.25, 4]]  # fmt: skip
    assert sorted(samples) == ["a", "b"]  # no checkpoints: no samples
    a = samples["a"]
    assert sorted(a) == ["associative_recall", "prefix_matching", "prefix_matching_by_parity",
                         "probe_length", "repeated_loss_drop", "steps", "tokens"]  # fmt: skip
    np.testing.assert_array_equal(a["steps"], [0, 10])
    np.testing.assert_array_equal(a["tokens"], [0.0, 320.0])
    np.testing.assert_array_equal(a["prefix_matching"], np.stack([np.zeros((2, 1, 1)),
                                                                  np.full((2, 1, 1), 10.0)]))  # fmt: skip
    np.testing.assert_array_equal(a["prefix_matching_by_parity"], [np.ones((2, 2)),
                                                                   np.full((2, 2), 11.0)])  # fmt: skip
    np.testing.assert_array_equal(a["associative_recall"], [[0, 0], [10, -10]])
    np.testing.assert_array_equal(a["repeated_loss_drop"], [[0.5, 0.0], [0.5, 5.0]])
    assert a["probe_length"].shape == () and int(a["probe_length"]) == 4
    np.testing.assert_array_equal(samples["b"]["steps"], [5])
    assert scorer.progress == ["telemetry a", "telemetry b"]
    # This module's records only: the science modules log too, and their records reach caplog
    # whenever an earlier test left a parent logger at INFO.
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == nodes.__name__] == [
        ("INFO", "telemetry: probe half-length L = 4 for every run"),
        ("WARNING", "run empty: no checkpoints under dir_empty"),
    ]


def test_score_checkpoints_snippet_metrics_record_the_snippet_span(scorer: FakeScorer) -> None:
    base = science_probe_set(np.arange(1, 61), 2, 30, 0, "frequent", sep_token=0, snippet_length=3)
    params = {"probe": {"length": 6}, "batch_size": 4}
    head, model, samples = score_checkpoints(manifest(("b", "dir_b", 20)), base, None, params)
    assert head[["metric", "probe_length"]].values.tolist() == [
        ["prefix_matching", 6], ["prefix_matching_snippet", 3]]  # fmt: skip
    assert model["probe_length"].tolist() == [6] and int(samples["b"]["probe_length"]) == 6
    (call,) = scorer.calls
    assert call["validation"] is None
    assert call["top_fraction"] == 0.02 and call["min_layer"] == 1  # the defaults
    assert call["probes"].length == 6 and call["probes"].snippet_length == 3


def test_score_checkpoints_snippets_without_a_span_use_the_probe_length(scorer: FakeScorer) -> None:
    base = probes(30)  # snippet_length None
    head, _, _ = score_checkpoints(manifest(("b", "dir_b", 20)), base, None, {"batch_size": 1,
                                                                               "probe": {}})  # fmt: skip
    assert head["probe_length"].tolist() == [10, 10]


def test_score_checkpoints_reads_128_validation_sequences_by_default(scorer: FakeScorer) -> None:
    validation = PackedTokens(np.arange(1000, dtype=np.uint16) % 97, 97, 0)
    params = {"probe": {}, "batch_size": 1}
    score_checkpoints(manifest(("b", "dir_b", 4)), probes(30), validation, params)
    np.testing.assert_array_equal(scorer.calls[0]["validation"], validation.sequences(4)[:128])
    assert scorer.calls[0]["validation"].shape == (128, 5)
    score_checkpoints(manifest(("b", "dir_b", 4)), probes(30), validation,
                      {**params, "n_validation_sequences": 0})  # fmt: skip
    assert scorer.calls[1]["validation"] is None
    score_checkpoints(manifest(("b", "dir_b", 4)), probes(30), validation,
                      {**params, "n_validation_sequences": 1})  # fmt: skip
    np.testing.assert_array_equal(scorer.calls[2]["validation"], np.arange(5).reshape(1, 5))


def test_score_checkpoints_of_an_empty_manifest_are_empty_tables(scorer: FakeScorer) -> None:
    head, model, samples = score_checkpoints(pd.DataFrame(), probes(30), None, {"probe": {}})
    assert list(head.columns) == HEAD_COLUMNS and head.empty
    assert list(model.columns) == MODEL_COLUMNS and model.empty
    assert samples == {} and scorer.calls == []


# ---------------------------------------------------------------- emergence


def test_emergence_specs_expand_metrics_by_methods_with_the_shared_settings() -> None:
    config = {"metrics": [{"metric": "m1", "threshold": 0.4}, {"metric": "m2"}],
              "methods": ["threshold", "logistic"], "n_bootstrap": "7", "seed": 3.0, "ci": "0.9"}  # fmt: skip
    specs = emergence_specs({"emergence": config})
    shared = {"n_bootstrap": 7, "seed": 3, "ci": 0.9}
    assert specs == [
        {"metric": "m1", "threshold": 0.4, "method": "threshold", **shared},
        {"metric": "m1", "threshold": 0.4, "method": "logistic", **shared},
        {"metric": "m2", "method": "threshold", **shared},
        {"metric": "m2", "method": "logistic", **shared},
    ]
    assert [type(specs[0][k]) for k in ("n_bootstrap", "seed", "ci")] == [int, int, float]
    defaults = emergence_specs({"emergence": {"metrics": [{"metric": "m"}], "methods": ["t"]}})
    assert defaults == [{"metric": "m", "method": "t", "n_bootstrap": 200, "seed": 0, "ci": 0.95}]


def test_detect_emergence_passes_samples_manifest_and_specs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[Any, ...]] = []

    def fake(samples: Any, manifest_: Any, specs: Any) -> pd.DataFrame:
        seen.append((samples, manifest_, specs))
        return pd.DataFrame({"x": [1]})

    monkeypatch.setattr(nodes, "detect_emergence_table", fake)
    samples, runs = {"r": {}}, pd.DataFrame({"run_name": ["r"]})
    params = {"emergence": {"metrics": [{"metric": "m"}], "methods": ["t"]}}
    table = detect_emergence(samples, runs, params)
    assert table.to_dict("list") == {"x": [1]}
    ((got_samples, got_manifest, got_specs),) = seen
    assert got_samples is samples and got_manifest is runs
    assert got_specs == emergence_specs(params)


# ---------------------------------------------------------------- MLflow


def scores() -> tuple[pd.DataFrame, pd.DataFrame]:
    head = pd.DataFrame(
        [("a", 0, 0, 0, "prefix_matching", 0.2), ("a", 0, 0, 1, "prefix_matching", 0.7),
         ("a", 0, 1, 0, "copying", -0.5), ("a", 10, 0, 0, "prefix_matching", 0.4),
         ("b", 0, 0, 0, "prefix_matching", float("nan"))],
        columns=["run_name", "step", "layer", "head", "metric", "value"],
    )  # fmt: skip
    model = pd.DataFrame(
        [("a", 0, "icl_score", 1.5), ("a", 0, "loss_pos_3", 9.0), ("a", 10, "icl_score", 2.5),
         ("a", 10, "xloss_pos_", 4.0), ("b", 0, "icl_score", float("inf"))],
        columns=["run_name", "step", "metric", "value"],
    )  # fmt: skip
    return head, model


def test_mlflow_metric_rows_are_model_metrics_and_the_best_head_per_metric() -> None:
    frame = _mlflow_metric_frames(*scores())
    assert list(frame.columns) == ["run_name", "step", "metric", "value"]
    assert frame.index.tolist() == list(range(8))
    rows = frame.values.tolist()
    assert rows[:3] == [["a", 0, "telemetry/icl_score", 1.5], ["a", 10, "telemetry/icl_score", 2.5],
                        ["a", 10, "telemetry/xloss_pos_", 4.0]]  # fmt: skip
    assert rows[3] == ["b", 0, "telemetry/icl_score", float("inf")]
    assert rows[4:7] == [["a", 0, "telemetry/max_head/copying", -0.5],
                         ["a", 0, "telemetry/max_head/prefix_matching", 0.7],
                         ["a", 10, "telemetry/max_head/prefix_matching", 0.4]]  # fmt: skip
    assert rows[7][:3] == ["b", 0, "telemetry/max_head/prefix_matching"] and math.isnan(rows[7][3])


class FakeMlflow:
    """``start_run`` / ``log_metrics`` that record; unknown run ids raise like MLflow."""

    def __init__(self, known: set[str]) -> None:
        self.known, self.log, self.active = known, [], None
        self.attempts: list[Any] = []

    def start_run(self, run_id: str, nested: bool = False) -> Any:
        self.attempts.append(run_id)
        if run_id not in self.known:
            raise RuntimeError(f"Run '{run_id}' not found")
        fake = self

        class Run:
            def __enter__(self) -> None:
                fake.active = (run_id, nested)

            def __exit__(self, *exc: object) -> None:
                fake.active = None

        return Run()

    def log_metrics(self, values: dict[str, float], step: int) -> None:
        self.log.append((self.active, step, type(step), values))


def test_log_telemetry_logs_each_runs_finite_metrics_by_step(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=nodes.__name__)
    fake = FakeMlflow({"id-a", "id-b"})
    monkeypatch.setattr(mlflow, "start_run", fake.start_run)
    monkeypatch.setattr(mlflow, "log_metrics", fake.log_metrics)
    runs = pd.DataFrame({"run_name": ["gone", "none", "empty", "nan", "a", "b"],
                         "mlflow_run_id": ["id-gone", None, "", float("nan"), "id-a", "id-b"]})  # fmt: skip
    head, model = scores()
    log_telemetry_to_mlflow(head, model, runs)
    assert fake.log == [
        (("id-a", True), 0, int, {"telemetry/icl_score": 1.5, "telemetry/max_head/copying": -0.5,
                                  "telemetry/max_head/prefix_matching": 0.7}),
        (("id-a", True), 10, int, {"telemetry/icl_score": 2.5, "telemetry/xloss_pos_": 4.0,
                                   "telemetry/max_head/prefix_matching": 0.4}),
        (("id-b", True), 0, int, {}),  # inf and NaN are not logged
    ]  # fmt: skip
    assert fake.attempts == ["id-gone", "id-a", "id-b"]  # runs without an id: not tried
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == nodes.__name__] == [
        ("WARNING", "run gone: MLflow logging skipped (Run 'id-gone' not found)"),
        *[("INFO", f"run {r} has no mlflow_run_id: telemetry not logged")
          for r in ("none", "empty", "nan")],
    ]  # fmt: skip


def test_log_telemetry_skips_a_manifest_without_run_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeMlflow({"id-a"})
    monkeypatch.setattr(mlflow, "start_run", fake.start_run)
    monkeypatch.setattr(mlflow, "log_metrics", fake.log_metrics)
    log_telemetry_to_mlflow(*scores(), pd.DataFrame({"run_name": ["a"]}))
    assert fake.log == []


# ---------------------------------------------------------------- figures


def test_figure_nodes_pass_the_scores_and_the_heatmap_steps_to_the_science(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[Any, ...]] = []

    def lines_figure(scores: pd.DataFrame) -> str:
        seen.append((scores,))
        return "lines"

    def heatmaps_figure(scores: pd.DataFrame, steps: Any) -> str:
        seen.append((scores, steps))
        return "heatmaps"

    monkeypatch.setattr(nodes.telemetry_plots, "plot_prefix_matching_over_training", lines_figure)
    monkeypatch.setattr(nodes.telemetry_plots, "plot_head_heatmaps", heatmaps_figure)
    head = pd.DataFrame({"run_name": ["a"]})
    assert plot_prefix_matching_over_training(head) == "lines"
    assert plot_head_heatmaps(head, {"heatmap_steps": [0, 10]}) == "heatmaps"
    assert plot_head_heatmaps(head, {}) == "heatmaps"
    assert [call[0] is head for call in seen] == [True, True, True]
    assert [call[1:] for call in seen] == [(), ([0, 10],), (None,)]


# ---------------------------------------------------------------- external checkpoints


def checkpoint(folder: Path, **config: Any) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture()
def fake_autoconfig(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``AutoConfig.from_pretrained`` reading config.json into attributes; records the paths."""
    paths: list[str] = []

    def from_pretrained(path: str) -> SimpleNamespace:
        assert isinstance(path, str)
        paths.append(Path(path).name)
        return SimpleNamespace(**json.loads((Path(path) / "config.json").read_text()))

    monkeypatch.setattr(nodes, "AutoConfig", SimpleNamespace(from_pretrained=from_pretrained))
    return paths


def test_external_checkpoints_must_be_set() -> None:
    for root in (None, ""):
        with pytest.raises(ValueError) as error:
            discover_external_checkpoints({"external_checkpoints": root})
        assert str(error.value) == (
            "telemetry.external_checkpoints: set it to a folder of HF checkpoints"
        )


def test_external_checkpoints_of_one_run(tmp_path: Path, fake_autoconfig: list[str]) -> None:
    run = tmp_path / "pythia"
    checkpoint(run / "step2000", model_type="gpt_neox", num_hidden_layers=3,
               max_position_embeddings=2048, n_positions=7)  # fmt: skip
    checkpoint(run / "step1000", model_type="gpt_neox", num_hidden_layers=3)
    frame = discover_external_checkpoints({"external_checkpoints": str(run), "min_layer": 2})
    assert fake_autoconfig == ["step1000"]  # the first checkpoint's config
    assert frame.to_dict("records") == [{"run_name": "pythia", "run_dir": str(run.resolve()),
                                         "mlflow_run_id": None, "context_length": 512,
                                         "preset": "gpt_neox"}]  # fmt: skip


def test_external_checkpoints_of_several_runs(tmp_path: Path, fake_autoconfig: list[str]) -> None:
    checkpoint(tmp_path / "r2" / "step_5", model_type="x", n_layer=2, n_positions=64)
    checkpoint(tmp_path / "r1" / "checkpoint-3", model_type="y", max_position_embeddings=96,
               n_positions=64)  # fmt: skip
    (tmp_path / "no_checkpoints" / "notes").mkdir(parents=True)
    (tmp_path / "file.txt").write_text("not a run")
    frame = discover_external_checkpoints({"external_checkpoints": tmp_path, "min_layer": 1})
    assert frame[["run_name", "context_length", "preset"]].values.tolist() == [
        ["r1", 96, "y"], ["r2", 64, "x"]]  # fmt: skip
    assert frame["run_dir"].tolist() == [str((tmp_path / r).resolve()) for r in ("r1", "r2")]
    assert frame["mlflow_run_id"].tolist() == [None, None]
    fixed = discover_external_checkpoints(
        {"external_checkpoints": tmp_path, "external_context_length": 40.0}
    )
    assert fixed["context_length"].tolist() == [40, 40]
    assert fixed["context_length"].dtype == np.int64


def test_external_checkpoints_check_min_layer_against_the_model(
    tmp_path: Path, fake_autoconfig: list[str]
) -> None:
    checkpoint(tmp_path / "step_1", model_type="x", num_hidden_layers=2)
    with pytest.raises(ValueError) as error:
        discover_external_checkpoints({"external_checkpoints": tmp_path, "min_layer": 2})
    assert str(error.value) == (
        "telemetry.min_layer: 2 is not a layer of the model (it has 2 layers: use 0..1)"
    )
    gpt = tmp_path / "gpt"
    checkpoint(gpt / "step_1", model_type="x", n_layer=2, num_hidden_layers=9)
    with pytest.raises(ValueError, match="it has 2 layers"):
        discover_external_checkpoints({"external_checkpoints": gpt, "min_layer": 3})
    # No layer count in the config: nothing to check.
    bare = tmp_path / "bare"
    checkpoint(bare / "step_1", model_type="x")
    frame = discover_external_checkpoints({"external_checkpoints": bare, "min_layer": 99})
    assert frame["context_length"].tolist() == [512]


def test_external_checkpoints_none_found(tmp_path: Path) -> None:
    (tmp_path / "empty_run").mkdir()
    with pytest.raises(ValueError) as error:
        discover_external_checkpoints({"external_checkpoints": str(tmp_path)})
    assert str(error.value) == (
        f"telemetry.external_checkpoints: no HF checkpoint folders in {tmp_path}"
    )


def test_external_checkpoints_of_a_missing_folder_or_a_file(tmp_path: Path) -> None:
    missing, a_file = tmp_path / "missing", tmp_path / "model.bin"
    a_file.write_bytes(b"")
    for root in (missing, a_file):
        with pytest.raises(ValueError) as error:
            discover_external_checkpoints({"external_checkpoints": str(root)})
        assert str(error.value) == f"telemetry.external_checkpoints: {root} is not a folder"


def test_external_checkpoints_read_a_real_hf_config(tmp_path: Path) -> None:
    checkpoint(tmp_path / "run" / "step_0", model_type="gpt2", n_layer=3, n_positions=48)
    frame = discover_external_checkpoints({"external_checkpoints": tmp_path / "run"})
    assert frame[["run_name", "context_length", "preset"]].values.tolist() == [["run", 48, "gpt2"]]


def test_list_checkpoints_safe_is_empty_for_a_missing_folder(tmp_path: Path) -> None:
    assert list_checkpoints_safe(tmp_path / "missing") == []
    step = checkpoint(tmp_path / "step_4")
    assert list_checkpoints_safe(tmp_path)[0][:2] == (4, step)
