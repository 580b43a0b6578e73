"""The architecture fields (models/architecture.py) of a Hugging Face config.json, each citing the file.

Keys as the transformers configuration classes name them: hidden_act / mlp_hidden_act, rms_norm_eps
(layer_norm_epsilon, norm_eps), rope_theta, rope_scaling (rope_type llama3 / yarn, factor,
original_max_position_embeddings, llama3's low_freq_factor / high_freq_factor, beta_fast, beta_slow, mscale, mscale_all_dim), sliding_window
with layer_types, attention_bias, scoring_func, routed_scaling_factor, n_group / topk_group,
topk_method (noaux_tc = expert bias), norm_topk_prob, attention_dropout (Phi-3's resid_pdrop as the hidden dropout),
each at its configuration class default where left out (hf_defaults.py; the router's in hf_router.py).
What a model type fixes in its modeling code rather than its config (Qwen3's and
MLA's q/k norms, gpt-oss's attention sinks and clamped GLU with a linear offset, Qwen2's QKV bias
(GLM-4.5's where attention_bias says so), GLM-4.5's sigmoid router with its correction bias, Qwen3-Next's
zero-centred norms and shared-expert gate, Nemotron-H's squared ReLU and position-free attention) is set
per model type; the router's training settings (balancing loss, pre-softmax scores, bias update rate) as
Megatron-Bridge's bridge for the model type sets them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from commbench.errors import CommbenchError
from commbench.planner.models.architecture import ARCH_FIELDS, Architecture, Source
from commbench.planner.models.hf_checks import check_router_groups
from commbench.planner.models.hf_core_rules import core_line, core_name, expert_bias_scores
from commbench.planner.models.hf_fields import config_refusal
from commbench.planner.models.hf_router import HF_GROUP_TOP, router_value

MLA_TYPES = ("deepseek_v2", "deepseek_v3", "kimi_k2", "glm4_moe_lite")  # latent q/kv norms: Megatron's qk_layernorm
QK_NORM_TYPES = ("qwen3", "qwen3_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5", "deepseek_v4") + MLA_TYPES
# Qwen3-Next and Qwen3.5 (MoE and dense): zero-centred norms (weight + 1) and the shared expert's sigmoid gate (the
# dense one has no shared expert; transformers modular_qwen3_5.py builds Qwen3_5RMSNorm and Qwen3_5Attention's q/k
# norms from Qwen3-Next's, as Megatron-Bridge qwen35_bridge.py _apply_qwen35_common_config sets
# layernorm_zero_centered_gamma and qk_layernorm for both)
QWEN_NEXT_TYPES = ("qwen3_next", "qwen3_5_moe", "qwen3_5")
# the modeling code always has the correction bias, whatever topk_method says (hf_router.py)
EXPERT_BIAS_TYPES = ("nemotron_h", "glm4_moe", "glm4_moe_lite", "deepseek_v4")
# A config.json carries no bias update rate (a training setting): the rate Megatron-Bridge's bridge for the model type
# (067f987) trains with. GLM's bridges set moe_router_bias_update_rate = 0 (the bias stays as the checkpoint has it:
# glm/glm45_bridge.py:78, as GLM45ModelProvider at v0.2.0 glm45_provider.py:86; glm/glm47_flash_bridge.py:89); the
# DeepSeek-V3 (deepseek/deepseek_v3_bridge.py:74), Kimi-K2 (kimi/kimi_bridge.py:62), Nemotron-H
# (nemotronh/nemotron_h_bridge.py:312) and DeepSeek-V4 (deepseek/deepseek_v4_bridge.py:491) bridges turn the bias on
# and leave the rate at megatron-core's TransformerConfig default, 1e-3 (0.16.1 transformer_config.py:639; DeepSeek-V3's
# bias update speed, arXiv 2412.19437 section 4.2: 0.001), as does any other type whose config asks for the bias.
MEGATRON_BRIDGE_COMMIT = "067f987df03b8355b03192d88d70f1709fedf51a"
MCORE_BIAS_UPDATE_RATE = 1e-3
BRIDGE_BIAS_UPDATE_RATE = {  # model type: (rate, the bridge file:line that sets it or turns the bias on and leaves it)
    "glm4_moe": (0.0, "src/megatron/bridge/models/glm/glm45_bridge.py:78"),
    "glm4_moe_lite": (0.0, "src/megatron/bridge/models/glm/glm47_flash_bridge.py:89"),
    "deepseek_v3": (MCORE_BIAS_UPDATE_RATE, "src/megatron/bridge/models/deepseek/deepseek_v3_bridge.py:74"),
    "kimi_k2": (MCORE_BIAS_UPDATE_RATE, "src/megatron/bridge/models/kimi/kimi_bridge.py:62"),
    "nemotron_h": (MCORE_BIAS_UPDATE_RATE, "src/megatron/bridge/models/nemotronh/nemotron_h_bridge.py:312"),
    "deepseek_v4": (MCORE_BIAS_UPDATE_RATE, "src/megatron/bridge/models/deepseek/deepseek_v4_bridge.py:491"),
}


def bias_update_source(model_type: str) -> Source:
    """Where the expert bias update rate of `model_type` comes from (BRIDGE_BIAS_UPDATE_RATE): its bridge's file, or
    megatron-core's TransformerConfig default for a type no bridge sets it for."""
    if model_type in BRIDGE_BIAS_UPDATE_RATE:
        return Source(key=f"bridge-{model_type}", repo="NVIDIA-NeMo/Megatron-Bridge",
                      path=BRIDGE_BIAS_UPDATE_RATE[model_type][1], commit=MEGATRON_BRIDGE_COMMIT)
    return Source(key="mcore-defaults", repo="pypi:megatron-core",
                  path="megatron/core/transformer/transformer_config.py:639", commit="0.16.1")
