"""``law_mechanisms_reference``: the ``reference_schedule`` arm's wiring beside ``today`` and
``setup_check``, its contrasts, and its schedule, whose warm-up and cosine horizon in steps scale
as 1/(B·C) (fixed in tokens, as the reference's)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from ih_kedro.pipelines.law_mechanisms.nodes import reference_contrast_table
from ih_kedro.pipelines.law_mechanisms.pipeline import REFERENCE_ARM, REFERENCE_ARMS
from ih_kedro.science.training.grid import expand_grid
from tests.micro_project import (
    MICRO_LAW_ARM,
    MICRO_LAW_TELEMETRY,
    base_parameters,
    deep_merge,
    kedro_run,
    micro_data_engineering,
    new_micro_project,
    run_output,
    write_local_parameters,
)


def test_registry_has_the_reference_arm_only_in_its_own_pipeline(project_root: Path) -> None:
    bootstrap_project(project_root)
    with_arm = {n.namespace for n in pipelines["law_mechanisms_reference"].nodes}
    assert REFERENCE_ARMS == ("today", "setup_check", REFERENCE_ARM)
    for arm in REFERENCE_ARMS:
        assert f"law_mechanisms.{arm}.training" in with_arm
    for arm in ("growing_repetition", "distance_window", "both", "size"):
        assert f"law_mechanisms.{arm}.training" not in with_arm  # not trained here
    without = {n.namespace for n in pipelines["law_mechanisms"].nodes}
    assert f"law_mechanisms.{REFERENCE_ARM}.training" not in without
    fits = next(n for n in pipelines["law_mechanisms_reference"].nodes
                if n.name == "law_mechanisms.reference_fits")  # fmt: skip
    assert set(fits.inputs) >= {f"law_mechanisms.{arm}.emergence_table" for arm in REFERENCE_ARMS}
    # Its own tables: law_mechanisms.csv stays law_mechanisms' own.
    outputs = pipelines["law_mechanisms_reference"].all_outputs()
    assert {"law_mechanisms.reference_fits", "law_mechanisms.reference_contrasts",
            "law_mechanisms.reference_warmup",
            "law_mechanisms.reference_exponents_plot"} <= outputs  # fmt: skip
    assert "law_mechanisms.mechanism_fits" not in outputs


FIT_PARAMS = {"metric": "prefix_matching", "method": "threshold", "threshold": None,
              "level": 0.95, "contrast": {"reference": "today", "margin": 0.2}}  # fmt: skip


def _arm(a: float, b: float) -> pd.DataFrame:
    """Emergence rows of S* = 2e4 B^-a C^-b (x a small seed wiggle) on a 2 x 3 grid, 3 seeds."""
    rows = []
    for (batch, context), seed in itertools.product(
        [(bb, cc) for bb in (32, 128) for cc in (32, 64, 128)], (0, 1, 2)
    ):
        wiggle = 1.0 + 0.02 * (seed - 1) * (1 if (batch + context) % 3 else -1)
        rows.append({"run_name": f"B{batch}_C{context}_s{seed}", "batch_size": batch,
                     "context_length": context, "seed": seed, "metric": "prefix_matching",
                     "method": "threshold", "threshold": 0.4,
                     "step": 2e4 * batch**-a * context**-b * wiggle,
                     "status": "emerged", "censored": False})  # fmt: skip
    return pd.DataFrame(rows)


def test_reference_contrasts_are_against_today_and_the_reference_arm_against_setup_check():
    # Planted b: today 0.0, setup_check 0.3, reference_schedule 0.5 (a 0.8 in all three).
    tables = {"today": _arm(0.8, 0.0), "setup_check": _arm(0.8, 0.3),
              REFERENCE_ARM: _arm(0.8, 0.5)}  # fmt: skip
    table = reference_contrast_table(FIT_PARAMS, **tables)
    pairs = list(zip(table["arm"], table["reference"], strict=True))
    assert pairs == [("setup_check", "today"), (REFERENCE_ARM, "today"),
                     (REFERENCE_ARM, "setup_check")]  # fmt: skip
    assert list(table["delta_b"]) == pytest.approx([0.3, 0.5, 0.2], abs=0.01)
    assert list(table["delta_a"]) == pytest.approx([0.0, 0.0, 0.0], abs=0.01)
    assert table["delta_b_ci_low"].iloc[2] > 0  # 0.2 with a 2 % wiggle: resolved
    assert table["verdict_a"].iloc[1] == "no effect"


def test_reference_arm_warmup_and_horizon_scale_as_one_over_bc(project_root: Path) -> None:
    params = base_parameters(project_root, "law_mechanisms")[REFERENCE_ARM]["training"]
    configs = expand_grid(params)
    assert len(configs) == 3 * 2 * 3  # C {32, 64, 128} x B {32, 128} x 3 seeds
    assert {c.context_length for c in configs} == {32, 64, 128}
    assert {c.batch_size for c in configs} == {32, 128}
    horizon_tokens = int(params["horizon_tokens"])
    warmup_tokens = set()
    for config in configs:
        tokens_per_step = config.batch_size * config.context_length
        warmup, horizon = config.lr_schedule_steps()
        assert horizon == horizon_tokens // tokens_per_step
        assert warmup == math.floor(0.01 * horizon)
        warmup_tokens.add(warmup * tokens_per_step)
        assert (config.schedule, config.min_lr_ratio, config.weight_decay) == ("cosine", 0.0, 0.0)
        assert tuple(config.betas) == (0.9, 0.999)
    # Fixed in tokens: warm-up x B x C is one number, so warm-up steps are ∝ 1/(B·C).
    assert warmup_tokens == {655_360}
    steps = {(c.batch_size, c.context_length): c.lr_schedule_steps() for c in configs}
    assert steps[32, 32] == (640, 64_000) and steps[128, 128] == (40, 4_000)
    assert steps[32, 32][0] / steps[128, 128][0] == pytest.approx(128 * 128 / (32 * 32))


@pytest.mark.slow  # ~40 s on 2 shared cores
@pytest.mark.ci  # ... but CI runs it: the pipeline's one end-to-end check
def test_law_mechanisms_reference_kedro_run_end_to_end(tmp_path: Path) -> None:
    """Three arms trained (2 steps: nothing emerges), their own tables written with one row per
    arm / contrast and a note, ``law_mechanisms.csv`` untouched, and no other arm trained."""
    project = new_micro_project(tmp_path, n_documents=40, docs_per_shard=20)
    params = base_parameters(project, "law_mechanisms")
    for arm in REFERENCE_ARMS:
        params[arm]["training"] = deep_merge(params[arm]["training"], MICRO_LAW_ARM)
        params[arm]["telemetry"] = deep_merge(params[arm]["telemetry"], MICRO_LAW_TELEMETRY)
    params[REFERENCE_ARM]["training"].update({"warmup_steps": None, "horizon_tokens": 6400})
    write_local_parameters(
        project, {"data_engineering": micro_data_engineering(project), "law_mechanisms": params}
    )
    result = kedro_run(project, "--pipeline=law_mechanisms_reference")
    assert result.returncode == 0, run_output(result)
    reporting = project / "data" / "08_reporting" / "law_mechanisms"
    fits = pd.read_csv(reporting / "law_mechanisms_reference.csv")
    assert list(fits["arm"]) == list(REFERENCE_ARMS)
    assert fits["note"].notna().all()  # 2 steps: no run emerged, each row says why
    contrasts = pd.read_csv(reporting / "law_mechanisms_reference_contrasts.csv")
    assert list(zip(contrasts["arm"], contrasts["reference"], strict=True)) == [
        ("setup_check", "today"),
        (REFERENCE_ARM, "today"),
        (REFERENCE_ARM, "setup_check"),
    ]
    assert (reporting / "reference_exponents.png").stat().st_size > 0
    # Warm-up 1 % of floor(6,400 / (B·C)) steps: 1 at B4 C16 (100 steps), 0 at B4 C32 (50).
    warmup = pd.read_csv(reporting / "law_mechanisms_reference_warmup.csv")
    assert warmup[["batch_size", "context_length", "warmup_steps", "horizon_steps",
                   "n_runs", "n_emerged"]].values.tolist() == [[4, 16, 1, 100, 1, 0],
                                                               [4, 32, 0, 50, 1, 0]]  # fmt: skip
    assert warmup["warmup_share"].isna().all()  # nothing emerged
    assert not (reporting / "law_mechanisms.csv").exists()
    models = project / "data" / "06_models"
    trained = {}
    for summary in models.glob("law_mechanisms.*/checkpoints/*/run_summary.json"):
        run = json.loads(summary.read_text())
        arm = summary.parts[-4].removeprefix("law_mechanisms.")
        trained.setdefault(arm, set()).add((run["batch_size"], run["context_length"]))
    assert trained == {arm: {(4, 16), (4, 32)} for arm in REFERENCE_ARMS}
