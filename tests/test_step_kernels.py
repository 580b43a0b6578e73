"""Step model v2 terms by hand: roofline, attention vs exp units, host time by CUDA-graph scope,
overlapped dispatcher SMs, recompute modules, fused MoE traffic, graph memory; monotonicity."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from commbench.costmodel import load_preset
from commbench.data.reference import gpu_spec
from commbench.planner import Calibration, Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.layout.graph_scope import default_scope, scope_mask
from commbench.planner.step import kernels, memory


def test_smooth_max_is_a_soft_roofline():
    a, b = np.array([1.0, 1.0, 0.0]), np.array([0.0, 1.0, 3.0])
    out = kernels.smooth_max(a, b)
    assert out.tolist() == pytest.approx([1.0, 2 ** 0.25, 3.0])
    assert np.all(out >= np.maximum(a, b)) and np.all(out < a + b + 1e-12)


def test_attention_exps_and_sfu_bound_by_hand():
    m = load_model("deepseek-v3")
    exps = kernels.attention_exps_per_token(m, 4096)
    assert exps == (61 + 1) * 128 * 2048 * 2
    # all on exp units: tensor-core time negligible -> time = exps / rate
    t = kernels.attention_time_s(np.array([0.0]), np.array([exps]), tc_rate_flops=1e18, sfu_rate_exps=5e12)
    assert t[0] == pytest.approx(exps / 5e12)
    # Blackwell Ultra's doubled exp rate halves an exp-bound attention core
    t2 = kernels.attention_time_s(np.array([0.0]), np.array([exps]), tc_rate_flops=1e18,
                                  sfu_rate_exps=gpu_spec("gb300").sfu_texp_per_s * 1e12)
    assert t2[0] == pytest.approx(t[0] * 5.0 / 10.7)


def test_sliding_window_layers_take_their_windows_exps_as_they_take_its_flops():
    # gpt-oss-120b: a 128-token window on every other layer (Megatron window_size (127, 0), window_attn_skip_freq 2):
    # those layers' queries see w - w(w-1)/(2s) keys, not s/2, for the softmax as for the tensor-core FLOPs
    import dataclasses

    from commbench.planner.models.counts import flops_breakdown
    m = load_model("gpt-oss-120b")
    s, w = 4096, 128
    keys = (s / 2 + (w - w * (w - 1) / (2 * s))) / 2
    assert kernels.attention_exps_per_token(m, s) == pytest.approx(36 * 64 * keys * 2)
    full = dataclasses.replace(m, sliding_window=0, architecture=None)
    # tensor-core FLOPs per exponential are the model's, windowed or not (the same scores carry both)
    per_exp = [flops_breakdown(x, s).attention_core / kernels.attention_exps_per_token(x, s) for x in (m, full)]
    assert per_exp[0] == pytest.approx(per_exp[1])


def test_host_time_by_cuda_graph_scope_by_hand():
    cal = Calibration(layer_overhead_s=1e-4, moe_sync_s=3e-4, graph_layer_residual=0.25)
    qwen = load_model("qwen3-30b-a3b")   # every layer attention + MoE
    graph = np.array([0, 1, 2])
    t = kernels.host_time_s(10.0, 4.0, graph, cal, model=qwen, graph_scope=np.zeros(3, dtype=int))
    assert t.tolist() == pytest.approx([10 * 1e-4 + 4 * 3e-4, 10 * 1e-4 * 0.25 + 4 * 3e-4, 0.0])


def test_a_per_layer_graph_leaves_eager_what_its_scope_does_not_capture():
    """Megatron-Core --cuda-graph-scope: attention and router captured leave the experts (dropless) eager;
    without attn the attention half stays eager too; a Mamba layer needs mamba; the whole layer (an
    empty scope) still leaves dropless experts eager; drop-and-pad "moe" captures them."""
    e = 0.2
    cal = Calibration(layer_overhead_s=1e-4, moe_sync_s=0.0, graph_layer_residual=e)
    layer = np.array([1])

    def host(model_name, scope):
        return kernels.host_time_s(10.0, 0.0, layer, cal, model=load_model(model_name),
                                   graph_scope=np.array([scope_mask(scope)]))[0]
    assert host("qwen3-30b-a3b", "attn+moe_router+moe_preprocess") == pytest.approx(10 * 1e-4 * e)
    assert host("qwen3-30b-a3b", "moe_router+moe_preprocess") == pytest.approx(10 * 1e-4 * (0.5 + e))
    assert host("qwen3-30b-a3b", "layer") == pytest.approx(10 * 1e-4 * e)
    assert host("qwen3-30b-a3b", "attn+moe") == pytest.approx(0.0)
    assert host("llama3-8b", "attn+mlp") == pytest.approx(0.0)
    assert host("llama3-8b", "attn") == pytest.approx(10 * 1e-4 * 0.5)
    nano = load_model("nemotron-3-nano-30b-a3b")
    moe_share = nano.layer_pattern.count("E") / len(nano.layer_pattern)
    mamba_share = nano.layer_pattern.count("M") / len(nano.layer_pattern)
    full = host("nemotron-3-nano-30b-a3b", "attn+mamba+moe_router+moe_preprocess")
    assert full == pytest.approx(10 * 1e-4 * moe_share * 2 * e)          # a MoE block's experts: 2e of it
    assert host("nemotron-3-nano-30b-a3b", "attn+moe_router+moe_preprocess") == pytest.approx(
        full + 10 * 1e-4 * mamba_share)
    # the default (0) is the recipes' scope for the kind of model
    assert host("nemotron-3-nano-30b-a3b", "") == pytest.approx(full)
    assert default_scope(load_model("kimi-k2")) == ("attn", "moe_router", "moe_preprocess")


def test_host_launches_run_ahead_of_a_busy_gpu():
    """Asynchronous launches: a layer whose GPU time dwarfs its host time exposes (almost) none of it,
    one whose host time dwarfs its GPU time exposes host - GPU; the MoE syncs stay exposed either way."""
    cal = Calibration(layer_overhead_s=1e-3, moe_sync_s=3e-4, graph_layer_residual=0.25)
    eager = np.array([0])
    kw = dict(model=load_model("qwen3-30b-a3b"), graph_scope=0)
    busy = kernels.host_time_s(10.0, 4.0, eager, cal, gpu_layer_s=20e-3, **kw)
    assert busy[0] == pytest.approx(4 * 3e-4, abs=10 * 1e-6)  # < 1 us per layer left of 1 ms host time
    idle = kernels.host_time_s(10.0, 0.0, eager, cal, gpu_layer_s=1e-5, **kw)
    assert idle[0] == pytest.approx(10 * (1e-3 - 1e-5), rel=1e-3)
    # monotone: more GPU work per layer never exposes more launch time
    gpu = np.linspace(0.0, 5e-3, 50)
    exposed = kernels.host_time_s(1.0, 0.0, np.zeros(50, dtype=int), cal, gpu_layer_s=gpu, **kw)
    assert np.all(np.diff(exposed) <= 1e-15) and exposed[0] == pytest.approx(1e-3)


def test_dispatcher_sm_fraction_and_overlap_cost():
    assert kernels.dispatcher_sm_fraction(gpu_spec("gb300")) == pytest.approx(24 / 160)
    m = load_model("deepseek-v3")
    fabric = load_preset("gb200-nvl72", num_gpus=256)
    base = Layout(tp=1, pp=4, vp=4, ep=64, etp=1, dp=64, mbs=1, gbs=4096, precision="mxfp8", dispatcher="flex")
    on = dataclasses.replace(base, moe_a2a_overlap=True)
    bd = evaluate_layouts(m, fabric, LayoutArrays.from_layouts([base, on]))
    assert bd.ep_total_s[0] == pytest.approx(bd.ep_total_s[1])
    # overlap hides part of the all-to-all but charges the SMs it holds while compute runs beside it
    window = bd.compute_s[1] - _sync_s(m, on, bd.num_microbatches[1])
    frac = kernels.dispatcher_sm_fraction(fabric.gpu)
    cal = Calibration()
    hidden = np.maximum(bd.ep_total_s[1] - cal.ep_overlap_efficiency * np.minimum(bd.ep_total_s[1], window), 0.0)
    assert bd.ep_exposed_s[1] == pytest.approx(hidden + frac * min(bd.ep_total_s[1], window), rel=1e-9)
    assert bd.ep_exposed_s[1] < bd.ep_exposed_s[0] == bd.ep_total_s[0]


def _sync_s(model, layout, num_microbatches):
    """The MoE token-count syncs of a step (eager launches): the part of compute no overlap can use."""
    from commbench.planner.layout.split import split_vocab, stage_imbalance
    imbalance = float(stage_imbalance(model, np.array([layout.pp]), np.array([layout.vp]),
                                      np.array([split_vocab(model, layout.tp)]))[0])
    moe_stage = (model.num_moe_layers + model.num_mtp_layers) / layout.pp * imbalance
    return num_microbatches * float(kernels.moe_sync_time_s(moe_stage, np.array([0]), Calibration())[0])


def test_ep_overlap_has_its_own_efficiency():
    m = load_model("qwen3-235b-a22b")
    fabric = load_preset("h100-hgx", num_gpus=256)
    lay = Layout(tp=2, pp=8, vp=4, ep=32, etp=1, dp=16, mbs=1, gbs=2048, precision="fp8", moe_a2a_overlap=True)
    arr = LayoutArrays.from_layouts([lay])
    full, none = (evaluate_layouts(m, fabric, arr, calibration=Calibration(ep_overlap_efficiency=e)) for e in (1.0, 0.3))
    # the TP/DP/PP overlap term does not move the EP all-to-all
    same = evaluate_layouts(m, fabric, arr, calibration=Calibration(ep_overlap_efficiency=1.0, overlap_efficiency=0.9))
    assert same.ep_exposed_s[0] == pytest.approx(full.ep_exposed_s[0])
    window = full.compute_s[0] - _sync_s(m, lay, full.num_microbatches[0])
    sm = kernels.dispatcher_sm_fraction(fabric.gpu) * min(full.ep_total_s[0], window)
    assert full.ep_exposed_s[0] == pytest.approx(max(full.ep_total_s[0] - window, 0.0) + sm, rel=1e-9)
    assert none.ep_exposed_s[0] == pytest.approx(full.ep_total_s[0] - 0.3 * min(full.ep_total_s[0], window) + sm,
                                                 rel=1e-9)


def test_sustained_tensor_fraction_by_hand():
    # rate ~ SMs^(2/3) x TDP^(1/3) at the power limit, against the family's reference (B200, H100)
    assert gpu_spec("b200").sustained_tensor_fraction == 1.0 == gpu_spec("h100").sustained_tensor_fraction
    assert gpu_spec("b300").sustained_tensor_fraction == pytest.approx((160 / 148) ** (2 / 3) * 1.1 ** (1 / 3))
    assert gpu_spec("gb200").sustained_tensor_fraction == pytest.approx(1.2 ** (1 / 3) / (5000 / 4500))
    assert gpu_spec("gb300").sustained_tensor_fraction == pytest.approx(
        (160 / 148) ** (2 / 3) * 1.4 ** (1 / 3) / (5000 / 4500))
    # same datasheet, more SMs and power: B300's GEMMs are faster than B200's by exactly that factor
    m = load_model("llama3-8b")
    lay = LayoutArrays.from_layouts([Layout(tp=1, dp=8, mbs=1, gbs=64, precision="fp8")])
    cal = Calibration(gemm_traffic_factor=0.0)
    b200, b300 = (evaluate_layouts(m, load_preset(p, num_gpus=8), lay, calibration=cal) for p in ("b200-hgx", "b300-hgx"))
    assert b200.gemm_s[0] / b300.gemm_s[0] == pytest.approx(gpu_spec("b300").sustained_tensor_fraction, rel=1e-9)
    assert b300.mfu[0] > b200.mfu[0] and b300.peak_tflops[0] == b200.peak_tflops[0]   # MFU stays on the datasheet
    # a GPU without the facts is refused in one line, not guessed
    from commbench.errors import CommbenchError
    with pytest.raises(CommbenchError, match="tdp_w"):
        kernels.sustained_tensor_fraction(dataclasses.replace(gpu_spec("b200"), sustained_tensor_fraction=None))


def test_recompute_modules_cost_and_memory_ordering():
    m = load_model("deepseek-v3")
    fabric = load_preset("gb200-nvl72", num_gpus=256)
    lays = [Layout(tp=1, pp=4, vp=4, ep=64, etp=1, dp=64, mbs=1, gbs=4096, precision="mxfp8", recompute=r)
            for r in ("none", "mla_up_proj", "moe_act", "selective", "full")]
    bd = evaluate_layouts(m, fabric, LayoutArrays.from_layouts(lays))
    rec, act = bd.recompute_s, bd.mem_activations_bytes
    assert rec[0] == 0 < rec[1] and 0 < rec[2] and rec[1] < rec[4] and rec[3] < rec[4]
    assert act[0] > act[1] > act[3] > act[4] and act[0] > act[2]


def test_fused_moe_removes_activation_traffic_not_permutes_by_hand():
    m = load_model("qwen3-30b-a3b")
    arr = LayoutArrays.from_layouts([Layout(tp=1, dp=8, ep=8, mbs=1, gbs=8, precision="mxfp8"),
                                     Layout(tp=1, dp=8, ep=8, mbs=1, gbs=8, precision="mxfp8", fused_moe=True)])
    one, tp, cp, pp = np.ones(2, int), np.ones(2, int), np.ones(2, int), np.ones(2, int)
    b = memory.elementwise_bytes_per_microbatch(m, arr, tp, cp, pp, one.astype(bool), np.full(2, 4096.0))
    h, k, ffn = m.hidden, m.top_k, m.expert_ffn
    saved_per_token = k * (m.glu_factor * ffn + 1.5 * ffn)     # activation, FFN-side cast; permutes stay
    n_moe = m.num_moe_layers + m.num_mtp_layers
    assert b[0] - b[1] == pytest.approx(3.0 * 4096 * saved_per_token * n_moe * 2, rel=1e-9)


def test_graph_memory_and_usable_hbm():
    m = load_model("deepseek-v3")
    fabric = load_preset("gb300-nvl72", num_gpus=256)
    # flex: an alltoall layer graph over moe_preprocess also holds the permuted tokens in its pool
    # (tests/test_peak_memory_terms.py)
    lays = [Layout(tp=1, pp=2, vp=8, ep=32, etp=1, dp=128, mbs=1, gbs=4096, precision="mxfp8", cuda_graph=g,
                   dispatcher="flex") for g in ("none", "layer", "full")]
    bd = evaluate_layouts(m, fabric, LayoutArrays.from_layouts(lays))
    cal = Calibration()
    assert bd.mem_reserve_bytes[1] - bd.mem_reserve_bytes[0] == pytest.approx(cal.graph_layer_bytes)
    assert bd.mem_reserve_bytes[2] - bd.mem_reserve_bytes[0] == pytest.approx(
        cal.graph_full_fraction * bd.mem_activations_bytes[2])
    assert bd.mem_capacity_bytes[0] == 276.50 * 2 ** 30           # GB300: what CUDA exposes, not the 288 GB label
    # Launch-time ordering with per-layer graphs that save something (the shipped fit may put the
    # residual at its bound 1: no saving on the published rows).
    graphs = evaluate_layouts(m, fabric, LayoutArrays.from_layouts(lays), calibration=Calibration(graph_layer_residual=0.5))
    assert graphs.overhead_s[2] == 0 < graphs.overhead_s[1] < graphs.overhead_s[0]


def _scaled_gpu(gpu, factor):
    return dataclasses.replace(gpu, bf16_tflops=gpu.bf16_tflops * factor, fp8_tflops=gpu.fp8_tflops * factor,
                               fp4_tflops=(gpu.fp4_tflops or 0) * factor or None, hbm_tbps=gpu.hbm_tbps * factor,
                               sfu_texp_per_s=gpu.sfu_texp_per_s * factor)


@pytest.mark.parametrize("model", ["deepseek-v3", "qwen3-30b-a3b", "llama3.1-70b"])
def test_faster_gpu_or_more_bandwidth_is_never_slower(model, monkeypatch):
    m = load_model(model)
    rng = np.random.default_rng(3)
    n = 300
    tp, pp = rng.choice([1, 2], n), rng.choice([1, 2, 4], n)
    moe = m.is_moe
    arr = LayoutArrays.from_columns(tp=tp, pp=pp, dp=64 // (tp * pp), ep=rng.choice([8, 16], n) if moe else 1, etp=1,
                                    vp=1, mbs=1, gbs=512, precision="mxfp8",
                                    recompute=rng.choice(["none", "selective", "full"], n),
                                    cuda_graph=rng.choice(["none", "layer", "full"], n),
                                    moe_a2a_overlap=(rng.random(n) < .5) & moe, fused_moe=rng.random(n) < .5)
    base = load_preset("gb200-nvl72", num_gpus=64)
    slow = evaluate_layouts(m, base, arr)
    ok = slow.valid
    assert ok.sum() > 50
    fast = evaluate_layouts(m, _Proxy(base, _scaled_gpu(base.gpu, 1.5)), arr)
    assert np.all(fast.step_s[ok] <= slow.step_s[ok] * (1 + 1e-12))
    # more power headroom (a higher sustained tensor rate) never predicts slower either
    more_power = dataclasses.replace(base.gpu, sustained_tensor_fraction=base.gpu.sustained_tensor_fraction * 1.2)
    cooler = evaluate_layouts(m, _Proxy(base, more_power), arr)
    assert np.all(cooler.step_s[ok] <= slow.step_s[ok] * (1 + 1e-12)) and np.any(cooler.step_s[ok] < slow.step_s[ok])
    # twice the bandwidth (and half the latency) everywhere: every collective takes half the time
    from commbench.planner.step import evaluate as step_module
    coll, a2a = step_module._costmodel()
    hier = step_module._hierarchical()
    monkeypatch.setattr(step_module, "_costmodel", lambda: (lambda *a, **k: 0.5 * coll(*a, **k),
                                                            lambda *a, **k: 0.5 * a2a(*a, **k)))
    monkeypatch.setattr(step_module, "_hierarchical", lambda: (lambda *a, **k: 0.5 * hier(*a, **k)))
    more_bw = evaluate_layouts(m, base, arr)
    assert np.all(more_bw.step_s[ok] <= slow.step_s[ok] * (1 + 1e-12))
    assert np.any(more_bw.step_s[ok] < slow.step_s[ok])


class _Proxy:
    """The same fabric with another GPU datasheet."""

    def __init__(self, fabric, gpu):
        self._fabric, self.gpu = fabric, gpu

    def __getattr__(self, name):
        return getattr(self._fabric, name)



def test_expert_load_imbalance_and_capacity_padding_by_hand():
    m = load_model("deepseek-v3")
    fabric = load_preset("gb200-nvl72", num_gpus=256)
    base = dict(tp=1, pp=4, vp=4, ep=64, etp=1, dp=64, mbs=1, gbs=4096, precision="mxfp8")
    arr = LayoutArrays.from_layouts([Layout(cuda_graph="layer", **base), Layout(cuda_graph="full", **base)])
    cal = Calibration(gemm_traffic_factor=0.0, expert_gemm_kernel_s=0.0)  # compute only: linear in its tokens
    even = evaluate_layouts(m, fabric, arr, calibration=cal)
    skew = evaluate_layouts(m, fabric, arr, calibration=cal, moe_imbalance=1.2)
    padded = evaluate_layouts(m, fabric, arr, calibration=cal, moe_imbalance=1.2, moe_capacity_factor=1.5)
    from commbench.planner import flops_breakdown
    fl = flops_breakdown(m)
    grouped = cal.grouped_gemm_8bit_efficiency  # mxfp8: the expert GEMMs run at the 8-bit grouped efficiency
    dense = cal.gemm_efficiency_blackwell * kernels.MXFP8_GEMM_RATIO   # mxfp8 dense GEMMs: block-scaled kernels
    # the output layer in bf16 (step/module_precision.py): at the bf16 peak, in units of the fp8 one
    bf16 = cal.gemm_efficiency_blackwell * fabric.gpu.bf16_tflops / fabric.gpu.fp8_tflops
    other = (fl.gemm - fl.routed_experts - fl.logits) / dense + fl.logits / bf16
    routed_share = fl.routed_experts / grouped / (fl.routed_experts / grouped + other)
    # busiest rank: 1.2x the expert GEMMs (dropless); with full graphs padded to capacity 1.5x
    assert skew.gemm_s[0] / even.gemm_s[0] == pytest.approx(1 + 0.2 * routed_share, rel=1e-9)
    assert padded.gemm_s[1] / even.gemm_s[1] == pytest.approx(1 + 0.5 * routed_share, rel=1e-9)
    assert padded.gemm_s[0] == pytest.approx(skew.gemm_s[0])   # no padding without full-iteration graphs


def test_attention_forward_is_exp_bound_where_the_whole_core_is_not():
    """Forward and backward are bound on their own sides: a core whose total tensor time exceeds its exp
    time still speeds up when the exp rate doubles (Blackwell Ultra), through its exp-bound forward."""
    exps, tc = np.array([1e12]), np.array([1.5e15])   # 1 s of exps, 1.5 s of tensor work at the rates below
    slow = kernels.attention_time_s(tc, exps, tc_rate_flops=1e15, sfu_rate_exps=1e12)
    fast = kernels.attention_time_s(tc, exps, tc_rate_flops=1e15, sfu_rate_exps=2e12)
    fwd = kernels.smooth_max(np.array([0.5]), np.array([0.5]))
    bwd = kernels.smooth_max(np.array([1.0]), np.array([0.5]))
    assert slow[0] == pytest.approx(float(fwd[0] + bwd[0]))
    assert fast[0] < slow[0] * 0.95 and fast[0] >= 1.5   # never below the tensor time


def test_torchtitan_memory_is_its_own_loss_and_bf16_gathers():
    """TorchTitan 0.3.0 computes the loss on an fp32 copy of the logits (components/loss.py) and has no fp8
    parameter all-gather: the same layout needs more memory there than under the Megatron-LM launch's native fused
    cross entropy (its fp32 softmax) and fp8_param_gather, by exactly those bytes (step/loss_memory.py), and its DP
    all-gather moves bf16."""
    from commbench.planner.models.counts import param_counts
    m = load_model("llama3-8b")
    fabric = load_preset("gb200-nvl72", num_gpus=8)
    lay = Layout(tp=1, pp=1, vp=1, dp=8, mbs=1, gbs=64, precision="fp8", recompute="none")
    arr = LayoutArrays.from_layouts([lay])
    mg = evaluate_layouts(m, fabric, arr, framework="megatron")
    tt = evaluate_layouts(m, fabric, arr, framework="torchtitan")
    logits_entries = lay.mbs * m.seq_len * m.vocab
    # less Megatron's attention output, kept once in bf16 (linear_proj saves flash attention's original input,
    # megatron-core set_save_original_input), where TorchTitan's float8 linear keeps its 1-byte copy: 1 B per hidden
    # element per token per layer (step/memory.py, fix-BU)
    attn_out = lay.mbs * m.seq_len * m.num_layers * m.hidden * 1.0
    assert tt.mem_activations_bytes[0] - mg.mem_activations_bytes[0] == pytest.approx(logits_entries * (8.0 - 4.0)
                                                                                     - attn_out)
    # bf16 weights vs Megatron's fp8 transformer layers beside its bf16 embedding and output layer
    # (step/module_precision.py)
    pc = param_counts(m)
    assert tt.mem_weights_bytes[0] == pytest.approx(2 * pc.non_expert)
    assert mg.mem_weights_bytes[0] == pytest.approx((pc.non_expert - pc.embeddings) * 1.0 + pc.embeddings * 2.0)
    assert tt.dp_dense_ag_total_s[0] > 1.5 * mg.dp_dense_ag_total_s[0]


def test_fused_grouped_mlp_only_where_transformer_engine_fuses():
    """fused_moe changes nothing for bf16 / fp8 recipes nor on Hopper: TE's fusion pass keeps the unfused ops."""
    m = load_model("qwen3-30b-a3b")
    for preset, precision, fuses in (("gb200-nvl72", "mxfp8", True), ("gb200-nvl72", "bf16", False),
                                     ("gb200-nvl72", "fp8", False), ("h100-hgx", "fp8", False)):
        fabric = load_preset(preset, num_gpus=8)
        lays = [Layout(tp=1, dp=8, ep=8, mbs=1, gbs=64, precision=precision, fused_moe=f) for f in (False, True)]
        bd = evaluate_layouts(m, fabric, LayoutArrays.from_layouts(lays))
        assert bd.valid.all()
        assert (bd.step_s[1] < bd.step_s[0]) if fuses else (bd.step_s[1] == bd.step_s[0]), (preset, precision)


