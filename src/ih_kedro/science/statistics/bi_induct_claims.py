"""The five Bi-Induct claims, each decided by a rule stated before the run, with seeds as the unit.

Input: one row per run (arm, seed), :func:`ih_kedro.science.evaluation.bi_induct_runs.run_table`.
Arms are compared **paired by seed** (the same seed gives every arm the same initialisation and
the same base data stream; only the snippets differ), with the paired Student-t interval of
:func:`ih_kedro.science.statistics.paired_seeds.paired_difference` over seeds. Each claim is
judged on the **primary snippet arm** (``primary_arm``, default ``induction``, the paper's
headline arm); the other snippet arms are judged by the same rule and reported beside it. A
verdict is ``supported``, ``contradicted`` or ``undecided``; the rules (:data:`RULES`, margins in
the measure's units from ``rules``):

1. ``earlier_emergence`` - snippets make induction signatures appear earlier. ``d`` = emergence
   step of the arm minus the base's (steps; prefix matching of the best layer >= 1 head crosses
   its threshold). Directional (:func:`directional_verdict`, direction ``-1``, margin
   ``emergence_margin_steps``). A censored run (never crossed) enters with its last step, a
   bound: a verdict it could flip is withheld (undecided).
2. ``icl_not_improved`` - ICL performance is not improved. ``d`` = copy accuracy of the arm minus
   the base's (in-context copy on held-out natural text). Equivalence
   (:func:`equivalence_verdict`, margin ``icl_margin``), and only when the base arm's copy
   accuracy is above its chance level (CI over seeds above 0); else undecided.
3. ``anti_induction_near_zero`` - anti-induction scores stay near zero after anti-induction
   training. The anti-induction arm's final anti-induction score (attention, best layer >= 1
   head) over seeds against ``anti_induction_margin`` (:func:`bound_verdict`).
4. ``ablation_hurts_base_more`` - ablating the top-2 % induction heads per layer costs the base
   more ICL performance than the snippet arm. ``d`` = base minus arm excess drop (relative drop
   of copy accuracy under the top heads minus the mean drop under equal-count random heads,
   ``ablation_mode``). Directional, direction ``+1``, margin ``ablation_margin``. Not estimable
   (undecided, ``estimable: false``) unless both arms formed induction heads in every seed, and
   degenerate (undecided, ``load_bearing_in_base: false``) unless the base's own excess drop is
   above 0 (t CI over seeds): heads that no ablation misses cannot be missed "more". Where the
   runs table has each run's bootstrap CI (``ablation_excess_copy_<mode>_ci_low/high``), the
   precondition is also reported seed by seed (``base_excess_by_seed``, ``precondition_seeds``).
5. ``perplexity_cost`` - snippets cost perplexity. ``d`` = held-out loss of the arm minus the
   base's (nats per token; ``exp(d)`` is the perplexity ratio). Directional, direction ``+1``,
   margin ``perplexity_margin_nats``.

Plain numpy / pandas; no Kedro imports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ih_kedro.science.statistics.paired_seeds import (
    CONTRADICTED,
    SUPPORTED,
    UNDECIDED,
    PairedDifference,
    mean_interval,
    paired_difference,
)

DEFAULT_RULES: dict[str, Any] = {
    "base_arm": "minimally_enriched",
    "primary_arm": "induction",
    "anti_arm": "anti_induction",
    "level": 0.95,
    "emergence_margin_steps": 100.0,
    "icl_margin": 0.05,
    "anti_induction_margin": 0.1,
    "ablation_mode": "zero",
    "ablation_margin": 0.1,
    "perplexity_margin_nats": 0.01,
}
"""Arms and margins of the rules; the pipeline's ``bi_induct.evaluation.claims`` overrides them."""

RULES = {
    "directional": (
        "supported iff the paired t CI of d lies entirely on the claimed side of 0; contradicted "
        "iff it lies entirely on the other side, or inside [-margin, margin] (no effect worth the "
        "name); otherwise undecided (fewer than 2 seeds: undecided)"
    ),
    "equivalence": (
        "supported iff the paired t CI of d lies inside [-margin, margin]; contradicted iff it "
        "lies entirely above +margin or entirely below -margin; otherwise undecided"
    ),
    "bound": (
        "supported iff the t CI of the mean over seeds lies entirely below the margin; "
        "contradicted iff it lies entirely above it; otherwise undecided"
    ),
}

