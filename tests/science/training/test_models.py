"""Model presets and builders against hand-counted parameters and a hand-written forward pass.

Every count below is written out from the architecture (weights of each layer), not read back
from the model, so a changed layer, a tied or untied unembedding, or a changed preset shows.
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from ih_kedro.science.training.models import (
    FAMILIES,
    AttentionOnlyConfig,
    AttentionOnlyForCausalLM,
    build_model,
    count_parameters,
    load_model_presets,
    model_config,
    training_flops_per_token,
)

VOCAB = 50
POSITIONS = 16


def test_presets_are_the_yaml_entries_with_their_fields() -> None:
    presets = load_model_presets()
    assert list(presets) == [
        "attn-only-1l-d128",
        "attn-only-2l-d64",
        "attn-only-2l-d128",
        "attn-only-2l-d256",
        "attn-only-3l-d128",
        "gpt2-tiny",
        "gpt2-2l-d768",
        "gpt2-small",
        "llama-tiny",
        "llama-0.13b",
        "llama-0.5b",
        "llama-1b",
        "pythia-tiny",
        "pythia-160m",
        "attn-only-2l-d128-h8",
        "attn-only-3l-d128-h8",
        "gpt2-2l-d128-h8",
    ]
    # bi_induct's model (chosen by model_choice): GPT-2 blocks, 8 heads of 16 dims.
    assert presets["gpt2-2l-d128-h8"] == {"family": "gpt2", "n_layer": 2, "n_head": 8,
                                          "n_embd": 128}  # fmt: skip
    assert presets["attn-only-2l-d64"] == {
        "family": "attention_only",
        "n_layer": 2,
        "n_head": 4,
        "d_model": 64,
    }
    assert presets["llama-tiny"] == {
        "family": "llama",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "intermediate_size": 172,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    }
    assert {spec["family"] for spec in presets.values()} == set(FAMILIES)


def test_unknown_presets_families_and_sizes_are_named() -> None:
    names = sorted(load_model_presets())
    with pytest.raises(ValueError) as error:
        model_config("attn-only-9l", VOCAB, POSITIONS)
    assert str(error.value) == (
        f"model preset 'attn-only-9l' is unknown; choose one of {names} "
        "or give a mapping with a 'family' key"
    )
    with pytest.raises(ValueError) as error:
        model_config({"family": "mlp_only", "n_layer": 1}, VOCAB, POSITIONS)
    assert str(error.value) == (
        "model family 'mlp_only' is unknown; "
        "choose one of ('attention_only', 'gpt2', 'llama', 'gpt_neox')"
    )
    with pytest.raises(ValueError) as error:
        model_config("gpt2-tiny", 0, POSITIONS)
    assert str(error.value) == "vocab_size (0) and n_positions (16) must be positive"


def test_model_config_fills_each_familys_defaults_and_keeps_overrides() -> None:
    attention = model_config("attn-only-2l-d64", VOCAB, POSITIONS, d_head=8)
    assert isinstance(attention, AttentionOnlyConfig)
    assert (attention.vocab_size, attention.n_positions, attention.n_layer) == (50, 16, 2)
    assert (attention.n_head, attention.d_model, attention.d_head) == (4, 64, 8)
    assert attention.tie_word_embeddings is False
    # The HF names read the attention-only fields (what flops and telemetry use).
    assert (attention.hidden_size, attention.num_hidden_layers) == (64, 2)
    assert attention.num_attention_heads == 4 and attention.max_position_embeddings == 16

    gpt2 = model_config("gpt2-tiny", VOCAB, POSITIONS, attn_pdrop=0.25)
    assert (gpt2.resid_pdrop, gpt2.embd_pdrop, gpt2.attn_pdrop) == (0.0, 0.0, 0.25)
    assert (gpt2.bos_token_id, gpt2.eos_token_id) == (None, None)
    assert (gpt2.vocab_size, gpt2.n_positions, gpt2.n_embd) == (50, 16, 64)

    llama = model_config("llama-tiny", VOCAB, POSITIONS)
    assert llama.tie_word_embeddings is False
    assert (llama.vocab_size, llama.max_position_embeddings) == (50, 16)

    neox = model_config("pythia-tiny", VOCAB, POSITIONS)
    assert (neox.hidden_dropout, neox.attention_dropout) == (0.0, 0.0)
    assert (neox.bos_token_id, neox.eos_token_id, neox.tie_word_embeddings) == (None, None, False)
    assert neox.max_position_embeddings == 16


def test_attention_only_parameters_counted_by_hand() -> None:
    model = build_model("attn-only-2l-d64", VOCAB, POSITIONS, seed=0)
    d, layers = 64, 2
    block = 2 * d + 4 * d * d  # ln_1 (weight, bias) + q, k, v, o projections without bias
    non_embedding = layers * block + 2 * d + d * VOCAB  # + ln_f + untied lm_head
    assert non_embedding == 36_352
    assert count_parameters(model) == non_embedding
    assert count_parameters(model, non_embedding=False) == non_embedding + (VOCAB + POSITIONS) * d
    # d_head overrides the width of the heads: 4 heads of 8 on a residual stream of 64.
    narrow = build_model("attn-only-2l-d64", VOCAB, POSITIONS, seed=0, d_head=8)
    assert count_parameters(narrow) == layers * (2 * d + 4 * d * 32) + 2 * d + d * VOCAB


def test_frozen_parameters_are_not_counted() -> None:
    model = build_model("attn-only-2l-d64", VOCAB, POSITIONS, seed=0)
    model.lm_head.weight.requires_grad_(False)
    assert count_parameters(model) == 36_352 - 64 * VOCAB


def test_gpt2_and_llama_parameters_counted_by_hand() -> None:
    # GPT-2 ties the unembedding to wte, so it leaves with the embeddings.
    d = 64
    gpt2_block = 2 * d + (3 * d * d + 3 * d) + (d * d + d) + 2 * d + (4 * d * d + 4 * d)
    gpt2_block += 4 * d * d + d  # ln_1, c_attn, c_proj, ln_2, mlp.c_fc, mlp.c_proj
    gpt2 = build_model("gpt2-tiny", VOCAB, POSITIONS, seed=0)
    assert count_parameters(gpt2) == 2 * gpt2_block + 2 * d == 100_096
    assert count_parameters(gpt2, non_embedding=False) == 100_096 + (VOCAB + POSITIONS) * d
    # Llama: grouped-query attention (2 key/value heads of 16), SwiGLU, RMSNorm, untied head.
    heads, kv_heads, head_dim, ffn = 4, 2, 16, 172
    attention = 2 * d * heads * head_dim + 2 * d * kv_heads * head_dim  # q, o + k, v
    llama_block = attention + 3 * d * ffn + 2 * d  # + gate, up, down + two RMSNorm weights
    llama = build_model("llama-tiny", VOCAB, POSITIONS, seed=0)
    assert count_parameters(llama) == 2 * llama_block + d + d * VOCAB == 94_144
    assert count_parameters(llama, non_embedding=False) == 94_144 + VOCAB * d  # RoPE: no table


def test_training_flops_per_token_is_six_n_plus_attention() -> None:
    model = build_model("attn-only-2l-d64", VOCAB, POSITIONS, seed=0)
    # 6 * N (non-embedding) + 6 * n_layer * context * d_model.
    assert training_flops_per_token(model, 16) == 6.0 * 36_352 + 6 * 2 * 16 * 64 == 230_400.0
    assert training_flops_per_token(model, 8) == 230_400.0 - 6 * 2 * 8 * 64
    llama = build_model("llama-tiny", VOCAB, POSITIONS, seed=0)
    assert training_flops_per_token(llama, 16) == 6.0 * 94_144 + 6 * 2 * 16 * 64


def test_build_model_is_reproducible_by_seed_and_leaves_the_global_rng_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    first = build_model("attn-only-2l-d64", VOCAB, POSITIONS, seed=7)
    assert torch.equal(torch.rand(3), expected)  # the caller's RNG stream is untouched
    again = build_model("attn-only-2l-d64", VOCAB, POSITIONS, seed=7)
    other = build_model("attn-only-2l-d64", VOCAB, POSITIONS, seed=8)
    a, b, c = first.state_dict(), again.state_dict(), other.state_dict()
    assert list(a) == list(b) == list(c)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["wte.weight"], c["wte.weight"])
    assert not torch.equal(a["blocks.0.attn.q_proj.weight"], c["blocks.0.attn.q_proj.weight"])
    assert first.training and first.dtype == torch.float32
    assert first.config._attn_implementation == "sdpa"
    eager = build_model("attn-only-2l-d64", VOCAB, POSITIONS, seed=7, attn_implementation="eager")
    assert eager.config._attn_implementation == "eager"


def test_attention_only_initialisation() -> None:
    model = build_model("attn-only-1l-d128", 1000, POSITIONS, seed=0)
    assert torch.equal(model.blocks[0].ln_1.weight, torch.ones(128))
    assert torch.equal(model.blocks[0].ln_1.bias, torch.zeros(128))
    assert torch.equal(model.ln_f.weight, torch.ones(128))
    # Normal(0, 0.02) on 128,000 embedding weights: the sample std is within 0.0005 of 0.02.
    std = model.wte.weight.std().item()
    assert abs(std - 0.02) < 5e-4
    assert abs(model.wte.weight.mean().item()) < 5e-4
    assert model.lm_head.weight.data_ptr() != model.wte.weight.data_ptr()  # untied


def _hand_forward(model: AttentionOnlyForCausalLM, ids: torch.Tensor) -> torch.Tensor:
    """Olsson et al.'s attention-only transformer written out: the logits, (B, T, vocab)."""
    config = model.config
    heads, d_head = config.n_head, config.d_head
    batch, seq = ids.shape
    hidden = model.wte.weight[ids] + model.wpe.weight[:seq]  # (B, T, d)
    blocked = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    for block in model.blocks:
        attn = block.attn
        x = torch.nn.functional.layer_norm(
            hidden, (config.d_model,), block.ln_1.weight, block.ln_1.bias, config.layer_norm_eps
        )
        q = (x @ attn.q_proj.weight.T).view(batch, seq, heads, d_head).transpose(1, 2)
        k = (x @ attn.k_proj.weight.T).view(batch, seq, heads, d_head).transpose(1, 2)
        v = (x @ attn.v_proj.weight.T).view(batch, seq, heads, d_head).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) / d_head**0.5  # (B, H, T, T)
        pattern = scores.masked_fill(blocked, float("-inf")).softmax(-1)
        z = (pattern @ v).transpose(1, 2).reshape(batch, seq, heads * d_head)  # (B, T, H*dh)
        hidden = hidden + z @ attn.o_proj.weight.T
    final = torch.nn.functional.layer_norm(
        hidden, (config.d_model,), model.ln_f.weight, model.ln_f.bias, config.layer_norm_eps
    )
    return final @ model.lm_head.weight.T


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_attention_only_forward_matches_a_hand_computation(implementation: str) -> None:
    model = build_model(
        "attn-only-2l-d64", VOCAB, POSITIONS, seed=3, attn_implementation=implementation
    ).eval()
    ids = torch.tensor([[1, 4, 9, 16, 25, 36, 49, 0], [7, 7, 7, 3, 3, 3, 2, 1]])
    with torch.no_grad():
        out = model(ids, labels=ids)
        expected = _hand_forward(model, ids)
    torch.testing.assert_close(out.logits, expected, rtol=1e-5, atol=1e-5)
    # Mean next-token cross-entropy in nats over the 2 x 7 shifted positions.
    log_probs = expected.log_softmax(-1)
    nll = -log_probs[:, :-1].gather(-1, ids[:, 1:, None]).mean()
    torch.testing.assert_close(out.loss, nll, rtol=1e-5, atol=1e-6)
    assert out.attentions is None


