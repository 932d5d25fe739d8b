"""Value tests of one checkpoint's score rows on frozen attention patterns.

Every expected number is a literal worked out by hand (in the comments) from the definitions in
``science/telemetry/scores.py`` and ``checkpoint_scores.py``, or read from the score functions
the rows are built from. Written against the survivors of a mutation run of ``scores.py``.
"""

import logging
import math

import numpy as np
import pytest
import torch

from ih_kedro.science.telemetry.checkpoint_scores import _loss_positions, _mean_sd, score_checkpoint
from ih_kedro.science.telemetry.instrumentation import instrument
from ih_kedro.science.telemetry.probes import ProbeSet, make_probe_set, uniform_token_pool
from ih_kedro.science.telemetry.scores import (
    head_pattern_scores,
    loss_by_position,
    ov_copying_scores,
    repeated_probe_scores,
    top_fraction_share,
)
from ih_kedro.science.training.models import build_model
from tests.science.telemetry.frozen_tables import TABLE_PROBES, table_model, table_patterns


def test_loss_positions_and_mean_sd():
    assert _loss_positions(32) == [0, 1, 2, 3, 4, 5, 7, 9, 12, 15, 19, 24, 31]
    assert _loss_positions(10, 4) == [0, 1, 4, 9]  # geomspace 1, 2.15, 4.64, 10
    mean, sd = _mean_sd(torch.tensor([1.0, 2.0, float("nan"), float("inf"), 3.0]))
    assert (mean, sd) == (pytest.approx(2.0), pytest.approx(1.0))  # finite values, ddof = 1
    assert _mean_sd(torch.tensor([4.0])) == (4.0, 0.0)
    assert _mean_sd(torch.tensor([1.0, 3.0])) == (2.0, pytest.approx(math.sqrt(2)))
    assert all(math.isnan(x) for x in _mean_sd(torch.tensor([float("nan")])))


W = (0.2, 0.4, 0.6, 0.8)  # layer 1 head 0's prefix-matching weight in probes 0..3


def _checkpoint_patterns(seq: int = 8) -> dict[int, torch.Tensor]:
    """Frozen (4, 4, 8, 8) patterns for L = 4. Layer 0: uniform over the causal window.
    Layer 1: head 0 puts W[b] on key i - 3 and 1 - W[b] on key 0 at second-half queries
    i = 4..7; head 1 puts 0.9 on key i - 3 (0.1 on key 0) at even offsets i = 4, 6 only;
    heads 2, 3 (and every other query) attend to key 0."""
    causal = torch.ones(seq, seq).tril()
    layer0 = (causal / causal.sum(-1, keepdim=True)).expand(4, 4, seq, seq).clone()
    layer1 = torch.zeros(4, 4, seq, seq)
    layer1[..., 0] = 1.0
    for b, w in enumerate(W):
        for i in range(4, seq):
            layer1[b, 0, i, 0], layer1[b, 0, i, i - 3] = 1 - w, w
            if (i - 4) % 2 == 0:
                layer1[b, 1, i, 0], layer1[b, 1, i, i - 3] = 0.1, 0.9
    return {0: layer0, 1: layer1}


