"""Context parallelism's ring attention merges each step's partial output and dq outside the attention
kernel (step/memory.py cp_merge_bytes_per_token): HBM traffic a TP layout of the same shard does not move."""

from __future__ import annotations

import numpy as np
import pytest

from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.step import memory
from commbench.planner.step.terms import CALIBRATED


def test_merge_bytes_follow_the_ring_steps_and_vanish_without_cp():
    m = load_model("llama3.1-405b")
    got = memory.cp_merge_bytes_per_token(m, np.array([1, 1, 1, 4]), np.array([1, 2, 4, 2]))
    assert got[0] == 0.0
    # cp 2: (3 x 2 + 1) / 4 = 1.75 full-size steps x (12 B forward + 8 B backward) + the 6 B cast = 41 B
    # per element of the rank's attention output (heads x head_dim / (tp x cp))
    assert got[1] == pytest.approx(41.0 * m.attn_out_dim / 2)
    assert got[2] == pytest.approx((13 / 4 * 20 + 6) * m.attn_out_dim / 4)
    assert got[3] == pytest.approx(got[1] / 4)          # tp shards the heads
    # attention sinks (gpt-oss): Megatron-Bridge runs its CP as all-to-all, which merges nothing
    assert not memory.cp_merge_bytes_per_token(load_model("gpt-oss-120b"), np.array([1, 1]), np.array([2, 4])).any()


def test_a_cp_layout_moves_more_memory_than_the_tp_layout_of_the_same_shard():
    """With sequence parallelism TP and CP shard every elementwise tensor alike, so the step model's
    memory-bound time differs between TP2 x CP1 and TP1 x CP2 by the ring attention's merges alone."""
    m = load_model("llama3.1-70b")
    fabric = load_preset("gb200-nvl72", num_gpus=64)
    base = dict(pp=4, vp=5, ep=1, etp=1, dp=8, mbs=1, gbs=256, precision="bf16", recompute="none")
    arr = LayoutArrays.from_layouts([Layout(tp=2, cp=1, **base), Layout(tp=1, cp=2, **base)])
    bd = evaluate_layouts(m, fabric, arr, seq_len=8192, calibration=CALIBRATED)
    tokens_mb = 8192
    merge = memory.cp_merge_bytes_per_token(m, 1, 2) * tokens_mb * m.num_layers / 4
    per_mb = bd.memory_bound_s / bd.num_microbatches
    hbm = fabric.gpu.hbm_tbps * 1e12 * CALIBRATED.hbm_efficiency
    assert per_mb[1] - per_mb[0] == pytest.approx(merge / hbm, rel=0.05)
    assert bd.valid.all() and bd.memory_bound_s[1] > bd.memory_bound_s[0]
