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

The token dimension M of the same GEMMs (QUANT_TOKEN_BLOCK, gemm_tokens) has its own multiple: Transformer Engine checks
and quantizes the local input before sequence parallelism's all-gather (module/linear.py, layernorm_linear.py:
assert_dim_for_fp8_exec(inputmat, ...) and input_quantizer(inputmat) on the shard), so M = mbs x seq_len / cp / tp
with sequence parallelism (mbs x seq_len / cp without): a multiple of 8 in fp8 (the assertion's leading dims), 32 in
mxfp8 and 16 in nvfp4 (quantizer.cpp, both flattened dims). TorchTitan's GEMMs see the all-gathered sequence,
M = mbs x seq_len / cp: fp8's weight-gradient GEMM contracts over M (torch._scaled_mm: a multiple of 16, torchao
Float8LinearConfig.pad_inner_dim off); mxfp8 casts the input along M for it (torchao prototype/moe_training/
mxfp8_linear.py -> mx_formats/kernels.py mxfp8_quantize_cuda "rows must be a multiple of 32"); nvfp4's
nvfp4_mm_triton takes M = input.shape[-2], the local sequence seq_len / cp, "M, K, N all divisible by 128"
(torchao prototype/moe_training/nvfp4_training/nvfp4_linear.py). The routed experts' token counts are padded by the
frameworks (Megatron's Fp8Padding, TorchTitan's TorchAOTokenDispatcher pad_multiple): no rule here.
"""

from __future__ import annotations

import numpy as np

from commbench.planner.layout.precision import MXFP8_K_MULTIPLE_02
from commbench.planner.models.spec import ModelSpec

# (framework, precision) -> the multiple every per-rank dimension of a converted Linear must be
QUANT_BLOCK = {("torchtitan", "nvfp4"): 128, ("torchtitan", "mxfp8"): 32, ("megatron", "nvfp4"): 16,
               ("megatron", "mxfp8"): 32, ("megatron", "fp8"): 16, ("torchtitan", "fp8"): 16}
MEGATRON_FP8_OUT = 8   # assert_dim_for_fp8_exec: the weight's leading dim (out features) a multiple of 8 only
# (framework, precision) -> the multiple the token dimension M (gemm_tokens) of every converted GEMM must be
QUANT_TOKEN_BLOCK = {("megatron", "fp8"): 8, ("megatron", "mxfp8"): 32, ("megatron", "nvfp4"): 16,
                     ("torchtitan", "fp8"): 16, ("torchtitan", "mxfp8"): 32, ("torchtitan", "nvfp4"): 128}
# what takes the token dimension M, per (framework, precision) (module docstring's sources)
TOKEN_WHO = {("megatron", "fp8"): "Transformer Engine's FP8 Linears (assert_dim_for_fp8_exec)",
             ("megatron", "mxfp8"): "Transformer Engine's MXFP8 quantizer",
             ("megatron", "nvfp4"): "Transformer Engine's NVFP4 quantizer",
             ("torchtitan", "fp8"): "torch._scaled_mm (TorchTitan 0.3.0's Float8 weight-gradient GEMM contracts over it)",
             ("torchtitan", "mxfp8"): "torchao's MXFP8 cast along it (mxfp8_quantize_cuda)",
             ("torchtitan", "nvfp4"): "torchao's nvfp4_mm_triton"}
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


def converted_dims(model: ModelSpec, framework: str, precision: str,
                   torchtitan_version: str = "0.3") -> list[tuple[str, int, str, int]]:
    """(name, full size, what shards it: "tp", "etp" or "", multiple) of each dimension of the Linears `framework`
    converts to `precision`; [] where no rule applies (QUANT_BLOCK). TorchTitan 0.2.2's torchao casts the grouped
    experts' K in blocks of 32 (layout/precision.py MXFP8_K_MULTIPLE_02), not 0.3.0's 128."""
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
        dims.append(("expert_ffn (grouped GEMM K)", model.expert_ffn, "etp",
                     MXFP8_K_MULTIPLE_02 if torchtitan_version == "0.2" else TITAN_MXFP8_EXPERT_K))
    if model.is_moe and framework == "torchtitan" and precision == "fp8":     # Float8GroupedExperts' grouped GEMM
        dims.append(("expert_ffn (grouped GEMM)", model.expert_ffn, "etp", block))
    if model.is_moe and framework == "megatron" and not megatron_fp8:         # TE GroupedLinear: quantizer rule only
        dims.append(("expert_ffn", model.expert_ffn, "etp", block))
    return dims


def _misfits(model: ModelSpec, framework: str, precision: str, tp: int, etp: int,
             torchtitan_version: str = "0.3") -> list[tuple[str, str]]:
    """(shard, 'name size / tp = local (not a multiple of m)') of each converted dimension missing its multiple."""
    out = []
    for name, size, shard, multiple in converted_dims(model, framework, precision, torchtitan_version):
        ways = {"tp": tp, "etp": etp}.get(shard, 1)
        if size % ways or (size // ways) % multiple:
            out.append((shard, f"{name} {size}" + (f" / {shard} {ways} = {size / ways:g}" if ways > 1 else "")
                        + f" (not a multiple of {multiple})"))
    return out


def quant_tp_misfits(model: ModelSpec, framework: str, precision: str, tp: int, etp: int = 1,
                     torchtitan_version: str = "0.3") -> list[str]:
    """'name size / tp = local (not a multiple of m)' for each converted dimension whose per-rank size misses its
    multiple at this TP (and, for the routed experts, ETP) size."""
    return [text for _, text in _misfits(model, framework, precision, tp, etp, torchtitan_version)]


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


def _distinct(values: np.ndarray) -> list:
    """np.unique(values).tolist(), for a search's few small integers by counting (no sort of ~400,000 rows)."""
    if values.ndim == 1 and values.size and values.dtype.kind in "iu":
        low, high = int(values.min()), int(values.max())
        if high - low < 1 << 16:
            return (np.flatnonzero(np.bincount(np.subtract(values, low, dtype=np.intp))) + low).tolist()
    return np.unique(values).tolist()