# The load-balancing loss Megatron-Bridge (067f987) trains each model type with from its config.json: the type's
# bridge (models/<family>/*_bridge.py: qwen3_moe aux_loss 1e-3, qwen3_next global_aux_loss 1e-3, deepseek_v3
# seq_aux_loss with aux_loss_alpha or 1e-4, kimi_k2 seq_aux_loss 1e-3, glm4_moe (glm45) seq_aux_loss 1e-3,
# nemotron_h seq_aux_loss 1e-4, gpt_oss none; DeepSeek-V4's performance recipe seq_aux_loss 1e-4; deepseek_v2
# seq_aux_loss with aux_loss_alpha; glm4_moe_lite (glm47_flash) seq_aux_loss 1e-3; qwen3_5_moe (qwen35)
# global_aux_loss with router_aux_loss_coef, its configuration class's default 1e-3), else
# AutoBridge's CONFIG_MAPPING (conversion/model_bridge.py): router_aux_loss_coef / aux_loss_alpha as the
# coefficient of megatron-core's default aux_loss. None: the coefficient the config states.
BALANCING = {"qwen3_moe": ("aux_loss", 1e-3), "qwen3_next": ("global_aux_loss", 1e-3),
             "deepseek_v3": ("seq_aux_loss", None), "kimi_k2": ("seq_aux_loss", 1e-3),
             "glm4_moe": ("seq_aux_loss", 1e-3), "nemotron_h": ("seq_aux_loss", 1e-4), "gpt_oss": ("none", 0.0),
             "deepseek_v4": ("seq_aux_loss", 1e-4), "deepseek_v2": ("seq_aux_loss", None),
             "glm4_moe_lite": ("seq_aux_loss", 1e-3), "qwen3_5_moe": ("global_aux_loss", None)}
DEFAULT_AUX_COEFF = {"deepseek_v3": 1e-4,  # DeepSeekV3Bridge: "The released V3 configs omit this" (aux_loss_alpha)
                     "qwen3_5_moe": 1e-3,  # Qwen3_5MoeTextConfig router_aux_loss_coef=0.001
                     # transformers 5.25.0 MixtralConfig / Qwen2MoeConfig router_aux_loss_coef=0.001 (was read as 0)
                     "mixtral": 1e-3, "qwen2_moe": 1e-3}
