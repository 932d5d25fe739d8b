"""The chunked linear cross-entropy equals the full-logits path: loss and every gradient.

fp32 within 1e-6 at V 1,024 and V 50,257 (small hidden sizes so a CPU is fast), chunks that do
and do not divide the rows, with and without a bias; bf16 to bf16 rounding; through each model
family's forward (``hidden_states_instead_of_logits``) and through a DeepSpeed engine's step,
with and without ``micro_batch_tokens``, ZeRO 0, 1 and 2 on one rank.
"""

from __future__ import annotations

import pytest
import torch

from ih_kedro.science.training.chunked_cross_entropy import (
    chunk_rows_for,
    chunked_linear_cross_entropy,
    full_linear_cross_entropy,
    hidden_states_instead_of_logits,
    linear_cross_entropy,
)
from ih_kedro.science.training.models import build_model

TOLERANCE = 1e-6


def _inputs(n_rows: int, d: int, vocab: int, dtype=torch.float32, bias: bool = False, seed=0):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n_rows, d, generator=gen).to(dtype).requires_grad_()
    weight = (0.5 * torch.randn(vocab, d, generator=gen)).to(dtype).requires_grad_()
    b = (0.1 * torch.randn(vocab, generator=gen)).to(dtype).requires_grad_() if bias else None
    targets = torch.randint(0, vocab, (n_rows,), generator=gen)
    return hidden, weight, b, targets


def _loss_and_grads(fn, hidden, weight, bias, targets, **kwargs):
    leaves = [t for t in (hidden, weight, bias) if t is not None]
    for leaf in leaves:
        leaf.grad = None
    loss = fn(hidden, weight, targets, bias, **kwargs)
    loss.backward()
    return loss.detach(), [leaf.grad.clone() for leaf in leaves]


def _max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max(float((x.float() - y.float()).abs().max()) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("vocab", [1024, 50257])
@pytest.mark.parametrize("chunk_rows", [None, 7, 64])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("early", [False, True], ids=["recompute", "grads_in_forward"])
def test_fp32_loss_and_gradients_equal_the_full_path(vocab, chunk_rows, bias, early):
    hidden, weight, b, targets = _inputs(48, 16, vocab, bias=bias)
    full_loss, full_grads = _loss_and_grads(full_linear_cross_entropy, hidden, weight, b, targets)
    loss, grads = _loss_and_grads(
        chunked_linear_cross_entropy,
        hidden,
        weight,
        b,
        targets,
        chunk_rows=chunk_rows,
        grads_in_forward=early,
    )
    assert loss.dtype == torch.float32 and loss.shape == ()
    assert abs(float(loss - full_loss)) <= TOLERANCE * float(full_loss)
    assert _max_diff(grads, full_grads) <= TOLERANCE
    # Not trivially equal: the gradients are far from zero.
    assert max(float(g.abs().max()) for g in full_grads) > 100 * TOLERANCE


@pytest.mark.parametrize("early", [False, True], ids=["recompute", "grads_in_forward"])
def test_an_upstream_gradient_scales_every_gradient(early):
    """DeepSpeed's accumulation divides the loss before the backward: grad_loss != 1."""
    hidden, weight, b, targets = _inputs(20, 8, 300, bias=True)
    full_loss = full_linear_cross_entropy(hidden, weight, targets, b)
    (0.25 * full_loss).backward()
    full_grads = [hidden.grad.clone(), weight.grad.clone(), b.grad.clone()]
    hidden.grad = weight.grad = b.grad = None
    loss = chunked_linear_cross_entropy(
        hidden, weight, targets, b, chunk_rows=6, grads_in_forward=early
    )
    (0.25 * loss).backward()
    assert _max_diff([hidden.grad, weight.grad, b.grad], full_grads) <= TOLERANCE


def test_loss_value_is_the_mean_negative_log_likelihood():
    hidden = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    weight = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])  # logits (1,0,0) and (0,2,0)
    targets = torch.tensor([0, 2])
    e = torch.exp(torch.tensor(1.0))
    expected = float((torch.log(e + 2) - 1.0) + torch.log(2 + e**2)) / 2
    loss = chunked_linear_cross_entropy(hidden, weight, targets, chunk_rows=1)
    assert float(loss) == pytest.approx(expected, abs=1e-6)


