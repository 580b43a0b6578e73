"""The Megatron-LM features a log states that the step model prices only in some of their settings: the
Megatron-FSDP sharding strategy, --recompute-modules and the MoE token dispatcher. A setting it does not price is
one line naming the argument, its value and what is allowed (as use_torch_fsdp2 is), never priced as another."""

from __future__ import annotations

from typing import Any

from commbench.errors import CommbenchError

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
# norms, activation functions and MLA up-projections (the set emit/megatron.py recompute_modules writes: core_attn
# plus any of these); "mla_up_proj" and "moe_act" alone are their own modes. mlp, moe (the whole MoE block's forward:
# dispatch, expert GEMMs, combine) and shared_experts, or a light module without core_attn beside another, are not.
SELECTIVE_WITH_CORE_ATTN = frozenset({"core_attn", "layernorm", "moe_act", "mla_up_proj"})
ALONE = ("mla_up_proj", "moe_act")
MEGATRON_DEFAULT_MODULES = ["core_attn"]   # transformer_config.py: recompute_modules None -> ["core_attn"]


def recompute_mode(log: str, args: dict[str, Any]) -> str:
    """The step model's recompute for the logged --recompute-granularity / --recompute-modules, or one line."""
    granularity = args.get("recompute_granularity") or "none"
    if granularity != "selective":
        if granularity not in ("none", "full"):
            raise CommbenchError(f"{log}: recompute_granularity={granularity!r}; allowed: full, selective, None")
        return granularity
    modules = args.get("recompute_modules") or MEGATRON_DEFAULT_MODULES
    modules = [modules] if isinstance(modules, str) else list(modules)
    if "core_attn" in modules and set(modules) <= SELECTIVE_WITH_CORE_ATTN:
        return "selective"
    if len(set(modules)) == 1 and modules[0] in ALONE:
        return modules[0]
    raise CommbenchError(f"{log}: recompute_modules={modules!r}, which the step model does not price; allowed: "
                         "core_attn with any of layernorm, moe_act, mla_up_proj (selective), or mla_up_proj or "
                         "moe_act alone")


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
