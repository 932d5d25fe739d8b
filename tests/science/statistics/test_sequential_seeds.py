"""Seeds until a verdict settles: the plan, its correction checked by simulation, the looks,
and the seeds-needed projection."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml

from ih_kedro.science.statistics.bi_induct_claims import directional_verdict
from ih_kedro.science.statistics.paired_seeds import (
    CONTRADICTED,
    SUPPORTED,
    UNDECIDED,
    paired_difference,
)
from ih_kedro.science.statistics.sequential_seeds import (
    SequentialPlan,
    decision_distance,
    obrien_fleming_boundary,
    obrien_fleming_t_boundary,
    projection,
    seeds_needed,
    sequential_verdict,
    simulate_plan,
)

N_EXPERIMENTS = 2000


def test_look_sizes_and_bonferroni_levels():
    plan = SequentialPlan(planned=5, batch=2, cap=10)
    assert plan.look_sizes == (5, 7, 9, 10)  # the last batch clipped to the cap
    assert plan.levels == pytest.approx((1 - 0.05 / 4,) * 4)
    assert SequentialPlan(planned=5, batch=2, cap=5).levels == pytest.approx((0.95,))


def test_obrien_fleming_matches_the_published_constants():
    # Two-sided alpha 0.05, equally spaced looks (Jennison & Turnbull, Table 2.3).
    assert obrien_fleming_boundary([0.5, 1.0], 0.05) == pytest.approx((2.797, 1.977), abs=2e-3)
    five = obrien_fleming_boundary(np.arange(1, 6) / 5, 0.05)
    assert five == pytest.approx((4.562, 3.226, 2.634, 2.281, 2.040), abs=3e-3)


def test_obrien_fleming_for_t_looks_is_wider_with_few_seeds_and_normal_with_many():
    few = obrien_fleming_t_boundary([5, 7, 9], 0.05)
    normal = obrien_fleming_boundary(np.array([5, 7, 9]) / 9, 0.05)
    assert all(t > z for t, z in zip(few, normal, strict=True))
    many = obrien_fleming_t_boundary([200, 400], 0.05)
    assert many == pytest.approx((2.797, 1.977), abs=0.06)
    with pytest.raises(ValueError, match="increase"):
        obrien_fleming_t_boundary([5, 5], 0.05)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"planned": 1}, "planned"), ({"planned": 5, "cap": 4}, "cap"),
     ({"planned": 3, "batch": 0}, "batch"), ({"planned": 3, "correction": "pocock"}, "correction"),
     ({"planned": 3, "alpha": 1.0}, "alpha")],
)  # fmt: skip
def test_plan_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SequentialPlan(**kwargs)


@pytest.mark.parametrize("correction", ["bonferroni", "obrien_fleming"])
def test_no_effect_decided_rate_stays_at_alpha(correction):
    """>= 1,000 experiments with no effect: the share whose CI excludes 0 at any look (a false
    decision) is at most alpha within Monte-Carlo error (2 standard errors)."""
    plan = SequentialPlan(planned=5, batch=2, cap=11, correction=correction)
    sim = simulate_plan(plan, effect=0.0, n_experiments=N_EXPERIMENTS, seed=1)
    assert sim["excludes_zero"] <= plan.alpha + 2 * sim["mc_se"]
    assert sim["above_zero"] <= plan.alpha / 2 + 2 * sim["mc_se"]


def test_uncorrected_looks_inflate_false_decisions():
    """The same simulation without correction exceeds alpha: the test above has teeth."""
    plan = SequentialPlan(planned=5, batch=2, cap=11, correction="none")
    sim = simulate_plan(plan, effect=0.0, n_experiments=N_EXPERIMENTS, seed=1)
    assert sim["excludes_zero"] > plan.alpha + 4 * sim["mc_se"]


def test_equivalence_is_not_declared_at_the_margin():
    """A true difference on the margin: 'inside the margin' is a false decision, rate <= alpha/2."""
    plan = SequentialPlan(planned=5, batch=2, cap=11)
    sim = simulate_plan(plan, effect=0.5, rule="equivalence", margin=0.5,
                        n_experiments=N_EXPERIMENTS, seed=2)  # fmt: skip
    assert sim["inside_margin"] <= plan.alpha / 2 + 2 * sim["mc_se"]


@pytest.mark.parametrize("correction", ["bonferroni", "obrien_fleming"])
def test_a_known_effect_is_found_and_saves_seeds(correction):
    plan = SequentialPlan(planned=5, batch=2, cap=11, correction=correction)
    sim = simulate_plan(plan, effect=1.5, n_experiments=N_EXPERIMENTS, seed=3)
    assert sim["above_zero"] >= 0.95
    assert sim["below_zero"] == 0.0
    assert sim["mean_seeds"] < plan.cap  # it stops early


def _directional_judge(values: pd.Series, margin: float):
    """The claims' directional rule on the first seeds, as ``sequential_verdict`` calls it."""

    def judge(seeds, level):
        diff = paired_difference(values.loc[list(seeds)], 0 * values.loc[list(seeds)], level=level)
        verdict, reason = directional_verdict(diff, +1, margin)
        return {"verdict": verdict, "estimate": diff.mean, "ci_low": diff.ci_low,
                "ci_high": diff.ci_high, "reason": reason}  # fmt: skip

    return judge


