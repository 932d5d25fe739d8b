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


__all__ = [
    "induction_predictable",
    "iid_uniform_share",
    "log_spaced_lengths",
    "mean_with_t_interval",
    "predictable_share",
    "repetition_curve",
]
