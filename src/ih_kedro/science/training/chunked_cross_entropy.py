"""Next-token cross-entropy from the last hidden states, without the ``(N, V)`` logits.

A language model's loss is ``cross_entropy(hidden @ Wᵀ + b, targets)``. Built whole, the
logits of ``N`` tokens over a vocabulary of ``V`` are an ``(N, V)`` tensor (1.6 GB in fp32 for
8 × 1,024 tokens over GPT-2's 50,257 ids), kept for the backward together with its softmax
and its gradient: at paper shapes this is most of a step's memory.
:class:`ChunkedLinearCrossEntropy` goes through the rows in chunks: the forward computes each
chunk's logits, its log-sum-exp and its target logit, turns the logits into the softmax minus
the one-hot target and adds that chunk's share to the gradients of the hidden states, the
unembedding weight and the bias, which the backward only scales (``GRADS_IN_FORWARD``: the
full path's three ``N·d·V`` matmuls). With ``grads_in_forward=False`` it keeps the hidden
states and the ``(N,)`` log-sum-exps instead and recomputes each chunk's logits in the backward
(a fourth matmul, slower on a CPU: benchmarks/README.md). Either way the peak extra memory is
one chunk's logits.

Numerics follow the full path: each chunk's logits are a matmul in the weights' dtype, cast to
fp32 for the log-sum-exp (as ``logits.float()`` before ``cross_entropy``); the gradients are cast
back to the weights' dtype for the two matmuls, and the weight's gradient accumulates in fp32
over the chunks.

:func:`linear_cross_entropy` picks the implementation (``full``, ``chunked``, or ``liger``:
Liger-Kernel's fused Triton kernel on CUDA, when the package is installed) and
:func:`hidden_states_instead_of_logits` gets the hidden states out of a causal LM without its
unembedding running.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

LOSS_IMPLEMENTATIONS = ("full", "chunked", "liger")
# Elements of one chunk's logits: 2^24 fp32 values are 64 MiB (333 rows at V 50,257 → 256).
CHUNK_ELEMENTS = 2**24
# The chunked loss computes its gradients in the forward (no recomputed logits): measured
# 0.93-1.19x the full path's tokens/s on CPU, the recomputing variant 0.74x (benchmarks/README.md).
GRADS_IN_FORWARD = True


def chunk_rows_for(vocab_size: int, n_rows: int, chunk_elements: int = CHUNK_ELEMENTS) -> int:
    """Rows per chunk: the largest power of two whose ``(rows, V)`` logits hold at most
    ``chunk_elements`` values (at least 1, at most ``n_rows``)."""
    rows = max(1, chunk_elements // max(1, vocab_size))
    rows = 1 << (rows.bit_length() - 1)  # a power of two: regular matmul shapes
    return max(1, min(rows, n_rows))


def _chunk_logits(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """fp32 logits of a chunk: the matmul in the weights' dtype, then cast (as the full path)."""
    logits = hidden @ weight.t()  # (n, V)
    if bias is not None:
        logits = logits + bias
    return logits.float()


