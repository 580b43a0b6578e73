"""What a rank tells the local launcher while it runs: which point it is at, whether the point failed,
and (rank 0) that the point's record is written. The launcher's watchdog (local_ranks.py) uses it to
name the point and the ranks that hang, and to write the failed record when rank 0 cannot.

Messages are small tuples sent over a one-way pipe; under torchrun/srun/mpirun there is no pipe and
every call is a no-op.
"""

from __future__ import annotations

import json
import os
from typing import Any

from commbench.files import repair_torn_tail


class RankProgress:
    """The sending end, handed to a rank's function through RankEnv.progress."""

    def __init__(self, conn: Any = None) -> None:
        self._conn = conn

    def _send(self, message: tuple) -> None:
        if self._conn is None:
            return
        try:
            self._conn.send(message)
        except (OSError, ValueError):
            self._conn = None  # the launcher is gone; the rank dies with it (PR_SET_PDEATHSIG)

    def joined(self) -> None:
        """This rank has joined the job (its backend is up): a start-up failure is someone else's."""
        self._send(("joined",))

    def at(self, step: int, label: str, pending_record: dict | None = None) -> None:
        """Starting point `step`; rank 0 passes the record to write should the point never finish."""
        self._send(("at", step, label, pending_record))

    def failed(self, step: int, reason: str) -> None:
        self._send(("failed", step, reason))

    def recorded(self, step: int, ok: bool = True) -> None:
        """Rank 0 has written point `step`'s record (`ok`: measured; else recorded failed)."""
        self._send(("recorded", step, ok))


NO_PROGRESS = RankProgress()


def append_record(output_path: str, record: dict) -> None:
    """Append one record line for rank 0 (after cutting a torn last line)."""
    repair_torn_tail(output_path)
    with open(output_path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, separators=(",", ":")) + "\n")


def last_record_is(output_path: str, pending: dict | None) -> bool:
    """Whether rank 0 wrote the pending point's record and died before saying so."""
    if pending is None or not os.path.exists(output_path):
        return False
    with open(output_path, "rb") as handle:
        handle.seek(max(0, os.path.getsize(output_path) - (1 << 16)))
        lines = handle.read().splitlines()
    try:
        last = json.loads(lines[-1]) if lines else {}
    except ValueError:
        return False
    keys = ("record_type", "run_id", "collective", "size_bytes", "dtype", "group_layout", "point_key", "params")
    return isinstance(last, dict) and all(last.get(k) == pending.get(k) for k in keys)


def lead_last_error(output_path: str, pending: dict | None, cause: str) -> bool:
    """Put the launcher's `cause` (a rank killed by a signal, or hung and killed) before the error of rank 0's failed
    record of the pending point, which names only what the ranks still running saw (often a peer that failed on the
    dead rank's closed connection); whether the record was changed."""
    if not last_record_is(output_path, pending):
        return False
    with open(output_path, "rb+") as handle:
        line_at, record = _last_failed_record(handle)
        if record is None or str(record.get("error", "")).startswith(cause):
            return False
        record["error"] = f"{cause}; the ranks still running then reported: {record.get('error', '')}"
        handle.seek(line_at)
        handle.truncate()
        handle.write((json.dumps(record, separators=(",", ":")) + "\n").encode())
    return True


def _last_failed_record(handle) -> tuple[int, dict | None]:
    """(offset of the file's last line, its record where it is a failed one, else None)."""
    size = handle.seek(0, os.SEEK_END)
    start = max(0, size - (1 << 16))
    handle.seek(start)
    body = handle.read().rstrip(b"\n")
    cut = body.rfind(b"\n") + 1
    try:
        record = json.loads(body[cut:])
    except ValueError:
        return start + cut, None
    return start + cut, record if isinstance(record, dict) and record.get("status") == "failed" else None


def drop_last_failed(output_path: str, pending: dict | None) -> bool:
    """Take out rank 0's failed record of the pending point when it is the file's last line (a point a stop signal
    cut short: no record, so --resume measures it); whether it was there."""
    if not last_record_is(output_path, pending):
        return False
    with open(output_path, "rb+") as handle:
        line_at, record = _last_failed_record(handle)
        if record is None:
            return False
        handle.truncate(line_at)
    return True
