"""Nodes of the ``data_engineering`` pipeline: pure functions over lazy document streams.

``raw_documents`` is a lazy ``DocumentStream`` (the catalog's ``PileShardsDataset``).
Deduplication runs datatrove's sharded stages over its files (their intermediate files live in
``work_dir``, a temporary folder by default); the nodes return lazy selections of the stream
and a lazy ``TokenChunks``
that ``PackedTokensDataset`` tokenizes while it writes, so no corpus is held in memory.
The shards are read once per consumer: dedup, tokenizer training, and each packing. No pass
can be dropped without holding documents in memory: a near-duplicate's keep decision can
change until the dedup pass ends (a later document may join two clusters), the tokenizer must
exist before packing, and Kedro saves the two packed outputs one after the other.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from ih_kedro.science.data.corpus import BadInputError, DocumentSelection, DocumentStream
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.sharded.dedup import ShardedSelection, sharded_deduplicate
from ih_kedro.science.data.sharded.executor import ExecutorSettings
from ih_kedro.science.data.sharded.packing import ShardedPacking, sharded_packing_from_selection
from ih_kedro.science.data.tokenization import (
    EOS_TOKEN,
    TokenChunks,
    eos_token_id,
    load_tokenizer,
    train_bpe_tokenizer,
)
from ih_kedro.science.data.vocabulary import compact_vocabulary, relabel

logger = logging.getLogger(__name__)

#: Fewer validation documents than this get a warning: too few for perplexity or ICL.
MIN_VALIDATION_DOCUMENTS = 10


def _held_out_fraction(params: dict[str, Any]) -> float:
    fraction = float(params["held_out_fraction"])
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"data_engineering.held_out_fraction: must be in [0, 1), got {fraction}")
    return fraction


def _dedup_params(params: dict[str, Any]) -> dict[str, Any]:
    dedup = dict(params.get("dedup", {}))
    checks = {
        "num_perm": lambda v: int(v) > 0,
        "threshold": lambda v: 0.0 < float(v) < 1.0,
        "shingle_size": lambda v: int(v) > 0,
        "false_negative_weight": lambda v: 0.0 < float(v) < 1.0,
        "max_examples": lambda v: int(v) >= 0,
        # a YAML string "false" is truthy: only a real boolean switches near dedup
        "near": lambda v: isinstance(v, bool),
        "seed": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    }
    unknown = sorted(set(dedup) - set(checks))
    if unknown:
        raise ValueError(
            f"data_engineering.dedup: unknown keys {unknown}; expected some of {sorted(checks)}"
        )
    for key, ok in checks.items():
        if key in dedup and not ok(dedup[key]):
            raise ValueError(f"data_engineering.dedup.{key}: invalid value {dedup[key]!r}")
    return dedup


def deduplicate_documents(
    raw_documents: DocumentStream, params: dict[str, Any]
) -> tuple[DocumentSelection, dict[str, Any]]:
    """Exact + MinHash near deduplication of the raw corpus on datatrove's sharded stages.

    Runs :func:`~ih_kedro.science.data.sharded.dedup.sharded_deduplicate` over the stream's shard
    files with the executor of ``executor`` (local, one task per core, by default; Ray or
    Slurm for a cluster). The ingestion counts of every task are merged into the report.

    Args:
        raw_documents: The shards, as a re-iterable ``DocumentStream``.
        params: ``params:data_engineering`` (``dedup.*``, ``executor.*``, ``work_dir``,
            ``max_bad_fraction``, ``held_out_fraction``).

    Returns:
        ``(deduplicated_documents, dedup_report)``: a lazy selection of the kept documents
        (a ``keep`` mask by ordinal over the stream) and a JSON-ready report: documents and
        bytes in/out, exact duplicates, near-duplicate clusters, bad records by category,
        the train/validation split sizes, the parameters (MinHash seed included) and the
        engine (executor, tasks, LSH bands, stage wall times).

    Raises:
        BadInputError: The share of bad records exceeds ``max_bad_fraction``.
    """
    if not isinstance(raw_documents, DocumentStream):
        raise TypeError(
            f"raw_documents must be a DocumentStream (PileShardsDataset), got "
            f"{type(raw_documents).__name__}"
        )
    dedup = _dedup_params(params)
    fraction = _held_out_fraction(params)
    settings = ExecutorSettings.from_params(params.get("executor"))
    work_dir = params.get("work_dir")
    with tempfile.TemporaryDirectory(prefix="ih_dedup_") as tmp:
        keep, report = sharded_deduplicate(
            raw_documents.paths,
            Path(work_dir) if work_dir else Path(tmp) / "work",
            **dedup,
            executor=settings,
            held_out_fraction=fraction,
            max_bad_fraction=params.get("max_bad_fraction"),
            max_bad_fraction_name="data_engineering.max_bad_fraction",
        )
        if not work_dir:
            keep = np.array(keep)  # the temporary folder goes away
    if raw_documents.max_bad_fraction is not None:
        if report["ingestion"]["bad_fraction"] > raw_documents.max_bad_fraction:
            raise BadInputError(
                f"max_bad_fraction: {report['ingestion']['bad_total']} bad records exceed the "
                f"dataset's allowed {raw_documents.max_bad_fraction:.4%}"
            )
    n_validation = report["split"]["validation_documents"]
    if n_validation < MIN_VALIDATION_DOCUMENTS:
        logger.warning(
            "data_engineering.held_out_fraction=%g leaves %d validation documents of %d: too "
            "few for validation perplexity or ICL scores",
            fraction,
            n_validation,
            report["documents_out"],
        )
    logger.info(
        "dedup (datatrove, %s executor, %d tasks): %d documents in, %d out (%d exact, %d near "
        "duplicates removed)",
        settings.kind,
        report["engine"]["tasks"],
        report["documents_in"],
        report["documents_out"],
        report["exact_duplicates"]["documents_removed"],
        report["near_duplicates"]["documents_removed"],
    )
    per_file = report["ingestion"]["documents_per_file"]
    return ShardedSelection(raw_documents, keep, documents_per_file=per_file), report


def split_documents(
    deduplicated_documents: DocumentSelection, params: dict[str, Any]
) -> tuple[DocumentSelection, DocumentSelection]:
    """The train and validation splits: a document is held out when the MD5 of its text
    falls below ``held_out_fraction`` (stable across runs and shard orders).

    Returns:
        ``(train_documents, validation_documents)``, lazy selections.
    """
    fraction = _held_out_fraction(params)
    return (
        deduplicated_documents.with_split("train", fraction),
        deduplicated_documents.with_split("validation", fraction),
    )


def train_tokenizer(train_documents: DocumentSelection, params: dict[str, Any]) -> Tokenizer:
    """A byte-level BPE tokenizer trained on the training split, or the ``tokenizer.json``
    at ``tokenizer.path`` when that is set (then nothing is trained).

    Uses ``tokenizer.vocab_size``, ``tokenizer.special_tokens``, ``tokenizer.min_frequency``,
    ``tokenizer.max_documents`` (the first N training documents; ``null``: all).
    """
    cfg = params["tokenizer"]
    eos = cfg.get("eos_token", EOS_TOKEN)
    if cfg.get("path"):
        tokenizer = load_tokenizer(cfg["path"])
        logger.info("using the existing tokenizer %s", cfg["path"])
    else:
        special_tokens = list(cfg.get("special_tokens", [EOS_TOKEN]))
        if eos not in special_tokens:
            raise ValueError(
                f"data_engineering.tokenizer.special_tokens: must contain the eos_token {eos!r}"
            )
        tokenizer = train_bpe_tokenizer(
            (doc.text for doc in train_documents),
            vocab_size=int(cfg["vocab_size"]),
            special_tokens=special_tokens,
            min_frequency=int(cfg.get("min_frequency", 2)),
            max_documents=cfg.get("max_documents"),
        )
    eos_token_id(tokenizer, eos)  # fail here, not while packing, when EOS is missing
    return tokenizer


def pack_tokens(
    documents: DocumentSelection, tokenizer: Tokenizer, params: dict[str, Any]
) -> ShardedPacking | TokenChunks:
    """The documents tokenized and joined with EOS, written by ``PackedTokensDataset``.

    For the deduplicated stream (a ``ShardedSelection``) this is a lazy ``ShardedPacking``:
    encoding runs in parallel tasks (``executor``), one token shard per input shard file,
    identical for any number of tasks. For any other selection, a lazy ``TokenChunks``
    (one process, one ``tokens.bin``). Both stream: no corpus is held in memory.

    The metadata records the split, the held-out fraction, the corpus path and the
    tokenizer's vocabulary size.
    """
    cfg = params["tokenizer"]
    eos = cfg.get("eos_token", EOS_TOKEN)
    stream = documents.stream
    meta = {
        "source": {
            "corpus": getattr(stream, "description", type(stream).__name__),
            "split": documents.split,
            "held_out_fraction": documents.held_out_fraction,
            "deduplicated": documents.keep is not None,
            "tokenizer": cfg.get("path") or "trained byte-level BPE",
        }
    }
    batch_size = int(params.get("packing", {}).get("batch_size", 256))
    if batch_size <= 0:
        raise ValueError(f"data_engineering.packing.batch_size: must be positive, got {batch_size}")
    if isinstance(documents, ShardedSelection):
        return sharded_packing_from_selection(
            documents,
            tokenizer,
            eos_token_id(tokenizer, eos),
            batch_size,
            ExecutorSettings.from_params(params.get("executor")),
            meta,
            documents.documents_per_file,
        )
    return TokenChunks(
        texts=documents,
        tokenizer=tokenizer,
        eos_token_id=eos_token_id(tokenizer, eos),
        vocab_size=tokenizer.get_vocab_size(),
        batch_size=batch_size,
        meta=meta,
    )


def compact_token_streams(
    train_tokens: PackedTokens, validation_tokens: PackedTokens, params: dict[str, Any]
) -> tuple[PackedTokens, PackedTokens]:
    """Both streams in the experiment's model vocabulary (``params:<experiment>.vocabulary``).

    ``compact: true``: the ``size`` most frequent training tokens, one id for every other type
    and EOS (:mod:`ih_kedro.science.data.vocabulary`): models of the synthetic experiments train on
    data that emits only those tokens, and their unembedding shrinks to ``size + 2`` rows.
    ``compact: false``: the streams as they are (the tokenizer's vocabulary).
    """
    if not params.get("compact", False):
        return train_tokens, validation_tokens
    size = params.get("size")
    if not isinstance(size, int) or isinstance(size, bool):
        raise ValueError(f"vocabulary.size: must be an integer with compact: true, got {size!r}")
    vocabulary = compact_vocabulary(train_tokens, size)
    logger.info(
        "compact vocabulary: %d of %d token types (+ other, EOS)",
        vocabulary.size,
        train_tokens.vocab_size,
    )
    return relabel(train_tokens, vocabulary), relabel(validation_tokens, vocabulary)
