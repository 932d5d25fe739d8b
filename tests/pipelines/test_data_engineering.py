"""Tests of the data_engineering pipeline: nodes on fixtures, then a SequentialRunner run."""

from __future__ import annotations

import copy
import random
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
import yaml
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner

from ih_kedro.datasets.packed_tokens import PackedTokensDataset
from ih_kedro.datasets.pile_shards import PileShardsDataset
from ih_kedro.datasets.tokenizer import TokenizerDataset
from ih_kedro.pipelines.data_engineering import create_pipeline
from ih_kedro.pipelines.data_engineering.nodes import (
    deduplicate_documents,
    pack_tokens,
    split_documents,
    train_tokenizer,
)
from ih_kedro.science.data.corpus import BadInputError, DocumentSelection, DocumentStream
from ih_kedro.science.data.embedded_corpus import kjv_documents
from ih_kedro.science.data.sharded.packing import (
    ShardedPacking,
    concatenated_sha256,
    write_sharded_tokens,
)
from ih_kedro.science.data.split import is_held_out
from ih_kedro.science.data.tokenization import TokenChunks, write_packed_tokens

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def params() -> dict:
    path = PROJECT_ROOT / "conf" / "base" / "parameters_data_engineering.yml"
    p = copy.deepcopy(yaml.safe_load(path.read_text())["data_engineering"])
    p["tokenizer"]["vocab_size"] = 384
    p["held_out_fraction"] = 0.2
    p["max_bad_fraction"] = 0.05  # the corpus fixture has 1 bad record of 64
    return p


@pytest.fixture()
def corpus(tmp_path: Path) -> tuple[Path, list[str]]:
    """60 KJV chapters + one exact and one near duplicate + a bad line, in 2 shards."""
    texts = [d["text"] for d in islice(kjv_documents(), 60)]
    words = texts[10].split()
    for i in range(0, len(words), 60):
        words[i] = "behold"
    records = [{"text": t, "meta": {"pile_set_name": "KJV"}} for t in texts]
    records += [{"text": texts[5], "meta": {}}, {"text": " ".join(words), "meta": {}}]
    from ih_kedro.science.data.corpus import write_pile_shards

    folder = tmp_path / "raw"
    write_pile_shards(records, folder, docs_per_shard=40)
    (folder / "extra.jsonl").write_bytes(b'{"text": "a short extra document"}\n{"oops"\n')
    return folder, texts


def test_nodes_on_a_small_corpus(corpus, params: dict, tmp_path: Path) -> None:
    folder, texts = corpus
    stream = PileShardsDataset(path=str(folder)).load()
    dedup, report = deduplicate_documents(stream, params)
    assert report["documents_in"] == 63 and report["documents_out"] == 61
    assert report["exact_duplicates"]["documents_removed"] == 1
    assert report["near_duplicates"]["documents_removed"] == 1
    assert report["near_duplicates"]["examples"][0]["removed"] == ["shard_00001.jsonl.zst:22"]
    assert report["ingestion"]["bad_by_category"]["invalid_json"] == 1
    assert report["ingestion"]["bad_examples"]["invalid_json"] == [f"{folder / 'extra.jsonl'}:2"]
    all_texts = ["a short extra document", *texts]  # stream order: extra.jsonl sorts first
    n_val = sum(is_held_out(t, 0.2) for t in all_texts)
    assert report["split"]["validation_documents"] == n_val
    assert report["split"]["train_documents"] == 61 - n_val

    train, val = split_documents(dedup, params)
    assert sum(1 for _ in val) == n_val
    tokenizer = train_tokenizer(train, params)
    assert tokenizer.get_vocab_size() == 384
    packing = pack_tokens(val, tokenizer, params)
    assert isinstance(packing, ShardedPacking) and packing.meta["source"]["split"] == "validation"
    packed = write_sharded_tokens(packing, tmp_path / "val")
    eos = tokenizer.token_to_id("<|endoftext|>")
    tokens = np.asarray(packed.tokens)
    docs = [
        tokenizer.decode(d[:-1].tolist())
        for d in np.split(tokens, np.flatnonzero(tokens == eos) + 1)[:-1]
    ]
    assert docs == [t for t in all_texts if is_held_out(t, 0.2)]
    # Any other selection packs in one process into one tokens.bin.
    chunks = pack_tokens(
        DocumentSelection(val.stream, val.keep, "validation", 0.2), tokenizer, params
    )
    assert isinstance(chunks, TokenChunks)
    single = write_packed_tokens(chunks, tmp_path / "val1", 384, eos)
    # Same tokens, same order: the shards concatenated hash as the single file does.
    assert concatenated_sha256(packed) == single.checksum
    assert packed.checksum != single.checksum  # sharded: the digest of the shard digests


