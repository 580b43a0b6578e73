"""Tensor-parallel collectives per linear pair (step/tp_comm.py): Megatron-core on Transformer Engine
re-gathers the column-parallel input for its weight gradient and gathers 8/4-bit data in quantized
recipes; TorchTitan's DTensor TP keeps the gathered input and gathers bf16 in every precision."""

from __future__ import annotations

import numpy as np
import pytest

from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.layout.spec import CODE_FIELDS
from commbench.planner.step import tp_comm


def bytes_moved(system, kind, nbytes, group, domains):
    """A stand-in fabric: every collective costs its bytes in seconds, all-reduce twice (RS + AG)."""
    return np.asarray(nbytes, dtype=float) * (2.0 if kind == "all_reduce" else 1.0)


def codes(*names):
    return np.array([CODE_FIELDS["precision"].index(n) for n in names])


def pair(precision, sp, framework="megatron"):
    n = len(precision)
    return tp_comm.pair_time_s(None, bytes_moved, elements=np.full(n, 1000.0), precision=precision,
                               sp=np.full(n, sp), tp=np.full(n, 4), domains=np.ones(n), framework=framework)


def test_sequence_parallel_pair_moves_two_reduce_scatters_and_three_gathers_by_hand():
    got = pair(codes("bf16", "fp8", "mxfp8", "nvfp4"), True)
    # 2 bf16 reduce-scatters (2 x 2000 B) + 3 gathers of the (quantized) input
    assert got.tolist() == pytest.approx([4000 + 3 * 2000, 4000 + 3 * 1000, 4000 + 3 * 1000 * (1 + 1 / 32),
                                          4000 + 3 * 1000 * (0.5 + 1 / 16)])


def test_without_sequence_parallel_two_bf16_all_reduces_in_any_precision():
    got = pair(codes("bf16", "fp8", "nvfp4"), False)
    assert got.tolist() == pytest.approx([2 * 2 * 2000] * 3)


def test_torchtitan_keeps_the_gathered_input_and_gathers_bf16_in_every_precision():
    """fp8 was priced at 1 B a gathered element (0.2.2's Float8ColwiseParallel), but TorchTitan 0.3.0's TP is
    dtype-agnostic (rowwise float8 only) and 0.2.2's float8 TP never engages ("float8" in model.converters, a list
    holding "quantize.linear.float8"): the launch gathers bf16, as with mxfp8 and bf16."""
    got = pair(codes("bf16", "fp8", "mxfp8"), True, framework="torchtitan")
    assert got.tolist() == pytest.approx([4000 + 2 * 2000] * 3)


def test_no_tensor_parallel_no_collectives():
    got = tp_comm.pair_time_s(None, bytes_moved, elements=np.array([1000.0]), precision=codes("bf16"),
                              sp=np.array([True]), tp=np.array([1]), domains=np.ones(1))
    assert got.tolist() == [0.0]


def test_whole_step_bf16_tensor_parallel_moves_more_than_fp8():
    """Through evaluate_layouts: a bf16 layout's TP traffic exceeds the same fp8 layout's (bf16 gathers),
    and the ratio sits between the bytes ratio's bounds (latency terms pull it toward 1)."""
    model = load_model("llama3.1-70b")
    fabric = load_preset("gb200-nvl72", num_gpus=64)
    base = dict(tp=4, pp=4, vp=5, ep=1, cp=1, dp=4, mbs=1, gbs=256, sequence_parallel=True)
    lays = LayoutArrays.from_layouts([Layout(**base, precision="bf16"), Layout(**base, precision="fp8")])
    bd = evaluate_layouts(model, fabric, lays, seq_len=8192)
    bf16, fp8 = bd.tp_total_s
    assert 1.0 < bf16 / fp8 <= (4 + 6) / (4 + 3) + 1e-9


