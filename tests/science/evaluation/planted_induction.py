"""A hand-built 2-layer attention-only transformer whose only circuit is one induction head.

Used by the planted-truth tests of head ablation (``test_bi_induct_planted.py``): the model is
*made* to depend on exactly two heads, so the scoring and ablation machinery must find them
and must find nothing anywhere else.

Residual stream (``d_model = 3V + P + 1``, ``V`` vocabulary, ``P`` positions), disjoint blocks::

    TOK   [0, V)             one-hot of the current token          (written by ``wte``)
    POS   [V, V + P)         one-hot of the position               (written by ``wpe``)
    PREV  [V + P, 2V + P)    one-hot of the previous token         (written by layer 0)
    OUT   [2V + P, 3V + P)   one-hot of the predicted next token   (written by layer 1)
    CONST 3V + P             always 1                              (written by ``wpe``)

Heads have ``d_head = max(P, V + 1)`` and the model ``scaling = d_head ** -0.5``; the query
weights carry ``sqrt(d_head)`` so a match scores ``ATTENTION_LOGIT`` (30) and a non-match 0:
every attention pattern is one-hot up to ``T * exp(-30) ~ 1e-11``.

- **Layer 0, head ``prev_token_head``** (previous-token head): ``q_i = e_i`` and
  ``k_j = e_{j+1}`` in head space ``(d_head,)`` read from POS, so position ``i`` attends to
  ``i - 1`` (position 0 to itself, its only key); ``v_j = e_{x_j}`` from TOK; ``o_proj`` writes
  it into PREV. After layer 0, PREV at position ``i`` holds ``x_{i-1}``.
- **Layer 1, head ``induction_head``**: ``q_i = e_{x_i} + e_V`` (TOK and CONST) and
  ``k_j = e_{PREV_j} - 2 e_V [j = 0]`` (PREV, and POS[0] with weight -2), so position ``i``
  attends to the key whose previous token equals its own token; position 0, whose PREV is its
  own token, is pushed down by ``2 * ATTENTION_LOGIT``. ``v_j = e_{x_j}`` from TOK; ``o_proj``
  writes it into OUT. With no match (the first copy) the head attends about uniformly to
  positions ``1..i`` and copies a mixture of tokens already seen.
- **``lm_head``** reads OUT: ``logits = LOGIT_SCALE * OUT`` ``(B, T, V)``.
- **Every other head** has random (seeded) q/k/v weights, so it has a real attention pattern,
  and zero ``o_proj`` columns: it writes nothing.

LayerNorms: the residual entering ``ln_1`` of layer ``l`` is a sum of ``3 + l`` one-hots, so
its mean ``mu`` and variance ``var`` are the same at every position. Setting the LayerNorm's
``weight = sqrt(var + eps)`` and ``bias = mu`` makes it the identity on these states (checked
numerically in the tests). ``ln_f`` is the identity on the nominal final state (5 one-hots);
on other states it is still a positive scale plus a shift shared by every OUT entry, which
leaves the argmax of the logits unchanged.
"""

from __future__ import annotations

import math

import torch

from ih_kedro.science.training.models import AttentionOnlyConfig, AttentionOnlyForCausalLM

ATTENTION_LOGIT = 30.0
"""Pre-softmax score of a matching key (non-matching keys score 0)."""
LOGIT_SCALE = 10.0
"""Logit of the copied token (others 0) when the induction head attends to one key."""
SILENT_HEAD_STD = 0.5
"""Std of the random q/k/v weights of the heads that write nothing."""


def residual_blocks(vocab_size: int, n_positions: int) -> dict[str, slice | int]:
    """Where each block of the residual stream lies: ``{"tok", "pos", "prev", "out": slice,
    "const": index, "d_model": width}``."""
    v, p = vocab_size, n_positions
    return {
        "tok": slice(0, v),
        "pos": slice(v, v + p),
        "prev": slice(v + p, 2 * v + p),
        "out": slice(2 * v + p, 3 * v + p),
        "const": 3 * v + p,
        "d_model": 3 * v + p + 1,
    }


def _identity_layer_norm(norm: torch.nn.LayerNorm, n_ones: int, eps: float) -> None:
    """Make ``norm`` the identity on residual states that are sums of ``n_ones`` one-hots."""
    width = norm.weight.shape[0]
    mean = n_ones / width
    var = n_ones / width - mean**2  # E[x^2] - E[x]^2 of a 0/1 vector with n_ones ones
    norm.weight.fill_(math.sqrt(var + eps))
    norm.bias.fill_(mean)


def _silence_all_heads(model: AttentionOnlyForCausalLM, seed: int) -> None:
    """Random q/k/v weights for every head, zero ``o_proj`` (no head writes anything)."""
    generator = torch.Generator().manual_seed(seed)
    for block in model.blocks:
        for proj in (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj):
            noise = torch.randn(proj.weight.shape, generator=generator)  # (H*dh, d_model)
            proj.weight.copy_(SILENT_HEAD_STD * noise)
        block.attn.o_proj.weight.zero_()  # (d_model, H*dh)