def test_sequential_verdict_stops_at_the_first_decided_look():
    # Undecided on the planned 5 seeds, a clear effect once the later seeds come in.
    values = pd.Series([0.5, -0.4, 0.6, -0.2, 0.3, 0.6, 0.5, 0.55, 0.45, 0.6, 0.5], index=range(11))
    plan = SequentialPlan(planned=5, batch=2, cap=11)
    result = sequential_verdict(_directional_judge(values, 0.1), list(range(11)), plan)
    assert result["looks"][0]["verdict"] == UNDECIDED
    assert result["status"] == "decided"
    assert result["verdict"] == SUPPORTED
    assert result["decided_at"] == len(result["looks"]) > 1
    last = result["looks"][-1]
    assert last["ci_low"] > 0 and last["level"] == pytest.approx(1 - 0.05 / 4)
    assert last["seeds"] == list(range(last["n"]))


def test_sequential_verdict_continue_and_cap():
    values = pd.Series([0.5, -0.4, 0.6, -0.2, 0.3, 0.4, -0.5], index=range(7))
    plan = SequentialPlan(planned=5, batch=2, cap=9)
    judge = _directional_judge(values, 0.1)
    going = sequential_verdict(judge, list(range(5)), plan)
    assert (going["status"], going["next_seeds_needed"]) == ("continue", 7)
    capped = sequential_verdict(judge, list(range(7)), SequentialPlan(planned=5, batch=2, cap=7))
    assert capped["status"] == "undecided_at_cap" and capped["n_used"] == 7
    none = sequential_verdict(judge, [0], plan)
    assert none["looks"] == [] and none["next_seeds_needed"] == 5


def test_a_no_effect_verdict_is_a_decision_too():
    values = pd.Series([0.01, -0.01, 0.0, 0.02, -0.02], index=range(5))
    result = sequential_verdict(_directional_judge(values, 0.1), range(5),
                                SequentialPlan(planned=5, cap=9))  # fmt: skip
    assert (result["status"], result["verdict"]) == ("decided", CONTRADICTED)


def test_seeds_needed_formula():
    # (z sd / D)^2 = (2.576 * 0.1 / 0.05)^2 = 26.5; the t quantile asks a few more.
    n = seeds_needed(0.1, 0.05, level=0.99)
    assert 27 <= n <= 32
    t_half = lambda k: __import__("scipy").stats.t.ppf(0.995, k - 1) * 0.1 / math.sqrt(k)  # noqa: E731
    assert t_half(n) < 0.05 <= t_half(n - 1)
    assert seeds_needed(0.1, 0.0, level=0.95) == math.inf
    assert seeds_needed(0.0, 0.1, level=0.95) == 2
    assert math.isnan(seeds_needed(math.nan, 0.1, level=0.95))


