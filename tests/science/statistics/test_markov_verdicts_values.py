"""Markov verdicts, value checks: the condition table's every column, the paired comparison of
two conditions as a whole dict, and the claims' branches the scenario tests leave (several
levels, several LD-only processes, the floor, empty and custom inputs), compared with
hand-written expectations. t quantiles: t_{0.975,1} = 12.706205, t_{0.975,2} = 4.302653."""

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
THRESHOLDS = (0.3, 0.4, 0.5)


def _runs(conditions: dict[tuple[str, str], list]) -> pd.DataFrame:
    """Runs of ``{(process, level): [(score, formed), ...]}``, one pair per seed (seed = its
    position); ``formed`` (True / False / None) holds at every threshold."""
    rows = []
    for (process, level), seeds in conditions.items():
        marginal, ld, cat = PROCESSES[process]
        for seed, (score, formed) in enumerate(seeds):
            rows.append(
                {"process": process, "level": level, "seed": seed, "marginal": marginal,
                 "local_dependency": ld, "categorical": cat, "formation_score": score,
                 **{f"formed_at_{t:g}": formed for t in THRESHOLDS}}
            )  # fmt: skip
    table = pd.DataFrame(rows)
    for t in THRESHOLDS:
        table[f"formed_at_{t:g}"] = table[f"formed_at_{t:g}"].astype("boolean")
    return table


def _prepared(conditions) -> pd.DataFrame:
    """What judge_claims hands its helpers: the runs with a ``condition`` column."""
    runs = _runs(conditions)
    return runs.assign(condition=runs["process"] + "@" + runs["level"])


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
    # No formation_score / formed_at_<t> columns: the columns built on them are NaN.
    formation = mv.CONDITION_COLUMNS[-6:]
    assert formation == ["formation_score", "formation_score_ci_low", "formation_score_ci_high",
                         "n_formed_at_0.3", "n_formed_at_0.4", "n_formed_at_0.5"]  # fmt: skip
    assert table[formation].isna().all().all()
    b = b.drop(formation)
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


def test_condition_table_formation_columns():
    # p: scores [0.2, NaN, 0.5] -> mean 0.35 over the two known seeds, sd 0.212132, CI
    # 0.35 +/- t_{0.975,1} * 0.212132 / sqrt(2) = 0.35 +/- 1.905931; formed [True, <NA>, False].
    runs = pd.DataFrame(
        [
            _run("p", "high", 0, "emerged", 300.0, (250.0, 350.0), formation_score=0.2,
                 **{"formed_at_0.4": True}),
            _run("p", "high", 1, "emerged", 300.0, (250.0, 350.0), formation_score=math.nan,
                 **{"formed_at_0.4": None}),
            _run("p", "high", 2, "censored", 1500.0, (math.nan, math.nan), formation_score=0.5,
                 **{"formed_at_0.4": False}),
            _run("q", "high", 0, "emerged", 300.0, (250.0, 350.0), formation_score=0.7,
                 **{"formed_at_0.4": True}),
        ]
    )  # fmt: skip
    table = mv.condition_table(runs, thresholds=(0.4,))
    assert list(table.columns) == mv.condition_columns((0.4,))
    assert mv.condition_columns((0.4,))[-4:] == [
        "formation_score", "formation_score_ci_low", "formation_score_ci_high", "n_formed_at_0.4"
    ]  # fmt: skip
    p, q = table.iloc[0], table.iloc[1]
    assert p["formation_score"] == pytest.approx(0.35)
    assert (p["formation_score_ci_low"], p["formation_score_ci_high"]) == pytest.approx(
        (0.35 - 1.905931, 0.35 + 1.905931), abs=1e-5
    )
    assert p["n_formed_at_0.4"] == 1 and q["n_formed_at_0.4"] == 1
    assert q["formation_score"] == 0.7
    assert math.isnan(q["formation_score_ci_low"]) and math.isnan(q["formation_score_ci_high"])
    # At level 0.5: t_{0.75,1} = 1.0, so the CI is 0.35 +/- 0.15.
    half = mv.condition_table(runs, thresholds=(0.4,), level=0.5).iloc[0]
    assert (half["formation_score_ci_low"], half["formation_score_ci_high"]) == pytest.approx(
        (0.2, 0.5)
    )
    # A threshold the runs table lacks: its count is NaN, the others are kept.
    other = mv.condition_table(runs, thresholds=(0.4, 0.6)).iloc[0]
    assert other["n_formed_at_0.4"] == 1 and math.isnan(other["n_formed_at_0.6"])


