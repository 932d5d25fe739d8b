"""The bi_induct nodes checked through exact values (mutation-testing kills).

The matched-compute node, the separator check, ``evaluate_runs`` (parameter reading, eval-set
caching per context, checkpoint thinning, the tidy rows and finals) with the science stubbed
out, the results-table options, what the figure nodes hand to the science (run names, figures:
``tests/science``) and what goes to MLflow (a recording stand-in for ``mlflow``). No model is
built or trained.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from ih_kedro.pipelines.bi_induct import lm_eval_nodes, nodes
from ih_kedro.pipelines.bi_induct.lm_eval_nodes import (
    LM_EVAL_COLUMNS,
    MLFLOW_BATCH,
    _lm_eval_metric,
    _log_in_batches,
    evaluate_lm_eval,
    log_lm_eval_to_mlflow,
)
from ih_kedro.pipelines.bi_induct.nodes import (
    CHECKPOINT_COLUMNS,
    _sep_id,
    build_results_table,
    evaluate_runs,
    log_bi_induct_to_mlflow,
    matched_compute,
    plot_ablation_over_training,
    plot_perplexity_gap,
    plot_signatures,
)
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.evaluation import lm_eval_adapter
from ih_kedro.science.evaluation.bi_induct import RESULT_COLUMNS
from ih_kedro.science.evaluation.lm_eval_adapter import SCORE_COLUMNS

EOS, SEP = 0, 7
LOGGER = "ih_kedro.pipelines.bi_induct"  # the nodes modules log under it


class FakeTokenizer:
    """``token_to_id`` of a tokenizer whose ``<|endoftext|>`` is 0 and ``<|sep|>`` is 7."""

    ids = {"<|endoftext|>": EOS, "<|sep|>": SEP}

    def token_to_id(self, token: str) -> int | None:
        return self.ids.get(token)


def _run(preset: str, batch: int, context: int, label: str, seed: int, **extra: Any) -> dict:
    return {"run_name": f"{preset}_B{batch}_C{context}_{label}_s{seed}", "preset": preset,
            "batch_size": batch, "context_length": context, "seed": seed, **extra}  # fmt: skip


def _messages(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith(LOGGER)]


# ------------------------------------------------------------------ run names, matched compute


def _compute_manifest() -> pd.DataFrame:
    rows = [_run("p", 2, 8, label, 0, data_variant=variant, steps_trained=3, tokens_seen=48,
                 flops=2.5e6, run_dir=f"/r/{label}")
            for label, variant in (("natural", "natural"), ("snip", "bi_induct_snippets"))]  # fmt: skip
    return pd.DataFrame(rows)


def test_matched_compute_table_columns_and_log(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        table = matched_compute(_compute_manifest())
    expected = pd.DataFrame({
        "preset": ["p", "p"], "variant": ["natural", "snip"], "batch_size": [2, 2],
        "context_length": [8, 8], "seed": [0, 0], "run_name": ["p_B2_C8_natural_s0", "p_B2_C8_snip_s0"],
        "data_variant": ["natural", "bi_induct_snippets"], "steps_trained": [3, 3],
        "tokens_seen": [48, 48], "flops": [2.5e6, 2.5e6],
    })  # fmt: skip
    pd.testing.assert_frame_equal(table, expected)
    assert _messages(caplog) == [(logging.INFO, "bi_induct: matched compute holds for 2 runs")]


# ------------------------------------------------------------------------------ separator id


@pytest.mark.parametrize(
    "training_params",
    [{}, {"variant_options": None}, {"variant_options": {"other": {}}},
     {"variant_options": {"bi_induct_snippets": {}}},
     {"variant_options": {"bi_induct_snippets": {"sep_token_id": 7}}},
     {"variant_options": {"bi_induct_snippets": {"sep_token_id": "7"}}}],
)  # fmt: skip
def test_sep_id_is_the_tokenizers_sep(training_params: dict) -> None:
    assert _sep_id(FakeTokenizer(), training_params) == SEP


def test_sep_id_rejects_another_trained_id() -> None:
    params = {"variant_options": {"bi_induct_snippets": {"sep_token_id": 1}}}
    with pytest.raises(ValueError) as error:
        _sep_id(FakeTokenizer(), params)
    assert str(error.value) == (
        "bi_induct.training.variant_options.bi_induct_snippets.sep_token_id: 1 is not "
        "the tokenizer's <|sep|> id 7"
    )


# ------------------------------------------------------------------------------ evaluate_runs


class Recorder:
    """Stand-ins for the science calls of ``evaluate_runs``, recording what they get."""

    def __init__(self, checkpoints: dict[str, list[tuple]]) -> None:
        self.checkpoints = checkpoints
        self.eval_sets: list[dict[str, Any]] = []
        self.evaluated: list[tuple[Any, Any, dict, bool]] = []
        self.bars: list[str] = []

    def make_eval_set(self, tokenizer, validation, pool, context, sep, params) -> str:
        self.eval_sets.append({"tokenizer": tokenizer, "validation": validation, "pool": pool,
                               "context": context, "sep": sep, "params": params})  # fmt: skip
        return f"eval_set_C{context}"

    def list_checkpoints(self, run_dir: str) -> list[tuple]:
        return list(self.checkpoints[run_dir])

    @staticmethod
    def load_checkpoint(path: str) -> str:
        return f"model:{path}"

    def evaluate_checkpoint(self, model: str, eval_set: str, params: dict) -> dict:
        self.evaluated.append((model, eval_set, params, torch.is_grad_enabled()))
        return {"model": model, "eval_set": eval_set}

    @staticmethod
    def checkpoint_summary(result: dict) -> dict:
        step = int(result["model"].rsplit("_", 1)[1])
        return {"perplexity": 10 + step, "icl_score": np.float32(-0.5)}

    def tqdm(self, iterable: list, desc: str) -> list:
        self.bars.append(desc)
        return iterable


@pytest.fixture()
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    checkpoints = {
        "dirA": [(s, f"dirA/step_{s}", 16.0 * s) for s in range(5)],
        "dirB": [(s, f"dirB/step_{s}", 16 * s) for s in range(4)],
        "dirC": [(5, "dirC/step_5", 80.0)],
        "empty": [],
    }
    rec = Recorder(checkpoints)
    for name in ("make_eval_set", "list_checkpoints", "load_checkpoint", "evaluate_checkpoint",
                 "checkpoint_summary", "tqdm"):  # fmt: skip
        monkeypatch.setattr(nodes, name, getattr(rec, name))
    monkeypatch.setattr(lm_eval_nodes, "list_checkpoints", rec.list_checkpoints)
    return rec


def _sweep_manifest() -> pd.DataFrame:
    return pd.DataFrame([_run("pa", 2, 8, "natural", 0, run_dir="dirA"),
                         _run("pa", 2, 8, "snip", 1, run_dir="dirB"),
                         _run("pb", 2, 4, "natural", 0, run_dir="dirC")])  # fmt: skip


def _pool(tokens: np.ndarray, k: int) -> list[int]:
    counts = np.bincount(tokens)
    ids = sorted((i for i in range(len(counts)) if counts[i] and i not in (EOS, SEP)),
                 key=lambda i: (-counts[i], i))  # fmt: skip
    return ids[:k]


VALIDATION = PackedTokens(np.arange(200) % 50, vocab_size=50, eos_token_id=EOS)


def test_evaluate_runs_rows_finals_and_science_inputs(recorder: Recorder) -> None:
    train = np.array([0] * 9 + [7] * 8 + [3] * 6 + [5] * 5 + [2] * 5 + [1] + [4] * 2)
    params = {"token_pool_size": 3, "every_nth_checkpoint": 2, "n_validation_sequences": 3,
              "seed": 4}  # fmt: skip
    training = {"variant_options": {"bi_induct_snippets": {"sep_token_id": 7, "span_length": 5}}}
    manifest = _sweep_manifest()
    metrics, finals = evaluate_runs(manifest, manifest, FakeTokenizer(),
                                    PackedTokens(train, vocab_size=8, eos_token_id=EOS),
                                    VALIDATION, params, training)  # fmt: skip
    merged = {**params, "snippet_length": 5}
    # One eval set per context length (8, then 4), from the first 3 validation sequences.
    assert [e["context"] for e in recorder.eval_sets] == [8, 4]
    for entry, context in zip(recorder.eval_sets, (8, 4), strict=True):
        assert isinstance(entry["tokenizer"], FakeTokenizer)
        np.testing.assert_array_equal(entry["validation"], VALIDATION.sequences(context)[:3])
        assert entry["pool"].tolist() == _pool(train, 3) == [3, 2, 5]
        assert entry["sep"] == SEP and entry["params"] == merged
    # Every 2nd checkpoint, the last always: A 0, 2, 4; B 0, 2 (+3); C its only one, 5.
    chosen = [("dirA", 0), ("dirA", 2), ("dirA", 4), ("dirB", 0), ("dirB", 2), ("dirB", 3),
              ("dirC", 5)]  # fmt: skip
    assert recorder.evaluated == [
        (f"model:{d}/step_{s}", "eval_set_C4" if d == "dirC" else "eval_set_C8", merged, False)
        for d, s in chosen
    ]
    assert recorder.bars == ["bi_induct pa_B2_C8_natural_s0", "bi_induct pa_B2_C8_snip_s1",
                             "bi_induct pb_B2_C4_natural_s0"]  # fmt: skip
    runs = {"dirA": ("pa_B2_C8_natural_s0", "pa", "natural", 0),
            "dirB": ("pa_B2_C8_snip_s1", "pa", "snip", 1),
            "dirC": ("pb_B2_C4_natural_s0", "pb", "natural", 0)}  # fmt: skip
    rows = []
    for d, s in chosen:
        for metric, value in (("perplexity", 10.0 + s), ("icl_score", -0.5)):
            rows.append([*runs[d], s, 16.0 * s, metric, value])
    expected = pd.DataFrame(rows, columns=CHECKPOINT_COLUMNS)
    pd.testing.assert_frame_equal(metrics, expected)
    assert finals == {
        "pa_B2_C8_natural_s0": {"model": "model:dirA/step_4", "eval_set": "eval_set_C8", "step": 4},
        "pa_B2_C8_snip_s1": {"model": "model:dirB/step_3", "eval_set": "eval_set_C8", "step": 3},
        "pb_B2_C4_natural_s0": {"model": "model:dirC/step_5", "eval_set": "eval_set_C4", "step": 5},
    }
    assert all(type(final["step"]) is int for final in finals.values())


def test_evaluate_runs_defaults(recorder: Recorder) -> None:
    manifest = pd.DataFrame([_run("pb", 2, 4, "natural", 0, run_dir="dirB")])
    train = np.arange(600)
    metrics, finals = evaluate_runs(manifest, manifest, FakeTokenizer(),
                                    PackedTokens(train, vocab_size=600, eos_token_id=EOS),
                                    VALIDATION, {}, {"variant_options": None})  # fmt: skip
    (entry,) = recorder.eval_sets
    # 500 most frequent ids (all once here: the smallest), without EOS 0 and SEP 7.
    assert entry["pool"].tolist() == _pool(train, 500)
    assert len(entry["pool"]) == 500 and entry["pool"][-1] == 501
    np.testing.assert_array_equal(entry["validation"], VALIDATION.sequences(4)[:32])
    assert len(entry["validation"]) == 32  # of 40
    assert entry["params"] == {"snippet_length": None}
    assert [e[0] for e in recorder.evaluated] == [f"model:dirB/step_{s}" for s in range(4)]
    assert sorted(metrics["step"].unique()) == [0, 1, 2, 3]
    assert finals["pb_B2_C4_natural_s0"]["step"] == 3


def test_evaluate_runs_cache_evaluates_each_checkpoint_once(
    recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``cache: true`` a second call (an adaptive look) loads and evaluates no checkpoint
    and returns the same tables, span probes included; a new checkpoint (a longer run) or other
    options are evaluated again."""
    folders = {}
    for step in range(3):
        folders[step] = tmp_path / f"step_{step}"
        folders[step].mkdir()
        (folders[step] / "model.safetensors").write_bytes(b"w%d" % step)
    recorder.checkpoints["real"] = [(s, folders[s], 16.0 * s) for s in range(3)]
    spans: list[tuple] = []

    def span_probe_scores(model, pool, span_list, sep, **options) -> dict:
        spans.append((model, tuple(span_list)))
        return {"copy": {s: 0.5 for s in span_list}}

    monkeypatch.setattr(nodes, "span_probe_scores", span_probe_scores)
    manifest = pd.DataFrame([_run("pb", 2, 8, "natural", 0, run_dir="real")])
    params = {"cache": True, "span_probe_spans": [2, 3]}

    def evaluate(params: dict) -> tuple[pd.DataFrame, dict]:
        return evaluate_runs(manifest, manifest, FakeTokenizer(),
                             PackedTokens(np.arange(20), vocab_size=20, eos_token_id=EOS),
                             VALIDATION, params, {"variant_options": None})  # fmt: skip

    metrics, finals = evaluate(params)
    assert len(recorder.evaluated) == 3 and spans == [(f"model:{folders[2]}", (2, 3))]
    again_metrics, again_finals = evaluate(params)
    assert len(recorder.evaluated) == 3 and len(spans) == 1  # nothing loaded or evaluated
    pd.testing.assert_frame_equal(again_metrics, metrics)
    assert again_finals == finals
    assert finals["pb_B2_C8_natural_s0"]["span_scores"] == {"copy": {2: 0.5, 3: 0.5}}
    # The run trained on: only its new checkpoint, and the span probes on the new final one.
    folders[3] = tmp_path / "step_3"
    folders[3].mkdir()
    (folders[3] / "model.safetensors").write_bytes(b"w3")
    recorder.checkpoints["real"].append((3, folders[3], 48.0))
    evaluate(params)
    assert [e[0] for e in recorder.evaluated[3:]] == [f"model:{folders[2]}", f"model:{folders[3]}"]
    assert spans[1:] == [(f"model:{folders[3]}", (2, 3))]
    # Other options: every checkpoint again.
    evaluate({**params, "n_probes": 7})
    assert len(recorder.evaluated) == 5 + 4


