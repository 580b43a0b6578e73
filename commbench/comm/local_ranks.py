"""Local ranks started and watched by commbench itself (what `torchrun --standalone` does, plus a watchdog).

- Nothing listens beyond loopback: the ranks meet through a FileStore in a private temporary folder
  (torch's TCPStore server binds every interface, and elastic rendezvous unpickles what it reads), locked
  while the launch lives and removed at its end or, after a kill, at the next launch (rendezvous_folder.py),
  and gloo's pairs bind 127.0.0.1 (GLOO_SOCKET_IFNAME=lo unless the user set it).
- Each rank runs in its own process group, so Ctrl-C reaches only the launcher, which stops the
  ranks and says what was kept; a rank gets SIGKILL when the launcher dies (PR_SET_PDEATHSIG).
  A stop signal (SIGINT, SIGTERM, SIGHUP) that ends a rank is the same interruption, whether or not it
  reaches the launcher too (batch systems and service managers signal every process of the job, the
  ranks often a few ms first): no record for the point the ranks were on, exit 130 and the same line.
  SIGKILL (kill -9, the OOM killer) and any other death of a rank fail the point.
- gloo ranks are forked from the launcher (torch is already imported: no second start-up);
  GPU backends are spawned (CUDA does not survive a fork).
- Watchdog: ranks report progress (progress.py). Once one rank has stopped (exited, or failed a
  point) and another has not caught up within `grace_s`, the launcher kills the laggards' process
  groups, appends the point's failed record if rank 0 has not written it, and raises RanksHung.
  When every rank is stuck (all stopped by a signal, or all blocked past their collective timeout)
  none stops first: then no rank has sent a message or used CPU time (/proc/<pid>/stat) for
  `grace_s`, and the launcher ends the run the same way, naming every rank.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import traceback
from contextlib import contextmanager
from multiprocessing.connection import wait
from typing import Any, Callable, Iterator

from commbench.comm.launch import LOCAL_LAUNCH_ENV, RENDEZVOUS_ENV, detect_rank_env
from commbench.comm.progress import RankProgress, append_record, drop_last_failed, last_record_is, lead_last_error
from commbench.comm.rendezvous_folder import rendezvous_folder
from commbench.comm.rank_state import RankState as _Rank, cpu_ticks, laggards as _laggards
from commbench.comm.stop_signals import (STOP_SIGNALS, StopSignal, note_stopping, restore_terminal, signal_name,
                                         stop_signal_of, stops_ignored, stops_raise)
from commbench.errors import CommbenchError, Interrupted, ResultsNotWritten, first_line
from commbench.files import results_so_far

LOOPBACK = "127.0.0.1"
_PR_SET_PDEATHSIG = 1
CRASH_GRACE_S = 3.0  # after a rank crashed: time for the others to see it and record the point


class RunFailed(CommbenchError):
    """A rank crashed, failed or hung: the run failed (exit 1), the input was fine."""

    exit_code = 1


def hang_grace_s(timeout_s: float | None) -> float:
    """How long the others may take to catch up once one rank has stopped: the collective timeout
    (they may be waiting in the same collective, up to 30 s of it) plus 5 s."""
    return 35.0 if timeout_s is None else min(timeout_s, 30.0) + 5.0


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent exits (no-op elsewhere)."""
    parent = os.getppid()
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def apply_thread_limit() -> None:
    """Give a forked rank the OMP_NUM_THREADS launch_local sets (torchrun's 1 per rank): torch imported
    before the fork keeps the parent's intra-op thread count (the variable is read once, at start), so
    each rank ran one thread per core; their OpenMP threads spin-wait after every parallel op (a
    reduce_scatter's clone and copy, a local sum) and starve the other rank's gloo thread on a small
    host: 2 gloo ranks on 2 cores took 38-68 ms per 512 KiB reduce_scatter instead of ~1.5 ms
    (benchmarks/gloo_reduce_scatter.py)."""
    torch = sys.modules.get("torch")
    value = os.environ.get("OMP_NUM_THREADS", "")
    if torch is not None and value.isdecimal() and int(value) > 0 and torch.get_num_threads() != int(value):
        torch.set_num_threads(int(value))


