"""The all-to-all send/recv schedule: every element reaches the right peer exactly once, and the
order is the deadlock-free pairwise exchange (each send matched by a receive in the same step)."""

from __future__ import annotations

import numpy as np
import pytest

from commbench.comm.nccl_schedule import (
    Transfer, all_to_all_schedule, check_split_matrix, even_splits, offsets_of, transpose_splits,
)
from commbench.errors import CommbenchError


def run_schedules(send_counts: list[list[int]]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Execute every rank's schedule step by step, pairing each send with the peer's receive of the
    same step (blocking pairwise semantics, stricter than a NCCL group). Returns (received, expected)."""
    n = len(send_counts)
    # element e of rank s's send buffer is tagged s * 10**6 + e, so misplaced data is detectable
    send_bufs = [s * 10**6 + np.arange(sum(send_counts[s])) for s in range(n)]
    recv_bufs = [np.full(sum(transpose_splits(send_counts, r)), -1) for r in range(n)]
    schedules = [all_to_all_schedule(r, n, send_counts[r], transpose_splits(send_counts, r)) for r in range(n)]
    pending_recvs = {(r, t.step, t.peer): t for r in range(n) for t in schedules[r] if t.kind == "recv"}
    for step in range(n):
        sends = [(r, t) for r in range(n) for t in schedules[r] if t.kind == "send" and t.step == step]
        assert len({t.peer for _, t in sends}) == len(sends), f"step {step}: two ranks send to one peer"
        for src, send in sends:
            recv = pending_recvs.pop((send.peer, step, src))  # KeyError = unmatched send (deadlock)
            assert recv.count == send.count
            chunk = send_bufs[src][send.offset:send.offset + send.count]
            target = recv_bufs[send.peer][recv.offset:recv.offset + recv.count]
            assert (target == -1).all(), "an element was received twice"
            target[:] = chunk
    assert not pending_recvs, f"receives never matched: {sorted(pending_recvs)}"
    expected = []
    for r in range(n):
        parts = [send_bufs[s][offsets_of(send_counts[s])[r]:][:send_counts[s][r]] for s in range(n)]
        expected.append(np.concatenate(parts) if parts else np.array([], dtype=np.int64))
    return recv_bufs, expected


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_even_all_to_all_delivers_every_chunk_once(n):
    count = 5
    received, expected = run_schedules([[count] * n for _ in range(n)])
    for r in range(n):
        np.testing.assert_array_equal(received[r], expected[r])


@pytest.mark.parametrize("seed", range(6))
def test_uneven_all_to_all_with_zero_splits(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    counts = rng.integers(0, 7, size=(n, n))
    counts[rng.random((n, n)) < 0.3] = 0  # MoE routing leaves some expert pairs empty
    received, expected = run_schedules(counts.tolist())
    for r in range(n):
        np.testing.assert_array_equal(received[r], expected[r])


def test_pairwise_order_and_self_first():
    schedule = all_to_all_schedule(1, 4, [1, 2, 3, 4], [5, 6, 7, 8])
    assert [(t.step, t.kind, t.peer) for t in schedule] == [
        (0, "send", 1), (0, "recv", 1), (1, "send", 2), (1, "recv", 0),
        (2, "send", 3), (2, "recv", 3), (3, "send", 0), (3, "recv", 2)]
    assert schedule[2] == Transfer(step=1, kind="send", peer=2, offset=3, count=3)
    assert schedule[3] == Transfer(step=1, kind="recv", peer=0, offset=0, count=5)


def test_zero_count_transfers_are_dropped():
    schedule = all_to_all_schedule(0, 3, [0, 4, 0], [2, 0, 0])
    assert [(t.kind, t.peer, t.count) for t in schedule] == [("recv", 0, 2), ("send", 1, 4)]


def test_even_splits_and_errors():
    assert even_splits(12, 4, "input") == [3, 3, 3, 3]
    with pytest.raises(CommbenchError, match="not divisible by the group size 4"):
        even_splits(10, 4, "input")
    with pytest.raises(CommbenchError, match="expected the group size 3"):
        all_to_all_schedule(0, 3, [1, 1], [1, 1, 1])
    with pytest.raises(CommbenchError, match=">= 0"):
        all_to_all_schedule(0, 2, [1, -1], [1, 1])
    with pytest.raises(CommbenchError, match="more than the output buffer's 2"):
        all_to_all_schedule(0, 2, [1, 1], [2, 2], out_elements=2)
    with pytest.raises(CommbenchError, match="row 1"):
        check_split_matrix([[1, 2], [3]])
