"""Experiment designs fail before any training when a min_layer is beyond the model."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kedro.io import DataCatalog, MemoryDataset

from ih_kedro.hooks import DesignValidationHooks, validate_experiment_designs
from ih_kedro.pipelines.law_fit.pipeline import create_pipeline

ROOT = Path(__file__).resolve().parents[1]


def _law_fit_parameters() -> dict:
    return yaml.safe_load((ROOT / "conf/base/parameters_law_fit.yml").read_text())


def _names() -> list[str]:
    return [node.name for node in create_pipeline().nodes]


def test_default_law_fit_design_passes():
    validate_experiment_designs(_law_fit_parameters(), _names())


@pytest.mark.parametrize(
    ("edit", "parameter"),
    [
        (lambda p: p["telemetry"]["emergence"]["metrics"][0].update(min_layer=2),
         r"law_fit\.telemetry\.emergence\.metrics\[0\]\.min_layer: 2"),
        (lambda p: p["telemetry"].update(min_layer=5), r"law_fit\.telemetry\.min_layer: 5"),
        (lambda p: p["statistics"].update(trajectory_min_layer=2),
         r"law_fit\.statistics\.trajectory_min_layer"),
    ],
)  # fmt: skip
def test_min_layer_beyond_the_model_fails_before_the_first_node(edit, parameter):
    parameters = _law_fit_parameters()
    edit(parameters["law_fit"])  # the default model has 2 layers
    catalog = DataCatalog({"parameters": MemoryDataset(parameters)})
    with pytest.raises(ValueError, match=parameter):
        DesignValidationHooks().before_pipeline_run({}, create_pipeline(), catalog)


def test_model_level_metrics_and_other_pipelines_are_not_checked():
    parameters = _law_fit_parameters()
    # min_layer is meaningless for a model-level metric: not an error.
    parameters["law_fit"]["telemetry"]["emergence"]["metrics"][1]["min_layer"] = 9
    validate_experiment_designs(parameters, _names())
    # A pipeline without law_fit nodes does not check law_fit's design.
    parameters["law_fit"]["telemetry"]["min_layer"] = 9
    validate_experiment_designs(parameters, ["make_probe_set", "score_checkpoints"])
