"""Step-model terms of hybrid models: layer counts by kind, and what a Mamba-2 layer adds to
memory traffic, activation memory and communication (megatron-core 0.16 MambaMixer).

Parallelism of a Mamba-2 layer (megatron/core/ssm/mamba_mixer.py, mamba_context_parallel.py):
- TP: in_proj column-parallel, out_proj row-parallel (heads and groups split over TP: both must
  be divisible by it), so one all-gather + reduce-scatter pair (sequence parallel) or all-reduce
  each way, like an attention block;
- CP: the sequence-sharded in_proj outputs (z, x, B, C, dt) go through an all-to-all to a head
  shard before conv1d + SSD, and the SSD output back (`_all_to_all_cp2hp` / `_hp2cp`); backward
  mirrors them; nothing overlaps them (they sit between the GEMMs and the scan);
- PP: the layers split as MambaStack builds them (no interleaving in 0.16; split.py).
Memory traffic per token (forward, read + write, elements): pre-norm + residual (5 h, as every
block), conv1d over x, B, C (read + write 2 (d + 2 G N)), SSD scan (read x, B, C, dt, write y:
d + 2 G N + H + d), gated RMSNorm (read y, z, write 3 d), fp8 casts of the two GEMM inputs.
SSD scan (mamba_ssm ops/triton/ssd_combined.py, the kernels megatron-core's MambaMixer calls): the
chunked algorithm of Dao & Gu (arXiv 2405.21060 sec. 6) as batched matmuls per chunk of Q tokens --
CB = C B^T per group (Q x N), the intra-chunk scan (CB masked) x per head (Q x P), the chunk states
B^T x (N x P) and the states' contribution C h (N x P) -- so per token per head forward
2 (Q N / heads_per_group + Q P + 2 N P) FLOPs, against Megatron's count of 7 P N. They are Triton kernels on
bf16 inputs with fp32 accumulation (Transformer Engine's fp8 autocast reaches only its Linear layers), so
they run at the bf16 tensor rate whatever the recipe's precision, with inner dimensions of N, Q or P
(64-128): the paper's "structured masked attention", charged at the kernels' measured throughput
(SSD_TENSOR_FRACTION of the bf16 rate: a published kernel benchmark, not the fitted attention_efficiency). The
backward (_mamba_chunk_scan_combined_bwd) first recomputes the forward's chunk cumsum, CB, chunk states
and state passing, then runs the gradients (twice the forward): 4 x forward in all. The intermediates it
writes and reads at HBM: chunk states in fp32 (_chunk_state_fwd states_in_fp32=True: H P N per chunk),
read by state passing, which writes them back in bf16 for the chunk scan to read, and CB in fp32
(G Q per token, written and read).
Activations kept for backward (Mamba-2's chunked-scan autograd: x, B, C, dt, z, y and one fp32
state of H x P x N per chunk of 128 tokens; Dao & Gu, arXiv 2405.21060): the block input, the
norm output, the in_proj output, the conv output, y and the gated-norm output (out_proj input).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commbench.planner.models.mamba import SSD_SCAN_FLOPS_PER_STATE, d_inner, in_proj_width
from commbench.planner.models.spec import ModelSpec
from commbench.planner.step.cp_comm import state_space_cp_s

SSD_CHUNK_TOKENS = 128  # megatron-core DEFAULT_MAMBA_CHUNK_SIZE
# The SSD kernels' measured tensor throughput as a fraction of the GPU's dense bf16 rate, in this module's FLOP count
# (ssd_flops_per_token). Source: tile-ai/tilelang benchmark/mamba2/README.md (@be9c08f, PR #1109): an autotuned TileLang
# chunk_scan_fwd (the largest of the five SSD kernels; faster than mamba_ssm's Triton _chunk_scan_fwd in the same
# README's comparison, so an upper bound for the Triton kernels Megatron runs) reaches 134.4 TFLOP/s on an H800 SXM
# (989 dense bf16) at batch 8, 80 heads, head_dim 64, state 128, 8k tokens: 0.136 of the peak, counting per token per
# head the causal half of the intra-chunk product (Q P) and the state product (2 N P). This module counts that kernel
# as 2 (Q P + N P) (the whole intra-chunk product), 4/3 of the measured count at Megatron's chunk Q = 128 and N = 128.
SSD_TENSOR_FRACTION = 134.362 / 989.0 * 4.0 / 3.0


@dataclass(frozen=True)
class BlockCounts:
    """Blocks of each kind, MTP layers included (an MTP layer counts as attention + its MLP/MoE)."""

    attention: int
    mamba: int
    dense: int
    moe: int
    layers: int  # what Megatron calls layers: pattern characters, or transformer layers (+ MTP)
    linear: int = 0  # Gated DeltaNet blocks (step/gdn.py)


def block_counts(model: ModelSpec) -> BlockCounts:
    mtp = model.num_mtp_layers
    moe = (model.num_moe_layers + mtp) if model.is_moe else 0
    if model.is_hybrid:
        dense = model.num_dense_layers + (0 if model.is_moe else mtp)
        return BlockCounts(attention=model.num_attention_layers + mtp, mamba=model.num_mamba_layers,
                           dense=dense, moe=moe, layers=model.num_layers + mtp)
    layers = model.num_layers + mtp
    linear = model.num_linear_attention_layers
    return BlockCounts(attention=layers - linear, mamba=0, dense=layers - moe, moe=moe, layers=layers, linear=linear)


def _conv_channels(model: ModelSpec) -> int:
    return d_inner(model) + 2 * model.mamba_num_groups * model.mamba_state_dim


def elementwise_elements(model: ModelSpec, tp, cp, sp, cast) -> np.ndarray:
    """Forward elements read + written per token by one Mamba layer's memory-bound kernels on one GPU."""
    h, d, H = model.hidden, d_inner(model), model.mamba_num_heads
    seq_shard = np.where(sp, tp, 1) * cp
    head_shard = tp * cp
    conv = _conv_channels(model)
    per_head_shard = 2 * conv + (conv + H + d) + 3 * d + cast * (d + d) + ssd_intermediate_elements(model)
    return (2 * h + 3 * h) / seq_shard + cast * h / seq_shard + per_head_shard / head_shard


