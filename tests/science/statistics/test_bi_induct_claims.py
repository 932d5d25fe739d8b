"""The five Bi-Induct claims on synthetic per-run tables whose answers are known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.statistics.bi_induct_claims import (
    bound_verdict,
    claims_table,
    decide_claims,
    directional_verdict,
    equivalence_verdict,
)
from ih_kedro.science.statistics.paired_seeds import paired_difference

SEEDS = (0, 1, 2)
# t_{0.975, 2} = 4.3027: with three seeds the paired CI is mean +/- 4.3027 sd / sqrt(3).
T2 = 4.302652729911275


def _diff(values, control=None) -> object:
    control = [0.0] * len(values) if control is None else control
    index = list(range(len(values)))
    return paired_difference(pd.Series(values, index=index), pd.Series(control, index=index))


def _runs(**arms) -> pd.DataFrame:
    """Rows per (arm, seed); ``arms[arm] = {column: [value per seed]}`` over defaults."""
    defaults = {
        "emergence_step": [800.0, 850.0, 900.0], "emergence_censored": [False] * 3,
        "copy_accuracy": [0.60, 0.62, 0.64], "copy_gain": [0.40, 0.42, 0.44],
        "anti_induction_score": [0.03, 0.04, 0.05], "heads_formed": [True] * 3,
        "loss": [4.00, 4.10, 4.20], "ablation_excess_copy_zero": [0.50, 0.55, 0.60],
    }  # fmt: skip
    rows = []
    for arm in ("minimally_enriched", "induction", "anti_induction"):
        values = {**defaults, **arms.get(arm, {})}
        for i, seed in enumerate(SEEDS):
            rows.append({"variant": arm, "seed": seed, **{k: v[i] for k, v in values.items()}})
    return pd.DataFrame(rows)


def _claim(decided: dict, claim: str) -> dict:
    return next(c for c in decided["claims"] if c["id"] == claim)


def test_directional_rule_each_branch_with_hand_computed_intervals() -> None:
    # d = (-300, -200, -100): mean -200, sd 100, half width 4.3027 * 100 / sqrt 3 = 248.4
    diff = _diff([-300.0, -200.0, -100.0])
    assert diff.ci_high == pytest.approx(-200 + T2 * 100 / math.sqrt(3))
    assert directional_verdict(diff, -1, 100.0)[0] == "undecided"  # CI [-448, 48] includes 0
    tight = _diff([-210.0, -200.0, -190.0])  # CI -200 +/- 24.8: all below 0
    assert directional_verdict(tight, -1, 100.0)[0] == "supported"
    assert directional_verdict(tight, +1, 100.0)[0] == "contradicted"  # the other side
    null = _diff([-5.0, 0.0, 5.0])  # CI +/- 12.4 inside +/- 100: no effect worth the name
    verdict, reason = directional_verdict(null, -1, 100.0)
    assert verdict == "contradicted" and "inside +/-100" in reason
    assert directional_verdict(null, -1, 10.0)[0] == "undecided"  # 12.4 reaches beyond 10
    assert directional_verdict(_diff([-3.0]), -1, 1.0)[0] == "undecided"  # one seed: no CI


def test_equivalence_rule_reads_the_margin_both_ways() -> None:
    assert equivalence_verdict(_diff([0.01, 0.0, -0.01]), 0.05)[0] == "supported"
    improved = equivalence_verdict(_diff([0.20, 0.21, 0.22]), 0.05)
    assert improved[0] == "contradicted" and "improved" in improved[1]
    worse = equivalence_verdict(_diff([-0.20, -0.21, -0.22]), 0.05)
    assert worse[0] == "contradicted" and "worse" in worse[1]
    # "Includes 0" is not "neutral": CI 0 +/- 0.124 reaches beyond 0.05.
    assert equivalence_verdict(_diff([0.05, 0.0, -0.05]), 0.05)[0] == "undecided"


def test_bound_rule_on_one_arms_values() -> None:
    below = bound_verdict([0.03, 0.04, 0.05], 0.1, 0.95)
    assert below["verdict"] == "supported"
    assert below["ci_high"] == pytest.approx(0.04 + T2 * 0.01 / math.sqrt(3))
    assert bound_verdict([0.30, 0.32, 0.34], 0.1, 0.95)["verdict"] == "contradicted"
    assert bound_verdict([0.02, 0.10, 0.18], 0.1, 0.95)["verdict"] == "undecided"


def test_known_answers_decide_every_claim() -> None:
    """Induction arm: 200 +/- 10 steps earlier, copy accuracy the same, 0.3 nats worse; the base
    loses 0.4 more copy accuracy to its ablation; the anti arm's anti-induction stays at 0.04."""
    runs = _runs(
        induction={
            "emergence_step": [590.0, 650.0, 710.0], "copy_accuracy": [0.61, 0.62, 0.63],
            "loss": [4.30, 4.40, 4.50], "ablation_excess_copy_zero": [0.10, 0.15, 0.20],
        },
        anti_induction={"emergence_step": [1000.0, 1060.0, 1100.0]},
    )  # fmt: skip
    decided = decide_claims(runs)
    verdicts = {c["id"]: c["verdict"] for c in decided["claims"]}
    assert verdicts == {
        "earlier_emergence": "supported", "icl_not_improved": "supported",
        "anti_induction_near_zero": "supported", "ablation_hurts_base_more": "supported",
        "perplexity_cost": "supported",
    }  # fmt: skip
    emergence = _claim(decided, "earlier_emergence")
    assert emergence["difference"]["differences"] == pytest.approx([-210.0, -200.0, -190.0])
    # The anti arm emerged later (d = 200, 210, 200): the same rule contradicts it there.
    assert emergence["other_arms"]["anti_induction"]["verdict"] == "contradicted"
    cost = _claim(decided, "perplexity_cost")
    assert cost["perplexity_ratio"] == pytest.approx(math.exp(0.3))
    ablation = _claim(decided, "ablation_hurts_base_more")
    assert ablation["estimable"] is True
    assert ablation["difference"]["mean"] == pytest.approx(0.40)  # base minus arm
    table = claims_table(decided)
    assert list(table["claim"]).count("perplexity_cost") == 2
    row = table[(table["claim"] == "earlier_emergence") & (table["arm"] == "induction")].iloc[0]
    assert row["estimate"] == pytest.approx(-200.0) and row["n_seeds"] == 3
    assert row["units"] == "steps" and row["verdict"] == "supported"


