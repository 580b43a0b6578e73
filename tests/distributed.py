"""Run a function on N forked gloo ranks inside a test (fork start: ~0.1 s per case).

`run_ranks(fn, world_size)` calls `fn(backend, *args)` on every rank with a TorchBackend("gloo") joined through a
fresh file store (file://, a new temporary directory per launch), and returns the ranks' return values in rank order.
A rank that raises fails the test with its traceback; a rank that hangs is killed after `timeout_s`.

Not a TCP port: CI at a55c80b and ef01434 saw launches whose ranks never all joined ("3/6 clients joined", every
rank waiting its whole join timeout, then passing on rerun). The cause is not established: free_port() hands out a port
that is free only when asked, so another test's process can take it before rank 0 listens (a second TCPStore server on
a bound port is refused, EADDRINUSE, so it is not two servers sharing one). A file store's path is this launch's
alone, which takes ports out of it. A launch whose ranks still never all join is started once more (a fresh store),
with a note on stderr; what a test asserts is what its ranks compute once joined, and a rendezvous that fails twice
fails the test.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import socket
import sys
import tempfile
import traceback
from typing import Any, Callable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


JOIN_TIMEOUT_S = 20.0   # a healthy join takes seconds, loaded; a stuck one is retried sooner
_JOIN_FAILED = "RunFailed: rendezvous"   # how commbench.comm.rendezvous.join_within's failures read
_HUNG = "timed out after"


def _rank_main(rank: int, world_size: int, store: str, fn: Callable, args: tuple, queue, timeout_s: float) -> None:
    """`store`: a file store's path, or tcp:PORT for env:// on that port."""
    from commbench.comm.torch_backend import TorchBackend

    if store.startswith("tcp:"):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=store[len("tcp:"):])
    try:
        backend = TorchBackend("gloo", rank=rank, world_size=world_size, local_rank=rank, timeout_s=timeout_s,
                               init_method=None if store.startswith("tcp:") else f"file://{store}",
                               join_timeout_s=min(timeout_s, JOIN_TIMEOUT_S))
        try:
            queue.put((rank, True, fn(backend, *args)))
        finally:
            backend.shutdown()
    except BaseException:  # noqa: BLE001 - report everything to the parent
        queue.put((rank, False, traceback.format_exc()))


def run_ranks(fn: Callable[..., Any], world_size: int, *, timeout_s: float = 60.0, args: tuple = (),
              tcp: bool = False) -> list[Any]:
    """`tcp`: join by env:// on a free port (MASTER_ADDR/MASTER_PORT set in the ranks), for a test of what shares that
    port; else a file store."""
    results, errors = _launch(fn, world_size, timeout_s, args, tcp)
    joins_failed = [e for e in errors if _JOIN_FAILED in e]
    if joins_failed and not results and all(e in joins_failed or e.startswith(_HUNG) for e in errors):
        print(f"note: {world_size} gloo ranks did not all join; starting them once more on a fresh store",
              file=sys.stderr)
        results, errors = _launch(fn, world_size, timeout_s, args, tcp)
    if errors:
        raise AssertionError("\n".join(errors))
    return [results[r] for r in range(world_size)]


def _launch(fn: Callable[..., Any], world_size: int, timeout_s: float, args: tuple,
            tcp: bool) -> tuple[dict[int, Any], list[str]]:
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    store = tempfile.mkdtemp(prefix="commbench-ranks-")
    where = f"tcp:{free_port()}" if tcp else os.path.join(store, "store")
    procs = [ctx.Process(target=_rank_main, args=(r, world_size, where, fn, args, queue, timeout_s), daemon=True)
             for r in range(world_size)]
    for proc in procs:
        proc.start()
    results: dict[int, Any] = {}
    errors: list[str] = []
    try:
        for _ in range(world_size):
            rank, ok, value = queue.get(timeout=timeout_s)
            if ok:
                results[rank] = value
            else:
                errors.append(f"rank {rank} raised:\n{value}")
    except Exception as exc:  # queue.Empty: a rank hung
        errors.append(f"{_HUNG} {timeout_s} s waiting for ranks ({type(exc).__name__})")
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
        shutil.rmtree(store, ignore_errors=True)
    return results, errors
