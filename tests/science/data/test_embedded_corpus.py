"""Tests of ih_kedro.science.data.embedded_corpus: the KJV chapters through shard ingestion."""

from __future__ import annotations

from pathlib import Path

from ih_kedro.science.data.corpus import DocumentStream
from ih_kedro.science.data.embedded_corpus import kjv_documents, write_embedded_corpus


def test_kjv_documents_are_chapters_without_references() -> None:
    docs = list(kjv_documents())
    assert len(docs) == 1189
    first = docs[0]
    assert first["meta"] == {"pile_set_name": "KJV", "book": "Genesis", "chapter": 1}
    assert first["text"].startswith("In the beginning God created the heaven and the earth. And")
    assert docs[-1]["meta"]["book"] == "Revelation" and docs[-1]["meta"]["chapter"] == 22
    assert not any("Genesis 1:" in d["text"] for d in docs[:50])
    # ~790k words in the whole Bible.
    n_words = sum(len(d["text"].split()) for d in docs)
    assert 750_000 < n_words < 830_000


def test_embedded_corpus_goes_through_shard_ingestion(tmp_path: Path) -> None:
    paths = write_embedded_corpus(tmp_path)
    assert all(p.name.endswith(".jsonl.zst") for p in paths)
    stream = DocumentStream(paths)
    n = sum(1 for _ in stream)
    assert n == 1189
    assert stream.stats.by_set == {"KJV": 1189}
    assert stream.stats.n_bad == 0
