"""What a per-layer CUDA graph captures (Megatron-Core --cuda-graph-scope), as a layout field.

Megatron-Core's capture regions (megatron/core/transformer/enums.py, CudaGraphModule; transformer_config.py
cuda_graph_modules): attn (TransformerLayer._forward_attention), mlp (a dense layer's MLP), moe (a MoE
layer's whole MLP, drop-and-pad MoE only), moe_router (the MLP up to the router, shared experts
included), moe_preprocess (MoELayer.preprocess, with moe_router), mamba (Mamba layers). An empty scope
under a per-layer implementation captures the whole layer (Megatron-Core 0.14's default scope "full",
what the 25.09 recipes' `cuda_graphs: true` ran); written "layer" here. Like moe, it captures a MoE layer's
dispatch and experts, which dropless MoE cannot be captured in: Megatron plans of a MoE model refuse both
(search/frameworks.py megatron_graph_scope_refusal).

A layout's `cuda_graph_scope` is "" (the scope NVIDIA's performance recipes use for that kind of model,
`default_scope`) or the modules joined by "+" ("attn+moe_router+moe_preprocess"); LayoutArrays holds
it as a bit mask (0 = the default).
"""

from __future__ import annotations

import numpy as np

from commbench.errors import invalid

MODULES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba")
BIT = {name: 1 << i for i, name in enumerate(MODULES)}
WHOLE_LAYER = 1 << len(MODULES)   # an empty per-layer scope: the whole layer
WHOLE_LAYER_NAME = "layer"


def scope_mask(text: str) -> int:
    """'attn+moe_router' -> its bit mask; '' -> 0 (the default scope); 'layer' -> WHOLE_LAYER. Refused in
    one line naming the field when a module is unknown."""
    text = str(text).strip().lower()
    if not text:
        return 0
    if text == WHOLE_LAYER_NAME:
        return WHOLE_LAYER
    mask = 0
    for name in filter(None, (p.strip() for p in text.replace(",", "+").split("+"))):
        if name not in BIT:
            raise invalid("cuda_graph_scope", text, f"'' (the recipes' scope), '{WHOLE_LAYER_NAME}' (the whole layer) "
                                                    f"or modules joined by '+' from {', '.join(MODULES)}")
        mask |= BIT[name]
    return mask


def scope_text(mask: int) -> str:
    """The inverse of scope_mask."""
    mask = int(mask)
    if mask & WHOLE_LAYER:
        return WHOLE_LAYER_NAME
    return "+".join(name for name in MODULES if mask & BIT[name])


def recipe_scope_text(cuda_graph: str, scope: list[str] | None) -> str:
    """A recipe's cuda_graph_scope list (recipes.json) as the layout field: '' unless per-layer graphs;
    an empty list under per-layer graphs is the whole layer."""
    if cuda_graph != "layer":
        return ""
    return "+".join(scope) if scope else WHOLE_LAYER_NAME


def default_scope(model) -> tuple[str, ...]:
    """The per-layer scope Megatron-Bridge's performance recipes use for this kind of model (v0.5.0,
    scripts/performance/configs/): MoE transformers attn + moe_router + moe_preprocess (DeepSeek-V3, Qwen3,
    GPT-OSS: deepseek_workload_base_configs.py, qwen3_workload_base_configs.py,
    gpt_oss_workload_base_configs.py); hybrid Mamba MoE attn + mamba + moe_router + moe_preprocess
    (nemotron_3_workload_base_configs.py); hybrid dense mamba + attn (nemotronh_workload_base_configs.py);
    dense transformers mlp + attn (llama3_workload_base_configs.py, Llama 3 70B)."""
    if model.is_hybrid:
        return ("attn", "mamba") + (("moe_router", "moe_preprocess") if model.is_moe else ())
    if model.is_moe:
        return ("attn", "moe_router", "moe_preprocess")
    return ("attn", "mlp")


def resolved_masks(model, masks: np.ndarray) -> np.ndarray:
    """Per layout, the scope mask with 0 (the default) replaced by default_scope(model)'s."""
    default = scope_mask("+".join(default_scope(model)))
    masks = np.asarray(masks, dtype=np.int64)
    return np.where(masks == 0, default, masks)


def cuda_graph_args(model, cuda_graph: str, scope: str = "", ep: int = 1) -> list[str]:
    """The CUDA-graph flags of a layout's `cuda_graph` ("none", "layer", "full") and `scope` ('' : the recipes' for
    this kind of model, graph_scope.default_scope) with expert parallelism `ep`."""
    if cuda_graph == "layer":
        scope = scope or "+".join(default_scope(model))
        return ["--cuda-graph-impl", "transformer_engine"] + \
            ([] if scope == WHOLE_LAYER_NAME else ["--cuda-graph-scope", *scope.split("+")])
    if cuda_graph == "full":
        out = ["--cuda-graph-impl", "local", "--cuda-graph-scope", "full_iteration", "--no-check-for-nan-in-loss-and-grad"]
        if model.is_moe and ep > 1:  # validate_args demands it with local graphs and EP; only inference reads it
            out.append("--moe-pad-experts-for-cuda-graph-inference")
        return out
    return []
