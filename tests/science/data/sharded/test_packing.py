"""Tests of sharded packing (ih_kedro.science.data.sharded.packing) and ShardedTokenArray."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path

import numpy as np
import pytest

from ih_kedro.datasets.packed_tokens import PackedTokensDataset
from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.corpus import DocumentSelection, DocumentStream, write_pile_shards
from ih_kedro.science.data.embedded_corpus import kjv_documents
from ih_kedro.science.data.packed import PackedTokens, ShardedTokenArray
from ih_kedro.science.data.sharded.executor import ExecutorSettings
from ih_kedro.science.data.sharded.packing import (
    ShardedPacking,
    concatenated_sha256,
    write_sharded_tokens,
)
from ih_kedro.science.data.split import is_held_out
from ih_kedro.science.data.tokenization import (
    ChecksumError,
    TokenChunks,
    read_packed_tokens,
    train_bpe_tokenizer,
    write_packed_tokens,
)


def test_sharded_token_array_indexes_like_one_array() -> None:
    rng = np.random.default_rng(0)
    parts = [rng.integers(0, 500, size=n).astype(np.uint16) for n in (7, 1, 30, 12)]
    whole = np.concatenate(parts)
    view = ShardedTokenArray(parts)
    assert len(view) == view.shape[0] == 50 and view.dtype == np.uint16
    assert view[0] == whole[0] and view[7] == whole[7] and view[-1] == whole[-1]
    for a, b in [(0, 50), (5, 9), (7, 8), (6, 45), (40, 40), (8, 38)]:
        assert np.array_equal(view[a:b], whole[a:b])
    assert np.array_equal(view[::3], whole[::3])
    index = rng.integers(0, 50, size=(4, 9))  # (B, C+1) windows, as training draws them
    assert np.array_equal(view[index], whole[index]) and view[index].shape == (4, 9)
    assert np.array_equal(np.asarray(view), whole)
    assert np.array_equal(np.concatenate(list(view.iter_chunks(4))), whole)
    with pytest.raises(IndexError):
        view[50]
    with pytest.raises(IndexError):
        view[np.array([0, 51])]
    # Training's sampler and the sequence view work on it unchanged.
    packed = PackedTokens(tokens=view, vocab_size=500, eos_token_id=0)
    batch = sample_batch(view, 3, 8, seed=1, step=0)
    assert np.array_equal(batch.tokens.numpy(), sample_batch(whole, 3, 8, seed=1, step=0).tokens)
    assert np.array_equal(packed.sequences(9), whole[:50].reshape(5, 10))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("pack")
    texts = [d["text"][:2000] for d in islice(kjv_documents(), 40)]
    paths = write_pile_shards(
        ({"text": t} for t in texts), folder / "raw", docs_per_shard=9, compress=True
    )
    tokenizer = train_bpe_tokenizer(texts, vocab_size=400)
    return paths, texts, tokenizer, folder


def _packing(paths, tokenizer, keep, split, tasks: int) -> ShardedPacking:
    counts = [9, 9, 9, 9, 4]
    return ShardedPacking(
        paths=[str(p) for p in paths],
        file_offsets=np.concatenate([[0], np.cumsum(counts)[:-1]]).tolist(),
        keep=keep,
        split=split,
        held_out_fraction=0.3,
        tokenizer_json=tokenizer.to_str(),
        eos_token_id=0,
        vocab_size=tokenizer.get_vocab_size(),
        batch_size=4,
        executor=ExecutorSettings(tasks=tasks),
        meta={"source": {"split": split}},
    )


def test_sharded_packing_is_the_single_file_stream_for_any_task_count(corpus) -> None:
    paths, texts, tokenizer, folder = corpus
    keep = np.ones(40, dtype=bool)
    keep[[3, 17, 18, 39]] = False
    one = write_sharded_tokens(_packing(paths, tokenizer, keep, "train", 1), folder / "t1")
    three = write_sharded_tokens(_packing(paths, tokenizer, keep, "train", 3), folder / "t3")
    meta1 = json.loads((folder / "t1" / "meta.json").read_text())
    meta3 = json.loads((folder / "t3" / "meta.json").read_text())
    assert meta1["tasks"] == 1 and meta3["tasks"] == 3
    assert meta1["shards"] == meta3["shards"] and one.checksum == three.checksum
    assert [s["file"] for s in meta1["shards"]] == [f"tokens_{i:05d}.bin" for i in range(5)]
    assert isinstance(one.tokens, ShardedTokenArray) and len(one.tokens.parts) == 5

    # The same documents packed by the single-process writer: same tokens, same order.
    stream = DocumentStream(paths)
    selection = DocumentSelection(stream, keep, "train", 0.3)
    single = write_packed_tokens(
        TokenChunks(selection, tokenizer, 0, tokenizer.get_vocab_size()),
        folder / "single",
        tokenizer.get_vocab_size(),
        0,
    )
    assert concatenated_sha256(one) == single.checksum
    assert np.array_equal(np.asarray(one.tokens), np.asarray(single.tokens))
    expected = [t for i, t in enumerate(texts) if keep[i] and not is_held_out(t, 0.3)]
    assert one.meta["n_documents"] == len(expected)
    tokens = np.asarray(one.tokens)
    docs = np.split(tokens, np.flatnonzero(tokens == 0) + 1)[:-1]
    assert [tokenizer.decode(d[:-1].tolist()) for d in docs] == expected


def test_sharded_corpus_checksums_are_verified(corpus) -> None:
    paths, _, tokenizer, folder = corpus
    out = folder / "v"
    write_sharded_tokens(_packing(paths, tokenizer, None, "all", 2), out)
    assert len(read_packed_tokens(out, verify=True)) > 0
    shard = out / "tokens_00002.bin"
    raw = bytearray(shard.read_bytes())
    raw[10] ^= 0xFF
    shard.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError, match="tokens_00002.bin: SHA-256"):
        read_packed_tokens(out, verify=True)
    shard.write_bytes(bytes(raw[:-2]))
    with pytest.raises(ChecksumError, match="tokens_00002.bin: .* truncated"):
        read_packed_tokens(out, verify=False)


def test_packing_validates(corpus, tmp_path: Path) -> None:
    paths, _, tokenizer, _ = corpus
    bad = _packing(paths, tokenizer, None, "all", 1)
    bad.file_offsets = [0]
    with pytest.raises(ValueError, match="one file offset per input file"):
        write_sharded_tokens(bad, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_a_sharded_corpus_copies_to_a_single_file_one(corpus) -> None:
    # An experiment that keeps the tokenizer's vocabulary (vocabulary.compact: false) saves the
    # sharded stream it read as its own single-file copy: the shards' layout must not travel
    # into the copy's meta.json, whose sha256 is the single file's (it did: ChecksumError).
    paths, _, tokenizer, folder = corpus
    sharded = write_sharded_tokens(_packing(paths, tokenizer, None, "all", 2), folder / "sh")
    PackedTokensDataset(str(folder / "copy")).save(read_packed_tokens(folder / "sh"))
    copy = read_packed_tokens(folder / "copy", verify=True)
    np.testing.assert_array_equal(np.asarray(copy.tokens), np.asarray(sharded.tokens))
    meta = json.loads((folder / "copy" / "meta.json").read_text())
    assert not {"shards", "tasks", "checksum"} & set(meta)
    assert meta["source"] == {"split": "all"} and meta["n_tokens"] == len(sharded)
