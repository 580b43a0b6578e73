"""CPU activation offloading: its copies over the host link in the step model, and the search offering
it where the release's recipes offload (GB200/GB300 and B200 FSDP Llama recipes), never elsewhere."""

from __future__ import annotations

import numpy as np

from commbench.costmodel import load_preset
from commbench.planner import Layout, load_model
from commbench.planner.layout.recipes import release_features
from commbench.planner.layout.spec import LayoutArrays
from commbench.planner.search.space import SearchRequest, best_for_pins, candidates
from commbench.planner.step import memory
from commbench.planner.step.evaluate import evaluate_layouts

SEQ = 8192


def _layouts(offload: int, gpus: int = 64):
    fields = dict(tp=1, pp=1, mbs=2, gbs=256, precision="fp8", fsdp=True)
    return LayoutArrays.from_layouts([Layout.for_world(gpus, **fields, cpu_offload_layers=offload)])


def test_offloaded_activations_leave_gpu_memory_and_cross_the_host_link():
    model = load_model("llama3.1-70b")
    on, off = _layouts(40), _layouts(0)
    for system, link in (("gb200-nvl72", 225e9), ("b200-hgx", 64e9)):
        fabric = load_preset(system, num_gpus=64)
        bd_on, bd_off = (evaluate_layouts(model, fabric, a, seq_len=SEQ) for a in (on, off))
        assert bd_off.offload_exposed_s[0] == 0.0
        moved = memory.offloaded_bytes_per_microbatch(model, on, tp=on.tp, cp=on.cp, pp=on.pp, etp=on.etp,
                                                      tokens_mb=on.mbs * float(SEQ), sp=np.array([True]))[0]
        # half the 80 layers' saved activations leave the GPU: what it holds drops by that much
        assert abs((bd_off.mem_activations_bytes[0] - bd_on.mem_activations_bytes[0]) - moved) < 1e-6 * moved
        copy_s = moved / link
        compute_mb = bd_on.compute_s[0] / bd_on.num_microbatches[0]
        expected = max(copy_s - compute_mb / 3, 0.0) + max(copy_s - 2 * compute_mb / 3, 0.0)
        assert np.isclose(bd_on.offload_exposed_s[0] / bd_on.num_microbatches[0], expected)
        if system == "gb200-nvl72":  # NVLink-C2C: the copies hide behind the passes
            assert bd_on.offload_exposed_s[0] == 0.0
        else:                        # PCIe Gen5: ~2 s of copies per micro-batch outlast the forward
            assert bd_on.offload_exposed_s[0] > 0.0
            assert bd_on.step_s[0] > bd_off.step_s[0] * (1 + 1e-9) or not bd_off.fits[0]


def test_release_features_name_where_recipes_offload():
    assert True in release_features("25.11", "gb200", "fp8")["cpu_offload"]
    assert release_features("26.08", "h100", "fp8")["cpu_offload"] == frozenset({False})


def _request(model_name, system, gpus, gbs, precision, software, **kw):
    return SearchRequest(model=load_model(model_name), fabric=load_preset(system, num_gpus=gpus), num_gpus=gpus,
                         gbs=gbs, precision=precision, seq_len=SEQ, software=software, **kw)