def test_score_checkpoint_rows_on_frozen_patterns():
    model = build_model("attn-only-2l-d64", 20, 8, seed=0).eval()
    probe_set = make_probe_set(uniform_token_pool(20, exclude=(0,)), 4, 4, 0, "uniform")
    with instrument(model, frozen_patterns=_checkpoint_patterns()):
        head_rows, model_rows, samples = score_checkpoint(
            model, probe_set, None, batch_size=4, top_fraction=0.25, run_name="run",
            step=7, tokens_seen=896.0,
        )  # fmt: skip
        reference = repeated_probe_scores(model, probe_set.tokens, batch_size=4)
    rows = {(r["metric"], r["layer"], r["head"]): r for r in head_rows}
    assert len(head_rows) == len(rows)  # one row per (metric, layer, head)
    b = (1 / 5 + 1 / 6 + 1 / 7 + 1 / 8) / 4  # the uniform head's PS, queries 4..7
    sd_w = math.sqrt(((0.3**2) * 2 + (0.1**2) * 2) / 3)  # sd of W, ddof = 1
    expected = {
        ("prefix_matching", 0, 2): (b, 0.0),
        ("prefix_matching_even", 0, 0): ((1 / 5 + 1 / 7) / 2, 0.0),
        ("prefix_matching_odd", 0, 3): ((1 / 6 + 1 / 8) / 2, 0.0),
        ("previous_token", 0, 1): (b, 0.0),
        ("anti_induction", 0, 0): ((1 / 6 + 1 / 7 + 1 / 8) / 3, 0.0),
        ("prefix_matching", 1, 0): (0.5, sd_w),
        ("prefix_matching_even", 1, 0): (0.5, sd_w),
        ("induction", 1, 0): (0.5, sd_w),
        ("anti_induction", 1, 0): (0.5 / 3, sd_w / 3),  # (1 - W) / 3: key 0 at i = 5 only
        ("previous_token", 1, 0): (0.0, 0.0),
        ("prefix_matching", 1, 1): (0.45, 0.0),
        ("prefix_matching_even", 1, 1): (0.9, 0.0),
        ("prefix_matching_odd", 1, 1): (0.0, 0.0),
        ("anti_induction", 1, 3): (1 / 3, 0.0),
    }
    for key, (value, sd) in expected.items():
        row = rows[key]
        assert row["value"] == pytest.approx(value, abs=1e-6), key
        assert row["sd"] == pytest.approx(sd, abs=1e-6), key
        assert (row["run_name"], row["step"], row["tokens_seen"]) == ("run", 7, 896.0)
        assert row["probe_source"] == "uniform"
    copying = ov_copying_scores(model)
    for layer in range(2):
        for head in range(4):
            row = rows[("copying", layer, head)]
            assert row["value"] == pytest.approx(float(copying[layer, head]))
            assert math.isnan(row["sd"]) and row["probe_source"] == "weights"
            assert row["run_name"] == "run"
    # The logit scores of every head are there too, with the per-sample sd.
    for metric in ("logit_attribution", "direct_logit_attribution", "attended_logit_share"):
        values = reference[metric][:, 1, 2].double()
        assert rows[(metric, 1, 2)]["value"] == pytest.approx(float(values.mean()), abs=1e-6)
        assert rows[(metric, 1, 2)]["sd"] == pytest.approx(float(values.std()), abs=1e-6)

    model_values = {r["metric"]: r for r in model_rows}
    assert all(r["run_name"] == "run" and r["step"] == 7 for r in model_rows)
    assert model_values["prefix_matching_max"]["value"] == pytest.approx(0.5, abs=1e-6)
    assert model_values["prefix_matching_max"]["sd"] == pytest.approx(sd_w, abs=1e-6)
    assert model_values["prefix_matching_by_parity_max"]["value"] == pytest.approx(0.9, abs=1e-6)
    assert model_values["prefix_matching_by_parity_max"]["sd"] == pytest.approx(0.0, abs=1e-6)
    # Induction means: 4 heads at b in layer 0; 0.5, 0.45, 0, 0 in layer 1. Top 25%: 2 heads.
    share = model_values["induction_top25pct_share"]
    assert share["value"] == pytest.approx(0.95 / (4 * b + 0.95), abs=1e-6)
    assert math.isnan(share["sd"]) and share["probe_source"] == "uniform"
    assert model_values["induction_top25pct_share_layer0"]["value"] == pytest.approx(0.25)
    assert model_values["induction_top25pct_share_layer1"]["value"] == pytest.approx(0.5 / 0.95)
    for metric in ("associative_recall", "associative_recall_mean_rank", "repeated_loss_drop"):
        values = reference[metric].double()
        assert model_values[metric]["value"] == pytest.approx(float(values.mean()), abs=1e-6)
        assert model_values[metric]["sd"] == pytest.approx(float(values.std()), abs=1e-6)
        assert model_values[metric]["probe_source"] == "uniform"
    assert not any(m.startswith(("icl", "validation", "loss_pos")) for m in model_values)
    assert set(samples) == {
        "prefix_matching", "prefix_matching_by_parity", "associative_recall", "repeated_loss_drop",
    }  # fmt: skip
    assert all(a.dtype == np.float32 for a in samples.values())
    np.testing.assert_allclose(samples["prefix_matching"][:, 1, 0], W, atol=1e-6)
    np.testing.assert_allclose(samples["prefix_matching"][:, 0, 3], b, atol=1e-6)
    by_parity = samples["prefix_matching_by_parity"]  # (4, 2, 8): even heads, then odd heads
    np.testing.assert_allclose(by_parity[:, 1, 1], 0.9, atol=1e-6)
    np.testing.assert_allclose(by_parity[:, 1, 5], 0.0, atol=1e-6)
    np.testing.assert_allclose(by_parity[:, 0, 4], (1 / 6 + 1 / 8) / 2, atol=1e-6)
    np.testing.assert_allclose(samples["associative_recall"], reference["associative_recall"])
    np.testing.assert_allclose(samples["repeated_loss_drop"], reference["repeated_loss_drop"])