def test_identical_arms_report_no_difference() -> None:
    """A snippet arm identical to the base: every paired d is 0, so the directional claims are
    contradicted (inside the margin) and the neutral claim is supported."""
    runs = _runs()
    decided = decide_claims(runs)
    for claim in ("earlier_emergence", "ablation_hurts_base_more", "perplexity_cost"):
        entry = _claim(decided, claim)
        assert entry["difference"]["differences"] == [0.0, 0.0, 0.0]
        assert entry["verdict"] == "contradicted", claim
    assert _claim(decided, "icl_not_improved")["verdict"] == "supported"


def test_unformed_heads_make_the_ablation_claim_not_estimable() -> None:
    runs = _runs(minimally_enriched={"heads_formed": [True, False, True]},
                 induction={"ablation_excess_copy_zero": [0.0, 0.0, 0.0]})  # fmt: skip
    entry = _claim(decide_claims(runs), "ablation_hurts_base_more")
    assert entry["verdict"] == "undecided" and entry["estimable"] is False
    assert "minimally_enriched seeds [1]" in entry["reason"]


def test_copy_accuracy_at_chance_for_the_base_leaves_claim_2_undecided() -> None:
    runs = _runs(minimally_enriched={"copy_gain": [0.2, -0.1, 0.0]})  # mean > 0, CI includes 0
    entry = _claim(decide_claims(runs), "icl_not_improved")
    assert entry["verdict"] == "undecided" and "not above its chance level" in entry["reason"]