# --------------------------------------------------------------------------------------------
# The paired comparison of two conditions and the helpers of the claims
# --------------------------------------------------------------------------------------------
def test_compare_conditions_in_full():
    runs = _prepared({("LD_uniform", "high"): [(0.6, True), (0.8, True)],
                      ("noLD_zipf", "high"): [(0.1, False), (0.2, False), (0.3, None)]})  # fmt: skip
    # d = [0.5, 0.6] over seeds 0, 1: mean 0.55, sd 0.070711, CI 0.55 +/- t_{0.975,1} * 0.05.
    assert mv.compare_conditions(runs, "LD_uniform@high", "noLD_zipf@high", 0.4) == {
        "treatment": "LD_uniform@high",
        "control": "noLD_zipf@high",
        "threshold": 0.4,
        "verdict": UNDECIDABLE,
        "reason": "LD_uniform@high (T) vs noLD_zipf@high (K): <NA>: unobserved at 0.4 (T s2, "
        "K s2); no score for s2; paired CI [-0.0853, 1.19] includes 0",
        "seeds": [
            {"seed": 0, "treatment_score": 0.6, "control_score": 0.1,
             "difference": pytest.approx(0.5), "treatment_formed": True, "control_formed": False},
            {"seed": 1, "treatment_score": 0.8, "control_score": 0.2,
             "difference": pytest.approx(0.6), "treatment_formed": True, "control_formed": False},
            {"seed": 2, "treatment_score": None, "control_score": 0.3, "difference": None,
             "treatment_formed": None, "control_formed": None},
        ],
        "mean": pytest.approx(0.55),
        "ci_low": pytest.approx(0.55 - 0.635310, abs=1e-5),
        "ci_high": pytest.approx(0.55 + 0.635310, abs=1e-5),
        "level": 0.95,
        "n": 2,
        "dropped_seeds": [2],
    }  # fmt: skip
    at_90 = mv.compare_conditions(runs, "LD_uniform@high", "noLD_zipf@high", 0.4, level=0.9)
    # t_{0.95,1} = 6.313752: 0.55 +/- 0.315688.
    assert (at_90["ci_low"], at_90["level"]) == (pytest.approx(0.234312, abs=1e-5), 0.9)


def test_cell_best_and_combine():
    runs = _prepared({("noLD_zipf", "high"): [(0.1, False), (0.2, True), (0.3, None)]})
    assert mv._cell(runs, "noLD_zipf@high", 0.4) == {
        "condition": "noLD_zipf@high", "process": "noLD_zipf", "level": "high", "n_seeds": 3,
        "n_formed": 1, "n_unobserved": 1, "formation_score": pytest.approx(0.2),
    }  # fmt: skip
    conditions = pd.DataFrame({"condition": ["a", "b", "c", "d"],
                               "score": [0.5, math.nan, 0.7, 0.7]})  # fmt: skip
    assert mv._best(conditions) == "c"  # highest, the first of a tie
    assert mv._best(conditions.assign(score=math.nan)) == "a"
    s = mv._result(SUPPORTED, "s", [{"id": 1}], ["x", "y"])
    u1, u2 = mv._result(UNDECIDABLE, "u1", [], ["y", "z"]), mv._result(UNDECIDABLE, "u2")
    c = mv._result(CONTRADICTED, "c", [{"id": 2}], ["w"])
    assert mv._combine([s, u1, u2]) == mv._result(UNDECIDABLE, "u1; u2", [{"id": 1}], ["y", "z"])
    assert mv._combine([s, s]) == mv._result(SUPPORTED, "s; s", [{"id": 1}] * 2, ["x", "y"])
    assert mv._combine([u1, c, s]) == mv._result(CONTRADICTED, "c", [{"id": 2}, {"id": 1}], ["w"])
    assert mv._combine([]) == mv._result(UNDECIDABLE, "nothing to judge")


# --------------------------------------------------------------------------------------------
# Claims: the branches the scenario tests leave
# --------------------------------------------------------------------------------------------
def _supports(treatment, control, ci):
    return (
        f"{treatment} (T) vs {control} (K): in every seed T formed and K did not at 0.4; every "
        f"difference > 0, paired CI {ci} above 0"
    )


def test_ld_necessary_at_several_levels():
    world = {
        ("noLD_zipf", "high"): [(0.1, False)] * 3,
        ("LD_CAT_zipf", "high"): [(0.69, True), (0.70, True), (0.71, True)],
        ("LD_uniform", "high"): [(0.79, True), (0.80, True), (0.81, True)],  # best: T at high
        ("noLD_uniform", "low"): [(0.1, False)] * 3,
        ("LD_CAT_zipf", "near_frontier"): [(0.5, True)] * 3,
    }
    verdict = mv.judge_claims(_runs(world))["ld_necessary"]
    assert (verdict["verdict"], verdict["reason"]) == (
        UNDECIDABLE, "no condition with local dependency at level 'low'"
    )  # fmt: skip
    assert [c["condition"] for c in verdict["deciding_cells"]] == ["noLD_uniform@low"]
    assert [(c["treatment"], c["control"], c["verdict"]) for c in verdict["comparisons"]] == [
        ("LD_uniform@high", "noLD_zipf@high", SUPPORTED)
    ]
    world[("LD_zipf", "low")] = [(0.59, True), (0.60, True), (0.61, True)]
    verdict = mv.judge_claims(_runs(world))["ld_necessary"]
    assert (verdict["verdict"], verdict["reason"]) == (
        SUPPORTED,
        _supports("LD_uniform@high", "noLD_zipf@high", "[0.675, 0.725]") + "; "
        + _supports("LD_zipf@low", "noLD_uniform@low", "[0.475, 0.525]"),
    )  # fmt: skip
    assert [c["condition"] for c in verdict["deciding_cells"]] == [
        "LD_uniform@high", "noLD_zipf@high", "LD_zipf@low", "noLD_uniform@low"
    ]  # fmt: skip