def test_each_block_pays_one_norm_and_one_residual_add():
    """A dense transformer layer in bf16 (no sequence sharding) moves, per token, one norm (2h) and one
    residual add (3h) per block (attention, MLP), rope on q and k, and the GLU activation: forward x 3 for
    forward + backward, 2 B per element."""
    m = load_model("llama3-8b")
    arr = LayoutArrays.from_layouts([Layout(tp=1, dp=8, mbs=1, gbs=8, precision="bf16")])
    one = np.ones(1, int)
    b = memory.elementwise_bytes_per_microbatch(m, arr, one, one, one, one.astype(bool), np.full(1, 4096.0))
    h = m.hidden
    per_layer = 2 * (2 * h + 3 * h) + 2 * m.q_dim + m.glu_factor * m.dense_ffn
    assert b[0] == pytest.approx(3.0 * 4096 * per_layer * m.num_layers * 2, rel=1e-9)


def test_clamped_glu_and_expert_bias_pay_their_unfused_passes():
    """gpt-oss clamps its GLU inputs and biases its experts: megatron-core's TEGroupedMLP clamps and
    re-concatenates the FC1 output (8 FFN widths) and adds each expert's prob-scaled FC2 bias per expert
    (6 h) per routed token copy, forward x 3; the fused grouped MLP (TE >= 2.15 fuses the clamped GeGLU
    and the biases) pays none of it."""
    m = load_model("gpt-oss-120b")
    plain = dataclasses.replace(m, architecture=dataclasses.replace(m.architecture, activation_clamp=0.0,
                                                                    linear_bias=False))
    lays = [Layout(tp=1, dp=64, ep=8, mbs=1, gbs=64, precision="mxfp8", fused_moe=f) for f in (False, True)]
    arr = LayoutArrays.from_layouts(lays)
    one = np.ones(2, int)
    args = (arr, one, one, one, one.astype(bool), np.full(2, 4096.0))
    extra = memory.elementwise_bytes_per_microbatch(m, *args) - memory.elementwise_bytes_per_microbatch(plain, *args)
    per_token = m.top_k * (8 * m.expert_ffn + 6 * m.hidden) * m.num_moe_layers
    assert extra[0] == pytest.approx(3.0 * 4096 * per_token * 2, rel=1e-9)
    assert extra[1] == 0.0


