"""Hand-computed cases for the MoE terms of issue 13b: the flex dispatcher's per-domain copies across
scale-up domains (ep_traffic.py) and the per-expert GEMM kernel time (kernels.expert_kernel_time_s)."""

from __future__ import annotations

import dataclasses
import itertools
from math import comb

import numpy as np
import pytest

from commbench.costmodel import load_preset
from commbench.planner import Calibration, Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.step import ep_traffic, kernels


def test_distinct_domains_by_hand():
    qwen = load_model("qwen3-235b-a22b")          # 128 experts top-8, no group-limited routing
    d = ep_traffic.distinct_domains_per_token(qwen, np.array([1.0, 2.0, 4.0]))
    # 8 distinct experts (hypergeometric): a domain of E/d experts is missed with C(E - E/d, 8) / C(E, 8)
    assert d == pytest.approx([1.0, 2 * (1 - comb(64, 8) / comb(128, 8)), 4 * (1 - comb(96, 8) / comb(128, 8))])
    dsv3 = load_model("deepseek-v3")              # 8 groups, 4 picked per token
    # 8 domains of one group each: exactly the 4 picked groups' domains.
    assert ep_traffic.distinct_domains_per_token(dsv3, np.array([8.0]))[0] == pytest.approx(4.0)
    # 4 domains of two groups: 4 x (1 - C(6,4)/C(8,4)) = 4 x (1 - 15/70)
    assert ep_traffic.distinct_domains_per_token(dsv3, np.array([4.0]))[0] == pytest.approx(4 * (1 - 15 / 70))
    # 16 domains: groups straddle two domains each, no cap beyond the uniform top-8 (distinct experts) count
    assert ep_traffic.distinct_domains_per_token(dsv3, np.array([16.0]))[0] == pytest.approx(
        16 * (1 - comb(240, 8) / comb(256, 8)))


def test_dispatch_copies_only_change_flex_across_domains():
    m = load_model("deepseek-v3")
    ep, dom = np.array([64, 64, 8]), np.array([8, 8, 1])
    fan = np.array([7.56, 8.0, 7.0])
    out = ep_traffic.dispatch_copies(m, ep, dom, fan, np.array([True, False, True]))
    assert out.tolist() == pytest.approx([4.0, 8.0, 7.0])


def test_flex_crossing_hgx_nodes_is_cheaper_than_alltoall():
    m = load_model("deepseek-v3")
    base = dict(tp=1, pp=4, vp=4, ep=64, etp=1, dp=64, mbs=1, gbs=2048, precision="fp8", moe_a2a_overlap=False)
    arr = LayoutArrays.from_layouts([Layout(dispatcher="flex", **base), Layout(dispatcher="alltoall", **base)])
    fabric = load_preset("h100-hgx", num_gpus=256)
    bd = evaluate_layouts(m, fabric, arr)
    assert bd.valid.all()
    assert bd.ep_total_s[0] < 0.7 * bd.ep_total_s[1]   # 4 copies over IB instead of ~7.6 x 7/8
    assert bd.tokens_per_s_per_gpu[0] > bd.tokens_per_s_per_gpu[1]


def test_expert_kernel_time_by_hand():
    cal = Calibration(expert_gemm_kernel_s=2e-5)
    t = kernels.expert_kernel_time_s(np.array([4.0, 4.0]), np.array([32.0, 32.0]), np.array([False, True]), cal)
    assert t.tolist() == pytest.approx([4 * 32 * 6 * 2e-5, 0.0])


def test_expert_kernel_term_in_step_model():
    m = load_model("deepseek-v3")
    fabric = load_preset("b200-hgx", num_gpus=256)
    base = dict(tp=1, pp=16, vp=1, ep=8, etp=1, dp=16, mbs=1, gbs=2048, precision="mxfp8")
    arr = LayoutArrays.from_layouts([Layout(**base), Layout(fused_moe=True, **base)])
    with_kernels = evaluate_layouts(m, fabric, arr, calibration=Calibration(expert_gemm_kernel_s=1e-5))
    without = evaluate_layouts(m, fabric, arr, calibration=Calibration(expert_gemm_kernel_s=0.0))
    from commbench.planner.layout.split import stage_imbalance   # the busiest stage of Megatron's layer split
    moe_layers_stage = (m.num_moe_layers + m.num_mtp_layers) / 16 * float(stage_imbalance(m, np.array([16]), np.array([1]))[0])
    n_mb = 2048 // 16
    expected = n_mb * moe_layers_stage * (256 / 8) * 6 * 1e-5
    assert (with_kernels.gemm_s[0] - without.gemm_s[0]) == pytest.approx(expected, rel=1e-6)
    assert with_kernels.gemm_s[1] == pytest.approx(without.gemm_s[1])   # fused grouped MLP: one kernel


