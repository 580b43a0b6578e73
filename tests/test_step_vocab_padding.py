"""Step model: the output layer, embedding and logits at the vocabulary each framework builds.

Megatron-LM core_v0.16.1 (megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding) pads the
vocabulary to a multiple of make_vocab_size_divisible_by x TP. The plan passes a divisor that keeps the model's
vocabulary wherever TP divides it (models/counts.megatron_vocab_divisor: DeepSeek-V3's 129,280 at TP2 with 640, as
Megatron-Bridge builds it); a vocabulary TP cannot divide is padded: DeepSeek-V3 with 129,281 tokens (_padded_dsv3)
is 130,560 rows at TP2 with its divisor 1280. TorchTitan 0.3.0 builds the model's own.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from commbench.data.reference import gpu_spec
from commbench.planner import Calibration, Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.layout.split import stage_imbalance
from commbench.planner.models.counts import flops_breakdown, megatron_vocab_divisor, param_counts, step_vocab
from commbench.planner.step import evaluate as step_module
from commbench.planner.step import kernels, memory

DSV3_TP2_ROWS = 130560          # ceil(129281 / (1280 x 2)) x 2560


def _padded_dsv3():
    """DeepSeek-V3 with an odd vocabulary (129,281): no divisor keeps it at TP2, so Megatron-LM pads it."""
    return dataclasses.replace(load_model("deepseek-v3"), vocab=129_281)


def _fabric(num_gpus=64, gpu="gb200", domain_size=72):
    return SimpleNamespace(gpu=gpu_spec(gpu), domain_size=domain_size, num_gpus=num_gpus)


def _stand_in(monkeypatch):
    """Every collective takes size x 1e-12 s (0 for a group of one); the same layers under either framework."""
    def collective(fabric, collective, size_bytes, group_size, num_domains=1, imbalance=1.0):
        size, n = np.broadcast_arrays(np.asarray(size_bytes, float), np.asarray(group_size, float))
        return np.where(n > 1, size * 1e-12, 0.0)

    def a2a(fabric, bytes_per_rank, ep_size, num_domains=1, imbalance=1.0, *, phase=None):
        return collective(fabric, "all_to_all", bytes_per_rank, ep_size)

    monkeypatch.setattr(step_module, "_costmodel", lambda: (collective, a2a))
    monkeypatch.setattr(step_module, "_hierarchical", lambda: lambda f, size, g, m: collective(f, "rs", size, g))
    # the frameworks' vocabularies alone: both evaluations keep DeepSeek-V3's MTP layer (under torchtitan the step
    # model drops it, models/counts.framework_model, as TorchTitan's launch trains none: test_torchtitan_launch_recipes)
    monkeypatch.setattr(step_module, "framework_model", lambda m, framework="megatron": m)


def _dsv3_tp2():
    return LayoutArrays.from_layouts([Layout(tp=2, pp=1, ep=32, etp=1, dp=32, mbs=1, gbs=64, precision="bf16",
                                             recompute="none", distributed_optimizer=True)])


def test_megatron_pads_the_vocabulary_to_divisor_times_tp_torchtitan_does_not():
    m = load_model("deepseek-v3")
    assert m.vocab == 129280 and m.architecture.vocab_divisible_by == 1280
    # the emitted divisor keeps 129,280 = 1280 x 101 at every TP dividing it (1280, 640, 320, 160)
    assert step_vocab(m, np.array([1, 2, 4, 8])).tolist() == [129280] * 4
    assert [megatron_vocab_divisor(m, tp) for tp in (1, 2, 4, 8)] == [1280, 640, 320, 160]
    odd = _padded_dsv3()
    assert step_vocab(odd, np.array([1, 2, 4, 8])).tolist() == [129281, DSV3_TP2_ROWS, 133120, 133120]
    assert [megatron_vocab_divisor(odd, tp) for tp in (1, 2, 4, 8)] == [1, 1280, 1280, 1280]
    assert step_vocab(odd, np.array([2]), "torchtitan").tolist() == [129281]
    # a model without an [arch] table: Megatron-LM's default --make-vocab-size-divisible-by 128
    bare = dataclasses.replace(load_model("mixtral-8x7b"), architecture=None)
    assert step_vocab(bare, np.array([1, 4, 8])).tolist() == [32000, 32256, 32768]
    # the model card's size stays the model's own vocabulary
    assert param_counts(odd).embeddings == 2 * 129281 * m.hidden


def test_output_layer_gemm_is_charged_at_the_padded_rows(monkeypatch):
    _stand_in(monkeypatch)
    m, f, arr = _padded_dsv3(), _fabric(), _dsv3_tp2()
    off = Calibration(gemm_traffic_factor=0.0)
    mega = evaluate_layouts(m, f, arr, calibration=off, framework="megatron")
    titan = evaluate_layouts(m, f, arr, calibration=off, framework="torchtitan")
    assert mega.valid[0] and titan.valid[0]
    gpu = f.gpu
    rate = gpu.bf16_tflops * 1e12 * kernels.sustained_tensor_fraction(gpu) * off.gemm_efficiency(gpu.name)
    tokens_gpu = m.seq_len / 2 * float(stage_imbalance(m, np.array([1]), np.array([1]))[0])
    # the logits GEMM over 1,279 more rows, main head + the MTP head, fwd + bwd, for each of the 2 micro-batches
    extra_flops = 6.0 * m.hidden * (DSV3_TP2_ROWS - m.vocab) * (1 + m.num_mtp_layers)
    assert mega.gemm_s[0] - titan.gemm_s[0] == pytest.approx(2 * tokens_gpu * extra_flops / rate, rel=1e-9)
    # model TFLOP/s in Megatron's own currency (training.py num_floating_point_operations: padded_vocab_size)
    fl = flops_breakdown(m, vocab=DSV3_TP2_ROWS)
    assert mega.model_tflops_per_gpu[0] == pytest.approx(mega.tokens_per_s_per_gpu[0] * fl.total / 1e12, rel=1e-12)


def test_embedding_and_output_weights_gradients_and_dp_traffic_at_the_padded_rows(monkeypatch):
    _stand_in(monkeypatch)
    m, f, arr = _padded_dsv3(), _fabric(), _dsv3_tp2()
    mega = evaluate_layouts(m, f, arr, framework="megatron")
    titan = evaluate_layouts(m, f, arr, framework="torchtitan")
    extra_params = 2 * m.hidden * (DSV3_TP2_ROWS - m.vocab) / 2       # untied input + output rows, over TP2
    # TorchTitan keeps and reduce-scatters fp32 gradients (FSDP2 reduce_dtype float32: dp_sync.grad_bytes), Megatron bf16
    assert mega.mem_grads_bytes[0] - titan.mem_grads_bytes[0] / 2 == pytest.approx(2.0 * extra_params, rel=1e-9)
    assert mega.mem_weights_bytes[0] - titan.mem_weights_bytes[0] == pytest.approx(2.0 * extra_params, rel=1e-9)
    # the distributed optimizer's 12 B per owned parameter over DP x CP = 32
    assert mega.mem_optimizer_bytes[0] - titan.mem_optimizer_bytes[0] == pytest.approx(12.0 * extra_params / 32)
    # the gradient reduce-scatter moves the padded rows' gradients (stand-in: 1e-12 s per byte)
    assert mega.dp_dense_rs_total_s[0] - titan.dp_dense_rs_total_s[0] / 2 == pytest.approx(
        2.0 * extra_params * 1e-12, rel=1e-9)


def test_logits_memory_at_the_padded_rows():
    m, arr = _padded_dsv3(), _dsv3_tp2()
    one = np.ones(1, dtype=np.int64)
    kw = dict(tp=2 * one, cp=one, pp=one, vp=one, etp=one, n_mb=2 * one, tokens_mb=np.array([float(m.seq_len)]),
              sp=np.array([True]), framework="megatron")
    padded = memory.activation_bytes(m, arr, **kw)[0]
    # the same model with --make-vocab-size-divisible-by 1: TP2 pads 129,281 to 129,282
    no_pad = dataclasses.replace(m, architecture=dataclasses.replace(m.architecture, vocab_divisible_by=1))
    assert step_vocab(no_pad, 2) == 129_282
    # the launch's native cross entropy keeps a fp32 softmax of the micro-batch's tokens over TP (4 B per logit,
    # step/loss_memory.py), main head + MTP head, 1,278 more rows
    assert padded - memory.activation_bytes(no_pad, arr, **kw)[0] == pytest.approx(
        m.seq_len / 2 * (DSV3_TP2_ROWS - 129_282) * 4.0 * 2, rel=1e-9)
    # TorchTitan keeps the model's rows (and its fp32 copy + log-probabilities, loss_memory.LOSS_LOGIT_BYTES)
    kw["framework"] = "torchtitan"
    assert memory.activation_bytes(m, arr, **kw)[0] == pytest.approx(memory.activation_bytes(no_pad, arr, **kw)[0])
