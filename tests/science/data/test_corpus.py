"""Tests of ih_kedro.science.data.corpus: ingestion, bad input, writing shards, selections."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import numpy as np
import pytest
import zstandard

from ih_kedro.science.data.corpus import (
    BadInputError,
    DocumentSelection,
    DocumentStream,
    IngestionStats,
    find_shards,
    iter_pile_documents,
    write_pile_shards,
)
from ih_kedro.science.data.split import is_held_out

WORDS = (
    "river stone light garden window harbor silver market winter engine paper forest "
    "candle bridge mirror village thunder basket orchard lantern meadow copper falcon "
    "signal ladder marble canyon velvet compass glacier tunnel shadow beacon harvest"
).split()


def random_text(rng: random.Random, n_words: int = 120) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def record(text: str, set_name: str = "Test") -> dict:
    return {"text": text, "meta": {"pile_set_name": set_name}}


def write_jsonl(path: Path, lines: list[bytes], compress: bool) -> Path:
    payload = b"".join(line + b"\n" for line in lines)
    if compress:
        payload = zstandard.ZstdCompressor().compress(payload)
    path.write_bytes(payload)
    return path


def test_reads_jsonl_and_zst_shards(tmp_path: Path) -> None:
    recs = [record(f"document number {i} says hello", "A" if i % 2 else "B") for i in range(7)]
    lines = [json.dumps(r).encode() for r in recs]
    write_jsonl(tmp_path / "a.jsonl", lines[:3], compress=False)
    write_jsonl(tmp_path / "b.jsonl.zst", lines[3:], compress=True)
    paths = find_shards(tmp_path, ["*.jsonl", "*.jsonl.zst"])
    assert [p.name for p in paths] == ["a.jsonl", "b.jsonl.zst"]
    stream = DocumentStream(paths)
    docs = list(stream)
    assert [d.text for d in docs] == [r["text"] for r in recs]
    assert [d.ordinal for d in docs] == list(range(7))
    assert docs[0].doc_id == "a.jsonl:1" and docs[4].doc_id == "b.jsonl.zst:2"
    assert docs[4].line == 2 and docs[1].pile_set_name == "A"
    assert stream.stats.documents == 7 and stream.stats.n_bad == 0
    assert stream.stats.by_set == {"A": 3, "B": 4}
    # Re-iterable: a second pass gives the same documents and fresh counts.
    assert [d.doc_id for d in stream] == [d.doc_id for d in docs]
    assert stream.stats.documents == 7


def test_multi_frame_zst_is_read_whole(tmp_path: Path) -> None:
    c = zstandard.ZstdCompressor()
    a = c.compress(json.dumps(record("first frame text")).encode() + b"\n")
    b = c.compress(json.dumps(record("second frame text")).encode() + b"\n")
    (tmp_path / "m.jsonl.zst").write_bytes(a + b)
    docs = list(iter_pile_documents([tmp_path / "m.jsonl.zst"]))
    assert [d.text for d in docs] == ["first frame text", "second frame text"]


def test_bad_records_are_counted_named_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = [json.dumps(record(f"good document {i}")).encode() for i in range(6)]
    lines = [
        good[0],
        b'{"text": "unterminated',  # line 2: invalid JSON
        json.dumps({"meta": {"pile_set_name": "X"}}).encode(),  # line 3: missing text
        json.dumps(record("   \n\t ")).encode(),  # line 4: whitespace only
        b'{"text": "caf\xe9 latin-1"}',  # line 5: not UTF-8
        good[1],
        json.dumps({"text": 42}).encode(),  # line 7: text not a string
    ]
    write_jsonl(tmp_path / "bad.jsonl", lines, compress=False)
    # A truncated .zst shard: its readable prefix is kept, the documents after the cut are bad
    # records (estimated: test_a_truncated_shard_counts_the_documents_it_lost_as_an_estimate).
    # ~520 kB, several 128 kB zstd blocks, so the first half still decodes to whole lines.
    many = [json.dumps(record(random_text(random.Random(i), 200))).encode() for i in range(400)]
    full = zstandard.ZstdCompressor().compress(b"".join(x + b"\n" for x in many))
    (tmp_path / "trunc.jsonl.zst").write_bytes(full[: len(full) // 2])
    (tmp_path / "garbage.jsonl.zst").write_bytes(b"this is not zstd at all")

    stats = IngestionStats()
    paths = [tmp_path / "bad.jsonl", tmp_path / "garbage.jsonl.zst", tmp_path / "trunc.jsonl.zst"]
    with caplog.at_level(logging.WARNING, logger="ih_kedro.science.data.corpus"):
        docs = list(iter_pile_documents(paths, stats))

    n_lost = stats.bad["corrupt_shard"] - 1  # the garbage shard is one record
    assert stats.bad == {
        "invalid_json": 1,
        "missing_text": 2,
        "empty_text": 1,
        "invalid_utf8": 1,
        "corrupt_shard": 1 + n_lost,
    }
    bad_file = str(tmp_path / "bad.jsonl")
    assert stats.examples["invalid_json"] == [f"{bad_file}:2"]
    assert stats.examples["missing_text"] == [f"{bad_file}:3", f"{bad_file}:7"]
    assert stats.examples["empty_text"] == [f"{bad_file}:4"]
    assert stats.examples["invalid_utf8"] == [f"{bad_file}:5"]
    assert [d.doc_id for d in docs[:2]] == ["bad.jsonl:1", "bad.jsonl:6"]
    n_trunc = len(docs) - 2
    assert 50 < n_trunc < 400  # whole blocks before the cut survive
    assert [d.text for d in docs[2:]] == [json.loads(x)["text"] for x in many[:n_trunc]]
    messages = caplog.text
    assert f"{bad_file}:2: invalid_json" in messages
    assert f"{bad_file}:5: invalid_utf8" in messages
    assert "garbage.jsonl.zst:1: corrupt_shard" in messages
    trunc_file = str(tmp_path / "trunc.jsonl.zst")
    # The truncation is located at the shard's last good line, which is the last document kept.
    assert stats.examples["corrupt_shard"] == [
        f"{tmp_path / 'garbage.jsonl.zst'}:1",
        f"{trunc_file}:{n_trunc}",
    ]
    assert docs[-1].doc_id == f"trunc.jsonl.zst:{n_trunc}"
    assert f"{trunc_file}:{n_trunc}: corrupt_shard (truncated:" in messages
    assert f"{n_trunc} is the last good line" in messages
    assert stats.documents == len(docs)
    assert abs(n_lost - (400 - n_trunc)) <= 2  # one frame: the estimate is close
    assert stats.estimated_bad == n_lost - 1
    assert stats.bad_fraction == pytest.approx((6 + n_lost) / (len(docs) + 6 + n_lost))


def test_bad_fraction_threshold(tmp_path: Path) -> None:
    lines = [json.dumps(record(f"doc {i}")).encode() for i in range(98)] + [b"{", b"{"]
    write_jsonl(tmp_path / "s.jsonl", lines, compress=False)
    ok = DocumentStream([tmp_path / "s.jsonl"], max_bad_fraction=0.02)
    assert len(list(ok)) == 98
    assert ok.stats.bad_fraction == pytest.approx(0.02)
    strict = DocumentStream([tmp_path / "s.jsonl"], max_bad_fraction=0.019)
    with pytest.raises(BadInputError, match=r"max_bad_fraction: 2 bad records of 100"):
        list(strict)
    with pytest.raises(ValueError, match="data_engineering.max_bad_fraction"):
        ok.stats.check(1.5, "data_engineering.max_bad_fraction")


def test_write_pile_shards_round_trip(tmp_path: Path) -> None:
    recs = [record(f"text {i}", "S") for i in range(25)]
    paths = write_pile_shards(recs, tmp_path, prefix="x", docs_per_shard=10)
    assert [p.name for p in paths] == [f"x_0000{i}.jsonl.zst" for i in range(3)]
    docs = list(DocumentStream(paths))
    assert [d.text for d in docs] == [r["text"] for r in recs]
    assert {d.pile_set_name for d in docs} == {"S"}
    assert not list(tmp_path.glob(".*tmp"))


def test_document_selection_filters_by_mask_and_split(tmp_path: Path) -> None:
    texts = [f"selection document {i}" for i in range(300)]
    paths = write_pile_shards((record(t) for t in texts), tmp_path, docs_per_shard=100)
    stream = DocumentStream(paths)
    keep = np.ones(300, dtype=bool)
    keep[::3] = False
    sel = DocumentSelection(stream, keep)
    assert [d.ordinal for d in sel] == [i for i in range(300) if i % 3]
    train = sel.with_split("train", 0.1)
    val = sel.with_split("validation", 0.1)
    t_ids = {d.ordinal for d in train}
    v_ids = {d.ordinal for d in val}
    assert not t_ids & v_ids
    assert t_ids | v_ids == {i for i in range(300) if i % 3}
    assert v_ids == {i for i in range(300) if i % 3 and is_held_out(texts[i], 0.1)}
    assert list(val.texts()) == [texts[i] for i in sorted(v_ids)]


def test_shard_truncated_before_its_first_line_is_one_bad_record_at_line_1(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    payload = b"".join(json.dumps(record(f"doc {i}")).encode() + b"\n" for i in range(3))
    full = zstandard.ZstdCompressor().compress(payload)
    (tmp_path / "cut.jsonl.zst").write_bytes(full[:12])
    stats = IngestionStats()
    with caplog.at_level(logging.WARNING, logger="ih_kedro.science.data.corpus"):
        docs = list(iter_pile_documents([tmp_path / "cut.jsonl.zst"], stats))
    assert docs == []
    assert stats.bad == {"corrupt_shard": 1}
    assert stats.examples["corrupt_shard"] == [f"{tmp_path / 'cut.jsonl.zst'}:1"]
    assert "no complete line before the cut" in caplog.text


def _truncated_kjv_shard(folder: Path, keep: float, n_documents: int = 40) -> Path:
    """A one-frame ``.jsonl.zst`` shard of ``n_documents`` KJV chapters cut to ``keep`` of its
    bytes."""
    from itertools import islice

    from ih_kedro.science.data.embedded_corpus import kjv_documents

    docs = [{"text": d["text"], "meta": {"pile_set_name": "KJV"}}
            for d in islice(kjv_documents(), n_documents)]  # fmt: skip
    (shard,) = write_pile_shards(docs, folder, docs_per_shard=n_documents)
    data = shard.read_bytes()
    shard.write_bytes(data[: int(len(data) * keep)])
    return shard


def test_a_truncated_shard_counts_the_documents_it_lost_as_an_estimate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """40 documents, the last ~10 % of the compressed bytes cut: the documents after the cut
    count as bad records (estimated from the frame's declared size and the shard's mean line
    length), not as one record whatever the shard held."""
    shard = _truncated_kjv_shard(tmp_path, keep=0.9)
    stats = IngestionStats()
    with caplog.at_level(logging.WARNING, logger="ih_kedro.science.data.corpus"):
        docs = list(iter_pile_documents([shard], stats))
    lost = 40 - len(docs)
    assert 0 < len(docs) < 40 and lost >= 3
    assert abs(stats.bad["corrupt_shard"] - lost) <= 1  # one frame: the estimate is close
    assert stats.estimated_bad == stats.bad["corrupt_shard"] - 1  # the first one is certain
    assert stats.bad_fraction == pytest.approx(lost / 40, abs=1 / 40)
    report = stats.as_dict()
    assert report["bad_total"] == stats.bad["corrupt_shard"]
    assert report["bad_estimated"] == stats.estimated_bad
    assert f"~{stats.bad['corrupt_shard']} documents lost (estimated:" in caplog.text
    with pytest.raises(BadInputError, match=r"of them estimated: documents lost after the cut"):
        stats.check(0.05)


def test_a_shard_cut_before_its_first_line_is_estimated_from_the_pass_so_far(
    tmp_path: Path,
) -> None:
    intact = _truncated_kjv_shard(tmp_path / "a", keep=1.0)
    cut = _truncated_kjv_shard(tmp_path / "b", keep=0.3)
    stats = IngestionStats()
    docs = list(iter_pile_documents([intact, cut], stats))
    assert len(docs) == 40  # the cut shard gave no complete line
    assert 30 <= stats.bad["corrupt_shard"] <= 50  # ~40 documents of the intact shard's length
    alone = IngestionStats()
    assert list(iter_pile_documents([cut], alone)) == []
    assert alone.bad == {"corrupt_shard": 1} and alone.estimated_bad == 0  # nothing to measure