CLAIMS = (
    ("earlier_emergence", "Snippets make induction signatures appear earlier."),
    ("icl_not_improved", "ICL performance is not improved (neutral within the margin)."),
    ("anti_induction_near_zero", "Anti-induction scores stay near zero after anti-induction "
     "training."),
    ("ablation_hurts_base_more", "Ablating the top-2% induction heads per layer costs the base "
     "more ICL performance than the snippet arm."),
    ("perplexity_cost", "Snippets cost perplexity."),
)  # fmt: skip

TABLE_COLUMNS = ["claim", "arm", "verdict", "estimate", "ci_low", "ci_high", "margin", "units",
                 "n_seeds", "reason"]  # fmt: skip


def _fmt(value: float) -> str:
    return "nan" if not math.isfinite(value) else f"{value:.4g}"


def _ci(diff: PairedDifference) -> str:
    return f"{_fmt(diff.mean)} [{_fmt(diff.ci_low)}, {_fmt(diff.ci_high)}]"


def directional_verdict(diff: PairedDifference, direction: int, margin: float) -> tuple[str, str]:
    """Directional rule (:data:`RULES`): the claim is ``d > 0`` (``direction = +1``) or
    ``d < 0`` (``-1``); ``margin`` is the smallest effect that counts, in d's units."""
    if diff.n < 2 or not math.isfinite(diff.ci_low):
        return UNDECIDED, f"fewer than 2 paired seeds (n = {diff.n}): no interval"
    low, high = (diff.ci_low, diff.ci_high) if direction > 0 else (-diff.ci_high, -diff.ci_low)
    side = "above" if direction > 0 else "below"
    if low > 0:
        return SUPPORTED, f"d = {_ci(diff)}: the CI lies {side} 0"
    if high < 0:
        return CONTRADICTED, f"d = {_ci(diff)}: the CI lies on the other side of 0"
    if -margin <= diff.ci_low and diff.ci_high <= margin:
        return CONTRADICTED, f"d = {_ci(diff)}: the CI lies inside +/-{margin:g} (no effect)"
    return UNDECIDED, f"d = {_ci(diff)}: the CI includes 0 and reaches beyond +/-{margin:g}"


def equivalence_verdict(diff: PairedDifference, margin: float) -> tuple[str, str]:
    """Equivalence rule (:data:`RULES`): "no effect beyond ``margin``" in d's units."""
    if diff.n < 2 or not math.isfinite(diff.ci_low):
        return UNDECIDED, f"fewer than 2 paired seeds (n = {diff.n}): no interval"
    if -margin <= diff.ci_low and diff.ci_high <= margin:
        return SUPPORTED, f"d = {_ci(diff)}: the CI lies inside +/-{margin:g}"
    if diff.ci_low > margin:
        return CONTRADICTED, f"d = {_ci(diff)}: the CI lies above +{margin:g} (improved)"
    if diff.ci_high < -margin:
        return CONTRADICTED, f"d = {_ci(diff)}: the CI lies below -{margin:g} (worse)"
    return UNDECIDED, f"d = {_ci(diff)}: the CI reaches beyond +/-{margin:g}"


def bound_verdict(values: Sequence[float], margin: float, level: float) -> dict[str, Any]:
    """Bound rule (:data:`RULES`) on one arm's values over seeds: is the mean below ``margin``?"""
    mean, low, high = mean_interval(values, level=level)
    text = f"mean {_fmt(mean)} [{_fmt(low)}, {_fmt(high)}]"
    if not math.isfinite(low):
        verdict, reason = UNDECIDED, f"{text}: fewer than 2 seeds, no interval"
    elif high < margin:
        verdict, reason = SUPPORTED, f"{text}: the CI lies below {margin:g}"
    elif low > margin:
        verdict, reason = CONTRADICTED, f"{text}: the CI lies above {margin:g}"
    else:
        verdict, reason = UNDECIDED, f"{text}: the CI includes {margin:g}"
    return {"verdict": verdict, "reason": reason, "mean": mean, "ci_low": low, "ci_high": high,
            "values": [float(v) for v in values]}  # fmt: skip


def _by_seed(runs: pd.DataFrame, arm: str, column: str) -> pd.Series:
    rows = runs[runs["variant"] == arm]
    return pd.Series(rows[column].astype(float).to_numpy(), index=rows["seed"].astype(int))


def _compare(runs: pd.DataFrame, arm: str, base: str, column: str, level: float,
             base_minus_arm: bool = False) -> PairedDifference:  # fmt: skip
    a, b = _by_seed(runs, arm, column), _by_seed(runs, base, column)
    return (
        paired_difference(b, a, level=level)
        if base_minus_arm
        else paired_difference(a, b, level=level)
    )


