"""The plan matrix the framework tests run through Megatron-LM's and TorchTitan's own code: six models on
an NVL72 rack system and an HGX system, each with the layout the search picks and with pinned
layouts (published recipes and the cases issue 14 reported rejected)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from commbench.costmodel import load_preset
from commbench.planner import Layout, check_layout, load_model
from commbench.planner.models.spec import ModelSpec
from commbench.planner.search.space import SearchRequest, search

INSTALL_HINT = "pip install --no-deps -r requirements-frameworks.txt (see the README)"


@dataclass(frozen=True)
class PlanCase:
    id: str
    model: ModelSpec
    system: str
    gpus: int
    layout: Layout


# (model, system, gpus, gbs, pins): pins keep the big searches to a few seconds.
SEARCHED = [
    ("deepseek-v3", "gb300-nvl72", 256, 4096, {"mbs": 1}),
    ("deepseek-v3", "h800-hgx", 1024, 4096, {"mbs": 1, "tp": 1}),
    ("qwen3-235b-a22b", "gb200-nvl72", 128, 1024, {"mbs": 1}),
    ("qwen3-235b-a22b", "h100-hgx", 256, 1024, {"mbs": 1, "tp": 2}),
    ("qwen3-30b-a3b", "gb200-nvl72", 72, 576, {}),
    ("qwen3-30b-a3b", "b200-hgx", 16, 256, {}),
    ("llama3.1-405b", "gb300-nvl72", 144, 576, {"mbs": 1}),
    ("llama3.1-405b", "h100-hgx", 512, 1024, {"mbs": 1}),
    ("mixtral-8x7b", "gb200-nvl72", 72, 576, {}),
    ("mixtral-8x7b", "h100-hgx", 64, 512, {}),
    ("llama3-8b", "gb200-nvl72", 72, 576, {}),
    ("llama3-8b", "h100-hgx", 8, 128, {}),
]

# Pinned: published recipes and the layouts the issue found rejected (model, system, gpus, layout).
PINNED = [
    ("deepseek-v3", "gb300-nvl72", 256, dict(tp=1, pp=2, vp=8, ep=32, etp=1, mbs=1, gbs=4096, precision="mxfp8",
                                            recompute="selective", dispatcher="flex", moe_a2a_overlap=True)),
    ("deepseek-v3", "gb300-nvl72", 256, dict(tp=1, pp=4, vp=16, ep=32, etp=1, mbs=1, gbs=4096, dispatcher="flex",
                                            moe_a2a_overlap=True)),
    ("deepseek-v3", "h100-hgx", 1024, dict(tp=2, pp=16, vp=2, ep=64, etp=1, mbs=1, gbs=8192, precision="fp8",
                                          recompute="full")),
    ("qwen3-235b-a22b", "gb200-nvl72", 256, dict(tp=1, pp=4, vp=12, ep=16, etp=1, mbs=1, gbs=2048, moe_a2a_overlap=True)),
    ("llama3.1-405b", "h100-hgx", 512, dict(tp=8, pp=8, vp=8, cp=1, mbs=1, gbs=1024, tp_comm_overlap=True)),
    ("llama3-8b", "h100-hgx", 8, dict(tp=2, pp=1, mbs=1, gbs=64)),
    ("qwen3-30b-a3b", "b200-hgx", 16, dict(tp=1, pp=2, vp=4, ep=8, etp=1, mbs=1, gbs=256, precision="fp8")),
    ("mixtral-8x7b", "h100-hgx", 64, dict(tp=2, pp=4, vp=2, ep=8, etp=1, mbs=1, gbs=512, cp=2)),
    ("llama3.1-405b", "h100-hgx", 512, dict(tp=8, pp=8, vp=2, mbs=1, gbs=1024, precision="fp8")),
    ("llama3-8b", "gb200-nvl72", 72, dict(tp=1, pp=2, vp=4, mbs=1, gbs=576, precision="mxfp8")),
    # FSDP (ZeRO-3) as the data-parallel mode: the published Megatron-FSDP Llama 3 70B row, and MoE with EP
    ("llama3.1-70b", "gb200-nvl72", 64, dict(tp=1, pp=1, mbs=2, gbs=256, precision="fp8", fsdp=True)),
    ("qwen3-30b-a3b", "gb200-nvl72", 72, dict(tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=576, precision="mxfp8",
                                             fsdp=True)),
    ("llama3-8b", "h100-hgx", 8, dict(tp=2, pp=1, mbs=1, gbs=128, precision="fp8", fsdp=True)),
    # the same with activations offloaded to host memory, as its recipe (cpu_offloading_num_layers 40)
    ("llama3.1-70b", "gb200-nvl72", 64, dict(tp=1, pp=1, mbs=2, gbs=256, precision="fp8", fsdp=True,
                                            cpu_offload_layers=40)),
    # HSDP: FSDP within each 64-GPU rack, two replicas across racks
    ("llama3.1-70b", "gb200-nvl72", 128, dict(tp=1, pp=1, mbs=2, gbs=256, precision="fp8", fsdp=True,
                                             fsdp_replicas=2)),
    # recipe flags: per-layer CUDA graphs + fused permutes with the EP overlap; a full-iteration graph
    ("deepseek-v3", "gb200-nvl72", 256, dict(tp=1, pp=4, vp=4, ep=64, etp=1, mbs=1, gbs=4096, precision="mxfp8",
                                            recompute="mla_up_proj", dispatcher="flex", moe_a2a_overlap=True,
                                            cuda_graph="layer", fused_moe=True)),
    ("llama3-8b", "b200-hgx", 16, dict(tp=2, pp=1, mbs=1, gbs=128, recompute="full", cuda_graph="full")),
    # block recompute of N layers per model chunk (the recipes' recompute_num_layers)
    ("llama3-8b", "h100-hgx", 8, dict(tp=1, pp=1, mbs=1, gbs=128, precision="fp8", recompute="full",
                                      recompute_layers=5)),
    ("llama3.1-70b", "h100-hgx", 64, dict(tp=4, pp=4, vp=5, mbs=1, gbs=128, precision="fp8", recompute="full",
                                         recompute_layers=2)),
]


@lru_cache(maxsize=1)
def plan_cases() -> tuple[PlanCase, ...]:
    cases = []
    for name, system, gpus, gbs, pins in SEARCHED:
        model = load_model(name)
        res = search(SearchRequest(model=model, fabric=load_preset(system, num_gpus=gpus), num_gpus=gpus, gbs=gbs,
                                   precision="bf16", pins=dict(pins), keep=1))
        cases.append(PlanCase(f"{name}-{system}-searched", model, system, gpus, res.layouts.layout(0)))
    for name, system, gpus, fields in PINNED:
        model = load_model(name)
        layout = Layout.for_world(gpus, **fields)
        check_layout(model, layout, gpus)
        cases.append(PlanCase(_pinned_id(name, system, fields), model, system, gpus, layout))
    return tuple(cases)


def _pinned_id(name: str, system: str, fields: dict) -> str:
    return f"{name}-{system}-pinned-" + "".join(f"{k}{fields.get(k, 1)}" for k in ("tp", "pp", "vp", "ep")) + \
        ("-fsdp" if fields.get("fsdp") else "") + \
        (f"-hsdp{fields['fsdp_replicas']}" if fields.get("fsdp_replicas", 1) > 1 else "") + \
        (f"-rl{fields['recompute_layers']}" if fields.get("recompute_layers") else "") + \
        (f"-off{fields['cpu_offload_layers']}" if fields.get("cpu_offload_layers") else "")


def case_ids() -> list[str]:
    """Test ids in plan_cases() order (known without running the searches)."""
    return [f"{n}-{s}-searched" for n, s, *_ in SEARCHED] + [_pinned_id(n, s, f) for n, s, _, f in PINNED]
