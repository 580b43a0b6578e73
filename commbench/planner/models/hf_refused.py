"""Hugging Face model types people train that `--model hf:PATH` refuses, each with what the planner would have to
approximate: a layer the step model has no term for, or an architecture Megatron-LM core_v0.16.1 (the flags
the plan launches) cannot build; Megatron-Bridge (067f987, src/megatron/bridge/models/) and TorchTitan 0.3.0
are what else builds them. Facts from the transformers modeling code of each type and the Megatron-Bridge
bridges named."""

from __future__ import annotations

_FULL_WIDTH_QK_NORM = ("its q/k RMSNorm spans all heads' width where Megatron-LM core_v0.16.1's --qk-layernorm "
                       "normalises each head (Megatron-Bridge builds it with its own layer spec, {spec})")
_MUP = ("its embedding, residual, attention and logit multipliers (embedding_multiplier, residual_multiplier, "
        "attention_multiplier, logits_scaling) have no Megatron-LM flag, and neither Megatron-Bridge nor TorchTitan "
        "builds the type")
NOT_MODELLED = {
    "olmoe": _FULL_WIDTH_QK_NORM.format(spec="olmoe_provider.py OLMoESelfAttention"),
    "minimax_m2": _FULL_WIDTH_QK_NORM.format(spec="minimax_m2_provider.py FullDimQNorm/FullDimKNorm"),
    "ernie4_5_moe": "its router picks experts by softmax scores plus a correction bias (moe_statics), and "
                    "megatron-core 0.16.1 takes an expert bias with sigmoid scores only (Megatron-Bridge's "
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
