"""Pile-format corpora: streaming ingestion with error accounting, and writing shards.

The embedded KJV corpus is in :mod:`ih_kedro.science.data.embedded_corpus`, the deduplication
keys (normalised-text hash, word shingles) in :mod:`ih_kedro.science.data.dedup_keys`, the MD5
hash split in :mod:`ih_kedro.science.data.split`. Deduplication itself runs on datatrove's
sharded stages: :mod:`ih_kedro.science.data.sharded.dedup`.

A *Pile-format shard* is a ``.jsonl`` or ``.jsonl.zst`` file with one JSON object per line,
``{"text": ..., "meta": {"pile_set_name": ...}}``. Documents are streamed one at a time, so a
corpus never sits in memory; a :class:`DocumentStream` re-reads its shards on every pass.

Documents are identified by ``doc_id = "<shard file name>:<line>"`` and, inside one stream, by
their *ordinal* (0-based position among the good documents of the stream). Both are stable
across passes and runs because shards are read in sorted order and bad records are skipped the
same way every time. Deduplication returns a boolean ``keep`` mask indexed by ordinal: one byte
per document, instead of a set of id strings.

No Kedro imports here: the module is usable from a notebook.
"""

from __future__ import annotations

import io
import json
import logging
import os
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

import numpy as np
import zstandard

from ih_kedro.science.data.split import is_held_out

logger = logging.getLogger(__name__)

#: Categories of bad input, in the order they are checked.
BAD_CATEGORIES = ("corrupt_shard", "invalid_utf8", "invalid_json", "missing_text", "empty_text")

#: Per category and pass, this many bad records are logged at WARNING; the rest at DEBUG.
_MAX_WARNINGS_PER_CATEGORY = 100
_READ_CHUNK_BYTES = 1 << 20


class BadInputError(ValueError):
    """Raised when the share of bad records exceeds ``max_bad_fraction``."""


class _TruncatedShardError(Exception):
    """A ``.zst`` shard ended inside a zstd frame.

    ``missing_bytes``: decompressed bytes of that frame never read as complete lines (its
    declared content size minus the complete lines it gave), or ``None`` when the frame header
    declares no size.
    """

    def __init__(self, message: str, missing_bytes: int | None = None) -> None:
        super().__init__(message)
        self.missing_bytes = missing_bytes


@dataclass(frozen=True)
class Document:
    """One document of a Pile-format corpus.

    Attributes:
        doc_id: ``"<shard file name>:<line>"``, unique inside a stream of distinct file names.
        text: The document text, as stored.
        pile_set_name: ``meta.pile_set_name`` (``"unknown"`` when absent).
        source: Path of the shard file.
        line: 1-based line number in the (decompressed) shard.
        ordinal: 0-based position among the good documents of the stream pass.
    """

    doc_id: str
    text: str
    pile_set_name: str
    source: str
    line: int
    ordinal: int = -1


