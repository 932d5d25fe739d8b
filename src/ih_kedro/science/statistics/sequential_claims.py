"""Seeds until a verdict settles, for the Bi-Induct claims and the Markov verdicts.

The verdict rules stay those of :mod:`.bi_induct_claims` and :mod:`.markov_verdicts`; this module
applies them look by look (:func:`.sequential_seeds.sequential_verdict`): at look ``k`` to the
first ``n_k`` seeds (in seed order) with the CI at the plan's corrected level, stopping each claim
at its first decided look. On the seeds a run has, it records

- ``looks``: seeds used, estimate and CI at each look, the verdict there;
- ``status``: ``decided`` (at ``decided_at``), ``continue`` (undecided, the cap not reached: the
  claim's arms / cells need ``next_seeds_needed`` seeds), ``undecided_at_cap`` or, for a Markov
  claim that added seeds can no longer decide, ``undecided_futile`` (:func:`futile`);
- ``projection``: for a claim not decided, the seeds the observed effect and spread imply
  (:data:`.sequential_seeds.SEEDS_NEEDED_FORMULA`);

and a ``next_look``: which arms / cells need which new seeds. With only the planned seeds, this is
the sequential analysis of the planned seeds (one look, at the corrected level).

Plain pandas; no Kedro imports.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ih_kedro.science.statistics.bi_induct_claims import DEFAULT_RULES, decide_claims
from ih_kedro.science.statistics.markov_verdicts import judge_claims
from ih_kedro.science.statistics.paired_seeds import UNDECIDED, can_still_decide, json_safe
from ih_kedro.science.statistics.sequential_seeds import (
    SequentialPlan,
    projection,
    sequential_verdict,
)

ADAPTIVE_DEFAULTS: dict[str, Any] = {
    "enabled": False,
    "planned": None,
    "batch": 2,
    "cap": 10,
    "correction": "bonferroni",
    "alpha": None,
}
"""An ``adaptive_seeds`` block: ``planned`` seeds (None: the seeds the runs have), ``batch``
seeds per look, at most ``cap``; ``alpha`` None: 1 - the rules' CI level."""

BI_INDUCT_CLAIMS = ("icl_not_improved", "ablation_hurts_base_more")
"""The claims the Bi-Induct default looks at sequentially (issue 37: claims 2 and 4)."""

# claim -> (rule of decision_distance, margin key of the rules)
_BI_INDUCT_RULES = {
    "earlier_emergence": ("directional", "emergence_margin_steps"),
    "icl_not_improved": ("equivalence", "icl_margin"),
    "ablation_hurts_base_more": ("directional", "ablation_margin"),
    "perplexity_cost": ("directional", "perplexity_margin_nats"),
}


def _seed_list(values: Any) -> list[int]:
    return sorted({int(s) for s in values})


def _plan(params: Mapping[str, Any], planned_default: int, alpha: float) -> SequentialPlan:
    params = {**ADAPTIVE_DEFAULTS, **dict(params or {})}
    planned = params["planned"] if params["planned"] is not None else planned_default
    return SequentialPlan.from_params(params, planned=max(2, int(planned)), alpha=alpha)


