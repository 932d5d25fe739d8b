"""The pareto pipeline's nodes checked through exact values (mutation-testing kills).

Parameter reading and validation messages, the grid's run knobs, the cell table, the frontier
tables and summary (the science fits are replaced by recording stubs so the wiring is checked
exactly), the figures through the data handed to the plotting functions, and what goes to
MLflow (a recording stand-in for the ``mlflow`` module). Every input is tiny and hand-built
(shared ones in ``tests/science/statistics/pareto_tables.py``); expected values are written out
or recomputed independently.
"""

from __future__ import annotations

import math
import re
import sys
import types
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from ih_kedro.pipelines.pareto import nodes
from ih_kedro.science.data.packed import COMPACT_VOCABULARY_KEY, PackedTokens
from ih_kedro.science.data.variants.bigram_model import BigramModel, estimate_bigram_model
from ih_kedro.science.statistics import pareto_bootstrap as pb
from ih_kedro.science.statistics import pareto_cells
from ih_kedro.science.statistics import pareto_frontier as pf
from ih_kedro.science.statistics.plots import pareto as pareto_plots
from tests.science.statistics.pareto_tables import (
    frontier_cells,
    measured,
    saved_model,
    status_of,
    token_stream,
    training_grid,
    variant_cell,
)

TABLE_COLUMNS = ["kind", "name", "frequency", "reliability", "estimate", "se", "ci_low",
                 "ci_high", "n", "budget_factor"]  # fmt: skip


def _assert_same_model(got: BigramModel, expected: BigramModel) -> None:
    np.testing.assert_array_equal(got.transition, expected.transition)
    np.testing.assert_array_equal(got.initial, expected.initial)
    np.testing.assert_array_equal(got.token_ids, expected.token_ids)
    np.testing.assert_array_equal(got.counts, expected.counts)
    assert got.smoothing == expected.smoothing
    assert got.other_bucket is expected.other_bucket
    assert got.vocab_size == expected.vocab_size


# --------------------------------------------------------------------------------------------
# build_bigram_model
# --------------------------------------------------------------------------------------------
def _compact_stream(size: int, other: int, n_tokens: int = 400) -> PackedTokens:
    """A compact stream whose pooled ``other`` id is its most frequent token (EOS = size + 1)."""
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, size + 2, n_tokens)
    tokens[rng.random(n_tokens) < 0.3] = other
    tokens = tokens.astype(np.uint16)
    return PackedTokens(
        tokens=tokens, vocab_size=size + 2, eos_token_id=size + 1,
        meta={COMPACT_VOCABULARY_KEY: {"size": size, "other_token_id": other}},
    )  # fmt: skip