def test_score_checkpoint_snippet_variants_rows():
    model = build_model("attn-only-2l-d64", 20, 16, seed=0).eval()
    probe_set = make_probe_set(uniform_token_pool(20, exclude=(0,)), 3, 4, 0, "frequent", 0)
    head_rows, _, _ = score_checkpoint(model, probe_set, None, batch_size=3, step=2)
    rows = {(r["metric"], r["layer"], r["head"]): r for r in head_rows}
    for variant, tokens in probe_set.variants.items():
        scores = head_pattern_scores(model, tokens, batch_size=3, repeated=False)
        for metric in ("induction", "anti_induction"):
            row = rows[(f"{metric}_{variant}", 1, 3)]
            assert row["value"] == pytest.approx(float(scores[metric][:, 1, 3].mean()), abs=1e-6)
            assert row["probe_source"] == "frequent" and row["step"] == 2


def test_score_checkpoint_validation_rows():
    model = build_model("attn-only-2l-d64", 20, 32, seed=0).eval()
    probe_set = make_probe_set(uniform_token_pool(20), 2, 4, 0, "uniform")
    validation = np.random.default_rng(1).integers(0, 20, (3, 33))  # C = 32
    _, model_rows, _ = score_checkpoint(model, probe_set, validation, batch_size=8)
    rows = {r["metric"]: r for r in model_rows}
    losses = loss_by_position(model, validation).double()  # (3, 32)
    icl = losses[:, 30] - losses[:, 4]
    assert rows["icl_score"]["value"] == pytest.approx(float(icl.mean()), abs=1e-5)
    assert rows["icl_score"]["sd"] == pytest.approx(float(icl.std()), abs=1e-5)
    assert rows["icl_score"]["probe_source"] == "validation"
    assert rows["validation_loss"]["value"] == pytest.approx(float(losses.mean()), abs=1e-5)
    assert rows["validation_loss"]["sd"] == pytest.approx(float(losses.mean(1).std()), abs=1e-5)
    positions = [m for m in rows if m.startswith("loss_pos_")]
    assert positions == [f"loss_pos_{p:05d}" for p in (1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 32)]
    assert rows["loss_pos_00008"]["value"] == pytest.approx(float(losses[:, 7].mean()), abs=1e-5)
    assert rows["loss_pos_00008"]["probe_source"] == "validation"
    # An empty validation set adds nothing.
    _, empty_rows, _ = score_checkpoint(model, probe_set, validation[:0], batch_size=8)
    assert not any(r["metric"] == "validation_loss" for r in empty_rows)


