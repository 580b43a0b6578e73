"""A chosen layout in the forms frameworks take: plan.json, Megatron-LM arguments, TorchTitan config.

- Megatron-LM argument names are those of megatron/training/arguments.py (--tensor-model-parallel-size,
  --num-virtual-stages-per-pipeline-rank, --expert-tensor-parallel-size, --overlap-moe-expert-parallel-comm,
  --delay-wgrad-compute, --moe-flex-dispatcher-backend, ...); `parse_megatron_args` reads them back.
- TorchTitan fields are those of its JobConfig (torchtitan/config/job_config.py): parallelism.*
  (data_parallel_replicate_degree, data_parallel_shard_degree, tensor_parallel_degree,
  pipeline_parallel_degree, pipeline_parallel_schedule, pipeline_parallel_layers_per_stage,
  pipeline_parallel_microbatch_size, context_parallel_degree, expert_parallel_degree,
  expert_tensor_parallel_degree, enable_async_tensor_parallel), training.* (local_batch_size,
  global_batch_size, seq_len), activation_checkpoint.mode.
- plan.json is schema-versioned (`PLAN_FORMAT`, `PLAN_VERSION`); every figure in it is predicted.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
from dataclasses import asdict
from pathlib import Path
from typing import Any

from commbench.errors import CommbenchError, first_line, invalid, read_user_file
from commbench.typed_json import check_fields
from commbench.planner.layout import Layout
from commbench.planner.models import ModelSpec

PLAN_FORMAT = "commbench-plan"
PLAN_VERSION = 1
EMIT_KINDS = ("json", "megatron", "torchtitan")

PRECISION_ARGS = {
    "bf16": [],
    "fp8": ["--fp8-format", "hybrid", "--fp8-recipe", "tensorwise"],
    "mxfp8": ["--fp8-format", "e4m3", "--fp8-recipe", "mxfp8"],
    "nvfp4": ["--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"],
}


def recompute_modules(model: ModelSpec) -> list[str]:
    """Megatron --recompute-modules matching the step model's selective recompute: the attention
    core, norms, activation functions, and MLA's up-projections."""
    mods = ["core_attn", "layernorm"] + (["moe_act"] if model.is_moe else []) + \
        (["mla_up_proj"] if model.attention == "mla" else [])
    return mods


def megatron_args(layout: Layout, model: ModelSpec, *, seq_len: int | None = None,
                  flex_backend: str = "deepep") -> list[str]:
    """Megatron-LM command-line arguments for `layout` (parallelism, batch, overlap, recompute, precision)."""
    a = layout
    out = ["--tensor-model-parallel-size", str(a.tp), "--pipeline-model-parallel-size", str(a.pp)]
    if a.vp > 1:
        out += ["--num-virtual-stages-per-pipeline-rank", str(a.vp)]
    if model.is_moe:
        out += ["--expert-model-parallel-size", str(a.ep), "--expert-tensor-parallel-size", str(a.etp)]
    out += ["--context-parallel-size", str(a.cp)]
    if a.sequence_parallel and a.tp > 1:
        out.append("--sequence-parallel")
    out += ["--micro-batch-size", str(a.mbs), "--global-batch-size", str(a.gbs),
            "--seq-length", str(seq_len or model.seq_len)]
    if a.distributed_optimizer:
        out.append("--use-distributed-optimizer")
    if a.dp_overlap:
        out.append("--overlap-grad-reduce")
        if a.distributed_optimizer:
            out.append("--overlap-param-gather")
    if model.is_moe and a.ep > 1:
        out += ["--moe-token-dispatcher-type", a.dispatcher]
        if a.dispatcher == "flex":
            out += ["--moe-flex-dispatcher-backend", flex_backend]
        if a.moe_a2a_overlap:
            out += ["--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"]
    if a.tp_comm_overlap and a.sequence_parallel and a.tp > 1:
        out.append("--tp-comm-overlap")
    if a.recompute == "selective":
        out += ["--recompute-granularity", "selective", "--recompute-modules", *recompute_modules(model)]
    elif a.recompute == "full":
        out += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    elif a.recompute in ("mla_up_proj", "moe_act"):
        out += ["--recompute-granularity", "selective", "--recompute-modules", a.recompute]
    out += recipe_args(a, model)
    out.append("--bf16")
    return out + PRECISION_ARGS[a.precision]


