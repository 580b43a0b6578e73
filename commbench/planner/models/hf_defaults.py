"""What transformers' configuration class of each model_type sets where config.json leaves a key out.

hf_config._Config's typed accessors (int, num, flag; top-level keys only) take a key config.json omits from
CLASS_DEFAULTS[model_type] where it has the key, else the reader's own fallback; so a hand-written config plans the
model transformers would build from it. Before, a key left out took commbench's generic value: a Qwen3 config
without head_dim was planned with hidden / heads (64 for Qwen3-0.6B's shape, --kv-channels 64) where Qwen3Config
builds 128, a GLM-4.5 one without partial_rotary_factor with RoPE on the whole head (--rotary-percent 1) where
Glm4MoeConfig rotates half, and their norm epsilon and KV heads were the generic 1e-6 and the head count.

Values from src/transformers/models/<type>/configuration_<type>.py at the commit named per entry (transformers
@008e574391258935f3ecc3035c882e73bbcac419 unless said); rope_theta, where the class sets none, is
RotaryEmbeddingConfigMixin.default_theta = 10_000.0 (modeling_rope_utils.py), a class's own default_theta over it.
A key whose class default is None that __post_init__ derives (head_dim None -> hidden_size // num_attention_heads,
num_key_value_heads None -> num_attention_heads), or that the class does not have (the modeling code's getattr
fallback), is not in the table: the reader's fallback is that derivation. Where the class derives an explicit null
too, NULL_DERIVED names the key: null reads as the derivation, while a key left out is the class default (Qwen3Config
num_key_value_heads: absent 32, null num_attention_heads). Any other null stays one line naming it.
Router keys are hf_router.py's ROUTER_DEFAULTS; kimi_k2 has no transformers class (its hub remote code): no entry.
"""

from __future__ import annotations

from typing import Any

_QWEN = dict(rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False, max_position_embeddings=32768)

CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    # configuration_llama.py LlamaConfig: head_dim / num_key_value_heads None, derived in __post_init__
    "llama": dict(rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False, attention_bias=False,
                  mlp_bias=False, max_position_embeddings=2048),
    # configuration_qwen2.py Qwen2Config: num_key_value_heads 32 (null: num_attention_heads); no head_dim key
    # (Qwen2Attention: getattr(config, "head_dim", hidden_size // num_attention_heads))
    "qwen2": dict(_QWEN, num_key_value_heads=32),
    # configuration_qwen3.py Qwen3Config: head_dim 128, num_key_value_heads 32 (null: num_attention_heads)
    "qwen3": dict(_QWEN, num_key_value_heads=32, head_dim=128, attention_bias=False),
    # configuration_mistral.py MistralConfig: num_key_value_heads 8, head_dim None (derived), sliding_window 4096
    # (Mistral-7B-v0.1's; hf_config._every_layer_window: full attention over at most that many tokens)
    "mistral": dict(num_key_value_heads=8, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                    max_position_embeddings=4096 * 32, sliding_window=4096),
    # configuration_phi3.py Phi3Config: num_key_value_heads None (derived), rms_norm_eps 1e-5,
    # convert_rope_params_to_dict: rope_theta 10_000.0, partial_rotary_factor 1.0
    "phi3": dict(rms_norm_eps=1e-5, rope_theta=10000.0, partial_rotary_factor=1.0, tie_word_embeddings=False,
                 max_position_embeddings=4096),
    # configuration_qwen2_moe.py Qwen2MoeConfig: num_key_value_heads 16 (no __post_init__ derivation of null),
    # shared_expert_intermediate_size 5632, qkv_bias True
    "qwen2_moe": dict(_QWEN, num_key_value_heads=16, shared_expert_intermediate_size=5632, qkv_bias=True),
    # configuration_qwen3_moe.py Qwen3MoeConfig: num_key_value_heads 4 (int, no null); no head_dim key
    # (Qwen3MoeAttention's getattr fallback), no shared expert
    "qwen3_moe": dict(_QWEN, num_key_value_heads=4, attention_bias=False),
    # configuration_mixtral.py MixtralConfig: default_theta 1e6, num_key_value_heads 8, head_dim None (derived),
    # rms_norm_eps 1e-5
    "mixtral": dict(num_key_value_heads=8, rms_norm_eps=1e-5, rope_theta=1000000.0, tie_word_embeddings=False,
                    max_position_embeddings=4096 * 32),
    # configuration_gpt_oss.py GptOssConfig (transformers@02b8f42b4240dddea1b27c45d2dc95fb2682f841, the version
    # stored): default_theta 150000, head_dim 64, num_key_value_heads 8, rms_norm_eps 1e-5, sliding_window 128,
    # attention_bias True, swiglu_limit 7.0, rope_parameters None -> YaRN x32 of 4096 (beta 32 / 1) in __post_init__
    "gpt_oss": dict(head_dim=64, num_key_value_heads=8, rms_norm_eps=1e-5, rope_theta=150000.0,
                    tie_word_embeddings=False, attention_bias=True, max_position_embeddings=131072,
                    sliding_window=128, swiglu_limit=7.0,
                    rope_parameters=dict(rope_type="yarn", factor=32.0, beta_fast=32.0, beta_slow=1.0, truncate=False,
                                         original_max_position_embeddings=4096)),
    # configuration_deepseek_v2.py DeepseekV2Config: first_k_dense_replace 0, n_shared_experts 2; no MTP key
    "deepseek_v2": dict(rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False, attention_bias=False,
                        max_position_embeddings=2048, first_k_dense_replace=0, n_shared_experts=2),
    # configuration_deepseek_v3.py DeepseekV3Config: first_k_dense_replace 3, n_shared_experts 1, num_mtp_layers 1
    # (attribute_map: num_nextn_predict_layers)
    "deepseek_v3": dict(rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False, attention_bias=False,
                        max_position_embeddings=4096, first_k_dense_replace=3, n_shared_experts=1,
                        num_nextn_predict_layers=1),
    # configuration_glm4_moe_lite.py Glm4MoeLiteConfig: rms_norm_eps 1e-5, n_shared_experts 1, mlp_layer_types None
    # -> ['dense'] + ['sparse'] * (layers - 1) (hf_config.DENSE_FROM_MLP_LAYER_TYPES); no first_k_dense_replace, no
    # MTP key
    "glm4_moe_lite": dict(rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False, attention_bias=False,
                          max_position_embeddings=202752, n_shared_experts=1),
    # configuration_deepseek_v4.py DeepseekV4Config (transformers@015c078164151a049126942989817713e83a8f3e, the
    # version stored): head_dim 512, num_key_value_heads 1, hc_mult 4, n_shared_experts 1, num_nextn_predict_layers 1,
    # swiglu_limit 10.0, sliding_window 128, default_num_hash_layers 3 (mlp_layer_types None -> 3 hash_moe first)
    "deepseek_v4": dict(head_dim=512, num_key_value_heads=1, rms_norm_eps=1e-6, rope_theta=10000.0,
                        tie_word_embeddings=False, attention_bias=False, max_position_embeddings=1048576, hc_mult=4,
                        n_shared_experts=1, num_nextn_predict_layers=1, swiglu_limit=10.0, sliding_window=128,
                        num_hash_layers=3),
    # configuration_glm4_moe.py Glm4MoeConfig: num_key_value_heads 8, rms_norm_eps 1e-5, partial_rotary_factor 0.5
    # (__post_init__ kwargs.setdefault), first_k_dense_replace 1, n_shared_experts 1, num_mtp_layers 1
    # (attribute_map: num_nextn_predict_layers), use_qk_norm False; no head_dim key (Glm4MoeAttention's getattr)
    "glm4_moe": dict(num_key_value_heads=8, rms_norm_eps=1e-5, rope_theta=10000.0, partial_rotary_factor=0.5,
                     tie_word_embeddings=False, attention_bias=False, max_position_embeddings=131072,
                     first_k_dense_replace=1, n_shared_experts=1, num_nextn_predict_layers=1, use_qk_norm=False),
    # configuration_nemotron_h.py NemotronHConfig (transformers@13923c63d59f73faebae79b2ee3fafc7e3a35201, the version
    # stored): head_dim 128, num_key_value_heads 8, layer_norm_epsilon 1e-5, moe_shared_expert_intermediate_size 7688,
    # conv_kernel 4, use_conv_bias True, use_bias False, mlp_bias False, num_nextn_predict_layers 0; no RoPE
    "nemotron_h": dict(head_dim=128, num_key_value_heads=8, layer_norm_epsilon=1e-5, tie_word_embeddings=False,
                       attention_bias=False, max_position_embeddings=4096, moe_shared_expert_intermediate_size=7688,
                       conv_kernel=4, use_conv_bias=True, use_bias=False, mlp_bias=False, num_nextn_predict_layers=0),
    # configuration_qwen3_next.py Qwen3NextConfig: head_dim 256, num_key_value_heads 2, partial_rotary_factor 0.25
    # (__post_init__ kwargs.setdefault), shared_expert_intermediate_size 512, linear_conv_kernel_dim 4
    "qwen3_next": dict(_QWEN, head_dim=256, num_key_value_heads=2, partial_rotary_factor=0.25, attention_bias=False,
                       shared_expert_intermediate_size=512, linear_conv_kernel_dim=4),
    # configuration_qwen3_5_moe.py Qwen3_5MoeTextConfig: as Qwen3-Next's
    "qwen3_5_moe": dict(_QWEN, head_dim=256, num_key_value_heads=2, partial_rotary_factor=0.25, attention_bias=False,
                        shared_expert_intermediate_size=512, linear_conv_kernel_dim=4),
    # configuration_qwen3_5.py Qwen3_5TextConfig: head_dim 256, num_key_value_heads 4, partial_rotary_factor 0.25
    "qwen3_5": dict(_QWEN, head_dim=256, num_key_value_heads=4, partial_rotary_factor=0.25, attention_bias=False,
                    linear_conv_kernel_dim=4),
}

