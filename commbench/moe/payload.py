"""The rows one MoE all-to-all moves, in wire order, and a checkable encoding of each row.

Send order on every rank: by destination rank, then (per-expert) expert id, then token index, as
Megatron-LM's token permutation groups a rank's tokens by expert; per-rank rows go by destination
then token. all_to_all_single concatenates chunks by source rank, so a rank receives the rows of
the global table whose destination it is, in table order.

Every row starts with an 8-channel header of base-256 digits (source rank: 2, token index: 3,
tag: 3), exact in bf16 (integers <= 256), uint8 and fp32; the tag is the expert id (per-expert) or
the bit mask of the token's top-k slots that chose this rank (per-rank). The remaining channels hold
((7*src + 3*token + tag + c) mod 251) + 1, so a row moved to the wrong place or truncated differs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HEADER_CHANNELS = 8
MAX_TAG = 1 << 24


@dataclass(frozen=True, kw_only=True)
class Rows:
    """A table of rows (parallel int64 arrays), in wire order."""

    src: np.ndarray
    dst: np.ndarray
    token: np.ndarray
    tag: np.ndarray

    def where(self, keep: np.ndarray) -> "Rows":
        return Rows(src=self.src[keep], dst=self.dst[keep], token=self.token[keep], tag=self.tag[keep])

    def __len__(self) -> int:
        return int(self.src.size)


def _stable_order(key: np.ndarray) -> np.ndarray:
    """Stable argsort (a radix sort when the key fits 16 bits)."""
    if key.size and key.max() < (1 << 16):
        key = key.astype(np.uint16)
    return np.argsort(key, kind="stable")


def dispatch_rows(expert_ids: np.ndarray, num_experts: int, mode: str, pad: Rows | None = None) -> Rows:
    """Every dispatch row of the layer, sorted by (source, destination, tag order, token). A slot with expert
    id -1 (dropped by the expert capacity) moves nothing; `pad` (per-expert only): padding copies, which follow
    the expert's kept rows, as Megatron's drop-and-pad permutation puts routed tokens first."""
    num_ranks, num_tokens, top_k = expert_ids.shape
    experts_per_rank = num_experts // num_ranks
    src = np.repeat(np.arange(num_ranks, dtype=np.int64), num_tokens * top_k)
    token = np.tile(np.repeat(np.arange(num_tokens, dtype=np.int64), top_k), num_ranks)
    if mode == "per-expert":
        tag = expert_ids.ravel().astype(np.int64)
        valid = tag >= 0
        src, token, tag = src[valid], token[valid], tag[valid]
        is_pad = np.zeros(src.size, dtype=np.int64)
        if pad is not None and len(pad):
            src, token, tag = (np.concatenate([a, b]) for a, b in ((src, pad.src), (token, pad.token), (tag, pad.tag)))
            is_pad = np.r_[is_pad, np.ones(len(pad), dtype=np.int64)]
        order = _stable_order((src * num_experts + tag) * 2 + is_pad)  # rows are in (src, token) order already
        return Rows(src=src[order], dst=tag[order] // experts_per_rank, token=token[order], tag=tag[order])
    assert pad is None, "padding is refused with per-rank dispatch"
    routed_dest = np.where(expert_ids >= 0, expert_ids // experts_per_rank, num_ranks)  # dropped slots sort last
    slot_order = np.argsort(routed_dest, axis=2, kind="stable")
    dest = np.take_along_axis(routed_dest, slot_order, axis=2).reshape(-1, top_k)
    first = np.ones(dest.shape, dtype=bool)
    first[:, 1:] = dest[:, 1:] != dest[:, :-1]  # the first slot of each (token, destination) run
    group = np.cumsum(first.ravel()) - 1
    mask = np.bincount(group, weights=(1 << slot_order.ravel()).astype(np.float64)).astype(np.int64)
    mask = mask[(dest < num_ranks).ravel()[first.ravel()]]  # the runs of dropped slots move nothing
    keep = (first & (dest < num_ranks)).ravel()
    src, token, dst = src[keep], token[keep], dest.ravel()[keep].astype(np.int64)
    order = _stable_order(src * num_ranks + dst)
    return Rows(src=src[order], dst=dst[order], token=token[order], tag=mask[order])


def encode(rows: Rows, width: int) -> np.ndarray:
    """uint8 array (len(rows), width): the header digits, then the filler pattern."""
    assert width >= HEADER_CHANNELS
    out = np.empty((len(rows), width), dtype=np.uint8)
    for channel, (value, shift) in enumerate(((rows.src, 8), (rows.src, 0), (rows.token, 16), (rows.token, 8),
                                              (rows.token, 0), (rows.tag, 16), (rows.tag, 8), (rows.tag, 0))):
        out[:, channel] = (value >> shift) & 0xFF
    base = ((7 * rows.src + 3 * rows.token + rows.tag) % 251).astype(np.uint16)
    channels = (np.arange(HEADER_CHANNELS, width) % 251).astype(np.uint16)
    filler = np.add(base[:, None], channels[None, :], dtype=np.uint16)
    np.remainder(filler, 251, out=filler)
    out[:, HEADER_CHANNELS:] = filler + 1
    return out


def decode_header(values: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, token, tag) from received values (any numeric dtype, flat)."""
    header = values.reshape(-1, width)[:, :HEADER_CHANNELS].astype(np.int64)
    src = (header[:, 0] << 8) | header[:, 1]
    token = (header[:, 2] << 16) | (header[:, 3] << 8) | header[:, 4]
    tag = (header[:, 5] << 16) | (header[:, 6] << 8) | header[:, 7]
    return src, token, tag


def foreign_rows(values: np.ndarray, width: int, expert_ids: np.ndarray, rank: int, num_experts: int,
                 mode: str, pad: Rows | None = None) -> int:
    """Received rows that name no (source, token) of the layer, or experts not held by `rank`, or
    (per-rank) not exactly the token's slots routed to `rank`. Slots with id -1 (dropped by the capacity) are
    not routed; a (source, token, expert) of `pad` (padding copies) is."""
    if values.size == 0:
        return 0
    num_ranks, num_tokens, top_k = expert_ids.shape
    experts_per_rank = num_experts // num_ranks
    src, token, tag = decode_header(values, width)
    exists = (src >= 0) & (src < num_ranks) & (token >= 0) & (token < num_tokens)
    chosen = expert_ids[np.where(exists, src, 0), np.where(exists, token, 0)]  # (rows, top_k)
    if mode == "per-expert":
        routed = np.any(chosen == tag[:, None], axis=1)
        if pad is not None and len(pad):
            key = (src * num_tokens + token) * num_experts + tag
            routed |= np.isin(key, (pad.src * num_tokens + pad.token) * num_experts + pad.tag)
        ok = (tag // experts_per_rank == rank) & routed
    else:
        mine = (chosen // experts_per_rank == rank) @ (1 << np.arange(top_k))
        ok = (tag == mine) & (mine != 0)
    return int(np.count_nonzero(~(exists & ok)))
