"""Megatron-Bridge's flat performance recipes (src/megatron/bridge/perf_recipes/, v0.6.0 on) as recipes.json
entries: each recipe function is read by tools/perf_recipe_reader.py (no repository code is run) and its
resolved config mapped by recipe_mapping.entry, as tools/recipes_from_megatron_bridge.py's docstring states."""

from __future__ import annotations

import ast
import re

from perf_recipe_reader import Obj, Reader, Unknown
from recipe_mapping import entry, git, recompute_from


# v0.6.0 on: src/megatron/bridge/perf_recipes/<family>/<gpu>/<model>.py, one function per recipe, named
# <model>_<task>_<N>gpu_<gpu>_<prec>[_<config variant>]_config (scripts/performance/dump_perf_configs.py
# load_new_recipe). fp8sc (FP8 sub-channel scaling) has no planner precision; sft / peft tasks and GPUs without
# a planner preset (vr200, r100) are not read.
PERF_PRECISIONS = {"bf16": "bf16", "fp8cs": "fp8", "fp8mx": "mxfp8", "nvfp4": "nvfp4"}
PERF_NAME = re.compile(r"^(?P<model>[a-z0-9_]+?)_pretrain_(?P<num>\d+)gpu_(?P<gpu>gb300|gb200|b300|b200|h100)_"
                       r"(?P<prec>bf16|fp8cs|fp8mx|nvfp4)(?:_(?P<variant>[a-z0-9_]+?))?_config$")
PERF_FILE = re.compile(r"src/megatron/bridge/perf_recipes/[a-z0-9_]+/(?:gb300|gb200|b300|b200|h100)/[a-z0-9_]+\.py")
# What recipe code asks the machine at run time, answered for the GPU the recipe names: the base recipes'
# apply_flex_dispatcher_backend (training/flex_dispatcher_backend.py at v0.6.0) keeps HybridEP where
# torch.cuda.get_device_properties(0).major is 8-10 and DeepEP on 8-9 or a name starting "NVIDIA B200"/"NVIDIA
# B300", else falls back to alltoall; and it returns early for a model whose num_moe_experts is None or 0.
# Compute capability (CUDA GPU list): H100 9.0, B200 and GB200 10.0, B300 and GB300 10.3.
DEVICES = {"h100": (9, "NVIDIA H100"), "b200": (10, "NVIDIA B200"), "gb200": (10, "NVIDIA GB200"),
           "b300": (10, "NVIDIA B300"), "gb300": (10, "NVIDIA GB300")}
# num_moe_experts: routed experts of the model's Hugging Face config (commbench/data/models.toml routed_experts).
EXPERTS = {"deepseek-v3": 256, "kimi-k2": 384, "qwen3-30b-a3b": 128, "qwen3-235b-a22b": 128, "gpt-oss-120b": 128,
           "llama3-8b": None, "llama3.1-70b": None, "llama3.1-405b": None, "deepseek-v4-flash": 256,
           "nemotron-3-ultra-550b-a55b": 512}


# utils/cuda_graph.py (v0.5.0 on) asks whether the installed Megatron-Core has per-layer graph modules:
# _supports_cuda_graph_modules = CudaGraphModule importable and TransformerConfig.cuda_graph_modules. The
# Megatron-LM each release pins (3rdparty/Megatron-LM: v0.5.0 d0b3b77, v0.5.1 458c8d0, v0.6.0 cd4afff) has
# both (megatron/core/transformer/enums.py CudaGraphModule, transformer_config.py cuda_graph_modules), so
# set_full_iteration_cuda_graph sets cuda_graph_impl "full_iteration".
CUDA_GRAPH_MODULES = {"megatron.bridge.utils.cuda_graph._supports_cuda_graph_modules": True}


def runtime_facts(model: str, gpu: str) -> dict:
    device = Obj(f"torch.cuda.get_device_properties(0) on {gpu}")
    device.attrs.update(major=DEVICES[gpu][0], name=DEVICES[gpu][1])
    return {"torch.cuda.get_device_properties": device, "num_moe_experts": EXPERTS[model], **CUDA_GRAPH_MODULES}


