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
Memory traffic: the block's pre-norm + residual (5 h, as every block) and the fp8 casts of the two
GEMM inputs follow memory.py's rule (backward twice the forward: elementwise_elements). The mixer between
in_proj and out_proj does not: megatron-core's MambaMixer._ssm_training runs mamba_ssm's
mamba_split_conv1d_scan_combined (ops/triton/ssd_combined.py, MambaSplitConv1dScanCombinedFn), whose
backward recomputes the causal conv1d and the SSD forward's chunk cumsum, CB, chunk states and state
passing before some ten gradient kernels, each reading x or dout again. Its HBM bytes are counted kernel
by kernel from that source in MIXER_KERNEL_BYTES (mixer_bytes_per_token), forward + backward.
SSD scan FLOPs (mamba_ssm ops/triton/ssd_combined.py, the kernels megatron-core's MambaMixer calls): the
chunked algorithm of Dao & Gu (arXiv 2405.21060 sec. 6) as batched matmuls per chunk of Q tokens --
CB = C B^T per group (Q x N), the intra-chunk scan (CB masked) x per head (Q x P), the chunk states
B^T x (N x P) and the states' contribution C h (N x P) -- so per token per head forward
2 (Q N / heads_per_group + Q P + 2 N P) FLOPs, against Megatron's count of 7 P N. They are Triton kernels on
bf16 inputs with fp32 accumulation (Transformer Engine's fp8 autocast reaches only its Linear layers), so
they run at the bf16 tensor rate whatever the recipe's precision, with inner dimensions of N, Q or P
(64-128): the paper's "structured masked attention", charged at the attention core's efficiency. The
backward recomputes the forward's chunk cumsum, CB, chunk states and state passing, then runs the
gradients (twice the forward): 4 x forward in all.
Activations kept for backward: the block input, the pre-norm output (in_proj input), and what
MambaSplitConv1dScanCombinedFn saves (ctx.save_for_backward: the in_proj output zxbcdt and the SSD
output out_x; the conv output and the chunk states are recomputed in its backward, not kept), the gated
norm's input y (its own copy after the layout transpose) and its output (out_proj input).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commbench.planner.models.mamba import SSD_SCAN_FLOPS_PER_STATE, d_inner, in_proj_width
from commbench.planner.models.spec import ModelSpec

SSD_CHUNK_TOKENS = 128  # megatron-core DEFAULT_MAMBA_CHUNK_SIZE


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


# HBM bytes per token of each kernel of MambaSplitConv1dScanCombinedFn (mamba_ssm ops/triton/ssd_combined.py
# at v2.3.2; ssd_chunk_state.py, ssd_state_passing.py, ssd_bmm.py, ssd_chunk_scan.py for the dtypes) and of
# megatron-core's gated RMSNorm module around it, by the tensor each moves, per element: x = one head-dim
# vector of the local heads (d_inner / (tp cp): x, z, y, out_x, dout, dx, dz, norm input and output), xbc =
# the conv channels (d_inner + 2 G N), states = the chunk states per token (d_inner N / Q), cb = CB per
# token (local groups x Q), bc = one of B or C (local groups x N), dt = one per local head. bf16 = 2 B,
# fp32 = 4 B; a read and a write both count. The bwd dB / dC / dCB partials are split over
# nsplits = cdiv(heads per group, heads per program) = 1 whenever batch x chunks x heads >= heads per group
# x SMs (every training micro-batch here), so they are one fp32 copy each, summed once.
MIXER_KERNEL_BYTES = (
    # forward
    ("causal_conv1d_fwd", {"xbc": 4}),                                # read xBC, write xBC_conv
    ("chunk_cumsum_fwd", {"dt": 10}),                                 # dt in, dt + dA_cumsum out in fp32
    ("chunk_state_fwd", {"x": 2, "bc": 2, "dt": 8, "states": 4}),     # states_in_fp32=True
    ("state_passing_fwd", {"states": 6}),                             # fp32 in, out_dtype = C.dtype
    ("bmm_chunk_fwd", {"bc": 4, "cb": 4}),                            # CB in fp32
    ("chunk_scan_fwd", {"cb": 4, "x": 8, "bc": 2, "states": 2, "dt": 8}),  # x, z in; out, out_x out
    ("rmsnorm_fwd", {"x": 4}),
    # backward
    ("rmsnorm_bwd", {"x": 6}),                                        # y, dy in; dx out
    ("causal_conv1d_fwd (recompute)", {"xbc": 4}),
    ("chunk_cumsum_fwd (recompute)", {"dt": 10}),
    ("bmm_chunk_fwd (recompute)", {"bc": 4, "cb": 4}),
    ("chunk_state_fwd (recompute)", {"x": 2, "bc": 2, "dt": 8, "states": 4}),
    ("state_passing_fwd (recompute)", {"states": 8}),                 # no out_dtype: fp32 out
    ("chunk_scan_bwd_dz", {"x": 12}),                                 # x, z, out_x, dout in; dz, dout out
    ("chunk_scan_bwd_dstates", {"x": 2, "bc": 2, "dt": 4, "states": 4}),   # dstates in fp32
    ("state_passing_bwd", {"states": 12}),                            # fp32 states, dstates in; bf16 out
    ("chunk_scan_chunk_state_bwd_dx", {"x": 6, "cb": 4, "states": 2, "bc": 2, "dt": 12}),
    ("chunk_state_bwd_db", {"x": 2, "states": 2, "bc": 14, "dt": 12}),     # dB fp32, summed over splits
    ("chunk_scan_bwd_dC", {"x": 2, "states": 2, "bc": 14, "dt": 12}),      # dC fp32, summed over splits
    ("chunk_scan_bwd_dcb", {"x": 4, "cb": 12, "dt": 8}),              # dCB fp32, summed over splits
    ("bmm_chunk_bwd x2", {"cb": 8, "bc": 16}),                        # dCB, C / B, fp32 residual in; dB, dC out
    ("chunk_scan_bwd_ddAcs_stable", {"x": 4, "cb": 4, "dt": 12}),
    ("chunk_cumsum_bwd", {"dt": 12}),
    ("causal_conv1d_bwd", {"xbc": 6}),                                # xBC, dxBC in; dxBC out
)
# MambaMixer._ssm_training's layout copies ("l b d -> b l d" of the in_proj output before the kernel,
# "b l d -> l b d" of y after it, .contiguous() each; in backward the in_proj grad is copied back for
# the row-major GEMM, dy is read strided): copies only when the micro-batch holds more than one sequence
# (a size-1 batch dimension leaves the tensor contiguous). zx = the in_proj width per head shard.
MIXER_COPY_BYTES = {"zx": 8, "x": 4}


def mixer_elements(model: ModelSpec) -> dict[str, float]:
    """Elements per token of each tensor kind of MIXER_KERNEL_BYTES, all heads (divide by tp x cp)."""
    d, g, n = d_inner(model), model.mamba_num_groups, model.mamba_state_dim
    return {"x": d, "xbc": _conv_channels(model), "states": d * n / SSD_CHUNK_TOKENS,
            "cb": g * SSD_CHUNK_TOKENS, "bc": g * n, "dt": model.mamba_num_heads, "zx": in_proj_width(model)}


def mixer_bytes_per_token(model: ModelSpec, tp, cp, mbs) -> np.ndarray:
    """HBM bytes per token of the micro-batch that one Mamba layer's mixer kernels (conv1d, SSD scan,
    gated norm and the layout copies) move on one GPU, forward + backward: heads shard over tp x cp."""
    el = mixer_elements(model)
    kernels = sum(per * el[kind] for _, moved in MIXER_KERNEL_BYTES for kind, per in moved.items())
    copies = sum(per * el[kind] for kind, per in MIXER_COPY_BYTES.items())
    return (kernels + np.where(np.asarray(mbs) > 1, copies, 0.0)) / (np.asarray(tp) * np.asarray(cp))


def mixer_bytes_per_microbatch(model: ModelSpec, tp, cp, pp, mbs, tokens_mb) -> np.ndarray:
    """mixer_bytes_per_token over the Mamba layers of one pipeline stage (balanced) for one micro-batch."""
    if not model.num_mamba_layers:
        return np.zeros(np.shape(tp))
    return tokens_mb * model.num_mamba_layers / pp * mixer_bytes_per_token(model, tp, cp, mbs)


def elementwise_elements(model: ModelSpec, tp, cp, sp, cast) -> np.ndarray:
    """Forward elements read + written per token by one Mamba layer's memory-bound kernels on one GPU that
    follow memory.py's backward = 2 x forward rule: pre-norm + residual and the fp8 casts of the two GEMM
    inputs (the mixer's own kernels: mixer_bytes_per_token)."""
    h, d = model.hidden, d_inner(model)
    seq_shard = np.where(sp, tp, 1) * cp
    return 2 * (2 * h + 3 * h) / seq_shard + cast * h / seq_shard + cast * (d + d) / (tp * cp)


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
    the tokens_gpu share) at the bf16 tensor rate x the attention core's efficiency (`bf16_rate_flops`)."""
    return mamba_layers_per_gpu_tokens * ssd_flops_per_token(model) / bf16_rate_flops


def activation_elements(model: ModelSpec, tp, cp, sp, recompute, precision) -> np.ndarray:
    """bf16-equivalent elements per token one Mamba layer keeps for backward on one GPU (as memory.py
    counts the other blocks: fp8 GEMM inputs are half an element; selective recompute drops the norm
    output; full recompute keeps only the block input)."""
    h, d = model.hidden, d_inner(model)
    seq_shard = np.where(sp, tp, 1) * cp
    head_shard = tp * cp
    keep = np.where(recompute == 1, 0.0, 1.0)
    gemm_in = np.where(precision > 0, 0.5, 1.0)
    per_head = in_proj_width(model) + d + d + d * gemm_in   # zxbcdt, out_x, norm input, out_proj input
    kept = (h + keep * h * gemm_in) / seq_shard + per_head / head_shard
    return np.where(recompute == 2, h / seq_shard, kept)


def cp_all_to_all_s(model: ModelSpec, system, collective_time_s, *, tokens_mb, tp, cp, cp_domains,
                    act_bytes: int) -> np.ndarray:
    """Per micro-batch per Mamba layer: the CP all-to-alls, forward and backward (0 where cp = 1)."""
    if not np.any(cp > 1):
        return np.zeros(np.shape(tp))
    rows = tokens_mb / cp / tp * act_bytes
    one_way = (collective_time_s(system, "all_to_all", rows * in_proj_width(model), cp, cp_domains)
               + collective_time_s(system, "all_to_all", rows * d_inner(model), cp, cp_domains))
    return np.where(cp > 1, 2.0 * one_way, 0.0)
