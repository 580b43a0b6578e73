"""CUDA_DEVICE_MAX_CONNECTIONS as Megatron's rules set it (planner/layout/connections.py cites them), one setting per
launch (on Hopper TP comm overlap wants 1, Megatron-FSDP and EP overlap more), and `plan --emit megatron` printing
the script and that environment with the flags.

Outside probe M: a Qwen3-235B-A22B H100 plan with EP overlap got CUDA_DEVICE_MAX_CONNECTIONS=1 ("Megatron's
validate_args requires" it; it only warns there, arguments.py:940-948, and Megatron-Bridge's recipe for that layout
runs 8 with tp_comm_overlap=False); EP-overlap plans with TP = CP = 1 and Blackwell plans wrote no value; Megatron-FSDP
with TP on Hopper emitted --tp-comm-overlap at 8 and charged it hidden; `--emit megatron` printed bare flags."""

from __future__ import annotations

import shlex

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.planner import Layout, load_model
from commbench.planner.emit.megatron import launch_connections, launch_env
from commbench.planner.layout.spec import LayoutArrays
from commbench.planner.search.space import SearchRequest, candidates
from commbench.planner.step.evaluate import evaluate_layouts

KEY = "CUDA_DEVICE_MAX_CONNECTIONS"


@pytest.mark.parametrize("gpu, kw, value", [
    ("h100", dict(tp=2), "1"),                                     # arguments.py:949-953 asserts 1
    ("h200", dict(cp=2), "1"),
    ("h100", dict(tp=1), None),                                    # no rule, nothing priced depends on it
    ("h100", dict(tp=2, ep=8, moe_a2a_overlap=True), "8"),         # only a warning there; Bridge: 8 with alltoall
    ("h100", dict(tp=2, ep=8, moe_a2a_overlap=True, dispatcher="flex"), "32"),   # Bridge: 32 with DeepEP/HybridEP
    ("h200", dict(tp=1, ep=8, moe_a2a_overlap=True, dispatcher="flex"), "32"),   # MoE README: EP overlap needs > 1
    ("h100", dict(tp=1, fsdp=True), "8"),                          # arguments.py:687-688 refuses 1
    ("h100", dict(tp=2, fsdp=True, ep=8, dispatcher="flex"), "32"),
    ("gb200", dict(tp=2, fsdp=True), "32"),
    ("gb300", dict(tp=2), "32"),                                   # Blackwell: every Bridge recipe sets 32
    ("b200", dict(tp=1), "32"),
])
def test_the_value_follows_megatrons_rules_and_bridges_numbers(gpu, kw, value):
    lay = Layout(**{"dp": 4, "gbs": 64, **kw})
    assert launch_env(lay, gpu).get(KEY) == value
    _, why = launch_connections(lay, gpu)
    assert why and ("arguments.py" in why or "README.md:437" in why or "overrides.py" in why or value is None)


def _emit(*args: str):
    return CliRunner().invoke(app, ["plan", *args, "--emit", "megatron"], env={"COLUMNS": "400"})


def test_hopper_ep_overlap_with_tp_runs_above_one_connection_without_tp_overlap():
    """The probe's layout: Megatron-Bridge's H100 Qwen3-235B-A22B recipe (perf_recipes/qwen/h100/qwen3_moe.py:147-158)."""
    result = _emit("--model", "qwen3-235b-a22b", "--system", "h100-hgx", "--gpus", "256", "--precision", "fp8",
                   "--layout", "tp=2,etp=1,pp=8,vp=4,ep=32,mbs=1,moe_a2a_overlap=true,dispatcher=alltoall")
    assert result.exit_code == 0, result.output
    line = shlex.split(result.stdout.strip())
    assert line[:2] == [f"{KEY}=8", "pretrain_gpt.py"]
    assert "--overlap-moe-expert-parallel-comm" in line and "--tp-comm-overlap" not in line
    assert "no --tp-comm-overlap" in result.stderr and "exposed" in result.stderr


def test_emit_megatron_prints_the_script_and_environment_the_flags_need():
    hybrid = _emit("--model", "nemotron-3-nano-30b-a3b", "--system", "h100-hgx", "--gpus", "48", "--precision", "bf16",
                   "--layout", "pp=3,tp=1,ep=8")
    assert hybrid.exit_code == 0, hybrid.output
    assert hybrid.stdout.startswith("pretrain_mamba.py --num-layers 52")
    tp = _emit("--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8", "--precision", "bf16", "--layout", "tp=2,pp=1")
    assert tp.exit_code == 0, tp.output
    assert tp.stdout.startswith(f"{KEY}=1 pretrain_gpt.py --num-layers 32") and len(tp.stdout.splitlines()) == 1


def test_fsdp_with_tp_on_hopper_has_no_tp_overlap_and_charges_it_exposed():
    model = load_model("qwen3-30b-a3b")
    kw = dict(tp=2, ep=16, etp=1, mbs=4, gbs=1024, precision="fp8", fsdp=True, tp_comm_overlap=True,
              sequence_parallel=True, dispatcher="flex")
    arr = LayoutArrays.from_layouts([Layout.for_world(16, **kw)])
    hopper = evaluate_layouts(model, load_preset("h100-hgx", num_gpus=16), arr)
    assert hopper.tp_total_s[0] > 0 and hopper.tp_exposed_s[0] == hopper.tp_total_s[0]
    blackwell = evaluate_layouts(model, load_preset("b200-hgx", num_gpus=16), arr)
    assert blackwell.tp_exposed_s[0] < blackwell.tp_total_s[0]   # no such rule off Hopper
    result = _emit("--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16", "--precision", "fp8",
                   "--layout", "tp=2,fsdp=true")
    assert result.exit_code == 0, result.output
    line = shlex.split(result.stdout.strip())
    assert "--use-megatron-fsdp" in line and "--tp-comm-overlap" not in line and line[0] != f"{KEY}=1"
    assert "no --tp-comm-overlap: Megatron-FSDP" in result.stderr


def test_both_overlaps_pinned_on_hopper_are_refused_in_one_line():
    result = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "h100-hgx", "--gpus", "16",
                                      "--precision", "fp8", "--layout", "tp=2,fsdp=true,tp_comm_overlap=true"])
    assert result.exit_code == 2 and result.output.startswith("error: ") and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1 and "CUDA_DEVICE_MAX_CONNECTIONS" in result.output


def test_search_weighs_ep_overlap_against_tp_overlap_on_hopper():
    req = SearchRequest(model=load_model("qwen3-235b-a22b"), fabric=load_preset("h100-hgx", num_gpus=256), num_gpus=256,
                        gbs=2048, precision="fp8", pins=dict(tp=2, pp=8, vp=4, ep=32, etp=1, mbs=1))
    arr, _, _ = candidates(req)
    a2a, tpo = np.asarray(arr.moe_a2a_overlap, dtype=bool), np.asarray(arr.tp_comm_overlap, dtype=bool)
    assert not (a2a & tpo).any()              # one CUDA_DEVICE_MAX_CONNECTIONS per launch
    assert (a2a & ~tpo).any() and (~a2a & tpo).any()   # both sides stay in the search
