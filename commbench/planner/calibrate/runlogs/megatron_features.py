"""The Megatron-LM features a log states that the step model prices only in some of their settings: the
Megatron-FSDP sharding strategy, --recompute-modules, the MoE token dispatcher and the DP overlap flags. A setting it
does not price is one line naming the argument, its value and what is allowed (as use_torch_fsdp2 is), never priced
as another."""

from __future__ import annotations

import math
from typing import Any

from commbench.errors import CommbenchError
from commbench.planner.calibrate.runlogs.common import _whole
from commbench.planner.layout.recompute import ALONE, LIGHT_MODULES, module_set_mode
from commbench.planner.layout.spec import RECIPE_MODULE_SETS

# Megatron-LM arguments.py --data-parallel-sharding-strategy (choices no_shard, optim, optim_grads,
# optim_grads_params; default no_shard): the step model's FSDP (layout fsdp) is ZeRO-3, parameters gathered per layer
# (optim_grads_params). no_shard (all-reduce, replicated state), optim (ZeRO-1) and optim_grads (ZeRO-2) shard less
# and gather nothing per layer: not what it prices, and not Megatron's DDP either (Megatron-FSDP's own buffers).
FSDP_PRICED_STRATEGY = "optim_grads_params"


def check_fsdp_strategy(log: str, args: dict[str, Any]) -> None:
    """One line for a Megatron-FSDP run whose sharding strategy is not the one the step model prices."""
    if not (args.get("use_megatron_fsdp") or args.get("use_custom_fsdp")):
        return
    if "data_parallel_sharding_strategy" not in args:
        raise CommbenchError(f"{log}: ran with Megatron-FSDP but its arguments block has no "
                             "data_parallel_sharding_strategy (Megatron-LM's default is no_shard); allowed: a block "
                             f"that prints it as {FSDP_PRICED_STRATEGY}, the strategy the step model prices")
    strategy = args["data_parallel_sharding_strategy"]
    if strategy != FSDP_PRICED_STRATEGY:
        raise CommbenchError(f"{log}: ran with Megatron-FSDP data_parallel_sharding_strategy={strategy!r}, which the "
                             f"step model does not price; allowed: {FSDP_PRICED_STRATEGY} (ZeRO-3, parameters "
                             "gathered per layer)")


# megatron/core transformer_config.py recompute_modules: core_attn, moe_act, layernorm, mla_up_proj, mlp, moe,
# shared_experts. The step model's recompute (layout/spec.py RECOMPUTE): "selective" is the attention core with the
# light modules (layout/recompute.py: the table of what each frees, which emit/megatron.py writes them from);
# "mla_up_proj" and "moe_act" alone are their own modes. mlp, moe (the whole MoE block's forward: dispatch, expert
# GEMMs, combine) and shared_experts, or a light module without core_attn beside another, are not.
SELECTIVE_WITH_CORE_ATTN = frozenset({"core_attn", *LIGHT_MODULES})
MEGATRON_DEFAULT_MODULES = ["core_attn"]   # transformer_config.py: recompute_modules None -> ["core_attn"]


def recompute_mode(log: str, args: dict[str, Any]) -> str:
    """The step model's recompute for the logged --recompute-granularity / --recompute-modules, or one line."""
    granularity = args.get("recompute_granularity") or "none"
    if granularity != "selective":
        if granularity not in ("none", "full"):
            raise CommbenchError(f"{log}: recompute_granularity={granularity!r}; allowed: full, selective, None")
        return granularity
    modules = args.get("recompute_modules") or MEGATRON_DEFAULT_MODULES
    if not isinstance(modules, (str, list, tuple)) or not all(isinstance(m, str) for m in modules):
        raise CommbenchError(f"{log}: recompute_modules={modules!r} is invalid: a list of module names (core_attn, "
                             "layernorm, moe_act, mla_up_proj, mlp, moe, shared_experts), as megatron-core reads it")
    modules = [modules] if isinstance(modules, str) else list(modules)
    if (exact := exact_module_set(modules)) is not None:
        return exact
    if "core_attn" in modules and set(modules) <= SELECTIVE_WITH_CORE_ATTN:
        return "selective"
    if len(set(modules)) == 1 and modules[0] in ALONE:
        return modules[0]
    raise CommbenchError(f"{log}: recompute_modules={modules!r}, which the step model does not price; allowed: "
                         "core_attn with any of layernorm, moe_act, mla_up_proj (selective), mla_up_proj or moe_act "
                         f"alone, or a set the recipes run ({', '.join(RECIPE_MODULE_SETS)})")


def exact_module_set(modules: list[str]) -> str | None:
    """The layout recompute mode that runs exactly the logged `modules` (layout/recompute.py module_set_mode: a
    module alone, or a set Megatron-Bridge's recipes run, priced per module), else None (then the selective rule)."""
    try:
        mode = module_set_mode(modules)
    except ValueError:
        return None
    return mode if mode != "none" else None


