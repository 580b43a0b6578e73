"""Which modules run their GEMMs, and keep their weights, in the training precision, and which stay bf16: one rule
for the GEMM time (step/evaluate.py, step/gemm_shape.py), the weights a rank holds (step/memory.py) and the bytes the
data-parallel all-gather moves (step/dp_sync.py, step/fsdp.py). Vectorised over layouts.

Megatron-LM: the same at every megatron-core a release runs (core_v0.14.0, the 25.09 pin megatron-core>=0.14,<0.15;
the 3rdparty/Megatron-LM commits Megatron-Bridge pins at 25.11 0d8e071, 26.02 b0cc270, 26.02.01 55ac708, 26.04
d728871, 26.04.01 2edffad, 26.06 d0b3b77, 26.06.01 458c8d0, 26.08 cd4afff; the installed core_v0.16.1, whose lines
are cited):
- in the training precision: the transformer layers. TransformerBlock builds each under get_fp8_context /
  get_fp4_context(config, layer, is_init=True) (transformer/transformer_block.py:345-351): Transformer Engine's
  fp8_model_init with --fp8-param-gather, so their GEMM weights are Float8Tensors, and runs them under the autocast;
  MambaStack likewise (ssm/mamba_block.py:122);
- bf16, whatever the precision: the embedding (LanguageModelEmbedding's tensor_parallel.VocabParallelEmbedding, a
  lookup) and the output layer (models/gpt/gpt_model.py:241 tensor_parallel.ColumnParallelLinear, whose forward is
  torch.matmul: tensor_parallel/layers.py:488), built outside any quantization context. So the logits GEMM of every
  head runs at the bf16 rate with bf16 operands, and both vocabulary matrices are bf16 parameters, gathered at 2 B:
  DistributedDataParallel gives a uint8 buffer only to Float8Tensor parameters (distributed/
  distributed_data_parallel.py:138-146), Megatron-FSDP keys its parameter groups by dtype;
- the MTP layers: built under get_fp8_context(config, is_init=True) and run under fp8 autocast only
  (transformer/multi_token_prediction.py:1059, 775-781: "TODO: currently ignoring FP4 in MTP layers", at every pin
  from 25.11 to 26.08): in the precision under fp8 / mxfp8, bf16 under nvfp4 (GEMMs and weights);
- counted in the precision though bf16: the norms, the router and the biases inside the layers (Transformer Engine
  quantizes only the Linear weights; under 0.05% of the parameters of every zoo model).
Not modelled (the planner's launches are core_v0.16.1's and the layout has no field for them): megatron-core
0.18.0's fp8_output_proj (output_layer_cls = TELMHeadColumnParallelLinear under MXFP8, gpt_model.py at d0b3b77),
which Megatron-Bridge v0.5.0 (26.06) and later set in the DeepSeek-V3 and gpt-oss MXFP8 performance recipes
(scripts/performance/configs/deepseek/deepseek_llm_pretrain.py at fcbb603; perf_recipes/deepseek/*/deepseek_v3.py,
perf_recipes/gpt_oss/common.py at 51885cf); --first-last-layers-bf16, which the performance recipes turn off for
fp8_cs (scripts/performance/utils/precision.py), leave off for mxfp8 and nvfp4 (mixed_precision.py
bf16_with_mxfp8_mixed, bf16_with_nvfp4_mixed) and turn on only for gpt-oss-20b nvfp4 (the last 4 layers) and
Nemotron-3-Super nvfp4 (the last 14, 26.04 on: nemotron_3_llm_pretrain.py at 0fbfe7d).

TorchTitan 0.3.0 (the converters the plans write, emit/torchtitan_config.py): lm_head is converted only by a dense
model's MXFP8LinearConverter (no fqns: every Linear, as llama3_8b_mxfp8); Float8LinearConverter filters it
(filter_fqns), NVFP4LinearConverter converts fqns=["layers"] only, the MoE MXFP8 converter names the attention,
shared-expert and dense-FFN Linears. Its launches train no MTP layer (models/counts.framework_model). torchao
quantizes the weights at each GEMM and FSDP2 gathers bf16, so its weights and all-gathers are bf16 whatever the
output layer runs in (dp_sync.param_gather_bytes).
"""

from __future__ import annotations

import numpy as np

from commbench.planner.layout.spec import PRECISIONS

BF16_BYTES = 2.0
_MXFP8, _NVFP4 = PRECISIONS.index("mxfp8"), PRECISIONS.index("nvfp4")
_BF16 = PRECISIONS.index("bf16")


def output_layer_quantized(precision, framework: str, is_moe: bool) -> np.ndarray:
    """Per layout, whether the output layer's GEMMs run in the training precision (module docstring): TorchTitan's
    dense MXFP8 plans only; never Megatron's (a bf16 ColumnParallelLinear), nor any bf16 plan."""
    precision = np.asarray(precision)
    return (precision == _MXFP8) & (framework == "torchtitan") & (not is_moe)


def mtp_quantized(precision, framework: str) -> np.ndarray:
    """Per layout, whether the MTP layers' GEMMs and weights are in the training precision: Megatron's, under fp8 and
    mxfp8, not nvfp4 (module docstring); bf16 plans trivially. TorchTitan trains none (answer unused)."""
    precision = np.asarray(precision)
    return (precision != _NVFP4) & (precision != _BF16)


def bf16_params_per_gpu(*, vocab_params_local, mtp_params_local, precision, framework: str) -> np.ndarray:
    """Parameters per GPU (after TP/EP sharding, before DP sharding) kept and gathered in bf16 whatever the
    precision: the vocabulary matrices it holds (`vocab_params_local`) and, where the MTP layers are bf16
    (mtp_quantized false), the MTP layers' (`mtp_params_local`). Under TorchTitan every parameter is bf16 anyway
    (callers take 2 B for all)."""
    mtp_bf16 = ~mtp_quantized(precision, framework)
    return np.asarray(vocab_params_local, dtype=float) + np.where(mtp_bf16, mtp_params_local, 0.0)


def mixed_bytes(total_params, bf16_params, low_bytes) -> np.ndarray:
    """Bytes per parameter of `total_params` of which `bf16_params` are 2 B and the rest `low_bytes` (the precision's
    weight or gather bytes): the mean a collective or buffer of all of them moves per parameter."""
    total = np.asarray(total_params, dtype=float)
    bf16 = np.minimum(np.asarray(bf16_params, dtype=float), total)
    low = np.asarray(low_bytes, dtype=float)
    return np.where(total > 0, (low * (total - bf16) + BF16_BYTES * bf16) / np.maximum(total, 1e-300), low)