def recipe_args(a: Layout, model: ModelSpec) -> list[str]:
    """CUDA graphs (per-layer TE graphs or the full iteration), FP8 attention, fused MoE permutes."""
    out: list[str] = []
    if a.cuda_graph == "layer":
        out += ["--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn"] + \
            (["moe_router", "moe_preprocess"] if model.is_moe else [])
    elif a.cuda_graph == "full":
        out += ["--cuda-graph-impl", "local", "--cuda-graph-scope", "full_iteration"]
    if a.fp8_attention:
        out.append("--fp8-dot-product-attention")
    if a.fused_moe and model.is_moe:
        out.append("--moe-permute-fusion")
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="megatron", add_help=False, exit_on_error=False)
    for name in ("tensor-model-parallel-size", "pipeline-model-parallel-size", "num-virtual-stages-per-pipeline-rank",
                 "expert-model-parallel-size", "expert-tensor-parallel-size", "context-parallel-size",
                 "micro-batch-size", "global-batch-size", "seq-length", "recompute-num-layers"):
        p.add_argument(f"--{name}", type=int)
    for name in ("sequence-parallel", "use-distributed-optimizer", "overlap-grad-reduce", "overlap-param-gather",
                 "overlap-moe-expert-parallel-comm", "delay-wgrad-compute", "tp-comm-overlap", "bf16",
                 "fp8-dot-product-attention", "moe-permute-fusion"):
        p.add_argument(f"--{name}", action="store_true")
    for name in ("moe-token-dispatcher-type", "moe-flex-dispatcher-backend", "recompute-granularity",
                 "recompute-method", "fp8-format", "fp8-recipe", "fp4-format", "fp4-recipe"):
        p.add_argument(f"--{name}")
    p.add_argument("--recompute-modules", nargs="+")
    p.add_argument("--cuda-graph-impl")
    p.add_argument("--cuda-graph-scope", nargs="+")
    return p


def _recompute_of(ns) -> str:
    modules = ns.recompute_modules or []
    if ns.recompute_granularity == "selective" and len(modules) == 1 and modules[0] in ("mla_up_proj", "moe_act"):
        return modules[0]
    return ns.recompute_granularity or "none"


def _graph_of(ns) -> str:
    if "full_iteration" in (ns.cuda_graph_scope or []):
        return "full"
    return "layer" if ns.cuda_graph_impl in ("transformer_engine", "local") else "none"


def parse_megatron_args(args: list[str] | str, num_gpus: int) -> Layout:
    """The layout a Megatron-LM argument list describes (the inverse of `megatron_args`)."""
    argv = shlex.split(args) if isinstance(args, str) else list(args)
    try:
        ns, unknown = _parser().parse_known_args(argv)
    except argparse.ArgumentError as exc:
        raise CommbenchError(f"Megatron arguments do not parse: {exc}") from None
    tp, pp, cp = ns.tensor_model_parallel_size or 1, ns.pipeline_model_parallel_size or 1, ns.context_parallel_size or 1
    if num_gpus % (tp * pp * cp):
        raise invalid("gpus", num_gpus, f"a multiple of tp*pp*cp = {tp * pp * cp}")
    precision = "bf16"
    if ns.fp8_recipe == "mxfp8":
        precision = "mxfp8"
    elif ns.fp8_format:
        precision = "fp8"
    elif ns.fp4_recipe == "nvfp4":
        precision = "nvfp4"
    return Layout(tp=tp, pp=pp, vp=ns.num_virtual_stages_per_pipeline_rank or 1,
                  ep=ns.expert_model_parallel_size or 1, etp=ns.expert_tensor_parallel_size or tp, cp=cp,
                  dp=num_gpus // (tp * pp * cp), mbs=ns.micro_batch_size or 1, gbs=ns.global_batch_size or 1,
                  sequence_parallel=ns.sequence_parallel or tp == 1, recompute=_recompute_of(ns),
                  cuda_graph=_graph_of(ns), fp8_attention=ns.fp8_dot_product_attention, fused_moe=ns.moe_permute_fusion,
                  dispatcher=ns.moe_token_dispatcher_type or "alltoall", precision=precision,
                  distributed_optimizer=ns.use_distributed_optimizer, tp_comm_overlap=ns.tp_comm_overlap,
                  moe_a2a_overlap=ns.overlap_moe_expert_parallel_comm, dp_overlap=ns.overlap_grad_reduce)