@pytest.mark.parametrize(
    ("snippet_length", "options", "expected"),
    [(None, {"span_length": [4, 7]}, 6), (None, {"span_length": (4, 8)}, 6),
     (None, {"span_length": 5}, 5), (3, {"span_length": 5}, 3), (None, {}, None), (2, {}, 2)],
)  # fmt: skip
def test_evaluate_runs_snippet_length(recorder: Recorder, snippet_length: int | None,
                                      options: dict, expected: int | None) -> None:  # fmt: skip
    manifest = pd.DataFrame([_run("pb", 2, 4, "natural", 0, run_dir="dirC")])
    params = {} if snippet_length is None else {"snippet_length": snippet_length}
    training = {"variant_options": {"bi_induct_snippets": options} if options else {"x": {}}}
    evaluate_runs(manifest, manifest, FakeTokenizer(),
                  PackedTokens(np.arange(20), vocab_size=20, eos_token_id=EOS), VALIDATION,
                  params, training)  # fmt: skip
    assert recorder.eval_sets[0]["params"]["snippet_length"] == expected
    assert recorder.evaluated[0][2]["snippet_length"] == expected


def test_evaluate_runs_without_metrics_keeps_the_columns(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nodes, "checkpoint_summary", lambda result: {})
    manifest = pd.DataFrame([_run("pb", 2, 4, "natural", 0, run_dir="dirC")])
    train = PackedTokens(np.arange(20), vocab_size=20, eos_token_id=EOS)
    metrics, finals = evaluate_runs(manifest, manifest, FakeTokenizer(), train, VALIDATION, {}, {})
    assert metrics.empty and list(metrics.columns) == CHECKPOINT_COLUMNS
    assert list(finals) == ["pb_B2_C4_natural_s0"]


