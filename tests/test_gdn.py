"""Gated DeltaNet (Qwen3-Next) in the step model, the layout rules and the Megatron emitter, against
megatron-core 0.16.1's TransformerConfig and, with $MEGATRON_LM_ROOT, Megatron-LM's own parse_args +
validate_args."""

from __future__ import annotations

import dataclasses
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from commbench.costmodel import load_preset
from commbench.planner import Layout, LayoutArrays, evaluate_layouts, load_model
from commbench.planner.emit.megatron import megatron_args
from commbench.planner.layout.spec import RULE_BITS, layout_violations
from commbench.planner.step.mamba import block_counts

NEXT = f"hf:{Path(__file__).parent / 'data' / 'hf' / 'Qwen3-Next-80B-A3B-Instruct'}"


def test_blocks_rules_and_step_terms():
    m = load_model(NEXT)
    c = block_counts(m)
    assert (c.attention, c.linear, c.moe, c.layers) == (12, 36, 48, 48)
    arr = LayoutArrays.from_layouts([Layout(tp=2, pp=1, ep=16, etp=1, dp=32, mbs=1, gbs=512),
                                     Layout(tp=1, cp=2, pp=1, ep=16, etp=1, dp=32, mbs=1, gbs=512),
                                     Layout(tp=32, pp=1, ep=2, etp=1, dp=2, mbs=1, gbs=512)])
    bits = layout_violations(m, arr, 64)
    assert not bits[0] and bits[1] & RULE_BITS["heads"] and bits[2] & RULE_BITS["heads"]   # cp=1; 16 key heads
    fabric = load_preset("gb200-nvl72", num_gpus=64)
    bd = evaluate_layouts(m, fabric, arr.take(np.array([0])))
    full = evaluate_layouts(dataclasses.replace(m, linear_attention_freq=0), fabric, arr.take(np.array([0])))
    assert bd.valid[0] and bd.mem_activations_bytes[0] != full.mem_activations_bytes[0]


def test_a_dense_gated_deltanet_model_is_searched_and_stepped():
    """Qwen3.5-27B (dense: every layer's MLP of 17408, no experts): its blocks (the MTP layer gated attention + the
    dense MLP), the GDN rules (16 key / 48 value heads divide TP, no CP before 26.06, tp*cp dividing them from it:
    tests/test_gdn_context_parallel.py) and a search whose layouts all keep them."""
    from commbench.planner.search.space import SearchRequest, search
    m = load_model(f"hf:{Path(__file__).parent / 'data' / 'hf' / 'Qwen3.5-27B'}")
    c = block_counts(m)
    assert (c.attention, c.linear, c.dense, c.moe, c.layers) == (17, 48, 65, 0, 65)
    arr = LayoutArrays.from_layouts([Layout(tp=2, pp=1, dp=32, mbs=1, gbs=512),
                                     Layout(tp=1, cp=2, pp=1, dp=32, mbs=1, gbs=512),
                                     Layout(tp=32, pp=1, dp=2, mbs=1, gbs=512)])
    bits = layout_violations(m, arr, 64)
    assert not bits[0] and bits[1] & RULE_BITS["heads"] and bits[2] & RULE_BITS["heads"]
    fabric = load_preset("gb200-nvl72", num_gpus=64)
    bd = evaluate_layouts(m, fabric, arr.take(np.array([0])))
    full = evaluate_layouts(dataclasses.replace(m, linear_attention_freq=0), fabric, arr.take(np.array([0])))
    # 17 attention cores (16 + the MTP layer's) where all-attention would have 65; GDN activations kept instead
    assert bd.valid[0] and bd.attention_s[0] < full.attention_s[0] * 17 / 65 * 1.01
    assert bd.mem_activations_bytes[0] != full.mem_activations_bytes[0]
    found = search(SearchRequest(model=m, fabric=fabric, num_gpus=64, gbs=512, precision="mxfp8", keep=50,
                                 software="26.04")).layouts
    tp, cp = np.asarray(found.tp), np.asarray(found.cp)
    assert len(tp) and (16 % tp == 0).all() and (cp == 1).all()
    found = search(SearchRequest(model=m, fabric=fabric, num_gpus=64, gbs=512, precision="mxfp8", keep=50,
                                 software="26.08")).layouts
    tp, cp = np.asarray(found.tp), np.asarray(found.cp)
    assert len(tp) and (16 % (tp * cp) == 0).all() and (48 % (tp * cp) == 0).all()