def test_ld_sufficient_with_two_ld_only_processes():
    world = {
        ("noLD_zipf", "high"): [(0.1, False)] * 3,
        ("LD_uniform", "high"): [(0.59, True), (0.60, True), (0.61, True)],
        ("LD_geometric", "high"): [(0.3, False)] * 3,
        ("LD_CAT_zipf", "high"): [(0.69, True), (0.70, True), (0.71, True)],
        ("LD_CAT_zipf", "near_frontier"): [(0.5, True)] * 3,
    }
    verdict = mv.judge_claims(_runs(world))["ld_sufficient_at_high_repetition"]
    assert verdict["verdict"] == CONTRADICTED
    assert verdict["reason"] == (
        "LD_geometric@high formed in no seed at 0.4, others did: "
        + _supports("LD_uniform@high", "LD_geometric@high", "[0.275, 0.325]") + "; "
        + _supports("LD_CAT_zipf@high", "LD_geometric@high", "[0.375, 0.425]")
    )  # fmt: skip
    assert [c["condition"] for c in verdict["deciding_cells"]] == [
        "LD_geometric@high", "LD_uniform@high", "LD_CAT_zipf@high"
    ]  # fmt: skip
    assert [(c["treatment"], c["control"]) for c in verdict["comparisons"]] == [
        ("LD_uniform@high", "noLD_zipf@high"),
        ("LD_geometric@high", "noLD_zipf@high"),
        ("noLD_zipf@high", "LD_geometric@high"),
        ("LD_uniform@high", "LD_geometric@high"),
        ("LD_CAT_zipf@high", "LD_geometric@high"),
    ]


def test_ld_sufficient_undecided_branches():
    claim = "ld_sufficient_at_high_repetition"
    frontier = {("LD_CAT_zipf", "near_frontier"): [(0.5, True)] * 3}
    # Formed in no seed, but nothing else at the level is ahead of it.
    world = {("noLD_zipf", "high"): [(0.1, False)] * 3,
             ("LD_uniform", "high"): [(0.3, False)] * 3} | frontier  # fmt: skip
    verdict = mv.judge_claims(_runs(world))[claim]
    assert (verdict["verdict"], verdict["reason"]) == (
        UNDECIDABLE,
        "LD_uniform@high (T) vs noLD_zipf@high (K): every seed: neither formed; LD_uniform@high "
        "formed in no seed, but no other process at its level is ahead of it by the paired rule",
    )
    # The no-LD control formed as fast: the pair is contradicted, the claim only undecided.
    world[("noLD_zipf", "high")] = [(0.6, True)] * 3
    world[("LD_uniform", "high")] = [(0.59, True), (0.60, True), (0.61, True)]
    verdict = mv.judge_claims(_runs(world))[claim]
    assert (verdict["verdict"], verdict["reason"]) == (
        UNDECIDABLE,
        "LD_uniform@high (T) vs noLD_zipf@high (K): K formed in every seed at 0.4 and the paired "
        "CI [-0.0248, 0.0248] does not lie above 0",
    )
    assert verdict["comparisons"][0]["verdict"] == CONTRADICTED
    # No LD-only process at that level.
    world = {("LD_zipf", "high"): [(0.5, True)] * 3,
             ("LD_CAT_uniform", "high"): [(0.5, True)] * 3} | frontier  # fmt: skip
    verdict = mv.judge_claims(_runs(world))[claim]
    assert (verdict["verdict"], verdict["reason"]) == (
        UNDECIDABLE, "no condition at level 'high' with local dependency only (no CAT, no Zipf)"
    )  # fmt: skip


