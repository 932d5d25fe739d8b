"""Value tests of head ablation on a tiny random attention-only model.

The expected values come from the model's own clean activations recorded with
:func:`instrument` (outside any ablation) or from hand-set head weights, never from the
ablation code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ih_kedro.science.telemetry.ablation import (
    _by_layer,
    ablate_heads,
    ablation_effect,
    all_heads,
    mean_z,
    random_head_control,
)
from ih_kedro.science.telemetry.instrumentation import hook_name, instrument
from ih_kedro.science.training.models import build_model

N_LAYERS, N_HEADS, VOCAB, T = 2, 3, 11, 6
# Head (l, h) is worth 2 ** (3 l + h) when its z is alive (not all zero).
WEIGHTS = {(layer, head): 2.0 ** (3 * layer + head) for layer in range(2) for head in range(3)}


@pytest.fixture(scope="module")
def tiny():
    model = build_model(
        {"family": "attention_only", "n_layer": N_LAYERS, "n_head": N_HEADS, "d_model": 12,
         "d_head": 4},
        vocab_size=VOCAB,
        n_positions=8,
        seed=0,
        attn_implementation="eager",
    )  # fmt: skip
    return model.eval()


@pytest.fixture(scope="module")
def tokens():
    return torch.randint(0, VOCAB, (5, T), generator=torch.Generator().manual_seed(1))


def _record(model, tokens, pattern=False):
    with torch.no_grad(), instrument(model, record_z=True, record_pattern=pattern) as rec:
        model(tokens)
    return dict(rec.cache)


def _alive_value(model, tokens) -> float:
    """Sum of WEIGHTS over heads whose z is not identically zero."""
    cache = _record(model, tokens)
    total = 0.0
    for (layer, head), weight in WEIGHTS.items():
        if cache[hook_name(layer, "hook_z")][:, :, head].abs().sum() > 0:
            total += weight
    return total


def test_by_layer_groups_heads_as_ints():
    grouped = _by_layer([(1, 2), (np.int64(0), 1), (1.0, np.int64(0))])
    assert grouped == {1: [2, 0], 0: [1]}
    assert [type(key) for key in grouped] == [int, int]
    assert [type(h) for hs in grouped.values() for h in hs] == [int, int, int]
    assert _by_layer([]) == {}


def test_all_heads_lists_every_layer_and_head(tiny):
    assert all_heads(tiny) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]


@pytest.mark.parametrize("batch_size", [2, 32])
def test_mean_z_is_the_mean_over_batches_and_positions(tiny, tokens, batch_size):
    clean = _record(tiny, tokens)
    means = mean_z(tiny, tokens, batch_size=batch_size)
    per_position = mean_z(tiny, tokens, per_position=True, batch_size=batch_size)
    assert sorted(means) == [0, 1] and sorted(per_position) == [0, 1]
    for layer in range(N_LAYERS):
        z = clean[hook_name(layer, "hook_z")]  # (n, T, H, dh)
        torch.testing.assert_close(means[layer], z.mean((0, 1)))
        torch.testing.assert_close(per_position[layer], z.mean(0))


def test_ablate_heads_validates_arguments(tiny):
    with pytest.raises(ValueError, match=r"ablation mode must be one of \('zero', 'mean'"):
        with ablate_heads(tiny, [(0, 0)], mode="magic"):
            pass
    for bad in ([(2, 0)], [(-1, 0)], [(0, 3)], [(1, 0), (1, -1)]):
        with pytest.raises(ValueError, match=r"outside 2 layers x 3 heads"):
            with ablate_heads(tiny, bad):
                pass
    with pytest.raises(ValueError, match=r"mean_source: mode='mean' needs mean z values"):
        with ablate_heads(tiny, [(0, 0)], mode="mean"):
            pass
    # Zero ablation with mean values was silently a mean ablation (found by the mutation audit).
    with pytest.raises(ValueError, match=r"^mean_source: mode='zero' zeroes the heads"):
        with ablate_heads(tiny, [(0, 0)], mode="zero", mean_source={0: torch.ones(3, 4)}):
            pass
    with ablate_heads(tiny, [(1, 2)]) as inst:  # the last head is inside the model
        assert inst.ablate == {1: [2]} and inst.mode == "zero"


def test_zero_ablation_zeroes_only_the_chosen_heads(tiny, tokens):
    clean = _record(tiny, tokens)
    with ablate_heads(tiny, [(0, 1), (1, 2)], mode="zero"):
        ablated = _record(tiny, tokens)
    z0, z1 = ablated[hook_name(0, "hook_z")], ablated[hook_name(1, "hook_z")]
    assert torch.all(z0[:, :, 1] == 0) and torch.all(z1[:, :, 2] == 0)
    # Layer 0's other heads are untouched; layer 1 sees a changed residual stream.
    torch.testing.assert_close(z0[:, :, [0, 2]], clean[hook_name(0, "hook_z")][:, :, [0, 2]])
    assert not torch.allclose(z1[:, :, 0], clean[hook_name(1, "hook_z")][:, :, 0])
    # Restored on exit.
    after = _record(tiny, tokens)
    torch.testing.assert_close(after[hook_name(1, "hook_z")], clean[hook_name(1, "hook_z")])


def test_mean_ablation_uses_the_given_or_computed_means(tiny, tokens):
    given = {0: torch.full((N_HEADS, 4), 0.5), 1: torch.full((N_HEADS, 4), -2.0)}
    with ablate_heads(tiny, [(0, 2), (1, 0)], mode="mean", mean_source=given) as inst:
        ablated = _record(tiny, tokens)
    assert inst.mode == "mean"
    assert torch.all(ablated[hook_name(0, "hook_z")][:, :, 2] == 0.5)
    assert torch.all(ablated[hook_name(1, "hook_z")][:, :, 0] == -2.0)
    # Reference tokens: their mean z (computed from a clean pass) replaces the head.
    reference = tokens[:3]
    expected = _record(tiny, reference)[hook_name(0, "hook_z")][:, :, 1].mean((0, 1))  # (dh,)
    with ablate_heads(tiny, [(0, 1)], mode="mean", mean_source=reference):
        z = _record(tiny, tokens)[hook_name(0, "hook_z")][:, :, 1]
    torch.testing.assert_close(z, expected.expand_as(z))


def test_pattern_preserving_freezes_every_pattern_to_the_clean_run(tiny, tokens):
    clean = _record(tiny, tokens, pattern=True)
    key1 = hook_name(1, "hook_pattern")
    with ablate_heads(tiny, [(0, 0)], mode="zero"):
        free = _record(tiny, tokens, pattern=True)
    assert not torch.allclose(free[key1], clean[key1])  # layer 1 re-routes its attention
    with ablate_heads(tiny, [(0, 0)], mode="pattern_preserving") as inst:
        frozen = _record(tiny, tokens, pattern=True)
        assert inst.mode == "zero" and inst.enabled
        assert sorted(inst.frozen_patterns) == [0, 1]
    for layer in range(N_LAYERS):
        key = hook_name(layer, "hook_pattern")
        torch.testing.assert_close(frozen[key], clean[key])
    assert torch.all(frozen[hook_name(0, "hook_z")][:, :, 0] == 0)
    # Layer 1's z differs from the clean run only through the changed values.
    assert not torch.allclose(frozen[hook_name(1, "hook_z")], clean[hook_name(1, "hook_z")])
    # With a mean source the ablated head is mean-replaced, patterns still frozen.
    given = {0: torch.full((N_HEADS, 4), 0.25), 1: torch.zeros(N_HEADS, 4)}
    with ablate_heads(tiny, [(0, 0)], mode="pattern_preserving", mean_source=given) as inst:
        replaced = _record(tiny, tokens, pattern=True)
    assert inst.mode == "mean"
    assert torch.all(replaced[hook_name(0, "hook_z")][:, :, 0] == 0.25)
    torch.testing.assert_close(replaced[key1], clean[key1])
    # Nothing is left behind: a later pass is clean again.
    after = _record(tiny, tokens, pattern=True)
    torch.testing.assert_close(after[key1], clean[key1])
    torch.testing.assert_close(after[hook_name(0, "hook_z")], clean[hook_name(0, "hook_z")])


def _reference_control(heads, k, exclude, seed, match_layers=None):
    candidates = [h for h in heads if h not in set(exclude)]
    rng = np.random.default_rng(seed)
    if match_layers is None:
        return [candidates[i] for i in sorted(rng.choice(len(candidates), size=k, replace=False))]
    chosen = []
    for layer in sorted({layer for layer, _ in match_layers}):
        count = sum(1 for m, _ in match_layers if m == layer)
        pool = [h for h in candidates if h[0] == layer]
        chosen.extend(pool[i] for i in sorted(rng.choice(len(pool), size=count, replace=False)))
    return chosen


def test_random_head_control_values():
    heads = [(layer, h) for layer in range(3) for h in range(5)]
    for seed in range(4):
        control = random_head_control(heads, 4, exclude=[(1, 0), (2, 3)], seed=seed)
        assert control == _reference_control(heads, 4, [(1, 0), (2, 3)], seed)
        assert control == sorted(control) and len(set(control)) == 4
        assert all(type(a) is int and type(b) is int for a, b in control)
    numpy_heads = [(np.int64(a), np.int64(b)) for a, b in heads]
    assert random_head_control(numpy_heads, 4, exclude=[(1.0, 0.0)], seed=1) == _reference_control(
        heads, 4, [(1, 0)], 1
    )
    # Every candidate left: k equal to their number takes them all.
    assert random_head_control(heads[:3], 2, exclude=[(0, 1)]) == [(0, 0), (0, 2)]
    # The default seed is 0.
    assert random_head_control(heads, 4) == _reference_control(heads, 4, [], 0)
    assert _reference_control(heads, 4, [], 0) != _reference_control(heads, 4, [], 1)
    with pytest.raises(ValueError, match=r"^random_head_control: k=3 exceeds the 2 candidates$"):
        random_head_control(heads[:3], 3, exclude=[(0, 1)])


def test_random_head_control_matches_layers():
    heads = [(layer, h) for layer in range(3) for h in range(5)]
    match = [(2, 1), (0, 4), (2, 0)]  # unsorted: layer 0 is drawn first
    for seed in range(4):
        control = random_head_control(heads, 99, exclude=match, seed=seed, match_layers=match)
        assert control == _reference_control(heads, 3, match, seed, match)
        assert [layer for layer, _ in control] == [0, 2, 2]
    # A layer with exactly as many heads left as needed gives all of them.
    small = [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]
    got = random_head_control(small, 2, exclude=[(1, 0)], match_layers=[(1, 0), (1, 1)])
    assert got == [(1, 1), (1, 2)]
    with pytest.raises(ValueError, match=r"^random_head_control: layer 1 has only 1 heads left$"):
        random_head_control(small, 2, exclude=[(1, 0), (1, 1)], match_layers=[(1, 0), (1, 1)])


def test_ablation_effect_values(tiny, tokens):
    effect = ablation_effect(
        tiny, [(1, 0)], lambda m: _alive_value(m, tokens), n_controls=3, seed=4
    )
    baseline = sum(WEIGHTS.values())  # 63: every head alive
    assert effect["baseline"] == baseline and effect["ablated"] == baseline - 8.0
    assert effect["relative_drop"] == pytest.approx(8.0 / 63.0)
    expected_controls = [
        random_head_control(all_heads(tiny), 1, exclude=[(1, 0)], seed=4 + i,
                            match_layers=[(1, 0)])
        for i in range(3)
    ]  # fmt: skip
    assert effect["control_heads"] == expected_controls
    drops = [WEIGHTS[control[0]] / 63.0 for control in expected_controls]
    assert effect["control_drops"] == pytest.approx(drops)
    assert effect["control_relative_drop"] == pytest.approx(np.mean(drops))
    assert effect["control_sd"] == pytest.approx(np.std(drops, ddof=1))
    assert effect["excess_drop"] == pytest.approx(8.0 / 63.0 - np.mean(drops))
    assert (effect["seed"], effect["mode"]) == (4, "zero")


def test_ablation_effect_without_layer_matching_and_negative_metric(tiny, tokens):
    def metric(m):  # negative: the drop is relative to |baseline| = 100 - 63 = 37
        return _alive_value(m, tokens) - 100.0

    effect = ablation_effect(tiny, [(0, 0), (0, 1)], metric, n_controls=2, match_layers=False)
    assert effect["baseline"] == -37.0 and effect["ablated"] == -40.0
    assert effect["relative_drop"] == pytest.approx(3.0 / 37.0)
    expected = [
        random_head_control(all_heads(tiny), 2, exclude=[(0, 0), (0, 1)], seed=i) for i in range(2)
    ]
    assert effect["control_heads"] == expected
    drops = [sum(WEIGHTS[h] for h in control) / 37.0 for control in expected]
    assert effect["control_drops"] == pytest.approx(drops)
    assert effect["control_sd"] == pytest.approx(np.std(drops, ddof=1))
    assert effect["seed"] == 0


def test_ablation_effect_defaults_and_mode(tiny, tokens):
    effect = ablation_effect(tiny, [(1, 0)], lambda m: 1.0)
    assert len(effect["control_drops"]) == 3  # three controls by default
    clean = _record(tiny, tokens, pattern=True)[hook_name(1, "hook_pattern")]

    def frozen(m):  # 1 while layer 1 attends as in the clean run
        pattern = _record(m, tokens, pattern=True)[hook_name(1, "hook_pattern")]
        return float(torch.allclose(pattern, clean))

    effect = ablation_effect(tiny, [(0, 0)], frozen, mode="pattern_preserving", n_controls=1)
    assert effect["relative_drop"] == 0.0 and effect["control_drops"] == [0.0]
    effect = ablation_effect(tiny, [(0, 0)], frozen, mode="zero", n_controls=1)
    assert effect["relative_drop"] == 1.0


def test_ablation_effect_edge_cases(tiny, tokens):
    # One control: no spread. The mode and mean source reach the ablation: heads replaced by
    # a mean of ones stay alive, so nothing drops.
    ones = {layer: torch.ones(N_HEADS, 4) for layer in range(N_LAYERS)}
    effect = ablation_effect(
        tiny, [(1, 1)], lambda m: _alive_value(m, tokens), mode="mean", mean_source=ones,
        n_controls=1,
    )  # fmt: skip
    assert effect["relative_drop"] == 0.0 and effect["control_drops"] == [0.0]
    assert effect["control_sd"] == 0.0 and effect["mode"] == "mean"
    # No controls: NaN control mean; a zero baseline: NaN drops.
    effect = ablation_effect(tiny, [(1, 1)], lambda m: 0.0, n_controls=0)
    assert math.isnan(effect["relative_drop"]) and math.isnan(effect["control_relative_drop"])
    assert effect["control_drops"] == [] and effect["control_heads"] == []
    assert effect["control_sd"] == 0.0 and math.isnan(effect["excess_drop"])
