"""Emergence detection: when does a run's induction-head metric rise, with a bootstrap CI.

Input per run is what the telemetry pipeline scores at every checkpoint: ``steps (K,)``,
``tokens (K,)`` (tokens seen) and per-probe-sample scores ``samples (K, n, ...)`` for a metric,
e.g. prefix matching ``(K, n, layers, heads)``, associative recall ``(K, n)``, repeated-half
loss drop ``(K, n)``. All metrics are oriented so that emergence is a *rise*.

The run-level curve is the mean over probe samples, then the max over the remaining axes (the
best head), optionally restricted to layers ``>= min_layer`` (an induction head needs a
previous-token head in an earlier layer). The emergence step ``S*`` is read off that curve by a
threshold crossing (linearly interpolated), a logistic midpoint, or a piecewise-linear
breakpoint; its CI is a percentile bootstrap over probe samples.

Every estimate carries a ``status`` (:data:`STATUSES`), never dropped:

- ``emerged``: the curve crosses (rises) within the observed checkpoints, after the first.
- ``censored``: right-censored, the curve never crossed (never rose) within the budget; ``step``
  and ``tokens`` are the censoring point (the last checkpoint), so a Tobit fit reads "emerges
  after this".
- ``left_censored``: already above the threshold at the first checkpoint (or a fitted midpoint
  before it): emergence happened at or before ``step`` (the first checkpoint), time unknown.
- ``fit_failed``: the estimator could not decide (too few points, the logistic/piecewise fit
  failed, a midpoint past the last checkpoint, no finite score); ``reason`` says which.

The table over runs (every run and detection spec, joined to the sweep's covariates) is
:mod:`ih_kedro.science.telemetry.emergence_table`. Plain numpy/scipy; no Kedro imports.
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit

logger = logging.getLogger(__name__)

METHODS = ("threshold", "logistic", "piecewise")
STATUSES = ("emerged", "censored", "left_censored", "fit_failed")
"""Values of the emergence table's ``status`` column (docs/architecture.md)."""


@dataclass(frozen=True)
class EmergenceEstimate:
    """One run's emergence estimate for one metric and method.

    Attributes:
        step: emergence step ``S*`` (optimizer steps, fractional after interpolation). For
            ``censored`` the censoring point (last checkpoint), for ``left_censored`` the first
            checkpoint, NaN for ``fit_failed``.
        tokens: tokens seen at ``step`` (interpolated from the run's steps -> tokens); NaN for
            ``fit_failed``.
        ci_low, ci_high: percentile bootstrap CI of ``S*`` over probe samples (steps), for
            ``emerged`` rows. A replicate that never crosses counts as "after the last step"
            (``ci_high`` is ``inf`` when more than ``(1 - ci) / 2`` of them are censored); a
            replicate whose fit fails is left out. NaN otherwise or when ``n_bootstrap == 0``.
        censored: ``status == "censored"`` (right-censored; kept for older readers).
        status: one of :data:`STATUSES`.
        reason: why a row is not ``emerged`` (empty for ``emerged``).
        method: ``threshold``, ``logistic`` or ``piecewise``.
        threshold: the threshold for ``method="threshold"`` (metric units), else None.
        last_step: last observed step (the censoring point).
        n_bootstrap: bootstrap replicates drawn.
        seed: bootstrap RNG seed.
    """

    step: float
    tokens: float
    ci_low: float
    ci_high: float
    censored: bool
    method: str
    threshold: float | None
    last_step: float
    n_bootstrap: int
    seed: int
    status: str = "emerged"
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict view (one row of the emergence table)."""
        return asdict(self)


# --------------------------------------------------------------------------------------------
# Curve
# --------------------------------------------------------------------------------------------
def _validate_samples(samples: np.ndarray) -> np.ndarray:
    samples = np.asarray(samples, dtype=float)
    if samples.ndim < 2:
        raise ValueError(
            f"samples: expected shape (K, n, ...) with K checkpoints and n probe samples, "
            f"got shape {samples.shape}"
        )
    if samples.shape[1] == 0:
        raise ValueError("samples: no probe samples (n == 0)")
    return samples


def _restrict_layers(per_sample: np.ndarray, min_layer: int) -> np.ndarray:
    """Drop layers below ``min_layer`` from a ``(K, n, layers, ...)`` array."""
    if min_layer < 0:
        raise ValueError(f"min_layer: must be >= 0, got {min_layer}")
    if min_layer == 0 or per_sample.ndim < 3:
        # Model-level metrics (K, n) have no layer axis: nothing to restrict.
        return per_sample
    n_layers = per_sample.shape[2]
    if min_layer >= n_layers:
        raise ValueError(
            f"min_layer: {min_layer} leaves no layers (the metric has {n_layers} layers)"
        )
    return per_sample[:, :, min_layer:]


def _flat_samples(samples: np.ndarray, min_layer: int) -> np.ndarray:
    """Validated ``(K, n, ...)`` samples restricted to ``min_layer``, flattened to ``(K, n, F)``."""
    samples = _restrict_layers(_validate_samples(samples), min_layer)
    return samples.reshape(samples.shape[0], samples.shape[1], -1)


def _curves_from_weights(flat: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted mean over probe samples then max over features.

    Args:
        flat: ``(K, n, F)`` scores, NaN allowed.
        weights: ``(R, n)`` non-negative sample weights (bootstrap counts; ones = plain mean).

    Returns:
        ``(R, K)`` curves.
    """
    finite = np.isfinite(flat)
    values = np.where(finite, flat, 0.0)
    totals = np.einsum("rn,knf->rkf", weights, values)  # (R, K, F)
    counts = np.einsum("rn,knf->rkf", weights, finite.astype(float))  # (R, K, F)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = totals / counts  # (R, K, F), NaN where no finite sample
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmax(means, axis=2)  # (R, K)