def test_evaluate_runs_errors(recorder: Recorder) -> None:
    train = PackedTokens(np.arange(20), vocab_size=20, eos_token_id=EOS)
    manifest = pd.DataFrame([_run("pb", 2, 4, "natural", 0, run_dir="empty")])
    with pytest.raises(ValueError) as error:
        evaluate_runs(manifest.iloc[:0], manifest, FakeTokenizer(), train, VALIDATION, {}, {})
    assert str(error.value) == "bi_induct: the sweep has no runs"
    with pytest.raises(ValueError) as error:
        evaluate_runs(manifest, manifest, FakeTokenizer(), train, VALIDATION, {}, {})
    assert str(error.value) == "run pb_B2_C4_natural_s0: no checkpoints under empty"


# --------------------------------------------------------------------------- results table


def _fake_results_table(calls: list) -> Any:
    def results_table(finals: dict, compute: pd.DataFrame, options: dict) -> pd.DataFrame:
        calls.append((finals, compute, options))
        return pd.DataFrame({"variant": ["b", "a", "b", "c"],
                             "estimable": [False, False, False, True]})  # fmt: skip

    return results_table


def test_build_results_table_options_and_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list = []
    monkeypatch.setattr(nodes, "results_table", _fake_results_table(calls))
    finals, compute = {"r": {}}, pd.DataFrame({"run_name": ["r"]})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        table = build_results_table(finals, compute, {})
        build_results_table(finals, compute, {"results": {"n_bootstrap": 5, "shots": [2]},
                                              "shots": [1], "ablation_modes": ["zero"]})  # fmt: skip
    assert calls[0][0] is finals and calls[0][1] is compute
    assert calls[0][2] == {"shots": (1, 10), "ablation_modes": ("zero", "pattern_preserving")}
    assert calls[1][2] == {"n_bootstrap": 5, "shots": [1], "ablation_modes": ["zero"]}
    assert table["variant"].tolist() == ["b", "a", "b", "c"]
    message = "bi_induct: 3 ablation rows not estimable (no induction heads formed in ['a', 'b'])"
    assert _messages(caplog) == [(logging.WARNING, message)] * 2


