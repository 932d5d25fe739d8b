"""Verdicts of the markov experiment on synthetic runs tables whose right verdict is known.

Every condition has three seeds in the base world (one in the one-seed world); each seed has a
formation score and a formed flag at 0.3 / 0.4 / 0.5. Paired intervals are worked by hand:
mean +/- t_{0.975, 2} * sd / sqrt(3) with t_{0.975, 2} = 4.302653, so a difference triple
``[m - 0.01, m, m + 0.01]`` (sd 0.01) has the CI ``m +/- 0.024841``.
"""

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
THRESHOLDS = (0.3, 0.4, 0.5)
Y, N = True, False
NEC, SUF, CZ = (
    "ld_necessary",
    "ld_sufficient_at_high_repetition",
    "cat_and_zipf_needed_near_frontier",
)


def _runs(world) -> pd.DataFrame:
    """``world``: ``{(process, level): [(score, formed), ...]}``, one pair per seed; ``formed``
    is one flag (True / False / None = <NA>) for every threshold or a ``{threshold: flag}``."""
    rows = []
    for (process, level), seeds in world.items():
        marginal, ld, cat = PROCESSES[process]
        for seed, (score, formed) in enumerate(seeds):
            flags = formed if isinstance(formed, dict) else dict.fromkeys(THRESHOLDS, formed)
            rows.append(
                {
                    "process": process,
                    "level": level,
                    "seed": seed,
                    "marginal": marginal,
                    "local_dependency": ld,
                    "categorical": cat,
                    "formation_score": score,
                    **{f"formed_at_{t:g}": flags[t] for t in THRESHOLDS},
                }
            )
    table = pd.DataFrame(rows)
    for t in THRESHOLDS:
        table[f"formed_at_{t:g}"] = table[f"formed_at_{t:g}"].astype("boolean")
    return table


def _seeds(scores, formed):
    """Three seeds with these scores; ``formed`` one flag or one per seed."""
    flags = formed if isinstance(formed, list) else [formed] * len(scores)
    return list(zip(scores, flags, strict=True))


def _world():
    """Every claim holds. Paired differences used below:
    LD_CAT_zipf@high - noLD_zipf@high = [0.59, 0.60, 0.61] (claim 1, T = best LD process);
    LD_uniform@high - noLD_zipf@high = [0.49, 0.50, 0.51] (claim 2);
    LD_CAT_zipf@nf - LD_zipf@nf = [0.29, 0.30, 0.31], - LD_CAT_uniform@nf = [0.39, 0.40, 0.41]."""
    return {
        ("noLD_zipf", "high"): _seeds([0.10, 0.10, 0.10], N),
        ("LD_uniform", "high"): _seeds([0.59, 0.60, 0.61], Y),
        ("LD_CAT_zipf", "high"): _seeds([0.69, 0.70, 0.71], Y),
        ("LD_CAT_zipf", "near_frontier"): _seeds([0.50, 0.50, 0.50], Y),
        ("LD_zipf", "near_frontier"): _seeds([0.21, 0.20, 0.19], N),
        ("LD_CAT_uniform", "near_frontier"): _seeds([0.11, 0.10, 0.09], N),
    }


def _one_seed_world():
    return {key: seeds[:1] for key, seeds in _world().items()}


def _judge(world, **kwargs):
    return judge_claims(_runs(world), **kwargs)


def _pair(treatment, control, reason):
    return f"{treatment} (T) vs {control} (K): {reason}"


SUPPORTS = "in every seed T formed and K did not at 0.4; every difference > 0, paired CI"
CAT_HIGH, NOLD_HIGH, LD_HIGH = "LD_CAT_zipf@high", "noLD_zipf@high", "LD_uniform@high"
FULL_NF, LDZ_NF, CATU_NF = (
    "LD_CAT_zipf@near_frontier",
    "LD_zipf@near_frontier",
    "LD_CAT_uniform@near_frontier",
)