def next_look(
    seeds_by_cell: Mapping[str, set[int]],
    continuing: Mapping[str, int],
    planned: int,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """Which seeds the next round trains, and where.

    Args:
        seeds_by_cell: the seeds each arm / cell has now.
        continuing: arm / cell -> the seeds its open claims' next look needs.
        planned: how many seeds are planned (the first ``planned`` seed ids train everywhere).
        labels: arm / cell -> its ``data_variants`` label (None: the names are the labels).

    Returns:
        None when nothing is continuing, else ``{cells, add_seeds, seeds, seed_cells}``:
        ``seeds`` = every seed any cell has plus the new ones (so no trained run drops out of the
        next round's tables), ``seed_cells`` = ``[{seeds, labels}]`` for every seed beyond the
        planned ones (the cells that have it, and the continuing cells for the new seeds), the
        value of ``training.seed_cells``; None if a cell has no label.
    """
    if not continuing:
        return None
    every = sorted(set().union(*seeds_by_cell.values()))
    have = min(len(seeds_by_cell.get(c, ())) for c in continuing)
    top = every[-1] if every else -1
    added = list(range(top + 1, top + 1 + max(0, max(continuing.values()) - have)))
    planned_seeds = set((every + added)[:planned])  # the planned seeds train in every cell
    owners = {s: tuple(sorted(c for c, got in seeds_by_cell.items() if s in got))
              for s in every if s not in planned_seeds}  # fmt: skip
    owners.update({s: tuple(sorted(continuing)) for s in added})
    names = dict(labels) if labels is not None else {c: c for c in seeds_by_cell}
    seed_cells: list[dict[str, Any]] | None = []
    for cells in dict.fromkeys(owners.values()):
        if any(c not in names for c in cells):
            seed_cells = None
            break
        seed_cells.append({"seeds": sorted(s for s, o in owners.items() if o == cells),
                           "labels": [names[c] for c in cells]})  # fmt: skip
    return {"cells": sorted(continuing), "add_seeds": added, "seeds": every + added,
            "seed_cells": seed_cells}  # fmt: skip


def _with_projection(result: dict[str, Any], values, rule: str, margin, plan) -> dict[str, Any]:
    if result["status"] != "decided":
        result["projection"] = projection(values, rule, margin, plan)
    return result


# --------------------------------------------------------------------------------------------
# Bi-Induct
# --------------------------------------------------------------------------------------------
def _arm_entry(decided: Mapping[str, Any], claim: str, arm: str) -> dict[str, Any]:
    entry = next(c for c in decided["claims"] if c["id"] == claim)
    return entry if entry["arm"] == arm else entry["other_arms"][arm]


def bi_induct_sequential(
    runs: pd.DataFrame,
    rules: Mapping[str, Any] | None,
    adaptive: Mapping[str, Any] | None,
    *,
    claims: Sequence[str] = BI_INDUCT_CLAIMS,
) -> dict[str, Any]:
    """The claims ``claims`` of :func:`.bi_induct_claims.decide_claims`, look by look.

    Args:
        runs: the per-run table (``variant, seed`` and the claims' columns).
        rules: the claims' rules (``DEFAULT_RULES`` overrides); their ``level`` gives
            ``alpha = 1 - level`` unless ``adaptive.alpha`` is set.
        adaptive: an ``adaptive_seeds`` block (:data:`ADAPTIVE_DEFAULTS`).
        claims: claim ids judged sequentially (directional / equivalence claims only).

    Returns:
        JSON-safe ``{plan, claims: {claim: {arm: {verdict, status, looks, decided_at, n_used,
        next_seeds_needed[, projection]}}}, next_look}``; ``next_look`` is None when no claim
        needs more seeds, else :func:`next_look`'s dict (``arms`` = ``cells``: the base and the
        open claims' arms).
    """
    rules = {**DEFAULT_RULES, **dict(rules or {})}
    base = str(rules["base_arm"])
    arms = [str(rules["primary_arm"])] + [
        a for a in (rules.get("snippet_arms") or sorted(set(runs["variant"])))
        if a not in (base, rules["primary_arm"])
    ]  # fmt: skip
    base_seeds = set(_seed_list(runs.loc[runs["variant"] == base, "seed"]))
    planned = len(base_seeds)
    plan = _plan(adaptive or {}, planned, 1.0 - float(rules["level"]))
    out: dict[str, Any] = {}
    continuing: dict[str, int] = {}
    for claim in claims:
        if claim not in _BI_INDUCT_RULES:
            raise ValueError(f"bi_induct sequential: claim {claim!r} is not one of "
                             f"{sorted(_BI_INDUCT_RULES)}")  # fmt: skip
        rule, margin_key = _BI_INDUCT_RULES[claim]
        margin = float(rules[margin_key])
        out[claim] = {}
        for arm in arms:
            seeds = _seed_list(set(runs.loc[runs["variant"] == arm, "seed"]) & base_seeds)
            last: dict[str, Any] = {}

            def judge(chosen, level, claim=claim, arm=arm, last=last):
                decided = decide_claims(runs[runs["seed"].isin(chosen)], {**rules, "level": level})
                entry = _arm_entry(decided, claim, arm)
                last["entry"] = entry
                diff = entry["difference"]  # PairedDifference.to_dict()
                return {"verdict": entry["verdict"], "estimate": diff["mean"],
                        "ci_low": diff["ci_low"], "ci_high": diff["ci_high"],
                        "reason": entry["reason"]}  # fmt: skip

            result = sequential_verdict(judge, seeds, plan)
            entry = last.get("entry")
            values = list(entry["difference"]["differences"]) if entry else []
            result = _with_projection(result, values, rule, margin, plan)
            if entry and claim == "ablation_hurts_base_more" and result["status"] != "decided":
                # Claim 4 also needs the base's own excess drop above 0: the larger projection.
                base_values = runs.loc[(runs["variant"] == base)
                                       & runs["seed"].isin(result["looks"][-1]["seeds"]),
                                       f"ablation_excess_copy_{rules['ablation_mode']}"]  # fmt: skip
                bearing = projection(base_values.astype(float).tolist(), "zero", None, plan)
                result["projection_load_bearing"] = bearing
                needed = [p["seeds_needed"] for p in (result["projection"], bearing)]
                if all(n is not None for n in needed):
                    result["projection"]["seeds_needed"] = max(needed)
            if result["status"] == "continue":
                continuing[arm] = max(continuing.get(arm, 0), int(result["next_seeds_needed"]))
            out[claim][arm] = result
    if continuing:  # the base is every claim's control: it takes every new seed too
        continuing[base] = max(continuing.values())
    seeds_by_arm = {a: set(_seed_list(g["seed"])) for a, g in runs.groupby("variant")}
    following = next_look(seeds_by_arm, continuing, plan.planned)
    if following is not None:
        following["arms"] = following["cells"]
    return json_safe({"plan": plan.to_dict(), "claims": out, "next_look": following})


def adopt_sequential(entry: dict[str, Any], sequential: Mapping[str, Any], replace: bool) -> None:
    """Record ``sequential`` (one claim's looks) under ``entry["sequential"]``, in place; with
    ``replace`` (adaptive seeds on: seeds were added after looking, so the fixed-seed CI no
    longer holds its level) the sequential verdict becomes ``entry["verdict"]``, the fixed-seed
    one kept as ``fixed_seed_verdict`` and the reason prefixed with the deciding look."""
    entry["sequential"] = dict(sequential)
    if not replace:
        return
    entry["fixed_seed_verdict"] = entry["verdict"]
    entry["verdict"] = sequential["verdict"]
    looks = sequential.get("looks") or []
    if looks:
        last = looks[-1]
        where = (f"sequential, {sequential['status']} at look {last['look']} ({last['n']} seeds, "
                 f"CI level {last['level']:.4g}): {last['reason']}")  # fmt: skip
    else:
        where = f"sequential: no look yet ({sequential.get('next_seeds_needed')} seeds needed)"
    entry["reason"] = f"{where}; fixed-seed reading: {entry['reason']}"


def attach_bi_induct_looks(
    decided: dict[str, Any], sequential: Mapping[str, Any], *, replace: bool = False
) -> None:
    """Put each judged claim's looks under ``sequential`` in its claim entry (and in its other
    arms' entries) of :func:`.bi_induct_claims.decide_claims`' output, in place
    (:func:`adopt_sequential`), and the plan and next look under ``decided["sequential"]``."""
    for claim in decided["claims"]:
        by_arm = sequential["claims"].get(claim["id"])
        if not by_arm:
            continue
        for entry in [claim, *claim.get("other_arms", {}).values()]:
            if entry["arm"] in by_arm:
                adopt_sequential(entry, by_arm[entry["arm"]], replace)
    decided["sequential"] = {"plan": sequential["plan"], "next_look": sequential["next_look"],
                             "replaces_fixed_seed_verdicts": replace}  # fmt: skip


# --------------------------------------------------------------------------------------------
# Markov
# --------------------------------------------------------------------------------------------
def _limiting(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """The comparison that holds a claim back: the first undecided one, else the first; a claim
    judged against its floor: the score interval."""
    comparisons = list(verdict.get("comparisons") or [])
    if comparisons:
        open_ = [c for c in comparisons if c["verdict"] == UNDECIDED]
        chosen = (open_ or comparisons)[0]
        return {"estimate": chosen["mean"], "ci_low": chosen["ci_low"],
                "ci_high": chosen["ci_high"]}  # fmt: skip
    intervals = verdict.get("score_intervals") or []
    if intervals:
        first = intervals[0]
        return {"estimate": first["mean"], "ci_low": first["ci_low"], "ci_high": first["ci_high"]}
    return {"estimate": math.nan, "ci_low": math.nan, "ci_high": math.nan}


def _comparison_rows(verdict: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{k: c.get(k) for k in ("treatment", "control", "verdict", "mean", "ci_low", "ci_high",
             "n")} for c in verdict.get("comparisons") or []]  # fmt: skip


def disagreeing_seeds(verdict: Mapping[str, Any]) -> list[int]:
    """Seeds whose formed / not-formed pair (treatment, control) in an undecided comparison of
    ``verdict`` differs from that comparison's most common pair. The rule needs every seed to
    agree, so while such a seed is in the sample, added seeds cannot decide the claim."""
    out: set[int] = set()
    for comparison in verdict.get("comparisons") or []:
        if comparison["verdict"] != UNDECIDED or not comparison.get("seeds"):
            continue
        pairs = [(bool(s["treatment_formed"]), bool(s["control_formed"]))
                 for s in comparison["seeds"]]  # fmt: skip
        common = Counter(pairs).most_common(1)[0][0]
        out |= {int(s["seed"]) for s, pair in zip(comparison["seeds"], pairs, strict=True)
                if pair != common}  # fmt: skip
    return sorted(out)


FUTILE = "undecided_futile"
"""A Markov claim's status when its open comparisons can no longer be decided
(:func:`futile`): no seeds are added for it, though the cap is not reached."""


def futile(verdict: Mapping[str, Any]) -> bool:
    """True when an undecided Markov claim cannot be decided by added seeds: it has undecided
    comparisons and none of them can still be decided (:func:`.paired_seeds.can_still_decide`).

    A claim is contradicted if one comparison is, supported if all are, so a comparison that
    can reach neither outcome holds it undecided, and a supported one cannot turn contradicted
    (both need every seed to agree). Judged on this look's comparisons: a claim whose treatment
    is the best-scoring process could compare another one after more seeds, so this is a stated
    stopping rule, not a proof. It never decides anything, so the looks' false-decision rate
    stays within the plan's alpha."""
    if verdict.get("verdict") != UNDECIDED:
        return False
    open_ = [c for c in verdict.get("comparisons") or [] if c["verdict"] == UNDECIDED]
    return bool(open_) and not any(can_still_decide(c) for c in open_)


def _claim_cells(verdict: Mapping[str, Any]) -> list[str]:
    cells = [c for comp in verdict.get("comparisons") or [] for c in (comp["treatment"],
             comp["control"])]  # fmt: skip
    cells += [c["condition"] for c in verdict.get("deciding_cells") or []]
    return list(dict.fromkeys(cells))


def markov_sequential(
    runs: pd.DataFrame,
    adaptive: Mapping[str, Any] | None,
    labels: Mapping[str, str] | None = None,
    **judge_kwargs: Any,
) -> dict[str, Any]:
    """The three Markov claims of :func:`.markov_verdicts.judge_claims`, look by look.

    ``runs`` is the verdicts' runs table; ``judge_kwargs`` are ``judge_claims``' keywords
    (``level`` gives ``alpha = 1 - level`` unless ``adaptive.alpha`` is set); ``labels`` maps a
    cell ``process@level`` to its ``data_variants`` label (for ``next_look.seed_cells``). A
    claim's seeds are those every cell it compares has. Returns JSON-safe ``{plan, claims:
    {claim: {verdict, status, looks, ..., cells[, projection, seeds_disagreeing]}}, next_look}``;
    ``next_look`` is None or :func:`next_look`'s dict. The projection reads the paired differences
    of the claim's undecided comparisons at its last look (the largest need); it leaves out the
    rule's other condition, that every seed agree on formed / not formed, which
    ``seeds_disagreeing`` (:func:`disagreeing_seeds`) reports.
    """
    level = float(judge_kwargs.pop("level", 0.95))
    condition = runs["process"].astype(str) + "@" + runs["level"].astype(str)
    seeds_of = {c: set(_seed_list(g["seed"])) for c, g in runs.groupby(condition)}
    planned = min((len(s) for s in seeds_of.values()), default=0)
    plan = _plan(adaptive or {}, planned, 1.0 - level)
    full = judge_claims(runs, level=plan.level(1), **judge_kwargs)
    out: dict[str, Any] = {}
    continuing: dict[str, int] = {}
    for name in full:
        cells = _claim_cells(full[name])
        common = set.intersection(*(seeds_of[c] for c in cells)) if cells else set()
        seeds = _seed_list(common)
        last: dict[str, Any] = {}

        def judge(chosen, at, name=name, last=last):
            verdict = judge_claims(runs[runs["seed"].isin(chosen)], level=at, **judge_kwargs)[name]
            last["verdict"] = verdict
            return {"verdict": verdict["verdict"], "reason": verdict["reason"],
                    "details": _comparison_rows(verdict), **_limiting(verdict)}  # fmt: skip

        result = sequential_verdict(judge, seeds, plan)
        result["cells"] = cells
        if result["status"] != "decided" and "verdict" in last:
            needs = [projection([r["difference"] for r in c["seeds"]], "zero", None, plan)
                     for c in last["verdict"].get("comparisons") or []
                     if c["verdict"] == UNDECIDED]  # fmt: skip
            finite = [p for p in needs if p["seeds_needed"] is not None]
            if finite:
                result["projection"] = max(finite, key=lambda p: p["seeds_needed"])
            elif needs:
                result["projection"] = needs[0]
            result["seeds_disagreeing"] = disagreeing_seeds(last["verdict"])
            if result["status"] == "continue" and futile(last["verdict"]):
                result["status"], result["next_seeds_needed"] = FUTILE, None
        if result["status"] == "continue":
            for cell in cells:
                continuing[cell] = max(continuing.get(cell, 0), int(result["next_seeds_needed"]))
        out[name] = result
    following = next_look(seeds_of, continuing, plan.planned, labels)
    return json_safe({"plan": plan.to_dict(), "claims": out, "next_look": following})


__all__ = [
    "ADAPTIVE_DEFAULTS",
    "BI_INDUCT_CLAIMS",
    "FUTILE",
    "adopt_sequential",
    "attach_bi_induct_looks",
    "bi_induct_sequential",
    "disagreeing_seeds",
    "futile",
    "markov_sequential",
    "next_look",
]
