"""MoE HSDP: TorchTitan 0.3 builds a MoE model's experts on the sparse mesh (pp, dp_replicate, efsdp, ep)
with efsdp = dp_shard*cp*tp/ep (torchtitan/distributed/parallel_dims.py build_mesh; the MoE models'
parallelize.py shard experts over ["dp_replicate", "efsdp"]), so FSDP within part of DP and replicas
across works with EP there. Megatron-FSDP in megatron-core 0.16.1 builds no expert mesh for HSDP: the
Megatron search and emitter refuse it in one line. The TorchTitan plan runs through TorchTitan's whole
configuration path (tests/torchtitan_train.py, test_emit_torchtitan_real.check_titan_plan)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.errors import CommbenchError
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.emit.megatron import megatron_args
from commbench.planner.emit.torchtitan import torchtitan_plan
from commbench.planner.layout.spec import RULE_BITS, layout_violations
from commbench.planner.models.counts import param_counts
from commbench.planner.search.space import SearchRequest, best_for_pins, search

MOE = "qwen3-30b-a3b"
GPUS = 144  # two 72-GPU racks: FSDP within each, two replicas
HSDP = Layout(tp=1, pp=1, ep=8, etp=1, dp=144, mbs=1, gbs=576, precision="mxfp8", fsdp=True, fsdp_replicas=2)


def test_rule_needs_ep_to_fold_into_a_shard_group():
    m = load_model(MOE)
    bad = dataclasses.replace(HSDP, ep=16)  # 16 does not divide a 72-rank shard group (it divides 144)
    bits = layout_violations(m, LayoutArrays.from_layouts([HSDP, bad]), GPUS)
    assert bits[0] == 0 and bits[1] & RULE_BITS["hsdp"]


def test_hsdp_charges_experts_over_a_replica_shard_group():
    """Expert weights, gradients and optimizer state shard over EDP/replicas; the expert gradient traffic
    gains the all-reduce across replicas and its gathers run within one rack."""
    m = load_model(MOE)
    fabric = load_preset("gb200-nvl72", num_gpus=GPUS)
    full = dataclasses.replace(HSDP, fsdp_replicas=1)
    bd = evaluate_layouts(m, fabric, LayoutArrays.from_layouts([full, HSDP]), seq_len=4096)
    assert bd.valid.all()
    pc = param_counts(m)
    edp = HSDP.dp // HSDP.ep
    for i, replicas in enumerate((1, 2)):
        owned = pc.non_expert / (HSDP.dp // replicas) + pc.expert / HSDP.ep / (edp // replicas)
        assert bd.mem_optimizer_bytes[i] == pytest.approx(owned * 12.0, rel=1e-9)
    assert bd.dp_expert_ag_total_s[1] < bd.dp_expert_ag_total_s[0]  # within a rack, not across two
    assert bd.dp_expert_rs_total_s[1] > 0


def test_torchtitan_search_offers_moe_hsdp_and_megatron_does_not():
    m = load_model(MOE)
    fabric = load_preset("gb200-nvl72", num_gpus=GPUS)
    req = SearchRequest(model=m, fabric=fabric, num_gpus=GPUS, gbs=576, precision="mxfp8", keep=400,
                        pins={"mbs": 1, "ep": 8, "tp": 1}, framework="torchtitan")
    titan = search(req).layouts
    hs = np.flatnonzero(titan.fsdp_replicas > 1)
    # each shard group (dp*tp*cp/replicas ranks) is one 72-GPU rack
    assert hs.size and (titan.dp[hs] * titan.tp[hs] * titan.cp[hs] // titan.fsdp_replicas[hs] == 72).all()
    mega = search(dataclasses.replace(req, framework="megatron")).layouts
    assert not (mega.fsdp_replicas > 1).any()
    with pytest.raises(CommbenchError, match="hsdp rule.*builds no expert mesh for HSDP.*torchtitan"):
        best_for_pins(dataclasses.replace(req, framework="megatron", pins={"mbs": 1, "ep": 8, "tp": 1, "fsdp": True,
                                                                            "fsdp_replicas": 2}))
    pinned, _ = best_for_pins(dataclasses.replace(req, pins={"mbs": 1, "ep": 8, "tp": 1, "fsdp": True,
                                                              "fsdp_replicas": 2}))
    assert pinned.layout(0).fsdp_replicas == 2


def test_megatron_emitter_refuses_moe_hsdp_in_one_line():
    with pytest.raises(CommbenchError, match=r"fsdp_replicas=2 is invalid: .*no expert mesh for HSDP"):
        megatron_args(HSDP, load_model(MOE))
    res = CliRunner().invoke(app, ["plan", "--model", MOE, "--system", "gb200-nvl72", "--gpus", str(GPUS),
                                   "--gbs", "576", "--layout", "tp=1,pp=1,ep=8,etp=1,mbs=1,fsdp=true,fsdp_replicas=2"])
    assert res.exit_code == 2 and "hsdp rule" in res.output and "Traceback" not in res.output


def test_plan_cli_pins_moe_hsdp_for_torchtitan(tmp_path):
    import json
    res = CliRunner().invoke(app, ["plan", "--model", MOE, "--system", "gb200-nvl72", "--gpus", str(GPUS),
                                   "--gbs", "576", "--precision", "mxfp8", "--framework", "torchtitan", "--out",
                                   str(tmp_path), "--layout", "tp=1,pp=1,ep=8,etp=1,mbs=1,fsdp=true,fsdp_replicas=2"])
    assert res.exit_code == 0, res.output
    plan = json.loads((tmp_path / "plan.json").read_text())
    par = plan["torchtitan"]["sections"]["parallelism"]
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == (2, 72)


def test_torchtitan_accepts_the_moe_hsdp_plan(tmp_path, monkeypatch):
    pytest.importorskip("torchtitan")
    pytest.importorskip("torchao")
    from tests.test_emit_torchtitan_real import check_titan_plan, run_titan
    m = load_model(MOE)
    doc = torchtitan_plan(HSDP, m)
    assert "refused" not in doc, doc.get("refused")
    par = doc["sections"]["parallelism"]
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"], par["expert_parallel_degree"]) == \
        (2, 72, 8)
    check_titan_plan(doc, HSDP, m, GPUS, "gb200-nvl72", tmp_path, monkeypatch)
    _, dims, _ = run_titan(doc, GPUS, "gb200-nvl72", tmp_path, monkeypatch)
    # the expert mesh TorchTitan built: replicas x (72 / 8 = 9 efsdp) x 8 ep, as the step model charged
    assert (dims.get_mesh("dp_replicate").size(), dims.get_mesh("efsdp").size(), dims.get_mesh("ep").size()) == (2, 9, 8)
    refused = torchtitan_plan(dataclasses.replace(HSDP, ep=16), m)  # 16 does not divide dp_shard*cp*tp = 72
    assert "needs ep to divide dp_shard*cp*tp = 72" in refused["refused"]


def test_pinned_hsdp_whose_experts_cannot_fold_is_one_line_naming_the_rule():
    res = CliRunner().invoke(app, ["plan", "--model", MOE, "--system", "gb200-nvl72", "--gpus", str(GPUS), "--gbs", "576",
                                   "--precision", "mxfp8", "--framework", "torchtitan", "--layout",
                                   "tp=1,pp=1,ep=16,etp=1,mbs=1,fsdp=true,fsdp_replicas=2"])
    assert res.exit_code == 2 and "hsdp rule broken" in res.output and "ep*etp = [16]" in res.output
    assert "Traceback" not in res.output and "fits in memory" not in res.output
    dense = CliRunner().invoke(app, ["plan", "--model", "llama3.1-70b", "--system", "gb200-nvl72", "--gpus", "128",
                                     "--gbs", "384", "--precision", "fp8", "--layout",
                                     "tp=1,pp=1,mbs=1,fsdp=true,fsdp_replicas=3"])
    assert dense.exit_code == 2 and "hsdp rule broken" in dense.output and "fsdp_replicas = 3" in dense.output