def torchtitan_config(layout: Layout, model: ModelSpec, *, seq_len: int | None = None) -> dict[str, dict[str, Any]]:
    """TorchTitan JobConfig sections for `layout`. The distributed optimizer maps to FSDP sharding
    (data_parallel_shard_degree; TorchTitan's FSDP also shards parameters, ZeRO-3, where Megatron's
    distributed optimizer shards only optimizer state and gradients)."""
    a = layout
    stages = a.pp * a.vp
    layers = model.num_layers + model.num_mtp_layers
    parallelism: dict[str, Any] = {
        "data_parallel_replicate_degree": 1 if a.distributed_optimizer else a.dp,
        "data_parallel_shard_degree": a.dp if a.distributed_optimizer else 1,
        "tensor_parallel_degree": a.tp,
        "enable_async_tensor_parallel": bool(a.tp_comm_overlap and a.tp > 1),
        "pipeline_parallel_degree": a.pp,
        "context_parallel_degree": a.cp,
        "expert_parallel_degree": a.ep,
        "expert_tensor_parallel_degree": a.etp,
    }
    if a.pp > 1:
        parallelism["pipeline_parallel_schedule"] = "Interleaved1F1B" if a.vp > 1 else "1F1B"
        parallelism["pipeline_parallel_layers_per_stage"] = math.ceil(layers / stages)
        parallelism["pipeline_parallel_microbatch_size"] = a.mbs
    return {"parallelism": parallelism,
            "training": {"local_batch_size": a.gbs // a.dp, "global_batch_size": a.gbs,
                         "seq_len": seq_len or model.seq_len},
            "activation_checkpoint": {"mode": a.recompute}}


def torchtitan_toml(config: dict[str, dict[str, Any]], precision: str) -> str:
    lines = [f"# commbench plan (predicted); precision {precision}: enable TorchTitan's matching "
             "quantization converter" if precision != "bf16" else "# commbench plan (predicted)"]
    for section, values in config.items():
        lines.append(f"\n[{section}]")
        for key, value in values.items():
            text = json.dumps(value) if not isinstance(value, bool) else str(value).lower()
            lines.append(f"{key} = {text}")
    return "\n".join(lines) + "\n"


def layout_dict(layout: Layout) -> dict[str, Any]:
    return {k: getattr(layout, k) for k in layout.__dataclass_fields__}


def model_dict(model: ModelSpec) -> dict[str, Any]:
    out = asdict(model)
    out.pop("extra", None)
    return out


def write_plan(doc: dict[str, Any], path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(doc, indent=1, default=float) + "\n", encoding="utf-8")


def load_plan(path: str | Path) -> dict[str, Any]:
    """Read a plan.json, refusing other formats and schema versions with one line."""
    text = read_user_file(path, "plan file")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommbenchError(f"plan file {str(path)!r} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != PLAN_FORMAT:
        raise invalid("format", doc.get("format") if isinstance(doc, dict) else type(doc).__name__,
                      f"a commbench plan has format {PLAN_FORMAT!r} (write one with `commbench plan --out`)")
    if doc.get("version") != PLAN_VERSION:
        raise invalid("version", doc.get("version"), f"this commbench reads plan schema version {PLAN_VERSION}")
    try:
        for key, kind in (("inputs", dict), ("placement", dict), ("layout", dict)):
            if not isinstance(doc.get(key), kind):
                raise ValueError(f"{key}: expected a JSON object, got {type(doc.get(key)).__name__}")
        for section, key, kind in (("inputs", "gpus", int), ("inputs", "system", str), ("placement", "gpus_per_rack", int)):
            value = doc[section].get(key)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ValueError(f"field '{section}.{key}'={value!r} has the wrong type: expected {kind.__name__}")
    except ValueError as exc:
        raise CommbenchError(f"plan file {str(path)!r}: {exc}") from None
    plan_layout(doc)
    plan_model(doc)
    return doc


def plan_layout(doc: dict[str, Any]) -> Layout:
    try:
        return Layout(**check_fields(Layout, doc["layout"], "layout"))
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, CommbenchError):
            raise
        raise CommbenchError(f"plan file has no usable layout: {first_line(exc)}") from None


def plan_model(doc: dict[str, Any]) -> ModelSpec:
    try:
        inputs = doc["inputs"]
        if not isinstance(inputs, dict):
            raise ValueError(f"inputs: expected a JSON object, got {type(inputs).__name__}")
        return ModelSpec(**check_fields(ModelSpec, inputs["model_spec"], "inputs.model_spec"))
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, CommbenchError):
            raise
        raise CommbenchError(f"plan file has no usable model_spec: {first_line(exc)}") from None


