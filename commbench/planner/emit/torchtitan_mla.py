"""An MLA model TorchTitan 0.3.0 ships no flavor of (DeepSeek-V2-Lite, Moonlight), as its deepseek_v3 model.

TorchTitan 0.3.0's deepseek_v3 model builds MLA with or without the query low rank (torchtitan/models/deepseek_v3/
__init__.py make_mla_attention_config: `wq` when q_lora_rank == 0, else wq_a / q_norm / wq_b), leading dense layers
(build_mla_moe_layers: layer_id < n_dense_layers), shared experts of moe_hidden_dim x num_shared_experts, and a
TokenChoiceTopKRouter (models/common/moe.py) that scores every expert with softmax or sigmoid, picks the top-k
(within num_limited_groups of num_expert_groups groups ranked by their top-2 sum), renormalises them with route_norm
and multiplies by route_scale: HF DeepSeek-V2's greedy softmax router (norm_topk_prob false, times
routed_scaling_factor) and DeepSeek-V3's sigmoid noaux_tc one alike. Its RoPE (models/common/rope.py ComplexRoPE)
is plain or YaRN with floor/ceil cutoffs (truncate=True, as HF's yarn_find_correction_range) and no mscale; the
attention folds (0.1 mscale ln(rope_factor) + 1)^2 into the softmax scale (models/deepseek_v3/model.py
Attention.__init__), which is HF's yarn_get_mscale(factor, mscale_all_dim)^2 with mscale = mscale_all_dim
(search/frameworks.titan_mla_refusal refuses the rest by field).

No shipped flavor has these models' values (its 16B flavor: vocabulary 102400, intermediate 10944, mscale 0.70 where
DeepSeek-V2-Lite has 0.707, RMSNorm eps 1e-5), so the plan writes a config function that starts from
deepseek_v3_16b's recipe (config_registry.py) and builds the model with the flavors' own builder
(_build_dsv3_layers, with DeepSeek-V3's inits) from the model's values; every RMSNorm's eps is set after it
(the builder leaves nn_modules.RMSNorm.Config's 1e-5): the model's norm_epsilon, and 1e-6 on the latent q/kv norms
(HF modeling_deepseek.py builds q_a_layernorm / kv_a_layernorm with the RMSNorm class default, eps=1e-6).
"""

from __future__ import annotations

import re

from commbench.planner.models.spec import ModelSpec

MLA_MODULE = "deepseek_v3"
MLA_BASE = "deepseek_v3_16b"
LATENT_NORM_EPS = 1e-6


def mla_function(model: ModelSpec) -> str:
    """The generated config function's stem: the model's name as a Python identifier (hf:DeepSeek-V2-Lite ->
    deepseek_v2_lite)."""
    stem = re.sub(r"[^0-9a-z]+", "_", model.name.lower().removeprefix("hf:")).strip("_")
    return stem if stem and not stem[0].isdigit() else f"model_{stem}"


def mla_router(model: ModelSpec) -> tuple[str, bool, float]:
    """(score_func, route_norm, route_scale) of the TokenChoiceTopKRouter for the model's router: softmax over every
    expert then top-k renormalised equals softmax over the top-k logits (megatron-core's non-pre-softmax)."""
    from commbench.planner.emit.torchtitan import router_renormalises
    arch = model.architecture
    return arch.router_score, router_renormalises(arch, model.top_k), float(arch.router_topk_scaling or 1.0)


def mla_rope(model: ModelSpec) -> tuple[float, str, float]:
    """(theta, scaling, factor) as TitanModel.rope_03 records it."""
    arch = model.architecture
    yarn = arch.rope_scaling == "yarn"
    return float(arch.rotary_base), arch.rope_scaling, float(arch.rope_scaling_factor) if yarn else 1.0


