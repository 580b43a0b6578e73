"""Sharing an NCCL unique id between ranks through the launcher's rendezvous, as raw bytes.

ncclCommInitRank needs the same 128-byte ncclUniqueId on every rank of a communicator (NCCL user
guide, "Creating a communicator"); one rank makes it with ncclGetUniqueId and the others must get
it out of band. We use torch's TCPStore on MASTER_ADDR/MASTER_PORT (the store torch's env://
rendezvous uses; `multi_tenant=True` shares one server when torch.distributed runs in the same
process) under a key prefix, and move only bytes: nothing is unpickled.

CuPy passes the id as a tuple of 128 C `char` values (cupy_backends/cuda/libs/nccl.pyx,
get_unique_id / NcclCommunicator.__init__). `char` is signed on x86-64 and unsigned on
aarch64/ppc64le/s390x Linux, so the tuple is decoded into the local platform's range.
"""

from __future__ import annotations

import datetime
import itertools
import os
import platform
from typing import Callable, Sequence

from commbench.errors import CommbenchError, first_line

UNIQUE_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES in nccl.h
KEY_PREFIX = "commbench/cupy-nccl"
_UNSIGNED_CHAR_MACHINES = ("aarch64", "arm64", "armv7l", "ppc64le", "ppc64", "s390x")
_instances = itertools.count()  # every rank creates backends in the same order, so indices agree


def char_is_signed(machine: str | None = None) -> bool:
    """Whether C `char` is signed on this platform's Linux ABI."""
    return (machine or platform.machine()).lower() not in _UNSIGNED_CHAR_MACHINES


def encode_unique_id(unique_id: Sequence[int]) -> bytes:
    """CuPy's tuple of 128 char values (signed or unsigned) -> 128 raw bytes."""
    if len(unique_id) != UNIQUE_ID_BYTES:
        raise ValueError(f"an NCCL unique id has {UNIQUE_ID_BYTES} bytes, got {len(unique_id)}")
    if any(not -128 <= v <= 255 for v in unique_id):
        raise ValueError("an NCCL unique id holds char values in -128..255")
    return bytes(v & 0xFF for v in unique_id)


def decode_unique_id(raw: bytes, *, signed: bool | None = None) -> tuple[int, ...]:
    """128 raw bytes -> the tuple CuPy's NcclCommunicator takes (this platform's char range)."""
    if len(raw) != UNIQUE_ID_BYTES:
        raise CommbenchError(f"the NCCL unique id read from the rendezvous has {len(raw)} bytes, "
                             f"expected {UNIQUE_ID_BYTES}: another job may be using this MASTER_PORT")
    signed = char_is_signed() if signed is None else signed
    return tuple(b - 256 if signed and b > 127 else b for b in raw)


def share_unique_id(store, key: str, *, is_creator: bool, make_id: Callable[[], Sequence[int]],
                    timeout_s: float) -> bytes:
    """The creator makes an id and publishes it under `key`; every other rank waits for it.
    Returns the id's raw bytes (the same on every rank)."""
    if is_creator:
        raw = encode_unique_id(make_id())
        store.set(key, raw)
        return raw
    try:
        store.wait([key], datetime.timedelta(seconds=timeout_s))
    except RuntimeError as exc:  # torch raises DistStoreError (a RuntimeError) on timeout
        reason = first_line(exc)
        raise CommbenchError(f"no NCCL unique id under {key!r} after {timeout_s:g} s "
                             f"(did every rank start with --backend cupy-nccl?): {reason}") from None
    return bytes(store.get(key))


def open_store(*, master_addr: str, master_port: int, rank: int, world_size: int, timeout_s: float,
               rendezvous: str | None = None, join_timeout_s: float | None = None, join_setting: str = "--timeout"):
    """A TCPStore client (rank 0 also serves it, unless torchrun's agent does) under this
    backend instance's key prefix, this rank checked in on it first as torch's backends are
    (rank_checkin.checked_in_launch_store: a rank started twice, or another launch's ranks, stop every
    rank in one line; `join_timeout_s`, default `timeout_s`, is how long it waits for every rank);
    under commbench's local launcher, a FileStore beside the launch's own (`rendezvous` =
    file://...), so nothing listens on the network."""
    import torch.distributed as dist

    if rendezvous and rendezvous.startswith("file://"):
        store = dist.FileStore(rendezvous[len("file://"):] + "-cupy", -1)
        store.set_timeout(datetime.timedelta(seconds=timeout_s))
        return dist.PrefixStore(f"{KEY_PREFIX}/{next(_instances)}", store)

    from commbench.comm.rank_checkin import checked_in_launch_store

    join_s = timeout_s if join_timeout_s is None else join_timeout_s
    where = f"at tcp://{master_addr}:{master_port} as rank {rank} of {world_size}"
    try:
        store = checked_in_launch_store(master_addr=master_addr, master_port=master_port, rank=rank,
                                        world_size=world_size, join_s=join_s, timeout_s=timeout_s, where=where,
                                        setting=join_setting)
    except CommbenchError:   # check_in's own lines (a rank started twice, launches met, ranks missing)
        raise
    except (RuntimeError, ValueError) as exc:
        reason = first_line(exc)
        raise CommbenchError(f"cannot reach the rendezvous store at {master_addr}:{master_port} "
                             f"(MASTER_ADDR/MASTER_PORT): {reason}") from None
    return dist.PrefixStore(f"{KEY_PREFIX}/{next(_instances)}", store)
