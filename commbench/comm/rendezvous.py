"""Joining a launch that commbench did not start (torchrun, srun, mpirun): torch's rendezvous blocks
in C++ (a TCPStore connect retried for minutes, deaf to Ctrl-C), so it runs in a helper thread
while the main thread waits in short steps: Ctrl-C/SIGTERM/SIGHUP take effect at once, and the
wait ends at the collective timeout (plus a margin for the store's own retry) with one line."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any, Callable, Iterator

from commbench.errors import first_line

MARGIN_S = 5.0  # past --timeout: torch's own timeout error, when it comes, is the better message


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null for the block: torch's C++ store logs each failed connect with a
    40-frame stack; the one-line error that follows names the cause."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def join_within(connect: Callable[[], Any], *, timeout_s: float, where: str) -> Any:
    """`connect()` in a daemon thread; its result, or RunFailed naming `where` on an error or after
    `timeout_s` + MARGIN_S. KeyboardInterrupt (any stop signal turned into one) reaches the caller."""
    from commbench.comm.local_ranks import RunFailed

    outcome: dict[str, Any] = {}

    def attempt() -> None:
        try:
            outcome["value"] = connect()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome["error"] = exc

    helper = threading.Thread(target=attempt, name="commbench-rendezvous", daemon=True)
    with quiet_stderr():
        helper.start()
        helper.join(timeout_s + MARGIN_S)
    if helper.is_alive():
        raise RunFailed(f"rendezvous {where} did not complete within --timeout={timeout_s:g} s "
                        "(is every rank of the launch running, and MASTER_ADDR/MASTER_PORT right?)")
    if "error" in outcome:
        exc = outcome["error"]
        raise RunFailed(f"rendezvous {where} failed: {type(exc).__name__}: {first_line(exc)}") from None
    return outcome["value"]