# config field the entry reads <- where in the ConfigContainer the flat recipe sets it
PERF_FIELDS = {"tensor_model_parallel_size": "model", "pipeline_model_parallel_size": "model",
               "virtual_pipeline_model_parallel_size": "model", "context_parallel_size": "model",
               "expert_model_parallel_size": "model", "expert_tensor_parallel_size": "model",
               "global_batch_size": "train", "micro_batch_size": "train", "use_megatron_fsdp": "ddp",
               "cuda_graph_impl": "model", "cuda_graph_scope": "model", "recompute_granularity": "model",
               "recompute_method": "model", "recompute_num_layers": "model", "recompute_modules": "model",
               "cpu_offloading": "model", "cpu_offloading_num_layers": "model", "moe_token_dispatcher_type": "model",
               "moe_flex_dispatcher_backend": "model", "overlap_moe_expert_parallel_comm": "comm_overlap",
               "fp8_dot_product_attention": "mixed_precision", "tp_comm_overlap": "comm_overlap",
               "overlap_grad_reduce": "ddp", "comm_overlap_grad_reduce": "comm_overlap",
               # Megatron-FSDP's HSDP (ddp) and the module-level activation offload (model): read since Nemotron-3-Ultra's
               # recipes set them (perf_recipes/nemotronh/common.py _apply_nemotron_3_ultra_fsdp_hsdp, gb300/ and
               # gb200/nemotronh.py at v0.6.0)
               "num_distributed_optimizer_instances": "ddp", "outer_dp_sharding_strategy": "ddp",
               "fine_grained_activation_offloading": "model", "offload_modules": "model",
               "min_offloaded_tensor_size": "model",
               # Megatron-FSDP's persistent double buffers (what the FSDP units' gathered weights and unsharded
               # gradients live in: commbench/planner/step/fsdp.py); NCCL user buffers force them on
               "fsdp_double_buffer": "ddp", "nccl_ub": "ddp",
               # Megatron-FSDP on Hopper fp8: whether each unit's fp8 weight transposes stay across micro-batches
               # (commbench/planner/step/fsdp.py "Hopper per-tensor fp8 weights")
               "keep_fp8_transpose_cache": "ddp"}


# A field no code read sets keeps its class default. The model config comes from AutoBridge's conversion of the
# Hugging Face config (not read): Megatron-Core's defaults, at the commit v0.6.0 pins (3rdparty/Megatron-LM
# cd4afffa): model_parallel_config.py expert_model_parallel_size 1, expert_tensor_parallel_size None,
# cpu_offloading False, cpu_offloading_num_layers 0; transformer/transformer_config.py recompute_granularity None,
# recompute_method None,
# recompute_num_layers None, recompute_modules None, moe_token_dispatcher_type "allgather" (a model provider
# class may set another default: not read, a known limit). Bridge's own config classes are read (their literal
# dataclass defaults: CommOverlapConfig.overlap_moe_expert_parallel_comm None, MixedPrecisionConfig
# .fp8_dot_product_attention False).
# The DDP config's (distributed/distributed_data_parallel_config.py at cd4afffa): num_distributed_optimizer_instances
# 1, outer_dp_sharding_strategy "no_shard"; the module-level offload's (transformer_config.py):
# fine_grained_activation_offloading False, offload_modules [], min_offloaded_tensor_size 1024 * 1024; the DDP
# config's fsdp_double_buffer False, nccl_ub False, keep_fp8_transpose_cache False (distributed_data_parallel_config.py
# at cd4afffa, lines 118, 135, 115).
CORE_DEFAULTS = {"expert_model_parallel_size": 1, "expert_tensor_parallel_size": None, "cpu_offloading": False,
                 "cpu_offloading_num_layers": 0, "recompute_granularity": None, "recompute_method": None,
                 "recompute_num_layers": None,
                 "recompute_modules": None, "moe_token_dispatcher_type": "allgather",
                 "num_distributed_optimizer_instances": 1, "outer_dp_sharding_strategy": "no_shard",
                 "fine_grained_activation_offloading": False, "offload_modules": [],
                 "min_offloaded_tensor_size": 1024 * 1024, "fsdp_double_buffer": False, "nccl_ub": False,
                 "keep_fp8_transpose_cache": False}


