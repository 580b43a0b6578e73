"""Selective recompute is credited only with the saved tensors its emitted --recompute-modules free under
megatron-core 0.16.1, per layer spec (layout/recompute.py: one table the emitter and the memory model read).

With Transformer Engine's specs a non-MLA layer's input norm and a dense MLP's pre-MLP norm are fused into the next
linear (gpt_layer_specs.py: linear_qkv=column_parallel_layer_norm_linear(), no input_layernorm, so IdentityOp;
pre_mlp_layernorm=... if num_experts else IdentityOp; the dense linear_fc1 a layer-norm-linear), and 'layernorm'
recomputes only a norm that is not an IdentityOp (transformer_layer.py 383-435). No module recomputes a dense MLP's
activation alone (transformer_config.py recompute_modules: core_attn, moe_act, layernorm, mla_up_proj, mlp, moe,
shared_experts), and core_attn frees nothing the flash-attention memory model counts."""

from __future__ import annotations

import numpy as np
import pytest

from commbench.costmodel import load_preset
from commbench.planner.emit.megatron import megatron_args
from commbench.planner.layout.recompute import recompute_modules
from commbench.planner.layout.spec import Layout, LayoutArrays
from commbench.planner.models.zoo import load_model
from commbench.planner.step import memory
from commbench.planner.step.evaluate import evaluate_layouts


def _activations(name, system, gpus, framework="megatron", **layout):
    model = load_model(name)
    lays = [Layout(**layout, recompute=r) for r in ("none", "selective")]
    bd = evaluate_layouts(model, load_preset(system, num_gpus=gpus), LayoutArrays.from_layouts(lays),
                          framework=framework)
    return bd.mem_activations_bytes


def test_dense_llama_selective_frees_nothing_its_launch_does_not():
    """llama3-8b on 8 H100 (the probe's case): the launch recomputes core attention only, which frees none of the
    tensors the memory model counts, so selective keeps the activations of recompute none (it was 20% less)."""
    act = _activations("llama3-8b", "h100-hgx", 8, tp=1, pp=2, vp=4, dp=4, mbs=1, gbs=128)
    assert act[1] == pytest.approx(act[0], rel=1e-12)


def test_llama_emits_only_the_module_that_does_something():
    model = load_model("llama3-8b")
    assert recompute_modules(model) == ["core_attn"]
    args = megatron_args(Layout(tp=1, pp=2, vp=4, dp=4, mbs=1, gbs=128, recompute="selective"), model, seq_len=8192)
    i = args.index("--recompute-modules")
    assert args[i + 1:i + 2] == ["core_attn"] and "layernorm" not in args


def _kinds(name, recompute, framework="megatron", **layout):
    model = load_model(name)
    arr = LayoutArrays.from_layouts([Layout(**layout, recompute=recompute)])
    return memory.SavedElements(model, arr, tp=arr.tp, cp=arr.cp, etp=arr.etp, sp=arr.sequence_parallel,
                                framework=framework).kinds


def test_non_mla_moe_selective_frees_the_moe_norm_and_expert_activation_only():
    """qwen3-30b-a3b (GQA, MoE): 'layernorm' frees the MoE layer's pre-MLP norm (a module of its own there,
    backend.layer_norm() with num_experts) and moe_act the routed experts' activation output; the attention side
    (its norm fused into linear_qkv) keeps everything."""
    model = load_model("qwen3-30b-a3b")
    assert recompute_modules(model) == ["core_attn", "layernorm", "moe_act"]
    lay = dict(tp=1, dp=8, ep=8, mbs=1, gbs=64, precision="bf16")
    none, sel = _kinds("qwen3-30b-a3b", "none", **lay), _kinds("qwen3-30b-a3b", "selective", **lay)
    assert sel["attention"][0] == pytest.approx(none["attention"][0])
    h, k, ffn = model.hidden, model.top_k, model.expert_ffn
    assert none["moe"][0] - sel["moe"][0] == pytest.approx(h + k * ffn)   # bf16: norm output + experts' FC2 inputs


def test_mla_selective_frees_the_attention_norm_but_not_the_dense_layers_mlp():
    """deepseek-v3: MLA's input_layernorm is a module (gpt_layer_specs.py input_layernorm=backend.layer_norm()),
    its first dense layers' MLP norm is fused into linear_fc1 and their activation output has no module; mla_up_proj
    frees the up-projected q, k, v and the up-projections' normalized latents (their ln_out, bf16 here)."""
    model = load_model("deepseek-v3")
    assert recompute_modules(model) == ["core_attn", "layernorm", "moe_act", "mla_up_proj"]
    lay = dict(tp=1, pp=4, vp=4, ep=64, etp=1, dp=64, mbs=1, gbs=4096, precision="bf16")
    none, sel = _kinds("deepseek-v3", "none", **lay), _kinds("deepseek-v3", "selective", **lay)
    assert sel["dense"][0] == pytest.approx(none["dense"][0])
    assert none["attention"][0] - sel["attention"][0] == pytest.approx(
        model.hidden + model.q_dim + model.kv_dim + model.q_lora_rank + model.kv_lora_rank)


