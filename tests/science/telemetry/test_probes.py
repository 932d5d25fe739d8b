import pickle

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
    uniform_token_pool,
)


def test_uniform_pool_and_default_length():
    assert uniform_token_pool(5, exclude=(1,)).tolist() == [0, 2, 3, 4]
    assert default_probe_length(512) == 50
    assert default_probe_length(64) == 32


def test_repeated_probes_unique_first_half_and_deterministic():
    probes = repeated_token_probes(8, 10, np.arange(3, 50), seed=1)
    assert probes.shape == (8, 20) and probes.dtype == torch.long
    assert torch.equal(probes[:, :10], probes[:, 10:])
    assert all(len(set(row[:10].tolist())) == 10 for row in probes)
    assert torch.equal(probes, repeated_token_probes(8, 10, np.arange(3, 50), seed=1))
    with pytest.raises(ValueError, match="unique"):
        repeated_token_probes(2, 10, np.arange(5), seed=0)


def test_bi_induct_snippets():
    ind = induction_snippet_probes(4, 6, np.arange(1, 30), seed=0, sep_token=0)
    anti = anti_induction_snippet_probes(4, 6, np.arange(1, 30), seed=0, sep_token=0)
    assert ind.shape == anti.shape == (4, 13)
    assert (ind[:, 6] == 0).all() and torch.equal(ind[:, :6], ind[:, 7:])
    assert torch.equal(anti[:, 7:], anti[:, :6].flip(1))


def test_probe_set_pickles_and_shortens():
    probe_set = make_probe_set(np.arange(1, 60), 5, 12, seed=3, source="frequent", sep_token=0)
    again = pickle.loads(pickle.dumps(probe_set))
    assert isinstance(again, ProbeSet) and torch.equal(again.tokens, probe_set.tokens)
    assert set(again.variants) == {"induction_snippet", "anti_induction_snippet"}
    short = probe_set.with_length(4)
    assert short.tokens.shape == (5, 8) and short.variants["induction_snippet"].shape == (5, 9)
    assert torch.equal(short.tokens[:, :4], probe_set.tokens[:, :4])


def test_snippet_probes_take_the_snippet_span_of_the_same_halves():
    pool = np.arange(1, 60)
    probes = make_probe_set(pool, 8, 20, 0, "uniform", sep_token=0, snippet_length=6)
    half = probes.tokens[:, :20]  # (8, 20)
    induction = probes.variants["induction_snippet"]
    anti = probes.variants["anti_induction_snippet"]
    assert induction.shape == anti.shape == (8, 13) and probes.snippet_length == 6
    torch.testing.assert_close(induction, torch.cat([half[:, :6], torch.zeros(8, 1).long(),
                                                     half[:, :6]], 1))  # fmt: skip
    torch.testing.assert_close(anti[:, 7:], half[:, :6].flip(1))
    # Shorter probes keep the span while it fits, then shrink it to the new length.
    assert probes.with_length(10).variants["induction_snippet"].shape == (8, 13)
    shorter = probes.with_length(4)
    assert shorter.snippet_length == 4 and shorter.variants["induction_snippet"].shape == (8, 9)
    # Without a span the snippets use the whole half, as before.
    whole = make_probe_set(pool, 8, 20, 0, "uniform", sep_token=0)
    assert whole.variants["induction_snippet"].shape == (8, 41) and whole.snippet_length is None
    with pytest.raises(ValueError, match=r"snippet_length: must be in \[1, 20\]"):
        make_probe_set(pool, 8, 20, 0, "uniform", sep_token=0, snippet_length=21)
