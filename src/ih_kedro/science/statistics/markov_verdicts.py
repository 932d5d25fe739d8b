"""Conditions and verdicts of the ``markov`` experiment (Experiment 3).

A **condition** is one designed process (marginal, local dependency, categoriality) at one
repetition level (``high`` or ``near_frontier``), trained with one or more seeds. Per condition
(:func:`condition_table`):

- ``formed``: ``yes`` (an induction head formed within the budget in every seed: status
  ``emerged`` or ``left_censored``), ``no`` (in no seed: ``censored``), ``mixed`` (some seeds),
  ``unknown`` (any seed's estimate failed and none formed), read at the emergence table's
  threshold;
- ``s_star``: the median emergence step of the seeds that formed, with ``ci_low`` / ``ci_high``
  the envelope (min / max) of their bootstrap CIs (one seed: its CI);
- ``formation_score``: the threshold-free formation score
  (:func:`ih_kedro.science.telemetry.formation.formation_score`, the best head's curve averaged
  over the budget, in the metric's units) averaged over seeds, with its Student-t interval over
  seeds, and ``n_formed_at_<t>`` the seeds formed at each threshold ``t``.

The study's three claims (:data:`CLAIMS`) are judged on the **runs** table, conditions paired by
seed (:mod:`ih_kedro.science.statistics.paired_seeds`), each ``supported``, ``contradicted`` or
``undecided`` by the rules of :data:`RULES`, built on :data:`PAIRED_RULE`: a verdict needs every
seed to agree at the threshold *and* the paired difference of formation scores to be away from 0.
:func:`judge_claims` gives the verdict at a decision threshold with the verdicts at the other
thresholds beside it (:func:`threshold_robustness_table`), so a verdict that hangs on the
threshold shows.

Plain pandas; no Kedro imports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ih_kedro.science.statistics.paired_seeds import (
    CONTRADICTED,
    PAIRED_RULE,
    SUPPORTED,
    UNDECIDED,
    judge_pair,
    mean_interval,
)

# One reading of the emergence table's status, shared with the pareto frontier.
from ih_kedro.science.statistics.pareto_frontier import FORMED_STATUSES, NOT_FORMED_STATUSES
from ih_kedro.science.telemetry.formation import DEFAULT_THRESHOLDS, formed_column

UNDECIDABLE = UNDECIDED  # the name callers import
VERDICTS = (SUPPORTED, CONTRADICTED, UNDECIDABLE)

DECISION_THRESHOLD = 0.4
DEFAULT_FLOOR = 0.2
"""Claim 2 without a no-LD control: the formation score (metric units) T's CI must clear."""

CLAIMS = {
    "ld_necessary": "local dependency is necessary for induction heads to form",
    "ld_sufficient_at_high_repetition": (
        "with high repetition, local dependency alone is sufficient"
    ),
    "cat_and_zipf_needed_near_frontier": (
        "near the repetition frontier, induction heads also need categoriality and a Zipfian "
        "marginal"
    ),
}

_RULES = {
    "ld_necessary": (
        "At each level with processes without local dependency, T = the process with local "
        "dependency of highest mean formation score and K = each process without it, judged by "
        "the paired rule: supported if every pair is, contradicted if any pair is, else "
        "undecided."
    ),
    "ld_sufficient_at_high_repetition": (
        "At the high level, T = each process with local dependency only (no CAT, marginal not "
        "Zipf): supported if T formed in every seed and the paired rule supports T over K = the "
        "best process without local dependency there (no such K: T's formation-score CI over "
        "seeds lies above the floor {floor:g}); contradicted if T formed in no seed while the "
        "paired rule supports another process at that level over T; else undecided."
    ),
    "cat_and_zipf_needed_near_frontier": (
        "Near the frontier, T = the LD + CAT + Zipf process against K = LD + Zipf without CAT "
        "(part cat_needed) and K = LD + CAT with another marginal (part zipf_needed), each by "
        "the paired rule: contradicted if any part is, supported if both are, else undecided."
    ),
}
RULES = {name: text.format(floor=DEFAULT_FLOOR) for name, text in _RULES.items()}
"""``claim -> rule`` (one sentence each, at the default floor), for the docs to quote."""