def test_flex_across_racks_still_pays_the_nvlink_fan_out():
    """EP128 over two NVL72 racks sends one copy per rack over the NIC, but inside each rack the
    tokens still fan out to ~7.8 distinct ranks over NVLink: its all-to-all is never cheaper than
    EP64 kept inside one rack (~7.6 copies over the same 64 ranks)."""
    m = load_model("deepseek-v3")
    base = dict(tp=1, pp=2, vp=4, etp=1, dp=128, mbs=1, gbs=4096, precision="mxfp8", dispatcher="flex",
                recompute="none")
    arr = LayoutArrays.from_layouts([Layout(ep=128, **base), Layout(ep=64, **base)])
    bd = evaluate_layouts(m, load_preset("gb300-nvl72", num_gpus=256), arr)
    assert bd.valid.all()
    copies_128, copies_64 = 128 * (1 - comb(254, 8) / comb(256, 8)), 64 * (1 - comb(252, 8) / comb(256, 8))
    assert bd.ep_total_s[0] >= bd.ep_total_s[1] * copies_128 / copies_64 * 0.99


@pytest.mark.parametrize("nic_slowdown", [3.0, 10.0])
def test_flex_forwarding_time_is_the_slower_leg_by_hand(nic_slowdown):
    """moe_comm on stand-in cost functions (1 s per GB inside a domain, nic_slowdown s per GB across):
    EP128 over 2 domains, bf16, DeepSeek-V3's top-8 with 4 of 8 groups per token. The RDMA leg moves
    2 (1 - 1/70) copies per token, the NVLink fan-out 128 (1 - C(254, 8) / C(256, 8)) ~ 7.78; 4 kernels per
    MoE layer (dispatch + combine, forward and backward), each the slower leg."""
    from commbench.planner.step import moe_comm
    m = load_model("deepseek-v3")
    arr = LayoutArrays.from_layouts([Layout(tp=1, pp=1, ep=128, dp=128, mbs=1, gbs=128, precision="bf16",
                                            dispatcher="flex")])

    def cost(system, *args, **kwargs):
        if args[0] == "all_to_all":
            args = args[1:]
        size, _group, domains = args[:3]
        return np.asarray(size, dtype=np.float64) / 1e9 * np.where(np.asarray(domains) > 1, nic_slowdown, 1.0)

    ep_s, etp_s = moe_comm.ep_etp_totals_s(
        m, None, arr, tokens_mb=np.array([4096.0]), tp=np.array([1]), cp=np.array([1]), ep=np.array([128]),
        etp=np.array([1]), moe_stage=np.array([1.0]), rack_gpus=64, max_domains=4, moe_imbalance=1.0,
        cal=Calibration(all_to_all_efficiency=1.0), collective_time_s=cost,
        moe_all_to_all_time_s=lambda system, size, group, domains, imbalance, phase: cost(system, size, group, domains))
    per_copy_gb = 4096 * 7168 * 2 / 1e9
    rdma = 2 * (1 - 1 / 70) * per_copy_gb * nic_slowdown
    nvlink = 128 * (1 - comb(254, 8) / comb(256, 8)) * per_copy_gb
    assert ep_s[0] == pytest.approx(4 * max(rdma, nvlink), rel=1e-9)
    assert etp_s[0] == 0.0


def test_flex_rank_fanout_counts_distinct_experts():
    """Megatron routes each token to k distinct experts (torch.topk): Mixtral's 8 experts top-2 on EP8 (one expert a
    rank) reach exactly 2 ranks, not the with-replacement 8 x (1 - (7/8)^2) = 1.875."""
    from commbench.planner.step import moe_comm
    mixtral = load_model("mixtral-8x7b")
    flex = np.array([True, False])
    assert moe_comm.rank_fanout(mixtral, np.array([8.0, 8.0]), flex).tolist() == pytest.approx([2.0, 2.0])
    gpt_oss = load_model("gpt-oss-20b")           # 32 experts top-4 on EP8: 4 a rank
    assert moe_comm.rank_fanout(gpt_oss, np.array([8.0]), np.array([True]))[0] == pytest.approx(
        8 * (1 - comb(28, 4) / comb(32, 4)))


@pytest.mark.parametrize("experts,picks", [(4, 1), (4, 2), (8, 2), (8, 3), (12, 4), (16, 5)])
def test_expected_distinct_bins_matches_enumeration(experts, picks):
    """Every k-subset of E experts, equally likely, over each bin count dividing E: the mean count of bins holding
    one of the subset's experts (experts e // (E / bins) in bin order)."""
    for bins in [b for b in range(1, experts + 1) if experts % b == 0]:
        per_bin = experts // bins
        subsets = list(itertools.combinations(range(experts), picks))
        mean = sum(len({e // per_bin for e in s}) for s in subsets) / len(subsets)
        assert ep_traffic.expected_distinct_bins(experts, np.array([float(bins)]), picks)[0] == pytest.approx(mean)


def test_flex_rank_fanout_of_device_limited_routing_is_the_ranks_of_the_picked_groups():
    """DeepSeek-V3 (256 experts in 8 groups, 4 picked, top-8) on EP8: a rank holds one group, so a token reaches the 4
    ranks of its groups (megatron-core 0.16.1 group_limited_topk), not the 5.29 ranks of 8 experts drawn from 256."""
    from commbench.planner.step import moe_comm
    dsv3 = load_model("deepseek-v3")
    ep = np.array([8.0, 4.0, 64.0])
    fan = moe_comm.rank_fanout(dsv3, ep, np.array([True, True, True]))
    assert fan.tolist() == pytest.approx([4.0, 4 * (1 - comb(6, 4) / comb(8, 4)), 64 * (1 - comb(252, 8) / comb(256, 8))])
