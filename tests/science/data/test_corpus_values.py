"""Value tests of ih_kedro.science.data.corpus, written against the survivors of a mutmut run.

Every expected value is literal or computed here independently (json, zstandard), never
through the function under test.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import zstandard

from ih_kedro.science.data import corpus
from ih_kedro.science.data.corpus import (
    BadInputError,
    Document,
    DocumentSelection,
    DocumentStream,
    IngestionStats,
    iter_pile_documents,
    write_pile_shards,
)

LOGGER = "ih_kedro.science.data.corpus"


def _rec(text: str, set_name: str = "S") -> dict:
    return {"text": text, "meta": {"pile_set_name": set_name}}


def _lines(path: Path) -> list[bytes]:
    raw = path.read_bytes()
    if path.name.endswith(".zst"):
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    return raw.splitlines(keepends=True)


# --------------------------------------------------------------------------- IngestionStats


def test_as_dict_is_the_exact_json_summary() -> None:
    stats = IngestionStats(files=2, documents=3, text_bytes=120)
    stats.by_set.update({"A": 2, "B": 1})
    stats.record_bad("invalid_json", "f.jsonl", 4, "bad")
    summary = stats.as_dict()
    assert summary == {
        "files": 2,
        "documents": 3,
        "text_bytes": 120,
        "bad_total": 1,
        "bad_fraction": 0.25,
        "bad_estimated": 0,
        "bad_by_category": {
            "corrupt_shard": 0,
            "invalid_utf8": 0,
            "invalid_json": 1,
            "missing_text": 0,
            "empty_text": 0,
        },
        "bad_examples": {"invalid_json": ["f.jsonl:4"]},
        "documents_by_set": {"A": 2, "B": 1},
    }
    assert type(summary["bad_examples"]["invalid_json"]) is list
    assert type(summary["documents_by_set"]) is dict
    assert json.loads(json.dumps(summary)) == summary
    assert IngestionStats().as_dict()["bad_fraction"] == 0.0


def test_record_bad_keeps_five_examples_and_logs_100_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stats = IngestionStats()
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        for line in range(1, 103):
            stats.record_bad("invalid_json", "f.jsonl", line, "why")
    assert stats.bad == {"invalid_json": 102}
    assert stats.examples["invalid_json"] == [f"f.jsonl:{i}" for i in range(1, 6)]
    skipped = [r for r in caplog.records if r.getMessage().endswith("; skipped")]
    assert [r.levelno for r in skipped] == [logging.WARNING] * 100 + [logging.DEBUG] * 2
    assert skipped[6].getMessage() == "f.jsonl:7: invalid_json (why); skipped"
    notices = [r for r in caplog.records if r.getMessage().startswith("more than")]
    assert [(r.levelno, r.getMessage()) for r in notices] == [
        (logging.WARNING, "more than 100 invalid_json records: further ones are logged at DEBUG")
    ]
    # The notice comes right before the 101st record's DEBUG line.
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert messages[100].startswith("more than 100") and messages[101].startswith("f.jsonl:101:")


def test_check_bounds_and_message() -> None:
    stats = IngestionStats(documents=3)
    stats.record_bad("empty_text", "f.jsonl", 2, "x")
    stats.check(None)  # disabled: 25 % bad passes
    stats.check(1.0)  # the upper bound itself is allowed
    stats.check(0.25)  # equal is allowed
    with pytest.raises(BadInputError) as info:
        stats.check(0.0, "de.max_bad")
    assert str(info.value) == (
        "de.max_bad: 1 bad records of 4 (25.0000%) exceed the allowed 0.0000%; "
        "by category: {'empty_text': 1}; examples: {'empty_text': ['f.jsonl:2']}"
    )
    IngestionStats(documents=5).check(0.0)  # the lower bound itself is allowed
    for bad in (-0.1, 1.1):
        with pytest.raises(ValueError, match=rf"^mbf: must be in \[0, 1\], got {bad}$"):
            stats.check(bad, "mbf")


# --------------------------------------------------------------------------- reading shards


def test_iter_pile_documents_fields_set_names_and_byte_counts(tmp_path: Path) -> None:
    lines = [
        json.dumps({"text": "alpha", "meta": {"pile_set_name": 7}}).encode(),
        b"",  # blank separator line: not a record, but it counts as a line
        json.dumps({"text": "beta"}).encode(),
        json.dumps({"text": "gamma", "meta": "not a dict"}).encode(),
        json.dumps({"text": "delta", "meta": {"other": 1}}).encode(),
        json.dumps([1, 2]).encode(),
        json.dumps({"text": "caf\u00e9"}, ensure_ascii=False).encode(),
    ]
    (tmp_path / "a.jsonl").write_bytes(b"".join(x + b"\n" for x in lines))
    (tmp_path / "b.jsonl").write_bytes(json.dumps(_rec("epsilon", "B")).encode() + b"\n")
    (tmp_path / "c.jsonl").write_bytes(b"\n\n")
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"]
    stats = IngestionStats()
    docs = list(iter_pile_documents(paths, stats))
    a = str(tmp_path / "a.jsonl")
    assert docs == [
        Document("a.jsonl:1", "alpha", "7", a, 1, 0),
        Document("a.jsonl:3", "beta", "unknown", a, 3, 1),
        Document("a.jsonl:4", "gamma", "unknown", a, 4, 2),
        Document("a.jsonl:5", "delta", "unknown", a, 5, 3),
        Document("a.jsonl:7", "caf\u00e9", "unknown", a, 7, 4),
        Document("b.jsonl:1", "epsilon", "B", str(tmp_path / "b.jsonl"), 1, 5),
    ]
    assert stats.files == 3
    assert stats.documents == 6
    good = [lines[i] for i in (0, 2, 3, 4, 6)] + [json.dumps(_rec("epsilon", "B")).encode()]
    assert stats.text_bytes == sum(len(x) + 1 for x in good)
    assert stats.by_set == {"7": 1, "unknown": 4, "B": 1}
    assert stats.bad == {"missing_text": 1}


def test_bad_record_reasons_are_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lines = [
        b'{"text": "caf\xe9"}',
        b'{"text": "open',
        json.dumps({"meta": {}}).encode(),
        json.dumps({"text": " \t"}).encode(),
    ]
    (tmp_path / "bad.jsonl").write_bytes(b"".join(x + b"\n" for x in lines))
    (tmp_path / "junk.jsonl.zst").write_bytes(b"not zstd")
    paths = [tmp_path / "bad.jsonl", tmp_path / "junk.jsonl.zst", tmp_path / "missing.jsonl"]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert list(iter_pile_documents(paths)) == []
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    bad = str(tmp_path / "bad.jsonl")
    try:
        lines[0].decode("utf-8")
    except UnicodeDecodeError as exc:
        utf8_reason = str(exc)
    try:
        json.loads(lines[1].decode() + "\n")
    except json.JSONDecodeError as exc:
        json_reason = str(exc)
    assert messages[0] == f"{bad}:1: invalid_utf8 ({utf8_reason}); skipped"
    assert messages[1] == f"{bad}:2: invalid_json ({json_reason}); skipped"
    assert messages[2] == f"{bad}:3: missing_text (no string field 'text'); skipped"
    assert messages[3] == f"{bad}:4: empty_text (empty or whitespace); skipped"
    assert messages[4].startswith(f"{tmp_path / 'junk.jsonl.zst'}:1: corrupt_shard (ZstdError: ")
    assert messages[5].startswith(
        f"{tmp_path / 'missing.jsonl'}:1: corrupt_shard (FileNotFoundError: "
    )


def _frames(*payloads: bytes) -> bytes:
    return b"".join(zstandard.ZstdCompressor().compress(p) for p in payloads)


@pytest.mark.parametrize("chunk_bytes", [1, 7, 1 << 20])
def test_zst_lines_across_frames_and_read_chunks(
    monkeypatch: pytest.MonkeyPatch, chunk_bytes: int
) -> None:
    monkeypatch.setattr(corpus, "_READ_CHUNK_BYTES", chunk_bytes)
    data = _frames(b"one\ntw", b"o\nthree\n", b"", b"four")  # lines span frames; no final \n
    lines = list(corpus._iter_zst_lines(io.BytesIO(data)))
    assert lines == [b"one\n", b"two\n", b"three\n", b"four"]
    assert list(corpus._iter_zst_lines(io.BytesIO(b""))) == []
    # Cut inside the second frame: the first frame's lines come out, then the error.
    first = _frames(b"a\nb\n")
    cut = first + _frames(b"c\nd\n" * 50)[:-3]
    out: list[bytes] = []
    with pytest.raises(
        corpus._TruncatedShardError,
        match=r"^the zstd stream ends inside a frame \(truncated file\)$",
    ):
        for line in corpus._iter_zst_lines(io.BytesIO(cut)):
            out.append(line)
    assert out[:2] == [b"a\n", b"b\n"]


# --------------------------------------------------------------------------- streams


def test_document_stream_description_repr_and_initial_stats(tmp_path: Path) -> None:
    paths = write_pile_shards([_rec("x"), _rec("y")], tmp_path, docs_per_shard=1)
    stream = DocumentStream(paths, max_bad_fraction=0.5)
    assert repr(stream) == "DocumentStream(2 shard(s), 2 files)"
    assert stream.description == "2 shard(s)"
    assert stream.max_bad_fraction == 0.5
    assert stream.stats.documents == 0 and stream.stats.files == 0
    named = DocumentStream(paths, description="pile train")
    assert repr(named) == "DocumentStream(pile train, 2 files)"


def test_selection_all_ignores_the_fraction_and_checks_the_mask(tmp_path: Path) -> None:
    texts = [f"doc {i}" for i in range(40)]
    paths = write_pile_shards([_rec(t) for t in texts], tmp_path)
    stream = DocumentStream(paths)
    assert [d.text for d in DocumentSelection(stream, None, "all", 0.5)] == texts
    short = DocumentSelection(stream, np.ones(39, dtype=bool))
    with pytest.raises(RuntimeError) as info:
        list(short)
    assert str(info.value) == (
        "document shard_00000.jsonl.zst:40 has ordinal 39 beyond the dedup mask "
        "(39 documents): the shards changed since deduplication"
    )


# --------------------------------------------------------------------------- writing shards


def test_write_pile_shards_exact_bytes_defaults_and_documents(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"  # parents are created
    doc = Document("x:1", "na\u00efve", "D", "x", 1, 0)
    paths = write_pile_shards([_rec("caf\u00e9"), doc, _rec("t3"), _rec("t4")], out,
                              docs_per_shard=2, compress=False)  # fmt: skip
    assert paths == [out / "shard_00000.jsonl", out / "shard_00001.jsonl"]
    assert paths[0].read_bytes() == (
        b'{"text": "caf\xc3\xa9", "meta": {"pile_set_name": "S"}}\n'
        b'{"text": "na\xc3\xafve", "meta": {"pile_set_name": "D"}}\n'
    )
    assert len(_lines(paths[1])) == 2
    assert sorted(p.name for p in out.iterdir()) == ["shard_00000.jsonl", "shard_00001.jsonl"]
    one = write_pile_shards([_rec("a"), _rec("b")], tmp_path / "one", docs_per_shard=1)
    assert [p.name for p in one] == ["shard_00000.jsonl.zst", "shard_00001.jsonl.zst"]
    for bad in (0, -1):
        with pytest.raises(ValueError, match=rf"^docs_per_shard must be positive, got {bad}$"):
            write_pile_shards([_rec("a")], tmp_path / "bad", docs_per_shard=bad)


def test_write_pile_shards_default_shard_size_is_10000(tmp_path: Path) -> None:
    paths = write_pile_shards(({"text": "t"} for _ in range(10_001)), tmp_path, compress=False)
    assert [len(_lines(p)) for p in paths] == [10_000, 1]


def test_write_pile_shards_uses_zstd_level_3(tmp_path: Path) -> None:
    words = [f"w{i % 997}x{i % 13}" for i in range(40_000)]
    records = [{"text": " ".join(words[i : i + 200])} for i in range(0, 40_000, 200)]
    payload = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records)
    expected = zstandard.ZstdCompressor(level=3).compress(payload)
    assert expected != zstandard.ZstdCompressor(level=4).compress(payload)  # the test can fail
    (path,) = write_pile_shards(records, tmp_path)
    assert path.read_bytes() == expected


def test_write_pile_shards_temp_file_is_a_hidden_sibling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(corpus, "os", SimpleNamespace(fdopen=os.fdopen, replace=boom))
    with pytest.raises(OSError, match="disk gone"):
        write_pile_shards([_rec("a")], tmp_path, prefix="p")
    (left,) = list(tmp_path.iterdir())
    assert re.fullmatch(r"\.p_00000\.jsonl\.zst\..+\.tmp", left.name)