# --------------------------------------------------------------------------------------------
# The expected world and the condition table
# --------------------------------------------------------------------------------------------
def test_every_claim_supported_in_the_expected_world():
    verdicts = _judge(_world())
    assert {k: v["verdict"] for k, v in verdicts.items()} == dict.fromkeys(
        [NEC, SUF, CZ], SUPPORTED
    )
    assert all(v["agrees_across_thresholds"] for v in verdicts.values())
    assert verdicts[NEC]["reason"] == _pair(
        CAT_HIGH, NOLD_HIGH, f"{SUPPORTS} [0.575, 0.625] above 0"
    )
    comparison = verdicts[NEC]["comparisons"][0]
    assert (comparison["mean"], comparison["ci_low"], comparison["ci_high"]) == pytest.approx(
        (0.6, 0.6 - 0.024841, 0.6 + 0.024841), abs=1e-6
    )
    assert [c["condition"] for c in verdicts[NEC]["deciding_cells"]] == [CAT_HIGH, NOLD_HIGH]
    assert verdicts[SUF]["reason"] == _pair(
        LD_HIGH, NOLD_HIGH, f"{SUPPORTS} [0.475, 0.525] above 0"
    )
    assert verdicts[CZ]["reason"] == (
        "cat_needed: " + _pair(FULL_NF, LDZ_NF, f"{SUPPORTS} [0.275, 0.325] above 0")
        + "; zipf_needed: " + _pair(FULL_NF, CATU_NF, f"{SUPPORTS} [0.375, 0.425] above 0")
    )  # fmt: skip
    parts = verdicts[CZ]["parts"]
    assert (parts["cat_needed"]["verdict"], parts["zipf_needed"]["verdict"]) == (SUPPORTED,) * 2
    assert [c["condition"] for c in parts["zipf_needed"]["deciding_cells"]] == [FULL_NF, CATU_NF]


def test_condition_table_aggregates_seeds():
    runs = _runs({("LD_zipf", "high"): _seeds([0.2, 0.4, 0.6], [Y, Y, N])}).assign(
        status=["emerged", "emerged", "censored"],
        step=[300.0, 400.0, 1500.0],
        ci_low=[250.0, 350.0, math.nan],
        ci_high=[350.0, 450.0, math.nan],
        last_step=1500,
    )
    table = condition_table(
        runs, properties=pd.DataFrame([{"process": "LD_zipf", "entropy_ratio": 0.5}])
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
    # Scores [0.2, 0.4, 0.6]: 0.4 +/- 4.302653 * 0.2 / sqrt(3) = [-0.096828, 0.896828].
    assert row["formation_score"] == pytest.approx(0.4)
    assert (row["formation_score_ci_low"], row["formation_score_ci_high"]) == pytest.approx(
        (-0.096828, 0.896828), abs=1e-6
    )
    assert [row[f"n_formed_at_{t:g}"] for t in THRESHOLDS] == [2, 2, 2]


def test_status_derived_from_censored_when_the_column_is_absent():
    table = pd.DataFrame({"censored": [True, False, False], "step": [10.0, 5.0, math.nan]})
    assert list(emergence_status(table)) == ["censored", "emerged", "fit_failed"]


# --------------------------------------------------------------------------------------------
# Claim 1: local dependency is necessary
# --------------------------------------------------------------------------------------------
def test_ld_necessary_contradicted_when_no_ld_forms_as_fast():
    world = _world()
    # noLD formed in every seed; d = [-0.01, 0.02, -0.01]: mean 0, sd 0.017321, so the CI is
    # 0 +/- 4.302653 * 0.01 = [-0.043, 0.043].
    world[("noLD_zipf", "high")] = _seeds([0.70, 0.68, 0.72], Y)
    verdict = _judge(world)[NEC]
    assert verdict["verdict"] == CONTRADICTED
    assert verdict["reason"] == _pair(
        CAT_HIGH,
        NOLD_HIGH,
        "K formed in every seed at 0.4 and the paired CI [-0.043, 0.043] does not lie above 0",
    )
    assert [c["condition"] for c in verdict["deciding_cells"]] == [CAT_HIGH, NOLD_HIGH]
    assert verdict["deciding_cells"][1]["n_formed"] == 3


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (  # seeds disagree
            {("noLD_zipf", "high"): _seeds([0.10] * 3, [N, Y, N])},
            "seeds disagree: s0 T formed/K not, s1 both formed, s2 T formed/K not",
        ),
        (  # every seed agrees, d = [0.6, 0.01, 0.02]: mean 0.21, sd 0.337787, CI includes 0
            {("noLD_zipf", "high"): _seeds([0.09, 0.69, 0.69], N)},
            "paired CI [-0.629, 1.05] includes 0",
        ),
        (  # unobserved at the decision threshold
            {("noLD_zipf", "high"): _seeds([0.10] * 3, [N, N, None])},
            "<NA>: unobserved at 0.4 (K s2)",
        ),
    ],
)
def test_ld_necessary_undecided(change, reason):
    world = _world() | change
    verdict = _judge(world)[NEC]
    assert (verdict["verdict"], verdict["reason"]) == (
        UNDECIDABLE,
        _pair(CAT_HIGH, NOLD_HIGH, reason),
    )


