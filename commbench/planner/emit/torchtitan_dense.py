"""A dense model of TorchTitan 0.3.0's qwen3 or llama3 family with no flavor's sizes, built by the family's own layers.

TorchTitan 0.3.0 builds its dense flavors with one builder per family (torchtitan/models/qwen3/__init__.py
_build_qwen3_layers: fused bias-free GQA with an explicit head_dim and RMSNorm qk-norm, SwiGLU FFN, CosSinRoPE;
torchtitan/models/llama3/__init__.py _build_llama3_layers: the same without qk-norm, head_dim = dim / n_heads,
ComplexRoPE) and a Decoder config (Qwen3Model / Llama3Model: embedding, final RMSNorm, lm_head, enable_weight_tying).
A model whose attention and FFN are the family's (search/frameworks.py TITAN_FLAVOR_ARCH) at other sizes is built by
those builders with its own sizes: the plan writes a config function that starts from the family's pre-training
recipe (qwen3_14b, llama3_8b: config_registry.py) and sets the model spec, the way torchtitan_mla.py does for MLA.
A Qwen3 MoE model (every layer MoE, no shared experts: Qwen3-Coder-480B-A35B) is built by _build_qwen3_moe_layers
(softmax router renormalising the top-k, load_balance_coeff 1e-3, as the flavors: torchtitan/models/qwen3/__init__.py
make_router_config(score_func="softmax", route_norm=True), make_moe_config's default) on qwen3_30b_a3b's recipe; where
the model's router or balancing is another, the lines after the builder set it (emit/torchtitan.py flavor_fix_lines,
balancing_lines), as for a shipped flavor.
The builders leave RMSNorm eps at the family's (qwen3 _EPS 1e-6, llama3 RMSNorm.Config's 1e-5); every norm is set to
the model's after (HF Qwen3 builds q_norm / k_norm with rms_norm_eps too). RoPE: unscaled only (the llama3 family's
Llama 3.1 scaling is not written into the generated function); precomputed for max(the model's
positions, the plan's sequence), so no sequence limit.
"""

from __future__ import annotations

import re

from commbench.planner.models.spec import ModelSpec

DENSE_BASE = {"qwen3": "qwen3_14b", "llama3": "llama3_8b"}
MOE_BASE = "qwen3_30b_a3b"   # the only shipped Qwen3 MoE pre-training recipe


def dense_base(module: str, is_moe: bool) -> str:
    return MOE_BASE if is_moe else DENSE_BASE[module]


def dense_function(model: ModelSpec) -> str:
    """The generated config function's stem: the model's name as a Python identifier (hf:phi-4 -> phi_4)."""
    stem = re.sub(r"[^0-9a-z]+", "_", model.name.lower().removeprefix("hf:")).strip("_")
    return stem if stem and not stem[0].isdigit() else f"model_{stem}"


def dense_model_lines(model: ModelSpec, module: str, hf_assets: str,
                      seq_len: int | None = None) -> tuple[list[str], list[str]]:
    """(imports, body lines) that set the config's model spec to `model` as TorchTitan's `module` model."""
    arch = model.architecture
    eps, d, vocab, head_dim = float(arch.norm_epsilon), model.hidden, model.vocab, model.head_dim
    positions = max(arch.max_position_embeddings, seq_len or model.seq_len)
    tied = bool(model.tied_embeddings)
    embedding_init = f"{module}._EMBEDDING_SKIP_INIT" if tied else f"{module}._EMBEDDING_INIT"
    if module == "qwen3" and model.is_moe:
        decoder, rope_class, out_init = "Qwen3Model", "CosSinRoPE", f"{module}._LINEAR_INIT"
        layers = (f"qwen3._build_qwen3_moe_layers(n_layers={model.num_layers}, dim={d}, n_heads={model.num_heads}, "
                  f"n_kv_heads={model.num_kv_heads}, head_dim={head_dim}, moe_hidden_dim={model.expert_ffn}, "
                  f"num_experts={model.num_routed_experts}, top_k={model.top_k}, fuse_qkv=True, attn_backend='flex', "
                  "moe_comm_backend='standard', rope=rope)")
    elif module == "qwen3":
        decoder, rope_class, out_init = "Qwen3Model", "CosSinRoPE", f"{module}._LINEAR_INIT"
        layers = (f"qwen3._build_qwen3_layers(n_layers={model.num_layers}, dim={d}, n_heads={model.num_heads}, "
                  f"n_kv_heads={model.num_kv_heads}, head_dim={head_dim}, hidden_dim={model.dense_ffn}, fuse_qkv=True, "
                  "attn_backend='flex', rope=rope)")
    else:
        decoder, rope_class, out_init = "Llama3Model", "ComplexRoPE", f"{module}._output_linear_init({d})"
        layers = (f"llama3._build_llama3_layers(n_layers={model.num_layers}, dim={d}, n_heads={model.num_heads}, "
                  f"n_kv_heads={model.num_kv_heads}, hidden_dim={model.dense_ffn}, fuse_qkv=True, attn_backend='flex', "
                  "rope=rope)")
    imports = [f"from torchtitan.models import {module}",
               f"from torchtitan.models.common import {rope_class}, Embedding, Linear, RMSNorm",
               "from torchtitan.models.common.config_utils import decoder_vocab_size"]
    body = [f"    # {model.name} as TorchTitan's {module} model: the flavors' builder with the model's sizes",
            f"    rope = {rope_class}.Config(dim={head_dim}, max_seq_len={positions}, theta={float(arch.rotary_base)!r})",
            f"    layers = {layers}",
            "    for layer in layers:  # the builder leaves the family's RMSNorm eps",
            f"        layer.attention_norm.eps = layer.ffn_norm.eps = {eps!r}"]
    if module == "qwen3":
        body.append(f"        layer.attention.qk_norm.eps = {eps!r}")
    body += [f"    model = {module}.{decoder}.Config(",
             f"        vocab_size={vocab}, dim={d}, enable_weight_tying={tied},",
             f"        tok_embeddings=Embedding.Config(num_embeddings={vocab}, embedding_dim={d}, "
             f"param_init={embedding_init}),",
             f"        norm=RMSNorm.Config(normalized_shape={d}, eps={eps!r}, param_init={module}._NORM_INIT),",
             f"        lm_head=Linear.Config(in_features={d}, out_features={vocab}, param_init={out_init}),",
             "        layers=layers)",
             f"    config.model_spec = dataclasses.replace(config.model_spec, flavor={model.name!r}, model=model)",
             "    config.loss.loss_fn.global_vocab_size = decoder_vocab_size(config.model_spec)",
             f"    config.hf_assets_path = {hf_assets!r}"]
    return imports, body
