"""A model whose top head can be load-bearing: claim 4's precondition, candidate by candidate.

Bi-Induct's claim 4 (ablating the top-2 %-per-layer heads costs the natural base more than the
snippet arms) only means something when, in the base arm, those top heads carry the copying:
their ablation must cost more copy accuracy than ablating as many random heads. Given one row
per (candidate model, seed) of the base arm, :func:`model_table` gives one row per candidate and
:func:`choose_model` applies :data:`MODEL_RULE`:

- a candidate **qualifies** when in every seed its induction heads formed within
  ``budget / margin_factor`` steps and its top heads are load-bearing: the excess drop (relative
  drop of copy accuracy under the top heads minus the mean under the random controls) has its CI
  (bootstrap over the copy probes) above 0;
- the chosen model is the qualifying candidate with the least training compute (FLOPs of its
  run); none qualifies: nothing is chosen, and the table gives every candidate's numbers.

Plain numpy / pandas; no Kedro imports.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ih_kedro.science.statistics.base_calibration import emergence_within_margin
from ih_kedro.science.statistics.paired_seeds import json_safe, mean_interval

MODEL_RULE = (
    "A candidate qualifies iff in every seed of the base arm its induction heads formed within "
    "budget / {margin_factor:g} steps and the top-2 %-per-layer {mode} ablation's excess drop of "
    "copy accuracy over equal-count random heads has its {level:.0%} CI (bootstrap over the copy "
    "probes) above 0; the chosen model is the qualifying candidate with the least training "
    "compute (FLOPs)."
)

OUTCOME_COLUMNS = (
    "preset", "seed", "emergence_step", "censored", "budget_steps",
    "excess_drop", "excess_drop_ci_low", "excess_drop_ci_high",
)  # fmt: skip
TABLE_COLUMNS = [
    "preset", "flops", "n_seeds", "n_formed", "n_within_margin", "emergence_step_median",
    "emergence_step_max", "budget_steps", "within_steps", "excess_drop", "excess_drop_ci_low",
    "excess_drop_ci_high", "seed_steps", "seed_excess", "seed_ci_low", "n_load_bearing",
    "qualifies", "chosen", "reason",
]  # fmt: skip


def outcomes_from_runs(
    runs: pd.DataFrame, compute: pd.DataFrame | None = None, *, mode: str = "zero"
) -> pd.DataFrame:
    """One row per (preset, seed) (:data:`OUTCOME_COLUMNS` + ``flops``) from the per-run table of
    :func:`ih_kedro.science.evaluation.bi_induct_runs.run_table` (one data variant: the base).

    ``compute``: the matched-compute table (``run_name, flops``); without it ``flops`` is NaN.
    Raises when a (preset, seed) repeats (more than one data variant) or the ablation columns
    of ``mode`` are missing."""
    needed = [f"ablation_excess_copy_{mode}", f"ablation_excess_copy_{mode}_ci_low",
              f"ablation_excess_copy_{mode}_ci_high"]  # fmt: skip
    missing = [c for c in needed if c not in runs]
    if missing:
        raise ValueError(f"model choice: the runs table lacks {missing} (ablation_modes: {mode}?)")
    if runs.duplicated(["preset", "seed"]).any():
        raise ValueError(
            "model choice: a (preset, seed) appears twice; train one data variant (the base)"
        )
    censored = runs["emergence_censored"].fillna(True).astype(bool)
    out = pd.DataFrame({
        "preset": runs["preset"].astype(str), "seed": runs["seed"].astype(int),
        "emergence_step": pd.to_numeric(runs["emergence_step"], errors="coerce").where(~censored),
        "censored": censored, "budget_steps": runs["final_step"].astype(int),
        "excess_drop": pd.to_numeric(runs[needed[0]], errors="coerce"),
        "excess_drop_ci_low": pd.to_numeric(runs[needed[1]], errors="coerce"),
        "excess_drop_ci_high": pd.to_numeric(runs[needed[2]], errors="coerce"),
    })  # fmt: skip
    flops = math.nan
    if compute is not None and "flops" in compute:
        flops = runs["run_name"].map(compute.set_index("run_name")["flops"]).astype(float)
    out["flops"] = flops
    return out.reset_index(drop=True)


def model_table(
    outcomes: pd.DataFrame, *, margin_factor: float = 1.5, level: float = 0.95
) -> pd.DataFrame:
    """One row per candidate (:data:`TABLE_COLUMNS`), cheapest first, the chosen one marked.

    ``excess_drop`` and its CI are the mean over seeds with a t interval; ``seed_steps``,
    ``seed_excess`` and ``seed_ci_low`` list each seed's emergence step (None: censored), excess
    and its bootstrap CI's lower end (seed order).

    Raises:
        ValueError: a column is missing or ``margin_factor < 1``.
    """
    missing = [c for c in OUTCOME_COLUMNS if c not in outcomes]
    if missing:
        raise ValueError(f"model choice: outcomes lack columns {missing}")
    if not margin_factor >= 1:
        raise ValueError(f"model choice: margin_factor must be >= 1, got {margin_factor:g}")
    rows = []
    for preset, unsorted in outcomes.groupby("preset", sort=False):
        group = unsorted.sort_values("seed")
        counts, why = emergence_within_margin(group, margin_factor)
        censored = group["censored"].astype(bool)
        steps = pd.to_numeric(group["emergence_step"], errors="coerce")
        excess = pd.to_numeric(group["excess_drop"], errors="coerce")
        ci_low = pd.to_numeric(group["excess_drop_ci_low"], errors="coerce")
        bearing = ci_low.gt(0)
        mean, low, high = mean_interval(excess, level=level)
        if not bearing.all():
            why.append(f"top heads not load-bearing (excess CI not above 0) in seeds "
                       f"{sorted(group.loc[~bearing, 'seed'])}")  # fmt: skip
        flops = pd.to_numeric(group.get("flops", pd.Series(np.nan, group.index)), errors="coerce")
        rows.append({
            "preset": str(preset), "flops": float(flops.mean()), **counts,
            "excess_drop": mean, "excess_drop_ci_low": low, "excess_drop_ci_high": high,
            "seed_steps": [None if c else round(float(v), 1) for v, c in zip(steps, censored, strict=True)],
            "seed_excess": [round(float(v), 4) for v in excess],
            "seed_ci_low": [round(float(v), 4) for v in ci_low],
            "n_load_bearing": int(bearing.sum()), "qualifies": not why, "chosen": False,
            "reason": "; ".join(why) or "every seed formed heads within the margin and its top "
            "heads are load-bearing",
        })  # fmt: skip
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    table = table.sort_values(["flops", "preset"], na_position="last").reset_index(drop=True)
    qualifying = table.index[table["qualifies"]]
    if len(qualifying):
        table.loc[qualifying[0], "chosen"] = True
    return table


def choose_model(
    outcomes: pd.DataFrame, *, margin_factor: float = 1.5, mode: str = "zero", level: float = 0.95
) -> dict[str, Any]:
    """The rule :data:`MODEL_RULE` on ``outcomes`` (see :func:`model_table`).

    Returns JSON-safe ``{preset, rule, reason, table}``; ``preset`` None when no candidate
    qualifies (the reason then lists each candidate's failure)."""
    table = model_table(outcomes, margin_factor=margin_factor, level=level)
    rule = MODEL_RULE.format(margin_factor=margin_factor, mode=mode, level=level)
    picked = table[table["chosen"]]
    if picked.empty:
        reason = "no candidate qualifies: " + "; ".join(
            f"{row.preset}: {row.reason}" for row in table.itertuples()
        ) if len(table) else "no outcomes"  # fmt: skip
        preset = None
    else:
        row = picked.iloc[0]
        preset = str(row["preset"])
        reason = (f"{preset}: {row['reason']} (excess {row['excess_drop']:.3g} "
                  f"[{row['excess_drop_ci_low']:.3g}, {row['excess_drop_ci_high']:.3g}])")  # fmt: skip
    return json_safe({"preset": preset, "rule": rule, "reason": reason,
                      "table": table.to_dict("records")})  # fmt: skip


__all__ = ["MODEL_RULE", "OUTCOME_COLUMNS", "TABLE_COLUMNS", "choose_model", "model_table",
           "outcomes_from_runs"]  # fmt: skip
