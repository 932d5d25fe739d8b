"""Byte-level BPE tokenizers (HF ``tokenizers``) and streaming packing into a flat token memmap.

On-disk layout of a packed corpus (a folder)::

    tokens.bin   # raw little-endian uint16 (vocab_size < 65536) or uint32 token ids
    meta.json    # dtype, n_tokens, vocab_size, eos_token_id, sha256, n_documents, source, ...

Every document is followed by ``eos_token_id``, so the EOS token separates documents.
The folder is written into a temporary sibling and renamed into place, so a failed run never
destroys an earlier good output. No Kedro imports here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from tqdm.auto import tqdm

from ih_kedro.science.data.packed import PackedTokens, ShardedTokenArray

logger = logging.getLogger(__name__)

EOS_TOKEN = "<|endoftext|>"
TOKENS_FILE = "tokens.bin"
META_FILE = "meta.json"
FORMAT_VERSION = 1
_N_BYTES = 256
_WRITE_BUFFER_TOKENS = 1 << 20


class ChecksumError(ValueError):
    """Raised when ``tokens.bin`` does not match the SHA-256 recorded in ``meta.json``."""


# --------------------------------------------------------------------------- tokenizers


def train_bpe_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 1024,
    special_tokens: Sequence[str] = (EOS_TOKEN,),
    min_frequency: int = 2,
    max_documents: int | None = None,
) -> Tokenizer:
    """Train a byte-level BPE tokenizer (GPT-2 style, no prefix space) on ``texts``.

    The 256 byte symbols are always in the vocabulary, so any text encodes and decodes back
    exactly. Special tokens get the first ids (``<|endoftext|>`` is id 0 by default).

    Args:
        texts: Training documents, streamed.
        vocab_size: Final vocabulary size, specials included; at least
            ``256 + len(special_tokens)``.
        special_tokens: Added first, never split.
        min_frequency: Minimum pair count for a merge.
        max_documents: Use only the first ``max_documents`` texts (``None``: all).

    Returns:
        The trained ``tokenizers.Tokenizer``.
    """
    minimum = _N_BYTES + len(special_tokens)
    if vocab_size < minimum:
        raise ValueError(
            f"data_engineering.tokenizer.vocab_size: must be >= {minimum} "
            f"(256 bytes + {len(special_tokens)} special tokens), got {vocab_size}"
        )
    if max_documents is not None and max_documents <= 0:
        raise ValueError(
            f"data_engineering.tokenizer.max_documents: must be positive, got {max_documents}"
        )
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    stream = islice(texts, max_documents) if max_documents is not None else texts
    tokenizer.train_from_iterator(stream, trainer=trainer)
    logger.info(
        "trained a byte-level BPE tokenizer: vocab_size=%d (asked %d)",
        tokenizer.get_vocab_size(),
        vocab_size,
    )
    return tokenizer


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """Load a ``tokenizer.json`` (HF ``tokenizers`` format)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer file at {path}")
    return Tokenizer.from_file(str(path))


def eos_token_id(tokenizer: Tokenizer, eos_token: str = EOS_TOKEN) -> int:
    """The id of ``eos_token``; a clear error when the tokenizer lacks it."""
    token_id = tokenizer.token_to_id(eos_token)
    if token_id is None:
        raise ValueError(
            f"data_engineering.tokenizer.eos_token: the tokenizer has no token {eos_token!r}"
        )
    return int(token_id)


def token_dtype(vocab_size: int) -> np.dtype:
    """``uint16`` when every id fits (``vocab_size <= 65536``), else ``uint32``."""
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.uint32)


# --------------------------------------------------------------------------- packing


def pack_documents(
    texts: Iterable[str],
    tokenizer: Tokenizer,
    eos_token_id: int,
    batch_size: int = 256,
) -> Iterator[np.ndarray]:
    """Tokenize documents, streaming; each document's ids are followed by ``eos_token_id``.

    Args:
        texts: Documents, streamed.
        tokenizer: Encodes without added special tokens.
        eos_token_id: Appended after every document.
        batch_size: Documents per ``encode_batch`` call (parallel inside ``tokenizers``).

    Yields:
        One ``int64`` array per document, ``(n_tokens_of_document + 1,)``: the number of
        chunks is the number of documents.
    """
    if batch_size <= 0:
        raise ValueError(f"data_engineering.packing.batch_size: must be positive, got {batch_size}")
    iterator = iter(texts)
    while batch := list(islice(iterator, batch_size)):
        for encoding in tokenizer.encode_batch(batch, add_special_tokens=False):
            ids = np.empty(len(encoding.ids) + 1, dtype=np.int64)
            ids[:-1] = encoding.ids
            ids[-1] = eos_token_id
            yield ids