def test_build_results_table_warns_not_when_all_estimable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    table = pd.DataFrame({"variant": ["a"], "estimable": [True]})
    monkeypatch.setattr(nodes, "results_table", lambda *args: table)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert build_results_table({}, pd.DataFrame(), {}) is table
    assert _messages(caplog) == []


def _final(losses: list[float], probes: list[float]) -> dict:
    return {"items": {"loss": np.array(losses), "icl": np.array([-0.1, -0.3, -0.2, -0.4]),
                      "probe_1shot": np.array(probes), "probe_10shot": np.array(probes)},
            "induction_best": np.array([0.9, 0.8, 0.7, 0.6]),
            "anti_induction_best": np.array([0.1, 0.2, 0.1, 0.2]), "ablation": {},
            "ablation_base": {}}  # fmt: skip


def test_build_results_table_with_the_real_table() -> None:
    finals = {"p_B2_C8_natural_s0": _final([1.0, 2.0, 1.5, 1.5], [1.0, 0.0, 1.0, 1.0]),
              "p_B2_C8_snip_s0": _final([1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0])}  # fmt: skip
    compute = pd.DataFrame({"run_name": list(finals), "preset": ["p", "p"],
                            "variant": ["natural", "snip"], "seed": [0, 0],
                            "tokens_seen": [48, 48], "flops": [1e6, 1e6]})  # fmt: skip
    table = build_results_table(finals, compute, {"results": {"n_bootstrap": 40}, "shots": [1],
                                                  "ablation_modes": []})  # fmt: skip
    assert list(table.columns) == RESULT_COLUMNS
    assert table["metric"].tolist() == ["probe_accuracy_1shot", "icl_score", "perplexity",
                                        "induction_score", "anti_induction_score"] * 2  # fmt: skip
    rows = table.set_index(["variant", "metric"])
    perplexity = rows.loc[("natural", "perplexity")]
    assert perplexity["value"] == pytest.approx(math.exp(1.5))
    assert perplexity["ci_low"] <= perplexity["value"] <= perplexity["ci_high"]
    assert rows.loc[("snip", "perplexity"), "diff_vs_natural"] == pytest.approx(
        math.e - math.exp(1.5)
    )
    assert rows.loc[("snip", "probe_accuracy_1shot"), "diff_vs_natural"] == pytest.approx(0.25)
    assert rows["estimable"].all() and rows["tokens_seen"].eq(48.0).all()