@pytest.mark.parametrize(
    ("censored_arm", "steps", "expected"),
    [
        # Base censored at its budget, arm earlier: the true d is even lower - kept.
        ("minimally_enriched", [590.0, 650.0, 710.0], "supported"),
        # Arm censored: its true step is later, so "earlier" could be wrong - withheld.
        ("induction", [590.0, 650.0, 710.0], "undecided"),
    ],
)
def test_censored_emergence_withholds_only_verdicts_it_could_flip(
    censored_arm, steps, expected
) -> None:
    runs = _runs(induction={"emergence_step": steps})
    mask = (runs["variant"] == censored_arm) & (runs["seed"] == 1)
    runs.loc[mask, "emergence_censored"] = True
    entry = _claim(decide_claims(runs), "earlier_emergence")
    assert entry["verdict"] == expected
    assert f"{censored_arm} seeds [1]" in entry["reason"]


def test_missing_arms_fail_with_the_role_named() -> None:
    runs = _runs()
    with pytest.raises(ValueError, match="anti_arm 'anti_induction' has no runs"):
        decide_claims(runs[runs["variant"] != "anti_induction"])
    with pytest.raises(ValueError, match="base_arm 'natural'"):
        decide_claims(runs, {"base_arm": "natural"})


def test_the_anti_induction_claim_reports_the_base_as_reference() -> None:
    runs = _runs(anti_induction={"anti_induction_score": [0.30, 0.32, 0.34]})
    entry = _claim(decide_claims(runs), "anti_induction_near_zero")
    assert entry["verdict"] == "contradicted" and entry["arm"] == "anti_induction"
    assert entry["values"] == pytest.approx([0.30, 0.32, 0.34])
    assert entry["base_arm_values"] == pytest.approx([0.03, 0.04, 0.05])
    assert np.isclose(entry["mean"], 0.32)


def test_top_heads_that_are_not_load_bearing_in_the_base_make_claim_4_degenerate() -> None:
    """Base excess drops (0.05, 0.02, -0.01): mean 0.02, CI includes 0. Whatever the arm does,
    the base has nothing to lose, so the claim is undecided and says so."""
    runs = _runs(minimally_enriched={"ablation_excess_copy_zero": [0.05, 0.02, -0.01]},
                 induction={"ablation_excess_copy_zero": [0.04, 0.02, 0.0]})  # fmt: skip
    entry = _claim(decide_claims(runs), "ablation_hurts_base_more")
    assert entry["verdict"] == "undecided" and entry["load_bearing_in_base"] is False
    assert entry["reason"].startswith("degenerate: the base's top heads are not load-bearing")
    assert entry["base_excess_drop"]["mean"] == pytest.approx(0.02)


def test_claim_4_reports_its_precondition_seed_by_seed() -> None:
    """With each run's bootstrap CI in the table, the base's top heads are judged per seed:
    seeds 0 and 2 have their CI above 0, seed 1 not: "2 of 3", and the reason says so."""
    runs = _runs(minimally_enriched={"ablation_excess_copy_zero": [0.50, 0.55, 0.60],
                                     "ablation_excess_copy_zero_ci_low": [0.30, -0.05, 0.40],
                                     "ablation_excess_copy_zero_ci_high": [0.7, 0.9, 0.8]})  # fmt: skip
    runs["ablation_excess_copy_zero_ci_low"] = runs["ablation_excess_copy_zero_ci_low"].fillna(0.1)
    runs["ablation_excess_copy_zero_ci_high"] = runs["ablation_excess_copy_zero_ci_high"].fillna(1)
    entry = _claim(decide_claims(runs), "ablation_hurts_base_more")
    assert entry["precondition_seeds"] == "2 of 3"
    assert [s["load_bearing"] for s in entry["base_excess_by_seed"]] == [True, False, True]
    assert entry["base_excess_by_seed"][1] == {"seed": 1, "excess": 0.55, "ci_low": -0.05,
                                               "ci_high": 0.9, "load_bearing": False}  # fmt: skip
    assert entry["reason"].endswith("load-bearing (excess CI above 0) in 2 of 3 seeds")
    # Without per-run CIs nothing is claimed seed by seed.
    plain = _claim(decide_claims(_runs()), "ablation_hurts_base_more")
    assert "precondition_seeds" not in plain and "base_excess_by_seed" not in plain