@pytest.mark.parametrize("kw", [dict(tp=1, pp=1, ep=64, etp=1, dp=64), dict(tp=2, pp=2, ep=16, etp=1, dp=16)])
def test_emitted_flags_build_a_megatron_core_config(kw):
    pytest.importorskip("megatron.core")
    import torch
    from megatron.core.transformer.transformer_config import TransformerConfig
    m = load_model(NEXT)
    lay = Layout(**kw, mbs=1, gbs=512)
    args = megatron_args(lay, m)
    i = args.index("--experimental-attention-variant")
    assert args[i + 1] == "gated_delta_net" and "--attention-output-gate" in args
    assert args[args.index("--linear-attention-freq") + 1] == "4"
    cfg = TransformerConfig(
        num_layers=48, hidden_size=2048, num_attention_heads=16, num_query_groups=2, kv_channels=256,
        experimental_attention_variant="gated_delta_net", linear_attention_freq=4, linear_conv_kernel_dim=4,
        linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=16, linear_num_value_heads=32,
        attention_output_gate=True, num_moe_experts=512, moe_ffn_hidden_size=512, moe_router_topk=10,
        moe_shared_expert_intermediate_size=512, moe_grouped_gemm=True, add_bias_linear=False,
        tensor_model_parallel_size=lay.tp, pipeline_model_parallel_size=lay.pp, expert_model_parallel_size=lay.ep,
        expert_tensor_parallel_size=lay.etp, sequence_parallel=lay.tp > 1, params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16, bf16=True)
    assert cfg.linear_attention_freq == 4


MEGATRON_LM_ROOT = os.environ.get("MEGATRON_LM_ROOT")


@pytest.mark.skipif(not MEGATRON_LM_ROOT, reason="set MEGATRON_LM_ROOT to a Megatron-LM core_v0.16.1 source tree")
def test_megatron_lm_parse_and_validate_args_accept_the_plan(monkeypatch):
    pytest.importorskip("megatron.core")
    import torch
    monkeypatch.syspath_prepend(MEGATRON_LM_ROOT)
    stub = types.ModuleType("batch_invariant_kernels")  # Triton-only module megatron/training imports
    stub.enable_batch_invariant_mode = lambda *a, **k: None
    stub.is_batch_invariant_mode_enabled = lambda *a, **k: False
    monkeypatch.setitem(sys.modules, "megatron.core.transformer.custom_layers.batch_invariant_kernels", stub)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (10, 0))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a: types.SimpleNamespace(major=10, minor=0))
    import megatron.core.utils as mcore_utils
    from packaging.version import Version
    monkeypatch.setattr(mcore_utils, "get_te_version", lambda: Version("2.10.0"))
    from megatron.training import arguments
    m = load_model(NEXT)
    argv = megatron_args(Layout(tp=2, pp=2, ep=16, etp=1, dp=16, mbs=1, gbs=512), m) + [
        "--tokenizer-type", "NullTokenizer", "--vocab-size", str(m.vocab)]
    monkeypatch.setattr(sys, "argv", ["pretrain_gpt.py", *argv])
    for key, value in dict(WORLD_SIZE="64", RANK="0", LOCAL_RANK="0").items():
        monkeypatch.setenv(key, value)
    args = arguments.parse_args()
    arguments.validate_args(args, {})
    assert args.experimental_attention_variant == "gated_delta_net" and args.linear_attention_freq == 4