# DeepSeekV3Bridge / KimiK2Bridge / GLM47FlashBridge: moe_router_pre_softmax = True
PRE_SOFTMAX_TYPES = ("deepseek_v3", "kimi_k2", "glm4_moe_lite")
# Qwen MoE routers: softmax over every expert, top-k, then renormalised over the k only with norm_topk_prob
# (transformers 4.57.1 modeling_qwen3_moe.py). Without it the top-k keep their share of the full softmax: megatron-core's
# --moe-router-pre-softmax (moe_utils.topk_routing_with_score_function); with it, its default (softmax of the top-k).
# The key's default: transformers 4.57.1 configuration_<type>.py (False for qwen2_moe and qwen3_moe, True for qwen3_next).
# DeepSeek-V2's softmax router is the same (DeepseekV2Config norm_topk_prob False; DeepSeekV2Bridge pre-softmax);
# Qwen3.5 MoE's router always renormalises its top-k (Qwen3VLMoeTextTopKRouter; its config deletes norm_topk_prob).
# The sigmoid routers (DeepSeek-V3's, GLM's, Nemotron-H's) renormalise their top-k with norm_topk_prob; megatron-core
# always does, at every table release (topk_routing_with_score_function: scores / scores.sum for top_k > 1;
# hf_core_rules.CORE_RULES "sigmoid_renorm"): false is refused.
# Defaults: hf_router.py ROUTER_DEFAULTS (or NORM_TOPK_PROB_DEFAULT for the Qwen softmax routers).
NORM_TOPK_PROB_DEFAULT = {"qwen2_moe": False, "qwen3_moe": False, "qwen3_next": True}
NORM_TOPK_PROB_TYPES = ("deepseek_v2", "deepseek_v3", "kimi_k2", "glm4_moe", "glm4_moe_lite", "nemotron_h",
                        *NORM_TOPK_PROB_DEFAULT)


# attention_bias as the modeling code applies it: gpt-oss's every linear layer (Megatron --add-bias-linear), GLM-4.5's
# QKV (--add-qkv-bias); Qwen2's QKV bias is fixed by its model type. For the other types it puts a bias on Q, K, V and
# the output projection, which no Megatron-LM flag gives alone (--add-qkv-bias is QKV only, --add-bias-linear adds
# the MLP's too).
ATTENTION_BIAS_TYPES = ("gpt_oss", "glm4_moe", "qwen2", "qwen2_moe")
# Types whose modeling code builds Q, K, V and the output projection with bias=False whatever attention_bias says
# (transformers 5.25.0 modeling_mistral.py, modeling_mixtral.py, modeling_phi3.py): the key is read there as the
# model has it, none. Not Nemotron-H: the remote code its checkpoints ship (modeling_nemotron_h.py NemotronHAttention,
# as vLLM's nemotron_h.py) builds q/k/v/o_proj with bias=config.attention_bias, so true is refused below.
ATTENTION_BIAS_IGNORED_TYPES = ("mistral", "mixtral", "phi3")

# hidden_act values the gated-MLP model types use: SiLU gating (SwiGLU). Any other (gelu for GeGLU, say) would be
# planned and emitted as --swiglu: a different model; relu2 (squared ReLU) is Nemotron-H's ungated MLP
# (_nemotron_h_activations), not a gate of these types (it was refused naming commbench's glu field).
KNOWN_ACTIVATIONS = ("silu", "swish")


# RoPE kinds read: none / default (plain RoPE; Qwen3.5's interleaved multimodal RoPE is plain RoPE on text, whose three
# position sections are equal), Llama 3.1's frequency scaling, YaRN and linear interpolation (transformers
# modeling_rope_utils _compute_linear_scaling_rope_parameters: inv_freq / factor, the positions / factor megatron-core's
# RotaryEmbedding builds from --rotary-seq-len-interpolation-factor: rotary_pos_embedding.py `seq *= 1 /
# self.seq_len_interpolation_factor`; the flag is type=int, hf_core_rules.CORE_RULES "rotary_interpolation"). Any other
# (dynamic, longrope) would be planned and emitted as plain RoPE: another model.
ROPE_KINDS = ("none", "default", "llama3", "yarn", "linear")


