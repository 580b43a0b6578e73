"""What the local launcher knows of each rank it started: the pipe it reads (progress.py messages),
where the rank is (point, phase), what it returned or raised, and whether it still moves (CPU time)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RankState:
    rank: int
    process: Any
    conn: Any
    step: int = -1
    phase: str = "start"  # start, at, failed, recorded, result, error
    label: str = ""
    pending: dict | None = None
    reason: str = ""
    result: Any = None
    error: tuple | None = None  # (text, exit code[, the error's class name])
    num_recorded: int = 0
    num_recorded_ok: int = 0
    recorded_steps: set = field(default_factory=set)
    cpu: int | None = None
    joined: bool = False  # its backend is up (start-up is over for it)
    previous: tuple = (-1, None)  # (step, pending) of the point before the current one

    def drain(self) -> bool:
        """Read what the rank sent; whether it sent anything (or its CPU time moved) since the last call."""
        cpu = cpu_ticks(self.process.pid) if self.alive else None
        moved, self.cpu = cpu != self.cpu, cpu
        while self.conn is not None:
            try:
                if not self.conn.poll():
                    return moved
                message = self.conn.recv()
            except (EOFError, OSError):
                self.conn = None
                return moved
            moved = True
            kind = message[0]
            if kind == "joined":
                self.joined = True
            elif kind == "at":
                self.previous = (self.step, self.pending)
                _, self.step, self.label, self.pending = message
                self.phase = "at"
            elif kind == "failed":
                self.phase, self.reason = "failed", message[2]
            elif kind == "recorded":
                self.num_recorded += 1
                self.num_recorded_ok += bool(message[2])
                self.recorded_steps.add(message[1])
            elif kind == "result":
                self.phase, self.result = "result", message[1]
            elif kind == "error":
                self.phase, self.error = "error", tuple(message[1:])   # (text, exit code[, the error's class])
        return moved

    def pending_of(self, step: int) -> dict | None:
        """The record rank 0 passed for point `step` (its current one or the one before), else None."""
        return self.pending if step == self.step else self.previous[1] if step == self.previous[0] else None

    def unrecord_failed(self, step: int) -> None:
        """Point `step`'s failed record was taken out of the file again (local_ranks._unrecord_stopped_point)."""
        if step in self.recorded_steps:
            self.recorded_steps.discard(step)
            self.num_recorded -= 1

    @property
    def alive(self) -> bool:
        return self.process.exitcode is None

    @property
    def stopped(self) -> bool:
        """Exited, or waiting on a point it failed."""
        return not self.alive or self.phase in ("failed", "result", "error")


def cpu_ticks(pid: int) -> int | None:
    """User + system CPU time of process `pid` in clock ticks, all its threads (Linux /proc), or None."""
    try:
        stat = open(f"/proc/{pid}/stat", "rb").read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def laggards(ranks: list[RankState]) -> list[RankState]:
    """Alive ranks that have not caught up with a rank that stopped."""
    stops = [r for r in ranks if r.stopped]
    if not stops:
        return []
    if any(not r.alive or r.phase in ("result", "error") for r in stops):
        return [r for r in ranks if r.alive and r.phase not in ("result", "error")]
    step = min(r.step for r in stops)
    return [r for r in ranks if r.alive and (r.step < step or (r.step == step and r.phase == "at"))]
