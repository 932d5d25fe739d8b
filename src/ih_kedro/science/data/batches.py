"""Deterministic training batches: the batch at step ``s`` is a pure function of (seed, step).

Every batch is ``B`` random windows of ``C + 1`` tokens from the packed token stream (inputs
``[:, :-1]``, next-token targets ``[:, 1:]``). The windows' offsets and any data-variant edits
come from a NumPy generator seeded with ``(seed, step)`` alone, so any step's batch can be
reproduced in isolation and a resumed run sees exactly the batches an uninterrupted run sees.

Data variants are registered in :data:`DATA_VARIANTS` (name -> function editing the windows in
place and returning a mask of the positions it wrote). ``natural`` leaves text as it is;
``copy_spans`` (docs/calibration.md) copies one span of each selected sequence from a random source
offset to a random later offset (spans scale with C, so the number of copy events per sequence
does not grow with C); ``fixed_rate_copies`` places copy events at a fixed rate per token (spans
of a fixed length distribution, ``C / tokens_per_event`` of them per sequence, sources anywhere
earlier), so a longer context holds more repetitions, as natural text does. Other experiments
register their variants with :func:`register_variant`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

# Salt that keeps the batch stream independent of other uses of the same run seed
# (model init uses the seed directly).
_BATCH_STREAM = 0x1D_BA7C

VariantFn = Callable[[np.ndarray, np.random.Generator, Mapping[str, Any], int], np.ndarray]
"""``fn(windows, rng, options, step)``: edit ``windows`` (B, C+1) in place; return a bool mask
(B, C+1) of the positions written. ``step`` is the 0-based optimizer step (for schedules such as
an annealed mix ratio); ``rng`` is already seeded by (seed, step)."""

VariantCheck = Callable[[Mapping[str, Any], int], None]
"""``check(options, context_length)``: raise ``ValueError`` naming the parameter when a variant's
options cannot work (called before any training)."""


@dataclass(frozen=True)
class Batch:
    """One training batch.

    ``tokens`` holds ``B`` windows of ``C + 1`` token ids: the model reads ``tokens[:, :-1]`` and
    predicts ``tokens[:, 1:]``. ``copied`` marks the positions a data variant wrote.
    """

    tokens: torch.Tensor  # (B, C+1) int64
    copied: np.ndarray  # (B, C+1) bool

    @property
    def inputs(self) -> torch.Tensor:
        return self.tokens[:, :-1]  # (B, C)

    @property
    def targets(self) -> torch.Tensor:
        return self.tokens[:, 1:]  # (B, C)

    @property
    def copied_fraction(self) -> float:
        """Fraction of the batch's tokens that a data variant copied (0 for natural text)."""
        return float(self.copied.mean()) if self.copied.size else 0.0


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


def _natural(
    windows: np.ndarray, rng: np.random.Generator, options: Mapping[str, Any], step: int = 0
) -> np.ndarray:
    """Natural text: no edits."""
    return np.zeros(windows.shape, dtype=bool)