def test_bigram_model_vocabulary_size_check_message_and_boundary() -> None:
    stream = _compact_stream(9, 9)
    expected = (
        "pareto.vocabulary.size: 9 tokens cannot hold the bigram model's 10 states "
        "(semi_natural.n_types + the other bucket); set it >= 10"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        nodes.build_bigram_model(stream, {"n_types": 9, "other_bucket": True})
    # Without the other bucket 9 types fit exactly (size == n_states is allowed).
    model = nodes.build_bigram_model(stream, {"n_types": 9, "other_bucket": False})
    assert model.n_states == 9 and model.other_bucket is False
    # Defaults: 255 types + the other bucket = 256 states.
    with pytest.raises(
        ValueError, match=re.escape("255 tokens cannot hold the bigram model's 256")
    ):
        nodes.build_bigram_model(_compact_stream(255, 255), {})
    with pytest.raises(
        ValueError, match=re.escape("254 tokens cannot hold the bigram model's 255")
    ):
        nodes.build_bigram_model(_compact_stream(254, 254), {"other_bucket": False})


def test_bigram_model_passes_every_parameter_to_the_estimator() -> None:
    stream = _compact_stream(20, 7, n_tokens=600)
    model = nodes.build_bigram_model(
        stream, {"n_types": 10, "smoothing": 0.5, "other_bucket": True}
    )
    expected = estimate_bigram_model(
        np.asarray(stream.tokens), 22, 10, 0.5, eos_token_id=21, other_bucket=True,
        pooled_token_ids=(7,),
    )  # fmt: skip
    _assert_same_model(model, expected)
    # The pooled id 7 (the most frequent) is no type of its own; EOS (21) is no state.
    assert np.bincount(stream.tokens).argmax() == 7
    assert model.n_states == 11 and 7 not in model.token_ids[:10] and 21 not in model.token_ids
    no_bucket = nodes.build_bigram_model(
        stream, {"n_types": 12, "smoothing": 0.0, "other_bucket": False}
    )
    _assert_same_model(
        no_bucket,
        estimate_bigram_model(
            np.asarray(stream.tokens), 22, 12, 0.0, eos_token_id=21, other_bucket=False,
            pooled_token_ids=(7,),
        ),
    )  # fmt: skip


def test_bigram_model_defaults_on_a_plain_stream() -> None:
    rng = np.random.default_rng(2)
    tokens = np.concatenate([np.arange(1, 300), rng.integers(1, 300, 2000)]).astype(np.uint16)
    stream = PackedTokens(tokens=tokens, vocab_size=300, eos_token_id=0)  # not compact
    model = nodes.build_bigram_model(stream, {})
    expected = estimate_bigram_model(tokens, 300, 255, 0.01, eos_token_id=0, other_bucket=True)
    _assert_same_model(model, expected)
    assert model.n_states == 256 and model.smoothing == 0.01


# --------------------------------------------------------------------------------------------
# semi_natural_variant_data / _pool_sizes
# --------------------------------------------------------------------------------------------
def test_pool_sizes_defaults_and_sources() -> None:
    assert nodes._pool_sizes({}, {}) == {
        "training.online_emergence.token_pool_size": 500,
        "telemetry.probe.top_k": 500,
    }
    assert nodes._pool_sizes({"online_emergence": None}, {"probe": None}) == {
        "training.online_emergence.token_pool_size": 500,
        "telemetry.probe.top_k": 500,
    }
    assert nodes._pool_sizes(
        {"online_emergence": {"token_pool_size": "7"}},
        {"probe": {"source": "frequent", "top_k": "9"}},
    ) == {"training.online_emergence.token_pool_size": 7, "telemetry.probe.top_k": 9}
    assert nodes._pool_sizes({}, {"probe": {"source": "uniform", "top_k": 3}}) == {
        "training.online_emergence.token_pool_size": 500,
        "telemetry.probe.source": -1,
    }


def test_variant_data_checks_pools_against_the_model_types(tmp_path: Path) -> None:
    bucket = saved_model(tmp_path, 20, other_bucket=True)  # 19 types
    plain = saved_model(tmp_path, 20, other_bucket=False)  # 20 types
    ok = {"online_emergence": {"token_pool_size": 19}}, {"probe": {"top_k": 19}}
    assert nodes.semi_natural_variant_data(bucket, *ok) == {
        "model_path": str((tmp_path / "m20_True.npz").resolve()),
        "model_checksum": bucket.checksum(),
    }
    assert nodes.semi_natural_variant_data(
        plain, {"online_emergence": {"token_pool_size": 20}}, {"probe": {"top_k": 20}}
    ) == {"model_path": str((tmp_path / "m20_False.npz").resolve()),
          "model_checksum": plain.checksum()}  # fmt: skip
    pool = (
        "pareto.training.online_emergence.token_pool_size: 20 probe tokens exceed the bigram "
        "model's 19 types (probes would use tokens the model never trains on); set it <= "
        "pareto.semi_natural.n_types"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(pool)}$"):
        nodes.semi_natural_variant_data(bucket, {"online_emergence": {"token_pool_size": 20}}, {})
    top_k = (
        "pareto.telemetry.probe.top_k: 21 probe tokens exceed the bigram model's 20 types "
        "(probes would use tokens the model never trains on); set it <= "
        "pareto.semi_natural.n_types"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(top_k)}$"):
        nodes.semi_natural_variant_data(
            plain, {"online_emergence": {"token_pool_size": 20}}, {"probe": {"top_k": 21}}
        )
    uniform = (
        "pareto.telemetry.probe.source: probes drawn uniformly from the vocabulary use tokens "
        "the semi-natural model never emits; use source: frequent"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(uniform)}$"):
        nodes.semi_natural_variant_data(
            bucket, {"online_emergence": {"token_pool_size": 5}}, {"probe": {"source": "uniform"}}
        )
    # The defaults (500 each) exceed a 20-state model.
    with pytest.raises(ValueError, match=re.escape("token_pool_size: 500 probe tokens exceed")):
        nodes.semi_natural_variant_data(plain, {}, {})


# --------------------------------------------------------------------------------------------
# _run_knobs
# --------------------------------------------------------------------------------------------
def test_run_knobs_rows_labels_and_budgets() -> None:
    from ih_kedro.science.training.grid import expand_grid

    training = training_grid(
        data_variants=[variant_cell("a_C16_b_sx", 0.25, 0.75), variant_cell("fB", 1, 0)],
        seeds=[3], max_steps=100, max_tokens=3000,  # ceil(3000 / 64) = 47 steps
    )  # fmt: skip
    knobs = nodes._run_knobs(training)
    expected = pd.DataFrame({
        "run_name": ["p_B4_C16_a_C16_b_sx_s3", "p_B4_C16_fB_s3"],
        "label": ["a_C16_b_sx", "fB"], "frequency": [0.25, 1.0], "reliability": [0.75, 0.0],
        "budget_steps": [47, 47], "budget_tokens": [47 * 64, 47 * 64],
    })  # fmt: skip
    pd.testing.assert_frame_equal(knobs.drop(columns="config"), expected)
    assert list(knobs["config"]) == expand_grid(training)
    assert isinstance(knobs["frequency"].iloc[1], float)


def test_run_knobs_reject_other_variants() -> None:
    expected = (
        "pareto.training.data_variants: every cell must use the 'semi_natural' variant, "
        "run p_B4_C16_natural_s0 uses 'natural'"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        nodes._run_knobs(training_grid(data_variants=["natural"], seeds=[0]))


# --------------------------------------------------------------------------------------------
# build_cell_table
# --------------------------------------------------------------------------------------------
RUNS = ["p_B4_C16_fA_s0", "p_B4_C16_fA_s1", "p_B4_C16_fB_s0", "p_B4_C16_fB_s1"]


def _manifest() -> pd.DataFrame:
    return pd.DataFrame({
        "run_name": RUNS[::-1] + ["other_run"],
        "steps_trained": [10, 9, 8, 7, 1],
        "tokens_seen": [640, 576, 512, 448, 64],
        "stop_reason": ["budget", "early_stop", "budget", "early_stop", "x"],
        "online_emergence_step": [np.nan, 9.0, np.nan, 7.0, 1.0],
        "preset": ["p", "p", "p", "p", "q"],
        "data_variant": ["semi_natural"] * 5,
    })  # fmt: skip


def _score_samples(metric: str = "m2") -> dict[str, dict[str, np.ndarray]]:
    """Checkpoints 0, 5, 10 of every run (budget 10 steps); layer 1's head carries the curve
    (0, 0.2 * (i + 1), 0.6) of run i, layer 0 a constant 0.9 that min_layer 1 leaves out."""
    samples = {}
    for i, run in enumerate(RUNS):
        values = np.zeros((3, 1, 2, 1))  # (K, n, layers, heads)
        values[:, 0, 0, 0] = 0.9
        values[:, 0, 1, 0] = [0.0, 0.2 * (i + 1), 0.6]
        samples[run] = {"steps": np.array([0, 5, 10]), metric: values}
    return samples


TELEMETRY = {"emergence": {"metrics": [{"metric": "m2", "min_layer": 1}]}}


def _emergence(metric: str = "m2", method: str = "bayes") -> pd.DataFrame:
    def row(run: str, metric: str, method: str, status: str, step: float) -> dict[str, Any]:
        return {"run_name": run, "metric": metric, "method": method, "status": status,
                "step": step, "ci_low": step - 1, "ci_high": step + 2, "tokens": step * 64,
                "last_step": step + 5}  # fmt: skip

    return pd.DataFrame([
        row(RUNS[0], metric, "other", "censored", 900.0),  # wrong method, listed first
        row(RUNS[0], "other", method, "censored", 800.0),  # wrong metric, listed first
        row(RUNS[0], metric, method, "emerged", 5.0),
        row(RUNS[0], metric, method, "censored", 700.0),  # a duplicate: the first row counts
        row(RUNS[1], metric, method, "censored", 10.0),
        row(RUNS[2], metric, method, "left_censored", 1.0),
        row(RUNS[3], metric, method, "fit_failed", 3.0),
    ])  # fmt: skip


def _expected_cells(path: str, metric: str, method: str, n_batches: int) -> pd.DataFrame:
    knobs = {RUNS[0]: (0.5, 1.0), RUNS[1]: (0.5, 1.0), RUNS[2]: (0.0, 0.0), RUNS[3]: (0.0, 0.0)}
    rows = []
    est = {RUNS[0]: ("emerged", 1.0, 5.0), RUNS[1]: ("censored", 0.0, 10.0),
           RUNS[2]: ("left_censored", 1.0, 1.0), RUNS[3]: ("fit_failed", np.nan, 3.0)}  # fmt: skip
    done = {RUNS[0]: (7, 448, "early_stop", 7.0), RUNS[1]: (8, 512, "budget", np.nan),
            RUNS[2]: (9, 576, "early_stop", 9.0), RUNS[3]: (10, 640, "budget", np.nan)}  # fmt: skip
    for i, run in enumerate(RUNS):
        f, r = knobs[run]
        seed = i % 2
        stats = measured(path, f, r, seed, n_batches)
        status, formed, step = est[run]
        steps, tokens_seen, reason, online = done[run]
        rows.append({
            "run_name": run, "label": run.split("_")[3], "seed": seed, "frequency": f,
            "reliability": r, "realised_frequency": stats.frequency,
            "realised_frequency_se": stats.frequency_se,
            "realised_reliability": stats.reliability,
            "realised_reliability_se": stats.reliability_se, "status": status, "formed": formed,
            "step": step, "ci_low": step - 1, "ci_high": step + 2, "tokens": step * 64,
            "last_step": step + 5, "budget_steps": 10, "budget_tokens": 640,
            "steps_trained": steps, "tokens_seen": tokens_seen, "stop_reason": reason,
            "online_emergence_step": online, "preset": "p", "batch_size": 4,
            "context_length": 16, "metric": metric, "method": method,
        })  # fmt: skip
    return pd.DataFrame(rows)


def _recording_check(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    calls: list[tuple] = []
    real = pareto_cells.check_repetition

    def record(stats, frequency, reliability, tolerance, *, where=""):
        calls.append((stats.n_sequences, frequency, reliability, tolerance, where))
        return real(stats, frequency, reliability, tolerance, where=where)

    monkeypatch.setattr(pareto_cells, "check_repetition", record)
    return calls


def test_cell_table_rows_from_the_grid_manifest_and_emergence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = saved_model(tmp_path, 30, other_bucket=False)
    variant = model.variant_options()
    calls = _recording_check(monkeypatch)
    frontier = {"metric": "m2", "method": "bayes", "realised_batches": 2, "tolerance": 0.5}
    frontier["thresholds"] = [0.3, 0.5]
    table = nodes.build_cell_table(
        _manifest(), _emergence(), _score_samples(), token_stream(), variant, training_grid(),
        TELEMETRY, frontier,
    )  # fmt: skip
    expected = _expected_cells(model.path, "m2", "bayes", 2)
    columns = list(pareto_cells.CELL_COLUMNS)
    pd.testing.assert_frame_equal(table[columns], expected[columns])
    assert list(table.columns) == [*columns, "formation_score", "peak", "step_at_0.3",
                                   "formed_at_0.3", "step_at_0.5", "formed_at_0.5"]  # fmt: skip
    # Run i's curve (0, 0.2 (i + 1), 0.6) at steps 0, 5, 10: trapezoids
    # (2.5 * 0.2 (i + 1) + 2.5 * (0.2 (i + 1) + 0.6)) / 10 = 0.1 (i + 1) + 0.15.
    assert table["formation_score"].tolist() == pytest.approx([0.25, 0.35, 0.45, 0.55])
    assert table["peak"].tolist() == pytest.approx([0.6, 0.6, 0.6, 0.8])
    # 0.5 is crossed between steps 5 and 10 by runs 0 (0.2 -> 0.6) and 1 (0.4 -> 0.6), between
    # 0 and 5 by runs 2 (0 -> 0.6) and 3 (0 -> 0.8), on the straight line.
    assert table["step_at_0.5"].tolist() == pytest.approx([8.75, 5 + 5 * 0.1 / 0.2,
                                                           5 * 0.5 / 0.6, 5 * 0.5 / 0.8])  # fmt: skip
    assert table["formed_at_0.5"].tolist() == [True, True, True, True]
    assert calls == [
        (8, 0.5, 1.0, 0.5, f" (run {RUNS[0]})"), (8, 0.5, 1.0, 0.5, f" (run {RUNS[1]})"),
        (8, 0.0, 0.0, 0.5, f" (run {RUNS[2]})"), (8, 0.0, 0.0, 0.5, f" (run {RUNS[3]})"),
    ]  # fmt: skip


def test_cell_table_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = saved_model(tmp_path, 30, other_bucket=False)
    calls = _recording_check(monkeypatch)
    training = training_grid(data_variants=[variant_cell("fB", 0.0, 0.0)], seeds=[0])
    emergence = _emergence("prefix_matching", "threshold")
    emergence = emergence[emergence["run_name"] == RUNS[2]]
    samples = _score_samples("prefix_matching")
    table = nodes.build_cell_table(
        _manifest(), emergence, samples, token_stream(), model.variant_options(), training, {}, {}
    )
    assert calls == [(32, 0.0, 0.0, 0.03, f" (run {RUNS[2]})")]  # 8 batches of 4
    assert table[["run_name", "status", "formed", "metric", "method"]].to_dict("records") == [
        {"run_name": RUNS[2], "status": "left_censored", "formed": 1.0,
         "metric": "prefix_matching", "method": "threshold"},
    ]  # fmt: skip


def test_cell_table_error_messages(tmp_path: Path) -> None:
    model = saved_model(tmp_path, 30, other_bucket=False)
    variant = model.variant_options()
    empty = (
        "pareto.frontier.metric / method: the emergence table has no rows for 'm2' / "
        "'threshold'; it has ['m2', 'other'] / ['bayes', 'other']"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(empty)}$"):
        nodes.build_cell_table(
            _manifest(), _emergence(), _score_samples(), token_stream(), variant,
            training_grid(), TELEMETRY, {"metric": "m2"},
        )  # fmt: skip
    missing = (
        f"pareto: run {RUNS[1]} of the grid is missing from the sweep manifest or the emergence "
        "table (rerun training / telemetry)"
    )
    frontier = {"metric": "m2", "method": "bayes", "realised_batches": 1, "tolerance": 1.0}
    manifest = _manifest()
    with pytest.raises(ValueError, match=f"^{re.escape(missing)}$"):
        nodes.build_cell_table(
            manifest[manifest["run_name"] != RUNS[1]], _emergence(), _score_samples(),
            token_stream(), variant, training_grid(), TELEMETRY, frontier,
        )  # fmt: skip
    emergence = _emergence()
    with pytest.raises(ValueError, match=f"^{re.escape(missing)}$"):
        nodes.build_cell_table(
            manifest, emergence[emergence["run_name"] != RUNS[1]], _score_samples(),
            token_stream(), variant, training_grid(), TELEMETRY, frontier,
        )  # fmt: skip


# --------------------------------------------------------------------------------------------
# estimate_frontier (science fits replaced by recording stubs)
# --------------------------------------------------------------------------------------------
FIT = pf.FrontierFit(
    coef=np.array([1.0, 2.0, 3.0]), cov=np.diag([0.04, 0.09, 0.16]), method="firth", n_runs=5,
    n_formed=3, converged=False, level=0.9, separated=True,
)  # fmt: skip
GROWTH = pf.GrowthFit(alpha=0.5, beta=-0.25, alpha_ci=(0.1, 0.9), beta_ci=(-0.5, -0.1), n=3,
                      r_squared=0.75, status="ok", distance_range=(-3.5, 1.5))  # fmt: skip
DROPPED = {"one_outcome": 1, "fit_failed": 2, "not_converged": 3, "no_contour": 4}
BOOTSTRAP_CIS = {"intercept": [0.5, 1.5], "log_frequency": [1.5, 2.5],
                 "log_reliability": [2.5, 3.5], "ratio": [0.5, 0.8]}  # fmt: skip


def _stub_science(monkeypatch: pytest.MonkeyPatch, growth: pf.GrowthFit = GROWTH) -> dict:
    calls: dict[str, Any] = {}

    def fit_frontier(frequency, reliability, formed, *, method, level):
        calls["fit"] = (list(frequency), list(reliability), list(formed), method, level)
        return FIT

    def bootstrap_frontier(runs, grid, *, n_bootstrap, seed, unit, method, level):
        calls["contour"] = (runs.copy(), np.asarray(grid), n_bootstrap, seed, unit, method, level)
        # The real columns (pb.bootstrap_frontier), drop counts distinct per reason.
        contour = pd.DataFrame({"frequency": [0.25, 1.0], "reliability_50": [0.8, 0.4],
                                "band_low": [0.7, 0.3], "band_high": [0.9, 0.6],
                                "n_replicates": [11, 12], "n_bootstrap": n_bootstrap,
                                "level": level, "method": method, "unit": unit,
                                **{f"n_dropped_{k}": n for k, n in DROPPED.items()}})  # fmt: skip
        coefficients = pd.DataFrame({"name": [*pf.COEFFICIENTS, "ratio"],
                                     "ci_low": [0.5, 1.5, 2.5, 0.5],
                                     "ci_high": [1.5, 2.5, 3.5, 0.8],
                                     "n_replicates": [9, 9, 9, 8]})  # fmt: skip
        return pb.FrontierBootstrap(contour, coefficients, unit, dict(DROPPED))

    def fit_sstar_growth(distance, sstar, *, level):
        calls["growth"] = (list(distance), list(sstar), level)
        return growth

    def budget_shift(fit, growth_fit, grid, factors):
        calls["shift"] = (fit, growth_fit, np.asarray(grid), factors)
        rows = [{"budget_factor": k, "frequency": f, "shift": s, "shift_low": s - 1,
                 "shift_high": s + 1, "reliability_50": f / 2, "extrapolated": e}
                for k, s, e in zip(factors, (-2.0, math.nan), (True, False), strict=False)
                for f in (0.25, 1.0)]  # fmt: skip
        return pd.DataFrame(rows)

    for name, fn in (("fit_frontier", fit_frontier), ("fit_sstar_growth", fit_sstar_growth),
                     ("budget_shift", budget_shift)):  # fmt: skip
        monkeypatch.setattr(pf, name, fn)
    monkeypatch.setattr(pb, "bootstrap_frontier", bootstrap_frontier)
    return calls


def _distance(f: float, r: float) -> float:
    return (1.0 + 2.0 * math.log(f) + 3.0 * math.log(r)) / math.sqrt(13.0)


def test_estimate_frontier_tables_summary_and_science_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _stub_science(monkeypatch)
    params = {"level": 0.9, "fit_method": "mle", "n_grid": 3, "n_bootstrap": 7, "seed": 5,
              "bootstrap_unit": "cell", "budget_factors": [2, 0.5]}  # fmt: skip
    table, summary = nodes.estimate_frontier(frontier_cells(), params)

    f_runs, r_runs = [0.25, 0.25, 1.0, 1.0, 0.5], [0.5, 0.5, 0.5, 0.5, 0.25]
    assert calls["fit"] == (f_runs, r_runs, [1.0, 0.0, 1.0, 1.0, 0.0], "mle", 0.9)
    runs, grid, n_boot, seed, unit, method, level = calls["contour"]
    assert runs["run_name"].tolist() == ["a_s0", "a_s1", "b_s0", "b_s1", "c_s0"]
    assert runs["cell"].tolist() == ["a", "a", "b", "b", "c"]
    np.testing.assert_allclose(grid, [0.25, 0.5, 1.0])
    assert (n_boot, seed, unit, method, level) == (7, 5, "cell", "mle", 0.9)
    distance, sstar, growth_level = calls["growth"]
    np.testing.assert_allclose(distance, [_distance(0.25, 0.5), _distance(1.0, 0.5),
                                          _distance(1.0, 0.5)])  # fmt: skip
    assert sstar == [100.0, 50.0, 70.0] and growth_level == 0.9
    fit, growth, shift_grid, factors = calls["shift"]
    assert fit is FIT and growth is GROWTH and factors == (2.0, 0.5)
    np.testing.assert_allclose(shift_grid, [0.25, 0.5, 1.0])

    z = norm.ppf(0.95)
    se = [0.2, 0.3, 0.4]
    coef = [{"kind": "coefficient", "name": name, "estimate": b, "se": s,
             "ci_low": b - z * s, "ci_high": b + z * s}
            for name, b, s in zip(pf.COEFFICIENTS, [1.0, 2.0, 3.0], se, strict=True)]  # fmt: skip
    # b1 / b2 = 2 / 3 by the delta method: gradient (0, 1/b2, -b1/b2^2) on the diagonal cov.
    ratio_se = math.sqrt((1 / 3) ** 2 * 0.09 + (2 / 9) ** 2 * 0.16)
    ratio = {"estimate": 2 / 3, "ci_low": 2 / 3 - z * ratio_se, "ci_high": 2 / 3 + z * ratio_se}
    expected = pd.DataFrame(coef + [
        {"kind": "coefficient_ratio", "name": "log_frequency/log_reliability", **ratio},
        {"kind": "coefficient_bootstrap", "name": "intercept", "estimate": 1.0,
         "ci_low": 0.5, "ci_high": 1.5, "n": 9},
        {"kind": "coefficient_bootstrap", "name": "log_frequency", "estimate": 2.0,
         "ci_low": 1.5, "ci_high": 2.5, "n": 9},
        {"kind": "coefficient_bootstrap", "name": "log_reliability", "estimate": 3.0,
         "ci_low": 2.5, "ci_high": 3.5, "n": 9},
        {"kind": "coefficient_bootstrap", "name": "ratio", "estimate": 2 / 3,
         "ci_low": 0.5, "ci_high": 0.8, "n": 8},
        {"kind": "contour", "name": "p50", "frequency": 0.25, "reliability": 0.8,
         "ci_low": 0.7, "ci_high": 0.9, "n": 11},
        {"kind": "contour", "name": "p50", "frequency": 1.0, "reliability": 0.4,
         "ci_low": 0.3, "ci_high": 0.6, "n": 12},
        {"kind": "pareto_set", "name": "minimal_successful_cell", "frequency": 0.25,
         "reliability": 0.5, "estimate": 0.5, "n": 2},
        {"kind": "growth", "name": "alpha", "estimate": 0.5, "ci_low": 0.1, "ci_high": 0.9,
         "n": 3},
        {"kind": "growth", "name": "beta", "estimate": -0.25, "ci_low": -0.5, "ci_high": -0.1,
         "n": 3},
        {"kind": "budget_shift", "name": "x2", "frequency": 0.25, "reliability": 0.125,
         "estimate": -2.0, "ci_low": -3.0, "ci_high": -1.0, "budget_factor": 2.0},
        {"kind": "budget_shift", "name": "x2", "frequency": 1.0, "reliability": 0.5,
         "estimate": -2.0, "ci_low": -3.0, "ci_high": -1.0, "budget_factor": 2.0},
        {"kind": "budget_shift", "name": "x0.5", "frequency": 0.25, "reliability": 0.125,
         "estimate": np.nan, "ci_low": np.nan, "ci_high": np.nan, "budget_factor": 0.5},
        {"kind": "budget_shift", "name": "x0.5", "frequency": 1.0, "reliability": 0.5,
         "estimate": np.nan, "ci_low": np.nan, "ci_high": np.nan, "budget_factor": 0.5},
    ]).reindex(columns=TABLE_COLUMNS)  # fmt: skip
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)

    moves = f"2x: {math.log(2) / -0.25:+.2f}, 0.5x: {math.log(0.5) / -0.25:+.2f}"
    got_ratio = summary.pop("coefficient_ratio")
    assert got_ratio.pop("name") == "log_frequency/log_reliability"
    assert got_ratio == pytest.approx(ratio, rel=1e-12, abs=0)
    assert summary == {
        "status": "ok", "metric": "m", "method": "t", "fit_method": "mle", "level": 0.9,
        "n_runs": 7, "n_runs_excluded": 2, "seeds": [0, 1, 2], "budget_steps": [1000, 2000],
        "budget_tokens": [64000, 128000],
        "pareto_set": [{"frequency": 0.25, "reliability": 0.5}],
        "n_runs_fitted": 5, "n_runs_formed": 3, "separated": True, "converged": False,
        "monotone_increasing": True,
        "coefficients": {row["name"]: {"estimate": row["estimate"], "ci_low": row["ci_low"],
                                       "ci_high": row["ci_high"]} for row in coef},
        # The bootstrap's method is the fit's; its counts come from the band's table.
        "bootstrap": {"method": "firth", "unit": "cell", "n_bootstrap": 7, "dropped": DROPPED,
                      "coefficients": BOOTSTRAP_CIS},
        "verdicts": None,
        "growth": {"status": "ok", "alpha": 0.5, "beta": -0.25, "beta_ci": [-0.5, -0.1],
                   "n": 3, "r_squared": 0.75, "distance_range": [-3.5, 1.5]},
        "budget_shift": {"x2": -2.0, "x0.5": None},
        "budget_shift_extrapolated": {"x2": True, "x0.5": False},
        "longer_budget": "S* grows by a factor exp(0.25) per unit of log-distance towards the "
        f"frontier; extrapolating, a longer budget moves the frontier by ({moves}) in "
        "(log f, log r) distance, towards rarer and less reliable repetition; the 0.5x shift "
        "lies outside the distances of the runs fitted ([-3.50, +1.50]): a straight-line "
        "extrapolation",
    }  # fmt: skip
    assert [type(v) for v in summary["budget_shift_extrapolated"].values()] == [bool, bool]


def test_estimate_frontier_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _stub_science(monkeypatch)
    table, summary = nodes.estimate_frontier(frontier_cells(), {})
    assert calls["fit"][3:] == ("firth", 0.95)
    runs, grid, n_boot, seed, unit, method, level = calls["contour"]
    assert (n_boot, seed, unit, method, level) == (200, 0, "seed", "firth", 0.95)
    np.testing.assert_allclose(grid, np.exp(np.linspace(math.log(0.25), 0.0, 25)))
    assert calls["growth"][2] == 0.95 and calls["shift"][3] == (2.0, 4.0)
    assert summary["fit_method"] == "firth" and summary["level"] == 0.95
    assert summary["budget_shift"] == {"x2": -2.0, "x4": None}
    assert summary["budget_shift_extrapolated"] == {"x2": True, "x4": False}
    assert summary["bootstrap"] == {"method": "firth", "unit": "seed", "n_bootstrap": 200,
                                    "dropped": DROPPED, "coefficients": BOOTSTRAP_CIS}  # fmt: skip
    z = norm.ppf(0.95)  # the fit's own level (0.9) sets its Wald intervals
    assert summary["coefficients"]["log_reliability"] == {
        "estimate": 3.0,
        "ci_low": 3.0 - z * 0.4,
        "ci_high": 3.0 + z * 0.4,
    }
    assert table["name"].tolist()[-4:] == ["x2", "x2", "x4", "x4"]


NONE_FORMED = (
    "no run formed an induction head within the budget: the frontier lies beyond the grid's "
    "most frequent and reliable cell at this budget; a longer budget "
    "(pareto.training.max_steps) or more frequent/reliable cells would be needed to see it"
)
ALL_FORMED = (
    "every run formed an induction head: the frontier lies below the grid's rarest and least "
    "reliable cell; extend the grid downwards (or shorten the budget)"
)


def _no_fit(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("no model may be fitted")


@pytest.mark.parametrize(
    ("formed", "status", "where", "n_formed", "pareto"),
    [
        ([0.0] * 7, "none_formed", NONE_FORMED, 0, []),
        ([1.0] * 7, "all_formed", ALL_FORMED, 6, [(0.25, 0.25, 1.0, 1)]),
        ([np.nan, 1.0, 0.0, np.nan, np.nan, np.nan, np.nan], "too_few_runs",
         "fewer than 3 runs with a known outcome", 1, [(0.25, 0.5, 0.5, 2)]),
    ],
)  # fmt: skip
def test_degenerate_frontier_is_reported_not_faked(
    monkeypatch: pytest.MonkeyPatch, formed: list, status: str, where: str, n_formed: int,
    pareto: list,
) -> None:  # fmt: skip
    monkeypatch.setattr(pf, "fit_frontier", _no_fit)
    cells = frontier_cells().assign(formed=formed, status=status_of(formed))
    if status == "all_formed":  # a cell that dominates every other one
        cells.loc[cells["run_name"] == "c_s0", "reliability"] = 0.25
        cells.loc[cells["run_name"] == "c_s0", "frequency"] = 0.25
    table, summary = nodes.estimate_frontier(cells, {"level": 0.8, "fit_method": "mle"})
    expected = pd.DataFrame(
        [{"kind": "coefficient", "name": name} for name in pf.COEFFICIENTS]
        + [{"kind": "pareto_set", "name": "minimal_successful_cell", "frequency": f,
            "reliability": r, "estimate": share, "n": n} for f, r, share, n in pareto]
    ).reindex(columns=TABLE_COLUMNS)  # fmt: skip
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)
    n_fitted = len(pareto_cells.fit_runs(cells))
    null = {"estimate": None, "ci_low": None, "ci_high": None}
    assert summary == {
        "status": status, "metric": "m", "method": "t", "fit_method": "mle", "level": 0.8,
        "n_runs": 7, "n_runs_excluded": 7 - n_fitted, "seeds": [0, 1, 2],
        "budget_steps": [1000, 2000], "budget_tokens": [64000, 128000],
        "pareto_set": [{"frequency": f, "reliability": r} for f, r, _, _ in pareto],
        "n_runs_fitted": n_fitted, "n_runs_formed": n_formed, "separated": None,
        "converged": None, "monotone_increasing": None,
        "coefficients": {name: null for name in pf.COEFFICIENTS},
        "coefficient_ratio": {"name": "log_frequency/log_reliability", **null},
        "bootstrap": None,
        "growth": {"status": status, "alpha": None, "beta": None, "beta_ci": [None, None],
                   "n": 0, "r_squared": None, "distance_range": [None, None]},
        "budget_shift": {}, "budget_shift_extrapolated": {}, "longer_budget": where,
        "verdicts": None,
    }  # fmt: skip


# --------------------------------------------------------------------------------------------
# Figures: the data handed to the plotting functions
# --------------------------------------------------------------------------------------------
def _frontier_table() -> pd.DataFrame:
    return pd.DataFrame([
        {"kind": "coefficient", "name": "intercept", "estimate": 1.0},
        {"kind": "coefficient_ratio", "name": "log_frequency/log_reliability",
         "estimate": 0.5, "ci_low": 0.25, "ci_high": 0.75},
        {"kind": "contour", "name": "p50", "frequency": 0.25, "reliability": 0.8,
         "ci_low": 0.7, "ci_high": 0.9, "n": 11},
        {"kind": "contour", "name": "p50", "frequency": np.nan, "reliability": 0.4,
         "ci_low": 0.3, "ci_high": 0.6, "n": 12},
        {"kind": "contour", "name": "p50", "frequency": 1.0, "reliability": 0.4,
         "ci_low": 0.3, "ci_high": 0.6, "n": 12},
        {"kind": "pareto_set", "name": "minimal_successful_cell", "frequency": 0.25,
         "reliability": 0.5, "estimate": 0.5, "n": 2},
        {"kind": "budget_shift", "name": "x2", "frequency": 0.25, "reliability": 0.125,
         "estimate": -2.0, "budget_factor": 2.0},
    ]).reindex(columns=TABLE_COLUMNS)  # fmt: skip


def test_plot_frontier_hands_over_cells_contour_pareto_set_and_shift(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}

    def heatmap(cells, contour, pareto_set, shift, *, budget_label):
        seen.update(cells=cells, contour=contour, pareto_set=pareto_set, shift=shift,
                    label=budget_label)  # fmt: skip
        return "figure"

    monkeypatch.setattr(pareto_plots, "plot_frontier_heatmap", heatmap)
    frontier_table = _frontier_table()
    summary = {"level": 0.8, "budget_steps": [1500.0, 3000]}
    assert nodes.plot_frontier(frontier_cells(), frontier_table, summary) == "figure"
    assert seen["label"] == " (budget 1500, 3000 steps)"
    cells = pareto_cells.aggregate_cells(frontier_cells()).iloc[1:]
    pd.testing.assert_frame_equal(seen["cells"], cells)
    contour = seen["contour"]
    assert contour["frequency"].tolist() == [0.25, 1.0]
    assert contour["reliability_50"].tolist() == [0.8, 0.4]
    assert contour["band_low"].tolist() == [0.7, 0.3]
    assert contour["band_high"].tolist() == [0.9, 0.6]
    assert contour["level"].tolist() == [0.8, 0.8]
    assert seen["pareto_set"]["kind"].tolist() == ["pareto_set"]
    assert seen["pareto_set"]["reliability"].tolist() == [0.5]
    assert seen["shift"]["kind"].tolist() == ["budget_shift"]
    assert seen["shift"]["reliability_50"].tolist() == [0.125]
    assert "reliability" not in seen["shift"].columns


def test_plot_frontier_draws_the_contour() -> None:
    fig = nodes.plot_frontier(
        frontier_cells(), _frontier_table(), {"level": 0.8, "budget_steps": [1000]}
    )
    try:
        lines = {line.get_label(): line for line in fig.axes[0].lines}
        np.testing.assert_array_equal(lines["P = 0.5"].get_xdata(), [0.25, 1.0])
        np.testing.assert_array_equal(lines["P = 0.5"].get_ydata(), [0.8, 0.4])
        assert fig.axes[0].get_title().endswith(" (budget 1000 steps)")
    finally:
        plt.close(fig)


def test_plot_sstar_distance_without_a_frontier_says_why() -> None:
    summary = {"status": "none_formed", "longer_budget": NONE_FORMED}
    fig = nodes.plot_sstar_distance(frontier_cells(), summary)
    try:
        (ax,) = fig.axes
        (text,) = ax.texts
        assert text.get_text() == "no frontier (none_formed):\n" + pareto_plots._wrap(NONE_FORMED)
        assert text.get_position() == (0.5, 0.5) and text.get_transform() is ax.transAxes
        assert (text.get_ha(), text.get_va()) == ("center", "center")
        assert not ax.axison
    finally:
        plt.close(fig)


def _ok_summary(**growth: Any) -> dict[str, Any]:
    return {
        "status": "ok", "fit_method": "firth", "n_runs_fitted": 5, "n_runs_formed": 3,
        "budget_steps": [1000, 2000, 1500],
        "coefficients": {"intercept": {"estimate": 1.0}, "log_frequency": {"estimate": 2.0},
                         "log_reliability": {"estimate": 3.0}},
        "growth": {"status": "ok", "alpha": 0.5, "beta": -0.25, "beta_ci": [-0.5, -0.1],
                   "n": 3, "r_squared": 0.75, **growth},
    }  # fmt: skip


def _capture_sstar(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def plot(runs, growth, budget):
        seen.update(runs=runs, growth=growth, budget=budget)
        return "figure"

    monkeypatch.setattr(pareto_plots, "plot_sstar_vs_distance", plot)
    return seen


def test_plot_sstar_distance_hands_over_runs_distances_and_growth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _capture_sstar(monkeypatch)
    assert nodes.plot_sstar_distance(frontier_cells(), _ok_summary()) == "figure"
    runs = seen["runs"]
    assert runs["run_name"].tolist() == ["a_s0", "a_s1", "b_s0", "b_s1", "c_s0"]
    expected = [_distance(f, r) for f, r in zip(runs["frequency"], runs["reliability"],
                                                 strict=True)]  # fmt: skip
    np.testing.assert_allclose(runs["distance"], expected)
    assert seen["budget"] == 2000.0 and type(seen["budget"]) is float
    g = seen["growth"]
    assert (g.alpha, g.beta, g.beta_ci, g.n, g.r_squared, g.status) == (
        0.5,
        -0.25,
        (-0.5, -0.1),
        3,
        0.75,
        "ok",
    )
    assert all(math.isnan(v) for v in g.alpha_ci) and len(g.alpha_ci) == 2


def test_plot_sstar_distance_turns_null_growth_into_nan(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _capture_sstar(monkeypatch)
    summary = _ok_summary(status="too_few_emerged_runs", alpha=None, beta=None,
                          beta_ci=[None, -0.3], n=1, r_squared=None)  # fmt: skip
    nodes.plot_sstar_distance(frontier_cells(), summary)
    g = seen["growth"]
    assert math.isnan(g.alpha) and math.isnan(g.beta) and math.isnan(g.r_squared)
    assert math.isnan(g.beta_ci[0]) and g.beta_ci[1] == -0.3 and isinstance(g.beta_ci, tuple)
    assert (g.n, g.status) == (1, "too_few_emerged_runs")


# --------------------------------------------------------------------------------------------
# MLflow (a recording stand-in for the mlflow module)
# --------------------------------------------------------------------------------------------
class _FakeMlflow(types.ModuleType):
    def __init__(self, active: Any = None, fail: bool = False) -> None:
        super().__init__("mlflow")
        self.active, self.fail, self.calls = active, fail, []

    def active_run(self) -> Any:
        return self.active

    def start_run(self, **kwargs: Any) -> None:
        self.calls.append(("start_run", kwargs))

    def end_run(self) -> None:
        self.calls.append(("end_run",))

    def log_metrics(self, metrics: dict) -> None:
        self.calls.append(("log_metrics", metrics))
        if self.fail:
            raise RuntimeError("store down")

    def set_tags(self, tags: dict) -> None:
        self.calls.append(("set_tags", tags))


def _mlflow_summary() -> dict[str, Any]:
    return {
        "status": "ok", "n_runs": 7, "n_runs_fitted": 5, "n_runs_formed": 3,
        "n_runs_excluded": 2, "monotone_increasing": True, "separated": False,
        "coefficients": {"intercept": {"estimate": 1, "ci_low": None, "ci_high": 2.5},
                         "log_frequency": {"estimate": 2.0, "ci_low": 1.0, "ci_high": 3.0}},
        "coefficient_ratio": {"name": "log_frequency/log_reliability", "estimate": 0.5,
                              "ci_low": 0.25, "ci_high": 0.75},
        "growth": {"beta": -0.25, "r_squared": None, "alpha": 9.0},
        "budget_shift": {"x2": -1.5, "x4": None},
        "longer_budget": "y" * 6000,
    }  # fmt: skip


def test_log_pareto_to_mlflow_starts_and_closes_its_own_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _FakeMlflow()
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    nodes.log_pareto_to_mlflow(_mlflow_summary())
    assert fake.calls == [
        ("start_run", {"run_name": "pareto"}),
        ("log_metrics", {
            "pareto.frontier_fitted": 1.0, "pareto.intercept.estimate": 1.0,
            "pareto.intercept.ci_high": 2.5, "pareto.log_frequency.estimate": 2.0,
            "pareto.log_frequency.ci_low": 1.0, "pareto.log_frequency.ci_high": 3.0,
            "pareto.coefficient_ratio.estimate": 0.5, "pareto.coefficient_ratio.ci_low": 0.25,
            "pareto.coefficient_ratio.ci_high": 0.75, "pareto.n_runs": 7.0,
            "pareto.n_runs_fitted": 5.0, "pareto.n_runs_formed": 3.0,
            "pareto.n_runs_excluded": 2.0, "pareto.growth.beta": -0.25,
            "pareto.budget_shift.x2": -1.5,
        }),
        ("set_tags", {"pareto.status": "ok", "pareto.monotone_increasing": "True",
                      "pareto.separated": "False", "pareto.longer_budget": "y" * 5000}),
        ("end_run",),
    ]  # fmt: skip
    assert all(type(v) is float for v in fake.calls[1][1].values())


def test_log_pareto_to_mlflow_uses_the_active_run_and_closes_on_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    summary = {**_mlflow_summary(), "status": "none_formed", "growth": {"r_squared": 0.5},
               "monotone_increasing": None, "separated": None, "longer_budget": "why",
               "coefficient_ratio": {"name": "log_frequency/log_reliability", "estimate": None,
                                     "ci_low": None, "ci_high": 0.75}}  # fmt: skip
    active = _FakeMlflow(active=object())
    monkeypatch.setitem(sys.modules, "mlflow", active)
    nodes.log_pareto_to_mlflow(summary)
    assert [c[0] for c in active.calls] == ["log_metrics", "set_tags"]
    metrics = active.calls[0][1]
    assert metrics["pareto.frontier_fitted"] == 0.0 and metrics["pareto.growth.r_squared"] == 0.5
    assert "pareto.growth.beta" not in metrics
    # Null ratio bounds are left out, the others logged.
    ratio = {k: v for k, v in metrics.items() if k.startswith("pareto.coefficient_ratio.")}
    assert ratio == {"pareto.coefficient_ratio.ci_high": 0.75}
    # A summary without a coefficient_ratio block (written before it existed) logs none.
    older = _FakeMlflow(active=object())
    monkeypatch.setitem(sys.modules, "mlflow", older)
    nodes.log_pareto_to_mlflow({k: v for k, v in summary.items() if k != "coefficient_ratio"})
    assert not any(k.startswith("pareto.coefficient_ratio") for k in older.calls[0][1])
    assert active.calls[1][1] == {"pareto.status": "none_formed",
                                  "pareto.monotone_increasing": "None",
                                  "pareto.separated": "None", "pareto.longer_budget": "why"}  # fmt: skip
    failing = _FakeMlflow(fail=True)
    monkeypatch.setitem(sys.modules, "mlflow", failing)
    with pytest.raises(RuntimeError, match="store down"):
        nodes.log_pareto_to_mlflow(summary)
    assert [c[0] for c in failing.calls] == ["start_run", "log_metrics", "end_run"]


def _with_zero_reliability_cell() -> pd.DataFrame:
    """The frontier cells plus a successful run at r = 0 (outside the log-scale grid)."""
    extra = {"run_name": "z_s0", "label": "z", "seed": 0, "frequency": 0.5, "reliability": 0.0,
             "formed": 1.0, "step": 20.0, "budget_steps": 1000, "ci_low": 15.0,
             "ci_high": 25.0, "budget_tokens": 64000, "metric": "m", "method": "t",
             "status": "emerged"}  # fmt: skip
    return pd.concat([frontier_cells(), pd.DataFrame([extra])], ignore_index=True)


def test_zero_knob_cells_stay_out_of_the_pareto_set_and_the_heatmap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _stub_science(monkeypatch)
    cells = _with_zero_reliability_cell()
    _, summary = nodes.estimate_frontier(cells, {})
    assert summary["pareto_set"] == [{"frequency": 0.25, "reliability": 0.5}]
    assert summary["n_runs_excluded"] == 3
    seen: dict[str, Any] = {}

    def heatmap(cells, contour, pareto_set, shift, *, budget_label):
        seen["cells"] = cells

    monkeypatch.setattr(pareto_plots, "plot_frontier_heatmap", heatmap)
    nodes.plot_frontier(cells, _frontier_table(), {"level": 0.8, "budget_steps": [1000]})
    assert list(zip(seen["cells"]["frequency"], seen["cells"]["reliability"], strict=True)) == [
        (0.25, 0.5), (0.5, 0.25), (0.5, 1.0), (1.0, 0.5),
    ]  # fmt: skip


def test_empty_probe_pools_are_allowed(tmp_path: Path) -> None:
    model = saved_model(tmp_path, 20, other_bucket=True)
    options = nodes.semi_natural_variant_data(
        model, {"online_emergence": {"token_pool_size": 0}}, {"probe": {"top_k": 0}}
    )
    assert options["model_checksum"] == model.checksum()


def test_a_single_run_reports_too_few_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pf, "fit_frontier", _no_fit)
    one = frontier_cells().iloc[[1]].reset_index(drop=True)
    table, summary = nodes.estimate_frontier(one, {})
    assert (summary["status"], summary["metric"], summary["method"]) == ("too_few_runs", "m", "t")
    assert (summary["n_runs"], summary["n_runs_fitted"], summary["n_runs_formed"]) == (1, 1, 1)
    assert summary["pareto_set"] == [{"frequency": 0.25, "reliability": 0.5}]
    assert table["kind"].tolist() == ["coefficient"] * 3 + ["pareto_set"]
    assert summary["coefficient_ratio"]["estimate"] is None and summary["bootstrap"] is None
