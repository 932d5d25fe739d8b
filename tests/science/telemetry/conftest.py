"""A 2-layer attention-only model with hand-set weights whose answer is known.

Residual stream (``d_model = 3V + P + 1``): token one-hot ``TOK``, position one-hot ``POS``,
``PREV`` (the previous token, written by head 0.0), ``OUT`` (the predicted token, written by
head 1.0, read by the unembedding) and one balance dimension that keeps every residual vector at
zero mean, so LayerNorm only rescales. Head 0.0 is a previous-token head, head 1.0 an induction
head (query: current token, key: PREV), heads 0.1 and 1.1 attend to themselves and write nothing.
"""

from __future__ import annotations

import pytest
import torch

from ih_kedro.science.training.models import build_model

VOCAB = 40
LENGTH = 16
POSITIONS = 2 * LENGTH


def _dims() -> dict[str, int]:
    tok, pos = 0, VOCAB
    prev = pos + POSITIONS
    out = prev + VOCAB
    return {"tok": tok, "pos": pos, "prev": prev, "out": out, "bal": out + VOCAB}


def build_handset_model() -> torch.nn.Module:
    dims = _dims()
    d_model, d_head = dims["bal"] + 1, VOCAB + 1
    model = build_model(
        {
            "family": "attention_only",
            "n_layer": 2,
            "n_head": 2,
            "d_model": d_model,
            "d_head": d_head,
        },
        vocab_size=VOCAB,
        n_positions=POSITIONS,
        seed=0,
        attn_implementation="eager",
    )
    tok, pos, prev, out, bal = (dims[k] for k in ("tok", "pos", "prev", "out", "bal"))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for ln in [model.ln_f] + [b.ln_1 for b in model.blocks]:
            ln.weight.fill_(1.0)
        for t in range(VOCAB):
            model.wte.weight[t, tok + t] = 1.0
            model.wte.weight[t, bal] = -1.0
        for p in range(POSITIONS):
            model.wpe.weight[p, pos + p] = 1.0
            model.wpe.weight[p, bal] = -1.0
        n0 = (d_model / 6) ** 0.5  # one-hot magnitude after layer-0 LayerNorm (+1, +1, -2)
        n1 = (d_model / 12) ** 0.5  # after layer 1's input LayerNorm (+1, +1, +1, -3)
        a0, a1 = model.blocks[0].attn, model.blocks[1].attn
        # 0.0: previous-token head (query position i matches key position i - 1), copies TOK.
        for p in range(POSITIONS):
            a0.q_proj.weight[p, pos + p] = 3.0
            if p + 1 < d_head:
                a0.k_proj.weight[p + 1, pos + p] = 3.0
        for t in range(VOCAB):
            a0.v_proj.weight[t, tok + t] = 1.0 / n0
            a0.o_proj.weight[prev + t, t] = 1.0
            a0.o_proj.weight[bal, t] = -1.0
        # 0.1 and 1.1: self-attending heads that write nothing.
        for attn in (a0, a1):
            for p in range(POSITIONS):
                attn.q_proj.weight[d_head + p, pos + p] = 3.0
                attn.k_proj.weight[d_head + p, pos + p] = 3.0
        # 1.0: induction head: current token (query) matches PREV (key), copies TOK into OUT.
        for t in range(VOCAB):
            a1.q_proj.weight[t, tok + t] = 5.0
            a1.k_proj.weight[t, prev + t] = 5.0
            a1.v_proj.weight[t, tok + t] = 1.0 / n1
            a1.o_proj.weight[out + t, t] = 1.0
            a1.o_proj.weight[bal, t] = -1.0
        # Position 0 has no previous token: keep the induction head's keys off it.
        a1.q_proj.weight[VOCAB, bal] = 1.0
        a1.k_proj.weight[VOCAB, pos + 0] = 10.0
        # Unembedding reads OUT; small noise breaks ties when OUT is empty (ablated).
        model.lm_head.weight.normal_(0.0, 0.01, generator=generator)
        for t in range(VOCAB):
            model.lm_head.weight[t, out + t] = 20.0
    return model.eval()


@pytest.fixture(scope="session")
def handset_model() -> torch.nn.Module:
    return build_handset_model()


@pytest.fixture(scope="session")
def handset_probes():
    from ih_kedro.science.telemetry.probes import make_probe_set, uniform_token_pool

    return make_probe_set(uniform_token_pool(VOCAB, exclude=(0,)), 24, LENGTH - 1, 0, "uniform", 0)
