"""Emergence detection on synthetic sigmoid trajectories with a known emergence step."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ih_kedro.science.telemetry.emergence import (
    emergence_curve,
    estimate_emergence,
    logistic_midpoint,
    piecewise_breakpoint,
    threshold_crossing,
)
from tests.science.telemetry.emergence_runs import STEPS, head_samples, log_logistic

TOKENS_PER_STEP = 64 * 32


def test_threshold_crossing_interpolates_exactly():
    assert threshold_crossing(np.array([0, 100, 200]), np.array([0.0, 0.2, 0.6]), 0.4) == 150.0
    # Unsorted input, and a crossing at a checkpoint.
    assert threshold_crossing(np.array([200, 0, 100]), np.array([0.6, 0.0, 0.4]), 0.4) == 100.0
    assert threshold_crossing(np.array([0, 100]), np.array([0.5, 0.6]), 0.4) == 0.0
    assert threshold_crossing(np.array([0, 100]), np.array([0.1, 0.2]), 0.4) is None


def test_emergence_curve_takes_best_head_above_min_layer():
    curve = log_logistic(STEPS, 800.0)
    samples = head_samples(curve, sd=0.0)
    np.testing.assert_allclose(emergence_curve(samples, min_layer=1), np.maximum(curve, 0.03))
    np.testing.assert_allclose(emergence_curve(samples, min_layer=0), 0.9)
    # Model-level metrics (K, n): mean over samples.
    np.testing.assert_allclose(emergence_curve(samples[:, :, 1, 2]), curve)
    with pytest.raises(ValueError, match="min_layer"):
        emergence_curve(samples, min_layer=2)


def test_logistic_recovers_midpoint():
    rng = np.random.default_rng(1)
    curve = log_logistic(STEPS, 700.0) + rng.normal(0, 0.01, STEPS.size)
    mid = logistic_midpoint(STEPS, curve)
    assert mid == pytest.approx(700.0, rel=0.05)
    # Flat curve: no emergence.
    assert logistic_midpoint(STEPS, np.full(STEPS.size, 0.03)) is None
    # Rising only after the last checkpoint: midpoint beyond the data is censored.
    assert logistic_midpoint(STEPS, log_logistic(STEPS, 20000.0)) is None


def test_piecewise_breakpoint_finds_onset():
    curve = np.where(STEPS < 1000, 0.03, 0.03 + (STEPS - 1000) * 0.0005)
    assert piecewise_breakpoint(STEPS, curve) == pytest.approx(1000.0, abs=50)
    assert piecewise_breakpoint(STEPS, np.full(STEPS.size, 0.03)) is None


def test_bootstrap_ci_covers_truth():
    truth_curve = log_logistic(STEPS, 900.0)
    # The estimand: the crossing of the noiseless curve as seen at the checkpoints.
    truth = threshold_crossing(STEPS, truth_curve, 0.4)
    covered = 0
    n_datasets = 20
    for seed in range(n_datasets):
        est = estimate_emergence(
            STEPS,
            STEPS * TOKENS_PER_STEP,
            head_samples(truth_curve, seed=seed),
            method="threshold",
            threshold=0.4,
            n_bootstrap=200,
            seed=seed,
            min_layer=1,
        )
        assert not est.censored
        assert est.ci_low <= est.step <= est.ci_high
        assert est.tokens == pytest.approx(est.step * TOKENS_PER_STEP)
        covered += est.ci_low <= truth <= est.ci_high
    assert covered >= 0.8 * n_datasets


def test_logistic_estimate_with_bootstrap():
    est = estimate_emergence(
        STEPS,
        STEPS * TOKENS_PER_STEP,
        head_samples(log_logistic(STEPS, 900.0), seed=3),
        method="logistic",
        n_bootstrap=30,
        seed=0,
        min_layer=1,
    )
    assert est.step == pytest.approx(900.0, rel=0.05)
    assert est.ci_low <= 900.0 <= est.ci_high
    assert est.threshold is None


def test_never_crossing_is_censored_with_last_step():
    flat = head_samples(np.full(STEPS.size, 0.05), seed=4)
    for method in ("threshold", "logistic", "piecewise"):
        est = estimate_emergence(
            STEPS, STEPS * 10, flat, method=method, threshold=0.4, n_bootstrap=20, min_layer=1
        )
        assert est.censored and est.status == "censored", method
        # The censoring point: step and tokens at the last checkpoint.
        assert est.step == 2000.0 and est.tokens == 20000.0, method
        assert est.last_step == 2000.0
        assert math.isnan(est.ci_low) and math.isnan(est.ci_high)


def test_estimate_validates_arguments():
    samples = head_samples(log_logistic(STEPS, 900.0))
    with pytest.raises(ValueError, match="threshold"):
        estimate_emergence(STEPS, STEPS, samples, method="threshold")
    with pytest.raises(ValueError, match="method"):
        estimate_emergence(STEPS, STEPS, samples, method="magic")
    with pytest.raises(ValueError, match="steps, tokens"):
        estimate_emergence(STEPS[:-1], STEPS[:-1], samples, threshold=0.4)


def test_left_censored_when_above_threshold_at_the_first_checkpoint():
    flat = head_samples(np.full(STEPS.size, 0.7), sd=0.01, seed=5)
    est = estimate_emergence(STEPS, STEPS * 10, flat, threshold=0.4, n_bootstrap=10, min_layer=1)
    assert est.status == "left_censored" and not est.censored
    assert est.step == 50.0 and est.tokens == 500.0
    assert "first checkpoint" in est.reason
    assert math.isnan(est.ci_low)


@pytest.mark.parametrize(
    ("method", "n_points", "reason"),
    [("logistic", 4, "the logistic needs 5"), ("piecewise", 3, "the piecewise fit needs 4")],
)
def test_too_few_points_is_fit_failed_not_censored(method, n_points, reason):
    steps = np.array([100.0, 200.0, 400.0, 800.0])[:n_points]
    curve = np.array([0.05, 0.1, 0.5, 0.6])[:n_points]  # it rises: not censored
    flat = np.broadcast_to(curve[:, None], (n_points, 8)).copy()  # (K, n)
    est = estimate_emergence(steps, steps * 10, flat, method=method, n_bootstrap=0)
    assert est.status == "fit_failed" and not est.censored
    assert reason in est.reason
    assert math.isnan(est.step) and math.isnan(est.tokens)


def test_logistic_midpoint_after_the_last_checkpoint_is_fit_failed():
    # Still rising steeply at the last checkpoint: the fitted midpoint is extrapolated.
    steps = STEPS[:12]  # up to step 600
    curve = log_logistic(steps, 800.0, width=0.3)
    flat = np.broadcast_to(curve[:, None], (steps.size, 8)).copy()
    est = estimate_emergence(steps, steps, flat, method="logistic", n_bootstrap=0)
    assert est.status == "fit_failed"
    assert "after the last checkpoint" in est.reason


def test_bootstrap_ci_covers_with_noise_correlated_across_checkpoints():
    # Each probe sample carries a persistent offset across all checkpoints (plus small
    # independent noise): the per-checkpoint means move together, so S* varies more than
    # independent noise suggests. Resampling whole probe samples keeps that correlation.
    truth_curve = log_logistic(STEPS, 800.0)
    truth = threshold_crossing(STEPS, truth_curve, 0.4)
    n_sim, hits, widths = 120, 0, []
    for sim in range(n_sim):
        rng = np.random.default_rng(1000 + sim)
        offsets = rng.normal(0.0, 0.15, size=(1, 40))  # (1, n): per probe sample
        noise = rng.normal(0.0, 0.05, size=(STEPS.size, 40))  # (K, n)
        samples = truth_curve[:, None] + offsets + noise  # (K, n)
        est = estimate_emergence(STEPS, STEPS, samples, threshold=0.4, n_bootstrap=200, seed=sim)
        assert est.status == "emerged"
        hits += est.ci_low <= truth <= est.ci_high
        widths.append(est.ci_high - est.ci_low)
    assert 0.88 <= hits / n_sim <= 0.99, hits
    assert np.median(widths) > 50  # the correlated offsets make the CI wide (steps)
