"""The bigram model of Experiment 2: a first-order process estimated from a token stream.

:func:`estimate_bigram_model` keeps the ``n_types`` most frequent token types of the stream (the
deduplicated training corpus) plus one **other** bucket for every remaining type, with additive
smoothing ``smoothing`` on the counts; :class:`BigramModel` saves and loads it (``.npz``). The
repetition-knob generator (:mod:`ih_kedro.science.data.variants.repetition`) draws from it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ih_kedro.science.data.variants.repetition import MIN_LENGTH
from ih_kedro.science.data.vocabulary import frequent_token_pool


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


__all__ = ["BigramModel", "estimate_bigram_model"]