def test_every_claim_undecided_with_one_seed():
    verdicts = _judge(_one_seed_world())
    assert {k: v["verdict"] for k, v in verdicts.items()} == dict.fromkeys(
        [NEC, SUF, CZ], UNDECIDABLE
    )
    assert verdicts[NEC]["reason"] == _pair(CAT_HIGH, NOLD_HIGH, "one seed: no CI")
    assert verdicts[SUF]["reason"] == _pair(LD_HIGH, NOLD_HIGH, "one seed: no CI")
    assert verdicts[CZ]["reason"] == (
        f"cat_needed: {_pair(FULL_NF, LDZ_NF, 'one seed: no CI')}; "
        f"zipf_needed: {_pair(FULL_NF, CATU_NF, 'one seed: no CI')}"
    )
    assert verdicts[NEC]["comparisons"][0]["ci_low"] is None


def test_ld_necessary_across_thresholds():
    world = _world()
    # noLD reaches 0.3 in every seed but not 0.4: undecided at 0.3 (both formed, T ahead).
    world[("noLD_zipf", "high")] = _seeds([0.10] * 3, {0.3: Y, 0.4: N, 0.5: N})
    verdicts = _judge(world)
    verdict = verdicts[NEC]
    assert verdict["verdict"] == SUPPORTED
    assert verdict["by_threshold"] == {"0.3": UNDECIDABLE, "0.4": SUPPORTED, "0.5": SUPPORTED}
    assert verdict["agrees_across_thresholds"] is False
    at_03 = _judge(world, decision_threshold=0.3)[NEC]
    assert at_03["reason"] == _pair(CAT_HIGH, NOLD_HIGH, "every seed: both formed")
    assert at_03["threshold"] == 0.3 and at_03["by_threshold"] == verdict["by_threshold"]


def test_ld_necessary_without_a_no_ld_condition():
    world = _world()
    del world[("noLD_zipf", "high")]
    verdict = _judge(world)[NEC]
    assert (verdict["verdict"], verdict["reason"]) == (
        UNDECIDABLE,
        "no condition without local dependency",
    )
    assert verdict["comparisons"] == [] and verdict["deciding_cells"] == []


