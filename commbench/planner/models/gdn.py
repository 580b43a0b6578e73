"""Gated DeltaNet linear-attention layers (Qwen3-Next): parameters and Megatron's model FLOPs.

In megatron-core 0.16 a GPT model with `experimental_attention_variant="gated_delta_net"` and
`linear_attention_freq=N` makes every layer but each N-th a Gated DeltaNet layer (Yang et al., Gated
Delta Networks, arXiv 2412.06464; megatron/core/ssm/gated_delta_net.py), the N-th full attention, each
followed by its MLP/MoE. With qk = key heads x key dim and v = value heads x value dim:
  in_proj   h -> 2 qk + 2 v + 2 value heads   (q, k, v, z; the b and a gates per value head)
  conv1d    depthwise over q, k, v: (2 qk + v) x K weights
  A_log, dt_bias: one per value head; gated RMSNorm over the value head dim
  out_proj  v -> h
Model FLOPs: Megatron-LM core_v0.16.1 `training.py::num_floating_point_operations` (linear_self_attn_term),
per token forward, times 3: 2 [h (2 qk + 2 v + 2 Hv) + K (2 qk + v) + 4 Hv dv^2 + h v].
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from commbench.planner.models.spec import ModelSpec


def qk_dim(m: "ModelSpec") -> int:
    return m.gdn_num_key_heads * m.gdn_key_head_dim


def v_dim(m: "ModelSpec") -> int:
    return m.gdn_num_value_heads * m.gdn_value_head_dim


def in_proj_width(m: "ModelSpec") -> int:
    return 2 * qk_dim(m) + 2 * v_dim(m) + 2 * m.gdn_num_value_heads


def conv_channels(m: "ModelSpec") -> int:
    return 2 * qk_dim(m) + v_dim(m)


def gdn_macs_per_token(m: "ModelSpec") -> float:
    """Multiply-adds per token of one Gated DeltaNet layer, forward (Megatron's count)."""
    if not m.linear_attention_freq:
        return 0.0
    h = m.hidden
    return (h * in_proj_width(m) + m.gdn_conv_kernel * conv_channels(m)
            + 4 * m.gdn_num_value_heads * m.gdn_value_head_dim ** 2 + h * v_dim(m))


def gdn_params_per_layer(m: "ModelSpec") -> float:
    if not m.linear_attention_freq:
        return 0.0
    h = m.hidden
    return (h * in_proj_width(m) + conv_channels(m) * m.gdn_conv_kernel + 2 * m.gdn_num_value_heads
            + m.gdn_value_head_dim + v_dim(m) * h)


def num_full_attention_layers(num_layers: int, freq: int) -> int:
    """Layers i (0-based) with (i + 1) % freq == 0 are full attention (Megatron's linear_attention_freq)."""
    return num_layers // freq if freq else num_layers


def gdn_heads_bad(model: ModelSpec, tp, cp) -> np.ndarray:
    """TransformerConfig: key and value heads divisible by TP; context parallelism only where the release's
    megatron-core splits GDN heads over CP (ModelSpec.gdn_context_parallel, 0.18.0 on: Megatron-LM 20ba03fec0 "Gated
    delta net context parallel (CP) (#2642)"; 26.04.01's 2edffadb transformer_config.py:1115-1118 still asserts
    context_parallel_size == 1), and then the key and value heads of a TP rank divisible by CP (26.06's d0b3b775
    ssm/gated_delta_net.py:389-392, 546 split them as heads // tp // cp after the all-to-all)."""
    if not model.linear_attention_freq:
        return np.zeros(np.shape(tp), dtype=bool)
    tp, cp = np.asarray(tp), np.asarray(cp)
    heads_bad = (model.gdn_num_key_heads % tp != 0) | (model.gdn_num_value_heads % tp != 0)
    if not model.gdn_context_parallel:
        return heads_bad | (cp != 1)
    return heads_bad | (model.gdn_num_key_heads % (tp * cp) != 0) | (model.gdn_num_value_heads % (tp * cp) != 0)
