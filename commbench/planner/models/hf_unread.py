"""config.json keys the reader of a model_type never looked at: refused unless known to leave the network as planned.

A key no reader consumes was ignored: Arctic's `parallel_attn_mlp_res` (a dense residual MLP beside every MoE one)
or MiniMax's `rotary_dim` / `attn_type_list` (lightning attention) on a config labelled mixtral were planned as
Mixtral without a word (outside probe P1). hf_refused.ARCHITECTURE_KEYS names the keys of known architectures; this
closes the rest of the gap: load_hf_model reads config.json through ReadKeys, which records every top-level key the
reader, its checks and the architecture fields looked up, and a key left unread is refused in one line unless
INERT_KEYS says why it changes nothing the plan charges or launches (at any value, or at the values listed).

INERT_KEYS holds PretrainedConfig's own keys (transformers configuration_utils.py PretrainedConfig.__init__: token
ids, generation and output switches, labels, dtype, versions), inference and initialisation settings, and the keys of
the published configs under tests/data/hf and tests/data/hf-resaved that their readers leave unread, each with why.
"""

from __future__ import annotations

from typing import Any

from commbench.planner.models.hf_router import SOFTMAX_TYPES

ANY = None  # inert at every value


class ReadKeys(dict):
    """A config.json object that records the keys looked up (get, [], in)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.looked_up: set[str] = set()

    def get(self, key: Any, default: Any = None) -> Any:
        self.looked_up.add(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.looked_up.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: Any) -> bool:
        self.looked_up.add(key)
        return super().__contains__(key)


_GENERIC = "PretrainedConfig's own (transformers configuration_utils.py): it does not shape the network"
_INFERENCE = "an inference or kernel setting: the network trained is the same"
_INIT = "an initialisation setting: the network trained is the same shape and cost"
_WHEN_MOE = "an MoE key, read where the pattern has an MoE layer (this config has none)"
_WHEN_DENSE = "the dense MLP's width, read where a layer has a dense MLP (this config has none)"
_WHEN_WINDOW = "read where use_sliding_window turns the window on (it is off here)"
_MLA = ("deepseek_v2", "deepseek_v3", "kimi_k2", "glm4_moe_lite")
_QWEN_WINDOW = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe")
# key -> (the values it is inert at, ANY for every value; why; the model types it is inert for, () for every type)
INERT_KEYS: dict[str, tuple[tuple[Any, ...] | None, str, tuple[str, ...]]] = {
    **{key: (ANY, _GENERIC, ()) for key in (
        "_name_or_path", "_commit_hash", "_attn_implementation", "transformers_version", "architectures",
        "model_type", "auto_map", "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id",
        "decoder_start_token_id", "forced_bos_token_id", "forced_eos_token_id", "torch_dtype", "dtype",
        "use_bfloat16", "return_dict", "output_hidden_states", "output_attentions", "torchscript", "pruned_heads",
        "tf_legacy_loss", "finetuning_task", "id2label", "label2id", "num_labels", "task_specific_params",
        "problem_type", "tokenizer_class", "prefix", "max_length", "min_length", "do_sample", "early_stopping",
        "num_beams", "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p", "typical_p",
        "repetition_penalty", "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size",
        "bad_words_ids", "num_return_sequences", "output_scores", "return_dict_in_generate",
        "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
        "chunk_size_feed_forward", "is_decoder", "is_encoder_decoder", "add_cross_attention",
        "cross_attention_hidden_size", "tie_encoder_decoder")},
    "quantization_config": (ANY, "the checkpoint's format, read apart: the plan says how it meets the precision", ()),
    **{key: (ANY, _INFERENCE, ()) for key in (
        "use_cache", "output_router_logits", "num_logits_to_keep", "use_mamba_kernels", "mamba_ssm_cache_dtype",
        "moe_shared_expert_overlap", "ep_size", "chunk_size")},
    **{key: (ANY, _INIT, ()) for key in (
        "initializer_range", "rescale_prenorm_residual", "time_step_min", "time_step_max", "time_step_floor",
        "time_step_limit")},
    **{key: (ANY, _WHEN_MOE, ("nemotron_h",)) for key in (
        "moe_intermediate_size", "moe_latent_size", "moe_shared_expert_intermediate_size", "n_routed_experts",
        "n_group", "topk_group", "num_experts_per_tok", "routed_scaling_factor")},
    "norm_topk_prob": ((True, None), "true: the top-k renormalised, as megatron-core's sigmoid-family routers "
                                     "always do (hf_arch.py)", ("nemotron_h", "deepseek_v4")),
    "intermediate_size": (ANY, _WHEN_DENSE, ("nemotron_h", "qwen2_moe", "qwen3_moe", "qwen3_next", "qwen3_5_moe")),
    "sliding_window": (ANY, _WHEN_WINDOW, _QWEN_WINDOW),
    "max_window_layers": (ANY, _WHEN_WINDOW, _QWEN_WINDOW),
    # keys the modeling code of these types reads as the reader plans, or not at all
    "pretraining_tp": (ANY, "Llama's sliced-matmul numerics in its remote-code era: the same network", ()),
    "rope_interleave": (ANY, "the order of MLA's rotated pairs: the same network and cost", _MLA),
    "qk_head_dim": (ANY, "derived: qk_nope_head_dim + qk_rope_head_dim, which are read", _MLA),
    "seq_aux": (ANY, "the balancing loss is the one Megatron-Bridge trains the type with (hf_arch.BALANCING)", _MLA),
    "experts_per_token": (ANY, "gpt-oss's release copy of num_experts_per_tok, which is read", ("gpt_oss",)),
    "initial_context_length": (ANY, "gpt-oss's release copy of rope_scaling.original_max_position_embeddings, "
                                    "which is read", ("gpt_oss",)),
    "swiglu_alpha": ((1.702,), "gpt-oss's GLU slope, 1.702 in its modeling code", ("gpt_oss",)),
    "embd_pdrop": (ANY, "Phi-3's embedding dropout, which its modeling code never applies (hf_arch.py)", ("phi3",)),
    "original_max_position_embeddings": (ANY, "Phi-3's LongRoPE base context, read with rope_scaling (none here)",
                                         ("phi3",)),
    "norm_eps": (ANY, "Nemotron-H builds every norm from layer_norm_epsilon, which is read (hf_arch._norm_epsilon)",
                 ("nemotron_h",)),
    "rms_norm_eps": (ANY, "Nemotron-H builds every norm from layer_norm_epsilon, which is read", ("nemotron_h",)),
    "n_shared_experts": (ANY, "Nemotron-H's shared expert is one of moe_shared_expert_intermediate_size, which is "
                              "read", ("nemotron_h",)),
    "expand": (ANY, "Nemotron-H's Mamba width is mamba_num_heads x mamba_head_dim, which are read", ("nemotron_h",)),
    "mamba_proj_bias": (ANY, "read by neither transformers' nor the checkpoints' Mamba mixer (both take use_bias) "
                             "nor Megatron-Bridge", ("nemotron_h",)),
    "hidden_dropout": ((0, 0.0, None), "0: no dropout, as the reader plans", ("nemotron_h",)),
    "compress_rope_theta": (ANY, "DeepSeek-V4's compressed layers' RoPE base: the same cost (hf_arch.py)",
                            ("deepseek_v4",)),
    "hc_eps": (ANY, "DeepSeek-V4's hyper-connection numerics: the same cost", ("deepseek_v4",)),
    "hc_sinkhorn_iters": (ANY, "DeepSeek-V4's hyper-connection numerics: the same cost", ("deepseek_v4",)),
    "attention_head_dim": (ANY, "read by no class of the types here but Nemotron-H's, whose reader reads it "
                                "(transformers 5.25.0: zamba, zamba2, hunyuan_vl, edgetam_video; hf_config.py)", ()),
    "router_jitter_noise": ((0, 0.0, None), "0: no router jitter, as the reader plans", ()),
    "mlp_bias": ((False, None), "false: no MLP bias, as the reader plans", ()),
    "qkv_bias": ((False, None), "false: no QKV bias, as the reader plans", ()),
    "use_mrope": ((False, None), "false: plain RoPE, as the reader plans", ()),
    "use_qk_norm": ((True, None), "true: Qwen3-MoE's attention always normalises q and k", ("qwen3_moe",)),
    "mtp_use_dedicated_embeddings": ((False, None), "false: the MTP layer shares the model's embedding, as "
                                     "megatron-core's MTP block does", ("qwen3_next", "qwen3_5_moe", "qwen3_5")),
    "attn_output_gate": ((True, None), "true: Qwen3-Next's and Qwen3.5's attention always gates its output",
                         ("qwen3_next", "qwen3_5_moe", "qwen3_5")),
}

# transformers' code of the softmax-router types reads no router key (hf_router.SOFTMAX_TYPES): stray ones leave the
# model as it is (tests/test_hf_router_defaults.py); kept apart from INERT_KEYS, which holds some of these keys for
# Nemotron-H
SOFTMAX_ROUTER_KEYS = {key: (ANY, "the router of this type is a softmax one whatever the key says (its transformers "
                                  "modeling code reads no such key: hf_router.py)", SOFTMAX_TYPES)
                       for key in ("scoring_func", "topk_method", "n_group", "topk_group", "routed_scaling_factor")}


def _inert(key: str, value: Any, model_type: str) -> bool:
    entry = SOFTMAX_ROUTER_KEYS.get(key) if model_type in SOFTMAX_TYPES else None
    values, _, types = entry or INERT_KEYS.get(key, ((), "", ()))
    if types and model_type not in types:
        return False
    if values is ANY:
        return True
    return any(value is v or (not isinstance(value, bool) and v is not None and not isinstance(v, bool)
                              and value == v) for v in values)


def unread_key_refusal(raw: ReadKeys, model_type: str) -> str | None:
    """What to say of the first top-level key of config.json its reader never looked up that is not inert. A key set
    to null is absent (transformers' configs write `"rope_scaling": null` beside `rope_parameters`)."""
    for key, value in raw.items():
        if value is not None and key not in raw.looked_up and not _inert(key, value, model_type):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            return (f"{key}={shown} is not read for model_type {model_type!r}: the planner does not know what it "
                    "changes in the network, so planning without it could plan another model; if it changes nothing in "
                    "training, plan from a copy of config.json without it (hf_unread.INERT_KEYS lists the keys known "
                    "to change nothing)")
    return None
