"""Markov verdicts, value checks: the condition table's every column and each claim's verdict,
reason and deciding cells, branch by branch, compared with hand-written expectations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.statistics import markov_verdicts as mv
from ih_kedro.science.statistics.markov_verdicts import CONTRADICTED, SUPPORTED, UNDECIDABLE

# process -> (marginal, local_dependency, categorical)
PROCESSES = {
    "noLD_uniform": ("uniform", False, False),
    "noLD_zipf": ("zipf", False, False),
    "LD_uniform": ("uniform", True, False),
    "LD_geometric": ("geometric", True, False),
    "LD_zipf": ("zipf", True, False),
    "LD_CAT_uniform": ("uniform", True, True),
    "LD_CAT_zipf": ("zipf", True, True),
}
N_FORMED = {"yes": 2, "no": 0, "mixed": 1, "unknown": 0}


def _table(cells: list[tuple[str, str, str]]) -> pd.DataFrame:
    """A conditions table with two seeds per (process, level, formed) cell; S* = 100 * row."""
    rows = []
    for i, (process, level, formed) in enumerate(cells):
        marginal, ld, cat = PROCESSES[process]
        rows.append(
            {
                "condition": f"{process}@{level}",
                "process": process,
                "level": level,
                "marginal": marginal,
                "local_dependency": ld,
                "categorical": cat,
                "n_seeds": 2,
                "n_formed": N_FORMED[formed],
                "formed": formed,
                "s_star": 100.0 * (i + 1) if formed in ("yes", "mixed") else math.nan,
            }
        )
    return pd.DataFrame(rows)


def _cells(table: pd.DataFrame, conditions: list[str]) -> list[dict]:
    """The expected deciding cells, in the given order."""
    out = []
    for condition in conditions:
        row = table[table["condition"] == condition].iloc[0]
        out.append(
            {
                "condition": condition,
                "process": row["process"],
                "level": row["level"],
                "formed": row["formed"],
                "n_formed": N_FORMED[row["formed"]],
                "n_seeds": 2,
                "s_star": None if math.isnan(row["s_star"]) else float(row["s_star"]),
            }
        )
    return out


def _claim(name, table, verdict, reason, conditions):
    return {
        "claim": mv.CLAIMS[name],
        "verdict": verdict,
        "reason": reason,
        "deciding_cells": _cells(table, conditions),
    }


# --------------------------------------------------------------------------------------------
# Statuses and the conditions table
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        (["emerged", "left_censored"], "yes"),
        (["emerged"], "yes"),
        (["censored", "censored"], "no"),
        (["emerged", "censored"], "mixed"),
        (["left_censored", "fit_failed"], "mixed"),
        (["censored", "fit_failed"], "unknown"),
        (["fit_failed"], "unknown"),
        ([], "unknown"),
    ],
)
def test_formed_per_condition(statuses, expected):
    assert mv._formed(statuses) == expected


def _run(process, level, seed, status, step, ci, last_step=1500, **extra):
    return {
        "process": process,
        "level": level,
        "seed": seed,
        "status": status,
        "step": step,
        "ci_low": ci[0],
        "ci_high": ci[1],
        "last_step": last_step,
        **extra,
    }


def test_condition_table_values():
    desc = {"marginal": "zipf", "local_dependency": 1, "categorical": 0, "frequency": 2,
            "reliability": 0.25}  # fmt: skip
    runs = pd.DataFrame(
        [
            _run("b", "high", 0.0, "emerged", 500.0, (450.0, 560.0), 1400, **desc),
            _run("b", "high", 1.0, "left_censored", 300.0, (200.0, 320.0), 1600, **desc),
            _run("b", "high", 2.0, "emerged", 400.0, (380.0, 700.0), 1500, **desc),
            _run("b", "high", 3.0, "left_censored", math.nan, (100.0, 150.0), 1500, **desc),
            _run("b", "high", 4.0, "censored", 1500.0, (10.0, 9000.0), 1500, **desc),
            _run("a", "low", 7, "censored", 1500.0, (math.nan, math.nan), 900, **desc),
            _run("a", "low", 8, "fit_failed", math.nan, (math.nan, math.nan), 950, **desc),
        ]
    )
    table = mv.condition_table(runs)
    assert list(table.columns) == mv.CONDITION_COLUMNS
    b, a = table.iloc[0], table.iloc[1]  # in order of appearance
    assert b.to_dict() == {
        "condition": "b@high",
        "process": "b",
        "level": "high",
        "marginal": "zipf",
        "local_dependency": True,
        "categorical": False,
        "frequency": 2.0,
        "reliability": 0.25,
        "n_seeds": 5,
        "n_formed": 4,
        "formed": "mixed",
        "formed_share": 0.8,
        "s_star": 400.0,  # median of the finite formed steps 300, 400, 500
        "ci_low": 100.0,  # envelope of the formed seeds' CIs
        "ci_high": 700.0,
        "status": "mixed",
        "seed_statuses": "s0:emerged;s1:left_censored;s2:emerged;s3:left_censored;s4:censored",
        "budget_steps": 1600,
    }
    assert (a["condition"], a["n_seeds"], a["n_formed"], a["formed"]) == ("a@low", 2, 0, "unknown")
    assert a["formed_share"] == 0.0 and a["status"] == "unknown" and a["budget_steps"] == 950
    assert math.isnan(a["s_star"]) and math.isnan(a["ci_low"]) and math.isnan(a["ci_high"])
    assert a["seed_statuses"] == "s7:censored;s8:fit_failed"
    assert isinstance(b["budget_steps"], (int, np.integer))


def test_condition_table_statuses_and_missing_descriptors():
    runs = pd.DataFrame(
        [
            _run("p", "high", 0, "emerged", 300.0, (250.0, 350.0)),
            _run("p", "high", 1, "left_censored", 200.0, (150.0, 260.0)),
            _run("q", "high", 0, "censored", 1500.0, (math.nan, math.nan)),
            _run("r", "high", 0, "left_censored", math.nan, (100.0, 120.0)),
            _run("s", "high", 0, "emerged", "n/a", (100.0, 120.0)),
        ]
    )
    table = mv.condition_table(runs).set_index("condition")
    assert table["status"].to_dict() == {"p@high": "emerged", "q@high": "censored",
                                         "r@high": "emerged", "s@high": "emerged"}  # fmt: skip
    assert table["formed"].to_dict() == {"p@high": "yes", "q@high": "no", "r@high": "yes",
                                         "s@high": "yes"}  # fmt: skip
    assert table.loc["p@high", "s_star"] == 250.0
    # A formed seed without a (numeric) step: counted as formed, but no S* and no CI.
    for condition in ("r@high", "s@high"):
        assert table.loc[condition, "n_formed"] == 1
        assert math.isnan(table.loc[condition, "s_star"])
        assert math.isnan(table.loc[condition, "ci_low"])
        assert math.isnan(table.loc[condition, "ci_high"])
    # No descriptor columns: no marginal, no LD / CAT, NaN knobs.
    assert table["marginal"].isna().all()
    assert not table["local_dependency"].any() and not table["categorical"].any()
    assert table["frequency"].isna().all() and table["reliability"].isna().all()


def test_condition_table_of_no_runs_has_the_columns():
    runs = pd.DataFrame([_run("p", "high", 0, "emerged", 300.0, (250.0, 350.0))]).iloc[:0]
    table = mv.condition_table(runs)
    assert table.empty and list(table.columns) == mv.CONDITION_COLUMNS


def test_condition_table_rejects_missing_columns():
    runs = pd.DataFrame([_run("p", "high", 0, "emerged", 300.0, (250.0, 350.0))])
    with pytest.raises(ValueError, match=r"lacks columns \['ci_high', 'last_step'\]"):
        mv.condition_table(runs.drop(columns=["last_step", "ci_high"]))


def test_condition_table_merges_properties_by_process():
    runs = pd.DataFrame(
        [
            _run("p", "high", 0, "emerged", 300.0, (250.0, 350.0), marginal="zipf",
                 local_dependency=True, categorical=False),
            _run("q", "high", 0, "censored", 1500.0, (math.nan, math.nan), marginal="uniform",
                 local_dependency=False, categorical=True),
        ]
    )  # fmt: skip
    properties = pd.DataFrame(
        {
            "process": ["q", "z"],
            "marginal": ["other", "other"],
            "local_dependency": [True, True],
            "categorical": [False, False],
            "entropy": [1.5, 2.0],
        }
    )
    table = mv.condition_table(runs, properties)
    assert list(table.columns) == mv.CONDITION_COLUMNS + ["entropy"]
    assert table["process"].tolist() == ["p", "q"]
    assert table["marginal"].tolist() == ["zipf", "uniform"]
    assert table["local_dependency"].tolist() == [True, False]
    assert table["categorical"].tolist() == [False, True]
    assert math.isnan(table["entropy"].iloc[0]) and table["entropy"].iloc[1] == 1.5
    same = mv.condition_table(runs, properties.iloc[:0])
    assert list(same.columns) == mv.CONDITION_COLUMNS


# --------------------------------------------------------------------------------------------
# Claim 1: local dependency is necessary
# --------------------------------------------------------------------------------------------
def test_ld_necessary_branches():
    name = "ld_necessary"
    t = _table([("LD_uniform", "high", "yes")])
    assert mv._ld_necessary(t) == _claim(
        name, t, UNDECIDABLE, "no condition without local dependency", []
    )
    t = _table([("noLD_zipf", "high", "no"), ("noLD_uniform", "high", "yes"),
                ("LD_uniform", "high", "yes")])  # fmt: skip
    assert mv._ld_necessary(t) == _claim(
        name, t, CONTRADICTED, "a process without local dependency formed", ["noLD_uniform@high"]
    )
    t = _table([("noLD_zipf", "high", "no"), ("noLD_uniform", "high", "mixed"),
                ("LD_uniform", "high", "yes")])  # fmt: skip
    assert mv._ld_necessary(t) == _claim(
        name, t, UNDECIDABLE, "some no-LD conditions are mixed across seeds or unknown",
        ["noLD_zipf@high", "noLD_uniform@high"],
    )  # fmt: skip
    # LD formed only at a level where no no-LD condition was run: the budget may be the reason.
    t = _table([("LD_uniform", "high", "yes"), ("noLD_zipf", "low", "no"),
                ("LD_zipf", "low", "mixed"), ("LD_CAT_zipf", "low", "no")])  # fmt: skip
    assert mv._ld_necessary(t) == _claim(
        name, t, UNDECIDABLE,
        "no process formed at the no-LD conditions' levels: the budget may be the reason",
        ["noLD_zipf@low", "LD_zipf@low", "LD_CAT_zipf@low"],
    )  # fmt: skip
    t = _table([("LD_uniform", "high", "yes"), ("noLD_zipf", "low", "no"),
                ("LD_zipf", "low", "mixed"), ("LD_CAT_zipf", "low", "yes"),
                ("noLD_uniform", "low", "no")])  # fmt: skip
    assert mv._ld_necessary(t) == _claim(
        name, t, SUPPORTED,
        "no process without local dependency formed, while processes with it did at the same level",
        ["noLD_zipf@low", "noLD_uniform@low", "LD_CAT_zipf@low"],
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Claim 2: local dependency suffices at high repetition
# --------------------------------------------------------------------------------------------
def test_ld_sufficient_branches():
    name = "ld_sufficient_at_high_repetition"
    # Only CAT or Zipf LD processes (and a minimal one at another level): nothing to judge.
    t = _table([("LD_zipf", "high", "yes"), ("LD_CAT_uniform", "high", "yes"),
                ("noLD_uniform", "high", "yes"), ("LD_uniform", "low", "yes")])  # fmt: skip
    assert mv._ld_sufficient(t, "high") == _claim(
        name, t, UNDECIDABLE,
        "no condition at level 'high' with local dependency only (no CAT, no Zipf)", [],
    )  # fmt: skip
    t = _table([("LD_uniform", "high", "yes"), ("LD_geometric", "high", "yes"),
                ("LD_zipf", "high", "no"), ("LD_uniform", "low", "no")])  # fmt: skip
    assert mv._ld_sufficient(t, "high") == _claim(
        name, t, SUPPORTED, "local dependency alone formed at high repetition",
        ["LD_uniform@high", "LD_geometric@high"],
    )  # fmt: skip
    # One minimal process formed, one did not; another process formed at high.
    t = _table([("LD_uniform", "high", "yes"), ("LD_geometric", "high", "no"),
                ("LD_CAT_zipf", "high", "yes"), ("LD_zipf", "high", "no"),
                ("LD_CAT_uniform", "low", "yes")])  # fmt: skip
    assert mv._ld_sufficient(t, "high") == _claim(
        name, t, CONTRADICTED,
        "local dependency alone did not form at high repetition, while LD_CAT_zipf did within "
        "the same budget",
        ["LD_geometric@high", "LD_CAT_zipf@high"],
    )  # fmt: skip
    # The default run's case: the processes that formed are named, sorted (not "more properties":
    # noLD_zipf has fewer).
    t = _table([("LD_uniform", "high", "no"), ("noLD_zipf", "high", "yes"),
                ("LD_CAT_zipf", "high", "yes")])  # fmt: skip
    assert mv._ld_sufficient(t, "high") == _claim(
        name, t, CONTRADICTED,
        "local dependency alone did not form at high repetition, while LD_CAT_zipf, noLD_zipf "
        "did within the same budget",
        ["LD_uniform@high", "noLD_zipf@high", "LD_CAT_zipf@high"],
    )  # fmt: skip
    # Only a minimal process formed besides the failed one: no other process shows the budget.
    t = _table([("LD_uniform", "high", "yes"), ("LD_geometric", "high", "no"),
                ("LD_zipf", "high", "mixed"), ("LD_CAT_zipf", "low", "yes")])  # fmt: skip
    assert mv._ld_sufficient(t, "high") == _claim(
        name, t, UNDECIDABLE, "nothing formed at high repetition: the budget may be the reason",
        ["LD_uniform@high", "LD_geometric@high", "LD_zipf@high"],
    )  # fmt: skip
    t = _table([("LD_uniform", "high", "yes"), ("LD_geometric", "high", "unknown"),
                ("LD_CAT_zipf", "high", "yes")])  # fmt: skip
    assert mv._ld_sufficient(t, "high") == _claim(
        name, t, UNDECIDABLE, "mixed or unknown outcomes across seeds",
        ["LD_uniform@high", "LD_geometric@high"],
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Claim 3: categoriality and a Zipf marginal are needed near the frontier
# --------------------------------------------------------------------------------------------
def _part(table, verdict, reason, conditions):
    return {"verdict": verdict, "reason": reason, "deciding_cells": _cells(table, conditions)}


def test_needed_branches():
    t = _table([("LD_CAT_zipf", "nf", "yes"), ("LD_zipf", "nf", "no"), ("LD_uniform", "nf", "no"),
                ("LD_geometric", "nf", "mixed"), ("LD_CAT_uniform", "nf", "yes")])  # fmt: skip
    full = t.iloc[[0]]
    none = t.iloc[[]]
    status, reason, cells = mv._needed(full, none, "X")
    assert (status, reason, len(cells)) == (
        UNDECIDABLE,
        "no condition without X near the frontier",
        0,
    )
    status, reason, cells = mv._needed(none, t.iloc[[1, 4, 2]], "X")
    assert (status, reason) == (CONTRADICTED, "a process without X formed near the frontier")
    assert cells["condition"].tolist() == ["LD_CAT_uniform@nf"]
    status, reason, cells = mv._needed(none, t.iloc[[1, 2]], "X")
    assert (status, reason) == (
        UNDECIDABLE, "the full process (LD + CAT + Zipf) did not form near the frontier"
    )  # fmt: skip
    assert cells["condition"].tolist() == ["LD_zipf@nf", "LD_uniform@nf"]
    status, reason, cells = mv._needed(full, t.iloc[[1, 2]], "X")
    assert (status, reason) == (
        SUPPORTED,
        "the full process formed near the frontier, without X it did not",
    )
    assert cells["condition"].tolist() == ["LD_CAT_zipf@nf", "LD_zipf@nf", "LD_uniform@nf"]
    status, reason, cells = mv._needed(full, t.iloc[[1, 3]], "X")
    assert (status, reason) == (UNDECIDABLE, "mixed or unknown outcomes without X")
    assert cells["condition"].tolist() == ["LD_zipf@nf", "LD_geometric@nf"]


def test_cat_zipf_needed_supported_with_parts():
    t = _table([("LD_CAT_zipf", "nf", "yes"), ("LD_zipf", "nf", "no"),
                ("LD_CAT_uniform", "nf", "no"), ("LD_uniform", "nf", "yes"),
                ("noLD_zipf", "nf", "yes"), ("LD_CAT_zipf", "high", "no")])  # fmt: skip
    cat_reason = "the full process formed near the frontier, without categoriality it did not"
    zipf_reason = "the full process formed near the frontier, without a Zipfian marginal it did not"
    expected = _claim(
        "cat_and_zipf_needed_near_frontier", t, SUPPORTED, f"{cat_reason}; {zipf_reason}",
        ["LD_CAT_zipf@nf", "LD_zipf@nf", "LD_CAT_uniform@nf"],
    )  # fmt: skip
    expected["parts"] = {
        "cat_needed": _part(t, SUPPORTED, cat_reason, ["LD_CAT_zipf@nf", "LD_zipf@nf"]),
        "zipf_needed": _part(t, SUPPORTED, zipf_reason, ["LD_CAT_zipf@nf", "LD_CAT_uniform@nf"]),
    }
    assert mv._cat_zipf_needed(t, "nf") == expected


def test_cat_zipf_needed_verdict_combinations_and_reasons():
    claim = mv._cat_zipf_needed
    # Zipf part contradicted, CAT part supported: contradicted overall.
    t = _table([("LD_CAT_zipf", "nf", "yes"), ("LD_zipf", "nf", "no"),
                ("LD_CAT_uniform", "nf", "yes")])  # fmt: skip
    result = claim(t, "nf")
    assert result["verdict"] == CONTRADICTED
    assert result["reason"] == (
        "the full process formed near the frontier, without categoriality it did not; "
        "a process without a Zipfian marginal formed near the frontier"
    )
    assert [c["condition"] for c in result["deciding_cells"]] == [
        "LD_CAT_zipf@nf", "LD_zipf@nf", "LD_CAT_uniform@nf"
    ]  # fmt: skip
    # Full process did not form, an ablation did: contradicted, reasons from the parts.
    t = _table([("LD_CAT_zipf", "nf", "no"), ("LD_zipf", "nf", "yes"),
                ("LD_CAT_uniform", "nf", "no")])  # fmt: skip
    result = claim(t, "nf")
    assert result["verdict"] == CONTRADICTED
    assert result["reason"] == (
        "a process without categoriality formed near the frontier; "
        "the full process (LD + CAT + Zipf) did not form near the frontier"
    )
    # Full process did not form, nothing contradicts: undecidable with that reason.
    t = _table([("LD_CAT_zipf", "nf", "no"), ("LD_zipf", "nf", "no"),
                ("LD_CAT_uniform", "nf", "no")])  # fmt: skip
    result = claim(t, "nf")
    assert (result["verdict"], result["reason"]) == (
        UNDECIDABLE, "the full process (LD + CAT + Zipf) did not form near the frontier"
    )  # fmt: skip
    # One part supported, the other undecidable: undecidable.
    t = _table([("LD_CAT_zipf", "nf", "yes"), ("LD_zipf", "nf", "no"),
                ("LD_CAT_uniform", "nf", "mixed")])  # fmt: skip
    result = claim(t, "nf")
    assert result["verdict"] == UNDECIDABLE
    assert result["parts"]["zipf_needed"]["reason"] == (
        "mixed or unknown outcomes without a Zipfian marginal"
    )
    # No full process at all.
    t = _table([("LD_zipf", "nf", "no"), ("LD_CAT_uniform", "nf", "no")])
    result = claim(t, "nf")
    assert (result["verdict"], result["reason"]) == (
        UNDECIDABLE, "no full process (LD + CAT + Zipf) near the frontier"
    )  # fmt: skip
    assert [c["condition"] for c in result["deciding_cells"]] == ["LD_zipf@nf", "LD_CAT_uniform@nf"]


# --------------------------------------------------------------------------------------------
# judge_claims and the summary
# --------------------------------------------------------------------------------------------
def test_judge_claims_with_custom_levels_and_summary():
    t = _table([("noLD_zipf", "top", "no"), ("LD_uniform", "top", "yes"),
                ("LD_CAT_zipf", "edge", "yes"), ("LD_zipf", "edge", "no"),
                ("LD_CAT_uniform", "edge", "no")])  # fmt: skip
    verdicts = mv.judge_claims(t, high_level="top", frontier_level="edge")
    assert list(verdicts) == list(mv.CLAIMS)
    assert mv.verdict_summary(verdicts) == {name: SUPPORTED for name in mv.CLAIMS}
    assert mv.verdict_summary({"x": {"verdict": 3}}) == {"x": "3"}
    with pytest.raises(ValueError, match=r"level 'high' is not in the conditions table "
                       r"\(levels: \['edge', 'top'\]\)"):  # fmt: skip
        mv.judge_claims(t, frontier_level="edge")
    with pytest.raises(ValueError, match="level 'near_frontier' is not"):
        mv.judge_claims(t, high_level="top")
    empty = mv.judge_claims(pd.DataFrame(columns=mv.CONDITION_COLUMNS))
    assert set(mv.verdict_summary(empty).values()) == {UNDECIDABLE}


def test_cell_reports_s_star_as_float_or_none():
    t = _table([("LD_uniform", "high", "yes"), ("LD_zipf", "high", "no")])
    assert mv._cell(t.iloc[0]) == _cells(t, ["LD_uniform@high"])[0]
    assert mv._cell(t.iloc[0])["s_star"] == 100.0
    assert mv._cell(t.iloc[1])["s_star"] is None
    assert isinstance(mv._cell(t.iloc[0])["n_formed"], int)
