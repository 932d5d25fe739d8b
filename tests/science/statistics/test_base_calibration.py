"""The natural-most base: the dose rule picks the known answer on synthetic outcomes."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ih_kedro.science.statistics.base_calibration import (
    base_label,
    choose_dose,
    dose_options,
    dose_response_table,
    outcomes_from_runs,
)

BUDGET = 1500
DOSES = (16, 32, 64, 128, 256)


def _outcomes(steps_by_dose, excess_by_dose=None) -> pd.DataFrame:
    """``steps_by_dose[dose]``: one emergence step per seed, None = censored at the budget."""
    rows = []
    for dose, steps in steps_by_dose.items():
        for seed, step in enumerate(steps):
            excess = (excess_by_dose or {}).get(dose, [0.2] * len(steps))[seed]
            rows.append({"tokens_per_event": dose, "seed": seed, "budget_steps": BUDGET,
                         "emergence_step": math.nan if step is None else float(step),
                         "censored": step is None, "excess_drop": excess,
                         "copy_share": 6 / dose})  # fmt: skip
    return pd.DataFrame(rows)


# Heads form later as the dose gets lighter: 16-64 within budget / 1.5 = 1000 steps in every
# seed; 128 forms in every seed but one only at 1200 (inside the budget, outside the margin);
# 256 is censored in two seeds. The answer: one copy per 64 tokens.
STEPS = {16: [700, 750, 800], 32: [760, 800, 850], 64: [850, 900, 980],
         128: [950, 1000, 1200], 256: [1300, None, None]}  # fmt: skip


def test_the_least_enrichment_within_the_margin_is_chosen():
    choice = choose_dose(_outcomes(STEPS))
    assert choice["tokens_per_event"] == 64
    assert choice["label"] == "natural, minimally enriched (one copy per 64 tokens)"
    assert "next lighter dose (128)" in choice["reason"] and "seeds [2]" in choice["reason"]
    table = pd.DataFrame(choice["table"])
    assert list(table["tokens_per_event"]) == list(DOSES)
    assert list(table["qualifies"]) == [True, True, True, False, False]
    assert table.loc[table["tokens_per_event"] == 256, "n_formed"].item() == 1
    assert "budget / 1.5" in choice["rule"]


def test_margin_factor_one_accepts_the_budgets_edge():
    assert choose_dose(_outcomes(STEPS), margin_factor=1.0)["tokens_per_event"] == 128


def test_a_lighter_dose_after_a_failed_denser_one_is_not_chosen():
    steps = {**STEPS, 32: [760, None, 850]}  # a seed lost at 32: 64 and 128 are noise
    choice = choose_dose(_outcomes(steps), margin_factor=1.0)
    assert choice["tokens_per_event"] == 16


def test_load_bearing_requirement():
    excess = {dose: [0.2, 0.15, 0.3] for dose in DOSES}
    excess[64] = [0.2, -0.01, 0.1]  # one seed's top head not load-bearing at 64
    outcomes = _outcomes(STEPS, excess)
    assert choose_dose(outcomes)["tokens_per_event"] == 64
    strict = choose_dose(outcomes, require_load_bearing=True)
    assert strict["tokens_per_event"] == 32 and "excess drop is above 0" in strict["rule"]
    # A per-seed CI over the random draws decides where given.
    outcomes["excess_drop_ci_low"] = outcomes["excess_drop"] - 0.18
    assert choose_dose(outcomes, require_load_bearing=True)["tokens_per_event"] is None


def test_no_dose_and_the_dose_options():
    choice = choose_dose(_outcomes({16: [None, 700, 800], 32: [700, 800, 900]}))
    assert choice["tokens_per_event"] is None and "densest dose (16)" in choice["reason"]
    with pytest.raises(ValueError, match="no dose chosen"):
        dose_options(choice, {"tokens_per_event": 16})
    base = {"tokens_per_event": 16, "span_min": 4, "span_max": 8}
    assert dose_options({"tokens_per_event": 64.0}, base) == {**base, "tokens_per_event": 64.0}
    assert base_label(128) == "natural, minimally enriched (one copy per 128 tokens)"


def test_table_numbers_and_errors():
    table = dose_response_table(_outcomes(STEPS))
    row = table.set_index("tokens_per_event").loc[128]
    assert (row["emergence_step_median"], row["emergence_step_max"]) == (1000, 1200)
    assert row["within_steps"] == pytest.approx(1000) and row["n_within_margin"] == 2
    assert row["excess_drop"] == pytest.approx(0.2) and row["copy_share"] == pytest.approx(6 / 128)
    with pytest.raises(ValueError, match="lack columns"):
        dose_response_table(_outcomes(STEPS).drop(columns="censored"))
    with pytest.raises(ValueError, match="twice"):
        dose_response_table(pd.concat([_outcomes(STEPS)] * 2))
    with pytest.raises(ValueError, match="margin_factor"):
        dose_response_table(_outcomes(STEPS), margin_factor=0.5)


def test_outcomes_from_the_run_table():
    runs = pd.DataFrame({"variant": ["copies_1_per_16", "copies_1_per_64"], "seed": [0, 0],
                         "emergence_step": [700.0, 1500.0], "emergence_censored": [False, True],
                         "final_step": [1500, 1500], "ablation_excess_copy_zero": [0.1, 0.3]})  # fmt: skip
    doses = {"copies_1_per_16": {"tokens_per_event": 16, "span_min": 4, "span_max": 8},
             "copies_1_per_64": {"tokens_per_event": 64}}  # fmt: skip
    outcomes = outcomes_from_runs(runs, doses)
    assert list(outcomes["tokens_per_event"]) == [16, 64]
    assert outcomes["emergence_step"].iloc[0] == 700 and math.isnan(
        outcomes["emergence_step"].iloc[1]
    )
    assert list(outcomes["censored"]) == [False, True]
    assert outcomes["copy_share"].tolist() == pytest.approx([6 / 16, 6 / 64])
    with pytest.raises(ValueError, match="no dose"):
        outcomes_from_runs(runs, {"copies_1_per_16": doses["copies_1_per_16"]})