# --------------------------------------------------------------------------------------------
# Claim 2: local dependency suffices at high repetition
# --------------------------------------------------------------------------------------------
def test_ld_sufficient_contradicted_when_it_forms_in_no_seed_while_another_does():
    world = _world()
    # LD_uniform forms nowhere; LD_CAT_zipf - LD_uniform = [0.39, 0.40, 0.41], CI 0.4 +/- 0.0248.
    world[("LD_uniform", "high")] = _seeds([0.30] * 3, N)
    verdict = _judge(world)[SUF]
    assert verdict["verdict"] == CONTRADICTED
    assert verdict["reason"] == "LD_uniform@high formed in no seed at 0.4, others did: " + _pair(
        CAT_HIGH, LD_HIGH, f"{SUPPORTS} [0.375, 0.425] above 0"
    )
    assert [c["condition"] for c in verdict["deciding_cells"]] == [LD_HIGH, CAT_HIGH]
    assert [(c["treatment"], c["control"], c["verdict"]) for c in verdict["comparisons"]] == [
        (LD_HIGH, NOLD_HIGH, UNDECIDABLE),
        (NOLD_HIGH, LD_HIGH, CONTRADICTED),  # the pair's own verdict: noLD behind LD_uniform
        (CAT_HIGH, LD_HIGH, SUPPORTED),
    ]


def test_ld_sufficient_supported_against_the_floor_without_a_no_ld_control():
    world = _world()
    del world[("noLD_zipf", "high")]
    verdict = _judge(world)[SUF]
    assert (verdict["verdict"], verdict["reason"]) == (
        SUPPORTED,
        "LD_uniform@high formed in every seed at 0.4, score CI [0.575, 0.625] above 0.2",
    )
    assert verdict["score_intervals"] == [
        {"condition": LD_HIGH, "mean": pytest.approx(0.6), "ci_low": pytest.approx(0.575159),
         "ci_high": pytest.approx(0.624841), "level": 0.95, "floor": 0.2}
    ]  # fmt: skip
    high_floor = _judge(world, floor=0.6)[SUF]
    assert (high_floor["verdict"], high_floor["reason"]) == (
        UNDECIDABLE,
        "LD_uniform@high, no control without local dependency: score CI [0.575, 0.625] not "
        "above 0.6",
    )
    assert "floor 0.6" in high_floor["rule"]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {("LD_uniform", "high"): _seeds([0.59, 0.60, 0.61], [Y, Y, N])},
            "seeds disagree: s0 T formed/K not, s1 T formed/K not, s2 neither formed",
        ),
        (  # d = [0.5, 0.01, 0.02]: mean 0.176667, sd 0.280060, CI [-0.519, 0.872]
            {("noLD_zipf", "high"): _seeds([0.09, 0.59, 0.59], N)},
            "paired CI [-0.519, 0.872] includes 0",
        ),
        (
            {("LD_uniform", "high"): _seeds([0.59, 0.60, 0.61], [None, Y, Y])},
            "<NA>: unobserved at 0.4 (T s0)",
        ),
    ],
)
def test_ld_sufficient_undecided(change, reason):
    verdict = _judge(_world() | change)[SUF]
    assert (verdict["verdict"], verdict["reason"]) == (
        UNDECIDABLE,
        _pair(LD_HIGH, NOLD_HIGH, reason),
    )


def test_ld_sufficient_across_thresholds():
    world = _world()
    # LD_uniform reaches 0.4 but not 0.5; LD_CAT_zipf does, 0.1 ahead in every seed (identical
    # differences: the CI collapses to 0.1), so at 0.5 the claim is contradicted.
    world[("LD_uniform", "high")] = _seeds([0.59, 0.60, 0.61], {0.3: Y, 0.4: Y, 0.5: N})
    verdict = _judge(world)[SUF]
    assert verdict["verdict"] == SUPPORTED
    assert verdict["by_threshold"] == {"0.3": SUPPORTED, "0.4": SUPPORTED, "0.5": CONTRADICTED}
    assert verdict["agrees_across_thresholds"] is False


