"""Value tests of the telemetry scores on hand-built attention patterns and hand-set weights.

Every expected number is a literal worked out by hand (in the comments) from the definitions in
``science/telemetry/scores.py``: frozen attention patterns with known entries, a hand-made
cache for the logit scores, 2 x 2 OV circuits with known eigenvalues, fixed logit tables.
Written against the survivors of a mutation run of ``scores.py``.
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from ih_kedro.science.telemetry.instrumentation import hook_name, instrument
from ih_kedro.science.telemetry.probes import make_probe_set, uniform_token_pool
from ih_kedro.science.telemetry.scores import (
    _centred_share,
    _half_length,
    _logit_batch_scores,
    _model_batch_scores,
    _pattern_keys,
    associative_recall,
    best_head_samples,
    head_pattern_scores,
    icl_positions,
    icl_score,
    loss_by_position,
    ov_copying_scores,
    prefix_matching_scores,
    prefix_matching_scores_per_sample,
    previous_occurrence,
    repeated_probe_scores,
    top_fraction_share,
    top_heads,
    uniform_prefix_matching_baseline,
)
from ih_kedro.science.training.models import build_model
from tests.science.telemetry.frozen_tables import TABLE_PROBES, table_model, table_patterns

# --------------------------------------------------------------------------- pattern scores


def test_previous_occurrence_finds_the_most_recent_earlier_position():
    tokens = torch.tensor([[3, 1, 3, 3, 2, 1], [5, 5, 5, 5, 5, 5]])
    assert previous_occurrence(tokens).tolist() == [[-1, -1, 0, 2, -1, 1], [-1, 0, 1, 2, 3, 4]]


def test_pattern_keys_of_repeated_and_plain_probes():
    tokens = torch.tensor([[1, 2, 3, 1, 2, 3]])  # S || S, L = 3; previous occurrence 0, 1, 2
    keys = _pattern_keys(tokens, 3)
    expected = {
        "induction": ([0, 0, 0, 1, 2, 3], [0, 0, 0, 1, 1, 1]),
        "anti_induction": ([-2, -2, -2, -1, 0, 1], [0, 0, 0, 0, 1, 1]),
        "prefix_matching": ([-2, -1, 0, 1, 2, 3], [0, 0, 0, 1, 1, 1]),
        "prefix_matching_even": ([-2, -1, 0, 1, 2, 3], [0, 0, 0, 1, 0, 1]),
        "prefix_matching_odd": ([-2, -1, 0, 1, 2, 3], [0, 0, 0, 0, 1, 0]),
        "previous_token": ([-1, 0, 1, 2, 3, 4], [0, 0, 0, 1, 1, 1]),
    }
    assert set(keys) == set(expected)
    for metric, (key, valid) in expected.items():
        assert keys[metric][0].tolist() == [key], metric
        assert keys[metric][1].int().tolist() == [valid], metric
    assert set(_pattern_keys(tokens, None)) == {"induction", "anti_induction"}


def test_half_length_of_repeated_probes():
    assert _half_length(torch.zeros(2, 6, dtype=torch.long)) == 3
    with pytest.raises(ValueError, match="even length, got 5"):
        _half_length(torch.zeros(2, 5, dtype=torch.long))


def test_head_pattern_scores_on_frozen_table_patterns():
    model = table_model()
    with instrument(model, frozen_patterns=table_patterns()):
        scores = head_pattern_scores(model, TABLE_PROBES, batch_size=1)
    assert set(scores) == {
        "prefix_matching", "prefix_matching_even", "prefix_matching_odd", "previous_token",
        "induction", "anti_induction",
    }  # fmt: skip
    # Positional scores (queries i = 3, 4, 5), the same for every probe.
    # PS (key i - 2): P0 0.31, 0.42, 0.53 -> 0.42; P1 2/4, 3/5, 4/6 -> 53/90.
    # even (i = 3, 5): 0.42 and 7/12; odd (i = 4): 0.42 and 3/5.
    # previous token (key i - 1): P0 0.32, 0.43, 0.54 -> 0.43; P1 3/4, 4/5, 5/6 -> 143/180.
    positional = {
        "prefix_matching": (0.42, 53 / 90),
        "prefix_matching_even": (0.42, 7 / 12),
        "prefix_matching_odd": (0.42, 3 / 5),
        "previous_token": (0.43, 143 / 180),
    }
    for metric, (v0, v1) in positional.items():
        expected = torch.tensor([[v0, v1, 1.0, 0.0], [v1, v0, 1.0, 0.0]]).expand(3, 2, 4)
        torch.testing.assert_close(scores[metric], expected, atol=1e-6, rtol=0, msg=metric)
    # Induction (key: previous occurrence + 1). Probe 0: keys 1, 2, 3 at i = 3, 4, 5 (= PS).
    # Probe 1: keys 1, 2, 4 at i = 2, 4, 5: P0 0.21, 0.42, 0.54 -> 0.39; P1 2/3, 3/5, 5/6 -> 0.7.
    induction = scores["induction"]
    torch.testing.assert_close(
        induction[:2],
        torch.tensor(
            [[[0.42, 53 / 90, 1, 0], [53 / 90, 0.42, 1, 0]], [[0.39, 0.7, 1, 0], [0.7, 0.39, 1, 0]]]
        ),
        atol=1e-6,
        rtol=0,
    )
    # Anti-induction (key: previous occurrence - 1, needs it >= 1). Probe 0: keys 0, 1 at
    # i = 4, 5: P0 0.40, 0.51 -> 0.455; P1 1/5, 2/6 -> 4/15. Probe 1: keys 0, 2 at i = 4, 5:
    # P0 0.40, 0.52 -> 0.46; P1 1/5, 3/6 -> 0.35.
    anti = scores["anti_induction"]
    torch.testing.assert_close(
        anti[:2],
        torch.tensor(
            [
                [[0.455, 4 / 15, 1, 0], [4 / 15, 0.455, 1, 0]],
                [[0.46, 0.35, 1, 0], [0.35, 0.46, 1, 0]],
            ]
        ),
        atol=1e-6,
        rtol=0,
    )
    assert torch.isnan(induction[2]).all() and torch.isnan(anti[2]).all()


def test_plain_probe_pattern_scores_and_prefix_matching_means():
    model = table_model()
    with instrument(model, frozen_patterns=table_patterns()):
        plain = head_pattern_scores(model, TABLE_PROBES[:2], batch_size=1, repeated=False)
        ps = prefix_matching_scores(model, TABLE_PROBES, batch_size=1)
        per_sample = prefix_matching_scores_per_sample(model, TABLE_PROBES[1:], batch_size=1)
    assert set(plain) == {"induction", "anti_induction"}
    torch.testing.assert_close(
        plain["induction"][1],
        torch.tensor([[0.39, 0.7, 1, 0], [0.7, 0.39, 1, 0]]),
        atol=1e-6,
        rtol=0,
    )
    expected = torch.tensor([[0.42, 53 / 90, 1, 0], [53 / 90, 0.42, 1, 0]])
    torch.testing.assert_close(ps, expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(per_sample, expected.expand(2, 2, 4), atol=1e-6, rtol=0)


def test_probe_batches_check_batch_size_and_restore_training_mode():
    model = table_model()
    seen = []
    model.register_forward_pre_hook(lambda module, args: seen.append(module.training))
    model.train()
    with pytest.raises(ValueError, match="batch_size must be positive, got 0"):
        head_pattern_scores(model, TABLE_PROBES, batch_size=0)
    head_pattern_scores(model, TABLE_PROBES, batch_size=2)
    assert seen == [False, False]  # two batches (2 + 1 probes), both in eval mode
    assert model.training  # the caller's mode is restored
    model.eval()
    head_pattern_scores(model, TABLE_PROBES, batch_size=3)
    assert not model.training and len(seen) == 3


def test_uniform_prefix_matching_baseline_values():
    assert uniform_prefix_matching_baseline(1) == pytest.approx(0.5)  # i = 1: 1/2
    assert uniform_prefix_matching_baseline(2) == pytest.approx((1 / 3 + 1 / 4) / 2)
    assert uniform_prefix_matching_baseline(3) == pytest.approx((1 / 4 + 1 / 5 + 1 / 6) / 3)


# --------------------------------------------------------------------------- logit scores


def test_centred_share_values():
    boosts = torch.tensor([[1.0, 5.0, 6.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    # Row 0: mean 3, centred and ReLU'd 0, 2, 3, 0 (total 5). Row 1: all equal -> 0.
    torch.testing.assert_close(_centred_share(boosts, torch.tensor([1, 0])), torch.tensor([0.4, 0]))
    torch.testing.assert_close(_centred_share(boosts, torch.tensor([2, 3])), torch.tensor([0.6, 0]))
    torch.testing.assert_close(_centred_share(boosts, torch.tensor([3, 1])), torch.tensor([0.0, 0]))


class _Unembed(nn.Module):
    """The two things ``_logit_batch_scores`` reads from a model: W_U and the final norm."""

    def __init__(self, norm: nn.Module):
        super().__init__()
        self.lm_head = nn.Linear(3, 5, bias=False)
        self.ln_f = norm
        with torch.no_grad():  # u_0, u_1, u_2 one-hot; u_3, u_4 never in a probe
            self.lm_head.weight.copy_(
                torch.tensor([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1], [2, 0, 1]])
            )

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head


def _logit_cache() -> tuple[torch.Tensor, dict[str, torch.Tensor], list[torch.Tensor]]:
    """Probe 0 1 2 0 1 2 (L = 3; targets 1, 2, 0, in-sample slots 1, 2, 0), two layers of two
    heads with dh = d = 3. Layer 0: W_O = I, so the boosts of the in-sample tokens are z itself.
    Layer 1: W_O = 2 I and z, patterns of layer 0 with the heads swapped."""
    batch = torch.tensor([[0, 1, 2, 0, 1, 2]])
    z = torch.zeros(1, 6, 2, 3)
    z[0, :3] = torch.tensor([9.0, 0, 0])  # first-half queries: never read
    z[0, 3:, 0] = torch.tensor([[0.0, 3, 3], [6, 0, 3], [4, 1, 1]])  # head 0, queries 3, 4, 5
    z[0, 3:, 1] = torch.tensor([[0.0, 0, 3], [0, 0, 3], [1, 2, 6]])  # head 1
    pattern = torch.zeros(1, 2, 6, 6)
    pattern[0, :, :3, 5] = 1.0  # first-half queries (not read) attend to key 5
    for query, (k0, k1) in zip((3, 4, 5), ((0, 2), (3, 4), (4, 5)), strict=True):
        pattern[0, 0, query, k0] = 1.0  # head 0 attends slots 0, 0, 1
        pattern[0, 1, query, k1] = 1.0  # head 1 attends slots 2, 1, 2
    cache = {
        hook_name(0, "hook_z"): z,
        hook_name(0, "hook_pattern"): pattern,
        hook_name(1, "hook_z"): z.flip(2),
        hook_name(1, "hook_pattern"): pattern.flip(1),
        "ln_final.hook_scale": torch.tensor([7.0, 7, 7, 2, 4, 0.5]).reshape(1, 6, 1),
    }
    eye = torch.eye(3).expand(2, 3, 3)
    return batch, cache, [eye, 2 * eye]


def test_logit_scores_with_layernorm_gain():
    norm = nn.LayerNorm(3)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([2.0, 1.0, 3.0]))
    batch, cache, w_o = _logit_cache()
    scores = _logit_batch_scores(_Unembed(norm), batch, cache, w_o, 3)
    # Logit attribution (target slots 1, 2, 0). Head 0: centred boosts 0 1 1 | 3 0 0 | 2 0 0
    # -> shares 1/2, 0, 1 -> 1/2. Head 1: 0 0 2 | 0 0 2 | 0 0 3 -> 0, 1, 0 -> 1/3.
    torch.testing.assert_close(
        scores["logit_attribution"], torch.tensor([[[0.5, 1 / 3], [1 / 3, 0.5]]])
    )
    # Attended slots: head 0 -> 0, 0, 1: shares 0, 1, 0 -> 1/3; head 1 -> 2, 1, 2: 1, 0, 1.
    torch.testing.assert_close(
        scores["attended_logit_share"], torch.tensor([[[1 / 3, 2 / 3], [2 / 3, 1 / 3]]])
    )
    # DLA: u_target = gamma * u_t, centred: t=1 -> (-1/3, 2/3, -1/3), t=2 -> (-1, -1, 2),
    # t=0 -> (4/3, -2/3, -2/3); divided by the scales 2, 4, 0.5.
    # Head 0: 1/2, 0/4, 4/0.5 -> 17/6. Head 1: -1/2, 6/4, -4/0.5 -> -7/3. Layer 1: twice, swapped.
    torch.testing.assert_close(
        scores["direct_logit_attribution"], torch.tensor([[[17 / 6, -7 / 3], [-14 / 3, 17 / 3]]])
    )


def test_direct_logit_attribution_without_centring_or_gain():
    batch, cache, w_o = _logit_cache()
    rms = nn.RMSNorm(3)  # not centring
    with torch.no_grad():
        rms.weight.copy_(torch.tensor([2.0, 1.0, 3.0]))
    dla = _logit_batch_scores(_Unembed(rms), batch, cache, w_o, 3)["direct_logit_attribution"]
    # u_target = gamma * u_t: (0, 1, 0), (0, 0, 3), (2, 0, 0). Head 0: 3/2, 9/4, 8/0.5 -> 79/12.
    # Head 1: 0/2, 9/4, 2/0.5 -> 25/12.
    torch.testing.assert_close(dla, torch.tensor([[[79 / 12, 25 / 12], [50 / 12, 158 / 12]]]))
    plain = nn.LayerNorm(3, elementwise_affine=False)  # centring, no gain
    dla = _logit_batch_scores(_Unembed(plain), batch, cache, w_o, 3)["direct_logit_attribution"]
    # Centred one-hots. Head 0: 1/2, 0/4, 2/0.5 -> 3/2. Head 1: -1/2, 2/4, -2/0.5 -> -4/3.
    torch.testing.assert_close(dla, torch.tensor([[[1.5, -4 / 3], [-8 / 3, 3.0]]]))


# --------------------------------------------------------------------------- model scores


def test_model_batch_scores_recall_rank_and_loss_drop():
    batch = torch.tensor([[0, 1, 2, 0, 1, 2]])  # L = 3; second-half targets 1, 2, 0
    logits = torch.zeros(1, 6, 4)
    logits[0, 2] = torch.tensor([0.0, 0, 0, 9])  # predicts x_3 (not in either loss half)
    logits[0, 3] = torch.tensor([0.0, 5, 1, 2])  # target 1 ranks first
    logits[0, 4] = torch.tensor([3.0, 1, 2, 0])  # target 2: one token above
    logits[0, 5] = torch.tensor([1.0, 1, 0, 4])  # target 0: one above, a tie is not above
    scores = _model_batch_scores(batch, logits, 3)
    torch.testing.assert_close(scores["associative_recall"], torch.tensor([1 / 3]))
    torch.testing.assert_close(scores["associative_recall_mean_rank"], torch.tensor([2 / 3]))
    # First-half targets x_1, x_2 from zero logits: log 4 each. Second-half targets x_4, x_5.
    second = (
        math.log(1 + math.exp(5) + math.exp(1) + math.exp(2)) - 5
        + math.log(math.exp(3) + math.exp(1) + math.exp(2) + 1) - 2
    ) / 2  # fmt: skip
    torch.testing.assert_close(
        scores["repeated_loss_drop"], torch.tensor([math.log(4) - second]), atol=1e-6, rtol=0
    )


def test_associative_recall_matches_the_repeated_probe_scores():
    model = build_model("attn-only-2l-d64", 12, 8, seed=3).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(30.0)  # spread the logits
    probes = make_probe_set(uniform_token_pool(12), 5, 4, 1, "uniform").tokens
    full = repeated_probe_scores(model, probes, batch_size=5)
    recall = associative_recall(model, probes, batch_size=2)
    assert recall["accuracy"] == pytest.approx(float(full["associative_recall"].mean()))
    assert recall["mean_rank"] == pytest.approx(float(full["associative_recall_mean_rank"].mean()))
    assert recall["mean_rank"] > 0.5  # a random model: the check above is not 0 == 0
    with pytest.raises(ValueError, match="even length"):
        associative_recall(model, probes[:, :-1])


def test_associative_recall_of_the_handset_induction_model(handset_model, handset_probes):
    recall = associative_recall(handset_model, handset_probes.tokens[:3], batch_size=2)
    assert recall == {"accuracy": 1.0, "mean_rank": 0.0}
    with instrument(handset_model, ablate={1: [0]}):  # no induction head: the noise decides
        ablated = associative_recall(handset_model, handset_probes.tokens[:3], batch_size=2)
    assert ablated["accuracy"] < 0.5 and ablated["mean_rank"] > 1.0


class _LogitTable(nn.Module):
    """A 'model' whose next-token log-probabilities depend on the current token only."""

    def __init__(self):
        super().__init__()
        probs = torch.tensor([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1], [1 / 3, 1 / 3, 1 / 3]])
        self.table = nn.Embedding(3, 3)
        with torch.no_grad():
            self.table.weight.copy_(probs.log())
        self.modes: list[bool] = []

    def forward(self, x):
        self.modes.append(self.training)
        return SimpleNamespace(logits=self.table(x))


def test_loss_by_position_exact_losses_and_mode():
    model = _LogitTable()
    model.train()
    sequences = np.array([[0, 1, 2, 0], [1, 1, 1, 1], [2, 0, 0, 2]])
    losses = loss_by_position(model, sequences, batch_size=2)
    third = -math.log(1 / 3)
    expected = torch.tensor(
        [
            [-math.log(0.25), -math.log(0.1), third],
            [-math.log(0.8)] * 3,
            [third, -math.log(0.5), -math.log(0.25)],
        ]
    )
    torch.testing.assert_close(losses, expected)
    assert model.modes == [False, False] and model.training


def test_icl_positions_and_score():
    assert icl_positions(32) == (4, 30)
    assert icl_positions(100) == (9, 97)  # round(9.77) - 1, round(97.66) - 1
    assert icl_positions(1024) == (99, 999)
    assert icl_positions(200) == (19, 194)  # round(19.53) - 1 (/ 513 would give 18)
    with pytest.raises(ValueError, match="needs C >= 32, got 31"):
        icl_positions(31)
    losses = torch.arange(64.0).reshape(2, 32) ** 2  # row r, position t: (32 r + t)^2
    torch.testing.assert_close(icl_score(losses), torch.tensor([30.0**2 - 4**2, 62.0**2 - 36**2]))


def test_best_head_samples_skip_early_layers_and_nan():
    nan = float("nan")
    samples = torch.tensor(
        [
            [[5.0, 0.0], [0.3, nan]],
            [[5.0, 0.0], [0.3, 0.1]],
            [[5.0, 0.0], [0.3, 0.1]],
        ]
    )  # (n=3, layers=2, heads=2); layer 0 head 0 is best but is skipped by min_layer = 1
    torch.testing.assert_close(best_head_samples(samples), torch.tensor([0.3, 0.3, 0.3]))
    torch.testing.assert_close(best_head_samples(samples, 0), torch.tensor([5.0, 5.0, 5.0]))
    # Layer 1 head 1 now has the best nanmean (0.4 over its finite samples).
    samples[1:, 1, 1] = torch.tensor([0.5, 0.3])
    picked = best_head_samples(samples)
    assert math.isnan(picked[0]) and picked[1:].tolist() == pytest.approx([0.5, 0.3])
    # No layer >= min_layer: every layer counts.
    torch.testing.assert_close(best_head_samples(samples, 2), torch.tensor([5.0, 5.0, 5.0]))
    one_layer = torch.tensor([[[1.0, 2.0]], [[1.0, 4.0]]])  # (2, 1, 2)
    torch.testing.assert_close(best_head_samples(one_layer), torch.tensor([2.0, 4.0]))


def test_top_fraction_share_and_top_heads():
    scores = torch.tensor([[-1.0, 2.0], [1.0, 1.0]])  # clamped to 0, 2, 1, 1 (total 4)
    assert top_fraction_share(scores, 0.5) == pytest.approx(0.75)  # top 2: 2 + 1
    assert top_fraction_share(scores, 0.3) == pytest.approx(0.75)  # ceil(1.2) = 2
    assert top_fraction_share(scores, 0.25) == pytest.approx(0.5)  # top 1
    assert top_fraction_share(scores, 0.0) == pytest.approx(0.5)  # at least one
    assert math.isnan(top_fraction_share(torch.tensor([-1.0, 0.0])))
    heads = torch.tensor([[0.1, 0.9, 0.3], [0.8, 0.2, 0.7]])
    assert top_heads(heads, 0.34) == [(0, 1), (1, 0), (1, 2)]  # ceil(2.04) = 3
    assert top_heads(heads, 0.0) == [(0, 1)]
    assert top_heads(heads) == [(0, 1)]  # default 2%: ceil(0.12) = 1 head
    assert top_fraction_share(scores) == pytest.approx(0.5)  # default 2%: one entry
    assert top_heads(heads, 0.5, per_layer=True) == [(0, 1), (0, 2), (1, 0), (1, 2)]
    assert top_heads(heads, 0.0, per_layer=True) == [(0, 1), (1, 0)]


# --------------------------------------------------------------------------- OV copying


def test_ov_copying_scores_of_hand_set_circuits():
    """2 x 2 circuits W_O R W_V (R = W_U^T W_E) with eigenvalues worked out by hand."""
    model = build_model(
        {"family": "attention_only", "n_layer": 2, "n_head": 2, "d_model": 2, "d_head": 2},
        vocab_size=3,
        n_positions=4,
        seed=0,
    )
    with torch.no_grad():
        model.wte.weight.copy_(torch.tensor([[1.0, 0], [0, 1], [1, 1]]))  # W_E (V, d)
        model.lm_head.weight.copy_(torch.tensor([[1.0, 0], [0, 1], [1, 0]]))  # W_U (V, d)
        # R = W_U^T W_E = [[2, 1], [0, 1]] (not symmetric, so W_E^T W_U would differ).
        a0, a1 = model.blocks[0].attn, model.blocks[1].attn
        for attn in (a0, a1):
            attn.v_proj.weight.copy_(torch.tensor([[1.0, 0], [0, 1], [1, 0], [0, 1]]))  # W_V = I
        # Layer 0 head 0: W_O = [[1, 2], [0, -1]] -> W_O R = [[2, 3], [0, -1]], eigenvalues
        # 2 and -1: (2 - 1) / 3. Head 1: W_O = [[0, -1], [1, 0]] -> W_O R = [[0, -1], [2, 1]],
        # trace 1, det 2: (1 +- i sqrt 7) / 2, |lambda| = sqrt 2: 1 / (2 sqrt 2).
        w_o0 = torch.tensor([[1.0, 2], [0, -1]])
        w_o1 = torch.tensor([[0.0, -1], [1, 0]])
        a0.o_proj.weight.copy_(torch.cat([w_o0.T, w_o1.T], dim=1))  # (d, H dh) = W_O^T
        # Layer 1 head 0: W_O = -I -> eigenvalues -2, -1: -1. Head 1 writes nothing: 0.
        a1.o_proj.weight.copy_(torch.cat([-torch.eye(2), torch.zeros(2, 2)], dim=1))
    expected = torch.tensor([[1 / 3, 1 / (2 * math.sqrt(2))], [-1.0, 0.0]])
    torch.testing.assert_close(ov_copying_scores(model), expected, atol=1e-6, rtol=0)


# --- written against the second mutation run's survivors ------------------------------------
def test_centred_share_below_one_total():
    from ih_kedro.science.telemetry.scores import _centred_share

    # centred boosts [0, 0, 0.2]: a total under 1 is still a share (1.0), not zero or 0.2
    boosts = torch.tensor([[0.0, 0.2, 0.4], [0.3, 0.3, 0.3]])
    shares = _centred_share(boosts, torch.tensor([2, 0]))
    torch.testing.assert_close(shares, torch.tensor([1.0, 0.0]))


def test_model_batch_scores_per_sample_loss_drop_and_recall():
    from ih_kedro.science.telemetry.scores import _model_batch_scores

    # L = 3, V = 5: probes [a b c a b c]; sample 0's logits predict every next token (margin 4),
    # sample 1's are flat. Loss of a flat row: log 5; of a confident one: log(1 + 4 e^-4).
    batch = torch.tensor([[1, 2, 3, 1, 2, 3], [4, 2, 1, 4, 2, 1]])
    logits = torch.zeros(2, 6, 5)
    for t in range(5):
        logits[0, t, batch[0, t + 1]] = 4.0
    logits[0, 2] = 0.0  # predicting the first repeated token from the first half: flat
    scores = _model_batch_scores(batch, logits, 3)
    flat, sharp = math.log(5), math.log(1 + 4 * math.exp(-4))
    # first-half targets x_1, x_2 (entries 0, 1); second-half targets x_4, x_5 (entries 3, 4)
    torch.testing.assert_close(scores["repeated_loss_drop"], torch.tensor([0.0, 0.0]))
    logits[0, 1] = 0.0  # now the first half is half flat: drop = (flat + sharp) / 2 - sharp
    scores = _model_batch_scores(batch, logits, 3)
    expected = torch.tensor([(flat + sharp) / 2 - sharp, 0.0])
    torch.testing.assert_close(scores["repeated_loss_drop"], expected)
    # recall on the second half (queries 3, 4, 5 -> targets x_1, x_2, x_3): sample 0 ranks its
    # targets first at queries 3 and 4 (query 5's logits are zero: ties rank 0 too)
    torch.testing.assert_close(scores["associative_recall"], torch.tensor([1.0, 1.0]))
    logits[1, 3, 0] = 1.0  # sample 1, query 3: token 0 now ranks above the target 2
    scores = _model_batch_scores(batch, logits, 3)
    torch.testing.assert_close(scores["associative_recall"], torch.tensor([1.0, 2 / 3]))
    torch.testing.assert_close(scores["associative_recall_mean_rank"], torch.tensor([0.0, 1 / 3]))
