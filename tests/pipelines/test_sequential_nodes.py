"""The claims nodes with ``adaptive_seeds``: looks in claims.json / verdicts.json, the next look
and its command, and the sequential verdict adopted when enabled."""

from __future__ import annotations

import pytest

from ih_kedro.pipelines.bi_induct.claims_nodes import decide_bi_induct_claims
from ih_kedro.pipelines.markov.report_nodes import judge
from tests.pipelines.test_markov_nodes import _FRONTIER_LEVEL, _runs_table
from tests.science.statistics.test_sequential_claims import ARM, _runs

ADAPTIVE = {"enabled": True, "planned": 5, "batch": 2, "cap": 9}


def _claim(claims: dict, claim_id: str) -> dict:
    return next(c for c in claims["claims"] if c["id"] == claim_id)


def test_bi_induct_claims_record_looks_and_the_next_look():
    claims, table = decide_bi_induct_claims(_runs(5), {"adaptive_seeds": ADAPTIVE})
    icl = _claim(claims, "icl_not_improved")
    assert icl["verdict"] == "undecided" and icl["sequential"]["status"] == "continue"
    assert icl["reason"].startswith("sequential, continue at look 1 (5 seeds")
    assert "fixed_seed_verdict" in icl
    following = claims["sequential"]["next_look"]
    assert following["add_seeds"] == [5, 6]
    assert following["command"] == (
        "kedro run --pipeline=bi_induct --params='bi_induct.training.seeds=[0,1,2,3,4,5,6],"
        "bi_induct.training.seed_cells=[{seeds: [5, 6], labels: [induction, "
        "minimally_enriched]}]'"
    )  # the anti-induction arm's claims are decided: it trains no new seed
    assert claims["sequential"]["plan"]["look_sizes"] == [5, 7, 9]
    assert table.set_index(["claim", "arm"]).loc[("icl_not_improved", ARM), "verdict"] == (
        "undecided"
    )
    assert "sequential" not in _claim(claims, "perplexity_cost")


def test_bi_induct_claims_adaptive_off_or_absent():
    fixed, _ = decide_bi_induct_claims(_runs(9), {})
    assert "sequential" not in fixed
    recorded, _ = decide_bi_induct_claims(
        _runs(9), {"adaptive_seeds": {**ADAPTIVE, "enabled": False}}
    )
    icl = _claim(recorded, "icl_not_improved")
    assert icl["verdict"] == _claim(fixed, "icl_not_improved")["verdict"]
    assert icl["sequential"]["verdict"] == "contradicted"
    assert recorded["sequential"]["next_look"] is None


def test_markov_verdicts_record_looks():
    conditions = {"adaptive_seeds": {"enabled": True, "planned": 3, "batch": 2, "cap": 5}}
    labels = {"data_variants": [{"variant": "markov", "label": f"{p}.{lv}",
                                 "options": {"process": p, "level": lv}}
                                for p, lv in _runs_table()[["process", "level"]].drop_duplicates()
                                .itertuples(index=False)]}  # fmt: skip
    verdicts = judge(_runs_table(), _FRONTIER_LEVEL, conditions, labels)
    for verdict in verdicts["claims"].values():
        looks = verdict["sequential"]["looks"]
        assert looks[0]["n"] == 3 and looks[0]["level"] == pytest.approx(1 - 0.05 / 2)
        assert verdict["verdict"] == verdict["sequential"]["verdict"]
    following = verdicts["sequential"]["next_look"]
    if following is not None:
        assert following["command"].startswith("kedro run --pipeline=markov --params='markov")
        for entry in following["seed_cells"]:
            assert all("." in label for label in entry["labels"])  # data_variants labels
    assert "sequential" not in judge(_runs_table(), _FRONTIER_LEVEL, {})
