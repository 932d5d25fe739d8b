"""Tests of ih_kedro.science.data.sharded.dedup: datatrove stages with our ingestion accounting."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import zstandard

from ih_kedro.science.data.corpus import iter_pile_documents
from ih_kedro.science.data.sharded.dedup import (
    ExecutorSettings,
    _executor,
    lsh_bands,
    plan_blocks,
    sharded_deduplicate,
)

N_BASE, N_EXACT, N_NEAR = 300, 20, 30


def _vocab(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(3000)]


def planted_shards(folder: Path) -> dict:
    """350 valid documents (300 distinct, 20 exact and 30 near copies of earlier ones) in two
    shards, 4 bad lines in the second one (a non-UTF-8 line with 70 valid documents after
    it), and a truncated ``.zst`` shard (its readable prefix is valid, then 1 bad record).

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
    assert ing["bad_by_category"] == {
        "corrupt_shard": 1,
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
    from ih_kedro.science.data.corpus import is_held_out

    docs = list(iter_pile_documents(paths))
    n_val = sum(1 for d in docs if keep[d.ordinal] and is_held_out(d.text, 0.25))
    assert rep["split"]["validation_documents"] == n_val
    assert rep["split"]["train_documents"] == int(keep.sum()) - n_val


def test_bad_fraction_is_checked_on_merged_counts(planted, tmp_path: Path) -> None:
    from ih_kedro.science.data.corpus import BadInputError

    paths, _ = planted
    with pytest.raises(BadInputError, match=r"data_engineering.max_bad_fraction: 5 bad records"):
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


def test_plan_blocks_are_contiguous_and_balanced(tmp_path: Path) -> None:
    paths = []
    for i, size in enumerate([100, 100, 100, 100, 400]):
        p = tmp_path / f"s{i}.jsonl"
        p.write_bytes(b"x" * size)
        paths.append(p)
    assert plan_blocks(paths, 2) == [(0, 4), (4, 5)]
    assert plan_blocks(paths, 1) == [(0, 5)]
    blocks = plan_blocks(paths, 8)
    assert blocks[0][0] == 0 and blocks[-1][1] == 5
    assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:], strict=False))


def test_executor_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="executor.kind"):
        ExecutorSettings.from_params({"kind": "spark"})
    with pytest.raises(ValueError, match="executor: unknown keys"):
        ExecutorSettings.from_params({"kind": "local", "task": 3})
    with pytest.raises(ValueError, match=r"slurm executor needs \['partition', 'time'\]"):
        ExecutorSettings.from_params({"kind": "slurm"})
    with pytest.raises(ValueError, match="executor.tasks"):
        ExecutorSettings.from_params({"tasks": 0})
    slurm = ExecutorSettings.from_params(
        {"kind": "slurm", "tasks": 512, "options": {"partition": "cpu", "time": "04:00:00"}}
    )
    executor = _executor(slurm, [], 512, tmp_path / "logs", "signatures")
    assert type(executor).__name__ == "SlurmPipelineExecutor"
    assert executor.tasks == 512 and executor.partition == "cpu" and executor.time == "04:00:00"
    # A per-kind section overrides the top level for that kind (conf/paper's layout).
    params = {
        "kind": "slurm",
        "tasks": None,
        "options": {},
        "slurm": {"tasks": 2048, "workers": 512, "options": {"partition": "p", "time": "1:00"}},
        "ray": {"tasks": 64},
    }
    chosen = ExecutorSettings.from_params(params)
    assert (chosen.kind, chosen.tasks, chosen.workers) == ("slurm", 2048, 512)
    assert chosen.options == {"partition": "p", "time": "1:00"}
    local_params = ExecutorSettings.from_params({**params, "kind": "local"})
    assert (local_params.tasks, local_params.workers, local_params.options) == (None, None, {})
    with pytest.raises(ValueError, match=r"executor.slurm: unknown keys \['partition'\]"):
        ExecutorSettings.from_params({"kind": "slurm", "slurm": {"partition": "p"}})
    local = _executor(ExecutorSettings(tasks=4, workers=1), [], 4, tmp_path / "l", "x")
    assert type(local).__name__ == "LocalPipelineExecutor" and local.workers == 1


