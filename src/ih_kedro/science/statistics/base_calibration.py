"""The natural-most base: the least repetition enrichment at which every seed forms heads.

Plain natural text forms no induction head within a CPU budget, so the Bi-Induct base closest to
the study's natural-only base is the *least* enrichment that still forms heads. The knob is the
dose of ``fixed_rate_copies``: one copy event per ``tokens_per_event`` tokens (larger = lighter,
closer to natural text). Given per-dose, per-seed outcomes of a calibration sweep - the
emergence step (or censored at the budget) and the top head's ablation excess drop (relative
drop of copy accuracy under the top-2 %-per-layer heads minus the mean under equal-count random
heads, with its CI over the random draws where known) - :func:`dose_response_table` gives one row
per dose and :func:`choose_dose` applies the rule :data:`DOSE_RULE`:

- a dose **qualifies** when in every seed the heads formed within ``budget / margin_factor``
  steps (the margin: a seed that forms at the budget's edge would not form on a bad day) and,
  with ``require_load_bearing``, the top head is load-bearing in every seed (excess drop CI above
  0, or the drop above 0 where no CI is given);
- the chosen dose is the largest ``tokens_per_event`` such that it and every denser dose of the
  sweep qualify (a lighter dose that qualifies after a denser one failed is noise, not a
  threshold); none qualifies: no dose is chosen, and the table says why.

Plain numpy / pandas; no Kedro imports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ih_kedro.science.statistics.paired_seeds import json_safe, mean_interval

DOSE_RULE = (
    "A dose (one copy event per N tokens) qualifies iff in every seed induction heads formed "
    "within budget / {margin_factor:g} steps{load_bearing}; the chosen dose is the largest N "
    "such that N and every denser dose of the sweep qualify."
)

OUTCOME_COLUMNS = ("tokens_per_event", "seed", "emergence_step", "censored", "budget_steps")
TABLE_COLUMNS = [
    "tokens_per_event", "copy_share", "n_seeds", "n_formed", "n_within_margin",
    "emergence_step_median", "emergence_step_max", "budget_steps", "within_steps",
    "excess_drop", "excess_drop_ci_low", "excess_drop_ci_high", "n_load_bearing",
    "qualifies", "chosen", "label", "reason",
]  # fmt: skip


def base_label(tokens_per_event: float) -> str:
    """How the chosen base is named everywhere: natural, minimally enriched."""
    return f"natural, minimally enriched (one copy per {tokens_per_event:g} tokens)"


def _load_bearing(group: pd.DataFrame) -> pd.Series:
    """Per seed: the top head's excess drop above 0 (its CI's lower end where given)."""
    if "excess_drop_ci_low" in group and group["excess_drop_ci_low"].notna().any():
        return pd.to_numeric(group["excess_drop_ci_low"], errors="coerce").gt(0)
    return pd.to_numeric(group["excess_drop"], errors="coerce").gt(0)


def emergence_within_margin(
    group: pd.DataFrame, margin_factor: float
) -> tuple[dict[str, Any], list[str]]:
    """Emergence over one group's seeds (rows with ``seed``, ``emergence_step``, ``censored``,
    ``budget_steps``): the counts and steps the dose and model tables report, and why the group
    fails the margin (empty when every seed formed heads by ``budget / margin_factor`` steps).

    Returns ``({n_seeds, n_formed, n_within_margin, emergence_step_median,
    emergence_step_max, budget_steps, within_steps}, why)``.
    """
    censored = group["censored"].astype(bool)
    steps = pd.to_numeric(group["emergence_step"], errors="coerce")
    budget = float(pd.to_numeric(group["budget_steps"]).min())
    within_steps = budget / margin_factor
    within = ~censored & steps.le(within_steps)
    formed = steps[~censored]
    why = []
    if censored.any():
        why.append(f"no heads within the budget in seeds {sorted(group.loc[censored, 'seed'])}")
    late = ~censored & ~within
    if late.any():
        why.append(f"heads after {within_steps:g} steps in seeds {sorted(group.loc[late, 'seed'])}")
    counts = {
        "n_seeds": int(len(group)),
        "n_formed": int((~censored).sum()),
        "n_within_margin": int(within.sum()),
        "emergence_step_median": float(formed.median()) if len(formed) else math.nan,
        "emergence_step_max": float(formed.max()) if len(formed) else math.nan,
        "budget_steps": budget,
        "within_steps": within_steps,
    }
    return counts, why


def dose_response_table(
    outcomes: pd.DataFrame,
    *,
    margin_factor: float = 1.5,
    require_load_bearing: bool = False,
    level: float = 0.95,
) -> pd.DataFrame:
    """One row per dose (:data:`TABLE_COLUMNS`), densest first, with the chosen one marked.

    Args:
        outcomes: one row per (dose, seed): :data:`OUTCOME_COLUMNS` (``emergence_step`` in
            steps, NaN when censored; ``censored`` True when the heads never formed within
            ``budget_steps``), optionally ``excess_drop`` (fraction), ``excess_drop_ci_low`` and
            ``copy_share`` (share of tokens copied at that dose).
        margin_factor: heads must form by ``budget_steps / margin_factor`` (>= 1).
        require_load_bearing: also ask every seed's top head to be load-bearing.
        level: confidence level of the excess drop's t interval over seeds.

    Raises:
        ValueError: a column is missing, a (dose, seed) repeats, or ``margin_factor < 1``.
    """
    missing = [c for c in OUTCOME_COLUMNS if c not in outcomes]
    if missing:
        raise ValueError(f"base calibration: outcomes lack columns {missing}")
    if outcomes.duplicated(["tokens_per_event", "seed"]).any():
        raise ValueError("base calibration: a (tokens_per_event, seed) appears twice")
    if not margin_factor >= 1:
        raise ValueError(f"base calibration: margin_factor must be >= 1, got {margin_factor:g}")
    rows = []
    for dose, group in outcomes.groupby("tokens_per_event", sort=True):
        counts, why = emergence_within_margin(group, margin_factor)
        excess = pd.to_numeric(group.get("excess_drop", pd.Series(np.nan, group.index)),
                               errors="coerce")  # fmt: skip
        mean, low, high = mean_interval(excess, level=level)
        bearing = _load_bearing(group) if excess.notna().any() else pd.Series(False, group.index)
        if require_load_bearing and not bearing.all():
            why.append(f"top head not load-bearing in seeds {sorted(group.loc[~bearing, 'seed'])}")
        share = group["copy_share"].mean() if "copy_share" in group else math.nan
        rows.append({
            "tokens_per_event": float(dose), "copy_share": float(share), **counts,
            "excess_drop": mean, "excess_drop_ci_low": low, "excess_drop_ci_high": high,
            "n_load_bearing": int(bearing.sum()), "qualifies": not why,
            "chosen": False, "label": base_label(float(dose)),
            "reason": "; ".join(why) or "every seed formed heads within the margin",
        })  # fmt: skip
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    chosen = _chosen_index(table)
    if chosen is not None:
        table.loc[chosen, "chosen"] = True
    return table


def _chosen_index(table: pd.DataFrame) -> int | None:
    """The last row of the leading run of qualifying doses (densest first)."""
    chosen = None
    for index, qualifies in table["qualifies"].items():
        if not qualifies:
            break
        chosen = index
    return chosen


def choose_dose(
    outcomes: pd.DataFrame,
    *,
    margin_factor: float = 1.5,
    require_load_bearing: bool = False,
    level: float = 0.95,
) -> dict[str, Any]:
    """The rule :data:`DOSE_RULE` on ``outcomes`` (see :func:`dose_response_table`).

    Returns JSON-safe ``{tokens_per_event, label, rule, table, reason}``;
    ``tokens_per_event`` None (and ``label`` None) when the densest dose already fails.
    """
    table = dose_response_table(outcomes, margin_factor=margin_factor,
                                require_load_bearing=require_load_bearing, level=level)  # fmt: skip
    rule = DOSE_RULE.format(
        margin_factor=margin_factor,
        load_bearing=(" and the top head's ablation excess drop is above 0 in every seed"
                      if require_load_bearing else ""),
    )  # fmt: skip
    picked = table[table["chosen"]]
    if picked.empty:
        first = table.iloc[0] if len(table) else None
        reason = ("no dose qualifies: the densest dose "
                  f"({first['tokens_per_event']:g}) fails: {first['reason']}"
                  if first is not None else "no outcomes")  # fmt: skip
        return json_safe({"tokens_per_event": None, "label": None, "rule": rule, "reason": reason,
                          "table": table.to_dict("records")})  # fmt: skip
    row = picked.iloc[0]
    after = table[table["tokens_per_event"] > row["tokens_per_event"]]
    reason = f"one copy per {row['tokens_per_event']:g} tokens: {row['reason']}"
    if len(after):
        reason += f"; the next lighter dose ({after.iloc[0]['tokens_per_event']:g}): "
        reason += str(after.iloc[0]["reason"])
    return json_safe({"tokens_per_event": float(row["tokens_per_event"]),
                      "label": row["label"], "rule": rule, "reason": reason,
                      "table": table.to_dict("records")})  # fmt: skip


def outcomes_from_runs(
    runs: pd.DataFrame, doses: Mapping[str, Mapping[str, Any]], *, mode: str = "zero"
) -> pd.DataFrame:
    """The calibration's outcomes (:data:`OUTCOME_COLUMNS` + ``excess_drop``, ``copy_share``)
    from the per-run table of :func:`ih_kedro.science.evaluation.bi_induct_runs.run_table`.

    ``doses`` maps each run's ``variant`` label to its ``fixed_rate_copies`` options
    (``tokens_per_event``, ``span_min``, ``span_max``); ``copy_share`` is the expected share of
    copied tokens, mean span / ``tokens_per_event``; the budget is the run's ``final_step``; the
    excess drop is ``ablation_excess_copy_<mode>`` (with ``excess_drop_ci_low``, the run's
    bootstrap CI, where the table has it). Raises naming a label without a dose."""
    unknown = sorted(set(runs["variant"]) - set(doses))
    if unknown:
        raise ValueError(
            f"base calibration: runs of {unknown} have no dose (labels: {sorted(doses)})"
        )
    options = {label: dict(doses[label]) for label in runs["variant"]}
    dose = runs["variant"].map(lambda v: float(options[v]["tokens_per_event"]))
    span = runs["variant"].map(
        lambda v: (float(options[v].get("span_min", 4)) + float(options[v].get("span_max", 8))) / 2
    )
    out = pd.DataFrame({
        "tokens_per_event": dose, "seed": runs["seed"].astype(int),
        "emergence_step": pd.to_numeric(runs["emergence_step"], errors="coerce").where(
            ~runs["emergence_censored"].fillna(True).astype(bool)),
        "censored": runs["emergence_censored"].fillna(True).astype(bool),
        "budget_steps": runs["final_step"].astype(int),
        "excess_drop": pd.to_numeric(runs[f"ablation_excess_copy_{mode}"], errors="coerce"),
        "copy_share": span / dose, "label": runs["variant"],
    })  # fmt: skip
    low = f"ablation_excess_copy_{mode}_ci_low"
    if low in runs:  # each seed's bootstrap CI over its copy probes
        out["excess_drop_ci_low"] = pd.to_numeric(runs[low], errors="coerce").to_numpy()
    return out


def dose_options(choice: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """``fixed_rate_copies`` options of the chosen base: ``base`` with its ``tokens_per_event``
    replaced by the chosen dose. Raises when no dose was chosen."""
    if choice.get("tokens_per_event") is None:
        raise ValueError(f"base calibration: no dose chosen ({choice.get('reason')})")
    return {**dict(base), "tokens_per_event": float(choice["tokens_per_event"])}


__all__ = [
    "DOSE_RULE",
    "OUTCOME_COLUMNS",
    "TABLE_COLUMNS",
    "base_label",
    "choose_dose",
    "dose_options",
    "dose_response_table",
    "outcomes_from_runs",
]
