"""What --recompute-granularity selective re-runs: the modules its launch names, not a share of every kernel.

megatron-core 0.16.1: recompute_modules defaults to ["core_attn"] (transformer_config.py 1193-1194); core_attn
checkpoints only the attention core, TE's DotProductAttention (transformer/attention.py 328-331, 381-420), on the
layers with an attention module (a hybrid's MambaLayer reads no recompute_modules); the flash / fused kernel holds
softmax and mask, so its re-run is the kernel's forward (plus, under CP, the ring's forward merges). The planner's
"selective" emits core_attn plus the light modules that free something on the model (layout/recompute.py
recompute_modules: layernorm, moe_act, mla_up_proj), so those are charged too. The step model charged
attention_s / 3 + memory_bound_s / 6 until STEP_MODEL 2026-12-06.14: a sixth of every layer's norms, activations,
rope, permutes and a hybrid's Mamba kernels, which no module re-runs."""

from __future__ import annotations

import pytest

from commbench.costmodel import load_preset
from commbench.planner.layout.recompute import recompute_modules
from commbench.planner.layout.spec import Layout, LayoutArrays
from commbench.planner.models.zoo import load_model
from commbench.planner.step import memory
from commbench.planner.step.evaluate import evaluate_layouts


def test_selective_on_a_dense_model_reruns_the_attention_cores_forward_only():
    """Llama3-8B (GQA, norms fused into the next linear): --recompute-modules core_attn alone, so the charge is the
    attention core's forward, a third of its forward + backward, and no memory-bound kernel."""
    model = load_model("llama3-8b")
    assert recompute_modules(model) == ["core_attn"]
    arr = LayoutArrays.from_layouts([Layout(tp=1, pp=1, dp=8, mbs=1, gbs=8, precision="bf16", recompute="selective")])
    bd = evaluate_layouts(model, load_preset("b200-hgx", num_gpus=8), arr, seq_len=8192)
    assert bd.valid[0] and bd.attention_s[0] > 0 and bd.memory_bound_s[0] > 0
    assert bd.recompute_s[0] == pytest.approx(bd.attention_s[0] / 3.0, rel=1e-9)


def test_selective_on_a_hybrid_skips_the_mamba_layers():
    """Nemotron-3 Nano (Mamba + MoE + a few attention layers): core_attn on the attention layers, moe_act's
    activation pass, and the MoE blocks' pre-MLP norm forward (layernorm: read h, write h per token in bf16), counted
    by hand; nothing for the Mamba layers' kernels (pp = 1, one micro-batch: the memory rate is memory_bound_s over
    the memory-bound bytes)."""
    model = load_model("nemotron-3-nano-30b-a3b")
    assert recompute_modules(model) == ["core_attn", "layernorm", "moe_act"]
    lays = [Layout(tp=1, pp=1, ep=8, dp=8, mbs=1, gbs=8, precision="bf16", recompute=r)
            for r in ("selective", "moe_act")]
    arr = LayoutArrays.from_layouts(lays)
    tokens = 4096.0
    bd = evaluate_layouts(model, load_preset("b200-hgx", num_gpus=8), arr, seq_len=int(tokens))
    assert bd.valid.all()
    everything = memory.elementwise_bytes_per_microbatch(model, arr, arr.tp, arr.cp, arr.pp, arr.sequence_parallel,
                                                         tokens)[0]
    seconds_per_byte = bd.memory_bound_s[0] / everything
    moe_blocks = model.num_moe_layers + model.num_mtp_layers
    norm_s = tokens * 2.0 * model.hidden * 2.0 * moe_blocks * seconds_per_byte
    assert bd.recompute_s[0] == pytest.approx(bd.attention_s[0] / 3.0 + bd.recompute_s[1] + norm_s, rel=1e-9)
    assert bd.recompute_s[0] < bd.attention_s[0] / 3.0 + bd.memory_bound_s[0] / 6.0   # the old catch-all
