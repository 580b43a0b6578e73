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


# ---------------------------------------------------------------- physics (step/memory.py, step/fsdp.py)

def _ultra_run(gpu: str):
    return next(r for r in published_runs(tuple(_ultra_rows())) if r.row["gpu"] == gpu)


def _evaluate(run, layout=None, core=(0, 19)):
    from commbench.costmodel import load_preset
    from commbench.planner.step.evaluate import evaluate_layouts
    return evaluate_layouts(run.model, load_preset(run.preset, num_gpus=256),
                            LayoutArrays.from_layouts([layout or run.layout]), seq_len=8192, megatron_core=core)


def test_the_fused_mlp_offload_moves_the_experts_fc1_output_of_all_moe_layers_but_one():
    """Only tensors of at least min_offloaded_tensor_size elements leave (megatron-core cd4afff
    fine_grained_activation_offload.py tensor_need_offloading_checker). On 256 GB300, TP1: the rank's 8192 x 22 routed
    copies make an FC1 input of 369M elements (latent 2048) and an FC1 output of 923M (FFN 5120): at 500M only the
    output goes, 22 x 5120 bf16 elements per token per MoE layer; on GB200 (TP2 + SP) half, against 350M. One MoE
    layer's stays (post_warmup_callback's margin). The copies run beside the passes on their own streams: at 225 GB/s
    each way they hide here, so the step is unchanged; host memory holds them."""
    from commbench.planner.step import memory
    from commbench.planner.step.mamba import block_counts
    for gpu, per_token in (("DGX-GB300", 22 * 5120), ("DGX-GB200", 22 * 5120 / 2)):
        run = _ultra_run(gpu)
        lay = run.layout
        arr = LayoutArrays.from_layouts([lay])
        got = memory.fused_mlp_offload_elements(run.model, arr, tp=lay.tp, cp=1, etp=1, tokens_mb=8192.0)
        assert float(got[0]) == pytest.approx(per_token)
        on, off = _evaluate(run), _evaluate(run, Layout(**{**vars(lay), "fused_mlp_offload_min": 0}))
        moe = block_counts(run.model).moe
        moved = 8192 * per_token * (moe - 1) * 2
        assert off.mem_activations_bytes[0] - on.mem_activations_bytes[0] == pytest.approx(moved, rel=1e-9)
        assert on.mem_host_offload_bytes[0] == pytest.approx(moved, rel=1e-9) and off.mem_host_offload_bytes[0] == 0
        assert on.step_s[0] == pytest.approx(off.step_s[0])
    # a threshold above the FC1 output offloads nothing; one below the FC1 input takes it too
    run = _ultra_run("DGX-GB300")
    for threshold, per_token in ((1_000_000_000, 0.0), (300_000_000, 22 * (5120 + 2048 * 0.5))):
        arr = LayoutArrays.from_layouts([Layout(**{**vars(run.layout), "fused_mlp_offload_min": threshold})])
        got = memory.fused_mlp_offload_elements(run.model, arr, tp=1, cp=1, etp=1, tokens_mb=8192.0)
        assert float(got[0]) == pytest.approx(per_token)


def test_outer_optim_sharding_splits_the_optimizer_state_across_the_hsdp_replicas():
    """--outer-dp-sharding-strategy optim: 12 B a parameter over the shard group and the 4 replicas, as the
    distributed optimizer over all of DP, instead of over the 64-GPU shard group alone; weights and gradients keep
    the shard group's sharding."""
    run = _ultra_run("DGX-GB300")
    on, off = _evaluate(run), _evaluate(run, Layout(**{**vars(run.layout), "fsdp_outer_optim": False}))
    assert on.mem_optimizer_bytes[0] == pytest.approx(off.mem_optimizer_bytes[0] / 4)
    assert on.mem_weights_bytes[0] == pytest.approx(off.mem_weights_bytes[0])
    assert on.mem_grads_bytes[0] == pytest.approx(off.mem_grads_bytes[0])


def test_megatron_fsdp_wraps_mamba_layers_as_units_from_megatron_core_0_19():
    """mcore_fsdp_adapter.py: [TransformerLayer] up to 0.18.2, [TransformerLayer, MoETransformerLayer, MambaLayer] in
    0.19.0 (26.08's pin): Ultra's 48 Mamba layers are gathered per unit instead of kept gathered all step, so the
    weights drop by their parameters less the shard; a published run reads its release's megatron-core; the plans
    (None) keep 0.16.1's units."""
    from commbench.planner.calibrate.published import run_megatron_core
    from commbench.planner.models.mamba import mamba_params_per_layer
    assert run_megatron_core({"release": "26.08"}) == (0, 19)
    assert run_megatron_core({"release": "26.06.01"}) == (0, 18)
    assert run_megatron_core({"release": "user"}) is None and run_megatron_core({}) is None
    run = _ultra_run("DGX-GB300")
    new, old, planned = (_evaluate(run, core=c) for c in ((0, 19), (0, 18), None))
    assert old.mem_weights_bytes[0] == pytest.approx(planned.mem_weights_bytes[0])
    mamba = 48 * (mamba_params_per_layer(run.model) + run.model.hidden)
    drop = old.mem_weights_bytes[0] - new.mem_weights_bytes[0]
    # kept gathered at 1 B (MXFP8) plus its MXFP8 transpose, less the 1/64 shard charged anyway
    assert drop == pytest.approx(mamba * 2 * (1 - 1 / 64), rel=0.15)
    assert new.step_s[0] != old.step_s[0]   # gathered per unit, not once per step exposed


def test_the_ultra_rows_fit_their_gpus():
    """With the three: GB300 ~246 GB of 297, GB200 ~159 GB of 198 (fix-BY; 460 / 264 before)."""
    for gpu in ("DGX-GB300", "DGX-GB200"):
        run = _ultra_run(gpu)
        bd = _evaluate(run)
        assert bd.fits[0] and bd.mem_total_bytes[0] < 0.9 * bd.mem_capacity_bytes[0], gpu


def test_megatron_args_checks_the_launch_once(monkeypatch):
    """megatron_args ran the release's launch check (megatron_cannot_launch, unbuildable) in check_megatron_layout
    and again in model_args: once now; model_args alone still checks."""
    from commbench.planner import Layout, load_model
    from commbench.planner.emit import megatron

    calls = []
    real = megatron.megatron_cannot_launch
    monkeypatch.setattr(megatron, "megatron_cannot_launch", lambda *a, **k: calls.append(a) or real(*a, **k))
    model = load_model("qwen3-30b-a3b")
    megatron.megatron_args(Layout.for_world(64, tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=512), model, release="26.08")
    assert len(calls) == 1, calls
    megatron.model_args(model, release="26.08")
    assert len(calls) == 2
