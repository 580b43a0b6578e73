"""The planner's recipe fields from Megatron-Bridge's workload settings (the mapping the docstring of
tools/recipes_from_megatron_bridge.py states): shared by its readers of the workload configs and of the flat
perf_recipes (tools/flat_recipes.py)."""

from __future__ import annotations

import subprocess
from typing import Any, Callable

DEFAULTS = dict(num_gpus=1, tensor_model_parallel_size=1, pipeline_model_parallel_size=1, context_parallel_size=1,
                virtual_pipeline_model_parallel_size=None, expert_model_parallel_size=1,
                expert_tensor_parallel_size=None, global_batch_size=1, micro_batch_size=1, use_megatron_fsdp=None,
                cuda_graph_impl=None, cuda_graph_scope=None, recompute_num_layers=None, recompute_modules=None, cpu_offloading_num_layers=None,
                moe_flex_dispatcher_backend=None, moe_a2a_overlap=False, cutedsl_fused_grouped_mlp=False,
                fp8_dot_product_attention=None)


def git(repo: str, *args: str) -> str:
    """stdout of a git command on the Megatron-Bridge git directory `repo` (the readers' only access to it)."""
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True, text=True).stdout


SELECTIVE_BY_DEFAULT = {"deepseek-v3"}

# Megatron-Core recompute modules that leave no recompute the planner's values price
# (megatron/core/transformer/transformer_config.py and transformer_layer.py at core_v0.16.1): "layernorm" recomputes
# the norms (memory-bound, no GEMM); "mlp" recomputes the dense MLP submodule only, never a MoE layer's
# (transformer_layer.py: recompute_mlp is set only when not is_moe_layer), so on a MoE model it is its few dense
# layers' MLP forward (DeepSeek-V3: 3 of 61 layers, under 1% of the step), not the core attention that
# "selective" prices. On a dense model "mlp" is every layer's MLP: recompute_of refuses it until the planner
# prices it.
NO_PLANNER_RECOMPUTE = frozenset({"layernorm", "mlp"})


def recompute_of(fields: dict, model: str) -> str:
    if fields.get("recompute_num_layers"):
        return "full"
    modules = fields.get("recompute_modules")
    if modules is not None and not list(modules):
        # recompute_modules=[] is how a recipe turns recompute off: the performance overrides set it with
        # selective granularity (scripts/performance/utils/overrides.py _set_recompute_overrides at v0.5.0: "Callers
        # that want to *disable* recompute should set ... modules=[]"), and Megatron-Core fills in its default
        # core_attn only when the list is None, so nothing is recomputed; unset (None) takes the model's default.
        return "none"
    if modules:
        if "core_attn" in modules:
            return "selective"
        named = next((m for m in modules if m in ("mla_up_proj", "moe_act")), None)
        if named:
            return named
        unmapped = [m for m in modules if m not in NO_PLANNER_RECOMPUTE]
        if "mlp" in modules and not _is_moe(model):
            unmapped.append("mlp (every layer's MLP of a dense model)")
        if unmapped:
            raise ValueError(f"recompute_modules {list(modules)} of {model}: {', '.join(unmapped)} has no planner "
                             "recompute value (none, selective, full, mla_up_proj, moe_act); map it here first")
        return "none"
    return "selective" if model in SELECTIVE_BY_DEFAULT else "none"



def recompute_from(value: Callable[[str], Any], model: str) -> tuple[str, int]:
    """(recompute, recompute_layers) from a resolved config's recompute fields, each read through `value`:
    granularity "full" -> full, with recompute_num_layers under method "block" (Megatron-Core recomputes that many
    layers of each model chunk; 0, every layer, under "uniform"); "selective" -> the modules rule of recompute_of
    (modules None is Megatron-Core's ["core_attn"]; [] recomputes nothing: none); None -> none."""
    granularity = value("recompute_granularity")
    if granularity == "full":
        block = value("recompute_method") == "block"
        return "full", int(value("recompute_num_layers") or 0) if block else 0
    if granularity == "selective":
        modules = value("recompute_modules")
        modules = ["core_attn"] if modules is None else modules
        return (recompute_of({"recompute_modules": modules}, model) if modules else "none"), 0
    return "none", 0


def _is_moe(model: str) -> bool:
    from commbench.planner.models.zoo import load_model
    return load_model(model).is_moe


def graph_of(fields: dict) -> str:
    scope = fields.get("cuda_graph_scope") or []
    scope = [scope] if isinstance(scope, str) else list(scope)
    impl = fields.get("cuda_graph_impl")
    if impl == "none":   # Megatron-Core: cuda_graph_impl "none" captures nothing, whatever the scope
        return "none"
    if "full_iteration" in scope or impl == "full_iteration":
        return "full"
    return "layer" if impl in ("transformer_engine", "local") else "none"


def scope_of(fields: dict) -> list[str]:
    if graph_of(fields) != "layer":
        return []
    scope = fields.get("cuda_graph_scope") or []
    scope = [scope] if isinstance(scope, str) else list(scope)
    return [] if scope == ["full"] else scope   # "full": Megatron-Core's older spelling of the whole layer


def entry(fields: dict, model: str) -> dict:
    vp = fields.get("virtual_pipeline_model_parallel_size")
    return {"num_gpus": fields["num_gpus"], "tp": fields["tensor_model_parallel_size"],
            "pp": fields["pipeline_model_parallel_size"], "vp": vp or 1, "cp": fields["context_parallel_size"],
            "ep": fields["expert_model_parallel_size"], "etp": fields.get("expert_tensor_parallel_size") or 1,
            "mbs": fields["micro_batch_size"], "gbs": fields["global_batch_size"],
            "recompute": recompute_of(fields, model), "cuda_graph": graph_of(fields),
            "cuda_graph_scope": scope_of(fields),
            "dispatcher": "flex" if fields.get("moe_flex_dispatcher_backend") else "alltoall",
            "flex_backend": fields.get("moe_flex_dispatcher_backend") or None,
            "moe_a2a_overlap": bool(fields.get("moe_a2a_overlap")),
            "fused_moe": bool(fields.get("cutedsl_fused_grouped_mlp")),
            "fp8_attention": bool(fields.get("fp8_dot_product_attention")),
            "fsdp": bool(fields.get("use_megatron_fsdp")),
            "cpu_offload_layers": int(fields.get("cpu_offloading_num_layers") or 0),
            "recompute_layers": int(fields.get("recompute_num_layers") or 0)}
