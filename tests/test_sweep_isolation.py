"""The sweep's measurement world on gloo ranks: no rank leaves a new world while a peer is still making it.

A resumed sweep with nothing pending failed once beside two CPU hogs in dist.new_group: "Gloo connectFullMesh failed
... Connection closed by peer", rank 1 done and gone while rank 0 still connected the new group's mesh (torch 2.13's
new_group has no barrier after it unless TORCH_DIST_INIT_BARRIER=1). Here rank 0 stays in new_group a second longer
than rank 1 (a slow connect, made long), and rank 1 looks, once IsolatedBackend or rebuild returns, whether rank 0
is done with it."""

from __future__ import annotations

import time

from commbench.sweep.isolation import IsolatedBackend
from tests.distributed import run_ranks

SLOW_RANK = 0
SLOW_CONNECT_S = 1.0


def _peer_done_when_mine_returns(backend) -> list[bool]:
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _get_default_store

    store = _get_default_store()
    made = {"count": 0}
    real_new_group = dist.new_group

    def new_group(*args, **kwargs):
        group = real_new_group(*args, **kwargs)
        made["count"] += 1
        if backend.rank == SLOW_RANK:
            time.sleep(SLOW_CONNECT_S)
            store.set(f"made/{made['count']}", "1")
        return group

    dist.new_group = new_group
    try:
        iso = IsolatedBackend(backend, timeout_s=30.0)
        seen = [store.check([f"made/{made['count']}"])]
        iso.rebuild()
        seen.append(store.check([f"made/{made['count']}"]))
        iso.world.barrier()  # nobody leaves before the last look
    finally:
        dist.new_group = real_new_group
    return seen


def test_no_rank_leaves_a_new_measurement_world_before_every_rank_has_made_it():
    seen = run_ranks(_peer_done_when_mine_returns, 2, timeout_s=60.0)
    assert seen[1 - SLOW_RANK] == [True, True], "new world, rebuilt world"