_BASE_COLUMNS = [
    "condition", "process", "level", "marginal", "local_dependency", "categorical", "frequency",
    "reliability", "n_seeds", "n_formed", "formed", "formed_share", "s_star", "ci_low", "ci_high",
    "status", "seed_statuses", "budget_steps",
    "formation_score", "formation_score_ci_low", "formation_score_ci_high",
]  # fmt: skip


def condition_columns(thresholds: Sequence[float] = DEFAULT_THRESHOLDS) -> list[str]:
    """The columns of :func:`condition_table` at these thresholds (before ``properties``)."""
    return _BASE_COLUMNS + [f"n_{formed_column(t)}" for t in thresholds]


CONDITION_COLUMNS = condition_columns()


def _formed(statuses: list[str]) -> str:
    formed = sum(s in FORMED_STATUSES for s in statuses)
    not_formed = sum(s in NOT_FORMED_STATUSES for s in statuses)
    if statuses and formed == len(statuses):
        return "yes"
    if statuses and not_formed == len(statuses):
        return "no"
    if formed:
        return "mixed"
    return "unknown"


def _formation_columns(
    group: pd.DataFrame, thresholds: Sequence[float], level: float
) -> dict[str, float]:
    """Mean formation score over seeds with its t interval, and the seeds formed at each
    threshold; NaN where the runs table lacks the column."""
    if "formation_score" in group:
        scores = pd.to_numeric(group["formation_score"], errors="coerce")
        mean, low, high = mean_interval(scores, level=level)
    else:
        mean = low = high = math.nan
    out: dict[str, float] = {
        "formation_score": mean,
        "formation_score_ci_low": low,
        "formation_score_ci_high": high,
    }
    for threshold in thresholds:
        column = formed_column(threshold)
        formed = group[column].astype("boolean").eq(True).fillna(False) if column in group else None
        out[f"n_{column}"] = math.nan if formed is None else int(formed.sum())
    return out


def condition_table(
    runs: pd.DataFrame,
    properties: pd.DataFrame | None = None,
    *,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    level: float = 0.95,
) -> pd.DataFrame:
    """Aggregate runs into one row per (process, level), columns :func:`condition_columns`.

    ``runs`` has one row per training run: ``process, level, seed, status, step, ci_low,
    ci_high, last_step`` plus the process descriptors ``marginal, local_dependency,
    categorical`` and the level's ``frequency, reliability``; optionally ``formation_score``
    and ``formed_at_<t>`` per threshold (absent: those outputs are NaN). Seeds with an unknown
    score are left out of its mean and interval (``level``; one seed: no interval).
    ``properties`` (one row per ``process``) adds the achieved process properties as columns.
    """
    needed = {"process", "level", "seed", "status", "step", "ci_low", "ci_high", "last_step"}
    missing = sorted(needed - set(runs.columns))
    if missing:
        raise ValueError(f"markov conditions: run table lacks columns {missing}")
    rows = []
    for (process, lvl), group in runs.groupby(["process", "level"], sort=False):
        statuses = [str(s) for s in group["status"]]
        formed_rows = group[[s in FORMED_STATUSES for s in statuses]]
        steps = pd.to_numeric(formed_rows["step"], errors="coerce").dropna()
        first = group.iloc[0]
        formed = _formed(statuses)
        rows.append(
            {
                "condition": f"{process}@{lvl}",
                "process": process,
                "level": lvl,
                "marginal": first.get("marginal"),
                "local_dependency": bool(first.get("local_dependency")),
                "categorical": bool(first.get("categorical")),
                "frequency": float(first.get("frequency", math.nan)),
                "reliability": float(first.get("reliability", math.nan)),
                "n_seeds": int(len(group)),
                "n_formed": int(len(formed_rows)),
                "formed": formed,
                "formed_share": float(len(formed_rows) / len(group)),
                "s_star": float(steps.median()) if len(steps) else math.nan,
                "ci_low": float(pd.to_numeric(formed_rows["ci_low"]).min())
                if len(steps)
                else math.nan,
                "ci_high": float(pd.to_numeric(formed_rows["ci_high"]).max())
                if len(steps)
                else math.nan,
                "status": {"yes": "emerged", "no": "censored"}.get(formed, formed),
                "seed_statuses": ";".join(
                    f"s{int(seed)}:{status}"
                    for seed, status in zip(group["seed"], statuses, strict=True)
                ),
                "budget_steps": int(pd.to_numeric(group["last_step"]).max()),
                **_formation_columns(group, thresholds, level),
            }
        )
    table = pd.DataFrame(rows, columns=condition_columns(thresholds))
    if properties is not None and not properties.empty:
        extra = properties.drop(
            columns=[c for c in ("marginal", "local_dependency", "categorical") if c in properties]
        )
        table = table.merge(extra, on="process", how="left")
    return table


