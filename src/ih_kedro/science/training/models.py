"""Decoder-only causal LMs built from configuration.

Three families, all Hugging Face ``PreTrainedModel`` s so every checkpoint saves with
``save_pretrained`` and loads with ``AutoModelForCausalLM.from_pretrained``:

- ``attention_only``: the attention-only toy transformer of Olsson et al. (2022), defined here.
  Pre-LayerNorm, final LayerNorm, learned absolute positions, untied embeddings, no MLPs.
- ``gpt2``: ``transformers.GPT2LMHeadModel`` (the reference code's shape).
- ``llama``: ``transformers.LlamaForCausalLM`` (RoPE, RMSNorm, SwiGLU, grouped-query attention).
- ``gpt_neox``: ``transformers.GPTNeoXForCausalLM`` (the Pythia suite's architecture).

Presets (``model_presets.yml``) are data: a name maps to a family and its config fields.
The attention-only model dispatches attention through ``transformers``' attention interface,
exactly like GPT-2 and Llama, so telemetry can swap in its own attention function for any family.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import Any

import torch
import yaml
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import CausalLMOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

FAMILIES = ("attention_only", "gpt2", "llama", "gpt_neox")


class AttentionOnlyConfig(PretrainedConfig):
    """Config of the attention-only transformer (no MLP blocks)."""

    model_type = "ih_attention_only"
    attribute_map = {  # noqa: RUF012 - the HF convention
        "hidden_size": "d_model",
        "num_hidden_layers": "n_layer",
        "num_attention_heads": "n_head",
        "max_position_embeddings": "n_positions",
    }

    def __init__(
        self,
        vocab_size: int = 1024,
        n_positions: int = 256,
        n_layer: int = 2,
        n_head: int = 4,
        d_model: int = 128,
        d_head: int | None = None,
        layer_norm_eps: float = 1e-5,
        initializer_range: float = 0.02,
        **kwargs: Any,
    ) -> None:
        self.vocab_size = vocab_size
        self.n_positions = n_positions
        self.n_layer = n_layer
        self.n_head = n_head
        self.d_model = d_model
        self.d_head = d_head if d_head is not None else d_model // n_head
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        kwargs.setdefault("tie_word_embeddings", False)
        super().__init__(**kwargs)


def _eager_attention(
    module: nn.Module,
    query: torch.Tensor,  # (B, H, T, dh)
    key: torch.Tensor,  # (B, H, S, dh)
    value: torch.Tensor,  # (B, H, S, dh)
    attention_mask: torch.Tensor | None,  # (B or 1, 1, T, S) additive
    scaling: float,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling  # (B, H, T, S)
    if attention_mask is not None:
        scores = scores + attention_mask
    pattern = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)  # (B, H, T, S)
    out = torch.matmul(pattern, value).transpose(1, 2).contiguous()  # (B, T, H, dh)
    return out, pattern


class AttentionOnlyAttention(nn.Module):
    """Multi-head causal self-attention; ``o_proj`` reads the concatenated heads (``hook_z``)."""

    def __init__(self, config: AttentionOnlyConfig, layer_idx: int) -> None:
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.num_heads = config.n_head
        self.head_dim = config.d_head
        self.num_key_value_groups = 1
        self.is_causal = True
        self.scaling = self.head_dim**-0.5
        inner = self.num_heads * self.head_dim
        self.q_proj = nn.Linear(config.d_model, inner, bias=False)
        self.k_proj = nn.Linear(config.d_model, inner, bias=False)
        self.v_proj = nn.Linear(config.d_model, inner, bias=False)
        self.o_proj = nn.Linear(inner, config.d_model, bias=False)

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        batch, seq, _ = hidden_states.shape
        shape = (batch, seq, self.num_heads, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)  # (B, H, T, dh)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)  # (B, H, T, dh)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)  # (B, H, T, dh)
        implementation = self.config._attn_implementation or "eager"
        if kwargs.pop("output_attentions", False) and implementation == "sdpa":
            implementation = "eager"  # sdpa never materialises the pattern
        attention = (
            _eager_attention
            if implementation == "eager"
            else ALL_ATTENTION_FUNCTIONS.get_interface(implementation, _eager_attention)
        )
        out, pattern = attention(self, q, k, v, attention_mask, scaling=self.scaling, **kwargs)
        out = out.reshape(batch, seq, self.num_heads * self.head_dim)  # (B, T, H*dh)
        return self.o_proj(out), pattern


class AttentionOnlyBlock(nn.Module):
    def __init__(self, config: AttentionOnlyConfig, layer_idx: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.attn = AttentionOnlyAttention(config, layer_idx)

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attn_out, pattern = self.attn(self.ln_1(hidden_states), attention_mask, **kwargs)
        return hidden_states + attn_out, pattern  # (B, T, d_model)


class AttentionOnlyPreTrainedModel(PreTrainedModel):
    config_class = AttentionOnlyConfig
    base_model_prefix = "transformer"
    _supports_sdpa = True
    _supports_attention_backend = True
    _no_split_modules = ["AttentionOnlyBlock"]

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear | nn.Embedding):
            module.weight.normal_(mean=0.0, std=std)
            if getattr(module, "bias", None) is not None:
                module.bias.zero_()
        elif isinstance(module, nn.LayerNorm):
            module.weight.fill_(1.0)
            module.bias.zero_()


class AttentionOnlyForCausalLM(AttentionOnlyPreTrainedModel):
    """Attention-only transformer with an untied unembedding.

    ``forward`` returns a ``CausalLMOutput`` whose ``loss`` is the mean next-token
    cross-entropy in nats (labels are shifted inside, as in every HF causal LM).
    """

    def __init__(self, config: AttentionOnlyConfig) -> None:
        super().__init__(config)
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        self.wpe = nn.Embedding(config.n_positions, config.d_model)
        self.blocks = nn.ModuleList(AttentionOnlyBlock(config, i) for i in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.wte

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def forward(
        self,
        input_ids: torch.LongTensor,
        labels: torch.LongTensor | None = None,
        output_attentions: bool = False,
        # Padding is never used here; accepted for HF APIs.
        attention_mask: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> CausalLMOutput:
        batch, seq = input_ids.shape
        if seq > self.config.n_positions:
            raise ValueError(
                f"sequence length {seq} exceeds the model's n_positions={self.config.n_positions}"
            )
        positions = torch.arange(seq, device=input_ids.device)
        hidden = self.wte(input_ids) + self.wpe(positions)  # (B, T, d_model)
        implementation = self.config._attn_implementation or "eager"
        causal_mask = None
        if implementation != "sdpa" or output_attentions:
            # Additive causal mask, as eager attention in transformers expects.
            blocked = torch.ones(seq, seq, dtype=torch.bool, device=input_ids.device).triu(1)
            causal_mask = torch.zeros(seq, seq, dtype=hidden.dtype, device=input_ids.device)
            causal_mask = causal_mask.masked_fill(blocked, torch.finfo(hidden.dtype).min)
            causal_mask = causal_mask[None, None]  # (1, 1, T, T)
        patterns = []
        for block in self.blocks:
            hidden, pattern = block(
                hidden, causal_mask, output_attentions=output_attentions, **kwargs
            )
            patterns.append(pattern)
        logits = self.lm_head(self.ln_f(hidden))  # (B, T, vocab)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.size(-1)).float(), labels[:, 1:].reshape(-1)
            )
        return CausalLMOutput(
            loss=loss,
            logits=logits,
            attentions=tuple(patterns) if output_attentions else None,
        )


AutoConfig.register(AttentionOnlyConfig.model_type, AttentionOnlyConfig)
AutoModelForCausalLM.register(AttentionOnlyConfig, AttentionOnlyForCausalLM)


def load_model_presets() -> dict[str, dict[str, Any]]:
    """Return the size presets shipped with the package, name -> {family, config fields}."""
    text = resources.files("ih_kedro.science.training").joinpath("model_presets.yml").read_text()
    return yaml.safe_load(text)


def model_config(
    preset: str | Mapping[str, Any],
    vocab_size: int,
    n_positions: int,
    **overrides: Any,
) -> PretrainedConfig:
    """Build the HF config of a preset (a preset name, or a mapping with ``family``).

    Raises ``ValueError`` naming the parameter for unknown presets or families.
    """
    if isinstance(preset, str):
        presets = load_model_presets()
        if preset not in presets:
            raise ValueError(
                f"model preset {preset!r} is unknown; choose one of {sorted(presets)} "
                "or give a mapping with a 'family' key"
            )
        spec = dict(presets[preset])
    else:
        spec = dict(preset)
    family = spec.pop("family", None)
    if family not in FAMILIES:
        raise ValueError(f"model family {family!r} is unknown; choose one of {FAMILIES}")
    if vocab_size <= 0 or n_positions <= 0:
        raise ValueError(
            f"vocab_size ({vocab_size}) and n_positions ({n_positions}) must be positive"
        )
    spec.update(overrides)
    if family == "attention_only":
        return AttentionOnlyConfig(vocab_size=vocab_size, n_positions=n_positions, **spec)
    if family == "gpt2":
        spec.setdefault("resid_pdrop", 0.0)
        spec.setdefault("embd_pdrop", 0.0)
        spec.setdefault("attn_pdrop", 0.0)
        # GPT-2's defaults point at token 50256, outside a small tokenizer's vocabulary.
        spec.setdefault("bos_token_id", None)
        spec.setdefault("eos_token_id", None)
        return GPT2Config(vocab_size=vocab_size, n_positions=n_positions, **spec)
    spec.setdefault("tie_word_embeddings", False)
    if family == "gpt_neox":
        spec.setdefault("hidden_dropout", 0.0)
        spec.setdefault("attention_dropout", 0.0)
        spec.setdefault("bos_token_id", None)
        spec.setdefault("eos_token_id", None)
        return GPTNeoXConfig(vocab_size=vocab_size, max_position_embeddings=n_positions, **spec)
    return LlamaConfig(vocab_size=vocab_size, max_position_embeddings=n_positions, **spec)


def build_model(
    preset: str | Mapping[str, Any],
    vocab_size: int,
    n_positions: int,
    seed: int | None = None,
    attn_implementation: str = "sdpa",
    **overrides: Any,
) -> PreTrainedModel:
    """Return a freshly initialised causal LM of the preset (fp32, train mode).

    ``seed`` makes the initialisation reproducible without touching the global RNG state
    of the caller beyond this call.
    """
    config = model_config(preset, vocab_size, n_positions, **overrides)
    config._attn_implementation = attn_implementation
    model_class = {
        AttentionOnlyConfig: AttentionOnlyForCausalLM,
        GPT2Config: GPT2LMHeadModel,
        LlamaConfig: LlamaForCausalLM,
        GPTNeoXConfig: GPTNeoXForCausalLM,
    }[type(config)]
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        model = model_class(config)
    return model


def count_parameters(model: nn.Module, non_embedding: bool = True) -> int:
    """Number of trainable parameters; ``non_embedding`` drops token and position embeddings."""
    total = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if non_embedding:
        for module in model.modules():
            if isinstance(module, nn.Embedding):
                total -= module.weight.numel()
    return total


def training_flops_per_token(model: nn.Module, context_length: int) -> float:
    """Approximate training FLOPs per token: 6N + 6·L·C·d (Kaplan et al. 2020, with attention)."""
    config = model.config
    n_layer = config.num_hidden_layers
    d_model = config.hidden_size
    attention = 6 * n_layer * context_length * d_model
    return 6.0 * count_parameters(model, non_embedding=True) + attention
