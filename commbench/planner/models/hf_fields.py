"""Which config.json key each architecture field (models/architecture.py) is read from, so that a value the
Architecture refuses is named as config.json names it (`scoring_func='noaux_tc'`, not the internal
`architecture.router_score`), as the README promises for every hf: config error.

FIELD_KEYS: field -> the keys it is read from (hf_arch.py), the first one config.json gives being the one named;
ROPE_KEYS are read from the RoPE table (rope_scaling, or rope_parameters: hf_arch.rope_table) and named with its
prefix, rotary_base and rotary_percent from it or the top level. NOT_FROM_A_KEY: the fields each model type fixes in
its modeling code (hf_arch.py says why each), which no config.json value reaches. Every field is in one of the two
(tests/test_hf_field_keys.py walks them).
"""

from __future__ import annotations

import re
from typing import Any

FIELD_KEYS: dict[str, tuple[str, ...]] = {
    "activation": ("mlp_hidden_act", "hidden_act"),
    "norm_epsilon": ("rms_norm_eps", "layer_norm_epsilon", "norm_eps"),
    "rotary_base": ("rope_theta",),
    "rotary_percent": ("partial_rotary_factor",),
    "rope_scaling": ("rope_type", "type"),
    "rope_scaling_factor": ("factor",),
    "rope_original_max_positions": ("original_max_position_embeddings",),
    "llama3_low_freq_factor": ("low_freq_factor",),
    "llama3_high_freq_factor": ("high_freq_factor",),
    "llama3_original_positions": ("original_max_position_embeddings",),
    "yarn_beta_fast": ("beta_fast",),
    "yarn_beta_slow": ("beta_slow",),
    "yarn_mscale": ("mscale",),
    "yarn_mscale_all_dim": ("mscale_all_dim",),
    "yarn_truncate": ("truncate",),
    "max_position_embeddings": ("max_position_embeddings",),
    "sliding_window": ("sliding_window",),
    "activation_clamp": ("swiglu_limit",),
    "router_score": ("scoring_func",),
    "router_topk_scaling": ("routed_scaling_factor",),
    "router_groups": ("n_group",),
    "router_group_topk": ("topk_group",),
    "router_expert_bias": ("topk_method",),
    "aux_loss_coeff": ("router_aux_loss_coef", "aux_loss_alpha"),
    "attention_dropout": ("attention_dropout",),
    "hidden_dropout": ("resid_pdrop",),
}
# read from the RoPE table; rotary_base / rotary_percent there or at the top level (the table first, as hf_arch reads)
ROPE_FIELDS = ("rope_scaling", "rope_scaling_factor", "rope_original_max_positions", "llama3_low_freq_factor",
               "llama3_high_freq_factor", "llama3_original_positions", "yarn_beta_fast", "yarn_beta_slow",
               "yarn_mscale", "yarn_mscale_all_dim", "yarn_truncate")
EITHER_FIELDS = ("rotary_base", "rotary_percent")
# Nemotron-H reads its norms' epsilon from layer_norm_epsilon alone (hf_arch._norm_epsilon)
TYPE_FIELD_KEYS = {("nemotron_h", "norm_epsilon"): ("layer_norm_epsilon",)}
NOT_FROM_A_KEY = ("glu_linear_offset", "normalization", "qk_norm", "norm_zero_centered_gamma", "linear_bias",
                  "qkv_bias", "position_embedding", "window_skip_freq", "softmax_type", "router_pre_softmax",
                  "router_bias_update_rate", "load_balancing", "capacity_factor", "router_dtype",
                  "shared_expert_gate", "vocab_divisible_by")

_REFUSAL = re.compile(r"^architecture\.(?P<field>\w+)(=(?P<value>.*?))? is invalid: (?P<allowed>.*)$", re.S)


def _named(c, rope, field: str) -> tuple[str, Any, bool]:
    """(the key as config.json names it, its value, whether config.json gives it) for `field`."""
    keys = TYPE_FIELD_KEYS.get((c.model_type, field), FIELD_KEYS[field])
    places = ([rope] if field in ROPE_FIELDS else [rope, c] if field in EITHER_FIELDS else [c])
    for where in places:
        for key in keys:
            if where.raw.get(key) is not None:
                return f"{where.prefix}{key}", where.raw[key], True
    where = places[0]
    return f"{where.prefix}{keys[0]}", None, False


def config_refusal(c, rope, message: str) -> str:
    """An Architecture refusal (`architecture.FIELD=VALUE is invalid: ALLOWED`) as the config.json key it was read
    from (c: hf_config._Config; rope: its RoPE table, hf_arch.rope_table). A field no key reaches (NOT_FROM_A_KEY)
    names the model_type, whose modeling code fixes it."""
    match = _REFUSAL.match(message)
    if not match:
        return message
    field, allowed = match["field"], match["allowed"]
    if field not in FIELD_KEYS:
        return f"model_type {c.model_type!r} builds {field}={match['value']} (its modeling code), which is invalid: " \
               f"{allowed}"
    key, value, given = _named(c, rope, field)
    allowed = re.sub(rf"\b{field}\b", key.rsplit(".", 1)[-1], allowed)
    if not given:
        return f"lacks {key!r} (its default is invalid here: {allowed})"
    return f"{key}={value!r} is invalid: {allowed}"
