"""plan.json for one pinned layout (`commbench plan --layout tp=..,pp=..,vp=..,ep=..,mbs=..`).

Same schema as a searched plan (commbench/data/schemas/plan.schema.json, `mode` says which) and the
same emitter sections (planner.emit); the search-only parts (top, pareto, explanation, sensitivity,
search statistics) are absent. Every figure is predicted.
"""

from __future__ import annotations

from typing import Any

from commbench.planner.emit.plan import (PLAN_FORMAT, PLAN_VERSION, calibration_software_line,
                                         calibration_step_model_line, efficiency_terms,
                                         fabric_lines, flops_count_line, framework_assumptions, framework_record, layout_dict, megatron_section,
                                         plan_inputs, predicted_section, rack_lines)
from commbench.planner.emit.torchtitan import DEFAULT_TORCHTITAN, torchtitan_plan
from commbench.planner.layout.precision import checkpoint_note
from commbench.planner.layout.recipe_model import sequence_length
from commbench.planner.layout.spec import Layout
from commbench.planner.layout.placement import gpus_per_rack, place


UNFIT_OPTION = "--allow-unfit"   # plan's opt-in to write the launch of a layout predicted not to fit


def unfit_line(predicted: dict[str, Any]) -> str | None:
    """Why a layout predicted not to fit is no launch, in one line naming the predicted and available GB per GPU
    (`predicted`: a step-model row or plan.json's predicted section); None where it fits."""
    if predicted.get("fits", True):
        return None
    total, capacity = float(predicted["mem_total_bytes"]) / 1e9, float(predicted["mem_capacity_bytes"]) / 1e9
    rank = int(predicted.get("mem_pipeline_rank", 0) or 0)
    where = f" on pipeline rank {rank}" if rank else ""
    if total > capacity:
        why = f"predicted {total:,.1f} GB per GPU{where} against the {capacity:,.1f} GB of HBM CUDA exposes"
    else:
        host = float(predicted.get("mem_host_offload_bytes", 0.0)) / 1e9
        why = f"its CPU-offloaded activations ({host:,.1f} GB per GPU) exceed the host memory share of a GPU"
    return f"this layout does not fit (predicted): {why}; a launch of it would run out of memory"


def pinned_plan_document(req, layout: Layout, row: dict[str, Any], *, system: str, flex_backend: str = "deepep",
                         torchtitan_version: str = DEFAULT_TORCHTITAN, calibration_file: str | None = None,
                         calibration_shipped_terms: tuple[str, ...] = (),
                         calibration_other_gpu_terms: tuple[str, ...] = ()) -> dict[str, Any]:
    """The plan of `layout`, the pinned layout of `req` (a SearchRequest) as best_for_pins chose its flags, and its
    step model `row`: `inputs` as a search records them (plan.plan_inputs) and the search's Software line
    (explain.software_line) among the assumptions."""
    from commbench.planner.search.explain import software_line
    model, fabric, num_gpus, seq_len = req.model, req.fabric, req.num_gpus, req.seq_len
    framework, moe_imbalance = req.framework, req.moe_imbalance
    seq_len_used, seq_note = sequence_length(model, seq_len)
    per_rack = gpus_per_rack(num_gpus, int(fabric.domain_size))
    placement = place(layout, num_gpus, per_rack)
    megatron = megatron_section(layout, model, gpu_name=fabric.gpu.name, fabric_name=fabric.name,
                                domain_size=int(fabric.domain_size), seq_len=seq_len, flex_backend=flex_backend,
                                release=req.software, release_asked=bool(req.software_asked),
                                loss=req.loss, fits=bool(row["fits"]),
                                placement_lines=rack_lines(placement, int(fabric.domain_size), layout, flex_backend))
    unfit = unfit_line(row)
    if unfit:   # launch.env, the one launch file with comments, says it too (written only with UNFIT_OPTION)
        head, _, rest = megatron["launch_env_text"].partition("\n")
        megatron["launch_env_text"] = f"{head}\n# WARNING: {unfit}\n{rest}"
    torchtitan = torchtitan_plan(layout, model, seq_len=seq_len, version=torchtitan_version, framework=framework,
                                gpu=fabric.gpu)
    return {
        "format": PLAN_FORMAT, "version": PLAN_VERSION, "kind": "predicted", "mode": "pinned",
        "inputs": plan_inputs(req, system=system, pins=layout_dict(layout), searched=False,
                              calibration_file=calibration_file, calibration_shipped_terms=calibration_shipped_terms,
                              calibration_other_gpu_terms=calibration_other_gpu_terms),
        "assumptions": ([f"WARNING: {unfit}"] if unfit else []) + ([seq_note] if seq_note else [])
                       + [f"routing: busiest EP rank receives {moe_imbalance:g}x the mean tokens (1 = perfectly balanced)",
                        f"placement: {per_rack} GPUs per scale-up domain, {placement.num_racks} domain(s); ranks ordered "
                        "tp-cp-dp-pp and etp-ep-edp-pp (Megatron-Core)",
                        *rack_lines(placement, int(fabric.domain_size), layout, flex_backend),
                        efficiency_terms(calibration_file, calibration_shipped_terms, calibration_other_gpu_terms),
                        *calibration_step_model_line(calibration_file),
                        *calibration_software_line(calibration_file, req),
                        software_line(req)]
                       + fabric_lines(fabric)
                       + list(megatron["notes"])
                       + framework_assumptions(framework, model, layout)
                       + [flops_count_line(framework, model, layout, seq_len, fabric.gpu, torchtitan_version)]
                       + [n for n in [checkpoint_note(model, layout.precision)] if n],
        "layout": layout_dict(layout),
        "predicted": predicted_section(row, layout, gpus_per_rack=per_rack, num_gpus=num_gpus),
        "placement": {"gpus_per_rack": placement.gpus_per_rack, "num_racks": placement.num_racks,
                      "summary": placement.summary(), "groups": placement.groups,
                      "rack_of_rank": [placement.rack_of(r) for r in range(num_gpus)]},
        "framework": framework_record(framework, torchtitan),
        "emitters": {"megatron": megatron["target"], "torchtitan": torchtitan["version"]},
        "megatron_args": megatron.get("args", []),
        "megatron": megatron,
        "torchtitan": torchtitan,
    }