def test_search_offloads_the_published_fsdp_structure_instead_of_recomputing():
    """Llama 3 70B on 64 GB200 at FP8, FSDP, mbs 2 (the 25.11 recipe offloads 40 layers): without
    offloading, at the same CP, it fits only with full recompute (selective frees nothing of a dense GQA layer's
    activations, layout/recompute.py); the search's best for that structure offloads. In 26.02, the first release
    whose Megatron-LM has --cpu-offloading-num-layers (25.11's has none: megatron-release-flags.json, so the search
    offloads nothing there: layout/release_flags.release_spelled_features)."""
    old = best_for_pins(_request("llama3.1-70b", "gb200-nvl72", 64, 256, "fp8", "25.11",
                                 pins=dict(tp=1, pp=1, mbs=2, fsdp=True)))[0].layout(0)
    assert old.cpu_offload_layers == 0
    req = _request("llama3.1-70b", "gb200-nvl72", 64, 256, "fp8", "26.02", pins=dict(tp=1, pp=1, mbs=2, fsdp=True))
    chosen, bd = best_for_pins(req)
    lay = chosen.layout(0)
    assert lay.cpu_offload_layers > 0 and lay.recompute == "none" and lay.cuda_graph == "none"
    no_offload, bd_none = best_for_pins(_request("llama3.1-70b", "gb200-nvl72", 64, 256, "fp8", "26.02",
                                                 pins=dict(tp=1, pp=1, cp=lay.cp, mbs=2, fsdp=True,
                                                           cpu_offload_layers=0)))
    assert no_offload.layout(0).recompute == "full"
    assert bd.tokens_per_s_per_gpu[0] > bd_none.tokens_per_s_per_gpu[0]


def test_search_never_offloads_where_no_recipe_does():
    cases = [("llama3.1-70b", "h100-hgx", 64, 128, "fp8", "26.08", {}),                # no H100 recipe offloads
             ("qwen3-30b-a3b", "gb200-nvl72", 64, 512, "fp8", "26.08", {}),           # MoE: no recipe offloads
             ("llama3.1-70b", "gb200-nvl72", 64, 256, "fp8", "26.08", {"framework": "torchtitan"})]
    for name, system, gpus, gbs, precision, software, kw in cases:
        enumerated, _, _ = candidates(_request(name, system, gpus, gbs, precision, software if not kw else None, **kw))
        assert len(enumerated) and not np.any(enumerated.cpu_offload_layers > 0), (name, system, kw)
    offered, _, _ = candidates(_request("llama3.1-70b", "gb200-nvl72", 64, 256, "fp8", "26.08"))
    with_offload = offered.cpu_offload_layers > 0
    assert np.any(with_offload)
    # as every offloading recipe runs: FSDP, pp 1, no recompute, eager
    assert np.all(offered.fsdp[with_offload] & (offered.pp[with_offload] == 1))
    assert np.all((offered.recompute[with_offload] == 0) & (offered.cuda_graph[with_offload] == 0))


def test_offloaded_activations_must_fit_host_memory():
    """A GB200 superchip's Grace holds 480 GB for two GPUs; offloading more than a GPU's share (less
    the host reserve) is not a layout that fits, however much HBM it frees."""
    from commbench.data.reference import gpu_spec
    from commbench.planner.step.terms import CALIBRATED
    model = load_model("llama3.1-70b")
    fabric = load_preset("gb200-nvl72", num_gpus=64)
    host_share = gpu_spec("gb200").host_memory_gb_per_gpu * 1e9 * (1 - CALIBRATED.host_reserve_fraction)
    mbs4 = [Layout.for_world(64, tp=1, pp=1, mbs=4, gbs=256, precision="fp8", fsdp=True, cpu_offload_layers=n)
            for n in (0, 20, 79)]
    bd = evaluate_layouts(model, fabric, LayoutArrays.from_layouts(mbs4), seq_len=SEQ)
    assert bd.mem_host_offload_bytes[0] == 0.0
    assert 0 < bd.mem_host_offload_bytes[1] < bd.mem_host_offload_bytes[2]
    assert bd.mem_host_offload_bytes[2] > host_share and not bd.fits[2]
    assert bd.mem_total_bytes[2] < bd.mem_capacity_bytes[2]       # the GPU side would fit: the host refuses it
    res_arr, _, _ = candidates(_request("llama3.1-70b", "gb200-nvl72", 64, 256, "fp8", "26.08"))
    everything = evaluate_layouts(model, fabric, res_arr, seq_len=SEQ)
    offloaded = everything.fits & (res_arr.cpu_offload_layers > 0)
    assert np.any(offloaded)
    assert np.all(everything.mem_host_offload_bytes[offloaded] <= host_share)