# DeepSeek-V4's two RoPEs as DeepseekV4Config (transformers 5.25.0 configuration_deepseek_v4.py __post_init__) writes
# them, rope_parameters {"main": plain RoPE of rope_theta, on the sliding-window layers; "compress": the config's YaRN
# scaling at compress_rope_theta, on the compressed layers}: what the published config's rope_theta and rope_scaling
# (with compress_rope_theta) say, read as they are there: main's base, compress's scaling (neither config's compressed
# base is read)
SPLIT_ROPE_TYPES = {"deepseek_v4": ("main", "compress")}


def _split_rope(c, rope, nested: list[str]):
    """rope_parameters {main, compress} as the one table the published config's rope_theta + rope_scaling make."""
    parts = SPLIT_ROPE_TYPES[c.model_type]
    if sorted(nested) != sorted(parts):
        raise c.fail(f"rope_parameters with tables {', '.join(sorted(nested))} is not modelled for model_type "
                     f"{c.model_type!r}: {' and '.join(parts)} (DeepseekV4Config's two RoPEs)")
    main, compress = rope.table("main"), rope.table("compress")
    kind = main.get("rope_type", main.get("type", "default"))
    if kind != "default":
        raise c.fail(f"rope_parameters.main.rope_type={kind!r} is not modelled for model_type {c.model_type!r}: "
                     "'default' (plain RoPE on the sliding-window layers, as DeepseekV4Config writes it)")
    table = {key: value for key, value in compress.raw.items() if key != "rope_theta"}
    if main.get("rope_theta") is not None:
        theta = _checked_theta(main)
        if c.get("rope_theta") is not None and c.num("rope_theta", 0) != theta:
            raise c.fail(f"rope_parameters.main.rope_theta={main.get('rope_theta')!r} and rope_theta="
                         f"{c.get('rope_theta')!r} disagree: transformers 5.25.0 builds model_type {c.model_type!r} "
                         "from rope_parameters alone; give one of them, or make them agree")
        table["rope_theta"] = theta
    return type(c)(dict(table, model_type=c.model_type), c.where, "rope_parameters.compress.")


def rope_table(c):
    """rope_scaling, or the rope_parameters transformers >= 5 writes in its place (which also holds rope_theta and
    partial_rotary_factor); one set for every layer (a table per layer type is refused by name)."""
    if c.get("rope_parameters") is None:
        default = c.absent("rope_parameters", None)
        if c.get("rope_scaling") is None and default is not None:
            # neither given: the class's own RoPE (hf_defaults.py; GptOssConfig.__post_init__: YaRN x32 of 4096)
            return type(c)(dict(default, model_type=c.model_type), c.where, "rope_parameters.")
        return c.table("rope_scaling")
    rope = c.table("rope_parameters")
    nested = [key for key, value in rope.raw.items() if isinstance(value, dict)]
    if c.model_type in SPLIT_ROPE_TYPES and nested:
        return _split_rope(c, rope, nested)
    if nested:
        raise c.fail(f"rope_parameters.{nested[0]} is not modelled: one RoPE for every layer (rope_theta, rope_type "
                     "and their scaling keys in rope_parameters itself)")
    return rope


def _rope_theta(c) -> int:
    """RoPE's base: > 1 (at 1 every frequency is 1, and 0 divides by zero) and a whole number, as Megatron-LM's
    --rotary-base is (arguments.py type=int); 0.5 was truncated to 0 and emitted."""
    table = rope_table(c)
    return _checked_theta(table if table.get("rope_theta") is not None else c)


def _checked_theta(where) -> int:
    theta = where.num("rope_theta", 10000)
    if theta <= 1 or theta != int(theta):
        raise where.fail(f"{where.prefix}rope_theta={where.get('rope_theta')!r} is invalid: a whole number > 1 (RoPE's "
                         "base; Megatron-LM's --rotary-base is an integer)")
    return int(theta)