@dataclass
class IngestionStats:
    """Counts of one pass over Pile-format shards.

    Attributes:
        files: Shard files opened.
        documents: Good documents yielded.
        text_bytes: Bytes of the good documents' raw JSON lines as stored (decompressed, with
            the ``meta`` and JSON escaping), not of the text alone; see the dedup report's
            ``bytes_in`` for text bytes.
        bad: Bad records by category (see :data:`BAD_CATEGORIES`). A corrupt ``.zst`` shard
            counts as one ``corrupt_shard`` record. A truncated one counts as the documents it
            lost after the cut, estimated from the cut frame's declared size and the shard's
            mean line length (at least one; frames after the cut are unknown, so this is a
            lower bound), located at its last complete line; its readable lines count as usual.
        estimated_bad: How many of ``bad`` are estimates (lost documents of truncated shards
            beyond the one the cut certainly destroyed).
        examples: Up to 5 ``"file:line"`` locations per bad category.
        by_set: Good documents per ``pile_set_name``.
    """

    files: int = 0
    documents: int = 0
    text_bytes: int = 0
    bad: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    by_set: Counter = field(default_factory=Counter)
    estimated_bad: int = 0

    @property
    def n_bad(self) -> int:
        """Total bad records over all categories."""
        return int(sum(self.bad.values()))

    @property
    def bad_fraction(self) -> float:
        """Bad records / (good documents + bad records); 0.0 for an empty pass."""
        total = self.documents + self.n_bad
        return self.n_bad / total if total else 0.0

    def record_bad(
        self, category: str, source: str, line: int, reason: str, count: int = 1
    ) -> None:
        """Count ``count`` bad records at one place (one, or a truncated shard's lost
        documents) and log them, naming file and line."""
        # One log line per call: its rank among the category's records decides the level.
        rank = self.bad[category] + 1
        self.bad[category] += count
        if len(self.examples[category]) < 5:
            self.examples[category].append(f"{source}:{line}")
        if rank == _MAX_WARNINGS_PER_CATEGORY + 1:
            logger.warning(
                "more than %d %s records: further ones are logged at DEBUG",
                _MAX_WARNINGS_PER_CATEGORY,
                category,
            )
        level = logging.WARNING if rank <= _MAX_WARNINGS_PER_CATEGORY else logging.DEBUG
        logger.log(level, "%s:%d: %s (%s); skipped", source, line, category, reason)

    def check(self, max_bad_fraction: float | None, name: str = "max_bad_fraction") -> None:
        """Raise :class:`BadInputError` when the bad fraction exceeds ``max_bad_fraction``.

        ``name`` is the parameter named in the error (e.g. ``data_engineering.max_bad_fraction``).
        ``None`` disables the check.
        """
        if max_bad_fraction is None:
            return
        if not 0.0 <= max_bad_fraction <= 1.0:
            raise ValueError(f"{name}: must be in [0, 1], got {max_bad_fraction}")
        if self.bad_fraction > max_bad_fraction:
            estimate = (
                f" ({self.estimated_bad} of them estimated: documents lost after the cut of a "
                "truncated shard)"
                if self.estimated_bad
                else ""
            )
            raise BadInputError(
                f"{name}: {self.n_bad} bad records{estimate} of {self.documents + self.n_bad} "
                f"({self.bad_fraction:.4%}) exceed the allowed {max_bad_fraction:.4%}; "
                f"by category: {dict(self.bad)}; examples: {dict(self.examples)}"
            )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "files": self.files,
            "documents": self.documents,
            "text_bytes": self.text_bytes,
            "bad_total": self.n_bad,
            "bad_fraction": self.bad_fraction,
            "bad_estimated": self.estimated_bad,
            "bad_by_category": {c: int(self.bad.get(c, 0)) for c in BAD_CATEGORIES},
            "bad_examples": {c: list(v) for c, v in self.examples.items()},
            "documents_by_set": dict(self.by_set),
        }


# --------------------------------------------------------------------------- reading shards


def _iter_zst_lines(fh: BinaryIO) -> Iterator[bytes]:
    """Decompressed lines (with their ``\\n``) of a possibly multi-frame zstd stream.

    Raises ``_TruncatedShardError`` when the input ends inside a frame (``stream_reader``
    silently returns EOF there) and ``zstandard.ZstdError`` on corrupt data.
    """
    dctx = zstandard.ZstdDecompressor()
    dobj = dctx.decompressobj()
    in_frame = False
    pending = b""
    read = 0  # compressed bytes read so far
    frame_start = 0  # offset of the current frame in the file
    frame_out = 0  # decompressed bytes of the current frame
    while chunk := fh.read(_READ_CHUNK_BYTES):
        read += len(chunk)
        while chunk:
            out = dobj.decompress(chunk)
            pending += out
            frame_out += len(out)
            in_frame = True
            chunk = b""
            if dobj.eof:
                in_frame = False
                chunk = dobj.unused_data
                frame_start, frame_out = read - len(chunk), 0
                dobj = dctx.decompressobj()
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line + b"\n"
    if in_frame:
        # The partial last line is part of the damage, not a record of its own.
        size = _declared_frame_size(fh, frame_start)
        raise _TruncatedShardError(
            "the zstd stream ends inside a frame (truncated file)",
            None if size is None else max(size - (frame_out - len(pending)), 0),
        )
    if pending:
        yield pending


_FRAME_HEADER_MAX_BYTES = 18  # zstd's ZSTD_FRAMEHEADERSIZE_MAX


def _declared_frame_size(fh: BinaryIO, offset: int) -> int | None:
    """The decompressed size the zstd frame at ``offset`` declares, or ``None`` if none."""
    try:
        fh.seek(offset)
        size = zstandard.get_frame_parameters(fh.read(_FRAME_HEADER_MAX_BYTES)).content_size
    except (zstandard.ZstdError, OSError, ValueError):
        return None
    return size if 0 < size < zstandard.CONTENTSIZE_ERROR else None  # not unknown/error


