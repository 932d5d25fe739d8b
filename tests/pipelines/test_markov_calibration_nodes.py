"""The ``markov`` calibration nodes on tiny hand-built inputs (no training, no ``kedro run``).

The calibration sweep's budget and training parameters, its variant data, the near-frontier
level measured from a hand-built sweep manifest, and that level read by ``plan_variant_data``.
The rule itself (:mod:`ih_kedro.science.statistics.markov_calibration`) is tested in
tests/science/statistics/; here each node's own wiring is pinned by values.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from ih_kedro.pipelines.markov.calibration_nodes import (
    calibration_budget,
    calibration_training,
    measure_frontier_level,
    plan_calibration,
    train_calibration_sweep,
)
from ih_kedro.pipelines.markov.nodes import plan_variant_data
from ih_kedro.science.data.variants.markov_process import MarkovProcess
from ih_kedro.science.training.grid import expand_grid
from tests.pipelines.test_markov_nodes import _process

_TRAINING = {
    "presets": ["m"],
    "batch_sizes": [2],
    "context_lengths": [8],
    "seeds": [0, 1, 2],
    "data_variants": [
        {"variant": "markov", "label": "A.hi", "options": {"process": "A", "level": "hi"}},
    ],
    "learning_rate": 0.01,
    "max_steps": 400,
    "max_tokens": 100_000,
    "online_emergence": {"threshold": 0.5, "eval_every": 25},
}
_CALIBRATION = {
    "level": "near",
    "process": "A",
    "frequency": "0.5",
    "reliabilities": [1, 0.6, "0.8", 0.6],  # unique, ascending
    "seeds": ["0", 1],
    "max_fraction": 0.75,
}
_NAMES = {  # (reliability, seed) -> run name
    (r, s): f"m_B2_C8_calibration.A.calibration_r{r:g}_s{s}"
    for r in (0.6, 0.8, 1.0)
    for s in (0, 1)
}


# --------------------------------------------------------------------------------------------
# calibration_budget
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fraction", "max_steps", "budget"),
    [
        (0.75, 400, 300),
        (0.5, 401, 201),  # 200.5 rounds up
        (1, 400, 400),
        ("0.25", "10", 3),  # 2.5 rounds up; strings cast
        (0.001, 400, 1),  # 0.4 rounds up to one step
    ],
)
def test_calibration_budget_is_the_fraction_of_max_steps_rounded_up(
    fraction: Any, max_steps: Any, budget: int
) -> None:
    got = calibration_budget({"max_steps": max_steps}, {"max_fraction": fraction})
    assert got == budget and type(got) is int


def test_calibration_budget_defaults_to_half() -> None:
    assert calibration_budget({"max_steps": 401}, {}) == 201


@pytest.mark.parametrize("fraction", [0, -0.5, 1.01, 2])
def test_calibration_budget_needs_a_fraction_in_zero_one(fraction: float) -> None:
    with pytest.raises(ValueError) as error:
        calibration_budget({"max_steps": 400}, {"max_fraction": fraction})
    assert str(error.value) == (
        f"markov.calibration.max_fraction: must be in (0, 1], got {float(fraction)}"
    )


@pytest.mark.parametrize("training", [{}, {"max_steps": None, "max_tokens": 1000}])
def test_calibration_budget_needs_max_steps(training: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as error:
        calibration_budget(training, {"max_fraction": 0.5})
    assert str(error.value) == (
        "markov.calibration: needs markov.training.max_steps (a step budget)"
    )


# --------------------------------------------------------------------------------------------
# calibration_training
# --------------------------------------------------------------------------------------------
def test_calibration_training_sweeps_the_reference_process_over_reliabilities() -> None:
    config = calibration_training(_TRAINING, _CALIBRATION)
    assert config == {
        "presets": ["m"],
        "batch_sizes": [2],
        "context_lengths": [8],
        "seeds": [0, 1],
        "data_variants": [
            {
                "variant": "markov",
                "label": f"calibration.A.calibration_r{r}",
                "options": {"process": "A", "level": f"calibration_r{r}"},
            }
            for r in ("0.6", "0.8", "1")
        ],
        "learning_rate": 0.01,
        "max_steps": 300,  # 0.75 x 400
        "max_tokens": None,
        "exclude_cells": [],
        "seed_cells": None,
        "online_emergence": {"threshold": 0.5, "eval_every": 25},
    }
    assert _TRAINING["seeds"] == [0, 1, 2] and _TRAINING["max_steps"] == 400  # not changed
    names = [c.run_name for c in expand_grid(config)]
    assert names == [_NAMES[r, s] for r in (0.6, 0.8, 1.0) for s in (0, 1)]


def test_calibration_training_defaults_to_seed_zero_and_half_the_budget() -> None:
    calibration = {"process": "B", "frequency": 1, "reliabilities": [0.5]}
    config = calibration_training(_TRAINING, calibration)
    assert config["seeds"] == [0]
    assert config["max_steps"] == 200
    assert config["data_variants"] == [
        {
            "variant": "markov",
            "label": "calibration.B.calibration_r0.5",
            "options": {"process": "B", "level": "calibration_r0.5"},
        }
    ]


# --------------------------------------------------------------------------------------------
# plan_calibration
# --------------------------------------------------------------------------------------------
def _saved(tmp_path: Path, **peaks: float) -> dict[str, MarkovProcess]:
    """Processes saved to ``tmp_path`` and loaded back (so they carry their file path)."""
    out = {}
    for name, peak in peaks.items():
        path = _process(name, vocab=4, path=None, peak=peak).save(tmp_path / f"{name}.npz")
        out[name] = MarkovProcess.load(path)
    return out


def test_plan_calibration_gives_the_process_files_and_the_swept_levels(tmp_path: Path) -> None:
    processes = _saved(tmp_path, A=0.0, B=1.0)
    plan = plan_calibration(processes, _CALIBRATION)
    source = "calibration sweep"
    assert plan == {
        "process_paths": {
            "A": str((tmp_path / "A.npz").resolve()),
            "B": str((tmp_path / "B.npz").resolve()),
        },
        "process_checksums": {"A": processes["A"].checksum(), "B": processes["B"].checksum()},
        "levels": {
            "calibration_r0.6": {"frequency": 0.5, "reliability": 0.6, "source": source},
            "calibration_r0.8": {"frequency": 0.5, "reliability": 0.8, "source": source},
            "calibration_r1": {"frequency": 0.5, "reliability": 1.0, "source": source},
        },
    }
    assert plan["process_checksums"]["A"] != plan["process_checksums"]["B"]


def test_plan_calibration_needs_a_designed_process(tmp_path: Path) -> None:
    processes = _saved(tmp_path, B=0.0, C=0.0)
    with pytest.raises(ValueError) as error:
        plan_calibration(processes, _CALIBRATION)
    assert str(error.value) == (
        "markov.calibration.process: 'A' is not a designed process (['B', 'C'])"
    )


# --------------------------------------------------------------------------------------------
# train_calibration_sweep
# --------------------------------------------------------------------------------------------
def test_train_calibration_sweep_trains_the_calibration_grid_through_the_training_stage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ih_kedro.pipelines.training import nodes as training_nodes

    calls = []
    manifest = pd.DataFrame({"run_name": ["r"]})

    def fake_train_sweep(*args: Any) -> pd.DataFrame:
        calls.append(args)
        return manifest

    monkeypatch.setattr(training_nodes, "train_sweep", fake_train_sweep)
    tokens, store, variant_data = object(), object(), {"levels": {}}
    got = train_calibration_sweep(tokens, store, _TRAINING, _CALIBRATION, variant_data)
    assert got is manifest
    assert len(calls) == 1
    assert calls[0][0] is tokens and calls[0][1] is store and calls[0][3] is variant_data
    assert calls[0][2] == calibration_training(_TRAINING, _CALIBRATION)


# --------------------------------------------------------------------------------------------
# measure_frontier_level
# --------------------------------------------------------------------------------------------
_LEVELS = {
    f"calibration_r{r}": {"frequency": 0.5, "reliability": float(r), "source": "s"}
    for r in ("0.6", "0.8", "1")
}
_RULE = (
    "the lowest swept reliability at which the reference process formed in every calibration "
    "seed within 0.75 of the main budget (300 steps)"
)


def _manifest(steps: dict[tuple[float, int], float]) -> pd.DataFrame:
    """The calibration sweep's manifest: ``run_name, online_emergence_step`` (NaN: the online
    evaluator never saw the threshold), in a shuffled order, with a run of another sweep."""
    rows = [{"run_name": _NAMES[key], "online_emergence_step": step} for key, step in steps.items()]
    rows.insert(1, {"run_name": "m_B2_C8_A.hi_s0", "online_emergence_step": 10.0})
    return pd.DataFrame(rows).iloc[::-1]


def test_measure_frontier_level_takes_the_lowest_reliability_formed_in_every_seed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calibration_logger = "ih_kedro.pipelines.markov.calibration_nodes"
    caplog.set_level(logging.INFO, logger=calibration_logger)
    manifest = _manifest(
        {
            (1.0, 1): 120.0,
            (1.0, 0): 100.0,
            (0.8, 1): 300.0,  # at the 300-step budget: formed
            (0.8, 0): 200.0,
            (0.6, 1): math.nan,  # never crossed: not formed, so 0.6 does not qualify
            (0.6, 0): 150.0,
        }
    )
    level = measure_frontier_level(manifest, {"levels": _LEVELS}, _TRAINING, _CALIBRATION)
    assert level == {
        "frequency": 0.5,
        "reliability": 0.8,
        "source": f"calibration sweep: {_RULE}",
        "rule": _RULE,
        "per_reliability": [
            {"reliability": 0.6, "n_seeds": 2, "n_formed": 1, "steps": [150.0, None]},
            {"reliability": 0.8, "n_seeds": 2, "n_formed": 2, "steps": [200.0, 300.0]},
            {"reliability": 1.0, "n_seeds": 2, "n_formed": 2, "steps": [100.0, 120.0]},
        ],
        "level": "near",
        "process": "A",
    }
    assert [r.getMessage() for r in caplog.records if r.name == calibration_logger] == [
        f"markov calibration: near at frequency 0.5 -> reliability 0.8 (calibration sweep: {_RULE})"
    ]


def test_measure_frontier_level_falls_back_to_the_highest_reliability() -> None:
    manifest = _manifest(
        {
            (0.6, 0): math.nan,
            (0.6, 1): math.nan,
            (0.8, 0): 301.0,  # after the 300-step budget: not formed
            (0.8, 1): 250.0,
            (1.0, 0): 100.0,
            (1.0, 1): math.nan,  # the online early stop never saw the crossing
        }
    )
    level = measure_frontier_level(manifest, {"levels": _LEVELS}, _TRAINING, _CALIBRATION)
    assert level["reliability"] == 1.0
    assert level["source"] == (
        "calibration sweep: no swept reliability formed in every seed within 300 steps; the "
        "highest swept reliability (1) is used"
    )
    assert level["rule"] == _RULE
    assert level["per_reliability"] == [
        {"reliability": 0.6, "n_seeds": 2, "n_formed": 0, "steps": [None, None]},
        {"reliability": 0.8, "n_seeds": 2, "n_formed": 1, "steps": [None, 250.0]},
        {"reliability": 1.0, "n_seeds": 2, "n_formed": 1, "steps": [100.0, None]},
    ]


def test_measure_frontier_level_defaults_to_the_near_frontier_level_and_half_the_budget() -> None:
    calibration = {k: v for k, v in _CALIBRATION.items() if k not in ("level", "max_fraction")}
    names = [c.run_name for c in expand_grid(calibration_training(_TRAINING, calibration))]
    assert names == list(_NAMES.values())
    # budget 200: 0.8's seed 1 at 201 is too late, 1's runs are in time.
    steps = {(0.6, 0): 50.0, (0.6, 1): math.nan, (0.8, 0): 150.0, (0.8, 1): 201.0}
    manifest = _manifest({**steps, (1.0, 0): 200.0, (1.0, 1): 60.0})
    level = measure_frontier_level(manifest, {"levels": _LEVELS}, _TRAINING, calibration)
    assert (level["level"], level["reliability"]) == ("near_frontier", 1.0)
    assert level["rule"] == (
        "the lowest swept reliability at which the reference process formed in every "
        "calibration seed within 0.5 of the main budget (200 steps)"
    )
    assert [p["n_formed"] for p in level["per_reliability"]] == [1, 1, 2]


# --------------------------------------------------------------------------------------------
# plan_variant_data with the measured level
# --------------------------------------------------------------------------------------------
_REPETITION = {
    "levels": {
        "high": {"frequency": 1.0, "reliability": 1.0},
        "near": {"frequency": 0.5, "reliability": "calibrated"},
    }
}


def test_plan_variant_data_takes_a_calibrated_level_from_the_frontier_level(
    tmp_path: Path,
) -> None:
    processes = _saved(tmp_path, A=0.0)
    manifest = _manifest({key: 100.0 for key in _NAMES})  # every run formed: r = 0.6
    frontier = measure_frontier_level(manifest, {"levels": _LEVELS}, _TRAINING, _CALIBRATION)
    plan = plan_variant_data(processes, _REPETITION, frontier)
    assert plan == {
        "process_paths": {"A": str((tmp_path / "A.npz").resolve())},
        "process_checksums": {"A": processes["A"].checksum()},
        "levels": {
            "high": {"frequency": 1.0, "reliability": 1.0, "source": "parameter"},
            "near": {
                "frequency": 0.5,
                "reliability": 0.6,
                "source": f"calibration sweep: {_RULE}",
            },
        },
    }


def test_plan_variant_data_refuses_a_calibrated_level_it_was_not_given(tmp_path: Path) -> None:
    processes = _saved(tmp_path, A=0.0)
    with pytest.raises(ValueError) as error:
        plan_variant_data(processes, _REPETITION)
    assert str(error.value) == (
        "markov.repetition.levels.near: reliability 'calibrated' but no calibration for it"
    )
    other = {"level": "near_frontier", "frequency": 0.5, "reliability": 0.6, "source": "s"}
    with pytest.raises(ValueError, match="levels.near: reliability 'calibrated' but no calib"):
        plan_variant_data(processes, _REPETITION, other)  # measured for another level
    swept = {"level": "near", "frequency": 0.25, "reliability": 0.6, "source": "s"}
    with pytest.raises(ValueError) as error:
        plan_variant_data(processes, _REPETITION, swept)
    assert str(error.value) == (
        "markov.repetition.levels.near.frequency: 0.5, but the calibration swept frequency 0.25"
    )


def test_measure_frontier_level_refuses_a_manifest_missing_a_run() -> None:
    manifest = _manifest({(0.6, 0): 1.0, (0.6, 1): 1.0, (0.8, 0): 1.0, (0.8, 1): 1.0,
                          (1.0, 0): 1.0})  # fmt: skip
    with pytest.raises(ValueError, match=r"runs missing from the calibration sweep manifest: "
                       r"\['m_B2_C8_calibration\.A\.calibration_r1_s1'\]"):  # fmt: skip
        measure_frontier_level(manifest, {"levels": _LEVELS}, _TRAINING, _CALIBRATION)


def test_calibration_budget_is_not_pushed_up_by_floating_point() -> None:
    # 0.7 * 100 = 70.00000000000001 and 0.55 * 100 = 55.00000000000001 in floating point.
    assert calibration_budget({"max_steps": 100}, {"max_fraction": 0.7}) == 70
    assert calibration_budget({"max_steps": 100}, {"max_fraction": 0.55}) == 55
    assert calibration_budget({"max_steps": 101}, {"max_fraction": 0.5}) == 51
