"""Mamba-2 (SSD) layers of hybrid models: the layer pattern's rules, parameters and model FLOPs.

A hybrid model (Megatron-LM `MambaModel` / `MambaStack`, Nemotron-H) lists one character per
layer (megatron/core/ssm/mamba_hybrid_layer_allocation.py `Symbols`): M = Mamba-2 mixer,
* = self-attention, - = dense MLP, E = MoE; each layer is one pre-norm block.

Mamba-2 mixer (Dao & Gu, "Transformers are SSMs", arXiv 2405.21060; megatron/core/ssm/mamba_mixer.py),
with d_inner = heads x head_dim, G groups, state N, conv kernel K:
  in_proj   h -> 2 d_inner + 2 G N + heads      (z, x, B, C, dt)
  conv1d    depthwise over x, B, C: (d_inner + 2 G N) x K weights + as many biases
  A_log, D, dt_bias: heads each; gated RMSNorm over d_inner
  out_proj  d_inner -> h
Model FLOPs follow Megatron-LM `training.py::num_floating_point_operations.mamba_layer_flops`
(forward, per token): 2 h (2 d_in + 2 G N + heads) + 7 d_in N + 2 d_in h, times 3 for fwd + bwd.
Megatron takes d_in = 2 h there (the `expand` = 2 of the original Mamba) while the layer's GEMMs
run on its own d_inner (heads x head_dim): they differ for Nemotron-3 Nano (4096 vs 2 x 2688).
The compute time uses the layer's own FLOPs; the published TFLOP/s (Megatron's count) use
d_in = 2 h: Nano's rows publish 22.25 GFLOP/token (756 TFLOP/s at 33,934 tokens/s/GPU), which
Megatron's d_in reproduces (22.28) and the layer's own d_inner does not (20.77).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from commbench.errors import CommbenchError

if TYPE_CHECKING:
    from commbench.planner.models.spec import ModelSpec

PATTERN_CHARS = "M*-E"
SSD_SCAN_FLOPS_PER_STATE = 7  # Megatron's scan estimate: 7 x d_in x N per token (forward)


def check_hybrid(m: "ModelSpec") -> None:
    """A hybrid model's pattern and Mamba dims agree with the rest of its description."""
    where = f"model {m.name!r}"
    bad = sorted(set(m.layer_pattern) - set(PATTERN_CHARS))
    if bad:
        raise CommbenchError(f"{where}: layer_pattern character {bad[0]!r} is invalid: allowed M (Mamba), "
                             "* (attention), - (MLP), E (MoE)")
    if len(m.layer_pattern) != m.num_layers:
        raise CommbenchError(f"{where}: layer_pattern has {len(m.layer_pattern)} layers, layers={m.num_layers}")
    if m.layer_pattern.count("-") != m.num_dense_layers:
        raise CommbenchError(f"{where}: dense_layers={m.num_dense_layers} but the pattern has "
                             f"{m.layer_pattern.count('-')} MLP layers")
    if "E" in m.layer_pattern and m.num_routed_experts <= 0:
        raise CommbenchError(f"{where}: the pattern has MoE layers (E) but routed_experts=0")
    if "M" in m.layer_pattern and min(m.mamba_num_heads, m.mamba_head_dim, m.mamba_state_dim,
                                      m.mamba_num_groups, m.mamba_conv_kernel) <= 0:
        raise CommbenchError(f"{where}: Mamba layers need mamba_num_heads, mamba_head_dim, mamba_state_dim, "
                             "mamba_num_groups and mamba_conv_kernel > 0")
    if "M" in m.layer_pattern and m.mamba_num_heads % m.mamba_num_groups:
        raise CommbenchError(f"{where}: mamba_num_heads={m.mamba_num_heads} is invalid: a multiple of "
                             f"mamba_num_groups={m.mamba_num_groups}")


def d_inner(m: "ModelSpec") -> int:
    return m.mamba_num_heads * m.mamba_head_dim


def in_proj_width(m: "ModelSpec") -> int:
    """Output width of in_proj: z and x (d_inner each), B and C (G x N each), dt (one per head)."""
    return 2 * d_inner(m) + 2 * m.mamba_num_groups * m.mamba_state_dim + m.mamba_num_heads


def mamba_params_per_layer(m: "ModelSpec") -> float:
    if not m.num_mamba_layers:
        return 0.0
    d, h = d_inner(m), m.hidden
    conv_channels = d + 2 * m.mamba_num_groups * m.mamba_state_dim
    return (h * in_proj_width(m) + conv_channels * (m.mamba_conv_kernel + 1) + 3 * m.mamba_num_heads
            + d + d * h)


def mamba_flops_fwd_per_token(m: "ModelSpec", megatron: bool = False) -> float:
    """Forward FLOPs per token of one Mamba-2 layer: Megatron's formula with the layer's d_inner,
    or with Megatron's d_in = 2 h (`megatron=True`, the published TFLOP/s currency)."""
    if not m.num_mamba_layers:
        return 0.0
    h = m.hidden
    d = 2 * h if megatron else d_inner(m)
    width = 2 * d + 2 * m.mamba_num_groups * m.mamba_state_dim + m.mamba_num_heads
    return 2 * h * width + SSD_SCAN_FLOPS_PER_STATE * d * m.mamba_state_dim + 2 * d * h


def layer_kind_counts(pattern: str) -> dict[str, int]:
    return {c: pattern.count(c) for c in PATTERN_CHARS}


def mamba_heads_bad(model: ModelSpec, tp, cp) -> np.ndarray:
    """MambaMixer: heads and groups divisible by TP; MambaContextParallel: local heads by CP, and
    local groups a divisor or multiple of CP."""
    if not model.num_mamba_layers:
        return np.zeros(np.shape(tp), dtype=bool)
    heads, groups = model.mamba_num_heads, model.mamba_num_groups
    local_groups = groups // np.maximum(tp, 1)
    groups_cp_bad = np.where(local_groups >= cp, local_groups % cp != 0, cp % np.maximum(local_groups, 1) != 0)
    return (heads % tp != 0) | (groups % tp != 0) | ((heads // np.maximum(tp, 1)) % cp != 0) | groups_cp_bad