def _linear_rope(c, scaling, out: dict[str, Any]) -> None:
    """Linear RoPE interpolation by a whole factor >= 2 on non-MLA attention: what Megatron-LM's
    --rotary-seq-len-interpolation-factor (type=int) builds; 1 is plain RoPE."""
    if scaling.get("factor") is None:   # transformers _compute_linear_scaling_rope_parameters reads ["factor"]
        raise scaling.fail(f"lacks {scaling.prefix}'factor' (needed for rope_type 'linear': a whole number >= 1)")
    factor = scaling.num("factor", 1.0)
    if factor < 1 or factor != int(factor):
        raise scaling.fail(f"{scaling.prefix}factor={scaling.get('factor')!r} is not modelled for rope_type 'linear': "
                           "a whole number >= 1 (Megatron-LM's --rotary-seq-len-interpolation-factor is an integer: "
                           f"{core_line('rotary_interpolation', c.release)}, {core_name(c.release)})")
    if c.model_type in MLA_TYPES + ("deepseek_v4",):
        raise scaling.fail(f"{scaling.prefix}type='linear' is not modelled for model_type {c.model_type!r}: linear "
                           "interpolation is read for non-MLA attention (rope_type 'yarn' is MLA's scaling)")
    if factor > 1:
        out.update(rope_scaling="linear", rope_scaling_factor=float(factor))


def _rope(c, out: dict[str, Any]) -> None:
    scaling = rope_table(c)
    kind = scaling.get("rope_type", scaling.get("type", "none"))
    if kind not in ROPE_KINDS:
        key = "rope_type" if scaling.get("rope_type") is not None else "type"
        raise c.fail(f"{scaling.prefix}{key}={kind!r} is not modelled: one of {', '.join(ROPE_KINDS[1:])}")
    if kind in ("llama3", "yarn"):
        if scaling.get("factor") is None:   # transformers modeling_rope_utils _compute_{llama3,yarn}_parameters read
            # rope_parameters["factor"] (a KeyError without it); it was planned as 1.0 (no scaling) without a word
            raise scaling.fail(f"lacks {scaling.prefix}'factor' (needed for rope_type {kind!r}: a number >= 1)")
        factor = scaling.num("factor", 1.0)
        if factor < 1:   # transformers modeling_rope_utils _validate_llama3/yarn_parameters: "a float >= 1"
            raise scaling.fail(f"{scaling.prefix}factor={scaling.get('factor')!r} is invalid: >= 1 (a {kind} RoPE "
                               "scaling stretches the context)")
        out.update(rope_scaling=kind, rope_scaling_factor=factor)
    if kind == "linear":
        _linear_rope(c, scaling, out)
    if kind == "llama3":   # the frameworks build fixed bands: search/frameworks.py llama3_rope_refusal
        out.update(llama3_low_freq_factor=scaling.num("low_freq_factor", 1.0),
                   llama3_high_freq_factor=scaling.num("high_freq_factor", 4.0),
                   llama3_original_positions=scaling.int("original_max_position_embeddings", 8192))
    if kind == "yarn":
        out.update(rope_original_max_positions=scaling.int("original_max_position_embeddings", 0),
                   yarn_beta_fast=scaling.num("beta_fast", 32.0), yarn_beta_slow=scaling.num("beta_slow", 1.0),
                   yarn_mscale=scaling.num("mscale", 0.0), yarn_mscale_all_dim=scaling.num("mscale_all_dim", 0.0),
                   # transformers modeling_rope_utils _compute_yarn_parameters: truncate = rope_parameters.get(
                   # "truncate", True) (gpt-oss's config: false)
                   yarn_truncate=scaling.flag("truncate", True))


