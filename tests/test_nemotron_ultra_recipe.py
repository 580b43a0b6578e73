"""Nemotron-3-Ultra on its 26.08 release recipe (Megatron-Bridge v0.6.0 perf_recipes/nemotronh/{gb300,gb200}/
nemotronh.py): Megatron-FSDP HSDP over 64-GPU NVLink domains with the optimizer state sharded across them (outer
"optim"), and the fused grouped MLP's large saved tensors offloaded to host memory. How published rows read it, the
layout fields and rules it needs, and what the emitters (megatron-core 0.16.1, TorchTitan 0.3) say about it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commbench.errors import CommbenchError
from commbench.planner.calibrate.published import published_runs
from commbench.planner.emit.megatron import check_megatron_layout, megatron_args, parse_megatron_args
from commbench.planner.emit.torchtitan import torchtitan_plan
from commbench.planner.layout.spec import Layout, LayoutArrays, check_layout, layout_violations
from commbench.planner.models.zoo import load_model
from commbench.planner.search.frameworks import framework_pins

ROWS = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "newer-release-runs.json"
ULTRA = "nemotron-3-ultra-550b-a55b"


def _ultra_rows() -> list[dict]:
    return [r for r in json.loads(ROWS.read_text()) if r["model"] == "Nemotron_3_Ultra"]


def test_a_row_without_an_fsdp_field_takes_its_release_recipes_hsdp():
    """The 26.08 table has no FSDP column; the rows' sizes are the recipes' (256 GPUs, TP1 / TP2, EP64, GBS 256, MBS 1),
    so they run its Megatron-FSDP: 4 distributed-optimizer instances (256 // 64), outer "optim", and the fused grouped
    MLP offloaded above 500M (GB300) / 350M (GB200) elements; the flags are facts, not assumed."""
    runs = {r.row["gpu"]: r for r in published_runs(tuple(_ultra_rows()))}
    for gpu, threshold in (("DGX-GB300", 500_000_000), ("DGX-GB200", 350_000_000)):
        lay = runs[gpu].layout
        assert lay is not None, runs[gpu].skip_reason
        assert (lay.fsdp, lay.fsdp_replicas, lay.fsdp_outer_optim, lay.distributed_optimizer) == (True, 4, True, True)
        assert (lay.fused_mlp_offload_min, lay.recompute, lay.fused_moe, lay.cuda_graph) == \
            (threshold, "moe_act", True, "none")
        assert "assumed" not in runs[gpu].layout_note


def test_a_row_that_publishes_its_fsdp_keeps_it():
    """FSDP=0 in the notes is a published fact: the recipe's Megatron-FSDP does not replace it."""
    rows = [dict(r, notes=r["notes"] + "; FSDP=0") for r in _ultra_rows()]
    for run in published_runs(tuple(rows)):
        assert run.layout is not None and not run.layout.fsdp and run.layout.fsdp_replicas == 1
        assert not run.layout.fsdp_outer_optim


def _dense_hsdp(**kw) -> Layout:
    return Layout(tp=1, pp=1, dp=64, mbs=1, gbs=64, fsdp=True, fsdp_replicas=4, distributed_optimizer=True, **kw)


def test_outer_optimizer_sharding_needs_hsdp_and_is_emitted():
    model = load_model("llama3-8b")
    lay = _dense_hsdp(fsdp_outer_optim=True)
    check_layout(model, lay, 64, 8192)
    args = megatron_args(lay, model)
    i = args.index("--outer-dp-sharding-strategy")
    assert args[i + 1] == "optim"
    assert parse_megatron_args(args, 64, model).fsdp_outer_optim
    assert "--outer-dp-sharding-strategy" not in megatron_args(_dense_hsdp(), model)
    with pytest.raises(CommbenchError, match="hsdp rule"):   # no outer DP group: nothing to shard across
        check_layout(model, Layout(tp=1, pp=1, dp=64, mbs=1, gbs=64, fsdp=True, fsdp_outer_optim=True), 64, 8192)
    assert "fsdp_outer_optim" in torchtitan_plan(lay, model, seq_len=8192)["refused"]


def test_the_fused_mlp_offload_needs_the_fused_grouped_mlp_and_no_planned_launch_runs_it():
    """megatron-core 0.19.0 runs fused_group_mlp offload only with the TE op fuser (fused_moe) and never with layer
    offload; 0.16.1 (the plans' Megatron-LM) has neither the module nor --min-offloaded-tensor-size: refused in one
    line by the emitter and the search's pins, never proposed."""
    model = load_model(ULTRA)
    base = dict(tp=1, pp=1, ep=64, etp=1, dp=256, mbs=1, gbs=256, precision="mxfp8", recompute="moe_act")
    ok = Layout(**base, fused_moe=True, fused_mlp_offload_min=500_000_000)
    bad = Layout(**base, fused_moe=False, fused_mlp_offload_min=500_000_000)
    bits = layout_violations(model, LayoutArrays.from_layouts([ok, bad]), 256, 8192)
    assert bits[0] == 0 and bits[1] != 0
    with pytest.raises(CommbenchError, match="fused_mlp_offload"):
        check_layout(model, bad, 256, 8192)
    with pytest.raises(CommbenchError, match="fused_mlp_offload_min"):
        check_megatron_layout(ok, model)
    for framework in ("megatron", "torchtitan"):
        with pytest.raises(CommbenchError, match="fused_mlp_offload_min=500000000 is invalid"):
            framework_pins(framework, model, {"fused_mlp_offload_min": 500_000_000})