def test_offloading_runs_eager_as_megatron_core_requires():
    """megatron-core (TransformerConfig.__post_init__) raises "CUDA graphs not supported with CPU
    offloading": a layout with both breaks the offload rule, and a pinned offload count makes the search
    leave graphs off (GB200 enumerates per-layer graphs otherwise)."""
    import pytest

    from commbench.errors import CommbenchError
    from commbench.planner import check_layout
    model = load_model("llama3.1-70b")
    for graph in ("layer", "full"):
        with pytest.raises(CommbenchError, match="offload.*cuda_graph"):
            check_layout(model, Layout.for_world(64, tp=1, pp=1, mbs=2, gbs=256, fsdp=True, cpu_offload_layers=40,
                                                 cuda_graph=graph), 64)
    enumerated, _, _ = candidates(_request("llama3.1-70b", "gb200-nvl72", 64, 256, "fp8", "26.08",
                                           pins=dict(cpu_offload_layers=40, pp=1)))
    assert len(enumerated) and np.all(enumerated.cpu_offload_layers == 40)
    assert np.all(enumerated.cuda_graph == 0)
    chosen, _ = best_for_pins(_request("llama3.1-70b", "gb200-nvl72", 64, 256, "fp8", "26.08",
                                       pins=dict(tp=1, pp=1, mbs=2, fsdp=True, cpu_offload_layers=40)))
    assert chosen.layout(0).cuda_graph == "none"


def test_torchtitan_refuses_activation_offloading():
    """TorchTitan 0.3.0 has no activation offloading: a pin is refused by name, and a layout that
    offloads gets a one-line refusal from the TorchTitan emitter instead of a config that ignores it."""
    import pytest

    from commbench.errors import CommbenchError
    from commbench.planner.emit.torchtitan import torchtitan_plan
    from commbench.planner.search.frameworks import framework_pins
    model = load_model("llama3.1-70b")
    with pytest.raises(CommbenchError, match="cpu_offload_layers=20 is invalid with --framework torchtitan"):
        framework_pins("torchtitan", model, {"cpu_offload_layers": 20})
    assert framework_pins("torchtitan", model, {})["cpu_offload_layers"] == 0
    lay = Layout.for_world(64, tp=1, pp=1, mbs=2, gbs=256, precision="fp8", fsdp=True, cpu_offload_layers=40)
    assert "no activation offloading" in torchtitan_plan(lay, model, version="0.3")["refused"]
    assert "refused" not in torchtitan_plan(Layout.for_world(64, tp=1, pp=1, mbs=2, gbs=256, precision="fp8", fsdp=True),
                                            model, version="0.3")


def test_plan_explains_what_offloading_relies_on():
    """The plan says how much host memory the offloaded activations fill, of what share, and what the
    host-link copies leave exposed (the facts the prediction rests on)."""
    from commbench.planner.search.explain import caveats
    from commbench.planner.search.space import search
    req = _request("llama3.1-70b", "b200-hgx", 64, 256, "fp8", "26.08",
                   pins=dict(tp=1, pp=1, mbs=1, fsdp=True, cpu_offload_layers=20))
    result = search(req)
    line = next(c for c in caveats(result) if c.startswith("CPU offloading"))
    host_gb = float(result.breakdown.mem_host_offload_bytes[0]) / 1e9
    assert "20 of 80 layers" in line and f"{host_gb:.0f} GB per micro-batch" in line and "64 GB/s" in line
    plain = search(_request("llama3.1-70b", "b200-hgx", 64, 256, "fp8", "26.08",
                            pins=dict(tp=1, pp=1, mbs=1, fsdp=True, cpu_offload_layers=0)))
    assert not any(c.startswith("CPU offloading") for c in caveats(plain))
