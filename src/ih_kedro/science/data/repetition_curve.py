"""How much of a window an induction rule predicts, as the window grows: the repetition curve.

The **induction rule** predicts token ``x[t]`` from the window when its predecessor
``a = x[t-1]`` occurred earlier (at ``j < t-1``, the most recent such ``j``) and ``x[t]`` equals
what followed it there, ``x[j+1]`` (the copy an induction head makes). The **induction-predictable
share** of a window is the fraction of its positions ``t >= 1`` where the rule is right. In
natural text a longer window holds more earlier occurrences, so the share grows with the context
length C; a data recipe that fixes the copied-token share at every C removes that growth. The
curve over C (:func:`repetition_curve`), with a Student-t CI over windows, puts a corpus and
every data variant on one axis.

Closed form for i.i.d. uniform tokens over ``V`` types (:func:`iid_uniform_share`): position
``t`` is predictable with probability ``(1 - (1 - 1/V)^(t-1)) / V`` (the predecessor occurred
among the ``t - 1`` earlier positions, and the independent next token matches with ``1/V``).

Over a range of C the share grows about as a power law, ``share ∝ C^g``; :func:`growth_exponent`
fits ``g`` (least squares of log share on log C, with a t interval on the slope), the exponent
the ``density_exponent`` option of ``fixed_rate_copies`` takes to grow copies as the corpus does.

Plain numpy/pandas; no Kedro imports.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from scipy.stats import t as student_t


def induction_predictable(window: np.ndarray) -> np.ndarray:
    """``(C,)`` bool: where the induction rule predicts ``window[t]`` correctly (never at t=0).

    Args:
        window: ``(C,)`` token ids.
    """
    window = np.asarray(window)
    out = np.zeros(window.shape[0], dtype=bool)  # (C,)
    last: dict[int, int] = {}  # token -> its most recent position <= t-2
    for t in range(1, window.shape[0]):
        a = int(window[t - 1])
        j = last.get(a)
        if j is not None and window[j + 1] == window[t]:
            out[t] = True
        last[a] = t - 1
    return out


def predictable_share(windows: np.ndarray) -> np.ndarray:
    """``(n,)`` induction-predictable share of each window of ``windows`` ``(n, C)``, over its
    ``C - 1`` positions with a predecessor."""
    windows = np.asarray(windows)
    if windows.ndim != 2 or windows.shape[1] < 2:
        raise ValueError(f"windows: expected (n, C) with C >= 2, got shape {windows.shape}")
    return np.array([induction_predictable(w)[1:].mean() for w in windows])  # (n,)


def iid_uniform_share(vocab_size: int, context_length: int) -> float:
    """Expected :func:`predictable_share` of a window of ``context_length`` i.i.d. uniform
    tokens over ``vocab_size`` types (closed form, see the module docstring)."""
    q = 1.0 - 1.0 / vocab_size
    t = np.arange(1, context_length)  # positions with a predecessor
    return float(np.mean((1.0 - q ** (t - 1)) / vocab_size))


def mean_with_t_interval(values: np.ndarray, level: float) -> tuple[float, float, float]:
    """Mean and Student-t interval (NaN interval for fewer than 2 values)."""
    values = np.asarray(values, dtype=float)
    mean = float(values.mean()) if len(values) else math.nan
    if len(values) < 2:
        return mean, math.nan, math.nan
    half = float(student_t.ppf(0.5 + level / 2, len(values) - 1) * values.std(ddof=1))
    half /= math.sqrt(len(values))
    return mean, mean - half, mean + half


def repetition_curve(
    windows_at: Callable[[int], np.ndarray],
    context_lengths: Sequence[int],
    *,
    level: float = 0.95,
) -> pd.DataFrame:
    """The induction-predictable share at each context length, with its CI over windows.

    Args:
        windows_at: ``C -> (n, C)`` windows of that length (e.g. random windows of a corpus,
            or a data variant's training sequences).
        context_lengths: the window lengths C (each >= 2).
        level: the t interval's confidence level.

    Returns:
        One row per C: ``context_length, share, ci_low, ci_high, n_windows``.
    """
    rows = []
    for c in context_lengths:
        shares = predictable_share(windows_at(int(c)))  # (n,)
        share, low, high = mean_with_t_interval(shares, level)
        rows.append({"context_length": int(c), "share": share, "ci_low": low, "ci_high": high,
                     "n_windows": int(len(shares))})  # fmt: skip
    return pd.DataFrame(rows)


def log_spaced_lengths(low: int, high: int, n: int) -> list[int]:
    """``n`` log-spaced integer context lengths from ``low`` to ``high`` (unique, ascending)."""
    if not 2 <= low <= high or n < 1:
        raise ValueError(
            f"context lengths: need 2 <= low <= high and n >= 1, got {low}, {high}, {n}"
        )
    return sorted({int(round(c)) for c in np.geomspace(low, high, n)})


def growth_exponent(
    curve: pd.DataFrame, min_context: int, max_context: int, level: float = 0.95
) -> dict:
    """The slope ``g`` of log(share) on log(context_length): ``share ∝ C^g`` over a range of C.

    Args:
        curve: a :func:`repetition_curve` table (columns ``context_length``, ``share``).
        min_context, max_context: the inclusive range of context lengths (tokens) fitted.
        level: the t interval's confidence level.

    Returns:
        ``exponent`` (the least-squares slope, dimensionless), ``ci_low`` / ``ci_high`` (its
        Student-t interval on ``n - 2`` degrees of freedom; NaN with fewer than 3 points),
        ``n_points``, ``min_context`` / ``max_context`` (the smallest and largest context
        length fitted, tokens) and ``share_at_min`` / ``share_at_max`` (the curve's share there).

    Raises:
        ValueError: fewer than 2 distinct context lengths in range, or a share in range that is
            not positive and finite (no logarithm).
    """
    lengths = curve["context_length"].to_numpy(dtype=float)  # (n_rows,)
    in_range = (lengths >= min_context) & (lengths <= max_context)  # (n_rows,)
    rows = curve.loc[in_range].sort_values("context_length")
    context = rows["context_length"].to_numpy(dtype=float)  # (n,)
    share = rows["share"].to_numpy(dtype=float)  # (n,)
    where = f"curve rows with {min_context} <= context_length <= {max_context}"
    if len(np.unique(context)) < 2:
        raise ValueError(
            f"{where}: need at least 2 distinct context lengths for a slope, got {len(rows)} rows"
        )
    bad = ~(np.isfinite(share) & (share > 0))  # (n,)
    if bad.any():
        raise ValueError(
            f"{where}: share must be positive to take its log, got {share[bad][0]} at "
            f"context_length {int(context[bad][0])}"
        )
    x = np.log(context)  # (n,)
    y = np.log(share)  # (n,)
    dx = x - x.mean()  # (n,)
    sxx = float(dx @ dx)
    slope = float(dx @ (y - y.mean())) / sxx
    n = len(x)
    low = high = math.nan
    if n >= 3:
        residuals = y - y.mean() - slope * dx  # (n,)
        se = math.sqrt(float(residuals @ residuals) / (n - 2) / sxx)
        half = float(student_t.ppf(0.5 + level / 2, n - 2)) * se
        low, high = slope - half, slope + half
    return {
        "exponent": slope,
        "ci_low": low,
        "ci_high": high,
        "n_points": n,
        "min_context": int(context[0]),
        "max_context": int(context[-1]),
        "share_at_min": float(share[0]),
        "share_at_max": float(share[-1]),
    }


__all__ = [
    "growth_exponent",
    "induction_predictable",
    "iid_uniform_share",
    "log_spaced_lengths",
    "mean_with_t_interval",
    "predictable_share",
    "repetition_curve",
]