# Megatron-Core token dispatchers (moe_token_dispatcher_type; TransformerConfig default allgather): the step model
# prices alltoall and flex (DeepEP / HybridEP); allgather gathers every token over the EP group, far more traffic
PRICED_DISPATCHERS = ("alltoall", "flex")


def dispatcher(log: str, args: dict[str, Any]) -> str:
    """The logged MoE token dispatcher, or one line for one the step model does not price (a dense run, num_experts
    None: alltoall, unused)."""
    if "num_experts" in args and not args["num_experts"]:   # printed None: a dense run, the dispatcher unused
        return "alltoall"
    kind = args.get("moe_token_dispatcher_type")
    if kind is None and not args.get("num_experts"):   # an excerpt that prints neither: nothing to check
        return "alltoall"
    if kind is None:
        raise CommbenchError(f"{log}: an MoE run whose arguments block has no moe_token_dispatcher_type (Megatron-"
                             "Core's default is allgather); allowed: a block that prints alltoall or flex")
    if kind not in PRICED_DISPATCHERS:
        raise CommbenchError(f"{log}: ran with moe_token_dispatcher_type={kind!r}, which the step model does not "
                             f"price; allowed: {', '.join(PRICED_DISPATCHERS)}")
    return kind


def recompute_priced_note(args: dict[str, Any], model_name: str) -> str:
    """'' unless a selective run's modules free other saved tensors than the set the step model's "selective"
    recomputes for the model (layout/recompute.py: recompute_modules, as emit/megatron.py emits them, and what each
    frees on the model's layer specs, which memory.py drops; a module that frees nothing there, layernorm on a dense
    GQA model, changes nothing priced); then a note saying the row is priced as that set: the step model has no
    recompute of a subset (layout RECOMPUTE), so a run that recomputed less is charged more recompute time and less
    activation memory than it ran."""
    from commbench.planner.calibrate.published import _zoo_name
    from commbench.planner.layout.recompute import frees, recompute_modules
    from commbench.planner.models.zoo import load_model
    if (args.get("recompute_granularity") or "none") != "selective":
        return ""
    name = _zoo_name(model_name)
    if name is None:   # a model outside the zoo: not modelled, nothing priced
        return ""
    logged = args.get("recompute_modules")
    modules = [logged] if isinstance(logged, str) else list(logged or MEGATRON_DEFAULT_MODULES)
    model = load_model(name)
    priced = recompute_modules(model)
    if frees(model, modules) == frees(model, priced) or exact_module_set(modules) is not None:
        return ""
    said = f"recompute_modules={logged!r}" + (" (megatron-core's default: ['core_attn'], transformer_config.py)"
                                               if not logged else "")
    return (f"{said} priced as the step model's selective recompute, which recomputes {', '.join(priced)}: it has "
            f"no recompute of {', '.join(modules)} alone, so this row is charged that set's recompute time and "
            "activation memory")


def capacity_factor(log: str, value: Any) -> float | None:
    """The logged --moe-expert-capacity-factor: None (dropless), or a number; a negative one is None too
    (core_v0.16.1 transformer_config.py __post_init__: "if self.moe_expert_capacity_factor < 0: ... = None").
    Anything else (a word, a list) is one line naming the argument."""
    if value in (None, "None"):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CommbenchError(f"{log}: moe_expert_capacity_factor={value!r} is invalid: a number (a negative one or "
                             "None: dropless), as megatron-core reads it")
    return None if value < 0 else float(value)


def check_moe_capacity(log: str, args: dict[str, Any], model_name: str) -> None:
    """One line for drop-and-pad or token-dropping MoE the step model does not price: it prices dropless MoE (the
    expert GEMMs and all-to-all at the routed tokens) and the capacity factor the model's architecture states (what
    plan emits, emit/megatron_arch.py); --moe-pad-expert-input-to-capacity pads every expert to capacity (megatron-core
    token_dispatcher.py), which no plan emits."""
    from commbench.planner.calibrate.published import _zoo_name
    from commbench.planner.models.zoo import load_model
    factor = capacity_factor(log, args.get("moe_expert_capacity_factor"))
    if args.get("moe_pad_expert_input_to_capacity"):
        raise CommbenchError(f"{log}: ran with moe_pad_expert_input_to_capacity=True (moe_expert_capacity_factor="
                             f"{factor!r}): every expert's input padded to its capacity, which the step model does not "
                             "price (it prices dropless MoE at the routed tokens); allowed: "
                             "moe_pad_expert_input_to_capacity False")
    if factor is None or not args.get("num_experts", True):
        return
    name = _zoo_name(model_name)
    stated = load_model(name).architecture.capacity_factor if name is not None else None
    if stated is None:   # a model outside the zoo: not modelled
        return
    if factor != float(stated or 0.0):
        raise CommbenchError(f"{log}: ran with moe_expert_capacity_factor={factor!r}, which the step model does not "
                             f"price (it prices {model_name}'s MoE " + (f"at capacity factor {stated:g}" if stated else
                                                                       "dropless, at the routed tokens")
                             + "); allowed: moe_expert_capacity_factor " + (f"{stated:g}" if stated else "None"))


