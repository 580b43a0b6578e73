"""Megatron-LM's own configuration code (megatron/training/arguments.py: parse_args, validate_args,
core_transformer_config_from_args) from a checkout named by MEGATRON_LM_ROOT.

Megatron-LM's training package is not on PyPI (megatron-core is); the tests that need it skip with a
reason unless MEGATRON_LM_ROOT points at a Megatron-LM checkout whose release matches the installed
megatron-core (core_v0.16.1 for 0.16.1: `git clone -b core_v0.16.1 https://github.com/NVIDIA/Megatron-LM`).
Only arguments.py and the modules it imports are loaded (megatron/training/__init__.py would pull in
the whole training loop and Triton). The GPU is the plan's: torch.cuda's capability queries answer
with its compute capability, and Transformer Engine (GPU-only) is answered as 2.10 with its fused
RoPE and MoE permute kernels present, as on the machine the plan is for.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import types
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

RELEASE = "core_v0.16.1"


def argv_values(args: list[str]) -> dict[str, list[str]]:
    """A Megatron argv as {"--flag": [the values after it]} ([] for a store_true flag)."""
    out: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        flag, values = args[i], []
        i += 1
        while i < len(args) and not args[i].startswith("--"):
            values.append(args[i])
            i += 1
        out[flag] = values
    return out


def tokens(args: list[str]) -> dict[str, object]:
    """Megatron's argv as {dest: value}: store_true flags -> True, one value -> int/float/str, several -> list."""
    out: dict[str, object] = {}
    for flag, values in argv_values(args).items():
        conv = [int(v) if re.fullmatch(r"\d+", v) else float(v) if re.fullmatch(r"\d+\.\d*", v) else v
                for v in values]
        out[flag[2:].replace("-", "_")] = True if not conv else conv[0] if len(conv) == 1 else conv
    return out


@lru_cache(maxsize=1)
def arguments_module():
    """megatron.training.arguments from $MEGATRON_LM_ROOT, or None when unset or absent."""
    root = os.environ.get("MEGATRON_LM_ROOT")
    if not root or not (Path(root) / "megatron" / "training" / "arguments.py").is_file():
        return None
    if root not in sys.path:
        sys.path.append(root)
    training = Path(root) / "megatron" / "training"
    pkg = types.ModuleType("megatron.training")
    pkg.__path__ = [str(training)]
    sys.modules.setdefault("megatron.training", pkg)

    def load(name: str):
        spec = importlib.util.spec_from_file_location(f"megatron.training.{name}", training / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        return mod

    global_vars = load("global_vars")
    for name in ("get_args", "get_timers", "get_adlr_autoresume"):
        setattr(pkg, name, getattr(global_vars, name))
    return load("arguments")


@contextmanager
def target_gpu(monkeypatch, capability: tuple[int, int], te_version: str = "2.10.0"):
    """torch.cuda answers as the plan's GPU; Transformer Engine `te_version` (2.10) answers present."""
    import torch
    import megatron.core.utils as mcore_utils
    import megatron.core.models.common.embeddings.rope_utils as rope_utils
    import megatron.core.transformer.moe.moe_utils as moe_utils
    from packaging.version import Version
    props = types.SimpleNamespace(major=capability[0], minor=capability[1], name="target", total_memory=1 << 40,
                                  multi_processor_count=132)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: capability)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a, **k: props)
    monkeypatch.setattr(mcore_utils, "get_te_version", lambda: Version(te_version))
    for module, names in ((rope_utils, ("fused_apply_rotary_pos_emb", "fused_apply_rotary_pos_emb_thd")),
                          (moe_utils, ("fused_permute", "fused_permute_with_probs", "fused_sort_chunks_by_index",
                                       "fused_sort_chunks_by_index_with_probs", "fused_unpermute"))):
        for name in names:
            if getattr(module, name, None) is None:
                monkeypatch.setattr(module, name, object(), raising=False)
    yield