def test_decision_distance_by_rule():
    assert decision_distance(-0.12, "zero") == pytest.approx(0.12)
    assert decision_distance(0.03, "directional", 0.1) == pytest.approx(0.07)
    assert decision_distance(0.3, "directional", 0.1) == pytest.approx(0.3)
    assert decision_distance(-0.12, "equivalence", 0.05) == pytest.approx(0.07)
    assert decision_distance(0.02, "bound", 0.1) == pytest.approx(0.08)
    with pytest.raises(ValueError, match="margin"):
        decision_distance(0.1, "equivalence")


def test_projection_of_claim_2_as_measured():
    """Claim 2 at five seeds: -0.12 [-0.21, -0.03], margin 0.05 (issue 37): the CI must clear
    -0.05, 0.07 away; sd from the CI's half-width (0.09 = t_{.975,4} sd / sqrt 5)."""
    sd = 0.09 * math.sqrt(5) / 2.776
    values = -0.12 + sd * np.array([-1.26, -0.63, 0.0, 0.63, 1.26]) / np.std(
        [-1.26, -0.63, 0.0, 0.63, 1.26], ddof=1
    )
    result = projection(values, "equivalence", 0.05, SequentialPlan(planned=5, batch=2, cap=9))
    assert result["distance"] == pytest.approx(0.07)
    assert result["sd"] == pytest.approx(sd)
    assert 5 <= result["seeds_needed"] <= 12


def test_the_default_bi_induct_plan_and_its_simulation_are_the_documented_ones(project_root):
    """docs/bi_induct.md quotes the default plan's levels and its simulated error rate and power
    (10,000 experiments): recomputed here from conf/base, so the document cannot drift."""
    root = project_root
    conf = yaml.safe_load((root / "conf/base/parameters_bi_induct.yml").read_text())["bi_induct"]
    adaptive = conf["evaluation"]["adaptive_seeds"]
    assert adaptive["planned"] == len(conf["training"]["seeds"])
    doc = " ".join((root / "docs/bi_induct.md").read_text().split())

    def plan(correction):
        return SequentialPlan(planned=adaptive["planned"], batch=adaptive["batch"],
                              cap=adaptive["cap"], correction=correction)  # fmt: skip

    default = plan(adaptive["correction"])
    sizes = ", ".join(str(n) for n in default.look_sizes)
    levels = ", ".join(f"{level:.4f}" for level in default.levels)
    assert f"(looks at {sizes} seeds)" in doc
    assert f"levels {levels}" in doc
    assert f"**1 − α/K** = {plan('bonferroni').level(1):.4f}" in doc

    def share(correction, effect, seed):
        return simulate_plan(plan(correction), effect, n_experiments=10_000, seed=seed)

    null = {c: share(c, 0.0, 1)["excludes_zero"] for c in ("bonferroni", "obrien_fleming", "none")}
    one = {c: share(c, 1.0, 3)["excludes_zero"] for c in ("bonferroni", "obrien_fleming")}
    big = {c: share(c, 1.5, 3)["excludes_zero"] for c in ("bonferroni", "obrien_fleming")}
    quoted = (f"{null['bonferroni']:.3f} ± 0.002 of them with Bonferroni, "
              f"{null['obrien_fleming']:.3f} with an O'Brien–Fleming-type boundary")  # fmt: skip
    assert quoted in doc
    assert f"{null['none']:.3f} uncorrected" in doc
    assert (f"{one['bonferroni']:.0%} (Bonferroni) / {one['obrien_fleming']:.0%} "
            f"(O'Brien–Fleming), of 1.5 sd in {big['bonferroni']:.0%} / "
            f"{big['obrien_fleming']:.0%}").replace("%", " %") in doc  # fmt: skip
    assert null["obrien_fleming"] <= default.alpha + 2 * math.sqrt(0.05 * 0.95 / 10_000)
