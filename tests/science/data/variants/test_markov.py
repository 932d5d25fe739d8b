"""The markov training data variant: levels, token mapping, determinism, checks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.variants.markov import (
    check_markov_options,
    frontier_reliability,
    resolve_levels,
    state_token_ids,
)
from ih_kedro.science.data.variants.markov_process import MarkovSpec, design_process
from ih_kedro.science.data.variants.repetition_stats import measure_repetition

FRONTIER = pd.DataFrame(
    {
        "kind": ["coefficient", "contour", "contour", "contour"],
        "frequency": [np.nan, 0.125, 0.5, 1.0],
        "reliability": [np.nan, 0.8, 0.2, 0.1],
    }
)


def test_frontier_reliability_interpolates_in_log_space():
    assert frontier_reliability(FRONTIER, 0.5)[0] == pytest.approx(0.2)
    # halfway between 0.5 and 1 in log f: the geometric mean of 0.2 and 0.1
    assert frontier_reliability(FRONTIER, math.sqrt(0.5))[0] == pytest.approx(math.sqrt(0.02))
    assert frontier_reliability(FRONTIER, 0.05) is None  # outside the contour
    assert frontier_reliability(None, 0.5) is None
    assert frontier_reliability(FRONTIER[FRONTIER["kind"] != "contour"], 0.5) is None


def test_levels_from_the_frontier_with_margin_or_the_fallback():
    levels = {
        "high": {"frequency": 1.0, "reliability": 1.0},
        "near": {"frequency": 0.5, "reliability": "frontier", "margin": 1.5,
                 "fallback_reliability": 0.25},
    }  # fmt: skip
    resolved = resolve_levels(levels, FRONTIER)
    assert resolved["high"] == {"frequency": 1.0, "reliability": 1.0, "source": "parameter"}
    assert resolved["near"]["reliability"] == pytest.approx(0.3)
    assert resolved["near"]["source"] == "pareto frontier at frequency 0.5 x margin 1.5"
    # A frontier above r = 1 (only r = 1 cells formed): the level is clipped to 1, and says so.
    high_frontier = FRONTIER.assign(reliability=[np.nan, 3.2, 2.11, 1.72])
    clipped = resolve_levels({"near": {**levels["near"], "margin": 1.25}}, high_frontier)["near"]
    assert clipped["reliability"] == 1.0
    assert clipped["source"] == (
        "pareto frontier at frequency 0.5 x margin 1.25 = 2.64, clipped to 1 (frontier above r = 1)"
    )
    fallback = resolve_levels(levels, None)["near"]
    assert fallback["reliability"] == 0.25 and fallback["source"].startswith("fallback")
    with pytest.raises(ValueError, match=r"levels\.near: no pareto frontier table"):
        resolve_levels({"near": {"frequency": 0.5, "reliability": "frontier"}}, None)
    with pytest.raises(ValueError, match=r"levels\.bad\.frequency"):
        resolve_levels({"bad": {"frequency": 0.0, "reliability": 1.0}})


def test_calibrated_level_takes_the_measured_reliability():
    calibrated = {"near": {"frequency": 0.5, "reliability": 0.71, "source": "calibration sweep"}}
    levels = {"near": {"frequency": 0.5, "reliability": "calibrated"},
              "high": {"frequency": 1.0, "reliability": 1.0}}  # fmt: skip
    resolved = resolve_levels(levels, None, calibrated)
    assert resolved["near"] == {"frequency": 0.5, "reliability": 0.71,
                                "source": "calibration sweep"}  # fmt: skip
    assert resolved["high"]["source"] == "parameter"
    with pytest.raises(ValueError, match=r"levels\.near: reliability 'calibrated' but no"):
        resolve_levels(levels, None, None)
    with pytest.raises(ValueError, match=r"levels\.near\.frequency: 0\.25, but the calibration"):
        resolve_levels({"near": {"frequency": 0.25, "reliability": "calibrated"}}, None,
                       calibrated)  # fmt: skip


def test_states_emit_the_most_frequent_tokens():
    stream = np.array([5, 5, 5, 9, 9, 2, 7, 7, 7, 7, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(state_token_ids(stream, 10, 3, eos_token_id=0), [7, 5, 9])
    with pytest.raises(
        ValueError, match="4 states need 4 distinct training tokens, the corpus has"
    ):
        state_token_ids(np.array([1, 1, 2, 3]), 10, 4, eos_token_id=1)


@pytest.fixture(scope="module")
def options(tmp_path_factory):
    process = design_process(
        MarkovSpec(name="ld", vocab_size=24, marginal="zipf", entropy_ratio=0.5)
    )
    process.token_ids = np.arange(100, 124)
    path = process.save(tmp_path_factory.mktemp("markov") / "ld.npz")
    return {
        "process": "ld",
        "level": "high",
        "process_paths": {"ld": str(path)},
        "process_checksums": {"ld": process.checksum()},
        "levels": {"high": {"frequency": 1.0, "reliability": 1.0},
                   "low": {"frequency": 0.5, "reliability": 0.25}},
    }  # fmt: skip


def test_batches_are_a_pure_function_of_seed_and_step(options):
    stream = np.zeros(100, dtype=np.int64)  # windows are replaced entirely
    batch = sample_batch(stream, 64, 16, 3, 7, data_variant="markov", variant_options=options)
    again = sample_batch(stream, 64, 16, 3, 7, data_variant="markov", variant_options=options)
    other = sample_batch(stream, 64, 16, 3, 8, data_variant="markov", variant_options=options)
    assert torch_equal(batch.tokens, again.tokens) and not torch_equal(batch.tokens, other.tokens)
    tokens = batch.tokens.numpy()
    assert set(np.unique(tokens)) <= set(range(100, 124))
    stats = measure_repetition(tokens)
    assert (stats.frequency, stats.reliability, stats.first_half_repeats) == (1.0, 1.0, 0)
    assert batch.copied.sum() == stats.n_copies
    low = sample_batch(
        stream, 256, 16, 3, 7, data_variant="markov", variant_options={**options, "level": "low"}
    )
    realised = measure_repetition(low.tokens.numpy())
    assert realised.frequency == pytest.approx(0.5, abs=0.05)
    assert realised.reliability == pytest.approx(0.25, abs=0.08)


def torch_equal(a, b) -> bool:
    return bool((a == b).all())


def test_checks_name_what_is_wrong(options):
    check_markov_options(options, 16)  # fits: 24 states >= 17 tokens
    with pytest.raises(ValueError, match=r"24 states cannot fill a sequence of 33 tokens"):
        check_markov_options(options, 32)
    with pytest.raises(ValueError, match=r"unknown markov process 'nope'"):
        check_markov_options({**options, "process": "nope"}, 16)
    with pytest.raises(ValueError, match=r"unknown repetition level 'mid'"):
        check_markov_options({**options, "level": "mid"}, 16)
    with pytest.raises(ValueError, match=r"needs options\.process_paths"):
        check_markov_options({"process": "ld", "level": "high"}, 16)
    with pytest.raises(ValueError, match=r"checksum .* the sweep expected 0000"):
        check_markov_options({**options, "process_checksums": {"ld": "0000"}}, 16)