def megatron_config(args_mod, argv: list[str], world: int, env: dict[str, str], monkeypatch):
    """parse_args -> validate_args -> core_transformer_config_from_args, as pretrain_gpt.py runs them
    (with the mock-data tokenizer a launch without a tokenizer file uses)."""
    import megatron.training.global_vars as global_vars  # noqa: F401 - loaded by arguments_module
    monkeypatch.setattr(sys, "argv", ["pretrain_gpt.py", *argv, "--tokenizer-type", "NullTokenizer", "--mock-data"])
    for key, value in {"WORLD_SIZE": str(world), "RANK": "0", "LOCAL_RANK": "0", **env}.items():
        monkeypatch.setenv(key, value)
    args = args_mod.parse_args()
    args_mod.validate_args(args, {})
    # the gradient buffers the step model charges (2 B): under --bf16 validate_args turns fp32 accumulation on
    # unless --grad-reduce-in-bf16 (arguments.py 720-723), and the DDP buffer is then fp32 (found from outside)
    if "--grad-reduce-in-bf16" in argv:
        assert args.grad_reduce_in_bf16 and not args.accumulate_allreduce_grads_in_fp32
    return args, args_mod.core_transformer_config_from_args(args)


def assert_architecture(args, cfg, model) -> None:
    """The TransformerConfig (and parse_args namespace) Megatron-LM built is the zoo model's architecture."""
    arch = model.architecture
    act = getattr(cfg.activation_func, "__name__", str(cfg.activation_func))
    expected_act = {"swiglu": "silu", "quick_geglu": "quick_gelu", "squared_relu": "squared_relu", "gelu": "gelu"}
    assert act == expected_act[arch.activation] and cfg.gated_linear_unit == arch.glu
    assert cfg.glu_linear_offset == arch.glu_linear_offset
    assert (cfg.activation_func_clamp_value or 0.0) == arch.activation_clamp
    assert (cfg.normalization, cfg.layernorm_epsilon, cfg.qk_layernorm) == (arch.normalization, arch.norm_epsilon, arch.qk_norm)
    assert cfg.add_bias_linear == arch.linear_bias and cfg.add_qkv_bias == (arch.qkv_bias or arch.linear_bias)
    assert cfg.window_size == ((arch.sliding_window - 1, 0) if arch.sliding_window else None)
    assert cfg.window_attn_skip_freq == (arch.window_skip_freq or None)
    assert cfg.softmax_type == arch.softmax_type
    assert (args.rotary_base, args.rotary_percent) == (arch.rotary_base, arch.rotary_percent)
    assert args.use_rope_scaling == (arch.rope_scaling == "llama3")
    if arch.rope_scaling == "llama3":
        assert args.rope_scaling_factor == arch.rope_scaling_factor
        # gpt_builders.gpt_builder (core_v0.16.1) passes GPTModel no factor: it builds its default 8, said in the notes
        if arch.rope_scaling_factor != 8.0:
            from commbench.planner.emit.megatron_arch import architecture_notes
            assert any("rope_scaling_factor" in n for n in architecture_notes(model)), arch.rope_scaling_factor
    if model.attention == "mla":
        # the query low rank, or none (q_lora_rank 0: --q-lora-rank left at arguments.py's None, linear_q_proj)
        assert (cfg.q_lora_rank or 0, cfg.kv_lora_rank) == (model.q_lora_rank, model.kv_lora_rank)
        assert (cfg.rope_type, cfg.rotary_base) == ("yarn" if arch.rope_scaling == "yarn" else "rope", arch.rotary_base)
    if model.attention == "mla" and arch.rope_scaling == "yarn":
        assert (cfg.rotary_scaling_factor, cfg.mscale, cfg.mscale_all_dim) == (
            arch.rope_scaling_factor, arch.yarn_mscale, arch.yarn_mscale_all_dim)
        # no core_v0.16.1 flag sets the original context either: another than megatron-core's 4096 is noted
        from commbench.planner.emit.megatron_arch import architecture_notes
        if cfg.original_max_position_embeddings != arch.rope_original_max_positions:
            assert any("original_max_position_embeddings" in n for n in architecture_notes(model))
            assert cfg.original_max_position_embeddings == 4096   # MLATransformerConfig's default
        # No core_v0.16.1 flag sets the YaRN betas: where the model's differ from megatron-core's (Kimi-K2's
        # beta_fast 1), Megatron-LM builds its default and the plan's notes must say so (architecture_notes).
        from commbench.planner.emit.megatron_arch import architecture_notes
        betas = (arch.yarn_beta_fast, arch.yarn_beta_slow)
        if (cfg.beta_fast, cfg.beta_slow) != betas:
            assert any("beta_fast" in n or "beta_slow" in n for n in architecture_notes(model)), betas
            assert (cfg.beta_fast, cfg.beta_slow) == (32, 1)  # MLATransformerConfig's defaults
    # the rows Megatron-LM builds (training/tokenizer/tokenizer.py _vocab_size_with_padding: up to a multiple of
    # make_vocab_size_divisible_by x TP) are the rows the step model priced (models/counts.step_vocab)
    from commbench.planner.models.counts import megatron_vocab_divisor, step_vocab
    tp = args.tensor_model_parallel_size
    assert args.vocab_size == model.vocab and args.make_vocab_size_divisible_by == megatron_vocab_divisor(model, tp)
    multiple = args.make_vocab_size_divisible_by * tp
    assert -(-args.vocab_size // multiple) * multiple == step_vocab(model, tp, "megatron")
    assert args.untie_embeddings_and_output_weights == (not model.tied_embeddings)
    assert (cfg.num_layers, cfg.hidden_size, cfg.num_attention_heads) == (model.num_layers, model.hidden, model.num_heads)
    assert (cfg.mtp_num_layers or 0) == model.num_mtp_layers
    # Gated DeltaNet layers (Qwen3-Next, Qwen3.5): the variant, its layer pattern and sizes, full attention's gate
    assert cfg.experimental_attention_variant == ("gated_delta_net" if model.linear_attention_freq else None)
    if model.linear_attention_freq:
        assert (cfg.linear_attention_freq, cfg.linear_conv_kernel_dim, cfg.linear_num_key_heads,
                cfg.linear_num_value_heads, cfg.linear_key_head_dim, cfg.linear_value_head_dim) == (
            model.linear_attention_freq, model.gdn_conv_kernel, model.gdn_num_key_heads, model.gdn_num_value_heads,
            model.gdn_key_head_dim, model.gdn_value_head_dim)
        assert cfg.attention_output_gate == model.attention_gate
    if model.num_dense_layers:  # the dense MLP's width (Qwen3.5-27B: every layer)
        assert cfg.ffn_hidden_size == model.dense_ffn
    if not model.is_moe:
        assert cfg.num_moe_experts is None
        return
    assert (cfg.num_moe_experts, cfg.moe_router_topk, cfg.moe_ffn_hidden_size) == (
        model.num_routed_experts, model.top_k, model.expert_ffn)
    assert (cfg.moe_shared_expert_intermediate_size or 0) == model.num_shared_experts * model.expert_ffn
    assert (cfg.moe_router_score_function, cfg.moe_router_pre_softmax, cfg.moe_router_dtype) == (
        arch.router_score, arch.router_pre_softmax, arch.router_dtype)
    assert (cfg.moe_router_topk_scaling_factor or 0.0) == arch.router_topk_scaling
    assert (cfg.moe_router_num_groups or 0, cfg.moe_router_group_topk or 0) == model.router_groups
    assert cfg.moe_router_enable_expert_bias == arch.router_expert_bias
    if arch.router_expert_bias:
        assert cfg.moe_router_bias_update_rate == arch.router_bias_update_rate
    lb = cfg.moe_router_load_balancing_type
    assert (lb if isinstance(lb, str) else lb[0]) == arch.load_balancing
    coeff = cfg.moe_aux_loss_coeff
    assert (coeff if isinstance(coeff, float) else coeff[0]) == arch.aux_loss_coeff
    assert (cfg.moe_expert_capacity_factor or 0.0) == arch.capacity_factor
    if getattr(model, "is_hybrid", False):  # a hybrid model's MoE layers are the pattern's E (not moe_layer_freq)
        assert args.hybrid_override_pattern.split("/")[0].count("E") == model.num_moe_layers
        return
    freq = cfg.moe_layer_freq
    layers = [freq] * model.num_layers if isinstance(freq, int) and freq == 1 else freq
    assert sum(1 for x in layers if x) == model.num_moe_layers


def layer_split_built(config, pp: int, vp: int | None) -> tuple[list[int], list[int], list[int]]:
    """(decoder layers, offsets, MTP layers) Megatron builds per (virtual stage, pp rank), on the process
    groups initialize_model_parallel made (the caller's fake world)."""
    from megatron.core import parallel_state
    from megatron.core.transformer.multi_token_prediction import get_mtp_num_layers_to_build
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.core.transformer.transformer_layer import get_transformer_layer_offset
    built, offsets, mtp = [], [], []
    for v in range(vp or 1):
        for r in range(pp):
            parallel_state.set_pipeline_model_parallel_rank(r)
            stage = v if vp else None
            built.append(get_num_layers_to_build(config, vp_stage=stage, pp_rank=r))
            offsets.append(get_transformer_layer_offset(config, vp_stage=stage, pp_rank=r))
            mtp.append(get_mtp_num_layers_to_build(config, vp_stage=stage, pp_rank=r))
    return built, offsets, mtp


def megatron_whole_path(args_mod, argv: list[str], *, layout, model, gpus: int, gpu, env: dict[str, str], monkeypatch):
    """Megatron-LM's parse_args -> validate_args -> core_transformer_config_from_args (the model's whole
    architecture checked against the zoo), then process groups on torch's fake backend
    (initialize_model_parallel with the parsed sizes) and the layer split Megatron builds, which must be
    the split the step model charged."""
    import contextlib
    import io

    import torch.distributed as dist
    from megatron.core import parallel_state
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from commbench.planner.layout.split import choose_split
    with target_gpu(monkeypatch, gpu.compute_capability), contextlib.redirect_stdout(io.StringIO()):
        args, cfg = megatron_config(args_mod, argv, gpus, env, monkeypatch)
    assert_architecture(args, cfg, model)
    if getattr(args, "is_hybrid_model", False):  # pretrain_mamba.py's mamba_builders.mamba_builder raises without one
        assert cfg.transformer_impl == "inference_optimized" or args.spec is not None, "no --spec for mamba_builder"
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=gpus)
    try:
        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size=args.tensor_model_parallel_size,
            pipeline_model_parallel_size=args.pipeline_model_parallel_size,
            virtual_pipeline_model_parallel_size=args.virtual_pipeline_model_parallel_size,
            context_parallel_size=args.context_parallel_size,
            expert_model_parallel_size=args.expert_model_parallel_size,
            expert_tensor_parallel_size=args.expert_tensor_parallel_size, create_gloo_process_groups=False)
        built, offsets, mtp = layer_split_built(cfg, layout.pp, cfg.virtual_pipeline_model_parallel_size)
    finally:
        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()
    from commbench.planner.layout.split import split_vocab
    split = choose_split(model, layout.pp, layout.vp, split_vocab(model, layout.tp))   # the rows the step model charged
    assert built == split.decoder_layers()
    assert sum(built) == model.num_layers and offsets == [sum(built[:i]) for i in range(len(built))]
    assert mtp == [s.count("m") for s in split.stages]
    assert args.data_parallel_size == gpus // (layout.tp * layout.pp * layout.cp)
    return args, cfg


