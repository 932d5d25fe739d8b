"""Conditions and verdicts of the ``markov`` experiment (Experiment 3).

A **condition** is one designed process (marginal, local dependency, categoriality) at one
repetition level (``high`` or ``near_frontier``), trained with one or more seeds. Per condition:

- ``formed``: ``yes`` (an induction head formed within the budget in every seed: status
  ``emerged`` or ``left_censored``), ``no`` (in no seed: ``censored``), ``mixed`` (some seeds),
  ``unknown`` (any seed's estimate failed and none formed);
- ``s_star``: the median emergence step of the seeds that formed, with ``ci_low`` / ``ci_high``
  the envelope (min / max) of their bootstrap CIs (one seed: its CI).

The study's three claims are judged on the conditions table, each ``supported``,
``contradicted`` or ``not decidable at this budget``, with the cells that decide it:

1. ``ld_necessary``: no process without local dependency forms; decided only when some process
   *with* local dependency forms at the same level (else the budget may be the reason).
2. ``ld_sufficient_at_high_repetition``: at the high level, a process with local dependency but
   neither categoriality nor a Zipf marginal forms. It failing counts against the claim only
   when another process forms at that level (the budget suffices there).
3. ``cat_and_zipf_needed_near_frontier``: near the frontier the full process (LD + CAT + Zipf)
   forms while dropping categoriality (LD + Zipf) or the Zipf marginal (LD + CAT, another
   marginal) does not. Sub-verdicts ``cat_needed`` / ``zipf_needed``.

Plain pandas; no Kedro imports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

# One reading of the emergence table's status, shared with the pareto frontier.
from ih_kedro.science.statistics.pareto_frontier import FORMED_STATUSES, NOT_FORMED_STATUSES

SUPPORTED = "supported"
CONTRADICTED = "contradicted"
UNDECIDABLE = "not decidable at this budget"
VERDICTS = (SUPPORTED, CONTRADICTED, UNDECIDABLE)


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

CONDITION_COLUMNS = [
    "condition",
    "process",
    "level",
    "marginal",
    "local_dependency",
    "categorical",
    "frequency",
    "reliability",
    "n_seeds",
    "n_formed",
    "formed",
    "formed_share",
    "s_star",
    "ci_low",
    "ci_high",
    "status",
    "seed_statuses",
    "budget_steps",
]


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


def condition_table(runs: pd.DataFrame, properties: pd.DataFrame | None = None) -> pd.DataFrame:
    """Aggregate runs into one row per (process, level).

    ``runs`` has one row per training run: ``process, level, seed, status, step, ci_low,
    ci_high, last_step`` plus the process descriptors ``marginal, local_dependency,
    categorical`` and the level's ``frequency, reliability``. ``properties`` (one row per
    ``process``) adds the achieved process properties as further columns.
    """
    needed = {"process", "level", "seed", "status", "step", "ci_low", "ci_high", "last_step"}
    missing = sorted(needed - set(runs.columns))
    if missing:
        raise ValueError(f"markov conditions: run table lacks columns {missing}")
    rows = []
    for (process, level), group in runs.groupby(["process", "level"], sort=False):
        statuses = [str(s) for s in group["status"]]
        formed_rows = group[[s in FORMED_STATUSES for s in statuses]]
        steps = pd.to_numeric(formed_rows["step"], errors="coerce").dropna()
        first = group.iloc[0]
        formed = _formed(statuses)
        rows.append(
            {
                "condition": f"{process}@{level}",
                "process": process,
                "level": level,
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
            }
        )
    table = pd.DataFrame(rows, columns=CONDITION_COLUMNS)
    if properties is not None and not properties.empty:
        extra = properties.drop(
            columns=[c for c in ("marginal", "local_dependency", "categorical") if c in properties]
        )
        table = table.merge(extra, on="process", how="left")
    return table


def _cell(row: pd.Series) -> dict[str, Any]:
    s_star = row["s_star"]
    return {
        "condition": row["condition"],
        "process": row["process"],
        "level": row["level"],
        "formed": row["formed"],
        "n_formed": int(row["n_formed"]),
        "n_seeds": int(row["n_seeds"]),
        "s_star": None if pd.isna(s_star) else float(s_star),
    }


def _verdict(name: str, verdict: str, reason: str, cells: pd.DataFrame) -> dict[str, Any]:
    return {
        "claim": CLAIMS.get(name, name),
        "verdict": verdict,
        "reason": reason,
        "deciding_cells": [_cell(row) for _, row in cells.iterrows()],
    }


def _ld_necessary(table: pd.DataFrame) -> dict[str, Any]:
    name = "ld_necessary"
    without = table[~table["local_dependency"]]
    if without.empty:
        return _verdict(name, UNDECIDABLE, "no condition without local dependency", without)
    formed = without[without["formed"] == "yes"]
    if not formed.empty:
        return _verdict(name, CONTRADICTED, "a process without local dependency formed", formed)
    if not (without["formed"] == "no").all():
        return _verdict(
            name, UNDECIDABLE, "some no-LD conditions are mixed across seeds or unknown", without
        )
    levels = set(without["level"])
    with_ld = table[table["local_dependency"] & table["level"].isin(levels)]
    reference = with_ld[with_ld["formed"] == "yes"]
    if reference.empty:
        return _verdict(
            name,
            UNDECIDABLE,
            "no process formed at the no-LD conditions' levels: the budget may be the reason",
            pd.concat([without, with_ld]),
        )
    return _verdict(
        name,
        SUPPORTED,
        "no process without local dependency formed, while processes with it did at the same level",
        pd.concat([without, reference]),
    )


def _ld_sufficient(table: pd.DataFrame, high: str) -> dict[str, Any]:
    name = "ld_sufficient_at_high_repetition"
    at_high = table[table["level"] == high]
    minimal = at_high[
        at_high["local_dependency"] & ~at_high["categorical"] & (at_high["marginal"] != "zipf")
    ]
    if minimal.empty:
        return _verdict(
            name,
            UNDECIDABLE,
            f"no condition at level {high!r} with local dependency only (no CAT, no Zipf)",
            minimal,
        )
    if (minimal["formed"] == "yes").all():
        return _verdict(
            name, SUPPORTED, "local dependency alone formed at high repetition", minimal
        )
    if (minimal["formed"] == "no").any():
        others = at_high[(at_high["formed"] == "yes") & ~at_high.index.isin(minimal.index)]
        failed = minimal[minimal["formed"] == "no"]
        if not others.empty:
            return _verdict(
                name,
                CONTRADICTED,
                "local dependency alone did not form at high repetition, while "
                + ", ".join(sorted(others["process"].astype(str)))
                + " did within the same budget",
                pd.concat([failed, others]),
            )
        return _verdict(
            name,
            UNDECIDABLE,
            "nothing formed at high repetition: the budget may be the reason",
            at_high,
        )
    return _verdict(name, UNDECIDABLE, "mixed or unknown outcomes across seeds", minimal)


def _needed(
    full_formed: pd.DataFrame, ablated: pd.DataFrame, what: str
) -> tuple[str, str, pd.DataFrame]:
    if ablated.empty:
        return UNDECIDABLE, f"no condition without {what} near the frontier", ablated
    if (ablated["formed"] == "yes").any():
        formed = ablated[ablated["formed"] == "yes"]
        return CONTRADICTED, f"a process without {what} formed near the frontier", formed
    if full_formed.empty:
        return (
            UNDECIDABLE,
            "the full process (LD + CAT + Zipf) did not form near the frontier",
            ablated,
        )
    if (ablated["formed"] == "no").all():
        return (
            SUPPORTED,
            f"the full process formed near the frontier, without {what} it did not",
            pd.concat([full_formed, ablated]),
        )
    return UNDECIDABLE, f"mixed or unknown outcomes without {what}", ablated


def _cat_zipf_needed(table: pd.DataFrame, frontier: str) -> dict[str, Any]:
    name = "cat_and_zipf_needed_near_frontier"
    near = table[(table["level"] == frontier) & table["local_dependency"]]
    zipf = near["marginal"] == "zipf"
    full = near[near["categorical"] & zipf]
    full_formed = full[full["formed"] == "yes"]
    cat = _needed(full_formed, near[~near["categorical"] & zipf], "categoriality")
    zipf_part = _needed(full_formed, near[near["categorical"] & ~zipf], "a Zipfian marginal")
    parts = {"cat_needed": cat, "zipf_needed": zipf_part}
    verdicts = [cat[0], zipf_part[0]]
    if CONTRADICTED in verdicts:
        verdict = CONTRADICTED
    elif all(v == SUPPORTED for v in verdicts):
        verdict = SUPPORTED
    else:
        verdict = UNDECIDABLE
    if full.empty:
        reason = "no full process (LD + CAT + Zipf) near the frontier"
    elif full_formed.empty and verdict != CONTRADICTED:
        reason = "the full process (LD + CAT + Zipf) did not form near the frontier"
    else:
        reason = "; ".join(part[1] for part in parts.values())
    cells = pd.concat([full] + [part[2] for part in parts.values()]).drop_duplicates("condition")
    result = _verdict(name, verdict, reason, cells)
    result["parts"] = {
        key: {"verdict": part[0], "reason": part[1], "deciding_cells": [
            _cell(row) for _, row in part[2].iterrows()
        ]}
        for key, part in parts.items()
    }  # fmt: skip
    return result


def judge_claims(
    table: pd.DataFrame, *, high_level: str = "high", frontier_level: str = "near_frontier"
) -> dict[str, dict[str, Any]]:
    """The verdict on each claim of :data:`CLAIMS` from a :func:`condition_table`."""
    for level in (high_level, frontier_level):
        if not table.empty and level not in set(table["level"]):
            raise ValueError(
                f"markov.verdicts: level {level!r} is not in the conditions table "
                f"(levels: {sorted(set(table['level']))})"
            )
    return {
        "ld_necessary": _ld_necessary(table),
        "ld_sufficient_at_high_repetition": _ld_sufficient(table, high_level),
        "cat_and_zipf_needed_near_frontier": _cat_zipf_needed(table, frontier_level),
    }


def verdict_summary(verdicts: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """``claim -> verdict`` (for logs and MLflow tags)."""
    return {name: str(v["verdict"]) for name, v in verdicts.items()}


__all__ = [
    "CLAIMS",
    "CONDITION_COLUMNS",
    "CONTRADICTED",
    "SUPPORTED",
    "UNDECIDABLE",
    "VERDICTS",
    "condition_table",
    "judge_claims",
    "verdict_summary",
]
