"""The pareto cell table's pieces: the realised knobs of a run's own batches, the runs the
frontier fit uses and the per-cell aggregates, checked against values computed here
independently (the sampler's own batches, hand-written tables)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.data.variants.bigram_model import BigramModel
from ih_kedro.science.data.variants.repetition_stats import measure_repetition
from ih_kedro.science.statistics import pareto_cells
from tests.science.statistics.pareto_tables import (
    frontier_cells,
    measured,
    saved_model,
    token_stream,
    training_grid,
    variant_cell,
)


def test_realised_uses_the_runs_own_knobs_over_the_variant_data(tmp_path: Path) -> None:
    from ih_kedro.science.training.grid import expand_grid

    model = saved_model(tmp_path, 30, other_bucket=False)
    config = expand_grid(training_grid(data_variants=[variant_cell("x", 0.5, 1.0)], seeds=[2]))[0]
    # The variant data never overrides the cell's own knobs.
    stats = pareto_cells._realised(
        token_stream(), config, {"model_path": model.path, "frequency": 0.0, "reliability": 0.0}, 2
    )
    assert stats == measured(model.path, 0.5, 1.0, 2, 2)
    assert stats.n_sequences == 8


def test_fit_runs_keep_known_outcomes_with_positive_knobs() -> None:
    runs = pareto_cells.fit_runs(frontier_cells())
    assert runs["run_name"].tolist() == ["a_s0", "a_s1", "b_s0", "b_s1", "c_s0"]
    assert runs["cell"].tolist() == ["a", "a", "b", "b", "c"]
    zero_r = frontier_cells().assign(reliability=[1.0, 0.0, 0.5, 0.5, 0.5, 0.25, 1.0])
    assert pareto_cells.fit_runs(zero_r)["run_name"].tolist() == ["a_s1", "b_s0", "b_s1", "c_s0"]


def test_aggregate_cells_exact_table() -> None:
    cells = pareto_cells.aggregate_cells(frontier_cells())
    expected = pd.DataFrame({
        "frequency": [0.0, 0.25, 0.5, 0.5, 1.0], "reliability": [1.0, 0.5, 0.25, 1.0, 0.5],
        "n_seeds": [1, 2, 1, 1, 2], "formed_share": [1.0, 0.5, 0.0, np.nan, 1.0],
        "sstar_median": [10.0, 100.0, np.nan, np.nan, 60.0],
    })  # fmt: skip
    pd.testing.assert_frame_equal(cells, expected)


def test_realised_batches_match_the_sampler(tmp_path: Path) -> None:
    """``_realised`` measures exactly the batches ``train_run`` draws (same seed and steps)."""
    from ih_kedro.science.data.batches import sample_batch
    from ih_kedro.science.data.packed import PackedTokens
    from ih_kedro.science.training.config import TrainingRunConfig

    n = 30
    rng = np.random.default_rng(0)
    model = BigramModel(
        transition=rng.random((n, n)), initial=np.ones(n), token_ids=np.arange(n) + 5,
        counts=np.zeros((n, n), dtype=np.int64), smoothing=0.0, other_bucket=False, vocab_size=64,
    )  # fmt: skip
    path = model.save(tmp_path / "m.npz")
    packed = PackedTokens(
        tokens=np.arange(500, dtype=np.uint16) % 64, vocab_size=64, eos_token_id=0,
        checksum="x", meta={},
    )  # fmt: skip
    config = TrainingRunConfig(
        run_name="r", preset="attn-only-2l-d128", batch_size=16, context_length=20, seed=3,
        data_variant="semi_natural", variant_options={"frequency": 0.4, "reliability": 0.7},
    )  # fmt: skip
    stats = pareto_cells._realised(packed, config, {"model_path": str(path)}, 3)
    options = {"model_path": str(path), "frequency": 0.4, "reliability": 0.7}
    batches = np.concatenate([
        sample_batch(packed.tokens, 16, 20, 3, s, data_variant="semi_natural",
                     variant_options=options).tokens.numpy()
        for s in range(3)
    ])  # fmt: skip
    assert stats == measure_repetition(batches)
    assert stats.n_sequences == 48


def test_cell_aggregates_take_sstar_from_the_seeds_that_formed_only():
    rows = [  # (f, r, seed, formed, step): censored rows carry the budget as their step
        (0.5, 1.0, 0, 1.0, 1500.0), (0.5, 1.0, 1, 0.0, 2000.0), (0.5, 1.0, 2, 1.0, 1700.0),
        (1.0, 1.0, 0, 0.0, 2000.0), (1.0, 1.0, 1, 0.0, 2000.0),
    ]  # fmt: skip
    table = pd.DataFrame(rows, columns=["frequency", "reliability", "seed", "formed", "step"])
    table["run_name"] = [f"run{i}" for i in range(len(table))]
    cells = pareto_cells.aggregate_cells(table).set_index(["frequency", "reliability"])
    assert cells.loc[(0.5, 1.0), "n_seeds"] == 3
    assert cells.loc[(0.5, 1.0), "formed_share"] == pytest.approx(2 / 3)
    assert cells.loc[(0.5, 1.0), "sstar_median"] == 1600.0  # median of 1500 and 1700, not 1700
    assert np.isnan(cells.loc[(1.0, 1.0), "sstar_median"])  # none formed: grey, not the budget
    assert cells.loc[(1.0, 1.0), "formed_share"] == 0.0


def _status_table(rows: list[tuple], index: list[int] | None = None) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["run_name", "status", "formed"], index=index)


def test_formed_matches_status_passes_on_a_consistent_table() -> None:
    table = _status_table(
        [("a", "emerged", 1.0), ("b", "left_censored", 1), ("c", "censored", 0.0),
         ("d", "fit_failed", np.nan), ("e", "fit_failed", None), ("f", None, np.nan),
         ("g", "emerged", "1")],
        index=[7, 3, 5, 0, 9, 1, 2],
    )  # fmt: skip
    assert pareto_cells.check_formed_matches_status(table) is None
    assert pareto_cells.check_formed_matches_status(frontier_cells()) is None
    assert pareto_cells.check_formed_matches_status(table.iloc[:0]) is None


def test_formed_disagreeing_with_status_names_every_run() -> None:
    table = _status_table(
        [("a", "emerged", 1.0), ("b", "censored", 1.0), ("c", "fit_failed", np.nan),
         ("d", "fit_failed", 0.0), ("e", "left_censored", 1.0)],
        index=[4, 3, 2, 1, 0],
    )  # fmt: skip
    expected = (
        "pareto.cell_table: formed disagrees with status for 2 run(s): "
        "b (formed=1.0, status=censored), d (formed=0.0, status=fit_failed)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        pareto_cells.check_formed_matches_status(table)
    # A formed run with no outcome, a left-censored one read as not formed.
    stale = frontier_cells()
    stale.loc[stale["run_name"] == "a_s0", "formed"] = np.nan
    stale.loc[stale["run_name"] == "d_s2", "status"] = "left_censored"
    stale.loc[stale["run_name"] == "d_s2", "formed"] = 0.0
    expected = (
        "pareto.cell_table: formed disagrees with status for 2 run(s): "
        "d_s2 (formed=0.0, status=left_censored), a_s0 (formed=nan, status=emerged)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        pareto_cells.check_formed_matches_status(stale)


def test_check_formed_needs_a_status_column():
    table = pd.DataFrame({"run_name": ["a"], "formed": [1.0]})
    with pytest.raises(
        ValueError, match=r"^pareto.cell_table: no status column to check formed against$"
    ):
        pareto_cells.check_formed_matches_status(table)


# --------------------------------------------------------------------------------------------
# Formation columns and the per-cell summary over seeds
# --------------------------------------------------------------------------------------------
def _seed_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run_name": ["a_s0", "a_s1", "a_s2", "b_s0", "b_s1"],
            "label": ["a", "a", "a", "b", "b"],
            "frequency": [0.5, 0.5, 0.5, 1.0, 1.0],
            "reliability": [1.0, 1.0, 1.0, 0.5, 0.5],
            "formed": [1.0, 1.0, 0.0, 0.0, 0.0],
            "step": [100.0, 400.0, 2000.0, 2000.0, 2000.0],
            "formation_score": [0.5, 0.3, 0.1, 0.2, 0.2],
            "formed_at_0.3": pd.array([True, True, True, False, pd.NA], dtype="boolean"),
            "formed_at_0.5": pd.array([True, False, False, False, False], dtype="boolean"),
        }
    )


def test_with_formation_joins_by_run_and_requires_every_run() -> None:
    table = _seed_table()[["run_name", "label"]]
    formation = _seed_table()[["run_name", "formation_score", "formed_at_0.3"]].iloc[::-1]
    formation = formation.assign(metric="m", budget_steps=10.0)
    joined = pareto_cells._with_formation(table, formation)
    assert list(joined.columns) == ["run_name", "label", "formation_score", "formed_at_0.3"]
    assert joined["formation_score"].tolist() == [0.5, 0.3, 0.1, 0.2, 0.2]
    assert pareto_cells._with_formation(table, None) is table
    with pytest.raises(ValueError, match=r"missing from the formation table: \['a_s0'\]"):
        pareto_cells._with_formation(table, formation.iloc[:-1])
    assert pareto_cells.thresholds_of(joined) == [0.3]


def test_cell_summary_by_hand() -> None:
    summary = pareto_cells.cell_summary(_seed_table(), level=0.95).set_index("label")
    a, b = summary.loc["a"], summary.loc["b"]
    assert (a["n_seeds"], a["n_formed"], b["n_seeds"], b["n_formed"]) == (3, 2, 2, 0)
    assert a["formed_share"] == pytest.approx(2 / 3)
    assert a["formed_share_at_0.3"] == 1.0 and a["formed_share_at_0.5"] == pytest.approx(1 / 3)
    assert b["formed_share_at_0.3"] == 0.0  # the unobserved seed is left out
    # formation score a: mean 0.3, sd 0.2, t(0.975, 2) = 4.302653 -> 0.3 +- 4.302653*0.2/sqrt(3)
    half = 4.302652729911275 * 0.2 / np.sqrt(3)
    assert a["formation_score"] == pytest.approx(0.3)
    assert a["formation_score_ci_low"] == pytest.approx(0.3 - half)
    assert a["formation_score_ci_high"] == pytest.approx(0.3 + half)
    # b: two equal seeds -> a zero-width interval.
    assert b["formation_score_ci_low"] == pytest.approx(0.2) == b["formation_score_ci_high"]
    # S*: geometric mean of the formed seeds (100, 400) = 200; log sd = log(4)/sqrt(2),
    # t(0.975, 1) = 12.706205 -> exp(log 200 +- 12.706205 * log(4) / 2).
    half = 12.706204736174698 * np.log(4) / np.sqrt(2) / np.sqrt(2)
    assert a["sstar"] == pytest.approx(200.0)
    assert a["sstar_ci_low"] == pytest.approx(200 * np.exp(-half))
    assert a["sstar_ci_high"] == pytest.approx(200 * np.exp(half))
    assert np.isnan(b["sstar"]) and np.isnan(b["sstar_ci_low"])
