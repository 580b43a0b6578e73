"""NCCL unique-id exchange through a real TCPStore between forked processes (no GPU needed)."""

from __future__ import annotations

import multiprocessing as mp
import os
import random

import pytest

from commbench.comm.nccl_id import (
    UNIQUE_ID_BYTES, char_is_signed, decode_unique_id, encode_unique_id, open_store, share_unique_id,
)
from commbench.errors import CommbenchError
from tests.distributed import free_port, run_ranks


def fake_unique_id(seed: int) -> tuple[int, ...]:
    """What cupy.cuda.nccl.get_unique_id returns on x86-64: 128 signed char values."""
    rng = random.Random(seed)
    return tuple(rng.randint(-128, 127) for _ in range(UNIQUE_ID_BYTES))


def test_encode_decode_roundtrip_in_both_char_conventions():
    signed_id = fake_unique_id(1)
    raw = encode_unique_id(signed_id)
    assert len(raw) == UNIQUE_ID_BYTES
    assert decode_unique_id(raw, signed=True) == signed_id
    unsigned_id = decode_unique_id(raw, signed=False)
    assert all(0 <= v <= 255 for v in unsigned_id) and encode_unique_id(unsigned_id) == raw
    assert any(v < 0 for v in signed_id), "the fixture must exercise negative chars"


def test_char_signedness_by_machine():
    assert char_is_signed("x86_64") and not char_is_signed("aarch64") and not char_is_signed("ppc64le")


def test_bad_ids_are_refused():
    with pytest.raises(ValueError, match="128 bytes"):
        encode_unique_id((1, 2, 3))
    with pytest.raises(ValueError, match="-128..255"):
        encode_unique_id((300,) * UNIQUE_ID_BYTES)
    with pytest.raises(CommbenchError, match="has 5 bytes, expected 128"):
        decode_unique_id(b"12345")


SEEDS = {"world": 11, "split0/group0": 12}


def _exchange(rank: int, world_size: int, port: int, queue) -> None:
    try:
        store = open_store(master_addr="127.0.0.1", master_port=port, rank=rank, world_size=world_size, timeout_s=20)
        results = []
        for key, creator in (("world", 0), ("split0/group0", world_size - 1)):
            def make_id(key=key):
                assert rank == creator, f"rank {rank} must not make the id for {key}"
                return fake_unique_id(SEEDS[key])
            results.append(share_unique_id(store, key, is_creator=rank == creator, make_id=make_id, timeout_s=20))
        queue.put((rank, results))
        # rank 0 hosts the store: it stays up until every other rank has read both ids (one 'done' for the first
        # reader let rank 0 exit while the last rank was still reading: a loaded CI host saw the recv fail)
        if rank == 0:
            store.wait([f"done{r}" for r in range(1, world_size)])
        else:
            store.set(f"done{rank}", b"1")
    except BaseException as exc:  # noqa: BLE001 - report to the parent
        queue.put((rank, repr(exc)))


def test_unique_id_reaches_every_forked_rank_through_tcpstore():
    world_size, port = 3, free_port()
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_exchange, args=(r, world_size, port, queue), daemon=True) for r in range(world_size)]
    for proc in procs:
        proc.start()
    try:
        results = dict(queue.get(timeout=30) for _ in range(world_size))
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
    for rank in range(world_size):
        assert isinstance(results[rank], list), results[rank]
    world_ids = {results[r][0] for r in range(world_size)}
    split_ids = {results[r][1] for r in range(world_size)}
    assert world_ids == {encode_unique_id(fake_unique_id(SEEDS["world"]))}
    assert len(split_ids) == 1 and split_ids != world_ids


def _share_beside_torch(backend) -> bytes:
    store = open_store(master_addr="127.0.0.1", master_port=int(os.environ["MASTER_PORT"]), rank=backend.rank,
                       world_size=backend.world_size, timeout_s=20)
    raw = share_unique_id(store, "world", is_creator=backend.rank == 0, make_id=lambda: fake_unique_id(7),
                          timeout_s=20)
    backend.world.barrier()  # rank 0's server outlives the reads
    return raw


def test_store_is_shared_with_a_torch_process_group_on_the_same_port():
    """--compare-backends runs torch.distributed and cupy-nccl in one launch: one store server."""
    results = run_ranks(_share_beside_torch, 2)
    assert results == [encode_unique_id(fake_unique_id(7))] * 2


def test_missing_id_times_out_with_one_clear_line():
    store = open_store(master_addr="127.0.0.1", master_port=free_port(), rank=0, world_size=1, timeout_s=5)
    with pytest.raises(CommbenchError, match=r"no NCCL unique id under 'world' after 0.3 s"):
        share_unique_id(store, "world", is_creator=False, make_id=lambda: fake_unique_id(0), timeout_s=0.3)


def test_unreachable_store_is_a_commbench_error():
    with pytest.raises(CommbenchError, match="cannot reach the rendezvous store"):
        open_store(master_addr="127.0.0.1", master_port=free_port(), rank=1, world_size=2, timeout_s=0.5)