def test_bf16_matches_the_full_bf16_path():
    hidden, weight, _, targets = _inputs(64, 32, 4096, dtype=torch.bfloat16)
    full_loss, full_grads = _loss_and_grads(
        full_linear_cross_entropy, hidden, weight, None, targets
    )
    loss, grads = _loss_and_grads(
        chunked_linear_cross_entropy, hidden, weight, None, targets, chunk_rows=16
    )
    assert loss.dtype == torch.float32
    assert [g.dtype for g in grads] == [torch.bfloat16, torch.bfloat16]
    assert float(loss) == pytest.approx(float(full_loss), rel=1e-3)
    for grad, full in zip(grads, full_grads, strict=True):
        scale = float(full.float().abs().max())
        assert float((grad.float() - full.float()).abs().max()) <= 2e-2 * scale


def test_only_the_inputs_that_need_gradients_get_them():
    hidden, weight, _, targets = _inputs(10, 8, 32)
    weight.requires_grad_(False)
    chunked_linear_cross_entropy(hidden, weight, targets, chunk_rows=3).backward()
    assert hidden.grad is not None and weight.grad is None


@pytest.mark.parametrize(
    ("vocab", "rows", "expected"),
    [(50257, 10**6, 256), (1024, 10**6, 16384), (1024, 100, 100), (2**26, 8, 1)],
)
def test_chunk_rows_hold_at_most_the_chunk_elements(vocab, rows, expected):
    assert chunk_rows_for(vocab, rows) == expected


def test_unknown_and_unavailable_implementations_name_the_parameter():
    hidden, weight, _, targets = _inputs(4, 8, 16)
    with pytest.raises(ValueError, match=r"^training\.loss_implementation: 'fused' is not"):
        linear_cross_entropy("fused", hidden, weight, targets)
    with pytest.raises(RuntimeError, match=r"^training\.loss_implementation: 'liger'"):
        linear_cross_entropy("liger", hidden, weight, targets)  # no CUDA / no package here


@pytest.mark.parametrize(
    "preset",
    [
        {"family": "attention_only", "n_layer": 2, "n_head": 2, "d_model": 16},
        "gpt2-tiny",
        "llama-tiny",
        "pythia-tiny",
    ],
    ids=["attention_only", "gpt2", "llama", "gpt_neox"],
)
@pytest.mark.parametrize("vocab", [1024, 50257])
def test_through_each_family_the_loss_and_all_gradients_are_equal(preset, vocab):
    model = build_model(preset, vocab, 16, seed=0)
    tokens = torch.randint(0, vocab, (2, 17), generator=torch.Generator().manual_seed(1))
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    logits = model(input_ids=inputs).logits  # (2, 16, V)
    full = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab).float(), targets.reshape(-1))
    full.backward()
    full_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)

    with hidden_states_instead_of_logits(model) as captured:
        out = model(input_ids=inputs)
    assert out.logits.shape == (2, 0, vocab)  # the unembedding ran on no positions
    head = captured["head"]
    loss = linear_cross_entropy("chunked", captured["hidden"], head.weight, targets, head.bias)
    loss.backward()
    assert abs(float(loss - full)) <= TOLERANCE * float(full)
    grads = {n: p.grad for n, p in model.named_parameters()}
    assert grads.keys() == full_grads.keys()
    assert _max_diff(list(grads.values()), list(full_grads.values())) <= TOLERANCE
    # The hook is gone after the block: the model builds its logits again.
    assert model(input_ids=inputs).logits.shape == (2, 16, vocab)