def ssd_intermediate_elements(model: ModelSpec) -> float:
    """bf16-equivalent elements per token the SSD scan's intermediates move at HBM (forward, all heads):
    chunk states written in fp32 and read (2 + 2), written back in bf16 by state passing and read by
    the chunk scan (1 + 1), CB written and read in fp32 (2 + 2 per group x Q)."""
    states_per_token = d_inner(model) * model.mamba_state_dim / SSD_CHUNK_TOKENS
    return 6.0 * states_per_token + 4.0 * model.mamba_num_groups * SSD_CHUNK_TOKENS


def ssd_flops_per_token(model: ModelSpec) -> float:
    """Chunked SSD FLOPs per token of one Mamba layer, forward + backward (4 x forward: see above)."""
    heads, p, n, q = model.mamba_num_heads, model.mamba_head_dim, model.mamba_state_dim, SSD_CHUNK_TOKENS
    groups = model.mamba_num_groups
    forward = 2.0 * (groups * q * n + heads * (q * p + 2 * n * p))
    return 4.0 * forward


def counted_scan_flops_per_token(model: ModelSpec) -> float:
    """The scan's share of the model's Mamba FLOPs (counts.py: Megatron's 7 d N, x 3 for fwd + bwd) per
    token, all Mamba layers: charged by ssd_scan_s instead of at the GEMM rate."""
    return 3.0 * model.num_mamba_layers * SSD_SCAN_FLOPS_PER_STATE * d_inner(model) * model.mamba_state_dim


def ssd_scan_s(model: ModelSpec, mamba_layers_per_gpu_tokens, bf16_rate_flops) -> np.ndarray:
    """SSD scan time: `mamba_layers_per_gpu_tokens` = tokens x Mamba layers on the GPU (heads sharded as
    the tokens_gpu share) at `bf16_rate_flops` (the bf16 tensor rate x SSD_TENSOR_FRACTION)."""
    return mamba_layers_per_gpu_tokens * ssd_flops_per_token(model) / bf16_rate_flops


def activation_elements(model: ModelSpec, tp, cp, sp, recompute, precision, *, keep_norm) -> np.ndarray:
    """bf16-equivalent elements per token one Mamba layer keeps for backward on one GPU (as memory.py
    counts the other blocks: fp8 GEMM inputs are half an element; `keep_norm` is 0 where the layout's recompute
    frees the norm output, layout/recompute.py keep_factors: Megatron's MambaLayer never does; full recompute keeps
    only the block input)."""
    h, d = model.hidden, d_inner(model)
    seq_shard = np.where(sp, tp, 1) * cp
    head_shard = tp * cp
    keep = keep_norm
    gemm_in = np.where(precision > 0, 0.5, 1.0)
    states = 2.0 * d * model.mamba_state_dim / SSD_CHUNK_TOKENS   # fp32 chunk states
    per_head = in_proj_width(model) + _conv_channels(model) + d + d * gemm_in + states
    kept = (h + keep * h * gemm_in) / seq_shard + per_head / head_shard
    return np.where(recompute == 2, h / seq_shard, kept)


def cp_all_to_all_s(model: ModelSpec, system, collective_time_s, *, tokens_mb, tp, cp, cp_domains,
                    act_bytes: int, rerun=0.0) -> np.ndarray:
    """Per micro-batch per Mamba layer: the CP all-to-alls, forward and backward (0 where cp = 1), and the forward's
    again for the `rerun` share of layers full recompute re-runs (tp_comm.py's docstring)."""
    return state_space_cp_s(system, collective_time_s, (in_proj_width(model), d_inner(model)), tokens_mb=tokens_mb,
                            tp=tp, cp=cp, cp_domains=cp_domains, act_bytes=act_bytes, rerun=rerun)