class _Grads:
    """The gradients of one call, accumulated chunk by chunk: hidden ``(N, d)`` in its dtype,
    weight ``(V, d)`` and bias ``(V,)`` in fp32 (``None`` where not wanted)."""

    def __init__(self, hidden, weight, bias, needs: tuple[bool, ...]) -> None:
        want_hidden, want_weight, want_bias = needs[:3]
        device = weight.device
        self.hidden = torch.empty_like(hidden) if want_hidden else None
        self.weight = (
            torch.zeros(weight.shape, dtype=torch.float32, device=device) if want_weight else None
        )
        self.bias = (
            torch.zeros(weight.shape[0], dtype=torch.float32, device=device)
            if bias is not None and want_bias
            else None
        )

    def add_chunk(self, rows, probs, chunk, picked, weight, scale) -> None:
        """Add a chunk's share; ``probs`` ``(n, V)`` fp32 is its softmax times ``scale``.

        d(loss)/d(logits) = (softmax - one_hot(target)) · scale. The softmax part goes through
        the matmuls and the one-hot part is subtracted row by row: a sum of many small terms and
        one large one would otherwise round at the large one's scale.
        """
        if self.bias is not None:
            self.bias += probs.sum(0)
            self.bias.index_add_(0, picked, (-scale).expand(picked.shape[0]))
        probs = probs.to(weight.dtype)
        if self.hidden is not None:
            target_rows = weight[picked].float() * scale  # (n, d)
            self.hidden[rows] = ((probs @ weight).float() - target_rows).to(self.hidden.dtype)
        if self.weight is not None:
            if probs.dtype == torch.float32:
                self.weight.addmm_(probs.t(), chunk)  # (V, d), no temporary
            else:
                self.weight += (probs.t() @ chunk).float()  # (V, d)
            self.weight.index_add_(0, picked, chunk.float() * -scale)

    def scaled(self, grad_loss, weight, bias) -> tuple[torch.Tensor | None, ...]:
        """The gradients times ``grad_loss``, in the inputs' dtypes (hidden, weight, bias)."""
        one = bool(grad_loss == 1)
        out = []
        for grad, like in ((self.hidden, self.hidden), (self.weight, weight), (self.bias, bias)):
            if grad is None:
                out.append(None)
                continue
            out.append((grad if one else grad * grad_loss).to(like.dtype))
        return tuple(out)


class ChunkedLinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy (nats) of ``hidden @ weightᵀ + bias`` against ``targets``, by chunks.

    ``hidden`` ``(N, d)``, ``weight`` ``(V, d)``, ``bias`` ``(V,)`` or ``None``, ``targets``
    ``(N,)`` int64 in ``[0, V)``; ``chunk_rows`` rows per chunk. Returns a 0-d fp32 tensor.

    ``grads_in_forward=False`` keeps the hidden states and the ``(N,)`` log-sum-exps and
    recomputes each chunk's logits in the backward (one more ``N·d·V`` matmul). ``True``
    computes the gradients in the forward, while each chunk's logits are at hand, and keeps
    them (``N·d + V·d`` values) for the backward, which only scales them: the full path's
    matmul count. Both hold at most one chunk's logits.
    """

    @staticmethod
    def forward(
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        targets: torch.Tensor,
        chunk_rows: int,
        grads_in_forward: bool = False,
    ) -> torch.Tensor:
        n_rows = hidden.shape[0]
        early = grads_in_forward and any(ctx.needs_input_grad[:3])
        grads = _Grads(hidden, weight, bias, ctx.needs_input_grad) if early else None
        scale = torch.tensor(1.0 / n_rows, device=hidden.device)
        lse = torch.empty(n_rows, dtype=torch.float32, device=hidden.device)  # (N,)
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        for start in range(0, n_rows, chunk_rows):
            rows = slice(start, start + chunk_rows)
            logits = _chunk_logits(hidden[rows], weight, bias)  # (n, V) fp32
            target_logits = logits.gather(1, targets[rows, None]).squeeze(1)  # (n,)
            if grads is None:
                lse[rows] = torch.logsumexp(logits, dim=-1)
            else:  # one pass of exp for the log-sum-exp and the softmax, in place
                peak = logits.amax(dim=-1, keepdim=True)  # (n, 1)
                exps = logits.sub_(peak).exp_()
                sums = exps.sum(dim=-1, keepdim=True)  # (n, 1)
                lse[rows] = (peak + sums.log()).squeeze(1)
                probs = exps.mul_(scale / sums)  # softmax · scale
                grads.add_chunk(rows, probs, hidden[rows], targets[rows], weight, scale)
            total += (lse[rows] - target_logits).sum()
            del logits
        if grads is not None:
            ctx.grads = grads
            ctx.save_for_backward(weight, bias)
        else:
            ctx.grads = None
            ctx.save_for_backward(hidden, weight, bias, targets, lse)
        ctx.chunk_rows = chunk_rows
        return total / n_rows

    @staticmethod
    def backward(ctx: Any, grad_loss: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        if ctx.grads is not None:
            weight, bias = ctx.saved_tensors
            grads, ctx.grads = ctx.grads, None  # free them with the graph
            return (*grads.scaled(grad_loss.float(), weight, bias), None, None, None)
        hidden, weight, bias, targets, lse = ctx.saved_tensors
        n_rows, chunk_rows = hidden.shape[0], ctx.chunk_rows
        grads = _Grads(hidden, weight, bias, ctx.needs_input_grad)
        scale = grad_loss.float() / n_rows
        for start in range(0, n_rows, chunk_rows):
            rows = slice(start, start + chunk_rows)
            probs = _chunk_logits(hidden[rows], weight, bias)  # (n, V) fp32
            probs.sub_(lse[rows, None]).exp_().mul_(scale)  # softmax · scale, in place
            grads.add_chunk(rows, probs, hidden[rows], targets[rows], weight, scale)
            del probs
        one = torch.ones((), device=hidden.device)
        return (*grads.scaled(one, weight, bias), None, None, None)


def chunked_linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    bias: torch.Tensor | None = None,
    chunk_rows: int | None = None,
    grads_in_forward: bool = GRADS_IN_FORWARD,
) -> torch.Tensor:
    """Mean cross-entropy (nats) of ``hidden @ weightᵀ + bias`` against ``targets`` without
    building the ``(N, V)`` logits; ``hidden`` ``(..., d)``, ``targets`` ``(...)``."""
    hidden = hidden.reshape(-1, hidden.shape[-1])  # (N, d)
    targets = targets.reshape(-1)  # (N,)
    rows = chunk_rows or chunk_rows_for(weight.shape[0], hidden.shape[0])
    return ChunkedLinearCrossEntropy.apply(hidden, weight, bias, targets, rows, grads_in_forward)


def full_linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """The reference path: the whole ``(N, V)`` logits, cast to fp32, then ``cross_entropy``."""
    logits = torch.nn.functional.linear(hidden, weight, bias)  # (..., V)
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1)
    )


def _liger_linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Liger-Kernel's fused linear cross-entropy (Triton, CUDA only), mean over the rows."""
    try:
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy
    except ImportError as error:
        raise RuntimeError(
            "training.loss_implementation: 'liger' needs the liger-kernel package "
            "(pip install liger-kernel) on a CUDA device; 'chunked' needs nothing"
        ) from error
    if not hidden.is_cuda:
        raise RuntimeError("training.loss_implementation: 'liger' runs on CUDA only")
    return liger_fused_linear_cross_entropy(
        hidden.reshape(-1, hidden.shape[-1]), weight, targets.reshape(-1), bias=bias
    )


