"""DeepSeek-V4's hybrid attention and hyper-connections: parameters, Megatron's model FLOPs, context sizes.

Megatron-Core's `experimental_attention_variant="dsv4_hybrid"` (built by Megatron-Bridge's
models/deepseek/deepseek_v4_bridge.py, 067f987) gives every layer one kind of attention, from the Hugging
Face config's per-layer `compress_ratios` (the spec's `csa_pattern`, one character per decoder layer):
  W (ratio 0)   sliding-window attention only, over the last `csa_window` tokens;
  C (ratio 4)   compressed sparse attention: the window plus the `index_topk` blocks of 4 compressed tokens
                a lightning indexer (index_heads x index_head_dim, scored on every compressed block) selects;
  H (ratio 128) heavily compressed attention: the window plus every block of 128 compressed tokens.
All are multi-query: H query heads of head_dim (nope + rope) from a q_lora_rank latent, one shared KV head
of head_dim straight from h, and a grouped low-rank output projection (heads -> o_groups x o_lora_rank -> h).
MTP layers are W layers (the bridge extends the ratios with 0 per MTP layer).

Model FLOPs: Megatron-Bridge `training/utils/flop_utils.py` at 067f987, the dsv4_hybrid branch (it
reproduces the published 90.8-91.0 GFLOP/token of DeepSeek-V4-Flash at 4,096 tokens, 26.08 performance
summary). Per token, forward MACs, summed over layers (times 6 for fwd + bwd FLOPs):
  projections, every layer: q_lora (h + H head_dim + 1) + (h dv + dv) + H dv o_lora + o_groups o_lora h
  compressors: C 2 h (2 dv); H 2 h dv;  indexer (C): 2 h (2 di) + q_lora Hi di + h Hi
  core: W and H layers 2 H w dv; C layers 2 H (w + k') dv with k' = k (1 - 4 k / (2 s)), k = min(topk, s/4);
        H layers H dv s / 128 and the indexer's scoring Hi di s / 4 (quadratic in s).
Hyper-connections (mHC, `hc_mult` residual streams) are not in that count: their mixing matmuls are
(hc h) x (2 + hc) hc per sublayer, their cost is the streams' HBM traffic (step/memory.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from commbench.planner.models.spec import ModelSpec

KINDS = {"W": 0, "C": 4, "H": 128}  # layer kind -> KV compression ratio (the only ratios Megatron-Core supports)
CSA_RATIO, HCA_RATIO = KINDS["C"], KINDS["H"]


def layer_kinds(m: "ModelSpec", include_mtp: bool = True) -> str:
    """The attention kind of every layer, MTP layers (window-only) included."""
    return m.csa_pattern + "W" * (m.num_mtp_layers if include_mtp else 0)


def selected_blocks(m: "ModelSpec", seq_len: int) -> float:
    """Mean compressed blocks a C layer's query attends to: Megatron's nominal causal top-k estimate."""
    k = min(m.index_topk, seq_len // CSA_RATIO)
    return k * (1 - k * CSA_RATIO / (2 * seq_len))


def attention_macs_per_token(m: "ModelSpec", seq_len: int, include_mtp: bool = True) -> tuple[float, float]:
    """(projection MACs, core MACs) per token, forward, summed over the attention layers."""
    kinds = layer_kinds(m, include_mtp)
    n, n_c, n_h = len(kinds), kinds.count("C"), kinds.count("H")
    h, heads, dv, w, s = m.hidden, m.num_heads, m.head_dim, m.csa_window, seq_len
    hi, di = m.index_heads, m.index_head_dim
    per_layer = (m.q_lora_rank * (h + heads * dv + 1) + h * dv + dv
                 + heads * dv * m.o_lora_rank + m.o_groups * m.o_lora_rank * h)
    compressors = n_c * h * 2 * dv * 2 + n_h * h * dv * 2
    indexer = n_c * (h * 2 * di * 2 + m.q_lora_rank * hi * di + h * hi)
    proj = n * per_layer + compressors + indexer
    window = (n - n_c) * heads * w * dv * 2
    sparse = n_c * heads * (w + selected_blocks(m, s)) * dv * 2
    quadratic = s * (n_h * heads * dv / HCA_RATIO + n_c * hi * di / CSA_RATIO)
    return float(proj), float(window + sparse + quadratic)


def indexer_query_elements(m: "ModelSpec") -> float:
    """The indexer's query (index_heads x index_head_dim) per token, averaged over the attention layers."""
    kinds = layer_kinds(m)
    return m.index_heads * m.index_head_dim * kinds.count("C") / len(kinds)