# --------------------------------------------------------------------------------------------
# Claim 3: categoriality and a Zipf marginal are needed near the frontier
# --------------------------------------------------------------------------------------------
def test_cat_zipf_needed_contradicted_when_an_ablation_forms_as_fast():
    world = _world()
    # LD_zipf formed everywhere, d = [-0.01, 0.0, 0.01]: CI 0 +/- 0.0248.
    world[("LD_zipf", "near_frontier")] = _seeds([0.51, 0.50, 0.49], Y)
    verdict = _judge(world)[CZ]
    assert verdict["verdict"] == CONTRADICTED
    parts = verdict["parts"]
    assert (parts["cat_needed"]["verdict"], parts["zipf_needed"]["verdict"]) == (
        CONTRADICTED,
        SUPPORTED,
    )
    assert parts["cat_needed"]["reason"] == _pair(
        FULL_NF,
        LDZ_NF,
        "K formed in every seed at 0.4 and the paired CI [-0.0248, 0.0248] does not lie above 0",
    )
    assert verdict["reason"] == (
        f"cat_needed: {parts['cat_needed']['reason']}; "
        f"zipf_needed: {parts['zipf_needed']['reason']}"
    )
    assert [c["condition"] for c in verdict["deciding_cells"]] == [FULL_NF, LDZ_NF]


@pytest.mark.parametrize(
    ("change", "part", "reason"),
    [
        (
            {("LD_CAT_uniform", "near_frontier"): _seeds([0.11, 0.10, 0.09], [Y, N, N])},
            "zipf_needed",
            "seeds disagree: s0 both formed, s1 T formed/K not, s2 T formed/K not",
        ),
        (  # d = [0.5, 0.01, 0.02]: CI [-0.519, 0.872]
            {("LD_zipf", "near_frontier"): _seeds([0.0, 0.49, 0.48], N)},
            "cat_needed",
            "paired CI [-0.519, 0.872] includes 0",
        ),
        (
            {("LD_zipf", "near_frontier"): _seeds([0.21, 0.20, 0.19], [N, None, N])},
            "cat_needed",
            "<NA>: unobserved at 0.4 (K s1)",
        ),
    ],
)
def test_cat_zipf_needed_undecided(change, part, reason):
    verdict = _judge(_world() | change)[CZ]
    control = LDZ_NF if part == "cat_needed" else CATU_NF
    assert verdict["verdict"] == UNDECIDABLE
    assert verdict["parts"][part] == verdict["parts"][part] | {
        "verdict": UNDECIDABLE,
        "reason": _pair(FULL_NF, control, reason),
    }
    other = "zipf_needed" if part == "cat_needed" else "cat_needed"
    assert verdict["parts"][other]["verdict"] == SUPPORTED


def test_cat_zipf_needed_across_thresholds_and_without_the_full_process():
    world = _world()
    world[("LD_CAT_zipf", "near_frontier")] = _seeds([0.50] * 3, {0.3: Y, 0.4: Y, 0.5: N})
    verdict = _judge(world)[CZ]
    assert verdict["by_threshold"] == {"0.3": SUPPORTED, "0.4": SUPPORTED, "0.5": UNDECIDABLE}
    assert verdict["agrees_across_thresholds"] is False
    at_05 = _judge(world, decision_threshold=0.5)[CZ]
    assert at_05["parts"]["cat_needed"]["reason"] == _pair(
        FULL_NF, LDZ_NF, "every seed: neither formed"
    )
    del world[("LD_CAT_zipf", "near_frontier")]
    verdict = _judge(world)[CZ]
    reason = "no full process (LD + CAT + Zipf) at level 'near_frontier'"
    assert (verdict["verdict"], verdict["reason"]) == (
        UNDECIDABLE,
        f"cat_needed: {reason}; zipf_needed: {reason}",
    )


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------
def test_unknown_level_is_named():
    with pytest.raises(ValueError, match="level 'near_frontier' is not in the runs table"):
        judge_claims(_runs({("LD_uniform", "high"): _seeds([0.5], Y)}))


def test_missing_formation_columns_are_named():
    runs = _runs(_world()).drop(columns=["formation_score", "formed_at_0.5"])
    with pytest.raises(
        ValueError, match=r"lacks the formation columns \['formation_score', 'formed_at_0.5'\]"
    ):
        judge_claims(runs)
    with pytest.raises(ValueError, match=r"formation columns \['formed_at_0.6'\]"):
        judge_claims(_runs(_world()), thresholds=(0.3, 0.6))
