"""The MoE router of a Hugging Face config.json: its keys, and where a config leaves one out, the default of the
transformers configuration class of its model_type (or what the modeling code fixes where the class has no such key).

A key left out was read as "none": a DeepSeek-V3 config without n_group / topk_group / routed_scaling_factor was
planned (and emitted to Megatron-LM) without group-limited routing or the 2.5 scaling, another model. Values from
transformers 5.25.0 (pip), src/transformers/models/<type>/configuration_<type>.py and modeling_<type>.py; the
deepseek_v3 ones also as transformers@001f85b configuration_deepseek_v3.py DeepseekV3Config.__init__ gives them.
A model type transformers has no class for (kimi_k2: the hub repository's own remote code) has no default: a key
left out is one line naming it.
"""

from __future__ import annotations

from typing import Any

ROUTER_KEYS = ("scoring_func", "topk_method", "n_group", "topk_group", "routed_scaling_factor", "norm_topk_prob")

# Sigmoid routers whose modeling code has no scoring_func / topk_method key: DeepseekV3TopkRouter,
# Glm4MoeTopkRouter, Glm4MoeLiteTopkRouter, NemotronHTopkRouter take router_logits.sigmoid(), add the
# e_score_correction_bias buffer to choose (noaux_tc), rank groups by their top-2 sum, renormalise the top-k with
# norm_topk_prob and scale by routed_scaling_factor.
_SIGMOID = dict(scoring_func="sigmoid", topk_method="noaux_tc")
# Softmax routers with none of these keys in their class (Qwen2/3 MoE, Qwen3-Next, Qwen3.5 MoE, Mixtral, gpt-oss):
# no groups, no scaling, no correction bias; norm_topk_prob where the class has it (hf_arch.py), else renormalised.
# Their configuration and modeling code read none of _SOFTMAX's keys (transformers 5.25.0: none of them anywhere in
# models/<type>/): a stray one in config.json changes nothing in the model transformers builds, so it is not read
# (it was, and a Qwen3-MoE config with scoring_func "sigmoid" was planned and emitted with a sigmoid router).
_SOFTMAX = dict(scoring_func="softmax", topk_method="greedy", n_group=0, topk_group=0, routed_scaling_factor=0.0)
SOFTMAX_TYPES = ("qwen2_moe", "qwen3_moe", "qwen3_next", "qwen3_5_moe", "mixtral", "gpt_oss")

ROUTER_DEFAULTS: dict[str, dict[str, Any]] = {
    # DeepseekV3Config: n_group 8, topk_group 4, routed_scaling_factor 2.5, norm_topk_prob True
    "deepseek_v3": dict(_SIGMOID, n_group=8, topk_group=4, routed_scaling_factor=2.5, norm_topk_prob=True),
    # DeepseekV2Config: topk_method "greedy", n_group / topk_group None (unused by greedy), routed_scaling_factor 1.0,
    # norm_topk_prob False; DeepseekV2TopkRouter: router_logits.softmax (no scoring_func key)
    "deepseek_v2": dict(scoring_func="softmax", topk_method="greedy", n_group=0, topk_group=0,
                        routed_scaling_factor=1.0, norm_topk_prob=False),
    # Glm4MoeConfig: n_group 1, topk_group 1, routed_scaling_factor 1.0, norm_topk_prob True
    "glm4_moe": dict(_SIGMOID, n_group=1, topk_group=1, routed_scaling_factor=1.0, norm_topk_prob=True),
    # Glm4MoeLiteConfig: n_group 1, topk_group 1, routed_scaling_factor 1.8, norm_topk_prob True
    "glm4_moe_lite": dict(_SIGMOID, n_group=1, topk_group=1, routed_scaling_factor=1.8, norm_topk_prob=True),
    # NemotronHConfig: n_group 1, topk_group 1, routed_scaling_factor 1.0, norm_topk_prob True
    "nemotron_h": dict(_SIGMOID, n_group=1, topk_group=1, routed_scaling_factor=1.0, norm_topk_prob=True),
    # DeepseekV4Config: scoring_func "sqrtsoftplus", routed_scaling_factor 1.5; DeepseekV4TopKRouter always adds the
    # correction bias and renormalises its top-k, and has no expert groups
    "deepseek_v4": dict(scoring_func="sqrtsoftplus", topk_method="noaux_tc", n_group=0, topk_group=0,
                        routed_scaling_factor=1.5, norm_topk_prob=True),
    # no transformers class: every router key from config.json
    "kimi_k2": {},
    **{t: _SOFTMAX for t in SOFTMAX_TYPES},
}
# megatron-core (moe_utils.group_limited_topk, every table release: hf_core_rules.py) ranks expert groups by the sum
# of each group's top (top_k / topk_group) scores; the transformers sigmoid routers above (and DeepSeek's own remote
# code) by the top 2.
HF_GROUP_TOP = 2


def router_value(c, key: str) -> Any:
    """config.json's `key` (c: hf_config._Config), else its model type's default; none: one line naming it."""
    defaults = ROUTER_DEFAULTS.get(c.model_type, {})
    if c.model_type in SOFTMAX_TYPES and key in _SOFTMAX:  # keys its transformers code never reads
        return _SOFTMAX[key]
    if c.raw.get(key) is None:
        if key not in defaults:
            why = ("transformers has no configuration class for it to default from" if c.model_type == "kimi_k2"
                   else "its configuration class has no default for it")
            shown = f"{key}=null" if key in c.raw else f"lacks {key!r}"
            raise c.fail(f"{shown} (needed for model_type {c.model_type!r}: {why})")
        if key in c.raw and defaults[key] not in (0, None):
            # transformers keeps an explicit null over the class default, and none of these routers takes it
            raise c.fail(f"{key}=null is invalid for model_type {c.model_type!r}: "
                         f"{'true or false' if key == 'norm_topk_prob' else 'a value'} "
                         f"(left out, it is the configuration class's {defaults[key]!r})")
        return defaults[key]
    if key in ("n_group", "topk_group"):
        return c.int(key)
    if key == "routed_scaling_factor":
        return c.num(key, 0.0)
    if key == "norm_topk_prob":
        return c.flag(key, False)
    if not isinstance(c.raw[key], str):
        raise c.fail(f"{key}={c.raw[key]!r} is invalid: a string")
    return c.raw[key]
