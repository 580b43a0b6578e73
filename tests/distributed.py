"""Run a function on N forked gloo ranks inside a test (fork start: ~0.1 s per case).

`run_ranks(fn, world_size)` calls `fn(backend, *args)` on every rank with a TorchBackend("gloo")
joined on a fresh port, and returns the ranks' return values in rank order. A rank that raises fails
the test with its traceback; a rank that hangs is killed after `timeout_s`.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import traceback
from typing import Any, Callable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rank_main(rank: int, world_size: int, port: int, fn: Callable, args: tuple, queue, timeout_s: float) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    from commbench.comm.torch_backend import TorchBackend

    try:
        backend = TorchBackend("gloo", rank=rank, world_size=world_size, local_rank=rank, timeout_s=timeout_s)
        try:
            queue.put((rank, True, fn(backend, *args)))
        finally:
            backend.shutdown()
    except BaseException:  # noqa: BLE001 - report everything to the parent
        queue.put((rank, False, traceback.format_exc()))


def run_ranks(fn: Callable[..., Any], world_size: int, *, timeout_s: float = 60.0, args: tuple = ()) -> list[Any]:
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, world_size, port, fn, args, queue, timeout_s), daemon=True)
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
        errors.append(f"timed out after {timeout_s} s waiting for ranks ({type(exc).__name__})")
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
    if errors:
        raise AssertionError("\n".join(errors))
    return [results[r] for r in range(world_size)]
