"""Value tests of emergence detection: hand-computed crossings, statuses, reasons and CIs.

Every expected number is worked out by hand (or by an independent re-implementation inside the
test), never read back from the function under test.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from ih_kedro.science.telemetry import emergence
from ih_kedro.science.telemetry.emergence import (
    EmergenceEstimate,
    emergence_curve,
    estimate_emergence,
    logistic_midpoint,
    piecewise_breakpoint,
    threshold_crossing,
)
from tests.science.telemetry.emergence_runs import model_level


# --------------------------------------------------------------------------------------------
# Curve
# --------------------------------------------------------------------------------------------
def test_samples_shape_is_validated():
    with pytest.raises(ValueError, match=r"expected shape \(K, n, \.\.\.\)"):
        emergence_curve(np.zeros(5))
    with pytest.raises(ValueError, match=r"^samples: no probe samples \(n == 0\)$"):
        emergence_curve(np.zeros((5, 0)))
    # (K, n) is the smallest valid shape: one checkpoint, one sample.
    assert emergence_curve(np.array([[0.25]])).tolist() == [0.25]


def test_min_layer_restriction_boundaries():
    # (K=1, n=2, layers=3, heads=1): layer l scores l + 1 (so the max is the last layer) ...
    samples = np.array([[[[1.0], [2.0], [3.0]], [[1.0], [2.0], [5.0]]]])
    assert emergence_curve(samples, min_layer=2).tolist() == [4.0]
    # ... and layer 0 the best when it is the largest.
    best_first = samples[:, :, ::-1]
    assert emergence_curve(best_first, min_layer=0).tolist() == [4.0]
    assert emergence_curve(best_first, min_layer=1).tolist() == [2.0]
    assert emergence_curve(best_first, min_layer=2).tolist() == [1.0]
    with pytest.raises(ValueError, match=r"min_layer: must be >= 0, got -1"):
        emergence_curve(samples, min_layer=-1)
    with pytest.raises(ValueError, match=r"min_layer: 3 leaves no layers \(the metric has 3"):
        emergence_curve(samples, min_layer=3)
    # Model-level (K, n): no layer axis, any min_layer is accepted and ignored.
    assert emergence_curve(np.array([[1.0, 3.0]]), min_layer=7).tolist() == [2.0]
    # A (K, n, layers) metric without a head axis is restricted too.
    assert emergence_curve(np.array([[[1.0, 9.0, 2.0]]]), min_layer=2).tolist() == [2.0]


def test_curve_ignores_nan_samples_and_is_nan_without_any():
    samples = np.array(
        [
            [[0.2, np.nan], [0.4, 0.9]],  # head 0: mean(0.2, 0.4) = 0.3, head 1: 0.9
            [[np.nan, np.nan], [np.nan, np.nan]],  # no finite sample at all
            [[0.5, 0.1], [np.nan, 0.3]],  # head 0: 0.5, head 1: mean(0.1, 0.3) = 0.2
        ]
    )  # (K=3, n=2, F=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NaN handling must not warn
        curve = emergence_curve(samples)
    assert curve[0] == pytest.approx(0.9)
    assert math.isnan(curve[1])
    assert curve[2] == pytest.approx(0.5)


def test_bootstrap_weights_give_weighted_means():
    flat = np.array([[[1.0], [4.0], [np.nan]], [[2.0], [np.nan], [8.0]]])  # (K=2, n=3, F=1)
    weights = np.array([[1.0, 1.0, 1.0], [2.0, 0.0, 1.0], [0.0, 3.0, 0.0]])
    curves = emergence._curves_from_weights(flat, weights)
    # r0: (1 + 4) / 2, (2 + 8) / 2; r1: (2*1) / 2, (2*2 + 8) / 3; r2: 4, no finite sample.
    np.testing.assert_allclose(curves[:2], [[2.5, 5.0], [1.0, 4.0]])
    assert curves[2, 0] == 4.0 and math.isnan(curves[2, 1])


# --------------------------------------------------------------------------------------------
# Threshold crossing
# --------------------------------------------------------------------------------------------
def test_threshold_crossing_values():
    steps = np.array([0.0, 100.0, 200.0, 300.0])
    # Crossing between 200 (0.3) and 300 (0.7): 200 + (0.5 - 0.3) / 0.4 * 100 = 250.
    assert threshold_crossing(steps, np.array([0.1, 0.2, 0.3, 0.7]), 0.5) == pytest.approx(250.0)
    # Between 100 (0.1) and 200 (0.9): 100 + (0.3 - 0.1) / 0.8 * 100 = 125.
    assert threshold_crossing(steps, np.array([0.0, 0.1, 0.9, 1.0]), 0.3) == pytest.approx(125.0)
    # The first crossing counts even when the curve falls back below afterwards.
    assert threshold_crossing(steps, np.array([0.0, 0.6, 0.1, 0.9]), 0.3) == pytest.approx(50.0)
    # A single checkpoint: above is left-censored at it, below never crosses.
    assert threshold_crossing(np.array([40.0]), np.array([0.5]), 0.3) == 40.0
    assert threshold_crossing(np.array([40.0]), np.array([0.1]), 0.3) is None
    # NaN points are skipped: the crossing joins the neighbouring finite points.
    nan_curve = np.array([0.0, np.nan, 0.5, 1.0])
    assert threshold_crossing(steps, nan_curve, 0.25) == pytest.approx(100.0)
    nan_steps = np.array([0.0, np.nan, 200.0, 300.0])
    assert threshold_crossing(nan_steps, np.array([0.0, 9.0, 0.5, 1.0]), 0.25) == 100.0
    # Never finite: no estimate.
    assert threshold_crossing(steps, np.full(4, np.nan), 0.3) is None


def test_threshold_outcome_statuses_and_reasons():
    steps = np.array([10.0, 20.0, 30.0])
    out = emergence._threshold_outcome(steps, np.array([0.1, 0.2, 0.3]), 0.35)
    assert (out.step, out.status, out.reason) == (
        30.0,
        "censored",
        "below 0.35 at every checkpoint",
    )
    out = emergence._threshold_outcome(steps, np.array([0.4, 0.2, 0.3]), 0.35)
    assert (out.step, out.status) == (10.0, "left_censored")
    assert out.reason == "already >= 0.35 at the first checkpoint"
    out = emergence._threshold_outcome(steps, np.full(3, np.nan), 0.35)
    assert out.status == "fit_failed" and out.reason == "no finite score"
    assert math.isnan(out.step)
    out = emergence._threshold_outcome(steps, np.array([0.1, 0.35, 0.3]), 0.35)
    assert (out.step, out.status, out.reason) == (20.0, "emerged", "")


def test_sorted_finite_validates_shapes():
    with pytest.raises(ValueError, match=r"expected two \(K,\) arrays of equal length"):
        threshold_crossing(np.array([1.0, 2.0]), np.array([1.0, 2.0, 3.0]), 0.5)
    with pytest.raises(ValueError, match="steps and curve"):
        threshold_crossing(np.ones((2, 2)), np.ones((2, 2)), 0.5)


def test_never_rises_boundary():
    # Exactly representable values: the rise equals min_rise, which counts as a rise.
    assert not emergence._never_rises(np.array([0.5, 0.25, 0.375]), 0.125)
    assert emergence._never_rises(np.array([0.5, 0.25, 0.375]), 0.25)
    # A falling curve never rises, however large its range.
    assert emergence._never_rises(np.array([1.0, 0.5, 0.0]), 0.125)


def test_fit_axis_log_skips_non_positive_steps():
    x, curve = emergence._fit_axis(np.array([math.e, 0.0, 1.0, -1.0]), np.arange(4.0), True)
    np.testing.assert_allclose(x, [0.0, 1.0])
    assert curve.tolist() == [2.0, 0.0]
    x, curve = emergence._fit_axis(np.array([math.e, 0.0, 1.0]), np.arange(3.0), False)
    assert x.tolist() == [0.0, 1.0, math.e] and curve.tolist() == [1.0, 2.0, 0.0]


# --------------------------------------------------------------------------------------------
# Logistic
# --------------------------------------------------------------------------------------------
def test_logistic_function_values():
    x = np.array([2.0, 2.0 + 0.5 * math.log(3.0), -1000.0, 1000.0])
    y = emergence._logistic(x, 0.1, 0.8, 2.0, 0.5)
    # At the midpoint half the rise; log(3) widths above it 3/4 of the rise.
    assert y[0] == pytest.approx(0.5)
    assert y[1] == pytest.approx(0.1 + 0.75 * 0.8)
    # Far below the midpoint the exponent is clipped at -60 (no overflow): without a floor the
    # tiny value is visible.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        far = emergence._logistic(np.array([-1000.0, 1000.0]), 0.0, 0.8, 2.0, 0.5)
    assert far[0] == 0.8 / (1.0 + math.exp(60.0))
    assert far[1] == 0.8


def _logistic_curve(steps, mid, low=0.05, rise=0.6, width=0.3):
    return low + rise / (1.0 + np.exp(-(np.log(steps) - math.log(mid)) / width))


def test_logistic_with_five_points_fits_the_exact_midpoint():
    steps = np.array([100.0, 200.0, 400.0, 800.0, 1600.0])
    mid = logistic_midpoint(steps, _logistic_curve(steps, 350.0))
    assert mid == pytest.approx(350.0, rel=1e-4)


class _FakeFit:
    """Stands in for ``curve_fit``: records its arguments and returns fixed parameters."""

    def __init__(self, params=None, error=None):
        self.params, self.error, self.calls = params, error, []

    def __call__(self, f, x, y, **kwargs):
        self.calls.append((f, np.array(x), np.array(y), kwargs))
        if self.error is not None:
            raise self.error
        return np.array(self.params, dtype=float), None


_STEPS5 = np.array([1.0, math.e, math.e**2, math.e**3, math.e**4])  # log-steps 0..4
_RISING5 = np.array([0.1, 0.2, 0.5, 0.8, 0.9])  # half the range, 0.4, is reached at x=2


def _outcome_with(monkeypatch, params=None, error=None, log_steps=True, steps=_STEPS5):
    fake = _FakeFit(params, error)
    monkeypatch.setattr(emergence, "curve_fit", fake)
    return emergence._logistic_outcome(steps, _RISING5, log_steps=log_steps), fake


def test_logistic_fit_starts_at_the_data_and_is_bounded(monkeypatch):
    out, fake = _outcome_with(monkeypatch, params=[0.0, 0.8, 2.5, 1.0])
    assert (out.status, out.reason) == ("emerged", "")
    assert out.step == pytest.approx(math.exp(2.5))
    ((f, x, y, kwargs),) = fake.calls
    assert f is emergence._logistic
    np.testing.assert_allclose(x, [0.0, 1.0, 2.0, 3.0, 4.0], atol=1e-12)
    assert y.tolist() == _RISING5.tolist()
    # low 0.1, range 0.8, first point >= 0.5 is x=2, span 4.
    np.testing.assert_allclose(kwargs["p0"], [0.1, 0.8, 2.0, 0.4], atol=1e-12)
    lower, upper = kwargs["bounds"]
    np.testing.assert_allclose(lower, [-0.7, 0.0, -4.0, 0.004], atol=1e-12)
    np.testing.assert_allclose(upper, [1.7, 2.4, 8.0, 8.0], atol=1e-12)
    assert kwargs["maxfev"] == 5000


def test_logistic_fitted_parameter_checks(monkeypatch):
    # The fitted midpoint at the first / last checkpoint still counts as emerged ...
    out, _ = _outcome_with(monkeypatch, params=[0.0, 0.8, 0.0, 1.0])
    assert (out.step, out.status) == (1.0, "emerged")
    out, _ = _outcome_with(monkeypatch, params=[0.0, 0.8, 4.0, 1.0])
    assert out.status == "emerged" and out.step == pytest.approx(math.e**4)
    # ... before the first: left-censored at the first step; after the last: failed.
    out, _ = _outcome_with(monkeypatch, params=[0.0, 0.8, -0.5, 1.0])
    assert (out.step, out.status, out.reason) == (
        1.0,
        "left_censored",
        "midpoint before the first checkpoint",
    )
    out, _ = _outcome_with(monkeypatch, params=[0.0, 0.8, 4.5, 1.0])
    assert out.status == "fit_failed"
    assert out.reason == "logistic fit: midpoint after the last checkpoint (extrapolated)"
    # A fitted rise below min_rise fails; exactly min_rise (0.125 here) passes.
    fake = _FakeFit([0.0, 0.0625, 2.0, 1.0])
    monkeypatch.setattr(emergence, "curve_fit", fake)
    out = emergence._logistic_outcome(_STEPS5, _RISING5, min_rise=0.125)
    assert (out.status, out.reason) == ("fit_failed", "logistic fit: fitted rise 0.0625 < 0.125")
    fake.params = [0.0, 0.125, 2.0, 1.0]
    assert emergence._logistic_outcome(_STEPS5, _RISING5, min_rise=0.125).status == "emerged"
    out, _ = _outcome_with(monkeypatch, params=[0.0, 0.8, math.nan, 1.0])
    assert (out.status, out.reason) == ("fit_failed", "logistic fit: non-finite parameters")
    assert math.isnan(out.step)
    out, _ = _outcome_with(monkeypatch, error=RuntimeError("no convergence"))
    assert (out.status, out.reason) == ("fit_failed", "logistic fit failed: no convergence")
    out, _ = _outcome_with(monkeypatch, error=ValueError("infeasible"))
    assert (out.status, out.reason) == ("fit_failed", "logistic fit failed: infeasible")


def test_logistic_on_the_step_axis(monkeypatch):
    steps = np.array([0.0, 10.0, 20.0, 30.0, 40.0])
    out, fake = _outcome_with(monkeypatch, [0.0, 0.8, 25.0, 4.0], log_steps=False, steps=steps)
    assert (out.step, out.status) == (25.0, "emerged")
    ((_, x, _, kwargs),) = fake.calls
    assert x.tolist() == steps.tolist()  # step 0 is kept on the linear axis
    np.testing.assert_allclose(kwargs["p0"], [0.1, 0.8, 20.0, 4.0])
    assert logistic_midpoint(steps, _RISING5, log_steps=False) == 25.0
    # A span below one step is still a span.
    short = np.array([0.0, 0.1, 0.2, 0.3, 0.4])
    out, _ = _outcome_with(monkeypatch, [0.0, 0.8, 0.25, 0.04], log_steps=False, steps=short)
    assert (out.step, out.status) == (0.25, "emerged")


def test_logistic_early_exits():
    out = emergence._logistic_outcome(np.array([100.0, 200.0]), np.array([0.3, 0.35]))
    assert (out.status, out.reason) == ("censored", "never rises by 0.1")
    assert out.step == pytest.approx(200.0)  # the last step, back from the log axis
    out = emergence._logistic_outcome(np.array([100.0, 200.0]), np.array([0.3, 0.5]))
    assert (out.status, out.reason) == ("fit_failed", "2 checkpoints, the logistic needs 5")
    out = emergence._logistic_outcome(np.array([100.0]), np.array([0.3]))
    assert (out.status, out.reason) == ("fit_failed", "1 checkpoints, the logistic needs 5")
    out = emergence._logistic_outcome(np.array([0.0, -5.0]), np.array([0.3, 0.9]))
    assert (out.status, out.reason) == ("fit_failed", "no finite score")  # no step > 0
    same = np.full(5, 100.0)
    out = emergence._logistic_outcome(same, np.array([0.0, 0.1, 0.5, 0.8, 0.9]))
    assert (out.status, out.reason) == (
        "fit_failed",
        "logistic fit: every checkpoint at the same step",
    )
    out = emergence._logistic_outcome(np.array([10.0, 20.0]), np.array([0.5, 0.5]), min_rise=0.25)
    assert out.reason == "never rises by 0.25"
    assert logistic_midpoint(np.array([10.0, 20.0]), np.array([0.5, 0.5])) is None


# --------------------------------------------------------------------------------------------
# Piecewise
# --------------------------------------------------------------------------------------------
def test_piecewise_finds_the_exact_kink():
    steps = np.array([0.0, 10.0, 20.0, 30.0, 40.0, 50.0])
    curve = np.array([0.0, 0.0, 0.0, 0.125, 0.25, 0.375])  # kink at step 20
    assert piecewise_breakpoint(steps, curve) == 20.0
    # Kink at the first interior point (k = 1) and at the last interior point (k = K - 2).
    assert piecewise_breakpoint(steps, np.array([0.0, 0.0, 0.25, 0.5, 0.75, 1.0])) == 10.0
    assert piecewise_breakpoint(steps, np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.5])) == 40.0
    # Four points are enough.
    assert piecewise_breakpoint(steps[:4], np.array([0.0, 0.0, 0.25, 0.5])) == 10.0
    # On the log axis (step 0 skipped): kink at e^2.
    log_steps = np.array([0.0, 1.0, math.e, math.e**2, math.e**3, math.e**4])
    log_curve = np.array([9.0, 0.0, 0.0, 0.0, 0.25, 0.5])
    assert piecewise_breakpoint(log_steps, log_curve, log_steps=True) == pytest.approx(math.e**2)


def test_piecewise_statuses_and_reasons():
    steps = np.array([0.0, 10.0, 20.0, 30.0, 40.0, 50.0])
    # Rises then flattens: the slope decreases at the best break.
    out = emergence._piecewise_outcome(steps, np.array([0.0, 0.25, 0.5, 0.75, 0.75, 0.75]))
    assert (out.status, out.reason) == (
        "fit_failed",
        "piecewise fit: the slope does not increase at the best breakpoint",
    )
    # The rise after the kink equals min_rise (0.125): emerged; a larger min_rise fails.
    kink = np.array([0.0, 0.0, 0.0, 0.0, 0.0625, 0.125])
    out = emergence._piecewise_outcome(steps, kink, min_rise=0.125)
    assert (out.step, out.status, out.reason) == (30.0, "emerged", "")
    # Slope 1/80 up to step 30, then 1/40: it rises by 0.875 in all, 0.5 after the kink.
    late = np.array([0.0, 0.125, 0.25, 0.375, 0.625, 0.875])
    assert emergence._piecewise_outcome(steps, late, min_rise=0.5).step == 30.0
    out = emergence._piecewise_outcome(steps, late, min_rise=0.625)
    assert (out.status, out.reason) == (
        "fit_failed",
        "piecewise fit: rises less than 0.625 after the breakpoint",
    )
    out = emergence._piecewise_outcome(steps[:3], np.array([0.0, 0.25, 0.5]))
    assert (out.status, out.reason) == ("fit_failed", "3 checkpoints, the piecewise fit needs 4")
    out = emergence._piecewise_outcome(steps[:2], np.array([0.5, 0.5]))
    assert (out.step, out.status, out.reason) == (10.0, "censored", "never rises by 0.1")
    out = emergence._piecewise_outcome(steps, np.full(6, np.nan))
    assert (out.status, out.reason) == ("fit_failed", "no finite score")
    assert piecewise_breakpoint(steps, np.array([0.0, 0.25, 0.5, 0.75, 0.75, 0.75])) is None


def test_public_wrappers_pass_min_rise_and_hide_failures():
    steps = np.array([0.0, 10.0, 20.0, 30.0, 40.0, 50.0])
    small_kink = np.array([0.0, 0.0, 0.0, 0.0625, 0.125, 0.1875])  # rises 0.1875 < 0.25
    assert piecewise_breakpoint(steps, small_kink) == 20.0
    assert piecewise_breakpoint(steps, small_kink, min_rise=0.25) is None
    log_steps = np.array([100.0, 200.0, 400.0, 800.0, 1600.0])
    small = _logistic_curve(log_steps, 350.0, rise=0.2)
    assert logistic_midpoint(log_steps, small) == pytest.approx(350.0, rel=1e-3)
    assert logistic_midpoint(log_steps, small, min_rise=0.25) is None
    # Too few points (fit_failed) is None, not NaN.
    assert logistic_midpoint(log_steps[:4], _logistic_curve(log_steps[:4], 350.0)) is None
    assert piecewise_breakpoint(steps[:3], np.array([0.0, 0.25, 0.5])) is None


def test_piecewise_censoring_point_is_the_last_step():
    steps = np.array([1.0, math.e, math.e**2])
    out = emergence._piecewise_outcome(steps, np.array([0.5, 0.5, 0.45]), log_steps=True)
    assert out.status == "censored" and out.step == pytest.approx(math.e**2)
    out = emergence._piecewise_outcome(steps, np.array([0.5, 0.5, 0.45]))
    assert (out.status, out.step) == ("censored", math.e**2)


def test_point_estimate_rejects_unknown_methods():
    with pytest.raises(ValueError, match=r"method: expected one of .*, got 'magic'"):
        emergence._point_estimate(np.arange(3.0), np.arange(3.0), "magic", None)


# --------------------------------------------------------------------------------------------
# estimate_emergence
# --------------------------------------------------------------------------------------------
_STEPS = np.array([0.0, 100.0, 200.0, 300.0])


def test_estimate_validates_ci_and_bootstrap_count():
    samples = model_level([0.0, 0.25, 0.75, 1.0])
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match=rf"ci: must be in \(0, 1\), got {bad}"):
            estimate_emergence(_STEPS, _STEPS, samples, threshold=0.5, ci=bad)
    with pytest.raises(ValueError, match=r"n_bootstrap: must be >= 0, got -1"):
        estimate_emergence(_STEPS, _STEPS, samples, threshold=0.5, n_bootstrap=-1)
    with pytest.raises(ValueError, match=r"method: expected one of \('threshold'"):
        estimate_emergence(_STEPS, _STEPS, samples, method="magic", threshold=0.5)
    with pytest.raises(ValueError, match=r"^threshold: required for method='threshold'$"):
        estimate_emergence(_STEPS, _STEPS, samples)
    with pytest.raises(ValueError, match=r"expected shape \(4,\) to match samples \(4, 4\), got"):
        estimate_emergence(_STEPS, _STEPS[:3], samples, threshold=0.5)
    # n_bootstrap=0 skips the CI.
    est = estimate_emergence(_STEPS, _STEPS, samples, threshold=0.5, n_bootstrap=0)
    assert est.status == "emerged" and math.isnan(est.ci_low) and math.isnan(est.ci_high)


def test_estimate_point_values_and_interpolated_tokens():
    tokens = _STEPS**2  # tokens are interpolated linearly between checkpoints, not ~ steps
    samples = model_level([0.0, 0.25, 0.75, 1.0])
    est = estimate_emergence(_STEPS, tokens, samples, threshold=0.5, n_bootstrap=3, seed=7, ci=0.8)
    # 100 + (0.5 - 0.25) / 0.5 * 100 = 150; tokens 10000 + 0.5 * (40000 - 10000) = 25000.
    assert est.step == 150.0 and est.tokens == 25000.0
    assert est.status == "emerged" and est.reason == "" and est.censored is False
    # Identical samples: every replicate gives the same crossing.
    assert est.ci_low == 150.0 and est.ci_high == 150.0
    assert est.to_dict() == {
        "step": 150.0,
        "tokens": 25000.0,
        "ci_low": 150.0,
        "ci_high": 150.0,
        "censored": False,
        "method": "threshold",
        "threshold": 0.5,
        "last_step": 300.0,
        "n_bootstrap": 3,
        "seed": 7,
        "status": "emerged",
        "reason": "",
    }
    # Unknown tokens: no tokens estimate, the step still stands.
    est = estimate_emergence(_STEPS, np.full(4, np.nan), samples, threshold=0.5, n_bootstrap=0)
    assert est.step == 150.0 and math.isnan(est.tokens)
    # Tokens known at one checkpoint only: np.interp holds that value.
    one = np.array([np.nan, np.nan, 4e4, np.nan])
    est = estimate_emergence(_STEPS, one, samples, threshold=0.5, n_bootstrap=0)
    assert est.tokens == 4e4
    # A single replicate already gives a (degenerate) CI.
    est = estimate_emergence(_STEPS, tokens, samples, threshold=0.5, n_bootstrap=1)
    assert (est.ci_low, est.ci_high) == (150.0, 150.0)


def test_estimate_defaults_are_200_replicates_and_every_layer():
    steps = np.array([0.0, 100.0, 200.0, 300.0])
    rng = np.random.default_rng(0)
    samples = np.array([0.0, 0.25, 0.75, 1.0])[:, None] + rng.normal(0, 0.1, size=(4, 30))
    default = estimate_emergence(steps, steps, samples, threshold=0.5, ci=0.5)
    ref = estimate_emergence(steps, steps, samples, threshold=0.5, ci=0.5, n_bootstrap=200)
    assert (default.ci_low, default.ci_high, default.n_bootstrap) == (
        ref.ci_low,
        ref.ci_high,
        200,
    )
    # (K, n, layers=2, heads=1): only layer 0 rises; the default min_layer keeps it.
    head = np.zeros((4, 2, 2, 1))
    head[:, :, 0, 0] = np.array([0.0, 0.25, 0.75, 1.0])[:, None]
    assert estimate_emergence(steps, steps, head, threshold=0.5, n_bootstrap=0).step == 150.0


def test_estimate_censored_uses_the_last_step_even_without_a_score_there():
    steps = np.array([300.0, 100.0, 200.0, 400.0, np.nan])
    samples = model_level([0.25, 0.0, 0.125, np.nan, 0.9])  # no score at step 400
    est = estimate_emergence(steps, steps * 2, samples, threshold=0.5, n_bootstrap=5)
    assert (est.status, est.step, est.tokens, est.last_step) == ("censored", 400.0, 800.0, 400.0)
    assert est.reason == "below 0.5 at every checkpoint" and est.censored is True
    # For the logistic the censoring point is the last step exactly (no log round trip).
    steps = np.array([100.0, 1000.0, 1e4, 1e5, 7e5 / 3])
    est = estimate_emergence(steps, steps, model_level([0.3] * 5), method="logistic", n_bootstrap=0)
    assert (est.status, est.step, est.reason) == ("censored", 7e5 / 3, "never rises by 0.1")
    assert est.threshold is None and est.censored is True


def test_estimate_logistic_ignores_a_threshold_and_left_censored_has_no_ci():
    steps = np.array([100.0, 200.0, 400.0, 800.0, 1600.0])
    est = estimate_emergence(
        steps, steps, model_level(_logistic_curve(steps, 350.0)), "logistic", 0.5, n_bootstrap=2
    )
    assert est.threshold is None and est.method == "logistic" and est.status == "emerged"
    assert est.step == pytest.approx(350.0, rel=1e-4)
    assert est.ci_low == pytest.approx(350.0, rel=1e-4)
    assert est.ci_high == pytest.approx(350.0, rel=1e-4)
    est = estimate_emergence(
        steps, steps, model_level([0.1, 0.1, 0.1, 0.3, 0.7]), "piecewise", n_bootstrap=2
    )  # flat, then slope 0.0005 from step 400 (linear step axis)
    assert (est.method, est.status, est.step) == ("piecewise", "emerged", 400.0)
    assert (est.ci_low, est.ci_high) == (400.0, 400.0)
    est = estimate_emergence(_STEPS, _STEPS, model_level([0.6, 0.7, 0.8, 0.9]), threshold=0.5)
    assert (est.status, est.step, est.tokens) == ("left_censored", 0.0, 0.0)
    assert math.isnan(est.ci_low) and math.isnan(est.ci_high)


def _reference_bootstrap(steps, samples, threshold, n_bootstrap, seed, ci):
    """Independent percentile bootstrap of the threshold crossing on a (K, n) metric."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, samples.shape[1], size=(n_bootstrap, samples.shape[1]))
    replicates = []
    for draw in draws:
        resampled = samples[:, draw]  # (K, n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            curve = np.nanmean(resampled, axis=1)
        finite = np.isfinite(curve)
        s, c = steps[finite], curve[finite]
        if s.size == 0:
            continue  # failed replicate: left out
        above = [i for i in range(s.size) if c[i] >= threshold]
        if not above:
            replicates.append(math.inf)
        elif above[0] == 0:
            replicates.append(s[0])
        else:
            i = above[0]
            replicates.append(
                s[i - 1] + (threshold - c[i - 1]) / (c[i] - c[i - 1]) * (s[i] - s[i - 1])
            )
    ordered = sorted(replicates)
    alpha = (1 - ci) / 2

    def quantile(p):  # inverted CDF: smallest value whose empirical CDF reaches p
        return ordered[max(math.ceil(p * len(ordered)), 1) - 1]

    return quantile(alpha), quantile(1 - alpha), len(ordered)


