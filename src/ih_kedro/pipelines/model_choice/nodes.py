"""Thin nodes around ``ih_kedro.science.statistics.model_choice``; no file I/O."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ih_kedro.science.statistics.model_choice import choose_model as apply_model_rule
from ih_kedro.science.statistics.model_choice import outcomes_from_runs
from ih_kedro.science.statistics.plots.model_choice import plot_model_choice

logger = logging.getLogger(__name__)


def choose_model(
    runs_table: pd.DataFrame, compute_table: pd.DataFrame, params: dict[str, Any]
) -> tuple[dict[str, Any], pd.DataFrame, Figure]:
    """The chosen model (``model_choice.json``: preset, rule, reason, table), the per-candidate
    table and its figure, from the per-run table of the candidates' base-arm runs.

    ``params``: ``margin_factor`` (1.5), ``ablation_mode`` (``zero``), ``level`` (0.95)."""
    mode = str(params.get("ablation_mode", "zero"))
    outcomes = outcomes_from_runs(runs_table, compute_table, mode=mode)
    choice = apply_model_rule(outcomes, margin_factor=float(params.get("margin_factor", 1.5)),
                              mode=mode, level=float(params.get("level", 0.95)))  # fmt: skip
    logger.info("model choice: %s (%s)", choice["preset"], choice["reason"])
    table = pd.DataFrame(choice["table"])
    return choice, table, plot_model_choice(outcomes, table)
