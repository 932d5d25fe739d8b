"""Tests of ih_kedro.science.data.tokenization: BPE training, packing, the token memmap."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path

import numpy as np
import pytest

from ih_kedro.science.data.embedded_corpus import kjv_documents
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.tokenization import (
    EOS_TOKEN,
    ChecksumError,
    TokenChunks,
    eos_token_id,
    load_tokenizer,
    pack_documents,
    read_packed_tokens,
    token_dtype,
    train_bpe_tokenizer,
    write_packed_tokens,
)


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return [d["text"] for d in islice(kjv_documents(), 40)]


@pytest.fixture(scope="module")
def tokenizer(texts: list[str]):
    return train_bpe_tokenizer(iter(texts), vocab_size=512)


def test_train_bpe_tokenizer(tokenizer, texts: list[str], tmp_path: Path) -> None:
    assert tokenizer.get_vocab_size() == 512
    assert eos_token_id(tokenizer) == 0  # specials come first
    text = texts[3]
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    assert tokenizer.decode(ids) == text
    # BPE merges compress: ~2.5 bytes/token at vocab 512 on 40 chapters (1.0 = bytes only).
    assert len(ids) < len(text.encode()) / 2.2
    # Byte fallback: any text encodes and decodes exactly, even unseen scripts.
    odd = "Zürich — 東京 🙂 tab\there"
    assert tokenizer.decode(tokenizer.encode(odd).ids) == odd
    tokenizer.save(str(tmp_path / "tok.json"))
    again = load_tokenizer(tmp_path / "tok.json")
    assert again.encode(text).ids == ids


def test_train_rejects_too_small_vocab(texts: list[str]) -> None:
    with pytest.raises(ValueError, match=r"tokenizer.vocab_size: must be >= 257"):
        train_bpe_tokenizer(texts, vocab_size=200)
    with pytest.raises(FileNotFoundError):
        load_tokenizer("/nonexistent/tokenizer.json")


def test_pack_documents_joins_with_eos(tokenizer, texts: list[str]) -> None:
    chunks = list(pack_documents(texts[:5], tokenizer, eos_token_id=0, batch_size=2))
    assert len(chunks) == 5
    for chunk, text in zip(chunks, texts[:5], strict=True):
        assert chunk[-1] == 0 and 0 not in chunk[:-1]
        assert tokenizer.decode(chunk[:-1].tolist()) == text


def test_packing_round_trip(tokenizer, texts: list[str], tmp_path: Path) -> None:
    eos = eos_token_id(tokenizer)
    chunks = TokenChunks(texts[:10], tokenizer, eos, tokenizer.get_vocab_size(), batch_size=3,
                         meta={"source": {"split": "train"}})  # fmt: skip
    packed = write_packed_tokens(chunks, tmp_path / "train", 512, eos, meta=chunks.meta)
    assert isinstance(packed, PackedTokens)
    assert isinstance(packed.tokens, np.memmap) and packed.tokens.dtype == np.uint16
    assert not packed.tokens.flags.writeable
    meta = json.loads((tmp_path / "train" / "meta.json").read_text())
    assert meta["n_documents"] == 10 and meta["n_tokens"] == len(packed)
    assert meta["vocab_size"] == 512 and meta["eos_token_id"] == eos and meta["dtype"] == "uint16"
    assert meta["source"] == {"split": "train"}
    assert (tmp_path / "train" / "tokens.bin").stat().st_size == 2 * len(packed)
    loaded = read_packed_tokens(tmp_path / "train")
    assert loaded.checksum == meta["sha256"] and len(loaded.checksum) == 64
    tokens = np.asarray(loaded.tokens)
    assert int((tokens == eos).sum()) == 10
    # Splitting at EOS gives back every document exactly.
    bounds = np.flatnonzero(tokens == eos)
    docs = np.split(tokens, bounds + 1)[:-1]
    decoded = [tokenizer.decode(d[:-1].tolist()) for d in docs]
    assert decoded == texts[:10]
    # The lazy chunks are re-iterable: writing twice gives the same bytes.
    again = write_packed_tokens(chunks, tmp_path / "again", 512, eos)
    assert again.checksum == loaded.checksum


def test_corrupted_bin_is_detected(tmp_path: Path) -> None:
    chunks = [np.arange(10, dtype=np.int64), np.array([3, 1, 0])]
    write_packed_tokens(chunks, tmp_path / "p", vocab_size=16, eos_token_id=0)
    raw = bytearray((tmp_path / "p" / "tokens.bin").read_bytes())
    raw[4] ^= 0xFF
    (tmp_path / "p" / "tokens.bin").write_bytes(bytes(raw))
    with pytest.raises(ChecksumError, match="SHA-256 .* does not match"):
        read_packed_tokens(tmp_path / "p")
    # Without verification it opens (the caller chose speed).
    assert len(read_packed_tokens(tmp_path / "p", verify=False)) == 13
    (tmp_path / "p" / "tokens.bin").write_bytes(bytes(raw[:-2]))
    with pytest.raises(ChecksumError, match="truncated"):
        read_packed_tokens(tmp_path / "p", verify=False)


def test_failed_write_keeps_the_previous_output(tmp_path: Path) -> None:
    good = write_packed_tokens([np.array([1, 2, 0])], tmp_path / "p", 16, 0)

    def failing():
        yield np.array([5, 6, 0])
        raise RuntimeError("tokenizer crashed")

    with pytest.raises(RuntimeError, match="crashed"):
        write_packed_tokens(failing(), tmp_path / "p", 16, 0)
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 16\)"):
        write_packed_tokens([np.array([1, 99])], tmp_path / "p", 16, 0)
    kept = read_packed_tokens(tmp_path / "p")
    assert kept.checksum == good.checksum and kept.tokens.tolist() == [1, 2, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]  # no temp folders left


def test_dtype_and_empty_corpus(tmp_path: Path) -> None:
    assert token_dtype(1024) == np.uint16 and token_dtype(65_536) == np.uint16
    assert token_dtype(65_537) == np.uint32
    big = write_packed_tokens([np.array([70_000, 1])], tmp_path / "big", 100_000, 1)
    assert big.tokens.dtype == np.uint32 and big.tokens.tolist() == [70_000, 1]
    empty = write_packed_tokens([], tmp_path / "empty", 16, 0)
    assert len(empty) == 0 and empty.meta["n_documents"] == 0
    assert EOS_TOKEN == "<|endoftext|>"
