"""Per-rank GEMM sizes a block-scaled precision needs under tensor parallelism.

A block-scaled GEMM quantizes each operand in blocks along its dimensions, so every dimension the kernel sees must
be a multiple of the block. TP shards the Linear layers (colwise: out features / tp; rowwise: in features / tp), so a
model whose full sizes pass can still break on the per-rank ones:

- TorchTitan 0.3.0, nvfp4: NVFP4LinearConverter(fqns=["layers"]) converts the decoder layers' Linears (lm_head stays
  BF16); torchao 0.18's NVFP4 Triton kernels need every local GEMM dimension a multiple of 128
  (torchtitan/components/quantization/nvfp4.py `_NVFP4_BLOCK = 128`: its Config checks the full sizes only, "the AO
  kernel (nvfp4_mm_triton) itself raises on the per-rank local dims once TP has sharded the weight";
  torchao/prototype/moe_training/nvfp4_training/hadamard_quantize_row_col_triton.py "N must be divisible by 128").
- TorchTitan 0.3.0, mxfp8: MXFP8LinearConverter converts every Linear of a dense model, lm_head included
  (emit/torchtitan_config.py; components/quantization/mx.py: an empty fqns converts all), and the MoE recipe's
  attention, shared-expert and dense-FFN Linears; torchao 0.18's MXFP8Linear casts the input and the output gradient
  in 32-element blocks along their last dimension (prototype/moe_training/mxfp8_linear.py block_size 32 ->
  mx_formats/mx_tensor.py: "the last dimension ... must be divisible by block_size"): in and out features / tp
  multiples of 32. Its routed experts, split over TP when EP = 1 (models/common/moe_sharding.py
  expert_param_placement_dense), need K a multiple of 128 (layout/precision.py mxfp8_experts_refusal): expert_ffn / tp.
- Megatron-LM core_v0.16.1 with Transformer Engine, nvfp4 / mxfp8: TE's quantizers need both dimensions of every
  quantized tensor multiples of NVFP4_BLOCK_SIZE = 16 / MXFP8_BLOCK_SIZE = 32 (transformer_engine/pytorch/csrc/
  quantizer.cpp: "NVFP4 requires tensor dims that are divisible by 16", "MXFP8 requires tensor dims that are
  divisible by 32"); the output layer is Megatron's own ColumnParallelLinear (not quantized), the vocabulary padded
  anyway.
- Megatron-LM core_v0.16.1 with Transformer Engine, fp8 (any recipe; the emitted one is tensorwise current scaling):
  every TE Linear checks assert_dim_for_fp8_exec(inputmat, weight) (transformer_engine/pytorch/utils.py: "the product
  of all dimensions except the last to be divisible by 8 and the last dimension to be divisible by 16"): the per-rank
  weight [out, in] needs in features a multiple of 16 and out features a multiple of 8 (module/linear.py,
  layernorm_linear.py, layernorm_mlp.py). TE's GroupedLinear (the routed experts) makes no such check: not listed.
- TorchTitan 0.3.0, fp8: Float8LinearConverter(filter_fqns=["lm_head", "router.gate"]) converts every other Linear
  whose full in and out features are multiples of 16 and SKIPS the rest (components/quantization/utils.py
  module_filter_fn: "we only convert Linear modules with dimensions divisible by 16"), so a model with such a Linear
  would train it in BF16 under an fp8 label: refused. Once TP shards a converted weight, torch._scaled_mm takes only
  per-rank K and N multiples of 16 (torchao/float8/config.py pad_inner_dim, off: "_scaled_mm ... N, K must be a
  multiple of 16"); Float8GroupedExpertsConverter's grouped GEMM needs the experts' K and N multiples of 16 (torchao
  prototype/moe_training/fp8_grouped_mm.py "B must have last 2 dims divisible by 16").

"""

from __future__ import annotations

import numpy as np

from commbench.planner.models.spec import ModelSpec

# (framework, precision) -> the multiple every per-rank dimension of a converted Linear must be
QUANT_BLOCK = {("torchtitan", "nvfp4"): 128, ("torchtitan", "mxfp8"): 32, ("megatron", "nvfp4"): 16,
               ("megatron", "mxfp8"): 32, ("megatron", "fp8"): 16, ("torchtitan", "fp8"): 16}
MEGATRON_FP8_OUT = 8   # assert_dim_for_fp8_exec: the weight's leading dim (out features) a multiple of 8 only
# what quant_tp_refusal says takes the per-rank sizes
_WHERE = {("torchtitan", "fp8"): "TorchTitan 0.3.0's Float8LinearConverter leaves a Linear with a size not a multiple of "
                                 "16 in BF16 (module_filter_fn: the run would be partly bf16 under an fp8 label), and "
                                 "torch._scaled_mm and torchao's FP8 grouped GEMM take per-rank sizes that are multiples "
                                 "of 16 only",
          ("megatron", "fp8"): "Megatron-LM core_v0.16.1's Transformer Engine FP8 Linears (assert_dim_for_fp8_exec) take "
                               "per-rank weights with in features a multiple of 16 and out features a multiple of 8 only"}
TITAN_MXFP8_EXPERT_K = 128   # layout/precision.py MXFP8_PAD_MULTIPLE: the grouped GEMM's K multiple