def test_yarn_with_a_concentration_factor_runs_megatrons_unfused_rope():
    """gpt-oss's YaRN (factor 32, no mscale) has a concentration factor of 0.1 ln 32 + 1, which Megatron-Core's
    apply_rotary_pos_emb refuses to TE's fused RoPE (core_v0.16.0 to core_v0.19.0): q and k take the unfused
    implementation's 22 passes (forward + backward) instead of the fused 2 q_dim x 3 charged; DeepSeek-V3's MLA
    YaRN (mscale = mscale_all_dim) has 1, and TorchTitan's launch is not Megatron's (nothing added)."""
    import math

    m = load_model("gpt-oss-120b")
    assert memory.yarn_concentration(m) == pytest.approx(0.1 * math.log(32.0) + 1.0)
    assert memory.yarn_concentration(load_model("deepseek-v3")) == pytest.approx(1.0)
    fused = dataclasses.replace(m, architecture=dataclasses.replace(m.architecture, yarn_mscale=1.0,
                                                                    yarn_mscale_all_dim=1.0))
    arr = LayoutArrays.from_layouts([Layout(tp=1, dp=64, ep=64, mbs=1, gbs=64, precision="bf16")])
    one = np.ones(1, int)
    args = (arr, one, one, one, one.astype(bool), np.full(1, 4096.0))
    extra = memory.elementwise_bytes_per_microbatch(m, *args) - memory.elementwise_bytes_per_microbatch(fused, *args)
    rotated = m.q_dim + m.num_kv_heads * m.head_dim
    assert extra[0] == pytest.approx(4096 * (22 * rotated - 6 * m.q_dim) * m.num_layers * 2, rel=1e-9)
    titan = [memory.elementwise_bytes_per_microbatch(x, *args, framework="torchtitan") for x in (m, fused)]
    assert titan[0][0] == titan[1][0]


