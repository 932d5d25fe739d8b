"""Value tests of the probe builders: exact pools, exact lengths, exact boundaries and messages.

Written against the survivors of a mutation run of ``science/telemetry/probes.py``; every
expected value is a literal worked out by hand from the docstrings.
"""

import logging

import numpy as np
import pytest
import torch

from ih_kedro.science.telemetry.probes import (
    ProbeSet,
    anti_induction_snippet_probes,
    default_probe_length,
    induction_snippet_probes,
    make_probe_set,
    repeated_token_probes,
    snippet_probes,
    uniform_token_pool,
)


def test_uniform_pool_rejects_an_empty_vocabulary_and_ignores_foreign_excludes():
    with pytest.raises(ValueError, match="vocab_size must be positive, got 0"):
        uniform_token_pool(0)
    assert uniform_token_pool(1).tolist() == [0]
    pool = uniform_token_pool(4, exclude=(4, -1, 2))
    assert pool.tolist() == [0, 1, 3] and pool.dtype == np.int64


def test_default_probe_length_boundaries():
    assert default_probe_length(2) == 1
    length = default_probe_length(5)
    assert length == 2 and isinstance(length, int)  # floor division
    assert default_probe_length(100) == 50 and default_probe_length(101) == 50
    assert default_probe_length(99) == 49
    with pytest.raises(ValueError, match="context_length must be at least 2, got 1"):
        default_probe_length(1)


def test_unique_halves_validate_sizes_and_count_distinct_pool_ids():
    with pytest.raises(ValueError, match="n_samples must be positive, got 0"):
        repeated_token_probes(0, 3, np.arange(10), seed=0)
    with pytest.raises(ValueError, match="length must be positive, got 0"):
        repeated_token_probes(2, 0, np.arange(10), seed=0)
    # A pool of 6 entries but 3 distinct ids cannot give 4 unique tokens.
    with pytest.raises(ValueError, match="has 3 distinct ids, fewer than the 4 unique"):
        repeated_token_probes(1, 4, np.array([5, 5, 6, 6, 7, 7]), seed=0)
    # Exactly as many distinct ids as needed: every half is a permutation of the pool.
    probes = repeated_token_probes(3, 3, np.array([9, 7, 7, 8]), seed=2)
    assert probes.shape == (3, 6) and probes.dtype == torch.long
    for row in probes.tolist():
        assert sorted(row[:3]) == [7, 8, 9] and row[3:] == row[:3]


def test_unique_halves_draw_without_replacement_from_the_seeded_generator():
    pool = np.arange(100, 120)
    probes = repeated_token_probes(2, 5, pool, seed=11)
    rng = np.random.default_rng(11)
    expected = [rng.choice(pool, size=5, replace=False) for _ in range(2)]
    assert probes[:, :5].tolist() == [e.tolist() for e in expected]
    assert not torch.equal(probes, repeated_token_probes(2, 5, pool, seed=12))


def test_snippet_probes_layout_and_separator_check():
    halves = torch.tensor([[4, 5, 6], [7, 8, 9]])
    assert snippet_probes(halves, 1).tolist() == [[4, 5, 6, 1, 4, 5, 6], [7, 8, 9, 1, 7, 8, 9]]
    anti = snippet_probes(halves, 2, reverse=True)
    assert anti.tolist() == [[4, 5, 6, 2, 6, 5, 4], [7, 8, 9, 2, 9, 8, 7]]
    assert anti.dtype == torch.long
    with pytest.raises(ValueError, match="sep_token 8 occurs inside the snippet tokens"):
        snippet_probes(halves, 8)


def test_snippet_probe_builders_are_seeded_like_the_repeated_probes():
    pool = np.arange(1, 40)
    half = repeated_token_probes(3, 5, pool, seed=4)[:, :5]  # the same draw for the same seed
    induction = induction_snippet_probes(3, 5, pool, seed=4, sep_token=0)
    anti = anti_induction_snippet_probes(3, 5, pool, seed=4, sep_token=0)
    assert torch.equal(induction, torch.cat([half, torch.zeros(3, 1).long(), half], 1))
    assert torch.equal(anti, torch.cat([half, torch.zeros(3, 1).long(), half.flip(1)], 1))
    assert torch.equal(induction, induction_snippet_probes(3, 5, pool, seed=4, sep_token=0))
    assert torch.equal(anti, anti_induction_snippet_probes(3, 5, pool, seed=4, sep_token=0))


def test_with_length_bounds_and_fields():
    probe_set = make_probe_set(np.arange(1, 30), 3, 6, seed=1, source="frequent", sep_token=0)
    assert probe_set.with_length(6) is probe_set
    one = probe_set.with_length(1)
    assert one.length == 1 and one.tokens.shape == (3, 2) and one.n_samples == 3
    assert torch.equal(one.tokens[:, 0], probe_set.tokens[:, 0])
    assert torch.equal(one.tokens[:, 1], probe_set.tokens[:, 0])
    assert one.variants["induction_snippet"].tolist() == [
        [t, 0, t] for t in probe_set.tokens[:, 0].tolist()
    ]
    four = probe_set.with_length(4)
    assert four.length == 4 and four.snippet_length is None and four.seed == 1
    assert four.source == "frequent" and four.sep_token == 0
    with pytest.raises(ValueError, match="cannot shorten probes of half length 6 to 0"):
        probe_set.with_length(0)
    with pytest.raises(ValueError, match="cannot shorten probes of half length 6 to 7"):
        probe_set.with_length(7)


def test_probe_set_without_separator_has_no_variants():
    probe_set = make_probe_set(np.arange(1, 30), 2, 4, seed=0, source="uniform")
    assert probe_set.variants == {} and probe_set.sep_token is None
    assert probe_set.with_length(2).variants == {}
    assert probe_set.kind == "repeated" and probe_set.n_samples == 2


def test_make_probe_set_fields_snippet_bounds_and_log(caplog):
    pool = np.arange(1, 30)
    with caplog.at_level(logging.INFO, logger="ih_kedro.science.telemetry.probes"):
        probe_set = make_probe_set(pool, 2, 5, 7, "frequent", sep_token=0, snippet_length=5)
    assert "probe set: 2 samples of 5 unique frequent tokens (seed 7)" in caplog.text
    assert isinstance(probe_set, ProbeSet)
    assert (probe_set.source, probe_set.seed, probe_set.length) == ("frequent", 7, 5)
    assert (probe_set.kind, probe_set.sep_token, probe_set.snippet_length) == ("repeated", 0, 5)
    assert torch.equal(probe_set.tokens, repeated_token_probes(2, 5, pool, seed=7))
    one = make_probe_set(pool, 2, 5, 7, "frequent", sep_token=0, snippet_length=1)
    assert one.variants["anti_induction_snippet"].tolist() == [
        [t, 0, t] for t in probe_set.tokens[:, 0].tolist()
    ]
    with pytest.raises(ValueError, match=r"snippet_length: must be in \[1, 5\].*got 0"):
        make_probe_set(pool, 2, 5, 7, "frequent", sep_token=0, snippet_length=0)
