"""Send/recv schedules for all-to-all over raw NCCL (CuPy's communicator has no all-to-all).

NCCL implements all-to-all as point-to-point calls inside one ncclGroupStart/ncclGroupEnd
(NCCL user guide, "Point-to-point communication": all-to-all example; nccl-tests
src/alltoall.cu does the same). Inside a group NCCL posts every call together, so the order
cannot deadlock; we still emit the classic pairwise-exchange order (at step k, send to rank+k
and receive from rank-k; Thakur, Rabenseifner & Gropp, "Optimization of Collective
Communication Operations in MPICH", IJHPCA 2005) so that:
- every step's sends form a permutation of the ranks (no peer is hit by two senders at once), and
- the schedule stays deadlock-free even when executed step by step outside a group, because
  rank r's send at step k is matched by its peer's receive at the same step.

Counts and offsets are in elements. Zero-count transfers are dropped on both sides (the split
matrix is consistent, so the sender and receiver drop the same pair).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Sequence

from commbench.errors import CommbenchError


@dataclass(frozen=True, kw_only=True)
class Transfer:
    """One ncclSend or ncclRecv of this rank: `count` elements at `offset` of its send (or
    receive) buffer, to (or from) group rank `peer`, in pairwise-exchange `step`."""

    step: int
    kind: str  # "send" or "recv"
    peer: int
    offset: int
    count: int

    def __post_init__(self) -> None:
        assert self.kind in ("send", "recv"), self.kind
        assert self.count > 0 and self.offset >= 0, (self.count, self.offset)


def even_splits(num_elements: int, num_ranks: int, what: str) -> list[int]:
    """Equal chunks: all-to-all without split sizes needs a buffer divisible by the group size."""
    if num_elements % num_ranks:
        raise CommbenchError(f"all_to_all {what} buffer has {num_elements} elements, not divisible by "
                             f"the group size {num_ranks}: pass split sizes")
    return [num_elements // num_ranks] * num_ranks


def offsets_of(splits: Sequence[int]) -> list[int]:
    """Exclusive prefix sums: where chunk i starts."""
    return [0, *accumulate(splits)][:-1]


def _check_splits(splits: Sequence[int], num_ranks: int, buffer_elements: int, what: str) -> None:
    if len(splits) != num_ranks:
        raise CommbenchError(f"all_to_all {what} splits have {len(splits)} entries, expected the group size {num_ranks}")
    if any(s < 0 for s in splits):
        raise CommbenchError(f"all_to_all {what} splits must be >= 0, got {list(splits)}")
    if sum(splits) > buffer_elements:
        raise CommbenchError(f"all_to_all {what} splits sum to {sum(splits)} elements, "
                             f"more than the {what} buffer's {buffer_elements}")


def all_to_all_schedule(rank: int, num_ranks: int, in_splits: Sequence[int], out_splits: Sequence[int],
                        *, in_elements: int | None = None, out_elements: int | None = None) -> tuple[Transfer, ...]:
    """This rank's transfers for an all-to-all(v): chunk p of the input (in_splits[p] elements)
    goes to rank p; chunk s of the output (out_splits[s] elements) comes from rank s.

    Per step k = 0..n-1: the send to (rank + k) % n, then the receive from (rank - k) % n;
    step 0 is the rank's own chunk (NCCL allows send/recv to self within a group).
    """
    assert 0 <= rank < num_ranks, (rank, num_ranks)
    _check_splits(in_splits, num_ranks, sum(in_splits) if in_elements is None else in_elements, "input")
    _check_splits(out_splits, num_ranks, sum(out_splits) if out_elements is None else out_elements, "output")
    in_offsets, out_offsets = offsets_of(in_splits), offsets_of(out_splits)
    transfers = []
    for step in range(num_ranks):
        dst, src = (rank + step) % num_ranks, (rank - step) % num_ranks
        if in_splits[dst]:
            transfers.append(Transfer(step=step, kind="send", peer=dst, offset=in_offsets[dst], count=in_splits[dst]))
        if out_splits[src]:
            transfers.append(Transfer(step=step, kind="recv", peer=src, offset=out_offsets[src], count=out_splits[src]))
    return tuple(transfers)


def check_split_matrix(send_counts: Sequence[Sequence[int]]) -> None:
    """`send_counts[s][p]` = elements rank s sends to rank p; it must be square and non-negative.
    Rank p's out_splits are then column p (what `transpose_splits` returns)."""
    n = len(send_counts)
    for s, row in enumerate(send_counts):
        if len(row) != n or any(c < 0 for c in row):
            raise CommbenchError(f"split matrix row {s} = {list(row)} is invalid: need {n} counts >= 0")


def transpose_splits(send_counts: Sequence[Sequence[int]], rank: int) -> list[int]:
    """Rank `rank`'s receive splits from the full send matrix."""
    return [row[rank] for row in send_counts]
