"""What an MXFP8 recipe costs beside a per-tensor fp8 one in the step model, each a fact of what megatron-core and
Transformer Engine send and compute (step/dp_sync.py, step/kernels.py)."""

from __future__ import annotations

import dataclasses

import pytest

from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.models.counts import param_counts
from commbench.planner.step import dp_sync, kernels
from commbench.planner.step.terms import CALIBRATED


def _three(**kw):
    base = Layout(**kw)
    return [dataclasses.replace(base, precision=p) for p in ("bf16", "fp8", "mxfp8")]


def test_mxfp8_parameters_are_gathered_in_bf16_through_the_gradient_buffer():
    # megatron-core's DDP keeps MXFP8 parameters' all-gather buffer in the gradient buffer (bf16): 2 B a parameter
    # like bf16's, where per-tensor fp8 parameters gather their 1-byte data
    m = load_model("llama3-8b")
    fabric = load_preset("gb200-nvl72", num_gpus=64)
    bd = evaluate_layouts(m, fabric, LayoutArrays.from_layouts(_three(tp=1, pp=1, dp=64, mbs=1, gbs=256)),
                          seq_len=8192)
    assert bd.valid.all()
    bf16, fp8, mx = bd.dp_dense_ag_total_s
    assert mx == pytest.approx(bf16, rel=1e-12)
    assert fp8 < 0.75 * mx
    # ... and copies every gathered parameter into its MXFP8 weight once a step (read 2 B, write 1 + 1 B and the
    # scales, zero the 2 B slice): charged with the optimizer step, at the memory-bound kernels' bandwidth
    extra = bd.optimizer_s[2] - bd.optimizer_s[1]
    hbm = fabric.gpu.hbm_tbps * 1e12 * CALIBRATED.hbm_efficiency * kernels.sustained_sm_rate(fabric.gpu)
    assert extra > 0 and bd.optimizer_s[1] == pytest.approx(bd.optimizer_s[0], rel=1e-12)
    params = extra * hbm / dp_sync.MXFP8_PARAM_RECAST_BYTES
    # every MXFP8 parameter of the rank (TP = PP = 1: the whole model) but the embedding and output layer, bf16
    # parameters in a bf16 buffer of their own (step/module_precision.py)
    pc = param_counts(m)
    assert params == pytest.approx(pc.total - pc.embeddings, rel=1e-6), params


def test_megatron_fsdp_gathers_its_own_mxfp8_buffers_in_8_bits():
    m = load_model("llama3-8b")
    fabric = load_preset("gb200-nvl72", num_gpus=64)
    rows = [dataclasses.replace(r, fsdp=True) for r in _three(tp=1, pp=1, dp=64, mbs=1, gbs=256)]
    bd = evaluate_layouts(m, fabric, LayoutArrays.from_layouts(rows), seq_len=8192)
    assert bd.valid.all()
    _, fp8, mx = bd.dp_dense_ag_total_s
    assert mx == pytest.approx(fp8, rel=1e-12)
    assert bd.optimizer_s[2] == pytest.approx(bd.optimizer_s[1], rel=1e-12)


def test_ddp_param_gather_bytes_by_recipe():
    import numpy as np

    from commbench.planner.layout.spec import CODE_FIELDS
    codes = np.array([CODE_FIELDS["precision"].index(p) for p in ("bf16", "fp8", "mxfp8", "nvfp4")])
    kept = dp_sync.param_gather_bytes(codes, np.ones(4, bool), codes[1:3])
    assert list(kept) == [2, 1, 1, 2]
    assert list(dp_sync.ddp_param_gather_bytes(kept, codes, np.zeros(4, bool))) == [2, 1, 2, 2]
    assert list(dp_sync.ddp_param_gather_bytes(kept, codes, np.ones(4, bool))) == [2, 1, 1, 2]
    assert list(dp_sync.mxfp8_param_recast_bytes(kept, codes, np.zeros(4, bool))) == [0, 0, 6.0625, 0]


def test_mxfp8_dense_gemms_run_at_the_published_block_scaled_kernel_ratio():
    # Transformer Engine's GEMM benchmark (pre-quantized, B300): a layer's 12 GEMMs 6.812 ms in per-tensor fp8,
    # 7.161 ms in MXFP8; one datasheet peak for both, so the ratio is the kernels'
    from commbench.planner.step import kernels
    assert kernels.MXFP8_GEMM_RATIO == pytest.approx(6.812 / 7.161)
    m = load_model("llama3-8b")
    fabric = load_preset("gb200-nvl72", num_gpus=64)
    bd = evaluate_layouts(m, fabric, LayoutArrays.from_layouts(_three(tp=1, pp=1, dp=64, mbs=2, gbs=256)),
                          seq_len=8192)
    _, fp8, mx = bd.gemm_s
    # compute-bound at 16k tokens: the roofline's memory side is far below (kernels.smooth_max); the output layer
    # runs in bf16 under both (step/module_precision.py), the rest at the ratio
    from commbench.planner import flops_breakdown
    fl = flops_breakdown(m, 8192)
    layers, logits = (fl.gemm - fl.logits) * fabric.gpu.bf16_tflops / fabric.gpu.fp8_tflops, fl.logits
    assert mx / fp8 == pytest.approx((layers / kernels.MXFP8_GEMM_RATIO + logits) / (layers + logits), rel=2e-3)
    assert bd.attention_s[2] == pytest.approx(bd.attention_s[1], rel=1e-12)