def test_score_checkpoint_skips_validation_outside_the_vocabulary(caplog):
    model = build_model("attn-only-2l-d64", 20, 32, seed=0).eval()
    probe_set = ProbeSet(
        tokens=make_probe_set(uniform_token_pool(20), 2, 4, 0, "uniform").tokens,
        source="uniform",
        seed=0,
        length=4,
    )
    validation = np.full((2, 33), 5)
    validation[1, 7] = 20  # one id equal to the vocabulary size: outside
    with caplog.at_level(logging.WARNING, logger="ih_kedro.science.telemetry.checkpoint_scores"):
        _, rows, _ = score_checkpoint(model, probe_set, validation, batch_size=2)
    assert "validation tokens exceed the model's vocabulary" in caplog.text
    assert not any(r["metric"] in ("icl_score", "validation_loss") for r in rows)
    validation[1, 7] = 19  # the largest id is inside
    _, rows, _ = score_checkpoint(model, probe_set, validation, batch_size=2)
    assert any(r["metric"] == "validation_loss" for r in rows)


def test_prefix_matching_max_skips_layer_0_by_default():
    """Layer 0 holds the best PS head (all-ones pattern, PS 1); by default only layers >= 1
    count, where the best head is P1 (PS 53/90)."""
    model = table_model()
    patterns = table_patterns()
    patterns[1][:, 2] = 0.0  # layer 1's all-ones head now attends nowhere
    probe_set = ProbeSet(tokens=TABLE_PROBES[:1], source="uniform", seed=0, length=3)
    with instrument(model, frozen_patterns=patterns):
        _, rows, _ = score_checkpoint(model, probe_set, None, batch_size=1)
        _, all_layers, _ = score_checkpoint(model, probe_set, None, batch_size=1, min_layer=0)
    value = {r["metric"]: r["value"] for r in rows}
    assert value["prefix_matching_max"] == pytest.approx(53 / 90, abs=1e-6)
    assert value["prefix_matching_by_parity_max"] == pytest.approx(3 / 5, abs=1e-6)  # P1 odd
    value = {r["metric"]: r["value"] for r in all_layers}
    assert value["prefix_matching_max"] == pytest.approx(1.0, abs=1e-6)


def test_score_checkpoint_tags_every_model_row_with_its_probe_source():
    model = build_model("attn-only-2l-d64", 20, 32, seed=0).eval()
    probe_set = make_probe_set(uniform_token_pool(20), 2, 4, 0, "uniform")
    validation = np.random.default_rng(1).integers(0, 20, (3, 33))  # C = 32
    _, model_rows, _ = score_checkpoint(model, probe_set, validation, batch_size=8)
    sources = {r["metric"]: r["probe_source"] for r in model_rows}
    for metric in ("prefix_matching_max", "prefix_matching_by_parity_max", "associative_recall"):
        assert sources[metric] == "uniform", metric
    assert [m for m, s in sources.items() if s is None] == []
    assert sources["validation_loss"] == "validation"
    assert any(m.endswith("_layer1") and s == "uniform" for m, s in sources.items())


def test_score_checkpoint_passes_top_fraction_and_min_layer_through():
    model = build_model("attn-only-2l-d64", 20, 16, seed=3).eval()
    probe_set = make_probe_set(uniform_token_pool(20, exclude=(0,)), 4, 4, 0, "uniform")
    heads, rows, _ = score_checkpoint(model, probe_set, None, batch_size=4, top_fraction=0.5,
                                      min_layer=0)  # fmt: skip
    by_metric = {r["metric"]: r["value"] for r in rows}
    induction = torch.zeros(2, 4)
    parity = torch.zeros(2, 2, 4)
    for r in heads:
        if r["metric"] == "induction":
            induction[r["layer"], r["head"]] = r["value"]
        for i, name in enumerate(("prefix_matching_even", "prefix_matching_odd")):
            if r["metric"] == name:
                parity[i, r["layer"], r["head"]] = r["value"]
    for layer in range(2):  # top 50 % of 4 heads = 2 heads, not the default 2 % (1 head)
        share = by_metric[f"induction_top50pct_share_layer{layer}"]
        assert share == pytest.approx(top_fraction_share(induction[layer], 0.5), abs=1e-6)
        assert share != pytest.approx(top_fraction_share(induction[layer], 0.02), abs=1e-6)
    # min_layer 0: the best (head, parity) over both layers, here in layer 0
    best = float(parity.max())
    assert by_metric["prefix_matching_by_parity_max"] == pytest.approx(best, abs=1e-6)
    assert float(parity[:, 0].max()) > float(parity[:, 1].max())
