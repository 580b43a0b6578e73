"""Who sends how many token rows to whom, and how many bytes that is (pure numpy).

Dispatch modes:
- `per-expert`: one row per (token, selected expert), as Megatron-LM's all-to-all token dispatcher
  sends (a token with two experts on one rank crosses the link twice);
- `per-rank`: one row per (token, destination rank) however many of that rank's experts the token
  chose, as DeepEP sends (arXiv:2412.19437 §3.2.2; DeepEP `get_dispatch_layout`). The combine
  returns the same rows, reduced on the expert rank.

Bytes per row (DeepEP's accounting): bf16 = 2 B per channel; fp8 = 1 B per channel plus one fp32
scale per 128 channels (DeepEP's per-token, per-128-channel block scales); fp32 = 4 B per channel.
With an expert capacity (commbench.moe.capacity) a slot the capacity dropped holds expert id -1 and
moves nothing; padding copies (`pad`, per-expert only) are rows like any other.

Byte counts include the rank's own chunk (the local copy all_to_all_single also makes) unless named
`remote_`. Imbalance = max / mean (1.0 is perfectly even).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commbench.errors import invalid
from commbench.moe.payload import Rows

DISPATCH_MODES = ("per-expert", "per-rank")
DISPATCH_DTYPES = ("bf16", "fp8")
COMBINE_DTYPES = ("bf16", "fp32")
FP8_SCALE_BLOCK_CHANNELS = 128
FP8_SCALE_BYTES = 4


def bytes_per_token(hidden: int, dtype: str) -> int:
    """Bytes one token row occupies on the wire."""
    if dtype == "bf16":
        return 2 * hidden
    if dtype == "fp32":
        return 4 * hidden
    if dtype == "fp8":
        return hidden + FP8_SCALE_BYTES * -(-hidden // FP8_SCALE_BLOCK_CHANNELS)
    raise invalid("dtype", dtype, f"allowed: {', '.join(DISPATCH_DTYPES + COMBINE_DTYPES[1:])}")


def expert_load(expert_ids: np.ndarray, num_experts: int, pad: Rows | None = None) -> np.ndarray:
    """Token copies each expert receives (dropped slots, id -1, excluded; padding copies included), shape (num_experts,)."""
    ids = expert_ids.ravel()
    ids = ids[ids >= 0]
    if pad is not None:
        ids = np.concatenate([ids, pad.tag])
    return np.bincount(ids, minlength=num_experts).astype(np.int64)


def tokens_per_expert(expert_ids: np.ndarray, num_experts: int, pad: Rows | None = None) -> np.ndarray:
    """counts[s, e]: token copies rank s sends expert e (what the count exchange carries), shape (n, E)."""
    num_ranks = expert_ids.shape[0]
    src = np.broadcast_to(np.arange(num_ranks)[:, None, None], expert_ids.shape).ravel()
    ids = expert_ids.ravel()
    valid = ids >= 0
    key = src[valid] * num_experts + ids[valid]
    if pad is not None:
        key = np.concatenate([key, pad.src * num_experts + pad.tag])
    return np.bincount(key, minlength=num_ranks * num_experts).reshape(num_ranks, num_experts).astype(np.int64)


def destination_ranks(expert_ids: np.ndarray, num_experts: int, num_ranks: int) -> np.ndarray:
    """The rank that holds each selected expert (experts are dealt to ranks in contiguous blocks)."""
    return expert_ids // (num_experts // num_ranks)


def split_rows(expert_ids: np.ndarray, num_experts: int, mode: str, pad: Rows | None = None) -> np.ndarray:
    """rows[s, d]: rows rank s sends rank d in dispatch (and d returns to s in combine), shape (n, n).

    `expert_ids` has shape (num_ranks, tokens_per_rank, top_k); -1 = a slot the capacity dropped.
    `pad`: padding copies (per-expert only)."""
    num_ranks = expert_ids.shape[0]
    dest = destination_ranks(expert_ids, num_experts, num_ranks)
    src = np.broadcast_to(np.arange(num_ranks)[:, None, None], dest.shape)
    if mode == "per-expert":
        keep = expert_ids >= 0
    elif mode == "per-rank":
        assert pad is None, "padding is refused with per-rank dispatch"
        ordered = np.sort(np.where(expert_ids >= 0, dest, num_ranks), axis=2)  # dropped slots sort last
        keep = ordered < num_ranks
        keep[:, :, 1:] &= ordered[:, :, 1:] != ordered[:, :, :-1]
        dest = ordered
    else:
        raise invalid("--dispatch-mode", mode, f"allowed: {', '.join(DISPATCH_MODES)}")
    flat = (src * num_ranks + dest)[keep]
    if pad is not None:
        flat = np.concatenate([flat, pad.src * num_ranks + pad.dst])
    return np.bincount(flat, minlength=num_ranks * num_ranks).reshape(num_ranks, num_ranks).astype(np.int64)


def imbalance(load: np.ndarray) -> float:
    mean = float(load.mean())
    return float(load.max()) / mean if mean > 0 else 1.0


@dataclass(frozen=True, kw_only=True)
class MoeTraffic:
    """One MoE layer's exchange: the row matrix and bytes per row of each direction."""

    rows: np.ndarray  # (n, n): dispatch rows from s to d
    dispatch_row_bytes: int
    combine_row_bytes: int
    expert_load: np.ndarray  # (num_experts,) token copies per expert

    def __post_init__(self) -> None:
        assert self.rows.ndim == 2 and self.rows.shape[0] == self.rows.shape[1]

    @property
    def num_ranks(self) -> int:
        return self.rows.shape[0]

    def dispatch_bytes_sent(self) -> np.ndarray:
        return self.rows.sum(axis=1) * self.dispatch_row_bytes

    def dispatch_bytes_received(self) -> np.ndarray:
        return self.rows.sum(axis=0) * self.dispatch_row_bytes

    def busiest_dispatch_bytes(self) -> int:
        """max over ranks of max(bytes sent, bytes received) in dispatch, own chunk included."""
        return int(max(self.dispatch_bytes_sent().max(), self.dispatch_bytes_received().max()))

    def busiest_remote_bytes(self, row_bytes: int) -> int:
        """max over ranks of the bytes that leave or enter the rank (own chunk excluded)."""
        remote = self.rows - np.diag(np.diag(self.rows))
        return int(max(remote.sum(axis=1).max(), remote.sum(axis=0).max())) * row_bytes

    def busiest_combine_bytes(self) -> int:
        return int(max(self.rows.sum(axis=1).max(), self.rows.sum(axis=0).max())) * self.combine_row_bytes

    def busiest_logical_bytes(self) -> int:
        """Per-(token, expert) bytes the busiest rank receives, own chunk included, before per-rank dedup."""
        num_experts = self.expert_load.size
        per_rank = self.expert_load.reshape(self.num_ranks, num_experts // self.num_ranks).sum(axis=1)
        return int(per_rank.max()) * self.dispatch_row_bytes

    def metrics(self) -> dict[str, float | int | list[int]]:
        """Per-point traffic figures recorded in Measurement.metrics (tokens are rows of the mode)."""
        sent, received = self.rows.sum(axis=1), self.rows.sum(axis=0)
        remote = self.rows - np.diag(np.diag(self.rows))
        return {
            "tokens_sent_max": int(sent.max()), "tokens_sent_mean": float(sent.mean()),
            "tokens_received_max": int(received.max()), "tokens_received_mean": float(received.mean()),
            "tokens_received_per_rank": [int(v) for v in received],
            "bytes_sent_max": int(sent.max()) * self.dispatch_row_bytes,
            "bytes_sent_mean": float(sent.mean()) * self.dispatch_row_bytes,
            "bytes_received_max": int(received.max()) * self.dispatch_row_bytes,
            "bytes_received_mean": float(received.mean()) * self.dispatch_row_bytes,
            "remote_bytes_sent_max": int(remote.sum(axis=1).max()) * self.dispatch_row_bytes,
            "remote_bytes_received_max": int(remote.sum(axis=0).max()) * self.dispatch_row_bytes,
            "local_fraction": float(np.trace(self.rows) / max(1, self.rows.sum())),
            "combine_bytes_max": self.busiest_combine_bytes(),
            "dispatch_bytes_per_token": self.dispatch_row_bytes,
            "combine_bytes_per_token": self.combine_row_bytes,
            "imbalance_rank": imbalance(received),
            "imbalance_expert": imbalance(self.expert_load),
            "max_expert_tokens": int(self.expert_load.max()),
        }


def moe_traffic(expert_ids: np.ndarray, *, num_experts: int, hidden: int, mode: str, dispatch_dtype: str,
                combine_dtype: str, pad: Rows | None = None) -> MoeTraffic:
    return MoeTraffic(rows=split_rows(expert_ids, num_experts, mode, pad),
                      dispatch_row_bytes=bytes_per_token(hidden, dispatch_dtype),
                      combine_row_bytes=bytes_per_token(hidden, combine_dtype),
                      expert_load=expert_load(expert_ids, num_experts, pad))