# -------------------------------------------------------------------------------- figures


def test_figure_nodes_hand_labelled_runs_and_the_baseline_to_the_science(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[Any, ...]] = []

    def signatures(scores: pd.DataFrame, runs: pd.DataFrame) -> str:
        seen.append(("signatures", scores, runs))
        return "signatures figure"

    def ablation(metrics: pd.DataFrame) -> str:
        seen.append(("ablation", metrics))
        return "ablation figure"

    def gap(metrics: pd.DataFrame, baseline: str) -> str:
        seen.append(("gap", metrics, baseline))
        return "gap figure"

    for name, fake in (("plot_signatures", signatures), ("plot_ablation_over_training", ablation),
                       ("plot_perplexity_gap", gap)):  # fmt: skip
        monkeypatch.setattr(nodes.bi_induct_plots, name, fake)
    scores, metrics = pd.DataFrame({"x": [1]}), pd.DataFrame({"y": [2]})
    manifest = pd.DataFrame([_run("p", 2, 8, "natural", 0), _run("p", 2, 8, "snip", 1)])
    assert plot_signatures(scores, manifest) == "signatures figure"
    ((_, got_scores, runs),) = seen
    assert got_scores is scores and list(runs["variant"]) == ["natural", "snip"]
    assert "variant" not in manifest.columns
    assert plot_ablation_over_training(metrics) == "ablation figure"
    assert seen[1][0] == "ablation" and seen[1][1] is metrics
    seen.clear()
    for params in ({}, {"results": {}}, {"results": {"baseline_variant": "snip"}}):
        assert plot_perplexity_gap(metrics, params) == "gap figure"
    assert [call[2] for call in seen] == ["natural", "natural", "snip"]
    assert all(call[1] is metrics for call in seen)
    with pytest.raises(ValueError, match="does not follow p_B2_C8_<label>_s0"):
        plot_signatures(scores, manifest.assign(run_name="p_B2_C8_x"))


# ------------------------------------------------------------------------------------ MLflow


class FakeMlflow(types.ModuleType):
    """Records ``start_run`` / ``end_run`` / ``log_metrics``; ``bad`` run ids fail to start."""

    def __init__(self, active: bool = False, fail_log: bool = False) -> None:
        super().__init__("mlflow")
        self.active = active
        self.fail_log = fail_log
        self.calls: list[tuple] = []

    def active_run(self) -> object | None:
        return object() if self.active else None

    def start_run(self, **kwargs: Any) -> contextlib.AbstractContextManager:
        self.calls.append(("start_run", kwargs))
        if kwargs.get("run_id") == "bad":
            raise RuntimeError("no run bad")

        @contextlib.contextmanager
        def run() -> Iterator[None]:
            yield
            self.calls.append(("exit", kwargs.get("run_id")))

        return run()

    def end_run(self) -> None:
        self.calls.append(("end_run",))

    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        if self.fail_log:
            raise RuntimeError("store down")
        self.calls.append(("log_metrics", dict(metrics), step))


@pytest.fixture()
def fake_mlflow(monkeypatch: pytest.MonkeyPatch) -> FakeMlflow:
    fake = FakeMlflow()
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    return fake


def _results() -> pd.DataFrame:
    return pd.DataFrame({"preset": ["p", "p", "p"], "variant": ["natural", "snip", "snip"],
                         "metric": ["perplexity", "perplexity", "icl_score"],
                         "value": [3.0, 2.5, math.inf], "diff_vs_natural": [math.nan, -0.5, 0.25]})  # fmt: skip


