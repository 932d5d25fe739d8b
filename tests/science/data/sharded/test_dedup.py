"""Tests of ih_kedro.science.data.sharded.dedup: datatrove stages with our ingestion accounting."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import zstandard

from ih_kedro.science.data.corpus import iter_pile_documents
from ih_kedro.science.data.sharded.dedup import lsh_bands, sharded_deduplicate
from ih_kedro.science.data.sharded.executor import ExecutorSettings
from tests.science.data.sharded.word_texts import random_text

N_BASE, N_EXACT, N_NEAR = 300, 20, 30


def _vocab(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(3000)]


def planted_shards(folder: Path) -> dict:
    """350 valid documents (300 distinct, 20 exact and 30 near copies of earlier ones) in two
    shards, 4 bad lines in the second one (a non-UTF-8 line with 70 valid documents after
    it), and a truncated ``.zst`` shard of 300 documents (its readable prefix is valid, the
    documents after the cut are estimated bad records).

    Returns where everything is: ``removed`` (doc ids of the planted copies) and
    ``bad`` (category -> "file:line").
    """
    rng = random.Random(7)
    vocab = _vocab(rng)
    base = [" ".join(rng.choice(vocab) for _ in range(120)) for _ in range(N_BASE)]
    texts = list(base)
    kind = ["base"] * N_BASE
    for _ in range(N_EXACT):  # same normalised text: case and whitespace differ
        texts.append("  " + base[rng.randrange(N_BASE)].upper().replace(" ", "   ") + "\n")
        kind.append("exact")
    for _ in range(N_NEAR):  # 2 of 120 words replaced: shingle Jaccard ~0.84
        words = base[rng.randrange(N_BASE)].split()
        for j in rng.sample(range(120), 2):
            words[j] = "zzz" + vocab[j]
        texts.append(" ".join(words))
        kind.append("near")
    # Every copy comes after all originals (so the copy is the one removed), in shuffled order.
    copies = list(range(N_BASE, len(texts)))
    rng.shuffle(copies)
    first, second = list(range(180)), list(range(180, N_BASE)) + copies
    folder.mkdir(parents=True)
    line = lambda i: json.dumps({"text": texts[i], "meta": {"pile_set_name": "P"}}).encode()  # noqa: E731
    a = b"".join(line(i) + b"\n" for i in first)
    (folder / "shard_00000.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(a))
    lines_b = [line(i) for i in second]
    bad_lines = {
        30: (b'{"text": "caf\xe9 latin-1"}', "invalid_utf8"),  # before the last 70+ documents
        60: (b'{"text": "unterminated', "invalid_json"),
        90: (json.dumps({"meta": {}}).encode(), "missing_text"),
        120: (json.dumps({"text": "  \n "}).encode(), "empty_text"),
    }
    for at in sorted(bad_lines, reverse=True):
        lines_b.insert(at, bad_lines[at][0])
    (folder / "shard_00001.jsonl").write_bytes(b"".join(x + b"\n" for x in lines_b))
    extra_rng = random.Random(8)
    extra = [
        json.dumps({"text": " ".join(extra_rng.choice(vocab) for _ in range(300))}).encode()
        for _ in range(300)
    ]
    full = zstandard.ZstdCompressor().compress(b"".join(x + b"\n" for x in extra))
    (folder / "shard_00002.jsonl.zst").write_bytes(full[: len(full) // 2])
    bad_files = folder / "shard_00001.jsonl"
    removed = {f"shard_00000.jsonl.zst:{k + 1}" for k, i in enumerate(first) if kind[i] != "base"}
    positions = [k for k, x in enumerate(lines_b) if x not in {b for b, _ in bad_lines.values()}]
    removed |= {
        f"shard_00001.jsonl:{positions[k] + 1}" for k, i in enumerate(second) if kind[i] != "base"
    }
    return {
        "removed": removed,
        "bad": {cat: f"{bad_files}:{lines_b.index(x) + 1}" for x, cat in bad_lines.values()},
        "truncated": str(folder / "shard_00002.jsonl.zst"),
    }


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], dict]:
    folder = tmp_path_factory.mktemp("planted") / "raw"
    truth = planted_shards(folder)
    return sorted(folder.iterdir()), truth


def _removed_ids(paths: list[Path], keep: np.ndarray) -> set[str]:
    docs = list(iter_pile_documents(paths))
    return {d.doc_id for d in docs if not keep[d.ordinal]}


def test_planted_shards_keep_every_valid_document(planted, tmp_path: Path) -> None:
    paths, truth = planted
    reference = list(iter_pile_documents(paths))
    n_prefix = sum(1 for d in reference if d.source == truth["truncated"])
    assert n_prefix > 0  # the truncated shard's readable prefix
    assert len(reference) == 350 + n_prefix

    keep1, rep1 = sharded_deduplicate(
        paths, tmp_path / "w1", executor=ExecutorSettings(tasks=1), held_out_fraction=0.1
    )
    ing = rep1["ingestion"]
    assert ing["documents"] == rep1["documents_in"] == 350 + n_prefix  # nothing dropped
    lost = ing["bad_by_category"]["corrupt_shard"]
    assert abs(lost - (300 - n_prefix)) <= 2  # estimated from the cut frame's declared size
    assert ing["bad_estimated"] == lost - 1
    assert ing["bad_by_category"] == {
        "corrupt_shard": lost,
        "invalid_utf8": 1,
        "invalid_json": 1,
        "missing_text": 1,
        "empty_text": 1,
    }
    for category, where in truth["bad"].items():
        assert ing["bad_examples"][category] == [where]
    assert ing["bad_examples"]["corrupt_shard"][0].startswith(truth["truncated"] + ":")
    assert ing["documents_per_file"] == [180, 170, n_prefix]
    assert rep1["exact_duplicates"]["documents_removed"] == N_EXACT
    assert rep1["near_duplicates"]["documents_removed"] == N_NEAR
    assert rep1["documents_out"] == 300 + n_prefix
    assert _removed_ids(paths, keep1) == truth["removed"]

    # Any number of tasks: the same mask and report (task order is file order).
    keep3, rep3 = sharded_deduplicate(
        paths, tmp_path / "w3", executor=ExecutorSettings(tasks=3), held_out_fraction=0.1
    )
    assert rep3["engine"]["tasks"] == 3
    assert np.array_equal(keep1, keep3)
    strip = lambda r: {k: v for k, v in r.items() if k != "engine"}  # noqa: E731
    assert strip(rep1) == strip(rep3)


def test_exact_only_and_split(planted, tmp_path: Path) -> None:
    paths, truth = planted
    keep, rep = sharded_deduplicate(
        paths,
        tmp_path / "w",
        near=False,
        executor=ExecutorSettings(tasks=2),
        held_out_fraction=0.25,
    )
    assert rep["exact_duplicates"]["documents_removed"] == N_EXACT
    assert rep["near_duplicates"]["documents_removed"] == 0
    from ih_kedro.science.data.split import is_held_out

    docs = list(iter_pile_documents(paths))
    n_val = sum(1 for d in docs if keep[d.ordinal] and is_held_out(d.text, 0.25))
    assert rep["split"]["validation_documents"] == n_val
    assert rep["split"]["train_documents"] == int(keep.sum()) - n_val


def test_bad_fraction_is_checked_on_merged_counts(planted, tmp_path: Path) -> None:
    from ih_kedro.science.data.corpus import BadInputError

    paths, _ = planted
    with pytest.raises(
        BadInputError,
        match=r"data_engineering.max_bad_fraction: \d+ bad records \(\d+ of them estimated",
    ):
        sharded_deduplicate(
            paths,
            tmp_path / "w",
            near=False,
            executor=ExecutorSettings(tasks=2),
            max_bad_fraction=0.001,
            max_bad_fraction_name="data_engineering.max_bad_fraction",
        )


def test_lsh_bands_match_datasketch() -> None:
    # datasketch 2.0's MinHashLSH._optimal_param(threshold, perms, 1 - fnw, fnw), recorded.
    assert lsh_bands(0.7, 128, 0.8) == (18, 7)
    assert lsh_bands(0.5, 128, 0.5) == (25, 5)
    assert lsh_bands(0.8, 256, 0.8) == (21, 12)
    assert lsh_bands(0.7, 64, 0.9) == (12, 5)
    with pytest.raises(ValueError, match="dedup.threshold"):
        lsh_bands(1.2, 128)


def test_planted_copies_among_distinct_documents(tmp_path: Path) -> None:
    rng = random.Random(1)
    base = [random_text(rng, 150) for _ in range(30)]
    near = base[3].split()
    for i in (10, 50, 90, 130):  # 4 words changed of 150: Jaccard ~0.88
        near[i] = "xylophone"
    texts = [*base, " ".join(near), base[7].upper(), base[3] + " coda"]
    texts += [random_text(rng, 200) for _ in range(200)]  # distinct: never clustered
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    keep, report = sharded_deduplicate(
        [tmp_path / "t.jsonl"], tmp_path / "w", executor=ExecutorSettings(tasks=1)
    )
    # 30 (near-dup of 3) removed, 31 (exact dup of 7) removed, 32 (3 + one word) near-dup.
    assert np.flatnonzero(~np.asarray(keep)).tolist() == [30, 31, 32]
    assert report["documents_in"] == 233 and report["documents_out"] == 230
    assert report["exact_duplicates"]["documents_removed"] == 1
    assert report["exact_duplicates"]["examples"] == [
        {"kept": "t.jsonl:8", "removed": ["t.jsonl:32"]}
    ]
    near_report = report["near_duplicates"]
    assert near_report["clusters"] == 1 and near_report["documents_removed"] == 2
    assert near_report["cluster_sizes"] == {"3": 1}
    assert near_report["examples"][0] == {
        "kept": "t.jsonl:4",
        "removed": ["t.jsonl:31", "t.jsonl:33"],
    }
    assert report["parameters"]["seed"] == 1
    assert report["engine"]["lsh_bands"] == 18 and report["engine"]["lsh_rows"] == 7
