"""``law_mechanisms_reference``: the ``reference_schedule`` arm's wiring and its schedule, whose
warm-up and cosine horizon in steps scale as 1/(B·C) (fixed in tokens, as the reference's)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from ih_kedro.pipelines.law_mechanisms.pipeline import ARMS, REFERENCE_ARM
from ih_kedro.science.training.grid import expand_grid
from tests.micro_project import base_parameters


def test_registry_has_the_reference_arm_only_in_its_own_pipeline(project_root: Path) -> None:
    bootstrap_project(project_root)
    with_arm = {n.namespace for n in pipelines["law_mechanisms_reference"].nodes}
    for arm in [*ARMS, REFERENCE_ARM, "size"]:
        assert f"law_mechanisms.{arm}.training" in with_arm
    without = {n.namespace for n in pipelines["law_mechanisms"].nodes}
    assert f"law_mechanisms.{REFERENCE_ARM}.training" not in without
    fits = next(n for n in pipelines["law_mechanisms_reference"].nodes
                if n.name == "law_mechanisms.mechanism_fits")  # fmt: skip
    assert f"law_mechanisms.{REFERENCE_ARM}.emergence_table" in fits.inputs
    assert pipelines["law_mechanisms_reference"].all_outputs() >= {
        "law_mechanisms.mechanism_fits", "law_mechanisms.mechanism_contrasts"}  # fmt: skip


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
