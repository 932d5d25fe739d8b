"""The online evaluator's numbers on models whose attention is known.

- A hand-set induction model (tests/science/telemetry/conftest.py): head 1.0 attends to the
  token after the previous occurrence, so the layer>=1 score is ~1 and layer 0's is ~0.
- A model whose queries and keys are zero attends uniformly over its causal window, so every
  head's prefix-matching score is exactly ``mean(1 / (i + 1)) for i in [L, 2L)``, which pins the
  probe half-length ``L = min(50, C // 2)`` (or ``probe_length``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.telemetry.online import make_online_evaluator
from ih_kedro.science.training.models import build_model
from tests.science.telemetry.conftest import VOCAB, build_handset_model


def packed(vocab: int = VOCAB) -> PackedTokens:
    tokens = np.random.default_rng(0).integers(0, vocab, size=5_000).astype(np.uint16)
    return PackedTokens(tokens=tokens, vocab_size=vocab, eos_token_id=0, checksum="e")


def uniform_attention_model(n_layer: int, vocab: int, positions: int) -> torch.nn.Module:
    model = build_model(
        {"family": "attention_only", "n_layer": n_layer, "n_head": 2, "d_model": 32},
        vocab_size=vocab,
        n_positions=positions,
        seed=0,
    )
    with torch.no_grad():
        for block in model.blocks:
            block.attn.q_proj.weight.zero_()
            block.attn.k_proj.weight.zero_()
    return model.eval()


def uniform_score(length: int) -> float:
    return float(np.mean([1.0 / (i + 1) for i in range(length, 2 * length)]))


def test_handset_induction_head_scores_one_in_layer_one():
    evaluate = make_online_evaluator(packed(), 32, {"n_probes": 8, "token_pool_size": 30})
    with torch.no_grad():
        scores = evaluate(build_handset_model())
    assert scores["prefix_matching_best_layer1"] > 0.99
    assert scores["prefix_matching_best_layer0"] < 0.01


@pytest.mark.parametrize(
    ("context", "options", "length"),
    [
        (32, {}, 16),  # L = C // 2
        (200, {}, 50),  # L = min(50, C // 2)
        (32, {"probe_length": 5}, 5),
    ],
)
def test_uniform_attention_scores_the_uniform_baseline(context, options, length):
    model = uniform_attention_model(2, 64, max(context, 2 * length))
    evaluate = make_online_evaluator(packed(64), context, {"n_probes": 4, **options})
    with torch.no_grad():
        scores = evaluate(model)
    expected = uniform_score(length)
    assert scores["prefix_matching_best_layer1"] == pytest.approx(expected, abs=1e-5)
    assert scores["prefix_matching_best_layer0"] == pytest.approx(expected, abs=1e-5)


def test_one_layer_model_reports_layer_zero_as_best():
    model = uniform_attention_model(1, 64, 32)
    evaluate = make_online_evaluator(packed(64), 16, {"n_probes": 4})
    with torch.no_grad():
        scores = evaluate(model)
    assert scores["prefix_matching_best_layer1"] == scores["prefix_matching_best_layer0"]
    assert scores["prefix_matching_best_layer0"] == pytest.approx(uniform_score(8), abs=1e-5)


def even_gated_induction_model(length: int) -> torch.nn.Module:
    """Head 1.1 attends to the prefix-matching key at even offsets into the second half only."""
    from ih_kedro.science.telemetry.instrumentation import instrument

    model = build_model("attn-only-2l-d64", VOCAB, 2 * length, seed=0).eval()
    seq = 2 * length
    pattern = torch.zeros(8, 4, seq, seq)  # (B, H, T, S): every head on the first token ...
    pattern[..., 0] = 1.0
    for i in range(length, seq, 2):  # ... but head 1.1 on x_{i-L+1} at even offsets
        pattern[:, 1, i] = 0.0
        pattern[:, 1, i, i - (length - 1)] = 1.0
    return model, instrument(model, frozen_patterns={1: pattern})


def test_a_head_gated_to_every_other_position_scores_half_on_the_mean_and_one_by_parity():
    model, frozen = even_gated_induction_model(16)
    evaluate = make_online_evaluator(packed(), 32, {"n_probes": 8, "token_pool_size": 30})
    with frozen, torch.no_grad():
        scores = evaluate(model)
    assert scores["prefix_matching_best_layer1"] == pytest.approx(0.5, abs=1e-6)
    assert scores["prefix_matching_by_parity_best_layer1"] == pytest.approx(1.0, abs=1e-6)


def test_an_unknown_online_metric_fails_naming_the_parameter():
    with pytest.raises(ValueError, match=r"training\.online_emergence\.metric: 'induction'"):
        make_online_evaluator(packed(), 32, {"metric": "induction"})