DEFAULT_OMP_NUM_THREADS = "1"  # what torchrun sets when OMP_NUM_THREADS is unset (torch.distributed.run)


@contextmanager
def in_process_thread_limit() -> Iterator[None]:
    """The thread rule of launch_local's ranks for a rank run in this process (`--nproc 1`): OMP_NUM_THREADS
    DEFAULT_OMP_NUM_THREADS unless set, applied to torch (apply_thread_limit), so 1-rank and multi-rank records run
    alike and the header's "1 unless set" holds; the variable and torch's thread count are restored after (tests and
    other commands run in this process)."""
    import torch

    had, threads = os.environ.get("OMP_NUM_THREADS"), torch.get_num_threads()
    os.environ.setdefault("OMP_NUM_THREADS", DEFAULT_OMP_NUM_THREADS)
    apply_thread_limit()
    try:
        yield
    finally:
        if had is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = had
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


def _rank_main(rank: int, nproc: int, rendezvous: str, conn, fn: Callable[..., Any], arg: Any) -> None:
    os.setpgid(0, 0)
    die_with_parent()
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(nproc),
                      MASTER_ADDR=LOOPBACK, MASTER_PORT="0", **{LOCAL_LAUNCH_ENV: "1", RENDEZVOUS_ENV: rendezvous})
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    apply_thread_limit()
    code = 0
    try:
        rank_env = detect_rank_env()
        from dataclasses import replace

        conn.send(("result", fn(replace(rank_env, progress=RankProgress(conn)), arg)))
    except CommbenchError as exc:
        conn.send(("error", str(exc), exc.exit_code, type(exc).__name__))
        code = exc.exit_code
    except SystemExit as exc:  # rich exits this way when stdout is closed (`| head`)
        conn.send(("error", f"exited with code {exc.code} (its output was closed?)", 1))
        code = 1
    except BaseException as exc:  # noqa: BLE001 - a crash: keep its traceback for the bug report
        traceback.print_exc()
        conn.send(("error", f"{type(exc).__name__}: {first_line(exc)}", 1))
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown: a broken process group can block it


def kill_groups(pids: list[int]) -> None:
    """SIGKILL the process groups led by `pids`, all stopped first so none sees the others die and
    reports a spurious peer error on the way out."""
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for pid in pids:
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def _kill(ranks: list[_Rank]) -> None:
    living = [r.process.pid for r in ranks if r.alive]
    kill_groups(living)
    for r in ranks:
        r.process.join(timeout=2.0)
    if living and ranks and ranks[0].process.pid in living:  # rank 0 draws the live view: it died mid-draw
        restore_terminal()


def _hung_message(ranks: list[_Rank], hung: list[_Rank], grace_s: float, output_path: str) -> tuple[str, bool]:
    """One line naming the point and the hung ranks; writes rank 0's pending record if it could not. The point is the
    one the record is for, as for a rank that died (_point_lost): the stopped rank's own label goes stale the same way
    once rank 0 has moved on, or names a point rank 0 never reached."""
    writer = ranks[0]
    stopped = [r for r in ranks if r not in hung]
    stopper = next((r for r in stopped if r.reason), None)
    point, note, unrecorded = _point_lost(stopper, writer) if stopper else (writer.label, "", False)
    reasons = "; ".join(f"rank {r.rank}: {r.reason}" for r in stopped if r.reason)
    names = ", ".join(str(r.rank) for r in hung)
    line = (f"point {point or 'start-up'} failed: rank(s) {names} hung (no progress {grace_s:g} s after rank(s) "
            f"{', '.join(str(r.rank) for r in stopped)} stopped) and were killed"
            + (f"; rank {stopper.rank} stopped {note}" if note else ""))
    error = f"point {writer.label} not recorded by rank 0 before it was stopped: {line}" if unrecorded else line
    return line, _record_for_writer(writer, error + (f" ({reasons})" if reasons else ""), output_path, cause=line)


