"""How far a run got toward an induction head within its budget, with and without a threshold.

The emergence step (:mod:`ih_kedro.science.telemetry.emergence`) needs a threshold, and a
formed / not-formed verdict read at one threshold has a cliff: a run whose best head peaks at
0.39 and one that never rose both count as "not formed" at 0.4, a run at 0.41 as formed. Two
quantities per run remove that cliff or show what it does:

- :func:`formation_score`, threshold-free: the run's curve (best head's mean score, e.g.
  prefix matching) averaged over the whole budget, ``(1 / (budget - s0)) * integral from s0 to
  budget of curve(s) ds`` with ``s0`` the first checkpoint, trapezoids between checkpoints and
  the last checkpoint's value carried flat to the budget (a run the online early stop ended
  after its head formed keeps that head; :data:`CARRY_FORWARD`). A head that forms early
  scores near its plateau, one that forms late about half of it, one that never forms its
  floor; the score is continuous in when and how far the curve rose.
- :func:`threshold_outcomes`: the crossing step and the formed verdict at several thresholds
  (e.g. 0.3 / 0.4 / 0.5) from the same curve, so a verdict can be checked across thresholds
  instead of assumed. A run that stopped before its budget without reaching a threshold (the
  online early stop watched a lower one) is *unobserved* there (``<NA>``), not "not formed".

:func:`formation_table` gives one row per run of a sweep's ``score_samples``. Plain
numpy/pandas; no Kedro imports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ih_kedro.science.telemetry.emergence import (
    _sorted_finite,  # the same (steps, curve) checks and order as the emergence estimators
    emergence_curve,
    threshold_crossing,
)

CARRY_FORWARD = "last checkpoint's value carried flat to the budget"
"""How :func:`formation_score` treats the span between a run's last checkpoint and its budget."""

DEFAULT_THRESHOLDS = (0.3, 0.4, 0.5)


def formed_column(threshold: float) -> str:
    """The column of :func:`formation_table` holding the formed verdict at ``threshold``
    (``formed_at_0.4``)."""
    return f"formed_at_{float(threshold):g}"


def step_column(threshold: float) -> str:
    """The column of :func:`formation_table` holding the crossing step at ``threshold``."""
    return f"step_at_{float(threshold):g}"


def _within_budget(
    steps: np.ndarray, curve: np.ndarray, budget: float
) -> tuple[np.ndarray, np.ndarray]:
    """The finite ``(step, value)`` points at or before ``budget``, sorted by step."""
    steps, curve = _sorted_finite(steps, curve)
    inside = steps <= budget
    return steps[inside], curve[inside]


def formation_score(steps: np.ndarray, curve: np.ndarray, budget: float) -> float:
    """The curve's mean over the budget (threshold-free formation measure).

    Args:
        steps: ``(K,)`` checkpoint steps (any order; NaN points skipped).
        curve: ``(K,)`` the run-level metric at those steps (e.g. best head's PS).
        budget: the run's step budget; checkpoints after it are ignored, the span after the
            last checkpoint up to it carries the last value (:data:`CARRY_FORWARD`).

    Returns:
        ``integral(curve, s0..budget) / (budget - s0)``, in the metric's units; NaN when no
        finite point lies at or before the budget.

    Raises:
        ValueError: ``budget`` not after the first checkpoint.
    """
    steps, curve = _within_budget(steps, curve, budget)
    if steps.size == 0:
        return math.nan
    if budget <= steps[0]:
        raise ValueError(
            f"budget: {budget:g} steps is not after the first checkpoint (step {steps[0]:g})"
        )
    area = float(np.sum((steps[1:] - steps[:-1]) * (curve[1:] + curve[:-1]) / 2.0))
    area += float(curve[-1]) * (budget - float(steps[-1]))
    return area / (budget - float(steps[0]))


def threshold_outcomes(
    steps: np.ndarray, curve: np.ndarray, budget: float, thresholds: Sequence[float]
) -> dict[str, Any]:
    """Crossing step and formed verdict at each threshold, from one curve.

    A threshold is ``formed`` when the curve reaches it at or before ``budget``; ``not formed``
    when the run's checkpoints reach the budget without it; unobserved (``None``) when the run
    stopped before its budget without reaching it (an early stop that watched a lower
    threshold, or a failed run).

    Returns:
        ``{step_column(t): step or NaN, formed_column(t): True | False | None}`` per threshold.
    """
    steps, curve = _within_budget(steps, curve, budget)
    reached_budget = bool(steps.size) and steps[-1] >= budget
    out: dict[str, Any] = {}
    for threshold in thresholds:
        crossing = threshold_crossing(steps, curve, float(threshold)) if steps.size else None
        out[step_column(threshold)] = math.nan if crossing is None else float(crossing)
        if crossing is not None:
            out[formed_column(threshold)] = True
        else:
            out[formed_column(threshold)] = False if reached_budget else None
    return out


def formation_table(
    score_samples: Mapping[str, Mapping[str, np.ndarray]],
    budgets: Mapping[str, float],
    *,
    metric: str,
    min_layer: int = 1,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
) -> pd.DataFrame:
    """One row per run: formation score and the formed verdict at every threshold.

    Args:
        score_samples: telemetry's ``{run_name: {"steps": (K,), metric: (K, n, ...)}}``.
        budgets: ``{run_name: step budget}``; every run of ``score_samples`` needs one.
        metric: the samples the curve is read from (e.g. ``prefix_matching_by_parity``).
        min_layer: layers ``>= min_layer`` compete for the best head.
        thresholds: levels for :func:`threshold_outcomes`.

    Returns:
        Columns ``run_name, metric, budget_steps, last_step, formation_score, peak`` (the
        curve's maximum), then ``step_at_<t>`` and ``formed_at_<t>`` (nullable boolean) per
        threshold.
    """
    rows = []
    for run_name in sorted(score_samples):
        scores = score_samples[run_name]
        if metric not in scores:
            raise ValueError(f"score_samples[{run_name!r}]: no {metric!r} samples")
        if run_name not in budgets:
            raise ValueError(f"budgets: no step budget for run {run_name!r}")
        steps = np.asarray(scores["steps"], dtype=float)  # (K,)
        curve = emergence_curve(np.asarray(scores[metric]), min_layer)  # (K,)
        budget = float(budgets[run_name])
        finite = np.isfinite(curve)
        rows.append(
            {
                "run_name": run_name,
                "metric": metric,
                "budget_steps": budget,
                "last_step": float(np.nanmax(steps)) if steps.size else math.nan,
                "formation_score": formation_score(steps, curve, budget),
                "peak": float(np.max(curve[finite])) if finite.any() else math.nan,
                **threshold_outcomes(steps, curve, budget, thresholds),
            }
        )
    columns = ["run_name", "metric", "budget_steps", "last_step", "formation_score", "peak"]
    for threshold in thresholds:
        columns += [step_column(threshold), formed_column(threshold)]
    table = pd.DataFrame(rows, columns=columns)
    for threshold in thresholds:
        table[formed_column(threshold)] = table[formed_column(threshold)].astype("boolean")
    return table


__all__ = [
    "CARRY_FORWARD",
    "DEFAULT_THRESHOLDS",
    "formation_score",
    "formation_table",
    "formed_column",
    "step_column",
    "threshold_outcomes",
]
