"""A small model of the DeepSeek-V3 / Kimi K2 architecture, built from transformers' own classes, and its weights in
the absorbed MLA form a server runs.

The attention is the real MLA: a 512-wide compressed latent (``kv_lora_rank``) plus a 64-wide rope key
(``qk_rope_head_dim``), 128-wide no-rope query/key heads and 128-wide value heads, logits scaled by 1/sqrt(192);
only the widths around it are small (hidden size, layers, vocabulary: bytes). ``heads`` is the per-rank head count a
tensor-parallel server sees (8, 16, 64). Every layer is dense (``first_k_dense_replace`` = layers): a routed MoE
would add expert choices that flip at ties, which say nothing about attention.

Absorbed form (docs/generation.md, "The model"): per head h, ``kv_b_proj`` holds W_UK[h] (128 x 512) and
W_UV[h] (128 x 512); the query's no-rope part times W_UK[h] is its 512-wide latent query, so logits read the
576-wide latent rows of the pool directly, and the 512-wide attention output times W_UV[h]^T is the head's value.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from ..core.mla import D_QK, D_V, MODEL_SM_SCALE

ROPE = D_QK - D_V  # 64
NOPE = 128  # qk_nope_head_dim
VHEAD = 128  # v_head_dim
VOCAB = 256  # bytes


@dataclass(frozen=True)
class ModelSpec:
    """The target model's shape. heads: per-rank query heads (H); layers: decoder layers (the draft is the first);
    hidden: the residual width; ffn: the dense MLP's width; seed: the initial weights' seed."""

    heads: int = 8
    layers: int = 4
    hidden: int = 256
    ffn: int = 512
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("heads", "layers", "hidden", "ffn"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected an integer >= 1, found {getattr(self, name)}")
        if self.layers < 2:
            raise ValueError(f"layers: expected >= 2 (the draft is the first layer's exit), found {self.layers}")

    def as_dict(self) -> dict:
        return asdict(self)


def config(spec: ModelSpec):
    """transformers' ``DeepseekV3Config`` for ``spec``: MLA at DeepSeek-V3's widths, no q LoRA, dense layers."""
    from transformers import DeepseekV3Config

    return DeepseekV3Config(
        vocab_size=VOCAB, hidden_size=spec.hidden, intermediate_size=spec.ffn, moe_intermediate_size=spec.ffn,
        num_hidden_layers=spec.layers, num_attention_heads=spec.heads, num_key_value_heads=spec.heads,
        kv_lora_rank=D_V, q_lora_rank=None, qk_rope_head_dim=ROPE, qk_nope_head_dim=NOPE, v_head_dim=VHEAD,
        first_k_dense_replace=spec.layers, n_routed_experts=1, num_experts_per_tok=1, n_shared_experts=1,
        max_position_embeddings=262144, rope_interleave=True, tie_word_embeddings=False, attention_bias=False,
        pad_token_id=None, bos_token_id=None, eos_token_id=None,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )


def build(spec: ModelSpec):
    """A fresh ``DeepseekV3ForCausalLM`` of ``spec`` (fp32, eager attention, seeded), on the CPU."""
    from transformers import DeepseekV3ForCausalLM

    torch.manual_seed(spec.seed)
    model = DeepseekV3ForCausalLM(config(spec)).float().eval()
    model.config._attn_implementation = "eager"
    return model


@dataclass
class Layer:
    """One decoder layer's weights in the absorbed form (``dtype``, on one device)."""

    ln_in: torch.Tensor  # [hidden]
    ln_in_eps: float
    wq: torch.Tensor  # [H * 192, hidden]
    wkv_a: torch.Tensor  # [576, hidden]
    ln_kv: torch.Tensor  # [512]
    ln_kv_eps: float
    w_uk: torch.Tensor  # [H, 128, 512]
    w_uv: torch.Tensor  # [H, 128, 512]
    wo: torch.Tensor  # [hidden, H * 128]
    ln_post: torch.Tensor  # [hidden]
    ln_post_eps: float
    gate: torch.Tensor  # [ffn, hidden]
    up: torch.Tensor  # [ffn, hidden]
    down: torch.Tensor  # [hidden, ffn]


@dataclass
class Weights:
    """The whole model in the absorbed form: what the server-side forward (``forward.py``) reads."""

    spec: ModelSpec
    embed: torch.Tensor  # [V, hidden]
    layers: list[Layer]
    norm: torch.Tensor  # [hidden]
    norm_eps: float
    head: torch.Tensor  # [V, hidden]
    inv_freq: torch.Tensor  # fp32 [32], the rope frequencies
    sm_scale: float = MODEL_SM_SCALE

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.dtype

    @property
    def device(self) -> torch.device:
        return self.embed.device


def absorbed(model, spec: ModelSpec, dtype: torch.dtype = torch.bfloat16, device: str | torch.device = "cpu") -> Weights:
    """``model``'s weights in the absorbed form, cast to ``dtype`` on ``device``."""
    def t(x: torch.Tensor) -> torch.Tensor:
        return x.detach().to(device=device, dtype=dtype).contiguous()

    layers = []
    for layer in model.model.layers:
        a = layer.self_attn
        kvb = a.kv_b_proj.weight.detach().view(spec.heads, NOPE + VHEAD, D_V)
        layers.append(Layer(
            ln_in=t(layer.input_layernorm.weight), ln_in_eps=layer.input_layernorm.variance_epsilon,
            wq=t(a.q_proj.weight), wkv_a=t(a.kv_a_proj_with_mqa.weight),
            ln_kv=t(a.kv_a_layernorm.weight), ln_kv_eps=a.kv_a_layernorm.variance_epsilon,
            w_uk=t(kvb[:, :NOPE]), w_uv=t(kvb[:, NOPE:]), wo=t(a.o_proj.weight),
            ln_post=t(layer.post_attention_layernorm.weight),
            ln_post_eps=layer.post_attention_layernorm.variance_epsilon,
            gate=t(layer.mlp.gate_proj.weight), up=t(layer.mlp.up_proj.weight), down=t(layer.mlp.down_proj.weight)))
    if abs(model.model.layers[0].self_attn.scaling - MODEL_SM_SCALE) > 1e-12:
        raise ValueError(f"model: expected the logit scale 1/sqrt(192), found {model.model.layers[0].self_attn.scaling}")
    return Weights(spec=spec, embed=t(model.model.embed_tokens.weight), layers=layers, norm=t(model.model.norm.weight),
                   norm_eps=model.model.norm.variance_epsilon, head=t(model.lm_head.weight),
                   inv_freq=model.model.rotary_emb.inv_freq.detach().to(device, torch.float32))


def round_weights(model, dtype: torch.dtype = torch.bfloat16):
    """Round ``model``'s parameters to ``dtype`` and back in place (the fp32 reference then holds exactly the weights
    the bf16 server holds); returns the model."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(dtype).to(p.dtype))
    return model