@dataclass
class TokenChunks:
    """Packed tokens not yet written: a re-iterable, lazy stream of per-document chunks.

    A node returns this; :func:`write_packed_tokens` (through ``PackedTokensDataset.save``)
    consumes it, so a corpus is tokenized while it is written and never held in memory.
    Iterating it tokenizes ``texts`` with ``tokenizer`` (see :func:`pack_documents`);
    ``texts`` must be re-iterable and may hold strings or objects with a ``text`` attribute
    (corpus ``Document``s).
    """

    texts: Iterable[Any]
    tokenizer: Tokenizer
    eos_token_id: int
    vocab_size: int
    batch_size: int = 256
    meta: dict[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[np.ndarray]:
        texts = (t if isinstance(t, str) else t.text for t in self.texts)
        return pack_documents(texts, self.tokenizer, self.eos_token_id, self.batch_size)


def _atomic_folder(folder: Path) -> Path:
    tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    return tmp


def _replace_folder(tmp: Path, folder: Path) -> None:
    """Move ``tmp`` to ``folder``; an existing ``folder`` is removed only after the move."""
    old = None
    if folder.exists():
        old = folder.parent / f".{folder.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.replace(folder, old)
    os.replace(tmp, folder)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_token_file(
    chunks: Iterable[np.ndarray], path: str | os.PathLike, vocab_size: int
) -> tuple[int, int, str]:
    """Write token chunks to one raw little-endian file (:func:`token_dtype`), streaming
    (buffered ~1M tokens at a time).

    Returns:
        ``(n_tokens, n_chunks, sha256 hex digest of the bytes written)``.
    """
    dtype = token_dtype(vocab_size)
    sha = hashlib.sha256()
    n_tokens = n_chunks = 0
    buffer: list[np.ndarray] = []
    buffered = 0
    with Path(path).open("wb") as fh:

        def flush() -> None:
            nonlocal buffered
            if not buffer:
                return
            data = np.concatenate(buffer)
            if data.size and (data.min() < 0 or data.max() >= vocab_size):
                raise ValueError(
                    f"token ids must be in [0, {vocab_size}), got "
                    f"[{int(data.min())}, {int(data.max())}]"
                )
            raw = data.astype(dtype.newbyteorder("<"), copy=False).tobytes()
            sha.update(raw)
            fh.write(raw)
            buffer.clear()
            buffered = 0

        for chunk in chunks:
            arr = np.asarray(chunk)
            if arr.ndim != 1:
                raise ValueError(f"token chunks must be 1-D, got shape {arr.shape}")
            buffer.append(arr)
            buffered += arr.size
            n_tokens += arr.size
            n_chunks += 1
            if buffered >= _WRITE_BUFFER_TOKENS:
                flush()
        flush()
    return n_tokens, n_chunks, sha.hexdigest()


SHARD_LAYOUT_KEYS = frozenset({"shards", "tasks", "checksum"})
"""``meta.json`` keys of a sharded corpus that describe its files: never carried into a
single-file copy (:func:`write_packed_tokens`), whose ``sha256`` is its own."""


def write_packed_tokens(
    chunks: Iterable[np.ndarray],
    folder: str | os.PathLike,
    vocab_size: int,
    eos_token_id: int,
    *,
    meta: dict[str, Any] | None = None,
    n_documents: int | None = None,
) -> PackedTokens:
    """Write token chunks as ``tokens.bin`` + ``meta.json`` in ``folder``, atomically.

    Args:
        chunks: Token id arrays, one per document (as from :func:`pack_documents`); consumed
            once, streaming (buffered ~1M tokens at a time).
        folder: Output folder; replaced only once the new one is complete.
        vocab_size: Ids must be in ``[0, vocab_size)``; sets the dtype (:func:`token_dtype`).
        eos_token_id: Recorded in the metadata.
        meta: Extra metadata (e.g. ``source``), merged into ``meta.json``; the computed
            keys (dtype, n_tokens, sha256, ...) override it.
        n_documents: Recorded instead of the number of chunks, when chunks are not
            documents (e.g. slices of an existing token array).

    Returns:
        The written corpus as :func:`read_packed_tokens` returns it (read-only memmap).
    """
    folder = Path(folder)
    dtype = token_dtype(vocab_size)
    if not 0 <= eos_token_id < vocab_size:
        raise ValueError(f"eos_token_id {eos_token_id} outside [0, {vocab_size})")
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = _atomic_folder(folder)
    try:
        n_tokens, n_chunks, sha256 = write_token_file(
            tqdm(chunks, desc=f"pack {folder.name}", unit="doc", disable=None),
            tmp / TOKENS_FILE,
            vocab_size,
        )
        full_meta = {
            # A sharded corpus's layout ("shards") describes its files, not this single one.
            **{k: v for k, v in (meta or {}).items() if k not in SHARD_LAYOUT_KEYS},
            "format_version": FORMAT_VERSION,
            "dtype": dtype.name,
            "n_tokens": n_tokens,
            "vocab_size": int(vocab_size),
            "eos_token_id": int(eos_token_id),
            "sha256": sha256,
            "n_documents": n_chunks if n_documents is None else int(n_documents),
        }
        (tmp / META_FILE).write_text(json.dumps(full_meta, indent=2, sort_keys=True) + "\n")
        _replace_folder(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info("wrote %d tokens (%d documents) to %s", n_tokens, full_meta["n_documents"], folder)
    return read_packed_tokens(folder, verify=False)


def _sha256_file(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 24):
            sha.update(block)
    return sha.hexdigest()


def shards_checksum(shard_digests: Sequence[str]) -> str:
    """The checksum of a sharded corpus: SHA-256 of its shards' hex digests, one per line,
    in order (so it is computed without re-reading the tokens)."""
    return hashlib.sha256("".join(d + "\n" for d in shard_digests).encode()).hexdigest()


def _open_tokens(path: Path, dtype: np.dtype, n_tokens: int, sha256: str, verify: bool):
    expected_bytes = n_tokens * dtype.itemsize
    actual_bytes = path.stat().st_size if path.is_file() else -1
    if actual_bytes != expected_bytes:
        raise ChecksumError(
            f"{path}: {actual_bytes} bytes, meta.json says {n_tokens} {dtype.name} tokens "
            f"({expected_bytes} bytes); the file is missing, truncated or was replaced"
        )
    if verify:
        actual = _sha256_file(path)
        if actual != sha256:
            raise ChecksumError(
                f"{path}: SHA-256 {actual} does not match meta.json ({sha256}); "
                "the token file is corrupt: re-run the data_engineering pipeline"
            )
    if n_tokens:
        return np.memmap(path, dtype=dtype, mode="r", shape=(n_tokens,))
    # np.memmap cannot map an empty file.
    tokens = np.zeros(0, dtype=dtype)
    tokens.flags.writeable = False
    return tokens


def read_packed_tokens(folder: str | os.PathLike, verify: bool = True) -> PackedTokens:
    r"""Open a packed corpus as :class:`PackedTokens` with read-only ``np.memmap``\ s.

    A single-file corpus (``tokens.bin``) gives one memmap; a sharded corpus (``meta.json``
    lists ``shards``, written by :func:`~ih_kedro.science.data.sharded.packing.write_sharded_tokens`)
    gives a :class:`~ih_kedro.science.data.packed.ShardedTokenArray` over the non-empty shards
    (one shard: its memmap), never loaded whole.

    Args:
        folder: A folder written by :func:`write_packed_tokens` or the sharded writer.
        verify: Recompute the SHA-256 of every token file (one sequential read) and compare.

    Raises:
        FileNotFoundError: ``meta.json`` or a token file is missing.
        ChecksumError: A size or SHA-256 does not match ``meta.json``.
    """
    folder = Path(folder)
    meta_path = folder / META_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(f"{folder} is not a packed corpus (needs {META_FILE})")
    meta = json.loads(meta_path.read_text())
    dtype = np.dtype(meta["dtype"]).newbyteorder("<")
    if "shards" in meta:
        digests = [s["sha256"] for s in meta["shards"]]
        if shards_checksum(digests) != meta["sha256"]:
            raise ChecksumError(f"{meta_path}: the shard digests do not match its sha256")
        if sum(int(s["n_tokens"]) for s in meta["shards"]) != int(meta["n_tokens"]):
            raise ChecksumError(f"{meta_path}: the shards' n_tokens do not add up to n_tokens")
        parts = [
            _open_tokens(folder / s["file"], dtype, int(s["n_tokens"]), s["sha256"], verify)
            for s in meta["shards"]
        ]
        parts = [p for p in parts if len(p)]
        if not parts:
            tokens = np.zeros(0, dtype=dtype)
            tokens.flags.writeable = False
        elif len(parts) == 1:
            tokens = parts[0]
        else:
            tokens = ShardedTokenArray(parts)
    else:
        bin_path = folder / TOKENS_FILE
        if not bin_path.is_file():
            raise FileNotFoundError(
                f"{folder} is not a packed corpus (needs {META_FILE}, {TOKENS_FILE})"
            )
        tokens = _open_tokens(bin_path, dtype, int(meta["n_tokens"]), meta["sha256"], verify)
    return PackedTokens(
        tokens=tokens,
        vocab_size=int(meta["vocab_size"]),
        eos_token_id=int(meta["eos_token_id"]),
        checksum=meta["sha256"],
        meta=meta,
    )