def perf_fields(cfg) -> tuple[dict, dict]:
    """(field -> value or Unknown, field -> where it was set) of a flat recipe's resolved config."""
    values, where = {}, {}
    for field, section in PERF_FIELDS.items():
        owner = cfg.attrs.get(section, Unknown(f"{section} is not set")) if isinstance(cfg, Obj) else cfg
        if owner is None:   # no such config at all (comm_overlap=None: no overlap is configured)
            values[field], where[field] = None, cfg.where.get(section, "")
            continue
        name = field.removeprefix("comm_")   # comm_overlap_grad_reduce: comm_overlap.overlap_grad_reduce
        value = owner.read(name) if isinstance(owner, Obj) else Unknown(f"{section}: {getattr(owner, 'why', '')}")
        if isinstance(value, Unknown) and "is not set in code read" in value.why and field in CORE_DEFAULTS:
            value = CORE_DEFAULTS[field]
        values[field], where[field] = value, owner.where.get(name, "") if isinstance(owner, Obj) else ""
    values["has_comm_overlap"] = isinstance(cfg.attrs.get("comm_overlap"), Obj) if isinstance(cfg, Obj) else cfg
    env = cfg.attrs.get("env_vars") if isinstance(cfg, Obj) else None
    values["fused_grouped_mlp"] = env.get("NVTE_CUTEDSL_FUSED_GROUPED_MLP") if isinstance(env, dict) else env
    return values, where


def perf_entry(known: dict, where: dict, model: str) -> dict:
    """The planner's fields from a flat recipe's config, by the workload configs' mapping (module docstring).
    A field the mapping consults that the reader could not resolve is listed in "unresolved" (its path and
    why) and read as None there (a size is null): never a value taken from elsewhere; the planner does not
    use such an entry (layout/recipes.py)."""
    unresolved: list[str] = []

    class Consulted(dict):
        def __getitem__(self, field):
            value = known[field]
            if isinstance(value, Unknown):
                unresolved.append(f"{PERF_FIELDS.get(field, 'env_vars')}.{field}: {value.why}")
                return None
            return value
    values = Consulted()
    recompute, layers = recompute_from(values.__getitem__, model)
    fields = {k: values[k] for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                                     "virtual_pipeline_model_parallel_size", "context_parallel_size",
                                     "expert_model_parallel_size", "expert_tensor_parallel_size",
                                     "global_batch_size", "micro_batch_size", "use_megatron_fsdp",
                                     "cuda_graph_impl", "cuda_graph_scope", "fp8_dot_product_attention")}
    fields.update(num_gpus=0, moe_a2a_overlap=values["overlap_moe_expert_parallel_comm"],
                  cutedsl_fused_grouped_mlp=str(values["fused_grouped_mlp"]) in ("1", "True"),
                  moe_flex_dispatcher_backend=values["moe_flex_dispatcher_backend"]
                  if values["moe_token_dispatcher_type"] == "flex" else None,
                  cpu_offloading_num_layers=values["cpu_offloading_num_layers"] if values["cpu_offloading"] else 0)
    # DP overlap: a CommOverlapConfig's overlap_grad_reduce, where set, replaces the DDP config's (and where
    # unset Bridge turns it on for DP > 1; training/comm_overlap.py setup at v0.6.0); with no
    # CommOverlapConfig the DDP config's stands.
    dp_from = "comm_overlap_grad_reduce" if values["has_comm_overlap"] else "overlap_grad_reduce"
    overlap = {"tp_comm_overlap": values["tp_comm_overlap"], "dp_overlap": values[dp_from]}
    out = dict(entry(fields, model), recompute=recompute, recompute_layers=layers)
    # Megatron-FSDP's HSDP: the distributed-optimizer instances (replicas of the shard group) and the outer sharding
    # ("optim": the optimizer state sharded across the replicas too); only with Megatron-FSDP
    fsdp = bool(fields["use_megatron_fsdp"])
    instances = values["num_distributed_optimizer_instances"] if fsdp else 1
    out.update(fsdp_replicas=int(instances or 1), fsdp_outer=values["outer_dp_sharding_strategy"] if fsdp else "no_shard")
    out.update(fsdp_double_buffer(fsdp, values, where, unresolved))
    out.update(keep_fp8_transpose_cache(fsdp, values, where, unresolved))
    # module-level activation offload (TransformerConfig.fine_grained_activation_offloading): the modules whose saved
    # tensors go to host memory and the element count a tensor must reach (min_offloaded_tensor_size)
    offload = bool(values["fine_grained_activation_offloading"])
    out.update(offload_modules=sorted(values["offload_modules"] or []) if offload else [],
               min_offloaded_tensor_size=int(values["min_offloaded_tensor_size"]) if offload else 0)
    out.update(tp_comm_overlap=True, dp_overlap=True, overlap_facts=[])
    for flag, field in (("tp_comm_overlap", "tp_comm_overlap"), ("dp_overlap", dp_from)):
        # on unless the recipe's config turns it off; TP overlap also off with no CommOverlapConfig at all
        if overlap[flag] is False or (flag == "tp_comm_overlap" and overlap[flag] is None and where[field]):
            out[flag] = False
            out["overlap_facts"].append(where[field])
    if unresolved:
        out["unresolved"] = sorted(set(unresolved))
    return out