def linear_cross_entropy(
    implementation: str,
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean next-token cross-entropy (nats, fp32) by ``implementation`` (``full``,
    ``chunked`` or ``liger``); the three agree to rounding."""
    if implementation == "full":
        return full_linear_cross_entropy(hidden, weight, targets, bias)
    if implementation == "chunked":
        return chunked_linear_cross_entropy(hidden, weight, targets, bias)
    if implementation == "liger":
        return _liger_linear_cross_entropy(hidden, weight, targets, bias)
    raise ValueError(
        f"training.loss_implementation: {implementation!r} is not one of {LOSS_IMPLEMENTATIONS}"
    )


@contextlib.contextmanager
def hidden_states_instead_of_logits(model: torch.nn.Module) -> Iterator[dict[str, Any]]:
    """Within the block, a forward of ``model`` hands its last hidden states (the input of its
    output embedding, ``get_output_embeddings()``) to the yielded dict under ``"hidden"`` and
    runs the unembedding on zero positions, so the ``(B, T, V)`` logits are never built; the
    dict's ``"head"`` is that unembedding (its ``weight``, ``bias``)."""
    head = model.get_output_embeddings()
    captured: dict[str, Any] = {"head": head}

    def keep_hidden(module: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        hidden = args[0]  # (B, T, d)
        captured["hidden"] = hidden
        return (hidden[..., :0, :], *args[1:])  # (B, 0, d): empty logits

    handle = head.register_forward_pre_hook(keep_hidden)
    try:
        yield captured
    finally:
        handle.remove()