def _censoring_guard(runs: pd.DataFrame, arm: str, base: str, verdict: str, reason: str):
    """Withhold a claim-1 verdict a censored emergence step could flip (module docstring)."""
    censored = runs[runs["emergence_censored"].fillna(False).astype(bool)]
    arm_cens = sorted(censored.loc[censored["variant"] == arm, "seed"].astype(int))
    base_cens = sorted(censored.loc[censored["variant"] == base, "seed"].astype(int))
    if not arm_cens and not base_cens:
        return verdict, reason
    note = f"; censored at the budget: {arm} seeds {arm_cens}, {base} seeds {base_cens}"
    # Base censored: its true step is later, so d is over-estimated: "earlier" stays safe.
    # Arm censored: its true step is later, so d is under-estimated: "later" stays safe.
    safe = (verdict == SUPPORTED and not arm_cens) or (verdict == CONTRADICTED and not base_cens)
    if safe:
        return verdict, reason + note
    return UNDECIDED, reason + note + " (a bound, which could flip the verdict)"


def _judge_arm(claim: str, runs: pd.DataFrame, arm: str, rules: Mapping[str, Any]) -> dict:
    base, level = str(rules["base_arm"]), float(rules["level"])
    extra: dict[str, Any] = {}
    if claim == "earlier_emergence":
        diff = _compare(runs, arm, base, "emergence_step", level)
        margin, units = float(rules["emergence_margin_steps"]), "steps"
        verdict, reason = directional_verdict(diff, -1, margin)
        verdict, reason = _censoring_guard(runs, arm, base, verdict, reason)
    elif claim == "icl_not_improved":
        diff = _compare(runs, arm, base, "copy_accuracy", level)
        margin, units = float(rules["icl_margin"]), "copy accuracy (fraction)"
        verdict, reason = equivalence_verdict(diff, margin)
        gain = runs.loc[runs["variant"] == base, "copy_gain"].astype(float)
        above = mean_interval(gain, level=level)
        extra["base_copy_gain"] = {"mean": above[0], "ci_low": above[1], "ci_high": above[2]}
        if not above[1] > 0:
            verdict = UNDECIDED
            reason = (f"the base arm's copy accuracy is not above its chance level (gain "
                      f"{_fmt(above[0])} [{_fmt(above[1])}, {_fmt(above[2])}]); " + reason)  # fmt: skip
    elif claim == "ablation_hurts_base_more":
        column = f"ablation_excess_copy_{rules['ablation_mode']}"
        diff = _compare(runs, arm, base, column, level, base_minus_arm=True)
        margin, units = float(rules["ablation_margin"]), "excess relative drop of copy accuracy"
        verdict, reason = directional_verdict(diff, +1, margin)
        unformed = {a: sorted(runs.loc[(runs["variant"] == a) & ~runs["heads_formed"].astype(bool),
                                       "seed"].astype(int)) for a in (base, arm)}  # fmt: skip
        extra["estimable"] = not any(unformed.values())
        # The base's top heads must be load-bearing at all (excess drop above 0 over seeds):
        # otherwise "costs the base more" compares two nothings (a degenerate comparison).
        bearing = mean_interval(_by_seed(runs, base, column), level=level)
        extra["base_excess_drop"] = {
            "mean": bearing[0],
            "ci_low": bearing[1],
            "ci_high": bearing[2],
        }
        extra["load_bearing_in_base"] = bool(bearing[1] > 0)
        # Claim 4's precondition seed by seed (each run's bootstrap CI over its copy probes).
        seeds = _base_seed_precondition(runs, base, column)
        if seeds:
            extra["base_excess_by_seed"] = seeds
            held = [s["seed"] for s in seeds if s["load_bearing"]]
            extra["precondition_seeds"] = f"{len(held)} of {len(seeds)}"
        if not extra["estimable"]:
            verdict = UNDECIDED
            reason = (f"not estimable: no induction heads formed in {base} seeds {unformed[base]}"
                      f", {arm} seeds {unformed[arm]}; " + reason)  # fmt: skip
        elif not extra["load_bearing_in_base"]:
            verdict = UNDECIDED
            reason = (f"degenerate: the base's top heads are not load-bearing (excess drop "
                      f"{_fmt(bearing[0])} [{_fmt(bearing[1])}, {_fmt(bearing[2])}], CI not above "
                      "0), so there is nothing for the snippet arm to lose less of; " + reason)  # fmt: skip
        if "precondition_seeds" in extra:
            reason += (f"; the base's top heads are load-bearing (excess CI above 0) in "
                       f"{extra['precondition_seeds']} seeds")  # fmt: skip
    else:  # perplexity_cost
        diff = _compare(runs, arm, base, "loss", level)
        margin, units = float(rules["perplexity_margin_nats"]), "nats per token (loss)"
        verdict, reason = directional_verdict(diff, +1, margin)
        extra["perplexity_ratio"] = math.exp(diff.mean) if math.isfinite(diff.mean) else math.nan
    return {"arm": arm, "verdict": verdict, "reason": reason, "margin": margin, "units": units,
            "difference": diff.to_dict(), **extra}  # fmt: skip


