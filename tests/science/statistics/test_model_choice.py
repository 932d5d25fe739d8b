"""A model whose top head can be load-bearing: the rule picks the known candidate on synthetic
outcomes, and says why each other one fails."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ih_kedro.science.statistics.model_choice import (
    choose_model,
    model_table,
    outcomes_from_runs,
)

BUDGET = 1500


def _outcomes(candidates: dict) -> pd.DataFrame:
    """``candidates[preset] = (flops, [(emergence step or None, excess, ci_low), ...])``."""
    rows = []
    for preset, (flops, seeds) in candidates.items():
        for seed, (step, excess, low) in enumerate(seeds):
            rows.append({"preset": preset, "seed": seed, "budget_steps": BUDGET, "flops": flops,
                         "emergence_step": math.nan if step is None else float(step),
                         "censored": step is None, "excess_drop": excess,
                         "excess_drop_ci_low": low, "excess_drop_ci_high": 2 * excess - low})  # fmt: skip
    return pd.DataFrame(rows)


# The cheapest model shares its copying (one seed's CI reaches 0); the next forms heads late in
# one seed; the third qualifies; the dearest also qualifies but costs more. Answer: "mid".
CANDIDATES = {
    "shared": (1.0, [(800, 0.05, -0.02), (850, 0.10, 0.03), (900, 0.08, 0.01)]),
    "late": (2.0, [(700, 0.30, 0.20), (1200, 0.25, 0.15), (800, 0.30, 0.22)]),
    "mid": (3.0, [(700, 0.30, 0.20), (750, 0.20, 0.05), (800, 0.40, 0.30)]),
    "dear": (9.0, [(600, 0.50, 0.40), (650, 0.45, 0.35), (700, 0.50, 0.41)]),
}


def test_the_cheapest_candidate_whose_top_heads_bear_load_in_every_seed_is_chosen():
    choice = choose_model(_outcomes(CANDIDATES))
    assert choice["preset"] == "mid"
    table = pd.DataFrame(choice["table"]).set_index("preset")
    assert list(table.index) == ["shared", "late", "mid", "dear"]  # cheapest first
    assert list(table["qualifies"]) == [False, False, True, True]
    assert list(table["chosen"]) == [False, False, True, False]
    assert table.loc["shared", "n_load_bearing"] == 2
    assert (
        "not load-bearing" in table.loc["shared", "reason"]
        and "[0]" in table.loc["shared", "reason"]
    )
    assert "heads after 1000 steps in seeds [1]" in table.loc["late", "reason"]
    assert table.loc["mid", "excess_drop"] == pytest.approx(0.30)  # mean over seeds
    assert table.loc["mid", "excess_drop_ci_low"] < 0.30 < table.loc["mid", "excess_drop_ci_high"]
    assert table.loc["mid", "seed_ci_low"] == [0.2, 0.05, 0.3]
    assert table.loc["late", "seed_steps"] == [700.0, 1200.0, 800.0]
    assert choice["reason"].startswith("mid: ") and "0.3 [" in choice["reason"]
    assert "budget / 1.5" in choice["rule"] and "95%" in choice["rule"]


def test_a_censored_seed_disqualifies_and_no_candidate_is_reported_with_every_reason():
    censored = {"only": (1.0, [(700, 0.3, 0.2), (None, 0.3, 0.2)])}
    choice = choose_model(_outcomes({**censored, "shared": CANDIDATES["shared"]}))
    assert choice["preset"] is None
    assert choice["reason"].startswith("no candidate qualifies: ")
    assert "only: no heads within the budget in seeds [1]" in choice["reason"]
    assert "shared: top heads not load-bearing" in choice["reason"]


def test_margin_factor_one_accepts_the_budgets_edge():
    assert choose_model(_outcomes(CANDIDATES), margin_factor=1.0)["preset"] == "late"
    with pytest.raises(ValueError, match="margin_factor"):
        model_table(_outcomes(CANDIDATES), margin_factor=0.5)


def test_outcomes_from_runs_reads_the_run_table_and_the_compute():
    runs = pd.DataFrame({
        "run_name": ["a_s0", "a_s1", "b_s0"], "preset": ["a", "a", "b"], "seed": [0, 1, 0],
        "final_step": 1500, "emergence_step": [900.0, 1500.0, 800.0],
        "emergence_censored": [False, True, False],
        "ablation_excess_copy_zero": [0.1, 0.2, 0.3],
        "ablation_excess_copy_zero_ci_low": [0.05, -0.1, 0.2],
        "ablation_excess_copy_zero_ci_high": [0.15, 0.5, 0.4],
    })  # fmt: skip
    compute = pd.DataFrame({"run_name": ["b_s0", "a_s0", "a_s1"], "flops": [7.0, 3.0, 3.0]})
    out = outcomes_from_runs(runs, compute).set_index(["preset", "seed"])
    assert out.loc[("a", 1), "censored"] and math.isnan(out.loc[("a", 1), "emergence_step"])
    assert out.loc[("b", 0), "flops"] == 7.0 and out.loc[("a", 0), "excess_drop_ci_low"] == 0.05
    with pytest.raises(ValueError, match="appears twice"):
        outcomes_from_runs(pd.concat([runs, runs]))
    with pytest.raises(ValueError, match="lacks"):
        outcomes_from_runs(runs.drop(columns="ablation_excess_copy_zero_ci_low"))
