"""gpt-oss's context parallelism is Megatron's all-to-all CP, not the ring: Megatron-Bridge recipes/gpt_oss/gpt_oss.py
(v0.3.0 / v0.3.1, lines 63 and 181) sets cp_comm_type "a2a" ("only a2a cp is supported for sink attention"), and
Transformer Engine refuses its sliding window on the ring. AttnFuncWithCPAndQKVOA2A (context_parallel.py) sends
[q, k, v] and out in forward, [out, dout] and [dq, dk, dv] in backward, each waited for before the kernel that reads
it: all exposed. The step model priced the ring's K,V passes, hidden behind the attention core."""

from __future__ import annotations

import numpy as np
import pytest

from commbench.planner.layout.spec import Layout, LayoutArrays
from commbench.planner.models.zoo import load_model
from commbench.planner.step.evaluate import evaluate_layouts
from tests.test_planner import BARE, _fabric, _stand_in

SECONDS_PER_BYTE = 1e-12


def test_sink_attention_cp_is_all_to_all_and_exposed(monkeypatch):
    _stand_in(monkeypatch, seconds_per_byte=SECONDS_PER_BYTE)
    model = load_model("gpt-oss-120b")
    lay = Layout(tp=1, cp=2, pp=1, ep=8, dp=4, mbs=1, gbs=4, precision="bf16", recompute="none")
    bd = evaluate_layouts(model, _fabric(8), LayoutArrays.from_layouts([lay]), seq_len=4096, calibration=BARE)
    tokens_rank = 4096 / 2                                   # the rank's share of the micro-batch's sequence
    q, kv, out = model.q_dim, model.kv_dim, model.attn_out_dim
    per_layer = tokens_rank * 2.0 * ((q + kv + out) + (2 * out + q + kv)) * SECONDS_PER_BYTE
    assert bd.valid[0]
    assert bd.cp_total_s[0] == pytest.approx(model.num_layers * per_layer, rel=1e-9)   # one micro-batch per step
    assert bd.cp_exposed_s[0] == bd.cp_total_s[0]


def test_vanilla_attention_cp_stays_the_ring(monkeypatch):
    """A model without sinks keeps the ring (cp_comm_type p2p): its K,V passes, partly hidden."""
    _stand_in(monkeypatch, seconds_per_byte=SECONDS_PER_BYTE)
    model = load_model("qwen3-30b-a3b")
    lay = Layout(tp=1, cp=2, pp=1, ep=8, dp=4, mbs=1, gbs=4, precision="bf16", recompute="none")
    bd = evaluate_layouts(model, _fabric(8), LayoutArrays.from_layouts([lay]), seq_len=4096, calibration=BARE)
    one_pass = 4096 / 2 * model.kv_dim * 2.0 * SECONDS_PER_BYTE
    assert bd.cp_total_s[0] == pytest.approx(model.num_layers * 3.0 * one_pass, rel=1e-9)


def test_all_to_all_cp_needs_the_heads_per_tp_rank_to_split_over_cp():
    """Rule heads: all-to-all CP hands each CP rank heads/(tp*cp) query and KV heads (Transformer Engine's
    flash_attn_a2a_communicate views a TP rank's heads as [cp, heads // cp]); gpt-oss has 64 and 8."""
    from commbench.planner.layout.spec import RULE_BITS, layout_violations
    model = load_model("gpt-oss-120b")
    lays = [Layout(tp=tp, cp=cp, dp=64 // (tp * cp), ep=8, mbs=1, gbs=64 // (tp * cp), precision="bf16")
            for tp, cp in ((1, 8), (2, 4), (4, 2), (4, 4), (2, 8), (8, 2))]
    bits = layout_violations(model, LayoutArrays.from_layouts(lays), 64, seq_len=4096)
    assert [bool(b & RULE_BITS["heads"]) for b in bits] == [False, False, False, True, True, True]
    ring = layout_violations(load_model("qwen3-30b-a3b"), LayoutArrays.from_layouts(lays[3:4]), 64, seq_len=4096)
    assert not ring[0] & RULE_BITS["heads"]   # the ring splits the sequence, not the heads


def test_megatron_launch_of_sink_attention_cp_asks_for_all_to_all():
    """The emitted launch runs the CP the step model prices: --cp-comm-type a2a for gpt-oss at cp > 1 (Megatron-LM's
    default p2p ring refuses its window and sinks), nothing for a ring model or at cp = 1."""
    from commbench.planner.emit.megatron import megatron_args
    oss, qwen = load_model("gpt-oss-120b"), load_model("qwen3-30b-a3b")

    def args(model, cp):
        lay = Layout(tp=1, cp=cp, pp=1, ep=8, dp=8 // cp, mbs=1, gbs=8 // cp, precision="bf16")
        return " ".join(megatron_args(lay, model, seq_len=4096, release="26.08"))

    assert "--cp-comm-type a2a" in args(oss, 2)
    assert "--cp-comm-type" not in args(oss, 1) and "--cp-comm-type" not in args(qwen, 2)
