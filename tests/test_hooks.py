"""Experiment designs fail before any training when a min_layer is beyond the model."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

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


# Parameter overrides (--params / --config) that name no parameter fail before any node runs.


def _loader(tmp_path, runtime_params, env_files=None):
    import shutil

    from kedro.config import OmegaConfigLoader

    from ih_kedro.settings import CONFIG_LOADER_ARGS

    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf" / "base", conf / "base")
    (conf / "local").mkdir()
    for name, text in (env_files or {}).items():
        (conf / "local" / name).write_text(text)
    return OmegaConfigLoader(str(conf), runtime_params=runtime_params, **CONFIG_LOADER_ARGS)


def test_an_unknown_override_names_itself_and_the_nearest_key(tmp_path):
    from ih_kedro.hooks import ParameterOverrideHooks, UnknownParameterError

    overrides = {"law_fit": {"training": {"seedz": [0, 1, 2], "max_steps": 10}}}
    context = SimpleNamespace(config_loader=_loader(tmp_path, overrides))
    with pytest.raises(UnknownParameterError) as caught:
        ParameterOverrideHooks().after_context_created(context)
    message = caught.value.message
    assert (
        "`law_fit.training.seedz`: no such parameter; did you mean `law_fit.training.seeds`?"
        in (message)
    )
    assert "max_steps" not in message  # the known key is not reported
    assert isinstance(caught.value, ValueError)


def test_a_dotted_top_level_key_is_unknown_and_points_at_the_nested_one(tmp_path):
    """What Kedro made of a dotted key in a --config file before the project CLI expanded it."""
    from ih_kedro.hooks import UnknownParameterError, check_parameter_overrides

    loader = _loader(tmp_path, {"law_fit.training.max_steps": 3000})
    with pytest.raises(UnknownParameterError, match=r"did you mean `law_fit\.training\.max_steps`"):
        check_parameter_overrides(loader)


def test_known_overrides_pass_and_are_applied(tmp_path):
    from ih_kedro.hooks import check_parameter_overrides

    overrides = {
        "law_fit": {"training": {"seeds": [0, 1, 2]}},
        "telemetry": {"external_checkpoints": "/p"},  # null in conf/base: any value
        "data_engineering": {"executor": {"options": {"partition": "gpu"}}},  # free-form {}
    }
    loader = _loader(tmp_path, overrides)
    check_parameter_overrides(loader)
    assert loader["parameters"]["law_fit"]["training"]["seeds"] == [0, 1, 2]
    assert loader.runtime_params == overrides  # the check leaves the loader as it was


def test_a_key_only_the_env_defines_is_known(tmp_path):
    from ih_kedro.hooks import UnknownParameterError, check_parameter_overrides

    overrides = {"law_fit": {"training": {"only_here": 1}}}
    with pytest.raises(UnknownParameterError):
        check_parameter_overrides(_loader(tmp_path / "a", overrides))
    env = {"parameters_extra.yml": "law_fit: {training: {only_here: 0}}"}
    check_parameter_overrides(_loader(tmp_path / "b", overrides, env))


def test_unknown_overrides_walks_mappings_only_where_both_are_mappings():
    from ih_kedro.hooks import unknown_overrides

    parameters = {"a": {"b": 1, "c": {"d": 2}, "free": {}, "none": None}, "lst": [1]}
    overrides = {"a": {"b": {"x": 1}, "c": {"e": 1}, "free": {"y": 1}, "none": {"z": 1}},
                 "lst": [2], "zz": 0}  # fmt: skip
    assert unknown_overrides(parameters, overrides) == ["a.c.e", "zz"]