def test_full_recompute_reruns_the_forward_gather_and_scatter_by_hand():
    """Full recompute re-runs a layer's forward in its backward (megatron-core CheckpointFunction.backward): one more
    all-gather of the (quantized) input and one more bf16 reduce-scatter with SP, one more all-reduce without."""
    n = 2
    sp = tp_comm.pair_time_s(None, bytes_moved, elements=np.full(n, 1000.0), precision=codes("bf16", "fp8"),
                             sp=np.full(n, True), tp=np.full(n, 4), domains=np.ones(n), rerun=np.array([1.0, 0.5]))
    assert sp.tolist() == pytest.approx([3 * 2000 + 4 * 2000, 2.5 * 2000 + 3.5 * 1000])
    no_sp = tp_comm.pair_time_s(None, bytes_moved, elements=np.full(1, 1000.0), precision=codes("bf16"),
                                sp=np.full(1, False), tp=np.full(1, 4), domains=np.ones(1), rerun=1.0)
    assert no_sp.tolist() == pytest.approx([3 * 2 * 2000])


def test_whole_step_full_recompute_reruns_tp_ep_and_cp_forward_collectives():
    """Through evaluate_layouts: the same layout under full recompute moves its forward TP collectives (1 RS + 1 AG
    of the pair's 2 + 3), its EP dispatch and combine (2 of 4 all-to-alls) and its CP ring's forward passes (1 of 3)
    once more than under no recompute; selective recompute (core_attn) re-runs the ring's forward only."""
    model = load_model("qwen3-30b-a3b")
    fabric = load_preset("gb200-nvl72", num_gpus=64)
    base = dict(tp=2, pp=1, vp=1, ep=8, cp=2, dp=16, mbs=1, gbs=256, precision="bf16", sequence_parallel=True,
                moe_a2a_overlap=False, tp_comm_overlap=False)
    lays = LayoutArrays.from_layouts([Layout(**base, recompute=r) for r in ("none", "full", "selective")])
    bd = evaluate_layouts(model, fabric, lays, seq_len=8192)
    tp_s, ep_s, cp_s = bd.tp_total_s, bd.ep_total_s, bd.cp_total_s   # per layout: none, full, selective
    assert 1.0 < tp_s[1] / tp_s[0] < 7.0 / 5.0 + 1e-9           # TP: + (RS + AG) over (2 RS + 3 AG)
    assert ep_s[1] / ep_s[0] == pytest.approx(1.5, rel=0.2)     # EP: + (dispatch + combine) over 4 phases
    assert cp_s[1] / cp_s[0] == pytest.approx(4.0 / 3.0, rel=1e-9)
    assert cp_s[2] / cp_s[0] == pytest.approx(4.0 / 3.0, rel=1e-9)
    assert tp_s[2] == pytest.approx(tp_s[0]) and ep_s[2] == pytest.approx(ep_s[0])


def test_pairs_at_several_rerun_shares_are_each_share_priced_alone():
    """pair_times_s prices the collectives once for every re-run share (the step model asks for 0 and 1): each share's
    times are pair_time_s's at that share, bit for bit, and the collectives are called once."""
    calls = []

    def counted(system, kind, nbytes, group, domains):
        calls.append(kind)
        return bytes_moved(system, kind, nbytes, group, domains) * 1e-9 + 3e-6

    args = dict(elements=np.array([1000.0, 5e6, 7e7]), precision=codes("bf16", "mxfp8", "fp8"),
                sp=np.array([True, False, True]), tp=np.array([4, 2, 1]), domains=np.ones(3))
    for framework in ("megatron", "torchtitan"):
        calls.clear()
        both = tp_comm.pair_times_s(None, counted, framework=framework, reruns=(0.0, 0.25, 1.0), **args)
        assert len(calls) == 3
        for share, got in zip((0.0, 0.25, 1.0), both):
            assert np.array_equal(got, tp_comm.pair_time_s(None, counted, framework=framework, rerun=share, **args))