def _tidy() -> pd.DataFrame:
    rows = [("r0", 0, "perplexity", 9.0), ("r0", 0, "icl_score", math.nan), ("r0", 4, "perplexity", 3),
            ("r1", 4, "perplexity", 2.5), ("r2", 4, "perplexity", 1.0), ("r3", 2, "icl_score", -1.0)]  # fmt: skip
    return pd.DataFrame(rows, columns=["run_name", "step", "metric", "value"])


def test_log_bi_induct_to_mlflow_results_and_nested_runs(
    fake_mlflow: FakeMlflow, caplog: pytest.LogCaptureFixture
) -> None:
    manifest = pd.DataFrame({"run_name": ["r0", "r1", "r2", "r3", "r4"],
                             "mlflow_run_id": ["id0", "bad", None, "", "id4"]})  # fmt: skip
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        log_bi_induct_to_mlflow(_results(), _tidy(), manifest)
    assert fake_mlflow.calls == [
        ("start_run", {"run_name": "bi_induct"}),
        ("log_metrics", {"bi_induct/p/natural/perplexity": 3.0,
                         "bi_induct/p/snip/perplexity": 2.5,
                         "bi_induct/p/snip/perplexity/diff_vs_natural": -0.5,
                         "bi_induct/p/snip/icl_score/diff_vs_natural": 0.25}, None),
        ("end_run",),
        ("start_run", {"run_id": "id0", "nested": True}),
        ("log_metrics", {"bi_induct/perplexity": 9.0}, 0),
        ("log_metrics", {"bi_induct/perplexity": 3.0}, 4),
        ("exit", "id0"),
        ("start_run", {"run_id": "bad", "nested": True}),
        ("start_run", {"run_id": "id4", "nested": True}),
        ("exit", "id4"),
    ]  # fmt: skip
    assert all(type(call[2]) is int for call in fake_mlflow.calls[4:6])
    assert _messages(caplog) == [(logging.WARNING, "run r1: MLflow logging skipped (no run bad)")]


def test_log_bi_induct_to_mlflow_inside_an_active_run(fake_mlflow: FakeMlflow) -> None:
    fake_mlflow.active = True
    nan_table = _results().assign(value=math.nan, diff_vs_natural=math.inf)
    log_bi_induct_to_mlflow(nan_table, _tidy(), pd.DataFrame({"run_name": ["r0"]}))
    assert fake_mlflow.calls == []  # nothing finite, no run of its own, no run ids


def test_log_bi_induct_to_mlflow_ends_its_run_on_error(fake_mlflow: FakeMlflow) -> None:
    fake_mlflow.fail_log = True
    with pytest.raises(RuntimeError, match="store down"):
        log_bi_induct_to_mlflow(_results(), _tidy(), pd.DataFrame({"run_name": ["r0"]}))
    assert fake_mlflow.calls == [("start_run", {"run_name": "bi_induct"}), ("end_run",)]


def test_lm_eval_metric_names() -> None:
    assert _lm_eval_metric("arc_easy", "acc", "none") == "lm_eval/arc_easy/acc"
    assert _lm_eval_metric("mmlu::anatomy", "acc", "strict") == "lm_eval/mmlu/anatomy/acc_strict"


def test_log_in_batches_of_500() -> None:
    fake = FakeMlflow()
    metrics = {f"m{i}": float(i) for i in range(2 * MLFLOW_BATCH + 1)}
    _log_in_batches(fake, metrics, step=3)
    _log_in_batches(fake, {"a": 1.0})
    assert MLFLOW_BATCH == 500
    assert [(len(c[1]), c[2]) for c in fake.calls] == [(500, 3), (500, 3), (1, 3), (1, None)]
    assert list(fake.calls[1][1]) == [f"m{i}" for i in range(500, 1000)]
    assert fake.calls[2][1] == {"m1000": 1000.0}


def _lm_scores() -> pd.DataFrame:
    rows = []
    for run, seed, step, value in (("r0", 0, 4, 0.25), ("r1", 1, 6, 0.75), ("r2", 0, 4, 0.5)):
        variant = "snip" if run == "r2" else "natural"
        for task, metric, filter_name, offset in (("mc", "acc", "none", 0.0),
                                                  ("g::t", "acc", "strict", 0.1),
                                                  ("ll", "ppl", "none", math.nan)):  # fmt: skip
            rows.append({"run_name": run, "preset": "p", "variant": variant, "seed": seed,
                         "step": step, "tokens_seen": 48.0 * step, "task": task, "kind": "task",
                         "metric": metric, "filter": filter_name, "value": value + offset,
                         "stderr": math.nan, "n_samples": 4.0, "num_fewshot": 0.0})  # fmt: skip
    return pd.DataFrame(rows, columns=LM_EVAL_COLUMNS)