def test_ld_sufficient_floor_branches():
    claim = "ld_sufficient_at_high_repetition"
    frontier = {("LD_CAT_zipf", "near_frontier"): [(0.5, True)] * 3}
    world = {("LD_uniform", "high"): [(0.59, True), (0.60, False), (0.61, None)]} | frontier
    verdict = mv.judge_claims(_runs(world))[claim]
    assert (verdict["verdict"], verdict["reason"]) == (
        UNDECIDABLE,
        "LD_uniform@high, no control without local dependency: not formed in every seed (s1 not "
        "formed, s2 <NA>)",
    )
    world = {("LD_uniform", "high"): [(0.59, True)]} | frontier
    verdict = mv.judge_claims(_runs(world))[claim]
    assert verdict["reason"] == (
        "LD_uniform@high, no control without local dependency: one seed: no CI"
    )
    assert verdict["score_intervals"] == [
        {"condition": "LD_uniform@high", "mean": 0.59, "ci_low": None, "ci_high": None,
         "level": 0.95, "floor": 0.2}
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------
# judge_claims, the robustness table and the summary
# --------------------------------------------------------------------------------------------
def test_judge_claims_with_custom_levels_rules_and_summary():
    world = {
        ("noLD_zipf", "top"): [(0.1, False)] * 3,
        ("LD_uniform", "top"): [(0.59, True), (0.60, True), (0.61, True)],
        ("LD_CAT_zipf", "edge"): [(0.5, True)] * 3,
        ("LD_zipf", "edge"): [(0.21, False), (0.20, False), (0.19, False)],
        ("LD_CAT_uniform", "edge"): [(0.11, False), (0.10, False), (0.09, False)],
    }
    runs = _runs(world)
    verdicts = mv.judge_claims(
        runs, high_level="top", frontier_level="edge", thresholds=(0.3, 0.4), decision_threshold=0.5
    )
    assert list(verdicts) == list(mv.CLAIMS)
    assert mv.verdict_summary(verdicts) == dict.fromkeys(mv.CLAIMS, SUPPORTED)
    for name, verdict in verdicts.items():
        assert verdict["claim"] == mv.CLAIMS[name] and verdict["rule"] == mv.RULES[name]
        assert verdict["threshold"] == 0.5
        assert verdict["by_threshold"] == {"0.3": SUPPORTED, "0.4": SUPPORTED, "0.5": SUPPORTED}
        assert verdict["agrees_across_thresholds"] is True
    assert "the floor 0.2);" in mv.RULES["ld_sufficient_at_high_repetition"]
    assert mv.verdict_summary({"x": {"verdict": 3}}) == {"x": "3"}
    with pytest.raises(ValueError, match=r"level 'high' is not in the runs table "
                       r"\(levels: \['edge', 'top'\]\)"):  # fmt: skip
        mv.judge_claims(runs, frontier_level="edge")
    with pytest.raises(ValueError, match="level 'near_frontier' is not"):
        mv.judge_claims(runs, high_level="top")
    with pytest.raises(ValueError, match=r"run table lacks columns \['marginal'\]"):
        mv.judge_claims(runs.drop(columns=["marginal"]), high_level="top", frontier_level="edge")


def test_judge_claims_on_no_runs_is_undecided_everywhere():
    runs = _runs({("LD_uniform", "high"): [(0.5, True)]}).iloc[:0]
    verdicts = mv.judge_claims(runs)
    assert {name: (v["verdict"], v["reason"]) for name, v in verdicts.items()} == {
        "ld_necessary": (UNDECIDABLE, "no condition without local dependency"),
        "ld_sufficient_at_high_repetition": (
            UNDECIDABLE, "no condition at level 'high' with local dependency only (no CAT, no Zipf)"
        ),
        "cat_and_zipf_needed_near_frontier": (
            UNDECIDABLE,
            "cat_needed: no full process (LD + CAT + Zipf) at level 'near_frontier'; "
            "zipf_needed: no full process (LD + CAT + Zipf) at level 'near_frontier'",
        ),
    }  # fmt: skip


def test_threshold_robustness_table_values():
    verdicts = {
        "a": {"verdict": SUPPORTED, "threshold": 0.4,
              "by_threshold": {"0.3": UNDECIDABLE, "0.4": SUPPORTED, "0.5": SUPPORTED}},
        "b": {"verdict": CONTRADICTED, "threshold": 0.3, "by_threshold": {"0.3": CONTRADICTED}},
    }  # fmt: skip
    table = mv.threshold_robustness_table(verdicts)
    assert table.to_dict("records") == [
        {"claim": "a", "threshold": 0.3, "verdict": UNDECIDABLE, "decision": False,
         "agrees": False},
        {"claim": "a", "threshold": 0.4, "verdict": SUPPORTED, "decision": True, "agrees": True},
        {"claim": "a", "threshold": 0.5, "verdict": SUPPORTED, "decision": False, "agrees": True},
        {"claim": "b", "threshold": 0.3, "verdict": CONTRADICTED, "decision": True,
         "agrees": True},
    ]  # fmt: skip
    assert list(mv.threshold_robustness_table({}).columns) == [
        "claim", "threshold", "verdict", "decision", "agrees"
    ]  # fmt: skip
