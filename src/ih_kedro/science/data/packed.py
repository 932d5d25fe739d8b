"""The packed token stream shared by data engineering (writer) and training (reader)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

COMPACT_VOCABULARY_KEY = "compact_vocabulary"
"""``meta`` key of a stream relabelled into a compact vocabulary (:mod:`ih_kedro.science.data.vocabulary`)."""


@dataclass
class PackedTokens:
    """A corpus tokenized and concatenated into one flat token array.

    Documents are joined with ``eos_token_id`` between them. ``tokens`` is usually a
    read-only ``np.memmap`` (1-D, ``uint16`` or ``uint32``), so a paper-scale corpus never
    sits in RAM; a corpus packed in shards reads as one :class:`ShardedTokenArray` over
    the shards' memmaps. ``checksum`` is the SHA-256 of the raw token bytes (of a single
    file) or of the shards' SHA-256 digests in order (sharded layout).
    """

    tokens: np.ndarray | ShardedTokenArray  # (n_tokens,)
    vocab_size: int
    eos_token_id: int
    checksum: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def compact_vocabulary_size(self) -> int | None:
        """``K`` of a stream in a compact vocabulary (:mod:`ih_kedro.science.data.vocabulary`), else
        None."""
        compact = self.meta.get(COMPACT_VOCABULARY_KEY)
        return None if compact is None else int(compact["size"])

    @property
    def other_token_ids(self) -> tuple[int, ...]:
        """The id that stands for every token type outside a compact vocabulary, or ``()``."""
        compact = self.meta.get(COMPACT_VOCABULARY_KEY)
        return () if compact is None else (int(compact["other_token_id"]),)

    @property
    def non_content_token_ids(self) -> tuple[int, ...]:
        """Ids that are never probe tokens, process states or bigram types of their own: EOS
        and :attr:`other_token_ids`."""
        return (int(self.eos_token_id),) + self.other_token_ids

    def sequences(self, context_length: int) -> np.ndarray:
        """Non-overlapping fixed-length training sequences, a zero-copy view.

        Returns an array of shape (n_sequences, context_length + 1): inputs are
        ``[:, :-1]``, next-token targets ``[:, 1:]``. The tail that does not fill a
        sequence is dropped.
        """
        if context_length <= 0:
            raise ValueError(f"context_length must be positive, got {context_length}")
        width = context_length + 1
        n_sequences = len(self) // width
        if n_sequences == 0:
            raise ValueError(
                f"the packed corpus has {len(self)} tokens, fewer than one sequence of "
                f"context_length + 1 = {width}"
            )
        return np.asarray(self.tokens[: n_sequences * width]).reshape(n_sequences, width)


class ShardedTokenArray:
    """Several 1-D token arrays (memmaps of token shards) read as one flat array.

    Supports what training and telemetry do with a packed stream: ``len``, ``shape``,
    ``dtype``, ``tokens[i]``, ``tokens[a:b]`` and fancy indexing with an integer array of any
    shape (``tokens[index]``, e.g. ``(B, C + 1)`` random windows), each reading only the
    touched pages of the touched shards. ``np.asarray(tokens)`` concatenates everything in
    RAM: use slices or :meth:`iter_chunks` on a large corpus.
    """

    ndim = 1

    def __init__(self, parts: list[np.ndarray]) -> None:
        if not parts:
            raise ValueError("ShardedTokenArray needs at least one shard")
        dtypes = {p.dtype for p in parts}
        if len(dtypes) != 1 or any(p.ndim != 1 for p in parts):
            raise ValueError(f"token shards must be 1-D with one dtype, got {dtypes}")
        self.parts = parts
        self.dtype = parts[0].dtype
        lengths = np.array([len(p) for p in parts], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(lengths)])  # (n_parts + 1,)
        self.shape = (int(self.offsets[-1]),)
        self.size = self.shape[0]

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"ShardedTokenArray({len(self.parts)} shards, {self.size} {self.dtype} tokens)"

    def _slice(self, start: int, stop: int) -> np.ndarray:
        if stop <= start:
            return np.zeros(0, dtype=self.dtype)
        first = int(np.searchsorted(self.offsets, start, side="right") - 1)
        last = int(np.searchsorted(self.offsets, stop - 1, side="right") - 1)
        pieces = [
            self.parts[i][
                max(start - self.offsets[i], 0) : min(stop, self.offsets[i + 1]) - self.offsets[i]
            ]
            for i in range(first, last + 1)
        ]
        return np.array(pieces[0]) if len(pieces) == 1 else np.concatenate(pieces)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            start, stop, step = key.indices(self.size)
            if step == 1:
                return self._slice(start, stop)
            return self[np.arange(start, stop, step)]
        if isinstance(key, (int, np.integer)):
            i = int(key) + (self.size if key < 0 else 0)
            if not 0 <= i < self.size:
                raise IndexError(f"index {key} out of range for {self.size} tokens")
            part = int(np.searchsorted(self.offsets, i, side="right") - 1)
            return self.parts[part][i - self.offsets[part]]
        index = np.asarray(key)
        if index.dtype.kind not in "iu":
            raise TypeError(f"ShardedTokenArray indices must be integers, got {index.dtype}")
        flat = index.reshape(-1).astype(np.int64)
        flat = np.where(flat < 0, flat + self.size, flat)
        if flat.size and (flat.min() < 0 or flat.max() >= self.size):
            raise IndexError(f"index out of range for {self.size} tokens")
        part = np.searchsorted(self.offsets, flat, side="right") - 1  # (n,)
        out = np.empty(flat.shape, dtype=self.dtype)
        for p in np.unique(part).tolist():
            sel = part == p
            out[sel] = self.parts[p][flat[sel] - self.offsets[p]]
        return out.reshape(index.shape)

    def iter_chunks(self, chunk_tokens: int = 1 << 24):
        """The stream as consecutive arrays of at most ``chunk_tokens`` tokens."""
        for part in self.parts:
            for i in range(0, len(part), chunk_tokens):
                yield part[i : i + chunk_tokens]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = np.concatenate(self.parts) if len(self.parts) > 1 else np.array(self.parts[0])
        return whole if dtype is None else whole.astype(dtype)
