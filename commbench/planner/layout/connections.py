"""CUDA_DEVICE_MAX_CONNECTIONS (the device's hardware work queues) a Megatron-LM launch of a layout needs, and
which overlaps one setting can serve: a launch has one value, and on Hopper TP comm overlap and EP all-to-all
overlap (or Megatron-FSDP) want different ones.

What the sources say (Megatron-LM core_v0.16.1 megatron/training/arguments.py, validate_args):
- Megatron-FSDP asserts the variable is not 1, on every GPU ("FSDP always requires CUDA_DEVICE_MAX_CONNECTIONS
  value large than one", arguments.py:687-688).
- Hopper and older (compute capability < 10) with TP or CP > 1 (arguments.py:927-953): with Megatron-FSDP, a
  warning (sequence parallelism wants 1, FSDP more: l.930-939); else with --overlap-moe-expert-parallel-comm, a
  warning that the EP overlap "requires setting a larger CUDA_DEVICE_MAX_CONNECTIONS" (l.940-948); else an
  assertion that it is 1 (l.949-953). From Blackwell on there is no requirement (l.929: "no longer exists since
  the Blackwell architecture").
- EP all-to-all overlap needs more than 1 on every GPU (megatron-core 0.16.1 transformer/moe/README.md:437,
  "Requirements for EP A2A Overlap: expert_model_parallel_size > 1, CUDA_DEVICE_MAX_CONNECTIONS > 1").
- The value above 1 (Megatron-Bridge v0.6.0 scripts/performance/utils/overrides.py:255-262): 32 on Blackwell
  (b200, b300, gb200, gb300, vr200), 32 with the flex dispatcher (DeepEP/HybridEP), else 8; 1 only for TP/CP > 1
  without EP overlap on Hopper. Its recipes agree: perf_recipes/qwen/h100/qwen3_moe.py (Qwen3-235B-A22B, TP2 PP8
  VP4 EP32 with EP overlap) sets 8 with the alltoall dispatcher (l.158, 211) and 32 with HybridEP (l.523), every
  Blackwell perf recipe sets 32.
- TP comm overlap on Hopper needs 1: Megatron-Bridge's performance guide (docs/fern/versions/nightly/pages/
  performance-guide.mdx:219-221, "Common reason for TP comm overlap failure at Hopper ... CUDA_DEVICE_MAX_
  CONNECTIONS=1 should be set. Otherwise, TP communication kernels can be scheduled at the end of GEMM");
  Transformer Engine warns the same for TP > 1 at any other value (pytorch/module/base.py:1670-1685,
  set_nccl_overlap_warning_if_tp). The Qwen3-235B-A22B H100 recipes above run EP overlap at 8 or 32 with
  tp_comm_overlap=False (l.147, 200, 511). So a Hopper launch above 1 (Megatron-FSDP, EP overlap) gets no
  --tp-comm-overlap, and the step model charges its TP communication exposed.
"""

from __future__ import annotations

import numpy as np

HOPPER_OR_OLDER = ("h100", "h200", "h800", "a100")  # compute capability < 10 (datasheets in hardware.toml)
BRIDGE_OVERRIDES = "Megatron-Bridge v0.6.0 scripts/performance/utils/overrides.py:255-262"
MLM_ARGS = "Megatron-LM core_v0.16.1 arguments.py"
TP_OVERLAP_NEEDS_ONE = ("Megatron-Bridge v0.6.0 performance guide: \"Common reason for TP comm overlap failure at "
                        "Hopper\"; Transformer Engine pytorch/module/base.py set_nccl_overlap_warning_if_tp; Megatron-"
                        "Bridge's H100 Qwen3-235B-A22B recipes run EP overlap at 8 or 32 with tp_comm_overlap=False")


def before_blackwell(gpu_name: str | None) -> bool:
    """Compute capability below 10 (Hopper, Ampere), where Megatron's CUDA_DEVICE_MAX_CONNECTIONS rules apply."""
    return str(gpu_name or "").lower() in HOPPER_OR_OLDER


def needs_more_than_one(fsdp, moe_a2a_overlap):
    """Where a launch must not run at 1: Megatron-FSDP (asserted) or EP all-to-all overlap (MoE README)."""
    return np.logical_or(fsdp, moe_a2a_overlap)


def tp_overlap_runs(gpu_name: str | None, tp, fsdp, moe_a2a_overlap):
    """Whether TP comm overlap can run as overlapped: anywhere but on Hopper at a setting above 1 (the module
    docstring: Megatron-Bridge's performance guide, Transformer Engine's warning)."""
    if not before_blackwell(gpu_name):
        return np.ones(np.shape(tp), dtype=bool) if np.ndim(tp) else True
    return np.logical_not(np.logical_and(np.asarray(tp) > 1, needs_more_than_one(fsdp, moe_a2a_overlap)))


def device_max_connections(*, gpu_name: str, tp: int, cp: int, fsdp: bool, moe_a2a_overlap: bool,
                           flex_dispatcher: bool) -> tuple[str | None, str]:
    """(value, why) of CUDA_DEVICE_MAX_CONNECTIONS for a Megatron-LM launch (None: no value needed)."""
    above_one = "32" if (flex_dispatcher or not before_blackwell(gpu_name)) else "8"
    value_src = (f"{above_one}: " + ("Megatron-Bridge's value on Blackwell" if not before_blackwell(gpu_name) else
                                     "Megatron-Bridge's value with the flex dispatcher (DeepEP/HybridEP)"
                                     if flex_dispatcher else "Megatron-Bridge's value with the alltoall dispatcher")
                 + f" ({BRIDGE_OVERRIDES})")
    if fsdp:
        return above_one, (f"Megatron-FSDP: validate_args refuses 1 on every GPU ({MLM_ARGS}:687-688), which launch "
                           f"scripts often export; {value_src}")
    if moe_a2a_overlap:
        tp_cp = (" and TP/CP on Hopper: Megatron only warns there (arguments.py:940-948) and wants the larger value "
                 "for the EP overlap; TP comm overlap, which needs 1 on Hopper, is off"
                 if before_blackwell(gpu_name) and (tp > 1 or cp > 1) else "")
        return above_one, ("EP all-to-all overlap (--overlap-moe-expert-parallel-comm) needs more than 1 (megatron-core "
                           f"0.16.1 transformer/moe/README.md:437){tp_cp}; {value_src}")
    if before_blackwell(gpu_name):
        if tp > 1 or cp > 1:
            return "1", (f"{gpu_name} is Hopper or older and the layout uses TP/CP without EP overlap or Megatron-FSDP: "
                         f"validate_args asserts 1 ({MLM_ARGS}:949-953)")
        return None, (f"{gpu_name}, TP = CP = 1, no EP overlap, no Megatron-FSDP: Megatron requires no value and nothing "
                      "the plan charges depends on it")
    return above_one, (f"{gpu_name} is Blackwell: Megatron's requirement of 1 is Hopper's ({MLM_ARGS}:929), and "
                       f"an inherited 1 (Hopper's setting, which launch scripts export) puts every stream in one hardware queue; "
                       f"{value_src}, as every Blackwell performance recipe of that release sets it")