def fabric_summary(fabric) -> dict[str, Any]:
    """Which network numbers the plan used: tiers, and per (collective, tier) the curve sources."""
    sources: dict[str, set[str]] = {}
    for c in fabric.curves:
        sources.setdefault(f"{c.collective}/{c.tier}", set()).add(c.source)
    return {"name": fabric.name, "source": fabric.source, "domain_size": fabric.domain_size,
            "tiers": {k: {"name": t.name, "link_gbps_per_gpu": t.link_gbps_per_gpu} for k, t in fabric.tiers.items()},
            "curve_sources": {k: sorted(v) for k, v in sorted(sources.items())},
            "notes": list(fabric.notes), "warnings": list(fabric.warnings)}


def plan_document(result, *, system: str, explanation: list[str], sensitivity: list[dict],
                  extra_assumptions: list[str] = (), top: int = 10, flex_backend: str = "deepep") -> dict[str, Any]:
    """The schema-versioned plan.json for the winner of a SearchResult (every figure predicted)."""
    from commbench.planner.explain import short
    from commbench.planner.placement import place
    req, bd = result.request, result.breakdown
    lay = result.layouts.layout(0)
    seq_len = req.seq_len or req.model.seq_len
    placement = place(lay, req.num_gpus, result.gpus_per_rack)
    assumptions = [
        f"routing: busiest EP rank receives {req.moe_imbalance:g}x the mean tokens (1 = perfectly balanced)",
        f"memory: predicted total incl. the model's reserve (CUDA context, NCCL, workspaces, fragmentation) "
        f"leaves >= {req.headroom_fraction:.0%} of HBM free",
        f"placement: {result.gpus_per_rack} GPUs per scale-up domain, {placement.num_racks} domain(s); "
        "ranks ordered tp-cp-dp-pp and etp-ep-edp-pp (Megatron-Core)",
        "overlaps on where Megatron allows them (they never lengthen a step in the model)",
        "efficiency terms: commbench.planner.calibration (fitted to published runs)",
    ] + list(extra_assumptions)
    kept = [{"rank": i + 1, "layout": short(result.layouts.layout(i)),
             "tokens_per_s_per_gpu": float(bd.tokens_per_s_per_gpu[i]), "step_s": float(bd.step_s[i]),
             "mem_headroom_bytes": float(result.headroom_bytes[i]), "ep_racks": int(result.ep_racks[i])}
            for i in range(min(top, len(result)))]
    pareto = [{"layout": short(result.layouts.layout(int(i))),
               "tokens_per_s_per_gpu": float(bd.tokens_per_s_per_gpu[i]),
               "mem_headroom_bytes": float(result.headroom_bytes[i])} for i in result.pareto]
    return {
        "format": PLAN_FORMAT, "version": PLAN_VERSION, "kind": "predicted",
        "inputs": {"model": req.model.name, "model_spec": model_dict(req.model), "system": system,
                   "gpus": req.num_gpus, "gbs": req.gbs, "precision": req.precision, "seq_len": seq_len,
                   "mem_headroom_fraction": req.headroom_fraction, "moe_imbalance": req.moe_imbalance,
                   "pins": dict(req.pins), "fabric": fabric_summary(req.fabric)},
        "assumptions": assumptions,
        "layout": layout_dict(lay),
        "predicted": bd.row(0) | {"mem_headroom_bytes": float(result.headroom_bytes[0]),
                                  "ep_racks_per_group": int(result.ep_racks[0])},
        "placement": {"gpus_per_rack": placement.gpus_per_rack, "num_racks": placement.num_racks,
                      "summary": placement.summary(), "groups": placement.groups,
                      "rack_of_rank": [placement.rack_of(r) for r in range(req.num_gpus)]},
        "megatron_args": megatron_args(lay, req.model, seq_len=req.seq_len, flex_backend=flex_backend),
        "torchtitan": torchtitan_config(lay, req.model, seq_len=req.seq_len),
        "explanation": list(explanation), "sensitivity": list(sensitivity),
        "top": kept, "pareto": pareto,
        "search": {"enumerated": result.num_enumerated, "valid": result.num_valid, "fit": result.num_fit,
                   "elapsed_s": result.elapsed_s},
    }
