"""A compact model vocabulary: the ``K`` most frequent training tokens, one id for the rest.

The synthetic experiments train on data that emits only a few token types: ``pareto``'s
semi-natural bigram model the ``n_types`` most frequent training tokens plus one "other" token,
``markov``'s processes the ``vocab_size`` most frequent. A model over the tokenizer's whole
vocabulary spends most of its FLOPs on an unembedding whose rows those tokens never train
(d x 1,024 against d x 128 per attention layer at the default scale). Relabelling the token
streams into a compact vocabulary makes the model's vocabulary the data's:

* compact id ``i < K`` is the ``i``-th most frequent training token (EOS excluded, ties by the
  smaller id: the order of :func:`frequent_token_pool`),
* id ``K`` (``other_token_id``) stands for every other token type,
* id ``K + 1`` is EOS,

so ``vocab_size = K + 2``. Ranking the relabelled stream gives ``0, 1, ..., K - 1`` again once
the other id is excluded (:attr:`~ih_kedro.science.data.packed.PackedTokens.non_content_token_ids`):
every "most frequent tokens" pool, the bigram model and the Markov states' token ids are the
same tokens as on the original stream, renamed. ``original_ids`` decodes compact ids back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ih_kedro.science.data.packed import COMPACT_VOCABULARY_KEY, PackedTokens

META_KEY = COMPACT_VOCABULARY_KEY
"""``PackedTokens.meta`` key of a relabelled stream: ``{size, other_token_id, original_ids, ...}``."""


def frequent_token_pool(
    tokens: np.ndarray, vocab_size: int, top_k: int, exclude: Iterable[int] = ()
) -> np.ndarray:
    """The ``top_k`` most frequent token ids seen in training (the default probe source).

    Rare BPE merges have untrained embeddings, so probes drawn from frequent tokens measure
    the trained circuit. Ties are broken by the smaller id. Ids in ``exclude`` (e.g. EOS, a
    separator) are never returned; only ids that occur at least once are.

    Args:
        tokens: 1-D token stream (any integer dtype; a memmap is read in one ``bincount``).
        vocab_size: size of the vocabulary; ids ``>= vocab_size`` raise.
        top_k: how many ids to return (fewer if fewer distinct ids occur).
        exclude: ids never to return.

    Returns:
        ``(<= top_k,)`` int64 array of token ids, most frequent first.
    """
    if top_k <= 0:
        raise ValueError(f"telemetry.probe.top_k must be positive, got {top_k}")
    flat = np.asarray(tokens).reshape(-1)
    if flat.size and int(flat.max()) >= vocab_size:
        raise ValueError(
            f"vocab_size: token id {int(flat.max())} is outside the vocabulary of {vocab_size}"
        )
    counts = np.bincount(flat.astype(np.int64), minlength=vocab_size).astype(np.int64)
    excluded = [int(e) for e in exclude if 0 <= int(e) < vocab_size]
    counts[excluded] = -1
    order = np.lexsort((np.arange(vocab_size), -counts))  # by count desc, then id asc
    order = order[counts[order] > 0]
    return order[:top_k].astype(np.int64)


@dataclass(frozen=True)
class CompactVocabulary:
    """The relabelling of a tokenizer vocabulary into ``size + 2`` ids.

    ``original_ids`` (size,) holds the tokenizer id of each kept compact id, most frequent
    first; ``lookup`` (source_vocab_size,) maps every tokenizer id to its compact id.
    """

    original_ids: np.ndarray  # (K,)
    source_vocab_size: int
    source_eos_token_id: int

    @property
    def size(self) -> int:
        """``K``: the number of kept token types."""
        return int(self.original_ids.shape[0])

    @property
    def other_token_id(self) -> int:
        return self.size

    @property
    def eos_token_id(self) -> int:
        return self.size + 1

    @property
    def vocab_size(self) -> int:
        return self.size + 2

    @property
    def lookup(self) -> np.ndarray:
        table = np.full(self.source_vocab_size, self.other_token_id, dtype=np.int64)
        table[self.original_ids] = np.arange(self.size)
        table[self.source_eos_token_id] = self.eos_token_id
        return table  # (source_vocab_size,)

    def encode(self, tokens: np.ndarray) -> np.ndarray:
        """Tokenizer ids -> compact ids (``uint16``, same shape)."""
        ids = np.asarray(tokens, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.source_vocab_size):
            raise ValueError(
                f"token ids must lie in [0, {self.source_vocab_size}), got "
                f"[{int(ids.min())}, {int(ids.max())}]"
            )
        return self.lookup[ids].astype(np.uint16)

    def decode(self, compact: np.ndarray) -> np.ndarray:
        """Compact ids -> tokenizer ids; the other id decodes to ``-1`` (no single token)."""
        ids = np.asarray(compact, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(f"compact ids must lie in [0, {self.vocab_size}), got {ids.max()}")
        table = np.concatenate([self.original_ids, [-1, self.source_eos_token_id]])
        return table[ids]

    def to_meta(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "other_token_id": self.other_token_id,
            "original_ids": [int(i) for i in self.original_ids],
            "source_vocab_size": self.source_vocab_size,
            "source_eos_token_id": self.source_eos_token_id,
        }

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> CompactVocabulary:
        return cls(
            np.asarray(meta["original_ids"], dtype=np.int64),
            int(meta["source_vocab_size"]),
            int(meta["source_eos_token_id"]),
        )


def compact_vocabulary(train: PackedTokens, size: int) -> CompactVocabulary:
    """Keep the ``size`` most frequent non-special tokens of the training stream.

    Raises when ``size`` is not positive, the stream is already compact, or it has fewer than
    ``size`` distinct content tokens.
    """
    if int(size) <= 0:
        raise ValueError(f"vocabulary.size: must be a positive integer, got {size}")
    if train.compact_vocabulary_size is not None:
        raise ValueError("vocabulary: the token stream is already in a compact vocabulary")
    kept = frequent_token_pool(
        train.tokens, train.vocab_size, int(size), exclude=train.non_content_token_ids
    )  # (<= size,)
    if kept.shape[0] < int(size):
        raise ValueError(
            f"vocabulary.size: {size} token types asked, the training stream has "
            f"{kept.shape[0]} distinct non-EOS types"
        )
    return CompactVocabulary(kept.astype(np.int64), int(train.vocab_size), int(train.eos_token_id))


class _RelabelledTokens:
    """A lazy relabelled view of a token stream: slices are encoded when read (the dataset
    writes a stream slice by slice, so a Pile-scale stream never sits in RAM twice)."""

    ndim = 1
    dtype = np.dtype(np.uint16)

    def __init__(self, tokens: Any, vocabulary: CompactVocabulary) -> None:
        self._tokens = tokens
        self._vocabulary = vocabulary
        self.shape = (int(tokens.shape[0]),)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> np.ndarray:
        return self._vocabulary.encode(np.asarray(self._tokens[key]))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[:]
        return out if dtype is None else out.astype(dtype)


def relabel(packed: PackedTokens, vocabulary: CompactVocabulary) -> PackedTokens:
    """``packed`` in the compact vocabulary (lazy; save it through ``PackedTokensDataset``).

    The meta keeps the source's checksum and document count and records the vocabulary under
    :data:`META_KEY`, so a relabelled stream decodes and is never relabelled twice.
    """
    if int(packed.vocab_size) != vocabulary.source_vocab_size:
        raise ValueError(
            f"vocabulary: built on a {vocabulary.source_vocab_size}-token vocabulary, the stream "
            f"has {packed.vocab_size}"
        )
    if int(packed.eos_token_id) != vocabulary.source_eos_token_id:
        raise ValueError(
            f"vocabulary: built with EOS {vocabulary.source_eos_token_id}, the stream's EOS is "
            f"{packed.eos_token_id}"
        )
    n_documents = packed.meta.get("n_documents")
    if n_documents is None:
        n_documents = int(np.count_nonzero(np.asarray(packed.tokens) == packed.eos_token_id))
    meta = {
        **({"source": packed.meta["source"]} if "source" in packed.meta else {}),
        "n_documents": int(n_documents),
        "source_sha256": packed.checksum,
        META_KEY: vocabulary.to_meta(),
    }
    return PackedTokens(
        _RelabelledTokens(packed.tokens, vocabulary),  # type: ignore[arg-type]
        vocabulary.vocab_size,
        vocabulary.eos_token_id,
        meta=meta,
    )


__all__ = ["META_KEY", "CompactVocabulary", "compact_vocabulary", "relabel"]
