"""What Megatron-LM runs of a feature on a hybrid (MambaModel) model, by megatron-core release: one rule that plan's
pin checks (search/frameworks.py megatron_hybrid_refusal) and calibration rows (calibrate/published.py
hybrid_run_features) both apply, so a row is read by the rules a plan is made by."""

from __future__ import annotations

from dataclasses import dataclass

from commbench.planner.models.spec import ModelSpec

# A hybrid model (a layer pattern) is MambaModel under Megatron-LM core_v0.16.1 (pretrain_mamba.py, emit/hybrid.py).
# --overlap-moe-expert-parallel-comm runs the combined 1F1B schedule (schedules.py forward_backward_no_pipelining /
# the interleaved schedule -> combined_1f1b.py combined_forward_backward_step), which looks up the model's
# build_schedule_plan (only GPTModel has one: "only GPTModel is supported for EP A2A overlapping") and calls
# forward_step(..., return_schedule_plan=True), which pretrain_mamba.py's forward_step does not take.
MEGATRON_HYBRID_NO_A2A_OVERLAP = ("megatron-core runs --overlap-moe-expert-parallel-comm only for a GPTModel (the combined "
                                  "1F1B schedule asserts one: pipeline_parallel/combined_1f1b.py:333-338 at core_v0.16.1, "
                                  ":375 at core_v0.18.0; at 0.19.0 it calls build_schedule_plan, which pretrain_mamba.py's "
                                  "MambaModel lacks)")
# megatron-core 0.16.1 checkpoints whole layers only in TransformerBlock._checkpointed_forward (transformer_block.py,
# recompute_granularity 'full') and the MTP block; MambaStack.forward (ssm/mamba_block.py) is a plain loop over its
# layers, so --recompute-granularity full keeps every activation of a hybrid model.
MEGATRON_HYBRID_NO_FULL_RECOMPUTE = ("megatron-core's MambaStack does no activation checkpointing through 0.17.1 "
                                     "(ssm/mamba_block.py:319-341 at core_v0.16.1: a plain loop; only TransformerBlock "
                                     "runs recompute_granularity 'full'; the hybrid block does from 0.18.0), so a "
                                     "hybrid model keeps every activation")
# megatron-core 0.16.1 offloads activations (--cpu-offloading-num-layers) only inside TransformerBlock: its __init__
# creates the offload context and sets config._cpu_offloading_context (transformer_block.py:303-323), inside which
# the tensor-parallel layers offload (tensor_parallel/layers.py:1013, 1265). MambaStack (ssm/mamba_block.py) has no
# offload code and its forward is a plain loop over its layers (mamba_block.py:319-341): validate_args accepts the
# flag and a hybrid model offloads nothing (found by an outside probe).
MEGATRON_HYBRID_NO_OFFLOAD = ("megatron-core 0.16.1's MambaStack offloads no activations (only TransformerBlock "
                              "creates the CPU offloading context), so a hybrid model keeps every activation on the GPU")


# The first megatron-core whose hybrid block checkpoints whole layers under --recompute-granularity full: core_v0.18.0
# megatron/core/models/hybrid/hybrid_block.py:308 (checkpointed_forward when recompute_granularity == 'full'); through
# core_v0.17.1 MambaStack.forward (ssm/mamba_block.py:319-341 at core_v0.16.1) is a plain loop and Megatron-LM's
# validate_args lets the flag through: the run trains, keeping every activation. The activation offload has no code in
# either block through core_v0.18.0 (found by an outside probe); --overlap-moe-expert-parallel-comm asserts a GPTModel
# (combined_1f1b.py:333-338 at core_v0.16.1, :375 at core_v0.18.0) or, at core_v0.19.0, looks up build_schedule_plan,
# which only GPTModel has: the run stops before its first iteration at every release.
HYBRID_FULL_RECOMPUTE_FROM_CORE = (0, 18)


@dataclass(frozen=True)
class HybridUnrun:
    """A Megatron-LM feature a hybrid (MambaModel) run asked for that its megatron-core does not run: `fails` (the
    run stops before training) or `ignored` (it trains without it); `ran`: the layout fields it ran with instead."""
    what: str
    kind: str
    why: str
    ran: dict


def megatron_hybrid_unrun(model: ModelSpec, fields: dict[str, object],
                          core: tuple[int, int] | None = None) -> list[HybridUnrun]:
    """What of `fields` (moe_a2a_overlap, ep, recompute, recompute_layers, cpu_offload_layers) Megatron-LM at
    megatron-core `core` (None: the plans' core_v0.16.1) does not run on `model`; [] for a model that is not hybrid.
    One rule for a pinned plan (megatron_hybrid_refusal refuses each) and a calibration row (published.py prices what
    ran where the feature is ignored, refuses a run that cannot have run)."""
    if not model.is_hybrid:
        return []
    out = []
    if fields.get("moe_a2a_overlap") and int(fields.get("ep", 2) or 1) > 1:
        out.append(HybridUnrun("moe_a2a_overlap=True", "fails", MEGATRON_HYBRID_NO_A2A_OVERLAP, {}))
    full = fields.get("recompute") == "full" or int(fields.get("recompute_layers", 0) or 0) > 0
    if full and (core is None or tuple(core) < HYBRID_FULL_RECOMPUTE_FROM_CORE):
        what = (f"recompute_layers={fields['recompute_layers']}" if fields.get("recompute") != "full"
                else "recompute='full'")
        out.append(HybridUnrun(what, "ignored", MEGATRON_HYBRID_NO_FULL_RECOMPUTE,
                               {"recompute": "none", "recompute_layers": 0}))
    if int(fields.get("cpu_offload_layers", 0) or 0) > 0:
        out.append(HybridUnrun(f"cpu_offload_layers={fields['cpu_offload_layers']}", "ignored",
                               MEGATRON_HYBRID_NO_OFFLOAD, {"cpu_offload_layers": 0}))
    return out
