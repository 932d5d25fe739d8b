"""Sharded tokenization and packing: encoding in parallel datatrove tasks into token shards.

A sharded packed corpus is a folder::

    meta.json              # as a single-file corpus, plus "shards": [{file, source,
                           # n_tokens, n_documents, sha256}, ...] in stream order
    tokens_00000.bin ...   # one shard per input shard file: its selected documents, each
                           # followed by EOS (raw little-endian uint16/uint32)

The shards are cut by input file, not by task, so the same files give byte-identical shards
for any number of tasks, and the shards concatenated in order are exactly the single-file
``tokens.bin`` of :func:`~ih_kedro.science.data.tokenization.write_packed_tokens` (same token
order, same SHA-256). ``meta.json``'s ``sha256`` is :func:`shards_checksum` of the shard
digests. :func:`~ih_kedro.science.data.tokenization.read_packed_tokens` opens it as one array.
No Kedro imports here.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from datatrove.pipeline.base import PipelineStep
from tokenizers import Tokenizer

from ih_kedro.science.data.corpus import iter_pile_documents
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.sharded.executor import (
    ExecutorSettings,
    plan_blocks,
    run_stage,
    stage_executor,
)
from ih_kedro.science.data.split import is_held_out
from ih_kedro.science.data.tokenization import (
    FORMAT_VERSION,
    META_FILE,
    _atomic_folder,
    _replace_folder,
    pack_documents,
    read_packed_tokens,
    shards_checksum,
    token_dtype,
    write_token_file,
)

logger = logging.getLogger(__name__)

SHARDED_FORMAT_VERSION = FORMAT_VERSION + 1


class PackTokenShards(PipelineStep):
    """A datatrove block: task ``rank`` encodes the selected documents of its contiguous
    block of input files, one token shard per file (``tokens_<file>.bin`` and
    ``tokens_<file>.json`` with its counts and SHA-256)."""

    type = "🔢 - TOKENIZER"
    name = "📦 pack token shards"

    def __init__(self, packing: ShardedPacking, out_dir: str) -> None:
        super().__init__()
        self.packing = packing
        self.out_dir = str(out_dir)

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        p = self.packing
        paths = [Path(x) for x in p.paths]
        start, end = plan_blocks(paths, world_size)[rank]
        keep = p.load_keep()
        tokenizer = Tokenizer.from_str(p.tokenizer_json)
        out = Path(self.out_dir)
        for f in range(start, end):

            def texts(f: int = f):
                offset = int(p.file_offsets[f])
                for doc in iter_pile_documents([paths[f]]):
                    if keep is not None and not keep[offset + doc.ordinal]:
                        continue
                    if p.split != "all":
                        if is_held_out(doc.text, p.held_out_fraction) != (p.split == "validation"):
                            continue
                    yield doc.text

            chunks = pack_documents(texts(), tokenizer, p.eos_token_id, p.batch_size)
            name = f"tokens_{f:05d}.bin"
            n_tokens, n_docs, sha256 = write_token_file(chunks, out / name, p.vocab_size)
            entry = {
                "file": name,
                "source": paths[f].name,
                "n_tokens": n_tokens,
                "n_documents": n_docs,
                "sha256": sha256,
            }
            (out / f"tokens_{f:05d}.json").write_text(json.dumps(entry))
            self.stat_update("shards")
            self.stat_update("documents", value=n_docs)
            self.stat_update("tokens", value=n_tokens)
        yield from ()


@dataclass
class ShardedPacking:
    """Packed tokens not yet written, to be encoded in parallel tasks (a node returns it;
    ``PackedTokensDataset.save`` calls :func:`write_sharded_tokens`).

    Attributes:
        paths: Input shard files, in stream order.
        file_offsets: Ordinal of each file's first document ``(n_files,)``.
        keep: Dedup ``keep`` mask by ordinal (``None``: all), or the path of a ``.npy``.
        split: ``"all"``, ``"train"`` or ``"validation"`` (MD5 hash split).
        held_out_fraction: Of the split.
        tokenizer_json: The tokenizer (``Tokenizer.to_str()``).
        eos_token_id, vocab_size, batch_size: As :class:`TokenChunks`.
        executor: Where the tasks run.
        meta: Extra metadata for ``meta.json``.
    """

    paths: list[str]
    file_offsets: list[int]
    keep: np.ndarray | str | None
    split: Literal["all", "train", "validation"]
    held_out_fraction: float
    tokenizer_json: str
    eos_token_id: int
    vocab_size: int
    batch_size: int = 256
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)
    meta: dict[str, Any] = field(default_factory=dict)

    def load_keep(self) -> np.ndarray | None:
        if isinstance(self.keep, (str, os.PathLike)):
            return np.load(self.keep, mmap_mode="r")
        return self.keep


def write_sharded_tokens(
    packing: ShardedPacking, folder: str | os.PathLike, work_dir: str | os.PathLike | None = None
) -> PackedTokens:
    """Encode and pack in parallel tasks into ``folder`` (replaced atomically).

    Tasks: ``packing.executor.n_tasks``, at most one per input file. Returns the corpus as
    :func:`read_packed_tokens` opens it (not re-verified).
    """
    folder = Path(folder)
    dtype = token_dtype(packing.vocab_size)
    if not 0 <= packing.eos_token_id < packing.vocab_size:
        raise ValueError(f"eos_token_id {packing.eos_token_id} outside [0, {packing.vocab_size})")
    if len(packing.file_offsets) != len(packing.paths):
        raise ValueError("ShardedPacking: one file offset per input file is needed")
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = _atomic_folder(folder)
    try:
        tasks = max(1, min(packing.executor.n_tasks, len(packing.paths)))
        logs = Path(work_dir) if work_dir else tmp / ".logs"
        executor = stage_executor(
            packing.executor, [PackTokenShards(packing, str(tmp))], tasks, logs, "pack"
        )
        run_stage(executor, packing.executor)
        shutil.rmtree(tmp / ".logs", ignore_errors=True)
        shards = [
            json.loads((tmp / f"tokens_{f:05d}.json").read_text())
            for f in range(len(packing.paths))
        ]
        for f in range(len(packing.paths)):
            (tmp / f"tokens_{f:05d}.json").unlink()
        meta = {
            **packing.meta,
            "format_version": SHARDED_FORMAT_VERSION,
            "dtype": dtype.name,
            "n_tokens": int(sum(s["n_tokens"] for s in shards)),
            "vocab_size": int(packing.vocab_size),
            "eos_token_id": int(packing.eos_token_id),
            "sha256": shards_checksum([s["sha256"] for s in shards]),
            "checksum": "sha256 of the shards' sha256 hex digests, one per line, in order",
            "n_documents": int(sum(s["n_documents"] for s in shards)),
            "shards": shards,
            "tasks": tasks,
        }
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        _replace_folder(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info(
        "packed %d tokens (%d documents) in %d shards with %d tasks to %s",
        meta["n_tokens"],
        meta["n_documents"],
        len(shards),
        tasks,
        folder,
    )
    return read_packed_tokens(folder, verify=False)


def concatenated_sha256(corpus: PackedTokens, chunk_tokens: int = 1 << 24) -> str:
    """SHA-256 of the whole token stream's bytes, shard after shard (equal to a single-file
    corpus's ``sha256`` when the tokens are the same)."""
    import hashlib

    sha = hashlib.sha256()
    tokens = corpus.tokens
    chunks = (
        tokens.iter_chunks(chunk_tokens)
        if hasattr(tokens, "iter_chunks")
        else (tokens[i : i + chunk_tokens] for i in range(0, len(tokens), chunk_tokens))
    )
    for chunk in chunks:
        sha.update(np.ascontiguousarray(chunk).tobytes())
    return sha.hexdigest()


def sharded_packing_from_selection(
    selection: Any,
    tokenizer: Tokenizer,
    eos_token_id: int,
    batch_size: int,
    executor: ExecutorSettings,
    meta: dict[str, Any],
    documents_per_file: Sequence[int],
) -> ShardedPacking:
    """A :class:`ShardedPacking` for a ``DocumentSelection`` over a ``DocumentStream``."""
    stream = selection.stream
    counts = np.asarray(documents_per_file, dtype=np.int64)
    keep = selection.keep
    if isinstance(keep, np.memmap) and keep.filename:
        keep = str(keep.filename)
    return ShardedPacking(
        paths=[str(p) for p in stream.paths],
        file_offsets=np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist(),
        keep=keep,
        split=selection.split,
        held_out_fraction=selection.held_out_fraction,
        tokenizer_json=tokenizer.to_str(),
        eos_token_id=eos_token_id,
        vocab_size=tokenizer.get_vocab_size(),
        batch_size=batch_size,
        executor=executor,
        meta=meta,
    )
