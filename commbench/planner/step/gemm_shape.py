"""GEMM time vs GEMM shape: a roofline with additive operand traffic, per FLOPs kind, vectorised.

A GEMM C[m, n] = A[m, k] B[k, n] does 2mnk FLOPs and must move at least (mk + kn + mn) elements
through HBM, so its arithmetic intensity is 2 / (b (1/m + 1/n + 1/k)) FLOP/byte for b-byte
operands (Williams, Waterman, Patterson, "Roofline", CACM 2009). Below the GPU's ridge point a GEMM
is bandwidth-bound; in between, compute and operand traffic only partly overlap (prologue/epilogue,
wave tails). The step model therefore charges each GEMM

    t = FLOPs / (peak x gemm_efficiency) + gemm_traffic_factor x FLOPs x (b / 2)(1/m + 1/n + 1/k) / HBM bandwidth

— the second term is the compulsory operand traffic, scaled by one fitted constant
(`Calibration.gemm_traffic_factor`: tile re-reads and imperfect overlap push it above 0; L2 reuse
pulls it down). Equivalently the achieved fraction of the large-GEMM rate is
1 / (1 + d0 (1/m + 1/n + 1/k)) with d0 = factor x ridge x b / 2 set by the GPU's peak/bandwidth.
The sum 1/m + 1/n + 1/k is symmetric, so forward, data-gradient and weight-gradient GEMMs (the
same three sizes permuted) share it.

Shapes, per micro-batch (Megatron-Core, MoE parallel folding arXiv 2504.14960):
- dense GEMMs (attention projections, MTP, dense MLP, shared experts, output layer): m = the
  micro-batch's tokens on the CP rank (sequence parallel all-gathers them before each GEMM),
  k = hidden, n = the TP-sharded width (heads x head_dim / TP, FFN / TP, vocab / TP, the vocabulary
  as the framework pads it: models/counts.step_vocab; its operands bf16 where the framework keeps the output layer
  in bf16, step/module_precision.py);
- routed-expert grouped GEMMs: m = tokens per local expert = tokens per rank x top-k x EP x ETP
  / experts (balanced routing; the ETP all-gather joins ETP ranks' tokens), k = hidden,
  n = expert FFN / ETP. Many experts per rank and large ETP make both small — the reason
  practitioners shard experts with EP, not ETP (Megatron-LM MoE docs: "EP is preferred over ETP").
"""

from __future__ import annotations

import numpy as np

from commbench.planner.models.spec import ModelSpec
from commbench.planner.models.counts import FlopsPerToken

OPERAND_BYTES = np.array([2.0, 1.0, 1.0, 0.5])  # by precision code: bf16, fp8, mxfp8, nvfp4


def _inv_sum(m, n, k) -> np.ndarray:
    return 1.0 / np.maximum(m, 1.0) + 1.0 / np.maximum(n, 1.0) + 1.0 / np.maximum(k, 1.0)


def expert_tokens_per_gemm(model: ModelSpec, tokens_mb, tp, cp, ep, etp) -> np.ndarray:
    """m of one local expert's grouped GEMM: tokens routed to it in one micro-batch (balanced routing)."""
    return tokens_mb * model.top_k * ep * etp / (tp * cp * model.num_routed_experts)


def traffic_bytes_per_token(model: ModelSpec, fl: FlopsPerToken, *, tokens_mb, tp, cp, ep, etp,
                            precision, vocab=None, output_layer_quantized=False) -> tuple[np.ndarray, np.ndarray]:
    """(dense, routed-expert) compulsory operand bytes per micro-batch token, i.e.
    sum over GEMM kinds of FLOPs/token x (b / 2)(1/m + 1/n + 1/k); multiply by the tokens and
    divide by HBM bandwidth for seconds (before the fitted factor). `vocab`: the output layer's rows
    (models/counts.step_vocab: Megatron-LM's padded vocabulary; default the model's). The output layer's operands
    are bf16 unless `output_layer_quantized` (step/module_precision.output_layer_quantized, per layout)."""
    b = OPERAND_BYTES[precision]
    h = float(model.hidden)
    m_dense = tokens_mb / cp
    b_logits = np.where(output_layer_quantized, b, OPERAND_BYTES[0])
    dense = (fl.attention_proj + fl.mtp_proj) * _inv_sum(m_dense, model.attn_out_dim / tp, h) \
        + fl.dense_mlp * _inv_sum(m_dense, max(model.dense_ffn, 1) / tp, h) \
        + fl.logits * _inv_sum(m_dense, (model.vocab if vocab is None else vocab) / tp, h) * b_logits / b
    if fl.linear_attention:  # Gated DeltaNet in_proj / out_proj, head-sharded over TP
        dense = dense + fl.linear_attention * _inv_sum(m_dense, max(model.gdn_num_value_heads * model.gdn_value_head_dim, 1) / tp, h)
    if fl.mamba:  # in_proj / out_proj of Mamba-2 blocks, head-sharded over TP
        dense = dense + fl.mamba * _inv_sum(m_dense, model.mamba_num_heads * model.mamba_head_dim / tp, h)
    if model.is_moe:
        dense = dense + fl.moe_latent_proj * _inv_sum(m_dense, max(model.moe_latent_size, 1), h)
        dense = dense + fl.shared_experts * _inv_sum(m_dense, model.expert_ffn * max(model.num_shared_experts, 1) / tp, h)
        m_e = expert_tokens_per_gemm(model, tokens_mb, tp, cp, ep, etp)
        routed = fl.routed_experts * _inv_sum(m_e, model.expert_ffn / etp, float(model.expert_width))
    else:
        routed = np.zeros_like(dense)
    return dense * b / 2.0, routed * b / 2.0