def _router(c, fields: dict[str, Any], out: dict[str, Any]) -> None:
    """The router fields; a key config.json leaves out is its model type's class default (hf_router.py)."""
    t, top_k = c.model_type, fields.get("top_k", 0)
    score, method = router_value(c, "scoring_func"), router_value(c, "topk_method")
    groups, group_topk = router_value(c, "n_group"), router_value(c, "topk_group")
    out.update(router_score=score, router_topk_scaling=router_value(c, "routed_scaling_factor"),
               router_expert_bias=method == "noaux_tc" or t in EXPERT_BIAS_TYPES)
    if out["router_expert_bias"] and score == "softmax":
        # TransformerConfig.__post_init__ at every table release (hf_core_rules.CORE_RULES "expert_bias"): "Expert bias
        # for aux-loss-free routing only supports sigmoid score function" (ERNIE-4.5's router is refused so:
        # hf_refused.py)
        raise c.fail(f"scoring_func='softmax' with topk_method={method!r} is not modelled for model_type {t!r}: its "
                     f"router adds a correction bias (e_score_correction_bias) to softmax scores, and "
                     f"{core_name(c.release)} takes an expert bias with {expert_bias_scores(c.release)} scores only "
                     f"({core_line('expert_bias', c.release)}); scoring_func 'sigmoid', or topk_method 'greedy' (no "
                     "bias), is read")
    if out["router_expert_bias"]:
        out["router_bias_update_rate"] = BRIDGE_BIAS_UPDATE_RATE.get(t, (MCORE_BIAS_UPDATE_RATE,))[0]
    norm = True
    if t in NORM_TOPK_PROB_DEFAULT:
        norm = c.flag("norm_topk_prob", NORM_TOPK_PROB_DEFAULT[t])
    elif t in NORM_TOPK_PROB_TYPES:
        norm = router_value(c, "norm_topk_prob")
    if score != "softmax" and not norm and top_k > 1:
        raise c.fail(f"norm_topk_prob=false is not modelled with scoring_func {score!r}: {core_name(c.release)} "
                     "renormalises the top-k scores of a sigmoid router (topk_routing_with_score_function, "
                     f"{core_line('sigmoid_renorm', c.release)})")
    out["router_pre_softmax"] = t in PRE_SOFTMAX_TYPES or (score == "softmax" and not norm)
    kind, coeff = BALANCING.get(t, ("aux_loss", None))
    if t == "deepseek_v2" and c.get("aux_loss_alpha") is None and c.get("router_aux_loss_coef") is None:
        raise c.fail("lacks 'aux_loss_alpha' (needed for model_type 'deepseek_v2': the seq_aux_loss coefficient "
                     "Megatron-Bridge's DeepSeekV2Bridge trains with; DeepseekV2Config has no default for it)")
    stated = c.num("router_aux_loss_coef", c.num("aux_loss_alpha", DEFAULT_AUX_COEFF.get(t, 0.0)))
    out.update(load_balancing=kind, aux_loss_coeff=float(stated if coeff is None else coeff))
    if groups > 1:
        check_router_groups(c, groups, group_topk, fields.get("num_routed_experts", 0))
        if 0 < group_topk <= groups and top_k // group_topk != HF_GROUP_TOP and score != "softmax":
            raise c.fail(f"n_group={groups} with topk_group={group_topk} is not modelled for num_experts_per_tok="
                         f"{top_k}: transformers ranks expert groups by their top-{HF_GROUP_TOP} scores, "
                         f"{core_name(c.release)} by their top (num_experts_per_tok / topk_group = "
                         f"{top_k // group_topk}; group_limited_topk, {core_line('group_scores', c.release)})")
        out.update(router_groups=groups, router_group_topk=group_topk)


# Nemotron-H's MLP and expert activation: NemotronHConfig mlp_hidden_act (default "relu2"; NemotronHMLP
# ACT2FN[config.mlp_hidden_act], up + down projections, no gate) is read only as squared ReLU, what Megatron-LM's
# --squared-relu builds (Megatron-Bridge's NemotronHBridge sets activation_func = squared_relu whatever the config
# says); "silu" there was planned as an ungated GELU (Megatron's default activation). Its Mamba activation,
# mamba_hidden_act (default "silu"), is SiLU in megatron-core whatever is asked (ssm/mamba_mixer.py MambaMixer:
# self.activation = "silu"); "swish" is SiLU in transformers' ACT2FN too.
NEMOTRON_H_MLP_ACT, NEMOTRON_H_MAMBA_ACTS = "relu2", ("silu", "swish")


