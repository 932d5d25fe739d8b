"""The copy data variants: ``natural`` text, ``copy_spans`` and ``fixed_rate_copies``.

``natural`` leaves text as it is; ``copy_spans`` (docs/calibration.md) copies one span of each
selected sequence from a random source offset to a random later offset (spans scale with C, so
the number of copy events per sequence does not grow with C); ``fixed_rate_copies`` places copy
events at a fixed rate per token (spans of a fixed length distribution, ``C / tokens_per_event``
of them per sequence, sources anywhere earlier), so a longer context holds more repetitions, as
natural text does. In natural text the copied share itself also grows with ``C``
(:mod:`ih_kedro.science.data.repetition_curve`); the options ``density_exponent`` ``g`` and
``reference_context`` ``C_ref`` of ``fixed_rate_copies`` follow that: one event every
``T(C) = tokens_per_event * (C / C_ref)^(-g)`` tokens (:func:`effective_tokens_per_event`), so
``C / T(C)`` events per sequence grow as ``C^(1+g)`` and the copied share as ``C^g``, equal to
the fixed rate at ``C = C_ref``. Each edits the windows of a batch in place and returns the mask
of the positions it wrote (:data:`~ih_kedro.science.data.variants.registry.VariantFn`); the
registry (:mod:`ih_kedro.science.data.variants.registry`) holds them under these names.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np


def span_length_bounds(
    context_length: int, span_min_fraction: float, span_max_fraction: float
) -> tuple[int, int]:
    """Return the inclusive (min, max) copied-span length in tokens for a context of ``C``.

    Spans scale with ``C`` so copy density stays fixed as the context changes:
    ``C = 32`` with the defaults 0.125–0.375 gives 4–12 tokens.
    """
    low = max(1, round(span_min_fraction * context_length))
    high = max(low, round(span_max_fraction * context_length))
    return low, high


def natural(
    windows: np.ndarray, rng: np.random.Generator, options: Mapping[str, Any], step: int = 0
) -> np.ndarray:
    """Natural text: no edits."""
    return np.zeros(windows.shape, dtype=bool)


def copy_spans(
    windows: np.ndarray, rng: np.random.Generator, options: Mapping[str, Any], step: int = 0
) -> np.ndarray:
    """Copy one span per selected sequence from a random source to a random later offset.

    Options: ``copy_rate`` (probability a sequence gets a span, default 1.0),
    ``span_min_fraction`` / ``span_max_fraction`` (span length as a fraction of ``C``, defaults
    0.125 / 0.375). The copy never overlaps its source: ``dest >= source + length``.
    """
    batch, width = windows.shape
    context_length = width - 1
    copy_rate = float(options.get("copy_rate", 1.0))
    low, high = span_length_bounds(
        context_length,
        float(options.get("span_min_fraction", 0.125)),
        float(options.get("span_max_fraction", 0.375)),
    )
    if 2 * high > width:
        raise ValueError(
            f"training.span_max_fraction: a span of up to {high} tokens cannot be copied twice "
            f"into a sequence of {width} tokens (context_length {context_length})"
        )
    # All draws happen for every row, selected or not, so the stream layout is fixed.
    selected = rng.random(batch) < copy_rate  # (B,)
    lengths = rng.integers(low, high + 1, size=batch)  # (B,)
    u_source = rng.random(batch)  # (B,)
    u_dest = rng.random(batch)  # (B,)
    source = (u_source * (width - 2 * lengths + 1)).astype(np.int64)  # (B,) in [0, W - 2L]
    first_dest = source + lengths  # (B,)
    dest = first_dest + (u_dest * (width - lengths - first_dest + 1)).astype(np.int64)  # [s+L, W-L]
    # One vectorised gather for every row: span position k of a selected row is copied when
    # k < length. Source and copy never overlap, so reading before writing is exact.
    offset = np.arange(high)  # (high,)
    take = selected[:, None] & (offset[None, :] < lengths[:, None])  # (B, high)
    rows = np.broadcast_to(np.arange(batch)[:, None], take.shape)[take]  # (n,)
    to = (dest[:, None] + offset[None, :])[take]  # (n,)
    windows[rows, to] = windows[rows, (source[:, None] + offset[None, :])[take]]
    copied = np.zeros(windows.shape, dtype=bool)  # (B, C+1)
    copied[rows, to] = True
    return copied


def _fixed_rate_options(options: Mapping[str, Any]) -> tuple[float, int, int]:
    """``(tokens_per_event, span_min, span_max)`` of ``fixed_rate_copies`` with defaults."""
    return (
        float(options.get("tokens_per_event", 16.0)),
        int(options.get("span_min", 4)),
        int(options.get("span_max", 8)),
    )


def _max_distance(options: Mapping[str, Any]) -> int | None:
    """``max_distance`` of ``fixed_rate_copies`` (None: a source anywhere earlier)."""
    value = options.get("max_distance")
    return None if value is None else int(value)


_WHERE = "training.variant_options.fixed_rate_copies"


def _density_growth(options: Mapping[str, Any]) -> tuple[float, int] | None:
    """``(density_exponent, reference_context)`` of ``fixed_rate_copies``, checked (None when
    ``density_exponent`` is unset: the fixed rate)."""
    reference = options.get("reference_context")
    if reference is not None and (
        isinstance(reference, bool) or not isinstance(reference, numbers.Integral) or reference < 1
    ):
        raise ValueError(
            f"{_WHERE}.reference_context: must be a positive int (tokens), got {reference!r}"
        )
    exponent = options.get("density_exponent")
    if exponent is None:
        return None
    if isinstance(exponent, bool) or not isinstance(exponent, numbers.Real):
        raise ValueError(f"{_WHERE}.density_exponent: must be a number, got {exponent!r}")
    if not (math.isfinite(exponent) and exponent >= 0):
        raise ValueError(f"{_WHERE}.density_exponent: must be finite and >= 0, got {exponent}")
    if reference is None:
        raise ValueError(
            f"{_WHERE}.reference_context: required when density_exponent is set (the context "
            "length, in tokens, at which the density equals one event every tokens_per_event)"
        )
    return float(exponent), int(reference)


def effective_tokens_per_event(options: Mapping[str, Any], context_length: int) -> float:
    """Mean tokens per copy event of ``fixed_rate_copies`` at a context of ``C`` tokens.

    ``tokens_per_event`` (default 16) when ``density_exponent`` is unset; otherwise
    ``T(C) = tokens_per_event * (C / reference_context)^(-density_exponent)``, so the expected
    events per sequence ``C / T(C)`` grow as ``C^(1 + g)`` and equal ``C / tokens_per_event`` at
    ``C = reference_context``. E.g. ``tokens_per_event = 16``, ``reference_context = 32``,
    ``g = 0.5``: 16 tokens at ``C = 32``, 8 at ``C = 128``.
    """
    tokens_per_event = _fixed_rate_options(options)[0]
    growth = _density_growth(options)
    if growth is None:
        return tokens_per_event
    exponent, reference = growth
    effective = tokens_per_event * (context_length / reference) ** (-exponent)
    if not effective > 0:
        return effective  # a non-positive tokens_per_event, refused by check_fixed_rate_copies
    # An integer event count that rounding moved off the integer (4.000000001) would add an
    # event slot of probability ~1e-9; snap it so the layout and capacity check see the integer.
    events = context_length / effective
    if events > 0.5 and abs(events - round(events)) < 1e-9 * events:
        return context_length / round(events)
    return effective


def expected_copy_events(context_length: int, tokens_per_event: float) -> float:
    """Expected copy events per sequence of ``fixed_rate_copies``: ``C / tokens_per_event``.

    Args:
        context_length: ``C``, tokens per sequence.
        tokens_per_event: mean tokens per event at this ``C`` (with ``density_exponent`` set,
            :func:`effective_tokens_per_event`).
    """
    return context_length / tokens_per_event


def _positions_needed(context_length: int, tokens_per_event: float, span_max: int) -> int:
    """Positions the worst case of ``fixed_rate_copies`` needs: the first span's source, every
    span, and one separating token between consecutive spans."""
    n_max = math.ceil(expected_copy_events(context_length, tokens_per_event))
    return span_max + n_max * span_max + max(n_max - 1, 0)


def _largest_fitting_context(options: Mapping[str, Any], below: int, span_max: int) -> int | None:
    """The largest ``C < below`` whose worst case fits in ``C + 1`` positions (None if none)."""
    for context_length in range(below - 1, 0, -1):
        tokens_per_event = effective_tokens_per_event(options, context_length)
        if _positions_needed(context_length, tokens_per_event, span_max) <= context_length + 1:
            return context_length
    return None


def check_fixed_rate_copies(options: Mapping[str, Any], context_length: int) -> None:
    """Fail before training when ``fixed_rate_copies`` cannot place its spans in ``C + 1``.

    Checks the options (``tokens_per_event`` > 0 tokens, ``1 <= span_min <= span_max``,
    ``max_distance >= span_max``, ``density_exponent`` finite and >= 0 with a positive int
    ``reference_context``) and that ``ceil(C / T(C))`` events of up to ``span_max`` tokens fit
    a sequence of ``C + 1`` tokens, ``T(C)`` from :func:`effective_tokens_per_event`.
    """
    where = _WHERE
    tokens_per_event, low, high = _fixed_rate_options(options)
    if not tokens_per_event > 0:
        raise ValueError(f"{where}.tokens_per_event: must be positive, got {tokens_per_event}")
    if not 1 <= low <= high:
        raise ValueError(f"{where}.span_min / span_max: need 1 <= min <= max, got {low}, {high}")
    k = _max_distance(options)
    if k is not None and k < high:
        raise ValueError(
            f"{where}.max_distance: {k} tokens cannot hold a source of up to span_max = {high} "
            "tokens before its copy; set it >= span_max"
        )
    effective = effective_tokens_per_event(options, context_length)
    n_max = math.ceil(expected_copy_events(context_length, effective))
    needed = _positions_needed(context_length, effective, high)
    if needed <= context_length + 1:
        return
    if _density_growth(options) is None:
        raise ValueError(
            f"{where}: up to {n_max} spans of up to {high} tokens (one every {effective:g} "
            f"tokens) need {needed} positions, more than a sequence of context_length + 1 = "
            f"{context_length + 1}; lower span_max or raise tokens_per_event"
        )
    largest = _largest_fitting_context(options, context_length, high)
    fits = (
        "no context_length fits"
        if largest is None
        else f"the largest context_length that fits is {largest}"
    )
    raise ValueError(
        f"{where}.density_exponent: {options['density_exponent']} (reference_context "
        f"{options['reference_context']}) gives one event every {effective:g} tokens at "
        f"context_length {context_length}: up to {n_max} spans of up to {high} tokens need "
        f"{needed} positions, more than context_length + 1 = {context_length + 1} ({fits}); "
        "lower density_exponent or span_max, or raise tokens_per_event"
    )


def fixed_rate_copies(
    windows: np.ndarray, rng: np.random.Generator, options: Mapping[str, Any], step: int = 0
) -> np.ndarray:
    """Copy events at a fixed rate per token: longer contexts hold more repetitions.

    Options: ``tokens_per_event`` (mean tokens per copy event, default 16), ``span_min`` /
    ``span_max`` (span length in tokens, uniform and inclusive, defaults 4 / 8; fixed, not
    scaled with ``C``), ``max_distance`` (default none: a source starts at most this many tokens
    before its copy, the same ``k`` at every ``C``, which removes the dilution of a source that
    lies farther back in a longer context), ``density_exponent`` ``g`` (default none: the fixed
    rate; finite, >= 0) with ``reference_context`` ``C_ref`` (tokens, required with ``g``): one
    event every ``T(C) = tokens_per_event * (C / C_ref)^(-g)`` tokens
    (:func:`effective_tokens_per_event`). A sequence of ``C`` tokens gets ``floor(C / T)`` spans
    plus one more with probability ``frac(C / T)``, so the expected number of copy events per
    sequence is ``C / T`` (∝ C, or ∝ ``C^(1+g)`` with ``g``) and the copied share
    ``E[length] / T`` is the same at every ``C`` (∝ ``C^g`` with ``g``). Destinations are spread by
    uniform spacings (at least one untouched token between consecutive spans, so each event is a
    separate run of the returned mask); each source starts anywhere from position 0 to
    ``dest - length`` (anywhere earlier, possibly inside an earlier copy; with ``max_distance``
    from ``max(0, dest - max_distance)``). Spans are written in order, so a source that
    overlaps an earlier copy reads the copied text.
    """
    batch, width = windows.shape
    copied = np.zeros(windows.shape, dtype=bool)  # (B, C+1)
    layout = fixed_rate_layout(batch, width, rng, options)
    if layout is None:
        return copied
    active, lengths, dest, source = layout
    offset = np.arange(int(lengths.max(initial=0)))  # (high,)
    for j in range(lengths.shape[1]):  # in order: a later source may read an earlier copy
        take = active[:, j, None] & (offset[None, :] < lengths[:, j, None])  # (B, high)
        rows = np.broadcast_to(np.arange(batch)[:, None], take.shape)[take]  # (m,)
        to = (dest[:, j, None] + offset[None, :])[take]  # (m,)
        windows[rows, to] = windows[rows, (source[:, j, None] + offset[None, :])[take]]
        copied[rows, to] = True
    return copied


def fixed_rate_layout(
    batch: int, width: int, rng: np.random.Generator, options: Mapping[str, Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Where :func:`fixed_rate_copies` copies: ``(active, lengths, dest, source)``, each
    ``(B, n_max)`` (None when no event fits: ``n_max = 0``); ``source`` is each span's first
    source position, ``dest`` its first copied position (token positions in a row of ``width =
    C + 1``). ``n_max = ceil(C / T(C))`` with ``T(C)`` from :func:`effective_tokens_per_event`."""
    context_length = width - 1
    _, low, high = _fixed_rate_options(options)
    check_fixed_rate_copies(options, context_length)
    expected = expected_copy_events(
        context_length, effective_tokens_per_event(options, context_length)
    )
    n_max = math.ceil(expected)
    if n_max == 0:
        return None
    # All draws happen at fixed shapes, so the stream layout does not depend on the outcomes.
    extra = rng.random(batch) < (expected - math.floor(expected))  # (B,)
    n_events = math.floor(expected) + extra.astype(np.int64)  # (B,)
    lengths = rng.integers(low, high + 1, size=(batch, n_max))  # (B, n)
    gap_weights = rng.random((batch, n_max + 1))  # (B, n+1)
    u_source = rng.random((batch, n_max))  # (B, n)
    active = np.arange(n_max)[None, :] < n_events[:, None]  # (B, n)
    lengths = np.where(active, lengths, 0)  # (B, n)
    first = lengths[:, 0]  # (B,) room for the first span's source
    free = width - first - lengths.sum(axis=1) - np.maximum(n_events - 1, 0)  # (B,) >= 0
    gap_active = np.concatenate([active, np.ones((batch, 1), dtype=bool)], axis=1)  # (B, n+1)
    gap_weights = np.where(gap_active, gap_weights, 0.0)
    shares = gap_weights / gap_weights.sum(axis=1, keepdims=True)  # (B, n+1)
    gaps = np.floor(shares * free[:, None]).astype(np.int64)[:, :n_max]  # (B, n)
    before = np.cumsum(lengths + 1, axis=1) - (lengths + 1)  # (B, n) spans + separators before
    dest = first[:, None] + np.cumsum(gaps, axis=1) + before  # (B, n)
    k = _max_distance(options)
    earliest = np.zeros_like(dest) if k is None else np.maximum(dest - k, 0)  # (B, n)
    # (B, n) in [earliest, dest - length]; with no max_distance the same draw as always.
    source = earliest + (u_source * (dest - lengths - earliest + 1)).astype(np.int64)
    return active, lengths, dest, source


def count_copy_events(copied: np.ndarray) -> int:
    """Number of copy events in a ``(B, C+1)`` copied mask: its runs of consecutive True."""
    copied = np.asarray(copied, dtype=bool)
    if copied.size == 0:
        return 0
    starts = copied[:, 1:] & ~copied[:, :-1]  # (B, C)
    return int(copied[:, 0].sum() + starts.sum())


def expected_copied_fraction(
    context_length: int, copy_rate: float, span_min_fraction: float, span_max_fraction: float
) -> float:
    """Expected fraction of tokens in copied spans under ``copy_spans`` (for documentation)."""
    low, high = span_length_bounds(context_length, span_min_fraction, span_max_fraction)
    return copy_rate * (low + high) / 2 / (context_length + 1)


__all__ = [
    "check_fixed_rate_copies",
    "copy_spans",
    "count_copy_events",
    "effective_tokens_per_event",
    "expected_copied_fraction",
    "expected_copy_events",
    "fixed_rate_copies",
    "fixed_rate_layout",
    "natural",
    "span_length_bounds",
]