def megatron_fsdp_flags(fsdp: bool, names: tuple[str, ...], values: dict, where: dict,
                        unresolved: list[str]) -> list[tuple[bool, str]]:
    """Per DDP config field of `names` that Megatron-FSDP reads: (the resolved value is True, where the config the
    release builds last set it, '' where no code read sets it: megatron-core's default); (False, '') each without
    Megatron-FSDP. A value the reader could not resolve is listed in `unresolved` and read as False."""
    if not fsdp:
        return [(False, "")] * len(names)
    out = []
    for name in names:
        value = values[name]
        if isinstance(value, Unknown):
            unresolved.append(f"ddp.{name}: {value.why}")
        out.append((value is True, where.get(name, "")))
    return out


def fsdp_double_buffer(fsdp: bool, values: dict, where: dict, unresolved: list[str]) -> dict:
    """Megatron-FSDP's double buffering of a recipe's resolved DDP config ("fsdp_double_buffer", and where it was set:
    "double_buffer_facts"): on where ddp.fsdp_double_buffer is set, or ddp.nccl_ub (megatron-core's
    ParamAndGradBuffer sets fsdp_double_buffer with NCCL user buffers: param_and_grad_buffer.py "user buffer
    registration requires (non-dynamic) persistent memory, it always uses fsdp double buffer", core_v0.14.0 on);
    false without Megatron-FSDP (megatron_fsdp_flags)."""
    read = megatron_fsdp_flags(fsdp, ("fsdp_double_buffer", "nccl_ub"), values, where, unresolved)
    return {"fsdp_double_buffer": any(on for on, _ in read), "double_buffer_facts": [at for on, at in read if on and at]}


def keep_fp8_transpose_cache(fsdp: bool, values: dict, where: dict, unresolved: list[str]) -> dict:
    """Whether a recipe's Megatron-FSDP keeps its units' fp8 weight transposes across micro-batches
    ("keep_fp8_transpose_cache": the resolved ddp.keep_fp8_transpose_cache, and where the config the release builds last
    set it, on or off: "transpose_cache_facts", [] where no code read sets it, megatron-core's default False); false
    without Megatron-FSDP (megatron_fsdp_flags; the field is read by Megatron-FSDP only: megatron_fsdp.py)."""
    (on, set_at), = megatron_fsdp_flags(fsdp, ("keep_fp8_transpose_cache",), values, where, unresolved)
    return {"keep_fp8_transpose_cache": on, "transpose_cache_facts": [set_at] if set_at else []}


def perf_recipes(repo: str, release: str, tag: str, models: dict[str, str]) -> list[dict]:
    """Every flat pre-training recipe of `models` (workload-config name -> zoo name) on a GPU with a planner preset, read by perf_recipe_reader."""
    commit = git(repo, "rev-parse", f"{tag}^{{commit}}").strip()
    out = []
    for path in git(repo, "ls-tree", "-r", "--name-only", commit, "src/megatron/bridge/perf_recipes").split():
        if not PERF_FILE.fullmatch(path):
            continue
        dotted = path.removeprefix("src/").removesuffix(".py").replace("/", ".")
        names = [n.name for n in ast.parse(git(repo, "show", f"{commit}:{path}")).body if isinstance(n, ast.FunctionDef)]
        for name in names:
            match = PERF_NAME.match(name)
            if not match or match["model"].upper() not in models:
                continue
            model, gpu = models[match["model"].upper()], match["gpu"]
            reader = Reader.at_commit(repo, commit, runtime_facts(model, gpu))
            values, where = perf_fields(reader.call_function(dotted, name))
            row = {"release": release, "model": model, "gpu": gpu, "precision": PERF_PRECISIONS[match["prec"]],
                   "variant": f"{match['num']}gpu" + (f"_{match['variant']}" if match["variant"] else ""),
                   "config": name, "file": path, "commit": commit,
                   **perf_entry(values, where, model), "num_gpus": int(match["num"])}
            row["config_variant"] = match["variant"]
            out.append(row)
    return out
