"""Expert capacity: Megatron-Core's drop-and-pad MoE, applied to a routing (pure numpy).

Source followed: megatron-core 0.16.1 (pip), transformer/moe/
- moe_utils.py `get_capacity`: capacity = ceil((num_tokens / num_experts) * capacity_factor), and
  `apply_router_token_dropping` calls it with num_tokens = the router's tokens x moe_router_topk, so per
  expert and per source rank: capacity = ceil((T * k / E) * C), T = the rank's tokens (its router input);
- router.py (`TopKRouter.routing`): with --moe-expert-capacity-factor the router's routing map goes through
  `apply_router_token_dropping` on every rank alone: each expert keeps at most `capacity` of that rank's
  tokens (the rest are dropped: not dispatched); with --moe-pad-expert-input-to-capacity the map becomes
  the capacity mask itself, so each expert receives exactly `capacity` of every rank's tokens (the routed
  ones it kept, then tokens not routed to it, with probability 0) - unless capacity > T, where the mask
  keeps every token (below);
- token_dispatcher.py (`MoEAlltoAllTokenDispatcher.preprocess`): with padding (`drop_and_pad`) the
  all-to-all sizes are fixed (capacity x local experts per rank pair, no count gather and no host sync);
  without it the counts after dropping are gathered and the splits vary, as dropless;
- transformer_config.py: padding needs a capacity factor ("moe_expert_capacity_factor must be set to use
  moe_pad_expert_input_to_capacity"); the flex dispatcher with the DeepEP backend refuses padding ("does not
  support moe_pad_expert_input_to_capacity"), while DeepEP with a capacity factor alone dispatches the kept
  slots (token_dispatcher.py `_DeepepManager.setup_metadata`: dropped slots' indices masked to -1).

Which tokens drop: `--moe-token-drop-policy position` keeps each expert's earliest tokens, `probs` the
highest-probability ones. commbench's routing models carry no probabilities, so the kept tokens are the
earliest (position). Per-expert dispatch moves min(routed, capacity) rows per (rank, expert) under either
policy; per-rank (DeepEP) rows, one per (token, destination rank) with a kept slot, can differ under probs.
The padding tokens are the rank's lowest-index tokens not routed to the expert (Megatron's pick among
probability-0 ties is the top-k kernel's); their bytes are the same whichever they are.

Megatron pads with capacity > T (k x C > E) only where its capacity mask keeps all T tokens while the
dispatcher sizes every buffer at capacity (moe_utils.py `permute` then views T rows as `capacity`), so that
combination is refused (MoeParams).
"""

from __future__ import annotations

import math

import numpy as np

from commbench.moe.payload import Rows

DROP_POLICY = "position"  # the kept tokens are each expert's earliest (see the module docstring)


def expert_capacity(*, tokens_per_rank: int, num_experts: int, top_k: int, capacity_factor: float) -> int:
    """Tokens each expert takes from one rank: megatron-core 0.16.1 moe_utils.py get_capacity(num_tokens=T*k,
    num_experts=E, capacity_factor=C) = ceil((T*k / E) * C), the same float expression."""
    return math.ceil(((tokens_per_rank * top_k) / num_experts) * capacity_factor)


def drop_over_capacity(expert_ids: np.ndarray, num_experts: int, capacity: int) -> np.ndarray:
    """`expert_ids` (ranks, tokens, top_k) with each slot beyond its expert's capacity on its rank set to -1:
    per (rank, expert) the earliest `capacity` tokens stay (Megatron's `position` drop policy)."""
    num_ranks, num_tokens, top_k = expert_ids.shape
    flat = expert_ids.reshape(num_ranks, -1)
    key = (np.arange(num_ranks, dtype=np.int64)[:, None] * num_experts + flat).ravel()  # slots in token order
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    group_start = np.repeat(starts, np.diff(np.r_[starts, ordered.size]))
    keep = np.empty(key.size, dtype=bool)
    keep[order] = np.arange(ordered.size) - group_start < capacity
    return np.where(keep, flat.ravel(), -1).reshape(expert_ids.shape)


def padding_rows(kept_ids: np.ndarray, num_experts: int, capacity: int) -> Rows:
    """The padding copies that fill every (rank, expert) to `capacity`: per pair the rank's lowest-index tokens
    not routed to the expert (Rows with tag = expert id, dst = the expert's rank; in (src, expert, token) order).
    `kept_ids` is drop_over_capacity's output; capacity must not exceed the tokens per rank."""
    num_ranks, num_tokens, _ = kept_ids.shape
    assert capacity <= num_tokens
    experts_per_rank = num_experts // num_ranks
    routed = _kept_keys(kept_ids, num_experts)  # pairs short of capacity dropped nothing: kept = routed there
    kept = np.bincount(routed // num_tokens, minlength=num_ranks * num_experts)
    return _fill(kept, num_tokens, num_experts, experts_per_rank, capacity, routed)


def _kept_keys(kept_ids: np.ndarray, num_experts: int) -> np.ndarray:
    """Sorted (rank * E + expert) * T + token of every kept copy."""
    num_ranks, num_tokens, top_k = kept_ids.shape
    src = np.repeat(np.arange(num_ranks, dtype=np.int64), num_tokens * top_k)
    token = np.tile(np.repeat(np.arange(num_tokens, dtype=np.int64), top_k), num_ranks)
    ids = kept_ids.ravel()
    valid = ids >= 0
    return np.sort((src[valid] * num_experts + ids[valid]) * num_tokens + token[valid])


def _fill(kept: np.ndarray, num_tokens: int, num_experts: int, experts_per_rank: int,
          capacity: int, routed: np.ndarray) -> Rows:
    """For every pair g short of capacity, its first (capacity - kept[g]) tokens not in `routed` (vectorised:
    the j-th token absent from a sorted set R is j + #{i : R[i] - i <= j})."""
    need = capacity - kept  # >= 0: a pair holds at most `capacity` after dropping
    pairs = np.repeat(np.arange(kept.size, dtype=np.int64), need)
    if pairs.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Rows(src=empty, dst=empty, token=empty, tag=empty)
    j = np.arange(pairs.size, dtype=np.int64) - np.repeat(np.cumsum(need) - need, need)  # rank within its pair
    group = routed // num_tokens
    offset = np.arange(routed.size, dtype=np.int64) - np.searchsorted(group, group, side="left")
    shifted = group * (2 * num_tokens) + (routed % num_tokens - offset)  # R[i] - i per pair, kept apart by pair
    before = np.searchsorted(shifted, pairs * (2 * num_tokens) + j, side="right") - np.searchsorted(
        group, pairs, side="left")
    token = j + before
    src, expert = pairs // num_experts, pairs % num_experts
    return Rows(src=src, dst=expert // experts_per_rank, token=token, tag=expert)
