"""MoE layer presets: a model's routed-expert shape, read from the shipped models.toml.

DeepSeek-V3 (arXiv:2412.19437): hidden 7168, 256 routed experts, top-8, node-limited routing to at
most 4 of 8 groups, dispatched DeepEP-style (one fp8 copy per destination rank, bf16 combine).
Qwen3-235B-A22B: hidden 4096, 128 experts, top-8. Mixtral 8x22B: hidden 6144, 8 experts, top-2.
"""

from __future__ import annotations

from typing import Any

from commbench.errors import invalid
from commbench.data.reference import models_toml

# preset name -> (models.toml key, how the published training run dispatches)
_PRESETS: dict[str, tuple[str, dict[str, str]]] = {
    "deepseek-v3": ("deepseek-v3", {"dispatch_mode": "per-rank", "dispatch_dtype": "fp8", "combine_dtype": "bf16"}),
    "qwen3-235b": ("qwen3-235b-a22b", {}),
    "mixtral-8x22b": ("mixtral-8x22b", {}),
}


def preset_names() -> list[str]:
    return list(_PRESETS)


def preset_params(name: str) -> dict[str, Any]:
    """MoE parameters of a preset (keys as in Measurement.params)."""
    if not isinstance(name, str) or name not in _PRESETS:
        raise invalid("--preset", name, f"allowed: {', '.join(_PRESETS)}")
    key, dispatch = _PRESETS[name]
    model = models_toml()["model"][key]
    routing = "uniform"
    arch = model.get("arch", {})  # the router's groups are architecture (models.toml [model.X.arch])
    groups, group_topk = arch.get("router_groups", model.get("n_group", 1)), arch.get("router_group_topk", model.get("topk_group", 1))
    if groups > 1:
        routing = f"group-limited:{groups}:{group_topk}"
    return {"hidden": model["hidden"], "num_experts": model["routed_experts"], "top_k": model["top_k"],
            "routing": routing, **dispatch}
