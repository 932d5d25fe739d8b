"""model_choice: the node on a synthetic runs table whose answer is known, the registry, and
``kedro run --pipeline=model_choice`` on a micro grid of two candidates."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from ih_kedro.pipelines.model_choice.nodes import choose_model
from ih_kedro.pipelines.model_choice.pipeline import EXPERIMENT
from tests.micro_project import (
    MICRO_EVALUATION,
    MICRO_EXPERIMENT_TELEMETRY,
    MICRO_EXPERIMENT_TRAINING,
    base_parameters,
    deep_merge,
    kedro_run,
    micro_data_engineering,
    new_micro_project,
    run_output,
    write_local_parameters,
)


def _runs_table() -> tuple[pd.DataFrame, pd.DataFrame]:
    """ "small" forms heads but its top head's CI reaches 0 in seed 1; "big" bears load."""
    rows = []
    for preset, lows in (("small", [0.05, -0.01]), ("big", [0.1, 0.2])):
        for seed, low in enumerate(lows):
            rows.append({"run_name": f"{preset}_s{seed}", "preset": preset, "variant": "base",
                         "seed": seed, "final_step": 1500, "emergence_step": 700.0,
                         "emergence_censored": False, "ablation_excess_copy_zero": low + 0.1,
                         "ablation_excess_copy_zero_ci_low": low,
                         "ablation_excess_copy_zero_ci_high": low + 0.2})  # fmt: skip
    runs = pd.DataFrame(rows)
    compute = pd.DataFrame({"run_name": runs["run_name"],
                            "flops": [1.0, 1.0, 4.0, 4.0]})  # fmt: skip
    return runs, compute


def test_choose_model_picks_the_known_candidate():
    runs, compute = _runs_table()
    choice, table, figure = choose_model(runs, compute, {"margin_factor": 1.5})
    assert choice["preset"] == "big"
    assert list(table["preset"]) == ["small", "big"]
    assert list(table["n_load_bearing"]) == [1, 2]
    assert len(figure.axes) == 2


def test_registry_has_model_choice(project_root: Path) -> None:
    bootstrap_project(project_root)
    outputs = pipelines["model_choice"].all_outputs()
    assert {"model_choice.sweep_manifest", "model_choice.runs_table", "model_choice.model_choice",
            "model_choice.model_table", "model_choice.model_choice_plot"} <= outputs  # fmt: skip


MICRO_TRAINING = {
    **MICRO_EXPERIMENT_TRAINING,
    "presets": ["attn-only-2l-d64", "gpt2-tiny"],
    "seeds": [0],
}


@pytest.mark.slow  # ~40 s on 2 shared cores
@pytest.mark.ci  # ... but CI runs it: the pipeline's one end-to-end check
def test_model_choice_kedro_run_end_to_end(tmp_path: Path) -> None:
    project = new_micro_project(tmp_path)
    params = base_parameters(project, EXPERIMENT)
    params["training"] = deep_merge(params["training"], MICRO_TRAINING)
    params["telemetry"] = deep_merge(params["telemetry"], MICRO_EXPERIMENT_TELEMETRY)
    params["evaluation"] = deep_merge(params["evaluation"], MICRO_EVALUATION)
    write_local_parameters(
        project, {"data_engineering": micro_data_engineering(project), EXPERIMENT: params}
    )
    result = kedro_run(project, f"--pipeline={EXPERIMENT}")
    assert result.returncode == 0, run_output(result)
    reports = project / "data" / "08_reporting" / EXPERIMENT
    table = pd.read_csv(reports / "model_choice.csv")
    assert sorted(table["preset"]) == ["attn-only-2l-d64", "gpt2-tiny"]
    assert (table["n_seeds"] == 1).all() and table["flops"].gt(0).all()
    # gpt2-tiny (MLPs) costs more FLOPs per token than the attention-only d64: listed second.
    assert list(table["preset"]) == ["attn-only-2l-d64", "gpt2-tiny"]
    choice = json.loads((reports / "model_choice.json").read_text())
    # 4 steps form no heads: no candidate qualifies, and the reason names both.
    assert choice["preset"] is None and "no candidate qualifies" in choice["reason"]
    assert "gpt2-tiny: no heads within the budget" in choice["reason"]
    assert (reports / "model_choice.png").stat().st_size > 0