def _base_seed_precondition(runs: pd.DataFrame, base: str, column: str) -> list[dict[str, Any]]:
    """Per base seed: its excess drop, the run's bootstrap CI and whether the CI lies above 0;
    empty when the table has no per-run CI (``<column>_ci_low`` / ``_ci_high``)."""
    low, high = f"{column}_ci_low", f"{column}_ci_high"
    if low not in runs or high not in runs:
        return []
    rows = runs[runs["variant"] == base].sort_values("seed")
    return [{"seed": int(r["seed"]), "excess": float(r[column]), "ci_low": float(r[low]),
             "ci_high": float(r[high]), "load_bearing": bool(float(r[low]) > 0)}
            for _, r in rows.iterrows()]  # fmt: skip


def decide_claims(runs: pd.DataFrame, rules: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """All five claims from the per-run table (see the module docstring for the rules).

    Args:
        runs: one row per run with ``variant, seed, emergence_step, emergence_censored,
            copy_accuracy, copy_gain, anti_induction_score, heads_formed, loss`` and
            ``ablation_excess_copy_<mode>``.
        rules: overrides of :data:`DEFAULT_RULES`; ``snippet_arms`` (default: every arm but the
            base) lists the arms reported beside the primary one.

    Returns:
        ``{"rules": ..., "claims": [{id, statement, rule, verdict, reason, ...}, ...]}``; the
        top-level verdict of each claim is the primary arm's.

    Raises:
        ValueError: the base, primary or anti-induction arm has no runs.
    """
    rules = {**DEFAULT_RULES, **dict(rules or {})}
    arms = sorted(set(runs["variant"]))
    base, primary, anti = str(rules["base_arm"]), str(rules["primary_arm"]), str(rules["anti_arm"])
    for role, arm in (("base_arm", base), ("primary_arm", primary), ("anti_arm", anti)):
        if arm not in arms:
            raise ValueError(f"bi_induct claims: {role} {arm!r} has no runs (arms: {arms})")
    others = [a for a in (rules.get("snippet_arms") or arms) if a not in (base, primary)]
    claims = []
    for claim, statement in CLAIMS:
        if claim == "anti_induction_near_zero":
            level, margin = float(rules["level"]), float(rules["anti_induction_margin"])
            judged = bound_verdict(
                _by_seed(runs, anti, "anti_induction_score").tolist(), margin, level
            )
            reference = _by_seed(runs, base, "anti_induction_score")
            entry = {"arm": anti, **judged, "margin": margin, "rule": RULES["bound"],
                     "units": "attention (anti-induction score, best layer >= 1 head)",
                     "base_arm_values": reference.tolist()}  # fmt: skip
        else:
            entry = _judge_arm(claim, runs, primary, rules)
            entry["rule"] = RULES["equivalence" if claim == "icl_not_improved" else "directional"]
            entry["other_arms"] = {a: _judge_arm(claim, runs, a, rules) for a in others}
        claims.append({"id": claim, "statement": statement, **entry})
    return {"rules": rules, "base_arm": base, "claims": claims}


def claims_table(decided: Mapping[str, Any]) -> pd.DataFrame:
    """One row per (claim, arm) of :func:`decide_claims`: the README table (:data:`TABLE_COLUMNS`)."""
    rows = []
    for claim in decided["claims"]:
        entries = [claim, *claim.get("other_arms", {}).values()]
        for entry in entries:
            diff = entry.get("difference")
            estimate = diff if diff is not None else entry
            rows.append({
                "claim": claim["id"], "arm": entry["arm"], "verdict": entry["verdict"],
                "estimate": estimate.get("mean"), "ci_low": estimate.get("ci_low"),
                "ci_high": estimate.get("ci_high"), "margin": entry["margin"],
                "units": claim.get("units", entry.get("units")) if entry is claim
                else entry["units"],
                "n_seeds": diff["n"] if diff is not None else len(entry.get("values", [])),
                "reason": entry["reason"],
            })  # fmt: skip
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


__all__ = [
    "CLAIMS",
    "DEFAULT_RULES",
    "RULES",
    "TABLE_COLUMNS",
    "bound_verdict",
    "claims_table",
    "decide_claims",
    "directional_verdict",
    "equivalence_verdict",
]
