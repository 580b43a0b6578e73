"""Joining a gloo job returns on a rank only once every rank has joined.

The README's test run beside CPU hogs failed once in
test_bench_pow2_on_three_ranks_notes_the_left_out_size_in_its_header: "rendezvous at env:// as rank 0 of 3
failed: Gloo connectFullMesh ... Connection closed by peer". gloo's full-mesh
connect returns on a rank once its own pairs are up and torch 2.13 adds no barrier after init_process_group (unless
TORCH_DIST_INIT_BARRIER=1), so a peer with nothing to exchange left at once and closed sockets a starved rank was still
connecting on (gloo tcp/pair.cc: EOF on a pair read while the rank waits for its pairs). Here the slow rank stays in
init_process_group a second longer than its peers (a slow connect, made long), and each peer looks, once its own join
returns, whether the slow rank is done joining (as tests/test_sweep_isolation.py does for new_group)."""

from __future__ import annotations

import time

import torch.distributed as dist
from torch.distributed.distributed_c10d import _get_default_store

from tests.distributed import run_ranks

SLOW_RANK = 0
SLOW_JOIN_S = 1.0
SLOW_DONE_KEY = "test/slow-rank-joined"


def _slow_rank_done_when_my_join_returns(backend) -> bool:
    return _get_default_store().check([SLOW_DONE_KEY])


def test_no_rank_leaves_the_join_before_a_slow_rank_has_joined(monkeypatch):
    real_init = dist.init_process_group

    def init_slow_on_one_rank(*args, **kwargs):
        real_init(*args, **kwargs)
        if dist.get_rank() == SLOW_RANK:
            time.sleep(SLOW_JOIN_S)
            _get_default_store().set(SLOW_DONE_KEY, "1")

    monkeypatch.setattr(dist, "init_process_group", init_slow_on_one_rank)   # forked ranks inherit it
    # was [True, False, False]: the peers were out of the join (and free to leave) while rank 0 still joined
    assert run_ranks(_slow_rank_done_when_my_join_returns, 3, timeout_s=60.0) == [True, True, True]