def _iter_raw_lines(path: Path) -> Iterator[bytes]:
    """Raw byte lines of a ``.jsonl`` or ``.jsonl.zst`` shard."""
    with path.open("rb") as fh:
        if path.name.endswith(".zst"):
            yield from _iter_zst_lines(fh)
        else:
            yield from io.BufferedReader(fh, buffer_size=_READ_CHUNK_BYTES)  # type: ignore[arg-type]


def iter_pile_documents(
    paths: Iterable[str | os.PathLike], stats: IngestionStats | None = None
) -> Iterator[Document]:
    """Stream the good documents of Pile-format shards, counting and logging bad records.

    Args:
        paths: Shard files (``.jsonl`` or ``.jsonl.zst``), read in the given order.
        stats: Counters updated in place; a fresh one is used when ``None``.

    Yields:
        :class:`Document` objects with ``ordinal`` numbered from 0 over this call.

    Bad records (a corrupt/truncated ``.zst`` shard, non-UTF-8 bytes, invalid JSON, a missing
    or non-string ``text``, an empty/whitespace text) are logged with file and line, counted
    in ``stats.bad`` and skipped. A truncated ``.zst`` shard yields every complete line before
    the cut; the documents it lost are ``corrupt_shard`` records at ``<file>:<last good line>``
    (an estimate beyond the first: ``stats.estimated_bad``). This function never raises on bad
    content; callers apply
    :meth:`IngestionStats.check`.
    """
    stats = stats if stats is not None else IngestionStats()
    ordinal = 0
    for raw_path in paths:
        path = Path(raw_path)
        stats.files += 1
        name = path.name
        line_no = 0
        line_bytes = 0  # of this shard's complete lines, for a truncation's estimate
        try:
            for raw in _iter_raw_lines(path):
                line_no += 1
                line_bytes += len(raw)
                if not raw.strip():
                    # Blank separator lines (e.g. a trailing newline) are not records.
                    continue
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    stats.record_bad("invalid_utf8", str(path), line_no, str(exc))
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    stats.record_bad("invalid_json", str(path), line_no, str(exc))
                    continue
                if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                    stats.record_bad("missing_text", str(path), line_no, "no string field 'text'")
                    continue
                text = record["text"]
                if not text.strip():
                    stats.record_bad("empty_text", str(path), line_no, "empty or whitespace")
                    continue
                meta = record.get("meta")
                set_name = meta.get("pile_set_name") if isinstance(meta, dict) else None
                set_name = str(set_name) if set_name is not None else "unknown"
                stats.documents += 1
                stats.text_bytes += len(raw)
                stats.by_set[set_name] += 1
                yield Document(f"{name}:{line_no}", text, set_name, str(path), line_no, ordinal)
                ordinal += 1
        except _TruncatedShardError as exc:
            # The readable prefix was ingested above; the truncation counts the documents lost
            # after the cut, located at the last complete line so the log says how far the shard
            # is usable.
            lost, how = _lost_documents(exc.missing_bytes, line_no, line_bytes, stats)
            stats.record_bad(
                "corrupt_shard",
                str(path),
                max(line_no, 1),
                (
                    f"truncated: {exc}; lines 1-{line_no} read, {line_no} is the last good line"
                    if line_no
                    else f"truncated: {exc}; no complete line before the cut"
                )
                + f"; {how}",
                count=lost,
            )
            stats.estimated_bad += lost - 1
        except (zstandard.ZstdError, OSError) as exc:
            stats.record_bad(
                "corrupt_shard", str(path), line_no + 1, f"{type(exc).__name__}: {exc}"
            )


def _lost_documents(
    missing_bytes: int | None, lines: int, line_bytes: int, stats: IngestionStats
) -> tuple[int, str]:
    """``(documents lost after a truncated shard's cut, how that number was reached)``.

    The cut frame's missing bytes (declared size minus the complete lines read) over the mean
    line length of the shard (of the pass so far if the shard gave no line); 1 when the frame
    declares no size or no line length is known. At least 1: the cut destroyed a document.
    """
    mean = (
        line_bytes / lines
        if lines
        else (stats.text_bytes / stats.documents if stats.documents else None)
    )
    if missing_bytes is None:
        return 1, "counted as 1 lost document (the frame declares no size: the loss is unknown)"
    if not mean:
        return 1, "counted as 1 lost document (no complete line to measure: the loss is unknown)"
    lost = max(1, round(missing_bytes / mean))
    return lost, (
        f"~{lost} documents lost (estimated: {missing_bytes:,} bytes missing from the frame's "
        f"declared size at {mean:,.0f} bytes per line; later frames, if any, unknown)"
    )


