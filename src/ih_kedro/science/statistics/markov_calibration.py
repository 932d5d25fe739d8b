"""Where is "near the frontier" for the Markov processes? Measured on the processes themselves.

Claim 3 of the ``markov`` experiment compares processes *near the repetition frontier*: where
the full process (local dependency + categoriality + Zipf) still forms an induction head within
the budget and a process that needs more repetition would not. A level carried over from the
``pareto`` experiment sits on another process's frontier (its bigram data); here it is measured
by a small repetition sweep of the reference process at a fixed frequency over a few
reliabilities (the calibration sweep, one run per reliability and seed, each run to
``max_fraction`` of the main budget, read from the online early stop).

The rule (:func:`frontier_level`): the near-frontier reliability is the **lowest swept
reliability at which the reference process formed in every calibration seed within
``max_fraction`` of the main budget** (default one half: its main-run seeds then form well
within the budget, while a process that needs clearly more repetition does not). When no swept
reliability qualifies, the highest one is used and the level says so.

Plain pandas; no Kedro imports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

CALIBRATION_LEVEL_PREFIX = "calibration_r"


def calibration_level_name(reliability: float) -> str:
    """The repetition-level name of one calibration reliability (``calibration_r0.5``)."""
    return f"{CALIBRATION_LEVEL_PREFIX}{float(reliability):g}"


def calibration_levels(frequency: float, reliabilities: Sequence[float]) -> dict[str, Any]:
    """``{level name: {frequency, reliability}}`` of the calibration sweep (unique, ascending)."""
    if not reliabilities:
        raise ValueError("markov.calibration.reliabilities: at least one reliability is needed")
    levels = {}
    for r in sorted({float(r) for r in reliabilities}):
        if not 0 < r <= 1:
            raise ValueError(f"markov.calibration.reliabilities: {r} is not in (0, 1]")
        levels[calibration_level_name(r)] = {"frequency": float(frequency), "reliability": r}
    return levels


def calibration_outcomes(
    manifest: pd.DataFrame, levels: Mapping[str, Mapping[str, float]], budget_steps: int
) -> pd.DataFrame:
    """One row per calibration run: ``run_name, seed, level, reliability, formed, step``.

    ``manifest`` is the calibration sweep's (``run_name, seed, level`` from its cells plus the
    sweep's ``online_emergence_step``): a run formed when the online early stop saw the
    threshold crossed at or before ``budget_steps`` (its ``step``; NaN when it did not).
    """
    rows = []
    for run in manifest.itertuples(index=False):
        step = float(getattr(run, "online_emergence_step", math.nan))
        formed = math.isfinite(step) and step <= budget_steps
        rows.append({"run_name": run.run_name, "seed": int(run.seed), "level": run.level,
                     "reliability": float(levels[run.level]["reliability"]),
                     "formed": bool(formed), "step": step if formed else math.nan})  # fmt: skip
    return pd.DataFrame(rows).sort_values(["reliability", "seed"], ignore_index=True)


def frontier_level(
    outcomes: pd.DataFrame, *, frequency: float, budget_steps: int, max_fraction: float
) -> dict[str, Any]:
    """The near-frontier level by the rule of this module, with the evidence.

    Args:
        outcomes: :func:`calibration_outcomes` (formed by ``max_fraction * budget`` already).
        frequency: the sweep's frequency (the level's frequency).
        budget_steps: the calibration runs' step budget (``max_fraction`` of the main one).
        max_fraction: the share of the main budget the calibration runs had.

    Returns:
        ``{frequency, reliability, source, rule, per_reliability: [{reliability, n_seeds,
        n_formed, steps}]}``.
    """
    if outcomes.empty:
        raise ValueError("markov.calibration: the calibration sweep has no runs")
    per = []
    for r, group in outcomes.groupby("reliability", sort=True):
        steps = [None if math.isnan(s) else float(s) for s in group["step"]]
        per.append({"reliability": float(r), "n_seeds": len(group),
                    "n_formed": int(group["formed"].sum()), "steps": steps})  # fmt: skip
    qualifying = [p for p in per if p["n_formed"] == p["n_seeds"]]
    rule = (
        f"the lowest swept reliability at which the reference process formed in every "
        f"calibration seed within {max_fraction:g} of the main budget ({budget_steps} steps)"
    )
    if qualifying:
        chosen = qualifying[0]["reliability"]
        source = f"calibration sweep: {rule}"
    else:
        chosen = per[-1]["reliability"]
        source = (
            f"calibration sweep: no swept reliability formed in every seed within "
            f"{budget_steps} steps; the highest swept reliability ({chosen:g}) is used"
        )
    return {"frequency": float(frequency), "reliability": float(chosen), "source": source,
            "rule": rule, "per_reliability": per}  # fmt: skip


__all__ = [
    "calibration_level_name",
    "calibration_levels",
    "calibration_outcomes",
    "frontier_level",
]
