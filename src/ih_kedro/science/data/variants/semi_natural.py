"""Semi-natural sequences with two repetition knobs: **frequency** and **reliability**.

Experiment 2 (the ``pareto`` pipeline) asks how often, and how reliably, an in-context
repetition ``A B … A → B`` must occur for induction heads to form. This module builds the data:

1. :func:`estimate_bigram_model`: a first-order (bigram) process estimated from a token stream
   (the deduplicated training corpus): the ``n_types`` most frequent token types plus one
   **other** bucket for every remaining type, additive smoothing ``smoothing`` on the counts.
2. :func:`generate_repetition_sequences`: a **generic** repetition-knob generator. It works with
   *any* first-order process given as ``(transition (V, V), initial (V,), token_ids (V,))``
   (the bigram model here, a synthetic Markov chain elsewhere) and returns token ids.
3. :func:`measure_repetition`: the realised frequency and reliability of a batch of sequences,
   computed from the token ids alone, and :func:`check_repetition`, which fails loudly when the
   realised values miss the targets.
4. :func:`select_chunks_by_repetition`: the natural-data variant: chunks of the natural stream
   chosen so that a set share of them contains a repeated bigram.

The generative process (length ``L``, first half ``h = L // 2``)
----------------------------------------------------------------
* Positions ``0 … h-1`` (first half): position 0 is drawn from ``initial``, every later one from
  ``transition[previous]`` restricted to states **not yet used** in the sequence (renormalised).
  The first half therefore never repeats a token and every token in it has exactly one
  successor: its bigram ``A B``.
* Positions ``h … L-1`` (second half) are either *slots* or *continuations*:

  - a **slot** is a position whose previous token is not a re-used ``A``. At a slot ``t <= L-2``,
    with probability ``frequency`` the generator **re-uses** the first token ``A`` of an earlier
    bigram (``A`` uniform over the first-half bigrams ``(x_j, x_{j+1})``, ``j <= h-2``; ``A`` is
    never the previous token, nor the first-half successor of the previous token, so a copy is
    always exactly the bigram ``A B`` and the measurement below is exact). Otherwise (and always
    at ``t = L-1``, which has no room for a continuation) it draws a **fresh** token: a bigram
    draw from ``transition[previous]`` over unused states.
  - the position after a re-used ``A`` is a **continuation**: with probability ``reliability``
    it is ``B`` (the token that followed ``A`` in the first half); otherwise a fresh bigram draw
    from ``transition[A]`` that avoids ``B`` (and every other used state).

  Fresh draws never repeat a token, so every repetition in the data is one the knobs put there.
  When a row of ``transition`` has no mass on the allowed states, the draw is uniform over them.

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

On this generator's output these are exactly the Bernoulli rates of the two knobs; repeats in the
first half (``first_half_repeats``) are zero. On natural text the same definitions apply.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ih_kedro.science.data.batches import register_variant
from ih_kedro.science.data.vocabulary import frequent_token_pool

logger = logging.getLogger(__name__)

VARIANT = "semi_natural"
"""Training data variant name: every batch drawn from a saved bigram model with the two knobs."""

MIN_LENGTH = 8
"""Shortest sequence the generator accepts (the first half must hold >= 3 candidate bigrams)."""

DEFAULT_TOLERANCE = 0.03
"""Absolute tolerance of :func:`check_repetition` (widened to 4 binomial standard errors)."""


# --------------------------------------------------------------------------------------------
# The bigram model
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BigramModel:
    """A first-order process over ``V`` states, each emitting one token id.

    ``transition[i, j]`` is P(next state ``j`` | state ``i``) (rows sum to 1), ``initial`` the
    distribution of a sequence's first state, ``token_ids[i]`` the tokenizer id state ``i``
    emits. With ``other_bucket`` the last state is the bucket of every type outside the top
    ``V - 1``; it emits one real token (the most frequent type outside the top ``V - 1``).
    ``counts`` are the raw bigram counts (before smoothing) for reference.
    """

    def variant_options(self) -> dict[str, str]:
        """Small, serialisable options that let a training run read this model from its file."""
        if not self.path:
            raise ValueError("bigram model: it has no file path (save it, then load it)")
        return {"model_path": self.path, "model_checksum": self.checksum()}

    transition: np.ndarray  # (V, V) float64
    initial: np.ndarray  # (V,) float64
    token_ids: np.ndarray  # (V,) int64
    counts: np.ndarray  # (V, V) int64
    smoothing: float
    other_bucket: bool
    vocab_size: int  # the tokenizer's vocabulary (token_ids < vocab_size)
    path: str | None = None  # the file it was loaded from (not part of the model or checksum)

    @property
    def n_states(self) -> int:
        return int(self.token_ids.shape[0])

    def checksum(self) -> str:
        """MD5 of the transition matrix, initial distribution and token ids (a short id)."""
        digest = hashlib.md5()
        for array in (self.transition, self.initial, self.token_ids):
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()[:12]

    def save(self, path: str | Path) -> Path:
        """Write the model to ``path`` (``.npz``); return the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as handle:
            np.savez(
                handle,
                transition=self.transition,
                initial=self.initial,
                token_ids=self.token_ids,
                counts=self.counts,
                smoothing=np.float64(self.smoothing),
                other_bucket=np.bool_(self.other_bucket),
                vocab_size=np.int64(self.vocab_size),
            )
        return path

    @classmethod
    def load(cls, path: str | Path) -> BigramModel:
        """Read a model written by :meth:`save`."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"bigram model: no file at {path}")
        with np.load(path) as data:
            return cls(
                path=str(path.resolve()),
                transition=data["transition"],
                initial=data["initial"],
                token_ids=data["token_ids"],
                counts=data["counts"],
                smoothing=float(data["smoothing"]),
                other_bucket=bool(data["other_bucket"]),
                vocab_size=int(data["vocab_size"]),
            )


def estimate_bigram_model(
    tokens: np.ndarray,
    vocab_size: int,
    n_types: int,
    smoothing: float = 0.01,
    *,
    eos_token_id: int | None = None,
    other_bucket: bool = True,
    pooled_token_ids: Iterable[int] = (),
) -> BigramModel:
    """Estimate a bigram process from a token stream.

    The states are the ``n_types`` most frequent token types (ties by smaller id; exactly the
    ids :func:`ih_kedro.science.data.vocabulary.frequent_token_pool` returns, so probes drawn
    from the top ``<= n_types`` training tokens stay inside the model's vocabulary) plus, with
    ``other_bucket``, one state for every other type. Pairs that straddle ``eos_token_id`` (a
    document boundary) are not counted and EOS is never a state. ``transition`` is
    ``(counts + smoothing)`` normalised by row (a row with no counts and no smoothing becomes
    uniform); ``initial`` is the unigram distribution of the states (smoothed the same way).

    Args:
        tokens: 1-D token stream (a memmap is fine; it is read in chunks of pairs).
        vocab_size: the tokenizer's vocabulary size.
        n_types: ``V - 1`` with the other bucket, ``V`` without; at least :data:`MIN_LENGTH`.
        smoothing: additive pseudo-count per bigram (``>= 0``).
        pooled_token_ids: ids that are never a type of their own (a compact vocabulary's id for
            every token outside it): in the other bucket with one, not states without.
    """

    if n_types < MIN_LENGTH:
        raise ValueError(f"semi_natural.n_types: need at least {MIN_LENGTH}, got {n_types}")
    if smoothing < 0 or not math.isfinite(smoothing):
        raise ValueError(f"semi_natural.smoothing: must be a finite number >= 0, got {smoothing}")
    flat = np.asarray(tokens).reshape(-1)
    exclude = tuple(int(i) for i in pooled_token_ids)
    exclude += () if eos_token_id is None else (int(eos_token_id),)
    ranked = frequent_token_pool(flat, vocab_size, n_types + 1, exclude=exclude)
    if ranked.shape[0] < n_types + int(other_bucket):
        raise ValueError(
            f"semi_natural.n_types: the stream has {ranked.shape[0]} distinct non-EOS types, "
            f"fewer than n_types={n_types}{' + the other bucket' if other_bucket else ''}"
        )
    top = ranked[:n_types]
    n_states = n_types + int(other_bucket)
    # Map every token id to its state; -1 = EOS / not a state.
    state_of = np.full(vocab_size, n_types if other_bucket else -1, dtype=np.int64)
    state_of[top] = np.arange(n_types)
    if eos_token_id is not None:
        state_of[int(eos_token_id)] = -1
    counts = np.zeros((n_states, n_states), dtype=np.int64)  # (V, V)
    unigram = np.zeros(n_states, dtype=np.int64)  # (V,)
    chunk = 1 << 22
    for start in range(0, max(flat.shape[0] - 1, 0), chunk):
        piece = state_of[np.asarray(flat[start : start + chunk + 1], dtype=np.int64)]
        src, dst = piece[:-1], piece[1:]  # (n,), (n,)
        keep = (src >= 0) & (dst >= 0)
        np.add.at(counts, (src[keep], dst[keep]), 1)
        unigram += np.bincount(src[src >= 0], minlength=n_states)
    if flat.shape[0] and state_of[int(flat[-1])] >= 0:
        unigram[state_of[int(flat[-1])]] += 1
    smoothed = counts.astype(np.float64) + smoothing  # (V, V)
    totals = smoothed.sum(axis=1, keepdims=True)  # (V, 1)
    transition = np.where(totals > 0, smoothed / np.where(totals > 0, totals, 1.0), 1 / n_states)
    initial = unigram.astype(np.float64) + smoothing  # (V,)
    initial = initial / initial.sum() if initial.sum() > 0 else np.full(n_states, 1 / n_states)
    token_ids = ranked[:n_states].astype(np.int64)  # the other bucket emits rank n_types + 1
    return BigramModel(
        transition=transition,
        initial=initial,
        token_ids=token_ids,
        counts=counts,
        smoothing=float(smoothing),
        other_bucket=bool(other_bucket),
        vocab_size=int(vocab_size),
    )


# --------------------------------------------------------------------------------------------
# The generic repetition-knob generator
# --------------------------------------------------------------------------------------------
def _check_process(transition: np.ndarray, initial: np.ndarray, token_ids: np.ndarray) -> None:
    if transition.ndim != 2 or transition.shape[0] != transition.shape[1]:
        raise ValueError(f"transition: must be a square (V, V) matrix, got {transition.shape}")
    n_states = transition.shape[0]
    if initial.shape != (n_states,) or token_ids.shape != (n_states,):
        raise ValueError(
            f"initial {initial.shape} and token_ids {token_ids.shape} must both be ({n_states},)"
        )
    if (transition < 0).any() or not np.isfinite(transition).all():
        raise ValueError("transition: entries must be finite and >= 0")
    if (initial < 0).any() or not initial.sum() > 0:
        raise ValueError("initial: entries must be >= 0 with a positive sum")
    if np.unique(token_ids).shape[0] != n_states:
        raise ValueError("token_ids: every state must emit a distinct token id")


def _check_knobs(frequency: float, reliability: float, length: int, n_states: int) -> None:
    for name, value in (("frequency", frequency), ("reliability", reliability)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"semi_natural.{name}: must be in [0, 1], got {value}")
    if length < MIN_LENGTH:
        raise ValueError(f"length: sequences need at least {MIN_LENGTH} tokens, got {length}")
    if n_states < length:
        raise ValueError(
            f"transition: {n_states} states cannot fill a sequence of {length} tokens without "
            "accidental repeats; use at least as many states as tokens per sequence"
        )


def _draw_unused(
    probs: np.ndarray, used: np.ndarray, u: np.ndarray
) -> np.ndarray:  # (m,) state ids
    """Inverse-CDF draw per row from ``probs`` (m, V) restricted to ``~used`` (m, V).

    ``u`` (m,) in (0, 1]. Rows with no mass on the allowed states draw uniformly among them.
    """
    allowed = ~used  # (m, V)
    weights = np.where(allowed, probs, 0.0)  # (m, V)
    total = weights.sum(axis=1)  # (m,)
    empty = total <= 0
    if empty.any():
        weights[empty] = allowed[empty].astype(np.float64)
        total = weights.sum(axis=1)
    cdf = np.cumsum(weights, axis=1)  # (m, V)
    target = u * total  # (m,) in (0, total]
    index = (cdf < target[:, None]).sum(axis=1)  # (m,)
    return np.minimum(index, weights.shape[1] - 1)


def transition_cdf(transition: np.ndarray) -> np.ndarray:
    """Row CDFs of ``transition`` laid out for one flat ``searchsorted`` (see ``_draw_fresh``).

    Returns (V * V,) float64: entry ``i * V + j`` is ``i + CDF_i(j)`` (rows with no mass are
    uniform). Precompute it once per process for a fixed process (the training variant caches
    it per model file) and pass it to :func:`generate_repetition_sequences` as ``row_cdf``.
    """
    transition = np.asarray(transition, dtype=np.float64)
    n_states = transition.shape[0]
    totals = transition.sum(axis=1, keepdims=True)  # (V, 1)
    rows = np.where(totals > 0, transition / np.where(totals > 0, totals, 1.0), 1.0 / n_states)
    cdf = np.cumsum(rows, axis=1)  # (V, V)
    cdf[:, -1] = 1.0
    return (cdf + np.arange(n_states)[:, None]).ravel()  # (V*V,)


_REJECTION_ROUNDS = 8


def _draw_fresh(
    transition: np.ndarray,
    row_cdf: np.ndarray,
    prev: np.ndarray,
    used: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:  # (m,) state ids
    """Draw from ``transition[prev]`` restricted to unused states (exact rejection sampling).

    Each round draws every pending row from its full row by one flat ``searchsorted``
    (O(log V) per row) and keeps the draws that hit an unused state; rows still pending after
    a few rounds (most of their mass on used states) take the masked inverse-CDF draw.
    """
    n_states = transition.shape[0]
    out = np.empty(prev.shape[0], dtype=np.int64)
    pending = np.arange(prev.shape[0])
    for _ in range(_REJECTION_ROUNDS):
        if pending.size == 0:
            return out
        u = 1.0 - rng.random(pending.size)  # (p,) in (0, 1]
        flat = np.searchsorted(row_cdf, prev[pending] + u, side="left")  # (p,)
        state = np.minimum(flat - prev[pending] * n_states, n_states - 1)
        ok = ~used[pending, state]
        out[pending[ok]] = state[ok]
        pending = pending[~ok]
    if pending.size:
        out[pending] = _draw_unused(
            transition[prev[pending]], used[pending], 1.0 - rng.random(pending.size)
        )
    return out


def generate_repetition_sequences(
    transition: np.ndarray,
    initial: np.ndarray,
    token_ids: np.ndarray,
    n_sequences: int,
    length: int,
    frequency: float,
    reliability: float,
    rng: np.random.Generator,
    *,
    return_copied: bool = False,
    row_cdf: np.ndarray | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Draw ``n_sequences`` sequences of ``length`` tokens with the two repetition knobs.

    Works with any first-order process over ``V`` states (see the module docstring for the
    exact process and for the measurement that recovers ``frequency`` and ``reliability``).

    Args:
        transition: (V, V) non-negative; row ``i`` is P(next | state ``i``) up to a constant.
        initial: (V,) non-negative first-state weights.
        token_ids: (V,) distinct token ids emitted by the states.
        n_sequences: number of sequences ``n``.
        length: tokens per sequence ``L`` (``>= 8`` and ``<= V``).
        frequency: P(a second-half slot re-uses the first token ``A`` of an earlier bigram).
        reliability: P(the token after a re-used ``A`` is its earlier successor ``B``).
        rng: the NumPy generator (e.g. seeded by (seed, step)); the result depends on nothing
            else.
        return_copied: also return the (n, L) bool mask of the copied ``B`` positions.
        row_cdf: :func:`transition_cdf` of ``transition``, if already computed (saves O(V^2)
            per call when the same process generates many batches).

    Returns:
        (n, L) int64 token ids (and the copied mask when asked).
    """
    transition = np.asarray(transition, dtype=np.float64)
    initial = np.asarray(initial, dtype=np.float64)
    token_ids = np.asarray(token_ids, dtype=np.int64)
    _check_process(transition, initial, token_ids)
    n_states = transition.shape[0]
    _check_knobs(float(frequency), float(reliability), int(length), n_states)
    n, length, half = int(n_sequences), int(length), int(length) // 2
    if n <= 0:
        raise ValueError(f"n_sequences: must be positive, got {n_sequences}")
    if row_cdf is None:
        row_cdf = transition_cdf(transition)
    elif row_cdf.shape != (n_states * n_states,):
        raise ValueError(f"row_cdf: expected ({n_states * n_states},), got {row_cdf.shape}")
    rows = np.arange(n)  # (n,)
    states = np.zeros((n, length), dtype=np.int64)  # (n, L) state ids
    used = np.zeros((n, n_states), dtype=bool)  # (n, V)
    first_pos = np.full((n, n_states), -1, dtype=np.int64)  # (n, V) first position of a state
    copied = np.zeros((n, length), dtype=bool)  # (n, L)
    reused = np.zeros(n, dtype=bool)  # (n,) previous position re-used an A

    def place(t: int, who: np.ndarray, value: np.ndarray) -> None:
        states[who, t] = value
        fresh = first_pos[who, value] < 0
        first_pos[who[fresh], value[fresh]] = t
        used[who, value] = True

    start = _draw_unused(np.broadcast_to(initial, (n, n_states)), used, 1.0 - rng.random(n))
    place(0, rows, start)
    for t in range(1, length):
        prev = states[:, t - 1]  # (n,)
        u_reuse = rng.random(n)  # (n,)
        u_copy = rng.random(n)  # (n,)
        value = np.empty(n, dtype=np.int64)
        fresh = np.ones(n, dtype=bool)
        is_reuse = np.zeros(n, dtype=bool)
        if t >= half:
            # Continuations: the position after a re-used A.
            cont = reused.copy()
            a_first = first_pos[rows, prev]  # (n,) first-half position of A
            b_state = states[rows, np.minimum(a_first + 1, length - 1)]  # (n,)
            copy = cont & (u_copy < reliability)
            value[copy] = b_state[copy]
            fresh &= ~copy
            # Slots: re-use the A of an earlier first-half bigram with probability frequency.
            if t <= length - 2:
                is_reuse = ~cont & (u_reuse < frequency)
                if is_reuse.any():
                    who = rows[is_reuse]
                    cands = states[who, : half - 1]  # (m, h-1) A candidates, j <= h-2
                    prev_w = prev[who]
                    prev_first = first_pos[who, prev_w]  # (m,)
                    prev_repeat = prev_first < t - 1
                    succ = states[who, np.minimum(prev_first + 1, length - 1)]  # (m,)
                    bad = (cands == prev_w[:, None]) | (
                        prev_repeat[:, None] & (cands == succ[:, None])
                    )  # (m, h-1)
                    score = np.where(bad, -1.0, rng.random(bad.shape))  # (m, h-1)
                    value[who] = cands[np.arange(who.shape[0]), score.argmax(axis=1)]
                    fresh &= ~is_reuse
            copied[:, t] = copy
        if fresh.any():
            who = rows[fresh]
            value[who] = _draw_fresh(transition, row_cdf, prev[who], used[who], rng)
        place(t, rows, value)
        reused = is_reuse
    tokens = token_ids[states]  # (n, L)
    return (tokens, copied) if return_copied else tokens


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


# --------------------------------------------------------------------------------------------
# Training data variant
# --------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _cached_model(path: str) -> BigramModel:
    return BigramModel.load(path)


@functools.lru_cache(maxsize=8)
def _cached_cdf(path: str) -> np.ndarray:
    return transition_cdf(_cached_model(path).transition)


def load_model(options: Mapping[str, Any]) -> BigramModel:
    """The bigram model named by a variant's ``model_path`` option (cached per process)."""
    path = options.get("model_path")
    if not path:
        raise ValueError(
            "training.data_variants: the semi_natural variant needs options.model_path "
            "(the pareto pipeline fills it from its bigram_model dataset)"
        )
    model = _cached_model(str(Path(path).resolve()))
    expected = options.get("model_checksum")
    if expected and model.checksum() != expected:
        raise ValueError(
            f"training.data_variants: bigram model at {path} has checksum {model.checksum()}, "
            f"the sweep expected {expected} (the file changed after the sweep was planned)"
        )
    return model


def _knobs(options: Mapping[str, Any]) -> tuple[float, float]:
    try:
        return float(options["frequency"]), float(options["reliability"])
    except KeyError as missing:
        raise ValueError(
            f"training.data_variants: the semi_natural variant needs options.{missing.args[0]}"
        ) from None


def semi_natural_variant(
    windows: np.ndarray, rng: np.random.Generator, options: Mapping[str, Any], step: int = 0
) -> np.ndarray:
    """Replace every window (B, C+1) with sequences of the bigram model and the two knobs.

    Options: ``model_path`` (the saved :class:`BigramModel`), ``frequency``, ``reliability``,
    optionally ``model_checksum``. Returns the mask of copied ``B`` tokens.
    """
    model = load_model(options)
    frequency, reliability = _knobs(options)
    batch, width = windows.shape
    tokens, copied = generate_repetition_sequences(
        model.transition,
        model.initial,
        model.token_ids,
        batch,
        width,
        frequency,
        reliability,
        rng,
        return_copied=True,
        row_cdf=_cached_cdf(str(Path(model.path).resolve())) if model.path else None,
    )  # (B, C+1), (B, C+1)
    windows[:] = tokens
    return copied


def check_semi_natural_options(options: Mapping[str, Any], context_length: int) -> None:
    """Before training: the model loads, fits the context, and a sample meets the targets."""
    model = load_model(options)
    frequency, reliability = _knobs(options)
    width = context_length + 1
    _check_knobs(frequency, reliability, width, model.n_states)
    sample = generate_repetition_sequences(
        model.transition,
        model.initial,
        model.token_ids,
        int(options.get("check_sequences", 256)),
        width,
        frequency,
        reliability,
        np.random.default_rng(0),
    )  # (n, C+1)
    check_sample_repetition(
        sample,
        frequency,
        reliability,
        options,
        where=f" (frequency={frequency:g}, reliability={reliability:g})",
    )


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


register_variant(VARIANT, semi_natural_variant, check_semi_natural_options)

__all__ = [
    "VARIANT",
    "BigramModel",
    "RepetitionStats",
    "check_repetition",
    "check_sample_repetition",
    "estimate_bigram_model",
    "generate_repetition_sequences",
    "has_repeated_bigram",
    "load_model",
    "measure_repetition",
    "select_chunks_by_repetition",
    "transition_cdf",
]
