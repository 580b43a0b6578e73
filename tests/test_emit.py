"""Emitters: Megatron arguments parse back to the same layout; plan.json schema; TorchTitan fields."""

from __future__ import annotations

import dataclasses
import json

import pytest

from commbench.costmodel import load_preset
from commbench.errors import CommbenchError
from commbench.planner import Layout, check_layout, load_model
from commbench.planner.emit.plan import (PLAN_VERSION, load_plan, megatron_args, parse_megatron_args, plan_document,
                                    torchtitan_plan, write_plan)
from commbench.planner.layout.placement import place
from commbench.planner.search.space import SearchRequest, search

LAYOUTS = [
    Layout(tp=1, pp=2, vp=8, ep=32, etp=1, dp=128, mbs=1, gbs=4096, precision="mxfp8", recompute="selective",
           dispatcher="flex", moe_a2a_overlap=True),
    Layout(tp=4, pp=4, vp=1, ep=8, etp=2, cp=2, dp=8, mbs=2, gbs=512, tp_comm_overlap=True, recompute="full",
           distributed_optimizer=False, dp_overlap=False, precision="nvfp4"),
]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_megatron_args_round_trip(layout):
    model = load_model("deepseek-v3")
    args = megatron_args(layout, model)
    back = parse_megatron_args(args, layout.world)
    assert back == layout
    assert ("--tp-comm-overlap" in args) == (layout.tp_comm_overlap and layout.sequence_parallel and layout.tp > 1)
    assert ("--delay-wgrad-compute" in args) == layout.moe_a2a_overlap


def test_search_winners_emit_valid_round_tripping_plans(tmp_path):
    model = load_model("qwen3-30b-a3b")
    fabric = load_preset("b200-hgx", num_gpus=16)
    res = search(SearchRequest(model=model, fabric=fabric, num_gpus=16, gbs=128, precision="fp8", keep=20))
    for i in range(len(res)):
        lay = res.layouts.layout(i)
        check_layout(model, lay, 16)
        assert parse_megatron_args(megatron_args(lay, model), 16) == lay
    doc = plan_document(res, system="b200-hgx", explanation=["x"], sensitivity=[])
    write_plan(doc, tmp_path / "plan.json")
    loaded = load_plan(tmp_path / "plan.json")
    assert loaded["version"] == PLAN_VERSION and loaded["kind"] == "predicted"
    assert Layout(**loaded["layout"]) == res.layouts.layout(0)
    assert sorted(sum(loaded["placement"]["groups"]["tp"], [])) == list(range(16))
    titan = loaded["torchtitan"]  # no shipped fp8 Qwen3-30B-A3B config: a generated one with the Float8 converters
    assert titan.get("refused", "").startswith("TorchTitan 0.3.0 supports etp = 1") or (
        titan["config"] == "qwen3_30b_a3b_fp8" and "Float8GroupedExpertsConverter" in titan["config_module"]["text"])
    assert loaded["framework"] == {"name": "megatron", "version": "Megatron-LM core_v0.16.1 (megatron-core 0.16.1)"}
    tt = torchtitan_plan(dataclasses.replace(res.layouts.layout(0), precision="bf16"), model)
    assert tt["version"] == "0.3.0" and loaded["emitters"]["torchtitan"] == "0.3.0"
    p = tt["sections"]["parallelism"]
    assert p["tensor_parallel_degree"] * p["pipeline_parallel_degree"] * p["context_parallel_degree"] * \
        p["data_parallel_shard_degree"] * p["data_parallel_replicate_degree"] == 16


def test_placement_groups_follow_megatron_order():
    lay = Layout(tp=2, pp=2, cp=1, dp=4, ep=4, etp=1, gbs=8)
    pl = place(lay, 16, 8)
    assert pl.groups["tp"][0] == [0, 1] and pl.groups["dp"][0] == [0, 2, 4, 6]
    assert pl.groups["pp"][0] == [0, 8] and pl.groups["ep"][0] == [0, 1, 2, 3]
    assert pl.max_racks("pp") == 2 and pl.max_racks("tp") == 1


def test_plan_of_another_version_is_refused(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": "commbench-plan", "version": 99}))
    with pytest.raises(CommbenchError, match="version"):
        load_plan(path)
    path.write_text(json.dumps({"format": "commbench-fabric", "version": 1}))
    with pytest.raises(CommbenchError, match="format"):
        load_plan(path)


def test_per_layer_graphs_emit_the_layout_scope_or_the_recipes_scope_for_the_model():
    """--cuda-graph-scope: the layout's modules when set; otherwise the scope Megatron-Bridge's recipes use
    for that kind of model (graph_scope.default_scope): a hybrid Mamba MoE graphs mamba too."""
    def scope(args):
        i = args.index("--cuda-graph-scope")
        return [a for a in args[i + 1:i + 6] if not a.startswith("--")][:4]
    ds = load_model("deepseek-v3")
    lay = Layout(tp=1, pp=2, vp=8, ep=32, etp=1, dp=128, mbs=1, gbs=4096, cuda_graph="layer", dispatcher="flex")
    assert scope(megatron_args(lay, ds)) == ["attn", "moe_router", "moe_preprocess"]
    own = dataclasses.replace(lay, cuda_graph_scope="moe_router+moe_preprocess")
    assert scope(megatron_args(own, ds)) == ["moe_router", "moe_preprocess"]
    assert parse_megatron_args(megatron_args(own, ds), own.world, ds) == own
    assert parse_megatron_args(megatron_args(lay, ds), lay.world, ds) == lay
    nano = load_model("nemotron-3-nano-30b-a3b")
    hybrid = Layout(tp=1, pp=1, ep=8, etp=1, dp=8, mbs=2, gbs=512, cuda_graph="layer", dispatcher="flex")
    assert scope(megatron_args(hybrid, nano)) == ["attn", "mamba", "moe_router", "moe_preprocess"]
    assert parse_megatron_args(megatron_args(hybrid, nano), 8, nano) == hybrid
