"""Planted truth for head scoring and ablation: a model made to depend on one induction circuit.

The model of :mod:`tests.science.evaluation.planted_induction` copies on repeated text through
exactly two heads (layer 0 previous-token head -> layer 1 induction head); every other head has
a real attention pattern but writes nothing. The scoring must rank the planted head first, its
ablation must break copying, and the silent heads (and a model with no writing head at all)
must show no effect, exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ih_kedro.science.evaluation.bi_induct import (
    EvalSet,
    ablation_drops,
    evaluate_checkpoint,
    relative_drop,
    top_induction_heads,
)
from ih_kedro.science.evaluation.in_context_copy import copy_accuracy, copy_probes
from ih_kedro.science.telemetry.ablation import ablate_heads, all_heads, random_head_control
from ih_kedro.science.telemetry.probes import snippet_probes
from ih_kedro.science.telemetry.scores import head_pattern_scores
from tests.science.evaluation.planted_induction import (
    LOGIT_SCALE,
    planted_induction_model,
    residual_blocks,
)

VOCAB = 32
LENGTH = 12  # L: half length of the x ‖ x probes
PREV_HEAD, INDUCTION_HEAD = 0, 2
PLANTED = [(0, PREV_HEAD), (1, INDUCTION_HEAD)]
N_CONTROLS = 3


@pytest.fixture(scope="module")
def model():
    return planted_induction_model(VOCAB, 64, 4, PREV_HEAD, INDUCTION_HEAD)


def repeated_probes(seed: int, n: int = 16, pool: np.ndarray | None = None) -> torch.Tensor:
    """``x ‖ x`` with ``x`` of ``LENGTH`` distinct tokens from ``pool`` (default: the vocab),
    ``(n, 2L)``."""
    pool = np.arange(VOCAB) if pool is None else pool
    rng = np.random.default_rng(seed)
    halves = np.stack([rng.choice(pool, size=LENGTH, replace=False) for _ in range(n)])  # (n, L)
    return copy_probes(halves, LENGTH)


def token_zero_share(probes: torch.Tensor) -> dict[str, np.ndarray]:
    """Per-probe share of the copy targets that are token 0: the accuracy of a model whose logits
    are all equal (argmax breaks the tie at index 0). Keys as :func:`copy_accuracy`."""
    second = probes[:, LENGTH + 1 :] == 0  # (n, L-1) targets x[1..L-1] of the second copy
    first = probes[:, 1:LENGTH] == 0  # (n, L-1) the same targets in the first copy
    return {"copy": second.float().mean(1).numpy(), "copy_first": first.float().mean(1).numpy()}


def ablated_copy(model, probes: torch.Tensor, heads) -> np.ndarray:
    """Per-probe second-copy accuracy with ``heads`` zero-ablated, ``(n,)``."""
    with ablate_heads(model, heads, mode="zero"):
        return copy_accuracy(model, probes)["copy"]


def excess_drop(model, probes: torch.Tensor, head: tuple[int, int]) -> dict:
    """Relative copy drop of ``head`` minus the mean drop of ``N_CONTROLS`` random heads of its
    layer (the pipeline's per-layer matched control, seeds 0, 1, 2)."""
    base = copy_accuracy(model, probes)["copy"]
    drop = relative_drop(base, ablated_copy(model, probes, [head]))
    controls = [
        random_head_control(all_heads(model), 1, exclude=[head], seed=s, match_layers=[head])
        for s in range(N_CONTROLS)
    ]
    control_drops = [relative_drop(base, ablated_copy(model, probes, c)) for c in controls]
    return {
        "drop": drop,
        "controls": controls,
        "control_drops": control_drops,
        "excess": drop - float(np.mean(control_drops)),
    }


def test_each_layer_norm_is_the_identity_on_the_planted_residual_stream(model) -> None:
    probes = repeated_probes(seed=0)
    seen = {}
    norms = {"ln_1.0": model.blocks[0].ln_1, "ln_1.1": model.blocks[1].ln_1, "ln_f": model.ln_f}

    def keep(name: str):
        return lambda _module, args, out: seen.update({name: (args[0], out)})  # (in, out)

    handles = [norm.register_forward_hook(keep(name)) for name, norm in norms.items()]
    try:
        with torch.no_grad():
            model(probes)
    finally:
        for handle in handles:
            handle.remove()
    # Layer 0 reads 3 one-hots (TOK, POS, CONST), layer 1 also PREV: identity at every position.
    for name in ("ln_1.0", "ln_1.1"):
        x, y = seen[name]  # (n, 2L, d) each
        assert float((y - x).abs().max()) < 1e-5, name
    x, y = seen["ln_1.1"]
    prev = residual_blocks(VOCAB, 64)["prev"]
    # PREV at position i holds x_{i-1} (position 0: its own token).
    assert torch.equal(x[:, 1:, prev].argmax(-1), probes[:, :-1])
    assert torch.equal(x[:, 0, prev].argmax(-1), probes[:, 0])
    # ln_f: the identity where OUT is one-hot (the second copy, positions L..2L-1).
    x, y = seen["ln_f"]
    assert float((y - x)[:, LENGTH:].abs().max()) < 1e-5


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_planted_model_copies_the_second_copy_and_not_the_first(model, seed: int) -> None:
    probes = repeated_probes(seed)
    accuracy = copy_accuracy(model, probes)
    # Second copy: the induction head attends to the one key whose previous token is the query
    # token and copies the target: every prediction right (>= 0.95 asked).
    np.testing.assert_array_equal(accuracy["copy"], np.ones(16))
    # First copy: no match, the head copies a token already seen, never the (new) target.
    np.testing.assert_array_equal(accuracy["copy_first"], np.zeros(16))
    # The copied token's logit is LOGIT_SCALE, the others 0.
    with torch.no_grad():
        logits = model(probes).logits[:, LENGTH:-1]  # (n, L-1, V)
    target = logits.gather(-1, probes[:, LENGTH + 1 :, None]).squeeze(-1)  # (n, L-1)
    assert torch.allclose(target, torch.full_like(target, LOGIT_SCALE), atol=1e-4)
    assert float(logits.sum(-1).sub(target).abs().max()) < 1e-3


@pytest.mark.parametrize(("prev_head", "induction_head"), [(0, 2), (3, 1)])
def test_prefix_matching_ranks_the_planted_head_first(prev_head: int, induction_head: int) -> None:
    model = planted_induction_model(VOCAB, 64, 4, prev_head, induction_head)
    scores = head_pattern_scores(model, repeated_probes(seed=0), batch_size=8, repeated=True)
    prefix = torch.nanmean(scores["prefix_matching"].float(), 0)  # (layers, heads)
    previous = torch.nanmean(scores["previous_token"].float(), 0)  # (layers, heads)
    heads = top_induction_heads(prefix, 0.02)  # one head per layer
    assert (1, induction_head) in heads
    assert heads[1] == (1, induction_head)
    assert float(prefix[1, induction_head]) > 1 - 1e-6  # >= 0.9 asked; one-hot by construction
    assert float(previous[0, prev_head]) > 1 - 1e-6
    # The silent heads attend with random weights: nowhere near the planted ones.
    others = [float(prefix[1, h]) for h in range(4) if h != induction_head]
    assert max(others) < 0.2


def test_ablating_a_planted_head_breaks_copying(model) -> None:
    probes = repeated_probes(seed=0)
    base = copy_accuracy(model, probes)["copy"]
    # Without the induction head OUT is 0, every logit equal, argmax = token 0.
    no_induction = ablated_copy(model, probes, [(1, INDUCTION_HEAD)])
    np.testing.assert_array_equal(no_induction, token_zero_share(probes)["copy"])
    assert no_induction.mean() <= 0.2
    assert relative_drop(base, no_induction) == pytest.approx(1 - no_induction.mean(), abs=1e-12)
    assert relative_drop(base, no_induction) >= 0.8
    # Without the previous-token head, keys carry no previous token: attention is uniform.
    no_previous = ablated_copy(model, probes, [(0, PREV_HEAD)])
    assert no_previous.mean() <= 0.2
    assert relative_drop(base, no_previous) >= 0.8


def test_ablating_a_silent_head_changes_nothing_at_all(model) -> None:
    probes = repeated_probes(seed=1)
    base = copy_accuracy(model, probes)["copy"]
    with torch.no_grad():
        clean_logits = model(probes).logits  # (n, 2L, V)
    silent = [h for h in all_heads(model) if h not in PLANTED]
    assert len(silent) == 6
    for head in silent:
        with torch.no_grad(), ablate_heads(model, [head], mode="zero"):
            logits = model(probes).logits
        assert torch.equal(logits, clean_logits), head
        np.testing.assert_array_equal(ablated_copy(model, probes, [head]), base)
        assert relative_drop(base, ablated_copy(model, probes, [head])) == 0.0


@pytest.mark.parametrize("head", PLANTED)
def test_the_excess_drop_over_random_silent_controls_is_the_planted_drop(model, head) -> None:
    probes = repeated_probes(seed=2)
    result = excess_drop(model, probes, head)
    # The per-layer controls can only be silent heads here: each drops exactly 0.
    assert all(c[0] not in PLANTED and c[0][0] == head[0] for c in result["controls"])
    assert result["control_drops"] == [0.0] * N_CONTROLS
    assert result["excess"] == result["drop"]
    assert result["excess"] >= 0.8


def test_two_arms_of_the_same_planted_model_report_no_difference() -> None:
    probes = repeated_probes(seed=3)
    arms = [planted_induction_model(VOCAB, 64, 4, PREV_HEAD, INDUCTION_HEAD) for _ in range(2)]
    excess = [excess_drop(arm, probes, (1, INDUCTION_HEAD))["excess"] for arm in arms]
    assert excess[0] >= 0.8
    assert excess[0] - excess[1] == 0.0


def _without_heads() -> torch.nn.Module:
    """The planted model with every ``o_proj`` zero: no head writes, nothing to find."""
    model = planted_induction_model(VOCAB, 64, 4, PREV_HEAD, INDUCTION_HEAD)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.o_proj.weight.zero_()
    return model


def test_a_model_without_heads_has_nothing_to_find() -> None:
    model = _without_heads()
    probes = repeated_probes(seed=4)
    accuracy = copy_accuracy(model, probes)
    # Every logit equal: the argmax is token 0, so accuracy is the share of targets that are 0,
    # the same on both copies (chance, no in-context gain).
    chance = token_zero_share(probes)
    np.testing.assert_array_equal(accuracy["copy"], chance["copy"])
    np.testing.assert_array_equal(accuracy["copy_first"], chance["copy_first"])
    assert 0 < accuracy["copy"].mean() <= 0.2
    # A non-zero baseline: every drop is exactly 0, so the excess is exactly 0.
    result = excess_drop(model, probes, (1, INDUCTION_HEAD))
    assert result["drop"] == 0.0
    assert result["control_drops"] == [0.0] * N_CONTROLS
    assert result["excess"] == 0.0
    # Probes without token 0: the baseline is 0 and relative_drop returns NaN (so does excess).
    no_zero = repeated_probes(seed=4, pool=np.arange(1, VOCAB))
    assert copy_accuracy(model, no_zero)["copy"].sum() == 0.0
    result = excess_drop(model, no_zero, (1, INDUCTION_HEAD))
    assert math.isnan(result["drop"])
    assert math.isnan(result["excess"])


@pytest.mark.parametrize("control_seed", [0, 9])
def test_evaluate_checkpoint_finds_the_planted_head_through_copy_accuracy(
    model, control_seed: int
) -> None:
    rng = np.random.default_rng(0)
    # Validation sequences (16, 33): their first 31 tokens are distinct, so x ‖ x is copyable.
    validation = np.stack([np.concatenate([rng.permutation(VOCAB - 1), [5, 6]]) for _ in range(16)])
    halves = torch.as_tensor(np.stack([rng.choice(VOCAB - 1, LENGTH, replace=False)
                                       for _ in range(16)]))  # fmt: skip
    eval_set = EvalSet(
        validation=validation,
        prompts={},
        repeated=torch.cat([halves, halves], 1),  # (16, 2L)
        anti=snippet_probes(halves[:, :6], VOCAB - 1, reverse=True),  # (16, 13), SEP = 31
        copy=copy_probes(validation, LENGTH),  # (16, 2L)
    )
    options = {"ablation_metrics": ["copy"], "ablation_modes": ("zero",),
               "control_seed": control_seed}  # fmt: skip
    result = evaluate_checkpoint(model, eval_set, options)
    # Top head per layer by prefix matching: a silent head in layer 0 (the previous-token head
    # scores 0 there), the planted induction head in layer 1.
    assert result["ablated_heads"][1] == (1, INDUCTION_HEAD)
    assert result["ablated_heads"][0] != (0, PREV_HEAD)
    np.testing.assert_array_equal(result["items"]["copy"], np.ones(16))
    np.testing.assert_array_equal(result["items"]["copy_first"], np.zeros(16))
    chance = token_zero_share(eval_set.copy)["copy"].mean()
    drops = ablation_drops(result, "zero", "copy")
    assert drops["drop"] == pytest.approx(1 - chance, abs=1e-12)
    entry = result["ablation"]["zero"]
    base = result["ablation_base"]["copy"]
    control_drops = [relative_drop(base, c["copy"]) for c in entry["controls"]]
    hits = [(0, PREV_HEAD) in heads for heads in entry["control_heads"]]
    if control_seed == 0:
        # Control seeds 0-2 draw silent heads only: the excess is the whole drop.
        assert hits == [False] * N_CONTROLS
        assert control_drops == [0.0] * N_CONTROLS
        assert drops["excess"] == drops["drop"]
    else:
        # Seeds 9-11: the per-layer matched control of the silent layer-0 top head draws the
        # planted previous-token head once, that control breaks copying, and the excess drop
        # understates the planted effect by a third.
        assert hits == [False, False, True]
        assert control_drops[:2] == [0.0, 0.0]
        assert control_drops[2] >= 0.8
        assert drops["excess"] == pytest.approx(drops["drop"] - control_drops[2] / 3, abs=1e-12)
        assert drops["excess"] < 0.8
