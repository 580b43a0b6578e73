"""Nemotron-3 Ultra (550B-A55B) in the zoo: its sizes as Megatron-LM's ModelOpt script builds it
(NVIDIA/Megatron-LM@d98e8a64 examples/post_training/modelopt/conf/nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16.sh),
2 MTP depths on one repeated layer (Megatron-Bridge@067f987 recipes/nemotronh/h100/nemotron_3_ultra.py),
against the published figures: "550B total / A55B active" (the model's name, Megatron-Bridge docs) and
Megatron-Bridge's 26.08 performance summary (docs/performance-summary.md@067f987: DGX-GB300, 256 GPUs,
MXFP8, 3552 tokens/s/GPU at 1281 model TFLOP/s/GPU, seq 8192)."""

from __future__ import annotations

import dataclasses

import pytest

from commbench.errors import CommbenchError
from commbench.planner import Layout, load_model
from commbench.planner.calibrate.published import published_runs
from commbench.planner.emit.megatron import megatron_args
from commbench.planner.models.counts import active_params, flops_per_token, param_counts

ULTRA = "nemotron-3-ultra-550b-a55b"
PUBLISHED_GB300 = dict(model="Nemotron_3_Ultra", gpu="GB300", num_gpus=256, precision="MXFP8", seq_len=8192,
                       gbs=256, mbs=1, tp=1, pp=1, cp=1, vp=None, ep=64, etp=None, tokens_per_s_per_gpu=3552,
                       tflops_per_gpu=1281, release="26.08", notes="")


def test_ultra_counts_match_the_published_size_and_flops():
    m = load_model(ULTRA)
    assert (m.num_mamba_layers, m.num_moe_layers, m.num_attention_layers) == (48, 48, 12)
    assert param_counts(m).total / 1e9 == pytest.approx(550.0, rel=0.01)
    # "A55B": the count without the input embedding (with it, 56.06B: 1.9% above the rounded name)
    assert (active_params(m) - m.vocab * m.hidden) / 1e9 == pytest.approx(55.0, rel=0.01)
    published_gflop = PUBLISHED_GB300["tflops_per_gpu"] / PUBLISHED_GB300["tokens_per_s_per_gpu"] * 1e3
    assert flops_per_token(m, 8192) / 1e9 == pytest.approx(published_gflop, rel=0.01)
    # without the second MTP depth Megatron's count would be 12.5 GFLOP (3.5%) short of the published row
    one_depth = dataclasses.replace(m, num_mtp_layers=1)
    assert abs(flops_per_token(one_depth, 8192) / 1e9 / published_gflop - 1) > 0.03


def test_repeated_mtp_layer_costs_two_depths_of_compute_and_one_of_weights():
    m = load_model(ULTRA)
    separate = dataclasses.replace(m, mtp_shared_weights=False)
    one = dataclasses.replace(m, num_mtp_layers=1)
    assert param_counts(m).mtp == pytest.approx(param_counts(one).mtp)
    assert param_counts(separate).mtp == pytest.approx(2 * param_counts(one).mtp)
    assert flops_per_token(m) == flops_per_token(separate) > flops_per_token(one)


def test_megatron_refuses_what_core_0_16_cannot_build_in_one_line():
    m = load_model(ULTRA)
    lay = Layout(tp=2, pp=1, ep=64, etp=1, dp=128, mbs=1, gbs=256, precision="mxfp8")
    with pytest.raises(CommbenchError, match="MambaModel builds no MTP layers"):
        megatron_args(lay, m)
    dense_mtp = dataclasses.replace(load_model("deepseek-v3"), num_mtp_layers=2, mtp_shared_weights=True)
    with pytest.raises(CommbenchError, match="no --mtp-use-repeated-layer"):
        megatron_args(Layout(tp=1, pp=8, vp=1, ep=32, etp=1, dp=32, mbs=1, gbs=1024), dense_mtp)
    args = megatron_args(lay, dataclasses.replace(m, num_mtp_layers=0))
    assert args[args.index("--hybrid-override-pattern") + 1] == m.layer_pattern
    assert args[args.index("--moe-latent-size") + 1] == "2048" and args[args.index("--mamba-num-heads") + 1] == "256"


def test_published_ultra_rows_resolve_to_the_zoo_model():
    run = published_runs((PUBLISHED_GB300,))[0]
    assert run.model is not None and run.model.name == ULTRA, run.skip_reason