def emergence_curve(samples: np.ndarray, min_layer: int = 0) -> np.ndarray:
    """Run-level curve of a metric: mean over probe samples, then max over heads/layers.

    Args:
        samples: per-sample scores ``(K, n, ...)``: K checkpoints, n probe samples, then any
            head axes (``(layers, heads)`` for head-level metrics). NaN samples are ignored.
        min_layer: only layers ``>= min_layer`` compete for the max (ignored for model-level
            metrics shaped ``(K, n)``).

    Returns:
        ``(K,)`` curve in the metric's units (e.g. PS in [0, 1]).
    """
    flat = _flat_samples(samples, min_layer)  # (K, n, F)
    return _curves_from_weights(flat, np.ones((1, flat.shape[1])))[0]


# --------------------------------------------------------------------------------------------
# Point estimators on one curve
# --------------------------------------------------------------------------------------------
def _sorted_finite(steps: np.ndarray, curve: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    steps = np.asarray(steps, dtype=float)
    curve = np.asarray(curve, dtype=float)
    if steps.shape != curve.shape or steps.ndim != 1:
        raise ValueError(
            f"steps and curve: expected two (K,) arrays of equal length, got {steps.shape} "
            f"and {curve.shape}"
        )
    keep = np.isfinite(steps) & np.isfinite(curve)
    order = np.argsort(steps[keep], kind="stable")
    return steps[keep][order], curve[keep][order]


def _fit_axis(
    steps: np.ndarray, curve: np.ndarray, log_steps: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted finite points on the fitting axis: ``(x, curve)`` with ``x = log(step)`` (steps
    <= 0 skipped) when ``log_steps``, else ``x = step``."""
    steps, curve = _sorted_finite(steps, curve)
    if log_steps:
        keep = steps > 0
        return np.log(steps[keep]), curve[keep]
    return steps, curve


@dataclass(frozen=True)
class _Outcome:
    """An estimator's verdict on one curve: a step (steps) and a status with its reason."""

    step: float
    status: str
    reason: str = ""


def _failed(reason: str) -> _Outcome:
    return _Outcome(math.nan, "fit_failed", reason)


def _never_rises(curve: np.ndarray, min_rise: float) -> bool:
    """The best later value never exceeds the worst earlier one by ``min_rise``."""
    running_min = np.minimum.accumulate(curve)
    return bool(np.max(curve - running_min) < min_rise)


def _threshold_outcome(steps: np.ndarray, curve: np.ndarray, threshold: float) -> _Outcome:
    steps, curve = _sorted_finite(steps, curve)
    if steps.size == 0:
        return _failed("no finite score")
    above = np.flatnonzero(curve >= threshold)
    if above.size == 0:
        return _Outcome(float(steps[-1]), "censored", f"below {threshold:g} at every checkpoint")
    i = int(above[0])
    if i == 0:
        return _Outcome(
            float(steps[0]), "left_censored", f"already >= {threshold:g} at the first checkpoint"
        )
    s0, s1, c0, c1 = steps[i - 1], steps[i], curve[i - 1], curve[i]
    return _Outcome(float(s0 + (threshold - c0) / (c1 - c0) * (s1 - s0)), "emerged")


def threshold_crossing(steps: np.ndarray, curve: np.ndarray, threshold: float) -> float | None:
    """First step at which the curve reaches ``threshold``, linearly interpolated.

    Args:
        steps: ``(K,)`` checkpoint steps (any order; NaN points are skipped).
        curve: ``(K,)`` metric values at those steps.
        threshold: level in the metric's units (e.g. PS 0.4).

    Returns:
        The crossing step (steps, fractional): between the last checkpoint below and the first
        at or above the threshold, on the straight line joining them. ``steps[0]`` when the
        first checkpoint is already above it (a left-censored run: :func:`estimate_emergence`
        labels it). None when the curve never reaches it (censored).
    """
    outcome = _threshold_outcome(steps, curve, threshold)
    return None if outcome.status in ("censored", "fit_failed") else outcome.step


def _logistic(x: np.ndarray, low: float, rise: float, mid: float, width: float) -> np.ndarray:
    z = np.clip((x - mid) / width, -60.0, 60.0)
    return low + rise / (1.0 + np.exp(-z))


def _from_axis(x: float, log_steps: bool) -> float:
    return float(math.exp(x)) if log_steps else float(x)


def _logistic_outcome(
    steps: np.ndarray, curve: np.ndarray, log_steps: bool = True, min_rise: float = 0.1
) -> _Outcome:
    x, curve = _fit_axis(steps, curve, log_steps)
    if x.size == 0:
        return _failed("no finite score")
    last = _from_axis(float(x[-1]), log_steps)
    if x.size >= 2 and _never_rises(curve, min_rise):
        return _Outcome(last, "censored", f"never rises by {min_rise:g}")
    if x.size < 5:
        return _failed(f"{x.size} checkpoints, the logistic needs 5")
    span = float(x[-1] - x[0])
    if span <= 0:
        return _failed("logistic fit: every checkpoint at the same step")
    low0, high0 = float(np.min(curve)), float(np.max(curve))
    half = low0 + 0.5 * (high0 - low0)
    mid0 = float(x[np.flatnonzero(curve >= half)[0]])
    p0 = [low0, high0 - low0, mid0, span / 10.0]
    amp = high0 - low0
    bounds = (
        [low0 - amp, 0.0, x[0] - span, span * 1e-3],
        [high0 + amp, 3.0 * amp, x[-1] + span, 2.0 * span],
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)
            params, _ = curve_fit(_logistic, x, curve, p0=p0, bounds=bounds, maxfev=5000)
    except (RuntimeError, ValueError) as err:
        logger.debug("logistic_midpoint: fit failed (%s)", err)
        return _failed(f"logistic fit failed: {err}")
    _, rise, mid, _ = params
    if not np.all(np.isfinite(params)):
        return _failed("logistic fit: non-finite parameters")
    if rise < min_rise:
        return _failed(f"logistic fit: fitted rise {rise:.3g} < {min_rise:g}")
    if mid > x[-1]:
        return _failed("logistic fit: midpoint after the last checkpoint (extrapolated)")
    if mid < x[0]:
        return _Outcome(
            _from_axis(float(x[0]), log_steps),
            "left_censored",
            "midpoint before the first checkpoint",
        )
    return _Outcome(_from_axis(float(mid), log_steps), "emerged")


def logistic_midpoint(
    steps: np.ndarray,
    curve: np.ndarray,
    log_steps: bool = True,
    min_rise: float = 0.1,
) -> float | None:
    """Midpoint of a 4-parameter logistic fitted to the curve (scipy ``curve_fit``).

    The model is ``low + rise / (1 + exp(-(x - mid) / width))`` with ``x = log(step)``
    (``log_steps=True``, steps <= 0 are skipped) or ``x = step``; ``rise >= 0``.

    Args:
        steps: ``(K,)`` checkpoint steps.
        curve: ``(K,)`` metric values.
        log_steps: fit in log-step (the transition is sharper on a log axis early in training).
        min_rise: smallest observed and fitted rise (metric units) that counts as emergence.

    Returns:
        The midpoint in steps, or None when the curve does not rise by ``min_rise`` (censored)
        or the fit cannot decide (fewer than 5 points, a failed fit, a midpoint after the last
        checkpoint: :func:`estimate_emergence` labels these ``fit_failed``). A midpoint before
        the first checkpoint is reported as the first step (left-censored).
    """
    outcome = _logistic_outcome(steps, curve, log_steps, min_rise)
    return None if outcome.status in ("censored", "fit_failed") else outcome.step


def _piecewise_outcome(
    steps: np.ndarray, curve: np.ndarray, log_steps: bool = False, min_rise: float = 0.1
) -> _Outcome:
    x, curve = _fit_axis(steps, curve, log_steps)
    if x.size == 0:
        return _failed("no finite score")
    if x.size >= 2 and _never_rises(curve, min_rise):
        return _Outcome(
            _from_axis(float(x[-1]), log_steps), "censored", f"never rises by {min_rise:g}"
        )
    if x.size < 4:
        return _failed(f"{x.size} checkpoints, the piecewise fit needs 4")
    best: tuple[float, int, np.ndarray] | None = None
    for k in range(1, x.size - 1):
        design = np.column_stack([np.ones_like(x), x, np.maximum(0.0, x - x[k])])
        coef, *_ = np.linalg.lstsq(design, curve, rcond=None)
        sse = float(np.sum((design @ coef - curve) ** 2))
        if best is None or sse < best[0]:
            best = (sse, k, coef)
    assert best is not None
    _, k, coef = best
    if coef[2] <= 0:
        return _failed("piecewise fit: the slope does not increase at the best breakpoint")
    if float(np.max(curve[k:]) - curve[k]) < min_rise:
        return _failed(f"piecewise fit: rises less than {min_rise:g} after the breakpoint")
    return _Outcome(_from_axis(float(x[k]), log_steps), "emerged")


def piecewise_breakpoint(
    steps: np.ndarray,
    curve: np.ndarray,
    log_steps: bool = False,
    min_rise: float = 0.1,
) -> float | None:
    """Breakpoint of a continuous two-segment piecewise-linear fit (grid search).

    Fits ``y = c0 + c1 x + c2 max(0, x - k)`` by least squares for every interior checkpoint
    ``k`` and keeps the ``k`` with the smallest residual sum of squares: the onset of the
    rise.

    Args:
        steps: ``(K,)`` checkpoint steps.
        curve: ``(K,)`` metric values.
        log_steps: search in log-step instead of step (steps <= 0 are skipped).
        min_rise: smallest observed rise (metric units) after the breakpoint.

    Returns:
        The breakpoint in steps, or None when the curve never rises by ``min_rise``
        (censored), or there are fewer than 4 points, the slope does not increase at the
        break, or the curve rises less than ``min_rise`` after it (``fit_failed``).
    """
    outcome = _piecewise_outcome(steps, curve, log_steps, min_rise)
    return None if outcome.status in ("censored", "fit_failed") else outcome.step


def _point_estimate(
    steps: np.ndarray, curve: np.ndarray, method: str, threshold: float | None
) -> _Outcome:
    if method == "threshold":
        assert threshold is not None
        return _threshold_outcome(steps, curve, threshold)
    if method == "logistic":
        return _logistic_outcome(steps, curve)
    if method == "piecewise":
        return _piecewise_outcome(steps, curve)
    raise ValueError(f"method: expected one of {METHODS}, got {method!r}")


# --------------------------------------------------------------------------------------------
# Run-level estimate with bootstrap CI
# --------------------------------------------------------------------------------------------
def _check_options(method: str, threshold: float | None, ci: float, n_bootstrap: int) -> None:
    """Raise naming the argument when ``method``, ``threshold``, ``ci`` or ``n_bootstrap`` is
    not usable."""
    if method not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
    if method == "threshold" and threshold is None:
        raise ValueError("threshold: required for method='threshold'")
    if not 0 < ci < 1:
        raise ValueError(f"ci: must be in (0, 1), got {ci}")
    if n_bootstrap < 0:
        raise ValueError(f"n_bootstrap: must be >= 0, got {n_bootstrap}")


def _run_arrays(
    steps: np.ndarray, tokens: np.ndarray, samples: np.ndarray, min_layer: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``steps (K,)``, ``tokens (K,)`` as floats and the flat ``(K, n, F)`` samples
    (:func:`_flat_samples`); raises when steps or tokens do not match the K checkpoints."""
    steps = np.asarray(steps, dtype=float)
    tokens = np.asarray(tokens, dtype=float)
    flat = _flat_samples(samples, min_layer)  # (K, n, F)
    n_checkpoints = flat.shape[0]
    if steps.shape != (n_checkpoints,) or tokens.shape != (n_checkpoints,):
        raise ValueError(
            f"steps, tokens: expected shape ({n_checkpoints},) to match samples "
            f"{np.shape(samples)}, got {steps.shape} and {tokens.shape}"
        )
    return steps, tokens, flat


def _tokens_at(step: float, known_steps: np.ndarray, known_tokens: np.ndarray) -> float:
    """Tokens seen at ``step``, interpolated between the run's finite checkpoints; NaN for a
    non-finite step or a run without any."""
    if not math.isfinite(step) or known_steps.size == 0:
        return math.nan
    return float(np.interp(step, known_steps, known_tokens))


def _bootstrap_ci(
    flat: np.ndarray,
    steps: np.ndarray,
    method: str,
    threshold: float | None,
    *,
    n_bootstrap: int,
    seed: int,
    ci: float,
) -> tuple[float, float]:
    """Percentile bootstrap CI ``(low, high)`` of the emergence step over the probe samples.

    Each of ``n_bootstrap`` replicates resamples the n probe samples of ``flat (K, n, F)`` with
    replacement and re-estimates the step on its curve. A censored replicate counts as ``inf``
    (after the last step), a failed fit is left out; NaN, NaN when every replicate fails.
    """
    ci_low = ci_high = math.nan
    n_samples = flat.shape[1]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_samples, size=(n_bootstrap, n_samples))
    weights = np.stack([np.bincount(d, minlength=n_samples) for d in draws]).astype(float)
    curves = _curves_from_weights(flat, weights)  # (R, K)
    estimates = [_point_estimate(steps, c, method, threshold) for c in curves]
    # Censored replicates emerge "after the last step"; failed fits carry no estimate.
    replicates = np.array(
        [math.inf if e.status == "censored" else e.step for e in estimates
         if e.status != "fit_failed"]
    )  # fmt: skip
    if replicates.size:
        alpha = (1.0 - ci) / 2.0
        # inverted_cdf never interpolates towards an inf (censored) replicate.
        ci_low, ci_high = (
            float(v) for v in np.quantile(replicates, [alpha, 1 - alpha], method="inverted_cdf")
        )
    return ci_low, ci_high


def estimate_emergence(
    steps: np.ndarray,
    tokens: np.ndarray,
    samples: np.ndarray,
    method: str = "threshold",
    threshold: float | None = None,
    *,
    n_bootstrap: int = 200,
    seed: int = 0,
    ci: float = 0.95,
    min_layer: int = 0,
) -> EmergenceEstimate:
    """Emergence step of one run with a percentile bootstrap CI over probe samples.

    Args:
        steps: ``(K,)`` checkpoint steps.
        tokens: ``(K,)`` tokens seen at those steps.
        samples: ``(K, n, ...)`` per-probe-sample scores (see :func:`emergence_curve`).
        method: ``threshold`` | ``logistic`` | ``piecewise``.
        threshold: level for ``method="threshold"`` (metric units); required there.
        n_bootstrap: bootstrap replicates (resampling the n probe samples with replacement and
            recomputing the curve and the estimate); 0 skips the CI.
        seed: bootstrap RNG seed.
        ci: two-sided CI level.
        min_layer: only layers ``>= min_layer`` compete for the best head.

    Returns:
        An :class:`EmergenceEstimate` (steps, tokens) with its ``status``: ``censored`` rows
        carry the censoring point (last checkpoint) in ``step`` and ``tokens``,
        ``left_censored`` rows the first checkpoint, ``fit_failed`` rows NaN and a ``reason``.
    """
    _check_options(method, threshold, ci, n_bootstrap)
    steps, tokens, flat = _run_arrays(steps, tokens, samples, min_layer)
    n_samples = flat.shape[1]
    last_step = float(np.nanmax(steps))
    threshold_value = float(threshold) if method == "threshold" else None

    curve = _curves_from_weights(flat, np.ones((1, n_samples)))[0]  # (K,)
    outcome = _point_estimate(steps, curve, method, threshold_value)
    if outcome.status == "censored":  # the censoring point, exactly (no log round trip)
        outcome = _Outcome(last_step, outcome.status, outcome.reason)
    # np.interp needs finite, increasing sample points: skip checkpoints with NaN step/tokens.
    known_steps, known_tokens = _sorted_finite(steps, tokens)

    ci_low = ci_high = math.nan
    if outcome.status == "emerged" and n_bootstrap > 0:
        ci_low, ci_high = _bootstrap_ci(
            flat, steps, method, threshold_value, n_bootstrap=n_bootstrap, seed=seed, ci=ci
        )

    return EmergenceEstimate(
        step=float(outcome.step),
        tokens=_tokens_at(outcome.step, known_steps, known_tokens),
        ci_low=ci_low,
        ci_high=ci_high,
        censored=outcome.status == "censored",
        method=method,
        threshold=threshold_value,
        last_step=last_step,
        n_bootstrap=n_bootstrap,
        seed=seed,
        status=outcome.status,
        reason=outcome.reason,
    )