def _nemotron_h_activations(c) -> None:
    key = "mlp_hidden_act" if c.get("mlp_hidden_act") is not None else "hidden_act"
    act = c.get(key, NEMOTRON_H_MLP_ACT)
    if act != NEMOTRON_H_MLP_ACT:
        raise c.fail(f"{key}={act!r} is not modelled for model_type 'nemotron_h': 'relu2' (the squared-ReLU MLP "
                     "Megatron-LM's --squared-relu builds, as Megatron-Bridge's NemotronHBridge trains every Nemotron-H)")
    mamba = c.get("mamba_hidden_act", "silu")
    if mamba not in NEMOTRON_H_MAMBA_ACTS:
        raise c.fail(f"mamba_hidden_act={mamba!r} is not modelled for model_type 'nemotron_h': 'silu' "
                     f"({core_name(c.release)}'s MambaMixer applies SiLU whatever the config says: "
                     f"{core_line('mamba_silu', c.release)})")


# Dropout as each type's modeling code applies it in training (transformers 5.23.0): attention_dropout on the attention
# probabilities for every type read (<Type>Attention passes dropout=self.attention_dropout when training); Phi-3's
# resid_pdrop on the attention and MLP outputs before each residual add (Phi3DecoderLayer resid_attn_dropout /
# resid_mlp_dropout), Megatron's hidden dropout (its embd_pdrop is never applied). Megatron-Bridge's CONFIG_MAPPING
# carries attention_dropout and hidden_dropout to megatron-core's fields of those names the same way.
HIDDEN_DROPOUT_KEYS = {"phi3": "resid_pdrop"}


def _probability(c, key: str) -> float:
    value = c.num(key, 0.0)
    if not 0 <= value < 1:
        raise c.fail(f"{key}={c.get(key)!r} is invalid: a dropout probability, 0 <= {key} < 1")
    return value


def _dropout(c) -> dict[str, float]:
    """The dropout the config trains with (HIDDEN_DROPOUT_KEYS); Mixtral's router jitter, which neither framework
    builds as transformers does, is refused by name."""
    if c.model_type == "mixtral" and _probability(c, "router_jitter_noise") > 0:
        raise c.fail(f"router_jitter_noise={c.get('router_jitter_noise')!r} is not modelled for model_type 'mixtral': "
                     "transformers' MixtralSparseMoeBlock scales the MoE block's input, the experts' as well as the "
                     f"router's, by U(1 - eps, 1 + eps) in training, {core_name(c.release)}'s --moe-input-jitter-eps "
                     "the router's input alone (TopKRouter.forward: apply_input_jitter before gating, "
                     f"{core_line('input_jitter', c.release)}), and "
                     "TorchTitan 0.3.0 has no jitter; 0 (the released Mixtral configs') is read")
    hidden = HIDDEN_DROPOUT_KEYS.get(c.model_type)
    return {"attention_dropout": _probability(c, "attention_dropout"),
            "hidden_dropout": _probability(c, hidden) if hidden else 0.0}


def _norm_epsilon(c) -> float:
    """The norms' epsilon. Nemotron-H builds every norm from layer_norm_epsilon (transformers 5.23.0
    modeling_nemotron_h.py: NemotronHBlock.norm, norm_f, the Mamba gated norm, eps=config.layer_norm_epsilon), so that
    key alone is read there (an rms_norm_eps beside it was emitted in its place); the other types read rms_norm_eps."""
    if c.model_type == "nemotron_h":
        return c.num("layer_norm_epsilon", 1e-5)   # left out: NemotronHConfig's 1e-5 (hf_defaults.py)
    return c.num("rms_norm_eps", c.num("layer_norm_epsilon", c.num("norm_eps", 1e-6)))