WORDS = (
    "river stone light garden window harbor silver market winter engine paper forest "
    "candle bridge mirror village thunder basket orchard lantern meadow copper falcon "
    "signal ladder marble canyon velvet compass glacier tunnel shadow beacon harvest"
).split()


def random_text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def test_signatures_estimate_jaccard() -> None:
    from datatrove.utils.hashing import HashConfig

    from ih_kedro.science.data.corpus import shingles
    from ih_kedro.science.data.sharded.dedup import MinhashConfig, MinhashSignatures

    rng = random.Random(0)
    a = random_text(rng, 400)
    words = a.split()
    for i in range(0, 400, 40):  # 10 substitutions -> ~45 of 396 shingles change
        words[i] = "zebra"
    b = " ".join(words)
    sa, sb = shingles(a), shingles(b)
    true = len(sa & sb) / len(sa | sb)
    config = MinhashConfig(5, 18, 7, 1, hash_config=HashConfig(precision=32, hash_fc="sha1"))
    step = MinhashSignatures("unused", config, shingle_size=5)
    sig_a = np.asarray(step.get_signature(step.get_shingles(a)))  # (18, 7)
    sig_b = np.asarray(step.get_signature(step.get_shingles(b)))
    assert sig_a.shape == (18, 7)
    assert 0.6 < true < 0.9
    assert float(np.mean(sig_a == sig_b)) == pytest.approx(true, abs=0.12)
    assert np.array_equal(sig_a, np.asarray(step.get_signature(step.get_shingles(a.upper()))))


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


def test_clustering_verifies_candidates_and_keeps_the_lowest(tmp_path: Path) -> None:
    """Stage 3 alone: a candidate pair joins only when >= threshold of its signature values
    agree; the lowest (task, index) is kept; exact copies link but are not near removals."""
    from datatrove.utils.hashing import HashConfig

    from ih_kedro.science.data.sharded.dedup import MinhashConfig, VerifiedMinhashCluster

    config = MinhashConfig(5, 2, 5, 1, hash_config=HashConfig(precision=32, hash_fc="sha1"))
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2**32, size=10, dtype=np.uint32)

    def similar(n_equal: int) -> np.ndarray:
        other = base.copy()
        other[n_equal:] ^= 1
        return other

    # task 0: doc 0 = base, doc 1 = 60% equal, doc 2 = exact copy of base (removed by exact)
    # task 1: doc 0 = 90% equal (chained to task 0 only through the exact copy), doc 1 = 80%
    (tmp_path / "sigs" / "full").mkdir(parents=True)
    np.stack([base, similar(6), base]).tofile(tmp_path / "sigs" / "full" / "00000.sig")
    np.stack([similar(9), similar(8)]).tofile(tmp_path / "sigs" / "full" / "00001.sig")
    (tmp_path / "exact" / "0000").mkdir(parents=True)
    np.array([2], dtype="<u4").tofile(tmp_path / "exact" / "0000" / "00000.c4_dup")
    (tmp_path / "buckets").mkdir()
    pairs = [(0, 0, 0, 1), (0, 0, 0, 2), (0, 2, 1, 0), (1, 0, 1, 1)]  # (task, doc, task, doc)
    np.array(pairs, dtype="<u4").tofile(tmp_path / "buckets" / "00000_00.dups")
    np.zeros((0, 4), dtype="<u4").tofile(tmp_path / "buckets" / "00001_00.dups")
    step = VerifiedMinhashCluster(
        str(tmp_path / "buckets"),
        str(tmp_path / "sigs"),
        str(tmp_path / "exact"),
        str(tmp_path / "remove"),
        config,
        threshold=0.7,
        n_tasks=2,
    )
    step.run()
    remove0 = np.fromfile(tmp_path / "remove" / "000000.remove", dtype="<u4").tolist()
    remove1 = np.fromfile(tmp_path / "remove" / "000001.remove", dtype="<u4").tolist()
    assert remove0 == [2]  # the exact copy; doc 1 (60% equal) stays: not verified
    assert remove1 == [0, 1]  # joined to task 0's doc 0 through the exact copy
    clusters = np.fromfile(tmp_path / "remove" / "clusters.bin", dtype="<u4").reshape(-1, 4)
    assert clusters.tolist() == [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0]]
