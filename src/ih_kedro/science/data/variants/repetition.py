"""The generic repetition-knob generator: sequences with a set **frequency** and **reliability**.

:func:`generate_repetition_sequences` works with *any* first-order process given as
``(transition (V, V), initial (V,), token_ids (V,))`` (the bigram model of
:mod:`ih_kedro.science.data.variants.bigram_model`, a designed Markov process of
:mod:`ih_kedro.science.data.variants.markov_process`) and returns token ids. The realised
frequency and reliability are measured from the token ids alone by
:mod:`ih_kedro.science.data.variants.repetition_stats`.

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
    always exactly the bigram ``A B`` and the measurement is exact). Otherwise (and always
    at ``t = L-1``, which has no room for a continuation) it draws a **fresh** token: a bigram
    draw from ``transition[previous]`` over unused states.
  - the position after a re-used ``A`` is a **continuation**: with probability ``reliability``
    it is ``B`` (the token that followed ``A`` in the first half); otherwise a fresh bigram draw
    from ``transition[A]`` that avoids ``B`` (and every other used state).

  Fresh draws never repeat a token, so every repetition in the data is one the knobs put there.
  When a row of ``transition`` has no mass on the allowed states, the draw is uniform over them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_LENGTH = 8
"""Shortest sequence the generator accepts (the first half must hold >= 3 candidate bigrams)."""


# --------------------------------------------------------------------------------------------
# The generic repetition-knob generator
# --------------------------------------------------------------------------------------------
def _check_process(transition: np.ndarray, initial: np.ndarray, token_ids: np.ndarray) -> None:
    """Raise ``ValueError`` when the arrays are not a first-order process over distinct tokens."""
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


def check_knobs(frequency: float, reliability: float, length: int, n_states: int) -> None:
    """Raise ``ValueError`` naming the knob or length that the generator cannot use."""
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
    exact process, and :mod:`ih_kedro.science.data.variants.repetition_stats` for the
    measurement that recovers ``frequency`` and ``reliability``).

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
    transition, initial, token_ids, row_cdf = _checked_process(
        transition, initial, token_ids, n_sequences, length, frequency, reliability, row_cdf
    )
    n, length, half = int(n_sequences), int(length), int(length) // 2
    n_states = transition.shape[0]
    draft = _Draft.empty(n, length, n_states)
    start = _draw_unused(np.broadcast_to(initial, (n, n_states)), draft.used, 1.0 - rng.random(n))
    draft.place(0, draft.rows, start)
    reused = np.zeros(n, dtype=bool)  # (n,) previous position re-used an A
    for t in range(1, length):
        prev = draft.states[:, t - 1]  # (n,)
        u_reuse = rng.random(n)  # (n,)
        u_copy = rng.random(n)  # (n,)
        if t >= half:
            value, fresh, is_reuse = _second_half_position(
                draft, t, prev, reused, u_reuse, u_copy, frequency, reliability, rng
            )
        else:
            value = np.empty(n, dtype=np.int64)
            fresh = np.ones(n, dtype=bool)
            is_reuse = np.zeros(n, dtype=bool)
        if fresh.any():
            who = draft.rows[fresh]
            value[who] = _draw_fresh(transition, row_cdf, prev[who], draft.used[who], rng)
        draft.place(t, draft.rows, value)
        reused = is_reuse
    tokens = token_ids[draft.states]  # (n, L)
    return (tokens, draft.copied) if return_copied else tokens


def _checked_process(
    transition: np.ndarray,
    initial: np.ndarray,
    token_ids: np.ndarray,
    n_sequences: int,
    length: int,
    frequency: float,
    reliability: float,
    row_cdf: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Check the generator's arguments (raising ``ValueError`` naming the first bad one).

    Returns ``(transition (V, V) float64, initial (V,) float64, token_ids (V,) int64, row_cdf
    (V * V,))``, with ``row_cdf`` computed when not given.
    """
    transition = np.asarray(transition, dtype=np.float64)
    initial = np.asarray(initial, dtype=np.float64)
    token_ids = np.asarray(token_ids, dtype=np.int64)
    _check_process(transition, initial, token_ids)
    n_states = transition.shape[0]
    check_knobs(float(frequency), float(reliability), int(length), n_states)
    if int(n_sequences) <= 0:
        raise ValueError(f"n_sequences: must be positive, got {n_sequences}")
    if row_cdf is None:
        row_cdf = transition_cdf(transition)
    elif row_cdf.shape != (n_states * n_states,):
        raise ValueError(f"row_cdf: expected ({n_states * n_states},), got {row_cdf.shape}")
    return transition, initial, token_ids, row_cdf


