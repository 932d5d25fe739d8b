"""Tests of the data-engineering Kedro datasets: shards, tokenizer, packed tokens."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from kedro.io import DatasetError
from tokenizers import Tokenizer

from ih_kedro.datasets.packed_tokens import PackedTokensDataset
from ih_kedro.datasets.pile_shards import PileShardsDataset
from ih_kedro.datasets.tokenizer import TokenizerDataset
from ih_kedro.science.data.corpus import DocumentStream, write_pile_shards
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.tokenization import TokenChunks, train_bpe_tokenizer


def test_pile_shards_loads_a_lazy_stream(tmp_path: Path) -> None:
    write_pile_shards(
        ({"text": f"doc {i}", "meta": {"pile_set_name": "P"}} for i in range(5)),
        tmp_path / "c",
        docs_per_shard=2,
    )
    (tmp_path / "c" / "notes.txt").write_text("not a shard")
    ds = PileShardsDataset(path=str(tmp_path / "c"))
    assert ds.exists()
    stream = ds.load()
    assert isinstance(stream, DocumentStream) and len(stream.paths) == 3
    assert [d.text for d in stream] == [f"doc {i}" for i in range(5)]
    assert "PileShardsDataset" in repr(ds)


def test_pile_shards_embedded_kjv_is_materialised_once(tmp_path: Path) -> None:
    folder = tmp_path / "raw"
    ds = PileShardsDataset(path=str(folder), embedded_corpus="kjv")
    assert not ds.exists()
    stream = ds.load()
    names = sorted(p.name for p in folder.iterdir())
    assert names == [f"kjv_0000{i}.jsonl.zst" for i in range(4)]
    assert sum(1 for _ in stream) == 1189
    mtimes = [p.stat().st_mtime_ns for p in sorted(folder.iterdir())]
    ds.load()  # shards exist now: nothing is rewritten
    assert [p.stat().st_mtime_ns for p in sorted(folder.iterdir())] == mtimes


def test_pile_shards_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no shard matching"):
        PileShardsDataset(path=str(tmp_path)).load()
    with pytest.raises(DatasetError, match="embedded_corpus"):
        PileShardsDataset(path=str(tmp_path), embedded_corpus="wiki")
    (tmp_path / "bad.jsonl").write_bytes(b'{"text": "ok"}\n{broken\n')
    stream = PileShardsDataset(path=str(tmp_path), max_bad_fraction=0.1).load()
    with pytest.raises(ValueError, match="max_bad_fraction: 1 bad records of 2"):
        list(stream)


def test_pile_shards_save(tmp_path: Path) -> None:
    ds = PileShardsDataset(path=str(tmp_path / "out"), docs_per_shard=3)
    ds.save([{"text": f"t{i}", "meta": {"pile_set_name": "S"}} for i in range(7)])
    assert [d.text for d in ds.load()] == [f"t{i}" for i in range(7)]
    with pytest.raises(DatasetError, match="already holds"):
        ds.save([{"text": "again"}])


def test_tokenizer_dataset_round_trip(tmp_path: Path) -> None:
    tok = train_bpe_tokenizer(["hello world, hello there"] * 20, vocab_size=300)
    ds = TokenizerDataset(filepath=str(tmp_path / "m" / "tokenizer.json"))
    assert not ds.exists()
    ds.save(tok)
    loaded = ds.load()
    assert isinstance(loaded, Tokenizer)
    assert loaded.encode("hello world").ids == tok.encode("hello world").ids
    assert [p.name for p in (tmp_path / "m").iterdir()] == ["tokenizer.json"]


def test_packed_tokens_dataset_streams_chunks_and_verifies(tmp_path: Path) -> None:
    tok = train_bpe_tokenizer(["the cat sat on the mat"] * 30, vocab_size=280)
    eos = tok.token_to_id("<|endoftext|>")
    chunks = TokenChunks(["the cat", "sat on the mat", "mat"], tok, eos, 280, meta={"k": 1})
    ds = PackedTokensDataset(path=str(tmp_path / "tokens"))
    ds.save(chunks)
    packed = ds.load()
    assert isinstance(packed, PackedTokens) and isinstance(packed.tokens, np.memmap)
    assert packed.meta["n_documents"] == 3 and packed.meta["k"] == 1
    assert tok.decode(packed.tokens.tolist(), skip_special_tokens=False).count("<|endoftext|>") == 3
    # Re-saving a loaded PackedTokens elsewhere keeps tokens, checksum and document count.
    copy = PackedTokensDataset(path=str(tmp_path / "copy"))
    copy.save(packed)
    again = copy.load()
    assert again.checksum == packed.checksum and again.meta["n_documents"] == 3
    # Corruption is a DatasetError naming the checksum.
    bin_path = tmp_path / "tokens" / "tokens.bin"
    raw = bytearray(bin_path.read_bytes())
    raw[0] ^= 1
    bin_path.write_bytes(bytes(raw))
    with pytest.raises(DatasetError, match="SHA-256"):
        ds.load()
    with pytest.raises(DatasetError, match="saves PackedTokens or TokenChunks"):
        ds.save([1, 2, 3])
    meta = json.loads((tmp_path / "copy" / "meta.json").read_text())
    assert meta["sha256"] == packed.checksum
