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


def recompute_of(fields: dict, model: str) -> str:
    """The planner's recompute mode of a workload preset's fields: full where recompute_num_layers is set; else the
    SET of recompute_modules the recipe runs (commbench/planner/layout/recompute.py module_set_mode: "none" for [],
    a module alone by its name, else the names "+"-joined in sorted order, e.g. ["layernorm", "moe_act"] ->
    "layernorm+moe_act"; a set the step model cannot price is refused, naming it); unset (None) takes the model's
    default: DeepSeek-V3's script sets selective granularity with Megatron-Core's default module, core_attn."""
    if fields.get("recompute_num_layers"):
        return "full"
    modules = fields.get("recompute_modules")
    if modules is None:
        return "core_attn" if model in SELECTIVE_BY_DEFAULT else "none"
    # recompute_modules=[] is how a recipe turns recompute off: the performance overrides set it with selective
    # granularity (scripts/performance/utils/overrides.py _set_recompute_overrides at v0.5.0: "Callers that want to
    # *disable* recompute should set ... modules=[]"), and Megatron-Core fills in its default core_attn only when
    # the list is None, so nothing is recomputed
    from commbench.planner.layout.recompute import module_set_mode
    try:
        return module_set_mode(list(modules))
    except ValueError as exc:
        raise ValueError(f"{model}: {exc}") from None


def recompute_from(value: Callable[[str], Any], model: str) -> tuple[str, int]:
    """(recompute, recompute_layers) from a resolved config's recompute fields, each read through `value`:
    granularity "full" -> full, with recompute_num_layers under method "block" (Megatron-Core recomputes that many
    layers of each model chunk; 0, every layer, under "uniform"); "selective" -> the set of modules it runs
    (recompute_of; modules None is Megatron-Core's ["core_attn"]; [] recomputes nothing: none); None -> none."""
    granularity = value("recompute_granularity")
    if granularity == "full":
        block = value("recompute_method") == "block"
        return "full", int(value("recompute_num_layers") or 0) if block else 0
    if granularity == "selective":
        modules = value("recompute_modules")
        modules = ["core_attn"] if modules is None else modules
        return (recompute_of({"recompute_modules": modules}, model) if modules else "none"), 0
    return "none", 0


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