# --------------------------------------------------------------------------------------------
# The paired rule on two conditions
# --------------------------------------------------------------------------------------------
def _number(value: Any) -> float | None:
    """A JSON-safe number: None for NaN."""
    return None if pd.isna(value) else float(value)


def _by_seed(runs: pd.DataFrame, condition: str, threshold: float) -> pd.DataFrame:
    """``score`` and ``formed`` (at ``threshold``) of one condition's runs, index = seed."""
    group = runs[runs["condition"] == condition].set_index("seed")
    return pd.DataFrame(
        {
            "score": pd.to_numeric(group["formation_score"], errors="coerce"),
            "formed": group[formed_column(threshold)].astype("boolean"),
        }
    )


def compare_conditions(
    runs: pd.DataFrame, treatment: str, control: str, threshold: float, *, level: float = 0.95
) -> dict[str, Any]:
    """:data:`PAIRED_RULE` on ``treatment`` (T) against ``control`` (K), both ``process@level``
    conditions of a runs table with ``condition``, ``seed``, ``formation_score`` and
    ``formed_at_<threshold>`` columns: :func:`judge_pair`'s dict (per-seed rows, the paired
    difference of formation scores in metric units with its CI, verdict, reason) with the two
    conditions and the threshold, the reason prefixed by the pair."""
    judged = judge_pair(
        _by_seed(runs, treatment, threshold),
        _by_seed(runs, control, threshold),
        level=level,
        threshold=threshold,
    )
    judged["reason"] = f"{treatment} (T) vs {control} (K): {judged['reason']}"
    return {"treatment": treatment, "control": control, "threshold": float(threshold), **judged}


