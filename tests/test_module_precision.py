"""Which modules run in the training precision (step/module_precision.py): Megatron's embedding and output layer
stay bf16 (their GEMM at the bf16 rate, their weights at 2 B in memory and in the DP all-gather), its MTP layers are
bf16 under nvfp4; TorchTitan's lm_head is quantized only by a dense model's MXFP8 converter."""

from __future__ import annotations

import dataclasses

import pytest

from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.models.counts import param_counts
from commbench.planner.step import module_precision
from commbench.planner.step.terms import CALIBRATED

# compute time alone (no operand traffic in the roofline), so a GEMM's seconds are its FLOPs over its rate
COMPUTE_ONLY = CALIBRATED.with_values(gemm_traffic_factor=0.0)


def _gemm_s(model, system, layout, framework="megatron"):
    bd = evaluate_layouts(model, system, LayoutArrays.from_layouts([layout]), calibration=COMPUTE_ONLY,
                          framework=framework)
    assert bd.valid[0]
    return float(bd.gemm_s[0])


def _logits_s(model, system, layout, framework="megatron"):
    """GEMM seconds the output layer adds: the model at twice its vocabulary less the model."""
    big = dataclasses.replace(model, vocab=2 * model.vocab)
    return _gemm_s(big, system, layout, framework) - _gemm_s(model, system, layout, framework)


@pytest.mark.parametrize("precision", ["fp8", "mxfp8", "nvfp4"])
def test_megatron_output_layer_runs_at_the_bf16_rate(precision):
    # gpt_model.py:241 tensor_parallel.ColumnParallelLinear -> torch.matmul: bf16 under any fp8 / fp4 recipe
    m, gb200 = load_model("llama3-8b"), load_preset("gb200-nvl72", num_gpus=8)
    layout = Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, precision=precision)
    bf16 = _logits_s(m, gb200, dataclasses.replace(layout, precision="bf16"))
    assert _logits_s(m, gb200, layout) == pytest.approx(bf16, rel=1e-9)


def test_torchtitan_dense_mxfp8_quantizes_lm_head_and_fp8_does_not():
    # emit/torchtitan_config.py: MXFP8LinearConverter without fqns converts every Linear of a dense model; the fp8
    # converter filters lm_head
    m, gb200 = load_model("llama3-8b"), load_preset("gb200-nvl72", num_gpus=8)
    layout = Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, precision="bf16")
    bf16 = _logits_s(m, gb200, layout, "torchtitan")
    fp8 = _logits_s(m, gb200, dataclasses.replace(layout, precision="fp8"), "torchtitan")
    mx = _logits_s(m, gb200, dataclasses.replace(layout, precision="mxfp8"), "torchtitan")
    assert fp8 == pytest.approx(bf16, rel=1e-9)
    assert mx < 0.6 * bf16   # fp8 peak 2x bf16's, at MXFP8's kernel ratio


def test_megatron_fp8_keeps_the_vocabulary_matrices_bf16_in_memory_and_the_gather():
    # only Float8Tensor parameters get the uint8 buffer (distributed_data_parallel.py:138-146): the embedding and the
    # output layer are bf16 parameters; Blackwell keeps no fp8 transpose copy, so the rest is 1 B a parameter
    m, gb200 = load_model("llama3-8b"), load_preset("gb200-nvl72", num_gpus=8)
    layouts = [Layout(tp=1, pp=1, dp=8, mbs=1, gbs=64, precision=p) for p in ("fp8", "bf16")]
    bd = evaluate_layouts(m, gb200, LayoutArrays.from_layouts(layouts))
    pc = param_counts(m, vocab=m.vocab)    # 128,256 rows: a multiple of 128, Megatron's padding adds none
    assert bd.mem_weights_bytes[0] == pytest.approx((pc.total - pc.embeddings) * 1.0 + pc.embeddings * 2.0,
                                                    rel=1e-9)
    assert bd.mem_weights_bytes[1] == pytest.approx(pc.total * 2.0, rel=1e-9)
    # the all-gather moves (8.03B - 1.05B) x 1 B + 1.05B x 2 B, 57% of bf16's 2 B each (not half)
    share = (pc.total + pc.embeddings) / (2 * pc.total)
    assert bd.dp_dense_ag_total_s[0] / bd.dp_dense_ag_total_s[1] == pytest.approx(share, rel=0.02)


def test_megatron_mtp_layers_are_bf16_under_nvfp4_only():
    # multi_token_prediction.py: built under fp8_model_init and run under fp8 autocast only ("TODO: currently
    # ignoring FP4 in MTP layers"), so under nvfp4 the MTP layer's GEMMs run at the bf16 rates
    m, gb200 = load_model("deepseek-v3"), load_preset("gb200-nvl72", num_gpus=256)
    no_mtp = dataclasses.replace(m, num_mtp_layers=0)
    layout = Layout(tp=1, pp=1, ep=64, dp=256, mbs=1, gbs=1024, precision="bf16")

    def mtp_s(precision):
        lay = dataclasses.replace(layout, precision=precision)
        return _gemm_s(m, gb200, lay) - _gemm_s(no_mtp, gb200, lay)

    assert mtp_s("nvfp4") == pytest.approx(mtp_s("bf16"), rel=1e-9)
    assert mtp_s("mxfp8") < 0.8 * mtp_s("bf16")


def test_mixed_bytes_and_rules():
    assert module_precision.mixed_bytes(10.0, 2.0, 1.0) == pytest.approx((8 * 1.0 + 2 * 2.0) / 10)
    assert module_precision.mixed_bytes(0.0, 0.0, 1.0) == 1.0
    codes = [0, 1, 2, 3]   # bf16, fp8, mxfp8, nvfp4
    assert not module_precision.output_layer_quantized(codes, "megatron", False).any()
    assert module_precision.output_layer_quantized(codes, "torchtitan", False).tolist() == [False, False, True, False]
    assert not module_precision.output_layer_quantized(codes, "torchtitan", True).any()
    assert module_precision.mtp_quantized(codes, "megatron").tolist() == [False, True, True, False]