def test_log_lm_eval_to_mlflow_means_and_nested_runs(
    fake_mlflow: FakeMlflow, caplog: pytest.LogCaptureFixture
) -> None:
    manifest = pd.DataFrame({"run_name": ["r0", "r1", "r2", "r3"],
                             "mlflow_run_id": ["id0", math.nan, "bad", "id3"]})  # fmt: skip
    single = _lm_scores().iloc[[0]].assign(run_name="r3", variant="anti", step=6, value=0.9)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        log_lm_eval_to_mlflow(pd.concat([_lm_scores(), single], ignore_index=True), manifest)
    means = fake_mlflow.calls[1][1]
    assert means == pytest.approx({"bi_induct/p/anti/lm_eval/mc/acc": 0.9,
                                   "bi_induct/p/natural/lm_eval/g/t/acc_strict": 0.6,
                                   "bi_induct/p/natural/lm_eval/mc/acc": 0.5,
                                   "bi_induct/p/snip/lm_eval/g/t/acc_strict": 0.6,
                                   "bi_induct/p/snip/lm_eval/mc/acc": 0.5})  # fmt: skip
    assert fake_mlflow.calls == [
        ("start_run", {"run_name": "bi_induct"}),
        ("log_metrics", means, None),
        ("end_run",),
        ("start_run", {"run_id": "id0", "nested": True}),
        ("log_metrics", {"bi_induct/lm_eval/mc/acc": 0.25,
                         "bi_induct/lm_eval/g/t/acc_strict": 0.25 + 0.1}, 4),
        ("exit", "id0"),
        ("start_run", {"run_id": "bad", "nested": True}),
        ("start_run", {"run_id": "id3", "nested": True}),
        ("log_metrics", {"bi_induct/lm_eval/mc/acc": 0.9}, 6),
        ("exit", "id3"),
    ]  # fmt: skip
    assert type(fake_mlflow.calls[4][2]) is int
    assert _messages(caplog) == [(logging.WARNING, "run r2: MLflow logging skipped (no run bad)")]


def test_log_lm_eval_to_mlflow_active_run_no_ids_and_empty(fake_mlflow: FakeMlflow) -> None:
    fake_mlflow.active = True
    log_lm_eval_to_mlflow(
        _lm_scores().query("run_name == 'r1'"), pd.DataFrame({"run_name": ["r1"]})
    )
    assert fake_mlflow.calls == [
        ("log_metrics", {"bi_induct/p/natural/lm_eval/mc/acc": 0.75,
                         "bi_induct/p/natural/lm_eval/g/t/acc_strict": 0.75 + 0.1}, None),
    ]  # fmt: skip
    fake_mlflow.active, fake_mlflow.fail_log = False, True
    log_lm_eval_to_mlflow(_lm_scores().assign(value=math.nan), pd.DataFrame({"run_name": ["r1"]}))
    with pytest.raises(RuntimeError, match="store down"):
        log_lm_eval_to_mlflow(_lm_scores(), pd.DataFrame({"run_name": ["r1"]}))
    assert fake_mlflow.calls[1:] == [("start_run", {"run_name": "bi_induct"}), ("end_run",)]


# ------------------------------------------------------------------------------ lm-eval node