# Keys whose explicit null the class's __post_init__ derives (num_key_value_heads -> num_attention_heads; head_dim ->
# hidden_size // num_attention_heads): read as the reader's fallback, that derivation. transformers@001f85b
# MixtralAttention reads a null head_dim as hidden_size // num_attention_heads too (configs it saves carry the null).
NULL_DERIVED: dict[str, tuple[str, ...]] = {
    "llama": ("num_key_value_heads", "head_dim"), "mistral": ("num_key_value_heads", "head_dim"),
    "mixtral": ("num_key_value_heads", "head_dim"), "qwen2": ("num_key_value_heads",),
    "qwen3": ("num_key_value_heads",), "phi3": ("num_key_value_heads",), "gpt_oss": ("num_key_value_heads",),
    "deepseek_v2": ("num_key_value_heads",), "deepseek_v3": ("num_key_value_heads",),
    # moe_latent_size null (NemotronHConfig's default, which configs it writes carry): no latent projection
    # (modeling_nemotron_h.py NemotronHMoE builds fc1/fc2_latent_proj only where it is not None), the reader's 0
    "nemotron_h": ("num_key_value_heads", "moe_latent_size"),
}


def class_default(model_type: str, key: str, fallback: Any) -> Any:
    """`key`'s default in model_type's configuration class, else `fallback` (the reader's own)."""
    return CLASS_DEFAULTS.get(model_type, {}).get(key, fallback)


def null_is_derived(model_type: str, key: str) -> bool:
    return key in NULL_DERIVED.get(model_type, ())
