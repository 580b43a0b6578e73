"""Training-step model of a parallel layout: model zoo, layouts, step time, memory (all predicted).

API (stable; the autotuner builds on it):

    from commbench.costmodel import load_preset
    from commbench.planner import (load_model, model_names, flops_per_token, param_counts,
                                   Layout, LayoutArrays, parse_layout, check_layout,
                                   layout_violations, evaluate_layouts, StepBreakdown)

    model = load_model("deepseek-v3")                 # ModelSpec; load_model(name, model_file=path)
    flops_per_token(model)                            # Megatron model FLOPs / token (FLOPS.md)
    fabric = load_preset("gb300-nvl72", num_gpus=256) # the "system": gpu datasheet + fabric curves
    layout = parse_layout("tp=1,pp=2,vp=8,ep=32,mbs=1,gbs=4096,precision=mxfp8", num_gpus=256)
    check_layout(model, layout, 256)                  # CommbenchError naming the broken rule

    arrays = LayoutArrays.from_columns(tp=tp_arr, pp=pp_arr, ep=ep_arr, dp=dp_arr, ...)  # broadcasts
    bd = evaluate_layouts(model, fabric, arrays)      # StepBreakdown of numpy arrays, one per layout
    bd.step_s, bd.tokens_per_s_per_gpu, bd.model_tflops_per_gpu, bd.mfu, bd.fits, bd.valid,
    bd.compute_s, bd.{tp,ep,cp,pp}_{total,exposed}_s, bd.dp_{dense,expert}_{rs,ag}_{total,exposed}_s,
    bd.bubble_s, bd.optimizer_s, bd.mem_{weights,grads,optimizer,activations,reserve,total,capacity}_bytes
    bd.row(i) -> dict of plain values;  arrays.layout(i) -> Layout

Layout fields: tp pp vp ep etp(None = tp) cp dp mbs gbs sequence_parallel recompute(none|selective|full)
dispatcher(alltoall|flex) precision(bf16|fp8|mxfp8|nvfp4) distributed_optimizer tp_comm_overlap
moe_a2a_overlap dp_overlap fp8_attention fused_moe cuda_graph(none|layer|full) cuda_graph_scope (per-layer
graphs' modules, layout.graph_scope) fsdp fsdp_replicas (HSDP
replicas; 1 = FSDP over all of DP). Validation rules: layout.spec.RULES (one bit each in layout_violations).
Efficiency terms: step.terms.Calibration / CALIBRATED (fitted; see step/terms.py).
Layer split: layout.split.choose_split(model, pp, vp) -> PipelineSplit (stages, Megatron flags), the split
the step model charges; emit.megatron / emit.torchtitan turn a layout into launchable framework inputs.

Stages, each a subpackage that imports only the ones before it (tests/test_layering.py):
models -> layout -> step -> search -> emit; calibrate sits beside search (imports models/layout/step).
"""

from commbench.planner.step.terms import CALIBRATED, Calibration
from commbench.planner.layout.spec import (
    DISPATCHERS,
    PRECISIONS,
    RECOMPUTE,
    RULES,
    Layout,
    LayoutArrays,
    check_layout,
    layout_violations,
    parse_layout,
)
from commbench.planner.models.spec import ModelSpec
from commbench.planner.models.counts import active_params, flops_breakdown, flops_per_token, param_counts
from commbench.planner.models.zoo import load_model, model_names
from commbench.planner.step.evaluate import StepBreakdown, evaluate_layouts

__all__ = [
    "CALIBRATED", "Calibration", "DISPATCHERS", "PRECISIONS", "RECOMPUTE", "RULES", "Layout", "LayoutArrays",
    "ModelSpec", "StepBreakdown", "active_params", "check_layout", "evaluate_layouts", "flops_breakdown",
    "flops_per_token", "layout_violations", "load_model", "model_names", "param_counts", "parse_layout",
]
