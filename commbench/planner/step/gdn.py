"""Step-model terms of Gated DeltaNet blocks (Qwen3-Next's linear attention; models/gdn.py).

megatron-core 0.16 (ssm/gated_delta_net.py, TransformerConfig): key and value heads split over TP
(both divisible by it), in_proj column-parallel and out_proj row-parallel, so one all-gather +
reduce-scatter pair each way like attention. Context parallelism (megatron-core 0.18.0 on, release 26.06; cp=1
before, the layout rule): the in_proj output goes from sequence to head shards by an all-to-all over CP before
conv1d and the delta rule, and the gated norm's output back before out_proj (cp_all_to_all_s), as Mamba's.
Memory traffic per token (forward, read + write, elements), as step/mamba.py counts a Mamba block:
pre-norm + residual (5 h), conv1d over q, k, v (2 x channels), the chunked delta rule (read q, k, v
and the b/a gates, write the output), gated RMSNorm (read output and z, write), fp8 casts of the GEMM
inputs. Activations kept for backward: block input, norm output, in_proj output, conv output, the
core output and the out_proj input, plus the fp32 chunk states (value heads x dk x dv per 64 tokens,
the FLA chunk kernels' default).
"""

from __future__ import annotations

import numpy as np

from commbench.planner.models.gdn import conv_channels, in_proj_width, v_dim
from commbench.planner.models.spec import ModelSpec
from commbench.planner.step.cp_comm import state_space_cp_s

CHUNK_TOKENS = 64


def elementwise_elements(model: ModelSpec, tp, cp, sp, cast) -> np.ndarray:
    h, v = model.hidden, v_dim(model)
    seq_shard = np.where(sp, tp, 1) * cp
    conv = conv_channels(model)
    per_head_shard = 2 * conv + (conv + 2 * model.gdn_num_value_heads + v) + 3 * v + cast * 2 * v
    return (2 * h + 3 * h) / seq_shard + cast * h / seq_shard + per_head_shard / (tp * cp)


def activation_elements(model: ModelSpec, tp, cp, sp, keep_norm, precision) -> np.ndarray:
    """bf16-equivalent elements per token one Gated DeltaNet block keeps for backward on one GPU; `keep_norm`: 1 where
    the layout's recompute keeps the block's input norm output, 0 where it frees it (layout/recompute.py keep_factors;
    memory.py counts full recompute)."""
    h, v = model.hidden, v_dim(model)
    seq_shard = np.where(sp, tp, 1) * cp
    keep = keep_norm
    gemm_in = np.where(precision > 0, 0.5, 1.0)
    states = 2.0 * model.gdn_num_value_heads * model.gdn_key_head_dim * model.gdn_value_head_dim / CHUNK_TOKENS
    per_head = in_proj_width(model) + conv_channels(model) + v + v * gemm_in + states
    return (h + keep * h * gemm_in) / seq_shard + per_head / (tp * cp)


def cp_all_to_all_s(model: ModelSpec, system, collective_time_s, *, tokens_mb, tp, cp, cp_domains,
                    act_bytes: int, rerun=0.0) -> np.ndarray:
    """Per micro-batch per Gated DeltaNet layer: the CP all-to-alls, forward and backward (0 where cp = 1), and the
    forward's again for the `rerun` share of layers full recompute re-runs. Megatron-LM 26.06 (d0b3b775)
    ssm/gated_delta_net.py: tensor_a2a_cp2hp of the in_proj output (q, k, v, z, b, a: in_proj_width / TP per token)
    and tensor_a2a_hp2cp of the gated norm's output (v_dim / TP per token), each over the micro-batch's tokens / CP
    per rank; backward runs their transposes (mamba_context_parallel.py autograd functions)."""
    return state_space_cp_s(system, collective_time_s, (in_proj_width(model), v_dim(model)), tokens_mb=tokens_mb,
                            tp=tp, cp=cp, cp_domains=cp_domains, act_bytes=act_bytes, rerun=rerun)
