"""Mamba-2's SSD scan in the step model (step/mamba.py): chunked-algorithm FLOPs and intermediates by
hand for Nemotron-3 Nano, charged at the bf16 rate x the kernels' measured fraction of it whatever the GEMM
precision."""

from __future__ import annotations

import pytest

from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.step import mamba


def test_ssd_flops_and_intermediates_by_hand():
    nano = load_model("nemotron-3-nano-30b-a3b")   # 64 heads x 64, N 128, 8 groups, chunk 128
    heads, p, n, g, q = (nano.mamba_num_heads, nano.mamba_head_dim, nano.mamba_state_dim,
                         nano.mamba_num_groups, mamba.SSD_CHUNK_TOKENS)
    assert (heads, p, n, g, q) == (64, 64, 128, 8, 128)
    forward = 2 * (8 * 128 * 128 + 64 * (128 * 64 + 2 * 128 * 64))   # CB + intra-chunk + states in/out
    assert mamba.ssd_flops_per_token(nano) == pytest.approx(4 * forward)
    # Megatron's count of the scan (7 d N, fwd + bwd) over the 23 Mamba layers
    assert mamba.counted_scan_flops_per_token(nano) == pytest.approx(3 * 23 * 7 * 4096 * 128)
    # fp32 states written + read, bf16 states written + read, fp32 CB written + read
    assert mamba.ssd_intermediate_elements(nano) == pytest.approx(6 * 4096 * 128 / 128 + 4 * 8 * 128)
    assert mamba.ssd_flops_per_token(load_model("llama3-8b")) == 0.0
    assert mamba.counted_scan_flops_per_token(load_model("llama3-8b")) == 0.0


def test_scan_runs_at_the_bf16_rate_in_every_precision(monkeypatch):
    """The scan's share of GEMM time is its chunked FLOPs at the bf16 tensor rate x the SSD kernels' measured
    fraction of it (mamba.SSD_TENSOR_FRACTION), the same in a bf16 and an MXFP8 run (the Triton kernels run bf16 in
    both), and no fitted term moves it."""
    from commbench.planner.step import kernels
    nano = load_model("nemotron-3-nano-30b-a3b")
    fabric = load_preset("gb200-nvl72", num_gpus=8)
    lays = LayoutArrays.from_layouts([Layout(tp=1, pp=1, ep=8, dp=8, mbs=2, gbs=512, precision=prec)
                                      for prec in ("bf16", "mxfp8")])
    with_scan = evaluate_layouts(nano, fabric, lays)
    monkeypatch.setattr(mamba, "ssd_flops_per_token", lambda model: 0.0)
    without = evaluate_layouts(nano, fabric, lays)
    per_mb = (with_scan.gemm_s - without.gemm_s) / with_scan.num_microbatches
    rate = fabric.gpu.bf16_tflops * 1e12 * kernels.sustained_tensor_fraction(fabric.gpu) * mamba.SSD_TENSOR_FRACTION
    tokens_gpu_layers = 2 * nano.seq_len * 23   # mbs 2, TP = CP = PP = 1, 23 Mamba layers
    monkeypatch.undo()
    expected = tokens_gpu_layers * mamba.ssd_flops_per_token(nano) / rate
    assert per_mb == pytest.approx([expected, expected], rel=1e-9)
    # and the scan is no longer in the GEMM-rate FLOPs: an MXFP8 run's scan costs as much as a bf16 run's
    assert per_mb[0] == pytest.approx(per_mb[1], rel=1e-12)
