"""Context-parallel communication of one attention layer per micro-batch: TorchTitan 0.3.0's all-gathers, and
Megatron-Core's all-to-all CP for attention with sinks (a2a_cp_s; the ring, cp_comm_type p2p, is priced in
step/evaluate.py).

TorchTitan 0.3.0 applies CP to the attention core by wrapping its forward (distributed/context_parallel/api.py
apply_cp_to_forward). FlexAttention, the attention every model it runs CP with builds (llama3, qwen3 and
deepseek_v3 flavors: attn_backend "flex"; under the default parallelism.spmd_backend "spmd_types",
distributed/full_dtensor.py validate_config refuses CP with ScaledDotProductAttention or VarlenAttention, and
gpt_oss builds VarlenAttention: search/frameworks.py titan_cp_refusal), gets `flex_cp_allgather(k, v, seq_dim,
pg)` (torch/distributed/tensor/experimental/_context_parallel/_cp_custom_ops.py): in forward two blocking
all_gather_single calls, K then V, each `.wait()`-ed before the attention kernel runs; in backward
flex_cp_allgather_backward reduce-scatters dK then dV (reduce_scatter_single, waited). Nothing overlaps them with
compute, unlike Megatron's ring (step/evaluate.py's sendrecv passes hidden behind the attention core).
Activation checkpointing re-runs the all-gathers in backward: FullAC re-runs the block's forward; SelectiveAC (per-op,
every block) saves only its save list's outputs (distributed/activation_checkpoint.py _get_default_save_ops:
flex_attention, linear, reduce_scatter_tensor, all_to_all_single, ...), not flex_cp_allgather's, whose K and V
flex_attention's backward takes, so they are gathered again.

Per micro-batch and attention layer: all-gather of the full-sequence K and V (tokens_mb x width / tp x 2 B each,
over cp ranks) in forward, again in backward with recompute full or selective, reduce-scatter of dK and dV of the
same sizes in backward; exposed = total.
"""

from __future__ import annotations

import numpy as np

ACT_BYTES = 2.0   # bf16 K and V


def kv_widths(model) -> tuple[float, float]:
    """(K width, V width) per token the attention core sees (ModelSpec.kv_dim is their sum): MLA's per-head
    nope + rope keys and v_head_dim values, else kv_dim split evenly between K and V."""
    if model.attention == "mla":
        return (float(model.num_heads * (model.qk_nope_head_dim + model.qk_rope_head_dim)),
                float(model.num_heads * model.v_head_dim))
    return model.kv_dim / 2.0, model.kv_dim / 2.0


def titan_cp_s(system, coll, model, *, tokens_mb, tp, cp, cp_domains, attn_layers, rerun):
    """Seconds per micro-batch of TorchTitan's CP collectives on the busiest stage (module docstring), all exposed:
    `attn_layers` attention layers, `tokens_mb` tokens of the micro-batch's sequence, `rerun` where activation
    checkpointing gathers K and V again in backward."""
    total = np.zeros(np.shape(cp), dtype=float)
    group = np.asarray(cp, dtype=float)
    for width in kv_widths(model):
        size = tokens_mb * width / tp * ACT_BYTES
        ag = coll(system, "all_gather", size, group, cp_domains)
        rs = coll(system, "reduce_scatter", size, group, cp_domains)
        total = total + ag * (1.0 + np.asarray(rerun, dtype=float)) + rs
    return np.where(group > 1, attn_layers * total, 0.0)


# Per token (before / after the attention core), the tensors Transformer Engine's AttnFuncWithCPAndQKVOA2A
# (context_parallel.py at 015d225) sends through flash_attn_a2a_communicate: forward [q, k, v] before the core and
# out after it; backward [out, dout] (out is saved as the core wrote it, before the forward's last all-to-all) and
# [dq, dk, dv] after it. None overlaps the core: it waits for each before the kernel that reads it.
def _a2a_widths(model) -> tuple[float, float]:
    """(forward, backward) elements per token that the all-to-alls of one attention layer move."""
    q, kv, out = float(model.q_dim), float(model.kv_dim), float(model.attn_out_dim)
    return q + kv + out, 2.0 * out + q + kv


def a2a_cp_s(system, coll, model, *, tokens_mb, tp, cp, cp_domains, attn_layers, rerun):
    """Seconds per micro-batch of Megatron's all-to-all CP (ModelSpec.all_to_all_cp) on the busiest stage, all exposed:
    `attn_layers` attention layers, each all-to-all of the rank's tokens_mb / cp tokens x width / tp in bf16 over the
    cp ranks (nccl-tests' size: the rank's whole buffer); `rerun` (0..1 per row) where recompute re-runs the core's
    forward (selective's core_attn, full's share of the layers), all-to-alls included."""
    forward_width, backward_width = _a2a_widths(model)
    group = np.asarray(cp, dtype=float)
    rows = tokens_mb / group / tp * ACT_BYTES
    forward = coll(system, "all_to_all", rows * forward_width, group, cp_domains)
    backward = coll(system, "all_to_all", rows * backward_width, group, cp_domains)
    total = forward * (1.0 + np.asarray(rerun, dtype=float)) + backward
    return np.where(group > 1, attn_layers * total, 0.0)


def state_space_cp_s(system, collective_time_s, widths, *, tokens_mb, tp, cp, cp_domains, act_bytes: int,
                     rerun=0.0) -> np.ndarray:
    """Per micro-batch per Mamba or Gated DeltaNet layer: its two CP all-to-alls (`widths`: the in_proj output's
    and the mixer output's per-token width, both split over TP, each over the micro-batch's tokens / CP per rank),
    forward and backward (their transposes), and the forward's again for the `rerun` share of layers full recompute
    re-runs; 0 where cp = 1 (step/mamba.py, step/gdn.py cp_all_to_all_s name the widths and their sources)."""
    if not np.any(cp > 1):
        return np.zeros(np.shape(tp))
    rows = tokens_mb / cp / tp * act_bytes
    one_way = sum(collective_time_s(system, "all_to_all", rows * width, cp, cp_domains) for width in widths)
    return np.where(cp > 1, (2.0 + np.asarray(rerun, dtype=float)) * one_way, 0.0)

