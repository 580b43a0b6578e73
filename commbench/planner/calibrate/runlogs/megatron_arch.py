"""The architecture arguments of a Megatron-LM log beyond the sizes megatron.py MEGATRON_MODEL_ARGS compares,
each against what --model's spec makes emit/megatron.py model_args write: attention kind and KV heads, MLA ranks
and head sizes, vocabulary (and Megatron's padding of it), MoE layer count, shared-expert size. A printed value
that differs names another (or a cut-down) model. Arguments the block does not print are not checked."""

from __future__ import annotations

import math
from typing import Any


VOCAB_TOLERANCE = 0.02


def _none_zero(value: Any) -> Any:
    return value or None


def _moe_layers(freq: Any, num_layers: int) -> int | None:
    """How many of num_layers are MoE layers under Megatron's --moe-layer-freq: an int k (every k-th layer, from
    the first: layer i % k == 0) or a list of 0/1 per layer (arguments.py moe_freq_type); None if unreadable."""
    if isinstance(freq, bool):
        return None
    if isinstance(freq, int) and freq > 0:
        return sum(1 for i in range(num_layers) if i % freq == 0)
    if isinstance(freq, str):   # printed as given: "[0]*3+[1]*58"
        try:
            freq = eval(freq, {"__builtins__": {}}, {}) if set(freq) <= set("[]0123456789*+, ") else None
        except (SyntaxError, TypeError, ValueError):
            return None
    if isinstance(freq, (list, tuple)) and all(x in (0, 1) for x in freq):
        return sum(freq)
    return None


def architecture_mismatch(spec, args: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """(argument, what --model makes it, what the log printed) for the first printed architecture argument that is
    not --model's; None when all agree."""
    checks: list[tuple[str, Any, Any]] = []
    mla = spec.attention == "mla"
    if "multi_latent_attention" in args:
        checks.append(("multi_latent_attention", mla, bool(args["multi_latent_attention"])))
    if mla:
        for arg, want in (("q_lora_rank", spec.q_lora_rank), ("kv_lora_rank", spec.kv_lora_rank),
                          ("qk_head_dim", spec.qk_nope_head_dim), ("qk_pos_emb_head_dim", spec.qk_rope_head_dim),
                          ("v_head_dim", spec.v_head_dim)):
            if arg in args:
                checks.append((arg, _none_zero(want), _none_zero(args[arg])))
    else:
        if "kv_lora_rank" in args and args["kv_lora_rank"] and args.get("multi_latent_attention") is not False:
            checks.append(("kv_lora_rank", None, args["kv_lora_rank"]))
        kv_heads = spec.num_kv_heads or spec.num_heads
        if args.get("group_query_attention") and args.get("num_query_groups") is not None:
            checks.append(("num_query_groups", kv_heads, args["num_query_groups"]))
        elif args.get("group_query_attention") is False:
            checks.append(("group_query_attention", kv_heads != spec.num_heads, False))
        if spec.head_dim and args.get("kv_channels") is not None:
            checks.append(("kv_channels", spec.head_dim, args["kv_channels"]))
    checks += _layer_form_checks(spec, args)
    # A tokenizer's own size may differ from the model config's a little (Qwen3: 151,669 tokens, config 151,936):
    # a vocabulary within VOCAB_TOLERANCE of --model's is the same model; beyond it another
    for arg in ("vocab_size", "padded_vocab_size"):
        got = args.get(arg)
        if isinstance(got, int) and not isinstance(got, bool):
            # Megatron pads up to a multiple of make_vocab_size_divisible_by x TP (training/tokenizer)
            step = (args.get("make_vocab_size_divisible_by") or 128) * (args.get("tensor_model_parallel_size") or 1)
            want = spec.vocab if arg == "vocab_size" else math.ceil(spec.vocab / step) * step
            if abs(got - want) > VOCAB_TOLERANCE * want:
                checks.append((arg, want, got))
    if spec.is_moe and not spec.is_hybrid and args.get("moe_layer_freq") is not None:
        got = _moe_layers(args["moe_layer_freq"], spec.num_layers)
        if got is not None and got != spec.num_moe_layers:
            checks.append(("moe_layer_freq", f"[0]*{spec.num_dense_layers}+[1]*{spec.num_moe_layers}",
                           args["moe_layer_freq"]))
    if spec.is_moe and "moe_shared_expert_intermediate_size" in args:
        want = spec.num_shared_experts * spec.expert_ffn
        checks.append(("moe_shared_expert_intermediate_size", _none_zero(want),
                       _none_zero(args["moe_shared_expert_intermediate_size"])))
    return next(((arg, want, got) for arg, want, got in checks if want != got), None)


# The activation flags Megatron-LM prints (core_v0.16.1 arguments.py --swiglu, --quick-geglu, --squared-relu; none of
# them: gelu), each True exactly where --model's activation is it (emit/megatron_arch.py _activation)
ACTIVATION_ARGS = ("swiglu", "quick_geglu", "squared_relu")


def _layer_form_checks(spec, args: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """The printed arguments that shape every layer as emit/megatron_arch.py writes them from --model: the activation
    (a GLU's three GEMMs or two: --swiglu is what training.py num_floating_point_operations counts, core_v0.16.1
    training.py 245, 381), the norms, the linear and QKV biases and the sliding window."""
    arch = spec.architecture
    activation = arch.activation if arch is not None else \
        ("swiglu" if spec.glu else "squared_relu" if spec.is_hybrid else "gelu")
    checks = [(arg, activation == arg, bool(args[arg])) for arg in ACTIVATION_ARGS if arg in args]
    if arch is None:   # a model file without an [arch] table: the emitter writes RMSNorm and no bias
        return checks
    if isinstance(args.get("normalization"), str):
        checks.append(("normalization", arch.normalization, args["normalization"]))
    if "qk_layernorm" in args:
        checks.append(("qk_layernorm", arch.qk_norm, bool(args["qk_layernorm"])))
    if "add_bias_linear" in args:
        checks.append(("add_bias_linear", arch.linear_bias, bool(args["add_bias_linear"])))
    if "add_qkv_bias" in args and not arch.linear_bias:
        checks.append(("add_qkv_bias", arch.qkv_bias, bool(args["add_qkv_bias"])))
    if "window_size" in args:   # tuple_type: "(1023, 0)"; Megatron's window is (w - 1, 0) for a window of w tokens
        got = args["window_size"]
        checks.append(("window_size", (arch.sliding_window - 1, 0) if arch.sliding_window else None,
                       tuple(got) if isinstance(got, (list, tuple)) else got))
        skip = args.get("window_attn_skip_freq")
        if arch.sliding_window and (skip is None or isinstance(skip, int)):
            checks.append(("window_attn_skip_freq", arch.window_skip_freq or None, skip or None))
    return checks