# --------------------------------------------------------------------------------------------
# The claims
# --------------------------------------------------------------------------------------------
def _conditions(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per condition, in order of appearance, with its mean formation score."""
    rows = []
    for (process, lvl), group in runs.groupby(["process", "level"], sort=False):
        first = group.iloc[0]
        rows.append(
            {
                "condition": f"{process}@{lvl}",
                "process": process,
                "level": lvl,
                "marginal": first["marginal"],
                "local_dependency": bool(first["local_dependency"]),
                "categorical": bool(first["categorical"]),
                "score": pd.to_numeric(group["formation_score"], errors="coerce").mean(),
            }
        )
    columns = ["condition", "process", "level", "marginal", "local_dependency", "categorical"]
    return pd.DataFrame(rows, columns=[*columns, "score"])


def _best(conditions: pd.DataFrame) -> str:
    """The condition with the highest mean formation score (NaN last, ties: first)."""
    scores = conditions["score"].astype(float).fillna(-math.inf)
    return str(conditions["condition"].iloc[int(scores.to_numpy().argmax())])


def _cell(runs: pd.DataFrame, condition: str, threshold: float) -> dict[str, Any]:
    group = runs[runs["condition"] == condition]
    formed = group[formed_column(threshold)]
    first = group.iloc[0]
    return {
        "condition": condition,
        "process": first["process"],
        "level": first["level"],
        "n_seeds": int(len(group)),
        "n_formed": int(formed.eq(True).fillna(False).sum()),
        "n_unobserved": int(formed.isna().sum()),
        "formation_score": _number(pd.to_numeric(group["formation_score"], errors="coerce").mean()),
    }


def _result(verdict: str, reason: str, comparisons=(), conditions=()) -> dict[str, Any]:
    """One judged piece: a verdict, its reason, the comparisons and the conditions behind it."""
    return {
        "verdict": verdict,
        "reason": reason,
        "comparisons": list(comparisons),
        "conditions": list(conditions),
    }


def _of_comparison(comparison: dict[str, Any]) -> dict[str, Any]:
    pair = [comparison["treatment"], comparison["control"]]
    return _result(comparison["verdict"], comparison["reason"], [comparison], pair)


def _combine(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Contradicted if any piece is, supported if all are, else undecided; the reason and
    conditions are those of the pieces that decide (all of them when supported)."""
    if not results:
        return _result(UNDECIDABLE, "nothing to judge")
    verdicts = [r["verdict"] for r in results]
    if CONTRADICTED in verdicts:
        verdict = CONTRADICTED
    elif all(v == SUPPORTED for v in verdicts):
        verdict = SUPPORTED
    else:
        verdict = UNDECIDABLE
    deciding = [r for r in results if r["verdict"] == verdict]
    conditions = list(dict.fromkeys(c for r in deciding for c in r["conditions"]))
    return _result(
        verdict,
        "; ".join(r["reason"] for r in deciding),
        [c for r in results for c in r["comparisons"]],
        conditions,
    )


def _ld_necessary(runs: pd.DataFrame, conditions: pd.DataFrame, threshold, level) -> dict:
    without = conditions[~conditions["local_dependency"]]
    if without.empty:
        return _result(UNDECIDABLE, "no condition without local dependency")
    results = []
    for lvl, controls in without.groupby("level", sort=False):
        with_ld = conditions[conditions["local_dependency"] & (conditions["level"] == lvl)]
        if with_ld.empty:
            reason = f"no condition with local dependency at level {lvl!r}"
            results.append(_result(UNDECIDABLE, reason, conditions=controls["condition"]))
            continue
        reference = _best(with_ld)
        results += [
            _of_comparison(compare_conditions(runs, reference, k, threshold, level=level))
            for k in controls["condition"]
        ]
    return _combine(results)


def _floor_check(runs, condition: str, threshold, level, floor: float) -> dict[str, Any]:
    """Claim 2 without a no-LD control: T formed in every seed, score CI above ``floor``."""
    seeds = _by_seed(runs, condition, threshold)
    mean, low, high = mean_interval(seeds["score"], level=level)
    interval = {"condition": condition, "mean": _number(mean), "ci_low": _number(low),
                "ci_high": _number(high), "level": level, "floor": floor}  # fmt: skip
    ci = f"[{low:.3g}, {high:.3g}]"
    formed = seeds["formed"].eq(True).fillna(False)
    if formed.all() and low > floor:
        reason = f"{condition} formed in every seed at {threshold:g}, score CI {ci} above {floor:g}"
        verdict = SUPPORTED
    else:
        failed = [
            f"s{float(s):g} {'<NA>' if pd.isna(f) else 'not formed'}"
            for s, f in seeds["formed"][~formed].items()
        ]
        why = [f"not formed in every seed ({', '.join(failed)})"] if failed else []
        if math.isnan(low):
            why.append("one seed: no CI")
        elif not low > floor:
            why.append(f"score CI {ci} not above {floor:g}")
        reason = f"{condition}, no control without local dependency: " + "; ".join(why)
        verdict = UNDECIDABLE
    result = _result(verdict, reason, conditions=[condition])
    result["score_interval"] = interval
    return result


def _sufficient_one(runs, at_high: pd.DataFrame, minimal: str, threshold, level, floor) -> dict:
    """Claim 2 for one LD-only condition ``minimal``."""
    no_ld = at_high[~at_high["local_dependency"]]
    if no_ld.empty:
        result = _floor_check(runs, minimal, threshold, level, floor)
    else:
        comparison = compare_conditions(runs, minimal, _best(no_ld), threshold, level=level)
        result = _of_comparison(comparison)
        if result["verdict"] == CONTRADICTED:  # K formed as fast: not a verdict on this claim
            result["verdict"] = UNDECIDABLE
    if result["verdict"] == SUPPORTED:
        return result
    formed = _by_seed(runs, minimal, threshold)["formed"]
    if len(formed) and formed.eq(False).fillna(False).all():
        others = [c for c in at_high["condition"] if c != minimal]
        ahead = [compare_conditions(runs, o, minimal, threshold, level=level) for o in others]
        result["comparisons"] += ahead
        winners = [c for c in ahead if c["verdict"] == SUPPORTED]
        if winners:
            result["verdict"] = CONTRADICTED
            result["reason"] = f"{minimal} formed in no seed at {threshold:g}, others did: " + (
                "; ".join(c["reason"] for c in winners)
            )
            result["conditions"] = [minimal] + [c["treatment"] for c in winners]
        else:
            result["reason"] += (
                f"; {minimal} formed in no seed, but no other process at its level is ahead of "
                "it by the paired rule"
            )
    return result


def _ld_sufficient(runs, conditions: pd.DataFrame, high: str, threshold, level, floor) -> dict:
    at_high = conditions[conditions["level"] == high]
    minimal = at_high[
        at_high["local_dependency"] & ~at_high["categorical"] & (at_high["marginal"] != "zipf")
    ]
    if minimal.empty:
        return _result(
            UNDECIDABLE,
            f"no condition at level {high!r} with local dependency only (no CAT, no Zipf)",
        )
    pieces = [
        _sufficient_one(runs, at_high, m, threshold, level, floor) for m in minimal["condition"]
    ]
    result = _combine(pieces)
    intervals = [p["score_interval"] for p in pieces if "score_interval" in p]
    if intervals:  # no no-LD control at that level: the floor was used
        result["score_intervals"] = intervals
    return result


def _needed(runs, full: str, ablated: pd.DataFrame, what: str, frontier, threshold, level):
    if ablated.empty:
        return _result(UNDECIDABLE, f"no condition without {what} at level {frontier!r}")
    return _combine(
        [
            _of_comparison(compare_conditions(runs, full, k, threshold, level=level))
            for k in ablated["condition"]
        ]
    )


def _cat_zipf_needed(runs, conditions: pd.DataFrame, frontier: str, threshold, level) -> dict:
    near = conditions[(conditions["level"] == frontier) & conditions["local_dependency"]]
    zipf = near["marginal"] == "zipf"
    full = near[near["categorical"] & zipf]
    if full.empty:
        reason = f"no full process (LD + CAT + Zipf) at level {frontier!r}"
        parts = {"cat_needed": _result(UNDECIDABLE, reason),
                 "zipf_needed": _result(UNDECIDABLE, reason)}  # fmt: skip
    else:
        best = _best(full)
        parts = {
            "cat_needed": _needed(runs, best, near[~near["categorical"] & zipf],
                                  "categoriality", frontier, threshold, level),
            "zipf_needed": _needed(runs, best, near[near["categorical"] & ~zipf],
                                   "a Zipfian marginal", frontier, threshold, level),
        }  # fmt: skip
    result = _combine(list(parts.values()))
    result["reason"] = "; ".join(f"{key}: {part['reason']}" for key, part in parts.items())
    result["parts"] = parts
    return result


# --------------------------------------------------------------------------------------------
# judge_claims and its tables
# --------------------------------------------------------------------------------------------
def _check_runs(runs: pd.DataFrame, thresholds: Sequence[float], levels: Sequence[str]) -> None:
    needed = ["process", "level", "seed", "marginal", "local_dependency", "categorical"]
    missing = [c for c in needed if c not in runs]
    if missing:
        raise ValueError(f"markov.verdicts: run table lacks columns {missing}")
    formation = ["formation_score"] + [formed_column(t) for t in thresholds]
    missing = [c for c in formation if c not in runs]
    if missing:
        raise ValueError(
            f"markov.verdicts: run table lacks the formation columns {missing} "
            "(telemetry.formation.formation_table gives formation_score and formed_at_<t>)"
        )
    for lvl in levels:
        if not runs.empty and lvl not in set(runs["level"]):
            raise ValueError(
                f"markov.verdicts: level {lvl!r} is not in the runs table "
                f"(levels: {sorted(set(runs['level']))})"
            )


def _claims_at(runs, threshold, *, high, frontier, level, floor) -> dict[str, dict[str, Any]]:
    """Every claim judged at one threshold, with its cells."""
    conditions = _conditions(runs)
    results = {
        "ld_necessary": _ld_necessary(runs, conditions, threshold, level),
        "ld_sufficient_at_high_repetition": _ld_sufficient(
            runs, conditions, high, threshold, level, floor
        ),
        "cat_and_zipf_needed_near_frontier": _cat_zipf_needed(
            runs, conditions, frontier, threshold, level
        ),
    }
    out = {}
    for name, result in results.items():
        verdict = {"claim": CLAIMS[name], "rule": _RULES[name].format(floor=floor),
                   "verdict": result["verdict"], "reason": result["reason"],
                   "threshold": float(threshold), "comparisons": result["comparisons"],
                   "deciding_cells": [_cell(runs, c, threshold) for c in result["conditions"]]}  # fmt: skip
        for key in ("score_intervals", "parts"):
            if key in result:
                verdict[key] = result[key]
        for part in verdict.get("parts", {}).values():
            part["deciding_cells"] = [_cell(runs, c, threshold) for c in part.pop("conditions")]
        out[name] = verdict
    return out


def judge_claims(
    runs: pd.DataFrame,
    *,
    high_level: str = "high",
    frontier_level: str = "near_frontier",
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    decision_threshold: float = DECISION_THRESHOLD,
    level: float = 0.95,
    floor: float = DEFAULT_FLOOR,
) -> dict[str, dict[str, Any]]:
    """The verdict on each claim of :data:`CLAIMS` from the runs table (one row per run).

    Args:
        runs: ``process, level, seed, marginal, local_dependency, categorical,
            formation_score`` and ``formed_at_<t>`` (nullable boolean, <NA> = unobserved) for
            every threshold; conditions are paired by seed.
        high_level, frontier_level: the levels of claims 2 and 3.
        thresholds: the thresholds every claim is also judged at (``by_threshold``).
        decision_threshold: the threshold of the reported verdict (judged even if not listed).
        level: confidence level of the paired t intervals.
        floor: claim 2's formation-score floor (metric units) when there is no no-LD control.

    Returns:
        ``claim -> {claim, rule, verdict, reason, threshold, comparisons, deciding_cells,
        [score_intervals], [parts], by_threshold, agrees_across_thresholds}``, JSON-safe;
        ``by_threshold`` maps ``"0.3"`` etc. to the verdict there.

    Raises:
        ValueError: a column is missing (the formation columns named), or a level is absent.
    """
    every = sorted({float(t) for t in thresholds} | {float(decision_threshold)})
    _check_runs(runs, every, (high_level, frontier_level))
    runs = runs.assign(
        condition=runs["process"].astype(str) + "@" + runs["level"].astype(str),
        local_dependency=runs["local_dependency"].fillna(False).astype(bool),
        categorical=runs["categorical"].fillna(False).astype(bool),
        **{formed_column(t): runs[formed_column(t)].astype("boolean") for t in every},
    )
    kwargs = {"high": high_level, "frontier": frontier_level, "level": level, "floor": floor}
    judged = {t: _claims_at(runs, t, **kwargs) for t in every}
    out = judged[float(decision_threshold)]
    for name, verdict in out.items():
        by_threshold = {f"{t:g}": judged[t][name]["verdict"] for t in every}
        verdict["by_threshold"] = by_threshold
        verdict["agrees_across_thresholds"] = len(set(by_threshold.values())) == 1
    return out


def threshold_robustness_table(verdicts: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (claim, threshold) of :func:`judge_claims`' ``by_threshold``: ``claim,
    threshold, verdict, decision`` (the reported threshold) and ``agrees`` (same verdict as
    at the decision threshold)."""
    rows = [
        {
            "claim": name,
            "threshold": float(key),
            "verdict": value,
            "decision": float(key) == float(verdict["threshold"]),
            "agrees": value == verdict["verdict"],
        }
        for name, verdict in verdicts.items()
        for key, value in verdict["by_threshold"].items()
    ]
    return pd.DataFrame(rows, columns=["claim", "threshold", "verdict", "decision", "agrees"])


def verdict_summary(verdicts: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """``claim -> verdict`` (for logs and MLflow tags)."""
    return {name: str(v["verdict"]) for name, v in verdicts.items()}


__all__ = [
    "CLAIMS",
    "CONDITION_COLUMNS",
    "CONTRADICTED",
    "DECISION_THRESHOLD",
    "DEFAULT_FLOOR",
    "PAIRED_RULE",
    "RULES",
    "SUPPORTED",
    "UNDECIDABLE",
    "VERDICTS",
    "compare_conditions",
    "condition_columns",
    "condition_table",
    "judge_claims",
    "threshold_robustness_table",
    "verdict_summary",
]