def architecture_from_hf(c, fields: dict[str, Any], path: Path) -> Architecture:
    """Architecture of config `c` (hf_config._Config) for the ModelSpec `fields` read from it."""
    t = c.model_type
    if t == "nemotron_h":
        _nemotron_h_activations(c)
    act = c.get("mlp_hidden_act", c.get("hidden_act", NEMOTRON_H_MLP_ACT if t == "nemotron_h" else "silu"))
    # gpt-oss's clamped GLU is its modeling code's, whatever the key; Nemotron-H's checked above
    if act not in KNOWN_ACTIVATIONS and t not in ("gpt_oss", "nemotron_h"):
        key = "mlp_hidden_act" if c.get("mlp_hidden_act") is not None else "hidden_act"
        raise c.fail(f"{key}={act!r} is not modelled for model_type {t!r}: one of {', '.join(KNOWN_ACTIVATIONS)} "
                     "(the gate of its SwiGLU MLP)")
    if c.flag("attention_bias", False) and t not in ATTENTION_BIAS_TYPES + ATTENTION_BIAS_IGNORED_TYPES:
        raise c.fail(f"attention_bias=true is not modelled for model_type {t!r}: biases on Q, K, V and the output "
                     "projection have no Megatron-LM flag (--add-qkv-bias is QKV only, --add-bias-linear adds the "
                     "MLP's)")
    if t == "llama" and c.flag("mlp_bias", False):  # LlamaMLP: gate/up/down_proj bias=config.mlp_bias
        raise c.fail("mlp_bias=true is not modelled for model_type 'llama': biases on the MLP's gate, up and down "
                     "projections alone have no Megatron-LM flag (--add-bias-linear adds the attention's too)")
    out: dict[str, Any] = {
        "activation": "squared_relu" if act == "relu2" else "quick_geglu" if t == "gpt_oss" else
        "swiglu" if fields.get("glu", True) else "gelu",
        "norm_epsilon": _norm_epsilon(c),
        "qk_norm": t in QK_NORM_TYPES or (t == "glm4_moe" and c.flag("use_qk_norm", False)),
        "linear_bias": c.flag("attention_bias", False) and t == "gpt_oss",
        "qkv_bias": t == "qwen2" or (t == "qwen2_moe" and c.flag("qkv_bias", True))
        or (t == "glm4_moe" and c.flag("attention_bias", False)),
        "position_embedding": "none" if t == "nemotron_h" else "rope",
        "rotary_base": _rope_theta(c),
        "rotary_percent": rope_table(c).num("partial_rotary_factor", c.num("partial_rotary_factor", 1.0)),
        "max_position_embeddings": c.int("max_position_embeddings", fields["seq_len"]),
        **_dropout(c),
    }
    _rope(c, out)
    if out.get("rope_scaling") == "yarn" and fields.get("attention", "gqa") == "gqa":
        out["position_embedding"] = "yarn"  # Megatron's YaRN embedding; MLA applies YaRN itself (rope)
    if t == "gpt_oss":
        out.update(glu_linear_offset=1.0, activation_clamp=c.num("swiglu_limit", 7.0), softmax_type="learnable")
    if t == "deepseek_v4":  # the modeling code's per-head sinks and clamped SwiGLU; HF's partial_rotary_factor
        # is relative to head_dim, the rope split already is qk_rope_head_dim (Megatron-Bridge sets rotary_percent 1)
        out.update(softmax_type="learnable", activation_clamp=c.num("swiglu_limit", 0.0), rotary_percent=1.0,
                   yarn_mscale=1.0, yarn_mscale_all_dim=1.0)  # no mscale in the config: the bridge sets both to 1
    if t in QWEN_NEXT_TYPES:  # Qwen3NextRMSNorm scales by (1 + w); Qwen3NextSparseMoeBlock gates its shared expert
        out.update(norm_zero_centered_gamma=True, shared_expert_gate=bool(fields.get("num_shared_experts")))
    if t == "qwen2_moe":  # Qwen2MoeSparseMoeBlock: sigmoid(shared_expert_gate(x)) * shared expert (transformers 4.57.1)
        out.update(shared_expert_gate=bool(fields.get("num_shared_experts")))
    if fields.get("sliding_window"):
        out.update(sliding_window=int(fields["sliding_window"]), window_skip_freq=2)
    if fields.get("num_routed_experts"):
        _router(c, fields, out)
    source = Source(key="hf-config", repo="huggingface config.json", path=str(path), commit="local file")
    try:
        sources = {name: source for name in ARCH_FIELDS}
        if out.get("router_expert_bias"):   # a training setting the config has not: the bridge's
            sources["router_bias_update_rate"] = bias_update_source(t)
        return Architecture(**out, sources=sources)
    except CommbenchError as exc:   # named by --model and by the config.json key it was read from (hf_fields.py)
        raise c.fail(config_refusal(c, rope_table(c), str(exc))) from None
