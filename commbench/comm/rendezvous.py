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

from commbench.errors import CommbenchError, first_line

MARGIN_S = 5.0  # past --timeout: torch's own timeout error, when it comes, is the better message
WAITING_NOTE_S = 3.0  # a join not done by then says (once) that it waits for ranks, and until when
_abandoned: list[threading.Thread] = []  # helpers left blocked in torch's C++ when the wait ended


@contextlib.contextmanager
def quiet_stderr(helper: threading.Thread) -> Iterator[Callable[[str], None]]:
    """File descriptor 2 to /dev/null for the block: torch's C++ store logs each failed connect with a
    40-frame stack; the one-line error that follows names the cause. A `helper` still blocked in C++ when
    the block ends keeps fd 2 on /dev/null (it would log its stack under the one line); sys.stderr then
    writes to the original stream through a copy of the descriptor. Yields a function printing one line on the
    original stderr meanwhile."""
    sys.stderr.flush()
    saved = os.dup(2)

    def say(line: str) -> None:   # a line of commbench's own on the real stderr while fd 2 is quiet
        os.write(saved, (line + "\n").encode("utf-8", "backslashreplace"))

    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield say
    finally:
        if helper.is_alive():
            _abandoned.append(helper)
            sys.stderr = open(saved, "w", encoding=sys.stderr.encoding or "utf-8", errors="backslashreplace",
                              buffering=1)
        else:
            os.dup2(saved, 2)
            os.close(saved)


def exit_if_abandoned(code: int) -> None:
    """End the process now (output flushed, no interpreter teardown) when a rendezvous helper is still
    blocked in torch's C++: at teardown CPython stops such a thread mid-C++ and the process aborts
    ('terminate called without an active exception', exit -6 instead of the command's code)."""
    if not any(helper.is_alive() for helper in _abandoned):
        return
    from commbench.comm.stop_signals import flush_std_streams

    flush_std_streams()
    os._exit(code)


def join_within(connect: Callable[[], Any], *, timeout_s: float, where: str, setting: str = "--timeout",
                waiting_note: bool = True) -> Any:
    """`connect()` in a daemon thread; its result, or RunFailed naming `where` on an error or after
    `timeout_s` + MARGIN_S (`setting`: the option or field that gave `timeout_s`, as the lines name it). A join
    still waiting after WAITING_NOTE_S says so in one note (`waiting_note`: one rank per node prints it), so a
    missing rank is never a silent wait. KeyboardInterrupt (any stop signal turned into one) reaches the caller."""
    from commbench.comm.local_ranks import RunFailed

    outcome: dict[str, Any] = {}

    def attempt() -> None:
        try:
            outcome["value"] = connect()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome["error"] = exc

    helper = threading.Thread(target=attempt, name="commbench-rendezvous", daemon=True)
    limit_s = timeout_s + MARGIN_S
    with quiet_stderr(helper) as say:
        helper.start()
        helper.join(min(WAITING_NOTE_S, limit_s))
        if helper.is_alive() and WAITING_NOTE_S < limit_s:
            if waiting_note:   # the note is one rank's per node; the wait is every rank's
                say(f"note: waiting for every rank of the launch to join {where}: gives up after {setting}="
                    f"{timeout_s:g} s (plus {MARGIN_S:g} s)")
            helper.join(limit_s - WAITING_NOTE_S)
    if helper.is_alive():
        raise RunFailed(f"rendezvous {where} did not complete within {setting}={timeout_s:g} s "
                        "(is every rank of the launch running, and MASTER_ADDR/MASTER_PORT right?)")
    if "error" in outcome:
        exc = outcome["error"]
        if isinstance(exc, CommbenchError):   # commbench's own line (rank_checkin: a rank started twice)
            raise exc
        waited = f" ({setting}={timeout_s:g} s)" if "time" in str(exc).lower() else ""   # torch's timeout: which setting
        raise RunFailed(f"rendezvous {where} failed: {type(exc).__name__}: {first_line(exc)}{waited}") from None
    return outcome["value"]
