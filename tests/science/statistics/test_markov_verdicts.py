"""Verdict logic of the markov experiment on constructed condition tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ih_kedro.science.statistics.markov_verdicts import (
    CONTRADICTED,
    SUPPORTED,
    UNDECIDABLE,
    condition_table,
    judge_claims,
)
from ih_kedro.science.statistics.pareto_frontier import emergence_status

# process -> (marginal, local_dependency, categorical)
PROCESSES = {
    "noLD_zipf": ("zipf", False, False),
    "LD_uniform": ("uniform", True, False),
    "LD_zipf": ("zipf", True, False),
    "LD_CAT_uniform": ("uniform", True, True),
    "LD_CAT_zipf": ("zipf", True, True),
}


def _runs(outcomes: dict[tuple[str, str], list[str]]) -> pd.DataFrame:
    """One run per (process, level, seed) with the given statuses."""
    rows = []
    for (process, level), statuses in outcomes.items():
        marginal, ld, cat = PROCESSES[process]
        for seed, status in enumerate(statuses):
            formed = status in ("emerged", "left_censored")
            rows.append(
                {
                    "process": process,
                    "level": level,
                    "seed": seed,
                    "status": status,
                    "step": 300.0 + 100 * seed if formed else 1500.0,
                    "ci_low": 250.0 + 100 * seed if formed else math.nan,
                    "ci_high": 350.0 + 100 * seed if formed else math.nan,
                    "last_step": 1500,
                    "marginal": marginal,
                    "local_dependency": ld,
                    "categorical": cat,
                    "frequency": 1.0 if level == "high" else 0.5,
                    "reliability": 1.0 if level == "high" else 0.3,
                }
            )
    return pd.DataFrame(rows)


def _expected_world() -> dict[tuple[str, str], list[str]]:
    """The study's expectation: every claim holds."""
    return {
        ("noLD_zipf", "high"): ["censored"],
        ("noLD_zipf", "near_frontier"): ["censored"],
        ("LD_uniform", "high"): ["emerged"],
        ("LD_CAT_zipf", "high"): ["emerged"],
        ("LD_CAT_zipf", "near_frontier"): ["emerged"],
        ("LD_zipf", "near_frontier"): ["censored"],
        ("LD_CAT_uniform", "near_frontier"): ["censored"],
        ("LD_uniform", "near_frontier"): ["censored"],
    }


def _verdicts(outcomes):
    return judge_claims(condition_table(_runs(outcomes)))


def test_condition_table_aggregates_seeds():
    table = condition_table(
        _runs({("LD_zipf", "high"): ["emerged", "emerged", "censored"]}),
        properties=pd.DataFrame([{"process": "LD_zipf", "entropy_ratio": 0.5}]),
    )
    row = table.iloc[0]
    assert row["condition"] == "LD_zipf@high"
    assert (row["n_seeds"], row["n_formed"], row["formed"]) == (3, 2, "mixed")
    assert row["formed_share"] == pytest.approx(2 / 3)
    assert row["s_star"] == 350.0  # median of 300 and 400
    assert (row["ci_low"], row["ci_high"]) == (250.0, 450.0)
    assert row["seed_statuses"] == "s0:emerged;s1:emerged;s2:censored"
    assert row["entropy_ratio"] == 0.5
    assert row["status"] == "mixed"


def test_status_derived_from_censored_when_the_column_is_absent():
    table = pd.DataFrame({"censored": [True, False, False], "step": [10.0, 5.0, math.nan]})
    assert list(emergence_status(table)) == ["censored", "emerged", "fit_failed"]


def test_every_claim_supported_in_the_expected_world():
    verdicts = _verdicts(_expected_world())
    assert {k: v["verdict"] for k, v in verdicts.items()} == {
        "ld_necessary": SUPPORTED,
        "ld_sufficient_at_high_repetition": SUPPORTED,
        "cat_and_zipf_needed_near_frontier": SUPPORTED,
    }
    deciding = {c["condition"] for c in verdicts["ld_necessary"]["deciding_cells"]}
    assert deciding == {
        "noLD_zipf@high",
        "noLD_zipf@near_frontier",
        "LD_uniform@high",
        "LD_CAT_zipf@high",
        "LD_CAT_zipf@near_frontier",
    }
    parts = verdicts["cat_and_zipf_needed_near_frontier"]["parts"]
    assert parts["cat_needed"]["verdict"] == SUPPORTED
    assert {c["condition"] for c in parts["zipf_needed"]["deciding_cells"]} == {
        "LD_CAT_zipf@near_frontier",
        "LD_CAT_uniform@near_frontier",
    }


def test_every_claim_contradicted():
    world = _expected_world()
    world[("noLD_zipf", "high")] = ["emerged"]
    world[("LD_uniform", "high")] = ["censored"]
    world[("LD_zipf", "near_frontier")] = ["emerged"]
    verdicts = _verdicts(world)
    assert {k: v["verdict"] for k, v in verdicts.items()} == {
        "ld_necessary": CONTRADICTED,
        "ld_sufficient_at_high_repetition": CONTRADICTED,
        "cat_and_zipf_needed_near_frontier": CONTRADICTED,
    }
    assert [c["condition"] for c in verdicts["ld_necessary"]["deciding_cells"]] == [
        "noLD_zipf@high"
    ]
    parts = verdicts["cat_and_zipf_needed_near_frontier"]["parts"]
    assert (parts["cat_needed"]["verdict"], parts["zipf_needed"]["verdict"]) == (
        CONTRADICTED,
        SUPPORTED,
    )


def test_nothing_formed_is_not_decidable():
    world = {key: ["censored"] for key in _expected_world()}
    verdicts = _verdicts(world)
    assert {v["verdict"] for v in verdicts.values()} == {UNDECIDABLE}
    assert "budget" in verdicts["ld_necessary"]["reason"]
    assert (
        "did not form near the frontier" in verdicts["cat_and_zipf_needed_near_frontier"]["reason"]
    )


def test_mixed_seeds_and_missing_cells_are_not_decidable():
    world = _expected_world()
    world[("LD_uniform", "high")] = ["emerged", "censored"]
    del world[("LD_CAT_uniform", "near_frontier")]
    verdicts = _verdicts(world)
    assert verdicts["ld_sufficient_at_high_repetition"]["verdict"] == UNDECIDABLE
    claim = verdicts["cat_and_zipf_needed_near_frontier"]
    assert claim["verdict"] == UNDECIDABLE
    assert claim["parts"]["zipf_needed"]["reason"].startswith("no condition without a Zipfian")
    assert claim["parts"]["cat_needed"]["verdict"] == SUPPORTED


def test_unknown_level_is_named():
    with pytest.raises(ValueError, match="level 'near_frontier' is not in the conditions table"):
        judge_claims(condition_table(_runs({("LD_uniform", "high"): ["emerged"]})))