def test_alltoall_dispatcher_sorts_the_received_tokens_by_local_expert():
    """Megatron-Core's alltoall dispatcher sorts the tokens it receives by local expert and back
    (sort_chunks_by_idxs, where a rank holds more than one expert): 2 sorts x (read + write) of the top-k
    copies forward and again backward; the flex dispatcher does not, nor does alltoall with one local expert."""
    m = load_model("gpt-oss-120b")
    lays = [Layout(tp=1, dp=dp, ep=ep, mbs=1, gbs=dp, precision="bf16", dispatcher=d)
            for dp, ep in ((64, 8), (128, 128)) for d in ("alltoall", "flex")]
    arr = LayoutArrays.from_layouts(lays)
    one = np.ones(4, int)
    b = memory.elementwise_bytes_per_microbatch(m, arr, one, one, one, one.astype(bool), np.full(4, 4096.0))
    assert b[0] - b[1] == pytest.approx(4096 * 8 * m.top_k * m.hidden * m.num_moe_layers * 2, rel=1e-9)
    assert b[2] == b[3]


def test_mla_up_proj_recompute_repeats_the_up_projections_megatron_checkpoints():
    """mla_up_proj repeats the forward of linear_q_up_proj (or linear_q_proj without a query low rank) and
    linear_kv_up_proj (megatron-core 0.16.1 qkv_up_proj_and_rope_apply): for DeepSeek-V3 54.5M of the layer's
    187.1M projection MACs, not half of them; without q_lora_rank the query projection from h is repeated."""
    import dataclasses

    from commbench.planner.models.counts import flops_breakdown, up_projection_flops
    from commbench.planner.models.zoo import load_model

    m = load_model("deepseek-v3")
    fl = flops_breakdown(m)
    up = 1536 * 128 * (128 + 64) + 512 * 128 * (128 + 128)
    proj = 1536 * (7168 + 128 * 192 + 1) + 512 * (7168 + 128 * 256 + 1) + 7168 * 64 + 128 * 128 * 7168
    assert up_projection_flops(m, fl) / fl.attention_proj == pytest.approx(up / proj, rel=1e-9)
    assert 0.28 < up / proj < 0.30
    no_low_rank = dataclasses.replace(m, q_lora_rank=0)
    fl2 = flops_breakdown(no_low_rank)
    up2 = 7168 * 128 * 192 + 512 * 128 * 256
    proj2 = 7168 * 128 * 192 + 512 * (7168 + 128 * 256 + 1) + 7168 * 64 + 128 * 128 * 7168
    assert up_projection_flops(no_low_rank, fl2) / fl2.attention_proj == pytest.approx(up2 / proj2, rel=1e-9)