def test_bootstrap_ci_matches_an_independent_percentile_bootstrap():
    rng = np.random.default_rng(42)
    steps = np.array([0.0, 100.0, 200.0, 300.0, 400.0])
    # Sample j rises to its own level at a different pace.
    levels = rng.uniform(0.3, 1.0, size=7)
    samples = np.outer(np.array([0.0, 0.1, 0.35, 0.7, 1.0]), levels)  # (K, n)
    for seed, ci in ((3, 0.9), (11, 0.5)):
        est = estimate_emergence(
            steps, steps, samples, threshold=0.3, n_bootstrap=50, seed=seed, ci=ci
        )
        low, high, _ = _reference_bootstrap(steps, samples, 0.3, 50, seed, ci)
        assert est.ci_low == pytest.approx(low) and est.ci_high == pytest.approx(high)
        assert est.ci_low < est.ci_high  # the samples differ: a real interval
        assert (est.n_bootstrap, est.seed) == (50, seed)


def test_censored_replicates_push_the_upper_limit_to_infinity():
    steps = np.array([0.0, 100.0, 200.0])
    # Only sample 0 ever rises; a replicate without it never reaches 0.2 (censored).
    samples = np.array([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    est = estimate_emergence(steps, steps, samples, threshold=0.2, n_bootstrap=30, seed=1)
    # Full data: mean 0.25 at step 200, crossing 100 + 0.2 / 0.25 * 100 = 180.
    assert est.step == pytest.approx(180.0) and est.status == "emerged"
    low, high, count = _reference_bootstrap(steps, samples, 0.2, 30, 1, 0.95)
    assert count == 30 and high == math.inf  # precondition: a replicate is censored
    assert low < math.inf  # and the lower limit is a real crossing
    assert est.ci_high == math.inf
    assert est.ci_low == pytest.approx(low)


def test_failed_replicates_are_left_out():
    steps = np.array([0.0, 100.0, 200.0])
    # Sample 1 is never finite: a replicate drawing only it has no score at all.
    samples = np.array([[0.0, np.nan], [0.5, np.nan], [1.0, np.nan]])
    draws = np.random.default_rng(0).integers(0, 2, size=(1, 2))
    assert draws.tolist() == [[1, 1]]  # precondition: seed 0 draws sample 1 twice
    est = estimate_emergence(steps, steps, samples, threshold=0.75, n_bootstrap=1, seed=0)
    assert est.step == 150.0 and est.status == "emerged"
    assert math.isnan(est.ci_low) and math.isnan(est.ci_high)  # no replicate left
    # With more replicates the failed ones drop out and the rest agree on 150.
    est = estimate_emergence(steps, steps, samples, threshold=0.75, n_bootstrap=20, seed=2)
    assert est.ci_low == 150.0 and est.ci_high == 150.0


def test_estimate_dataclass_defaults():
    est = EmergenceEstimate(1.0, 2.0, 0.5, 1.5, False, "threshold", 0.4, 3.0, 10, 0)
    assert est.status == "emerged" and est.reason == ""