def _rope_config(model: ModelSpec, seq_len: int | None = None) -> str:
    """Its RoPE, precomputed for the model's positions or the plan's sequence if longer (TorchTitan refuses a
    training.seq_len beyond max_seq_len)."""
    arch = model.architecture
    args = {"dim": model.qk_rope_head_dim, "max_seq_len": max(arch.max_position_embeddings, seq_len or model.seq_len),
            "theta": float(arch.rotary_base), "scaling": arch.rope_scaling}
    if arch.rope_scaling == "yarn":
        args |= {"rope_factor": float(arch.rope_scaling_factor), "beta_fast": float(arch.yarn_beta_fast),
                 "beta_slow": float(arch.yarn_beta_slow), "original_seq_len": arch.rope_original_max_positions}
    return f"ComplexRoPE.Config({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def _layers_call(model: ModelSpec) -> str:
    arch = model.architecture
    score, norm, scale = mla_router(model)
    groups = (arch.router_groups, arch.router_group_topk) if arch.router_groups else (None, None)
    args = {"n_layers": model.num_layers, "n_dense_layers": model.num_dense_layers, "dim": model.hidden,
            "n_heads": model.num_heads, "q_lora_rank": model.q_lora_rank, "kv_lora_rank": model.kv_lora_rank,
            "qk_nope_head_dim": model.qk_nope_head_dim, "qk_rope_head_dim": model.qk_rope_head_dim,
            "v_head_dim": model.v_head_dim,
            "mscale": float(arch.yarn_mscale_all_dim) if arch.rope_scaling == "yarn" else 1.0,
            "dense_hidden_dim": model.dense_ffn or model.expert_ffn, "moe_hidden_dim": model.expert_ffn,
            "num_experts": model.num_routed_experts, "num_shared_experts": model.num_shared_experts,
            "router_top_k": model.top_k, "router_score_func": score, "router_num_expert_groups": groups[0],
            "router_num_limited_groups": groups[1], "router_route_scale": scale, "router_route_norm": norm,
            "attn_backend": "flex", "moe_comm_backend": "standard", "non_blocking_capacity_factor": None}
    return f"deepseek_v3._build_dsv3_layers({', '.join(f'{k}={v!r}' for k, v in args.items())}, rope=rope)"


def mla_model_lines(model: ModelSpec, hf_assets: str, seq_len: int | None = None) -> tuple[list[str], list[str]]:
    """(imports, body lines) that set the config's model spec to `model` as TorchTitan's deepseek_v3 model."""
    eps, d, vocab = float(model.architecture.norm_epsilon), model.hidden, model.vocab
    imports = ["from torchtitan.models import deepseek_v3",
               "from torchtitan.models.common import ComplexRoPE, Embedding, Linear, RMSNorm",
               "from torchtitan.models.common.config_utils import decoder_vocab_size"]
    body = [f"    # {model.name} as TorchTitan's deepseek_v3 model: the flavors' builder with the model's values",
            f"    rope = {_rope_config(model, seq_len)}",
            f"    layers = {_layers_call(model)}",
            "    for layer in layers:  # the builder leaves RMSNorm.Config's eps (1e-5)",
            f"        layer.attention_norm.eps = layer.ffn_norm.eps = {eps!r}",
            f"        layer.attention.q_norm.eps = layer.attention.kv_norm.eps = {LATENT_NORM_EPS!r}",
            "    model = deepseek_v3.DeepSeekV3Model.Config(",
            f"        vocab_size={vocab}, dim={d},",
            f"        tok_embeddings=Embedding.Config(num_embeddings={vocab}, embedding_dim={d}, "
            "param_init=deepseek_v3._EMBEDDING_INIT),",
            f"        norm=RMSNorm.Config(normalized_shape={d}, eps={eps!r}, param_init=deepseek_v3._NORM_INIT),",
            f"        lm_head=Linear.Config(in_features={d}, out_features={vocab}, "
            f"param_init=deepseek_v3._output_linear_init({d})),",
            "        layers=layers, mtp_layers=[])",
            f"    config.model_spec = dataclasses.replace(config.model_spec, flavor={model.name!r}, model=model)",
            "    config.loss.loss_fn.global_vocab_size = decoder_vocab_size(config.model_spec)",
            f"    config.hf_assets_path = {hf_assets!r}"]
    return imports, body