def test_a_graphed_router_keeps_the_moe_norm_unless_preprocess_runs_alltoall():
    """transformer_layer.py can_recompute_pre_mlp_layernorm_for_cudagraph: with the router in a per-layer CUDA graph,
    'layernorm' drops the pre-MLP norm only when moe_preprocess is captured too with the alltoall dispatcher (or
    latent MoE); with flex it warns and keeps it."""
    lay = dict(tp=1, dp=8, ep=8, mbs=1, gbs=64, precision="bf16", cuda_graph="layer")
    # each dispatcher against its own recompute-none: the alltoall graph's permuted tokens are graph-pool memory,
    # charged with the reserve, not here (layout/recompute.py graph_kept_permuted_tokens, fix-F7)
    none_flex = _kinds("qwen3-30b-a3b", "none", dispatcher="flex", **lay)["moe"][0]
    none_a2a = _kinds("qwen3-30b-a3b", "none", dispatcher="alltoall", **lay)["moe"][0]
    flex = _kinds("qwen3-30b-a3b", "selective", dispatcher="flex", **lay)["moe"][0]
    a2a = _kinds("qwen3-30b-a3b", "selective", dispatcher="alltoall", **lay)["moe"][0]
    model = load_model("qwen3-30b-a3b")
    assert none_flex - flex == pytest.approx(model.top_k * model.expert_ffn)          # experts' activation only
    assert none_a2a - a2a == pytest.approx(model.hidden + model.top_k * model.expert_ffn)
    assert none_a2a == pytest.approx(none_flex)


def test_hybrid_mamba_and_attention_layers_keep_their_fused_norms():
    """A hybrid model's Mamba layers (MambaLayer reads no recompute_modules, its norm fused into in_proj) and its
    attention layers (linear_qkv a layer-norm-linear, mamba_layer_specs.py) keep their norm outputs, and so do a
    Gated DeltaNet model's linear-attention layers (experimental_attention_variant_module_specs.py: in_proj a
    layer-norm-linear, fuse_input_layernorm True)."""
    for name in ("nemotron-3-nano-30b-a3b", "qwen3-next-80b-a3b"):
        lay = dict(tp=1, dp=8, mbs=1, gbs=64, precision="bf16")
        none, sel = _kinds(name, "none", **lay), _kinds(name, "selective", **lay)
        for kind in ("mamba", "linear", "attention", "dense"):
            if kind in none:
                assert sel[kind][0] == pytest.approx(none[kind][0]), kind


def test_torchtitan_selective_keeps_its_op_level_credit():
    """TorchTitan's op-level selective AC recomputes every non-matmul op of a layer (norms, activation functions):
    its credit is not Megatron's module table."""
    act = _activations("llama3-8b", "h100-hgx", 8, framework="torchtitan", tp=1, pp=1, dp=8, mbs=1, gbs=64,
                       fsdp=True)
    assert act[1] < act[0] * 0.9


def test_each_selective_module_set_is_credited_as_the_table_says():
    """The property, over the zoo: the memory model's selective credit is zero for a block kind exactly where the
    table frees none of its tensors."""
    from commbench.planner.layout.recompute import mode_frees
    from commbench.planner.models.zoo import model_names
    for name in model_names():
        model = load_model(name)
        freed = mode_frees(model, "selective", "megatron")
        lay = dict(tp=1, dp=8, mbs=1, gbs=64, precision="bf16")
        try:
            none, sel = _kinds(name, "none", **lay), _kinds(name, "selective", **lay)
        except Exception:   # noqa: BLE001 - a layout this model cannot take
            continue
        attn_freed = bool(freed & {"attention_norm_output", "mla_up_projections"})
        assert (sel["attention"][0] < none["attention"][0]) == attn_freed, name
        assert sel["dense"][0] == pytest.approx(none["dense"][0]), name
        if "mamba" in none:
            assert np.allclose(sel["mamba"], none["mamba"]), name
        if "linear" in none:
            assert np.allclose(sel["linear"], none["linear"]), name


def test_calibration_compares_a_logs_modules_by_what_they_free():
    """A Llama log with core_attn + layernorm frees what the emitted core_attn frees (nothing: its norms are fused),
    so it is priced as it ran, with no note; an MoE log without layernorm frees less than the priced set: noted."""
    from commbench.planner.calibrate.runlogs.megatron_features import recompute_priced_note
    args = {"recompute_granularity": "selective", "recompute_modules": ["core_attn", "layernorm"]}
    assert recompute_priced_note(args, "llama3-8b") == ""
    assert "priced as" in recompute_priced_note(dict(args, recompute_modules=["core_attn", "moe_act"]), "qwen3-30b-a3b")


def test_full_recompute_holds_one_whole_layer_beside_the_stored_inputs():
    """Full recompute keeps each layer's input, and while a layer is re-run for its backward (megatron-core
    CheckpointFunction.backward: the forward again under enable_grad, then its backward; one layer per checkpoint)
    that layer's whole saved activations are alive too: llama3-8b at pp=1, one micro-batch in flight, full recompute
    holds 32 inputs + (one layer's recompute-none elements - its input), by hand from the memory model's own
    per-token counts. The loss stage's logits are freed by the loss and output layer's backward before that re-run
    starts: the larger of the two is charged, not both (fix-G11)."""
    model = load_model("llama3-8b")
    base = dict(tp=1, pp=1, vp=1, dp=8, mbs=2, gbs=16, precision="bf16")
    lays = [Layout(**base, recompute=r) for r in ("none", "full")]
    bd = evaluate_layouts(model, load_preset("h100-hgx", num_gpus=8), LayoutArrays.from_layouts(lays))
    tokens = 2 * model.seq_len
    layer_in = model.hidden                       # one layer's input, elements per token (bf16)
    none_layer = (bd.mem_activations_bytes[0] - memory.logits_bytes(model, tp=1, cp=1, tokens_mb=tokens)) \
        / (tokens * 2.0 * model.num_layers)       # one layer's saved elements per token, recompute none
    want = tokens * 2.0 * model.num_layers * layer_in \
        + max(tokens * 2.0 * (none_layer - layer_in), float(memory.logits_bytes(model, tp=1, cp=1, tokens_mb=tokens)))
    assert float(bd.mem_activations_bytes[1]) == pytest.approx(float(want), rel=1e-9)
