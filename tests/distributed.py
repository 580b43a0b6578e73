"""Run a function on N forked gloo ranks inside a test (fork start: ~0.1 s per case).

`run_ranks(fn, world_size)` calls `fn(backend, *args)` on every rank with a TorchBackend("gloo")
joined on a fresh port, and returns the ranks' return values in rank order. A rank that raises fails
the test with its traceback; a rank that hangs is killed after `timeout_s`.

A launch whose ranks never all join (rendezvous, within `JOIN_TIMEOUT_S`) is started once more on a fresh port, with
a note on stderr: CI at a55c80b saw forked ranks that never reached the store on a loaded 2-core runner ("3/6 clients
joined" after 61 s, then passing on rerun). What a test asserts is what its ranks compute once joined; a rendezvous
that fails twice still fails the test.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import sys
import traceback
from typing import Any, Callable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


JOIN_TIMEOUT_S = 40.0
_JOIN_FAILED = "RunFailed: rendezvous"   # how commbench.comm.rendezvous.join_within's failures read
_HUNG = "timed out after"


def _rank_main(rank: int, world_size: int, port: int, fn: Callable, args: tuple, queue, timeout_s: float) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    from commbench.comm.torch_backend import TorchBackend

    try:
        backend = TorchBackend("gloo", rank=rank, world_size=world_size, local_rank=rank, timeout_s=timeout_s,
                               join_timeout_s=min(timeout_s, JOIN_TIMEOUT_S))
        try:
            queue.put((rank, True, fn(backend, *args)))
        finally:
            backend.shutdown()
    except BaseException:  # noqa: BLE001 - report everything to the parent
        queue.put((rank, False, traceback.format_exc()))


def run_ranks(fn: Callable[..., Any], world_size: int, *, timeout_s: float = 60.0, args: tuple = (),
              ranks: tuple[int, ...] | None = None) -> list[Any]:
    """`ranks`: the ranks whose results are awaited and returned (default every rank); the others may die (a test of
    a rank killed mid-run) and are killed once those have answered."""
    results, errors = _launch(fn, world_size, timeout_s, args, ranks)
    joins_failed = [e for e in errors if _JOIN_FAILED in e]
    if joins_failed and not results and all(e in joins_failed or e.startswith(_HUNG) for e in errors):
        print(f"note: {world_size} gloo ranks did not all join; starting them once more on a fresh port",
              file=sys.stderr)
        results, errors = _launch(fn, world_size, timeout_s, args, ranks)
    if errors:
        raise AssertionError("\n".join(errors))
    return [results[r] for r in (range(world_size) if ranks is None else ranks)]


def _start_ranks(fn: Callable[..., Any], world_size: int, timeout_s: float, args: tuple):
    """Fork `world_size` gloo ranks running `fn` on a fresh port: (the queue they report on, their processes)."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, world_size, port, fn, args, queue, timeout_s), daemon=True)
             for r in range(world_size)]
    for proc in procs:
        proc.start()
    return queue, procs


def _launch(fn: Callable[..., Any], world_size: int, timeout_s: float, args: tuple,
            ranks: tuple[int, ...] | None = None) -> tuple[dict[int, Any], list[str]]:
    queue, procs = _start_ranks(fn, world_size, timeout_s, args)
    results: dict[int, Any] = {}
    errors: list[str] = []
    try:
        for _ in range(world_size if ranks is None else len(ranks)):
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
    return results, errors


def run_ranks_to_exit(fn: Callable[..., Any], world_size: int, *, timeout_s: float = 60.0,
                      args: tuple = ()) -> list[tuple[int | None, float]]:
    """Run `fn(backend, *args)` on forked gloo ranks as run_ranks does, for a test of how the ranks end rather than
    what they return (a rank may end itself with os._exit or be killed): each rank's (exit code, time.monotonic() when
    its process was seen gone), in rank order; a rank still running after `timeout_s` is killed: (None, that time)."""
    import time
    from multiprocessing.connection import wait

    queue, procs = _start_ranks(fn, world_size, timeout_s, args)
    ended: dict[int, tuple[int | None, float]] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while len(ended) < world_size and time.monotonic() < deadline:
            wait([p.sentinel for r, p in enumerate(procs) if r not in ended], timeout=0.05)
            for r, proc in enumerate(procs):
                if r not in ended and not proc.is_alive():
                    ended[r] = (proc.exitcode, time.monotonic())
    finally:
        for r, proc in enumerate(procs):
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
                ended.setdefault(r, (None, time.monotonic()))
    return [ended[r] for r in range(world_size)]
