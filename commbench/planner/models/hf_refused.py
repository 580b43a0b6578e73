"""Hugging Face model types people train that `--model hf:PATH` refuses, each with what the planner would have to
approximate: a layer the step model has no term for, or an architecture the plan's release's Megatron-LM (the
flags the plan launches; not_modelled names its megatron-core and the file:line, hf_core_rules.py) cannot
build; Megatron-Bridge (067f987, src/megatron/bridge/models/) and TorchTitan 0.3.0 are what else builds them.
Facts from the transformers modeling code of each type and the Megatron-Bridge bridges named."""

from __future__ import annotations

from typing import Any

from commbench.planner.models.hf_task import CAUSAL_LM_HEADS

_FULL_WIDTH_QK_NORM = ("its q/k RMSNorm spans all heads' width where {{core}}'s --qk-layernorm normalises each head "
                       "({{qk_norm_line}}; Megatron-Bridge builds it with its own layer spec, {spec})")
_MUP = ("its embedding, residual, attention and logit multipliers (embedding_multiplier, residual_multiplier, "
        "attention_multiplier, logits_scaling) have no Megatron-LM flag, and neither Megatron-Bridge nor TorchTitan "
        "builds the type")
NOT_MODELLED = {
    "olmoe": _FULL_WIDTH_QK_NORM.format(spec="olmoe_provider.py OLMoESelfAttention"),
    "minimax_m2": _FULL_WIDTH_QK_NORM.format(spec="minimax_m2_provider.py FullDimQNorm/FullDimKNorm"),
    "ernie4_5_moe": "its router picks experts by softmax scores plus a correction bias (moe_statics), and "
                    "{core} takes an expert bias with {bias_scores} scores only ({expert_bias_line}; Megatron-Bridge's "
                    "ernie_45_bridge.py trains a sigmoid router in its place, another model)",
    "phimoe": "its SparseMixer top-2 routing (router_jitter_noise) and biased LayerNorms are built by neither "
              "megatron-core nor TorchTitan, and Megatron-Bridge has no bridge for it",
    "granitemoe": _MUP, "granitemoeshared": _MUP,
    "granitemoehybrid": _MUP + "; its Mamba-2 + attention layer mix is read only from Nemotron-H's hybrid pattern",
    "jamba": "its Mamba-1 layers (selective scan with a dt_rank projection) have no step-model term: the planner "
             "prices Mamba-2 layers (Nemotron-H), which megatron-core's MambaStack builds",
    "falcon_h1": "each layer runs attention and Mamba-2 side by side (a parallel hybrid, with muP multipliers): the "
                 "step model has layers of one kind each (Nemotron-H's pattern)",
    "dbrx": "its clamped QKV activations (attn_config.clip_qkv) and bias-free LayerNorm have no Megatron-LM flag, and "
            "neither Megatron-Bridge nor TorchTitan builds the type",
    "llama4": "its chunked local attention on 3 of 4 layers (attention_chunk_size) with position-free (NoPE) global "
              "layers has no step-model term, and Megatron-Bridge has no Llama 4 bridge",
    "gemma2": "its GeGLU (gelu_pytorch_tanh), attention and logit soft-capping and post-attention/post-MLP norms have "
              "no Megatron-LM flag (Megatron-Bridge builds Gemma 2 with its own layer spec)",
    "gemma3": "its sliding window on 5 of every 6 layers (with its own RoPE base) is priced by no step-model term (a "
              "window on alternate layers is), and its GeGLU and sandwich norms have no Megatron-LM flag",
    "deepseek_v32": "its DeepSeek Sparse Attention (a lightning indexer choosing index_topk keys per query) has no "
                    "step-model term for MLA layers (DeepSeek-V4's indexer is priced within its own attention)",
    "glm_moe_dsa": "its DeepSeek Sparse Attention (a lightning indexer choosing index_topk keys per query) has no "
                   "step-model term for MLA layers",
    "kimi_linear": "its Kimi Delta Attention layers have no step-model term (Qwen3-Next's Gated DeltaNet is a "
                   "different layer)",
}
# Qwen3-VL: its text_config reads as a Qwen3 (MoE) decoder, but the model trained is the vision-language one
# (transformers modeling_qwen3_vl.py: Qwen3VLVisionModel's deepstack_merger_list adds visual features to the
# decoder's hidden states at deepstack_visual_indexes), so it is refused rather than planned as its text decoder
_QWEN3_VL = ("a vision-language model: its text_config's decoder alone is not the model trained (its vision "
             "encoder and the DeepStack mergers adding visual features to early decoder layers have no step-model "
             "term), so it is not planned as a text model")
NOT_MODELLED.update({"qwen3_vl": _QWEN3_VL, "qwen3_vl_text": _QWEN3_VL, "qwen3_vl_moe": _QWEN3_VL,
                     "qwen3_vl_moe_text": _QWEN3_VL})
