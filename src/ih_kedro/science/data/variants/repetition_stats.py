"""Measuring repetition from token ids alone: realised **frequency** and **reliability**.

:func:`measure_repetition` recovers the two knobs of
:func:`~ih_kedro.science.data.variants.repetition.generate_repetition_sequences` (the generative
process is described in :mod:`ih_kedro.science.data.variants.repetition`) and
:func:`check_repetition` fails loudly when they miss the targets;
:func:`select_chunks_by_repetition` chooses natural chunks so that a set share of them contains
a repeated bigram.

Measurement (:func:`measure_repetition`, from token ids alone)
--------------------------------------------------------------
For a sequence ``x`` and position ``t``, let ``first(t)`` be the first position holding
``x_t``. ``t`` is a *repeat* when ``first(t) < t``. A repeat ``t`` is a *copy* when ``t-1`` is a
repeat and ``x_t = x_{first(t-1)+1}`` (it continues the earlier bigram of its predecessor); any
other repeat is a *re-use* (an ``A``). In the second half, *slots* are the positions
``h <= t <= L-2`` whose predecessor is not a re-use; *continuations* are the positions right
after a re-use.

* realised **frequency** = re-uses at slots / slots,
* realised **reliability** = copies at continuations / continuations (NaN without re-uses).

On the generator's output these are exactly the Bernoulli rates of the two knobs; repeats in the
first half (``first_half_repeats``) are zero. On natural text the same definitions apply.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ih_kedro.science.data.variants.repetition import MIN_LENGTH

DEFAULT_TOLERANCE = 0.03
"""Absolute tolerance of :func:`check_repetition` (widened to 4 binomial standard errors)."""


# --------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RepetitionStats:
    """Realised repetition of a batch of sequences (definitions in the module docstring)."""

    frequency: float  # re-uses at slots / slots
    reliability: float  # copies at continuations / continuations (NaN without re-uses)
    n_slots: int
    n_reuses: int
    n_continuations: int
    n_copies: int
    first_half_repeats: int  # repeated tokens in the first halves (0 for the generator)
    n_sequences: int

    @property
    def frequency_se(self) -> float:
        """Binomial standard error of the realised frequency."""
        return _binomial_se(self.frequency, self.n_slots)

    @property
    def reliability_se(self) -> float:
        """Binomial standard error of the realised reliability."""
        return _binomial_se(self.reliability, self.n_continuations)

    def as_dict(self) -> dict[str, float]:
        return {
            "realised_frequency": self.frequency,
            "realised_reliability": self.reliability,
            "n_slots": self.n_slots,
            "n_reuses": self.n_reuses,
            "n_continuations": self.n_continuations,
            "n_copies": self.n_copies,
            "first_half_repeats": self.first_half_repeats,
        }


def _binomial_se(p: float, n: int) -> float:
    if n <= 0 or not math.isfinite(p):
        return math.nan
    return math.sqrt(max(p * (1 - p), 0.0) / n)


def measure_repetition(sequences: np.ndarray) -> RepetitionStats:
    """Realised frequency and reliability of ``sequences`` (n, L), from token ids alone."""
    seqs = np.asarray(sequences)
    if seqs.ndim != 2 or seqs.shape[1] < MIN_LENGTH:
        raise ValueError(f"sequences: need (n, L >= {MIN_LENGTH}), got {seqs.shape}")
    n, length = seqs.shape
    half = length // 2
    positions = np.arange(length)  # (L,)
    equal = seqs[:, :, None] == seqs[:, None, :]  # (n, L, L)
    first = equal.argmax(axis=2)  # (n, L) first position holding the same token
    repeat = first < positions[None, :]  # (n, L)
    succ_of_first = np.take_along_axis(seqs, np.minimum(first + 1, length - 1), axis=1)  # (n, L)
    copy = np.zeros_like(repeat)  # (n, L)
    copy[:, 1:] = repeat[:, 1:] & repeat[:, :-1] & (seqs[:, 1:] == succ_of_first[:, :-1])
    reuse = repeat & ~copy  # (n, L)
    after_reuse = np.zeros_like(repeat)  # (n, L) continuations
    after_reuse[:, 1:] = reuse[:, :-1]
    second = positions >= half  # (L,)
    slot = second[None, :] & (positions[None, :] <= length - 2) & ~after_reuse  # (n, L)
    cont = second[None, :] & after_reuse  # (n, L)
    n_slots, n_reuses = int(slot.sum()), int((slot & reuse).sum())
    n_cont, n_copies = int(cont.sum()), int((cont & copy).sum())
    return RepetitionStats(
        frequency=n_reuses / n_slots if n_slots else math.nan,
        reliability=n_copies / n_cont if n_cont else math.nan,
        n_slots=n_slots,
        n_reuses=n_reuses,
        n_continuations=n_cont,
        n_copies=n_copies,
        first_half_repeats=int(repeat[:, :half].sum()),
        n_sequences=int(n),
    )


def check_repetition(
    stats: RepetitionStats,
    frequency: float,
    reliability: float,
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    where: str = "",
) -> None:
    """Raise ``ValueError`` when realised values miss their targets by more than a tolerance.

    The allowed miss of each knob is ``max(tolerance, 4 * SE)`` with ``SE`` the binomial
    standard error of the target at the measured count (slots for frequency, continuations for
    reliability), so small samples do not fail by chance. Reliability is checked only when
    there are continuations (``frequency > 0``). The generator's first halves must not repeat.
    """
    if stats.first_half_repeats:
        raise ValueError(
            f"semi_natural{where}: {stats.first_half_repeats} repeated tokens in first halves "
            "(the first half must never repeat)"
        )
    checks = [("frequency", frequency, stats.frequency, stats.n_slots)]
    if stats.n_continuations:
        checks.append(("reliability", reliability, stats.reliability, stats.n_continuations))
    for name, target, realised, count in checks:
        allowed = max(tolerance, 4 * _binomial_se(float(target), count))
        if not abs(realised - target) <= allowed:
            raise ValueError(
                f"semi_natural.{name}{where}: realised {realised:.4f} misses the target "
                f"{target:.4f} by more than {allowed:.4f} ({count} positions measured)"
            )


# --------------------------------------------------------------------------------------------
# The natural-data variant: the share of chunks that contain a repeated bigram
# --------------------------------------------------------------------------------------------
def has_repeated_bigram(chunks: np.ndarray) -> np.ndarray:
    """(n,) bool: whether each chunk (n, L) holds some bigram ``A B`` at two positions."""
    chunks = np.asarray(chunks, dtype=np.int64)
    left, right = chunks[:, :-1], chunks[:, 1:]  # (n, L-1)
    # One integer key per bigram; sort each row and look for equal neighbours.
    keys = left * (int(chunks.max(initial=0)) + 1) + right  # (n, L-1)
    keys = np.sort(keys, axis=1)
    return (keys[:, 1:] == keys[:, :-1]).any(axis=1)


def select_chunks_by_repetition(
    tokens: np.ndarray,
    n_chunks: int,
    length: int,
    share: float,
    rng: np.random.Generator,
    *,
    max_candidates: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n_chunks`` natural chunks of which ``round(share * n)`` contain a repeated bigram.

    Candidates are windows at uniform random offsets of the stream; the first ones of each kind
    are kept (in draw order, then shuffled), so the result is a pure function of the arguments.
    Raises when the stream cannot supply enough chunks of one kind within ``max_candidates``
    (default ``50 * n_chunks``). Returns ``(chunks (n, L) int64, has_repeat (n,) bool)``.
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"natural_repetition.share: must be in [0, 1], got {share}")
    flat = np.asarray(tokens).reshape(-1)
    if flat.shape[0] < length:
        raise ValueError(f"tokens: {flat.shape[0]} tokens, fewer than one chunk of {length}")
    want_rep = int(round(share * n_chunks))
    want = {True: want_rep, False: n_chunks - want_rep}
    limit = max_candidates or 50 * n_chunks
    kept: dict[bool, list[np.ndarray]] = {True: [], False: []}
    drawn = 0
    while (len(kept[True]) < want[True] or len(kept[False]) < want[False]) and drawn < limit:
        batch = min(4 * n_chunks, limit - drawn)
        offsets = rng.integers(0, flat.shape[0] - length + 1, size=batch)  # (m,)
        chunks = np.asarray(flat[offsets[:, None] + np.arange(length)], dtype=np.int64)
        flags = has_repeated_bigram(chunks)  # (m,)
        for kind in (True, False):
            room = want[kind] - len(kept[kind])
            if room > 0:
                kept[kind].extend(chunks[flags == kind][:room])
        drawn += batch
    for kind, label in ((True, "with"), (False, "without")):
        if len(kept[kind]) < want[kind]:
            raise ValueError(
                f"natural_repetition.share: only {len(kept[kind])} of {want[kind]} chunks "
                f"{label} a repeated bigram in {drawn} candidates of length {length}"
            )
    chunks = np.stack(kept[True] + kept[False]).astype(np.int64)  # (n, L)
    flags = np.array([True] * want[True] + [False] * want[False])
    order = rng.permutation(n_chunks)
    return chunks[order], flags[order]


def check_sample_repetition(
    sample: np.ndarray,
    frequency: float,
    reliability: float,
    options: Mapping[str, Any],
    *,
    where: str = "",
) -> None:
    """Measure a generated sample (n, C+1) and :func:`check_repetition` it against its knobs,
    with the variant's ``options['tolerance']`` (default :data:`DEFAULT_TOLERANCE`)."""
    tolerance = float(options.get("tolerance", DEFAULT_TOLERANCE))
    check_repetition(measure_repetition(sample), frequency, reliability, tolerance, where=where)


__all__ = [
    "DEFAULT_TOLERANCE",
    "RepetitionStats",
    "check_repetition",
    "check_sample_repetition",
    "has_repeated_bigram",
    "measure_repetition",
    "select_chunks_by_repetition",
]
