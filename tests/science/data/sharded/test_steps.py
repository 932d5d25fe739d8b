"""Tests of ih_kedro.science.data.sharded.steps: the datatrove steps on their own."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from tests.science.data.sharded.word_texts import random_text


def test_signatures_estimate_jaccard() -> None:
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.utils.hashing import HashConfig

    from ih_kedro.science.data.dedup_keys import shingles
    from ih_kedro.science.data.sharded.steps import MinhashSignatures

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


def test_clustering_verifies_candidates_and_keeps_the_lowest(tmp_path: Path) -> None:
    """Stage 3 alone: a candidate pair joins only when >= threshold of its signature values
    agree; the lowest (task, index) is kept; exact copies link but are not near removals."""
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.utils.hashing import HashConfig

    from ih_kedro.science.data.sharded.steps import VerifiedMinhashCluster

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