NOT_MODELLED.update({"llama4_text": NOT_MODELLED["llama4"], "gemma3_text": NOT_MODELLED["gemma3"]})


def not_modelled(model_type: str, release: str | None) -> str:
    """NOT_MODELLED[model_type] with the megatron-core of the plan's release (`release`: --software; None, the newest
    table release) and the file:line of its rule where the reason names one (hf_core_rules.py)."""
    from commbench.planner.models.hf_core_rules import core_line, core_name, expert_bias_scores
    why = NOT_MODELLED[model_type]
    if "{core}" not in why:
        return why
    return why.format(core=core_name(release), bias_scores=expert_bias_scores(release),
                      expert_bias_line=core_line("expert_bias", release),
                      qk_norm_line=core_line("qk_norm_per_head", release))


def _squashed(name: str) -> str:
    return name.replace("_", "").lower()


def refused_class(architectures: Any) -> tuple[str, str] | None:
    """(class, model type) where config.json's `architectures` names the causal-LM class of a refused model type,
    whatever its model_type says. transformers names a type's classes after it (DeepseekV32ForCausalLM for
    deepseek_v32, GlmMoeDsaForCausalLM for glm_moe_dsa, Ernie4_5_MoeForCausalLM for ernie4_5_moe): the class name less
    its head, without underscores and case, is the type's. DeepSeek-V3.2 checkpoints are shipped (sglang and miles
    setups) with architectures DeepseekV32ForCausalLM and model_type deepseek_v3, so that transformers loads them,
    and transformers then builds plain DeepSeek-V3 without the indexer: the class says which model is trained."""
    if not isinstance(architectures, list):
        return None
    types = {_squashed(t): t for t in NOT_MODELLED}
    for name in architectures:
        if not isinstance(name, str):
            continue
        for head in CAUSAL_LM_HEADS:
            if name.endswith(head) and _squashed(name[:-len(head)]) in types:
                return name, types[_squashed(name[:-len(head)])]
    return None


_DSA = ("configures the lightning indexer of DeepSeek Sparse Attention (DeepSeek-V3.2's, model_type deepseek_v32, "
        "refused): " + NOT_MODELLED["deepseek_v32"])
_MUP_KEY = "is a muP multiplier (Granite's): " + _MUP
# Keys that change the network of the model types that read them and that no reader here consumes (beyond the type
# named in `read_by`): set on a config of another type, they say the checkpoint is that other architecture (a
# DeepSeek-V3.2 config written as deepseek_v3 keeps its index_* keys), so planning the reader's model would plan
# another one. key -> (values that leave the network as the reader builds it, why, the types that read the key).
# Keys that do not change the network (torch_dtype, quantization_config, bos_token_id, use_cache, ...) are not listed;
# any other key no reader looks up is refused after reading (hf_unread.py), unless hf_unread.INERT_KEYS says why not.
# Sources: transformers configuration_deepseek_v32.py (index_topk / index_n_heads / index_head_dim),
# configuration_llama4.py (attention_chunk_size), configuration_gemma2.py (attn_logit_softcapping,
# final_logit_softcapping), configuration_olmoe.py (clip_qkv), configuration_granitemoe.py (the multipliers).
ARCHITECTURE_KEYS: dict[str, tuple[tuple[Any, ...], str, tuple[str, ...]]] = {
    "index_topk": ((None,), _DSA, ("deepseek_v4",)),
    "index_n_heads": ((None,), _DSA, ("deepseek_v4",)),
    "index_head_dim": ((None,), _DSA, ("deepseek_v4",)),
    "attention_chunk_size": ((None,), "configures chunked local attention (Llama 4's), which has no step-model term",
                             ()),
    "attn_logit_softcapping": ((None,), "soft-caps the attention logits (Gemma 2's), which no Megatron-LM flag does",
                               ()),
    "final_logit_softcapping": ((None,), "soft-caps the output logits (Gemma 2's), which no Megatron-LM flag does",
                                ()),
    "clip_qkv": ((None,), "clamps the Q, K and V activations (OLMoE's, DBRX's), which no Megatron-LM flag does", ()),
    **{key: ((None, 1, 1.0), _MUP_KEY, ()) for key in ("embedding_multiplier", "residual_multiplier",
                                                        "attention_multiplier", "logits_scaling")},
}


def architecture_key_refusal(raw: dict[str, Any], model_type: str) -> str | None:
    """What to say of the first ARCHITECTURE_KEYS key config.json sets that `model_type`'s reader does not read."""
    for key, (inert, why, read_by) in ARCHITECTURE_KEYS.items():
        value = raw.get(key)
        if key in raw and model_type not in read_by and not any(value is v or (
                not isinstance(value, bool) and v is not None and value == v) for v in inert):
            return f"{key}={value!r} is not modelled for model_type {model_type!r}: it {why}"
    return None