def _where_lost(dead: _Rank, writer: _Rank, what: str) -> tuple[str, str]:
    """(the terminal's line, the error of rank 0's failed record) for a rank that died (`what`: "rank 2 was killed by
    SIGKILL"), naming the point the record is written for: rank 0's current one (_record_for_writer).

    A rank's label is the last point it announced (progress.at), so it goes stale once the rank has finished that
    point: rank 0 announces point k+1 only after the ranks agreed on point k and it wrote k's record (sweep runner,
    bench), so a rank that dies after that agreement and before announcing k+1 still shows k while rank 0 is on k+1,
    the point actually lost (found from outside: kill -9 of rank 2 between points wrote '... at 64 KiB' on the failed
    256 KiB record, next to a good 64 KiB one). A rank ahead of rank 0 (rank 0 still writing the point they agreed
    on) died on its own point, which rank 0 never reached: the record rank 0 leaves is then the one it was writing."""
    point, note, unrecorded = _point_lost(dead, writer)
    line = what + (f" at {point}" if point else "") + (f", {note}" if note else "")
    return line, f"point {writer.label} not recorded by rank 0 before it was stopped: {line}" if unrecorded else line


def _point_lost(dead: _Rank, writer: _Rank) -> tuple[str, str, bool]:
    """(the point to name for `dead`, a rank that died or stopped, what to add of where it was, whether rank 0's
    failed record, of its own current point, is another point than the one named: _where_lost)."""
    if dead is writer or dead.step == writer.step or writer.step < 0:
        return dead.label, "", False
    if dead.step < writer.step:
        before = (f"after {dead.label}, which rank 0 recorded" if dead.step in writer.recorded_steps
                  else f"its last point announced: {dead.label}" if dead.label else "before its first point")
        return writer.label, f"between points ({before}; it had not begun {writer.label})", False
    return dead.label, f"ahead of rank 0 (rank 0 was still at {writer.label})", True


def _record_for_writer(writer: _Rank, error: str, output_path: str, *, cause: str | None = None) -> bool:
    """Append rank 0's failed record of its current point unless it wrote one; whether one is there. `cause`: the
    rank the launcher saw die or hang, put first in the error of a failed record rank 0 wrote (the terminal's line)."""
    if writer.step in writer.recorded_steps or last_record_is(output_path, writer.pending):
        if cause is not None:
            lead_last_error(output_path, writer.pending, cause)
        return True
    if writer.pending is None:
        return False
    append_record(output_path, {**writer.pending, "error": error})
    return True


class RanksHung(RunFailed):
    """Some ranks hung and were killed; `recorded` says whether the point's failed record is in the file;
    `num_ok`/`num_failed`: the points this launch recorded (the hung one among the failed)."""

    def __init__(self, message: str, *, recorded: bool, num_ok: int = 0, num_failed: int = 0) -> None:
        super().__init__(message)
        self.recorded, self.num_ok, self.num_failed = recorded, num_ok, num_failed


