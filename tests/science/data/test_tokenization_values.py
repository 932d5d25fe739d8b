"""Value tests of ih_kedro.science.data.tokenization, written against the survivors of a mutmut run.

Expected bytes, digests and messages are computed here independently (numpy, hashlib, json),
and sharded corpora are written by hand, not through the sharded writer.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from itertools import islice
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from tokenizers import Tokenizer, processors

from ih_kedro.science.data import tokenization
from ih_kedro.science.data.corpus import Document
from ih_kedro.science.data.embedded_corpus import kjv_documents
from ih_kedro.science.data.packed import ShardedTokenArray
from ih_kedro.science.data.tokenization import (
    ChecksumError,
    TokenChunks,
    eos_token_id,
    load_tokenizer,
    pack_documents,
    read_packed_tokens,
    shards_checksum,
    token_dtype,
    train_bpe_tokenizer,
    write_packed_tokens,
    write_token_file,
)

SMALL_TEXTS = ["the cat sat on the mat", "the dog sat on the log", "a cat and a dog"] * 4


@pytest.fixture(scope="module")
def small_tokenizer():
    return train_bpe_tokenizer(SMALL_TEXTS, vocab_size=280)


# --------------------------------------------------------------------------- tokenizers


def test_train_bpe_vocab_size_and_max_documents_validation() -> None:
    assert train_bpe_tokenizer(["ab"], vocab_size=257).get_vocab_size() == 257
    with pytest.raises(ValueError) as info:
        train_bpe_tokenizer(["ab"], vocab_size=256)
    assert str(info.value) == (
        "data_engineering.tokenizer.vocab_size: must be >= 257 (256 bytes + 1 special tokens), "
        "got 256"
    )
    with pytest.raises(ValueError, match=r"must be >= 258 \(256 bytes \+ 2 special tokens\)"):
        train_bpe_tokenizer(["ab"], vocab_size=257, special_tokens=("<a>", "<b>"))
    for bad in (0, -1):
        with pytest.raises(ValueError) as info:
            train_bpe_tokenizer(["ab"], vocab_size=300, max_documents=bad)
        assert str(info.value) == (
            f"data_engineering.tokenizer.max_documents: must be positive, got {bad}"
        )
    assert train_bpe_tokenizer(["ab"], vocab_size=300, max_documents=1).get_vocab_size() >= 257


def test_train_bpe_max_documents_uses_only_the_first_texts() -> None:
    texts = ["qz qz qz qz qz", "jw jw jw jw jw"]
    first = train_bpe_tokenizer(iter(texts), vocab_size=300, max_documents=1).get_vocab()
    assert "qz" in first and "jw" not in first
    both = train_bpe_tokenizer(iter(texts), vocab_size=300).get_vocab()
    assert "qz" in both and "jw" in both


def test_train_bpe_min_frequency_default_is_2() -> None:
    # ByteLevel pre-tokenization: "xy xy" -> "xy", "Ġxy", so the pair (x, y) occurs twice.
    assert "xy" in train_bpe_tokenizer(["xy xy"], vocab_size=300).get_vocab()
    assert "xy" not in train_bpe_tokenizer(["xy"], vocab_size=300).get_vocab()
    assert "xy" in train_bpe_tokenizer(["xy"], vocab_size=300, min_frequency=1).get_vocab()
    assert "xy" not in train_bpe_tokenizer(["xy xy"], vocab_size=300, min_frequency=3).get_vocab()


def test_train_bpe_default_vocab_size_specials_and_alphabet() -> None:
    texts = [d["text"] for d in islice(kjv_documents(), 40)]
    tok = train_bpe_tokenizer(texts)
    assert tok.get_vocab_size() == 1024
    specials = train_bpe_tokenizer(["ab ab"], vocab_size=300, special_tokens=("<pad>", "<eos>"))
    assert specials.token_to_id("<pad>") == 0 and specials.token_to_id("<eos>") == 1
    assert specials.encode("ab<eos>ab").ids.count(1) == 1
    vocab = specials.get_vocab()
    assert all(ch in vocab for ch in tokenization.pre_tokenizers.ByteLevel.alphabet())
    assert not specials.encode("ab").tokens[0].startswith("\u0120")  # no prefix space


def test_load_tokenizer_and_eos_messages(small_tokenizer, tmp_path: Path) -> None:
    missing = tmp_path / "none.json"
    with pytest.raises(FileNotFoundError) as info:
        load_tokenizer(missing)
    assert str(info.value) == f"no tokenizer file at {missing}"
    with pytest.raises(ValueError) as info:
        eos_token_id(small_tokenizer, "<eos>")
    assert str(info.value) == (
        "data_engineering.tokenizer.eos_token: the tokenizer has no token '<eos>'"
    )
    assert eos_token_id(small_tokenizer) == 0


def test_token_dtype_lower_bound() -> None:
    assert token_dtype(1) == np.uint16
    for bad in (0, -3):
        with pytest.raises(ValueError) as info:
            token_dtype(bad)
        assert str(info.value) == f"vocab_size must be positive, got {bad}"


# --------------------------------------------------------------------------- packing


def test_pack_documents_values_and_batch_size(small_tokenizer) -> None:
    texts = ["the cat", "a dog sat", "mat"]
    chunks = list(pack_documents(texts, small_tokenizer, eos_token_id=0, batch_size=1))
    for chunk, text in zip(chunks, texts, strict=True):
        assert chunk.dtype == np.int64
        expected = small_tokenizer.encode(text, add_special_tokens=False).ids + [0]
        assert chunk.tolist() == expected
    for bad in (0, -2):
        with pytest.raises(ValueError) as info:
            list(pack_documents(texts, small_tokenizer, 0, batch_size=bad))
        assert str(info.value) == (
            f"data_engineering.packing.batch_size: must be positive, got {bad}"
        )


def test_pack_documents_adds_no_post_processor_tokens(small_tokenizer) -> None:
    tok = Tokenizer.from_str(small_tokenizer.to_str())
    tok.post_processor = processors.TemplateProcessing(
        single="$A <|endoftext|>", special_tokens=[("<|endoftext|>", 0)]
    )
    assert tok.encode("the cat").ids[-1] == 0  # the template would add an EOS itself
    (chunk,) = pack_documents(["the cat"], tok, eos_token_id=0)
    assert chunk.tolist() == tok.encode("the cat", add_special_tokens=False).ids + [0]
    assert chunk.tolist().count(0) == 1


def test_token_chunks_accepts_documents(small_tokenizer) -> None:
    docs = [Document(f"f:{i}", t, "S", "f", i, i) for i, t in enumerate(["the cat", "a dog"])]
    chunks = TokenChunks(docs, small_tokenizer, 0, 280, batch_size=1)
    got = [c.tolist() for c in chunks]
    assert got == [small_tokenizer.encode(d.text).ids + [0] for d in docs]


def test_write_token_file_bytes_digest_and_range(tmp_path: Path) -> None:
    path = tmp_path / "t.bin"
    result = write_token_file([np.array([1, 258]), np.array([3])], path, vocab_size=300)
    raw = b"\x01\x00\x02\x01\x03\x00"  # little-endian uint16
    assert result == (3, 2, hashlib.sha256(raw).hexdigest())
    assert path.read_bytes() == raw
    with pytest.raises(ValueError) as info:
        write_token_file([np.array([0, 16])], path, vocab_size=16)
    assert str(info.value) == "token ids must be in [0, 16), got [0, 16]"
    with pytest.raises(ValueError, match=r"^token ids must be in \[0, 16\), got \[-1, 3\]$"):
        write_token_file([np.array([-1, 3])], path, vocab_size=16)
    with pytest.raises(ValueError, match=r"^token chunks must be 1-D, got shape \(2, 2\)$"):
        write_token_file([np.zeros((2, 2), dtype=np.int64)], path, vocab_size=16)
    assert write_token_file([np.array([15])], path, vocab_size=16)[0] == 1


def test_write_token_file_flushes_at_the_buffer_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 100_000  # tokens; a flush writes 200 kB, more than the file object's buffer
    monkeypatch.setattr(tokenization, "_WRITE_BUFFER_TOKENS", limit)
    path = tmp_path / "t.bin"
    sizes: list[int] = []

    def chunks():
        for n in (limit - 1, 1, limit - 1, 1):
            sizes.append(path.stat().st_size)
            yield np.ones(n, dtype=np.int64)

    n_tokens, n_chunks, _ = write_token_file(chunks(), path, vocab_size=16)
    assert (n_tokens, n_chunks) == (2 * limit, 4)
    assert sizes == [0, 0, 2 * limit, 2 * limit]
    assert path.stat().st_size == 4 * limit


def _meta_text(meta: dict) -> str:
    return json.dumps(meta, indent=2, sort_keys=True) + "\n"


def test_write_packed_tokens_meta_file_exactly(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b" / "p"  # missing parents are created
    packed = write_packed_tokens(
        [np.array([1, 2, 0]), np.array([3, 0])],
        folder,
        vocab_size=16,
        eos_token_id=0,
        meta={"dtype": "bogus", "zzz": 1, "aaa": {"k": 2}},
    )
    raw = np.array([1, 2, 0, 3, 0], dtype="<u2").tobytes()
    expected = {
        "aaa": {"k": 2},
        "dtype": "uint16",
        "eos_token_id": 0,
        "format_version": 1,
        "n_documents": 2,
        "n_tokens": 5,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "vocab_size": 16,
        "zzz": 1,
    }
    assert (folder / "meta.json").read_text() == _meta_text(expected)
    assert packed.meta == expected and packed.checksum == expected["sha256"]
    assert packed.vocab_size == 16 and packed.eos_token_id == 0
    again = write_packed_tokens([np.array([4, 5])], tmp_path / "q", 16, 5, n_documents=7)
    assert again.meta["n_documents"] == 7 and again.eos_token_id == 5
    assert write_packed_tokens([np.array([15])], tmp_path / "r", 16, 15).eos_token_id == 15
    with pytest.raises(ValueError, match=r"^eos_token_id 16 outside \[0, 16\)$"):
        write_packed_tokens([np.array([1])], tmp_path / "s", 16, 16)
    with pytest.raises(ValueError, match=r"^eos_token_id -1 outside \[0, 16\)$"):
        write_packed_tokens([np.array([1])], tmp_path / "s", 16, -1)


def test_write_packed_tokens_replaces_an_existing_folder(tmp_path: Path) -> None:
    write_packed_tokens([np.array([1, 0])], tmp_path / "p", 16, 0)
    (tmp_path / "p" / "stale.txt").write_text("old")
    new = write_packed_tokens([np.array([2, 3, 0])], tmp_path / "p", 16, 0)
    assert new.tokens.tolist() == [2, 3, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["meta.json", "tokens.bin"]


def test_temporary_and_old_folder_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_packed_tokens([np.array([1, 0])], tmp_path / "p", 16, 0)
    seen: list[list[str]] = []

    def chunks():
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        yield np.array([2, 0])

    removed: list[tuple] = []
    monkeypatch.setattr(
        tokenization, "shutil", SimpleNamespace(rmtree=lambda *a, **k: removed.append((a, k)))
    )
    write_packed_tokens(chunks(), tmp_path / "p", 16, 0)
    pid = os.getpid()
    assert len(seen[0]) == 2 and seen[0][1] == "p"
    assert re.fullmatch(rf"\.p\.tmp-{pid}-[0-9a-f]{{8}}", seen[0][0])
    (old,) = [p for p in tmp_path.iterdir() if p.name != "p"]
    assert re.fullmatch(rf"\.p\.old-{pid}-[0-9a-f]{{8}}", old.name)
    assert np.fromfile(old / "tokens.bin", dtype="<u2").tolist() == [1, 0]
    assert removed == [((old,), {"ignore_errors": True})]


# --------------------------------------------------------------------------- reading


def _write_sharded(folder: Path, shards: list[list[int]], **overrides) -> dict:
    folder.mkdir(parents=True)
    entries = []
    for i, toks in enumerate(shards):
        raw = np.asarray(toks, dtype="<u2").tobytes()
        name = f"tokens_{i:05d}.bin"
        (folder / name).write_bytes(raw)
        entries.append(
            {"file": name, "n_tokens": len(toks), "sha256": hashlib.sha256(raw).hexdigest()}
        )
    digest_lines = "".join(e["sha256"] + "\n" for e in entries).encode()
    meta = {
        "dtype": "uint16",
        "n_tokens": sum(len(t) for t in shards),
        "vocab_size": 16,
        "eos_token_id": 0,
        "sha256": hashlib.sha256(digest_lines).hexdigest(),
        "shards": entries,
        **overrides,
    }
    (folder / "meta.json").write_text(json.dumps(meta))
    return meta


def test_shards_checksum_is_sha256_of_digest_lines() -> None:
    assert shards_checksum(["ab", "cd"]) == hashlib.sha256(b"ab\ncd\n").hexdigest()
    assert shards_checksum([]) == hashlib.sha256(b"").hexdigest()


def test_read_sharded_corpus_values(tmp_path: Path) -> None:
    meta = _write_sharded(tmp_path / "s", [[1, 2, 0], [], [3, 0]], eos_token_id=2)
    packed = read_packed_tokens(tmp_path / "s")
    assert isinstance(packed.tokens, ShardedTokenArray) and len(packed.tokens.parts) == 2
    assert np.asarray(packed.tokens).tolist() == [1, 2, 0, 3, 0]
    assert packed.tokens.dtype == np.uint16
    assert (packed.vocab_size, packed.eos_token_id) == (16, 2)
    assert packed.checksum == meta["sha256"] and packed.meta == meta
    _write_sharded(tmp_path / "one", [[], [5, 0]])
    one = read_packed_tokens(tmp_path / "one")
    assert isinstance(one.tokens, np.memmap) and one.tokens.tolist() == [5, 0]
    _write_sharded(tmp_path / "none", [[], []])
    empty = read_packed_tokens(tmp_path / "none")
    assert len(empty) == 0 and empty.tokens.dtype == np.uint16
    assert not empty.tokens.flags.writeable


def test_read_sharded_corpus_errors(tmp_path: Path) -> None:
    _write_sharded(tmp_path / "sum", [[1, 0]], sha256="0" * 64)
    with pytest.raises(ChecksumError) as info:
        read_packed_tokens(tmp_path / "sum")
    assert (
        str(info.value)
        == f"{tmp_path / 'sum' / 'meta.json'}: the shard digests do not match its sha256"
    )
    _write_sharded(tmp_path / "n", [[1, 0], [2]], n_tokens=4)
    with pytest.raises(ChecksumError) as info:
        read_packed_tokens(tmp_path / "n")
    assert str(info.value) == (
        f"{tmp_path / 'n' / 'meta.json'}: the shards' n_tokens do not add up to n_tokens"
    )
    _write_sharded(tmp_path / "bad", [[1, 0], [2, 3]])
    (tmp_path / "bad" / "tokens_00001.bin").write_bytes(np.array([2, 4], "<u2").tobytes())
    with pytest.raises(ChecksumError, match="SHA-256"):
        read_packed_tokens(tmp_path / "bad")
    assert np.asarray(read_packed_tokens(tmp_path / "bad", verify=False).tokens).tolist() == [
        1,
        0,
        2,
        4,
    ]
    _write_sharded(tmp_path / "gone", [[1, 0, 3]])
    (tmp_path / "gone" / "tokens_00000.bin").unlink()
    with pytest.raises(ChecksumError) as info:
        read_packed_tokens(tmp_path / "gone", verify=False)
    assert str(info.value) == (
        f"{tmp_path / 'gone' / 'tokens_00000.bin'}: -1 bytes, meta.json says 3 uint16 tokens "
        "(6 bytes); the file is missing, truncated or was replaced"
    )


def test_read_single_file_messages_and_empty_dtype(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        read_packed_tokens(tmp_path / "nothing")
    assert str(info.value) == f"{tmp_path / 'nothing'} is not a packed corpus (needs meta.json)"
    write_packed_tokens([np.array([1, 3])], tmp_path / "p", 16, 3)
    raw = (tmp_path / "p" / "tokens.bin").read_bytes()
    (tmp_path / "p" / "tokens.bin").write_bytes(raw[::-1])
    with pytest.raises(ChecksumError) as info:
        read_packed_tokens(tmp_path / "p")
    recorded = hashlib.sha256(raw).hexdigest()
    assert str(info.value) == (
        f"{tmp_path / 'p' / 'tokens.bin'}: SHA-256 {hashlib.sha256(raw[::-1]).hexdigest()} "
        f"does not match meta.json ({recorded}); "
        "the token file is corrupt: re-run the data_engineering pipeline"
    )
    (tmp_path / "p" / "tokens.bin").unlink()
    with pytest.raises(FileNotFoundError) as info:
        read_packed_tokens(tmp_path / "p")
    assert str(info.value) == (
        f"{tmp_path / 'p'} is not a packed corpus (needs meta.json, tokens.bin)"
    )
    empty = write_packed_tokens([], tmp_path / "e", 16, 0)
    assert empty.tokens.dtype == np.uint16 and not empty.tokens.flags.writeable
    assert read_packed_tokens(tmp_path / "e").tokens.dtype == np.uint16
