"""``markov`` calibration nodes: measure "near the frontier" on the Markov processes themselves.

A small repetition sweep of the reference process (``params:markov.calibration``: process,
frequency, reliabilities, seeds, ``max_fraction`` of the main budget) trains through the same
training stage as the main sweep (:func:`ih_kedro.pipelines.training.nodes.train_sweep`, same
DeepSpeed engine, checkpoint store and MLflow nesting); the rule that turns its outcomes into
the near-frontier level is :func:`ih_kedro.science.statistics.markov_calibration.frontier_level`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.variants.markov import VARIANT
from ih_kedro.science.data.variants.markov_process import MarkovProcess
from ih_kedro.science.statistics import markov_calibration as mc

from .nodes import process_files, run_cells

logger = logging.getLogger(__name__)


def _calibration_options(calibration: Mapping[str, Any]) -> tuple[str, float, list[float]]:
    process = str(calibration["process"])
    frequency = float(calibration["frequency"])
    reliabilities = [float(r) for r in calibration["reliabilities"]]
    return process, frequency, reliabilities


def calibration_budget(training: Mapping[str, Any], calibration: Mapping[str, Any]) -> int:
    """The calibration runs' step budget: ``max_fraction`` of the main runs' ``max_steps``."""
    fraction = float(calibration.get("max_fraction", 0.5))
    if not 0 < fraction <= 1:
        raise ValueError(f"markov.calibration.max_fraction: must be in (0, 1], got {fraction}")
    if training.get("max_steps") is None:
        raise ValueError("markov.calibration: needs markov.training.max_steps (a step budget)")
    # round() first: 0.7 * 100 is 70.00000000000001 in floating point, not 71 steps
    return int(math.ceil(round(fraction * int(training["max_steps"]), 9)))


def calibration_training(
    training: Mapping[str, Any], calibration: Mapping[str, Any]
) -> dict[str, Any]:
    """The calibration sweep's training parameters: the main sweep's, with one cell per swept
    reliability of the reference process, the calibration seeds and the shorter budget."""
    process, frequency, reliabilities = _calibration_options(calibration)
    cells = [
        {"variant": VARIANT, "label": f"calibration.{process}.{name}",
         "options": {"process": process, "level": name}}
        for name in mc.calibration_levels(frequency, reliabilities)
    ]  # fmt: skip
    return {
        **dict(training),
        "seeds": [int(s) for s in calibration.get("seeds", [0])],
        "data_variants": cells,
        "exclude_cells": [],  # the main grid's exclusions name main-grid cells only
        "seed_cells": None,  # so do its adaptive seeds' cells
        "max_steps": calibration_budget(training, calibration),
        "max_tokens": None,
    }


def plan_calibration(
    processes: dict[str, MarkovProcess], calibration: dict[str, Any]
) -> dict[str, Any]:
    """``calibration_variant_data``: the process files and the swept levels."""
    process, frequency, reliabilities = _calibration_options(calibration)
    if process not in processes:
        raise ValueError(
            f"markov.calibration.process: {process!r} is not a designed process "
            f"({sorted(processes)})"
        )
    levels = mc.calibration_levels(frequency, reliabilities)
    return {
        **process_files(processes),
        "levels": {
            name: {**level, "source": "calibration sweep"} for name, level in levels.items()
        },
    }


def train_calibration_sweep(
    train_tokens: PackedTokens,
    checkpoint_store: Any,
    training: dict[str, Any],
    calibration: dict[str, Any],
    calibration_variant_data: dict[str, Any],
) -> pd.DataFrame:
    """Train the calibration sweep through the training stage's node (resumable, tracked)."""
    from ih_kedro.pipelines.training.nodes import train_sweep

    return train_sweep(
        train_tokens,
        checkpoint_store,
        calibration_training(training, calibration),
        calibration_variant_data,
    )


def measure_frontier_level(
    calibration_sweep_manifest: pd.DataFrame,
    calibration_variant_data: dict[str, Any],
    training: dict[str, Any],
    calibration: dict[str, Any],
) -> dict[str, Any]:
    """``frontier_level``: the near-frontier level the calibration measured, with the rule and
    the evidence per swept reliability (``markov.calibration.level`` names the level it sets)."""
    config = calibration_training(training, calibration)
    cells = run_cells(config)
    missing = sorted(set(cells["run_name"]) - set(calibration_sweep_manifest["run_name"]))
    if missing:
        raise ValueError(
            f"markov.calibration: runs missing from the calibration sweep manifest: {missing}"
        )
    manifest = cells.merge(
        calibration_sweep_manifest[["run_name", "online_emergence_step"]], on="run_name"
    )
    budget = int(config["max_steps"])
    outcomes = mc.calibration_outcomes(manifest, calibration_variant_data["levels"], budget)
    _, frequency, _ = _calibration_options(calibration)
    level = mc.frontier_level(
        outcomes,
        frequency=frequency,
        budget_steps=budget,
        max_fraction=float(calibration.get("max_fraction", 0.5)),
    )
    level["level"] = str(calibration.get("level", "near_frontier"))
    level["process"] = str(calibration["process"])
    logger.info(
        "markov calibration: %s at frequency %g -> reliability %g (%s)",
        level["level"],
        level["frequency"],
        level["reliability"],
        level["source"],
    )
    return level