def _copy_spans(
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


def expected_copy_events(context_length: int, tokens_per_event: float) -> float:
    """Expected copy events per sequence of ``fixed_rate_copies``: ``C / tokens_per_event``."""
    return context_length / tokens_per_event


def _check_fixed_rate_copies(options: Mapping[str, Any], context_length: int) -> None:
    """Fail before training when ``fixed_rate_copies`` cannot place its spans in ``C + 1``."""
    where = "training.variant_options.fixed_rate_copies"
    tokens_per_event, low, high = _fixed_rate_options(options)
    if not tokens_per_event > 0:
        raise ValueError(f"{where}.tokens_per_event: must be positive, got {tokens_per_event}")
    if not 1 <= low <= high:
        raise ValueError(f"{where}.span_min / span_max: need 1 <= min <= max, got {low}, {high}")
    n_max = math.ceil(expected_copy_events(context_length, tokens_per_event))
    # The first span's source, every span, and one separating token between consecutive spans.
    needed = high + n_max * high + max(n_max - 1, 0)
    if needed > context_length + 1:
        raise ValueError(
            f"{where}: up to {n_max} spans of up to {high} tokens (one every {tokens_per_event:g} "
            f"tokens) need {needed} positions, more than a sequence of context_length + 1 = "
            f"{context_length + 1}; lower span_max or raise tokens_per_event"
        )


def _fixed_rate_copies(
    windows: np.ndarray, rng: np.random.Generator, options: Mapping[str, Any], step: int = 0
) -> np.ndarray:
    """Copy events at a fixed rate per token: longer contexts hold more repetitions.

    Options: ``tokens_per_event`` (mean tokens per copy event, default 16), ``span_min`` /
    ``span_max`` (span length in tokens, uniform and inclusive, defaults 4 / 8; fixed, not
    scaled with ``C``). A sequence of ``C`` tokens gets ``floor(C / T)`` spans plus one more with
    probability ``frac(C / T)``, so the expected number of copy events is ``C / T`` (∝ C) and
    the copied share ``E[length] / T`` is the same at every ``C``. Destinations are spread by
    uniform spacings (at least one untouched token between consecutive spans, so each event is a
    separate run of the returned mask); each source starts anywhere from position 0 to
    ``dest - length`` (anywhere earlier, possibly inside an earlier copy). Spans are written in
    order, so a source that overlaps an earlier copy reads the copied text.
    """
    batch, width = windows.shape
    context_length = width - 1
    tokens_per_event, low, high = _fixed_rate_options(options)
    _check_fixed_rate_copies(options, context_length)
    expected = expected_copy_events(context_length, tokens_per_event)
    n_max = math.ceil(expected)
    copied = np.zeros(windows.shape, dtype=bool)  # (B, C+1)
    if n_max == 0:
        return copied
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
    source = (u_source * (dest - lengths + 1)).astype(np.int64)  # (B, n) in [0, dest - length]
    offset = np.arange(high)  # (high,)
    for j in range(n_max):  # in order: a later source may read an earlier copy
        take = active[:, j, None] & (offset[None, :] < lengths[:, j, None])  # (B, high)
        rows = np.broadcast_to(np.arange(batch)[:, None], take.shape)[take]  # (m,)
        to = (dest[:, j, None] + offset[None, :])[take]  # (m,)
        windows[rows, to] = windows[rows, (source[:, j, None] + offset[None, :])[take]]
        copied[rows, to] = True
    return copied


def count_copy_events(copied: np.ndarray) -> int:
    """Number of copy events in a ``(B, C+1)`` copied mask: its runs of consecutive True."""
    copied = np.asarray(copied, dtype=bool)
    if copied.size == 0:
        return 0
    starts = copied[:, 1:] & ~copied[:, :-1]  # (B, C)
    return int(copied[:, 0].sum() + starts.sum())


DATA_VARIANTS: dict[str, VariantFn] = {
    "natural": _natural,
    "copy_spans": _copy_spans,
    "fixed_rate_copies": _fixed_rate_copies,
}
"""Registry of data variants: name -> in-place window editor. Add Bi-Induct snippets here."""

VARIANT_CHECKS: dict[str, VariantCheck] = {"fixed_rate_copies": _check_fixed_rate_copies}
"""Optional per-variant option checks, run by ``validate_run_config`` before training."""

# Science modules that register further variants when imported (one line each). They are
# imported on first use, so a fresh process (a Ray worker, a DeepSpeed rank) sees every variant.
VARIANT_PROVIDERS: tuple[str, ...] = (
    "ih_kedro.science.data.variants.semi_natural",
    "ih_kedro.science.data.variants.markov",
    "ih_kedro.science.data.variants.snippets",
)


def load_variant_providers() -> None:
    """Import every module of :data:`VARIANT_PROVIDERS` (each registers its variants)."""
    import importlib

    for module in VARIANT_PROVIDERS:
        importlib.import_module(module)


def register_variant(name: str, fn: VariantFn, check: VariantCheck | None = None) -> None:
    """Add a data variant (and optionally its option check) to the registry.

    Experiments that live in their own science modules (semi-natural or Markov sequences,
    Bi-Induct snippets) register themselves here, so the training loop stays generic.
    """
    DATA_VARIANTS[name] = fn
    if check is not None:
        VARIANT_CHECKS[name] = check


def batch_rng(seed: int, step: int) -> np.random.Generator:
    """The generator that draws step ``step``'s batch of a run seeded ``seed``."""
    return np.random.default_rng([_BATCH_STREAM, int(seed), int(step)])


def sample_batch(
    tokens: np.ndarray,
    batch_size: int,
    context_length: int,
    seed: int,
    step: int,
    *,
    data_variant: str = "natural",
    variant_options: Mapping[str, Any] | None = None,
) -> Batch:
    """Return the batch of step ``step`` (0-based) for a run seeded ``seed``.

    ``tokens`` is the flat packed stream (1-D, possibly a memmap). Each of the ``batch_size``
    windows has ``context_length + 1`` tokens starting at a uniform random offset. The result
    depends on nothing but the arguments.
    """
    if data_variant not in DATA_VARIANTS:
        load_variant_providers()
    if data_variant not in DATA_VARIANTS:
        raise ValueError(
            f"training.data_variants: unknown data variant {data_variant!r}; "
            f"choose one of {sorted(DATA_VARIANTS)}"
        )
    width = context_length + 1
    n_tokens = int(tokens.shape[0])
    if batch_size <= 0 or context_length <= 0:
        raise ValueError(
            f"batch_size ({batch_size}) and context_length ({context_length}) must be positive"
        )
    if n_tokens < width:
        raise ValueError(
            f"the corpus has {n_tokens} tokens, fewer than one sequence of {width} tokens"
        )
    rng = batch_rng(seed, step)
    offsets = rng.integers(0, n_tokens - width + 1, size=batch_size)  # (B,)
    index = offsets[:, None] + np.arange(width)[None, :]  # (B, C+1)
    windows = np.asarray(tokens[index], dtype=np.int64)  # (B, C+1)
    copied = DATA_VARIANTS[data_variant](windows, rng, variant_options or {}, step)  # (B, C+1)
    return Batch(tokens=torch.from_numpy(windows), copied=copied)


def expected_copied_fraction(
    context_length: int, copy_rate: float, span_min_fraction: float, span_max_fraction: float
) -> float:
    """Expected fraction of tokens in copied spans under ``copy_spans`` (for documentation)."""
    low, high = span_length_bounds(context_length, span_min_fraction, span_max_fraction)
    return copy_rate * (low + high) / 2 / (context_length + 1)


__all__ = [
    "DATA_VARIANTS",
    "Batch",
    "batch_rng",
    "count_copy_events",
    "expected_copy_events",
    "VARIANT_CHECKS",
    "VARIANT_PROVIDERS",
    "expected_copied_fraction",
    "load_variant_providers",
    "register_variant",
    "sample_batch",
    "span_length_bounds",
]
