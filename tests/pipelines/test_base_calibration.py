"""base_calibration: the dose labels, the node on a synthetic runs table whose answer is known,
the registry, and ``kedro run --pipeline=base_calibration`` on a micro grid."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from ih_kedro.pipelines.base_calibration.nodes import calibrate_base, dose_labels
from ih_kedro.pipelines.base_calibration.pipeline import EXPERIMENT
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

TRAINING = {
    "variant_options": {"fixed_rate_copies": {"span_min": 4, "span_max": 8}},
    "data_variants": [
        {"variant": "fixed_rate_copies", "label": f"copies_1_per_{n}",
         "options": {"tokens_per_event": n}} for n in (16, 64, 256)
    ],
}  # fmt: skip


def _runs_table() -> pd.DataFrame:
    """Heads by step 600 at 16 and 64 in every seed; at 256 seed 1 never forms (censored)."""
    rows = []
    for n, steps in ((16, [500, 550]), (64, [580, 600]), (256, [900, None])):
        for seed, step in enumerate(steps):
            rows.append({"variant": f"copies_1_per_{n}", "seed": seed, "final_step": 1500,
                         "emergence_step": 1500.0 if step is None else float(step),
                         "emergence_censored": step is None,
                         "ablation_excess_copy_zero": 0.1 * seed + n / 1000})  # fmt: skip
    return pd.DataFrame(rows)


def test_dose_labels_merge_the_shared_options():
    doses = dose_labels(TRAINING)
    assert doses["copies_1_per_64"] == {"span_min": 4, "span_max": 8, "tokens_per_event": 64}
    with pytest.raises(ValueError, match="fixed_rate_copies"):
        dose_labels({"data_variants": ["natural"]})


def test_calibrate_base_picks_the_known_dose():
    choice, table, figure = calibrate_base(_runs_table(), TRAINING, {"margin_factor": 1.5})
    assert choice["tokens_per_event"] == 64
    assert choice["label"] == "natural, minimally enriched (one copy per 64 tokens)"
    row = table.set_index("tokens_per_event").loc[256]
    assert (row["n_formed"], bool(row["qualifies"])) == (1, False)
    assert table.set_index("tokens_per_event").loc[16, "copy_share"] == pytest.approx(6 / 16)
    assert math.isclose(table["budget_steps"].iloc[0], 1500)
    assert len(figure.axes) == 2
    with pytest.raises(ValueError, match="no dose"):
        calibrate_base(_runs_table(), {"data_variants": TRAINING["data_variants"][:1]}, {})


def test_registry_has_base_calibration(project_root: Path) -> None:
    bootstrap_project(project_root)
    outputs = pipelines["base_calibration"].all_outputs()
    assert {"base_calibration.sweep_manifest", "base_calibration.emergence_table",
            "base_calibration.runs_table", "base_calibration.dose_choice",
            "base_calibration.dose_response", "base_calibration.dose_response_plot"} <= outputs  # fmt: skip


MICRO_TRAINING = {**MICRO_EXPERIMENT_TRAINING, "seeds": [0, 1],
                  "data_variants": TRAINING["data_variants"][:2]}  # fmt: skip


@pytest.mark.slow  # ~50 s on 2 shared cores
@pytest.mark.ci  # ... but CI runs it: the pipeline's one end-to-end check
def test_base_calibration_kedro_run_end_to_end(tmp_path: Path) -> None:
    project = new_micro_project(tmp_path)
    params = base_parameters(project, EXPERIMENT)
    params["training"] = {**deep_merge(params["training"], MICRO_TRAINING),
                          "data_variants": MICRO_TRAINING["data_variants"]}  # fmt: skip
    params["telemetry"] = deep_merge(params["telemetry"], MICRO_EXPERIMENT_TELEMETRY)
    params["evaluation"] = deep_merge(params["evaluation"], MICRO_EVALUATION)
    write_local_parameters(
        project, {"data_engineering": micro_data_engineering(project), EXPERIMENT: params}
    )
    result = kedro_run(project, f"--pipeline={EXPERIMENT}")
    assert result.returncode == 0, run_output(result)
    reports = project / "data" / "08_reporting" / EXPERIMENT
    table = pd.read_csv(reports / "dose_response.csv")
    assert list(table["tokens_per_event"]) == [16, 64]
    assert (table["n_seeds"] == 2).all()
    choice = json.loads((reports / "dose_choice.json").read_text())
    # 4 steps form no heads: no dose qualifies, and the reason says so.
    assert choice["tokens_per_event"] is None and "no dose qualifies" in choice["reason"]
    assert (reports / "dose_response.png").stat().st_size > 0