def check_optimizer_instances(log: str, args: dict[str, Any]) -> None:
    """One line for --num-distributed-optimizer-instances > 1 without Megatron-FSDP: megatron-core reduce-scatters
    within an instance and all-reduces the shards across instances (core/distributed/param_and_grad_buffer.py), a
    second collective the step model prices only as Megatron-FSDP's HSDP (layout fsdp_replicas, rule hsdp)."""
    instances = args.get("num_distributed_optimizer_instances")
    if args.get("use_megatron_fsdp") or args.get("use_custom_fsdp") or instances in (None, "None"):
        return
    if _whole(log, "num_distributed_optimizer_instances", instances) > 1:
        raise CommbenchError(f"{log}: ran with num_distributed_optimizer_instances={instances!r} without Megatron-FSDP: "
                             "gradients reduce-scattered within an instance and all-reduced across instances, which "
                             "the step model prices only for Megatron-FSDP (HSDP); allowed: 1, or the run with "
                             "use_megatron_fsdp")


def dp_overlap(log: str, args: dict[str, Any]) -> bool:
    """The step model's dp_overlap for the logged --overlap-grad-reduce / --overlap-param-gather, or one line.
    dp_overlap hides both the gradient reduce-scatter and, where parameters are gathered (the distributed optimizer or
    Megatron-FSDP), their all-gather (step/dp_sync.py, step/fsdp.py); emit/megatron.py writes it as both flags
    (--overlap-param-gather with the distributed optimizer). Megatron-LM runs --overlap-param-gather only with the
    distributed optimizer or Megatron-FSDP and with --overlap-grad-reduce (core_v0.16.1 arguments.py validate_args).
    Without a parameter gather, overlap_grad_reduce alone says it. With one, a run that overlaps the reduce-scatter
    and not the gather has no form in the step model (it would hide the gather it ran exposed): refused, as is a
    block that does not print overlap_param_gather."""
    grads = bool(args.get("overlap_grad_reduce"))
    gathers = bool(args.get("use_distributed_optimizer") or args.get("use_megatron_fsdp")
                   or args.get("use_custom_fsdp"))
    if not gathers:
        return grads
    if grads and "overlap_param_gather" not in args:
        raise CommbenchError(f"{log}: ran with overlap_grad_reduce=True and a parameter gather (distributed optimizer "
                             "or Megatron-FSDP) but its arguments block has no overlap_param_gather (Megatron-LM's "
                             "default False); allowed: a block that prints it")
    params = bool(args.get("overlap_param_gather"))
    if grads != params:
        raise CommbenchError(f"{log}: ran with overlap_grad_reduce={args.get('overlap_grad_reduce')!r} and "
                             f"overlap_param_gather={args.get('overlap_param_gather')!r}: the step model's DP overlap "
                             "hides the gradient reduce-scatter and the parameter all-gather together, and has no "
                             "form that overlaps one of them; allowed: both True or both False")
    return grads


# Megatron-LM --cp-comm-type (core_v0.16.1 arguments.py, default ['p2p'], one per layer or one for all): p2p (the ring),
# a2a, allgather, a2a+p2p. The step model prices the ring, and all-to-all CP only for attention with sinks
# (ModelSpec.all_to_all_cp: gpt-oss, as Megatron-Bridge runs it; step/cp_comm.py a2a_cp_s); the rest it has no price
# for, and a sinks model's ring Transformer Engine refuses.
def check_cp_comm(log: str, args: dict[str, Any], model_name: str, cp: int) -> None:
    """One line for a context-parallel run whose --cp-comm-type is not the one the step model prices for the model."""
    from commbench.planner.calibrate.published import _zoo_name
    from commbench.planner.models.zoo import load_model
    logged = args.get("cp_comm_type")
    name = _zoo_name(model_name)
    if cp <= 1 or logged is None or name is None:   # no CP, not printed (older blocks: the ring), or not modelled
        return
    kinds = [logged] if isinstance(logged, str) else list(logged) if isinstance(logged, (list, tuple)) else [logged]
    priced = "a2a" if load_model(name).all_to_all_cp else "p2p"
    if set(kinds) != {priced}:
        what = ("all-to-all CP (a2a), as Megatron-Bridge runs attention with sinks" if priced == "a2a" else
                "the ring (p2p); all-to-all CP only for attention with sinks (gpt-oss)")
        raise CommbenchError(f"{log}: ran with cp_comm_type={logged!r} at context_parallel_size={cp}, which the step "
                             f"model does not price for {model_name}: it prices {what}; allowed: cp_comm_type "
                             f"['{priced}']")


# --moe-flex-dispatcher-backend (core_v0.16.1 arguments.py, default deepep) or, before it, --moe-enable-deepep
def flex_backend_of(args: dict[str, Any]) -> str | None:
    """The flex dispatcher backend a log ran ('deepep' or 'hybridep'), None where its block prints neither."""
    backend = args.get("moe_flex_dispatcher_backend")
    if backend is None and args.get("moe_enable_deepep"):
        return "deepep"
    return backend