def launch_local(nproc: int, fn: Callable[..., Any], arg: Any, *, backend: str, output_path: str,
                 timeout_s: float | None = None, start_method: str | None = None) -> dict[int, Any]:
    """Run `fn(rank_env, arg)` on `nproc` local ranks and watch them; return {rank: result}.

    Raises RanksHung (some ranks hung: killed), RunFailed (a rank crashed), CommbenchError (a rank
    refused its input) or Interrupted (SIGINT/SIGTERM/SIGHUP: the ranks are stopped first).
    """
    grace_s = hang_grace_s(timeout_s)
    context = multiprocessing.get_context(start_method or ("fork" if backend == "gloo" else "spawn"))
    os.environ.setdefault("OMP_NUM_THREADS", DEFAULT_OMP_NUM_THREADS)  # what torchrun sets
    ranks: list[_Rank] = []
    held_before = _points_held(output_path)   # a --resume's earlier points: an interrupt says which are this launch's
    with stops_raise(), rendezvous_folder() as folder:
        rendezvous = f"file://{os.path.join(folder, 'store')}"
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            for rank in range(nproc):
                receive, send = context.Pipe(duplex=False)
                process = context.Process(target=_rank_main, args=(rank, nproc, rendezvous, send, fn, arg),
                                          name=f"commbench-rank{rank}", daemon=False)
                process.start()
                send.close()
                ranks.append(_Rank(rank=rank, process=process, conn=receive))
            return _watch(ranks, grace_s, output_path)
        except KeyboardInterrupt as exc:
            note_stopping(signal_name(exc))   # the launcher's own signal, after its ranks', adds nothing
            with stops_ignored():  # a second signal must not cut this short (nor replace its line)
                _kill(ranks)
                for r in ranks:   # the progress messages the ranks sent before they stopped: every recorded point counts
                    r.drain()
                _unrecord_stopped_point(ranks, output_path)
                kept = ranks[0].num_recorded if ranks else 0
                where = _kept_text(kept, output_path, held_before)
                raise Interrupted(f"interrupted ({signal_name(exc)}): {where}", signal=signal_name(exc)) from None
        finally:
            with stops_ignored():
                _kill(ranks)


def _stop_if_signalled(ranks: list[_Rank]) -> None:
    """A rank ended by a stop signal: the run is interrupted as if the launcher had got it (StopSignal, handled as
    the launcher's own: launch_local), before its death is taken for a failure of the point."""
    for r in ranks:
        name = None if r.alive else stop_signal_of(r.process.exitcode)
        if name is not None:
            raise StopSignal(name)


def _unrecord_stopped_point(ranks: list[_Rank], output_path: str) -> None:
    """Rank 0's failed record of the point a rank was on when a stop signal ended it (rank 0 saw the closed connection
    first, or the others' errors on it) goes: the point was cut short, not failed, and --resume measures it (a
    failed record it never measures again). Points recorded before stay."""
    stopped = [r for r in ranks if stop_signal_of(r.process.exitcode) is not None]
    if not stopped:
        return
    writer = ranks[0]
    for step in sorted({r.step for r in stopped if r.step >= 0}, reverse=True):
        if drop_last_failed(output_path, writer.pending_of(step)):   # written, said or not ('recorded')
            writer.unrecord_failed(step)
            return


def _all_stuck(ranks: list[_Rank], grace_s: float, output_path: str) -> None:
    """No rank sent a message or used CPU time for `grace_s`: kill them all and raise RanksHung."""
    _kill(ranks)
    for r in ranks:
        r.drain()
    writer = ranks[0]
    point = writer.label or "start-up"
    line = (f"point {point} failed: every rank ({', '.join(str(r.rank) for r in ranks)}) hung (no progress and no CPU "
            f"time for {grace_s:g} s: all stopped or blocked) and were killed")
    recorded = _record_for_writer(writer, line, output_path, cause=line)
    raise RanksHung(f"{line}; {results_so_far(output_path)}", recorded=recorded,
                    num_ok=writer.num_recorded_ok,
                    num_failed=writer.num_recorded - writer.num_recorded_ok + (recorded and writer.step not in
                                                                              writer.recorded_steps))


def _absent_message(ranks: list[_Rank], absent: list[_Rank], output_path: str) -> str:
    """A start-up failure put on the ranks that never joined, not on the ones that gave up waiting."""
    waited = [r for r in ranks if r not in absent and r.error is not None]
    why = f" ({waited[0].error[0]})" if waited else ""
    return (f"rank(s) {', '.join(str(r.rank) for r in absent)} never joined the job at start-up and were killed; "
            f"rank(s) {', '.join(str(r.rank) for r in waited)} gave up waiting{why}; {results_so_far(output_path)}")