def q_up_macs_per_token(m: "ModelSpec", include_mtp: bool = True) -> float:
    """MACs of the query up-projection (q_lora -> heads), what `mla_up_proj` recompute repeats."""
    return float(len(layer_kinds(m, include_mtp)) * m.q_lora_rank * m.num_heads * m.head_dim)


def scores_per_token(m: "ModelSpec", seq_len: int) -> float:
    """Softmax scores (one exponential each) per token forward, over all layers: heads x keys attended."""
    kinds = layer_kinds(m)
    keys = {"W": m.csa_window, "C": m.csa_window + selected_blocks(m, seq_len),
            "H": m.csa_window + seq_len / (2 * HCA_RATIO)}
    return float(sum(m.num_heads * keys[k] for k in kinds))


def attention_params(m: "ModelSpec", kind: str) -> float:
    """Weights of one attention block of kind W, C or H (projections, norms, sinks, compressor, indexer)."""
    h, heads, dv = m.hidden, m.num_heads, m.head_dim
    p = (h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * heads * dv + h * dv + dv
         + heads * dv * m.o_lora_rank + m.o_groups * m.o_lora_rank * h + heads)
    ratio = KINDS[kind]
    if ratio == CSA_RATIO:  # overlapping compression: wkv and wgate of 2 dv, a position bias per offset, a norm
        hi, di = m.index_heads, m.index_head_dim
        p += 2 * h * 2 * dv + ratio * 2 * dv + dv
        p += 2 * h * 2 * di + ratio * 2 * di + di + m.q_lora_rank * hi * di + h * hi  # the indexer's own
    elif ratio == HCA_RATIO:
        p += 2 * h * dv + ratio * dv + dv
    return float(p)


def hyper_connection_params(m: "ModelSpec") -> float:
    """mHC weights of one layer (attention and MLP sublayers: mixing projection, bias, three scales)."""
    if m.hc_mult <= 1:
        return 0.0
    mix = (2 + m.hc_mult) * m.hc_mult
    return 2.0 * (m.hc_mult * m.hidden * mix + mix + 3)


def hyper_connection_head_params(m: "ModelSpec") -> float:
    """The output head's learned contraction of the streams into one (hc_head_fn, base, scale)."""
    return float(m.hc_mult * m.hidden * m.hc_mult + m.hc_mult + 1) if m.hc_mult > 1 else 0.0


def residual_elements(m: "ModelSpec") -> float:
    """Elements a block's residual connection reads and writes per token, forward: a plain add reads 2 h and
    writes h; mHC's pre-mix reads the hc_mult streams and writes the block input (hc h + h), its post-mix reads
    the block output and the streams and writes the streams (h + 2 hc h) (fused kernels, one pass each)."""
    if m.hc_mult <= 1:
        return 3.0 * m.hidden
    return (3.0 * m.hc_mult + 2.0) * m.hidden


def dsv4_heads_bad(m: "ModelSpec", tp, cp) -> np.ndarray:
    """TP must split the output projection's groups whole (and so the heads); CP is left out: Megatron-Core's
    DSv4 CP partitions contiguously and exchanges the compressors' boundary states, which is not modelled."""
    if m.attention != "dsv4":
        return np.zeros(np.shape(tp), dtype=bool)
    return (m.o_groups % tp != 0) | (cp != 1)


def check(m: "ModelSpec") -> tuple[str, object, str] | None:
    """(field, value, what is allowed) of the first inconsistent DeepSeek-V4 field, or None."""
    if len(m.csa_pattern) != m.num_layers or set(m.csa_pattern) - set(KINDS):
        return "csa_pattern", m.csa_pattern, f"one of {'/'.join(KINDS)} per layer ({m.num_layers} layers)"
    for name in ("head_dim", "qk_rope_head_dim", "q_lora_rank", "o_lora_rank", "o_groups", "csa_window"):
        if getattr(m, name) <= 0:
            return name, getattr(m, name), "> 0 for DeepSeek-V4's hybrid attention"
    if m.num_heads % m.o_groups:
        return "o_groups", m.o_groups, f"must divide heads ({m.num_heads})"
    if m.qk_rope_head_dim >= m.head_dim:
        return "qk_rope_head_dim", m.qk_rope_head_dim, f"below head_dim ({m.head_dim})"
    if "C" in m.csa_pattern:
        for name in ("index_heads", "index_head_dim", "index_topk"):
            if getattr(m, name) <= 0:
                return name, getattr(m, name), "> 0: compressed sparse (C) layers have an indexer"
    return None
