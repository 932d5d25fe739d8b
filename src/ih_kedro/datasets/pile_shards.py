"""``PileShardsDataset``: a folder of Pile-format shards, loaded as a lazy ``DocumentStream``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError

from ih_kedro.science.data.corpus import Document, DocumentStream, find_shards, write_pile_shards
from ih_kedro.science.data.embedded_corpus import write_embedded_corpus

EMBEDDED_CORPORA = ("kjv",)


class PileShardsDataset(AbstractDataset[Iterable[dict[str, Any] | Document], DocumentStream]):
    """A folder of ``*.jsonl`` / ``*.jsonl.zst`` Pile-format shards.

    ``load`` returns a :class:`~ih_kedro.science.data.corpus.DocumentStream` over the matching
    files (sorted); nothing is read until it is iterated, and every pass re-reads the shards.
    With ``embedded_corpus="kjv"`` and no matching shard in the folder, the embedded King
    James Version is first written there as ``kjv_*.jsonl.zst`` shards. ``save`` writes
    records (``{"text", "meta"}`` dicts or ``Document`` objects) as new ``.jsonl.zst`` shards.

    Example catalog entry::

        raw_documents:
          type: ih_kedro.datasets.pile_shards.PileShardsDataset
          path: data/01_raw/corpus
          embedded_corpus: kjv
    """

    def __init__(
        self,
        path: str,
        *,
        patterns: Sequence[str] = ("*.jsonl", "*.jsonl.zst"),
        embedded_corpus: str | None = None,
        max_bad_fraction: float | None = None,
        docs_per_shard: int = 10_000,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """
        Args:
            path: Folder of shards.
            patterns: Glob patterns relative to ``path`` (``"**/*.jsonl.zst"`` recurses).
            embedded_corpus: ``"kjv"`` or ``None``.
            max_bad_fraction: When set, a full pass whose bad-record share exceeds it raises.
                ``None`` leaves the check to the pipeline (``data_engineering.max_bad_fraction``).
            docs_per_shard: Records per shard written by ``save``.
            metadata: Free-form (e.g. kedro-viz layer); unused by the dataset.
        """
        if embedded_corpus is not None and embedded_corpus not in EMBEDDED_CORPORA:
            raise DatasetError(
                f"embedded_corpus must be one of {EMBEDDED_CORPORA} or null, got {embedded_corpus!r}"
            )
        if isinstance(patterns, str):
            patterns = (patterns,)
        self._path = Path(path)
        self._patterns = tuple(patterns)
        self._embedded_corpus = embedded_corpus
        self._max_bad_fraction = max_bad_fraction
        self._docs_per_shard = docs_per_shard
        self.metadata = metadata

    def load(self) -> DocumentStream:
        paths = find_shards(self._path, self._patterns)
        if not paths and self._embedded_corpus == "kjv":
            self._logger.info("no shards in %s: writing the embedded KJV corpus", self._path)
            write_embedded_corpus(self._path)
            paths = find_shards(self._path, self._patterns)
        if not paths:
            raise DatasetError(
                f"no shard matching {list(self._patterns)} in {self._path} (and no embedded "
                "corpus configured): put Pile-format .jsonl/.jsonl.zst files there"
            )
        return DocumentStream(paths, self._max_bad_fraction, description=str(self._path))

    def save(self, data: Iterable[dict[str, Any] | Document]) -> None:
        existing = len(find_shards(self._path, ("shard_*.jsonl.zst",)))
        if existing:
            raise DatasetError(f"{self._path} already holds shard_*.jsonl.zst files")
        write_pile_shards(data, self._path, prefix="shard", docs_per_shard=self._docs_per_shard)

    def _exists(self) -> bool:
        return bool(find_shards(self._path, self._patterns))

    def _describe(self) -> dict[str, Any]:
        return {
            "path": str(self._path),
            "patterns": list(self._patterns),
            "embedded_corpus": self._embedded_corpus,
            "max_bad_fraction": self._max_bad_fraction,
        }
