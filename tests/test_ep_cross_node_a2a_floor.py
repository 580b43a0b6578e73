"""The alltoall dispatcher's all-to-all across 8-GPU H100 nodes stays at its physical floor (step/moe_comm.py,
"Checked (session 40, fix-DG)"): the bytes megatron-core moves and the NIC's line rate bound it from below, so a
change that prices the published Qwen3-235B-A22B EP32 layout faster than the 400 Gb/s NICs can carry it fails here.
"""

from __future__ import annotations

import numpy as np
import pytest

from commbench.costmodel import collective_time_s, load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.step import moe_comm

NIC_LINE_RATE_BYTES_PER_S = 400e9 / 8   # ConnectX-7 NDR, one per H100 (hardware.toml scale_out_gbit_per_gpu)
TOKENS_PER_RANK = 4096 // 2             # seq 4096 over TP2 with sequence parallel
EP, NODES, GPUS_PER_NODE = 32, 4, 8


def _floor_s(bytes_per_rank: float) -> float:
    """One all-to-all's line-rate floor: the share bound for other nodes through the rank's own NIC."""
    return bytes_per_rank * (EP - GPUS_PER_NODE) / EP / NIC_LINE_RATE_BYTES_PER_S


def test_dispatch_bytes_are_top_k_bf16_copies_without_dedup():
    """MoEAlltoAllTokenDispatcher permutes each token into one copy per routed expert and all-to-alls them in the
    activations' dtype (megatron-core 0d8e0714 token_dispatcher.py): 2048 x 8 x 4096 x 2 B per rank."""
    model = load_model("qwen3-235b-a22b")
    elems = moe_comm.dispatch_elements(model, tokens_rank=np.array([float(TOKENS_PER_RANK)]), ep=np.array([EP]),
                                       ep_dom=np.array([NODES]), flex=np.array([False]))
    assert elems[0] * moe_comm.ACT_BYTES == TOKENS_PER_RANK * model.top_k * model.hidden * 2 == 134_217_728


def test_ep32_over_four_h100_nodes_is_priced_at_the_nic_floor():
    fabric = load_preset("h100-hgx", num_gpus=256)
    size = 134_217_728.0
    time_s = float(collective_time_s(fabric, "all_to_all", size, EP, NODES))
    floor = _floor_s(size)
    assert floor <= time_s <= 1.15 * floor, (time_s, floor)


def test_published_ep32_layout_charges_every_all_to_all_at_least_the_floor():
    """The 25.09 recipe (no EP overlap): per micro-batch 4 all-to-alls per MoE layer on the busiest stage's 94/8
    layers, each no faster than the NICs allow, and none of it hidden."""
    model = load_model("qwen3-235b-a22b")
    fabric = load_preset("h100-hgx", num_gpus=256)
    layout = Layout(tp=2, pp=8, vp=4, ep=EP, mbs=1, gbs=2048, dp=16, precision="fp8", sequence_parallel=True, etp=1)
    bd = evaluate_layouts(model, fabric, LayoutArrays.from_layouts([layout]), seq_len=4096)
    assert bool(bd.valid[0])
    n_mb = int(bd.num_microbatches[0])
    floor_step = n_mb * 4 * model.num_layers / 8 * _floor_s(134_217_728.0)
    assert bd.ep_total_s[0] >= floor_step
    assert bd.ep_exposed_s[0] == bd.ep_total_s[0]


def test_ep8_inside_a_node_fits_an_h100_by_hand():
    """What EP8 adds over the published EP32 (step/moe_comm.py "Checked again (session 43, fix-G6)"): 4x the routed
    experts per GPU at 2 B (fp8_param_gather's weight + its Hopper transpose) + 2 B of bf16 gradients, the optimizer's
    12 B spread over an expert-DP group of 4 instead of 1 (so the same), the activations unchanged; by hand it still
    fits the 80 GB H100, so memory does not rule the planner's EP8 out."""
    model = load_model("qwen3-235b-a22b")
    fabric = load_preset("h100-hgx", num_gpus=256)
    ep32 = Layout(tp=2, pp=8, vp=4, ep=EP, mbs=1, gbs=2048, dp=16, precision="fp8", sequence_parallel=True, etp=1)
    ep8 = Layout(tp=2, pp=8, vp=4, ep=8, mbs=1, gbs=2048, dp=16, precision="fp8", sequence_parallel=True, etp=1)
    bd = evaluate_layouts(model, fabric, LayoutArrays.from_layouts([ep32, ep8]), seq_len=4096)
    layers = 12                                   # the busiest pipeline rank's (with the embedding)
    experts_per_layer = 128 * 3 * 4096 * 1536     # 128 routed experts, SwiGLU fc1 (2 x 1536) + fc2
    extra_params = layers * experts_per_layer * (1 / 8 - 1 / EP)
    static = bd.mem_weights_bytes + bd.mem_grads_bytes + bd.mem_optimizer_bytes
    assert static[1] - static[0] == pytest.approx(extra_params * (2 + 2), rel=1e-9)
    assert bd.mem_optimizer_bytes[1] == bd.mem_optimizer_bytes[0]
    assert bd.mem_activations_bytes[1] == bd.mem_activations_bytes[0]
    assert bd.mem_total_bytes[1] < bd.mem_capacity_bytes[1]
