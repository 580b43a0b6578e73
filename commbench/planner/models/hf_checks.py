"""The size rules ModelSpec checks (models/spec.py __post_init__: KV heads dividing the heads, 0 < top-k <= experts,
expert and dense widths > 0, dense layers within the layers), checked on a Hugging Face config.json's values first so
that a refusal names the config.json key the user wrote and its value (`num_key_value_heads=6 is invalid: a divisor
of num_attention_heads (32)`), not commbench's field (`hf:NAME.kv_heads=6`). Keys per model type as the readers in
hf_config.py take them (transformers configuration_<type>.py)."""

from __future__ import annotations

from typing import Any

# where each model type keeps its expert count and expert width (the readers in hf_config.py)
_LOCAL_EXPERTS_TYPES = ("mixtral", "gpt_oss")        # num_local_experts, experts of intermediate_size
_QWEN_MOE_TYPES = ("qwen2_moe", "qwen3_moe", "qwen3_next", "qwen3_5_moe")   # num_experts


def experts_key(model_type: str) -> str:
    return ("num_local_experts" if model_type in _LOCAL_EXPERTS_TYPES else
            "num_experts" if model_type in _QWEN_MOE_TYPES else "n_routed_experts")


def _top_k_key(c) -> str:
    """gpt-oss reads num_experts_per_tok, else experts_per_token (hf_config._gpt_oss)."""
    return "experts_per_token" if c.model_type == "gpt_oss" and c.get("num_experts_per_tok") is None \
        else "num_experts_per_tok"


# ModelSpec's sizes that must be > 0 (spec.py __post_init__) and the config.json key each reader takes them from (the
# readers in hf_config.py: _common, _deepseek_v3's MLA sizes, _gated_deltanet's GDN sizes, _nemotron_h's Mamba sizes)
_POSITIVE_KEYS = (("hidden", "hidden_size"), ("vocab", "vocab_size"), ("head_dim", "head_dim"),
                  ("kv_lora_rank", "kv_lora_rank"), ("qk_nope_head_dim", "qk_nope_head_dim"),
                  ("qk_rope_head_dim", "qk_rope_head_dim"), ("v_head_dim", "v_head_dim"),
                  ("gdn_num_key_heads", "linear_num_key_heads"), ("gdn_num_value_heads", "linear_num_value_heads"),
                  ("gdn_key_head_dim", "linear_key_head_dim"), ("gdn_value_head_dim", "linear_value_head_dim"))
_WHAT = {"hidden": "the model width", "vocab": "the vocabulary's tokens", "head_dim": "each attention head's width",
         "kv_lora_rank": "MLA's latent KV width", "qk_nope_head_dim": "MLA's unrotated q/k head width",
         "qk_rope_head_dim": "MLA's rotated q/k head width", "v_head_dim": "MLA's value head width",
         "gdn_num_key_heads": "the Gated DeltaNet key heads", "gdn_num_value_heads": "the Gated DeltaNet value heads",
         "gdn_key_head_dim": "the Gated DeltaNet key head width",
         "gdn_value_head_dim": "the Gated DeltaNet value head width"}


def _applies(field: str, fields: dict[str, Any]) -> bool:
    """Whether ModelSpec needs `field` > 0 for this model: MLA's sizes with MLA attention, head_dim with GQA's, the
    GDN sizes with Gated DeltaNet layers."""
    attention = fields.get("attention", "gqa")
    if field in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        return attention == "mla"
    if field == "head_dim":
        return attention == "gqa"
    if field.startswith("gdn_"):
        return bool(fields.get("linear_attention_freq"))
    return True


def check_sizes(c, fields: dict[str, Any]) -> None:
    """One line naming the config.json key, its value and what is allowed (c: hf_config._Config; fields: the
    ModelSpec fields its reader made)."""
    from commbench.planner.models.spec import MAX_MODEL_LAYERS
    for field, key in _POSITIVE_KEYS:
        if field in fields and fields[field] <= 0 and _applies(field, fields):
            raise c.fail(f"{c.spelled(key)}={fields[field]} is invalid: > 0 ({_WHAT[field]})")
    if not 1 <= fields["num_layers"] <= MAX_MODEL_LAYERS:   # before the rules below, which are relative to it
        raise c.fail(f"num_hidden_layers={fields['num_layers']} is invalid: 1..{MAX_MODEL_LAYERS:,} (the decoder "
                     "layers)")
    heads, kv = fields["num_heads"], fields.get("num_kv_heads")
    if fields.get("attention", "gqa") == "gqa" and kv is not None and (kv == 0 or heads % kv):
        raise c.fail(f"num_key_value_heads={kv} is invalid: a divisor of num_attention_heads ({heads})")
    experts = fields.get("num_routed_experts", 0)
    if experts:
        key, top_k = _top_k_key(c), fields.get("top_k", 0)
        if not 0 < top_k <= experts:
            raise c.fail(f"{key}={top_k} is invalid: 0 < {key} <= {c.spelled(experts_key(c.model_type))} ({experts})")
        if fields.get("expert_ffn", 0) <= 0:
            width = "intermediate_size" if c.model_type in _LOCAL_EXPERTS_TYPES else "moe_intermediate_size"
            raise c.fail(f"{width}={fields.get('expert_ffn', 0)} is invalid: > 0 (the experts' width)")
    layers, dense = fields["num_layers"], fields.get("num_dense_layers", 0)
    if dense >= layers and experts and c.get("first_k_dense_replace") is not None:
        # transformers' decoder then builds no MoE layer (layer_idx >= first_k_dense_replace): a dense network
        raise c.fail(f"first_k_dense_replace={dense} is invalid: 0..{layers - 1} (num_hidden_layers {layers} less "
                     "one: a model with routed experts needs at least one MoE layer; give a dense model's config "
                     "for an all-dense network)")
    if dense and fields.get("dense_ffn", 0) <= 0:
        raise c.fail(f"intermediate_size={fields.get('dense_ffn', 0)} is invalid: > 0 (the dense layers' MLP width)")


def check_router_groups(c, groups: int, group_topk: int, experts: int) -> None:
    """Group-limited routing as config.json names it: n_group groups of the experts, topk_group of them per token."""
    if (groups == 0) != (group_topk == 0) or group_topk > groups:
        raise c.fail(f"topk_group={group_topk} is invalid: 0 < topk_group <= n_group ({groups}), or both 0")
    if groups and experts % groups:
        raise c.fail(f"n_group={groups} is invalid: a divisor of {c.spelled(experts_key(c.model_type))} ({experts})")