def test_evaluate_lm_eval_disabled_by_default(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manifest = pd.DataFrame([_run("p", 2, 8, "natural", 0, run_dir=str(tmp_path / "missing"))])
    with caplog.at_level(logging.INFO, logger=LOGGER):
        table = evaluate_lm_eval(manifest, manifest, None, {})
    assert table.empty and list(table.columns) == LM_EVAL_COLUMNS
    assert _messages(caplog) == [
        (logging.INFO, "bi_induct: lm-eval benchmarks skipped (bi_induct.lm_eval.enabled is false)")
    ]


def test_evaluate_lm_eval_final_checkpoint_of_each_run(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls = []

    def evaluate_checkpoint_tasks(path: str, tokenizer: Any, params: dict) -> pd.DataFrame:
        calls.append((path, tokenizer, params))
        scores = {"task": ["mc", "ll"], "kind": ["task", "task"], "metric": ["acc", "ppl"],
                  "filter": ["none", "none"], "value": [len(calls) / 4, 9.0],
                  "stderr": [0.1, math.nan], "n_samples": [4.0, 4.0], "num_fewshot": [0.0, 0.0],
                  "extra": ["x", "y"]}  # fmt: skip
        return pd.DataFrame(scores)[["extra", *reversed(SCORE_COLUMNS)]]

    monkeypatch.setattr(lm_eval_adapter, "evaluate_checkpoint_tasks", evaluate_checkpoint_tasks)
    manifest = _sweep_manifest().iloc[:2]
    tokenizer, params = FakeTokenizer(), {"enabled": True, "tasks": ["mc", "ll"]}
    with caplog.at_level(logging.INFO, logger=LOGGER):
        table = evaluate_lm_eval(manifest, manifest, tokenizer, params)
    assert calls == [("dirA/step_4", tokenizer, params), ("dirB/step_3", tokenizer, params)]
    rows = []
    for (run, variant, seed, step), value in zip(
        (("pa_B2_C8_natural_s0", "natural", 0, 4), ("pa_B2_C8_snip_s1", "snip", 1, 3)),
        (0.25, 0.5), strict=True,
    ):  # fmt: skip
        rows.append([run, "pa", variant, seed, step, 16.0 * step, "mc", "task", "acc", "none",
                     value, 0.1, 4.0, 0.0])  # fmt: skip
        rows.append([run, "pa", variant, seed, step, 16.0 * step, "ll", "task", "ppl", "none",
                     9.0, math.nan, 4.0, 0.0])  # fmt: skip
    pd.testing.assert_frame_equal(table, pd.DataFrame(rows, columns=LM_EVAL_COLUMNS))
    assert _messages(caplog) == [
        (logging.INFO, "bi_induct: lm-eval ['mc', 'll'] on pa_B2_C8_natural_s0 (step 4)"),
        (logging.INFO, "bi_induct: lm-eval ['mc', 'll'] on pa_B2_C8_snip_s1 (step 3)"),
    ]


def test_evaluate_lm_eval_errors(recorder: Recorder) -> None:
    manifest = pd.DataFrame([_run("p", 2, 8, "natural", 0, run_dir="empty")])
    with pytest.raises(ValueError) as error:
        evaluate_lm_eval(manifest.iloc[:0], manifest, None, {"enabled": True})
    assert str(error.value) == "bi_induct: the sweep has no runs"
    with pytest.raises(ValueError) as error:
        evaluate_lm_eval(manifest, manifest, None, {"enabled": True, "tasks": []})
    assert str(error.value) == "run p_B2_C8_natural_s0: no checkpoints under empty"


def test_claims_node_writes_json_safe_claims_and_the_table() -> None:
    """One seed per arm: no interval anywhere, so every paired claim is undecided and its CI is
    None in the JSON (never NaN, which JSON cannot hold)."""
    import json

    from ih_kedro.pipelines.bi_induct.claims_nodes import decide_bi_induct_claims

    runs = pd.DataFrame({
        "variant": ["minimally_enriched", "induction", "anti_induction"], "seed": 0,
        "emergence_step": [900.0, 700.0, 1000.0], "emergence_censored": False,
        "copy_accuracy": [0.6, 0.6, 0.5], "copy_gain": [0.5, 0.5, 0.4],
        "anti_induction_score": [0.02, 0.02, 0.03], "heads_formed": True,
        "loss": [4.0, 4.1, 4.2], "ablation_excess_copy_zero": [0.5, 0.4, 0.3],
    })  # fmt: skip
    claims, table = decide_bi_induct_claims(runs, {"claims": {}})
    text = json.dumps(claims, allow_nan=False)  # raises on a NaN
    assert json.loads(text)["claims"][0]["difference"]["ci_low"] is None
    assert [c["verdict"] for c in claims["claims"]] == ["undecided"] * 5
    assert claims["claims"][0]["difference"]["differences"] == [-200.0]
    assert list(table["arm"]) == ["induction", "anti_induction"] * 2 + ["anti_induction"] + [
        "induction", "anti_induction"] * 2  # fmt: skip


def test_claims_name_the_base_arm_by_its_dose() -> None:
    """claims.json says what the base is: one copy per 16 tokens -> "natural, minimally enriched
    (one copy per 16 tokens)"; an arm's own options override the shared ones."""
    from ih_kedro.pipelines.bi_induct.claims_nodes import base_arm_description

    training = {
        "variant_options": {"fixed_rate_copies": {"tokens_per_event": 16, "span_min": 4}},
        "data_variants": [{"variant": "fixed_rate_copies", "label": "minimally_enriched"},
                          {"variant": "fixed_rate_copies", "label": "lighter",
                           "options": {"tokens_per_event": 32}}, "natural"],
    }  # fmt: skip
    base = base_arm_description({}, training)
    assert base == {"arm": "minimally_enriched", "variant": "fixed_rate_copies",
                    "options": {"tokens_per_event": 16, "span_min": 4},
                    "label": "natural, minimally enriched (one copy per 16 tokens)"}  # fmt: skip
    lighter = base_arm_description({"claims": {"base_arm": "lighter"}}, training)
    assert lighter["label"] == "natural, minimally enriched (one copy per 32 tokens)"
    assert base_arm_description({"claims": {"base_arm": "natural"}}, training)["label"] == "natural"
    with pytest.raises(ValueError, match="'nope' is not a label"):
        base_arm_description({"claims": {"base_arm": "nope"}}, training)
