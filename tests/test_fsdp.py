"""FSDP as a data-parallel mode (step/fsdp.py): charged per layer and micro-batch, searched beside the
distributed optimizer, emitted for Megatron-LM (Megatron-FSDP) and TorchTitan (FSDP2), and the published
Megatron-FSDP rows modelled. The framework plan matrix (tests/framework_plans.py) carries FSDP plans
through TorchTitan 0.3's and megatron-core's own checks (test_emit_*_real.py); Megatron-LM's own
parse_args + validate_args run here when $MEGATRON_LM_ROOT holds its core_v0.16.1 source."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.emit.megatron import (launch_connections, launch_env, launch_env_text, megatron_args,
                                             parse_megatron_args)
from commbench.planner.emit.torchtitan import torchtitan_plan
from commbench.planner.layout.spec import RULE_BITS, layout_violations
from commbench.planner.models.counts import param_counts
from commbench.planner.search.space import SearchRequest, search


def _pair(**kw):
    base = Layout(**kw)
    return base, dataclasses.replace(base, fsdp=True)


def test_fsdp_shards_weights_and_grads_and_gathers_every_micro_batch():
    m = load_model("llama3.1-70b")
    fabric = load_preset("gb200-nvl72", num_gpus=64)
    dist, fsdp = _pair(tp=1, pp=1, dp=64, mbs=1, gbs=256, precision="fp8")
    bd = evaluate_layouts(m, fabric, LayoutArrays.from_layouts([dist, fsdp]), seq_len=8192)
    assert bd.valid.all()
    # weights + grads: 70.6B x 2 B x 2 unsharded vs a 1/64 shard plus two gathered layers; Megatron-FSDP also
    # keeps the embedding and output layer (2 x 128256 x 8192 = 2.1B, bf16 parameters at fp8 too:
    # step/module_precision.py) gathered all step (step/fsdp.py)
    assert bd.mem_weights_bytes[0] / bd.mem_weights_bytes[1] > 10
    assert bd.mem_grads_bytes[0] / bd.mem_grads_bytes[1] > 20
    assert bd.mem_optimizer_bytes[0] == bd.mem_optimizer_bytes[1]
    n_mb = int(bd.num_microbatches[1])
    assert n_mb == 4
    # the distributed optimizer gathers once per step; FSDP the units' twice per micro-batch (forward, backward),
    # the 3% outside units (embedding, output layer, final norm) once per step, the vocabulary matrices in bf16
    # (2 B) and the units in fp8 (1 B) either way (step/module_precision.py)
    pc = param_counts(m)
    units_b, vocab_b = (pc.total - pc.embeddings) * 1.0, pc.embeddings * 2.0
    assert bd.dp_dense_ag_total_s[1] == pytest.approx(
        bd.dp_dense_ag_total_s[0] * (2 * n_mb * units_b + vocab_b) / (units_b + vocab_b), rel=0.02)
    assert bd.dp_dense_ag_total_s[1] < 2 * n_mb * bd.dp_dense_ag_total_s[0]
    assert bd.dp_dense_rs_total_s[1] == pytest.approx(n_mb * bd.dp_dense_rs_total_s[0], rel=0.2)
    off = evaluate_layouts(m, fabric, LayoutArrays.from_layouts([dataclasses.replace(fsdp, dp_overlap=False)]),
                           seq_len=8192)
    assert off.dp_dense_ag_exposed_s[0] == pytest.approx(off.dp_dense_ag_total_s[0])
    # prefetch hides overlap_efficiency of what fits in the compute window (the calibrated DP term)
    assert off.dp_dense_ag_exposed_s[0] > bd.dp_dense_ag_exposed_s[1] > 0


def test_fsdp_rule_and_search():
    m = load_model("qwen3-30b-a3b")
    arr = LayoutArrays.from_layouts([Layout(tp=1, pp=2, ep=8, dp=8, mbs=1, gbs=64, fsdp=True),
                                     Layout(tp=1, pp=1, ep=8, dp=16, mbs=1, gbs=64, fsdp=True,
                                            distributed_optimizer=False),
                                     Layout(tp=1, pp=1, ep=8, dp=16, mbs=1, gbs=64, fsdp=True)])
    bits = layout_violations(m, arr, 16)
    assert bits[0] & RULE_BITS["fsdp"] and bits[1] & RULE_BITS["fsdp"] and not bits[2]
    res = search(SearchRequest(model=m, fabric=load_preset("b200-hgx", num_gpus=16), num_gpus=16, gbs=128,
                               precision="fp8", keep=400))
    lay = res.layouts
    assert lay.fsdp.any() and not lay.fsdp.all()
    assert (lay.pp[lay.fsdp] == 1).all()


def test_fsdp_emitters():
    m = load_model("llama3.1-70b")
    lay = Layout(tp=2, pp=1, dp=32, mbs=1, gbs=256, precision="fp8", fsdp=True)
    args = megatron_args(lay, m)
    i = args.index("--data-parallel-sharding-strategy")
    assert "--use-megatron-fsdp" in args and args[i + 1] == "optim_grads_params"
    assert args[args.index("--ckpt-format") + 1] == "fsdp_dtensor"
    assert parse_megatron_args(args, 64) == lay
    # Megatron-FSDP refuses 1, which launch scripts often export: the plan sets more on every GPU (Megatron-Bridge's
    # overrides.py: 8 on Hopper with the alltoall dispatcher, 32 on Blackwell)
    assert launch_env(lay, "h100") == {"CUDA_DEVICE_MAX_CONNECTIONS": "8"}
    assert launch_env(lay, "gb200") == {"CUDA_DEVICE_MAX_CONNECTIONS": "32"}
    text = launch_env_text(launch_env(lay, "h100"), gpu_name="h100", fabric_name="h100-hgx",
                           connections_why=launch_connections(lay, "h100")[1])
    assert "CUDA_DEVICE_MAX_CONNECTIONS=8" in text.splitlines() and "Megatron-FSDP" in text
    titan = torchtitan_plan(dataclasses.replace(lay, precision="bf16"), m)  # TorchTitan ships 70B in bf16
    par = titan["sections"]["parallelism"]
    assert par["data_parallel_shard_degree"] == 32 and par["fsdp_reshard_after_forward"] == "always"


def test_megatron_fsdp_at_mxfp8_reuses_no_grad_buffer_and_charges_its_transpose_weight_buffer():
    """Megatron-FSDP plans at mxfp8 emitted --reuse-grad-buf-for-mxfp8-param-ag, which Megatron-FSDP does not implement
    (megatron-core 0.16.1: only DistributedDataParallel sets remove_forward_pre_hook_handles, which the training loop's
    manual param copy reads under that flag, training.py:1641; the optimizer then skips its own main-to-model copy,
    optimizer.py:579-584): Megatron-Bridge v0.3.0 config.py:1485-1490 turns it off under Megatron-FSDP. Without it,
    Megatron-FSDP keeps MXFP8 weights in two sharded buffers, row-wise and transposed (megatron_fsdp/
    param_and_grad_buffer.py:1953-2001), which the step model now charges: the transpose shard and the transposes of
    the parameters no unit holds (gathered in the backward, kept to the step's end) beyond the fp8 plan's weights."""
    from commbench.planner.emit.megatron import precision_notes
    from commbench.planner.models.counts import param_counts
    m = load_model("llama3.1-70b")
    lay = Layout(tp=1, pp=1, dp=64, mbs=1, gbs=256, precision="mxfp8", fsdp=True)
    args = megatron_args(lay, m)
    assert "--fp8-param-gather" in args and "--reuse-grad-buf-for-mxfp8-param-ag" not in args
    assert any("Megatron-FSDP" in n and "reuse-grad-buf" in n for n in precision_notes(lay))
    assert "--reuse-grad-buf-for-mxfp8-param-ag" in megatron_args(dataclasses.replace(lay, fsdp=False), m)
    fabric = load_preset("gb200-nvl72", num_gpus=64)
    fp8 = dataclasses.replace(lay, precision="fp8")   # per-tensor fp8 on Blackwell: no transpose buffer
    bd = evaluate_layouts(m, fabric, LayoutArrays.from_layouts([lay, fp8]), seq_len=8192)
    params = param_counts(m).total
    # the MXFP8 parameters' transposes: not the embedding's and output layer's, bf16 parameters at every precision
    # (step/module_precision.py); of the parameters no unit holds (step/fsdp.py), the final norm
    # and, launched with --fsdp-double-buffer, the persistent pair of transposed units (step/fsdp.py "Unit buffers")
    vocab = 2 * m.vocab * m.hidden
    unit = (params - vocab - m.hidden) / m.num_layers
    extra = bd.mem_weights_bytes[0] - bd.mem_weights_bytes[1]
    assert extra == pytest.approx((params - vocab) / 64 + m.hidden * 63 / 64 + 2 * unit, rel=0.02)


def test_megatron_fsdp_layouts_are_neither_searched_nor_emitted_with_cuda_graphs():
    """Megatron-FSDP in megatron-core 0.16.1 runs no CUDA graph (Megatron-LM issue #2371: "CUDA Graphs support is
    currently broken"; full-iteration replay needs DDPConfig.megatron_fsdp_cuda_graph_mode, Megatron-LM PR #4663, which
    0.16.1 lacks; TE per-layer capture of its hooks: PR #4232; Megatron-Bridge's FSDP recipes run none). The search
    put FSDP rows with per-layer or full-iteration graphs among its best, and emitted them."""
    from typer.testing import CliRunner

    from commbench.cli.app import app
    from commbench.errors import CommbenchError
    from commbench.planner.layout.spec import CODE_FIELDS
    none = CODE_FIELDS["cuda_graph"].index("none")
    kw = dict(model=load_model("llama3-8b"), fabric=load_preset("b200-hgx", num_gpus=8), num_gpus=8, gbs=128,
              precision="fp8", keep=2000)
    lay = search(SearchRequest(**kw)).layouts
    assert lay.fsdp.any() and (lay.cuda_graph[lay.fsdp] == none).all() and (lay.cuda_graph[~lay.fsdp] != none).any()
    pinned = search(SearchRequest(**kw, pins={"fsdp": True})).layouts
    assert pinned.fsdp.all() and (pinned.cuda_graph == none).all()
    for graph in ("layer", "full"):   # a pinned graph keeps the distributed optimizer's rows only
        graphed = search(SearchRequest(**kw, pins={"cuda_graph": graph})).layouts
        assert len(graphed) and not graphed.fsdp.any()
        res = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "b200-hgx", "--gpus", "8",
                                       "--layout", f"fsdp=true,cuda_graph={graph}"])
        assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
        assert "fsdp" in res.output and "#2371" in res.output and "Traceback" not in res.output
    with pytest.raises(CommbenchError, match="#2371"):
        megatron_args(Layout(tp=2, pp=1, dp=4, mbs=1, gbs=128, fsdp=True, cuda_graph="layer"), load_model("llama3-8b"))


def test_published_megatron_fsdp_rows_are_modelled():
    from commbench.planner.calibrate.published import published_runs
    runs = [r for r in published_runs() if "FSDP=" in (r.row.get("notes") or "")
            and "FSDP=0" not in r.row["notes"]]
    assert runs and all(r.layout is not None and r.layout.fsdp for r in runs)


MEGATRON_LM_ROOT = os.environ.get("MEGATRON_LM_ROOT")


@pytest.mark.skipif(not MEGATRON_LM_ROOT, reason="set MEGATRON_LM_ROOT to a Megatron-LM core_v0.16.1 source tree")
@pytest.mark.parametrize("name, gpus, kw", [
    ("llama3.1-70b", 64, dict(tp=1, pp=1, dp=64, mbs=2, gbs=256, precision="fp8")),
    # what the search picks with fsdp pinned: TP overlap, no CUDA graph (Megatron-FSDP in megatron-core 0.16.1 runs
    # none: test_megatron_fsdp_layouts_are_neither_searched_nor_emitted_with_cuda_graphs); EP overlap + fused MoE
    ("llama3.1-70b", 64, dict(tp=2, pp=1, dp=32, mbs=2, gbs=256, precision="fp8", recompute="selective",
                              tp_comm_overlap=True)),
    ("qwen3-30b-a3b", 72, dict(tp=1, pp=1, ep=4, etp=1, dp=72, mbs=8, gbs=576, precision="mxfp8", dispatcher="flex",
                               moe_a2a_overlap=True, fused_moe=True)),
    ("llama3-8b", 8, dict(tp=2, pp=1, dp=4, mbs=1, gbs=128, precision="fp8")),
    ("qwen3-30b-a3b", 72, dict(tp=1, pp=1, ep=8, etp=1, dp=72, mbs=1, gbs=576, precision="mxfp8")),
    # HSDP: FSDP within each 64-GPU rack, two replicas (--num-distributed-optimizer-instances 2)
    ("llama3.1-70b", 128, dict(tp=1, pp=1, dp=128, mbs=2, gbs=256, precision="fp8", fsdp_replicas=2)),
])
def test_megatron_lm_parse_and_validate_args_accept_fsdp_plans(name, gpus, kw, monkeypatch):
    pytest.importorskip("megatron.core")
    from tests.megatron_lm import arguments_module, megatron_config, target_gpu
    args_mod = arguments_module()  # arguments.py and what it imports (not the training loop)
    if args_mod is None:
        pytest.skip("MEGATRON_LM_ROOT holds no megatron/training/arguments.py")
    m = load_model(name)
    lay = Layout(**kw, fsdp=True)
    argv = megatron_args(lay, m) + ["--vocab-size", str(m.vocab)]
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1")   # as NeMo launch scripts export it: launch.env overrides
    with target_gpu(monkeypatch, (10, 0)):
        args, _ = megatron_config(args_mod, argv, gpus, launch_env(lay, "gb200"), monkeypatch)
    assert args.use_megatron_fsdp and args.data_parallel_sharding_strategy == "optim_grads_params"
    assert args.num_distributed_optimizer_instances == lay.fsdp_replicas
    assert args.outer_dp_sharding_strategy == "no_shard"  # replicas hold whole shards, as step/fsdp.py charges
    assert args.data_parallel_size == gpus // (lay.tp * lay.pp * lay.cp)


def test_calibrate_evaluate_reports_the_new_kinds_by_family():
    """calibrate --evaluate models the published Megatron-FSDP and Nemotron-3 Nano (hybrid) rows and
    reports the median error per family and for those kinds."""
    import json
    from typer.testing import CliRunner
    from commbench.cli.app import app
    from commbench.data.reference import calibration_runs
    rows = calibration_runs()
    fsdp_rows = sum("FSDP=" in (r.get("notes") or "") and "FSDP=0" not in r["notes"] for r in rows)
    nano_rows = sum(r["model"] == "Nemotron-3-Nano" for r in rows)
    from pathlib import Path
    data = Path(__file__).resolve().parents[1] / "commbench" / "data" / "calibration-runs.json"
    res = CliRunner().invoke(app, ["calibrate", "--evaluate", str(data), "--json"])
    assert res.exit_code == 0, res.output
    by = json.loads(res.stdout)["median_abs_error_pct_by_family"]   # stderr may hold warnings
    assert by["FSDP"]["runs"] == fsdp_rows and by["hybrid (Mamba)"]["runs"] == nano_rows > 0
    assert all(0 <= v["median"] < 100 for v in by.values())


def test_hsdp_shards_within_a_group_and_all_reduces_across_replicas():
    """FSDP over part of DP: gathers and reduce-scatters within dp/R ranks (one rack here), the gradient
    shard all-reduced across the R replicas once per step; memory shards by the shard group only."""
    m = load_model("llama3.1-70b")
    fabric = load_preset("gb200-nvl72", num_gpus=128)
    full = Layout(tp=1, pp=1, dp=128, mbs=1, gbs=512, precision="fp8", fsdp=True)
    hsdp = dataclasses.replace(full, fsdp_replicas=2)
    bd = evaluate_layouts(m, fabric, LayoutArrays.from_layouts([full, hsdp]), seq_len=8192)
    assert bd.valid.all()
    # weight/grad/optimizer shards: 1/64 instead of 1/128 of the parameters (plus the same gathered units)
    assert bd.mem_optimizer_bytes[1] == pytest.approx(2 * bd.mem_optimizer_bytes[0])
    assert bd.mem_weights_bytes[1] > bd.mem_weights_bytes[0]
    # the per-layer gathers stay inside a rack: never dearer than across both racks (whose ring runs on
    # 64 NICs per rack together, so about as fast as the NVLink ring here)
    assert bd.dp_dense_ag_total_s[1] <= bd.dp_dense_ag_total_s[0]
    # the replica all-reduce is charged once per step with the gradient traffic
    from commbench.planner.step.fsdp import fsdp_sync_s
    from commbench.costmodel import collective_time_s
    from commbench.planner.step.terms import CALIBRATED
    base = dict(local=np.array([70e9]), group=np.array([128]), n_mb=np.array([4]), units=80,
                compute_mb=np.array([1.0]), dp_overlap=np.array([False]))
    one = fsdp_sync_s(fabric, CALIBRATED, collective_time_s, **base, domains=np.array([2.0]), replicas=np.array([1]))
    two = fsdp_sync_s(fabric, CALIBRATED, collective_time_s, **base, domains=np.array([1.0]), replicas=np.array([2]),
                      replica_domains=np.array([2.0]))
    rs_rack = collective_time_s(fabric, "reduce_scatter", 70e9 * 2, np.array([64.0]), np.array([1.0]))[0]
    rs_both = collective_time_s(fabric, "reduce_scatter", 70e9 * 2, np.array([128.0]), np.array([2.0]))[0]
    ar = collective_time_s(fabric, "all_reduce", 70e9 / 64 * 2, np.array([2.0]), np.array([2.0]))[0]
    assert ar > 0 and two[0][0] == pytest.approx(4 * rs_rack + ar) and one[0][0] == pytest.approx(4 * rs_both)
    assert two[1][0] == pytest.approx(two[0][0])  # without dp_overlap all of it is exposed


def test_hsdp_rule_search_and_emitters():
    dense, moe = load_model("llama3.1-70b"), load_model("qwen3-30b-a3b")
    arr = LayoutArrays.from_layouts([Layout(tp=1, pp=1, dp=128, mbs=1, gbs=512, fsdp_replicas=2),
                                     Layout(tp=1, pp=1, dp=128, mbs=1, gbs=512, fsdp=True, fsdp_replicas=3),
                                     Layout(tp=1, pp=1, dp=128, mbs=1, gbs=512, fsdp=True, fsdp_replicas=2)])
    bits = layout_violations(dense, arr, 128)
    assert bits[0] & RULE_BITS["hsdp"] and bits[1] & RULE_BITS["hsdp"] and not bits[2]
    # MoE HSDP (TorchTitan's expert mesh; tests/test_moe_hsdp.py): ep must fold into a shard group's 8 ranks
    moe_bits = layout_violations(moe, LayoutArrays.from_layouts(
        [Layout(tp=1, pp=1, ep=16, dp=16, mbs=1, gbs=64, fsdp=True, fsdp_replicas=2),
         Layout(tp=1, pp=1, ep=8, dp=16, mbs=1, gbs=64, fsdp=True, fsdp_replicas=2)]), 16)
    assert moe_bits[0] & RULE_BITS["hsdp"] and not moe_bits[1]
    res = search(SearchRequest(model=dense, fabric=load_preset("gb200-nvl72", num_gpus=128), num_gpus=128,
                               gbs=512, precision="fp8", keep=2000))
    lay = res.layouts
    hs = lay.fsdp_replicas > 1
    assert hs.any() and lay.fsdp[hs].all() and (lay.fsdp & ~hs).any()
    # the searched HSDP shard group (tp*cp*dp/replicas ranks) is one 64-GPU rack
    assert ((lay.tp * lay.cp * lay.dp // lay.fsdp_replicas)[hs] == 64).all()
    h = Layout(tp=2, pp=1, dp=64, mbs=1, gbs=256, precision="fp8", fsdp=True, fsdp_replicas=2)
    args = megatron_args(h, dense)
    assert args[args.index("--num-distributed-optimizer-instances") + 1] == "2"
    assert parse_megatron_args(args, 128) == h
    assert "--num-distributed-optimizer-instances" not in megatron_args(dataclasses.replace(h, fsdp_replicas=1), dense)
    par = torchtitan_plan(dataclasses.replace(h, precision="bf16"), dense)["sections"]["parallelism"]
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == (2, 32)


def test_published_rows_with_fsdp_over_part_of_dp_are_modelled_as_hsdp():
    from commbench.data.reference import calibration_runs
    from commbench.planner.calibrate.published import published_runs
    row = next(r for r in calibration_runs() if "FSDP=64" in (r.get("notes") or "") and r["model"] == "Llama3-70B")
    hsdp = dict(row, notes=row["notes"].replace("FSDP=64", "FSDP=32"))
    odd = dict(row, notes=row["notes"].replace("FSDP=64", "FSDP=48"))
    runs = published_runs((row, hsdp, odd))
    assert runs[0].layout.fsdp_replicas == 1 and runs[1].layout.fsdp_replicas == 2 and runs[1].layout.fsdp
    assert runs[2].layout is None and "48 of 64" in runs[2].skip_reason


def test_pinned_hsdp_on_a_moe_model_is_one_line_naming_the_rule_and_rows_say_hsdp():
    from typer.testing import CliRunner
    from commbench.cli.app import app
    from commbench.planner.search.explain import short
    res = CliRunner().invoke(app, ["plan", "--model", "qwen3-30b-a3b", "--system", "gb200-nvl72", "--gpus", "64",
                                   "--gbs", "512", "--layout", "tp=1,pp=1,ep=8,etp=1,mbs=1,fsdp=true,fsdp_replicas=2"])
    assert res.exit_code == 2 and "hsdp rule" in res.output and "MoE" in res.output and "Traceback" not in res.output
    lay = Layout(tp=1, pp=1, dp=128, mbs=1, gbs=512, fsdp=True, fsdp_replicas=2)
    assert short(lay).endswith(" hsdp2") and short(dataclasses.replace(lay, fsdp_replicas=1)).endswith(" fsdp")


def test_torchtitan_without_pp_is_searched_and_charged_as_the_fsdp_it_runs():
    """TorchTitan 0.3.0 runs FSDP2 at every layout; without PP its trainer accumulates gradients with no no_sync and
    reshards after forward, so every micro-batch gathers parameters twice and reduce-scatters: the search offered
    pp = 1 layouts charged as the distributed optimizer (one gather and one reduce-scatter a step), faster than what
    TorchTitan would run. Now pp = 1 rows are FSDP; PP rows keep the distributed optimizer's charge (torch's
    pipeline stage syncs gradients at the last micro-batch only)."""
    from typer.testing import CliRunner

    from commbench.cli.app import app

    kw = dict(model=load_model("llama3-8b"), fabric=load_preset("h100-hgx", num_gpus=16), num_gpus=16, gbs=256,
              precision="bf16")
    titan = search(SearchRequest(framework="torchtitan", **kw)).layouts
    flat = titan.pp == 1
    assert flat.any() and titan.fsdp[flat].all() and (titan.pp > 1).any()
    megatron = search(SearchRequest(framework="megatron", **kw)).layouts
    assert (~megatron.fsdp[megatron.pp == 1]).any()      # Megatron keeps its distributed optimizer without PP
    pinned = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "16",
                                      "--framework", "torchtitan", "--precision", "bf16",
                                      "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1,fsdp=false"])
    assert pinned.exit_code == 2 and "fsdp=false with pp=1" in pinned.output and "Traceback" not in pinned.output
    full = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "16",
                                    "--framework", "torchtitan", "--precision", "bf16", "--json",
                                    "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1"])
    assert full.exit_code == 0, full.output
    import json
    assert json.loads(full.stdout)["layout"]["fsdp"] is True


def test_a_megatron_plan_s_torchtitan_section_says_what_torchtitan_runs_otherwise():
    """A Megatron plan's TorchTitan launch dropped the flex dispatcher and TP overlap without a word, and said its
    distributed optimizer maps to FSDP as if that cost the same: without PP TorchTitan gathers every micro-batch."""
    from commbench.planner import Layout

    moe = Layout(tp=1, pp=1, dp=8, ep=8, mbs=1, gbs=64, precision="bf16", dispatcher="flex", tp_comm_overlap=True)
    notes = torchtitan_plan(moe, load_model("qwen3-30b-a3b"))["notes"]
    assert any("runs dispatcher=alltoall, tp_comm_overlap=false where the layout has dispatcher=flex, "
               "tp_comm_overlap=true" in n for n in notes), notes
    assert any("without PP, gathers parameters every micro-batch" in n for n in notes), notes
    piped = torchtitan_plan(Layout(tp=2, pp=2, dp=2, mbs=1, gbs=64, precision="bf16"), load_model("llama3-8b"))["notes"]
    assert any("once a step" in n for n in piped) and not any(" runs " in n and "where the layout has" in n
                                                               for n in piped)