def test_memory_bound_kernels_run_at_the_sms_power_limited_rate():
    # SMs x the power-limited clock relative to the family's reference (B200): the law of sustained_tensor_fraction
    from commbench.data.reference import gpu_spec
    rate = {n: kernels.sustained_sm_rate(gpu_spec(n)) for n in ("b200", "gb200", "b300", "gb300", "h100", "h200")}
    assert rate["b200"] == pytest.approx(1.0) and rate["h100"] == pytest.approx(1.0) and rate["h200"] == pytest.approx(1.0)
    assert rate["gb200"] == pytest.approx(1.2 ** (1 / 3))
    assert rate["gb300"] == pytest.approx((160 / 148) ** (2 / 3) * 1.4 ** (1 / 3))
    assert rate["gb300"] / rate["gb200"] == pytest.approx(1.109, abs=1e-3)
    # the same tensor rate per datasheet: sustained_tensor_fraction x datasheet / the reference's datasheet
    g = gpu_spec("gb300")
    assert rate["gb300"] == pytest.approx(g.sustained_tensor_fraction * g.fp8_tflops / gpu_spec("b200").fp8_tflops)
    # a hand-made spec without a reference is its own reference
    assert kernels.sustained_sm_rate(dataclasses.replace(g, clock_reference=None)) == 1.0
