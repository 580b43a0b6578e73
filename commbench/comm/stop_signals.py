"""SIGINT, SIGTERM and SIGHUP become KeyboardInterrupt (named by signal) while a run is in progress,
so a run stopped by Ctrl-C, a batch system's SIGTERM or a closed terminal says what it kept instead
of dying silently (exit 143/129)."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def stop_signal_of(exit_code: int | None) -> str | None:
    """The stop signal that ended a child process (multiprocessing's exit code -N), as 'SIGTERM', else None. A rank
    ended by one was stopped, as the launcher is by the same signal a few ms later (Slurm's scancel and time limit,
    systemd's KillMode=control-group signal every process of the job): an interruption, not a failed point; SIGKILL
    (kill -9, the OOM killer) and every other death stay failures."""
    if exit_code is None or exit_code >= 0 or -exit_code not in STOP_SIGNALS:
        return None
    return signal.Signals(-exit_code).name


class StopSignal(KeyboardInterrupt):
    """A stop signal, named by it. Not KeyboardInterrupt itself: one raised inside exec() of a string
    (dataclasses and namedtuple build their methods so; torch's import runs hundreds) marks the Ctrl-C as
    unhandled even when it is caught, and `python -m` then ends by sending itself SIGINT (exit -2, not
    130). CPython checks the exact type (Python/pythonrun.c, run_eval_code_obj): a subclass is not marked."""


_stopping: str | None = None  # the stop this command is already ending on (note_stopping); None: not stopping


def raise_stop_signal(signum, frame) -> None:
    """The first stop signal raises StopSignal; the command ends on it (note_stopping), and a further one adds
    nothing."""
    if _stopping is not None:   # the command is already ending on a stop: this one adds nothing (note_stopping)
        return
    name = signal.Signals(signum).name
    note_stopping(name)
    raise StopSignal(name)


def note_stopping(name: str) -> None:
    """The command is ending on the stop `name` (the launcher has stopped its ranks and is saying what was kept): a
    further stop signal raises nothing until stop signals are armed again (stops_raise, release_stops). Batch systems
    signal every process of the job, a few ms apart: the second one, raised while the first's line was on its way
    up, replaced it ('interrupted before the command finished') or the exit code. Main thread's handlers only."""
    global _stopping
    _stopping = name


_held: list[str] | None = None  # stop signals noted since hold_stops(); None: not holding


def _note_stop_signal(signum, frame) -> None:
    _held.append(signal.Signals(signum).name)


def hold_stops() -> None:
    """Until release_stops(), a stop signal is noted, not raised (the entry point, main thread): raised
    inside a library's import it can be lost (numpy's C code clears errors), and typer turns one raised
    while it parses the arguments into a silent exit 130."""
    global _held, _stopping
    _held, _stopping = [], None
    for signum in STOP_SIGNALS:
        signal.signal(signum, _note_stop_signal)


def raise_held_stop() -> None:
    """Raise StopSignal for the first stop signal noted since hold_stops(), if any."""
    if _held:
        raise StopSignal(_held[0])


def release_stops() -> None:
    """Stop signals raise StopSignal again, and one noted while they were held is raised now. Nothing
    happens unless hold_stops() ran: a command invoked in-process keeps its caller's handlers."""
    global _held, _stopping
    if _held is None:
        return
    held = _held
    try:
        for signum in STOP_SIGNALS:
            signal.signal(signum, raise_stop_signal)
    finally:
        _held = None  # so that a later release_stops() does not report the same signal again
        _stopping = None
    if held:
        raise StopSignal(held[0])


def flush_std_streams() -> None:
    """Flush stdout and stderr, whatever state they are in (closed, replaced, absent)."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass


def exit_on_stop(code: int) -> None:
    """The command has finished and printed all it prints: its output is flushed, and a stop signal from here on (the
    interpreter's teardown, torch's and multiprocessing's exit handlers: about half a second) ends the process at
    once with the command's own exit code, not a silent exit 130 (or death by SIGTERM, 143) after complete output.
    One line says so, claiming nothing of the command's files (the command's own last line says what they hold: 'its
    output is complete' followed a sweep's error line after 3 of 26 points); after an interrupted command (130: its
    line said what was kept) a further signal adds nothing. Main thread only (signal handlers)."""
    import os
    import sys

    if threading.current_thread() is not threading.main_thread():
        return
    flush_std_streams()

    def finished(signum, frame) -> None:
        if code != 130:   # 130: the command's line already said it was interrupted and what it kept
            line = (f"interrupted ({signal.Signals(signum).name}) after the command finished (exit {code}): "
                    "nothing was cut short; the lines above say what it did\n")
            try:
                os.write(2, line.encode())
            except OSError:
                pass
        os._exit(code)

    for signum in STOP_SIGNALS:
        signal.signal(signum, finished)
    # CPython's finalization resets a Python-level handler to SIG_DFL (signal module fini, before the modules are
    # torn down): a Ctrl-C then killed the finished process, exit 130 and no word, and a SIGTERM exit 143 (probe BQ:
    # a batch system's SIGTERM after an error line). An ignored signal stays ignored.
    import atexit

    for signum in STOP_SIGNALS:
        atexit.register(signal.signal, signum, signal.SIG_IGN)


def signal_name(exc: BaseException) -> str:
    """The signal a KeyboardInterrupt came from ('SIGINT' for a plain Ctrl-C)."""
    return str(exc) or "SIGINT"


@contextlib.contextmanager
def stops_raise() -> Iterator[None]:
    """Within the block (main thread only), every stop signal raises KeyboardInterrupt('<SIGNAME>')."""
    global _stopping
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _stopping = None
    old = {signum: signal.signal(signum, raise_stop_signal) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def stops_ignored() -> Iterator[None]:
    """Within the block (main thread only), stop signals are ignored: the launcher's clean-up after the
    first one (stopping the ranks, counting what they recorded) runs to its end when a second comes (Ctrl-C
    pressed twice; `timeout -s INT` and batch systems signal the launcher, then its whole process group).
    Raised there, the second one replaced the line saying what was kept. SIGKILL still ends everything."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {signum: signal.signal(signum, signal.SIG_IGN) for signum in STOP_SIGNALS}
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