def quant_tp_ok(model: ModelSpec, framework: str, precision: str, tp: np.ndarray, etp: np.ndarray,
                torchtitan_version: str = "0.3") -> np.ndarray:
    """Per layout, whether every converted per-rank dimension is its multiple (quant_tp_misfits is empty)."""
    tp, etp = np.asarray(tp), np.asarray(etp)
    out = np.ones(len(tp), dtype=bool)
    if (framework, precision) not in QUANT_BLOCK:
        return out
    # each distinct tp with each distinct etp (a search's few; a pair no row has masks nothing), not a Python
    # tuple per layout
    etps = _distinct(etp)
    for t in _distinct(tp):
        for e in etps:
            if quant_tp_misfits(model, framework, precision, t, e, torchtitan_version):
                out &= ~((tp == t) & (etp == e))
    return out


def gemm_tokens(framework: str, precision: str, seq_len: int, mbs, cp, tp, sequence_parallel):
    """(numerator, denominator) of the token dimension M a converted GEMM of one micro-batch sees per rank (module
    docstring): Megatron (TE checks the shard before sequence parallelism's all-gather) mbs x seq_len / cp / tp with
    sequence parallelism at tp > 1, else mbs x seq_len / cp; TorchTitan nvfp4 the local sequence seq_len / cp
    (nvfp4_mm_triton's M = input.shape[-2]); TorchTitan fp8 / mxfp8 mbs x seq_len / cp. Arrays broadcast."""
    mbs, cp, tp = (np.asarray(x, dtype=np.int64) for x in (mbs, cp, tp))
    if framework == "megatron":
        scatter = np.where(np.asarray(sequence_parallel, dtype=bool) & (tp > 1), tp, 1)
        return mbs * int(seq_len), cp * scatter
    if precision == "nvfp4":
        return np.broadcast_to(np.int64(seq_len), mbs.shape).copy(), cp
    return mbs * int(seq_len), cp


def token_rule_text(framework: str, precision: str) -> str:
    """What M is, in words, for `framework` and `precision` (gemm_tokens)."""
    if framework == "megatron":
        return "mbs x seq_len / cp, / tp with sequence parallelism (the shard)"
    if precision == "nvfp4":
        return "the local sequence seq_len / cp (input.shape[-2])"
    return "mbs x seq_len / cp"


def quant_tokens_ok(framework: str, precision: str, seq_len: int, mbs, cp, tp, sequence_parallel) -> np.ndarray:
    """Per layout, whether the token dimension M (gemm_tokens) is whole and a multiple of QUANT_TOKEN_BLOCK."""
    block = QUANT_TOKEN_BLOCK.get((framework, precision))
    num, den = gemm_tokens(framework, precision, seq_len, mbs, cp, tp, sequence_parallel)
    if block is None:
        return np.ones(np.shape(num), dtype=bool)
    return (num % den == 0) & ((num // den) % block == 0)


def quant_token_misfit(framework: str, precision: str, seq_len: int, mbs: int, cp: int, tp: int,
                       sequence_parallel: bool) -> str | None:
    """'M = ... = value (not a multiple of m)' where one layout's token dimension misses its multiple, or None."""
    if bool(quant_tokens_ok(framework, precision, seq_len, [mbs], [cp], [tp], [sequence_parallel])[0]):
        return None
    num, den = (int(x[0]) for x in gemm_tokens(framework, precision, seq_len, [mbs], [cp], [tp], [sequence_parallel]))
    block = QUANT_TOKEN_BLOCK[(framework, precision)]
    return (f"the GEMM token dimension M = {token_rule_text(framework, precision)} = {num / den:g} at mbs={mbs}, "
            f"cp={cp}, tp={tp} is not a multiple of {block} ({TOKEN_WHO[(framework, precision)]})")