def find_shards(folder: str | os.PathLike, patterns: Sequence[str]) -> list[Path]:
    """Shard files under ``folder`` matching any glob pattern, sorted, without duplicates."""
    root = Path(folder)
    found = {p for pattern in patterns for p in root.glob(pattern) if p.is_file()}
    return sorted(found)


class DocumentStream:
    """A re-iterable stream of the good documents of a fixed list of shard files.

    Every iteration re-reads the shards and replaces :attr:`stats` with that pass's counts.
    When ``max_bad_fraction`` is set, a completed pass whose bad fraction exceeds it raises
    :class:`BadInputError`.
    """

    def __init__(
        self,
        paths: Sequence[str | os.PathLike],
        max_bad_fraction: float | None = None,
        description: str = "",
    ) -> None:
        self.paths = [Path(p) for p in paths]
        self.max_bad_fraction = max_bad_fraction
        self.description = description or f"{len(self.paths)} shard(s)"
        self.stats = IngestionStats()

    def __iter__(self) -> Iterator[Document]:
        stats = IngestionStats()
        self.stats = stats
        yield from iter_pile_documents(self.paths, stats)
        stats.check(self.max_bad_fraction)

    def __repr__(self) -> str:
        return f"DocumentStream({self.description}, {len(self.paths)} files)"


@dataclass
class DocumentSelection:
    """A lazy, re-iterable subset of a :class:`DocumentStream`: the documents kept by
    deduplication (``keep`` mask by ordinal, ``None`` keeps all), restricted to one split.

    ``split`` is ``"all"``, ``"train"`` (not held out) or ``"validation"`` (held out by
    :func:`is_held_out` with ``held_out_fraction``).
    """

    stream: Iterable[Document]
    keep: np.ndarray | None = None  # (n_documents,) bool
    split: Literal["all", "train", "validation"] = "all"
    held_out_fraction: float = 0.0

    def __iter__(self) -> Iterator[Document]:
        for doc in self.stream:
            if self.keep is not None:
                if doc.ordinal >= len(self.keep):
                    raise RuntimeError(
                        f"document {doc.doc_id} has ordinal {doc.ordinal} beyond the dedup mask "
                        f"({len(self.keep)} documents): the shards changed since deduplication"
                    )
                if not self.keep[doc.ordinal]:
                    continue
            if self.split != "all":
                held = is_held_out(doc.text, self.held_out_fraction)
                if held != (self.split == "validation"):
                    continue
            yield doc

    def texts(self) -> Iterator[str]:
        """The selected documents' texts, in stream order."""
        return (doc.text for doc in self)

    def with_split(
        self, split: Literal["all", "train", "validation"], held_out_fraction: float
    ) -> DocumentSelection:
        """The same kept documents restricted to ``split``."""
        return DocumentSelection(self.stream, self.keep, split, held_out_fraction)


# --------------------------------------------------------------------------- writing shards


def write_pile_shards(
    records: Iterable[dict[str, Any] | Document],
    folder: str | os.PathLike,
    prefix: str = "shard",
    docs_per_shard: int = 10_000,
    compress: bool = True,
) -> list[Path]:
    """Write records as Pile-format shards ``<prefix>_<nnnnn>.jsonl[.zst]`` in ``folder``.

    Args:
        records: ``{"text", "meta"}`` dicts or :class:`Document` objects, streamed.
        folder: Output folder (created).
        prefix: File name prefix.
        docs_per_shard: Records per shard file.
        compress: Write ``.jsonl.zst`` (zstd level 3) instead of ``.jsonl``.

    Returns:
        The written shard paths. Each file is written to a temporary name and renamed, so a
        crash never leaves a half-written shard under a shard name.
    """
    if docs_per_shard <= 0:
        raise ValueError(f"docs_per_shard must be positive, got {docs_per_shard}")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    suffix = ".jsonl.zst" if compress else ".jsonl"
    written: list[Path] = []
    batch: list[bytes] = []

    def flush() -> None:
        target = out / f"{prefix}_{len(written):05d}{suffix}"
        payload = b"".join(batch)
        if compress:
            payload = zstandard.ZstdCompressor(level=3).compress(payload)
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.replace(tmp, target)
        written.append(target)
        batch.clear()

    for item in records:
        record = (
            {"text": item.text, "meta": {"pile_set_name": item.pile_set_name}}
            if isinstance(item, Document)
            else item
        )
        batch.append(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
        if len(batch) >= docs_per_shard:
            flush()
    if batch:
        flush()
    return written
