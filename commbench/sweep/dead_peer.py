"""A sweep under a launcher (torchrun, srun, mpirun) whose peer rank died: how each rank stops, naming it.

The peer watch (commbench.comm.peer_watch) tells every rank which rank died; a rank that sees it in Python records the
point failed with the dead rank first and stops (dead_peer_stop); one blocked in C++ is ended by the watch's thread
(end_stuck). Without a watch, a rank whose own collective failed on a peer posts its report and stops (report_alone).
"""

from __future__ import annotations

import dataclasses
import os
import sys

from commbench.sweep.isolation import peer_failure

DIED_TEXT = "its process ended (its peer-watch connection closed)"
NAME_WAIT_S = 2.0  # a rank whose collective saw a peer fail: how long the peer watch may take to name the rank


def report_alone(coord, step: int, error: str | None, rank: int, *, reported: bool = False) -> list[tuple[int, str]]:
    """Post this rank's report without waiting for the others; the failures posted so far (a live peer waiting in
    its agreement sees why, and a cause posted before this one leads the record)."""
    try:
        if not reported:
            coord.report(f"point{step}", error)
        return coord.failures(f"point{step}")
    except RuntimeError:   # the store went with the peer that hosted it (rank 0 under srun): this rank's own
        return [(rank, error)] if error is not None else []


def dead_peer_stop(coord, watch, point, step: int, error: str | None, rank: int, *,
                   reported: bool) -> tuple[list[tuple[int, str]], str]:
    """(the point's failures, the stop line) once a peer rank died: the dead ranks first, named by the peer watch
    (a collective that failed on the dead rank may say so a moment before the watch does: NAME_WAIT_S)."""
    if not watch.died.is_set():
        watch.died.wait(NAME_WAIT_S)
    watch.settled.set()
    failed = report_alone(coord, step, error, rank, reported=reported)
    said = peer_failure(error)
    if not watch.dead:   # the collective's word only (the watch did not name a rank within NAME_WAIT_S)
        return failed, f"{said} while measuring {point.label}; nothing replaces it under a launcher"
    dead = [(r, DIED_TEXT) for r in watch.dead]
    return (dead + [(r, e) for r, e in failed if r not in watch.dead],
            f"{watch.dead_text()} died{f' ({said})' if said else ''} while measuring {point.label}; nothing "
            "replaces it under a launcher")


def end_stuck(watch, current: dict, writer, output_path: str, rank: int) -> None:
    """The peer watch's handler for a rank still blocked STUCK_GRACE_S after a peer died (in C++: gloo's
    connectFullMesh waiting for the dead rank's address, a collective on a peer blocked so): rank 0 records the
    point failed unless it did, one line, exit 1. Runs on the watch's thread; the main thread never returns."""
    from commbench.comm.stop_signals import flush_std_streams
    from commbench.errors import first_line
    from commbench.files import results_so_far

    label = current["label"] or "start-up"
    blocked = f"rank {rank} was blocked waiting for it (making process groups or in a collective) and stopped"
    line = f"{watch.dead_text()} died while measuring {label}; {blocked.replace('stopped', 'stops now')}"
    with watch.lock:
        if writer is not None and current["pending"] is not None and current["step"] not in current["recorded"]:
            dead = "; ".join(f"rank {r}: {DIED_TEXT}" for r in watch.dead)
            try:
                writer.write(dataclasses.replace(
                    current["pending"], error=f"failed while measuring {label}: {dead}; {blocked}"))
                current["recorded"].add(current["step"])
            except Exception as exc:  # noqa: BLE001 - the line says it; the exit is the same
                line += f" (its failed record could not be written: {type(exc).__name__}: {first_line(exc)})"
        where = f"; {results_so_far(output_path)}" if rank == 0 else "; rank 0 keeps what was measured"
        who = "" if rank == 0 else f"rank {rank}: "   # as the CLI's lines: rank 0's names no rank (cli/sweep.py)
        print(f"error: {who}sweep stopped: {line}{where}; continue with --resume under the same launch",
              file=sys.stderr, flush=True)
        flush_std_streams()
        os._exit(1)