def _plant_previous_token_head(
    attn: torch.nn.Module, head: int, blocks: dict, vocab_size: int, n_positions: int
) -> None:
    """Layer-0 head ``head``: position ``i`` attends to ``i - 1`` and writes ``x_{i-1}`` to PREV."""
    d_head = attn.head_dim
    rows = slice(head * d_head, (head + 1) * d_head)  # this head's rows of q/k/v (H*dh, d)
    q, k, v = (p.weight[rows] for p in (attn.q_proj, attn.k_proj, attn.v_proj))  # (dh, d)
    for w in (q, k, v):
        w.zero_()
    query_gain = ATTENTION_LOGIT * math.sqrt(d_head)  # undoes the model's d_head**-0.5
    pos0 = blocks["pos"].start
    for i in range(n_positions):
        q[i, pos0 + i] = query_gain  # q_i = gain * e_i
        if i + 1 < d_head:
            k[i + 1, pos0 + i] = 1.0  # k_j = e_{j+1}
    tok0, prev0 = blocks["tok"].start, blocks["prev"].start
    for t in range(vocab_size):
        v[t, tok0 + t] = 1.0  # v_j = e_{x_j}
        attn.o_proj.weight[prev0 + t, head * d_head + t] = 1.0  # z_t -> PREV[t]


def _plant_induction_head(attn: torch.nn.Module, head: int, blocks: dict, vocab_size: int) -> None:
    """Layer-1 head ``head``: attend to the key whose PREV equals the query token, copy its
    token to OUT."""
    d_head = attn.head_dim
    rows = slice(head * d_head, (head + 1) * d_head)
    q, k, v = (p.weight[rows] for p in (attn.q_proj, attn.k_proj, attn.v_proj))  # (dh, d)
    for w in (q, k, v):
        w.zero_()
    query_gain = ATTENTION_LOGIT * math.sqrt(d_head)
    tok0, prev0, out0 = blocks["tok"].start, blocks["prev"].start, blocks["out"].start
    for t in range(vocab_size):
        q[t, tok0 + t] = query_gain  # q_i = gain * e_{x_i}
        k[t, prev0 + t] = 1.0  # k_j = e_{PREV_j}
        v[t, tok0 + t] = 1.0  # v_j = e_{x_j}
        attn.o_proj.weight[out0 + t, head * d_head + t] = 1.0  # z_t -> OUT[t]
    q[vocab_size, blocks["const"]] = query_gain  # q_i[V] = gain, every query
    k[vocab_size, blocks["pos"].start] = -2.0  # k_0[V] = -2: position 0 scores -2 * logit


def planted_induction_model(
    vocab_size: int = 32,
    n_positions: int = 64,
    n_head: int = 4,
    prev_token_head: int = 0,
    induction_head: int = 2,
) -> AttentionOnlyForCausalLM:
    """The hand-built induction circuit of the module docstring, in eval mode (fp32, eager).

    Deterministic: the silent heads' random weights come from a fixed seed, and the global
    RNG state is left as it was.
    """
    if not (0 <= prev_token_head < n_head and 0 <= induction_head < n_head):
        raise ValueError(
            f"prev_token_head ({prev_token_head}) and induction_head ({induction_head}) must "
            f"be in [0, {n_head})"
        )
    if vocab_size < 2 or n_positions < 2:
        raise ValueError(f"vocab_size ({vocab_size}) and n_positions ({n_positions}) must be >= 2")
    blocks = residual_blocks(vocab_size, n_positions)
    config = AttentionOnlyConfig(
        vocab_size=vocab_size,
        n_positions=n_positions,
        n_layer=2,
        n_head=n_head,
        d_model=blocks["d_model"],
        d_head=max(n_positions, vocab_size + 1),
    )
    config._attn_implementation = "eager"
    with torch.random.fork_rng(devices=[]):
        model = AttentionOnlyForCausalLM(config)
    eps = config.layer_norm_eps
    with torch.no_grad():
        model.wte.weight.zero_()  # (V, d)
        model.wte.weight[:, blocks["tok"]] = torch.eye(vocab_size)
        model.wpe.weight.zero_()  # (P, d)
        model.wpe.weight[:, blocks["pos"]] = torch.eye(n_positions)
        model.wpe.weight[:, blocks["const"]] = 1.0
        _silence_all_heads(model, seed=0)
        first, second = model.blocks
        _plant_previous_token_head(first.attn, prev_token_head, blocks, vocab_size, n_positions)
        _plant_induction_head(second.attn, induction_head, blocks, vocab_size)
        _identity_layer_norm(first.ln_1, n_ones=3, eps=eps)  # TOK + POS + CONST
        _identity_layer_norm(second.ln_1, n_ones=4, eps=eps)  # ... + PREV
        _identity_layer_norm(model.ln_f, n_ones=5, eps=eps)  # ... + OUT
        model.lm_head.weight.zero_()  # (V, d)
        model.lm_head.weight[:, blocks["out"]] = LOGIT_SCALE * torch.eye(vocab_size)
    return model.eval()