def test_bad_fraction_fails_the_run(corpus, params: dict) -> None:
    folder, _ = corpus
    params["max_bad_fraction"] = 0.01  # 1 bad of 64 records = 1.6%
    with pytest.raises(BadInputError, match=r"data_engineering.max_bad_fraction: 1 bad records"):
        deduplicate_documents(DocumentStream(sorted(folder.iterdir())), params)


def test_invalid_parameters_are_named(corpus, params: dict) -> None:
    folder, _ = corpus
    params["dedup"]["threshold"] = 1.5
    with pytest.raises(ValueError, match=r"data_engineering.dedup.threshold"):
        deduplicate_documents(DocumentStream(sorted(folder.iterdir())), params)


def test_existing_tokenizer_path_is_used(corpus, params: dict, tmp_path: Path) -> None:
    from ih_kedro.science.data.tokenization import train_bpe_tokenizer

    tok = train_bpe_tokenizer([random.Random(0).random().hex()] * 5, vocab_size=270)
    tok.save(str(tmp_path / "given.json"))
    params["tokenizer"]["path"] = str(tmp_path / "given.json")
    loaded = train_tokenizer([], params)
    assert loaded.to_str() == tok.to_str()  # loaded as is, nothing trained on []


def test_pipeline_runs_with_sequential_runner(corpus, params: dict, tmp_path: Path) -> None:
    folder, texts = corpus
    pipeline = create_pipeline()
    assert {n.name for n in pipeline.nodes} == {
        "deduplicate_documents",
        "split_train_validation",
        "train_tokenizer",
        "pack_train_tokens",
        "pack_validation_tokens",
    }
    assert pipeline.inputs() == {"raw_documents", "params:data_engineering"}
    assert pipeline.outputs() == {"train_tokens", "validation_tokens", "dedup_report"}
    assert "tokenizer" in pipeline.all_outputs()  # also consumed by the packing nodes

    out = tmp_path / "out"
    # A previous good output must survive or be replaced, never half-written.
    write_packed_tokens([np.array([1, 0])], out / "train_tokens", 384, 0)
    catalog = DataCatalog(
        datasets={
            "raw_documents": PileShardsDataset(path=str(folder)),
            "params:data_engineering": MemoryDataset(params),
            "deduplicated_documents": MemoryDataset(copy_mode="assign"),
            "train_documents": MemoryDataset(copy_mode="assign"),
            "validation_documents": MemoryDataset(copy_mode="assign"),
            "tokenizer": TokenizerDataset(filepath=str(out / "tokenizer.json")),
            "train_tokens": PackedTokensDataset(path=str(out / "train_tokens")),
            "validation_tokens": PackedTokensDataset(path=str(out / "validation_tokens")),
            "dedup_report": MemoryDataset(),
        }
    )
    SequentialRunner().run(pipeline, catalog)

    report = catalog["dedup_report"].load()
    assert report["documents_out"] == 61
    train = catalog["train_tokens"].load()
    val = catalog["validation_tokens"].load()
    tokenizer = catalog["tokenizer"].load()
    eos = tokenizer.token_to_id("<|endoftext|>")
    assert train.vocab_size == val.vocab_size == 384 and train.eos_token_id == eos
    assert train.meta["n_documents"] == report["split"]["train_documents"]
    assert val.meta["n_documents"] == report["split"]["validation_documents"]
    assert int(np.count_nonzero(np.asarray(train.tokens) == eos)) == train.meta["n_documents"]
    assert train.meta["source"]["split"] == "train" and train.tokens.dtype == np.uint16
    # Every kept training document round-trips, in stream order.
    tokens = np.asarray(train.tokens)
    docs = np.split(tokens, np.flatnonzero(tokens == eos) + 1)[:-1]
    expected = [t for t in ["a short extra document", *texts] if not is_held_out(t, 0.2)]
    assert [tokenizer.decode(d[:-1].tolist()) for d in docs] == expected
    assert train.sequences(64).shape[1] == 65


@pytest.mark.slow
def test_embedded_corpus_dedup_and_split_as_before(params: dict, tmp_path: Path) -> None:
    """The default corpus: all 1,189 KJV chapters kept, no duplicate, the 2% MD5 split."""
    params["held_out_fraction"] = 0.02
    stream = PileShardsDataset(path=str(tmp_path / "raw"), embedded_corpus="kjv").load()
    dedup, report = deduplicate_documents(stream, params)
    assert report["documents_in"] == report["documents_out"] == 1189
    assert report["exact_duplicates"]["documents_removed"] == 0
    assert report["near_duplicates"]["documents_removed"] == 0
    assert report["ingestion"]["documents_per_file"] == [300, 300, 300, 289]
    assert report["split"]["validation_documents"] == 40
    assert report["split"]["train_documents"] == 1149
    assert sum(is_held_out(d["text"], 0.02) for d in kjv_documents()) == 40
    assert np.asarray(dedup.keep).all()
