"""``PackedTokensDataset``: a packed token corpus folder (``tokens.bin`` + ``meta.json``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from kedro.io import AbstractDataset, DatasetError

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.sharded.packing import ShardedPacking, write_sharded_tokens
from ih_kedro.science.data.tokenization import TokenChunks, read_packed_tokens, write_packed_tokens


class PackedTokensDataset(AbstractDataset[PackedTokens | TokenChunks, PackedTokens]):
    """A packed corpus folder.

    ``load`` returns :class:`~ih_kedro.science.data.packed.PackedTokens` whose ``tokens`` is a
    read-only ``np.memmap``, after checking the SHA-256 recorded in ``meta.json`` (``verify``).
    ``save`` accepts a ``PackedTokens``, a lazy
    :class:`~ih_kedro.science.data.tokenization.TokenChunks` (tokenized while it is written, one
    ``tokens.bin``) or a lazy :class:`~ih_kedro.science.data.sharded.packing.ShardedPacking`
    (encoded in parallel tasks into token shards listed in ``meta.json``; loads as one
    array). Packing streams either way. The folder is replaced atomically.
    """

    def __init__(
        self, path: str, verify: bool = True, metadata: dict[str, Any] | None = None
    ) -> None:
        """
        Args:
            path: Folder holding ``tokens.bin`` and ``meta.json``.
            verify: Recompute the checksum on load (one sequential read of ``tokens.bin``).
            metadata: Free-form (e.g. kedro-viz layer); unused by the dataset.
        """
        self._path = Path(path)
        self._verify = verify
        self.metadata = metadata

    def load(self) -> PackedTokens:
        return read_packed_tokens(self._path, verify=self._verify)

    def save(self, data: PackedTokens | TokenChunks | ShardedPacking) -> None:
        if isinstance(data, ShardedPacking):
            write_sharded_tokens(data, self._path)
        elif isinstance(data, TokenChunks):
            write_packed_tokens(
                data, self._path, data.vocab_size, data.eos_token_id, meta=data.meta
            )
        elif isinstance(data, PackedTokens):
            n_documents = data.meta.get("n_documents")
            if n_documents is None:
                n_documents = int(np.count_nonzero(data.tokens == data.eos_token_id))
            step = 1 << 22  # copy a memmap in slices, never whole
            write_packed_tokens(
                (data.tokens[i : i + step] for i in range(0, len(data), step)),
                self._path,
                data.vocab_size,
                data.eos_token_id,
                meta=data.meta,
                n_documents=int(n_documents),
            )
        else:
            raise DatasetError(
                f"PackedTokensDataset saves PackedTokens or TokenChunks, got {type(data).__name__}"
            )

    def _exists(self) -> bool:
        return (self._path / "meta.json").is_file()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path), "verify": self._verify}