def _stuck(ranks: list[_Rank], cpu_then: dict[int, int | None]) -> list[_Rank]:
    """Ranks still in the job (no result, no error) that used no CPU time since `cpu_then` was taken: stopped or
    blocked, what the others that failed were waiting for."""
    return [r for r in ranks if r.alive and r.phase not in ("result", "error") and r.rank in cpu_then
            and cpu_then[r.rank] is not None and cpu_ticks(r.process.pid) == cpu_then[r.rank]]


def _stuck_message(ranks: list[_Rank], stuck: list[_Rank], failed: list[_Rank], output_path: str) -> RanksHung:
    """Ranks failed (at start-up, a timed-out exchange ends the rank) while others sat still: the still ones are the
    cause, named as a hang is (found from outside: a rank stopped in the start-up exchange; the line named rank 0,
    whose timeout came first, after two tracebacks)."""
    writer = ranks[0]
    where = f"point {writer.label}" if writer.label else "start-up"
    line = (f"{where} failed: rank(s) {', '.join(str(r.rank) for r in stuck)} hung (no progress and no CPU time "
            f"{CRASH_GRACE_S:g} s after rank(s) {', '.join(str(r.rank) for r in failed)} failed: {failed[0].error[0]}) "
            "and were killed")
    recorded = _record_for_writer(writer, line, output_path, cause=line)
    return RanksHung(f"{line}; {results_so_far(output_path)}", recorded=recorded, num_ok=writer.num_recorded_ok,
                     num_failed=writer.num_recorded - writer.num_recorded_ok + (recorded and writer.step not in
                                                                               writer.recorded_steps))


def _kept_text(kept: int, output_path: str, held_before: int = 0) -> str:
    """What an interrupted launch kept, as the file is after its ranks stopped: the points it recorded (rank 0's count
    `kept`, or the file's growth over the `held_before` points it held at the launch where rank 0's last message was
    lost with it: a new file holding 16 was '15 point(s) recorded by this launch; FILE holds 16'). A stop before the
    first point names no file that was never written (a SIGINT before rank 0 wrote its header said '0 point(s) kept in
    FILE', and the output lock then removed the empty FILE)."""
    if str(output_path).startswith("("):   # verify-plan: no file
        return str(output_path).strip("()")
    held = _points_held(output_path)
    kept = max(kept, held - held_before)
    if held > kept:   # a --resume (or a file appended to): the file holds the earlier points too, and
        # '0 point(s) kept' read as if it had been emptied
        return f"{kept} point(s) recorded by this launch; {output_path} holds {held}"
    if kept:
        return f"{kept} point(s) kept in {output_path}"
    if not os.path.isfile(output_path) or os.path.getsize(output_path) == 0:
        # empty: the output lock's file, which it removes on release where this run created it (files.OutputLock)
        return f"no point measured ({output_path} was not written)"
    headers = _headers_held(output_path)
    return f"no point measured ({output_path} holds none{': only a run header' if headers else ''})"


def _headers_held(output_path) -> int:
    """The run headers in the results file (0 where there is none or it cannot be read)."""
    try:
        with open(output_path, encoding="utf-8", errors="replace") as handle:
            return sum(line.startswith('{"record_type":"header"') for line in handle)
    except OSError:
        return 0


def _points_held(output_path) -> int:
    """The measurement records in the results file (0 where there is none or it cannot be read): the lines rank 0
    writes (append_record, records.JsonlWriter: compact JSON, record_type first)."""
    try:
        with open(output_path, encoding="utf-8", errors="replace") as handle:
            return sum(line.startswith('{"record_type":"measurement"') for line in handle)
    except (OSError, TypeError):
        return 0


