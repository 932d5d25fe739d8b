"""Thin nodes around ``ih_kedro.science.statistics.base_calibration``; no file I/O."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ih_kedro.science.statistics.base_calibration import choose_dose, outcomes_from_runs
from ih_kedro.science.statistics.plots.base_calibration import plot_dose_response

logger = logging.getLogger(__name__)


def dose_labels(training: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``label -> fixed_rate_copies options`` of the sweep's ``data_variants`` (each entry's
    options over ``variant_options.fixed_rate_copies``)."""
    shared = dict((training.get("variant_options") or {}).get("fixed_rate_copies") or {})
    doses = {}
    for entry in training.get("data_variants") or []:
        if not isinstance(entry, Mapping) or entry.get("variant") != "fixed_rate_copies":
            raise ValueError(
                "base_calibration.training.data_variants: every entry must be "
                f"{{variant: fixed_rate_copies, label, options}}, got {entry!r}"
            )
        doses[str(entry["label"])] = {**shared, **dict(entry.get("options") or {})}
    return doses


def calibrate_base(
    runs_table: pd.DataFrame, training: dict[str, Any], params: dict[str, Any]
) -> tuple[dict[str, Any], pd.DataFrame, Figure]:
    """The chosen dose (``dose_choice.json``: dose, label, rule, reason, table), the
    dose-response table and its figure, from the per-run table of the dose sweep.

    ``params``: ``margin_factor`` (1.5), ``require_load_bearing`` (False), ``ablation_mode``
    (``zero``), ``level`` (0.95)."""
    outcomes = outcomes_from_runs(runs_table, dose_labels(training),
                                  mode=str(params.get("ablation_mode", "zero")))  # fmt: skip
    choice = choose_dose(outcomes, margin_factor=float(params.get("margin_factor", 1.5)),
                         require_load_bearing=bool(params.get("require_load_bearing", False)),
                         level=float(params.get("level", 0.95)))  # fmt: skip
    logger.info("base calibration: %s (%s)", choice["label"], choice["reason"])
    table = pd.DataFrame(choice["table"])
    return choice, table, plot_dose_response(outcomes, table)
