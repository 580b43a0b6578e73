"""Planner: GEMM shape term, expert-tensor-parallel communication and ETP activation memory, by hand."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from commbench.planner import Calibration, Layout, LayoutArrays, evaluate_layouts, flops_breakdown, load_model
from commbench.planner.step import gemm_shape
from commbench.planner.step import evaluate as step_module
from commbench.data.reference import gpu_spec

SECONDS_PER_BYTE = 1e-12


def _fabric(num_gpus=64, gpu="gb200", domain_size=72):
    return SimpleNamespace(gpu=gpu_spec(gpu), domain_size=domain_size, num_gpus=num_gpus)


def _stand_in(monkeypatch):
    """Cost model stand-in: every collective takes size x SECONDS_PER_BYTE (0 for a group of one)."""
    def collective(fabric, collective, size_bytes, group_size, num_domains=1, imbalance=1.0):
        size, n = np.broadcast_arrays(np.asarray(size_bytes, float), np.asarray(group_size, float))
        return np.where(n > 1, size * SECONDS_PER_BYTE, 0.0)

    def a2a(fabric, bytes_per_rank, ep_size, num_domains=1, imbalance=1.0, *, phase=None):
        return collective(fabric, "all_to_all", bytes_per_rank, ep_size)

    monkeypatch.setattr(step_module, "_costmodel", lambda: (collective, a2a))

    def hierarchical(fabric, size_bytes, group_size, ranks_per_domain):  # two stages, as the cost model does
        m = np.asarray(ranks_per_domain, float)
        return collective(fabric, "reduce_scatter", size_bytes, m) + \
            collective(fabric, "reduce_scatter", np.asarray(size_bytes, float) / m, np.asarray(group_size, float) / m)

    monkeypatch.setattr(step_module, "_hierarchical", lambda: hierarchical)


def test_gemm_shape_term_by_hand(monkeypatch):
    _stand_in(monkeypatch)
    m = load_model("llama3-8b")
    lay = Layout(tp=1, pp=1, dp=8, mbs=1, gbs=8, precision="bf16", recompute="none")
    off = Calibration(gemm_traffic_factor=0.0)
    on = Calibration(gemm_traffic_factor=1.0)
    arr = LayoutArrays.from_layouts([lay])
    f = _fabric(8, "b200", 8)
    compute = evaluate_layouts(m, f, arr, calibration=off).gemm_s[0]
    with_traffic = evaluate_layouts(m, f, arr, calibration=on).gemm_s[0]
    fl, s, h = flops_breakdown(m), float(m.seq_len), float(m.hidden)
    inv = lambda n: 1 / s + 1 / n + 1 / h  # noqa: E731
    bytes_per_token = (fl.attention_proj * inv(m.attn_out_dim) + fl.dense_mlp * inv(m.dense_ffn)
                       + fl.logits * inv(m.vocab)) * 2 / 2          # bf16 operands: b / 2 = 1
    traffic = s * bytes_per_token / (gpu_spec("b200").hbm_tbps * 1e12)
    # roofline: compute and traffic combine as a smooth max (p = 4), not a sum (dense model: one kind)
    assert with_traffic == pytest.approx((compute ** 4 + traffic ** 4) ** 0.25, rel=1e-9)
    assert max(compute, traffic) <= with_traffic < compute + traffic


def test_expert_gemm_shape_penalises_etp_and_many_experts_per_rank():
    m = load_model("deepseek-v3")
    fl = flops_breakdown(m)
    tokens = np.array([4096.0, 4096.0, 4096.0])
    tp, ep, etp = np.array([1, 2, 1]), np.array([32, 1, 1]), np.array([1, 8, 1])
    assert gemm_shape.expert_tokens_per_gemm(m, tokens, tp, 1, ep, etp).tolist() == [4096.0, 512.0, 128.0]
    _, routed = gemm_shape.traffic_bytes_per_token(m, fl, tokens_mb=tokens, tp=tp, cp=1, ep=ep, etp=etp,
                                                   precision=np.array([2, 2, 2]))
    # EP32 ETP1 (m=4096, n=2048) runs closest to peak; EP1 ETP8 (m=512, n=256) and EP1 ETP1 (m=128) far below
    assert routed[0] < 0.5 * routed[1] < 0.5 * routed[2]


def test_etp_communication_by_hand(monkeypatch):
    _stand_in(monkeypatch)
    m = load_model("deepseek-v3")
    base = dict(tp=2, pp=16, vp=1, ep=1, cp=1, dp=4, mbs=1, gbs=64, precision="mxfp8", recompute="full",
                sequence_parallel=True, tp_comm_overlap=False, moe_a2a_overlap=False)
    lays = [Layout(etp=1, **base), Layout(etp=8, **base)]
    bd = evaluate_layouts(m, _fabric(128), LayoutArrays.from_layouts(lays), calibration=Calibration())
    assert bd.valid.all()
    assert bd.etp_total_s[0] == 0.0
    tokens_rank = m.seq_len / 2                           # SP shard of one micro-batch
    elements = 8 * tokens_rank * m.top_k * m.hidden       # ETP all-gather output
    # the gather and its backward reduce-scatter in bf16; the combine's reduce-scatter and its backward gather in
    # the routing probabilities' fp32 (megatron-core 0.16.1 combine_preprocess: hidden_states.to(probs.dtype))
    per_layer = 2 * elements * 2 + 2 * elements * 4
    # full recompute re-runs the forward (megatron-core CheckpointFunction.backward): its gather (bf16) and its
    # combine's reduce-scatter (fp32) once more (step/moe_comm.py)
    per_layer += elements * 2 + elements * 4
    from commbench.planner.models.counts import step_vocab
    # the busiest pipeline rank, its loss stage at the rows charged at TP 2 (Megatron's padded 130,560)
    moe_stage = (m.num_moe_layers + m.num_mtp_layers) / 16 * step_module.stage_imbalance(
        m, np.array([16]), np.array([1]), np.array([step_vocab(m, 2, "megatron")]))[0]
    n_mb = 64 // 4
    # per MoE layer: (AG + RS) forward, the mirror backward and the re-run forward
    assert bd.etp_total_s[1] == pytest.approx(n_mb * moe_stage * per_layer * SECONDS_PER_BYTE, rel=1e-9)
    assert bd.etp_exposed_s[1] == bd.etp_total_s[1]       # not overlapped without EP comm overlap
    assert bd.tp_total_s[0] == pytest.approx(bd.tp_total_s[1])   # routed experts are not on the TP group


def test_etp_gathered_tokens_count_in_activation_memory(monkeypatch):
    _stand_in(monkeypatch)
    m = load_model("deepseek-v3")
    base = dict(tp=2, pp=16, vp=1, ep=1, cp=1, dp=4, mbs=1, gbs=64, precision="mxfp8", recompute="none")
    lays = LayoutArrays.from_layouts([Layout(etp=1, **base), Layout(etp=2, **base)])
    bd = evaluate_layouts(m, _fabric(128), lays)
    per_token_layer = m.top_k * m.hidden * 0.5 / 2        # one more full-width fp8 FC1 input copy per routed row
    # the busiest pipeline rank (step/stage_memory.py) holds its own MoE layers for the micro-batches 1F1B keeps in
    # flight there (pp - rank); the same rank for both layouts
    from commbench.planner.models.counts import step_vocab
    from commbench.planner.step.stage_memory import rank_loads
    assert bd.mem_pipeline_rank[0] == bd.mem_pipeline_rank[1]
    load = rank_loads(m, 16, 1, float(step_vocab(m, 2)))[int(bd.mem_pipeline_rank[0])]
    delta = bd.mem_activations_bytes[1] - bd.mem_activations_bytes[0]
    expected = m.seq_len * per_token_layer * load.counts.moe * 2 * load.chunks_in_flight
    # and the backward's returning expert-output gradient (memory.moe_backward_transient_bytes): one more bf16 copy
    # of the rank's routed rows, full width, for the ETP all-gather (fix-G11)
    expected += m.seq_len * m.top_k / 2 * m.hidden * 2
    assert load.counts.moe > 0 and delta == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("dispatcher", ["alltoall", "flex"])
def test_uneven_routing_slows_the_ep_all_to_all_on_either_dispatcher(dispatcher):
    from commbench.costmodel import load_preset
    from commbench.planner import parse_layout

    model, fabric = load_model("deepseek-v3"), load_preset("gb300-nvl72", num_gpus=256)
    layout = parse_layout(f"tp=1,pp=4,vp=4,ep=32,mbs=1,gbs=4096,precision=mxfp8,dispatcher={dispatcher}", num_gpus=256)
    arrays = LayoutArrays.from_layouts([layout])
    balanced = evaluate_layouts(model, fabric, arrays)
    skewed = evaluate_layouts(model, fabric, arrays, moe_imbalance=1.5)
    assert skewed.ep_total_s[0] > 1.3 * balanced.ep_total_s[0]


def test_flex_with_etp_is_one_all_to_all_over_etp_x_ep():
    """megatron-core 0.16.1 MoEFlexTokenDispatcher: one all-to-all over the ETP x EP group, each token sent to every
    ETP rank of each destination EP rank (routing map replicated over ETP), and no ETP all-gather / reduce-scatter;
    the alltoall dispatcher keeps its EP all-to-all and the ETP gather/scatter."""
    from commbench.planner.step import moe_comm
    m = load_model("qwen3-30b-a3b")
    calls = []

    def cost(system, name, size, group, domains, imbalance=1.0, **_):
        calls.append((name, np.asarray(group, float).copy()))
        return np.asarray(size, dtype=np.float64) * SECONDS_PER_BYTE

    def a2a(system, size, group, domains, imbalance, phase, **_):
        return cost(system, "moe", size, group, domains)

    lays = [Layout(tp=2, pp=1, ep=4, etp=2, cp=1, dp=4, mbs=1, gbs=64, precision="bf16", dispatcher=d)
            for d in ("flex", "alltoall")]
    arr = LayoutArrays.from_layouts(lays)
    tokens = np.array([4096.0, 4096.0])
    ep_s, etp_s = moe_comm.ep_etp_totals_s(
        m, None, arr, tokens_mb=tokens, tp=np.array([2, 2]), cp=np.array([1, 1]), ep=np.array([4, 4]),
        etp=np.array([2, 2]), moe_stage=np.array([1.0, 1.0]), rack_gpus=8, max_domains=1, moe_imbalance=1.0,
        cal=Calibration(all_to_all_efficiency=1.0), collective_time_s=cost, moe_all_to_all_time_s=a2a)
    tokens_rank = 4096 / 2
    e = m.num_routed_experts                                 # top-k distinct experts, e/4 a rank (hypergeometric)
    distinct = 4 * (1 - math.comb(e - e // 4, m.top_k) / math.comb(e, m.top_k))   # distinct destination EP ranks
    flex_bytes = tokens_rank * 2 * distinct * m.hidden * 2   # x ETP copies, bf16
    assert ep_s[0] == pytest.approx(4 * flex_bytes * SECONDS_PER_BYTE, rel=1e-9)
    assert etp_s[0] == 0.0                                   # flex: no ETP gather / scatter
    a2a_groups = {tuple(g) for name, g in calls if name in ("moe", "all_to_all")}
    assert (8.0, 4.0) in a2a_groups                          # flex on ETP x EP = 8 ranks, alltoall on EP = 4
    assert ep_s[1] == pytest.approx(4 * tokens_rank * m.top_k * m.hidden * 2 * SECONDS_PER_BYTE, rel=1e-9)
    assert etp_s[1] > 0.0                                    # alltoall: the ETP all-gather + reduce-scatter


def test_ep_etp_totals_at_several_rerun_shares_are_each_share_priced_alone():
    """ep_etp_totals_each_s prices the all-to-alls and ETP collectives once for every re-run share: each share's
    totals are ep_etp_totals_s's at that share, bit for bit."""
    from commbench.planner.step import moe_comm
    m = load_model("qwen3-30b-a3b")

    def cost(system, name, size, group, domains, imbalance=1.0, **_):
        return np.asarray(size, dtype=np.float64) * SECONDS_PER_BYTE * (1.5 if name == "reduce_scatter" else 1.0) \
            + 2e-6

    def a2a(system, size, group, domains, imbalance, phase, **_):
        return cost(system, "moe", size, group, domains) * (1.25 if phase == "combine" else 1.0)

    lays = [Layout(tp=2, pp=1, ep=4, etp=2, cp=1, dp=4, mbs=1, gbs=64, precision=p, dispatcher=d)
            for d in ("flex", "alltoall") for p in ("bf16", "mxfp8")]
    arr = LayoutArrays.from_layouts(lays)
    n = len(lays)
    kw = dict(tokens_mb=np.full(n, 4096.0), tp=np.full(n, 2), cp=np.ones(n, dtype=int), ep=np.full(n, 4),
              etp=np.full(n, 2), moe_stage=np.full(n, 3.0), rack_gpus=8, max_domains=1, moe_imbalance=1.0,
              cal=Calibration(all_to_all_efficiency=0.8), collective_time_s=cost, moe_all_to_all_time_s=a2a)
    each = moe_comm.ep_etp_totals_each_s(m, None, arr, reruns=(0.0, 0.5, 1.0), **kw)
    for share, (ep_s, etp_s) in zip((0.0, 0.5, 1.0), each):
        alone_ep, alone_etp = moe_comm.ep_etp_totals_s(m, None, arr, rerun=share, **kw)
        assert np.array_equal(ep_s, alone_ep) and np.array_equal(etp_s, alone_etp)
    assert np.all(each[1][0] > each[0][0]) and np.all(each[2][1] >= each[0][1])