def _attention_dims(model: ModelSpec) -> list[tuple[str, int, str, bool]]:
    """(name, size, what shards it: "tp" or "", whether it is an output dimension only) of the attention Linears'
    dimensions (GQA and MLA; the hidden size alone for the others, whose projections this rule does not list)."""
    if model.attention not in ("gqa", "mla"):
        return [("hidden", model.hidden, "", False)]
    if model.attention == "mla":
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        return [("heads x qk_head_dim (wq / wq_b out)", model.num_heads * qk, "tp", True),
                ("heads x (qk_nope + v) (wkv_b out)", model.num_heads * (model.qk_nope_head_dim + model.v_head_dim),
                 "tp", True),
                ("heads x v_head_dim (wo in)", model.num_heads * model.v_head_dim, "tp", False),
                ("hidden", model.hidden, "", False)]
    hd = model.head_dim or model.hidden // model.num_heads
    kv = model.num_kv_heads or model.num_heads
    return [("(heads + 2 kv_heads) x head_dim (wqkv out)", (model.num_heads + 2 * kv) * hd, "tp", True),
            ("heads x head_dim (wo in)", model.num_heads * hd, "tp", False), ("hidden", model.hidden, "", False)]


def converted_dims(model: ModelSpec, framework: str, precision: str) -> list[tuple[str, int, str, int]]:
    """(name, full size, what shards it: "tp", "etp" or "", multiple) of each dimension of the Linears `framework`
    converts to `precision`; [] where no rule applies (QUANT_BLOCK)."""
    block = QUANT_BLOCK.get((framework, precision))
    if block is None:
        return []
    megatron_fp8 = (framework, precision) == ("megatron", "fp8")
    dims = [(n, s, sh, MEGATRON_FP8_OUT if (megatron_fp8 and out_only) else block)
            for n, s, sh, out_only in _attention_dims(model)]
    ffns = [("dense_ffn (w1/w3 out, w2 in)", model.dense_ffn)] if (model.num_dense_layers or not model.is_moe) else []
    if model.num_shared_experts:
        ffns.append(("shared experts' ffn", model.num_shared_experts * model.expert_ffn))
    dims += [(n, s, "tp", block) for n, s in ffns if s]
    if framework == "torchtitan" and precision == "mxfp8" and not model.is_moe:
        dims.append(("vocab (lm_head out)", model.vocab, "tp", block))
    if model.is_moe and framework == "torchtitan" and precision == "mxfp8":   # experts split over TP at ep = 1
        dims.append(("expert_ffn (grouped GEMM K)", model.expert_ffn, "etp", TITAN_MXFP8_EXPERT_K))
    if model.is_moe and framework == "torchtitan" and precision == "fp8":     # Float8GroupedExperts' grouped GEMM
        dims.append(("expert_ffn (grouped GEMM)", model.expert_ffn, "etp", block))
    if model.is_moe and framework == "megatron" and not megatron_fp8:         # TE GroupedLinear: quantizer rule only
        dims.append(("expert_ffn", model.expert_ffn, "etp", block))
    return dims


def _misfits(model: ModelSpec, framework: str, precision: str, tp: int, etp: int) -> list[tuple[str, str]]:
    """(shard, 'name size / tp = local (not a multiple of m)') of each converted dimension missing its multiple."""
    out = []
    for name, size, shard, multiple in converted_dims(model, framework, precision):
        ways = {"tp": tp, "etp": etp}.get(shard, 1)
        if size % ways or (size // ways) % multiple:
            out.append((shard, f"{name} {size}" + (f" / {shard} {ways} = {size / ways:g}" if ways > 1 else "")
                        + f" (not a multiple of {multiple})"))
    return out


def quant_tp_misfits(model: ModelSpec, framework: str, precision: str, tp: int, etp: int = 1) -> list[str]:
    """'name size / tp = local (not a multiple of m)' for each converted dimension whose per-rank size misses its
    multiple at this TP (and, for the routed experts, ETP) size."""
    return [text for _, text in _misfits(model, framework, precision, tp, etp)]


def quant_misfits_sharded(model: ModelSpec, framework: str, precision: str, tp: int, etp: int = 1) -> bool:
    """Whether every dimension missing its multiple is one TP / ETP shards (another tp could help; the hidden size,
    not sharded, cannot be mended by one)."""
    return all(shard for shard, _ in _misfits(model, framework, precision, tp, etp))


def quant_rule_why(framework: str, precision: str) -> str:
    """What takes the per-rank GEMM sizes, and which (the module docstring's sources), as a clause."""
    return _WHERE.get((framework, precision)) or (
        {"torchtitan": "TorchTitan 0.3.0's converted Linears (torchao's kernels)",
         "megatron": "Megatron-LM core_v0.16.1's Transformer Engine quantizers"}[framework]
        + " take per-rank GEMM sizes that are multiples of the block only")


def quant_tp_refusal(model: ModelSpec, framework: str, precision: str, tp: int, etp: int = 1) -> str | None:
    """Why `framework` cannot train `model` in `precision` at these TP / ETP sizes (one line), or None."""
    off = quant_tp_misfits(model, framework, precision, tp, etp)
    if not off:
        return None
    return (f"tp={tp}" + (f", etp={etp}" if model.is_moe else "") + f" is invalid for {model.name} in {precision} "
            f"with --framework {framework}: {quant_rule_why(framework, precision)}, and {', '.join(off)}")


def quant_tp_ok(model: ModelSpec, framework: str, precision: str, tp: np.ndarray, etp: np.ndarray) -> np.ndarray:
    """Per layout, whether every converted per-rank dimension is its multiple (quant_tp_misfits is empty)."""
    tp, etp = np.asarray(tp), np.asarray(etp)
    out = np.ones(len(tp), dtype=bool)
    if (framework, precision) not in QUANT_BLOCK:
        return out
    for t, e in {(int(a), int(b)) for a, b in zip(tp, etp)}:
        if quant_tp_misfits(model, framework, precision, t, e):
            out &= ~((tp == t) & (etp == e))
    return out

