"""A --layout pin that one layout rule or framework check refuses, named before the search: the search would
otherwise find no layout and blame the rule most rows break (world, expert_fold) or memory ("no layout fits ... up to
65536"), not the one the pins break (probe P4, session 45).

Pure functions of the pins; frameworks.framework_pins and SearchRequest call them before any other pin check.
"""

from __future__ import annotations

from commbench.planner.layout.spec import RULES

# TorchTitan 0.3.0 trainer.py:179-207 (_validate_cuda_graphs): its whole-step graph (training.disable_cuda_graphs
# False) is refused with pipeline_parallel_degree > 1, and with expert_parallel_degree > 1 unless every token
# dispatcher is MinimalAsyncEP or HybridEP with non_blocking_capacity_factor; the shipped configs' all-to-all one
# synchronises with the CPU.
TITAN_GRAPH_RULE = ("TorchTitan 0.3.0 refuses its whole-step CUDA graph with pipeline parallelism ('CUDA graphs do not "
                    "support pipeline parallelism yet') and with EP > 1 under the all-to-all token dispatcher its "
                    "configs run, which synchronises with the CPU (trainer.py:179-207 _validate_cuda_graphs)")

# What the layout's fsdp means under TorchTitan, which runs FSDP2 (data_parallel_shard_degree) at every layout:
# search/frameworks.py TITAN_DP_WITHOUT_PP.
TITAN_FSDP_MEANING = ("TorchTitan 0.3.0 runs FSDP2 at every layout, and a layout's fsdp says how it syncs: "
                      "fsdp=true is FSDP2 without PP (parameters gathered every micro-batch, fsdp_replicas > 1: "
                      "HSDP), fsdp=false is FSDP2 under PP (its pipeline stage gathers once a step and "
                      "reduce-scatters at the last micro-batch, charged as the distributed optimizer; emitted as "
                      "data_parallel_shard_degree)")


# The same for a TorchTitan 0.2.2 launch (torchtitan v0.2.2 models/llama3/infra/parallelize.py:324-327 apply_fsdp:
# fsdp_reshard_after_forward "default" reshards after forward only without PP; the TOML commbench writes keeps it).
TITAN_FSDP_MEANING_02 = ("TorchTitan 0.2.2 runs FSDP2 (data_parallel_shard_degree), and a layout's fsdp says how it "
                         "syncs: fsdp=true is FSDP2 without PP (resharding after forward, parameters gathered every "
                         "micro-batch: models/llama3/infra/parallelize.py:324-327), fsdp=false is FSDP2 under PP "
                         "(gathered once a step, charged as the distributed optimizer)")
TITAN_NO_GRAPH_02 = "TorchTitan 0.2.2 has no CUDA-graph option (config/job_config.py; its TOML runs none)"


def _int(pins: dict[str, object], key: str, default: int = 1) -> int:
    return int(pins.get(key, default) or default)


def fsdp_pin_refusal(framework: str, pins: dict[str, object], torchtitan_version: str = "0.3") -> str | None:
    """fsdp (or HSDP's fsdp_replicas > 1) pinned with pp > 1 or without the distributed optimizer: layout rule fsdp,
    which every row would break, so the search found none to fit and said memory. None where the pins keep it."""
    fsdp = pins.get("fsdp") is True or (_int(pins, "fsdp_replicas") > 1 and pins.get("fsdp") is not False)
    if not fsdp:
        return None
    what = "fsdp=true" if pins.get("fsdp") is True else f"fsdp_replicas={pins['fsdp_replicas']}"
    if _int(pins, "pp") > 1:
        if framework == "torchtitan" and torchtitan_version == "0.2":
            return (f"{what} with pp={pins['pp']} is invalid with --framework torchtitan --torchtitan-version 0.2: "
                    f"{TITAN_FSDP_MEANING_02}; pin fsdp=false (fsdp_replicas=1) with pp > 1, or pp=1")
        if framework == "torchtitan":
            return (f"{what} with pp={pins['pp']} is invalid with --framework torchtitan: {TITAN_FSDP_MEANING}; "
                    "pin fsdp=false (fsdp_replicas=1) with pp > 1, or pp=1")
        return (f"{what} with pp={pins['pp']} is invalid: layout rule fsdp: {dict(RULES)['fsdp']}; pin pp=1, "
                f"or leave {what} out")
    if pins.get("distributed_optimizer") is False:
        return (f"{what} with distributed_optimizer=false is invalid: layout rule fsdp: {dict(RULES)['fsdp']}; "
                "pin distributed_optimizer=true or fsdp=false")
    return None


def titan_graph_pin_refusal(framework: str, is_moe: bool, pins: dict[str, object],
                            torchtitan_version: str = "0.3") -> str | None:
    """cuda_graph=full pinned with pp > 1, or with ep > 1 for a MoE model, under --framework torchtitan
    (TITAN_GRAPH_RULE): the search kept no row and named another rule. A dense model's ep > 1 breaks rule experts,
    which says so."""
    if framework != "torchtitan" or pins.get("cuda_graph") != "full":
        return None
    if torchtitan_version == "0.2":
        return (f"cuda_graph=full is invalid with --framework torchtitan --torchtitan-version 0.2: {TITAN_NO_GRAPH_02}; "
                "pin cuda_graph=none, or plan with --torchtitan-version 0.3")
    broken = [f"{k}={pins[k]}" for k in ("pp", "ep") if _int(pins, k) > 1 and (k == "pp" or is_moe)]
    if not broken:
        return None
    return (f"cuda_graph=full with {' and '.join(broken)} is invalid with --framework torchtitan: {TITAN_GRAPH_RULE}; "
            "pin cuda_graph=none, or pp=1 and ep=1")


def pin_rule_refusal(framework: str, is_moe: bool, pins: dict[str, object], torchtitan_version: str = "0.3") -> str | None:
    """The first of this module's refusals the pins meet, or None (worded for the TorchTitan release planned for)."""
    return fsdp_pin_refusal(framework, pins, torchtitan_version) or \
        titan_graph_pin_refusal(framework, is_moe, pins, torchtitan_version)