@dataclass
class _Draft:
    """Sequences being generated, position by position: their states so far, the states each
    sequence has used and where each first appeared, and the copied ``B`` positions."""

    states: np.ndarray  # (n, L) state ids
    used: np.ndarray  # (n, V) bool
    first_pos: np.ndarray  # (n, V) first position of a state, -1 before it appears
    copied: np.ndarray  # (n, L) bool

    @classmethod
    def empty(cls, n: int, length: int, n_states: int) -> _Draft:
        """``n`` sequences of ``length`` positions over ``n_states`` states, nothing placed."""
        return cls(
            states=np.zeros((n, length), dtype=np.int64),  # (n, L) state ids
            used=np.zeros((n, n_states), dtype=bool),  # (n, V)
            first_pos=np.full((n, n_states), -1, dtype=np.int64),  # (n, V)
            copied=np.zeros((n, length), dtype=bool),  # (n, L)
        )

    @property
    def rows(self) -> np.ndarray:
        """(n,) the sequence indices."""
        return np.arange(self.states.shape[0])

    def place(self, t: int, who: np.ndarray, value: np.ndarray) -> None:
        """Put states ``value`` (m,) at position ``t`` of sequences ``who`` (m,)."""
        self.states[who, t] = value
        fresh = self.first_pos[who, value] < 0
        self.first_pos[who[fresh], value[fresh]] = t
        self.used[who, value] = True


def _second_half_position(
    draft: _Draft,
    t: int,
    prev: np.ndarray,
    reused: np.ndarray,
    u_reuse: np.ndarray,
    u_copy: np.ndarray,
    frequency: float,
    reliability: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Copies at the continuations and re-used ``A`` tokens at the slots of position ``t``.

    Marks the copies in ``draft.copied[:, t]``. Returns ``(value (n,) with the copies and
    re-uses written, fresh (n,) the positions still to draw, is_reuse (n,))``.
    """
    n, length = draft.states.shape
    rows = draft.rows
    value = np.empty(n, dtype=np.int64)
    fresh = np.ones(n, dtype=bool)
    is_reuse = np.zeros(n, dtype=bool)
    # Continuations: the position after a re-used A.
    cont = reused.copy()
    a_first = draft.first_pos[rows, prev]  # (n,) first-half position of A
    b_state = draft.states[rows, np.minimum(a_first + 1, length - 1)]  # (n,)
    copy = cont & (u_copy < reliability)
    value[copy] = b_state[copy]
    fresh &= ~copy
    # Slots: re-use the A of an earlier first-half bigram with probability frequency.
    if t <= length - 2:
        is_reuse = ~cont & (u_reuse < frequency)
        if is_reuse.any():
            who = rows[is_reuse]
            value[who] = _reused_first_tokens(draft, t, who, prev[who], rng)
            fresh &= ~is_reuse
    draft.copied[:, t] = copy
    return value, fresh, is_reuse


def _reused_first_tokens(
    draft: _Draft, t: int, who: np.ndarray, prev_w: np.ndarray, rng: np.random.Generator
) -> np.ndarray:  # (m,) state ids
    """The ``A`` each sequence of ``who`` (m,) re-uses at slot ``t``: uniform over the first
    tokens of its first-half bigrams, never the previous token ``prev_w`` (m,) nor, when that
    is a repeat, the previous token's first-half successor."""
    length = draft.states.shape[1]
    half = length // 2
    cands = draft.states[who, : half - 1]  # (m, h-1) A candidates, j <= h-2
    prev_first = draft.first_pos[who, prev_w]  # (m,)
    prev_repeat = prev_first < t - 1
    succ = draft.states[who, np.minimum(prev_first + 1, length - 1)]  # (m,)
    bad = (cands == prev_w[:, None]) | (prev_repeat[:, None] & (cands == succ[:, None]))  # (m, h-1)
    score = np.where(bad, -1.0, rng.random(bad.shape))  # (m, h-1)
    return cands[np.arange(who.shape[0]), score.argmax(axis=1)]


__all__ = ["MIN_LENGTH", "check_knobs", "generate_repetition_sequences", "transition_cdf"]