def best_plan_through_megatron(model, monkeypatch, *, preset: str = "gb200-nvl72", gpus: int = 64, gbs: int = 512,
                               precision: str = "mxfp8"):
    """The search's best layout for `model`, its Megatron-LM arguments put through Megatron-LM's whole path
    (megatron_whole_path, where MEGATRON_LM_ROOT names a checkout) or else through the installed megatron-core's
    checks (test_emit_megatron_real.check_megatron_plan): (the arguments, megatron-core's config or None)."""
    from commbench.costmodel import load_preset
    from commbench.planner.emit.megatron import launch_env, megatron_args
    from commbench.planner.search.space import SearchRequest, search
    from tests.test_emit_megatron_real import check_megatron_plan
    fabric = load_preset(preset, num_gpus=gpus)
    lay = search(SearchRequest(model=model, fabric=fabric, num_gpus=gpus, gbs=gbs, precision=precision,
                               keep=1)).layouts.layout(0)
    args = megatron_args(lay, model)
    if arguments_module() is not None:
        _, config = megatron_whole_path(arguments_module(), args, layout=lay, model=model, gpus=gpus, gpu=fabric.gpu,
                                        env=launch_env(lay, fabric.gpu.name), monkeypatch=monkeypatch)
        return args, config
    check_megatron_plan(args, lay, model, gpus, fabric.gpu.name, monkeypatch)
    return args, None