def test_attention_patterns_are_causal_and_returned_per_layer() -> None:
    model = build_model("attn-only-2l-d64", VOCAB, POSITIONS, seed=3).eval()
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        out = model(ids, output_attentions=True)
    assert len(out.attentions) == 2
    for pattern in out.attentions:  # (B, H, T, T)
        assert torch.equal(pattern.triu(1), torch.zeros_like(pattern))
        torch.testing.assert_close(pattern.sum(-1), torch.ones(1, 4, 5))
        assert torch.equal(pattern[0, :, 0, 0], torch.ones(4))  # the first token sees itself


def test_a_sequence_longer_than_the_positions_is_refused() -> None:
    model = build_model("attn-only-1l-d128", VOCAB, 4, seed=0)
    with pytest.raises(ValueError) as error:
        model(torch.zeros(1, 5, dtype=torch.long))
    assert str(error.value) == "sequence length 5 exceeds the model's n_positions=4"


def test_attention_only_checkpoints_reload_through_auto_model(tmp_path) -> None:
    model = build_model("attn-only-1l-d128", VOCAB, POSITIONS, seed=1).eval()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is AttentionOnlyForCausalLM
    assert loaded.config.d_model == 128 and loaded.config.vocab_size == VOCAB
    ids = torch.tensor([[3, 1, 4, 1, 5, 9]])
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)
