"""SIGINT, SIGTERM and SIGHUP become KeyboardInterrupt (named by signal) while a run is in progress,
so a run stopped by Ctrl-C, a batch system's SIGTERM or a closed terminal says what it kept instead
of dying silently (exit 143/129)."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def signal_name(exc: BaseException) -> str:
    """The signal a KeyboardInterrupt came from ('SIGINT' for a plain Ctrl-C)."""
    return str(exc) or "SIGINT"


@contextlib.contextmanager
def stops_raise() -> Iterator[None]:
    """Within the block (main thread only), every stop signal raises KeyboardInterrupt('<SIGNAME>')."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {signum: signal.signal(signum, _raise_interrupt) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)


def restore_terminal() -> None:
    """After ranks were killed mid-display: show the cursor their live view hid and end the progress-bar
    line, so what follows starts on a line of its own (a terminal only; files and pipes get nothing)."""
    import sys

    try:
        if sys.stdout.isatty():
            sys.stdout.write("\x1b[?25h\n")
            sys.stdout.flush()
    except (OSError, ValueError):
        pass