def _watch(ranks: list[_Rank], grace_s: float, output_path: str) -> dict[int, Any]:
    lagging_since = failed_since = None
    last_progress = time.monotonic()
    failed: list[_Rank] = []
    stuck: list[_Rank] = []
    cpu_at_failure: dict[int, int | None] = {}
    while True:
        wait([r.conn for r in ranks if r.conn is not None] + [r.process.sentinel for r in ranks if r.alive],
             timeout=0.1)
        if any([r.drain() for r in ranks]):
            last_progress = time.monotonic()
        _stop_if_signalled(ranks)
        if not any(r.alive for r in ranks):
            # every rank ended by itself (none killed by the launcher yet): the dead ones failed, even when all died
            # between two looks (a rank killed just after rank 0 returned was taken for a plain exit: RunFailed)
            failed = [r for r in ranks if r.error or r.process.exitcode != 0]
            break
        if time.monotonic() - last_progress > grace_s and not any(r.stopped for r in ranks) \
                and sys.platform.startswith("linux"):
            _all_stuck(ranks, grace_s, output_path)
        failed = [r for r in ranks if not r.alive and (r.error or r.process.exitcode != 0)]
        if failed:  # a crashed or refusing rank: the others cannot finish; let them record what they saw
            if failed_since is None:
                failed_since = time.monotonic()
                cpu_at_failure = {r.rank: cpu_ticks(r.process.pid) for r in ranks if r.alive}
            if time.monotonic() - failed_since > CRASH_GRACE_S:
                stuck = _stuck(ranks, cpu_at_failure)
                break
            continue
        laggards = _laggards(ranks)
        if not laggards:
            lagging_since = None
        elif lagging_since is None:
            lagging_since = time.monotonic()
        elif time.monotonic() - lagging_since > grace_s:
            _kill(laggards)
            _kill(ranks)
            for r in ranks:
                r.drain()
            line, recorded = _hung_message(ranks, laggards, grace_s, output_path)
            writer = ranks[0]
            raise RanksHung(f"{line}; {results_so_far(output_path)}", recorded=recorded,
                            num_ok=writer.num_recorded_ok,
                            num_failed=writer.num_recorded - writer.num_recorded_ok + (recorded and writer.step not in
                                                                                      writer.recorded_steps))
    _stop_if_signalled(ranks)   # one that died since the loop's check
    _kill(ranks)
    for r in ranks:
        r.drain()
    # rank 0's disk refused a record: the run failed (exit 1) on a point measured and lost, not a failed point to
    # record nor a hang of the ranks waiting for rank 0 (a --resume measures it again)
    for r in ranks:
        if r.error is not None and r.error[2:] == (ResultsNotWritten.__name__,):
            raise ResultsNotWritten(r.error[0])
    absent = [r for r in ranks if r not in failed and not r.joined and r.error is None and r.phase == "start"]
    if absent and any(not r.joined and r.error is not None for r in failed):
        raise RunFailed(_absent_message(ranks, absent, output_path))
    if stuck and failed and all(r.error is not None and r.error[1] == 1 for r in failed):
        raise _stuck_message(ranks, stuck, failed, output_path)
    for r in failed + ranks:  # the ranks that failed first, not the ones killed after them
        if r.error is not None and r.error[1] != 1:
            raise CommbenchError(r.error[0])
        if r.phase != "result":
            code = r.process.exitcode
            how = (f"failed: {r.error[0]}" if r.error else f"was killed by {signal.Signals(-code).name}"
                   if code and code < 0 else f"exited with code {code}")
            line, error = _where_lost(r, ranks[0], f"rank {r.rank} {how}")
            killed = r in failed and code is not None and code < 0 and r.error is None
            recorded = _record_for_writer(ranks[0], error, output_path, cause=error if killed else None)
            if killed:
                # killed from outside (OOM killer, kill -9; a stop signal was an interruption: _stop_if_signalled):
                # like a hang, the point is recorded failed and a sweep can go on with fresh ranks
                writer = ranks[0]
                raise RanksHung(f"{line}; {results_so_far(output_path)}", recorded=recorded,
                                num_ok=writer.num_recorded_ok,
                                num_failed=writer.num_recorded - writer.num_recorded_ok
                                + (recorded and writer.step not in writer.recorded_steps))
            raise RunFailed(f"{line}; {results_so_far(output_path)}")
    return {r.rank: r.result for r in ranks}
